// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --on-level: which level changes enter which level. */
#include <ramcache/control.h>

#include "emit/onlevel.h"
#include "test.h"

enum {
	OK = RAMCACHE_LEVEL_OK,
	WARN = RAMCACHE_LEVEL_WARN,
	HIGH = RAMCACHE_LEVEL_HIGH,
	CRIT = RAMCACHE_LEVEL_CRITICAL,
};

TEST(rising_one_step_enters_that_level)
{
	ASSERT_TRUE(onlevel_enters(WARN, OK, WARN), "ok -> warn");
	ASSERT_TRUE(onlevel_enters(HIGH, WARN, HIGH), "warn -> high");
	ASSERT_FALSE(onlevel_enters(HIGH, OK, WARN), "not high yet");
}

TEST(a_jump_enters_every_level_it_passes)
{
	/* memcg reclaim takes the level from ok straight to high */
	ASSERT_TRUE(onlevel_enters(WARN, OK, HIGH), "warn passed");
	ASSERT_TRUE(onlevel_enters(HIGH, OK, HIGH), "high entered");
	ASSERT_FALSE(onlevel_enters(CRIT, OK, HIGH), "critical not reached");
	ASSERT_TRUE(onlevel_enters(WARN, OK, CRIT), "ok -> critical, warn");
}

TEST(falling_enters_nothing_but_ok)
{
	ASSERT_FALSE(onlevel_enters(WARN, HIGH, WARN), "high -> warn");
	ASSERT_FALSE(onlevel_enters(HIGH, CRIT, HIGH), "critical -> high");
	ASSERT_FALSE(onlevel_enters(OK, CRIT, HIGH), "not ok yet");
	ASSERT_TRUE(onlevel_enters(OK, HIGH, OK), "all clear");
	ASSERT_FALSE(onlevel_enters(OK, OK, OK), "no change");
}

TEST_MAIN()
