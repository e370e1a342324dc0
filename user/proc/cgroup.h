/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The memory cgroup of a process, v1 or v2: where it is, its inode number
 * (which the kernel's memcg id in BPF events is matched against), and its
 * limit, usage and reclaimable page cache, including the tightest limit
 * set on any ancestor. Both the proc root (NULL = "/proc") and the cgroup
 * fs root (NULL = "/sys/fs/cgroup") are arguments so tests can point them
 * at tests/fixtures.
 *
 * Every function returns 0 on success or -errno. A file a kernel version
 * lacks is not an error: its value reads as 0 (counters) or RC_UNLIMITED
 * (limits).
 */
#ifndef RAMCACHE_CGROUP_H
#define RAMCACHE_CGROUP_H

#include <limits.h>
#include <stdint.h>

#include "proc/meminfo.h"
#include "core/policy.h"

#define RC_CGROUP_ROOT "/sys/fs/cgroup"

struct rc_cgroup {
	int version;	      /* 1 or 2 */
	char mount[PATH_MAX]; /* hierarchy root holding the memory controller */
	char path[PATH_MAX];  /* the cgroup's directory: mount + rel */
	char rel[PATH_MAX];   /* as in /proc/<pid>/cgroup, "/" for the root */
	uint64_t ino;	      /* st_ino of path */
};

/*
 * Find pid's memory cgroup. A v1 line whose controller list holds "memory"
 * wins (mounted at <cg_root>/memory); otherwise the "0::" line, under
 * whichever of <cg_root> and <cg_root>/unified has "memory" in its
 * cgroup.controllers. -ENOENT: no memory controller or no such process
 * or directory; -EXDEV: a path above the root of this process's cgroup
 * namespace ("/../x": the process's cgroup is not under our mount);
 * -EINVAL: any other path with "..", or no usable line.
 */
int cgroup_find(const char *proc_root, const char *cg_root, int pid,
		struct rc_cgroup *cg);

/* st_ino of a directory (a cgroup's id on v2, and what BPF reports). */
int cgroup_dir_ino(const char *path, uint64_t *ino);

/*
 * Counters of the cgroup and its descendants. From memory.stat (v1: the
 * total_ keys): refaults (5.9 or later), pswpin/pswpout (v2 only, and only
 * on kernels newer than Debian 12's 6.1), pgmajfault. From memory.events
 * (v2): times over memory.high (throttled) and at memory.max (reclaimed to
 * stay under it); on v1, memory.failcnt plus memory.memsw.failcnt count the
 * latter where the kernel keeps them (6.18 leaves both at 0 when a memsw
 * limit is set). From memory.swap.events (v2): swap-outs refused by memory.swap.max
 * or failed for want of swap space. swap_bytes is memory.swap.current (v2): on a
 * kernel without per-cgroup pswpout its growth is the cgroup's net swap-out.
 * When a file or key is absent its has_ flag is false.
 */
struct rc_cgroup_events {
	bool has_refault, has_swap;
	uint64_t refault_anon, refault_file; /* pages */
	uint64_t pswpin, pswpout;	     /* pages */
	uint64_t pgmajfault;
	bool has_limit_events, has_swap_events, has_swap_bytes;
	uint64_t high, max;	      /* memory.events */
	uint64_t swap_max, swap_fail; /* memory.swap.events */
	uint64_t swap_bytes;	      /* memory.swap.current */
};

/* One cgroup directory's own memory numbers. */
struct rc_cgroup_mem {
	uint64_t limit;		/* RC_UNLIMITED if none ("max", >= 2^60) */
	uint64_t usage;		/* memory.current / memory.usage_in_bytes */
	uint64_t inactive_file; /* v1: total_inactive_file if present */
	uint64_t mapped_file; /* file pages mapped by a process (v2 file_mapped) */
	uint64_t swap_usage; /* v1: memsw.usage - usage */
	uint64_t swap_limit; /* v1: memsw.limit - limit; RC_UNLIMITED */
	uint64_t oom_kill;   /* memory.events / memory.oom_control */
	struct rc_psi psi;   /* v2 memory.pressure, else not available */
	struct rc_cgroup_events ev;
};

/* Read dir's own files. -ENOENT if dir does not exist. */
int cgroup_read_dir(int version, const char *dir, struct rc_cgroup_mem *m);

/* The cgroup and the ancestor whose limit leaves the least room. */
struct rc_cgroup_state {
	struct rc_cgroup_mem self;
	/*
	 * Of the cgroup or ancestor (up to the hierarchy root) with the
	 * smallest policy_headroom(); limit = RC_UNLIMITED and the cgroup's
	 * own usage when no level has a limit.
	 */
	uint64_t limit;
	uint64_t usage;
	uint64_t inactive_file;
	uint64_t mapped_file;
	uint64_t limit_ino; /* 0 when unlimited */
	int limit_depth;    /* 0 = the cgroup itself, 1 = parent, ... */
	/*
	 * The nearest of the cgroup and its ancestors with a limit (what
	 * executors sharing a limit are grouped by), whatever room it leaves;
	 * nearest_depth -1 and nearest_ino 0 when no level has a limit.
	 */
	uint64_t nearest_ino;
	int nearest_depth;
};

/*
 * Read cg and walk its ancestors (each for its limit, and for its usage and
 * memory.stat only under a limit).
 */
int cgroup_read(const struct rc_cgroup *cg, struct rc_cgroup_state *st);

#endif /* RAMCACHE_CGROUP_H */
