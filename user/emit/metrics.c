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
#include "proc/clock.h"
#include "emit/metrics.h"
#include "core/policy.h"
#include "emit/sanitize.h"

#ifndef RAMCACHE_VERSION
#define RAMCACHE_VERSION "unknown"
#endif

_Static_assert((int)METRICS_RECLAIM_DIRECT == (int)RC_RECLAIM_DIRECT &&
		       (int)METRICS_RECLAIM_MEMCG == (int)RC_RECLAIM_MEMCG &&
		       (int)METRICS_RECLAIM_KINDS == (int)RC_RECLAIM_KINDS,
	       "reclaim kinds follow bpf/pressure.h");
_Static_assert(METRICS_SLOTS == RC_MAX_TARGETS,
	       "one metrics slot per BPF target");
_Static_assert(METRICS_DOMAINS >= METRICS_SLOTS,
	       "every executor can be a domain of its own");

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

/* The slot's values when @slot is attached, under m->lock. */
static struct metrics_exec *exec_of(struct metrics *m, unsigned int slot)
{
	if (slot >= METRICS_SLOTS ||
	    m->v.exec[slot].state != METRICS_EXEC_ATTACHED)
		return NULL;
	return &m->v.exec[slot];
}

/* Copy @src, sanitised and cut at a character boundary, into @dst. */
static void label_copy(char *dst, size_t len, const char *src)
{
	char tmp[TEXT_SANITIZED_LEN(METRICS_CGROUP_LEN)];

	sanitize_text(tmp, len < sizeof(tmp) ? len : sizeof(tmp),
		      src ? src : "", src ? strlen(src) : 0);
	memcpy(dst, tmp, strlen(tmp) + 1);
}

/* Under m->lock: the label of @e's domain, from the domain if it is set. */
static void name_domain(struct metrics_values *v, struct metrics_exec *e)
{
	if (v->dom[e->domain].set)
		memcpy(e->domain_name, v->dom[e->domain].name,
		       sizeof(e->domain_name));
	else
		snprintf(e->domain_name, sizeof(e->domain_name), "%u",
			 e->domain);
}

/*
 * Under m->lock: clear every set domain with nobody attached but @keep
 * (-1: none).
 */
static void drop_idle_domains(struct metrics_values *v, int keep)
{
	bool used[METRICS_DOMAINS] = { false };

	for (unsigned int i = 0; i < METRICS_SLOTS; i++)
		if (v->exec[i].state == METRICS_EXEC_ATTACHED)
			used[v->exec[i].domain] = true;
	for (unsigned int d = 0; d < METRICS_DOMAINS; d++)
		if (v->dom[d].set && !used[d] && (int)d != keep)
			memset(&v->dom[d], 0, sizeof(v->dom[d]));
}

int metrics_exec_bind(struct metrics *m, unsigned int slot, int pid,
		      const char *comm, const char *cgroup, unsigned int dom)
{
	struct metrics_exec e = { .state = METRICS_EXEC_ATTACHED };

	if (slot >= METRICS_SLOTS || dom >= METRICS_DOMAINS)
		return -EINVAL;
	e.pid = pid;
	e.domain = dom;
	label_copy(e.comm, sizeof(e.comm), comm);
	label_copy(e.cgroup, sizeof(e.cgroup), cgroup);
	pthread_mutex_lock(&m->lock);
	name_domain(&m->v, &e);
	m->v.exec[slot] = e;
	drop_idle_domains(&m->v, (int)dom);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

int metrics_exec_relabel(struct metrics *m, unsigned int slot,
			 const char *cgroup, unsigned int dom)
{
	char cg[METRICS_CGROUP_LEN];
	struct metrics_exec *e;
	int err = -EINVAL;

	if (dom >= METRICS_DOMAINS)
		return -EINVAL;
	label_copy(cg, sizeof(cg), cgroup);
	pthread_mutex_lock(&m->lock);
	e = exec_of(m, slot);
	if (e) {
		memcpy(e->cgroup, cg, sizeof(cg));
		e->domain = dom;
		name_domain(&m->v, e);
		drop_idle_domains(&m->v, (int)dom);
		err = 0;
	}
	pthread_mutex_unlock(&m->lock);
	return err;
}

void metrics_exec_unbind(struct metrics *m, unsigned int slot)
{
	struct metrics_exec *e;

	pthread_mutex_lock(&m->lock);
	e = exec_of(m, slot);
	if (e) {
		e->state = METRICS_EXEC_EXITED;
		e->rss_bytes = 0;
		e->target_bytes = 0;
		drop_idle_domains(&m->v, -1);
	}
	pthread_mutex_unlock(&m->lock);
}

int metrics_domain_set(struct metrics *m, unsigned int dom, const char *name,
		       uint64_t limit_bytes, int64_t headroom_bytes,
		       uint64_t eta_ns, uint32_t level)
{
	struct metrics_domain d = { .set = true };

	if (dom >= METRICS_DOMAINS)
		return -EINVAL;
	label_copy(d.name, sizeof(d.name), name);
	d.limit_bytes = limit_bytes;
	d.headroom_bytes = headroom_bytes;
	d.eta_ns = eta_ns;
	d.level = level;
	pthread_mutex_lock(&m->lock);
	m->v.dom[dom] = d;
	for (unsigned int i = 0; i < METRICS_SLOTS; i++)
		if (m->v.exec[i].state == METRICS_EXEC_ATTACHED &&
		    m->v.exec[i].domain == dom)
			name_domain(&m->v, &m->v.exec[i]);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

void metrics_domain_clear(struct metrics *m, unsigned int dom)
{
	if (dom >= METRICS_DOMAINS)
		return;
	pthread_mutex_lock(&m->lock);
	memset(&m->v.dom[dom], 0, sizeof(m->v.dom[dom]));
	pthread_mutex_unlock(&m->lock);
}

int metrics_principal_set(struct metrics *m, unsigned int i, const char *name,
			  uint64_t spent_ns, uint64_t looks, uint64_t deferred)
{
	struct metrics_principal *p;

	if (i >= METRICS_PRINCIPALS)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	p = &m->v.princ[i];
	memset(p, 0, sizeof(*p));
	if (name) {
		p->set = true;
		label_copy(p->name, sizeof(p->name), name);
		p->spent_ns = spent_ns;
		p->looks = looks;
		p->deferred = deferred;
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

void metrics_reclaim_stall(struct metrics *m, unsigned int kind, uint64_t ns)
{
	if (kind >= METRICS_RECLAIM_KINDS)
		return;
	pthread_mutex_lock(&m->lock);
	hist_observe(&m->v.reclaim_stall[kind], ns);
	pthread_mutex_unlock(&m->lock);
}

/*
 * Observe @ns in the total histogram and in the slot's at @off. Every
 * update is one short critical section, under the HTTP reader.
 */
static void exec_observe(struct metrics *m, unsigned int slot,
			 struct metrics_hist *total, size_t off, uint64_t ns)
{
	struct metrics_exec *e;

	pthread_mutex_lock(&m->lock);
	hist_observe(total, ns);
	e = exec_of(m, slot);
	if (e)
		hist_observe((struct metrics_hist *)((char *)e + off), ns);
	pthread_mutex_unlock(&m->lock);
}

void metrics_evict_ack(struct metrics *m, unsigned int slot, uint64_t ns)
{
	exec_observe(m, slot, &m->v.evict_ack,
		     offsetof(struct metrics_exec, evict_ack), ns);
}

void metrics_evict_freed(struct metrics *m, unsigned int slot, uint64_t ns)
{
	exec_observe(m, slot, &m->v.evict_freed,
		     offsetof(struct metrics_exec, evict_freed), ns);
}

static void count_command(struct metrics *m, unsigned int slot,
			  enum metrics_cmd_status s)
{
	struct metrics_exec *e;

	pthread_mutex_lock(&m->lock);
	m->v.commands[s]++;
	e = exec_of(m, slot);
	if (e)
		e->commands[s]++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_command_acked(struct metrics *m, unsigned int slot,
			   uint32_t status)
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
	count_command(m, slot, s);
}

void metrics_command_timeout(struct metrics *m, unsigned int slot)
{
	count_command(m, slot, METRICS_CMD_TIMEOUT);
}

void metrics_anomaly(struct metrics *m, unsigned int slot, unsigned int kind,
		     uint64_t n)
{
	struct metrics_exec *e;

	if (kind >= METRICS_ANOM_NR)
		return;
	pthread_mutex_lock(&m->lock);
	m->v.anomalies[kind] += n;
	e = exec_of(m, slot);
	if (e)
		e->anomalies[kind] += n;
	pthread_mutex_unlock(&m->lock);
}

/* Add @n to the slot's field at @off (and to @total when not NULL). */
static void exec_add(struct metrics *m, unsigned int slot, uint64_t *total,
		     size_t off, uint64_t n)
{
	struct metrics_exec *e;

	pthread_mutex_lock(&m->lock);
	if (total)
		*total += n;
	e = exec_of(m, slot);
	if (e)
		*(uint64_t *)((char *)e + off) += n;
	pthread_mutex_unlock(&m->lock);
}

static void exec_set(struct metrics *m, unsigned int slot, size_t off,
		     uint64_t v)
{
	struct metrics_exec *e;

	pthread_mutex_lock(&m->lock);
	e = exec_of(m, slot);
	if (e)
		*(uint64_t *)((char *)e + off) = v;
	pthread_mutex_unlock(&m->lock);
}

void metrics_bytes_evicted(struct metrics *m, unsigned int slot, uint64_t bytes)
{
	exec_add(m, slot, &m->v.evicted_bytes,
		 offsetof(struct metrics_exec, evicted_bytes), bytes);
}

void metrics_exec_oom_kill(struct metrics *m, unsigned int slot)
{
	exec_add(m, slot, NULL, offsetof(struct metrics_exec, oom_kills), 1);
}

void metrics_set_rss(struct metrics *m, unsigned int slot, uint64_t bytes)
{
	exec_set(m, slot, offsetof(struct metrics_exec, rss_bytes), bytes);
}

void metrics_set_target(struct metrics *m, unsigned int slot, uint64_t bytes)
{
	exec_set(m, slot, offsetof(struct metrics_exec, target_bytes), bytes);
}

void metrics_evaluation(struct metrics *m)
{
	pthread_mutex_lock(&m->lock);
	m->v.evaluations++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_oom_kill(struct metrics *m)
{
	pthread_mutex_lock(&m->lock);
	m->v.oom_kills++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_set_ringbuf_drops(struct metrics *m, uint64_t total)
{
	pthread_mutex_lock(&m->lock);
	m->v.ringbuf_drops = total;
	pthread_mutex_unlock(&m->lock);
}

void metrics_executor_refused(struct metrics *m)
{
	pthread_mutex_lock(&m->lock);
	m->v.refused++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_fault_probes(struct metrics *m, bool on, uint64_t attach_ns)
{
	pthread_mutex_lock(&m->lock);
	m->v.fault_probes = on;
	m->v.fault_switches[on]++;
	if (on)
		m->v.attach_ns = attach_ns;
	pthread_mutex_unlock(&m->lock);
}

void metrics_set_waiting(struct metrics *m, uint64_t waiting)
{
	pthread_mutex_lock(&m->lock);
	m->v.waiting = waiting;
	pthread_mutex_unlock(&m->lock);
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

/* Room for `slot="63",comm="...",domain="...",` with every byte escaped. */
#define EXEC_LABEL_LEN (48 + 2 * METRICS_COMM_LEN + 2 * METRICS_DOMAIN_LEN)

/* The labels every per-executor series carries, with a trailing comma. */
static void exec_label(const struct metrics_values *v, unsigned int slot,
		       char *buf, size_t len)
{
	char comm[2 * METRICS_COMM_LEN], dom[2 * METRICS_DOMAIN_LEN];
	const struct metrics_exec *e = &v->exec[slot];

	if (metrics_escape_label(comm, sizeof(comm), e->comm) < 0)
		strcpy(comm, "?");
	if (metrics_escape_label(dom, sizeof(dom), e->domain_name) < 0)
		strcpy(dom, "?");
	snprintf(buf, len, "slot=\"%u\",comm=\"%s\",domain=\"%s\",", slot, comm,
		 dom);
}

static bool any_exec(const struct metrics_values *v)
{
	for (unsigned int i = 0; i < METRICS_SLOTS; i++)
		if (v->exec[i].state != METRICS_EXEC_FREE)
			return true;
	return false;
}

static bool any_domain(const struct metrics_values *v)
{
	for (unsigned int i = 0; i < METRICS_DOMAINS; i++)
		if (v->dom[i].set)
			return true;
	return false;
}

/* A per-executor histogram family, one series per bound slot. */
static void put_exec_hists(struct textbuf *o, const struct metrics_values *v,
			   const char *name, const char *help, size_t off)
{
	char label[EXEC_LABEL_LEN];

	if (!any_exec(v))
		return;
	put_header(o, name, "histogram", help);
	for (unsigned int i = 0; i < METRICS_SLOTS; i++) {
		if (v->exec[i].state == METRICS_EXEC_FREE)
			continue;
		exec_label(v, i, label, sizeof(label));
		put_hist(o, name, label,
			 (const struct metrics_hist
				  *)((const char *)&v->exec[i] + off));
	}
}

static void render_histograms(struct textbuf *o, const struct metrics_values *v)
{
	char label[64];

	put_header(
		o, "ramcache_reclaim_stall_seconds", "histogram",
		"Time watched processes spent stalled in direct or memory-cgroup reclaim.");
	for (unsigned int k = 0; k < METRICS_RECLAIM_KINDS; k++) {
		snprintf(label, sizeof(label), "kind=\"%s\",",
			 reclaim_kind_names[k]);
		put_hist(o, "ramcache_reclaim_stall_seconds", label,
			 &v->reclaim_stall[k]);
	}
	put_header(
		o, "ramcache_eviction_ack_seconds", "histogram",
		"Time from posting an eviction command to the executor's ack, every executor.");
	put_hist(o, "ramcache_eviction_ack_seconds", "", &v->evict_ack);
	put_header(
		o, "ramcache_eviction_freed_seconds", "histogram",
		"Time from posting an eviction command to the memory being seen freed, every executor.");
	put_hist(o, "ramcache_eviction_freed_seconds", "", &v->evict_freed);
	put_exec_hists(
		o, v, "ramcache_executor_eviction_ack_seconds",
		"Time from posting an eviction command to the executor's ack.",
		offsetof(struct metrics_exec, evict_ack));
	put_exec_hists(
		o, v, "ramcache_executor_eviction_freed_seconds",
		"Time from posting an eviction command to the memory being seen freed.",
		offsetof(struct metrics_exec, evict_freed));
}

/* A counter or gauge without labels, read from struct metrics_values. */
struct u64_metric {
	const char *name;
	const char *help;
	size_t off;
};

#define U64_METRIC(name, help, type, field)       \
	{                                         \
		name, help, offsetof(type, field) \
	}

static const struct u64_metric counters[] = {
	U64_METRIC(
		"ramcache_evicted_bytes_total",
		"Bytes executors reported freed by evictions, every executor.",
		struct metrics_values, evicted_bytes),
	U64_METRIC("ramcache_oom_kills_total",
		   "OOM kills seen by the BPF programs, machine-wide.",
		   struct metrics_values, oom_kills),
	U64_METRIC("ramcache_ringbuf_drops_total",
		   "Events lost because the BPF ring buffer was full.",
		   struct metrics_values, ringbuf_drops),
	U64_METRIC("ramcache_evaluations_total",
		   "Eviction decisions made (rate-limited, not one per event).",
		   struct metrics_values, evaluations),
	U64_METRIC("ramcache_executors_refused_total",
		   "Executors refused a place because every one was taken.",
		   struct metrics_values, refused),
};

static const struct u64_metric exec_counters[] = {
	U64_METRIC("ramcache_executor_evicted_bytes_total",
		   "Bytes the executor reported freed by evictions.",
		   struct metrics_exec, evicted_bytes),
	U64_METRIC("ramcache_executor_oom_kills_total",
		   "OOM kills whose victim was the executor.",
		   struct metrics_exec, oom_kills),
};

static const struct u64_metric exec_gauges[] = {
	U64_METRIC("ramcache_executor_rss_bytes",
		   "Resident set size of the executor (0 once it exited).",
		   struct metrics_exec, rss_bytes),
	U64_METRIC("ramcache_executor_target_bytes",
		   "Bytes the agent currently wants the executor to free.",
		   struct metrics_exec, target_bytes),
};

static void put_u64s(struct textbuf *o, const char *type,
		     const struct u64_metric *m, size_t n,
		     const struct metrics_values *v)
{
	for (size_t i = 0; i < n; i++)
		put_u64(o, m[i].name, type, m[i].help,
			*(const uint64_t *)((const char *)v + m[i].off));
}

/* Per-executor families of one value each, one series per bound slot. */
static void put_exec_u64s(struct textbuf *o, const char *type,
			  const struct u64_metric *m, size_t n,
			  const struct metrics_values *v)
{
	char label[EXEC_LABEL_LEN];
	size_t ll;

	if (!any_exec(v))
		return;
	for (size_t k = 0; k < n; k++) {
		put_header(o, m[k].name, type, m[k].help);
		for (unsigned int i = 0; i < METRICS_SLOTS; i++) {
			const struct metrics_exec *e = &v->exec[i];

			if (e->state == METRICS_EXEC_FREE)
				continue;
			exec_label(v, i, label, sizeof(label));
			ll = strlen(label);
			put(o, "%s{%.*s} %" PRIu64 "\n", m[k].name,
			    (int)(ll - 1), label,
			    *(const uint64_t *)((const char *)e + m[k].off));
		}
	}
}

/* A per-executor family with one more label, @key, from @names. */
static void put_exec_vec(struct textbuf *o, const struct metrics_values *v,
			 const char *name, const char *help, const char *key,
			 const char *const *names, unsigned int n, size_t off)
{
	char label[EXEC_LABEL_LEN];

	if (!any_exec(v))
		return;
	put_header(o, name, "counter", help);
	for (unsigned int i = 0; i < METRICS_SLOTS; i++) {
		const struct metrics_exec *e = &v->exec[i];
		const uint64_t *vals =
			(const uint64_t *)((const char *)e + off);

		if (e->state == METRICS_EXEC_FREE)
			continue;
		exec_label(v, i, label, sizeof(label));
		for (unsigned int k = 0; k < n; k++)
			put(o, "%s{%s%s=\"%s\"} %" PRIu64 "\n", name, label,
			    key, names[k], vals[k]);
	}
}

static void render_counters(struct textbuf *o, const struct metrics_values *v)
{
	put_header(o, "ramcache_commands_total", "counter",
		   "Eviction commands by outcome, every executor.");
	for (unsigned int s = 0; s < METRICS_CMD_NR; s++)
		put(o, "ramcache_commands_total{status=\"%s\"} %" PRIu64 "\n",
		    cmd_status_names[s], v->commands[s]);
	put_header(
		o, "ramcache_protocol_anomalies_total", "counter",
		"Control-page protocol violations seen from executors, by kind.");
	for (unsigned int k = 0; k < METRICS_ANOM_NR; k++)
		put(o,
		    "ramcache_protocol_anomalies_total{kind=\"%s\"} %" PRIu64
		    "\n",
		    anomaly_names[k], v->anomalies[k]);
	put_u64s(o, "counter", counters, ARRAY_SIZE(counters), v);
	put_header(
		o, "ramcache_fault_probe_switches_total", "counter",
		"The programs on page faults attached (on) or detached (off).");
	put(o,
	    "ramcache_fault_probe_switches_total{state=\"on\"} %" PRIu64 "\n",
	    v->fault_switches[1]);
	put(o,
	    "ramcache_fault_probe_switches_total{state=\"off\"} %" PRIu64 "\n",
	    v->fault_switches[0]);
	put_exec_vec(o, v, "ramcache_executor_commands_total",
		     "Eviction commands to the executor by outcome.", "status",
		     cmd_status_names, METRICS_CMD_NR,
		     offsetof(struct metrics_exec, commands));
	put_exec_vec(
		o, v, "ramcache_executor_protocol_anomalies_total",
		"Control-page protocol violations seen from the executor, by kind.",
		"kind", anomaly_names, METRICS_ANOM_NR,
		offsetof(struct metrics_exec, anomalies));
	put_exec_u64s(o, "counter", exec_counters, ARRAY_SIZE(exec_counters),
		      v);
}

/* Agent-wide sums over the attached slots. */
struct overall {
	uint64_t rss, target, executors;
};

static void overall(const struct metrics_values *v, struct overall *a)
{
	memset(a, 0, sizeof(*a));
	for (unsigned int i = 0; i < METRICS_SLOTS; i++) {
		const struct metrics_exec *e = &v->exec[i];

		if (e->state != METRICS_EXEC_ATTACHED)
			continue;
		a->rss += e->rss_bytes;
		a->target += e->target_bytes;
		a->executors++;
	}
}

static void render_exec_gauges(struct textbuf *o,
			       const struct metrics_values *v)
{
	char label[EXEC_LABEL_LEN], cg[2 * METRICS_CGROUP_LEN];

	if (!any_exec(v))
		return;
	put_header(
		o, "ramcache_executor_info", "gauge",
		"Always 1; the process in the slot now or last, its pid and cgroup as labels.");
	for (unsigned int i = 0; i < METRICS_SLOTS; i++) {
		const struct metrics_exec *e = &v->exec[i];

		if (e->state == METRICS_EXEC_FREE)
			continue;
		exec_label(v, i, label, sizeof(label));
		if (metrics_escape_label(cg, sizeof(cg), e->cgroup) < 0)
			strcpy(cg, "?");
		put(o, "ramcache_executor_info{%spid=\"%d\",cgroup=\"%s\"} 1\n",
		    label, e->pid, cg);
	}
	put_header(
		o, "ramcache_executor_up", "gauge",
		"1 while the agent is attached to the executor, 0 after it exited.");
	for (unsigned int i = 0; i < METRICS_SLOTS; i++) {
		size_t ll;

		if (v->exec[i].state == METRICS_EXEC_FREE)
			continue;
		exec_label(v, i, label, sizeof(label));
		ll = strlen(label);
		put(o, "ramcache_executor_up{%.*s} %d\n", (int)(ll - 1), label,
		    v->exec[i].state == METRICS_EXEC_ATTACHED);
	}
	put_exec_u64s(o, "gauge", exec_gauges, ARRAY_SIZE(exec_gauges), v);
}

/* Per-domain gauges; @what picks the value. */
enum dom_gauge { DOM_LEVEL, DOM_LIMIT, DOM_HEADROOM, DOM_ETA, DOM_EXECUTORS };

static void render_domains(struct textbuf *o, const struct metrics_values *v)
{
	static const struct {
		const char *name, *help;
	} fams[] = {
		[DOM_LEVEL] = { "ramcache_domain_level",
				"Memory pressure level of the domain: 0 ok, 1 warn, 2 high, 3 critical." },
		[DOM_LIMIT] = { "ramcache_domain_limit_bytes",
				"Memory limit the domain's executors share (0: not known)." },
		[DOM_HEADROOM] = { "ramcache_domain_headroom_bytes",
				   "Memory left in the domain before its limit." },
		[DOM_ETA] = { "ramcache_domain_forecast_eta_seconds",
			      "Forecast time until the domain's headroom runs out; +Inf when not shrinking." },
		[DOM_EXECUTORS] = { "ramcache_domain_executors",
				    "Executors attached in the domain." },
	};
	char name[2 * METRICS_DOMAIN_LEN];

	if (!any_domain(v))
		return;
	for (unsigned int f = 0; f < ARRAY_SIZE(fams); f++) {
		put_header(o, fams[f].name, "gauge", fams[f].help);
		for (unsigned int i = 0; i < METRICS_DOMAINS; i++) {
			const struct metrics_domain *d = &v->dom[i];
			uint64_t n = 0;

			if (!d->set)
				continue;
			if (metrics_escape_label(name, sizeof(name), d->name) <
			    0)
				strcpy(name, "?");
			put(o, "%s{domain=\"%s\"} ", fams[f].name, name);
			switch (f) {
			case DOM_LEVEL:
				put(o, "%" PRIu32 "\n", d->level);
				break;
			case DOM_LIMIT:
				put(o, "%" PRIu64 "\n", d->limit_bytes);
				break;
			case DOM_HEADROOM:
				put(o, "%" PRId64 "\n", d->headroom_bytes);
				break;
			case DOM_ETA:
				if (d->eta_ns == METRICS_NO_ETA)
					put(o, "+Inf\n");
				else
					put_seconds(o, d->eta_ns);
				break;
			default:
				for (unsigned int s = 0; s < METRICS_SLOTS; s++)
					n += v->exec[s].state ==
						     METRICS_EXEC_ATTACHED &&
					     v->exec[s].domain == i;
				put(o, "%" PRIu64 "\n", n);
				break;
			}
		}
	}
}

/* --all's looks for executors, per principal. */
static void render_principals(struct textbuf *o, const struct metrics_values *v)
{
	static const struct {
		const char *name, *help;
	} fams[] = {
		{ "ramcache_discovery_seconds_total",
		  "Time the agent spent looking at a principal's processes for a control page (--all)." },
		{ "ramcache_discovery_looks_total",
		  "Processes of a principal the agent looked at for a control page (--all)." },
		{ "ramcache_discovery_deferred_total",
		  "Looks at a principal's processes put off: its share of the agent's looks or time was spent (--all)." },
	};
	char name[2 * METRICS_PRINCIPAL_LEN];
	bool any = false;

	for (unsigned int i = 0; i < METRICS_PRINCIPALS; i++)
		any |= v->princ[i].set;
	if (!any)
		return;
	for (unsigned int f = 0; f < ARRAY_SIZE(fams); f++) {
		put_header(o, fams[f].name, "counter", fams[f].help);
		for (unsigned int i = 0; i < METRICS_PRINCIPALS; i++) {
			const struct metrics_principal *p = &v->princ[i];

			if (!p->set)
				continue;
			if (metrics_escape_label(name, sizeof(name), p->name) <
			    0)
				strcpy(name, "?");
			put(o, "%s{principal=\"%s\"} ", fams[f].name, name);
			if (!f)
				put_seconds(o, p->spent_ns);
			else
				put(o, "%" PRIu64 "\n",
				    f == 1 ? p->looks : p->deferred);
		}
	}
}

static void render_gauges(struct textbuf *o, const struct metrics_values *v)
{
	char version[64];
	struct overall a;

	overall(v, &a);
	put_u64(o, "ramcache_level", "gauge",
		"Memory pressure level the agent is at: 0 ok, 1 warn, 2 high, 3 critical.",
		v->level);
	put_header(
		o, "ramcache_level_state", "gauge",
		"1 for the current memory pressure level, 0 for the others.");
	for (unsigned int l = RAMCACHE_LEVEL_OK; l <= RAMCACHE_LEVEL_CRITICAL;
	     l++)
		put(o, "ramcache_level_state{level=\"%s\"} %d\n",
		    policy_level_name(l), v->level == l);
	put_header(
		o, "ramcache_headroom_bytes", "gauge",
		"Memory left before the limit, as the agent last measured it.");
	put(o, "ramcache_headroom_bytes %" PRId64 "\n", v->headroom_bytes);
	put_u64(o, "ramcache_target_bytes", "gauge",
		"Bytes the agent currently wants executors to free, summed.",
		a.target);
	put_u64(o, "ramcache_rss_bytes", "gauge",
		"Resident set size of the attached executors, summed.", a.rss);
	put_u64(o, "ramcache_executors", "gauge",
		"Executors the agent is attached to.", a.executors);
	put_u64(o, "ramcache_executors_waiting", "gauge",
		"Executors refused a place, waiting for the next one to free.",
		v->waiting);
	put_u64(o, "ramcache_fault_probes", "gauge",
		"1 while the programs on page faults (page_fault_user, rss_stat) are attached.",
		v->fault_probes);
	put_header(o, "ramcache_fault_probe_attach_seconds", "gauge",
		   "Time the last attach of the programs on page faults took.");
	put(o, "ramcache_fault_probe_attach_seconds %.9f\n",
	    v->attach_ns / 1e9);
	render_exec_gauges(o, v);
	render_domains(o, v);
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
	render_principals(&o, v);
	render_gauges(&o, v);
	if (o.full) {
		buf[0] = '\0';
		return -ENOSPC;
	}
	return (int)o.pos;
}
