// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent's Prometheus metrics: registry and text-format renderer.
 * Values are integers (counts, bytes, ns); seconds are printed from ns with
 * integer arithmetic so the output is exact and locale-proof.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <linux/types.h>

#include "pressure.h"
#include "ramcache/control.h"
#include "clock.h"
#include "metrics.h"
#include "policy.h"

#ifndef RAMCACHE_VERSION
#define RAMCACHE_VERSION "unknown"
#endif

_Static_assert((int)METRICS_RECLAIM_DIRECT == (int)RC_RECLAIM_DIRECT &&
		       (int)METRICS_RECLAIM_MEMCG == (int)RC_RECLAIM_MEMCG &&
		       (int)METRICS_RECLAIM_KINDS == (int)RC_RECLAIM_KINDS,
	       "reclaim kinds follow bpf/pressure.h");

static const struct {
	uint64_t ns;
	const char *le; /* as Go's strconv prints it, like client_golang */
} bounds[METRICS_HIST_BOUNDS] = {
	{ 1000ULL, "1e-06" },	  { 2500ULL, "2.5e-06" },
	{ 5000ULL, "5e-06" },	  { 10000ULL, "1e-05" },
	{ 25000ULL, "2.5e-05" },  { 50000ULL, "5e-05" },
	{ 100000ULL, "0.0001" },  { 250000ULL, "0.00025" },
	{ 500000ULL, "0.0005" },  { 1000000ULL, "0.001" },
	{ 2500000ULL, "0.0025" }, { 5000000ULL, "0.005" },
	{ 10000000ULL, "0.01" },  { 25000000ULL, "0.025" },
	{ 50000000ULL, "0.05" },  { 100000000ULL, "0.1" },
	{ 250000000ULL, "0.25" }, { 500000000ULL, "0.5" },
	{ 1000000000ULL, "1" },	  { 2500000000ULL, "2.5" },
	{ 5000000000ULL, "5" },	  { 10000000000ULL, "10" },
};

static const char *const reclaim_kind_names[METRICS_RECLAIM_KINDS] = {
	[METRICS_RECLAIM_DIRECT] = "direct",
	[METRICS_RECLAIM_MEMCG] = "memcg",
};

/* In the order of enum metrics_cmd_status. */
static const char *const cmd_status_names[METRICS_CMD_NR] = {
	"evicted", "not_found", "busy", "pinned", "timeout", "invalid"
};
_Static_assert(METRICS_CMD_EVICTED == 0 && METRICS_CMD_INVALID == 5 &&
		       METRICS_CMD_NR == 6,
	       "cmd_status_names follows enum metrics_cmd_status");

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char *const anomaly_names[METRICS_ANOM_NR] = {
	[METRICS_ANOM_INVALID_ACK] = "invalid_ack",
	[METRICS_ANOM_DUPLICATE_ACK] = "duplicate_ack",
	[METRICS_ANOM_LATE_ACK] = "late_ack",
	[METRICS_ANOM_ACK_OVERRUN] = "ack_overrun",
	[METRICS_ANOM_CMD_DONE_AHEAD] = "cmd_done_ahead",
	[METRICS_ANOM_EXECUTOR_STALLED] = "executor_stalled",
	[METRICS_ANOM_PAGE_RECREATED] = "page_recreated",
};

const char *metrics_anomaly_name(unsigned int kind)
{
	return kind < METRICS_ANOM_NR ? anomaly_names[kind] : "unknown";
}

uint64_t metrics_bound_ns(unsigned int i)
{
	return i < METRICS_HIST_BOUNDS ? bounds[i].ns : UINT64_MAX;
}

const char *metrics_bound_le(unsigned int i)
{
	return i < METRICS_HIST_BOUNDS ? bounds[i].le : "+Inf";
}

void metrics_init(struct metrics *m)
{
	pthread_mutex_init(&m->lock, NULL);
	memset(&m->v, 0, sizeof(m->v));
}

void metrics_destroy(struct metrics *m)
{
	pthread_mutex_destroy(&m->lock);
}

static void hist_observe(struct metrics_hist *h, uint64_t ns)
{
	unsigned int i = 0;

	/* le is inclusive: a value equal to a bound belongs to its bucket */
	while (i < METRICS_HIST_BOUNDS && ns > bounds[i].ns)
		i++;
	h->slots[i]++;
	h->count++;
	h->sum_ns += ns;
}

/* Every update is one short critical section, under the HTTP reader. */
static void observe(struct metrics *m, struct metrics_hist *h, uint64_t ns)
{
	pthread_mutex_lock(&m->lock);
	hist_observe(h, ns);
	pthread_mutex_unlock(&m->lock);
}

static void store(struct metrics *m, uint64_t *field, uint64_t v)
{
	pthread_mutex_lock(&m->lock);
	*field = v;
	pthread_mutex_unlock(&m->lock);
}

static void add(struct metrics *m, uint64_t *field, uint64_t v)
{
	pthread_mutex_lock(&m->lock);
	*field += v;
	pthread_mutex_unlock(&m->lock);
}

void metrics_reclaim_stall(struct metrics *m, unsigned int kind, uint64_t ns)
{
	if (kind < METRICS_RECLAIM_KINDS)
		observe(m, &m->v.reclaim_stall[kind], ns);
}

void metrics_evict_ack(struct metrics *m, uint64_t ns)
{
	observe(m, &m->v.evict_ack, ns);
}

void metrics_evict_freed(struct metrics *m, uint64_t ns)
{
	observe(m, &m->v.evict_freed, ns);
}

static void count_command(struct metrics *m, enum metrics_cmd_status s)
{
	add(m, &m->v.commands[s], 1);
}

void metrics_command_acked(struct metrics *m, uint32_t status)
{
	enum metrics_cmd_status s;

	switch (status) {
	case RAMCACHE_ACK_EVICTED:
		s = METRICS_CMD_EVICTED;
		break;
	case RAMCACHE_ACK_NOT_FOUND:
		s = METRICS_CMD_NOT_FOUND;
		break;
	case RAMCACHE_ACK_BUSY:
		s = METRICS_CMD_BUSY;
		break;
	case RAMCACHE_ACK_PINNED:
		s = METRICS_CMD_PINNED;
		break;
	default:
		s = METRICS_CMD_INVALID;
		break;
	}
	count_command(m, s);
}

void metrics_command_timeout(struct metrics *m)
{
	count_command(m, METRICS_CMD_TIMEOUT);
}

void metrics_anomaly(struct metrics *m, unsigned int kind, uint64_t n)
{
	if (kind < METRICS_ANOM_NR)
		add(m, &m->v.anomalies[kind], n);
}

void metrics_evaluation(struct metrics *m)
{
	add(m, &m->v.evaluations, 1);
}

void metrics_bytes_evicted(struct metrics *m, uint64_t bytes)
{
	add(m, &m->v.evicted_bytes, bytes);
}

void metrics_oom_kill(struct metrics *m)
{
	add(m, &m->v.oom_kills, 1);
}

void metrics_set_ringbuf_drops(struct metrics *m, uint64_t total)
{
	store(m, &m->v.ringbuf_drops, total);
}

void metrics_set_level(struct metrics *m, uint32_t level)
{
	pthread_mutex_lock(&m->lock);
	m->v.level = level;
	pthread_mutex_unlock(&m->lock);
}

void metrics_set_headroom(struct metrics *m, int64_t bytes)
{
	pthread_mutex_lock(&m->lock);
	m->v.headroom_bytes = bytes;
	pthread_mutex_unlock(&m->lock);
}

void metrics_set_target(struct metrics *m, uint64_t bytes)
{
	store(m, &m->v.target_bytes, bytes);
}

void metrics_set_rss(struct metrics *m, uint64_t bytes)
{
	store(m, &m->v.rss_bytes, bytes);
}

void metrics_snapshot(struct metrics *m, struct metrics_values *out)
{
	pthread_mutex_lock(&m->lock);
	*out = m->v;
	pthread_mutex_unlock(&m->lock);
}

int metrics_escape_label(char *dst, size_t len, const char *src)
{
	size_t n = 0;

	for (; *src; src++) {
		const char *rep = NULL;
		size_t k;

		if (*src == '\\')
			rep = "\\\\";
		else if (*src == '"')
			rep = "\\\"";
		else if (*src == '\n')
			rep = "\\n";
		k = rep ? 2 : 1;
		if (n + k >= len)
			return -ENOSPC;
		if (rep)
			memcpy(dst + n, rep, 2);
		else
			dst[n] = *src;
		n += k;
	}
	if (n >= len)
		return -ENOSPC;
	dst[n] = '\0';
	return (int)n;
}

/* An appender that remembers running out of room instead of failing. */
struct textbuf {
	char *buf;
	size_t len;
	size_t pos;
	bool full;
};

__attribute__((format(printf, 2, 3))) static void put(struct textbuf *o,
						      const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->pos) {
		o->full = true;
		return;
	}
	o->pos += n;
}

static void put_header(struct textbuf *o, const char *name, const char *type,
		       const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_seconds(struct textbuf *o, uint64_t ns)
{
	put(o, "%" PRIu64 ".%09" PRIu64 "\n", ns / NSEC_PER_SEC,
	    ns % NSEC_PER_SEC);
}

/* One histogram series; @label is `name="value",` or "". */
static void put_hist(struct textbuf *o, const char *name, const char *label,
		     const struct metrics_hist *h)
{
	const char *sep = *label ? "{" : "";
	uint64_t cum = 0;
	size_t ll = strlen(label);

	for (unsigned int i = 0; i <= METRICS_HIST_BOUNDS; i++) {
		cum += h->slots[i];
		put(o, "%s_bucket{%sle=\"%s\"} %" PRIu64 "\n", name, label,
		    metrics_bound_le(i), cum);
	}
	/* the label without its trailing comma, for _sum and _count */
	put(o, "%s_sum%s%.*s%s ", name, sep, (int)(ll ? ll - 1 : 0), label,
	    *label ? "}" : "");
	put_seconds(o, h->sum_ns);
	put(o, "%s_count%s%.*s%s %" PRIu64 "\n", name, sep,
	    (int)(ll ? ll - 1 : 0), label, *label ? "}" : "", h->count);
}

/* A counter or gauge without labels. */
static void put_u64(struct textbuf *o, const char *name, const char *type,
		    const char *help, uint64_t v)
{
	put_header(o, name, type, help);
	put(o, "%s %" PRIu64 "\n", name, v);
}

static void render_histograms(struct textbuf *o, const struct metrics_values *v)
{
	char label[64];

	put_header(
		o, "ramcache_reclaim_stall_seconds", "histogram",
		"Time the watched process spent stalled in direct or memory-cgroup reclaim.");
	for (unsigned int k = 0; k < METRICS_RECLAIM_KINDS; k++) {
		snprintf(label, sizeof(label), "kind=\"%s\",",
			 reclaim_kind_names[k]);
		put_hist(o, "ramcache_reclaim_stall_seconds", label,
			 &v->reclaim_stall[k]);
	}
	put_header(
		o, "ramcache_eviction_ack_seconds", "histogram",
		"Time from posting an eviction command to the executor's ack.");
	put_hist(o, "ramcache_eviction_ack_seconds", "", &v->evict_ack);
	put_header(
		o, "ramcache_eviction_freed_seconds", "histogram",
		"Time from posting an eviction command to the memory being seen freed.");
	put_hist(o, "ramcache_eviction_freed_seconds", "", &v->evict_freed);
}

/* A counter or gauge without labels, read from struct metrics_values. */
struct u64_metric {
	const char *name;
	const char *help;
	size_t off;
};

#define U64_METRIC(name, help, field)                              \
	{                                                          \
		name, help, offsetof(struct metrics_values, field) \
	}

static const struct u64_metric counters[] = {
	U64_METRIC("ramcache_evicted_bytes_total",
		   "Bytes the executor reported freed by evictions.",
		   evicted_bytes),
	U64_METRIC("ramcache_oom_kills_total",
		   "OOM kills seen by the BPF programs.", oom_kills),
	U64_METRIC("ramcache_ringbuf_drops_total",
		   "Events lost because the BPF ring buffer was full.",
		   ringbuf_drops),
	U64_METRIC("ramcache_evaluations_total",
		   "Eviction decisions made (rate-limited, not one per event).",
		   evaluations),
};

static const struct u64_metric byte_gauges[] = {
	U64_METRIC("ramcache_target_bytes",
		   "Bytes the agent currently wants the executor to free.",
		   target_bytes),
	U64_METRIC("ramcache_rss_bytes",
		   "Resident set size of the watched process.", rss_bytes),
};

static void put_u64s(struct textbuf *o, const char *type,
		     const struct u64_metric *m, size_t n,
		     const struct metrics_values *v)
{
	for (size_t i = 0; i < n; i++)
		put_u64(o, m[i].name, type, m[i].help,
			*(const uint64_t *)((const char *)v + m[i].off));
}

static void render_counters(struct textbuf *o, const struct metrics_values *v)
{
	put_header(o, "ramcache_commands_total", "counter",
		   "Eviction commands by outcome.");
	for (unsigned int s = 0; s < METRICS_CMD_NR; s++)
		put(o, "ramcache_commands_total{status=\"%s\"} %" PRIu64 "\n",
		    cmd_status_names[s], v->commands[s]);
	put_header(
		o, "ramcache_protocol_anomalies_total", "counter",
		"Control-page protocol violations seen from the executor, by kind.");
	for (unsigned int k = 0; k < METRICS_ANOM_NR; k++)
		put(o,
		    "ramcache_protocol_anomalies_total{kind=\"%s\"} %" PRIu64
		    "\n",
		    anomaly_names[k], v->anomalies[k]);
	put_u64s(o, "counter", counters, ARRAY_SIZE(counters), v);
}

static void render_gauges(struct textbuf *o, const struct metrics_values *v)
{
	char version[64];

	put_u64(o, "ramcache_level", "gauge",
		"Memory pressure level: 0 ok, 1 warn, 2 high, 3 critical.",
		v->level);
	put_header(
		o, "ramcache_level_state", "gauge",
		"1 for the current memory pressure level, 0 for the others.");
	for (unsigned int l = RAMCACHE_LEVEL_OK; l <= RAMCACHE_LEVEL_CRITICAL;
	     l++)
		put(o, "ramcache_level_state{level=\"%s\"} %d\n",
		    rc_level_name(l), v->level == l);
	put_header(
		o, "ramcache_headroom_bytes", "gauge",
		"Memory left before the limit, as the agent last measured it.");
	put(o, "ramcache_headroom_bytes %" PRId64 "\n", v->headroom_bytes);
	put_u64s(o, "gauge", byte_gauges, ARRAY_SIZE(byte_gauges), v);
	put_header(o, "ramcache_build_info", "gauge",
		   "Always 1; the version of the agent as a label.");
	if (metrics_escape_label(version, sizeof(version), RAMCACHE_VERSION) <
	    0)
		strcpy(version, "unknown");
	put(o, "ramcache_build_info{version=\"%s\"} 1\n", version);
}

int metrics_render(const struct metrics_values *v, char *buf, size_t len)
{
	struct textbuf o = { .buf = buf, .len = len };

	if (!len)
		return -ENOSPC;
	buf[0] = '\0';
	render_histograms(&o, v);
	render_counters(&o, v);
	render_gauges(&o, v);
	if (o.full) {
		buf[0] = '\0';
		return -ENOSPC;
	}
	return (int)o.pos;
}
