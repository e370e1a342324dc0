// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The evictor on a real control page (made by libramcache): what it posts
 * is what the planner, outlook_plan(), decides for the same inputs; its
 * heartbeat goes out up to CADENCE_BEAT_EARLY_NS early, never late.
 */
#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

#include <ramcache/control.h>
#include <ramcache/ramcache.h>

#include "core/cadence.h"
#include "executors/evictor.h"
#include "test.h"

#define MiB (1ULL << 20)

struct rig {
	char path[128];
	struct ramcache *rc;
	struct rc_thresholds thr;
	struct ctl_target tgt;
	char *log;
	size_t log_len;
	struct out out;
	struct metrics m;
	struct evictor ev;
};

static bool rig_up(struct rig *r)
{
	struct evict_cfg cfg = {
		.policy = RC_POLICY_RAM,
		.ack_timeout_ns = 5000000000ULL,
	};
	struct ramcache_entry_info big = { .id = 1,
					   .bytes = 100 * MiB,
					   .label = "big" };
	struct ramcache_entry_info small = { .id = 2,
					     .bytes = 30 * MiB,
					     .label = "small" };

	memset(r, 0, sizeof(*r));
	snprintf(r->path, sizeof(r->path), "/dev/shm/ramcache-test-evict-%d",
		 getpid());
	unlink(r->path);
	if (!ASSERT_OK(ramcache_create(&r->rc, r->path, 8, 8), "create") ||
	    !ASSERT_OK(ramcache_publish(r->rc, &big), "publish") ||
	    !ASSERT_OK(ramcache_publish(r->rc, &small), "publish"))
		return false;
	r->thr.headroom_min = 64 * MiB;
	r->thr.inactive_min = 128 * MiB;
	r->out.f = open_memstream(&r->log, &r->log_len);
	r->out.json = true;
	metrics_init(&r->m);
	cfg.control = r->path;
	r->tgt.pid = r->tgt.ns_pid = getpid();
	r->tgt.uid = r->tgt.ns_uid = getuid();
	if (!ASSERT_OK(evictor_init(&r->ev, &cfg, &r->out, &r->m, &r->tgt,
				    &r->thr),
		       "evictor_init"))
		return false;
	evictor_tick(&r->ev, ramcache_now_ns());
	return ASSERT_TRUE(r->ev.open, "page attached");
}

static void rig_down(struct rig *r)
{
	evictor_finish(&r->ev, ramcache_now_ns());
	metrics_destroy(&r->m);
	if (r->out.f)
		fclose(r->out.f);
	free(r->log);
	ramcache_destroy(r->rc, true);
}

/* Evaluate, then compare with the planner: target, and the command's reason. */
static void same_as_planner(struct rig *r, uint64_t headroom, uint64_t low,
			    uint32_t why, const char *what)
{
	struct rc_view v = { .headroom = headroom, .low = low };
	struct ramcache_command cmd;
	struct rc_plan plan;
	int posted;

	outlook_plan(&v, &r->thr, why != 0, &plan);
	evictor_evaluate(&r->ev, ramcache_now_ns(), &v, why);
	ASSERT_EQ(r->ev.target, plan.evict ? plan.deficit : 0, what);
	posted = ramcache_poll(r->rc, &cmd);
	ASSERT_EQ(posted, plan.evict, what);
	if (posted == 1) {
		ASSERT_EQ(cmd.reason, plan.reason, what);
		ramcache_ack(r->rc, &cmd, RAMCACHE_ACK_NOT_FOUND, 0);
		evictor_tick(&r->ev, ramcache_now_ns());
	}
}

TEST(evaluate_posts_what_the_planner_decides)
{
	struct rig r;

	if (rig_up(&r)) {
		same_as_planner(&r, 200 * MiB, 200 * MiB, 0, "plenty of room");
		same_as_planner(&r, 200 * MiB, 40 * MiB, 0, "forecast");
		same_as_planner(&r, 100 * MiB, 100 * MiB, 0,
				"below inactive_min");
		same_as_planner(&r, 50 * MiB, 50 * MiB, RAMCACHE_REASON_RECLAIM,
				"kernel reclaiming");
		fflush(r.out.f);
		ASSERT_TRUE(strstr(r.log, "\"type\":\"evict\""), r.log);
		ASSERT_TRUE(strstr(r.log, "\"forecast\":41943040"), r.log);
	}
	rig_down(&r);
}

/*
 * The target's outlook hears of each command: nothing is learnt while it
 * is out, what it freed is taken out of the executor's rhythm, and its
 * answer time feeds the lead time.
 */
TEST(the_outlook_hears_of_each_command)
{
	static struct rc_outlook o;
	struct rc_view v = { .headroom = 100 * MiB, .low = 100 * MiB };
	struct ramcache_command cmd;
	struct rig r;
	uint64_t now;

	outlook_init(&o);
	if (rig_up(&r)) {
		r.ev.outlook = &o;
		now = ramcache_now_ns();
		outlook_push(&o, now, 100 * MiB);
		evictor_evaluate(&r.ev, now, &v, 0);
		ASSERT_TRUE(o.quiet_until > now, "quiet while out");
		ASSERT_EQ(ramcache_poll(r.rc, &cmd), 1, "posted");
		ramcache_ack(r.rc, &cmd, RAMCACHE_ACK_EVICTED, 0);
		evictor_tick(&r.ev, ramcache_now_ns());
		ASSERT_EQ(o.nr_lat, 1, "its answer time measured");
		evictor_evaluate(&r.ev, ramcache_now_ns(), &v, 0);
		ASSERT_EQ(ramcache_poll(r.rc, &cmd), 1, "posted again");
		ramcache_ack(r.rc, &cmd, RAMCACHE_ACK_EVICTED, 30 * MiB);
		evictor_tick(&r.ev, ramcache_now_ns());
		ASSERT_EQ(o.freed, 30 * MiB, "what it freed is ours");
	}
	rig_down(&r);
}

/*
 * A table bigger than EVICT_MAX_SCORED is read and scored a window at a
 * time: evaluation k looks at slots [k * W, (k + 1) * W) and wraps round.
 */
TEST(big_table_is_read_a_window_per_evaluation)
{
	struct evict_cfg cfg = { .policy = RC_POLICY_RAM,
				 .ack_timeout_ns = 5000000000ULL,
				 .dry_run = true };
	const uint32_t nr = EVICT_MAX_SCORED * 2 + 100;
	struct rc_thresholds thr = { .headroom_min = 1ULL << 40,
				     .inactive_min = 1ULL << 41 };
	uint32_t starts[4];
	struct ctl_target tgt;
	struct ramcache *rc;
	struct metrics m;
	struct evictor ev;
	struct out out = { 0 };
	char path[128], *log = NULL;
	size_t log_len = 0;

	snprintf(path, sizeof(path), "/dev/shm/ramcache-test-window-%d",
		 getpid());
	if (!ASSERT_OK(ramcache_create(&rc, path, nr, 8), "create"))
		return;
	for (uint32_t i = 1; i <= nr; i++) {
		struct ramcache_entry_info e = { .id = i,
						 .bytes = MiB,
						 .label = "e" };

		if (!ASSERT_OK(ramcache_publish(rc, &e), "publish"))
			goto out;
	}
	ramcache_heartbeat(rc);
	out.f = open_memstream(&log, &log_len);
	out.json = true;
	metrics_init(&m);
	cfg.control = path;
	tgt.pid = tgt.ns_pid = getpid();
	tgt.uid = tgt.ns_uid = getuid();
	if (!ASSERT_OK(evictor_init(&ev, &cfg, &out, &m, &tgt, &thr),
		       "evictor_init"))
		goto out_m;
	evictor_tick(&ev, ramcache_now_ns());
	if (!ASSERT_TRUE(ev.open, "attached"))
		goto out_ev;
	for (int k = 0; k < 4; k++) {
		starts[k] = ev.win_start;
		struct rc_view v = { 0 };

		evictor_evaluate(&ev, ramcache_now_ns(), &v, 0);
	}
	ASSERT_EQ(starts[0], 0, "first window");
	ASSERT_EQ(starts[1], EVICT_MAX_SCORED, "second window");
	ASSERT_EQ(starts[2], 2 * EVICT_MAX_SCORED, "third window (100 slots)");
	ASSERT_EQ(starts[3], 0, "wrapped round");
	ASSERT_EQ(ev.win_start, EVICT_MAX_SCORED, "moving on");
out_ev:
	evictor_finish(&ev, ramcache_now_ns());
out_m:
	metrics_destroy(&m);
	fclose(out.f);
	free(log);
out:
	ramcache_destroy(rc, true);
}

/* The agent's side of @r's page as the executor reads it. */
static uint64_t page_beat(const struct rig *r, uint32_t *pid)
{
	struct ramcache_ctl h = { 0 };
	int fd = open(r->path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
			memset(&h, 0, sizeof(h));
		close(fd);
	}
	*pid = h.agent_pid;
	return h.agent_heartbeat_ns;
}

/*
 * Ticked when another page's beat or a read wakes the loop, a page whose
 * beat is due within CADENCE_BEAT_EARLY_NS beats then: pages followed from
 * different times come to beat in one wake-up.
 */
TEST(a_heartbeat_goes_out_early_with_a_wake_up_at_hand)
{
	uint64_t t0, first;
	uint32_t pid = 0;
	struct rig r;

	if (rig_up(&r)) {
		first = page_beat(&r, &pid);
		ASSERT_NEQ(first, 0, "beat at attach");
		ASSERT_EQ(pid, getpid(), "the agent's pid");
		t0 = r.ev.next_beat_ns - RAMCACHE_HEARTBEAT_PERIOD_NS;
		ASSERT_EQ(t0, first, "next one a period later");
		evictor_tick(&r.ev, t0 + RAMCACHE_HEARTBEAT_PERIOD_NS -
					    CADENCE_BEAT_EARLY_NS - 1);
		ASSERT_EQ(page_beat(&r, &pid), first, "too early: no beat");
		evictor_tick(&r.ev, t0 + RAMCACHE_HEARTBEAT_PERIOD_NS -
					    CADENCE_BEAT_EARLY_NS);
		ASSERT_EQ(page_beat(&r, &pid),
			  t0 + RAMCACHE_HEARTBEAT_PERIOD_NS -
				  CADENCE_BEAT_EARLY_NS,
			  "early, with this wake-up");
		ASSERT_EQ(r.ev.next_beat_ns,
			  t0 + 2 * RAMCACHE_HEARTBEAT_PERIOD_NS -
				  CADENCE_BEAT_EARLY_NS,
			  "a period after it");
	}
	rig_down(&r);
}

TEST_MAIN()
