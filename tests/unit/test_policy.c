// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Pure policy maths: headroom, thresholds, scores, selection, forecast. */
#include <math.h>

#include "test.h"
#include "core/policy.h"

#define MiB RC_MIB
#define GiB RC_GIB
#define SEC 1000000000ULL

#define ASSERT_NEAR(a, b, rel, what)                                           \
	({                                                                     \
		double a_ = (a), b_ = (b);                                     \
		bool ok_ = fabs(a_ - b_) <= (rel)*fabs(b_);                    \
		if (!ok_)                                                      \
			FAIL_AT("%s: %s == %.6g, expected %.6g", what, #a, a_, \
				b_);                                           \
		ok_;                                                           \
	})

/* ---------------------------------------------------------------- */

TEST(headroom)
{
	ASSERT_EQ(policy_headroom(5 * GiB, RC_UNLIMITED, 9 * GiB, 0), 5 * GiB,
		  "unlimited cgroup: system only");
	ASSERT_TRUE(policy_headroom(UINT64_MAX, 1ULL << 60, 9 * GiB, 0) ==
			    UINT64_MAX,
		    ">= 2^60 is unlimited");
	ASSERT_EQ(policy_headroom(UINT64_MAX, (1ULL << 60) - 1, 0, 0),
		  (1ULL << 60) - 1, "just under 2^60 is a limit");
	ASSERT_EQ(policy_headroom(5 * GiB, 0x7ffffffffffff000ULL, 1, 0),
		  5 * GiB, "v1 PAGE_COUNTER_MAX");
	ASSERT_EQ(policy_headroom(5 * GiB, 256 * MiB, 200 * MiB, 20 * MiB),
		  76 * MiB, "limit - usage + inactive");
	ASSERT_EQ(policy_headroom(50 * MiB, 256 * MiB, 200 * MiB, 20 * MiB),
		  50 * MiB, "system tighter");
	ASSERT_EQ(policy_headroom(5 * GiB, 256 * MiB, 300 * MiB, 0), 0,
		  "usage over the limit");
	ASSERT_EQ(policy_headroom(5 * GiB, 256 * MiB, 300 * MiB, 100 * MiB),
		  100 * MiB, "over the limit but inactive");
	ASSERT_EQ(policy_headroom(5 * GiB, 256 * MiB, 100 * MiB, UINT64_MAX),
		  256 * MiB, "hostile inactive capped at usage/limit");
}

/* The cases the Python package's rule is tested on (ramcache.headroom). */
TEST(headroom_gives_what_the_shared_cases_say)
{
	const char *root = getenv("RAMCACHE_ROOT");
	unsigned long long mem, usage, inactive, mapped, want, got, lim;
	char path[4096], line[512], limit[32];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/fixtures/headroom.txt",
		 root ? root : ".");
	f = fopen(path, "re");
	if (!ASSERT_TRUE(f != NULL, path))
		return;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%llu %31s %llu %llu %llu %llu", &mem, limit,
			   &usage, &inactive, &mapped, &want) != 6) {
			FAIL_AT("unreadable case: %s", line);
			break;
		}
		lim = strcmp(limit, "max") ? strtoull(limit, NULL, 10)
					   : UINT64_MAX;
		got = policy_headroom(mem, lim, usage,
				      policy_reclaimable(inactive, mapped));
		if (got != want) {
			FAIL_AT("%s: got %llu", line, got);
			break;
		}
		n++;
	}
	fclose(f);
	ASSERT_GE(n, 15, "cases read");
}

TEST(thresholds_default)
{
	struct rc_thresholds t;

	policy_thresholds_default(8 * GiB, &t);
	ASSERT_EQ(t.headroom_min, 2 * GiB, "8 GiB: 2 GiB floor");
	ASSERT_EQ(t.inactive_min, 4 * GiB, "8 GiB: 2x");
	policy_thresholds_default(64 * GiB, &t);
	ASSERT_EQ(t.headroom_min, 64 * GiB * 10 / 100, "64 GiB: 10%");
	ASSERT_EQ(t.inactive_min, 2 * (64 * GiB * 10 / 100), "64 GiB: 2x");
	policy_thresholds_default(256 * GiB, &t);
	ASSERT_EQ(t.headroom_min, 10 * GiB, "256 GiB: 10 GiB ceiling");
	ASSERT_EQ(t.inactive_min, 20 * GiB, "256 GiB: 2x");
	policy_thresholds_default(2 * GiB, &t);
	ASSERT_EQ(t.headroom_min, 2 * GiB, "tiny box keeps the floor");
	ASSERT_EQ(t.inactive_min, 2 * GiB, "half of RAM < headroom: equal");
	policy_thresholds_default(UINT64_MAX, &t);
	ASSERT_EQ(t.headroom_min, 10 * GiB, "hostile total");
	ASSERT_EQ(t.inactive_min, 20 * GiB, "hostile total 2x");
}

TEST(thresholds_scale_cgroup)
{
	struct rc_thresholds t;

	policy_thresholds_default(32 * GiB, &t);
	policy_thresholds_scale(2 * GiB, &t);
	ASSERT_EQ(t.headroom_min, 2 * GiB / 25, "4% of 2 GiB");
	ASSERT_EQ(t.inactive_min, 2 * GiB / 25 * 2, "2x");
	policy_thresholds_default(32 * GiB, &t);
	policy_thresholds_scale(32 * MiB, &t);
	ASSERT_EQ(t.headroom_min, 16 * MiB, "floor 16 MiB");
	ASSERT_EQ(t.inactive_min, 32 * MiB, "2x floor");
	policy_thresholds_default(32 * GiB, &t);
	policy_thresholds_scale(128 * GiB, &t);
	ASSERT_EQ(t.headroom_min, 32 * GiB * 10 / 100, "big cgroup: default");
	policy_thresholds_scale(RC_UNLIMITED, &t);
	ASSERT_EQ(t.headroom_min, 32 * GiB * 10 / 100, "unlimited: default");
	t.headroom_min = 3 * GiB;
	t.inactive_min = 1 * GiB;
	policy_thresholds_fix(&t);
	ASSERT_EQ(t.inactive_min, 3 * GiB, "inactive_min >= headroom_min");
}

/* The thresholds in force for each mode and flag combination. */
#define IN(mem, cg, hs, h, is, i)                                     \
	{                                                             \
		.mem_total = mem, .cg_limit = cg, .headroom_set = hs, \
		.headroom = h, .inactive_set = is, .inactive = i      \
	}

TEST(thresholds_resolve_table)
{
	static const struct {
		const char *what;
		struct rc_threshold_in in;
		uint64_t headroom_min, inactive_min;
	} rows[] = {
		{ "system, defaults",
		  IN(32 * GiB, RC_UNLIMITED, false, 0, false, 0), 3435973836,
		  6871947672 },
		{ "system, --headroom alone: inactive 2x",
		  IN(32 * GiB, RC_UNLIMITED, true, 1 * GiB, false, 0), 1 * GiB,
		  2 * GiB },
		{ "system, --inactive alone",
		  IN(32 * GiB, RC_UNLIMITED, false, 0, true, 8 * GiB),
		  3435973836, 8 * GiB },
		{ "system, --inactive below default headroom: raised",
		  IN(32 * GiB, RC_UNLIMITED, false, 0, true, 1 * GiB),
		  3435973836, 3435973836 },
		{ "system, both",
		  IN(32 * GiB, RC_UNLIMITED, true, GiB, true, 3 * GiB), 1 * GiB,
		  3 * GiB },
		{ "--pid, no cgroup limit: as system",
		  IN(8 * GiB, RC_UNLIMITED, false, 0, false, 0), 2 * GiB,
		  4 * GiB },
		{ "--pid in a 2 GiB cgroup: 4%",
		  IN(32 * GiB, 2 * GiB, false, 0, false, 0), 2 * GiB / 25,
		  2 * GiB / 25 * 2 },
		{ "--pid in a 256 MiB cgroup: floor",
		  IN(32 * GiB, 256 * MiB, false, 0, false, 0), 16 * MiB,
		  32 * MiB },
		{ "--pid in a 32 MiB cgroup: floor",
		  IN(32 * GiB, 32 * MiB, false, 0, false, 0), 16 * MiB,
		  32 * MiB },
		{ "cgroup-limited, --headroom: not scaled, 2x",
		  IN(32 * GiB, 256 * MiB, true, 100 * MiB, false, 0), 100 * MiB,
		  200 * MiB },
		{ "cgroup-limited, --inactive only: headroom scaled",
		  IN(32 * GiB, 2 * GiB, false, 0, true, 150 * MiB),
		  2 * GiB / 25, 150 * MiB },
		{ "cgroup-limited, --inactive 0: raised to headroom",
		  IN(32 * GiB, 2 * GiB, false, 0, true, 0), 2 * GiB / 25,
		  2 * GiB / 25 },
		{ "hostile --headroom: 2x saturates",
		  IN(32 * GiB, RC_UNLIMITED, true, UINT64_MAX, false, 0),
		  UINT64_MAX, UINT64_MAX },
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct rc_thresholds t;

		policy_thresholds_resolve(&rows[i].in, &t);
		ASSERT_TRUE(t.headroom_min == rows[i].headroom_min,
			    rows[i].what);
		ASSERT_TRUE(t.inactive_min == rows[i].inactive_min,
			    rows[i].what);
	}
}

/* ---------------------------------------------------------------- */

TEST(score_formula)
{
	struct rc_entry e = { .id = 1, .bytes = GiB, .used_generation = 8 };

	/* 1.3^2 x (bytes + 0.05), bytes in bytes as upstream. */
	ASSERT_NEAR(policy_score(&e, 10, RC_POLICY_RAM), 1.69 * (GiB + 0.05),
		    1e-12, "age 2");
	ASSERT_NEAR(policy_score(&e, 8, RC_POLICY_RAM), GiB + 0.05, 1e-12,
		    "age 0");
	e.bytes = 0;
	ASSERT_NEAR(policy_score(&e, 9, RC_POLICY_RAM), 1.3 * 0.05, 1e-12,
		    "zero bytes keeps the 0.05 baseline");
	/* Cost: divided by recompute seconds, floored at 1 ms. */
	e.bytes = GiB;
	e.cost_ns = 2 * SEC;
	ASSERT_NEAR(policy_score(&e, 8, RC_POLICY_COST), (GiB + 0.05) / 2,
		    1e-12, "cost 2 s");
	e.cost_ns = 1;
	ASSERT_NEAR(policy_score(&e, 8, RC_POLICY_COST), (GiB + 0.05) / 0.001,
		    1e-12, "cost floored at 1 ms");
	e.cost_ns = 0;
	ASSERT_NEAR(policy_score(&e, 8, RC_POLICY_COST), GiB + 0.05, 1e-12,
		    "unknown cost: RAM score");
}

TEST(age_hostile)
{
	struct rc_entry e = { .id = 1, .bytes = UINT64_MAX };
	double s;

	ASSERT_EQ(policy_entry_age(10, 20), 0, "used in the future: 0");
	ASSERT_EQ(policy_entry_age(10, 7), 3, "age 3");
	ASSERT_EQ(policy_entry_age(UINT64_MAX, 0), RC_AGE_CAP, "capped");
	e.used_generation = 0;
	s = policy_score(&e, UINT64_MAX, RC_POLICY_RAM);
	ASSERT_TRUE(isfinite(s) && s > 0, "huge age x huge bytes finite");
	e.cost_ns = UINT64_MAX;
	s = policy_score(&e, UINT64_MAX, RC_POLICY_COST);
	ASSERT_TRUE(isfinite(s) && s > 0, "huge cost finite");
	e.bytes = 0;
	s = policy_score(&e, UINT64_MAX, RC_POLICY_COST);
	ASSERT_TRUE(isfinite(s) && s >= 0, "zero bytes huge cost finite");
}

/*
 * A checkpoint of 2 GiB that loads in 10 s, used two prompts ago, outlives
 * an output of 200 MiB nobody read for five (1.69 x 2 GiB / 10 s = 346 MiB
 * against 3.71 x 200 MiB = 743 MiB); unknown, its reload puts it first.
 */
TEST(a_model_dear_to_reload_outlives_an_unread_output)
{
	struct rc_entry model = { .id = 1,
				  .bytes = 2 * GiB,
				  .used_generation = 8,
				  .cost_ns = 10000000000ULL,
				  .flags = RAMCACHE_F_MODEL };
	struct rc_entry output = { .id = 2,
				   .bytes = 200 * MiB,
				   .used_generation = 5 };

	ASSERT_TRUE(policy_entry_cmp(&output, &model, 10, RC_POLICY_RAM) < 0,
		    "the output goes first");
	model.cost_ns = 0;
	ASSERT_TRUE(policy_entry_cmp(&model, &output, 10, RC_POLICY_RAM) < 0,
		    "a model of unknown reload: old models first");
	model.cost_ns = 1;
	ASSERT_TRUE(policy_entry_cmp(&model, &output, 10, RC_POLICY_RAM) < 0,
		    "a reload under a second counts as one");
}

/*
 * A forecast or the inactive reserve never takes an entry under 1 MiB (it
 * frees nothing worth its recompute); a headroom short now takes one only
 * when it makes the difference: the big entries cannot cover the deficit
 * and the small ones close what they leave. The small one ranks first
 * here (far older), so only that rule keeps it.
 */
TEST(tiny_entries_go_only_when_they_make_the_difference)
{
	struct rc_entry t[] = {
		{ .id = 1, .bytes = 240 * 1024 },
		{ .id = 2, .bytes = 64 * MiB, .used_generation = 30 }
	};
	struct rc_domain_member m = { .entries = t,
				      .nr_entries = 2,
				      .generation = 40,
				      .weight = 1,
				      .spare_below = RC_TINY_BYTES };
	struct rc_plan forecast = { .evict = true,
				    .reason = RAMCACHE_REASON_FORECAST };
	struct rc_plan now = { .evict = true,
			       .reason = RAMCACHE_REASON_HEADROOM };
	struct rc_pick out[2];
	uint64_t covered;

	m.min_bytes = policy_min_bytes(&forecast);
	ASSERT_EQ(policy_select_domain(&m, 1, 64 * MiB + 100 * 1024,
				       RC_PHASE_HEADROOM, RC_POLICY_RAM, out, 2,
				       &covered),
		  1, "a forecast: the big one only");
	ASSERT_EQ(out[0].idx, 1, "the big one");
	m.min_bytes = policy_min_bytes(&now);
	ASSERT_EQ(policy_select_domain(&m, 1, 64 * MiB + 100 * 1024,
				       RC_PHASE_HEADROOM, RC_POLICY_RAM, out, 2,
				       &covered),
		  2, "short now, and the small one closes the gap");
	ASSERT_EQ(out[0].idx, 0, "the small one ranks first");
	ASSERT_EQ(policy_select_domain(&m, 1, 100 * MiB, RC_PHASE_HEADROOM,
				       RC_POLICY_RAM, out, 2, &covered),
		  1, "short by more than both hold: the small one stays");
	ASSERT_EQ(out[0].idx, 1, "the big one");
	ASSERT_EQ(policy_select_domain(&m, 1, 10 * MiB, RC_PHASE_HEADROOM,
				       RC_POLICY_RAM, out, 2, &covered),
		  1, "the big one covers it: the small one stays");
	ASSERT_EQ(out[0].idx, 1, "the big one");
	now.reason = RAMCACHE_REASON_RECLAIM;
	ASSERT_EQ(policy_min_bytes(&now), 0, "reclaim: any");
	now.reason = RAMCACHE_REASON_INACTIVE;
	ASSERT_EQ(policy_min_bytes(&now), RC_TINY_BYTES, "inactive reserve");
}

/*
 * The inactive reserve (and a forecast that keeps above headroom_min) is
 * kept with what is cheap to make again: a 3.7 GiB checkpoint whose
 * reload the executor measured (10 s) is not dropped for a few hundred
 * MiB of margin, as a model of unknown reload or an output is. Once the
 * headroom itself is short, the model goes like any inactive entry.
 * (Measured with real ComfyUI at a 16 GiB limit: of the two checkpoints
 * evicted in that phase, one was loaded again three prompts later.)
 */
TEST(the_inactive_reserve_keeps_a_model_with_a_known_reload)
{
	struct rc_entry t[] = {
		{ .id = 1,
		  .bytes = 3740 * MiB,
		  .used_generation = 2,
		  .cost_ns = 10000000000ULL,
		  .flags = RAMCACHE_F_MODEL },
		{ .id = 2, .bytes = 4 * MiB, .used_generation = 3 },
	};
	struct rc_domain_member m = {
		.entries = t, .nr_entries = 2, .generation = 5, .weight = 1
	};
	struct rc_pick out[2];
	uint64_t covered;
	int n;

	ASSERT_FALSE(policy_entry_eligible(&t[0], RC_PHASE_INACTIVE),
		     "a measured model: not for the reserve");
	ASSERT_TRUE(policy_entry_eligible(&t[0], RC_PHASE_HEADROOM),
		    "short now: it may go");
	n = policy_select_domain(&m, 1, 175 * MiB, RC_PHASE_INACTIVE,
				 RC_POLICY_RAM, out, 2, &covered);
	ASSERT_EQ(n, 1, "the reserve: the output only");
	ASSERT_EQ(out[0].idx, 1, "the output");
	ASSERT_EQ(covered, 4 * MiB, "what it holds, short of the deficit");
	n = policy_select_domain(&m, 1, 175 * MiB, RC_PHASE_HEADROOM,
				 RC_POLICY_RAM, out, 2, &covered);
	ASSERT_EQ(n, 1, "headroom short: the model covers it");
	ASSERT_EQ(out[0].idx, 0, "the model");
	t[0].cost_ns = 0;
	ASSERT_TRUE(policy_entry_eligible(&t[0], RC_PHASE_INACTIVE),
		    "a model of unknown reload: old models first, as before");
	t[0].cost_ns = 10000000000ULL;
	t[0].flags = 0;
	ASSERT_TRUE(policy_entry_eligible(&t[0], RC_PHASE_INACTIVE),
		    "an output dear to make again is not a model");
}

/*
 * The order table: each row must be evicted before the next one (all
 * inactive, so one tier). Generation 10.
 */
static const struct rc_entry order_table[] = {
	/* inactive model entries first ("old models first"), by score */
	{ .id = 11,
	  .bytes = 2 * GiB,
	  .used_generation = 9,
	  .flags = RAMCACHE_F_MODEL },
	{ .id = 12,
	  .bytes = 1 * MiB,
	  .used_generation = 10,
	  .flags = RAMCACHE_F_MODEL },
	/* old small beats new big: 1.3^8 x 100 MiB = 816 MiB > 700 MiB */
	{ .id = 21, .bytes = 100 * MiB, .used_generation = 2 },
	{ .id = 22, .bytes = 700 * MiB, .used_generation = 10 },
	/* 1.3 x 500 MiB = 650 MiB */
	{ .id = 23, .bytes = 500 * MiB, .used_generation = 9 },
	/* equal scores: oldest last use first, then lowest id */
	{ .id = 32,
	  .bytes = 10 * MiB,
	  .used_generation = 10,
	  .last_use_ns = 100 },
	{ .id = 31,
	  .bytes = 10 * MiB,
	  .used_generation = 10,
	  .last_use_ns = 200 },
	{ .id = 33,
	  .bytes = 10 * MiB,
	  .used_generation = 10,
	  .last_use_ns = 200 },
	/* one byte and zero age: last */
	{ .id = 40, .bytes = 1, .used_generation = 10 },
};

#define NR(a) (sizeof(a) / sizeof((a)[0]))

TEST(order_table_pairwise)
{
	size_t i, j;
	int r;

	for (i = 0; i < NR(order_table); i++) {
		for (j = 0; j < NR(order_table); j++) {
			r = policy_entry_cmp(&order_table[i], &order_table[j],
					     10, RC_POLICY_RAM);
			if (i < j &&
			    !ASSERT_TRUE(r < 0, "row before later row"))
				printf("# rows %zu, %zu\n", i, j);
			if (i > j &&
			    !ASSERT_TRUE(r > 0, "row after earlier row"))
				printf("# rows %zu, %zu\n", i, j);
			if (i == j)
				ASSERT_EQ(r, 0, "self");
		}
	}
}

TEST(order_table_select)
{
	struct rc_entry shuffled[NR(order_table)];
	uint32_t out[NR(order_table)];
	struct rc_select_req req = {
		.entries = shuffled,
		.nr_entries = NR(order_table),
		.generation = 10,
		.deficit = UINT64_MAX,
		.phase = RC_PHASE_INACTIVE,
	};
	uint64_t covered;
	size_t i;
	int n;

	/* Reverse the table: the output must not depend on input order. */
	for (i = 0; i < NR(order_table); i++)
		shuffled[i] = order_table[NR(order_table) - 1 - i];
	n = policy_select(&req, out, NR(out), &covered);
	if (!ASSERT_EQ(n, NR(order_table), "all picked"))
		return;
	for (i = 0; i < NR(order_table); i++)
		ASSERT_EQ(shuffled[out[i]].id, order_table[i].id, "order");
}

TEST(cost_policy_order)
{
	/* known cost first, by bytes/second; unknown cost after, by RAM */
	static const struct rc_entry rows[] = {
		/* 100 MiB rebuilt in 10 ms: 10 GiB/s, cheapest per byte */
		{ .id = 1, .bytes = 100 * MiB, .cost_ns = 10000000 },
		/* 1 GiB in 1 s */
		{ .id = 2, .bytes = GiB, .cost_ns = SEC },
		/* 4 GiB in 60 s */
		{ .id = 3, .bytes = 4 * GiB, .cost_ns = 60 * SEC },
		/* unknown cost, huge: still after every known one */
		{ .id = 4, .bytes = 10 * GiB },
		{ .id = 5, .bytes = 1 * GiB },
	};
	size_t i;

	for (i = 0; i + 1 < NR(rows); i++)
		ASSERT_TRUE(policy_entry_cmp(&rows[i], &rows[i + 1], 0,
					     RC_POLICY_COST) < 0,
			    "cost order");
	/* The RAM policy ignores cost: the 10 GiB one goes first. */
	ASSERT_TRUE(policy_entry_cmp(&rows[3], &rows[0], 0, RC_POLICY_RAM) < 0,
		    "ram policy");
}

/* ---------------------------------------------------------------- */

static int select_ids(const struct rc_entry *e, size_t n, uint64_t deficit,
		      enum rc_phase phase, uint64_t *ids, uint64_t *covered)
{
	struct rc_select_req req = {
		.entries = e,
		.nr_entries = n,
		.generation = 5,
		.deficit = deficit,
		.phase = phase,
	};
	uint32_t out[32];
	int i, r;

	r = policy_select(&req, out, 32, covered);
	for (i = 0; i < r; i++)
		ids[i] = e[out[i]].id;
	return r;
}

TEST(select_covers_exactly)
{
	static const struct rc_entry e[] = {
		{ .id = 1, .bytes = 100 * MiB, .used_generation = 5 },
		{ .id = 2, .bytes = 300 * MiB, .used_generation = 5 },
		{ .id = 3, .bytes = 200 * MiB, .used_generation = 5 },
	};
	uint64_t ids[32], cov;

	ASSERT_EQ(select_ids(e, 3, 0, RC_PHASE_HEADROOM, ids, &cov), 0,
		  "no deficit, nothing");
	ASSERT_EQ(cov, 0, "covered 0");
	ASSERT_EQ(select_ids(e, 3, 300 * MiB, RC_PHASE_HEADROOM, ids, &cov), 1,
		  "one entry covers 300 MiB");
	ASSERT_EQ(ids[0], 2, "the biggest");
	ASSERT_EQ(cov, 300 * MiB, "covered");
	ASSERT_EQ(select_ids(e, 3, 300 * MiB + 1, RC_PHASE_HEADROOM, ids, &cov),
		  2, "one byte more needs two");
	ASSERT_EQ(ids[1], 3, "then 200 MiB");
	ASSERT_EQ(cov, 500 * MiB, "covered");
	ASSERT_EQ(select_ids(e, 3, 550 * MiB, RC_PHASE_HEADROOM, ids, &cov), 3,
		  "all three");
	ASSERT_EQ(select_ids(e, 3, 10 * GiB, RC_PHASE_HEADROOM, ids, &cov), 3,
		  "not enough: everything eligible");
	ASSERT_EQ(cov, 600 * MiB, "covered all");
}

TEST(select_phase_rules)
{
	static const struct rc_entry e[] = {
		{ .id = 1, .bytes = 4 * GiB, .flags = RAMCACHE_F_ACTIVE },
		{ .id = 2,
		  .bytes = 100 * MiB,
		  .flags = RAMCACHE_F_ACTIVE,
		  .used_generation = 0 },
		{ .id = 3,
		  .bytes = 512 * MiB,
		  .flags = RAMCACHE_F_ACTIVE,
		  .used_generation = 5 },
		{ .id = 4, .bytes = 10 * MiB, .used_generation = 5 },
		{ .id = 5, .bytes = 50 * GiB, .flags = RAMCACHE_F_PINNED },
		{ .id = 6,
		  .bytes = 50 * GiB,
		  .flags = RAMCACHE_F_PINNED | RAMCACHE_F_ACTIVE |
			   RAMCACHE_F_MODEL },
		{ .id = 7, .bytes = 20 * MiB, .used_generation = 5 },
		{ .id = 8,
		  .bytes = 8 * GiB,
		  .flags = RAMCACHE_F_MODEL | RAMCACHE_F_PINNED },
	};
	uint64_t ids[32], cov;
	int n;

	n = select_ids(e, NR(e), UINT64_MAX, RC_PHASE_INACTIVE, ids, &cov);
	if (ASSERT_EQ(n, 2, "inactive phase: inactive only")) {
		ASSERT_EQ(ids[0], 7, "20 MiB");
		ASSERT_EQ(ids[1], 4, "10 MiB");
	}
	ASSERT_EQ(cov, 30 * MiB, "covered");
	n = select_ids(e, NR(e), UINT64_MAX, RC_PHASE_HEADROOM, ids, &cov);
	if (ASSERT_EQ(n, 5, "headroom phase: all but pinned")) {
		ASSERT_EQ(ids[0], 7, "inactive first");
		ASSERT_EQ(ids[1], 4, "inactive first");
		ASSERT_EQ(ids[2], 1, "then active >= 512 MiB, 4 GiB");
		ASSERT_EQ(ids[3], 3, "then active >= 512 MiB, 512 MiB");
		/* 1.3^5 x 100 MiB = 371 MiB < 512 MiB but small comes last */
		ASSERT_EQ(ids[4], 2, "then any active");
	}
	/* 30 MiB deficit: the two inactive ones, no active one touched */
	n = select_ids(e, NR(e), 30 * MiB, RC_PHASE_HEADROOM, ids, &cov);
	ASSERT_EQ(n, 2, "inactive cover it");
	n = select_ids(e, NR(e), 31 * MiB, RC_PHASE_HEADROOM, ids, &cov);
	ASSERT_EQ(n, 3, "one byte short: one active");
	ASSERT_EQ(ids[2], 1, "the big active");
}

static bool in_flight(uint64_t id, void *ctx)
{
	const uint64_t *set = ctx;

	return id == set[0] || id == set[1];
}

TEST(select_inflight_dups_and_bounds)
{
	static const struct rc_entry e[] = {
		{ .id = 1, .bytes = 300 * MiB },
		{ .id = 2, .bytes = 200 * MiB },
		{ .id = 3, .bytes = 100 * MiB },
		{ .id = 3, .bytes = 100 * MiB }, /* corrupt duplicate */
		{ .id = 0, .bytes = 9 * GiB },	 /* free slot */
		{ .id = 9, .bytes = 0 },	 /* frees nothing */
	};
	uint64_t set[2] = { 1, 42 }, cov;
	struct rc_select_req req = {
		.entries = e,
		.nr_entries = NR(e),
		.deficit = UINT64_MAX,
		.phase = RC_PHASE_HEADROOM,
		.in_flight = in_flight,
		.ctx = set,
	};
	uint32_t out[8];
	int n;

	n = policy_select(&req, out, 8, &cov);
	if (ASSERT_EQ(n, 2, "1 in flight, dup once, id 0 and 0 bytes out")) {
		ASSERT_EQ(e[out[0]].id, 2, "first");
		ASSERT_EQ(e[out[1]].id, 3, "second");
	}
	ASSERT_EQ(cov, 300 * MiB, "covered");
	n = policy_select(&req, out, 1, &cov);
	ASSERT_EQ(n, 1, "out_max bounds the picks");
	req.nr_entries = 0;
	ASSERT_EQ(policy_select(&req, out, 8, &cov), 0, "empty table");
	req.entries = NULL;
	req.nr_entries = 3;
	ASSERT_EQ(policy_select(&req, out, 8, &cov), -EINVAL, "NULL table");
}

TEST(select_hostile_sizes)
{
	static const struct rc_entry e[] = {
		{ .id = 1, .bytes = UINT64_MAX, .used_generation = 0 },
		{ .id = 2, .bytes = UINT64_MAX - 1, .used_generation = 0 },
		{ .id = 3,
		  .bytes = UINT64_MAX,
		  .used_generation = 0,
		  .last_use_ns = 1 },
	};
	struct rc_select_req req = {
		.entries = e,
		.nr_entries = 3,
		.generation = UINT64_MAX,
		.deficit = UINT64_MAX,
		.phase = RC_PHASE_INACTIVE,
	};
	uint32_t out[3];
	uint64_t cov;
	int n;

	n = policy_select(&req, out, 3, &cov);
	ASSERT_EQ(n, 1, "one UINT64_MAX entry covers any deficit");
	ASSERT_EQ(e[out[0]].id, 1, "oldest last use of the two maxima");
	ASSERT_TRUE(cov == UINT64_MAX, "covered saturates");
	req.deficit = 10;
	req.entries = &e[1];
	req.nr_entries = 2;
	n = policy_select(&req, out, 3, &cov);
	ASSERT_EQ(n, 1, "one pick");
	/* Both round to the same double score: oldest last use decides. */
	ASSERT_EQ(out[0], 0, "deterministic tie on near-equal maxima");
}

TEST(select_full_table)
{
	size_t n = RAMCACHE_MAX_ENTRIES, i;
	struct rc_entry *e = calloc(n, sizeof(*e));
	uint32_t *out = calloc(n, sizeof(*out));
	struct rc_select_req req = {
		.entries = e,
		.nr_entries = n,
		.generation = 100,
		.deficit = UINT64_MAX,
		.phase = RC_PHASE_HEADROOM,
	};
	uint64_t cov;
	int r;

	if (!ASSERT_OK_PTR(e, "calloc") || !ASSERT_OK_PTR(out, "calloc"))
		goto out;
	for (i = 0; i < n; i++) {
		e[i].id = i + 1;
		e[i].bytes = 4096 + (i % 7) * 4096;
		e[i].used_generation = i % 101;
		e[i].last_use_ns = (i * 7919) % n;
		e[i].flags = i % 3 ? 0 : RAMCACHE_F_ACTIVE;
	}
	r = policy_select(&req, out, n, &cov);
	ASSERT_EQ(r, n, "every entry");
	for (i = 1; i < (size_t)r; i++)
		if (!ASSERT_TRUE(policy_entry_cmp(&e[out[i - 1]], &e[out[i]],
						  100, RC_POLICY_RAM) < 0,
				 "sorted"))
			break;
	/* The same id everywhere: picked once. */
	for (i = 0; i < n; i++)
		e[i].id = 77;
	r = policy_select(&req, out, n, &cov);
	ASSERT_EQ(r, 1, "one id, one pick");
out:
	free(e);
	free(out);
}

/* ---------------------------------------------------------------- */

static struct rc_pressure eval(struct rc_pressure_in in)
{
	struct rc_pressure out;

	if (!in.thr.headroom_min) {
		in.thr.headroom_min = 2 * GiB;
		in.thr.inactive_min = 4 * GiB;
	}
	if (!in.headroom)
		in.headroom = 100 * GiB;
	policy_pressure_eval(&in, &out);
	return out;
}

TEST(pressure_levels)
{
	struct rc_pressure p;
	char buf[256];

	p = eval((struct rc_pressure_in){ .interval_ns = SEC });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_OK, "quiet");
	ASSERT_EQ(p.reasons, 0, "no reasons");

	p = eval((struct rc_pressure_in){ .kswapd_awake = true });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_WARN, "kswapd");
	ASSERT_EQ(p.reasons, RC_R_KSWAPD, "kswapd bit");

	p = eval((struct rc_pressure_in){ .kswapd_awake = true,
					  .direct_reclaims = 1,
					  .headroom = 3 * GiB });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_HIGH, "direct reclaim");
	ASSERT_EQ(p.reasons, RC_R_KSWAPD | RC_R_DIRECT_RECLAIM | RC_R_HEADROOM,
		  "three reasons");
	policy_reasons_format(p.reasons, buf, sizeof(buf));
	ASSERT_STREQ(buf, "kswapd,direct_reclaim,headroom", "names");

	p = eval((struct rc_pressure_in){ .memcg_reclaims = 3 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_HIGH, "memcg reclaim");

	/* 3000 pages over 1 s: warn; the same over 100 ms: high. */
	p = eval((struct rc_pressure_in){ .interval_ns = SEC,
					  .refault_file = 3000 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_WARN, "refault file 3000/s");
	p = eval((struct rc_pressure_in){ .interval_ns = SEC / 10,
					  .refault_file = 3000 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_HIGH, "refault file 30000/s");
	p = eval((struct rc_pressure_in){ .interval_ns = SEC,
					  .refault_file = 2559 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_OK, "just under");
	p = eval((struct rc_pressure_in){ .refault_anon = 256 });
	ASSERT_EQ(p.reasons, RC_R_REFAULT_ANON, "refault anon");
	p = eval((struct rc_pressure_in){ .swap_in = 2560, .swap_out = 300 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_HIGH, "swap in");
	ASSERT_EQ(p.reasons, RC_R_SWAP_IN | RC_R_SWAP_OUT, "swap bits");
	p = eval((struct rc_pressure_in){ .major_faults = 150 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_WARN, "major faults");
}

TEST(pressure_psi_headroom_eta)
{
	struct rc_pressure p;

	p = eval((struct rc_pressure_in){ .psi_some_avg10 = 50,
					  .psi_full_avg10 = 50 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_OK, "PSI absent: ignored");
	p = eval((struct rc_pressure_in){ .psi_present = true,
					  .psi_some_avg10 = 6 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_WARN, "some 6%");
	p = eval((struct rc_pressure_in){ .psi_present = true,
					  .psi_some_avg10 = 25,
					  .psi_full_avg10 = 12 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_CRITICAL, "full 12%");
	ASSERT_EQ(p.reasons, RC_R_PSI_SOME | RC_R_PSI_FULL, "psi bits");
	p = eval((struct rc_pressure_in){ .psi_present = true,
					  .psi_some_avg10 = NAN,
					  .psi_full_avg10 = NAN });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_OK, "NaN fires nothing");

	p = eval((struct rc_pressure_in){ .headroom = 3 * GiB });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_WARN, "below inactive_min");
	p = eval((struct rc_pressure_in){ .headroom = GiB });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_HIGH, "below headroom_min");
	p = eval((struct rc_pressure_in){ .headroom = 100 * MiB });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_CRITICAL, "below a quarter");

	p = eval(
		(struct rc_pressure_in){ .has_eta = true, .eta_ns = 20 * SEC });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_WARN, "eta 20 s");
	p = eval((struct rc_pressure_in){ .has_eta = true, .eta_ns = 2 * SEC });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_HIGH, "eta 2 s");
	p = eval((struct rc_pressure_in){ .has_eta = true, .eta_ns = SEC / 2 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_CRITICAL, "eta 0.5 s");
	ASSERT_EQ(p.reasons, RC_R_ETA, "eta bit");
	p = eval((struct rc_pressure_in){ .eta_ns = 0 });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_OK, "no eta, eta_ns ignored");
	p = eval((struct rc_pressure_in){ .cannot_free = true });
	ASSERT_EQ(p.level, RAMCACHE_LEVEL_HIGH, "nothing left to free: high");
	ASSERT_EQ(p.reasons, RC_R_CANNOT_FREE, "cannot_free bit");
}

TEST(reason_names)
{
	char small[10];
	size_t n;

	ASSERT_STREQ(policy_reason_name(RC_R_KSWAPD), "kswapd", "kswapd");
	ASSERT_STREQ(policy_reason_name(RC_R_MEMCG_RECLAIM), "memcg_reclaim",
		     "m");
	ASSERT_STREQ(policy_reason_name(RC_R_PSI_FULL), "psi_full", "psi_full");
	ASSERT_STREQ(policy_reason_name(RC_R_ETA), "eta", "eta");
	ASSERT_TRUE(policy_reason_name(0) == NULL, "0");
	ASSERT_STREQ(policy_reason_name(RC_R_CANNOT_FREE), "cannot_free", "cf");
	ASSERT_TRUE(policy_reason_name(RC_R_CANNOT_FREE << 1) == NULL,
		    "unknown bit");
	ASSERT_TRUE(policy_reason_name(3) == NULL, "two bits");
	n = policy_reasons_format(RC_R_REFAULT_FILE | RC_R_SWAP_OUT, small,
				  sizeof(small));
	ASSERT_EQ(n, strlen("refault_file,swap_out"), "needed length");
	ASSERT_STREQ(small, "refault_f", "truncated, terminated");
	n = policy_reasons_format(0, small, sizeof(small));
	ASSERT_EQ(n, 0, "none");
	ASSERT_STREQ(small, "", "empty");
	ASSERT_STREQ(policy_level_name(RAMCACHE_LEVEL_CRITICAL), "critical",
		     "l");
	ASSERT_STREQ(policy_level_name((enum ramcache_level)9), "unknown",
		     "l9");
}

/* ---------------------------------------------------------------- */

TEST(parse_size)
{
	static const struct {
		const char *s;
		uint64_t total;
		int err;
		uint64_t want;
	} cases[] = {
		{ "512M", 0, 0, 512 * MiB },
		{ "2G", 0, 0, 2 * GiB },
		{ "1.5GiB", 0, 0, 3 * GiB / 2 },
		{ "1.5gb", 0, 0, 3 * GiB / 2 },
		{ ".5G", 0, 0, GiB / 2 },
		{ "4k", 0, 0, 4096 },
		{ "1T", 0, 0, 1ULL << 40 },
		{ "1048576", 0, 0, 1048576 },
		{ "100B", 0, 0, 100 },
		{ "0", 0, 0, 0 },
		{ "18446744073709551615", 0, 0, UINT64_MAX },
		{ "10%", 16 * GiB, 0, 16 * GiB / 10 },
		{ "12.5%", 8 * GiB, 0, GiB },
		{ "100%", 3, 0, 3 },
		{ "10%", 0, -EINVAL, 0 },
		{ "", 0, -EINVAL, 0 },
		{ "abc", 0, -EINVAL, 0 },
		{ "-1", 0, -EINVAL, 0 },
		{ "+1", 0, -EINVAL, 0 },
		{ "1.5.3", 0, -EINVAL, 0 },
		{ "12 M", 0, -EINVAL, 0 },
		{ "1 ", 0, -EINVAL, 0 },
		{ "12 B", 0, -EINVAL, 0 },
		{ " 12M", 0, -EINVAL, 0 },
		{ "1X", 0, -EINVAL, 0 },
		{ "1MM", 0, -EINVAL, 0 },
		{ "inf", 0, -EINVAL, 0 },
		{ "nan", 0, -EINVAL, 0 },
		{ "0x10", 0, -EINVAL, 0 },
		{ "1e9", 0, -EINVAL, 0 },
		{ "%", 100, -EINVAL, 0 },
		{ ".", 0, -EINVAL, 0 },
		{ "18446744073709551616", 0, -ERANGE, 0 },
		{ "16777216T", 0, -ERANGE, 0 },
		{ "99999999999999999999999", 0, -ERANGE, 0 },
	};
	size_t i;

	for (i = 0; i < NR(cases); i++) {
		uint64_t v = 12345;
		int err = units_parse_size(cases[i].s, cases[i].total, &v);

		if (!ASSERT_EQ(err, cases[i].err, cases[i].s))
			continue;
		if (!err && !ASSERT_TRUE(v == cases[i].want, cases[i].s))
			printf("# got %" PRIu64 "\n", v);
	}
	ASSERT_EQ(units_parse_size(NULL, 0, NULL), -EINVAL, "NULL");
}

TEST(parse_duration)
{
	static const struct {
		const char *s;
		int err;
		uint64_t want;
	} cases[] = {
		{ "500ms", 0, 500000000ULL },
		{ "2s", 0, 2 * SEC },
		{ "1.5", 0, 3 * SEC / 2 },
		{ "250us", 0, 250000 },
		{ "100ns", 0, 100 },
		{ "1m", 0, 60 * SEC },
		{ "2min", 0, 120 * SEC },
		{ "0.001ms", 0, 1000 },
		{ "", -EINVAL, 0 },
		{ "s", -EINVAL, 0 },
		{ "1h", -EINVAL, 0 },
		{ "-1s", -EINVAL, 0 },
		{ "1 s", -EINVAL, 0 },
		{ "1.5.s", -EINVAL, 0 },
		{ "18446744073709551615s", -ERANGE, 0 },
	};
	size_t i;

	for (i = 0; i < NR(cases); i++) {
		uint64_t v = 12345;
		int err = units_parse_duration(cases[i].s, &v);

		if (!ASSERT_EQ(err, cases[i].err, cases[i].s))
			continue;
		if (!err)
			ASSERT_TRUE(v == cases[i].want, cases[i].s);
	}
}

TEST_MAIN()
