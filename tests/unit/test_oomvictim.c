// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Filling a pid-only OOM event (kernels before 6.8) from /proc. */
#include "test.h"
#include "proc/oomvictim.h"

static const char *fx(void)
{
	static char buf[4096];
	const char *root = getenv("RAMCACHE_ROOT");

	snprintf(buf, sizeof(buf), "%s/tests/fixtures/proc", root ? root : ".");
	return buf;
}

TEST(fills_comm_uid_and_rss_from_status)
{
	struct rc_oom_kill e = { .victim_pid = 3001,
				 .victim_uid = RC_UID_UNKNOWN };

	ASSERT_TRUE(oomvictim_partial(&e), "partial before");
	ASSERT_OK(oomvictim_fill(fx(), &e), "fill");
	ASSERT_FALSE(oomvictim_partial(&e), "complete after");
	ASSERT_EQ(e.victim_uid, 1000, "uid");
	ASSERT_TRUE(!strcmp(e.comm, "python3 main.py"), "comm");
	ASSERT_EQ(e.anon_rss, 4194304ULL * 1024, "anon");
	ASSERT_EQ(e.file_rss, 5120ULL * 1024, "file");
	ASSERT_EQ(e.shmem_rss, 512ULL * 1024, "shmem");
	ASSERT_EQ(e.total_vm, 8388608ULL * 1024, "vm");
	ASSERT_EQ(e.victim_pid, 3001, "pid kept");
}

TEST(victim_gone_leaves_the_event_as_it_was)
{
	struct rc_oom_kill e = { .victim_pid = 999999,
				 .victim_uid = RC_UID_UNKNOWN };

	ASSERT_EQ(oomvictim_fill(fx(), &e), -ENOENT, "gone");
	ASSERT_EQ(e.victim_uid, RC_UID_UNKNOWN, "still unknown");
	ASSERT_EQ(e.comm[0], 0, "no comm");
}

TEST(status_without_uid_is_malformed)
{
	struct rc_oom_kill e = { .victim_uid = RC_UID_UNKNOWN };

	ASSERT_EQ(oomvictim_parse("Name:\tx\nRssAnon:\t4 kB\n", &e), -EINVAL,
		  "no Uid");
	ASSERT_EQ(oomvictim_parse("Uid:\tabc\n", &e), -EINVAL, "bad Uid");
	ASSERT_EQ(e.victim_uid, RC_UID_UNKNOWN, "untouched");
	ASSERT_OK(oomvictim_parse("Uid:\t0\t0\t0\t0\n", &e), "root");
	ASSERT_EQ(e.victim_uid, 0, "uid 0");
	ASSERT_EQ(e.comm[0], 0, "no Name, no comm");
}

TEST_MAIN()
