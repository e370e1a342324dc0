/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Everything the agent prints on stdout: human-readable lines, or JSON
 * Lines (one object per event, a "type" field) with --json.
 */
#ifndef RAMCACHE_OUTPUT_H
#define RAMCACHE_OUTPUT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <linux/types.h>

#include "pressure.h"

struct probes;
struct hist;

struct out {
	FILE *f;
	bool json;
	bool verbose;
};

/*
 * Who an executor's events are about: its command name, memory cgroup and
 * memory domain (executors that share a limit). Strings may be NULL.
 */
struct out_tag {
	const char *comm;
	const char *cgroup; /* its memory cgroup's path, or NULL: none */
	const char *domain; /* the limiting cgroup's path, or "machine" */
};

struct start_info {
	pid_t pid;    /* 0: whole system */
	pid_t ns_pid; /* the same process in its own pid namespace */
	const char *comm;
	const char *memcg; /* path of the target's memory cgroup, or NULL */
	int memcg_version;
	const char *control; /* control page path, or NULL */
	const struct probes *probes;
	const char *fault_probes;    /* --fault-probes: "auto" or "on" */
	uint64_t headroom, inactive; /* thresholds in use */
};

struct summary {
	pid_t pid;
	const struct out_tag *tag; /* NULL: no target */
	double interval_s;
	uint64_t rss; /* bytes, 0 when unknown */
	/* of rss, file-backed (mapped weights), once an rss event told it */
	bool has_rss_file;
	uint64_t rss_file;
	uint64_t faults; /* since start */
	double faults_per_s;
	uint64_t stalls[RC_RECLAIM_KINDS]; /* in the interval */
	uint64_t stall_ns[RC_RECLAIM_KINDS];
	uint64_t mem_available;
	bool has_memcg;
	uint64_t memcg_limit, memcg_usage;
	uint64_t headroom; /* the tighter of system and cgroup */
	bool has_forecast;
	uint64_t forecast; /* headroom predicted --horizon ahead */
	/* the thresholds in force (rescaled with the target's cgroup) */
	uint64_t threshold_headroom, threshold_inactive;
	uint64_t drops;		   /* ring buffer, since start */
	uint64_t kswapd_wakes;	   /* since start */
	uint64_t oom_kills;	   /* since start, whole system */
	bool has_cgroup_oom;	   /* the target has a memory cgroup */
	uint64_t oom_kills_cgroup; /* in it, since the agent attached */
	uint64_t evaluations;	   /* eviction decisions made, since start */
	uint64_t eval_requests;	   /* events and ticks that asked for one */
	const char *level;	   /* pressure level name, or NULL */
	uint32_t reasons;	   /* RC_R_* bits */
	bool has_eta;
	double eta_s;
	/* pages/s, of the target's memcg when it counts them, else system */
	double refault_file_s, refault_anon_s;
	double swap_in_s, swap_out_s;
	double majflt_s; /* of the target */
	bool psi;
	double psi_some, psi_full; /* avg10, percent */
	/* where refaults, swap and PSI came from: "memcg" or "system" */
	const char *refaults_from, *swap_from, *psi_from;
	/* the memcg's own counts (cgroup.h rc_cgroup_events), cumulative */
	bool has_limit_events, has_swap_events;
	uint64_t memcg_high, memcg_max, swap_max, swap_fail;
	uint64_t evict_sent, evict_acked, evict_timeouts; /* since start */
	uint64_t evict_busy; /* acks that said busy, since start */
	uint64_t bytes_evicted;
};

void out_start(struct out *o, const struct start_info *s);
/* One event from the ring buffer; @len as the ring buffer gave it. */
void out_event(struct out *o, const void *data, size_t len);
void out_summary(struct out *o, const struct summary *s);
/* The pressure level changed, or a new reason fired at the same level. */
struct pressure_info {
	const char *level;
	uint32_t reasons; /* RC_R_* bits */
	bool has_eta;
	double eta_s;
	uint64_t headroom;
	pid_t pid;
	const char *
		domain; /* a memory domain's level (--all); NULL: the agent's */
};
void out_pressure(struct out *o, const struct pressure_info *p);
/* A target was found (--match) or has gone. */
void out_target(struct out *o, const char *state, pid_t pid, const char *comm);
/* The target's memory cgroup is now @memcg (NULL: none), version @v. */
void out_target_cgroup(struct out *o, pid_t pid, const char *comm,
		       const char *memcg, int v);
/* --all adopted @pid, found by @how ("uprobe", "scan", "exec"). */
void out_target_found(struct out *o, pid_t pid, const struct out_tag *tag,
		      double weight, const char *how);
struct match_result;
/* --match picked @pid: which process, and why (r: what the scan saw). */
void out_target_pick(struct out *o, pid_t pid, const char *comm,
		     const char *pattern, const struct match_result *r);
void out_exit(struct out *o, const char *reason, int code);
/* A one-line warning on stderr, and as {"type":"warning"} with --json. */
/* A line on stderr only (stdout may be gone). */
void out_note(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void out_warn(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * A periodic read of @what failed with @err (-errno): warned once, not
 * every time; *@last is the error told last, and 0 rearms it.
 */
void out_read_error(struct out *o, int *last, int err, const char *what);

/*
 * A fatal error: "ramcache-bpf: <message>" on stderr, and with --json also
 * {"type":"error"} on stdout. @o may be NULL (before the agent runs).
 * Returns @code, for `return out_fail(...)`.
 */
int out_fail(struct out *o, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Warnings for tracepoints left off (missing, other arguments, attach). */
void out_probe_warnings(struct out *o, const struct probes *ps);

/* The control page was attached or dropped (@why: NULL or the reason). */
/* The control page was attached, refused or dropped. */
struct control_info {
	const char *state; /* attached, refused, dropped, stalled, resumed */
	const char *path;  /* file, /proc/<pid>/fd/<n>, or where we look */
	const char *discovery; /* "memfd" or "path" (--control) */
	pid_t pid;	       /* the target, in our pid namespace */
	pid_t ns_pid;	       /* the same process in its own namespace */
	const char *why;       /* or NULL: refused: the message; dropped: */
	const char *message;   /* exited, killed, closed ... and the message */
	int signal;	       /* dropped, killed: the signal */
	int status;	       /* dropped, exited: the status, -1 unknown */
	bool oom_kill;	       /* dropped, killed: by the OOM killer */
	int inflight;	       /* dropped: commands it closed */
	const struct out_tag *tag; /* or NULL */
};
void out_control(struct out *o, const struct control_info *c);

/*
 * The agent needs bytes from an executor that it cannot get: what is left
 * is in use (held, answered busy, or active), or pinned.
 */
struct cannot_free_info {
	pid_t pid;
	pid_t ns_pid;
	uint64_t wanted;       /* bytes the agent needs (the deficit) */
	uint64_t short_bytes;  /* of those, what it cannot get */
	uint64_t active_bytes; /* entries flagged active, not commanded */
	uint64_t held_bytes;   /* commands out for active entries */
	uint64_t busy_bytes;   /* answered busy, still active */
	uint64_t pinned_bytes;
	uint64_t limit;	 /* the domain's limit, 0 none */
	const char *why; /* held, busy, pinned or active: the most bytes */
	const struct out_tag *tag; /* or NULL */
};
void out_cannot_free(struct out *o, const struct cannot_free_info *c);

/* The per-fault programs went on or off (core/faultwatch.h). */
struct fault_probes_info {
	bool on;
	const char *why;  /* near, busy, calm, or failed */
	uint64_t far;	  /* bytes the nearest domain was from needing them */
	uint64_t margin;  /* within which they go on */
	uint64_t took_ns; /* the attach or detach */
};
void out_fault_probes(struct out *o, const struct fault_probes_info *f);

/* A command posted, or with seq 0 one --dry-run would post. */
struct evict_info {
	pid_t pid;
	uint64_t ts_ns; /* CLOCK_MONOTONIC, when it was posted */
	uint64_t seq;
	uint64_t id;
	const char *label;
	uint64_t bytes;
	uint32_t reason; /* enum ramcache_reason */
	bool active;
	uint64_t headroom, forecast;
	const struct out_tag *tag; /* or NULL */
	bool has_score;		   /* ranked in a domain of several */
	double score;		   /* the weighted score it was ranked by */
	/* with a score: "domain" (short now, ranked across the domain) or
	 * "own" (what this executor's growth or load will take) */
	const char *charged;
};
void out_evict(struct out *o, const struct evict_info *e);

/* A command completed (acked, timed out or left unacked at exit). */
struct evict_done_info {
	pid_t pid;
	uint64_t seq, id;
	const char *label;
	const char *status;
	uint64_t bytes;
	bool acked;
	uint64_t bytes_freed;			  /* when acked */
	uint64_t recv_latency_ns, ack_latency_ns; /* when acked */
	uint64_t freed_latency_ns;		  /* 0: RSS drop not seen */
	const struct out_tag *tag;		  /* or NULL */
};
void out_evict_done(struct out *o, const struct evict_done_info *d);

/*
 * The executor broke the control page protocol (@kind, a
 * metrics_anomaly_name()), about command @seq (0: none); @detail says how.
 */
void out_anomaly(struct out *o, pid_t pid, const char *kind, uint64_t seq,
		 const char *detail);

/* A log2 histogram at exit: @name in JSON, @title in text. */
void out_hist(struct out *o, const char *name, const char *title,
	      const struct hist *h);

/* libbpf's messages, shown with -v only. */
void out_set_verbose_libbpf(bool on);
int out_libbpf_print(int level, const char *fmt, va_list args);

/* Local wall clock as HH:MM:SS, the prefix of text lines. */
void out_clock(char *buf, size_t len);

#endif /* RAMCACHE_OUTPUT_H */
