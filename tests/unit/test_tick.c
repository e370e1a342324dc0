// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The loop's wake-ups and what the cadence is planned from, without the
 * loop: an event while calm wakes it at once, while busy brings the next
 * read forward no sooner than a tick after the last; the cadence follows
 * the target nearest its threshold; evictors tick on time for heartbeats.
 */
#include <stdlib.h>

#include "executors/targets.h"
#include "test.h"
#include "tick.h"

#define MS  NSEC_PER_MSEC
#define MiB RC_MIB
#define T0  (1000 * NSEC_PER_SEC)

static struct tick idle_tick(bool calm, uint64_t read_ns)
{
	struct tick tk = { .timerfd = -1, .armed_ns = UINT64_MAX };

	tk.cad.calm = calm;
	tk.cad.read_ns = read_ns;
	tk.next_read_ns = T0 + read_ns;
	tk.next_level_ns = T0 + 5 * read_ns;
	return tk;
}

TEST(a_kernel_event_wakes_a_calm_loop_at_once)
{
	struct tick tk = idle_tick(true, 2000 * MS);

	tick_kernel_told(&tk, T0 + 10 * MS);
	ASSERT_EQ(tk.last_event_ns, T0 + 10 * MS, "remembered");
	ASSERT_FALSE(tk.cad.calm, "calm no more");
	ASSERT_EQ(tk.next_read_ns, T0 + 10 * MS, "read now");
	ASSERT_EQ(tk.next_level_ns, T0 + 10 * MS, "judge now");
	ASSERT_EQ(tk.armed_ns, T0 + 10 * MS, "armed now");
}

TEST(a_busy_loop_reads_no_sooner_than_a_tick_after_the_last)
{
	struct tick tk = idle_tick(false, 250 * MS);

	tick_kernel_told(&tk, T0 + MS);
	ASSERT_EQ(tk.next_read_ns, T0 + 250 * MS, "busy: not at once");
	/* last read at T0: the next at T0 + one tick */
	tick_read_soon(&tk, T0 + MS);
	ASSERT_EQ(tk.next_read_ns, T0 + CADENCE_TICK_NS, "a tick after");
	ASSERT_EQ(tk.armed_ns, T0 + CADENCE_TICK_NS, "armed then");
	tick_read_soon(&tk, T0 + 2 * CADENCE_TICK_NS);
	ASSERT_EQ(tk.next_read_ns, T0 + CADENCE_TICK_NS, "never later");
}

TEST(arm_by_only_brings_the_wake_up_forward)
{
	struct tick tk = idle_tick(false, 250 * MS);

	tick_arm(&tk, T0 + 100 * MS);
	tick_arm_by(&tk, T0 + 200 * MS);
	ASSERT_EQ(tk.armed_ns, T0 + 100 * MS, "later: no");
	tick_arm_by(&tk, T0 + 50 * MS);
	ASSERT_EQ(tk.armed_ns, T0 + 50 * MS, "sooner: yes");
}

static struct target *target(struct targets *ts, int slot, uint64_t headroom,
			     uint64_t inactive_min)
{
	struct target *t = calloc(1, sizeof(*t));

	t->slot = slot;
	t->pid = 100 + slot;
	t->sm.headroom = headroom;
	t->thr.inactive_min = inactive_min;
	ts->t[slot] = t;
	ts->n++;
	return t;
}

static void free_targets(struct targets *ts)
{
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		free(ts->t[i]);
}

TEST(the_cadence_follows_the_target_nearest_its_threshold)
{
	struct targets ts = { 0 };
	uint64_t headroom = 9000 * MiB, near = 100 * MiB;

	targets_nearest(&ts, &headroom, &near);
	ASSERT_EQ(headroom, 9000 * MiB, "no targets: the machine's");
	target(&ts, 0, 2000 * MiB, 256 * MiB); /* 1488 MiB above 512 */
	target(&ts, 5, 1000 * MiB, 64 * MiB);  /* 872 MiB above 128 */
	target(&ts, 9, 4000 * MiB, 16 * MiB);
	targets_nearest(&ts, &headroom, &near);
	ASSERT_EQ(headroom, 1000 * MiB, "the nearest");
	ASSERT_EQ(near, 128 * MiB, "its near point");
	ASSERT_FALSE(targets_pressing(&ts), "none close");
	ts.t[0]->sm.headroom = 500 * MiB; /* under twice 256 MiB */
	ASSERT_TRUE(targets_pressing(&ts), "one close");
	targets_nearest(&ts, &headroom, &near);
	ASSERT_EQ(headroom, 500 * MiB, "now that one, at 0 above");
	free_targets(&ts);
}

TEST(evictors_tick_on_time_for_heartbeats_and_commands)
{
	struct targets ts = { 0 };
	struct cadence_due d[RC_MAX_TARGETS];
	struct target *a, *b;

	a = target(&ts, 0, 4000 * MiB, 64 * MiB);
	b = target(&ts, 1, 4000 * MiB, 64 * MiB);
	target(&ts, 2, 4000 * MiB, 64 * MiB); /* --no-evict: none */
	ASSERT_FALSE(targets_evicting(&ts), "nobody evicts");
	ASSERT_EQ(targets_wakes(&ts, d), 0, "no wake-up");
	a->evicting = b->evicting = true;
	a->ev.open = true;
	a->ev.next_beat_ns = T0 + 100 * MS;
	b->ev.next_open_ns = T0 + 900 * MS; /* its page not found yet */
	ASSERT_TRUE(targets_evicting(&ts), "evicting");
	ASSERT_EQ(targets_wakes(&ts, d), 2, "two");
	ASSERT_EQ(d[0].at, T0 + 100 * MS, "heartbeat");
	ASSERT_EQ(d[0].slack, 0, "on time");
	ASSERT_EQ(d[1].at, T0 + 900 * MS, "a look for the page");
	ASSERT_EQ(d[1].slack, CADENCE_SLACK_NS, "with slack");
	a->ev.nr_inflight = 1;
	ASSERT_TRUE(targets_pressing(&ts), "commands out");
	targets_wakes(&ts, d);
	ASSERT_EQ(d[0].at, 0, "in flight: at once");
	free_targets(&ts);
}

TEST_MAIN()
