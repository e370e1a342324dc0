// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cadence_plan(): every tick while memory is short or the kernel has just
 * reclaimed; reads spaced by how fast the headroom above the near point
 * could be taken while calm, within their bounds. cadence_wake(): periodic
 * chores join a wake-up due anyway, within their slack.
 */
#include "core/cadence.h"
#include "test.h"

#define MS  1000000ULL
#define GiB (1ULL << 30)

static struct cadence plan(bool near, bool above_ok, uint64_t since_event,
			   uint64_t headroom, uint64_t near_at)
{
	struct cadence_in in = {
		.near = near,
		.above_ok = above_ok,
		.since_event_ns = since_event,
		.headroom = headroom,
		.near_at = near_at,
	};
	struct cadence c;

	cadence_plan(&in, &c);
	return c;
}

TEST(near_a_threshold_reads_every_tick)
{
	struct cadence c = plan(true, false, UINT64_MAX, GiB, 2 * GiB);

	ASSERT_FALSE(c.calm, "not calm");
	ASSERT_EQ(c.tick_ns, CADENCE_TICK_NS, "ticks");
	ASSERT_EQ(c.read_ns, 0, "read every tick");
	ASSERT_EQ(c.level_ns, CADENCE_LEVEL_BUSY_NS, "level");
}

TEST(a_level_or_a_recent_kernel_event_is_busy)
{
	struct cadence c = plan(false, true, UINT64_MAX, 20 * GiB, 2 * GiB);

	ASSERT_FALSE(c.calm, "level above ok");
	ASSERT_EQ(c.read_ns, CADENCE_READ_BUSY_NS, "reads as before");
	/* far from the threshold: no tick between reads, the BPF events of
	 * what could bring it near wake the loop */
	ASSERT_EQ(c.tick_ns, 0, "no tick between reads");
	c = plan(false, false, CADENCE_SETTLE_NS - 1, 20 * GiB, 2 * GiB);
	ASSERT_FALSE(c.calm, "reclaim a moment ago");
	ASSERT_EQ(c.level_ns, CADENCE_LEVEL_BUSY_NS, "level");
	c = plan(false, false, CADENCE_SETTLE_NS, 20 * GiB, 2 * GiB);
	ASSERT_TRUE(c.calm, "settled");
}

TEST(calm_reads_are_spaced_by_the_distance)
{
	struct cadence c;

	/* 1 GiB above the near point at 4 GiB/s: 250 ms */
	c = plan(false, false, UINT64_MAX, 3 * GiB, 2 * GiB);
	ASSERT_TRUE(c.calm, "calm");
	ASSERT_EQ(c.tick_ns, 0, "no tick");
	ASSERT_EQ(c.read_ns, 250 * MS, "1 GiB away");
	ASSERT_EQ(c.level_ns, CADENCE_LEVEL_CALM_NS, "level");
	/* 6 GiB away: 1.5 s */
	c = plan(false, false, UINT64_MAX, 8 * GiB, 2 * GiB);
	ASSERT_EQ(c.read_ns, 1500 * MS, "6 GiB away");
	/* bounded both ways */
	c = plan(false, false, UINT64_MAX, 2 * GiB + 4096, 2 * GiB);
	ASSERT_EQ(c.read_ns, CADENCE_READ_MIN_NS, "just above");
	c = plan(false, false, UINT64_MAX, 1000 * GiB, 2 * GiB);
	ASSERT_EQ(c.read_ns, CADENCE_READ_MAX_NS, "far away");
	c = plan(false, false, UINT64_MAX, UINT64_MAX, 0);
	ASSERT_EQ(c.read_ns, CADENCE_READ_MAX_NS, "no overflow");
	c = plan(false, false, UINT64_MAX, GiB, 2 * GiB);
	ASSERT_EQ(c.read_ns, CADENCE_READ_MIN_NS, "below near but not near");
}

static uint64_t wake(const struct cadence_due *d, int n)
{
	return cadence_wake(d, n);
}

TEST(chores_wait_for_a_wake_up_due_anyway)
{
	/* a heartbeat at 250 ms, a summary at 100 ms that may wait 250 ms:
	 * one wake-up at 250 ms for both */
	struct cadence_due d[] = { { 250 * MS, 0 }, { 100 * MS, 250 * MS } };

	ASSERT_EQ(wake(d, 2), 250 * MS, "summary waits for the beat");
	/* the beat further off than the slack: the summary on time */
	d[0].at = 400 * MS;
	ASSERT_EQ(wake(d, 2), 100 * MS, "summary on time");
	/* two chores within each other's slack: one wake-up, at the later */
	struct cadence_due c[] = { { 1000 * MS, 250 * MS },
				   { 1100 * MS, 250 * MS },
				   { 5000 * MS, 0 } };
	ASSERT_EQ(wake(c, 3), 1100 * MS, "chores together");
	/* nothing is put off past its slack, nor past an on-time deadline */
	struct cadence_due e[] = { { 1000 * MS, 250 * MS },
				   { 1300 * MS, 250 * MS },
				   { 1200 * MS, 0 } };
	ASSERT_EQ(wake(e, 3), 1200 * MS, "on time first");
	e[2].at = 900 * MS;
	ASSERT_EQ(wake(e, 3), 900 * MS, "earliest on-time deadline");
}

TEST(a_lone_deadline_is_kept_and_none_is_never)
{
	struct cadence_due d[] = { { 700 * MS, 250 * MS } };
	struct cadence_due far[] = { { UINT64_MAX - 5, 250 * MS } };

	/* woken at the deadline, not after its slack: no drift */
	ASSERT_EQ(wake(d, 1), 700 * MS, "lone chore on time");
	ASSERT_EQ(wake(d, 0), UINT64_MAX, "nothing due");
	ASSERT_EQ(wake(far, 1), UINT64_MAX - 5, "no wrap-around");
}

TEST_MAIN()
