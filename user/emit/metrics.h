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

#include "tablesize.h"

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
	METRICS_ANOM_NR,
};

/* The kind's name, as events and the metric label spell it. */
const char *metrics_anomaly_name(unsigned int kind);

struct metrics_hist {
	uint64_t slots[METRICS_HIST_BOUNDS + 1]; /* per bucket, last is +Inf */
	uint64_t count;
	uint64_t sum_ns;
};

/*
 * Executors are kept per slot, domains per index: the exposed series are
 * bounded by METRICS_SLOTS and METRICS_DOMAINS however many processes come
 * and go. Binding a slot replaces its labels and zeroes its counters.
 */
#define METRICS_SLOTS	RC_MAX_TARGETS
#define METRICS_DOMAINS RC_MAX_TARGETS
/* Label text as stored, sanitised, NUL included; longer input is cut. */
#define METRICS_COMM_LEN   64
#define METRICS_CGROUP_LEN 256
#define METRICS_DOMAIN_LEN 128
/* eta_ns of a domain whose headroom is not shrinking: rendered +Inf */
#define METRICS_NO_ETA UINT64_MAX

enum metrics_exec_state {
	METRICS_EXEC_FREE = 0, /* never bound: not rendered */
	METRICS_EXEC_ATTACHED,
	METRICS_EXEC_EXITED, /* unbound: final counts shown until reused */
};

struct metrics_exec {
	uint32_t state; /* enum metrics_exec_state */
	int32_t pid;
	uint32_t domain; /* index into metrics_values.dom */
	/* the domain's name when last known: the label outlives the domain */
	char domain_name[METRICS_DOMAIN_LEN];
	char comm[METRICS_COMM_LEN];
	char cgroup[METRICS_CGROUP_LEN];
	struct metrics_hist evict_ack;
	struct metrics_hist evict_freed;
	uint64_t commands[METRICS_CMD_NR];
	uint64_t anomalies[METRICS_ANOM_NR];
	uint64_t evicted_bytes;
	uint64_t oom_kills; /* OOM kills whose victim was this executor */
	uint64_t rss_bytes;
	uint64_t target_bytes;
};

struct metrics_domain {
	bool set;
	char name[METRICS_DOMAIN_LEN];
	uint32_t level;	      /* enum ramcache_level */
	uint64_t limit_bytes; /* 0: not known */
	int64_t headroom_bytes;
	uint64_t eta_ns; /* until headroom runs out; METRICS_NO_ETA */
};

/*
 * --all: what looking for executors cost, per principal (a user, a
 * container, root: core/principal.h), as the agent's admission
 * counts it. Kept per index of its table: at most METRICS_PRINCIPALS.
 */
#define METRICS_PRINCIPALS    RC_MAX_TARGETS
#define METRICS_PRINCIPAL_LEN 64

struct metrics_principal {
	bool set;
	char name[METRICS_PRINCIPAL_LEN];
	uint64_t spent_ns; /* looking at its processes */
	uint64_t looks;	   /* processes of it looked at for a page */
	uint64_t deferred; /* looks put off: its share was spent */
};

/*
 * Plain values: what the renderer reads. The unlabelled families are
 * machine-wide totals: they keep counting what executors that left did.
 * The agent-wide level and headroom are the agent's own (set by it, there
 * whether or not a domain is); RSS and target are summed over the attached
 * slots when rendered.
 */
struct metrics_values {
	struct metrics_hist reclaim_stall[METRICS_RECLAIM_KINDS];
	struct metrics_hist evict_ack;	 /* command posted -> executor acked */
	struct metrics_hist evict_freed; /* command posted -> memory seen freed */
	uint64_t commands[METRICS_CMD_NR];
	uint64_t anomalies[METRICS_ANOM_NR];
	uint64_t evaluations; /* eviction decisions made */
	uint64_t evicted_bytes;
	uint64_t oom_kills; /* every OOM kill on the machine */
	uint64_t ringbuf_drops;
	uint64_t refused;  /* executors refused a place: every one taken */
	bool fault_probes; /* the per-fault programs are attached */
	uint64_t fault_switches[2]; /* to off, to on */
	uint64_t attach_ns;	    /* the last attach took */
	uint64_t waiting;	    /* of those, still waiting for one */
	uint32_t level; /* enum ramcache_level, the agent's overall */
	int64_t headroom_bytes;
	struct metrics_exec exec[METRICS_SLOTS];
	struct metrics_domain dom[METRICS_DOMAINS];
	struct metrics_principal princ[METRICS_PRINCIPALS];
};

struct metrics {
	pthread_mutex_t lock;
	struct metrics_values v;
};

/* Zero every metric. */
void metrics_init(struct metrics *m);
void metrics_destroy(struct metrics *m);

/*
 * Executors. Bind @slot (< METRICS_SLOTS) to a process: its labels become
 * @comm, @cgroup (NULL: none) and domain @dom (its name if the domain is
 * set, else the index until it is), its counters start at 0. Unbind keeps
 * the slot's final counts exposed (rss and target 0, ramcache_executor_up
 * 0) until the slot is bound again. Strings are sanitised here.
 * Out-of-range slots and domains return -EINVAL; updaters given one, or a
 * slot not attached, change only the machine-wide totals.
 *
 * Domains follow their executors, so no gauge of a domain nobody is in
 * stays frozen: when a bind, relabel or unbind leaves a set domain without
 * an attached executor (and it is not the one just bound into), that
 * domain is cleared. A domain set with no executor at all (the machine,
 * watched alone) therefore lasts until the first executor binds elsewhere.
 */
int metrics_exec_bind(struct metrics *m, unsigned int slot, int pid,
		      const char *comm, const char *cgroup, unsigned int dom);
void metrics_exec_unbind(struct metrics *m, unsigned int slot);
/* The attached executor in @slot moved: new cgroup label and domain. */
int metrics_exec_relabel(struct metrics *m, unsigned int slot,
			 const char *cgroup, unsigned int dom);

/*
 * Domains. Set or refresh domain @dom (< METRICS_DOMAINS): @name is its
 * label (the limiting cgroup, or "machine"), @limit_bytes 0 when unknown,
 * @eta_ns METRICS_NO_ETA when headroom is not shrinking, @level an enum
 * ramcache_level. Clear removes its series.
 */
int metrics_domain_set(struct metrics *m, unsigned int dom, const char *name,
		       uint64_t limit_bytes, int64_t headroom_bytes,
		       uint64_t eta_ns, uint32_t level);
void metrics_domain_clear(struct metrics *m, unsigned int dom);

/*
 * Histograms: a reclaim stall of @kind (enum rc_reclaim_kind), machine-wide;
 * eviction latencies of the executor in @slot. Durations in ns; an
 * out-of-range @kind is ignored.
 */
void metrics_reclaim_stall(struct metrics *m, unsigned int kind, uint64_t ns);
void metrics_evict_ack(struct metrics *m, unsigned int slot, uint64_t ns);
void metrics_evict_freed(struct metrics *m, unsigned int slot, uint64_t ns);

/* Count one command of @slot answered with @status (enum ramcache_status). */
void metrics_command_acked(struct metrics *m, unsigned int slot,
			   uint32_t status);
/* Count one command of @slot that got no ack in time. */
void metrics_command_timeout(struct metrics *m, unsigned int slot);
/* Count @n anomalies of @kind (enum metrics_anomaly) from @slot. */
void metrics_anomaly(struct metrics *m, unsigned int slot, unsigned int kind,
		     uint64_t n);
void metrics_bytes_evicted(struct metrics *m, unsigned int slot,
			   uint64_t bytes);
/* An OOM kill whose victim was the executor in @slot. */
void metrics_exec_oom_kill(struct metrics *m, unsigned int slot);
void metrics_set_rss(struct metrics *m, unsigned int slot, uint64_t bytes);
void metrics_set_target(struct metrics *m, unsigned int slot, uint64_t bytes);

/*
 * The counts of principal @i (< METRICS_PRINCIPALS) named @name (sanitised
 * here; NULL: clear the entry). Returns -EINVAL for an index out of range.
 */
int metrics_principal_set(struct metrics *m, unsigned int i, const char *name,
			  uint64_t spent_ns, uint64_t looks, uint64_t deferred);

/* Machine-wide. */
void metrics_evaluation(struct metrics *m);
/* Any OOM kill seen by the BPF programs. */
void metrics_oom_kill(struct metrics *m);
/* Total ring-buffer drops as summed from the BPF stats map. */
void metrics_set_ringbuf_drops(struct metrics *m, uint64_t total);
/* An executor was refused a place (every one taken); @waiting wait now. */
void metrics_executor_refused(struct metrics *m);
/* The per-fault programs went @on (the attach took @attach_ns) or off. */
void metrics_fault_probes(struct metrics *m, bool on, uint64_t attach_ns);
void metrics_set_waiting(struct metrics *m, uint64_t waiting);
/* The agent's overall level (enum ramcache_level) and headroom. */
void metrics_set_level(struct metrics *m, uint32_t level);
void metrics_set_headroom(struct metrics *m, int64_t bytes);

/* Copy the values under the lock (about 80 KiB: not on a small stack). */
void metrics_snapshot(struct metrics *m, struct metrics_values *out);

/*
 * Render @v as Prometheus text format 0.0.4 into @buf, NUL-terminated.
 * Returns the length without the NUL, or -ENOSPC when @len is too small
 * (then @buf holds ""). METRICS_RENDER_SIZE fits a registry with no
 * executor; METRICS_RENDER_MAX fits every slot and domain bound with the
 * longest labels and largest values. Pure: no lock, no I/O.
 */
#define METRICS_RENDER_SIZE (16 * 1024)
#define METRICS_RENDER_MAX  (RC_MAX_TARGETS * 64 * 1024) /* 4 MiB at 64 */
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
