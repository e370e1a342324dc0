// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Finding an executor's control page without a shared path: its memfd is in
 * /proc/<pid>/fd, whatever mount and pid namespace the executor runs in.
 * The agent takes a copy of that descriptor with pidfd_getfd(), so nothing
 * is opened by name and nothing can be redirected; what it got is then
 * checked like any other page (control.c). Also here: the executor's own
 * view of its pid and uid (NSpid, uid_map), which is what its page says.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "page/control.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#define MEMFD_LINK "/memfd:" RAMCACHE_CTL_MEMFD_NAME

bool control_memfd_link(const char *link)
{
	return !strncmp(link, MEMFD_LINK, strlen(MEMFD_LINK));
}

/* Next decimal number in @s (no sign), or -EINVAL. */
static int next_u32(const char **s, uint32_t *out)
{
	const char *p = *s;
	unsigned long long v = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	while (isdigit((unsigned char)*p)) {
		v = v * 10 + (unsigned long long)(*p++ - '0');
		if (v > UINT32_MAX)
			return -ERANGE;
	}
	*s = p;
	*out = (uint32_t)v;
	return 0;
}

int control_parse_nspid(const char *status, pid_t *inner)
{
	const char *p = status;
	uint32_t v, last = 0;
	int n = 0;

	while (p && strncmp(p, "NSpid:", 6)) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (!p)
		return -ENOENT;
	p += 6;
	while (!next_u32(&p, &v)) {
		last = v;
		n++;
	}
	if (!n || !last || last > INT32_MAX)
		return -EINVAL;
	*inner = (pid_t)last;
	return 0;
}

int control_parse_uid_map(const char *map, uint32_t outer, uint32_t *inner)
{
	const char *p = map;

	while (p && *p) {
		uint32_t in, out, count;

		if (!next_u32(&p, &in) && !next_u32(&p, &out) &&
		    !next_u32(&p, &count) && outer >= out &&
		    (uint64_t)outer - out < count) {
			*inner = in + (outer - out);
			return 0;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -ENOENT;
}

/* A small /proc file into @buf, NUL-terminated. */
static int read_small(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	return 0;
}

int control_target_read(const char *proc, pid_t pid, uid_t uid,
			struct ctl_target *t)
{
	char path[128], buf[4096];

	t->pid = pid;
	t->ns_pid = pid;
	t->uid = uid;
	t->ns_uid = uid;
	/* Without NSpid (before 4.1) or uid_map, the two views are one. */
	snprintf(path, sizeof(path), "%s/%d/status", proc, (int)pid);
	if (read_small(path, buf, sizeof(buf)))
		return -ESRCH;
	control_parse_nspid(buf, &t->ns_pid);
	snprintf(path, sizeof(path), "%s/%d/uid_map", proc, (int)pid);
	if (!read_small(path, buf, sizeof(buf))) {
		uint32_t inner;

		if (!control_parse_uid_map(buf, (uint32_t)uid, &inner))
			t->ns_uid = inner;
	}
	return 0;
}

/*
 * A copy of descriptor @nr of the process behind @pidfd: the same open
 * file, never a path walk. Kernels before 5.6 lack pidfd_getfd: then open
 * the magic link with O_PATH (no open of the file itself, so a FIFO or
 * device never sees one), check it is a regular file, and reopen that very
 * inode through /proc/self/fd.
 */
static int grab_fd(int pidfd, const char *link, int nr)
{
	char self[64];
	struct stat st;
	int pfd, fd;

	fd = (int)syscall(SYS_pidfd_getfd, pidfd, nr, 0);
	if (fd >= 0 || errno != ENOSYS)
		return fd >= 0 ? fd : -errno;
	pfd = open(link, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st) || !S_ISREG(st.st_mode)) {
		close(pfd);
		return -EINVAL;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	close(pfd);
	return fd;
}

int control_find(struct ctl *c, const char *proc, const struct ctl_target *t)
{
	char dir[128], link[256], text[64];
	enum ctl_why why = CTL_OK;
	int err = -ENOENT, pidfd;
	struct dirent *d;
	DIR *dp;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	snprintf(dir, sizeof(dir), "%s/%d/fd", proc, (int)t->pid);
	/*
	 * No look at the fd table at all is a refusal too (EACCES: another
	 * user's directory, and no CAP_DAC_READ_SEARCH).
	 */
	c->why = CTL_ERR_SYS;
	pidfd = (int)syscall(SYS_pidfd_open, t->pid, 0);
	if (pidfd < 0)
		return -errno;
	dp = opendir(dir);
	if (!dp) {
		err = -errno;
		close(pidfd);
		return err;
	}
	for (int seen = 0; (d = readdir(dp));) {
		char *end;
		long nr;
		ssize_t n;
		int fd, e;

		errno = 0;
		nr = strtol(d->d_name, &end, 10);
		if (errno || *end || end == d->d_name || nr < 0 ||
		    nr > INT32_MAX)
			continue;
		if (++seen > CONTROL_MAX_FDS) {
			err = -EMFILE;
			why = CTL_ERR_SYS;
			break;
		}
		snprintf(link, sizeof(link), "%s/%ld", dir, nr);
		n = readlink(link, text, sizeof(text) - 1);
		if (n < 0) {
			/* EACCES here is ptrace access, as for pidfd_getfd */
			if (errno == EACCES || errno == EPERM) {
				err = -EPERM;
				why = CTL_ERR_SYS;
			}
			continue;
		}
		text[n] = '\0';
		if (!control_memfd_link(text))
			continue;
		/* The link text is only a hint: what we get is checked. */
		fd = grab_fd(pidfd, link, (int)nr);
		if (fd < 0) {
			err = fd;
			why = CTL_ERR_SYS;
			continue;
		}
		e = control_open_memfd(c, fd, link, t);
		if (!e) {
			err = 0;
			break;
		}
		err = e;
		why = c->why;
	}
	closedir(dp);
	close(pidfd);
	if (err)
		c->why = why;
	return err;
}
