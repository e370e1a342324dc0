// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * How a page ended: the executor exited or was killed (its exit code, from
 * /proc/<pid>/stat while it is a zombie, or from its pidfd once reaped), or
 * it closed the page, or replaced it. These are normal ends, told as such
 * (docs/control-page.md, "How a page ends"), never as protocol anomalies.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "page/control.h"

#define PF_EXITING 0x00000004u /* include/linux/sched.h */
/* fields of /proc/<pid>/stat, counted from 1 (proc(5)) */
#define STAT_STATE     3
#define STAT_FLAGS     9
#define STAT_EXIT_CODE 52
#define REFIND_MAX_FDS 4096

/* PIDFD_GET_INFO (Linux 6.13), with the exit code once reaped (6.15). */
struct pidfd_info_v0 {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid,
		fsgid;
	int32_t exit_code;
};
#define PIDFD_INFO_EXIT_ 0x00000008ULL
#define PIDFD_GET_INFO_	 _IOWR(0xFF, 11, struct pidfd_info_v0)

int control_parse_stat_exit(const char *stat, struct ctl_exit *out)
{
	const char *p = strrchr(stat, ')'); /* comm may hold anything but */
	unsigned long long v;
	int field = STAT_STATE;
	char state;

	memset(out, 0, sizeof(*out));
	if (!p || p[1] != ' ' || !p[2])
		return -EINVAL;
	p += 2;
	state = *p;
	for (;;) {
		while (*p && *p != ' ')
			p++;
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		field++;
		if (field != STAT_FLAGS && field != STAT_EXIT_CODE)
			continue;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		v = strtoull(p, NULL, 10);
		if (field == STAT_FLAGS) {
			out->exiting = (v & PF_EXITING) != 0;
		} else {
			out->code = (int)(v & 0xffff);
			out->has_code = true;
		}
	}
	if (field < STAT_FLAGS)
		return -EINVAL;
	if (state == 'Z' || state == 'X')
		out->exiting = true;
	/* a code is only final once the task is exiting */
	out->has_code = out->has_code && out->exiting;
	return 0;
}

int control_exit_read(const char *proc, pid_t pid, int pidfd,
		      struct ctl_exit *out)
{
	struct pidfd_info_v0 info = { .mask = PIDFD_INFO_EXIT_ };
	char path[128], buf[1024];
	ssize_t n;
	int fd;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/%d/stat", proc, (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			return control_parse_stat_exit(buf, out);
		}
	}
	/* gone, reaped by its parent: the pidfd still knows how it ended */
	out->exiting = true;
	if (pidfd >= 0 && !ioctl(pidfd, PIDFD_GET_INFO_, &info) &&
	    (info.mask & PIDFD_INFO_EXIT_)) {
		out->code = info.exit_code & 0xffff;
		out->has_code = true;
	}
	return 0;
}

const char *control_exit_reason(const struct ctl_exit *e, int *sig, int *status)
{
	*sig = 0;
	*status = -1;
	if (e->has_code && (e->code & 0x7f)) {
		*sig = e->code & 0x7f;
		return "killed";
	}
	if (e->has_code)
		*status = (e->code >> 8) & 0xff;
	return "exited";
}

int control_refind(struct ctl *c, const char *proc, pid_t pid)
{
	char dir[128], link[128 + 16], text[64];
	int seen = 0, err = -ENOENT;
	struct dirent *d;
	struct stat st;
	DIR *dp;

	snprintf(dir, sizeof(dir), "%s/%d/fd", proc, (int)pid);
	dp = opendir(dir);
	if (!dp)
		return -errno;
	while ((d = readdir(dp)) && seen++ < REFIND_MAX_FDS) {
		ssize_t n;

		if (!isdigit((unsigned char)d->d_name[0]) ||
		    strlen(d->d_name) > 10)
			continue;
		snprintf(link, sizeof(link), "%s/%.10s", dir, d->d_name);
		n = readlink(link, text, sizeof(text) - 1);
		if (n < 0)
			continue;
		text[n] = '\0';
		if (!control_memfd_link(text) || stat(link, &st) ||
		    st.st_dev != c->dev || st.st_ino != c->ino)
			continue;
		free(c->path);
		c->path = strdup(link);
		err = c->path ? 0 : -ENOMEM;
		break;
	}
	closedir(dp);
	return err;
}

bool control_link_is_page(const char *link)
{
	char text[64];
	ssize_t n = readlink(link, text, sizeof(text) - 1);

	if (n < 0)
		return false;
	text[n] = '\0';
	return control_memfd_link(text);
}
