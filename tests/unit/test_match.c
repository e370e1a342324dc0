// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --match with --user and --cgroup, over a fixture /proc. */
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/match.h"
#include "test.h"

static char root[64];

static void put(pid_t pid, const char *name, const char *data, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%d/%s", root, pid, name);
	f = fopen(path, "w");
	fwrite(data, 1, len, f);
	fclose(f);
}

/* A fake process: command line (NUL-separated), uid, start time, cgroup. */
static void proc(pid_t pid, const char *cmdline, size_t clen, unsigned uid,
		 unsigned long long start, const char *cgroup)
{
	char buf[512];

	put(pid, "cmdline", cmdline, clen);
	snprintf(buf, sizeof(buf),
		 "%d (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %llu 0 0\n",
		 pid, start);
	put(pid, "stat", buf, strlen(buf));
	snprintf(buf, sizeof(buf),
		 "Name:\tx\nUmask:\t0022\nUid:\t%u\t%u\t%u\t%u\n", uid, uid,
		 uid, uid);
	put(pid, "status", buf, strlen(buf));
	put(pid, "cgroup", cgroup, strlen(cgroup));
}

#define CMD(s) s, sizeof(s)

static void make_fixture(void)
{
	snprintf(root, sizeof(root), "/tmp/ramcache-test-match-XXXXXX");
	if (!mkdtemp(root))
		abort();
	/* an impostor started first, as another user, in a user session */
	proc(100, CMD("python3\0main.py"), 1001, 50,
	     "0::/user.slice/user-1001.slice/session-3.scope\n");
	/* the real executor, user 1000, in its service */
	proc(200, CMD("python3\0/srv/ComfyUI/main.py\0--listen"), 1000, 80,
	     "0::/system.slice/comfyui.service\n");
	/* a second real one of the same user, newer */
	proc(300, CMD("python3\0main.py"), 1000, 90,
	     "0::/system.slice/comfyui.service/worker\n");
	/* unrelated */
	proc(400, CMD("bash"), 1000, 10, "0::/system.slice/ssh.service\n");
}

static void cleanup(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", root);
}

TEST(without_filters_the_oldest_match_of_any_user_wins)
{
	struct match_spec s = { .pattern = "main.py" };
	struct match_result r;

	make_fixture();
	ASSERT_EQ(match_find(root, &s, 999999, &r), 100, "impostor picked");
	ASSERT_EQ(r.matched, 3, "candidates");
	cleanup();
}

TEST(user_filter_refuses_other_users_processes)
{
	struct match_spec s = { .pattern = "main.py",
				.has_uid = true,
				.uid = 1000 };
	struct match_result r;

	make_fixture();
	ASSERT_EQ(match_find(root, &s, 999999, &r), 200, "the real one");
	ASSERT_EQ(r.uid, 1000, "uid");
	ASSERT_EQ(r.matched, 3, "seen");
	ASSERT_EQ(r.wrong_user, 1, "refused");
	ASSERT_EQ(r.refused_pid, 100, "which refused");
	ASSERT_EQ(r.refused_uid, 1001, "its uid");
	ASSERT_STREQ(r.cgroup, "/system.slice/comfyui.service", "cgroup");
	s.uid = 4242;
	ASSERT_EQ(match_find(root, &s, 999999, &r), 0, "nobody of that uid");
	ASSERT_EQ(r.wrong_user, 3, "all refused");
	cleanup();
}

TEST(real_and_effective_uid_must_both_match)
{
	struct match_spec s = { .pattern = "main.py",
				.has_uid = true,
				.uid = 1000 };
	const char *st = "Name:\tx\nUid:\t1001\t1000\t1000\t1000\n";

	make_fixture();
	put(200, "status", st, strlen(st));
	ASSERT_EQ(match_find(root, &s, 999999, NULL), 300, "setuid refused");
	cleanup();
}

TEST(cgroup_filter_takes_the_cgroup_and_below)
{
	struct match_spec s = { .pattern = "main.py",
				.cgroup = "/system.slice/comfyui.service" };
	struct match_result r;

	make_fixture();
	ASSERT_EQ(match_find(root, &s, 999999, &r), 200, "service");
	ASSERT_EQ(r.wrong_cgroup, 1, "session refused");
	s.cgroup = "/system.slice/comfyui.service/worker";
	ASSERT_EQ(match_find(root, &s, 999999, &r), 300, "sub-cgroup");
	s.cgroup = "/system.slice/comfyui";
	ASSERT_EQ(match_find(root, &s, 999999, &r), 0, "prefix of a name");
	s.cgroup = "/sys/fs/cgroup/system.slice/comfyui.service/";
	ASSERT_EQ(match_find(root, &s, 999999, &r), 200, "mount path form");
	cleanup();
}

TEST(cgroup_paths_of_v1_and_hybrid_hierarchies)
{
	const char *v1 = "12:memory:/comfy\n11:cpu,cpuacct:/other\n"
			 "1:name=systemd:/system.slice/comfyui.service\n";
	const char *hyb = "1:name=systemd:/x\n0::/system.slice/a.service\n";

	ASSERT_TRUE(match_cgroup_within(v1, "/comfy"), "v1 any line");
	ASSERT_TRUE(match_cgroup_within(v1, "/sys/fs/cgroup/memory/comfy"),
		    "v1 "
		    "mem"
		    "ory"
		    " mo"
		    "un"
		    "t");
	ASSERT_FALSE(match_cgroup_within(v1, "/sys/fs/cgroup/memory/other"),
		     "v1 other controller's path");
	ASSERT_TRUE(match_cgroup_within(v1, "/sys/fs/cgroup/cpu/other"),
		    "v1 co-mounted controllers");
	ASSERT_TRUE(match_cgroup_within(v1, "/sys/fs/cgroup/systemd/"
					    "system.slice"),
		    "v1 name=systemd");
	ASSERT_TRUE(match_cgroup_within(hyb, "/sys/fs/cgroup/unified/"
					     "system.slice"),
		    "hybrid unified");
	ASSERT_TRUE(match_cgroup_within(hyb, "/"), "root holds all");
	ASSERT_FALSE(match_cgroup_within(hyb, "system.slice"), "relative");
	ASSERT_FALSE(match_cgroup_within("garbage", "/"), "no colon");
	ASSERT_FALSE(match_cgroup_within("", "/"), "empty");
}

TEST(pick_names_the_memory_cgroup_on_v1)
{
	struct match_spec s = { .pattern = "main.py" };
	struct match_result r;

	make_fixture();
	proc(100, CMD("python3\0main.py"), 1001, 50,
	     "12:memory:/comfy\n1:name=systemd:/x\n0::/\n");
	ASSERT_EQ(match_find(root, &s, 999999, &r), 100, "pick");
	ASSERT_STREQ(r.cgroup, "/comfy", "memory line, not 0::");
	cleanup();
}

TEST(self_and_ancestors_are_never_matched)
{
	struct match_spec s = { .pattern = "main.py" };

	make_fixture();
	/* 300's parent is 1 in the fixture: pretend we are 100 */
	ASSERT_EQ(match_find(root, &s, 100, NULL), 200, "self skipped");
	cleanup();
}

TEST(verify_catches_a_changed_command_line_user_or_cgroup)
{
	struct match_spec s = { .pattern = "main.py",
				.has_uid = true,
				.uid = 1000,
				.cgroup = "/system.slice/comfyui.service" };
	const char *st = "Name:\tx\nUid:\t0\t0\t0\t0\n";

	make_fixture();
	ASSERT_OK(match_verify(root, &s, 200, -1), "unchanged");
	put(200, "cmdline", CMD("sleep\0inf"));
	ASSERT_EQ(match_verify(root, &s, 200, -1), -EACCES, "cmdline");
	proc(200, CMD("python3\0main.py"), 1000, 80, "0::/user.slice\n");
	ASSERT_EQ(match_verify(root, &s, 200, -1), -EACCES, "cgroup");
	proc(200, CMD("python3\0main.py"), 1000, 80,
	     "0::/system.slice/comfyui.service\n");
	put(200, "status", st, strlen(st));
	ASSERT_EQ(match_verify(root, &s, 200, -1), -EACCES, "uid");
	ASSERT_EQ(match_verify(root, &s, 12345, -1), -ESRCH, "gone");
	cleanup();
}

TEST(pidfd_of_an_exited_process_fails_verification)
{
	struct match_spec s = { .pattern = "" };
	pid_t child = fork();
	int pidfd;

	if (child == 0) {
		pause();
		_exit(0);
	}
	pidfd = syscall(SYS_pidfd_open, child, 0);
	if (!ASSERT_GE(pidfd, 0, "pidfd_open"))
		return;
	ASSERT_OK(match_pidfd_alive(pidfd), "alive");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	ASSERT_EQ(match_pidfd_alive(pidfd), -ESRCH, "exited and reaped");
	/* whatever /proc says now belongs to someone else */
	ASSERT_EQ(match_verify("/proc", &s, getpid(), pidfd), -ESRCH,
		  "reads not trusted");
	close(pidfd);
}

TEST_MAIN()
