/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The agent's Prometheus metrics: a fixed registry the event loop updates
 * and a pure renderer for the text exposition format 0.0.4.
 *
 * Threads: the metrics_* updaters are called from the agent's event loop;
 * the HTTP server thread takes a copy with metrics_snapshot() and renders
 * that. Both sides go through m->lock, held only for a few stores.
 */
#ifndef RAMCACHE_METRICS_H
#define RAMCACHE_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Finite histogram bounds, 1us..10s in 1-2.5-5 steps; +Inf is implicit. */
#define METRICS_HIST_BOUNDS 22

enum metrics_reclaim_kind {
	METRICS_RECLAIM_DIRECT = 0, /* = RC_RECLAIM_DIRECT */
	METRICS_RECLAIM_MEMCG = 1,  /* = RC_RECLAIM_MEMCG */
	METRICS_RECLAIM_KINDS,
};

/* Outcome of an eviction command, the status label of commands_total. */
enum metrics_cmd_status {
	METRICS_CMD_EVICTED = 0,
	METRICS_CMD_NOT_FOUND,
	METRICS_CMD_BUSY,
	METRICS_CMD_PINNED,
	METRICS_CMD_TIMEOUT, /* no ack before the agent gave up */
	METRICS_CMD_INVALID, /* ack with a status outside enum ramcache_status */
	METRICS_CMD_NR,
};

/* Protocol anomalies, the kind label of protocol_anomalies_total. */
enum metrics_anomaly {
	METRICS_ANOM_INVALID_ACK = 0, /* malformed, never posted, wrong entry */
	METRICS_ANOM_DUPLICATE_ACK,   /* a command acked a second time */
	METRICS_ANOM_LATE_ACK,	      /* ack after the command timed out */
	METRICS_ANOM_ACK_OVERRUN,     /* acks overwritten before being read */
	METRICS_ANOM_CMD_DONE_AHEAD,  /* cmd_done > cmd_head */
	METRICS_ANOM_EXECUTOR_STALLED, /* executor heartbeat went stale */
	METRICS_ANOM_PAGE_RECREATED,   /* page replaced while attached */
	METRICS_ANOM_NR,
};

/* The kind's name, as events and the metric label spell it. */
const char *metrics_anomaly_name(unsigned int kind);

struct metrics_hist {
	uint64_t slots[METRICS_HIST_BOUNDS + 1]; /* per bucket, last is +Inf */
	uint64_t count;
	uint64_t sum_ns;
};

/* Plain values: what the renderer reads. */
struct metrics_values {
	struct metrics_hist reclaim_stall[METRICS_RECLAIM_KINDS];
	struct metrics_hist evict_ack;	 /* command posted -> executor acked */
	struct metrics_hist evict_freed; /* command posted -> memory seen freed */
	uint64_t commands[METRICS_CMD_NR];
	uint64_t anomalies[METRICS_ANOM_NR];
	uint64_t evaluations; /* eviction decisions made */
	uint64_t evicted_bytes;
	uint64_t oom_kills;
	uint64_t ringbuf_drops;
	uint32_t level; /* enum ramcache_level */
	int64_t headroom_bytes;
	uint64_t target_bytes;
	uint64_t rss_bytes;
};

struct metrics {
	pthread_mutex_t lock;
	struct metrics_values v;
};

/* Zero every metric. */
void metrics_init(struct metrics *m);
void metrics_destroy(struct metrics *m);

/*
 * Histograms: a reclaim stall of @kind (enum rc_reclaim_kind), eviction
 * latencies. Durations in ns; an out-of-range @kind is ignored.
 */
void metrics_reclaim_stall(struct metrics *m, unsigned int kind, uint64_t ns);
void metrics_evict_ack(struct metrics *m, uint64_t ns);
void metrics_evict_freed(struct metrics *m, uint64_t ns);

/* Count one command answered with @status (enum ramcache_status). */
void metrics_command_acked(struct metrics *m, uint32_t status);
/* Count one command that got no ack in time. */
void metrics_command_timeout(struct metrics *m);
/* Count @n anomalies of @kind (enum metrics_anomaly). */
void metrics_anomaly(struct metrics *m, unsigned int kind, uint64_t n);
void metrics_evaluation(struct metrics *m);

void metrics_bytes_evicted(struct metrics *m, uint64_t bytes);
void metrics_oom_kill(struct metrics *m);
/* Total ring-buffer drops as summed from the BPF stats map. */
void metrics_set_ringbuf_drops(struct metrics *m, uint64_t total);

/* Gauges. */
void metrics_set_level(struct metrics *m, uint32_t level);
void metrics_set_headroom(struct metrics *m, int64_t bytes);
void metrics_set_target(struct metrics *m, uint64_t bytes);
void metrics_set_rss(struct metrics *m, uint64_t bytes);

/* Copy the values under the lock. */
void metrics_snapshot(struct metrics *m, struct metrics_values *out);

/*
 * Render @v as Prometheus text format 0.0.4 into @buf, NUL-terminated.
 * Returns the length without the NUL, or -ENOSPC when @len is too small
 * (METRICS_RENDER_SIZE always is enough). Pure: no lock, no I/O.
 */
#define METRICS_RENDER_SIZE 16384
int metrics_render(const struct metrics_values *v, char *buf, size_t len);

/*
 * Escape @src as a label value ('\\', '"' and newline) into @dst.
 * Returns the length written, or -ENOSPC.
 */
int metrics_escape_label(char *dst, size_t len, const char *src);

/* Upper bound of histogram bucket @i in ns, and as the text of its le. */
uint64_t metrics_bound_ns(unsigned int i);
const char *metrics_bound_le(unsigned int i);

#endif /* RAMCACHE_METRICS_H */
