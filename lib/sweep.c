// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Control pages of executors that died without cleaning up (an OOM kill is
 * a SIGKILL) stay in /dev/shm. A new executor removes those that are its
 * own: named ramcache-<pid>, owned by its uid, whose pid is gone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* The pid in "ramcache-<pid>", or 0 if the name is anything else. */
static pid_t page_pid(const char *name)
{
	const char *p = name + strlen("ramcache-");
	char *end;
	long v;

	if (strncmp(name, "ramcache-", strlen("ramcache-")) || *p < '1' ||
	    *p > '9')
		return 0;
	errno = 0;
	v = strtol(p, &end, 10);
	if (errno || *end || v <= 0 || v > 0x7fffffff)
		return 0;
	return (pid_t)v;
}

int rc_sweep_stale(const char *dir)
{
	struct dirent *d;
	int removed = 0;
	DIR *dp;
	int dfd;

	dp = opendir(dir);
	if (!dp)
		return -errno;
	dfd = dirfd(dp);
	while ((d = readdir(dp))) {
		pid_t pid = page_pid(d->d_name);
		struct stat st;

		if (!pid || pid == getpid())
			continue;
		if (fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		/* alive, or not ours to judge (EPERM): leave it */
		if (!kill(pid, 0) || errno != ESRCH)
			continue;
		if (!unlinkat(dfd, d->d_name, 0))
			removed++;
	}
	closedir(dp);
	return removed;
}
