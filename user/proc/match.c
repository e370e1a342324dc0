// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proc/match.h"
#include "proc/readfile.h"

#define CGROUP_MNT "/sys/fs/cgroup"

int match_cmdline(const char *cmdline, size_t len, const char *pattern)
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

/* @path is @want or below it; "/" holds everything. */
static bool path_within(const char *path, size_t plen, const char *want,
			size_t wlen)
{
	while (wlen > 1 && want[wlen - 1] == '/')
		wlen--;
	if (wlen == 1 && want[0] == '/')
		return plen && path[0] == '/';
	if (plen < wlen || memcmp(path, want, wlen))
		return false;
	return plen == wlen || path[wlen] == '/';
}

/* @list ("memory", "cpu,cpuacct", "name=systemd") names controller @c. */
static bool lists_controller(const char *list, size_t llen, const char *c,
			     size_t clen)
{
	const char *p = list, *end = list + llen;

	while (p < end) {
		const char *comma = memchr(p, ',', end - p);
		const char *e = comma ? comma : end;
		const char *name = p;

		if (e - p > 5 && !memcmp(p, "name=", 5))
			name = p + 5;
		if ((size_t)(e - name) == clen && !memcmp(name, c, clen))
			return true;
		p = e + 1;
	}
	return false;
}

bool match_cgroup_within(const char *file, const char *want)
{
	const char *under = NULL, *ctrl = NULL;
	size_t clen = 0;

	if (!want || want[0] != '/')
		return false;
	if (!strncmp(want, CGROUP_MNT, strlen(CGROUP_MNT)) &&
	    (want[strlen(CGROUP_MNT)] == '/' || !want[strlen(CGROUP_MNT)])) {
		/* v2: /sys/fs/cgroup/a/b is /a/b; v1: /sys/fs/cgroup/memory/a */
		under = want + strlen(CGROUP_MNT);
		if (!*under)
			under = "/";
		ctrl = under + 1;
		clen = strcspn(ctrl, "/");
	}
	for (const char *l = file; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		const char *c1 = memchr(l, ':', len), *c2;

		c2 = c1 ? memchr(c1 + 1, ':', len - (c1 + 1 - l)) : NULL;
		if (c2) {
			const char *ctls = c1 + 1, *path = c2 + 1;
			size_t ctlen = c2 - ctls, plen = len - (path - l);
			bool v2 = ctlen == 0;

			if (!under) {
				if (path_within(path, plen, want, strlen(want)))
					return true;
			} else if (v2 && path_within(path, plen, under,
						     strlen(under))) {
				return true;
			} else if (clen &&
				   ((!v2 && lists_controller(ctls, ctlen, ctrl,
							     clen)) ||
				    (v2 && clen == 7 &&
				     !memcmp(ctrl, "unified", 7)))) {
				const char *sub = ctrl + clen;

				if (!*sub)
					sub = "/";
				if (path_within(path, plen, sub, strlen(sub)))
					return true;
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	return false;
}

static ssize_t read_pid_file(const char *proc_root, pid_t pid, const char *name,
			     char *buf, size_t len)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%d/%s", proc_root, pid, name);
	return readfile_prefix(path, buf, len);
}

/* Fields of /proc/PID/stat after the command name. */
static int read_stat(const char *proc_root, pid_t pid, pid_t *ppid,
		     unsigned long long *start)
{
	char buf[1024], *p;
	ssize_t n = read_pid_file(proc_root, pid, "stat", buf, sizeof(buf));
	int pp = 0;

	if (n <= 0)
		return n < 0 ? (int)n : -EIO;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* fields 3..21 skipped: state and 18 numbers */
	if (!p || sscanf(p + 2,
			 "%*c %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
			 "%*s %*s %*s %*s %*s %*s %llu",
			 &pp, start) != 2)
		return -EIO;
	*ppid = pp;
	return 0;
}

/* Real and effective uid from status: both must be the --user. */
static int read_uids(const char *proc_root, pid_t pid, uid_t *ruid, uid_t *euid)
{
	char buf[4096], *p;
	ssize_t n =
		read_pid_file(proc_root, pid, "status", buf, sizeof(buf) - 1);
	unsigned int r, e;

	if (n <= 0)
		return n < 0 ? (int)n : -EIO;
	buf[n] = '\0';
	p = strstr(buf, "\nUid:");
	if (!p || sscanf(p + 5, "%u %u", &r, &e) != 2)
		return -EIO;
	*ruid = r;
	*euid = e;
	return 0;
}

static bool is_ancestor(const pid_t *a, int n, pid_t pid)
{
	for (int i = 0; i < n; i++)
		if (a[i] == pid)
			return true;
	return false;
}

/*
 * The path on the memory controller's line ("4:memory:/a/b") if there is
 * one (v1), else on the unified line ("0::/a/b"), else on the first.
 */
static void cgroup_name(const char *file, char *out, size_t len)
{
	const char *pick = NULL, *l = file;

	while (l && *l) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);
		const char *c1 = memchr(l, ':', n);
		const char *c2 = c1 ? memchr(c1 + 1, ':', n - (c1 + 1 - l))
				    : NULL;

		if (c2 && lists_controller(c1 + 1, c2 - c1 - 1, "memory", 6)) {
			pick = c2 + 1;
			break;
		}
		if (c2 && (c2 == c1 + 1) && !pick)
			pick = c2 + 1;
		l = nl ? nl + 1 : NULL;
	}
	if (!pick) {
		pick = strchr(file, ':');
		pick = pick ? strchr(pick + 1, ':') : NULL;
		pick = pick ? pick + 1 : "";
	}
	snprintf(out, len, "%.*s", (int)strcspn(pick, "\n"), pick);
}

enum verdict { V_GONE, V_NO_MATCH, V_WRONG_USER, V_WRONG_CGROUP, V_OK };

/* One process against @s; fills uid, start and cgroup of @r on V_OK. */
static enum verdict judge(const char *proc_root, const struct match_spec *s,
			  pid_t pid, struct match_result *r)
{
	char buf[4096];
	unsigned long long start = 0;
	uid_t ruid = 0, euid = 0;
	pid_t ppid = 0;
	ssize_t n;

	n = read_pid_file(proc_root, pid, "cmdline", buf, sizeof(buf));
	if (n < 0)
		return V_GONE;
	/* no pattern (--all with only --user or --cgroup): any command */
	if (s->pattern && !match_cmdline(buf, n, s->pattern))
		return V_NO_MATCH;
	if (read_uids(proc_root, pid, &ruid, &euid) ||
	    read_stat(proc_root, pid, &ppid, &start))
		return V_GONE;
	r->uid = ruid;
	if (s->has_uid && (ruid != s->uid || euid != s->uid))
		return V_WRONG_USER;
	n = read_pid_file(proc_root, pid, "cgroup", buf, sizeof(buf) - 1);
	if (n < 0)
		return V_GONE;
	buf[n] = '\0';
	if (s->cgroup && !match_cgroup_within(buf, s->cgroup))
		return V_WRONG_CGROUP;
	r->start = start;
	cgroup_name(buf, r->cgroup, sizeof(r->cgroup));
	return V_OK;
}

pid_t match_find(const char *proc_root, const struct match_spec *s, pid_t self,
		 struct match_result *out)
{
	struct match_result r = { 0 }, best = { 0 };
	pid_t ancestors[32];
	int nr_anc = 0;
	struct dirent *d;
	DIR *dir;

	/* never match ourselves, nor the sudo or shell that started us */
	for (pid_t p = self; p > 1 && nr_anc < 32;) {
		unsigned long long t;
		pid_t pp;

		ancestors[nr_anc++] = p;
		if (read_stat(proc_root, p, &pp, &t))
			break;
		p = pp;
	}
	dir = opendir(proc_root);
	if (!dir)
		return -errno;
	while ((d = readdir(dir))) {
		pid_t pid;

		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		pid = atoi(d->d_name);
		if (pid <= 0 || is_ancestor(ancestors, nr_anc, pid))
			continue;
		switch (judge(proc_root, s, pid, &r)) {
		case V_GONE:
		case V_NO_MATCH:
			continue;
		case V_WRONG_USER:
			best.matched++;
			best.wrong_user++;
			best.refused_pid = pid;
			best.refused_uid = r.uid;
			continue;
		case V_WRONG_CGROUP:
			best.matched++;
			best.wrong_cgroup++;
			best.refused_pid = pid;
			best.refused_uid = r.uid;
			continue;
		case V_OK:
			best.matched++;
			break;
		}
		if (!best.pid || r.start < best.start) {
			best.pid = pid;
			best.uid = r.uid;
			best.start = r.start;
			memcpy(best.cgroup, r.cgroup, sizeof(best.cgroup));
		}
	}
	closedir(dir);
	if (out)
		*out = best;
	return best.pid;
}

int match_pidfd_alive(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	/* a pidfd polls readable once its process has exited */
	if (poll(&p, 1, 0) != 0)
		return -ESRCH;
	/* EPERM (another uid, no CAP_KILL) still says it exists */
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) && errno == ESRCH)
		return -ESRCH;
	return 0;
}

int match_verify(const char *proc_root, const struct match_spec *s, pid_t pid,
		 int pidfd)
{
	struct match_result r = { 0 };
	enum verdict v = judge(proc_root, s, pid, &r);

	if (pidfd >= 0 && match_pidfd_alive(pidfd))
		return -ESRCH;
	if (v == V_GONE)
		return -ESRCH;
	return v == V_OK ? 0 : -EACCES;
}
