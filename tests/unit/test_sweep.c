// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Pages of dead executors are removed by the next executor, no others. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ramcache/ramcache.h"
#include "test.h"

static pid_t dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

static void make_file(const char *path, uid_t uid)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);

	if (fd >= 0) {
		if (uid != geteuid() && fchown(fd, uid, uid))
			FAIL_AT("chown %s", path);
		close(fd);
	}
}

TEST(stale_pages_of_dead_executors_are_removed)
{
	char dead[64], live[64], other[64], odd[64];
	struct ramcache *rc = NULL;
	pid_t gone = dead_pid(), gone2 = dead_pid();

	snprintf(dead, sizeof(dead), "/dev/shm/ramcache-%d", gone);
	snprintf(live, sizeof(live), "/dev/shm/ramcache-%d", getppid());
	snprintf(other, sizeof(other), "/dev/shm/ramcache-%d", gone2);
	snprintf(odd, sizeof(odd), "/dev/shm/ramcache-%dx", gone);
	if (!access(live, F_OK)) {
		TEST_SKIP("the parent has a control page");
		return;
	}
	make_file(dead, geteuid());
	make_file(live, geteuid());
	make_file(odd, geteuid());
	if (geteuid() == 0)
		make_file(other, 65534);
	unsetenv("RAMCACHE_CONTROL");

	if (!ASSERT_OK(ramcache_create(&rc, NULL, 4, 4), "create"))
		goto cleanup;
	ASSERT_NEQ(access(dead, F_OK), 0, "dead executor's page removed");
	ASSERT_OK(access(live, F_OK), "live process's page kept");
	ASSERT_OK(access(odd, F_OK), "other names kept");
	if (geteuid() == 0)
		ASSERT_OK(access(other, F_OK), "other uid's page kept");
cleanup:
	ramcache_destroy(rc, true);
	unlink(dead);
	unlink(live);
	unlink(odd);
	unlink(other);
}

TEST(explicit_path_sweeps_nothing)
{
	char dead[64], path[64];
	struct ramcache *rc = NULL;

	snprintf(dead, sizeof(dead), "/dev/shm/ramcache-%d", dead_pid());
	snprintf(path, sizeof(path), "/dev/shm/ramcache-test-sweep-%d",
		 getpid());
	make_file(dead, geteuid());
	if (ASSERT_OK(ramcache_create(&rc, path, 4, 4), "create"))
		ASSERT_OK(access(dead, F_OK), "kept");
	ramcache_destroy(rc, true);
	unlink(dead);
}

TEST_MAIN()
