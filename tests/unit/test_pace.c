// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Evaluations are coalesced and paced: many requests, one run; the next
 * run waits PACE_DUTY times as long as the last took, at least
 * PACE_MIN_GAP_NS; the reason of the latest request that named one.
 */
#include "core/pace.h"
#include "test.h"

#define MS NSEC_PER_MSEC
#define T0 (1000 * NSEC_PER_SEC)

TEST(nothing_asked_nothing_runs)
{
	struct pace p = { 0 };
	uint32_t why = 7;

	ASSERT_FALSE(pace_start(&p, T0, &why), "not asked");
	ASSERT_EQ(why, 7, "untouched");
}

TEST(requests_are_coalesced_into_one_run)
{
	struct pace p = { 0 };
	uint32_t why;

	pace_request(&p, 0);
	pace_request(&p, 4);
	pace_request(&p, 0);
	ASSERT_EQ(p.requests, 3, "counted");
	ASSERT_TRUE(pace_start(&p, T0, &why), "runs");
	ASSERT_EQ(why, 4, "the reason named");
	ASSERT_FALSE(pace_start(&p, T0, &why), "once");
	pace_done(&p, T0, T0 + MS);
	ASSERT_EQ(p.runs, 1, "one run");
}

TEST(the_next_run_waits_duty_times_the_last)
{
	struct pace p = { 0 };
	uint32_t why;

	pace_request(&p, 0);
	ASSERT_TRUE(pace_start(&p, T0, &why), "first");
	pace_done(&p, T0, T0 + 10 * MS); /* a 10 ms run */
	ASSERT_EQ(p.next_ns, T0 + 10 * MS + PACE_DUTY * 10 * MS, "waits");
	pace_request(&p, 0);
	ASSERT_FALSE(pace_start(&p, p.next_ns - 1, &why), "too soon");
	ASSERT_TRUE(p.due, "still asked for");
	ASSERT_TRUE(pace_start(&p, p.next_ns, &why), "then");
	/* a quick run still waits the least gap */
	pace_done(&p, T0 + MS, T0 + MS + 1000);
	ASSERT_EQ(p.next_ns, T0 + MS + 1000 + PACE_MIN_GAP_NS, "least gap");
}

TEST_MAIN()
