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

TEST(a_beat_goes_out_up_to_half_a_period_early)
{
	ASSERT_TRUE(cadence_beat_due(1000 * MS, 1000 * MS), "on time");
	ASSERT_TRUE(cadence_beat_due(1000 * MS, 2000 * MS), "late");
	ASSERT_TRUE(cadence_beat_due(1000 * MS,
				     1000 * MS - CADENCE_BEAT_EARLY_NS),
		    "as early as it may");
	ASSERT_FALSE(cadence_beat_due(1000 * MS,
				      1000 * MS - CADENCE_BEAT_EARLY_NS - 1),
		     "earlier: no");
	ASSERT_TRUE(cadence_beat_due(0, 5 * MS), "never beaten");
}

#define PAGES  16
#define PERIOD (250 * MS) /* RAMCACHE_HEARTBEAT_PERIOD_NS */

/*
 * The loop as the agent runs it while calm (agent.c next_tick(), on_tick()):
 * it wakes at the earliest heartbeat due (on time, no slack), at least
 * CADENCE_TICK_NS after the last wake-up, and each wake-up ticks every
 * page, which beats if cadence_beat_due(). @pages beat first at times spread
 * over a period (followed one after another). How many wake-ups in the
 * last @secs of 2 * @secs; the longest and shortest gap between two beats
 * of a page into *@most and *@least.
 */
static int calm_wakes(int pages, int secs, uint64_t *most, uint64_t *least)
{
	uint64_t next[PAGES], last[PAGES], now = 0, end = 2 * secs * 1000 * MS;
	int wakes = 0;

	*most = 0;
	*least = UINT64_MAX;
	for (int i = 0; i < pages; i++) {
		last[i] = i * PERIOD / pages;
		next[i] = last[i] + PERIOD;
	}
	while (now < end) {
		struct cadence_due d[PAGES];
		uint64_t at;

		for (int i = 0; i < pages; i++)
			d[i] = (struct cadence_due){ next[i], 0 };
		at = cadence_wake(d, pages);
		now = at > now + CADENCE_TICK_NS ? at : now + CADENCE_TICK_NS;
		wakes += now >= end / 2;
		for (int i = 0; i < pages; i++) {
			if (!cadence_beat_due(next[i], now))
				continue;
			if (now - last[i] > *most)
				*most = now - last[i];
			if (now - last[i] < *least)
				*least = now - last[i];
			last[i] = now;
			next[i] = now + PERIOD;
		}
	}
	return wakes;
}

TEST(pages_followed_at_different_times_beat_in_one_wake_up)
{
	uint64_t most, least;
	int wakes = calm_wakes(PAGES, 10, &most, &least);

	/* due at its own time each, 16 pages woke the loop 20 times a
	 * second (one every CADENCE_TICK_NS), and each wake-up ticked all */
	ASSERT_LE(wakes, 10 * 4 + 1, "4 wake-ups a second for 16 pages");
	ASSERT_LE(most, PERIOD, "no beat late");
	ASSERT_GE(least, PERIOD - CADENCE_BEAT_EARLY_NS, "nor too early");
	wakes = calm_wakes(1, 10, &most, &least);
	ASSERT_LE(wakes, 10 * 4 + 1, "one page: 4 a second");
	ASSERT_EQ(most, PERIOD, "on time");
	ASSERT_EQ(least, PERIOD, "never early");
}

TEST_MAIN()
