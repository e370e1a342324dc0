// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Finding executors as they appear; see discover.h. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "proc/clock.h"
#include "page/control.h"
#include "discover.skel.h"
#include "kernel/discover.h"

#define STR_(x) #x
#define STR(x)	STR_(x)

/* glibc's libc.so.6 (libc-2.x.so before 2.34), musl's ld-musl-ARCH.so.1 */
static bool libc_name(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5) ||
	       !strncmp(base, "ld-musl-", 8);
}

struct libc_map {
	unsigned long start, end;
	char path[PATH_MAX];
};

/* The first mapping of a libc in the maps file @maps. */
static int find_libc_map(const char *maps, struct libc_map *m)
{
	char line[PATH_MAX + 128];
	FILE *f = fopen(maps, "re");
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (!path || sscanf(line, "%lx-%lx", &m->start, &m->end) != 2)
			continue;
		path[strcspn(path, "\n")] = '\0';
		if (!libc_name(path))
			continue;
		snprintf(m->path, sizeof(m->path), "%s", path);
		err = 0;
		break;
	}
	fclose(f);
	return err;
}

static struct bpf_link *probe_file(struct discover *d, const char *path)
{
	struct bpf_uprobe_opts uo = { .sz = sizeof(uo),
				      .func_name = "memfd_create" };

	return bpf_program__attach_uprobe_opts(d->skel->progs.memfd_enter, -1,
					       path, 0, &uo);
}

/* The C library this agent runs on: executors on the host share it. */
static int attach_uprobe(struct discover *d)
{
	struct libc_map m;
	struct stat st;
	int err;

	err = find_libc_map("/proc/self/maps", &m);
	if (err)
		return err;
	snprintf(d->libc, sizeof(d->libc), "%s", m.path);
	if (stat(d->libc, &st))
		return -errno;
	d->libcs[0].link = probe_file(d, d->libc);
	if (!d->libcs[0].link)
		return -errno;
	d->libcs[0].dev = st.st_dev;
	d->libcs[0].ino = st.st_ino;
	d->nlibc = 1;
	return 0;
}

int discover_open(struct discover *d, char *why, size_t len)
{
	int err;

	memset(d, 0, sizeof(*d));
	d->skel = discover_bpf__open_and_load();
	if (!d->skel) {
		err = -errno;
		snprintf(why, len, "failed to load the discovery programs: %s",
			 strerror(-err));
		return err;
	}
	err = attach_uprobe(d);
	if (err) {
		if (d->libc[0])
			snprintf(why, len,
				 "failed to attach a uprobe to %s: %s", d->libc,
				 strerror(-err));
		else
			snprintf(why, len,
				 "no libc found in the agent's own maps");
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
	for (int i = 0; i < d->nlibc; i++)
		bpf_link__destroy(d->libcs[i].link);
	discover_bpf__destroy(d->skel);
	d->exec = NULL;
	d->nlibc = 0;
	d->skel = NULL;
}

enum { DISC_TOLD_NOLIBC = 1, DISC_TOLD_FULL = 2, DISC_TOLD_OPEN = 4 };

/* Fill @why once per @kind; "" after. */
static void tell_once(struct discover *d, unsigned int kind, char *why,
		      size_t len, pid_t pid, const char *what)
{
	if (d->told & kind)
		return;
	d->told |= kind;
	snprintf(
		why, len,
		"executor %d was found by the scan of /proc, not by the uprobe: %s; executors like it are found only by the scan (every 30 s)",
		(int)pid, what);
}

void discover_scan_found(struct discover *d, const char *proc, pid_t pid,
			 bool missed, char *why, size_t len)
{
	struct disc_libc *l = NULL;
	struct libc_map m;
	char path[PATH_MAX + 64];
	struct stat st;
	int fd;

	why[0] = '\0';
	if (!d->skel || !d->nlibc)
		return;
	snprintf(path, sizeof(path), "%s/%d/maps", proc, (int)pid);
	if (find_libc_map(path, &m)) {
		if (missed)
			tell_once(d, DISC_TOLD_NOLIBC, why, len, pid,
				  "it maps no libc (a static binary?)");
		return;
	}
	/* the kernel's link to the very file mapped: no path is walked */
	snprintf(path, sizeof(path), "%s/%d/map_files/%lx-%lx", proc, (int)pid,
		 m.start, m.end);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		if (missed)
			tell_once(d, DISC_TOLD_OPEN, why, len, pid,
				  "its libc could not be opened");
		return;
	}
	for (int i = 0; i < d->nlibc; i++)
		if (d->libcs[i].dev == st.st_dev &&
		    d->libcs[i].ino == st.st_ino)
			l = &d->libcs[i];
	if (l) {
		close(fd);
		/* probed, yet unreported: made without libc's memfd_create */
		if (missed && !l->told) {
			l->told = true;
			snprintf(
				why, len,
				"executor %d was found by the scan of /proc, not by the uprobe, though its libc %s %s; executors like it are found only by the scan (every 30 s)",
				(int)pid, m.path,
				l->link ? "is probed (a raw memfd_create syscall?)"
					: "was seen before and could not be probed");
		}
		return;
	}
	if (d->nlibc == DISC_MAX_LIBC) {
		close(fd);
		if (missed)
			tell_once(d, DISC_TOLD_FULL, why, len, pid,
				  "its libc is one more than the " STR(
					  DISC_MAX_LIBC) " probed");
		return;
	}
	l = &d->libcs[d->nlibc++];
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	l->told = missed;
	/* an executor's file: only root's, which no one else may rewrite */
	if (S_ISREG(st.st_mode) && !st.st_uid &&
	    !(st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		l->link = probe_file(d, path);
	}
	close(fd);
	if (!missed)
		return;
	if (l->link)
		snprintf(
			why, len,
			"executor %d was found by the scan of /proc, not by the uprobe: its libc %s is another file than those probed (another image?); it is probed now, the next executors on it are found at once",
			(int)pid, m.path);
	else
		snprintf(
			why, len,
			"executor %d was found by the scan of /proc, not by the uprobe: its libc %s could not be probed (%s); executors on it are found only by the scan (every 30 s)",
			(int)pid, m.path,
			S_ISREG(st.st_mode) && !st.st_uid &&
					!(st.st_mode & (S_IWGRP | S_IWOTH))
				? "failed to attach a uprobe"
				: "not a file of root's that only root may write");
}

int discover_events_fd(const struct discover *d)
{
	return bpf_map__fd(d->skel->maps.disc_events);
}

uint64_t discover_drops(const struct discover *d)
{
	return d->skel ? __atomic_load_n(&d->skel->bss->drops, __ATOMIC_RELAXED)
		       : 0;
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
	err = control_target_read(proc, pid, st.st_uid, &t);
	if (err)
		return err;
	err = control_find(&c, proc, &t);
	if (!err)
		control_close(&c);
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
		found = control_memfd_link(text);
	}
	closedir(dp);
	return found;
}

int discover_scan(const char *proc, pid_t self, pid_t *from,
		  uint64_t deadline_ns, void (*fn)(pid_t, void *), void *ctx)
{
	pid_t last = 0;
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
		if (*end || pid <= 0 || pid > INT32_MAX || pid <= *from)
			continue;
		/* out of time: go on from here next call (/proc lists pids
		 * in increasing order; one that comes later is seen later) */
		if (last && deadline_ns && now_ns() >= deadline_ns)
			break;
		last = (pid_t)pid;
		if (pid == self || !discover_has_page(proc, (pid_t)pid))
			continue;
		fn((pid_t)pid, ctx);
		n++;
	}
	*from = e ? last : 0;
	closedir(dp);
	return n;
}
