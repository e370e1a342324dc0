/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The ABI between the BPF programs in pressure.bpf.c and the agent.
 * Plain structs and constants only: this header is included by both sides.
 */
#ifndef RAMCACHE_PRESSURE_H
#define RAMCACHE_PRESSURE_H

#include "tablesize.h"

#define RC_COMM_LEN   16
#define RC_HIST_SLOTS 32
/* memory cgroups watched for reclaim: at most one per target */
#define RC_MAX_MEMCGS RC_MAX_TARGETS

/* Kinds of event in the ring buffer; each starts with struct rc_event_hdr. */
enum rc_event_type {
	RC_EV_FAULT_BURST = 1,
	RC_EV_RECLAIM = 2,
	RC_EV_KSWAPD = 3,
	RC_EV_OOM_KILL = 4,
	RC_EV_RSS = 5,
};

enum rc_reclaim_kind {
	RC_RECLAIM_DIRECT = 0,
	RC_RECLAIM_MEMCG = 1,
	RC_RECLAIM_KINDS = 2,
};

/* Histograms in the hists map: index = kind * RC_HIST_SLOTS + log2 slot. */
enum rc_hist_kind {
	RC_HIST_DIRECT = 0,
	RC_HIST_MEMCG = 1,
	RC_HIST_KINDS = 2,
};

struct rc_event_hdr {
	__u32 type;
	__u32 pid; /* thread id */
	__u32 tgid;
	__u32 cpu;
	__u64 ts_ns; /* bpf_ktime_get_ns(), CLOCK_MONOTONIC */
};

struct rc_fault_burst {
	struct rc_event_hdr hdr;
	__u64 window_ns;
	__u64 faults; /* faults of this tgid on this CPU within the window */
};

struct rc_reclaim {
	struct rc_event_hdr hdr;
	__u32 kind; /* enum rc_reclaim_kind */
	__u32 order;
	__u64 latency_ns;
	__u64 nr_reclaimed; /* pages */
	__u64 memcg_id; /* cgroup inode of the task's memory cgroup, 0 if unknown */
	char comm[RC_COMM_LEN];
};

struct rc_kswapd {
	struct rc_event_hdr hdr;
	__u32 nid;
	__u32 awake; /* 1 on wake, 0 on sleep */
	__u32 order;
	__u32 zid;
};

/*
 * Kernels before 6.8 tell only the victim's pid: when the victim is not the
 * task that ran into the OOM, comm is empty and victim_uid RC_UID_UNKNOWN,
 * and the agent reads what it can from /proc while the victim still exists.
 */
#define RC_UID_UNKNOWN 0xffffffffu

struct rc_oom_kill {
	struct rc_event_hdr hdr;
	__u32 victim_pid;
	__u32 victim_uid;
	__u64 anon_rss; /* bytes */
	__u64 file_rss;
	__u64 shmem_rss;
	__u64 total_vm; /* bytes */
	char comm[RC_COMM_LEN];
};

/* Emitted when a tracked process's RSS moves by at least rss_step bytes. */
struct rc_rss {
	struct rc_event_hdr hdr;
	__u64 anon; /* bytes */
	__u64 file;
	__u64 shmem;
	__u64 total;
};

/*
 * Tracked processes. The agent writes a target's tgid into a free slot of
 * the targets array; the BPF side learns the process's mm (a task iterator
 * run by the agent, and again on exec) and files it in mm_index, an open
 * addressing table over a hash of the mm pointer, so that the fault and
 * rss_stat programs identify a tracked process from the mm alone: plain
 * loads, no helper call, no map lookup, no per-CPU state to keep up to date.
 */
#define RC_SLOT_MASK \
	((1ULL << RC_TARGET_BITS) - 1) /* keys of two mm's
							* differ above these */
/* an eighth full at most, so that a lookup rarely goes past one entry */
#define RC_MM_BITS   (RC_TARGET_BITS + 3)
#define RC_MM_SLOTS  (1 << RC_MM_BITS)
#define RC_MM_PROBES 8
/* Keys of entries that hold no mm; a real mm's key is above RC_SLOT_MASK. */
#define RC_MM_FREE 0ULL /* never used: a lookup stops here */
#define RC_MM_TOMB 1ULL /* removed: lookups go on past it */
#define RC_MM_BUSY 2ULL /* being filled in by mm_learn */

/*
 * One entry of mm_index: a tracked mm and everything the fault and
 * rss_stat programs read to judge its events, on one cache line. key is
 * (mm key & ~RC_SLOT_MASK) | slot (the mm key: the mm pointer minus
 * mm_index_addr), or one of the RC_MM_ values above. pages is the RSS as
 * last reported, in pages per counter (MM_FILEPAGES, MM_ANONPAGES,
 * MM_SWAPENTS, MM_SHMEMPAGES); an event is due when one moves by step.
 * gen tells this mm's burst windows from those of the slot's earlier mm.
 */
struct rc_mm {
	__u64 key;
	__u64 check_mask; /* the clock is read every check_mask + 1 faults */
	__u64 step;	  /* pages */
	__u64 gen;
	__s64 pages[4];
} __attribute__((aligned(64)));

/*
 * Per-CPU fault counters of one slot (slot 0 is the system when nothing is
 * filtered). A fault adds to faults; every check_mask + 1 of them the clock
 * is read and the burst window moved on: window_base is the count at
 * which the window began, gen the rc_mm gen it was counted for. The agent
 * never writes these: a slot's counts go on across the processes that hold
 * it, and the agent reads them against the count when tracking began.
 */
struct rc_track {
	__u64 faults;
	__u64 window_start_ns;
	__u64 window_base;
	__u64 gen;
};

/* Per-CPU reclaim totals of one slot. */
struct rc_stalls {
	__u64 count[RC_RECLAIM_KINDS];
	__u64 ns[RC_RECLAIM_KINDS];
	__u64 pages[RC_RECLAIM_KINDS];
};

/*
 * A slot's entry of the per-CPU counters map (key: the slot). Apart per
 * slot, not one entry for all: a per-CPU value is at most 32 KiB.
 */
struct rc_counters {
	struct rc_track fault;
	struct rc_stalls stall;
};

/*
 * One tracked process (shared, not per CPU): its tgid (written by the
 * agent, 0 when the slot is free), the key of the mm learnt for it (0:
 * none yet), and for the agent's wake-ups the RSS in pages (file + anon +
 * shmem) at the last RSS event that woke it and the RSS events since that
 * did not.
 */
struct rc_target {
	__u32 tgid;
	__u32 pad;
	__u64 mm_key;
	__s64 woke_pages;
	__u64 quiet;
};

/*
 * While the agent is calm it sets rss_wake_pages: an RSS event wakes it
 * only when the RSS moved that far since the last one that did (or after
 * RC_QUIET_MAX that did not); the others wait in the ring for its next
 * wake-up. Every other event wakes it at once. 0: every event wakes it.
 */
#define RC_QUIET_MAX 256

/* Global per-CPU counters, index of the stats map. */
enum rc_stat {
	RC_STAT_DROPS = 0, /* ring buffer full: event lost */
	RC_STAT_KSWAPD_WAKES,
	RC_STAT_DIRECT_RECLAIMS,
	RC_STAT_MEMCG_RECLAIMS,
	RC_STAT_OOM_KILLS,
	RC_STAT_MM_INDEX_FULL, /* an mm could not be filed: target not traced */
	RC_STAT_NR,
};

#endif /* RAMCACHE_PRESSURE_H */
