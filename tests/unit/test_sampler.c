// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The sampler: headroom read from (fixture) /proc, moved between reads by
 * the target's RSS changes, every figure handed to the outlook; targets
 * that share a cgroup read its files (and meminfo) once a pass.
 */
#include "executors/targets.h"
#include "proc/sampler.h"
#include "test.h"

#define MS    NSEC_PER_MSEC
#define MiB   RC_MIB
#define T0    (1000 * NSEC_PER_SEC)
#define AVAIL (6291456ULL * 1024) /* MemAvailable of tests/fixtures/proc */

TEST(a_read_sets_headroom_from_meminfo)
{
	struct sampler s;

	sampler_init(&s, 0, fixture("proc"), fixture("cgroup-v2"));
	ASSERT_FALSE(s.has_cg, "the machine: no cgroup");
	ASSERT_FALSE(s.sampled, "nothing read yet");
	if (!ASSERT_OK(sampler_read(&s, T0), "read"))
		return;
	ASSERT_TRUE(s.sampled, "read");
	ASSERT_EQ(s.headroom, AVAIL, "MemAvailable");
	sampler_init(&s, 0, fixture("nonexistent"), NULL);
	ASSERT_EQ(sampler_read(&s, T0), -ENOENT, "no meminfo");
	ASSERT_FALSE(s.sampled, "a failed read is no sample");
}

TEST(rss_moves_headroom_between_reads)
{
	struct sampler s;

	sampler_init(&s, 0, fixture("proc"), NULL);
	sampler_rss(&s, T0, 100 * MiB);
	ASSERT_EQ(s.rss, 100 * MiB, "rss kept");
	ASSERT_EQ(s.headroom, 0, "no read yet: no estimate");
	if (!ASSERT_OK(sampler_read(&s, T0), "read"))
		return;
	sampler_rss(&s, T0 + 10 * MS, 300 * MiB);
	ASSERT_EQ(s.headroom, AVAIL - 200 * MiB, "grew 200 MiB");
	sampler_rss(&s, T0 + 20 * MS, 50 * MiB);
	ASSERT_EQ(s.headroom, AVAIL + 50 * MiB, "shrank below the read");
	sampler_rss(&s, T0 + 30 * MS, 100 * MiB + AVAIL + 1);
	ASSERT_EQ(s.headroom, 0, "saturates at 0");
	if (!ASSERT_OK(sampler_read(&s, T0 + 40 * MS), "read again"))
		return;
	ASSERT_EQ(s.headroom, AVAIL, "a read resets the estimate");
}

TEST(a_steady_climb_is_seen_in_the_view)
{
	struct sampler s;
	struct rc_view v;

	sampler_init(&s, 0, fixture("proc"), NULL);
	sampler_rss(&s, T0, 10 * MiB);
	if (!ASSERT_OK(sampler_read(&s, T0), "read"))
		return;
	/* 100 MiB a second out of headroom, for 6 s */
	for (int i = 1; i <= 60; i++)
		sampler_rss(&s, T0 + i * 100 * MS, 10 * MiB + i * 10 * MiB);
	sampler_view(&s, T0 + 6000 * MS, NSEC_PER_SEC, &v);
	ASSERT_EQ(v.headroom, AVAIL - 600 * MiB, "the headroom now");
	ASSERT_TRUE(v.trend < 0, "shrinking");
	ASSERT_LE(v.low, v.headroom, "expected no higher than now");
}

#define APP_USAGE "cgroup-v1/memory/app/memory.usage_in_bytes"

/*
 * Eight targets in one cgroup (/app/worker under /app's 1 GiB limit, pid
 * 1234 of the fixtures): the first one's read at a pass serves the other
 * seven and the machine's sampler, so a file changed after it is seen by
 * none of them until the next pass. Read each, all eight would have seen
 * the change.
 */
TEST(targets_sharing_a_cgroup_read_it_once_a_pass)
{
	char dir[64], proc[128], cg[128];
	struct targets ts = { 0 };
	struct sampler sys, other;
	uint64_t first;

	if (!ASSERT_TRUE(test_scratch(dir, sizeof(dir), "sampler",
				      "proc cgroup-v1"),
			 "scratch copy"))
		goto out;
	snprintf(proc, sizeof(proc), "%s/proc", dir);
	snprintf(cg, sizeof(cg), "%s/cgroup-v1", dir);
	for (int i = 0; i < 8; i++) {
		ts.t[i] = calloc(1, sizeof(*ts.t[i]));
		sampler_init(&ts.t[i]->sm, 1234, proc, cg);
		ts.n++;
	}
	if (!ASSERT_TRUE(ts.t[0]->sm.has_cg, "its cgroup found"))
		goto out;
	ASSERT_OK(targets_sample(&ts, &ts.t[0]->sm, T0), "the first reads");
	first = ts.t[0]->sm.headroom;
	ASSERT_EQ(first, 224 * MiB, "1024 - 900 + 100 MiB under /app");
	test_put(dir, APP_USAGE, "838860800\n"); /* 800 MiB */
	for (int i = 1; i < 8; i++) {
		ASSERT_OK(targets_sample(&ts, &ts.t[i]->sm, T0), "the others");
		ASSERT_EQ(ts.t[i]->sm.headroom, first, "the first's read");
		ASSERT_EQ(ts.t[i]->sm.cs.usage, 900 * MiB, "not read again");
	}
	sampler_init(&sys, 0, proc, cg);
	ASSERT_OK(targets_sample(&ts, &sys, T0), "the machine");
	ASSERT_EQ(sys.mi.mem_available, AVAIL, "meminfo as the first read it");
	/* another cgroup (the root, pid 2002) is its own read */
	sampler_init(&other, 2002, proc, cg);
	ASSERT_FALSE(sampler_covers(&ts.t[0]->sm, &other, T0), "root cgroup");
	/* the next pass reads again */
	ASSERT_FALSE(sampler_covers(&ts.t[0]->sm, &ts.t[1]->sm, T0 + MS),
		     "a later pass");
	ASSERT_OK(targets_sample(&ts, &ts.t[1]->sm, T0 + MS), "next pass");
	ASSERT_EQ(ts.t[1]->sm.headroom, first + 100 * MiB, "the change seen");
	ASSERT_EQ(ts.t[1]->sm.read_ns, T0 + MS, "read at that pass");
out:
	for (int i = 0; i < 8; i++)
		free(ts.t[i]);
	test_scratch_gone(dir);
}

TEST_MAIN()
