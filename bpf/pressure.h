/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The ABI between the BPF programs in pressure.bpf.c and the agent.
 * Plain structs and constants only: this header is included by both sides.
 */
#ifndef RAMCACHE_PRESSURE_H
#define RAMCACHE_PRESSURE_H

#define RC_COMM_LEN   16
#define RC_HIST_SLOTS 32
#define RC_MAX_MEMCGS 16

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
 * Per-CPU state of a tracked tgid (key 0 when the whole system is
 * watched). Other processes are turned away by comparing with the global
 * target_tgid first, so their faults cost no map lookup at all.
 */
struct rc_track {
	__u64 faults;
	__u64 window_start_ns;
	__u64 window_faults;
	__u64 reclaim_count[RC_RECLAIM_KINDS];
	__u64 reclaim_ns[RC_RECLAIM_KINDS];
	__u64 reclaim_pages[RC_RECLAIM_KINDS];
};

/*
 * RSS of the tracked process as last reported (shared, not per CPU): the
 * mm it belongs to (learnt from the first event in its own context), the
 * total last emitted and each counter then, in pages. Only the counter the
 * kernel just changed is read, unless a report is due.
 */
struct rc_rss_state {
	__u64 mm;
	__u64 total;
	__s64 pages[4]; /* MM_FILEPAGES, MM_ANONPAGES, MM_SWAPENTS, MM_SHMEMPAGES */
};

/* Global per-CPU counters, index of the stats map. */
enum rc_stat {
	RC_STAT_DROPS = 0, /* ring buffer full: event lost */
	RC_STAT_KSWAPD_WAKES,
	RC_STAT_DIRECT_RECLAIMS,
	RC_STAT_MEMCG_RECLAIMS,
	RC_STAT_OOM_KILLS,
	RC_STAT_NR,
};

#endif /* RAMCACHE_PRESSURE_H */
