// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The evictor on a real control page (made by libramcache), driven by the
 * agent's evaluation, domains_evaluate(), for one executor alone in its
 * domain: what it posts is what the planner, outlook_plan(), decides for
 * the same view; its heartbeat goes out up to CADENCE_BEAT_EARLY_NS early,
 * never late.
 */
#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

#include <ramcache/control.h>
#include <ramcache/ramcache.h>

#include "core/cadence.h"
#include "executors/domains.h"
#include "targets_rig.h"
#include "test.h"

#define MiB (1ULL << 20)

/* A page, the agent's output and metrics, and one target evicting on it. */
struct rig {
	char path[128];
	struct ramcache *rc;
	char *log;
	size_t log_len;
	struct out out;
	struct metrics m;
	struct targets ts;
	struct target *t;
	struct domain_env env;
};

/* The page (@slots entries) at a path named by @tag, output and metrics. */
static bool page_up(struct rig *r, const char *tag, uint32_t slots)
{
	memset(r, 0, sizeof(*r));
	r->out.f = open_memstream(&r->log, &r->log_len);
	r->out.json = true;
	metrics_init(&r->m);
	r->env.policy = RC_POLICY_RAM;
	r->env.window_ns = RIG_WINDOW_NS;
	r->env.horizon_ns = RIG_HORIZON_NS;
	snprintf(r->path, sizeof(r->path), "/dev/shm/ramcache-test-%s-%d", tag,
		 getpid());
	unlink(r->path);
	return ASSERT_OK(ramcache_create(&r->rc, r->path, slots, 8), "create");
}

/* The target, alone in the machine's domain, its evictor on the page. */
static bool attach(struct rig *r, struct evict_cfg *cfg,
		   const struct rc_thresholds *thr)
{
	cfg->control = r->path;
	r->t = rig_target(&r->ts, 0, 0, 0);
	if (!ASSERT_OK_PTR(r->t, "target"))
		return false;
	return ASSERT_TRUE(rig_evictor(r->t, cfg, thr, &r->out, &r->m,
				       ramcache_now_ns()),
			   "page attached");
}

/* Entries "big" (100 MiB) and "small" (30 MiB); reserves 64 and 128 MiB. */
static bool rig_up(struct rig *r)
{
	struct evict_cfg cfg = {
		.policy = RC_POLICY_RAM,
		.ack_timeout_ns = 5000000000ULL,
	};
	struct rc_thresholds thr = { .headroom_min = 64 * MiB,
				     .inactive_min = 128 * MiB };
	struct ramcache_entry_info big = { .id = 1,
					   .bytes = 100 * MiB,
					   .label = "big" };
	struct ramcache_entry_info small = { .id = 2,
					     .bytes = 30 * MiB,
					     .label = "small" };

	return page_up(r, "evict", 8) &&
	       ASSERT_OK(ramcache_publish(r->rc, &big), "publish") &&
	       ASSERT_OK(ramcache_publish(r->rc, &small), "publish") &&
	       attach(r, &cfg, &thr);
}

static void rig_down(struct rig *r)
{
	rig_release(&r->ts, ramcache_now_ns());
	metrics_destroy(&r->m);
	if (r->out.f)
		fclose(r->out.f);
	free(r->log);
	if (r->rc)
		ramcache_destroy(r->rc, true);
}

/*
 * The outlook sees @headroom now and @low within the lead time (checked:
 * the view the agent plans with); evaluate as the agent does at @now.
 */
static void evaluate(struct rig *r, uint64_t now, uint64_t headroom,
		     uint64_t low, uint32_t why)
{
	struct rc_view seen;

	rig_view(r->t, now, headroom, low);
	sampler_view(&r->t->sm, now, r->env.horizon_ns, &seen);
	if (seen.headroom != headroom || seen.low != low)
		FAIL_AT("rig: view %" PRIu64 "/%" PRIu64 ", asked %" PRIu64
			"/%" PRIu64,
			seen.headroom, seen.low, headroom, low);
	domains_evaluate(&r->ts, &r->env, now, why);
}

/* Evaluate, then compare with the planner: target, and the command's reason. */
static void same_as_planner(struct rig *r, uint64_t headroom, uint64_t low,
			    uint32_t why, const char *what)
{
	struct rc_view v = { .headroom = headroom, .low = low };
	uint64_t now = ramcache_now_ns();
	struct ramcache_command cmd;
	struct rc_plan plan;
	int posted;

	outlook_plan(&v, &r->t->thr, why != 0, &plan);
	evaluate(r, now, headroom, low, why);
	ASSERT_EQ(r->t->ev.target, plan.evict ? plan.deficit : 0, what);
	posted = ramcache_poll(r->rc, &cmd);
	ASSERT_EQ(posted, plan.evict, what);
	if (posted == 1) {
		ASSERT_EQ(cmd.reason, plan.reason, what);
		ramcache_ack(r->rc, &cmd, RAMCACHE_ACK_NOT_FOUND, 0);
		evictor_tick(&r->t->ev, ramcache_now_ns());
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
	struct ramcache_command cmd;
	struct rc_outlook *o;
	struct rig r;
	uint64_t now;

	if (rig_up(&r)) {
		o = &r.t->sm.outlook;
		now = ramcache_now_ns();
		evaluate(&r, now, 100 * MiB, 100 * MiB, 0);
		ASSERT_TRUE(o->quiet_until > now, "quiet while out");
		ASSERT_EQ(ramcache_poll(r.rc, &cmd), 1, "posted");
		ramcache_ack(r.rc, &cmd, RAMCACHE_ACK_EVICTED, 0);
		evictor_tick(&r.t->ev, ramcache_now_ns());
		ASSERT_EQ(o->nr_lat, 1, "its answer time measured");
		domains_evaluate(&r.ts, &r.env, ramcache_now_ns(), 0);
		ASSERT_EQ(ramcache_poll(r.rc, &cmd), 1, "posted again");
		ramcache_ack(r.rc, &cmd, RAMCACHE_ACK_EVICTED, 30 * MiB);
		evictor_tick(&r.t->ev, ramcache_now_ns());
		ASSERT_EQ(o->freed, 30 * MiB, "what it freed is ours");
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
	struct rig r;

	if (!page_up(&r, "window", nr))
		goto out;
	for (uint32_t i = 1; i <= nr; i++) {
		struct ramcache_entry_info e = { .id = i,
						 .bytes = MiB,
						 .label = "e" };

		if (!ASSERT_OK(ramcache_publish(r.rc, &e), "publish"))
			goto out;
	}
	ramcache_heartbeat(r.rc);
	if (!attach(&r, &cfg, &thr))
		goto out;
	for (int k = 0; k < 4; k++) {
		starts[k] = r.t->ev.win_start;
		evaluate(&r, ramcache_now_ns(), 0, 0, 0);
	}
	ASSERT_EQ(starts[0], 0, "first window");
	ASSERT_EQ(starts[1], EVICT_MAX_SCORED, "second window");
	ASSERT_EQ(starts[2], 2 * EVICT_MAX_SCORED, "third window (100 slots)");
	ASSERT_EQ(starts[3], 0, "wrapped round");
	ASSERT_EQ(r.t->ev.win_start, EVICT_MAX_SCORED, "moving on");
out:
	rig_down(&r);
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
	struct evictor *ev;
	uint64_t t0, first;
	uint32_t pid = 0;
	struct rig r;

	if (rig_up(&r)) {
		ev = &r.t->ev;
		first = page_beat(&r, &pid);
		ASSERT_NEQ(first, 0, "beat at attach");
		ASSERT_EQ(pid, getpid(), "the agent's pid");
		t0 = ev->next_beat_ns - RAMCACHE_HEARTBEAT_PERIOD_NS;
		ASSERT_EQ(t0, first, "next one a period later");
		evictor_tick(ev, t0 + RAMCACHE_HEARTBEAT_PERIOD_NS -
					 CADENCE_BEAT_EARLY_NS - 1);
		ASSERT_EQ(page_beat(&r, &pid), first, "too early: no beat");
		evictor_tick(ev, t0 + RAMCACHE_HEARTBEAT_PERIOD_NS -
					 CADENCE_BEAT_EARLY_NS);
		ASSERT_EQ(page_beat(&r, &pid),
			  t0 + RAMCACHE_HEARTBEAT_PERIOD_NS -
				  CADENCE_BEAT_EARLY_NS,
			  "early, with this wake-up");
		ASSERT_EQ(ev->next_beat_ns,
			  t0 + 2 * RAMCACHE_HEARTBEAT_PERIOD_NS -
				  CADENCE_BEAT_EARLY_NS,
			  "a period after it");
	}
	rig_down(&r);
}

TEST_MAIN()
