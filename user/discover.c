// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Finding executors as they appear; see discover.h. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "control.h"
#include "discover.skel.h"
#include "discover.h"

/* The C library this agent runs on: executors on the host share it. */
static int find_libc(char *out, size_t len)
{
	char line[PATH_MAX + 128];
	FILE *f = fopen("/proc/self/maps", "re");
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		char *base;

		if (!path)
			continue;
		path[strcspn(path, "\n")] = '\0';
		base = strrchr(path, '/') + 1;
		if (strncmp(base, "libc.so", 7) && strncmp(base, "libc-", 5))
			continue;
		snprintf(out, len, "%s", path);
		err = 0;
		break;
	}
	fclose(f);
	return err;
}

static int attach_uprobe(struct discover *d)
{
	struct bpf_uprobe_opts uo = { .sz = sizeof(uo),
				      .func_name = "memfd_create" };

	d->enter = bpf_program__attach_uprobe_opts(d->skel->progs.memfd_enter,
						   -1, d->libc, 0, &uo);
	return d->enter ? 0 : -errno;
}

int discover_open(struct discover *d, char *why, size_t len)
{
	int err;

	memset(d, 0, sizeof(*d));
	err = find_libc(d->libc, sizeof(d->libc));
	if (err) {
		snprintf(why, len, "no libc found in the agent's own maps");
		return err;
	}
	d->skel = discover_bpf__open_and_load();
	if (!d->skel) {
		err = -errno;
		snprintf(why, len, "failed to load the discovery programs: %s",
			 strerror(-err));
		return err;
	}
	err = attach_uprobe(d);
	if (err) {
		snprintf(why, len, "failed to attach a uprobe to %s: %s",
			 d->libc, strerror(-err));
		discover_close(d);
		return err;
	}
	d->exec = bpf_program__attach(d->skel->progs.exec_raw);
	if (!d->exec)
		snprintf(
			why, len,
			"failed to attach sched_process_exec: %s; an executor's exec is seen when it makes a new page",
			strerror(errno));
	return 0;
}

void discover_close(struct discover *d)
{
	bpf_link__destroy(d->exec);
	bpf_link__destroy(d->enter);
	discover_bpf__destroy(d->skel);
	d->exec = d->enter = NULL;
	d->skel = NULL;
}

int discover_events_fd(const struct discover *d)
{
	return bpf_map__fd(d->skel->maps.disc_events);
}

int discover_follow(struct discover *d, pid_t tgid, bool on)
{
	__u32 key = (__u32)tgid;
	__u8 one = 1;
	int fd;

	if (!d->skel)
		return 0;
	fd = bpf_map__fd(d->skel->maps.followed);
	if (on)
		return bpf_map_update_elem(fd, &key, &one, BPF_ANY) ? -errno
								    : 0;
	return bpf_map_delete_elem(fd, &key) && errno != ENOENT ? -errno : 0;
}

int discover_verify(const char *proc, pid_t pid)
{
	struct ctl_target t;
	char path[64];
	struct stat st;
	struct ctl c;
	int err;

	snprintf(path, sizeof(path), "%s/%d", proc, (int)pid);
	if (stat(path, &st))
		return -errno;
	err = ctl_target_read(proc, pid, st.st_uid, &t);
	if (err)
		return err;
	err = ctl_find(&c, proc, &t);
	if (!err)
		ctl_close(&c);
	return err;
}

bool discover_has_page(const char *proc, pid_t pid)
{
	char dir[64], link[64 + 256], text[64];
	struct dirent *e;
	bool found = false;
	DIR *dp;

	snprintf(dir, sizeof(dir), "%s/%d/fd", proc, (int)pid);
	dp = opendir(dir);
	if (!dp)
		return false;
	while (!found && (e = readdir(dp))) {
		ssize_t n;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		n = readlink(link, text, sizeof(text) - 1);
		if (n <= 0)
			continue;
		text[n] = '\0';
		found = ctl_memfd_link(text);
	}
	closedir(dp);
	return found;
}

int discover_scan(const char *proc, pid_t self, void (*fn)(pid_t, void *),
		  void *ctx)
{
	struct dirent *e;
	int n = 0;
	DIR *dp;

	dp = opendir(proc);
	if (!dp)
		return -errno;
	while ((e = readdir(dp))) {
		char *end;
		long pid;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || pid > INT32_MAX || pid == self)
			continue;
		if (!discover_has_page(proc, (pid_t)pid))
			continue;
		fn((pid_t)pid, ctx);
		n++;
	}
	closedir(dp);
	return n;
}
