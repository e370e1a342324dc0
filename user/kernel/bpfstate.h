/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The BPF side of the agent: open, configure, load and attach the programs,
 * track and untrack processes and memory cgroups, and read the per-CPU
 * counters and histograms back.
 */
#ifndef RAMCACHE_BPFSTATE_H
#define RAMCACHE_BPFSTATE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/hist.h"
#include "core/memcgref.h"
#include "pressure.h"
#include "kernel/probes.h"

struct pressure_bpf;
struct bpf_link;
struct ring_buffer;

/* Counters of one tracked tgid (or of the system), summed over CPUs. */
struct track_totals {
	uint64_t faults;
	uint64_t reclaim_count[RC_RECLAIM_KINDS];
	uint64_t reclaim_ns[RC_RECLAIM_KINDS];
	uint64_t reclaim_pages[RC_RECLAIM_KINDS];
};

struct bpfstate {
	struct pressure_bpf *skel;
	struct probes probes;
	int ncpus;
	int nr_attached;
	pid_t slots[RC_MAX_TARGETS]; /* tgid tracked in each slot, 0: free */
	struct bpf_link *learn;	     /* the learn_mm task iterator */
	struct memcg_refs memcgs;    /* targets in each watched memcg */
	/* each slot's BPF counts when its tgid began to be tracked */
	struct track_totals base[RC_MAX_TARGETS];
	struct ring_buffer *rb; /* the events, and the rings added to it */
};

/* What the programs are loaded with: the options that concern them. */
struct bpfstate_settings {
	bool filter; /* only tracked tgids; false: the whole system, tracked */
	enum probe_mode probe_mode;
	uint64_t burst_faults;
	uint64_t burst_window_ns;
	uint64_t rss_step; /* bytes of RSS movement per rss event */
};

/*
 * Open, set the read-only settings from @s, pick the probes and load.
 * Returns 0 or -errno (-EPERM: privileges, -ENOENT/-ESRCH: no BTF).
 */
int bpfstate_load(struct bpfstate *b, const struct bpfstate_settings *s);
/* The two halves of bpfstate_load(), for a caller that adjusts in between. */
int bpfstate_open(struct bpfstate *b, const struct bpfstate_settings *s);
int bpfstate_load_opened(struct bpfstate *b);
/*
 * Attach, the per-fault programs too when @faults; returns the number of
 * probes attached (or left to attach later) or -errno.
 */
int bpfstate_attach(struct bpfstate *b, bool faults);
/* The per-fault programs on or off (probes_faults()). */
int bpfstate_faults(struct bpfstate *b, bool on);
void bpfstate_destroy(struct bpfstate *b);

/*
 * Follow @tgid (0: the whole system, when loaded without a filter), up to
 * RC_MAX_TARGETS at once; tracking one again restarts its counters.
 * Returns 0, -ESRCH when it has no memory to follow (gone, or a zombie),
 * -ENOSPC when every slot is taken, or -errno.
 */
int bpfstate_track(struct bpfstate *b, pid_t tgid);
/* Stop following @tgid (-ENOENT when it was not followed). */
int bpfstate_untrack(struct bpfstate *b, pid_t tgid);
/*
 * Report memcg reclaim of tasks in the memory cgroup with inode @ino, for
 * one more target in it (0 or -errno: then it is not counted). Unwatch:
 * one target fewer; the reports stop when the last one goes.
 */
int bpfstate_watch_memcg(struct bpfstate *b, uint64_t ino);
int bpfstate_unwatch_memcg(struct bpfstate *b, uint64_t ino);

/* Counters of a tracked @tgid (-ENOENT for another). */
int bpfstate_totals(struct bpfstate *b, pid_t tgid, struct track_totals *t);
/* Global counter (enum rc_stat) summed over CPUs. */
uint64_t bpfstate_stat(struct bpfstate *b, enum rc_stat idx);
/* Reclaim stall histogram of @kind, in microseconds. */
int bpfstate_hist(struct bpfstate *b, enum rc_hist_kind kind, struct hist *h);
/*
 * Wake the agent for a target's RSS event only once its RSS moved @bytes
 * since the last one that did (0: for every event); the others wait in the
 * ring buffer until the agent next reads it.
 */
void bpfstate_rss_wake(struct bpfstate *b, uint64_t bytes);
/* fd of the ring buffer map. */
int bpfstate_events_fd(struct bpfstate *b);

/* A record of a ring buffer, as the kernel wrote it; 0 to go on. */
typedef int (*bpfstate_event_fn)(void *ctx, void *data, size_t len);

/*
 * Read the programs' events with @fn: an epoll fd (events_epoll_fd),
 * drained by events_consume. 0 or -errno.
 */
int bpfstate_events_open(struct bpfstate *b, bpfstate_event_fn fn, void *ctx);
int bpfstate_events_epoll_fd(struct bpfstate *b);
void bpfstate_events_consume(struct bpfstate *b);
/* Stop reading them (also done by bpfstate_destroy). */
void bpfstate_events_close(struct bpfstate *b);

/* libbpf's own messages go to @fn (its level: 0 warn, 1 info, 2 debug). */
void bpfstate_set_print(int (*fn)(int level, const char *fmt, va_list ap));

#endif /* RAMCACHE_BPFSTATE_H */
