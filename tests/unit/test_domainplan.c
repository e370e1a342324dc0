// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The memory-domain planner: one ranking over the entries of every
 * executor that shares a limit (policy_select_domain), and the domain's
 * forecast from the sum of their growth (policy_domain_forecast).
 */
#include <math.h>

#include "test.h"
#include "core/outlook.h"
#include "core/policy.h"

#define MiB RC_MIB
#define SEC 1000000000ULL

/* An inactive entry @age generations old in a page at generation 100. */
static struct rc_entry old(uint64_t id, uint64_t mib, uint32_t age)
{
	struct rc_entry e = { .id = id,
			      .bytes = mib * MiB,
			      .used_generation = 100 - age,
			      .last_use_ns = 1000 - age };

	return e;
}

static struct rc_domain_member member(const struct rc_entry *e, size_t n)
{
	struct rc_domain_member m = {
		.entries = e, .nr_entries = n, .generation = 100, .weight = 1.0
	};

	return m;
}

static bool picked(const struct rc_pick *p, int n, uint32_t mem, uint32_t idx)
{
	for (int i = 0; i < n; i++)
		if (p[i].member == mem && p[i].idx == idx)
			return true;
	return false;
}

/* The oldest entries of the domain go first, whoever holds them. */
TEST(domain_ranks_across_executors)
{
	/* each executor: one old entry, then young ones */
	struct rc_entry a[] = { old(1, 16, 6), old(2, 16, 0), old(3, 16, 0) };
	struct rc_entry b[] = { old(1, 16, 0), old(2, 16, 8), old(3, 16, 1) };
	struct rc_entry c[] = { old(1, 16, 0), old(2, 16, 1), old(3, 16, 7) };
	struct rc_domain_member m[] = { member(a, 3), member(b, 3),
					member(c, 3) };
	struct rc_pick p[9];
	uint64_t covered;
	int n;

	n = policy_select_domain(m, 3, 48 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 9, &covered);
	ASSERT_EQ(n, 3, "three entries cover 48 MiB");
	ASSERT_EQ(covered, 48 * MiB, "covered");
	/* ages 8, 7, 6: one of each executor, in score order */
	ASSERT_TRUE(p[0].member == 1 && p[0].idx == 1, "b's age 8 first");
	ASSERT_TRUE(p[1].member == 2 && p[1].idx == 2, "c's age 7 second");
	ASSERT_TRUE(p[2].member == 0 && p[2].idx == 0, "a's age 6 third");
	ASSERT_TRUE(p[0].score > p[1].score && p[1].score > p[2].score,
		    "scores fall");
	/* more: the age-1 entries of b and c before any age-0 one */
	n = policy_select_domain(m, 3, 80 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 9, &covered);
	ASSERT_EQ(n, 5, "five entries");
	ASSERT_TRUE(picked(p, n, 1, 2) && picked(p, n, 2, 1),
		    "age-1 entries of b and c next");
}

/* Per-executor generations: age is counted on each page's own clock. */
TEST(domain_generations_are_per_page)
{
	struct rc_entry a[] = {
		{ .id = 1, .bytes = 16 * MiB, .used_generation = 5 }
	};
	struct rc_entry b[] = {
		{ .id = 1, .bytes = 16 * MiB, .used_generation = 90 }
	};
	struct rc_domain_member m[] = { member(a, 1), member(b, 1) };
	struct rc_pick p[2];
	uint64_t covered;

	m[0].generation = 6;   /* age 1 */
	m[1].generation = 100; /* age 10 */
	ASSERT_EQ(policy_select_domain(m, 2, 1, RC_PHASE_INACTIVE,
				       RC_POLICY_RAM, p, 2, &covered),
		  1, "one pick");
	ASSERT_EQ(p[0].member, 1, "b's entry is older on its own page");
}

/* --weight: W > 1 keeps an executor's entries longer within their class. */
TEST(domain_weight_favours_one)
{
	struct rc_entry a[] = { old(1, 16, 3), old(2, 16, 0) };
	struct rc_entry b[] = { old(1, 16, 6), old(2, 16, 0) };
	struct rc_domain_member m[] = { member(a, 2), member(b, 2) };
	struct rc_pick p[4];
	uint64_t covered;
	int n;

	n = policy_select_domain(m, 2, 16 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 4, &covered);
	ASSERT_TRUE(n == 1 && p[0].member == 1, "unweighted: b's older entry");
	m[1].weight = 10; /* 1.3^6 / 10 < 1.3^3 */
	n = policy_select_domain(m, 2, 16 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 4, &covered);
	ASSERT_TRUE(n == 1 && p[0].member == 0, "weighted: a's entry first");
	/* 1.3^6/10 = 0.48 < 1.3^0 = 1: b's old entry after a's young one */
	n = policy_select_domain(m, 2, 48 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 4, &covered);
	ASSERT_EQ(n, 3, "three picks");
	ASSERT_TRUE(p[1].member == 0 && p[2].member == 1,
		    "b's entries only after a's");
	/* bad weights are neutral or clamped, never NaN */
	m[1].weight = NAN;
	n = policy_select_domain(m, 2, 16 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 4, &covered);
	ASSERT_TRUE(n == 1 && p[0].member == 1, "NaN weight counts as 1");
	m[1].weight = -3;
	n = policy_select_domain(m, 2, 16 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 4, &covered);
	ASSERT_TRUE(n == 1 && p[0].member == 1, "negative weight counts as 1");
	m[1].weight = 1e-9; /* clamped to RC_WEIGHT_MIN */
	n = policy_select_domain(m, 2, 16 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 4, &covered);
	ASSERT_TRUE(n == 1 && isfinite(p[0].score), "tiny weight: finite");
}

/* Classes still come first: a weight never makes an active entry go first. */
TEST(domain_classes_before_weight)
{
	struct rc_entry a[] = { old(1, 16, 9) };
	struct rc_entry b[] = { old(1, 16, 0) };
	struct rc_domain_member m[] = { member(a, 1), member(b, 1) };
	struct rc_pick p[2];
	uint64_t covered;
	int n;

	a[0].flags = RAMCACHE_F_ACTIVE;
	m[1].weight = RC_WEIGHT_MAX;
	n = policy_select_domain(m, 2, 16 * MiB, RC_PHASE_HEADROOM,
				 RC_POLICY_RAM, p, 2, &covered);
	ASSERT_TRUE(n == 1 && p[0].member == 1,
		    "inactive of a favoured executor before an active one");
	n = policy_select_domain(m, 2, 64 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 2, &covered);
	ASSERT_TRUE(n == 1 && p[0].member == 1, "inactive phase: no active");
}

static bool busy_id2(uint64_t id, void *ctx)
{
	(void)ctx;
	return id == 2;
}

/* In-flight entries are skipped per executor; repeated ids once each. */
TEST(domain_inflight_and_duplicates)
{
	struct rc_entry a[] = { old(2, 16, 9), old(5, 16, 8), old(5, 16, 8) };
	struct rc_entry b[] = { old(2, 16, 7), old(5, 16, 1) };
	struct rc_domain_member m[] = { member(a, 3), member(b, 2) };
	struct rc_pick p[5];
	uint64_t covered;
	int n;

	m[0].in_flight = busy_id2;
	n = policy_select_domain(m, 2, 1000 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 5, &covered);
	ASSERT_EQ(n, 3, "a's id 5 once, b's 2 and 5");
	ASSERT_FALSE(picked(p, n, 0, 0), "a's id 2 is in flight");
	ASSERT_TRUE(picked(p, n, 1, 0), "b's id 2 is another entry");
	ASSERT_EQ(covered, 48 * MiB, "covered");
	n = policy_select_domain(m, 2, 1000 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 2, &covered);
	ASSERT_EQ(n, 2, "out_max bounds the picks");
}

/* A member cannot free more than its cap: a huge claim covers nothing. */
TEST(domain_cap_bounds_what_a_member_covers)
{
	struct rc_entry liar[] = { old(1, 1 << 20, 200), old(2, 1 << 20, 200),
				   old(3, 1 << 20, 200) };
	struct rc_entry b[] = { old(1, 16, 5), old(2, 16, 4), old(3, 16, 3) };
	struct rc_domain_member m[] = { member(liar, 3), member(b, 3) };
	struct rc_pick p[6];
	uint64_t covered;
	int n;

	n = policy_select_domain(m, 2, 40 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 6, &covered);
	ASSERT_TRUE(n == 1 && p[0].member == 0,
		    "uncapped: one 1 TiB claim covers everything");
	m[0].capped = true;
	m[0].cap = 10 * MiB; /* its RSS */
	n = policy_select_domain(m, 2, 40 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 6, &covered);
	ASSERT_EQ(n, 3, "the liar's first entry (10 MiB), then two of b's");
	ASSERT_TRUE(p[0].member == 0 && p[1].member == 1 && p[2].member == 1,
		    "b is evicted");
	ASSERT_EQ(covered, 42 * MiB, "10 + 16 + 16 MiB");
	m[0].cap = 0; /* all it holds is out already */
	n = policy_select_domain(m, 2, 40 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, p, 6, &covered);
	ASSERT_TRUE(n == 3 && p[0].member == 1, "only b's entries");
}

TEST(domain_bad_input)
{
	struct rc_pick p[1];
	uint64_t covered = 1;
	struct rc_domain_member m = { .entries = NULL, .nr_entries = 3 };

	ASSERT_EQ(policy_select_domain(NULL, 2, MiB, RC_PHASE_INACTIVE,
				       RC_POLICY_RAM, p, 1, &covered),
		  -EINVAL, "NULL members");
	ASSERT_EQ(covered, 0, "covered reset");
	ASSERT_EQ(policy_select_domain(&m, 1, MiB, RC_PHASE_INACTIVE,
				       RC_POLICY_RAM, p, 1, &covered),
		  -EINVAL, "NULL table with entries");
	ASSERT_EQ(policy_select_domain(&m, 1, 0, RC_PHASE_INACTIVE,
				       RC_POLICY_RAM, p, 1, &covered),
		  0, "no deficit: nothing");
	ASSERT_EQ(policy_select_domain(NULL, 0, MiB, RC_PHASE_INACTIVE,
				       RC_POLICY_RAM, p, 1, &covered),
		  0, "no members: nothing");
}

/* One member of weight 1 is policy_select(): the single-executor path. */
TEST(domain_of_one_is_rc_select)
{
	struct rc_entry a[] = { old(1, 16, 2), old(2, 64, 0), old(3, 8, 5),
				old(4, 16, 2) };
	struct rc_select_req req = { .entries = a,
				     .nr_entries = 4,
				     .generation = 100,
				     .deficit = 70 * MiB,
				     .phase = RC_PHASE_INACTIVE };
	struct rc_domain_member m = member(a, 4);
	struct rc_pick p[4];
	uint32_t idx[4];
	uint64_t c1, c2;
	int n1, n2;

	n1 = policy_select(&req, idx, 4, &c1);
	n2 = policy_select_domain(&m, 1, 70 * MiB, RC_PHASE_INACTIVE,
				  RC_POLICY_RAM, p, 4, &c2);
	ASSERT_TRUE(n1 == n2 && n1 > 0 && c1 == c2, "same count and bytes");
	for (int i = 0; i < n1 && i < n2; i++)
		ASSERT_EQ(idx[i], p[i].idx, "same order");
}

TEST(domain_forecast_sums_growth)
{
	struct rc_growth g[] = { { 10.0 * MiB, 5 },
				 { 20.0 * MiB, 3 },
				 { -5.0 * MiB, 8 } };
	struct rc_forecast f;

	ASSERT_EQ(policy_domain_forecast(100 * MiB, g, 3, SEC, &f), 0, "ok");
	ASSERT_EQ(f.at_horizon, 75 * MiB, "100 MiB - 25 MiB/s x 1 s");
	ASSERT_TRUE(f.has_eta && f.eta_ns == 4 * SEC, "gone in 4 s");
	ASSERT_EQ(f.nr_used, 8, "the most samples of any member");
	g[1].rate = NAN;
	ASSERT_EQ(policy_domain_forecast(100 * MiB, g, 3, SEC, &f), 0, "NaN");
	ASSERT_EQ(f.at_horizon, 95 * MiB, "a NaN rate counts as 0");
	g[0].rate = -30.0 * MiB;
	ASSERT_EQ(policy_domain_forecast(100 * MiB, g, 3, 2 * SEC, &f), 0,
		  "down");
	ASSERT_TRUE(!f.has_eta && f.at_horizon == 170 * MiB,
		    "shrinking members: headroom grows, no ETA");
	g[0].rate = INFINITY;
	ASSERT_EQ(policy_domain_forecast(100 * MiB, g, 1, SEC, &f), 0, "inf");
	ASSERT_EQ(f.at_horizon, 100 * MiB, "an inf rate counts as 0");
	g[0].rate = 1e308;
	g[1].rate = 1e308;
	ASSERT_EQ(policy_domain_forecast(100 * MiB, g, 2, SEC, &f), 0, "huge");
	ASSERT_EQ(f.at_horizon, 0, "overflowing sum: headroom gone");
	ASSERT_EQ(policy_domain_forecast(1, g, 0, SEC, &f), -EINVAL, "n == 0");
}

/*
 * A member's growth for the domain forecast: 64 MiB taken in 0.2 s at its
 * start (4 MiB a sample, as rss events come) and nothing since is 64 MiB
 * over the 1 s window, not the burst's own 320 MiB/s run on for a horizon
 * (three such starts together had a domain with 433 MiB free of 512 evict
 * by forecast); a steady climb is its own pace; a burst gone by counts 0.
 */
TEST(domain_growth_spreads_a_burst_over_the_window)
{
	struct rc_sample s[40];
	uint32_t used;
	double r;
	int n = 0;

	for (int i = 0; i <= 16; i++, n++)
		s[n] = (struct rc_sample){ 10 * SEC + i * (SEC / 80),
					   (uint64_t)i * 4 * MiB };
	ASSERT_EQ(policy_growth_rate(s, n, true, 10 * SEC + SEC / 4, SEC, &r,
				     &used),
		  0, "burst");
	ASSERT_TRUE(r > 63.9 * MiB && r < 64.1 * MiB, "64 MiB over 1 s");
	ASSERT_EQ(used, 17, "every sample is in the window");
	ASSERT_EQ(policy_growth_rate(s, n, true, 12 * SEC, SEC, &r, NULL), 0,
		  "later");
	ASSERT_TRUE(r == 0, "a burst gone by: no growth");
	/* the ring wrapped: the rate is over the span it still holds */
	ASSERT_EQ(policy_growth_rate(s + 8, n - 8, false, 10 * SEC + SEC / 5,
				     SEC, &r, NULL),
		  0, "wrapped");
	ASSERT_TRUE(r > 32.0 * MiB / 0.1 - MiB && r < 32.0 * MiB / 0.1 + MiB,
		    "32 MiB over the 0.1 s left");
	/* 20 MiB/s in 4 MiB steps for 3 s */
	n = 0;
	for (int i = 0; i <= 15; i++, n++)
		s[n] = (struct rc_sample){ i * (SEC / 5),
					   (uint64_t)i * 4 * MiB };
	ASSERT_EQ(policy_growth_rate(s, n, true, 3 * SEC, SEC, &r, NULL), 0,
		  "steady");
	ASSERT_TRUE(r > 19.9 * MiB && r < 20.1 * MiB, "20 MiB/s");
	/* giving back is negative growth; a stamp ahead of now moves now */
	s[n++] = (struct rc_sample){ 3 * SEC + SEC / 2, 30 * MiB };
	ASSERT_EQ(policy_growth_rate(s, n, true, 3 * SEC, SEC, &r, NULL), 0,
		  "down");
	ASSERT_TRUE(r < -17.9 * MiB && r > -18.1 * MiB,
		    "48 MiB at 2.5 s, 30 MiB at 3.5 s");
	ASSERT_EQ(policy_growth_rate(s, 0, true, SEC, SEC, &r, NULL), -EINVAL,
		  "no samples");
	ASSERT_EQ(policy_growth_rate(s, n, true, SEC, 0, &r, NULL), -EINVAL,
		  "no window");
}

/* plan @p from 80 MiB of headroom and the domain forecast @f. */
static void plan_of(const struct rc_forecast *f, const struct rc_thresholds *t,
		    struct rc_plan *p)
{
	struct rc_view v = { .headroom = 80 * MiB, .low = f->at_horizon };

	outlook_plan(&v, t, false, p);
}

/*
 * The domain's plan is outlook_plan() on its headroom and the forecast
 * from its members' growth: the shortfall and a margin.
 */
TEST(domain_plan_from_growth)
{
	struct rc_thresholds t = { .headroom_min = 32 * MiB,
				   .inactive_min = 64 * MiB };
	struct rc_growth g[] = { { 20.0 * MiB, 4 }, { 20.0 * MiB, 4 } };
	uint64_t margin = outlook_margin(&t);
	struct rc_forecast f;
	struct rc_plan p;

	/* 80 MiB now; one executor at 20 MiB/s leaves 60 MiB in 1 s */
	policy_domain_forecast(80 * MiB, g, 1, SEC, &f);
	plan_of(&f, &t, &p);
	ASSERT_TRUE(p.evict && p.phase == RC_PHASE_INACTIVE, "one: inactive");
	ASSERT_EQ(p.deficit, 4 * MiB + margin, "one: 64 - 60 MiB");
	/* both: 40 MiB; three: 20 MiB, below the headroom threshold */
	policy_domain_forecast(80 * MiB, g, 2, SEC, &f);
	plan_of(&f, &t, &p);
	ASSERT_EQ(p.deficit, 24 * MiB + margin, "two: 64 - 40 MiB");
	ASSERT_EQ(p.reason, RAMCACHE_REASON_FORECAST, "only the forecast");
	policy_domain_forecast(80 * MiB, g, 2, 3 * SEC / 2, &f);
	plan_of(&f, &t, &p);
	ASSERT_TRUE(p.evict && p.phase == RC_PHASE_HEADROOM,
		    "two over 1.5 s: 20 MiB, headroom phase");
	ASSERT_EQ(p.deficit, 12 * MiB + margin, "32 - 20 MiB");
}

/*
 * Members of one limit each took memory since the last read: the domain's
 * headroom is the read's less all they took, not less only the most any
 * one took (three demos loading models together ran into the limit with
 * the agent still seeing 100 MiB left).
 */
TEST(domain_headroom_counts_every_members_growth)
{
	struct rc_share m[] = {
		{ .read_headroom = 200 * MiB,
		  .read_rss = 40 * MiB,
		  .rss = 100 * MiB },
		{ .read_headroom = 200 * MiB,
		  .read_rss = 30 * MiB,
		  .rss = 90 * MiB },
		{ .read_headroom = 210 * MiB,
		  .read_rss = 150 * MiB,
		  .rss = 190 * MiB },
	};

	/* 60 + 60 + 40 taken out of the least read, 200 */
	ASSERT_EQ(policy_shared_headroom(m, 3), 40 * MiB, "all growth counts");
	/* one gives back what it held: the others may take it */
	m[2].rss = 50 * MiB;
	ASSERT_EQ(policy_shared_headroom(m, 3), 180 * MiB, "frees count");
	/* more taken than there was: 0, never a wrap */
	m[0].rss = 400 * MiB;
	m[2].rss = 190 * MiB;
	ASSERT_EQ(policy_shared_headroom(m, 3), 0, "saturates at 0");
	/* an RSS not known at the read counts for nothing */
	m[0].read_rss = 0;
	ASSERT_EQ(policy_shared_headroom(m, 3), 40 * MiB + 60 * MiB,
		  "unknown read RSS");
	/* no member read yet: nothing known */
	ASSERT_EQ(policy_shared_headroom(m, 0), UINT64_MAX, "none");
	m[0] = (struct rc_share){ .read_headroom = UINT64_MAX - 1,
				  .read_rss = 100 * MiB,
				  .rss = 1 };
	ASSERT_EQ(policy_shared_headroom(m, 1), UINT64_MAX, "saturates above");
}

TEST_MAIN()
