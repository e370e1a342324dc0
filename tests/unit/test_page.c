// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The executor library's page at an explicit path (RAMCACHE_CONTROL, the
 * agent's --control PATH): what is left in the directory after success,
 * after each error, and after the executor is killed while building it.
 * Each case works in its own scratch directory under /dev/shm, where
 * executors put their pages, and checks what names remain in it.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ramcache/ramcache.h"
#include "test.h"

struct scratch {
	char dir[64];
	char page[96];
};

static bool scratch_make(struct scratch *s)
{
	snprintf(s->dir, sizeof(s->dir), "/dev/shm/ramcache-test-page-XXXXXX");
	if (!mkdtemp(s->dir))
		return false;
	snprintf(s->page, sizeof(s->page), "%s/page", s->dir);
	return true;
}

/* The names in the scratch directory, space separated, in @buf; their count. */
static int names(const struct scratch *s, char *buf, size_t len)
{
	struct dirent *d;
	DIR *dir = opendir(s->dir);
	int n = 0;

	buf[0] = '\0';
	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		n++;
		strncat(buf, " ", len - strlen(buf) - 1);
		strncat(buf, d->d_name, len - strlen(buf) - 1);
	}
	closedir(dir);
	return n;
}

static void scratch_remove(struct scratch *s)
{
	struct dirent *d;
	DIR *dir = opendir(s->dir);
	char p[512];

	while (dir && (d = readdir(dir))) {
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", s->dir, d->d_name);
		if (rmdir(p))
			unlink(p);
	}
	if (dir)
		closedir(dir);
	rmdir(s->dir);
}

/*
 * A child that creates the page with a file size limit of one byte: the
 * page's ftruncate raises SIGXFSZ, whose default action kills the process
 * in the middle of building the page (as a SIGKILL or an OOM kill would).
 * With @ignore, SIGXFSZ is ignored and ftruncate fails with EFBIG instead.
 * Returns the wait status.
 */
static int create_over_fsize(const char *path, bool ignore)
{
	struct rlimit one = { 1, 1 };
	struct ramcache *rc;
	int status;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		signal(SIGXFSZ, ignore ? SIG_IGN : SIG_DFL);
		if (setrlimit(RLIMIT_FSIZE, &one))
			_exit(98);
		_exit(ramcache_create(&rc, path, 0, 0) == -EFBIG ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

TEST(page_at_a_path_leaves_only_the_page)
{
	struct ramcache *rc = NULL;
	struct scratch s;
	char left[512];
	struct stat st;

	if (!ASSERT_TRUE(scratch_make(&s), "scratch directory"))
		return;
	if (ASSERT_OK(ramcache_create(&rc, s.page, 0, 0), "create") &&
	    ASSERT_OK(lstat(s.page, &st), "the page is there")) {
		ASSERT_TRUE(S_ISREG(st.st_mode), "a regular file");
		ASSERT_EQ(st.st_mode & 07777, 0600, "mode");
		ASSERT_EQ(st.st_nlink, 1, "one link");
		ASSERT_EQ(st.st_uid, geteuid(), "owner");
		ASSERT_STREQ(ramcache_path(rc), s.page, "its path");
		ASSERT_EQ(names(&s, left, sizeof(left)), 1, left);
		ramcache_destroy(rc, true);
		ASSERT_EQ(names(&s, left, sizeof(left)), 0, left);
	}
	scratch_remove(&s);
}

TEST(killed_while_building_the_page_leaves_no_file)
{
	struct scratch s;
	char left[512];
	int status;

	if (!ASSERT_TRUE(scratch_make(&s), "scratch directory"))
		return;
	status = create_over_fsize(s.page, false);
	if (ASSERT_TRUE(WIFSIGNALED(status), "the child was killed"))
		ASSERT_EQ(WTERMSIG(status), SIGXFSZ, "by SIGXFSZ");
	/* the old library left its temporary name here, empty */
	ASSERT_EQ(names(&s, left, sizeof(left)), 0, left);
	scratch_remove(&s);
}

TEST(errors_while_building_the_page_leave_no_file)
{
	struct ramcache *rc = NULL;
	struct scratch s;
	char left[512], sub[160];
	int status;

	if (!ASSERT_TRUE(scratch_make(&s), "scratch directory"))
		return;
	/* ftruncate fails (EFBIG): the error is returned, nothing is left */
	status = create_over_fsize(s.page, true);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "create returned -EFBIG");
	ASSERT_EQ(names(&s, left, sizeof(left)), 0, left);

	/* the rename fails: the path is a directory that is not empty */
	snprintf(sub, sizeof(sub), "%s/x", s.page);
	if (ASSERT_OK(mkdir(s.page, 0700), "mkdir") &&
	    ASSERT_OK(mkdir(sub, 0700), "mkdir")) {
		ASSERT_LE(ramcache_create(&rc, s.page, 0, 0), -1,
			  "create over a directory");
		ASSERT_EQ(rc, NULL, "no handle");
		ASSERT_EQ(names(&s, left, sizeof(left)), 1, left);
		rmdir(sub);
		rmdir(s.page);
	}

	/* a directory that does not exist: an error, nothing made */
	snprintf(sub, sizeof(sub), "%s/none/page", s.dir);
	ASSERT_EQ(ramcache_create(&rc, sub, 0, 0), -ENOENT, "no directory");
	ASSERT_EQ(names(&s, left, sizeof(left)), 0, left);
	scratch_remove(&s);
}

TEST(a_symlink_at_the_path_is_replaced_not_followed)
{
	struct ramcache *rc = NULL;
	struct scratch s;
	char left[512], target[160];
	struct stat st;

	if (!ASSERT_TRUE(scratch_make(&s), "scratch directory"))
		return;
	snprintf(target, sizeof(target), "%s/target", s.dir);
	if (ASSERT_OK(symlink(target, s.page), "symlink") &&
	    ASSERT_OK(ramcache_create(&rc, s.page, 0, 0), "create")) {
		ASSERT_OK(lstat(s.page, &st), "lstat");
		ASSERT_TRUE(S_ISREG(st.st_mode), "a regular file now");
		ASSERT_TRUE(access(target, F_OK) && errno == ENOENT,
			    "the symlink's target was not created");
		ASSERT_EQ(names(&s, left, sizeof(left)), 1, left);
		ramcache_destroy(rc, true);
	}
	scratch_remove(&s);
}

TEST_MAIN()
