// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * When the per-fault programs go on and off, without root: the distance
 * of a domain from needing them, the read period while they are off, and
 * the switch with its margin and its calm period.
 */
#include <math.h>

#include "core/faultwatch.h"
#include "test.h"

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)
#define SEC NSEC_PER_SEC
#define T0  (1000 * SEC)

TEST(far_is_the_room_above_the_reserve_less_what_is_expected)
{
	struct faultwatch_domain d = { .headroom = 10 * GIB,
				       .reserve = 1 * GIB };

	ASSERT_EQ(faultwatch_far(&d), 9 * GIB, "headroom above the reserve");
	d.spike = 2 * GIB;
	ASSERT_EQ(faultwatch_far(&d), 7 * GIB, "a known transient is near");
	d.trend = -1.0 * GIB; /* a GiB a second, looked 2 s ahead */
	ASSERT_EQ(faultwatch_far(&d), 5 * GIB, "and so is a climb");
	d.trend = 3.0 * GIB;
	ASSERT_EQ(faultwatch_far(&d), 7 * GIB, "a growing headroom adds none");
	d.headroom = 512 * MIB;
	ASSERT_EQ(faultwatch_far(&d), 0, "below the reserve: needed now");
	d.trend = NAN;
	d.headroom = 100 * GIB;
	ASSERT_EQ(faultwatch_far(&d), 0, "no trend to trust: needed");
}

TEST(reads_while_off_come_before_the_room_can_go)
{
	ASSERT_EQ(faultwatch_poll_ns(0), FAULTWATCH_POLL_MIN_NS, "near");
	ASSERT_EQ(faultwatch_poll_ns(FAULTWATCH_RATE / 2), SEC / 2,
		  "what RATE takes in the period");
	ASSERT_EQ(faultwatch_poll_ns(1000 * GIB), FAULTWATCH_POLL_MAX_NS,
		  "seldom when far");
	ASSERT_EQ(faultwatch_poll_ns(UINT64_MAX), FAULTWATCH_POLL_MAX_NS,
		  "no overflow");
	/* the margin covers the shortest period and an attach */
	ASSERT_EQ(faultwatch_margin(0), FAULTWATCH_RATE / 20, "50 ms of RATE");
	ASSERT_EQ(faultwatch_margin(SEC / 20), FAULTWATCH_RATE / 10,
		  "plus the attach");
	ASSERT_EQ(faultwatch_margin(UINT64_MAX),
		  FAULTWATCH_RATE * (FAULTWATCH_POLL_MAX_NS / SEC), "bounded");
}

TEST(the_first_step_turns_them_off_at_once_when_far)
{
	struct faultwatch w = { .on = true };
	uint64_t m = faultwatch_margin(0);

	ASSERT_EQ(faultwatch_step(&w, 2 * m + 1, false, T0), FAULTWATCH_FAR,
		  "far from the start: off at once");
	ASSERT_FALSE(w.on, "off");
	w = (struct faultwatch){ .on = true };
	ASSERT_EQ(faultwatch_step(&w, 2 * m, false, T0), FAULTWATCH_KEEP,
		  "not far enough: stays on");
	ASSERT_EQ(faultwatch_step(&w, 2 * m + 1, false, T0 + 1),
		  FAULTWATCH_KEEP, "then only after a calm period");
	w = (struct faultwatch){ .on = true };
	ASSERT_EQ(faultwatch_step(&w, 100 * GIB, true, T0), FAULTWATCH_KEEP,
		  "busy from the start: stays on");
}

TEST(on_within_the_margin_or_when_busy)
{
	struct faultwatch w = { .decided = true };
	uint64_t m = faultwatch_margin(0);

	ASSERT_EQ(faultwatch_step(&w, m + 1, false, T0), FAULTWATCH_KEEP,
		  "far: stays off");
	ASSERT_FALSE(w.on, "off");
	ASSERT_EQ(faultwatch_step(&w, m, false, T0), FAULTWATCH_NEAR,
		  "within the margin");
	ASSERT_TRUE(w.on, "on");
	w.on = false;
	ASSERT_EQ(faultwatch_step(&w, 100 * GIB, true, T0), FAULTWATCH_BUSY,
		  "commands out, however far");
	ASSERT_TRUE(w.on, "on");
	w = (struct faultwatch){ .decided = true, .attach_ns = SEC / 20 };
	ASSERT_EQ(faultwatch_step(&w, m + 1, false, T0), FAULTWATCH_NEAR,
		  "a slow attach widens the margin");
}

TEST(off_only_after_a_calm_period_twice_the_margin_away)
{
	struct faultwatch w = { .on = true, .decided = true };
	uint64_t m = faultwatch_margin(0);
	uint64_t t = T0;

	ASSERT_EQ(faultwatch_step(&w, 2 * m, false, t), FAULTWATCH_KEEP,
		  "not twice the margin away");
	ASSERT_EQ(faultwatch_step(&w, 2 * m, false, t + 60 * SEC),
		  FAULTWATCH_KEEP, "however long");
	ASSERT_EQ(faultwatch_step(&w, 2 * m + 1, false, t), FAULTWATCH_KEEP,
		  "far: the calm period starts");
	t += FAULTWATCH_CALM_NS - 1;
	ASSERT_EQ(faultwatch_step(&w, 2 * m + 1, false, t), FAULTWATCH_KEEP,
		  "not calm long enough");
	ASSERT_EQ(faultwatch_step(&w, 2 * m + 1, true, t + 1), FAULTWATCH_KEEP,
		  "busy: starts again");
	ASSERT_EQ(faultwatch_step(&w, 2 * m + 1, false, t + 2), FAULTWATCH_KEEP,
		  "far again");
	ASSERT_EQ(faultwatch_step(&w, 2 * m + 1, false,
				  t + 2 + FAULTWATCH_CALM_NS),
		  FAULTWATCH_CALM, "a whole calm period");
	ASSERT_FALSE(w.on, "off");
	ASSERT_STREQ(faultwatch_why_name(FAULTWATCH_CALM), "calm", "named");
}

TEST_MAIN()
