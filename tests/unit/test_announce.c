// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * An executor's announcement of an allocation: counted less what its RSS
 * grew by since it was first read, capped, and forgotten when withdrawn,
 * zero or stale in either direction (the stamp is untrusted).
 */
#include "core/announce.h"
#include "core/units.h"
#include "ramcache/control.h"
#include "test.h"

#define MiB (1024ULL * 1024)
#define T0  (1000 * NSEC_PER_SEC)

TEST(nothing_announced_counts_nothing)
{
	struct rc_announce a = { 0 };

	ASSERT_FALSE(announce_read(&a, 0, 0, 100 * MiB, T0), "no change");
	ASSERT_EQ(announce_left(&a, 100 * MiB, 0), 0, "none");
	ASSERT_FALSE(announce_read(&a, T0, 0, 100 * MiB, T0), "0 bytes");
	ASSERT_FALSE(announce_read(&a, 0, 64 * MiB, 100 * MiB, T0), "no stamp");
	ASSERT_EQ(announce_left(&a, 100 * MiB, 0), 0, "still none");
}

TEST(what_the_rss_grew_by_is_no_longer_to_come)
{
	struct rc_announce a = { 0 };

	ASSERT_TRUE(announce_read(&a, T0, 900 * MiB, 300 * MiB, T0), "new");
	ASSERT_EQ(announce_left(&a, 300 * MiB, 0), 900 * MiB, "all to come");
	ASSERT_EQ(announce_left(&a, 700 * MiB, 0), 500 * MiB, "400 taken");
	ASSERT_EQ(announce_left(&a, 2000 * MiB, 0), 0, "all taken");
	/* an eviction while it loads: the RSS fell, the whole is to come */
	ASSERT_EQ(announce_left(&a, 100 * MiB, 0), 900 * MiB, "no more");
	ASSERT_FALSE(announce_read(&a, T0, 900 * MiB, 700 * MiB, T0 + 1),
		     "the same one: its base stays");
	ASSERT_EQ(announce_left(&a, 700 * MiB, 0), 500 * MiB, "base kept");
}

TEST(memory_freed_while_it_waits_does_not_count_as_taken)
{
	struct rc_announce a = { 0 };

	announce_read(&a, T0, 200 * MiB, 350 * MiB, T0);
	announce_rss(&a, 286 * MiB); /* a command freed 64 MiB */
	ASSERT_EQ(announce_left(&a, 286 * MiB, 0), 200 * MiB, "all to come");
	announce_rss(&a, 370 * MiB);
	ASSERT_EQ(announce_left(&a, 370 * MiB, 0), 116 * MiB, "from the low");
	announce_read(&a, 0, 0, 0, T0 + 1);
	announce_rss(&a, 1 * MiB);
	ASSERT_EQ(a.rss0, 0, "none in force: nothing moves");
}

TEST(a_new_stamp_takes_the_rss_as_its_base)
{
	struct rc_announce a = { 0 };

	announce_read(&a, T0, 900 * MiB, 300 * MiB, T0);
	ASSERT_TRUE(announce_read(&a, T0 + NSEC_PER_SEC, 600 * MiB, 1200 * MiB,
				  T0 + NSEC_PER_SEC),
		    "the next load");
	ASSERT_EQ(announce_left(&a, 1200 * MiB, 0), 600 * MiB, "from here");
}

TEST(withdrawn_or_stale_counts_nothing)
{
	struct rc_announce a = { 0 };
	uint64_t ttl = RAMCACHE_EXPECT_TTL_NS;

	announce_read(&a, T0, 900 * MiB, 0, T0);
	ASSERT_TRUE(announce_read(&a, 0, 0, 0, T0 + 1), "withdrawn");
	ASSERT_EQ(announce_left(&a, 0, 0), 0, "gone");
	announce_read(&a, T0, 900 * MiB, 0, T0);
	ASSERT_TRUE(announce_read(&a, T0, 900 * MiB, 0, T0 + ttl), "too old");
	ASSERT_EQ(announce_left(&a, 0, 0), 0, "forgotten");
	ASSERT_FALSE(announce_read(&a, T0 + ttl, 900 * MiB, 0, T0),
		     "a stamp far in the future is no better");
	ASSERT_TRUE(announce_read(&a, T0 + ttl - 1, 900 * MiB, 0, T0),
		    "just within the bound, either way");
}

TEST(no_more_than_the_cap)
{
	struct rc_announce a = { 0 };

	announce_read(&a, T0, UINT64_MAX, 0, T0);
	ASSERT_EQ(announce_left(&a, 0, 512 * MiB), 512 * MiB, "capped");
	ASSERT_EQ(announce_left(&a, 0, 0), UINT64_MAX, "no cap asked");
	ASSERT_EQ(announce_left(&a, UINT64_MAX, 512 * MiB), 0, "all taken");
}
TEST_MAIN()
