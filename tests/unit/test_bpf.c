// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The BPF handlers on synthetic arguments: each raw_tp program is run with
 * bpf_prog_test_run_opts(), no real kernel event needed. Needs root.
 */
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpfstate.h"
#include "pressure.skel.h"
#include "test.h"

struct seen {
	int n;
	char last[256] __attribute__((aligned(8))); /* read as event structs */
	int type;
};

static int on_event(void *ctx, void *data, size_t len)
{
	struct seen *s = ctx;
	const struct rc_event_hdr *h = data;

	s->n++;
	s->type = h->type;
	memcpy(s->last, data, len < sizeof(s->last) ? len : sizeof(s->last));
	return 0;
}

struct fixture {
	struct bpfstate b;
	struct ring_buffer *rb;
	struct seen seen;
};

static bool setup(struct fixture *f, uint64_t burst)
{
	struct opts o = { 0 };

	memset(f, 0, sizeof(*f));
	if (geteuid() != 0) {
		TEST_SKIP("needs root");
		return false;
	}
	o.pid = getpid();
	o.probe_mode = PROBE_RAW_TP;
	o.burst_faults = burst;
	o.burst_window_ns = 60ULL * 1000000000ULL;
	o.rss_step = 1;
	if (!ASSERT_OK(bpfstate_load(&f->b, &o), "load"))
		return false;
	if (!ASSERT_OK(bpfstate_track(&f->b, getpid()), "track"))
		return false;
	f->rb = ring_buffer__new(bpfstate_events_fd(&f->b), on_event, &f->seen,
				 NULL);
	return ASSERT_OK_PTR(f->rb, "ring_buffer__new");
}

static void teardown(struct fixture *f)
{
	ring_buffer__free(f->rb);
	bpfstate_destroy(&f->b);
}

static int run(struct bpf_program *prog, __u64 *args, int nargs)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = args,
		    .ctx_size_in = nargs * sizeof(__u64));
	int err = bpf_prog_test_run_opts(bpf_program__fd(prog), &opts);

	return err ? err : (int)opts.retval;
}

TEST(fault_counts_tracked_tgid_and_bursts)
{
	struct fixture f;
	struct track_totals t;
	__u64 args[3] = { 0x1000, 0, 0 };

	if (!setup(&f, 3))
		goto cleanup;
	for (int i = 0; i < 5; i++)
		ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_OK(bpfstate_totals(&f.b, getpid(), &t), "totals");
	ASSERT_EQ(t.faults, 5, "faults counted");
	ring_buffer__consume(f.rb);
	/* one burst when the window's count reaches 3, not one per fault */
	ASSERT_EQ(f.seen.n, 1, "bursts");
	ASSERT_EQ(f.seen.type, RC_EV_FAULT_BURST, "event type");
	ASSERT_EQ(((struct rc_fault_burst *)f.seen.last)->faults, 3, "count");
	ASSERT_EQ(((struct rc_event_hdr *)f.seen.last)->tgid, getpid(), "tgid");
cleanup:
	teardown(&f);
}

TEST(burst_clock_sampled_still_hits_the_count)
{
	struct fixture f;
	__u64 args[3] = { 0 };

	/* 128 faults per burst: the clock is read every 64 faults */
	if (!setup(&f, 128))
		goto cleanup;
	ASSERT_EQ(f.b.skel->rodata->burst_check_mask, 63, "mask");
	for (int i = 0; i < 200; i++)
		run(f.b.skel->progs.fault_raw, args, 3);
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "one burst");
	ASSERT_EQ(((struct rc_fault_burst *)f.seen.last)->faults, 128, "count");
cleanup:
	teardown(&f);
}

TEST(fault_of_untracked_tgid_is_ignored)
{
	struct fixture f;
	struct track_totals t;
	__u64 args[3] = { 0 };

	if (!setup(&f, 1))
		goto cleanup;
	ASSERT_OK(bpfstate_untrack(&f.b, getpid()), "untrack");
	ASSERT_OK(bpfstate_track(&f.b, 1), "track init");
	ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_OK(bpfstate_totals(&f.b, 1, &t), "totals");
	ASSERT_EQ(t.faults, 0, "faults of pid 1");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 0, "no event");
cleanup:
	teardown(&f);
}

TEST(direct_reclaim_pair_makes_event_hist_and_totals)
{
	struct fixture f;
	struct track_totals t;
	struct rc_reclaim *e;
	struct hist h;
	__u64 begin[2] = { 3, 0 }, end[1] = { 42 };

	if (!setup(&f, 1000))
		goto cleanup;
	ASSERT_OK(run(f.b.skel->progs.direct_begin_raw, begin, 2), "begin");
	usleep(2000);
	ASSERT_OK(run(f.b.skel->progs.direct_end_raw, end, 1), "end");
	/* an end without a begin is ignored */
	ASSERT_OK(run(f.b.skel->progs.direct_end_raw, end, 1), "end again");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "one event");
	e = (struct rc_reclaim *)f.seen.last;
	ASSERT_EQ(e->hdr.type, RC_EV_RECLAIM, "type");
	ASSERT_EQ(e->kind, RC_RECLAIM_DIRECT, "kind");
	ASSERT_EQ(e->order, 3, "order");
	ASSERT_EQ(e->nr_reclaimed, 42, "pages");
	ASSERT_GE(e->latency_ns, 2000000, "latency covers the sleep");
	ASSERT_OK(bpfstate_hist(&f.b, RC_HIST_DIRECT, &h), "hist");
	ASSERT_EQ(hist_total(&h), 1, "one sample");
	ASSERT_EQ(h.slots[hist_slot(e->latency_ns / 1000)], 1, "its slot");
	ASSERT_OK(bpfstate_totals(&f.b, getpid(), &t), "totals");
	ASSERT_EQ(t.reclaim_count[RC_RECLAIM_DIRECT], 1, "count");
	ASSERT_EQ(t.reclaim_pages[RC_RECLAIM_DIRECT], 42, "pages");
	ASSERT_EQ(bpfstate_stat(&f.b, RC_STAT_DIRECT_RECLAIMS), 1, "stat");
cleanup:
	teardown(&f);
}

TEST(kswapd_wake_and_sleep)
{
	struct fixture f;
	struct rc_kswapd *e;
	__u64 wake[3] = { 0, 2, 5 }, sleep_args[1] = { 0 };

	if (!setup(&f, 1000))
		goto cleanup;
	ASSERT_OK(run(f.b.skel->progs.kswapd_wake_raw, wake, 3), "wake");
	ring_buffer__consume(f.rb);
	e = (struct rc_kswapd *)f.seen.last;
	ASSERT_EQ(f.seen.n, 1, "event");
	ASSERT_EQ(e->awake, 1, "awake");
	ASSERT_EQ(e->order, 5, "order");
	ASSERT_EQ(e->zid, 2, "zone");
	ASSERT_OK(run(f.b.skel->progs.kswapd_sleep_raw, sleep_args, 1),
		  "sleep");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 2, "second event");
	ASSERT_EQ(e->awake, 0, "asleep");
	ASSERT_EQ(bpfstate_stat(&f.b, RC_STAT_KSWAPD_WAKES), 1, "wakes");
cleanup:
	teardown(&f);
}

TEST(oom_victim_with_unreadable_task_still_counts)
{
	struct fixture f;
	__u64 args[2] = { 0, 1000 };

	if (!setup(&f, 1000))
		goto cleanup;
	ASSERT_OK(run(f.b.skel->progs.oom_raw, args, 2), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "event");
	ASSERT_EQ(f.seen.type, RC_EV_OOM_KILL, "type");
	ASSERT_EQ(((struct rc_oom_kill *)f.seen.last)->victim_uid, 1000, "uid");
	ASSERT_EQ(((struct rc_oom_kill *)f.seen.last)->anon_rss, 0, "no mm");
	ASSERT_EQ(bpfstate_stat(&f.b, RC_STAT_OOM_KILLS), 1, "stat");
cleanup:
	teardown(&f);
}

TEST_MAIN()
