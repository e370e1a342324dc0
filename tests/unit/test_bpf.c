// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The BPF handlers on synthetic arguments: each raw_tp program is run with
 * bpf_prog_test_run_opts(), no real kernel event needed. Needs root.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kernel/bpfstate.h"
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

/* Load every raw_tp program following @pid (0: the whole system). */
static bool setup_for(struct fixture *f, uint64_t burst, pid_t pid)
{
	struct bpfstate_settings o = { 0 };

	memset(f, 0, sizeof(*f));
	if (geteuid() != 0) {
		TEST_SKIP("needs root");
		return false;
	}
	o.filter = pid != 0;
	o.probe_mode = PROBE_RAW_TP;
	o.burst_faults = burst;
	o.burst_window_ns = 60ULL * 1000000000ULL;
	o.rss_step = 1;
	if (!ASSERT_OK(bpfstate_open(&f->b, &o), "open"))
		return false;
	/* every kernel's argument forms, whichever this kernel has */
	bpf_program__set_autoload(f->b.skel->progs.rss_raw, true);
	bpf_program__set_autoload(f->b.skel->progs.rss_count_raw, true);
	bpf_program__set_autoload(f->b.skel->progs.rss_nomm_raw, true);
	bpf_program__set_autoload(f->b.skel->progs.oom_raw, true);
	bpf_program__set_autoload(f->b.skel->progs.oom_pid_raw, true);
	if (!ASSERT_OK(bpfstate_load_opened(&f->b), "load"))
		return false;
	/* the whole system is tracked on load */
	if (pid && !ASSERT_OK(bpfstate_track(&f->b, pid), "track"))
		return false;
	f->rb = ring_buffer__new(bpfstate_events_fd(&f->b), on_event, &f->seen,
				 NULL);
	return ASSERT_OK_PTR(f->rb, "ring_buffer__new");
}

static bool setup(struct fixture *f, uint64_t burst)
{
	return setup_for(f, burst, getpid());
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

/* The mm the BPF side learnt for this process. */
static __u64 my_mm(struct fixture *f)
{
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		if (f->b.skel->bss->targets[i].tgid == (__u32)getpid() &&
		    f->b.skel->bss->targets[i].mm_key)
			return f->b.skel->bss->targets[i].mm_key +
			       f->b.skel->bss->mm_index_addr;
	return 0;
}

/* A child that only sleeps: a live process with memory of its own. */
static pid_t sleeper(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* Faults of one slot on every CPU, straight from the per-CPU map. */
static __u64 slot_faults(struct fixture *f, __u32 slot)
{
	struct rc_counters *v = calloc(f->b.ncpus, sizeof(*v));
	__u64 n = 0;

	if (!v ||
	    bpf_map__lookup_elem(f->b.skel->maps.counters, &slot, sizeof(slot),
				 v, sizeof(*v) * f->b.ncpus, 0)) {
		free(v);
		return ~0ULL;
	}
	for (int c = 0; c < f->b.ncpus; c++)
		n += v[c].fault.faults;
	free(v);
	return n;
}

/* The mm_index entry of this process's mm, or NULL. */
static struct rc_mm *my_entry(struct fixture *f)
{
	for (int i = 0; i < RC_MAX_TARGETS; i++) {
		const struct rc_target *t = &f->b.skel->bss->targets[i];

		if (t->tgid != (__u32)getpid() || !t->mm_key)
			continue;
		for (int j = 0; j < RC_MM_SLOTS; j++) {
			struct rc_mm *m = &f->b.skel->bss->mm_index[j];

			if (m->key == ((t->mm_key & ~RC_SLOT_MASK) | i))
				return m;
		}
	}
	return NULL;
}

TEST(faults_reach_the_counters_at_once_and_the_clock_every_64)
{
	__u64 args[3] = { 0 };
	struct track_totals t;
	struct fixture f;

	/* 128 faults per burst: the clock is read every 64 */
	if (!setup(&f, 128))
		goto cleanup;
	for (int i = 0; i < 200; i++)
		ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_OK(bpfstate_totals(&f.b, getpid(), &t), "totals");
	ASSERT_EQ(t.faults, 200, "every fault counted, none held back");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "one burst");
	ASSERT_EQ(((struct rc_fault_burst *)f.seen.last)->faults, 128,
		  "at 128");
	ASSERT_EQ(((struct rc_event_hdr *)f.seen.last)->tgid, getpid(), "tgid");
	/* untracked: its slot's counters stop at once */
	ASSERT_OK(bpfstate_untrack(&f.b, getpid()), "untrack");
	for (int i = 0; i < 70; i++)
		ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_EQ(slot_faults(&f, 0), 200, "nothing counted once untracked");
cleanup:
	teardown(&f);
}

/*
 * A slot's counts go on across the processes that hold it: a new holder's
 * burst window is its own, not the rest of the old holder's.
 */
TEST(a_slots_new_process_has_a_burst_window_of_its_own)
{
	__u64 args[3] = { 0 };
	struct track_totals t;
	struct fixture f;

	if (!setup(&f, 4))
		goto cleanup;
	for (int i = 0; i < 4; i++)
		ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_OK(bpfstate_untrack(&f.b, getpid()), "untrack");
	ASSERT_OK(bpfstate_track(&f.b, getpid()), "track again");
	for (int i = 0; i < 4; i++)
		ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_OK(bpfstate_totals(&f.b, getpid(), &t), "totals");
	ASSERT_EQ(t.faults, 4, "counted since tracked again");
	ASSERT_EQ(slot_faults(&f, 0), 8, "the slot's count goes on");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 2, "a burst in each holder's window");
	ASSERT_EQ(((struct rc_fault_burst *)f.seen.last)->faults, 4,
		  "the second of its own faults only");
cleanup:
	teardown(&f);
}

/* Nothing filtered: the whole system's faults, all in slot 0. */
TEST(whole_system_faults_count_in_slot_0)
{
	struct fixture f;
	struct track_totals t;
	__u64 args[3] = { 0 };

	if (!setup_for(&f, 3, 0))
		goto cleanup;
	ASSERT_TRUE(bpf_program__autoload(f.b.skel->progs.fault_all_raw),
		    "the whole system's fault program chosen");
	ASSERT_FALSE(bpf_program__autoload(f.b.skel->progs.fault_raw),
		     "not the tracked processes' one");
	for (int i = 0; i < 5; i++)
		ASSERT_OK(run(f.b.skel->progs.fault_all_raw, args, 3), "run");
	ASSERT_OK(bpfstate_totals(&f.b, 0, &t), "totals");
	ASSERT_EQ(t.faults, 5, "every fault counted");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "one burst");
	ASSERT_EQ(((struct rc_fault_burst *)f.seen.last)->faults, 3, "at 3");
	ASSERT_EQ(((struct rc_event_hdr *)f.seen.last)->tgid, getpid(),
		  "the faulting process");
cleanup:
	teardown(&f);
}

TEST(fault_of_untracked_tgid_is_ignored)
{
	pid_t other = sleeper();
	struct track_totals t;
	struct fixture f;
	__u64 args[3] = { 0 };

	if (!setup(&f, 1))
		goto cleanup;
	ASSERT_OK(bpfstate_untrack(&f.b, getpid()), "untrack");
	ASSERT_OK(bpfstate_track(&f.b, other), "track another");
	ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_OK(bpfstate_totals(&f.b, other, &t), "totals");
	ASSERT_EQ(t.faults, 0, "faults of the other process");
	ASSERT_EQ(bpfstate_totals(&f.b, getpid(), &t), -ENOENT, "untracked");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 0, "no event");
cleanup:
	teardown(&f);
	reap(other);
}

TEST(many_targets_each_counted_in_its_own_slot)
{
	pid_t others[RC_MAX_TARGETS - 1];
	struct track_totals t;
	struct fixture f;
	__u64 args[3] = { 0 };
	int n = 0;

	if (!setup(&f, 1000))
		goto cleanup;
	/* the index holds the whole table, with this process in it */
	for (; n < RC_MAX_TARGETS - 1; n++) {
		others[n] = sleeper();
		if (!ASSERT_OK(bpfstate_track(&f.b, others[n]), "track"))
			break;
	}
	ASSERT_EQ(bpfstate_track(&f.b, getppid()), -ENOSPC, "table full");
	ASSERT_EQ(bpfstate_stat(&f.b, RC_STAT_MM_INDEX_FULL), 0, "all filed");
	for (int i = 0; i < 7; i++)
		ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_OK(bpfstate_totals(&f.b, getpid(), &t), "totals");
	ASSERT_EQ(t.faults, 7, "this process's faults");
	ASSERT_OK(bpfstate_totals(&f.b, others[5], &t), "totals");
	ASSERT_EQ(t.faults, 0, "not another's");
	/* a freed slot is reused, and the untracked process is not counted */
	ASSERT_OK(bpfstate_untrack(&f.b, getpid()), "untrack");
	ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_OK(bpfstate_totals(&f.b, others[5], &t), "totals");
	ASSERT_EQ(t.faults, 0, "still not another's");
	ASSERT_OK(bpfstate_track(&f.b, getpid()), "track again");
	ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_OK(bpfstate_totals(&f.b, getpid(), &t), "totals");
	ASSERT_EQ(t.faults, 1, "counters restarted");
cleanup:
	teardown(&f);
	for (int i = 0; i < n && i < RC_MAX_TARGETS - 1; i++)
		reap(others[i]);
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

/* v6.2+: rss_stat(mm, member); the counters are read from the mm. */
TEST(rss_of_mm_member_form_reads_the_counters)
{
	struct fixture f;
	struct rc_rss *e;
	char *p = NULL;
	__u64 args[2];

	if (!setup(&f, 1000))
		goto cleanup;
	args[0] = my_mm(&f);
	args[1] = 1; /* MM_ANONPAGES */
	ASSERT_NEQ(args[0], 0, "mm learnt");
	p = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_OK(run(f.b.skel->progs.rss_raw, args, 2), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "first change is reported");
	e = (struct rc_rss *)f.seen.last;
	ASSERT_EQ(e->hdr.type, RC_EV_RSS, "type");
	ASSERT_EQ(e->hdr.tgid, getpid(), "tgid");
	ASSERT_GE(e->anon, 8 << 20, "anon covers the populated map");
	ASSERT_EQ(e->total, e->anon + e->file + e->shmem, "total");
	/* nothing changed by a step: no second event */
	ASSERT_OK(run(f.b.skel->progs.rss_raw, args, 2), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "no news");
	/* another mm: not ours */
	args[0] ^= 0x40000;
	ASSERT_OK(run(f.b.skel->progs.rss_raw, args, 2), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "another mm ignored");
cleanup:
	if (p)
		munmap(p, 8 << 20);
	teardown(&f);
}

/* v5.5-v6.1: rss_stat(mm, member, count); count is the counter's pages. */
TEST(rss_of_mm_member_count_form_uses_the_count)
{
	struct fixture f;
	struct rc_rss *e;
	struct rc_mm *m;
	__u64 args[3];

	if (!setup(&f, 1000))
		goto cleanup;
	args[0] = my_mm(&f);
	args[1] = 3; /* MM_SHMEMPAGES */
	args[2] = 100000;
	ASSERT_OK(run(f.b.skel->progs.rss_count_raw, args, 3), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "event");
	e = (struct rc_rss *)f.seen.last;
	ASSERT_EQ(e->hdr.tgid, getpid(), "tgid");
	ASSERT_EQ(e->shmem, 100000ULL * getpagesize(), "shmem is the count");
	ASSERT_GE(e->anon, 1, "anon read from the mm");
	/* a change smaller than the step (1 page here) is not news */
	m = my_entry(&f);
	if (!ASSERT_OK_PTR(m, "filed"))
		goto cleanup;
	m->pages[3] = 100000;
	args[2] = 100000;
	ASSERT_OK(run(f.b.skel->progs.rss_count_raw, args, 3), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "same count: no event");
	args[2] = 100001;
	ASSERT_OK(run(f.b.skel->progs.rss_count_raw, args, 3), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 2, "count moved by the step: event");
	args[0] ^= 0x40000;
	args[2] = 5;
	ASSERT_OK(run(f.b.skel->progs.rss_count_raw, args, 3), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 2, "another mm ignored");
cleanup:
	teardown(&f);
}

/*
 * While the agent is calm (rss_wake_pages set) an RSS event that moved
 * less than that since the last wake-up waits in the ring without waking
 * the reader; a larger move, and any other event, wakes it.
 */
TEST(calm_rss_events_wait_for_the_reader)
{
	struct fixture f;
	__u64 args[3];
	__u64 burst[3] = { 0 };

	if (!setup(&f, 1))
		goto cleanup;
	bpfstate_rss_wake(&f.b, 1000ULL * getpagesize());
	args[0] = my_mm(&f);
	args[1] = 3; /* MM_SHMEMPAGES, the count given */
	args[2] = 5000;
	ASSERT_OK(run(f.b.skel->progs.rss_count_raw, args, 3), "run");
	/* the first event moved 5000 pages from nothing: it wakes */
	ASSERT_EQ(ring_buffer__poll(f.rb, 1000), 1, "first wakes");
	/* as the agent's loop: an empty wait takes the ring off epoll's
	 * ready list (level-triggered), then it sleeps until woken */
	ASSERT_EQ(ring_buffer__poll(f.rb, 0), 0, "all read");
	args[2] = 5100;
	ASSERT_OK(run(f.b.skel->progs.rss_count_raw, args, 3), "run");
	ASSERT_EQ(ring_buffer__poll(f.rb, 50), 0, "100 pages: no wake-up");
	ASSERT_EQ(ring_buffer__consume(f.rb), 1, "but the event is there");
	ASSERT_EQ(f.seen.n, 2, "both events");
	args[2] = 6500;
	ASSERT_OK(run(f.b.skel->progs.rss_count_raw, args, 3), "run");
	ASSERT_EQ(ring_buffer__poll(f.rb, 1000), 1, "1500 pages: wakes");
	ASSERT_EQ(ring_buffer__poll(f.rb, 0), 0, "all read");
	/* a quiet RSS event waiting: a burst still wakes the reader */
	args[2] = 6600;
	ASSERT_OK(run(f.b.skel->progs.rss_count_raw, args, 3), "run");
	ASSERT_OK(run(f.b.skel->progs.fault_raw, burst, 3), "fault");
	ASSERT_EQ(ring_buffer__poll(f.rb, 1000), 2, "burst wakes for both");
	ASSERT_EQ(f.seen.type, RC_EV_FAULT_BURST, "the burst last");
	ASSERT_EQ(ring_buffer__poll(f.rb, 0), 0, "all read");
	/* 0: every event wakes, even behind a quiet one still unread */
	args[2] = 6700;
	ASSERT_OK(run(f.b.skel->progs.rss_count_raw, args, 3), "run");
	bpfstate_rss_wake(&f.b, 0);
	args[2] = 6800;
	ASSERT_OK(run(f.b.skel->progs.rss_count_raw, args, 3), "run");
	ASSERT_EQ(ring_buffer__poll(f.rb, 1000), 2, "woken again");
cleanup:
	teardown(&f);
}

/* v5.5-rc1: rss_stat(member, count), of the current task's own mm. */
TEST(rss_of_member_count_form_is_the_current_mm)
{
	struct fixture f;
	__u64 args[2] = { 1, 4242 };

	if (!setup(&f, 1000))
		goto cleanup;
	ASSERT_OK(run(f.b.skel->progs.rss_nomm_raw, args, 2), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "event");
	ASSERT_EQ(((struct rc_rss *)f.seen.last)->hdr.tgid, getpid(), "tgid");
	ASSERT_EQ(((struct rc_rss *)f.seen.last)->anon, 4242ULL * getpagesize(),
		  "anon is the count");
	ASSERT_OK(bpfstate_untrack(&f.b, getpid()), "untrack");
	args[1] = 9999;
	ASSERT_OK(run(f.b.skel->progs.rss_nomm_raw, args, 2), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "untracked: no event");
cleanup:
	teardown(&f);
}

/* exec brings a new mm: the exec program files it for the same slot. */
TEST(exec_files_the_new_mm)
{
	struct fixture f;
	__u64 args[3] = { 0 }, old;

	/* an odd burst size: every fault reaches the counters at once */
	if (!setup(&f, 1001))
		goto cleanup;
	old = my_mm(&f);
	/* pretend the old image was another mm, as after an exec */
	ASSERT_OK(bpfstate_untrack(&f.b, getpid()), "untrack");
	f.b.skel->bss->targets[0].tgid = getpid();
	f.b.skel->bss->targets[0].mm_key = 0;
	f.b.slots[0] = getpid();
	ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_EQ(f.b.skel->bss->targets[0].mm_key, 0, "not filed yet");
	ASSERT_OK(run(f.b.skel->progs.exec_raw, args, 3), "exec");
	ASSERT_EQ(my_mm(&f), old, "filed on exec");
	ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	ASSERT_OK(run(f.b.skel->progs.fault_raw, args, 3), "run");
	{
		struct track_totals t;

		ASSERT_OK(bpfstate_totals(&f.b, getpid(), &t), "totals");
		ASSERT_EQ(t.faults, 2, "faults after the exec");
	}
cleanup:
	teardown(&f);
}

/* Before v6.8 mark_victim(pid): the OOM killer runs in its victim. */
TEST(oom_victim_pid_form_reads_the_current_task)
{
	struct fixture f;
	struct rc_oom_kill *e;
	__u64 args[1] = { getpid() };

	if (!setup(&f, 1000))
		goto cleanup;
	ASSERT_OK(run(f.b.skel->progs.oom_pid_raw, args, 1), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 1, "event");
	e = (struct rc_oom_kill *)f.seen.last;
	ASSERT_EQ(e->hdr.type, RC_EV_OOM_KILL, "type");
	ASSERT_EQ(e->victim_pid, getpid(), "pid");
	ASSERT_EQ(e->victim_uid, getuid(), "uid");
	ASSERT_TRUE(!strncmp(e->comm, "test_bpf", 8), "comm");
	ASSERT_GE(e->anon_rss, 1, "rss read");
	/* another victim: only its pid is known here */
	args[0] = getppid();
	ASSERT_OK(run(f.b.skel->progs.oom_pid_raw, args, 1), "run");
	ring_buffer__consume(f.rb);
	ASSERT_EQ(f.seen.n, 2, "event");
	ASSERT_EQ(e->victim_pid, getppid(), "pid");
	ASSERT_EQ(e->victim_uid, RC_UID_UNKNOWN, "uid unknown");
	ASSERT_EQ(e->comm[0], 0, "comm unknown");
	ASSERT_EQ(e->anon_rss, 0, "rss unknown");
	ASSERT_EQ(bpfstate_stat(&f.b, RC_STAT_OOM_KILLS), 2, "stat");
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
