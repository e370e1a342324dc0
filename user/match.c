// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "match.h"
#include "readfile.h"

int cmdline_matches(const char *cmdline, size_t len, const char *pattern)
{
	char buf[4096];

	if (!len || !pattern || !*pattern)
		return 0;
	if (len >= sizeof(buf))
		len = sizeof(buf) - 1;
	memcpy(buf, cmdline, len);
	while (len && buf[len - 1] == '\0')
		len--;
	for (size_t i = 0; i < len; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[len] = '\0';
	return strstr(buf, pattern) != NULL;
}

/* Start time in clock ticks (field 22 of stat), or ~0 if unreadable. */
static unsigned long long start_time(const char *proc_root, pid_t pid)
{
	unsigned long long t = ~0ULL;
	char path[512], buf[1024], *p;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/stat", proc_root, pid);
	n = rc_read_prefix(path, buf, sizeof(buf));
	if (n <= 0)
		return t;
	p = strrchr(buf, ')');
	if (!p)
		return t;
	/* fields 3..21 skipped: state and 18 numbers */
	if (sscanf(p + 2,
		   "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
		   &t) != 1)
		t = ~0ULL;
	return t;
}

static int is_ancestor(const pid_t *a, int n, pid_t pid)
{
	for (int i = 0; i < n; i++)
		if (a[i] == pid)
			return 1;
	return 0;
}

/* Parent of @pid, 0 if unknown. */
static pid_t parent_of(const char *proc_root, pid_t pid)
{
	char path[512], buf[1024], *p;
	int ppid = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/stat", proc_root, pid);
	n = rc_read_prefix(path, buf, sizeof(buf));
	if (n <= 0)
		return 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %d", &ppid) != 1)
		return 0;
	return ppid;
}

pid_t match_find(const char *proc_root, const char *pattern, pid_t self)
{
	unsigned long long best_t = ~0ULL;
	pid_t best = 0, ancestors[32];
	int nr_anc = 0;
	struct dirent *d;
	DIR *dir;

	/* never match ourselves, nor the sudo or shell that started us */
	for (pid_t p = self; p > 1 && nr_anc < 32; p = parent_of(proc_root, p))
		ancestors[nr_anc++] = p;
	dir = opendir(proc_root);
	if (!dir)
		return -errno;
	while ((d = readdir(dir))) {
		char path[512], buf[4096];
		unsigned long long t;
		ssize_t n;
		pid_t pid;

		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		pid = atoi(d->d_name);
		if (pid <= 0 || is_ancestor(ancestors, nr_anc, pid))
			continue;
		snprintf(path, sizeof(path), "%s/%d/cmdline", proc_root, pid);
		n = rc_read_prefix(path, buf, sizeof(buf));
		if (n <= 0 || !cmdline_matches(buf, n, pattern))
			continue;
		t = start_time(proc_root, pid);
		if (!best || t < best_t) {
			best = pid;
			best_t = t;
		}
	}
	closedir(dir);
	return best;
}
