// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Memory cgroup discovery and limits against fake v1, v2, hybrid trees. */
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "proc/cgroup.h"

static uint64_t ino_of(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : st.st_ino;
}

TEST(v1_find_and_read)
{
	struct rc_cgroup cg;
	struct rc_cgroup_state st;

	if (!ASSERT_OK(cgroup_find(fixture("proc"), fixture("cgroup-v1"), 1234,
				   &cg),
		       "find"))
		return;
	ASSERT_EQ(cg.version, 1, "memory controller on v1 wins");
	ASSERT_STREQ(cg.rel, "/app/worker", "rel");
	ASSERT_STREQ(cg.path, fixture("cgroup-v1/memory/app/worker"), "path");
	ASSERT_EQ(cg.ino, ino_of(cg.path), "inode");
	ASSERT_NEQ(cg.ino, 0, "inode set");
	if (!ASSERT_OK(cgroup_read(&cg, &st), "read"))
		return;
	/* v1 "unlimited" is 0x7ffffffffffff000. */
	ASSERT_TRUE(st.self.limit == RC_UNLIMITED, "own limit unlimited");
	ASSERT_EQ(st.self.usage, 600 * RC_MIB, "usage");
	ASSERT_EQ(st.self.inactive_file, 50 * RC_MIB, "total_inactive_file");
	ASSERT_EQ(st.self.swap_usage, 10 * RC_MIB, "memsw - usage");
	ASSERT_TRUE(st.self.swap_limit == RC_UNLIMITED, "swap unlimited");
	ASSERT_EQ(st.self.oom_kill, 1, "oom_kill");
	ASSERT_FALSE(st.self.psi.available, "no PSI file on v1");
	/* hierarchical total_ counters; v1 has no swap-in counter */
	ASSERT_TRUE(st.self.ev.has_refault, "refaults");
	ASSERT_EQ(st.self.ev.refault_anon, 30, "total_ anon refaults");
	ASSERT_EQ(st.self.ev.refault_file, 40, "total_ file refaults");
	ASSERT_EQ(st.self.ev.pgmajfault, 50, "total_pgmajfault");
	ASSERT_FALSE(st.self.ev.has_swap, "no pswpin on v1");
	ASSERT_TRUE(st.self.ev.has_limit_events, "memory.failcnt");
	ASSERT_EQ(st.self.ev.max, 10,
		  "failcnt + memsw.failcnt: hits of a limit");
	ASSERT_FALSE(st.self.ev.has_swap_events || st.self.ev.has_swap_bytes,
		     "no swap events or swap.current on v1");
	/* The parent's 1 GiB limit binds: 1024 - 900 + 100 MiB of room. */
	ASSERT_EQ(st.limit, RC_GIB, "parent limit");
	ASSERT_EQ(st.usage, 900 * RC_MIB, "parent usage");
	ASSERT_EQ(st.inactive_file, 100 * RC_MIB, "parent inactive");
	ASSERT_EQ(st.limit_depth, 1, "depth");
	ASSERT_EQ(st.limit_ino, ino_of(fixture("cgroup-v1/memory/app")), "ino");
	ASSERT_EQ(st.nearest_depth, 1, "nearest limited: the parent");
	ASSERT_EQ(st.nearest_ino, st.limit_ino, "nearest ino");
	ASSERT_EQ(policy_headroom(UINT64_MAX, st.limit, st.usage,
				  st.inactive_file),
		  224 * RC_MIB, "headroom");
}

TEST(v1_dir_memsw)
{
	struct rc_cgroup_mem m;

	if (!ASSERT_OK(cgroup_read_dir(1, fixture("cgroup-v1/memory/app"), &m),
		       "read"))
		return;
	ASSERT_EQ(m.limit, RC_GIB, "limit");
	ASSERT_EQ(m.swap_limit, RC_GIB, "memsw 2 GiB - mem 1 GiB");
	ASSERT_EQ(m.swap_usage, 1000000000ULL - 900 * RC_MIB, "swap usage");
	ASSERT_EQ(m.oom_kill, 3, "oom_kill");
	ASSERT_EQ(m.inactive_file, 100 * RC_MIB, "total_ preferred");
}

TEST(v1_root_cgroup)
{
	struct rc_cgroup cg;
	struct rc_cgroup_state st;

	if (!ASSERT_OK(cgroup_find(fixture("proc"), fixture("cgroup-v1"), 2002,
				   &cg),
		       "find"))
		return;
	ASSERT_EQ(cg.version, 1, "v1");
	ASSERT_STREQ(cg.path, fixture("cgroup-v1/memory"), "root path");
	if (!ASSERT_OK(cgroup_read(&cg, &st), "read"))
		return;
	ASSERT_TRUE(st.limit == RC_UNLIMITED, "root unlimited");
	ASSERT_EQ(st.limit_ino, 0, "no limiting cgroup");
	ASSERT_TRUE(st.nearest_depth == -1 && !st.nearest_ino,
		    "no nearest limited cgroup: the machine");
	ASSERT_EQ(st.usage, 8000000000ULL, "own usage");
	ASSERT_EQ(policy_headroom(5 * RC_GIB, st.limit, st.usage,
				  st.inactive_file),
		  5 * RC_GIB, "system only");
}

TEST(v2_parent_limit_binds)
{
	struct rc_cgroup cg;
	struct rc_cgroup_state st;

	if (!ASSERT_OK(cgroup_find(fixture("proc"), fixture("cgroup-v2"), 2001,
				   &cg),
		       "find"))
		return;
	ASSERT_EQ(cg.version, 2, "v2");
	ASSERT_STREQ(cg.mount, fixture("cgroup-v2"), "unified at the root");
	ASSERT_STREQ(cg.path, fixture("cgroup-v2/parent.slice/job.scope"),
		     "path");
	ASSERT_EQ(cg.ino, ino_of(cg.path), "inode");
	if (!ASSERT_OK(cgroup_read(&cg, &st), "read"))
		return;
	ASSERT_EQ(st.self.limit, RC_GIB, "own memory.max");
	ASSERT_EQ(st.self.usage, 350 * RC_MIB, "memory.current");
	ASSERT_EQ(st.self.inactive_file, 10 * RC_MIB, "inactive_file");
	ASSERT_EQ(st.self.swap_usage, 4096, "swap.current");
	ASSERT_TRUE(st.self.swap_limit == RC_UNLIMITED, "swap.max max");
	ASSERT_EQ(st.self.oom_kill, 1, "events oom_kill, not oom");
	ASSERT_TRUE(st.self.psi.available, "memory.pressure");
	ASSERT_EQ(st.self.psi.full_total_us, 1717, "psi full total");
	ASSERT_TRUE(st.self.ev.has_refault && st.self.ev.has_swap, "counters");
	ASSERT_EQ(st.self.ev.refault_file, 5, "file refaults");
	ASSERT_EQ(st.self.ev.pswpin, 7, "pswpin");
	ASSERT_EQ(st.self.ev.pswpout, 8, "pswpout");
	ASSERT_EQ(st.self.ev.pgmajfault, 9, "pgmajfault");
	ASSERT_TRUE(st.self.ev.has_limit_events, "memory.events");
	ASSERT_EQ(st.self.ev.high, 3, "events high");
	ASSERT_EQ(st.self.ev.max, 12, "events max, not oom");
	ASSERT_TRUE(st.self.ev.has_swap_events, "memory.swap.events");
	ASSERT_EQ(st.self.ev.swap_max, 4, "swap.events max, not high");
	ASSERT_EQ(st.self.ev.swap_fail, 2, "swap.events fail");
	ASSERT_TRUE(st.self.ev.has_swap_bytes, "memory.swap.current");
	ASSERT_EQ(st.self.ev.swap_bytes, 4096, "swap bytes");
	/* Own room 1024-350+10 = 684 MiB; parent's 512-400+20 = 132 MiB. */
	ASSERT_EQ(st.limit, 512 * RC_MIB, "parent limit");
	ASSERT_EQ(st.limit_depth, 1, "depth");
	ASSERT_EQ(st.limit_ino, ino_of(fixture("cgroup-v2/parent.slice")),
		  "ino");
	/* the domain is the nearest limit, not the tightest one */
	ASSERT_EQ(st.nearest_depth, 0, "own 1 GiB limit is the nearest");
	ASSERT_EQ(st.nearest_ino, ino_of(cg.path), "nearest ino");
	ASSERT_EQ(policy_headroom(UINT64_MAX, st.limit, st.usage,
				  st.inactive_file),
		  132 * RC_MIB, "headroom");
	/* The system is the tighter one here. */
	ASSERT_EQ(policy_headroom(100 * RC_MIB, st.limit, st.usage,
				  st.inactive_file),
		  100 * RC_MIB, "system tighter");
}

TEST(v2_own_limit_binds)
{
	struct rc_cgroup cg;
	struct rc_cgroup_state st;

	if (!ASSERT_OK(cgroup_find(fixture("proc"), fixture("cgroup-v2"), 2006,
				   &cg),
		       "find"))
		return;
	if (!ASSERT_OK(cgroup_read(&cg, &st), "read"))
		return;
	ASSERT_EQ(st.limit, 100 * RC_MIB, "own limit");
	ASSERT_EQ(st.limit_depth, 0, "depth 0");
	ASSERT_EQ(st.limit_ino, cg.ino, "own inode");
	ASSERT_EQ(st.self.swap_limit, 0, "swap.max 0");
	ASSERT_FALSE(st.self.psi.available, "no memory.pressure");
	/* as a kernel without these files: not zeros that look like data */
	ASSERT_FALSE(st.self.ev.has_limit_events, "no memory.events");
	ASSERT_FALSE(st.self.ev.has_swap_events, "no memory.swap.events");
	ASSERT_FALSE(st.self.ev.has_swap_bytes, "no memory.swap.current");
	ASSERT_FALSE(st.self.ev.has_swap, "no pswpin in memory.stat");
}

TEST(v2_hybrid_unified)
{
	struct rc_cgroup cg;
	struct rc_cgroup_state st;

	if (!ASSERT_OK(cgroup_find(fixture("proc"), fixture("cgroup-hybrid"),
				   2004, &cg),
		       "find"))
		return;
	ASSERT_EQ(cg.version, 2, "v2");
	ASSERT_STREQ(cg.mount, fixture("cgroup-hybrid/unified"),
		     "unified mount");
	ASSERT_STREQ(cg.path, fixture("cgroup-hybrid/unified/hybrid/svc"),
		     "path");
	if (!ASSERT_OK(cgroup_read(&cg, &st), "read"))
		return;
	ASSERT_EQ(st.limit, 256 * RC_MIB, "limit");
	ASSERT_EQ(st.usage, 1000, "usage");
}

TEST(find_errors)
{
	struct rc_cgroup cg;

	/* v2 line but no hierarchy with the memory controller. */
	ASSERT_EQ(cgroup_find(fixture("proc"), fixture("cgroup-v1"), 2004, &cg),
		  -ENOENT, "no memory in cgroup.controllers");
	ASSERT_EQ(cgroup_find(fixture("proc"), fixture("cgroup-v2"), 2005, &cg),
		  -ENOENT, "no memory line, no v2 line");
	/* as a process outside our cgroup namespace shows, told apart */
	ASSERT_EQ(cgroup_find(fixture("proc"), fixture("cgroup-v2"), 2003, &cg),
		  -EXDEV, "above the namespace's root");
	ASSERT_EQ(cgroup_find(fixture("proc"), fixture("cgroup-v2"), 2008, &cg),
		  -EINVAL, "'..' refused");
	ASSERT_EQ(cgroup_find(fixture("proc"), fixture("cgroup-v2"), 99999,
			      &cg),
		  -ENOENT, "no such pid");
	ASSERT_EQ(cgroup_find(fixture("proc"), fixture("cgroup-v2"), 0, &cg),
		  -EINVAL, "pid 0");
	/* v1 memory line, but this tree has no memory/ mount. */
	ASSERT_EQ(cgroup_find(fixture("proc"), fixture("cgroup-v2"), 1234, &cg),
		  -ENOENT, "v1 dir missing");
}

TEST(garbled_limit_is_error)
{
	struct rc_cgroup cg;
	struct rc_cgroup_state st;
	struct rc_cgroup_mem m;

	ASSERT_EQ(cgroup_read_dir(2, fixture("cgroup-v2/bad.scope"), &m),
		  -EINVAL, "12abc");
	if (!ASSERT_OK(cgroup_find(fixture("proc"), fixture("cgroup-v2"), 2007,
				   &cg),
		       "find"))
		return;
	ASSERT_EQ(cgroup_read(&cg, &st), -EINVAL, "read");
	ASSERT_EQ(cgroup_read_dir(2, fixture("cgroup-v2/nope"), &m), -ENOENT,
		  "missing dir");
	ASSERT_EQ(cgroup_read_dir(3, fixture("cgroup-v2"), &m), -EINVAL,
		  "version 3");
}

TEST(live_self)
{
	struct rc_cgroup cg;
	struct rc_cgroup_state st;
	int err = cgroup_find(NULL, NULL, getpid(), &cg);

	if (err == -ENOENT) {
		TEST_SKIP("no memory cgroup controller here");
		return;
	}
	if (!ASSERT_OK(err, "find"))
		return;
	ASSERT_NEQ(cg.ino, 0, "inode");
	ASSERT_OK(cgroup_read(&cg, &st), "read");
}

/*
 * Above the cgroup, a level is read for its limit, and for its usage and
 * memory.stat only under a limit: what else it holds is never read (on v1
 * eight files a level, each read pass). Garbled, those files would fail a
 * read that opened them.
 */
TEST(ancestors_are_read_for_their_limit_alone)
{
	char dir[64], path[128];
	struct rc_cgroup cg;
	struct rc_cgroup_state st;

	if (!ASSERT_TRUE(test_scratch(dir, sizeof(dir), "cgroup", "cgroup-v1"),
			 "scratch copy"))
		goto out;
	/* the root: unlimited, so its usage and memory.stat go unread */
	test_put(dir, "cgroup-v1/memory/memory.usage_in_bytes", "garbled\n");
	test_put(dir, "cgroup-v1/memory/memory.stat",
		 "total_inactive_file x\n");
	/* /app: limited, its events and swap files unread */
	test_put(dir, "cgroup-v1/memory/app/memory.oom_control", "x");
	test_put(dir, "cgroup-v1/memory/app/memory.memsw.usage_in_bytes", "x");
	snprintf(path, sizeof(path), "%s/cgroup-v1", dir);
	if (!ASSERT_OK(cgroup_find(fixture("proc"), path, 1234, &cg), "find") ||
	    !ASSERT_OK(cgroup_read(&cg, &st), "read"))
		goto out;
	ASSERT_EQ(st.limit, RC_GIB, "/app's limit binds");
	ASSERT_EQ(st.usage, 900 * RC_MIB, "its usage");
	ASSERT_EQ(st.inactive_file, 100 * RC_MIB, "its memory.stat");
	ASSERT_EQ(st.limit_depth, 1, "depth");
	snprintf(path, sizeof(path), "%s/cgroup-v1/memory/app", dir);
	ASSERT_EQ(st.limit_ino, ino_of(path), "ino");
	ASSERT_EQ(st.nearest_ino, st.limit_ino, "nearest ino");
	ASSERT_EQ(st.self.oom_kill, 1, "the cgroup's own files all read");
out:
	test_scratch_gone(dir);
}

TEST_MAIN()
