// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The sampler: headroom read from (fixture) /proc, moved between reads by
 * the target's RSS changes, every figure handed to the outlook.
 */
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

TEST_MAIN()
