// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pressure_watch_update() on the fixture /proc (whose counters do not move): rates
 * from the target's cgroup counters, a fresh start for a new cgroup, and
 * when a pressure event is due. The cgroup's PSI (calm) stands in for the
 * fixture's system PSI, which is high.
 */
#include "executors/pressure_watch.h"
#include "test.h"

#define SEC 1000000000ULL

/* A watch on the fixture /proc and a target in cgroup @cg (inode 42). */
static void ctx(struct pressure_watch *lw, struct pressure_watch_ctx *c,
		struct rc_cgroup_mem *cg)
{
	pressure_watch_init(lw, fixture("proc"));
	memset(c, 0, sizeof(*c));
	c->headroom = 8ULL << 30;
	c->thr.headroom_min = 1ULL << 30;
	c->thr.inactive_min = 2ULL << 30;
	c->cg = cg;
	c->cg_ino = 42;
	cg->psi.available = true;
}

TEST(cgroup_swap_and_refaults_are_the_rates)
{
	struct rc_cgroup_mem cg = { .ev = { .has_refault = true,
					    .has_swap = true } };
	struct pressure_watch lw;
	struct pressure_watch_ctx c;

	ctx(&lw, &c, &cg);
	ASSERT_EQ(pressure_watch_update(&lw, 1 * SEC, &c), 0, "baseline, ok");
	cg.ev.pswpin = 1000;
	cg.ev.pswpout = 500;
	cg.ev.refault_anon = 1000;
	ASSERT_EQ(pressure_watch_update(&lw, 2 * SEC, &c), LEVEL_CHANGED,
		  "storm");
	ASSERT_EQ(lw.cur.level, RAMCACHE_LEVEL_WARN, "1000 pages/s is warn");
	ASSERT_TRUE(lw.cur.reasons & RC_R_SWAP_IN, "swap_in");
	ASSERT_TRUE(lw.cur.reasons & RC_R_SWAP_OUT, "swap_out");
	ASSERT_TRUE(lw.cur.reasons & RC_R_REFAULT_ANON, "refault_anon");
	ASSERT_TRUE(lw.swap_memcg && lw.refault_memcg, "from the memcg");
	ASSERT_TRUE(lw.cur.rates.swap_in > 999 && lw.cur.rates.swap_in < 1001,
		    "rate");
}

TEST(without_swap_counters_the_system_is_used)
{
	struct rc_cgroup_mem cg = { .ev = { .has_refault = true } };
	struct pressure_watch lw;
	struct pressure_watch_ctx c;

	ctx(&lw, &c, &cg);
	pressure_watch_update(&lw, 1 * SEC, &c);
	cg.ev.pswpin = 100000; /* not a counter this kernel has */
	ASSERT_EQ(pressure_watch_update(&lw, 2 * SEC, &c), 0,
		  "fixture vmstat still");
	ASSERT_FALSE(lw.swap_memcg, "system swap");
	ASSERT_EQ(lw.cur.rates.swap_in, 0, "no swap-in");
}

TEST(v2_without_pswpin_uses_swap_current_and_anon_refaults)
{
	/* Debian 12's 6.1: memory.stat has no pswpin, memory.swap.current is */
	struct rc_cgroup_mem cg = { .ev = { .has_refault = true,
					    .has_swap_bytes = true } };
	struct pressure_watch lw;
	struct pressure_watch_ctx c;

	ctx(&lw, &c, &cg);
	pressure_watch_update(&lw, 1 * SEC, &c);
	cg.ev.swap_bytes = 4000ULL * 4096; /* 4000 pages out in 1 s */
	cg.ev.refault_anon = 300;
	ASSERT_EQ(pressure_watch_update(&lw, 2 * SEC, &c), LEVEL_CHANGED,
		  "storm");
	ASSERT_TRUE(lw.swap_memcg, "the cgroup's swap");
	ASSERT_EQ(lw.cur.level, RAMCACHE_LEVEL_HIGH, "4000 pages/s out: high");
	ASSERT_TRUE(lw.cur.reasons & RC_R_SWAP_OUT, "swap_out");
	ASSERT_TRUE(lw.cur.rates.swap_out > 3999 &&
			    lw.cur.rates.swap_out < 4001,
		    "out rate");
	ASSERT_TRUE(lw.cur.rates.swap_in > 299 && lw.cur.rates.swap_in < 301,
		    "in rate");
	/* swap freed is not swap-in */
	cg.ev.swap_bytes = 0;
	pressure_watch_update(&lw, 3 * SEC, &c);
	ASSERT_EQ(lw.cur.rates.swap_out, 0, "shrinking swap is no swap-out");
}

TEST(cgroup_limit_hits_are_memcg_reclaim)
{
	struct rc_cgroup_mem cg = { .ev = { .has_refault = true,
					    .has_limit_events = true } };
	struct pressure_watch lw;
	struct pressure_watch_ctx c;

	ctx(&lw, &c, &cg);
	cg.ev.max = 7; /* hits before the agent started are not news */
	ASSERT_EQ(pressure_watch_update(&lw, 1 * SEC, &c), 0, "baseline");
	cg.ev.high = 2;
	ASSERT_EQ(pressure_watch_update(&lw, 2 * SEC, &c), LEVEL_CHANGED,
		  "high hit");
	ASSERT_EQ(lw.cur.level, RAMCACHE_LEVEL_HIGH, "memcg reclaim is high");
	ASSERT_TRUE(lw.cur.reasons & RC_R_MEMCG_RECLAIM, "memcg_reclaim");
	ASSERT_EQ(lw.in.memcg_reclaims, 2, "two hits");
	/* BPF saw more stalls than the cgroup counted: the larger wins */
	c.memcg_stalls = 5;
	cg.ev.max = 8;
	pressure_watch_update(&lw, 3 * SEC, &c);
	ASSERT_EQ(lw.in.memcg_reclaims, 5, "not added twice");
	pressure_watch_update(&lw, 4 * SEC, &c);
	ASSERT_EQ(lw.cur.level, RAMCACHE_LEVEL_OK, "quiet again");
}

TEST(another_cgroup_starts_afresh)
{
	struct rc_cgroup_mem cg = { .ev = { .has_refault = true } };
	struct pressure_watch lw;
	struct pressure_watch_ctx c;

	ctx(&lw, &c, &cg);
	pressure_watch_update(&lw, 1 * SEC, &c);
	/* --match found a new process in a busy cgroup: no jump */
	cg.ev.refault_anon = 1 << 20;
	c.cg_ino = 43;
	ASSERT_EQ(pressure_watch_update(&lw, 2 * SEC, &c), 0, "no spike");
	ASSERT_EQ(lw.cur.rates.refault_anon, 0, "baseline of the new cgroup");
}

TEST(new_reason_at_the_same_level_is_reported_once)
{
	struct rc_cgroup_mem cg = { .ev = { .has_refault = true,
					    .has_swap = true } };
	struct pressure_watch lw;
	struct pressure_watch_ctx c;

	ctx(&lw, &c, &cg);
	pressure_watch_update(&lw, 1 * SEC, &c);
	c.headroom = 512ULL << 20; /* below headroom_min: high */
	ASSERT_EQ(pressure_watch_update(&lw, 2 * SEC, &c), LEVEL_CHANGED,
		  "high");
	cg.ev.pswpout = 1000;
	ASSERT_EQ(pressure_watch_update(&lw, 3 * SEC, &c), LEVEL_NEW_REASON,
		  "swap");
	ASSERT_EQ(lw.cur.level, RAMCACHE_LEVEL_HIGH, "still high");
	ASSERT_EQ(pressure_watch_update(&lw, 4 * SEC, &c), 0,
		  "swap gone: quiet");
	cg.ev.pswpout = 2000;
	ASSERT_EQ(pressure_watch_update(&lw, 5 * SEC, &c), 0,
		  "swap again: known");
}

TEST_MAIN()
