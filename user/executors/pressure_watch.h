/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The pressure level (ok, warn, high, critical) and its reasons, from the
 * rates of the last period: refaults and swap traffic, the target's major
 * faults, PSI, reclaim stalls seen by BPF, kswapd state, headroom and its
 * forecast. Refaults, swap and PSI are the target's memory cgroup's when it
 * has them (memory.stat, v2 memory.pressure): a storm in the cgroup is then
 * told apart from whatever else the machine does. On v2 without per-cgroup
 * pswpin/pswpout (6.1), swap-in is the cgroup's anon refaults and swap-out
 * the growth of memory.swap.current. Memcg reclaim is the larger of the
 * stalls BPF saw and the cgroup's own count of hits of memory.high/max
 * (memory.events; v1: memory.failcnt). Without a cgroup, or for what it
 * lacks (swap counters on v1, PSI on v1), they are system-wide
 * (/proc/vmstat, /proc/pressure/memory). The maths is policy_pressure_eval() in
 * policy.c; this file gathers the inputs and keeps the previous counters.
 */
#ifndef RAMCACHE_PRESSURE_WATCH_H
#define RAMCACHE_PRESSURE_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/cgroup.h"
#include "proc/meminfo.h"
#include "core/policy.h"

#define PRESSURE_MAX_NODES 64

struct pressure_watch {
	const char *proc_root;
	uint64_t last_ns;
	bool have_prev;
	struct rc_vmstat prev_vm;
	struct rc_cgroup_events prev_cg;
	uint64_t prev_cg_ino; /* whose prev_cg it is; 0: none */
	uint64_t prev_majflt;
	uint64_t prev_direct, prev_memcg;
	uint64_t kswapd_awake[PRESSURE_MAX_NODES / 64]; /* bit per node */
	struct rc_pressure cur; /* level, reasons and rates of the last period */
	uint32_t reported; /* reasons announced since the level was entered */
	struct rc_pressure_in in; /* inputs of the last evaluation (PSI too) */
	bool refault_memcg, swap_memcg, psi_memcg; /* where rates came from */
};

/* What the agent knows that the files do not tell. */
struct pressure_watch_ctx {
	pid_t pid;		/* 0: no target */
	uint64_t direct_stalls; /* BPF counters since start */
	uint64_t memcg_stalls;
	uint64_t headroom;
	struct rc_thresholds thr;
	bool has_eta;
	uint64_t eta_ns;
	bool cannot_free; /* a followed executor's cannot_free episode is on */
	/* the target's memory cgroup (NULL: none) and its inode */
	const struct rc_cgroup_mem *cg;
	uint64_t cg_ino;
};

void pressure_watch_init(struct pressure_watch *lw, const char *proc_root);
/* kswapd of node @nid woke (true) or went to sleep. */
void pressure_watch_kswapd(struct pressure_watch *lw, unsigned int nid,
			   bool awake);
enum { LEVEL_CHANGED = 1, LEVEL_NEW_REASON = 2 };

/*
 * Evaluate at @now_ns. Returns LEVEL_CHANGED when the level changed,
 * LEVEL_NEW_REASON when it did not but a reason fired that was not yet
 * reported since the level was entered (at most RC_R_NR times per level, so
 * a flickering reason cannot flood the output), 0 otherwise, or -errno when
 * /proc could not be read.
 */
int pressure_watch_update(struct pressure_watch *lw, uint64_t now_ns,
			  const struct pressure_watch_ctx *c);

#endif /* RAMCACHE_PRESSURE_WATCH_H */
