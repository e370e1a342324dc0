// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * discover_scan(): the look through /proc for processes holding a memfd
 * named "ramcache", whole or in slices that go on where the last stopped,
 * each process found once.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernel/discover.h"
#include "ramcache/control.h"
#include "test.h"

#define KIDS 5

struct found {
	pid_t pid[4096];
	int n;
};

static void collect(pid_t pid, bool page, void *ctx)
{
	struct found *f = ctx;

	if (page && f->n < 4096)
		f->pid[f->n++] = pid;
}

static const struct discover_scan_ops every = { .seen = collect };

/* the look passes by this one */
static pid_t skip_pid;

static bool all_but_one(pid_t pid, void *ctx)
{
	(void)ctx;
	return pid != skip_pid;
}

static const struct discover_scan_ops but_one = { .may = all_but_one,
						  .seen = collect };

static int times_found(const struct found *f, pid_t pid)
{
	int k = 0;

	for (int i = 0; i < f->n; i++)
		k += f->pid[i] == pid;
	return k;
}

/* Children that each hold a memfd named "ramcache" until killed. */
static int spawn(pid_t *kids)
{
	for (int i = 0; i < KIDS; i++) {
		int up[2];
		char c;

		if (pipe(up))
			return -1;
		kids[i] = fork();
		if (kids[i] == 0) {
			if (memfd_create("ramcache", MFD_CLOEXEC) < 0)
				_exit(1);
			(void)!write(up[1], "x", 1);
			pause();
			_exit(0);
		}
		close(up[1]);
		if (kids[i] < 0 || read(up[0], &c, 1) != 1)
			return -1;
		close(up[0]);
	}
	return 0;
}

static void reap(pid_t *kids)
{
	for (int i = 0; i < KIDS; i++) {
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
		}
	}
}

TEST(a_whole_look_finds_every_holder)
{
	static struct found f;
	pid_t kids[KIDS] = { 0 }, from = 0;

	if (!ASSERT_OK(spawn(kids), "spawn"))
		goto out;
	ASSERT_GE(discover_scan("/proc", getpid(), &from, 0, &every, &f), KIDS,
		  "found");
	ASSERT_EQ(from, 0, "to the end");
	for (int i = 0; i < KIDS; i++)
		ASSERT_EQ(times_found(&f, kids[i]), 1, "each once");
	ASSERT_EQ(times_found(&f, getpid()), 0, "not itself");
out:
	reap(kids);
}

TEST(a_process_passed_by_is_not_looked_through)
{
	static struct found f;
	pid_t kids[KIDS] = { 0 }, from = 0;

	if (!ASSERT_OK(spawn(kids), "spawn"))
		goto out;
	skip_pid = kids[1];
	ASSERT_GE(discover_scan("/proc", getpid(), &from, 0, &but_one, &f),
		  KIDS - 1, "found");
	ASSERT_EQ(times_found(&f, kids[1]), 0, "passed by");
	ASSERT_EQ(times_found(&f, kids[0]), 1, "the others looked through");
out:
	reap(kids);
}

TEST(a_look_in_slices_goes_on_where_it_stopped)
{
	static struct found f;
	pid_t kids[KIDS] = { 0 }, from = 0;
	int calls = 0;

	if (!ASSERT_OK(spawn(kids), "spawn"))
		goto out;
	/* a deadline already passed: one process a call */
	do {
		ASSERT_GE(discover_scan("/proc", getpid(), &from, 1, &every,
					&f),
			  0, "scan");
		calls++;
	} while (from && calls < 100000);
	ASSERT_EQ(from, 0, "came to the end");
	ASSERT_GE(calls, KIDS + 1, "in slices");
	for (int i = 0; i < KIDS; i++)
		ASSERT_EQ(times_found(&f, kids[i]), 1, "each once");
out:
	reap(kids);
}

/*
 * The kernel reports a page at memfd_create(), before it is sized, sealed
 * and given its header: a look in between says "not yet" (-EAGAIN, looked
 * at again), not "never"; a page that is made wrong says never.
 */
TEST(a_page_being_made_is_not_yet_one_made_wrong_is_never)
{
	struct ramcache_ctl h = { .magic = RAMCACHE_CTL_MAGIC,
				  .version = RAMCACHE_CTL_VERSION + 1 };
	off_t size = (off_t)ramcache_ctl_size(16, 8);
	pid_t me = getpid();
	int fd, err;

	ASSERT_EQ(discover_verify("/proc", me), -ENOENT, "none yet");
	fd = memfd_create("ramcache", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (!ASSERT_GE(fd, 0, "memfd"))
		return;
	ASSERT_EQ(discover_verify("/proc", me), -EAGAIN, "just made");
	if (ASSERT_OK(ftruncate(fd, size), "size") &&
	    ASSERT_OK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW),
		      "seal"))
		ASSERT_EQ(discover_verify("/proc", me), -EAGAIN,
			  "sealed, no magic yet");
	/* the magic is written last: with it, the page is what it is */
	if (ASSERT_EQ(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h),
		      "header")) {
		err = discover_verify("/proc", me);
		ASSERT_TRUE(err && err != -EAGAIN && err != -ENOENT,
			    "another version: never");
	}
	close(fd);
}

TEST_MAIN()
