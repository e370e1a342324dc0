/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Finding executors for --all: the kernel reports each control page as it
 * is created (a uprobe on libc's memfd_create, bpf/discover.bpf.c) and
 * each execve of a followed executor; a scan of /proc finds the executors
 * that were there before the agent, and, slowly, those whose libc is not
 * one probed (a container's, a static binary). A uprobe is per file: the
 * libc of every executor a scan finds is probed too (up to
 * DISC_MAX_LIBC files), so the next executors of the same image are
 * reported at once. Each probe is held by the executors on its file and
 * goes with the last of them; a file that cannot be probed takes no place.
 */
#ifndef RAMCACHE_DISCOVER_H
#define RAMCACHE_DISCOVER_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "discover_ev.h"

struct discover_bpf;
struct bpf_link;

#define DISC_MAX_LIBC 32

struct disc_libc {
	dev_t dev;
	ino_t ino;
	struct bpf_link *link; /* NULL: a free place */
	int refs;	       /* executors followed on it */
	bool told;	       /* a warning named it */
};

struct ring_buffer;

struct discover {
	struct discover_bpf *skel;
	struct bpf_link *exec;
	/* [0]: the agent's own; a probe's cookie is its index + 1 */
	struct disc_libc libcs[DISC_MAX_LIBC];
	unsigned int told;	/* DISC_TOLD_* warnings given */
	char libc[PATH_MAX];	/* the agent's libc, "" if none */
	struct ring_buffer *rb; /* its reports, read by events_consume */
};

/*
 * Load and attach. 0 when the uprobe is on (exec reports may still be
 * off: d->exec NULL), or -errno with nothing attached; the caller falls
 * back to scanning. @why is filled with what failed.
 */
int discover_open(struct discover *d, char *why, size_t len);
void discover_close(struct discover *d);
/* The ring buffer map's fd (events are struct rc_discover_ev). */
int discover_events_fd(const struct discover *d);

/*
 * Read the reports with @fn, from a ring of their own: one epoll fd
 * (events_epoll_fd), drained by events_consume until @fn returns < 0 (a
 * budget per turn). 0 or -errno; discover_close() frees it.
 */
int discover_events_open(struct discover *d,
			 int (*fn)(void *ctx, void *data, size_t len),
			 void *ctx);
int discover_events_epoll_fd(const struct discover *d);
void discover_events_consume(struct discover *d);
/* Reports the kernel lost to a full ring since discover_open(). */
uint64_t discover_drops(const struct discover *d);
/* Report execve of @tgid (on), or stop (off). */
int discover_follow(struct discover *d, pid_t tgid, bool on);

/* What a first look at a process tells, before its page is looked for. */
struct discover_look {
	uint32_t uid;	  /* real uid, as the agent sees it */
	uint64_t pidns;	  /* its outermost pid namespace below the agent's
			   * (inode), 0: the agent's */
	unsigned int fds; /* descriptors it holds, 0: the kernel does not say
			   * (before 6.2) */
};

/*
 * A cheap first look at @pid, through a pidfd: the values are the pinned
 * process's (-ESRCH if it is gone, or went while it was looked at), not
 * those of whatever holds the pid by the time a path is read.
 */
int discover_first_look(const char *proc, pid_t pid, struct discover_look *l);

/*
 * The agent's own pid namespace (inode) as the kernel's reports name a
 * container's (rc_discover_ev.pidns), 0 when it is the host's: in a
 * container of its own, the agent's container is its host.
 */
uint64_t discover_own_pidns(void);

/*
 * 0 if @pid holds a control page that opens and passes every check (as
 * the evictor will open it: sealed memfd of its uid, header, sizes), else
 * -errno (-ENOENT: none yet; -EAGAIN: one that may still be being made,
 * unsealed, unsized or without its magic). Nothing is kept open.
 */
int discover_verify(const char *proc, pid_t pid);

/*
 * A scan found executor @pid: probe the libc file it maps too (opened
 * through /proc/PID/map_files, never by path; only a regular file owned
 * by root and writable by no one else, read within the caps of elfsym.h).
 * Returns the probe the executor now holds, as its cookie (index + 1; 1
 * is the agent's own libc), to release with discover_release() when it
 * goes, or 0 when it holds none. @missed: the uprobe was on when it
 * started (it was not there at the first scan). When the uprobe should
 * have reported it, @why gets a one-line warning to give, once per libc
 * file (once per kind of failure); else @why is "".
 */
int discover_scan_found(struct discover *d, const char *proc, pid_t pid,
			bool missed, char *why, size_t len);

/*
 * Can this process create a uprobe (the perf event, nothing attached) on
 * the agent's own libc? 0, or -errno: what a probe of a libc found later
 * needs, tried before capabilities are dropped for good.
 */
int discover_try_probe(const struct discover *d);

/*
 * An executor reported by the probe of cookie @probe is followed: it holds
 * that probe. Returns @probe (for discover_release()), 0 for none.
 */
int discover_hold(struct discover *d, uint32_t probe);

/*
 * An executor holding the probe of cookie @probe (0: none) is no longer
 * followed. The agent's own (1) stays until discover_close().
 */
void discover_release(struct discover *d, int probe);

/*
 * True if @pid holds a descriptor of a memfd named "ramcache" among its
 * first CONTROL_MAX_FDS.
 */
bool discover_has_page(const char *proc, pid_t pid);

/* What a look through /proc calls for each process (see discover_scan). */
struct discover_scan_ops {
	/* before its descriptors are looked through: false passes it by
	 * (NULL: none is) */
	bool (*may)(pid_t pid, void *ctx);
	/* after: whether it holds a page */
	void (*seen)(pid_t pid, bool page, void *ctx);
};

/*
 * Every process under @proc (other than @self) with a pid above *@from:
 * unless @ops->may passes it by, its descriptors are looked through and
 * @ops->seen told whether it holds a page. Once @deadline_ns
 * (CLOCK_MONOTONIC; 0: none) has passed it stops, *@from set to the last
 * pid looked at, for the next call to go on from; *@from is 0 when the
 * scan reached the end. Returns how many held a page, or -errno when
 * @proc is unreadable.
 */
int discover_scan(const char *proc, pid_t self, pid_t *from,
		  uint64_t deadline_ns, const struct discover_scan_ops *ops,
		  void *ctx);

#endif /* RAMCACHE_DISCOVER_H */
