// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Finding executors as they appear; see discover.h. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/nsfs.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "proc/clock.h"
#include "proc/match.h"
#include "proc/readfile.h"
#include "page/control.h"
#include "discover.skel.h"
#include "kernel/discover.h"
#include "kernel/elfsym.h"

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

/*
 * A uprobe on memfd_create in the open file @fd, as probe @k (its cookie
 * k + 1): the offset is found by elfsym.c within its caps, never by
 * libelf (the file may be a container root's). NULL with errno set.
 */
static struct bpf_link *probe_file(struct discover *d, int k, int fd)
{
	struct bpf_uprobe_opts uo = { .sz = sizeof(uo),
				      .bpf_cookie = (__u64)k + 1 };
	char path[64];
	uint64_t off;
	int err;

	err = elfsym_func_offset_fd(fd, "memfd_create", &off);
	if (err) {
		errno = -err;
		return NULL;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return bpf_program__attach_uprobe_opts(d->skel->progs.memfd_enter, -1,
					       path, (size_t)off, &uo);
}

/* The C library this agent runs on: executors on the host share it. */
static int attach_uprobe(struct discover *d)
{
	struct libc_map m;
	struct stat st;
	int err, fd;

	err = find_libc_map("/proc/self/maps", &m);
	if (err)
		return err;
	snprintf(d->libc, sizeof(d->libc), "%s", m.path);
	fd = open(d->libc, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		return err;
	}
	d->libcs[0].link = probe_file(d, 0, fd);
	err = d->libcs[0].link ? 0 : -errno;
	close(fd);
	d->libcs[0].dev = st.st_dev;
	d->libcs[0].ino = st.st_ino;
	d->libcs[0].refs = 1; /* for good */
	return err;
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

int discover_events_open(struct discover *d,
			 int (*fn)(void *ctx, void *data, size_t len),
			 void *ctx)
{
	d->rb = ring_buffer__new(discover_events_fd(d), fn, ctx, NULL);
	return d->rb ? 0 : -errno;
}

int discover_events_epoll_fd(const struct discover *d)
{
	return ring_buffer__epoll_fd(d->rb);
}

void discover_events_consume(struct discover *d)
{
	ring_buffer__consume(d->rb);
}

void discover_close(struct discover *d)
{
	ring_buffer__free(d->rb);
	d->rb = NULL;
	bpf_link__destroy(d->exec);
	for (int i = 0; i < DISC_MAX_LIBC; i++)
		bpf_link__destroy(d->libcs[i].link);
	discover_bpf__destroy(d->skel);
	memset(d->libcs, 0, sizeof(d->libcs));
	d->exec = NULL;
	d->skel = NULL;
}

enum {
	DISC_TOLD_NOLIBC = 1,
	DISC_TOLD_FULL = 2,
	DISC_TOLD_OPEN = 4,
	DISC_TOLD_OWNER = 8,
	DISC_TOLD_PROBE = 16,
};

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

/* The probe of the file @st, or -1. */
static int probe_of(const struct discover *d, const struct stat *st)
{
	for (int i = 0; i < DISC_MAX_LIBC; i++)
		if (d->libcs[i].link && d->libcs[i].dev == st->st_dev &&
		    d->libcs[i].ino == st->st_ino)
			return i;
	return -1;
}

/* A free place in the table, or -1. */
static int free_place(const struct discover *d)
{
	for (int i = 1; i < DISC_MAX_LIBC; i++)
		if (!d->libcs[i].link)
			return i;
	return -1;
}

/* An executor's file: only root's, which no one else may rewrite. */
static bool roots_own(const struct stat *st)
{
	return S_ISREG(st->st_mode) && !st->st_uid &&
	       !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* The libc @fd (the file @st) mapped by @pid is probed already: hold it. */
static int hold_known(struct discover *d, int k, pid_t pid, const char *path,
		      bool missed, char *why, size_t len)
{
	d->libcs[k].refs++;
	/* probed, yet unreported: made without libc's memfd_create */
	if (missed && !d->libcs[k].told) {
		d->libcs[k].told = true;
		snprintf(
			why, len,
			"executor %d was found by the scan of /proc, not by the uprobe, though its libc %s is probed (a raw memfd_create syscall?); executors like it are found only by the scan (every 30 s)",
			(int)pid, path);
	}
	return k;
}

/* Probe the libc @fd (the file @st) of @pid at a free place: its index,
 * or -1 when it is not probed. */
static int probe_new(struct discover *d, int fd, const struct stat *st,
		     pid_t pid, const char *path, bool missed, char *why,
		     size_t len)
{
	int k = free_place(d);

	if (!roots_own(st)) {
		if (missed)
			tell_once(
				d, DISC_TOLD_OWNER, why, len, pid,
				"its libc is not a file of root's that only root may write, so it is not probed");
		return -1;
	}
	if (k < 0) {
		if (missed)
			tell_once(d, DISC_TOLD_FULL, why, len, pid,
				  "its libc is one more than the " STR(
					  DISC_MAX_LIBC) " probed");
		return -1;
	}
	d->libcs[k].link = probe_file(d, k, fd);
	if (!d->libcs[k].link) {
		if (missed)
			tell_once(
				d, DISC_TOLD_PROBE, why, len, pid,
				errno == EFBIG
					? "its libc is bigger than a libc may be (64 MiB, or its tables), so it is not probed"
					: "its libc could not be probed (no memfd_create found in it, or no ELF file of this machine)");
		return -1;
	}
	d->libcs[k].dev = st->st_dev;
	d->libcs[k].ino = st->st_ino;
	d->libcs[k].refs = 1;
	d->libcs[k].told = missed;
	if (missed)
		snprintf(
			why, len,
			"executor %d was found by the scan of /proc, not by the uprobe: its libc %s is another file than those probed (another image?); it is probed now, the next executors on it are found at once",
			(int)pid, path);
	return k;
}

int discover_scan_found(struct discover *d, const char *proc, pid_t pid,
			bool missed, char *why, size_t len)
{
	struct libc_map m;
	char path[PATH_MAX + 64];
	struct stat st;
	int fd, k;

	why[0] = '\0';
	if (!d->skel || !d->libcs[0].link)
		return 0;
	snprintf(path, sizeof(path), "%s/%d/maps", proc, (int)pid);
	if (find_libc_map(path, &m)) {
		if (missed)
			tell_once(d, DISC_TOLD_NOLIBC, why, len, pid,
				  "it maps no libc (a static binary?)");
		return 0;
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
		return 0;
	}
	k = probe_of(d, &st);
	k = k >= 0 ? hold_known(d, k, pid, m.path, missed, why, len)
		   : probe_new(d, fd, &st, pid, m.path, missed, why, len);
	close(fd);
	return k + 1; /* its cookie: probe 0, the agent's own, is one too */
}

int discover_hold(struct discover *d, uint32_t probe)
{
	int k = (int)probe - 1;

	if (probe < 1 || probe > DISC_MAX_LIBC || !d->libcs[k].link)
		return 0;
	d->libcs[k].refs++;
	return (int)probe;
}

void discover_release(struct discover *d, int probe)
{
	int k = probe - 1;

	if (probe < 1 || probe > DISC_MAX_LIBC || !d->libcs[k].link)
		return;
	/* the agent's own libc is probed for good */
	if (--d->libcs[k].refs > 0 || !k)
		return;
	bpf_link__destroy(d->libcs[k].link);
	memset(&d->libcs[k], 0, sizeof(d->libcs[k]));
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
	else if (control_why_unfinished(c.why))
		err = -EAGAIN;
	return err;
}

bool discover_has_page(const char *proc, pid_t pid)
{
	char dir[64], link[64 + 256], text[64];
	struct dirent *e;
	bool found = false;
	int seen = 0;
	DIR *dp;

	snprintf(dir, sizeof(dir), "%s/%d/fd", proc, (int)pid);
	dp = opendir(dir);
	if (!dp)
		return false;
	while (!found && (e = readdir(dp))) {
		ssize_t n;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (++seen > CONTROL_MAX_FDS)
			break;
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
		  uint64_t deadline_ns, const struct discover_scan_ops *ops,
		  void *ctx)
{
	pid_t last = 0;
	struct dirent *e;
	bool page;
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
		if (pid == self || (ops->may && !ops->may((pid_t)pid, ctx)))
			continue;
		page = discover_has_page(proc, (pid_t)pid);
		ops->seen((pid_t)pid, page, ctx);
		n += page;
	}
	*from = e ? last : 0;
	closedir(dp);
	return n;
}

/* The inode of the pid namespace @fd names, 0 on error. */
static uint64_t ns_ino(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : (uint64_t)st.st_ino;
}

/* The inode the kernel gives the host's pid namespace (PROC_PID_INIT_INO). */
#define PID_NS_INIT_INO 0xEFFFFFFCU

/*
 * The outermost pid namespace of @fd's chain below the agent's (@own, an
 * inode): its parents are walked up (a container may nest namespaces as
 * deep as it likes; the kernel stops at 32). 0 when @fd is @own. Takes @fd.
 */
static uint64_t outermost_below(int fd, uint64_t own)
{
	uint64_t ino = ns_ino(fd);

	for (int depth = 0; ino && ino != own && depth < 33; depth++) {
		int parent = ioctl(fd, NS_GET_PARENT);
		uint64_t up;

		if (parent < 0) {
			ino = own; /* not below ours: as good as ours */
			break;
		}
		up = ns_ino(parent);
		close(fd);
		fd = parent;
		if (up == own)
			break;
		ino = up;
	}
	close(fd);
	return ino == own ? 0 : ino;
}

/* The inode of the agent's own pid namespace, 0 if it cannot be read. */
static uint64_t own_pidns_ino(void)
{
	int fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
	uint64_t ino;

	if (fd < 0)
		return 0;
	ino = ns_ino(fd);
	close(fd);
	return ino;
}

uint64_t discover_own_pidns(void)
{
	uint64_t ino = own_pidns_ino();

	return ino == PID_NS_INIT_INO ? 0 : ino;
}

/* The real uid on the "Uid:" line of a status file. */
static int status_uid(const char *status, uint32_t *uid)
{
	const char *p = strstr(status, "\nUid:");
	unsigned long v;
	char *end;

	if (!p)
		return -EINVAL;
	errno = 0;
	v = strtoul(p + 5, &end, 10);
	if (errno || end == p + 5 || v > UINT32_MAX)
		return -EINVAL;
	*uid = (uint32_t)v;
	return 0;
}

int discover_first_look(const char *proc, pid_t pid, struct discover_look *l)
{
	static uint64_t own;
	char path[96], status[2048];
	struct stat st;
	int pidfd, fd, err;
	ssize_t n;

	if (!own)
		own = own_pidns_ino();
	memset(l, 0, sizeof(*l));
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/%d/status", proc, (int)pid);
	/* Uid: is near the top; a long Groups: line may be cut */
	n = readfile_prefix(path, status, sizeof(status) - 1);
	err = n < 0 ? (int)n : 0;
	if (!err) {
		status[n] = '\0';
		err = status_uid(status, &l->uid);
	}
	snprintf(path, sizeof(path), "%s/%d/fd", proc, (int)pid);
	if (!err && !stat(path, &st) && st.st_size > 0)
		l->fds = st.st_size > UINT32_MAX ? UINT32_MAX
						 : (unsigned int)st.st_size;
	snprintf(path, sizeof(path), "%s/%d/ns/pid", proc, (int)pid);
	fd = err ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		l->pidns = outermost_below(fd, own);
	/* all of it was read of the process the pidfd pins */
	if (!err && match_pidfd_alive(pidfd))
		err = -ESRCH;
	close(pidfd);
	return err == -ENOENT ? -ESRCH : err;
}

int discover_try_probe(const struct discover *d)
{
	struct perf_event_attr attr = { .size = sizeof(attr) };
	char type[32];
	uint64_t off;
	int fd, err;

	if (!d->libc[0])
		return -ENOENT;
	err = readfile_text("/sys/bus/event_source/devices/uprobe/type", type,
			    sizeof(type));
	if (err)
		return err;
	fd = open(d->libc, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = elfsym_func_offset_fd(fd, "memfd_create", &off);
	close(fd);
	if (err)
		return err;
	attr.type = (uint32_t)atoi(type);
	attr.config1 = (uint64_t)(uintptr_t)d->libc;
	attr.config2 = off;
	fd = (int)syscall(SYS_perf_event_open, &attr, -1, 0, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}
