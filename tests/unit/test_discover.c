// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Discovery without a shared path: an executor's memfd page is found in its
 * /proc/<pid>/fd from another process, across uids and pid namespaces, and
 * nothing that is not a sealed memfd of the right owner is accepted.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ramcache/ramcache.h"
#include "page/control.h"
#include "test.h"

#define NOBODY 65534

struct exec_child {
	pid_t pid;	/* the executor, in our pid namespace */
	pid_t reap_pid; /* our child: the executor or its parent */
	int up, down;	/* executor -> test, test -> executor */
	uid_t uid;	/* run the executor as this uid (root only) */
	bool newpid;	/* in a new pid namespace, as pid 1 */
};

static int wait_byte(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char b;

	if (poll(&p, 1, ms) != 1 || read(fd, &b, 1) != 1)
		return -1;
	return 0;
}

static void send_byte(int fd)
{
	char b = 1;

	if (write(fd, &b, 1) != 1)
		_exit(97);
}

/* The executor: a page, one entry, then destroy and exit when told. */
static void executor(int up, int down)
{
	struct ramcache_entry_info e = { .id = 7, .bytes = 4096, .label = "x" };
	struct ramcache *rc;

	if (ramcache_create(&rc, NULL, 8, 4) || ramcache_publish(rc, &e))
		_exit(98);
	send_byte(up);
	if (wait_byte(down, 20000))
		_exit(96);
	ramcache_destroy(rc, true);
	send_byte(up);
	wait_byte(down, 20000);
	_exit(0);
}

static int start(struct exec_child *ch)
{
	int up[2], down[2], pids[2];

	signal(SIGPIPE, SIG_IGN);
	unsetenv(RAMCACHE_CTL_ENV);
	if (pipe(up) || pipe(down) || pipe(pids))
		return -1;
	ch->reap_pid = fork();
	if (ch->reap_pid < 0)
		return -1;
	if (ch->reap_pid == 0) {
		pid_t inner = getpid();

		if (ch->uid && setresuid(ch->uid, ch->uid, ch->uid))
			_exit(95);
		if (ch->newpid) {
			int status;

			if (unshare(CLONE_NEWPID))
				_exit(94);
			inner = fork();
			if (inner < 0)
				_exit(93);
			if (inner > 0) {
				if (write(pids[1], &inner, sizeof(inner)) < 0)
					_exit(92);
				waitpid(inner, &status, 0);
				_exit(WIFEXITED(status) ? WEXITSTATUS(status)
							: 91);
			}
		} else if (write(pids[1], &inner, sizeof(inner)) < 0) {
			_exit(92);
		}
		executor(up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	close(pids[1]);
	ch->up = up[0];
	ch->down = down[1];
	if (read(pids[0], &ch->pid, sizeof(ch->pid)) != sizeof(ch->pid))
		ch->pid = -1;
	close(pids[0]);
	return ch->pid > 0 && !wait_byte(ch->up, 10000) ? 0 : -1;
}

static int stop(struct exec_child *ch)
{
	int status;

	if (ch->reap_pid <= 0)
		return -1;
	kill(ch->pid, SIGKILL);
	kill(ch->reap_pid, SIGKILL);
	waitpid(ch->reap_pid, &status, 0);
	close(ch->up);
	close(ch->down);
	ch->reap_pid = 0;
	return 0;
}

static int count_shm(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, "ramcache", 8);
	closedir(d);
	return n;
}

TEST(parses_nspid_uid_map_and_link_names)
{
	const char *st = "Name:\tx\nPid:\t4321\nNSpid:\t4321\t17\t1\nUid:\t0\n";
	const char *map = "         0     100000      65536\n"
			  "     65536          0          1\n";
	pid_t p = 0;
	uint32_t u = 0;

	ASSERT_OK(control_parse_nspid(st, &p), "nspid");
	ASSERT_EQ(p, 1, "innermost pid");
	ASSERT_OK(control_parse_nspid("NSpid:\t99\n", &p), "one level");
	ASSERT_EQ(p, 99, "no namespace");
	ASSERT_EQ(control_parse_nspid("Pid:\t3\n", &p), -ENOENT, "no NSpid");
	ASSERT_EQ(control_parse_nspid("NSpid:\tx\n", &p), -EINVAL, "garbage");
	ASSERT_OK(control_parse_uid_map(map, 100123, &u), "mapped");
	ASSERT_EQ(u, 123, "inner uid");
	ASSERT_OK(control_parse_uid_map(map, 0, &u), "second line");
	ASSERT_EQ(u, 65536, "inner uid of host root");
	ASSERT_EQ(control_parse_uid_map(map, 200000, &u), -ENOENT, "unmapped");
	ASSERT_EQ(control_parse_uid_map("", 0, &u), -ENOENT, "empty map");
	ASSERT_TRUE(control_memfd_link("/memfd:ramcache (deleted)"), "memfd");
	ASSERT_FALSE(control_memfd_link("/dev/shm/memfd:ramcache"), "a file");
	ASSERT_FALSE(control_memfd_link("/memfd:other (deleted)"), "other");
}

TEST(finds_the_memfd_of_another_process_and_sees_it_go)
{
	struct exec_child ch = { 0 };
	struct ctl_entry e[4];
	struct ctl_target t;
	struct ctl c;
	char want[64];
	int shm = count_shm();

	if (!ASSERT_OK(start(&ch), "start executor"))
		goto out;
	ASSERT_EQ(count_shm(), shm, "nothing in /dev/shm");
	if (!ASSERT_OK(control_target_read("/proc", ch.pid, geteuid(), &t),
		       "tgt"))
		goto out;
	ASSERT_EQ(t.ns_pid, ch.pid, "same namespace");
	if (!ASSERT_OK(control_find(&c, "/proc", &t), "find"))
		goto out;
	ASSERT_TRUE(c.memfd, "found as a memfd");
	snprintf(want, sizeof(want), "/proc/%d/fd/", (int)ch.pid);
	ASSERT_TRUE(!strncmp(c.path, want, strlen(want)), c.path);
	ASSERT_EQ(c.lay.executor_pid, ch.pid, "header pid");
	ASSERT_EQ(control_read_entries(&c, e, 4), 1, "one entry");
	ASSERT_EQ(e[0].id, 7, "entry id");
	ASSERT_OK(control_post(&c, 7, RAMCACHE_REASON_HEADROOM, 1, NULL),
		  "post");
	ASSERT_OK(control_check(&c), "still there");
	/* the executor closes its page: dropped, and nothing to find */
	send_byte(ch.down);
	if (!ASSERT_OK(wait_byte(ch.up, 10000), "destroyed"))
		goto close;
	ASSERT_EQ(control_check(&c), -ESTALE, "closed page noticed");
	ASSERT_EQ(c.why, CTL_ERR_REPLACED, "why");
close:
	control_close(&c);
	ASSERT_EQ(control_find(&c, "/proc", &t), -ENOENT, "no page left");
	ASSERT_EQ(c.why, CTL_OK, "not a refusal");
out:
	stop(&ch);
}

/* Descriptors the agent may be handed that are not pages it may use. */
TEST(refuses_what_is_not_a_sealed_read_write_memfd)
{
	struct ctl_target t = { .pid = 1,
				.uid = geteuid(),
				.ns_uid = geteuid() };
	char shm[64], rdonly[64];
	struct ctl c;
	int fd;

	/* a tmpfs file: on the right file system, but born unsealable */
	snprintf(shm, sizeof(shm), "/dev/shm/ramcache-test-disc-%d", getpid());
	fd = open(shm, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	unlink(shm);
	if (ASSERT_GE(fd, 0, "tmpfs file") &&
	    ASSERT_OK(ftruncate(fd, 8192), "size")) {
		ASSERT_EQ(control_open_memfd(&c, fd, "x", &t), -EPERM, "tmpfs");
		ASSERT_EQ(c.why, CTL_ERR_SEALS, "tmpfs why");
	}
	/* a file on another file system */
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (ASSERT_GE(fd, 0, "exe")) {
		ASSERT_EQ(control_open_memfd(&c, fd, "x", &t), -EINVAL,
			  "not tmpfs");
		ASSERT_EQ(c.why, CTL_ERR_NOT_MEMFD, "exe why");
	}
	/* a memfd that may still shrink */
	fd = memfd_create("ramcache", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (ASSERT_GE(fd, 0, "memfd") && ASSERT_OK(ftruncate(fd, 8192), "siz"
									"e")) {
		ASSERT_EQ(control_open_memfd(&c, fd, "x", &t), -EPERM,
			  "unsealed");
		ASSERT_EQ(c.why, CTL_ERR_SEALS, "unsealed why");
	}
	/* sealed, but the descriptor only reads */
	fd = memfd_create("ramcache", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (!ASSERT_GE(fd, 0, "memfd") ||
	    !ASSERT_OK(ftruncate(fd, 8192), "size") ||
	    !ASSERT_OK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), "seal"))
		return;
	snprintf(rdonly, sizeof(rdonly), "/proc/self/fd/%d", fd);
	{
		int ro = open(rdonly, O_RDONLY | O_CLOEXEC);

		if (ASSERT_GE(ro, 0, "reopen")) {
			ASSERT_EQ(control_open_memfd(&c, ro, "x", &t), -EACCES,
				  "ro");
			ASSERT_EQ(c.why, CTL_ERR_ACCESS, "ro why");
		}
	}
	/* sealed and read-write, but another user's */
	t.uid = geteuid() + 1;
	ASSERT_EQ(control_open_memfd(&c, fd, "x", &t), -EPERM, "owner");
	ASSERT_EQ(c.why, CTL_ERR_OWNER, "owner why");
}

/* Root only: the executor as nobody; the agent must name the right uid. */
TEST(serves_an_executor_of_another_uid)
{
	struct exec_child ch = { .uid = NOBODY };
	struct ctl_target t;
	struct ctl c;

	if (geteuid()) {
		TEST_SKIP("needs root");
		return;
	}
	if (!ASSERT_OK(start(&ch), "start executor"))
		goto out;
	if (!ASSERT_OK(control_target_read("/proc", ch.pid, NOBODY, &t), "tgt"))
		goto out;
	if (ASSERT_OK(control_find(&c, "/proc", &t), "find nobody's page")) {
		ASSERT_EQ(c.lay.executor_uid, NOBODY, "header uid");
		control_close(&c);
	}
	t.uid = t.ns_uid = 0;
	ASSERT_EQ(control_find(&c, "/proc", &t), -EPERM,
		  "root's page expected");
	ASSERT_EQ(c.why, CTL_ERR_OWNER, "why");
out:
	stop(&ch);
}

/*
 * Root only: the executor is pid 1 of its own pid namespace and writes 1
 * in its page; the agent knows it by its host pid and must translate.
 */
TEST(translates_the_pid_of_an_executor_in_a_pid_namespace)
{
	struct exec_child ch = { .newpid = true };
	struct ctl_target t;
	struct ctl c;

	if (geteuid()) {
		TEST_SKIP("needs root");
		return;
	}
	if (!ASSERT_OK(start(&ch), "start executor"))
		goto out;
	if (!ASSERT_OK(control_target_read("/proc", ch.pid, 0, &t), "tgt"))
		goto out;
	ASSERT_NEQ(ch.pid, 1, "host pid");
	ASSERT_EQ(t.ns_pid, 1, "pid in its namespace");
	if (ASSERT_OK(control_find(&c, "/proc", &t), "find")) {
		ASSERT_EQ(c.lay.executor_pid, 1, "header says 1");
		control_close(&c);
	}
	/* without the translation, the page names another process */
	t.ns_pid = t.pid;
	ASSERT_EQ(control_find(&c, "/proc", &t), -ESRCH, "host pid in header");
	ASSERT_EQ(c.why, CTL_ERR_PID, "why");
out:
	stop(&ch);
}

/* A SIGKILLed executor leaves nothing behind, and its page is gone. */
TEST(sigkill_leaves_nothing)
{
	struct exec_child ch = { 0 };
	struct ctl_target t;
	struct ctl c;
	int shm = count_shm();

	if (!ASSERT_OK(start(&ch), "start executor"))
		goto out;
	if (!ASSERT_OK(control_target_read("/proc", ch.pid, geteuid(), &t),
		       "tg"
		       "t") ||
	    !ASSERT_OK(control_find(&c, "/proc", &t), "find"))
		goto out;
	stop(&ch);
	ASSERT_EQ(control_check(&c), -ESTALE, "dead executor's page dropped");
	control_close(&c);
	ASSERT_EQ(count_shm(), shm, "nothing in /dev/shm");
out:
	stop(&ch);
}

TEST_MAIN()
