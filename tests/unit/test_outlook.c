// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The outlook (spike, trend, lead time) and the plan it makes. */
#include "test.h"
#include "core/outlook.h"

#define MS  1000000ULL
#define SEC 1000000000ULL
#define MB  (1ULL << 20)

static struct rc_outlook o;

/* @h every 10 ms over [from, to). */
static void flat(uint64_t from, uint64_t to, uint64_t h)
{
	for (uint64_t t = from; t < to; t += 10 * MS)
		outlook_push(&o, t, h);
}

TEST(no_history_is_the_headroom_now)
{
	struct rc_view v;

	outlook_init(&o);
	ASSERT_EQ(outlook_view(&o, SEC, 500 * MB, SEC, &v), 0, "slots");
	ASSERT_EQ(v.low, 500 * MB, "low");
	ASSERT_EQ(v.lead_ns, SEC, "lead until measured");
	ASSERT_FALSE(v.has_eta, "eta");
}

TEST(a_spike_given_back_is_kept_free_for_next_time)
{
	struct rc_view v;

	outlook_init(&o);
	flat(0, 2 * SEC, 1000 * MB);
	flat(2 * SEC, 2 * SEC + 400 * MS, 440 * MB); /* a blur: 560 MB */
	/*
	 * While it is taken, nothing is learnt yet, and the 4 s trend makes
	 * of a step less than half of it (a 1 s window made 1.4 GB of it).
	 */
	outlook_view(&o, 2 * SEC + 390 * MS, 440 * MB, SEC, &v);
	ASSERT_GE(v.low, 200 * MB, "low during the first spike");
	ASSERT_EQ(v.spike, 0, "spike not learnt before it is given back");
	flat(2 * SEC + 400 * MS, 6 * SEC, 1000 * MB);
	outlook_view(&o, 6 * SEC, 1000 * MB, SEC, &v);
	ASSERT_EQ(v.spike, 560 * MB, "spike learnt");
	ASSERT_EQ(v.low, 440 * MB, "the next one is expected");
	ASSERT_LE(v.trend < 0 ? -v.trend : v.trend, 1.0 * MB, "no trend");
	/* half of the next one taken: the other half is still to come */
	outlook_push(&o, 6 * SEC + 10 * MS, 720 * MB);
	outlook_view(&o, 6 * SEC + 10 * MS, 720 * MB, SEC, &v);
	ASSERT_EQ(v.excursion, 280 * MB, "excursion");
	ASSERT_TRUE(v.low > 380 * MB && v.low <= 440 * MB, "low mid-spike");
}

TEST(what_the_agent_freed_is_not_a_spike)
{
	struct rc_view v;

	outlook_init(&o);
	flat(0, 2 * SEC, 300 * MB);
	outlook_posted(&o, 2 * SEC);
	/* the executor frees 200 MB for the command, acks 50 ms later */
	flat(2 * SEC, 2 * SEC + 50 * MS, 500 * MB);
	outlook_freed(&o, 2 * SEC, 2 * SEC + 50 * MS, 200 * MB);
	flat(2 * SEC + 50 * MS, 8 * SEC, 500 * MB);
	outlook_view(&o, 8 * SEC, 500 * MB, SEC, &v);
	ASSERT_EQ(v.spike, 0, "no spike learnt from an eviction");
	ASSERT_EQ(v.low, 500 * MB, "low");
}

TEST(a_steady_climb_is_a_trend)
{
	struct rc_view v;
	uint64_t h = 1000 * MB;

	outlook_init(&o);
	for (uint64_t t = 0; t < 5 * SEC; t += 10 * MS) {
		outlook_push(&o, t, h);
		h -= MB; /* 100 MB/s */
	}
	outlook_view(&o, 5 * SEC - 10 * MS, h + MB, SEC, &v);
	ASSERT_TRUE(v.trend < -95.0 * MB && v.trend > -105.0 * MB, "trend");
	ASSERT_EQ(v.spike, 0, "a climb gives nothing back");
	ASSERT_TRUE(v.low + 95 * MB < v.headroom &&
			    v.low + 105 * MB > v.headroom,
		    "low = headroom - 100 MB/s x 1 s");
	ASSERT_TRUE(v.has_eta && v.eta_ns > 4 * SEC && v.eta_ns < 6 * SEC,
		    "eta");
}

TEST(lead_time_follows_the_measured_latency)
{
	outlook_init(&o);
	ASSERT_EQ(outlook_lead(&o, SEC), SEC, "unmeasured");
	outlook_latency(&o, 20 * MS);
	outlook_latency(&o, 20 * MS);
	ASSERT_EQ(outlook_lead(&o, SEC), SEC, "two are not enough");
	outlook_latency(&o, 200 * MS);
	ASSERT_EQ(outlook_lead(&o, SEC), 450 * MS, "2 x p90 + 50 ms");
	for (int i = 0; i < 16; i++)
		outlook_latency(&o, 10 * MS);
	ASSERT_EQ(outlook_lead(&o, SEC), 100 * MS, "at least 100 ms");
	for (int i = 0; i < 16; i++)
		outlook_latency(&o, 3 * SEC);
	ASSERT_EQ(outlook_lead(&o, SEC), SEC, "at most the horizon");
}

TEST(plan_asks_for_the_shortfall_and_a_margin)
{
	struct rc_thresholds t = { 100 * MB, 200 * MB };
	struct rc_view v = { .headroom = 250 * MB, .low = 150 * MB };
	struct rc_plan p;

	outlook_plan(&v, &t, false, &p);
	ASSERT_TRUE(p.evict, "evict");
	ASSERT_EQ(p.phase, RC_PHASE_INACTIVE, "phase");
	ASSERT_EQ(p.deficit, 50 * MB + 25 * MB, "shortfall + a quarter of 100");
	ASSERT_EQ(p.reason, RAMCACHE_REASON_FORECAST, "reason");
	v.headroom = v.low = 60 * MB;
	outlook_plan(&v, &t, false, &p);
	ASSERT_EQ(p.phase, RC_PHASE_HEADROOM, "phase");
	ASSERT_EQ(p.deficit, 40 * MB + 25 * MB, "deficit");
	ASSERT_EQ(p.reason, RAMCACHE_REASON_HEADROOM, "reason");
	outlook_plan(&v, &t, true, &p);
	ASSERT_EQ(p.reason, RAMCACHE_REASON_RECLAIM, "reclaiming");
	v.headroom = v.low = 200 * MB;
	outlook_plan(&v, &t, true, &p);
	ASSERT_FALSE(p.evict, "at the reserve: nothing");
	t.headroom_min = 8 * MB;
	ASSERT_EQ(outlook_margin(&t), RC_OUTLOOK_MARGIN_MIN, "margin floor");
}

TEST_MAIN()
