// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The count of targets per watched memory cgroup (review R4). */
#include <errno.h>

#include "core/memcgref.h"
#include "test.h"

TEST(two_targets_one_memcg_stay_watched_until_the_last_goes)
{
	struct memcg_refs r = { 0 };

	ASSERT_EQ(memcgref_get(&r, 42), 1, "first: watch");
	ASSERT_EQ(memcgref_get(&r, 42), 0, "second: already watched");
	ASSERT_EQ(memcgref_put(&r, 42), 0, "one left: stays watched");
	ASSERT_EQ(memcgref_put(&r, 42), 1, "last: unwatch");
	ASSERT_EQ(memcgref_put(&r, 42), -ENOENT, "not counted any more");
	ASSERT_EQ(memcgref_get(&r, 42), 1, "back: watch again");
}

TEST(distinct_memcgs_are_counted_apart)
{
	struct memcg_refs r = { 0 };

	ASSERT_EQ(memcgref_get(&r, 1), 1, "one");
	ASSERT_EQ(memcgref_get(&r, 2), 1, "two");
	ASSERT_EQ(memcgref_put(&r, 1), 1, "one goes");
	ASSERT_EQ(memcgref_get(&r, 2), 0, "two counted still");
	ASSERT_EQ(memcgref_put(&r, 3), -ENOENT, "three never was");
}

TEST(one_memcg_per_target_fits)
{
	struct memcg_refs r = { 0 };

	ASSERT_TRUE(RC_MAX_MEMCGS >= RC_MAX_TARGETS, "a place per target");
	for (int i = 0; i < RC_MAX_MEMCGS; i++)
		ASSERT_EQ(memcgref_get(&r, 100 + i), 1, "new memcg");
	ASSERT_EQ(memcgref_get(&r, 7), -ENOSPC, "full");
	ASSERT_EQ(memcgref_get(&r, 100), 0, "a counted one still is");
	ASSERT_EQ(memcgref_put(&r, 105), 1, "one freed");
	ASSERT_EQ(memcgref_get(&r, 7), 1, "its place is reused");
}

TEST_MAIN()
