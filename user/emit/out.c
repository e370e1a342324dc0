// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hist.h"
#include "emit/histfmt.h"
#include "emit/json.h"
#include "proc/match.h"
#include "emit/out.h"
#include "emit/outstream.h"
#include "core/policy.h"
#include "kernel/probes.h"
#include "emit/sanitize.h"

#define MiB (1024.0 * 1024.0)

static const char *reclaim_kind_name(uint32_t kind)
{
	return kind == RC_RECLAIM_MEMCG ? "memcg" : "direct";
}

void out_clock(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, len, "%H:%M:%S", &tm);
}

/*
 * Opens a JSON event: its "type" and "ts_ns" (CLOCK_MONOTONIC: the kernel's
 * stamp for BPF events, when it was posted for commands, else now), so that
 * every line of a record sits on one time axis.
 */
static void event_begin(struct jw *w, FILE *f, const char *type, uint64_t ts_ns)
{
	json_begin(w, f);
	json_str(w, "type", type);
	json_u64(w, "ts_ns", ts_ns);
}

static uint64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* With --json: start the object of one event of @type and return true. */
static bool json_event_at(struct out *o, struct jw *w, const char *type,
			  uint64_t ts_ns)
{
	if (!o->json)
		return false;
	event_begin(w, o->f, type, ts_ns);
	return true;
}

static bool json_event(struct out *o, struct jw *w, const char *type)
{
	return json_event_at(o, w, type, mono_now());
}

/*
 * @s (at most @n bytes) made safe for a terminal in @buf: every string of
 * outside origin printed in text mode goes through here.
 */
static const char *safe_text(char *buf, size_t len, const char *s, size_t n)
{
	sanitize_text(buf, len, s, n);
	return buf;
}

#define SAFE(buf, s, n)	 safe_text(buf, sizeof(buf), s, n)
#define SAFE_STR(buf, s) SAFE(buf, s, strlen(s))
#define COMM_TEXT	 65 /* TEXT_SANITIZED_LEN(16) */

/* Text lines start with the wall clock. */
static void text_begin(struct out *o)
{
	char clk[16];

	out_clock(clk, sizeof(clk));
	fprintf(o->f, "%s  ", clk);
}

/* One text line, after the wall clock. */
__attribute__((format(printf, 2, 3))) static void
text_line(struct out *o, const char *fmt, ...)
{
	va_list ap;

	text_begin(o);
	va_start(ap, fmt);
	vfprintf(o->f, fmt, ap);
	va_end(ap);
	fflush(o->f);
}

/* RC_R_* bits as a JSON array of their names. */
static void reasons_json(struct jw *w, uint32_t reasons)
{
	json_array_begin(w, "reasons");
	for (int i = 0; i < RC_R_NR; i++)
		if (reasons & (1u << i))
			json_str(w, NULL, policy_reason_name(1u << i));
	json_array_end(w);
}

static void hdr_json(struct jw *w, FILE *f, const char *type,
		     const struct rc_event_hdr *h)
{
	event_begin(w, f, type, h->ts_ns);
	json_u64(w, "pid", h->tgid);
	json_u64(w, "tid", h->pid);
	json_u64(w, "cpu", h->cpu);
}

void out_start(struct out *o, const struct start_info *s)
{
	char safe[1024];
	struct jw w;
	char clk[16];

	if (json_event(o, &w, "start")) {
		json_u64(&w, "pid", s->pid);
		if (s->pid)
			json_u64(&w, "ns_pid", s->ns_pid);
		if (s->comm)
			json_str(&w, "comm", s->comm);
		if (s->memcg) {
			json_str(&w, "memcg", s->memcg);
			json_u64(&w, "cgroup_version", s->memcg_version);
		}
		if (s->control)
			json_str(&w, "control", s->control);
		json_u64(&w, "headroom", s->headroom);
		json_u64(&w, "inactive", s->inactive);
		json_u64(&w, "max_executors", RC_MAX_TARGETS);
		json_str(&w, "fault_probes", s->fault_probes);
		json_object_begin(&w, "probes");
		for (int i = 0; i < NR_PROBES; i++)
			json_str(&w, s->probes->p[i].tp,
				 probe_state_name(s->probes->p[i].state));
		json_object_end(&w);
		json_end(&w);
		return;
	}
	out_clock(clk, sizeof(clk));
	if (s->pid)
		fprintf(o->f, "%s  tracking pid %d (%s)", clk, s->pid,
			s->comm ? SAFE_STR(safe, s->comm) : "?");
	if (s->pid && s->ns_pid != s->pid)
		fprintf(o->f, ", pid %d in its namespace", s->ns_pid);
	if (!s->pid)
		fprintf(o->f, "%s  watching the whole system", clk);
	if (s->memcg)
		fprintf(o->f, ", memory cgroup %s (v%d)",
			SAFE_STR(safe, s->memcg), s->memcg_version);
	fprintf(o->f, "\n%s  probes:", clk);
	for (int i = 0; i < NR_PROBES; i++)
		fprintf(o->f, " %s=%s", s->probes->p[i].tp,
			probe_state_name(s->probes->p[i].state));
	fprintf(o->f, "\n");
	if (s->pid)
		fprintf(o->f,
			"%s  eviction below %.0f MiB headroom (inactive entries below %.0f MiB)\n",
			clk, s->headroom / MiB, s->inactive / MiB);
	fflush(o->f);
}

static void event_json(struct out *o, const struct rc_event_hdr *h)
{
	struct jw w;

	switch (h->type) {
	case RC_EV_FAULT_BURST: {
		const struct rc_fault_burst *e = (const void *)h;

		hdr_json(&w, o->f, "fault_burst", h);
		json_u64(&w, "faults", e->faults);
		json_u64(&w, "window_ns", e->window_ns);
		break;
	}
	case RC_EV_RECLAIM: {
		const struct rc_reclaim *e = (const void *)h;

		hdr_json(&w, o->f, "reclaim", h);
		json_str(&w, "kind", reclaim_kind_name(e->kind));
		json_strn(&w, "comm", e->comm, sizeof(e->comm));
		json_u64(&w, "latency_ns", e->latency_ns);
		json_u64(&w, "nr_reclaimed", e->nr_reclaimed);
		json_u64(&w, "order", e->order);
		json_u64(&w, "memcg_id", e->memcg_id);
		break;
	}
	case RC_EV_KSWAPD: {
		const struct rc_kswapd *e = (const void *)h;

		hdr_json(&w, o->f, "kswapd", h);
		json_str(&w, "state", e->awake ? "wake" : "sleep");
		json_u64(&w, "nid", e->nid);
		if (e->awake)
			json_u64(&w, "order", e->order);
		break;
	}
	case RC_EV_OOM_KILL: {
		const struct rc_oom_kill *e = (const void *)h;

		hdr_json(&w, o->f, "oom_kill", h);
		json_u64(&w, "victim_pid", e->victim_pid);
		json_strn(&w, "comm", e->comm, sizeof(e->comm));
		json_u64(&w, "uid", e->victim_uid);
		json_u64(&w, "anon_rss", e->anon_rss);
		json_u64(&w, "file_rss", e->file_rss);
		json_u64(&w, "shmem_rss", e->shmem_rss);
		json_u64(&w, "total_vm", e->total_vm);
		break;
	}
	case RC_EV_RSS: {
		const struct rc_rss *e = (const void *)h;

		hdr_json(&w, o->f, "rss", h);
		json_u64(&w, "rss", e->total);
		json_u64(&w, "anon", e->anon);
		json_u64(&w, "file", e->file);
		json_u64(&w, "shmem", e->shmem);
		break;
	}
	default:
		return;
	}
	json_end(&w);
}

static void event_line(struct out *o, const void *data, size_t len)
{
	const struct rc_event_hdr *h = data;
	char clk[16], comm[COMM_TEXT];

	if (len < sizeof(*h))
		return;
	if (o->json) {
		event_json(o, h);
		return;
	}
	out_clock(clk, sizeof(clk));
	switch (h->type) {
	case RC_EV_FAULT_BURST: {
		const struct rc_fault_burst *e = data;

		fprintf(o->f,
			"%s  fault_burst pid %u: %" PRIu64
			" faults in %.1f ms on cpu %u\n",
			clk, h->tgid, (uint64_t)e->faults, e->window_ns / 1e6,
			h->cpu);
		break;
	}
	case RC_EV_RECLAIM: {
		const struct rc_reclaim *e = data;

		fprintf(o->f,
			"%s  reclaim %-6s pid %u (%s): %.3f ms, %" PRIu64
			" pages reclaimed\n",
			clk, reclaim_kind_name(e->kind), h->tgid,
			SAFE(comm, e->comm, sizeof(e->comm)),
			e->latency_ns / 1e6, (uint64_t)e->nr_reclaimed);
		break;
	}
	case RC_EV_KSWAPD: {
		const struct rc_kswapd *e = data;

		fprintf(o->f, "%s  kswapd%u %s\n", clk, e->nid,
			e->awake ? "woke up" : "went to sleep");
		break;
	}
	case RC_EV_OOM_KILL: {
		const struct rc_oom_kill *e = data;

		fprintf(o->f,
			"%s  OOM kill of pid %u (%s): anon %.1f MiB, file %.1f MiB, shmem %.1f MiB\n",
			clk, e->victim_pid,
			SAFE(comm, e->comm, sizeof(e->comm)), e->anon_rss / MiB,
			e->file_rss / MiB, e->shmem_rss / MiB);
		break;
	}
	case RC_EV_RSS: {
		const struct rc_rss *e = data;

		if (!o->verbose)
			return;
		fprintf(o->f,
			"%s  rss pid %u: %.1f MiB (anon %.1f, file %.1f)\n",
			clk, h->tgid, e->total / MiB, e->anon / MiB,
			e->file / MiB);
		break;
	}
	default:
		return;
	}
	fflush(o->f);
}

/*
 * The kernel's event stream (reclaim, faults, kswapd, rss) may be dropped
 * for a reader with no room, an OOM kill never (outstream.h).
 */
void out_event(struct out *o, const void *data, size_t len)
{
	const struct rc_event_hdr *h = data;
	bool oom = len >= sizeof(*h) && h->type == RC_EV_OOM_KILL;

	fflush(o->f); /* lines printed before are not the stream's */
	outstream_droppable(!oom);
	event_line(o, data, len);
	fflush(o->f);
	outstream_droppable(false);
}

/* An executor's tags, after its "pid". */
static void tag_json(struct jw *w, const struct out_tag *t)
{
	if (!t)
		return;
	if (t->comm)
		json_str(w, "comm", t->comm);
	if (t->cgroup)
		json_str(w, "cgroup", t->cgroup);
	if (t->domain)
		json_str(w, "domain", t->domain);
}

static void summary_json(struct out *o, const struct summary *s)
{
	struct jw w;

	event_begin(&w, o->f, "summary", mono_now());
	json_u64(&w, "pid", s->pid);
	tag_json(&w, s->tag);
	json_double(&w, "interval_s", s->interval_s);
	if (s->rss)
		json_u64(&w, "rss", s->rss);
	if (s->has_rss_file)
		json_u64(&w, "rss_file", s->rss_file);
	json_u64(&w, "faults", s->faults);
	json_double(&w, "faults_per_s", s->faults_per_s);
	json_u64(&w, "direct_stalls", s->stalls[RC_RECLAIM_DIRECT]);
	json_u64(&w, "direct_stall_ns", s->stall_ns[RC_RECLAIM_DIRECT]);
	json_u64(&w, "memcg_stalls", s->stalls[RC_RECLAIM_MEMCG]);
	json_u64(&w, "memcg_stall_ns", s->stall_ns[RC_RECLAIM_MEMCG]);
	json_u64(&w, "mem_available", s->mem_available);
	if (s->has_memcg) {
		json_u64(&w, "memcg_limit", s->memcg_limit);
		json_u64(&w, "memcg_usage", s->memcg_usage);
	}
	json_u64(&w, "headroom", s->headroom);
	if (s->has_forecast)
		json_u64(&w, "forecast", s->forecast);
	if (s->threshold_headroom)
		json_u64(&w, "threshold_headroom", s->threshold_headroom);
	if (s->threshold_inactive)
		json_u64(&w, "threshold_inactive", s->threshold_inactive);
	json_u64(&w, "kswapd_wakes", s->kswapd_wakes);
	json_u64(&w, "oom_kills", s->oom_kills);
	json_u64(&w, "oom_kills_system", s->oom_kills);
	if (s->has_cgroup_oom)
		json_u64(&w, "oom_kills_cgroup", s->oom_kills_cgroup);
	json_u64(&w, "drops", s->drops);
	json_u64(&w, "evaluations", s->evaluations);
	json_u64(&w, "eval_requests", s->eval_requests);
	if (s->level)
		json_str(&w, "level", s->level);
	if (s->level)
		reasons_json(&w, s->reasons);
	if (s->has_eta)
		json_double(&w, "eta_s", s->eta_s);
	json_double(&w, "refault_file_per_s", s->refault_file_s);
	json_double(&w, "refault_anon_per_s", s->refault_anon_s);
	json_double(&w, "swap_in_per_s", s->swap_in_s);
	json_double(&w, "swap_out_per_s", s->swap_out_s);
	json_double(&w, "major_faults_per_s", s->majflt_s);
	if (s->psi) {
		json_double(&w, "psi_some_avg10", s->psi_some);
		json_double(&w, "psi_full_avg10", s->psi_full);
	}
	if (s->refaults_from) {
		json_str(&w, "refaults_from", s->refaults_from);
		json_str(&w, "swap_from", s->swap_from);
		json_str(&w, "psi_from", s->psi_from);
	}
	if (s->has_limit_events) {
		json_u64(&w, "memcg_high_events", s->memcg_high);
		json_u64(&w, "memcg_max_events", s->memcg_max);
	}
	if (s->has_swap_events) {
		json_u64(&w, "memcg_swap_max_events", s->swap_max);
		json_u64(&w, "memcg_swap_fail_events", s->swap_fail);
	}
	json_u64(&w, "evict_sent", s->evict_sent);
	json_u64(&w, "evict_acked", s->evict_acked);
	json_u64(&w, "evict_timeouts", s->evict_timeouts);
	json_u64(&w, "evict_busy", s->evict_busy);
	json_u64(&w, "bytes_evicted", s->bytes_evicted);
	json_end(&w);
}

static void summary_text(struct out *o, const struct summary *s)
{
	text_begin(o);
	fputs("summary", o->f);
	if (s->pid && s->has_rss_file)
		fprintf(o->f,
			" pid %d: rss %.1f MiB (file %.1f MiB), %.0f faults/s,",
			s->pid, s->rss / MiB, s->rss_file / MiB,
			s->faults_per_s);
	else if (s->pid)
		fprintf(o->f, " pid %d: rss %.1f MiB, %.0f faults/s,", s->pid,
			s->rss / MiB, s->faults_per_s);
	else
		fprintf(o->f, " system: %.0f faults/s,", s->faults_per_s);
	fprintf(o->f,
		" stalls direct %" PRIu64 " (%.1f ms) memcg %" PRIu64
		" (%.1f ms), available %.0f MiB",
		s->stalls[0], s->stall_ns[0] / 1e6, s->stalls[1],
		s->stall_ns[1] / 1e6, s->mem_available / MiB);
	if (s->has_memcg)
		fprintf(o->f, ", cgroup %.0f/%.0f MiB", s->memcg_usage / MiB,
			s->memcg_limit / MiB);
	fprintf(o->f, ", headroom %.0f MiB", s->headroom / MiB);
	if (s->majflt_s >= 1 || s->refault_file_s >= 1)
		fprintf(o->f, ", majflt %.0f/s, file refaults %.0f/s",
			s->majflt_s, s->refault_file_s);
	if (s->swap_in_s >= 1 || s->swap_out_s >= 1)
		fprintf(o->f, ", swap in %.0f/s out %.0f/s", s->swap_in_s,
			s->swap_out_s);
	if (s->level)
		fprintf(o->f, ", level %s", s->level);
	if (s->reasons) {
		char r[256];

		policy_reasons_format(s->reasons, r, sizeof(r));
		fprintf(o->f, " (%s)", r);
	}
	if (s->has_eta)
		fprintf(o->f, ", headroom gone in %.1f s", s->eta_s);
	if (s->evict_sent)
		fprintf(o->f, ", evictions %" PRIu64 "/%" PRIu64 " acked",
			s->evict_acked, s->evict_sent);
	if (s->has_cgroup_oom && (s->oom_kills || s->oom_kills_cgroup))
		fprintf(o->f,
			", OOM kills %" PRIu64 " in the cgroup, %" PRIu64
			" in the system",
			s->oom_kills_cgroup, s->oom_kills);
	else if (s->oom_kills)
		fprintf(o->f, ", OOM kills %" PRIu64 " in the system",
			s->oom_kills);
	if (s->drops)
		fprintf(o->f, ", %" PRIu64 " events dropped", s->drops);
	fprintf(o->f, "\n");
	fflush(o->f);
}

void out_summary(struct out *o, const struct summary *s)
{
	if (o->json)
		summary_json(o, s);
	else
		summary_text(o, s);
}

void out_pressure(struct out *o, const struct pressure_info *p)
{
	struct jw w;
	char clk[16], r[256], sd[1024];

	if (json_event(o, &w, "pressure")) {
		json_str(&w, "level", p->level);
		reasons_json(&w, p->reasons);
		if (p->has_eta)
			json_double(&w, "eta_s", p->eta_s);
		json_u64(&w, "headroom", p->headroom);
		json_u64(&w, "pid", p->pid);
		if (p->domain)
			json_str(&w, "domain", p->domain);
		json_end(&w);
		return;
	}
	out_clock(clk, sizeof(clk));
	policy_reasons_format(p->reasons, r, sizeof(r));
	fprintf(o->f, "%s  pressure %s%s%s%s", clk, p->level, *r ? " (" : "", r,
		*r ? ")" : "");
	if (p->domain)
		fprintf(o->f, " in domain %s", SAFE_STR(sd, p->domain));
	if (p->has_eta)
		fprintf(o->f, ", headroom gone in %.1f s", p->eta_s);
	fprintf(o->f, ", headroom %.0f MiB\n", p->headroom / MiB);
	fflush(o->f);
}

void out_target(struct out *o, const char *state, pid_t pid, const char *comm)
{
	char safe[256];
	struct jw w;

	if (json_event(o, &w, "target")) {
		json_str(&w, "state", state);
		json_u64(&w, "pid", pid);
		if (comm)
			json_str(&w, "comm", comm);
		json_end(&w);
		return;
	}
	text_line(o, "target pid %d (%s) %s\n", pid,
		  comm ? SAFE_STR(safe, comm) : "?", state);
}

void out_target_cgroup(struct out *o, pid_t pid, const char *comm,
		       const char *memcg, int v)
{
	char sc[256], sg[4096];
	struct jw w;

	if (json_event(o, &w, "target")) {
		json_str(&w, "state", "cgroup_changed");
		json_u64(&w, "pid", pid);
		if (comm)
			json_str(&w, "comm", comm);
		if (memcg) {
			json_str(&w, "memcg", memcg);
			json_u64(&w, "cgroup_version", v);
		}
		json_end(&w);
		return;
	}
	text_line(o, "target pid %d (%s) moved to memory cgroup %s\n", pid,
		  comm ? SAFE_STR(sc, comm) : "?",
		  memcg ? SAFE_STR(sg, memcg) : "(none)");
}

void out_target_found(struct out *o, pid_t pid, const struct out_tag *tag,
		      double weight, const char *how)
{
	char sc[256], sg[1024], sd[1024];
	struct jw w;

	if (json_event(o, &w, "target")) {
		json_str(&w, "state", "attached");
		json_u64(&w, "pid", pid);
		tag_json(&w, tag);
		json_double(&w, "weight", weight);
		json_str(&w, "discovery", how);
		json_end(&w);
		return;
	}
	text_line(o, "target pid %d (%s) attached (%s): cgroup %s, domain %s\n",
		  pid, tag->comm ? SAFE_STR(sc, tag->comm) : "?", how,
		  tag->cgroup ? SAFE_STR(sg, tag->cgroup) : "(none)",
		  tag->domain ? SAFE_STR(sd, tag->domain) : "machine");
}

void out_target_pick(struct out *o, pid_t pid, const char *comm,
		     const char *pattern, const struct match_result *r)
{
	char clk[16], why[256], sc[256], sg[1024];

	snprintf(why, sizeof(why),
		 "oldest of %u processes whose command line holds the "
		 "pattern%s%s",
		 r->matched - r->wrong_user - r->wrong_cgroup,
		 r->wrong_user || r->wrong_cgroup ? "; others refused by " : "",
		 r->wrong_user && r->wrong_cgroup ? "--user and --cgroup"
		 : r->wrong_user		  ? "--user"
		 : r->wrong_cgroup		  ? "--cgroup"
						  : "");
	if (o->json) {
		struct jw w;

		event_begin(&w, o->f, "target", mono_now());
		json_str(&w, "state", "attached");
		json_u64(&w, "pid", pid);
		if (comm)
			json_str(&w, "comm", comm);
		json_u64(&w, "uid", r->uid);
		json_str(&w, "cgroup", r->cgroup);
		json_str(&w, "match", pattern);
		json_u64(&w, "candidates", r->matched);
		json_u64(&w, "refused_user", r->wrong_user);
		json_u64(&w, "refused_cgroup", r->wrong_cgroup);
		json_str(&w, "why", why);
		json_end(&w);
		return;
	}
	out_clock(clk, sizeof(clk));
	fprintf(o->f,
		"%s  target pid %d (%s) attached: uid %u, cgroup %s; %s\n", clk,
		pid, comm ? SAFE_STR(sc, comm) : "?", r->uid,
		SAFE_STR(sg, r->cgroup), why);
	fflush(o->f);
}

void out_exit(struct out *o, const char *reason, int code)
{
	struct jw w;

	if (json_event(o, &w, "exit")) {
		json_str(&w, "reason", reason);
		json_i64(&w, "code", code);
		json_end(&w);
		return;
	}
	text_line(o, "exiting: %s\n", reason);
}

/*
 * A message for the user on stderr and, with --json, as an event of @type
 * on stdout (@code is added unless it is < 0).
 */
static void message(struct out *o, const char *type, int code, const char *fmt,
		    va_list ap)
{
	struct jw w;
	char msg[512];

	char safe[TEXT_SANITIZED_LEN(sizeof(msg))];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* paths, names and labels may be in it: stderr is a terminal too */
	fprintf(stderr, "ramcache-bpf: %s%s\n",
		strcmp(type, "warning") ? "" : "warning: ",
		SAFE_STR(safe, msg));
	if (o && json_event(o, &w, type)) {
		json_str(&w, "message", msg);
		if (code >= 0)
			json_i64(&w, "code", code);
		json_end(&w);
	}
}

void out_warn(struct out *o, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	message(o, "warning", -1, fmt, ap);
	va_end(ap);
}

void out_read_error(struct out *o, int *last, int err, const char *what)
{
	if (err && err != *last)
		out_warn(
			o,
			"failed to read %s: %s; the pressure level may be stale",
			what, strerror(-err));
	*last = err;
}

void out_note(struct out *o, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	message(NULL, "note", -1, fmt, ap);
	va_end(ap);
}

int out_fail(struct out *o, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	message(o, "error", code, fmt, ap);
	va_end(ap);
	return code;
}

void out_probe_warnings(struct out *o, const struct probes *ps)
{
	for (int i = 0; i < NR_PROBES; i++) {
		const struct probe *p = &ps->p[i];

		switch (p->off_why) {
		case PROBE_OK:
			break;
		case PROBE_MISSING:
			out_warn(o,
				 "kernel has no tracepoint %s, %s not traced",
				 p->tp, p->what);
			break;
		case PROBE_BAD_ARGS:
			out_warn(
				o,
				"tracepoint %s has arguments (%s) of no form this version knows; %s not traced",
				p->tp, p->sig, p->what);
			break;
		case PROBE_ATTACH_FAILED:
			out_warn(o,
				 "failed to attach %s to %s: %s; %s not traced",
				 p->attach_mode, p->tp, strerror(p->err),
				 p->what);
			break;
		}
	}
}

void out_control(struct out *o, const struct control_info *c)
{
	char safe[4096], sw[1024];
	struct jw w;

	if (json_event(o, &w, "control")) {
		json_str(&w, "state", c->state);
		json_str(&w, "path", c->path);
		json_str(&w, "discovery", c->discovery);
		json_u64(&w, "pid", c->pid);
		json_u64(&w, "ns_pid", c->ns_pid);
		tag_json(&w, c->tag);
		if (c->why)
			json_str(&w, "reason", c->why);
		if (c->message)
			json_str(&w, "message", c->message);
		if (c->signal)
			json_u64(&w, "signal", (uint64_t)c->signal);
		if (c->signal && c->oom_kill)
			json_bool(&w, "oom_kill", true);
		if (c->status >= 0 && c->why && !strcmp(c->why, "exited"))
			json_u64(&w, "status", (uint64_t)c->status);
		if (!strcmp(c->state, "dropped"))
			json_u64(&w, "inflight", (uint64_t)c->inflight);
		json_end(&w);
		return;
	}
	text_line(o, "control page %s %s%s%s\n", SAFE_STR(safe, c->path),
		  c->state, c->why ? ": " : "",
		  c->why ? SAFE_STR(sw, c->why) : "");
}

void out_cannot_free(struct out *o, const struct cannot_free_info *c)
{
	struct jw w;

	if (json_event(o, &w, "cannot_free")) {
		json_u64(&w, "pid", c->pid);
		json_u64(&w, "ns_pid", c->ns_pid);
		tag_json(&w, c->tag);
		json_u64(&w, "wanted", c->wanted);
		json_u64(&w, "short", c->short_bytes);
		json_u64(&w, "active_bytes", c->active_bytes);
		json_u64(&w, "held_bytes", c->held_bytes);
		json_u64(&w, "busy_bytes", c->busy_bytes);
		json_u64(&w, "pinned_bytes", c->pinned_bytes);
		json_u64(&w, "limit", c->limit);
		json_str(&w, "why", c->why);
		json_end(&w);
		return;
	}
	text_line(
		o,
		"cannot free %llu MiB of %llu MiB from pid %d: %s (active %llu MiB, held %llu MiB, busy %llu MiB, pinned %llu MiB)\n",
		(unsigned long long)(c->short_bytes >> 20),
		(unsigned long long)(c->wanted >> 20), (int)c->pid, c->why,
		(unsigned long long)(c->active_bytes >> 20),
		(unsigned long long)(c->held_bytes >> 20),
		(unsigned long long)(c->busy_bytes >> 20),
		(unsigned long long)(c->pinned_bytes >> 20));
}

void out_fault_probes(struct out *o, const struct fault_probes_info *f)
{
	struct jw w;

	if (json_event(o, &w, "fault_probes")) {
		json_str(&w, "state", f->on ? "on" : "off");
		json_str(&w, "why", f->why);
		json_u64(&w, "far", f->far);
		json_u64(&w, "margin", f->margin);
		json_u64(&w, "took_ns", f->took_ns);
		json_end(&w);
		return;
	}
	text_line(o,
		  "fault programs %s (%s: %.0f MiB from a reserve, margin %.0f "
		  "MiB; %s in %.2f ms)\n",
		  f->on ? "on" : "off", f->why, f->far / MiB, f->margin / MiB,
		  f->on ? "attached" : "detached", f->took_ns / 1e6);
}

void out_evict(struct out *o, const struct evict_info *e)
{
	char safe[TEXT_SANITIZED_LEN(RAMCACHE_LABEL_LEN)];
	struct jw w;

	if (json_event_at(o, &w, "evict", e->ts_ns)) {
		json_u64(&w, "pid", e->pid);
		if (e->seq)
			json_u64(&w, "seq", e->seq);
		else
			json_bool(&w, "dry_run", true);
		json_u64(&w, "id", e->id);
		json_str(&w, "label", e->label);
		json_u64(&w, "bytes", e->bytes);
		json_str(&w, "reason", ramcache_reason_name(e->reason));
		json_bool(&w, "active", e->active);
		json_u64(&w, "headroom", e->headroom);
		json_u64(&w, "forecast", e->forecast);
		tag_json(&w, e->tag);
		if (e->has_score) {
			json_double(&w, "score", e->score);
			json_str(&w, "charged", e->charged);
		}
		json_end(&w);
		return;
	}
	text_line(
		o,
		"%s #%llu %s (%.1f MiB, %s): headroom %.0f MiB, forecast %.0f MiB\n",
		e->seq ? "evict" : "would evict", (unsigned long long)e->seq,
		e->label[0] ? SAFE_STR(safe, e->label) : "-", e->bytes / MiB,
		ramcache_reason_name(e->reason), e->headroom / MiB,
		e->forecast / MiB);
}

static void evict_done_json(struct out *o, const struct evict_done_info *d)
{
	struct jw w;

	event_begin(&w, o->f, "evict_done", mono_now());
	json_u64(&w, "pid", d->pid);
	json_u64(&w, "seq", d->seq);
	json_u64(&w, "id", d->id);
	json_str(&w, "label", d->label);
	json_str(&w, "status", d->status);
	json_u64(&w, "bytes", d->bytes);
	if (d->acked) {
		json_u64(&w, "bytes_freed", d->bytes_freed);
		json_u64(&w, "recv_latency_ns", d->recv_latency_ns);
		json_u64(&w, "ack_latency_ns", d->ack_latency_ns);
	}
	if (d->freed_latency_ns)
		json_u64(&w, "freed_latency_ns", d->freed_latency_ns);
	tag_json(&w, d->tag);
	json_end(&w);
}

static void evict_done_text(struct out *o, const struct evict_done_info *d)
{
	char safe[TEXT_SANITIZED_LEN(RAMCACHE_LABEL_LEN)];

	text_begin(o);
	fprintf(o->f, "evict #%llu %s (%s): %s", (unsigned long long)d->seq,
		d->label[0] ? SAFE_STR(safe, d->label) : "-", d->status,
		d->acked ? "" : "no ack");
	if (d->acked)
		fprintf(o->f, "%.1f MiB freed, ack after %.2f ms",
			d->bytes_freed / MiB, d->ack_latency_ns / 1e6);
	if (d->freed_latency_ns)
		fprintf(o->f, ", RSS down after %.2f ms",
			d->freed_latency_ns / 1e6);
	fputc('\n', o->f);
	fflush(o->f);
}

void out_anomaly(struct out *o, pid_t pid, const char *kind, uint64_t seq,
		 const char *detail)
{
	char safe[1024];
	struct jw w;

	if (json_event(o, &w, "anomaly")) {
		json_str(&w, "kind", kind);
		json_u64(&w, "pid", pid);
		if (seq)
			json_u64(&w, "seq", seq);
		json_str(&w, "detail", detail);
		json_end(&w);
		return;
	}
	text_line(o, "protocol anomaly from pid %d: %s%s%.0llu: %s\n", (int)pid,
		  kind, seq ? " #" : "", (unsigned long long)seq,
		  SAFE_STR(safe, detail));
}

void out_evict_done(struct out *o, const struct evict_done_info *d)
{
	if (o->json)
		evict_done_json(o, d);
	else
		evict_done_text(o, d);
}

void out_hist(struct out *o, const char *name, const char *title,
	      const struct hist *h)
{
	struct jw w;

	if (json_event(o, &w, "hist")) {
		json_str(&w, "name", name);
		json_str(&w, "unit", "usecs");
		json_u64(&w, "count", hist_total(h));
		histfmt_json(&w, "slots", h);
		json_end(&w);
		return;
	}
	fprintf(o->f, "\n%s:\n", title);
	histfmt_text(o->f, h, "usecs");
	fflush(o->f);
}

static bool libbpf_verbose;

void out_set_verbose_libbpf(bool on)
{
	libbpf_verbose = on;
}

/*
 * libbpf's messages (-v) name files, sections and symbols it read: they go
 * through the sanitiser too, a line at a time, the line breaks kept.
 */
int out_libbpf_print(int level, const char *fmt, va_list args)
{
	char *msg = NULL, *safe, *line;
	int n;

	if (!libbpf_verbose)
		return 0;
	n = vasprintf(&msg, fmt, args);
	if (n < 0)
		return n;
	safe = malloc(TEXT_SANITIZED_LEN((size_t)n));
	for (line = msg; safe && *line;) {
		size_t len = strcspn(line, "\n");

		sanitize_text(safe, TEXT_SANITIZED_LEN(len), line, len);
		fprintf(stderr, "%s%s", safe, line[len] ? "\n" : "");
		line += len + (line[len] ? 1 : 0);
	}
	free(safe);
	free(msg);
	return n;
}
