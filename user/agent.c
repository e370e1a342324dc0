// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent: load the BPF programs, follow the targets, and run one epoll
 * loop over the ring buffers, a periodic tick, signals and each target's
 * pidfd. Only this file decides when to stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "agent.h"
#include "caps.h"
#include "kernel/bpfstate.h"
#include "core/cadence.h"
#include "core/faultwatch.h"
#include "proc/clock.h"
#include "kernel/discover.h"
#include "executors/admission.h"
#include "executors/domains.h"
#include "executors/evictor.h"
#include "core/hist.h"
#include "executors/level.h"
#include "executors/domlevel.h"
#include "proc/match.h"
#include "out/metrics.h"
#include "proc/oomvictim.h"
#include "out/metrics_http.h"
#include "out/onlevel.h"
#include "out/out.h"
#include "out/outstream.h"
#include "proc/readfile.h"
#include "proc/sampler.h"
#include "executors/targets.h"

#define MATCH_PERIOD_NS	   NSEC_PER_SEC
#define FORECAST_WINDOW_NS NSEC_PER_SEC
#define EVAL_MIN_GAP_NS	   (2 * 1000000ULL)
/*
 * An evaluation reads and scores the executors' whole entry tables, which
 * whoever writes a page makes as big as it likes (65536 entries). So
 * evaluations are coalesced (at most one per drain of the ring buffer or
 * tick, however many events asked for one) and the next waits EVAL_DUTY
 * times as long as the last one took: evaluating takes at most
 * 1/(1 + EVAL_DUTY) of the loop, the rest is left for the ring buffer.
 */
#define EVAL_DUTY    4
#define BTF_PATH     "/sys/kernel/btf/vmlinux"
#define SUBUID_PATH  "/etc/subuid"
#define PASSWD_PATH  "/etc/passwd"
#define DROP_WARN_NS (10 * NSEC_PER_SEC)

struct agent {
	const struct opts *o;
	struct out out;
	struct bpfstate bpf;
	struct ring_buffer *rb;
	struct metrics m;
	struct metrics_http *http;
	int epfd, sigfd, timerfd;
	struct targets ts;
	struct target_env env;
	struct domain_env denv;
	struct discover disc;
	struct ring_buffer *disc_rb; /* --all: the discovery reports */
	int disc_taken;		     /* of them, this turn */
	struct admission adm;	     /* --all: whom to adopt, when to look */
	struct sampler sys;	     /* without a single target */
	struct track_totals sys_prev;
	struct level_watch lw;
	struct domain_levels dl; /* --all, several targets: each domain's */
	uint64_t mem_total;
	struct rc_thresholds sys_thr; /* in force without a single target */
	uint64_t last_summary_ns, next_level_ns, next_match_ns, next_eval_ns;
	bool eval_due;	    /* an event or tick asked for an evaluation */
	uint32_t eval_why;  /* the latest trigger that named a reason */
	uint64_t eval_reqs; /* requests, for evaluations per event */
	uint64_t evals;
	uint64_t end_ns;
	uint64_t drops_told, out_told, next_drop_warn_ns;
	uint64_t next_read_ns;
	uint64_t last_event_ns; /* last reclaim, kswapd or OOM event */
	uint64_t last_stall_ns; /* last reclaim stall, or OOM kill of ours */
	struct faultwatch fw;	/* the per-fault programs: on or off */
	bool fw_failed;		/* they failed to attach: reads only */
	uint64_t fw_far;	/* the nearest domain, at the last look */
	/* the system's faults (/proc/vmstat) at the first read, the last */
	uint64_t sys_faults_base, sys_faults_prev;
	bool sys_has_faults;
	struct cadence cad;  /* as planned at the last tick */
	uint64_t armed_ns;   /* when the timer fires next */
	uint64_t next_cg_ns; /* when to look for cgroup moves again */
	uint64_t rss_wake;   /* bytes of RSS movement that wake the loop */
	pid_t refused_told;  /* --match: last refused pid warned about */
	bool taking;	     /* take_waiting() is running */
	/* eviction latency of every target followed, for --hist */
	struct hist ack_hist, freed_hist;
	bool had_evictor;
	int inflight_at_exit;	 /* commands out when the loop stopped */
	pid_t last_pid;		 /* the last target, for the exit note */
	int read_err, level_err; /* last errors told, to tell each once */
	bool stop;
	int exit_code;
	const char *exit_reason;
};

/* Epoll tags; target slot i is TAG_PID + i. */
enum { TAG_RB = 1, TAG_SIG, TAG_TIMER, TAG_DISC, TAG_PID = 16 };

#define for_each_target(a, t, i)                 \
	for (int i = 0; i < RC_MAX_TARGETS; i++) \
		if (((t) = (a)->ts.t[i]))

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list args)
{
	return out_libbpf_print(level, fmt, args);
}

/* The sampler the level and the summary without a target go by. */
static struct sampler *sampler_of(struct agent *a)
{
	struct target *t = targets_single(&a->ts);

	return t ? &t->sm : &a->sys;
}

static struct rc_thresholds thr_of(struct agent *a)
{
	struct target *t = targets_single(&a->ts);

	return t ? t->thr : a->sys_thr;
}

/* A failed periodic read is told once, not every tick; 0 rearms it. */
static void report_err(struct agent *a, int *last, int err, const char *what)
{
	if (err && err != *last)
		out_warn(
			&a->out,
			"failed to read %s: %s; the pressure level may be stale",
			what, strerror(-err));
	*last = err;
}

static int epoll_add(int epfd, int fd, uint32_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

static bool any_evicting(const struct agent *a)
{
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		if (a->ts.t[i] && a->ts.t[i]->evicting)
			return true;
	return false;
}

/* Ask for an evaluation; run_eval() decides when. */
static void evaluate(struct agent *a, uint32_t why)
{
	if (!any_evicting(a))
		return;
	a->eval_due = true;
	a->eval_reqs++;
	if (why)
		a->eval_why = why;
}

static void run_eval(struct agent *a)
{
	uint64_t now, cost, gap;
	struct target *t;
	uint32_t why;

	if (!a->eval_due || !any_evicting(a))
		return;
	now = now_ns();
	if (now < a->next_eval_ns)
		return;
	why = a->eval_why;
	a->eval_due = false;
	a->eval_why = 0;
	domains_evaluate(&a->ts, &a->denv, now, why);
	for_each_target(a, t, i)
		metrics_set_target(&a->m, (unsigned int)t->slot,
				   t->evicting ? t->ev.target : 0);
	metrics_evaluation(&a->m);
	a->evals++;
	cost = now_ns() - now;
	gap = EVAL_DUTY * cost > EVAL_MIN_GAP_NS ? EVAL_DUTY * cost
						 : EVAL_MIN_GAP_NS;
	a->next_eval_ns = now + cost + gap;
}

/* Close to a threshold, or commands out: follow headroom every tick. */
static bool target_pressing(const struct target *t)
{
	if (t->evicting && t->ev.nr_inflight)
		return true;
	return t->sm.headroom / 2 < t->thr.inactive_min;
}

static bool pressing(struct agent *a)
{
	struct target *t;

	for_each_target(a, t, i)
		if (target_pressing(t))
			return true;
	return false;
}

/* Wake the loop at @when (CLOCK_MONOTONIC): the timer is one-shot. */
static void arm(struct agent *a, uint64_t when)
{
	struct itimerspec its = { 0 };

	a->armed_ns = when;

	its.it_value.tv_sec = (time_t)(when / NSEC_PER_SEC);
	its.it_value.tv_nsec = (long)(when % NSEC_PER_SEC);
	if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
		its.it_value.tv_nsec = 1; /* zero would disarm it */
	timerfd_settime(a->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* Calm no more: read and judge at once, then tick as when busy. */
static void wake_now(struct agent *a, uint64_t now)
{
	a->cad.calm = false;
	if (a->rss_wake) {
		bpfstate_rss_wake(&a->bpf, 0);
		a->rss_wake = 0;
	}
	a->next_read_ns = now;
	a->next_level_ns = now;
	arm(a, now);
}

/*
 * An event made a target pressing while the loop does not tick (busy but
 * far): bring the next read forward, no sooner than a tick after the last
 * one. Only a calm loop wakes at once: a level update on every event
 * would measure rates over periods of microseconds and read /proc, PSI and
 * cgroup files thousands of times a second.
 */
static void read_soon(struct agent *a, uint64_t now)
{
	uint64_t at;

	if (a->cad.calm) {
		wake_now(a, now);
		return;
	}
	at = a->next_read_ns - a->cad.read_ns + CADENCE_TICK_NS;
	if (at < now)
		at = now;
	if (at >= a->next_read_ns)
		return;
	a->next_read_ns = at;
	if (at < a->armed_ns)
		arm(a, at);
}

/* A reclaim stall, kswapd awake or an OOM kill: memory is being fought for. */
static void kernel_told(struct agent *a, uint64_t now)
{
	a->last_event_ns = now;
	if (a->cad.calm)
		wake_now(a, now);
}

static void on_rss(struct agent *a, const struct rc_event_hdr *h, size_t len)
{
	const struct rc_rss *r = (const struct rc_rss *)h;
	struct target *t;

	if (len < sizeof(*r))
		return;
	t = targets_find(&a->ts, (pid_t)h->tgid);
	if (!t)
		return;
	target_rss(t, h->ts_ns, r->total, r->file);
	t->rss_told = r->total;
	metrics_set_rss(&a->m, (unsigned int)t->slot, t->sm.rss);
	evaluate(a, 0);
}

/* An OOM kill of a followed executor counts in its own metrics too. */
static void oom_of_target(struct agent *a, const void *data, size_t len)
{
	const struct rc_oom_kill *k = data;
	struct target *t;

	if (len < sizeof(*k))
		return;
	t = targets_find(&a->ts, (pid_t)k->victim_pid);
	if (!t)
		return;
	metrics_exec_oom_kill(&a->m, (unsigned int)t->slot);
	t->ev.oom_killed = true; /* its page's end says so */
	a->last_stall_ns = now_ns();
}

static int handle_event(void *ctx, void *data, size_t len)
{
	struct agent *a = ctx;
	const struct rc_event_hdr *h = data;
	struct rc_oom_kill oom;
	uint64_t now;

	if (len < sizeof(*h))
		return 0;
	now = now_ns();
	switch (h->type) {
	case RC_EV_RSS:
		on_rss(a, h, len);
		break;
	case RC_EV_RECLAIM:
		if (len < sizeof(struct rc_reclaim))
			break;
		metrics_reclaim_stall(
			&a->m, ((const struct rc_reclaim *)data)->kind,
			((const struct rc_reclaim *)data)->latency_ns);
		/* only ours: a followed process's, or in a watched memcg */
		a->last_stall_ns = now;
		evaluate(a, RAMCACHE_REASON_RECLAIM);
		kernel_told(a, now);
		break;
	case RC_EV_KSWAPD:
		if (len < sizeof(struct rc_kswapd))
			break;
		level_kswapd(&a->lw, ((const struct rc_kswapd *)data)->nid,
			     ((const struct rc_kswapd *)data)->awake);
		domlevel_kswapd(&a->dl, ((const struct rc_kswapd *)data)->nid,
				((const struct rc_kswapd *)data)->awake);
		if (((const struct rc_kswapd *)data)->awake) {
			evaluate(a, RAMCACHE_REASON_RECLAIM);
			kernel_told(a, now);
		}
		break;
	case RC_EV_OOM_KILL:
		metrics_oom_kill(&a->m);
		a->next_read_ns = 0; /* the cgroup's count, at the next tick */
		kernel_told(a, now);
		if (len >= sizeof(oom) && oomvictim_partial(data)) {
			/* a pid-only kernel: /proc may still know the rest */
			memcpy(&oom, data, sizeof(oom));
			oomvictim_fill(RC_PROC_ROOT, &oom);
			data = &oom;
			len = sizeof(oom);
		}
		oom_of_target(a, data, len);
		break;
	case RC_EV_FAULT_BURST:
		evaluate(a, 0);
		break;
	}
	/* a target's growth or a command posted: read again soon */
	if (!a->cad.tick_ns && pressing(a))
		read_soon(a, now);
	out_event(&a->out, data, len);
	return 0;
}

/* The level watch's view: counters, rates, PSI (of one target, or system). */
static void fill_level(struct agent *a, struct summary *s)
{
	s->level = policy_level_name(a->lw.cur.level);
	s->reasons = a->lw.cur.reasons;
	s->has_eta = a->lw.in.has_eta;
	s->eta_s = a->lw.in.eta_ns / 1e9;
	s->refault_file_s = a->lw.cur.rates.refault_file;
	s->refault_anon_s = a->lw.cur.rates.refault_anon;
	s->swap_in_s = a->lw.cur.rates.swap_in;
	s->swap_out_s = a->lw.cur.rates.swap_out;
	s->majflt_s = a->lw.cur.rates.major_faults;
	s->psi = a->lw.in.psi_present;
	s->psi_some = a->lw.in.psi_some_avg10;
	s->psi_full = a->lw.in.psi_full_avg10;
	if (a->lw.have_prev) {
		s->refaults_from = a->lw.refault_memcg ? "memcg" : "system";
		s->swap_from = a->lw.swap_memcg ? "memcg" : "system";
		s->psi_from = a->lw.psi_memcg ? "memcg" : "system";
	}
	s->drops = bpfstate_stat(&a->bpf, RC_STAT_DROPS);
	s->kswapd_wakes = bpfstate_stat(&a->bpf, RC_STAT_KSWAPD_WAKES);
	s->oom_kills = bpfstate_stat(&a->bpf, RC_STAT_OOM_KILLS);
	s->evaluations = a->evals;
	s->eval_requests = a->eval_reqs;
}

/* The memory and cgroup side of a summary, from @sm. */
static void fill_memory(const struct sampler *sm, struct summary *s)
{
	s->mem_available = sm->mi.mem_available;
	s->has_memcg = sm->has_cg;
	s->headroom = sm->headroom;
	if (!sm->has_cg)
		return;
	s->memcg_limit = sm->cs.limit;
	s->memcg_usage = sm->cs.usage;
	s->has_limit_events = sm->cs.self.ev.has_limit_events;
	s->memcg_high = sm->cs.self.ev.high;
	s->memcg_max = sm->cs.self.ev.max;
	s->has_swap_events = sm->cs.self.ev.has_swap_events;
	s->swap_max = sm->cs.self.ev.swap_max;
	s->swap_fail = sm->cs.self.ev.swap_fail;
}

/*
 * Faults of @pid (0: the system): counted by the fault program with
 * --fault-probes on (@bpf, since tracking began), else as the kernel
 * counts them in /proc, since the first read (*@base, *@has), whether
 * the program is attached or not. Per second since the last (*@last).
 * With @s NULL, only the base is taken.
 */
static void fill_fault_count(struct agent *a, pid_t pid, uint64_t *base,
			     uint64_t *last, bool *has, double dt,
			     struct summary *s)
{
	struct track_totals tt;
	struct rc_pidstat ps;
	struct rc_vmstat vm;
	uint64_t n;

	if (a->o->fault_probes_always) {
		if (bpfstate_totals(&a->bpf, pid, &tt))
			return;
		n = tt.faults; /* since tracking began */
		if (!*has)
			*base = *last = 0;
		*has = true;
	} else if (pid ? meminfo_pidstat_read(RC_PROC_ROOT, pid, &ps)
		       : meminfo_vmstat_read(RC_PROC_ROOT, &vm)) {
		return; /* gone: the last figures stand */
	} else {
		n = pid ? ps.minflt + ps.majflt : vm.pgfault;
	}
	if (!*has) {
		*base = *last = n;
		*has = true;
	}
	if (!s)
		return;
	s->faults = n - *base;
	s->faults_per_s = dt > 0 && n >= *last ? (n - *last) / dt : 0;
	*last = n;
}

/* Reclaim stalls of @pid (0: the system) since @prev, which moves on. */
static void fill_stalls(struct agent *a, pid_t pid, struct track_totals *prev,
			struct summary *s)
{
	struct track_totals tt;

	if (bpfstate_totals(&a->bpf, pid, &tt))
		memset(&tt, 0, sizeof(tt));
	for (int k = 0; k < RC_RECLAIM_KINDS; k++) {
		s->stalls[k] = tt.reclaim_count[k] - prev->reclaim_count[k];
		s->stall_ns[k] = tt.reclaim_ns[k] - prev->reclaim_ns[k];
	}
	*prev = tt;
}

/* A target's own part of a summary: RSS, faults, stalls, its evictions. */
static void fill_target(struct agent *a, struct target *t, double dt,
			struct summary *s)
{
	struct rc_view v;

	s->pid = t->pid;
	s->tag = &t->tag;
	s->rss = t->sm.rss;
	s->has_rss_file = t->has_rss_file;
	s->rss_file = t->rss_file;
	fill_fault_count(a, t->pid, &t->faults_base, &t->faults_prev,
			 &t->has_faults, dt, s);
	fill_stalls(a, t->pid, &t->prev, s);
	if (t->sm.sampled) {
		sampler_view(&t->sm, now_ns(), a->o->horizon_ns, &v);
		s->has_forecast = true;
		s->forecast = v.low;
	}
	s->threshold_headroom = t->thr.headroom_min;
	s->threshold_inactive = t->thr.inactive_min;
	if (t->sm.has_cg) {
		s->has_cgroup_oom = true;
		s->oom_kills_cgroup =
			t->sm.cs.self.oom_kill >= t->oom_base
				? t->sm.cs.self.oom_kill - t->oom_base
				: 0;
	}
	if (t->evicting) {
		s->evict_sent = t->ev.st.sent;
		s->evict_acked = t->ev.st.acked;
		s->evict_timeouts = t->ev.st.timeouts;
		s->evict_busy = t->ev.st.by_status[RAMCACHE_ACK_BUSY];
		s->bytes_evicted = t->ev.st.bytes_freed;
	}
}

/* One summary: of @t, or of the system when @t is NULL. */
static void summary_of(struct agent *a, struct target *t, uint64_t now)
{
	double dt = (now - a->last_summary_ns) / 1e9;
	struct summary s = { 0 };

	s.interval_s = dt;
	fill_memory(t ? &t->sm : &a->sys, &s);
	fill_level(a, &s);
	if (t) {
		fill_target(a, t, dt, &s);
	} else {
		fill_fault_count(a, 0, &a->sys_faults_base, &a->sys_faults_prev,
				 &a->sys_has_faults, dt, &s);
		fill_stalls(a, 0, &a->sys_prev, &s);
		s.threshold_headroom = a->sys_thr.headroom_min;
		s.threshold_inactive = a->sys_thr.inactive_min;
	}
	out_summary(&a->out, &s);
}

/* Every --interval: one summary per target, or the system's. */
static void summary(struct agent *a, uint64_t now)
{
	struct target *t;

	if (!a->ts.n)
		summary_of(a, NULL, now);
	for_each_target(a, t, i)
		summary_of(a, t, now);
	a->last_summary_ns = now;
}

/* Domain @d's level: its own with several targets, else the agent's. */
static enum ramcache_level level_of_domain(struct agent *a, int d)
{
	return a->ts.n > 1 ? a->dl.lw[d].cur.level : a->lw.cur.level;
}

/*
 * Each memory domain's gauges: headroom, forecast ETA, level; without
 * targets, the machine as domain 0.
 */
static void publish_domains(struct agent *a, uint64_t now, uint64_t sys_eta_ns)
{
	struct domain_outlook o;

	if (!a->ts.n) {
		metrics_domain_set(&a->m, 0, "machine", a->sys.mi.mem_total,
				   (int64_t)a->sys.headroom, sys_eta_ns,
				   a->lw.cur.level);
		return;
	}
	for (int d = 0; d < RC_MAX_TARGETS; d++) {
		if (!a->ts.dom_refs[d] ||
		    domains_outlook(&a->ts, d, &a->denv, now, &o))
			continue;
		metrics_domain_set(&a->m, (unsigned int)d, o.name, o.limit,
				   (int64_t)o.headroom,
				   o.v.has_eta ? o.v.eta_ns : METRICS_NO_ETA,
				   level_of_domain(a, d));
	}
}

/* The agent's headroom: the least of its targets', or the machine's. */
static uint64_t least_headroom(struct agent *a)
{
	uint64_t h = sampler_of(a)->headroom;
	struct target *t;

	for_each_target(a, t, i)
		if (t->sm.headroom < h)
			h = t->sm.headroom;
	return h;
}

/*
 * With several targets, each domain's level from its own inputs; a
 * `pressure` event tagged with the domain when it changes. The reclaim
 * stalls BPF counts are the machine's (there are no per-cgroup ones):
 * every domain sees them, and its cgroup's own memory.events beside.
 */
static void update_domain_levels(struct agent *a, uint64_t now,
				 const struct level_ctx *base)
{
	for (int d = 0; d < RC_MAX_TARGETS; d++) {
		struct level_ctx c = *base;
		struct pressure_info pi = { 0 };
		struct domain_outlook o;
		int changed;

		if (!a->ts.dom_refs[d] ||
		    domlevel_ctx(&a->ts, d, &a->denv, now, &c))
			continue;
		changed = domlevel_update(&a->dl, &a->ts, d, now, &c);
		/* the outlook (a forecast) again only for the name, and only
		 * when there is news to tell */
		if ((changed != LEVEL_CHANGED && changed != LEVEL_NEW_REASON) ||
		    domains_outlook(&a->ts, d, &a->denv, now, &o))
			continue;
		pi.level = policy_level_name(a->dl.lw[d].cur.level);
		pi.reasons = a->dl.lw[d].cur.reasons;
		pi.has_eta = c.has_eta;
		pi.eta_s = c.eta_ns / 1e9;
		pi.headroom = c.headroom;
		pi.pid = c.pid;
		pi.domain = o.name;
		out_pressure(&a->out, &pi);
	}
}

static void update_level(struct agent *a, uint64_t now)
{
	struct target *one = targets_single(&a->ts), *t;
	struct sampler *sm = sampler_of(a);
	struct level_ctx c = { 0 };
	struct pressure_info pi = { 0 };
	int prev = a->lw.cur.level;
	struct rc_view v;
	int changed;

	c.pid = one ? one->pid : 0;
	c.direct_stalls = bpfstate_stat(&a->bpf, RC_STAT_DIRECT_RECLAIMS);
	c.memcg_stalls = bpfstate_stat(&a->bpf, RC_STAT_MEMCG_RECLAIMS);
	c.headroom = sm->headroom;
	if (one && sm->has_cg) {
		c.cg = &sm->cs.self;
		c.cg_ino = sm->cg.ino;
	}
	c.thr = thr_of(a);
	/* time until full from the settled trend: a spike is no warning */
	sampler_view(sm, now, a->o->horizon_ns, &v);
	if (v.has_eta) {
		c.has_eta = true;
		c.eta_ns = v.eta_ns;
	}
	changed = level_update(&a->lw, now, &c);
	report_err(a, &a->level_err, changed < 0 ? changed : 0,
		   "the kernel's reclaim counters");
	if (a->ts.n > 1)
		update_domain_levels(a, now, &c);
	metrics_set_level(&a->m, a->lw.cur.level);
	metrics_set_headroom(&a->m, (int64_t)least_headroom(a));
	publish_domains(a, now, c.has_eta ? c.eta_ns : METRICS_NO_ETA);
	for_each_target(a, t, i)
		if (t->evicting)
			evictor_set_level(
				&t->ev, t->dom >= 0 ? level_of_domain(a, t->dom)
						    : a->lw.cur.level);
	if (changed <= 0)
		return;
	pi.level = policy_level_name(a->lw.cur.level);
	pi.reasons = a->lw.cur.reasons;
	pi.has_eta = c.has_eta;
	pi.eta_s = c.eta_ns / 1e9;
	pi.headroom = sm->headroom;
	pi.pid = c.pid;
	out_pressure(&a->out, &pi);
	if (changed == LEVEL_CHANGED)
		onlevel_run(&a->out, a->o->on_level, a->o->nr_on_level, prev,
			    a->lw.cur.level, a->lw.cur.reasons, c.pid);
}

static void match_spec_of(const struct opts *o, struct match_spec *s)
{
	s->pattern = o->match;
	s->has_uid = o->has_user;
	s->uid = o->user;
	s->cgroup = o->cgroup;
}

/* Tell why attaching @pid failed (a process gone is not worth a line). */
static void attach_failed(struct agent *a, pid_t pid, int err)
{
	if (err == -EACCES)
		out_warn(
			&a->out,
			"not following pid %d: it changed its command line, user or cgroup while being attached",
			pid);
	else if (err == -ENOSPC)
		out_warn(
			&a->out,
			"not following pid %d: already following %d executors, the most one agent can",
			pid, RC_MAX_TARGETS);
	else if (err != -ESRCH)
		out_warn(&a->out, "failed to follow pid %d: %s", pid,
			 strerror(-err));
}

/* --match without --all: the oldest match, one at a time. */
static void find_match(struct agent *a, uint64_t now)
{
	struct target *t = NULL;
	struct match_spec s;
	struct match_result r;
	pid_t pid;
	int err;

	a->next_match_ns = now + MATCH_PERIOD_NS;
	match_spec_of(a->o, &s);
	pid = match_find(RC_PROC_ROOT, &s, getpid(), &r);
	if (pid >= 0 && r.refused_pid && r.refused_pid != a->refused_told) {
		out_warn(
			&a->out,
			"not following pid %d (uid %u): its command line holds '%s' but it is not %s",
			r.refused_pid, r.refused_uid, s.pattern,
			r.wrong_user ? "of --user" : "in --cgroup");
		a->refused_told = r.refused_pid;
	}
	if (pid <= 0)
		return;
	err = target_attach(&a->ts, &a->env, pid, &s, &t);
	if (err) {
		attach_failed(a, pid, err);
		return;
	}
	out_target_pick(&a->out, pid, t->comm, s.pattern, &r);
}

static void take_waiting(struct agent *a);

/* Stop following @t, telling why (@state: exited, exec). */
static void drop_target(struct agent *a, struct target *t, const char *state)
{
	pid_t pid = t->pid;
	char comm[sizeof(t->comm)];

	memcpy(comm, t->comm, sizeof(comm));
	discover_follow(&a->disc, pid, false);
	discover_release(&a->disc, t->libc);
	if (target_detach(&a->ts, &a->env, t, &a->ack_hist, &a->freed_hist))
		a->had_evictor = true;
	out_target(&a->out, state, pid, comm);
	if (a->o->follow == FOLLOW_ALL) {
		admission_place_freed(&a->adm, now_ns());
		take_waiting(a);
	}
	/* its domain's gauges went with it: the machine's stand in now */
	if (!a->ts.n) {
		report_err(a, &a->read_err, sampler_read(&a->sys, now_ns()),
			   "memory and cgroup counters");
		publish_domains(a, now_ns(), METRICS_NO_ETA);
	}
}

/* @t's process has exited: its last numbers, then its place goes. */
static void target_exited(struct agent *a, struct target *t)
{
	pid_t pid = t->pid;

	target_read(&a->ts, &a->env, t,
		    now_ns()); /* its cgroup's OOM kills too */
	summary_of(a, t, now_ns());
	a->last_pid = pid;
	if (a->o->follow == FOLLOW_PID) {
		if (target_detach(&a->ts, &a->env, t, &a->ack_hist,
				  &a->freed_hist))
			a->had_evictor = true;
		a->stop = true;
		a->exit_reason = "target exited";
		return;
	}
	drop_target(a, t, "exited");
	if (a->o->follow != FOLLOW_ALL) {
		a->next_match_ns = 0;
		arm(a, now_ns()); /* look for the next one now */
	}
}

/*
 * --all: let go of the executors that have exited but whose pidfd event
 * is still queued, before another takes a place: with both in one wake-up
 * (a busy machine) the newcomer would otherwise get a new slot, and a new
 * set of series, while the place it replaces is still held.
 */
static void reap_exited(struct agent *a)
{
	struct target *t;

	for_each_target(a, t, i)
		if (match_pidfd_alive(t->pidfd))
			target_exited(a, t);
}

/*
 * Why @pid of @who was not looked at or not followed (@n: its places),
 * told at most every ADMISSION_WARN_NS.
 */
static void tell_refusal(struct agent *a, pid_t pid, struct principal who,
			 enum admission_verdict v, int n, uint64_t now)
{
	char name[64];

	if (v == ADMISSION_OK || v == ADMISSION_PENDING ||
	    !admission_may_warn(&a->adm, v, now))
		return;
	principal_name(who, name, sizeof(name));
	if (v == ADMISSION_TOO_FAST)
		out_warn(
			&a->out,
			"not following pid %d: %s starts executors faster than %.0f a second (--user lifts it for a user)",
			pid, name, ADMISSION_UID_RATE);
	else if (v == ADMISSION_TOO_DEAR)
		out_warn(
			&a->out,
			"not following pid %d: looking at the processes of %s took its share of the agent's time (%d ms a second)",
			pid, name, (int)(ADMISSION_WORK_RATE / NSEC_PER_MSEC));
	else if (v == ADMISSION_QUEUE_FULL)
		out_warn(
			&a->out,
			"not following pid %d: %s has %d reported pages waiting for a look already",
			pid, name, ADMISSION_PEND_PER_PRINCIPAL);
	else if (v == ADMISSION_USER_FULL)
		out_warn(
			&a->out,
			"not following pid %d: %s already has %d executors followed, the most for one user or container (--user lifts it for a user)",
			pid, name, n);
}

/* Places taken by @who's executors. */
static int places_of(struct agent *a, struct principal who)
{
	struct target *t;
	int n = 0;

	for_each_target(a, t, i)
		n += principal_eq(t->who, who);
	return n;
}

/*
 * --all: every place is taken: @pid waits for the next one that frees,
 * told once (a `control` event and ramcache_executors_refused_total).
 */
static void no_place(struct agent *a, pid_t pid)
{
	char path[64], why[160];
	struct control_info c = { .state = "refused",
				  .path = path,
				  .discovery = "memfd",
				  .pid = pid,
				  .ns_pid = pid,
				  .why = why };

	admission_refused(&a->adm);
	if (!admission_wait(&a->adm, pid))
		return;
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	snprintf(why, sizeof(why),
		 "no place: following %d executors, the most this agent can "
		 "(MAX_EXECUTORS); it takes the next place that frees",
		 RC_MAX_TARGETS);
	out_control(&a->out, &c);
	metrics_executor_refused(&a->m);
	metrics_set_waiting(&a->m, (uint64_t)a->adm.nwaiting);
}

/*
 * --all: may @pid (of @who, first looked at in @l) take a place, and does
 * it hold a page that passes every check? 0: yes (*@sp: the filter it
 * passed, or NULL), 1: no, never (stop looking), -1: not yet (its page is
 * not there: the uprobe's are looked at again for ADMISSION_PEND_NS, a
 * scan's at the next scan).
 */
static int may_adopt(struct agent *a, pid_t pid, const struct discover_look *l,
		     struct principal who, struct match_spec *s,
		     struct match_spec **sp)
{
	uint64_t now = now_ns();
	enum admission_verdict v;
	int err;

	*sp = NULL;
	if (a->o->match || a->o->has_user || a->o->cgroup) {
		match_spec_of(a->o, s);
		*sp = s;
		if (match_verify(RC_PROC_ROOT, s, pid, -1))
			return 1; /* not ours, or gone: nothing to tell */
	}
	if (l->fds > CONTROL_MAX_FDS) {
		if (admission_may_warn(&a->adm, ADMISSION_WARN_FDS, now))
			out_warn(
				&a->out,
				"not following pid %d: it holds %u descriptors, more than the %d looked through for a page",
				pid, l->fds, CONTROL_MAX_FDS);
		return 1;
	}
	reap_exited(a);
	/* a full share is refused before its page is looked for */
	v = admission_check(&a->adm, who, places_of(a, who));
	if (v != ADMISSION_OK) {
		tell_refusal(a, pid, who, v, places_of(a, who), now);
		return 1;
	}
	err = discover_verify(RC_PROC_ROOT, pid);
	if (err == -EMFILE &&
	    admission_may_warn(&a->adm, ADMISSION_WARN_FDS, now))
		out_warn(
			&a->out,
			"not following pid %d: it holds more than %d descriptors, the most looked through for a page",
			pid, CONTROL_MAX_FDS);
	if (err)
		return err == -ENOENT ? -1 : 1;
	return 0;
}

/*
 * Follow @pid of @who, found @how, filtered by @sp; reported by the libc
 * probe of cookie @probe (0: found otherwise).
 */
static void follow(struct agent *a, pid_t pid, struct principal who,
		   const struct match_spec *sp, const char *how, uint32_t probe)
{
	uint64_t now = now_ns();
	struct target *t;
	int err;

	err = target_attach(&a->ts, &a->env, pid, sp, &t);
	if (err == -ENOSPC) {
		no_place(a, pid);
		return;
	}
	if (err) {
		if (err != -EACCES &&
		    admission_may_warn(&a->adm, ADMISSION_WARN_ATTACH, now))
			attach_failed(a, pid, err);
		return;
	}
	t->who = who;
	t->libc = discover_hold(&a->disc, probe);
	discover_follow(&a->disc, pid, true);
	admission_settled(&a->adm, pid);
	metrics_set_waiting(&a->m, (uint64_t)a->adm.nwaiting);
	out_target_found(&a->out, pid, &t->tag, t->weight, how);
	wake_now(a, now);
}

/*
 * --all: follow @pid if the rules accept it and it holds a page (see
 * may_adopt()); @how it was found. First a cheap look through a pidfd
 * (its status, the size of its descriptor table): the time the looks take
 * is charged to the principal it belongs to. @spend: the look is not paid
 * for yet (a scan found it; the kernel's reports are paid for when they
 * come). True when it is followed or can never be (stop looking).
 */
static bool adopt(struct agent *a, pid_t pid, const char *how, bool spend,
		  uint32_t probe)
{
	uint64_t t0 = now_ns();
	struct match_spec s, *sp;
	struct discover_look l;
	struct principal who;
	int verdict;

	if (pid == getpid() || targets_find(&a->ts, pid))
		return true;
	if (discover_first_look(RC_PROC_ROOT, pid, &l))
		return true; /* gone */
	who = admission_principal(&a->adm, l.uid, l.pidns);
	if (spend) {
		enum admission_verdict v = admission_may_look(&a->adm, who, t0);

		if (v != ADMISSION_OK) {
			tell_refusal(a, pid, who, v, 0, t0);
			return true;
		}
	}
	verdict = may_adopt(a, pid, &l, who, &s, &sp);
	admission_charge(&a->adm, who, now_ns() - t0, now_ns());
	if (!verdict)
		follow(a, pid, who, sp, how, probe);
	return verdict >= 0;
}

/*
 * A place freed: the executors refused one for lack of it take it, the
 * longest waiting first, at once (not at the next look through /proc).
 */
static void take_waiting(struct agent *a)
{
	pid_t pid;

	if (a->taking)
		return; /* a target reaped in adopt() frees a place too */
	a->taking = true;
	while (a->ts.n < RC_MAX_TARGETS &&
	       (pid = admission_next_waiting(&a->adm)))
		adopt(a, pid, "waiting", false, 0);
	a->taking = false;
	metrics_set_waiting(&a->m, (uint64_t)a->adm.nwaiting);
}

/*
 * The reported pages waiting for a look: a few each turn, within
 * ADMISSION_TURN_NS, the longest waiting first.
 */
static void retry_pending(struct agent *a, uint64_t now)
{
	pid_t pids[ADMISSION_LOOKS_PER_TURN];
	int n = admission_pending(&a->adm, now, pids, ADMISSION_LOOKS_PER_TURN);

	for (int i = 0; i < n; i++) {
		if (adopt(a, pids[i], "uprobe", false,
			  admission_probe(&a->adm, pids[i])))
			admission_looked(&a->adm, pids[i]);
		if (now_ns() - now >= ADMISSION_TURN_NS)
			break;
	}
}

/*
 * --all: a target whose page has been gone (or refused) for
 * ADMISSION_NO_PAGE_NS is no executor any more: let its place go.
 */
static void drop_pageless(struct agent *a, uint64_t now)
{
	struct target *t;

	if (a->o->follow != FOLLOW_ALL)
		return;
	for_each_target(a, t, i)
		if (admission_pageless(&t->no_page_since,
				       !t->evicting || t->ev.open, now))
			drop_target(a, t, "no_page");
}

static void adopt_found(pid_t pid, void *ctx)
{
	struct agent *a = ctx;
	struct target *t;
	char why[512];

	adopt(a, pid, "scan", true, 0);
	t = targets_find(&a->ts, pid);
	if (!a->adm.uprobe || !t || t->libc)
		return;
	/* its libc too, so the next executors on it are reported at once */
	t->libc = discover_scan_found(&a->disc, RC_PROC_ROOT, pid,
				      admission_missed(&a->adm), why,
				      sizeof(why));
	if (why[0])
		out_warn(&a->out, "%s", why);
}

/*
 * The kernel told of a page being made by @e->tgid: nothing of the
 * process is read here, only the admission's books (who made it, as the
 * kernel says, and whether they may have it looked at); it is looked at
 * from the pending list, a few each turn.
 */
static void page_reported(struct agent *a, const struct rc_discover_ev *e)
{
	struct principal who = admission_principal(&a->adm, e->uid, e->pidns);
	uint64_t now = now_ns(), wake = 0;
	enum admission_verdict v;

	v = admission_report(&a->adm, (pid_t)e->tgid, who, e->probe, now,
			     &wake);
	if (v != ADMISSION_OK) {
		tell_refusal(a, (pid_t)e->tgid, who, v, 0, now);
		return;
	}
	/* a calm loop may not wake for seconds: look soon */
	if (wake < a->armed_ns)
		arm(a, wake);
}

/*
 * The kernel told: a page was created, or a followed executor exec'd. At
 * most ADMISSION_REPORTS_PER_TURN are taken in one turn (the rest wait in
 * the ring for the next): the loop is everybody's.
 */
static int handle_discover(void *ctx, void *data, size_t len)
{
	const struct rc_discover_ev *e = data;
	struct agent *a = ctx;
	struct target *t;

	if (len < sizeof(*e) || !e->tgid || e->tgid > INT32_MAX)
		goto next;
	t = targets_find(&a->ts, (pid_t)e->tgid);
	if (e->kind == RC_DISC_PAGE && !t) {
		page_reported(a, e);
	} else if (e->kind == RC_DISC_EXEC && t) {
		/* its page went with the old image, unless it was inherited */
		drop_target(a, t, "exec");
		page_reported(a, e);
	}
next:
	return ++a->disc_taken < ADMISSION_REPORTS_PER_TURN ? 0 : -EAGAIN;
}

/* A turn's share of the kernel's reports. */
static void take_reports(struct agent *a)
{
	a->disc_taken = 0;
	ring_buffer__consume(a->disc_rb);
}

/*
 * --all: once at start, then slowly, for what the uprobe cannot see, and
 * at once when the kernel's reports were lost to a full ring (a burst of
 * memfd_create or execve while the loop was busy); a look takes at most
 * ADMISSION_SCAN_SLICE_NS of the loop at a time.
 */
static void rescan(struct agent *a, uint64_t now)
{
	uint64_t lost, until;

	if (a->o->follow != FOLLOW_ALL)
		return;
	lost = admission_lost(
		&a->adm, a->adm.uprobe ? discover_drops(&a->disc) : 0, now);
	if (lost)
		out_warn(
			&a->out,
			"%" PRIu64
			" discovery reports lost (ring full); looking through /proc now",
			lost);
	if (!admission_scan_due(&a->adm, now, &until))
		return;
	discover_scan(RC_PROC_ROOT, getpid(), &a->adm.scan_from, until,
		      adopt_found, a);
	admission_scanned(&a->adm, now);
}

/*
 * /etc/subuid, with /etc/passwd for the names in it: the subordinate uids
 * of a user (their rootless containers') count as that user.
 */
static void load_subuids(struct admission *ad)
{
	char *sub = NULL, *pw = NULL;

	if (readfile_alloc(SUBUID_PATH, 1 << 20, &sub))
		return;
	if (readfile_alloc(PASSWD_PATH, 16 << 20, &pw))
		pw = NULL;
	subuids_parse(&ad->subuids, sub, pw);
	free(sub);
	free(pw);
}

static void setup_discover(struct agent *a)
{
	char why[512] = "";
	int err;

	if (a->o->follow != FOLLOW_ALL)
		return;
	load_subuids(&a->adm);
	a->adm.own_pidns = discover_own_pidns();
	err = discover_open(&a->disc, why, sizeof(why));
	if (!err) {
		/* a ring of its own, taken from with a budget per turn */
		a->disc_rb = ring_buffer__new(discover_events_fd(&a->disc),
					      handle_discover, a, NULL);
		err = a->disc_rb ? epoll_add(a->epfd,
					     ring_buffer__epoll_fd(a->disc_rb),
					     TAG_DISC)
				 : -errno;
	}
	if (err) {
		ring_buffer__free(a->disc_rb);
		a->disc_rb = NULL;
		out_warn(
			&a->out,
			"%s; new executors are found by looking through /proc every %d s instead",
			why[0] ? why : "failed to watch memfd_create",
			(int)(ADMISSION_RESCAN_BLIND_NS / NSEC_PER_SEC));
		discover_close(&a->disc);
		return;
	}
	a->adm.uprobe = true;
	if (why[0])
		out_warn(&a->out, "%s", why);
}

/* Lost events are never silent: a warning at most every DROP_WARN_NS. */
static void check_drops(struct agent *a, uint64_t now)
{
	uint64_t drops = bpfstate_stat(&a->bpf, RC_STAT_DROPS);

	uint64_t lines = outstream_dropped();

	metrics_set_ringbuf_drops(
		&a->m, drops + (a->adm.uprobe ? discover_drops(&a->disc) : 0));
	if (now < a->next_drop_warn_ns ||
	    (drops <= a->drops_told && lines <= a->out_told))
		return;
	if (drops > a->drops_told)
		out_warn(&a->out,
			 "ring buffer full: %" PRIu64
			 " events dropped (%" PRIu64
			 " in all); the agent is falling behind the kernel",
			 drops - a->drops_told, drops);
	if (lines > a->out_told)
		out_warn(&a->out,
			 "stdout not read: %" PRIu64
			 " output lines dropped (%" PRIu64 " in all)",
			 lines - a->out_told, lines);
	a->drops_told = drops;
	a->out_told = lines;
	a->next_drop_warn_ns = now + DROP_WARN_NS;
}

/* Executors that exited while waiting for a place wait no more. */
static void prune_waiting(struct agent *a)
{
	int n = a->adm.nwaiting;

	for (int i = n - 1; i >= 0; i--)
		if (kill(a->adm.waiting[i], 0) && errno == ESRCH)
			admission_settled(&a->adm, a->adm.waiting[i]);
	if (a->adm.nwaiting != n)
		metrics_set_waiting(&a->m, (uint64_t)a->adm.nwaiting);
}

/* Follow cgroup moves of every target, once a second. */
static void recheck_cgroups(struct agent *a, uint64_t now)
{
	struct target *t;

	if (!a->ts.n || now < a->next_cg_ns)
		return;
	a->next_cg_ns = now + TARGET_CGROUP_PERIOD_NS;
	for_each_target(a, t, i)
		target_recheck_cgroup(&a->ts, &a->env, t, now);
	prune_waiting(a);
}

/*
 * The programs on page faults are off: @t's RSS from /proc at each read,
 * told as an `rss` event (as if BPF had) when it moved --rss-step since
 * the last one.
 */
static void poll_rss(struct agent *a, struct target *t, uint64_t now)
{
	struct rc_rss e = { .hdr = { .type = RC_EV_RSS,
				     .pid = (__u32)t->pid,
				     .tgid = (__u32)t->pid,
				     .ts_ns = now } };
	struct rc_pidrss r;

	if (meminfo_pidrss_read(RC_PROC_ROOT, t->pid, &r))
		return; /* gone: its pidfd tells */
	e.anon = r.anon;
	e.file = r.file;
	e.shmem = r.shmem;
	e.total = r.anon + r.file + r.shmem;
	if (t->rss_told &&
	    (e.total > t->rss_told ? e.total - t->rss_told
				   : t->rss_told - e.total) < a->o->rss_step) {
		target_rss(t, now, e.total, r.file);
		metrics_set_rss(&a->m, (unsigned int)t->slot, t->sm.rss);
		return;
	}
	handle_event(a, &e, sizeof(e));
}

/* Read meminfo and the cgroups of every target (and the system's). */
static void read_all(struct agent *a, uint64_t now)
{
	struct target *t;

	for_each_target(a, t, i) {
		if (!t->has_faults)
			fill_fault_count(a, t->pid, &t->faults_base,
					 &t->faults_prev, &t->has_faults, 0,
					 NULL);
		if (!a->fw.on)
			poll_rss(a, t, now);
		report_err(a, &a->read_err,
			   target_read(&a->ts, &a->env, t, now),
			   "memory and cgroup counters");
	}
	if (!a->ts.n && !a->sys_has_faults)
		fill_fault_count(a, 0, &a->sys_faults_base, &a->sys_faults_prev,
				 &a->sys_has_faults, 0, NULL);
	if (!targets_single(&a->ts))
		report_err(a, &a->read_err, sampler_read(&a->sys, now),
			   "memory and cgroup counters");
}

/* The cadence follows whichever target is nearest its threshold. */
static void cadence_input(struct agent *a, uint64_t now, struct cadence_in *ci)
{
	struct target *t;
	uint64_t best = UINT64_MAX;

	ci->near = pressing(a);
	ci->above_ok = a->lw.cur.level > RAMCACHE_LEVEL_OK;
	ci->since_event_ns = now - a->last_event_ns;
	ci->headroom = a->sys.headroom;
	ci->near_at = 2 * a->sys_thr.inactive_min;
	for_each_target(a, t, i) {
		uint64_t near = 2 * t->thr.inactive_min;
		uint64_t above = t->sm.headroom > near ? t->sm.headroom - near
						       : 0;

		if (above < best) {
			best = above;
			ci->headroom = t->sm.headroom;
			ci->near_at = near;
		}
	}
}

/*
 * The next time the loop must wake when nothing else wakes it: on time for
 * heartbeats, commands in flight, reads and retries; periodic chores wait
 * for that wake-up when it comes within their slack (cadence_wake()).
 */
static uint64_t next_tick(struct agent *a, uint64_t now)
{
	struct cadence_due d[RC_MAX_TARGETS + 12];
	uint64_t sum_slack = a->o->interval_ns / 4, next;
	struct target *t;
	int n = 0;

	if (a->cad.tick_ns)
		return now + a->cad.tick_ns;
	if (sum_slack > CADENCE_SLACK_NS)
		sum_slack = CADENCE_SLACK_NS;
	d[n++] = (struct cadence_due){ a->next_read_ns, 0 };
	d[n++] = (struct cadence_due){ a->next_level_ns,
				       a->cad.calm ? CADENCE_SLACK_NS : 0 };
	d[n++] = (struct cadence_due){ a->last_summary_ns + a->o->interval_ns,
				       sum_slack };
	for_each_target(a, t, i)
		if (t->evicting)
			/* a heartbeat is on time; a look for a page is not */
			d[n++] = (struct cadence_due){
				evictor_next_ns(&t->ev),
				t->ev.open ? 0 : CADENCE_SLACK_NS
			};
	if (a->o->follow == FOLLOW_MATCH && !a->ts.n)
		d[n++] = (struct cadence_due){ a->next_match_ns,
					       CADENCE_SLACK_NS };
	if (a->o->follow == FOLLOW_ALL)
		n += admission_wakes(&a->adm, now, d + n);
	if (a->end_ns)
		d[n++] = (struct cadence_due){ a->end_ns, 0 };
	if (a->ts.n)
		d[n++] =
			(struct cadence_due){ a->next_cg_ns, CADENCE_SLACK_NS };
	if (a->eval_due)
		d[n++] = (struct cadence_due){ a->next_eval_ns, 0 };
	next = cadence_wake(d, n);
	return next > now + CADENCE_TICK_NS ? next : now + CADENCE_TICK_NS;
}

/* Heartbeats, acks and timeouts of every page; then maybe an evaluation. */
static void tick_evictors(struct agent *a, uint64_t now, bool fresh)
{
	struct target *t;

	if (!any_evicting(a))
		return;
	for_each_target(a, t, i)
		if (t->evicting)
			target_tick(t, now);
	/* calm: nothing new to judge but what was just read */
	if (fresh || !a->cad.calm)
		evaluate(a, 0);
	run_eval(a);
}

/*
 * While calm, a target's RSS events wake the loop only once its RSS has
 * moved a quarter of the way to the near point; the rest are read at the
 * next wake-up. Otherwise every one does.
 */
static void rss_wake(struct agent *a, const struct cadence_in *ci)
{
	uint64_t step = 0;

	if (a->cad.calm && ci->headroom > ci->near_at)
		step = (ci->headroom - ci->near_at) / 4;
	if (step != a->rss_wake) {
		bpfstate_rss_wake(&a->bpf, step);
		a->rss_wake = step;
	}
}

/* How far a domain, by its sampler @sm and reserves @thr, is from the
 * point where the programs on page faults are needed. */
static uint64_t far_of(struct agent *a, const struct sampler *sm,
		       const struct rc_thresholds *thr, uint64_t now)
{
	struct faultwatch_domain d = { 0 };
	struct rc_view v;

	if (!sm->sampled)
		return 0; /* nothing read yet */
	sampler_view(sm, now, a->o->horizon_ns, &v);
	d.headroom = v.headroom;
	d.reserve = thr->inactive_min;
	d.spike = v.spike > v.excursion ? v.spike - v.excursion : 0;
	d.trend = v.trend;
	return faultwatch_far(&d);
}

/* The nearest of the domains followed (the machine without a target). */
static uint64_t least_far(struct agent *a, uint64_t now)
{
	uint64_t far, least = UINT64_MAX;
	struct target *t;

	if (!a->ts.n)
		return far_of(a, &a->sys, &a->sys_thr, now);
	for_each_target(a, t, i) {
		far = far_of(a, &t->sm, &t->thr, now);
		if (far < least)
			least = far;
	}
	return least;
}

/* Commands out, or a reclaim stall or an OOM kill of ours lately. */
static bool faults_busy(struct agent *a, uint64_t now)
{
	struct target *t;

	if (a->last_stall_ns && now - a->last_stall_ns < FAULTWATCH_CALM_NS)
		return true;
	for_each_target(a, t, i)
		if (t->evicting && t->ev.nr_inflight)
			return true;
	return false;
}

/*
 * Tell the state of the programs on page faults: @why, by @margin, and
 * the switch took @took_ns.
 */
static void tell_faults(struct agent *a, const char *why, uint64_t margin,
			uint64_t took_ns)
{
	struct fault_probes_info f = { .on = a->fw.on,
				       .why = why,
				       .far = a->fw_far,
				       .margin = margin,
				       .took_ns = took_ns };

	out_fault_probes(&a->out, &f);
}

/* Attach (@on) or detach the programs on page faults, timed. */
static uint64_t faults_switch(struct agent *a, bool on)
{
	uint64_t t0 = now_ns(), took;
	int err = bpfstate_faults(&a->bpf, on);

	took = now_ns() - t0;
	if (err) {
		out_warn(
			&a->out,
			"failed to attach the programs on page faults: %s; RSS is read from /proc instead",
			strerror(-err));
		bpfstate_faults(&a->bpf, false);
		a->fw_failed = true;
		on = false;
	} else if (on) {
		a->fw.attach_ns = took;
	}
	a->fw.on = on;
	metrics_fault_probes(&a->m, on, took);
	return took;
}

/* After a read: the programs on page faults on or off as needed. */
static void watch_faults(struct agent *a, uint64_t now)
{
	bool first = !a->fw.decided, busy;
	uint64_t took, margin = faultwatch_margin(a->fw.attach_ns);
	enum faultwatch_why why;

	if (a->o->fault_probes_always || a->fw_failed)
		return;
	a->fw_far = least_far(a, now);
	busy = faults_busy(a, now);
	why = faultwatch_step(&a->fw, a->fw_far, busy, now);
	if (why != FAULTWATCH_KEEP) {
		took = faults_switch(a, a->fw.on);
		tell_faults(a,
			    a->fw_failed ? "failed" : faultwatch_why_name(why),
			    margin, took);
	} else if (first) { /* on since the start: say why, once */
		tell_faults(a, busy ? "busy" : "near", margin, a->fw.attach_ns);
	}
}

/* While the programs on page faults are off, reads come often enough. */
static void poll_cadence(struct agent *a)
{
	uint64_t p;

	if (a->fw.on || !a->cad.read_ns)
		return;
	p = faultwatch_poll_ns(a->fw_far);
	if (p < a->cad.read_ns)
		a->cad.read_ns = p;
}

static void on_tick(struct agent *a)
{
	uint64_t now = now_ns();
	struct cadence_in ci = { 0 };
	bool fresh = false;

	/* RSS events that did not wake the loop */
	ring_buffer__consume(a->rb);

	if (a->o->follow == FOLLOW_MATCH && !a->ts.n && now >= a->next_match_ns)
		find_match(a, now);
	rescan(a, now);
	retry_pending(a, now);
	drop_pageless(a, now);
	recheck_cgroups(a, now);
	cadence_input(a, now, &ci);
	cadence_plan(&ci, &a->cad);
	poll_cadence(a);
	rss_wake(a, &ci);
	/* while calm a read may come early, with a wake-up due anyway */
	if (now + (a->cad.calm ? CADENCE_SLACK_NS : 0) >= a->next_read_ns ||
	    !a->cad.read_ns) {
		read_all(a, now);
		watch_faults(a, now);
		a->next_read_ns = now + a->cad.read_ns;
		fresh = true;
	}
	tick_evictors(a, now, fresh);
	if (now >= a->next_level_ns) {
		update_level(a, now);
		a->next_level_ns = now + a->cad.level_ns;
		check_drops(a, now);
	} else if (!a->cad.calm) {
		check_drops(a, now);
	}
	if (now - a->last_summary_ns >= a->o->interval_ns)
		summary(a, now);
	onlevel_reap();
	if (a->end_ns && now >= a->end_ns) {
		a->stop = true;
		a->exit_reason = "duration reached";
	}
	arm(a, next_tick(a, now));
}

static void on_target_exit(struct agent *a, int slot)
{
	struct target *t = targets_at(&a->ts, slot);
	pid_t pid;

	/*
	 * The slot may have changed hands since epoll_wait gathered this
	 * event (its owner dropped, a new executor adopted in the same
	 * batch): only the slot's own pidfd, readable, means it exited.
	 */
	if (!t || match_pidfd_alive(t->pidfd) == 0)
		return;
	pid = t->pid;
	/* drain what the target left behind first */
	ring_buffer__consume(a->rb);
	t = targets_find(&a->ts, pid);
	if (!t)
		return; /* dropped by an event just drained, or reaped */
	target_exited(a, t);
}

static void on_signal(struct agent *a)
{
	struct signalfd_siginfo si;

	if (read(a->sigfd, &si, sizeof(si)) != sizeof(si))
		return;
	a->stop = true;
	a->exit_reason = si.ssi_signo == SIGINT ? "interrupted" : "terminated";
}

static void print_hists(struct agent *a, const struct hist *ack,
			const struct hist *freed)
{
	struct hist h;

	if (!bpfstate_hist(&a->bpf, RC_HIST_DIRECT, &h))
		out_hist(&a->out, "direct_reclaim",
			 "direct reclaim stall latency", &h);
	if (!bpfstate_hist(&a->bpf, RC_HIST_MEMCG, &h))
		out_hist(&a->out, "memcg_reclaim",
			 "memcg reclaim stall latency", &h);
	if (ack)
		out_hist(&a->out, "evict_ack", "eviction latency, post -> ack",
			 ack);
	if (freed)
		out_hist(&a->out, "evict_freed",
			 "eviction latency, post -> RSS drop", freed);
}

static int setup_bpf(struct agent *a)
{
	struct bpfstate_settings bs = {
		.filter = a->o->follow != FOLLOW_SYSTEM,
		.probe_mode = a->o->probe_mode,
		.burst_faults = a->o->burst_faults,
		.burst_window_ns = a->o->burst_window_ns,
		.rss_step = a->o->rss_step,
	};
	int err;

	if (access(BTF_PATH, R_OK))
		return out_fail(
			&a->out, EXIT_UNSUPPORTED,
			"kernel BTF not found at %s: this kernel needs CONFIG_DEBUG_INFO_BTF=y",
			BTF_PATH);
	err = bpfstate_load(&a->bpf, &bs);
	if (err == -EPERM || err == -EACCES)
		return out_fail(
			&a->out, EXIT_PRIVILEGE,
			"failed to load BPF programs: %s (run as root or grant CAP_BPF and CAP_PERFMON)",
			strerror(-err));
	if (err)
		return out_fail(
			&a->out, EXIT_UNSUPPORTED,
			"failed to load BPF programs: %s (-v shows the verifier log)",
			strerror(-err));
	/* the per-fault programs apart, timed: the first look may detach
	 * them (core/faultwatch.h) */
	err = bpfstate_attach(&a->bpf, false);
	if (err > 0)
		faults_switch(a, true);
	out_probe_warnings(&a->out, &a->bpf.probes);
	if (err <= 0)
		return out_fail(
			&a->out, EXIT_UNSUPPORTED,
			"no tracepoint could be attached (-v for details)");
	a->rb = ring_buffer__new(bpfstate_events_fd(&a->bpf), handle_event, a,
				 NULL);
	if (!a->rb)
		return out_fail(&a->out, EXIT_RUNTIME,
				"failed to create ring buffer: %s",
				strerror(errno));
	return 0;
}

static int setup_fds(struct agent *a)
{
	struct itimerspec its = { .it_value = { 0, CADENCE_TICK_NS } };
	sigset_t mask;
	int err;

	/* blocked before any thread starts (the metrics server) */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL))
		return -errno;
	a->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	a->timerfd =
		timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (a->sigfd < 0 || a->timerfd < 0 || a->epfd < 0)
		return -errno;
	if (timerfd_settime(a->timerfd, 0, &its, NULL))
		return -errno;
	err = epoll_add(a->epfd, a->sigfd, TAG_SIG);
	if (!err)
		err = epoll_add(a->epfd, a->timerfd, TAG_TIMER);
	return err;
}

static int setup_metrics(struct agent *a)
{
	int err;

	if (!a->o->metrics)
		return 0;
	err = metrics_http_bind(&a->http, &a->m, a->o->metrics);
	if (err == -EINVAL)
		return out_fail(
			&a->out, EXIT_USAGE,
			"invalid --metrics address '%s': expected ADDR:PORT, :PORT or [IPV6]:PORT",
			a->o->metrics);
	if (err)
		return out_fail(&a->out, EXIT_RUNTIME,
				"failed to listen on %s: %s", a->o->metrics,
				strerror(-err));
	return 0;
}

/* The metrics server's thread, once the agent holds no more than it needs. */
static int serve_metrics(struct agent *a)
{
	int err = a->http ? metrics_http_run(a->http) : 0;

	if (err)
		return out_fail(&a->out, EXIT_RUNTIME,
				"failed to serve metrics on %s: %s",
				a->o->metrics, strerror(-err));
	return 0;
}

/*
 * Set-up is done (programs attached, rings made, memory locked, the
 * metrics socket bound, no thread yet): keep only the capabilities the
 * loop uses (caps.c says which and why), in every thread to come.
 */
static int try_probe(const void *disc)
{
	return discover_try_probe(disc);
}

static void drop_privileges(struct agent *a)
{
	uint64_t have = caps_effective(), keep;
	struct rlimit lim = { 0 };
	struct caps_need n = {
		.discover = a->o->follow == FOLLOW_ALL,
		.open_paths = a->o->control != NULL,
	};
	int err;

	n.memlock = a->o->mlock && (getrlimit(RLIMIT_MEMLOCK, &lim) ||
				    lim.rlim_cur != RLIM_INFINITY);
	keep = caps_keep(&n, have);
	/* some kernels create a uprobe for CAP_SYS_ADMIN only: --all then
	 * keeps it, or finds executors on another libc by the scan alone */
	if (a->adm.uprobe && !caps_would_do(keep, try_probe, &a->disc) &&
	    (have & CAPS_BIT(CAP_SYS_ADMIN)) &&
	    caps_would_do(keep | CAPS_BIT(CAP_SYS_ADMIN), try_probe,
			  &a->disc)) {
		keep |= CAPS_BIT(CAP_SYS_ADMIN);
		out_note(
			&a->out,
			"this kernel creates uprobes for CAP_SYS_ADMIN only: --all keeps it to probe the libc of executors it finds later");
	}
	err = caps_drop_to(keep);
	if (err)
		out_warn(
			&a->out,
			"failed to drop capabilities after set-up: %s; the agent runs on with those it was given",
			strerror(-err));
}

static void loop(struct agent *a)
{
	struct epoll_event evs[8];
	uint64_t ticks;

	while (!a->stop) {
		int n = epoll_wait(a->epfd, evs, 8, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			a->exit_code = out_fail(&a->out, EXIT_RUNTIME,
						"epoll_wait: %s",
						strerror(errno));
			return;
		}
		for (int i = 0; i < n && !a->stop; i++) {
			uint32_t tag = evs[i].data.u32;

			switch (tag) {
			case TAG_RB:
				ring_buffer__consume(a->rb);
				run_eval(a);
				/* a paced evaluation is run by the timer */
				if (a->eval_due &&
				    a->next_eval_ns < a->armed_ns)
					arm(a, a->next_eval_ns);
				break;
			case TAG_DISC:
				take_reports(a);
				break;
			case TAG_TIMER:
				if (read(a->timerfd, &ticks, sizeof(ticks)) > 0)
					on_tick(a);
				break;
			case TAG_SIG:
				on_signal(a);
				break;
			default:
				if (tag >= TAG_PID)
					on_target_exit(a, (int)(tag - TAG_PID));
				break;
			}
		}
		if (!a->stop && outstream_closed()) {
			a->stop = true;
			a->exit_reason = "stdout closed";
			a->exit_code = EXIT_OUTPUT_CLOSED;
		}
	}
}

static void start_event(struct agent *a)
{
	struct target *t = targets_single(&a->ts);
	struct start_info si = { 0 };

	si.probes = &a->bpf.probes;
	si.fault_probes = a->o->fault_probes_always ? "on" : "auto";
	si.headroom = a->sys_thr.headroom_min;
	si.inactive = a->sys_thr.inactive_min;
	if (!t) {
		out_start(&a->out, &si);
		return;
	}
	si.pid = t->pid;
	si.ns_pid = t->ctl.ns_pid;
	si.comm = t->comm;
	if (t->sm.has_cg) {
		si.memcg = t->sm.cg.path;
		si.memcg_version = t->sm.cg.version;
	}
	if (t->evicting)
		si.control = t->ev.path;
	si.headroom = t->thr.headroom_min;
	si.inactive = t->thr.inactive_min;
	out_start(&a->out, &si);
}

/* Follow --pid from the start: its errors are fatal. */
static int setup_target(struct agent *a)
{
	pid_t pid = a->o->pid;
	struct target *t;
	int err;

	if (!pid)
		return 0;
	err = target_attach(&a->ts, &a->env, pid, NULL, &t);
	if (err == -ESRCH)
		return out_fail(&a->out, EXIT_NO_PROCESS, "no such process: %d",
				pid);
	if (err)
		return out_fail(&a->out, EXIT_RUNTIME,
				"failed to follow pid %d: %s", pid,
				strerror(-err));
	a->next_cg_ns = now_ns() + TARGET_CGROUP_PERIOD_NS;
	return 0;
}

/* Read in the agent's own segments (the first object is the program). */
static int populate_self(struct dl_phdr_info *info, size_t size, void *data)
{
	long page = sysconf(_SC_PAGESIZE);

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo, hi;

		if (ph->p_type != PT_LOAD)
			continue;
		lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(page - 1);
		hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		for (uintptr_t p = lo; p < hi; p += page)
			(void)*(volatile const char *)p;
	}
	return 1;
}

/*
 * Before any thread starts (a thread started earlier would have its whole
 * stack locked in). MCL_ONFAULT locks pages as they are first used instead
 * of reading every library in whole: libmicrohttpd's TLS libraries alone
 * are 2 MiB the agent never runs. The agent's own code and data are read
 * in up front; what the loop uses of libc and libbpf is in after its first
 * ticks.
 */
static int lock_memory(void)
{
	malloc_trim(0); /* the kernel BTF parsed at load is freed memory */
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)) {
		/* kernels before 4.4 have no MCL_ONFAULT */
		if (errno != EINVAL || mlockall(MCL_CURRENT | MCL_FUTURE))
			return -errno;
	}
	dl_iterate_phdr(populate_self, NULL);
	return 0;
}

/* Everything before the loop; an exit code on failure (told already). */
static int setup(struct agent *a)
{
	const struct opts *o = a->o;
	int code, err;

	if (o->follow == FOLLOW_PID && kill(o->pid, 0) && errno == ESRCH)
		return out_fail(&a->out, EXIT_NO_PROCESS, "no such process: %d",
				o->pid);
	code = setup_bpf(a);
	if (code)
		return code;
	if (setup_fds(a) ||
	    epoll_add(a->epfd, ring_buffer__epoll_fd(a->rb), TAG_RB))
		return out_fail(&a->out, EXIT_RUNTIME,
				"failed to set up the event loop: %s",
				strerror(errno));
	a->env.epfd = a->epfd;
	code = setup_target(a);
	if (code)
		return code;
	setup_discover(a);
	err = o->mlock ? lock_memory() : 0;
	if (err)
		out_warn(
			&a->out,
			"failed to lock the agent's memory: %s; it may be paged out under pressure",
			strerror(-err));
	code = setup_metrics(a);
	if (code)
		return code;
	drop_privileges(a);
	return serve_metrics(a);
}

/* Detach every target; true if any was evicting. */
static void detach_all(struct agent *a)
{
	struct target *t;

	for_each_target(a, t, i) {
		discover_follow(&a->disc, t->pid, false);
		if (target_detach(&a->ts, &a->env, t, &a->ack_hist,
				  &a->freed_hist))
			a->had_evictor = true;
	}
}

/* After the loop: last summaries, histograms, the exit event. */
static void finish(struct agent *a, int code)
{
	struct target *t;
	bool evict;

	if (a->ts.n) {
		read_all(a, now_ns()); /* counts as of the end */
		summary(a, now_ns());
	}
	/* the last totals, whatever the rate limit: nothing lost unsaid */
	a->next_drop_warn_ns = 0;
	check_drops(a, now_ns());
	a->inflight_at_exit = 0;
	for_each_target(a, t, i) {
		a->last_pid = t->pid;
		if (t->evicting)
			a->inflight_at_exit += t->ev.nr_inflight;
	}
	detach_all(a);
	evict = a->had_evictor || a->o->evict;
	if (a->o->hist)
		print_hists(a, evict ? &a->ack_hist : NULL,
			    evict ? &a->freed_hist : NULL);
	out_exit(&a->out, a->exit_reason, code);
	if (code == EXIT_OUTPUT_CLOSED)
		out_note(
			&a->out,
			"stdout closed: stopped (exit %d); pid %d detached with its heartbeat cleared, %d commands in flight reported unacked",
			code, (int)a->last_pid, a->inflight_at_exit);
}

static void teardown(struct agent *a)
{
	metrics_http_stop(a->http);
	detach_all(a);
	ring_buffer__free(a->rb);
	ring_buffer__free(a->disc_rb);
	discover_close(&a->disc);
	bpfstate_destroy(&a->bpf);
	if (a->sigfd >= 0)
		close(a->sigfd);
	if (a->timerfd >= 0)
		close(a->timerfd);
	if (a->epfd >= 0)
		close(a->epfd);
	metrics_destroy(&a->m);
	if (a->out.f != stdout)
		fclose(a->out.f);
}

/* What targets and domains need of the agent, once its parts exist. */
static void init_env(struct agent *a)
{
	a->env.o = a->o;
	a->env.out = &a->out;
	a->env.bpf = &a->bpf;
	a->env.m = &a->m;
	a->env.epfd = -1;
	a->env.tag_base = TAG_PID;
	a->env.mem_total = a->mem_total;
	a->env.read_err = &a->read_err;
	a->denv.policy = a->o->policy;
	a->denv.window_ns = FORECAST_WINDOW_NS;
	a->denv.horizon_ns = a->o->horizon_ns;
}

static void run(struct agent *a)
{
	const struct opts *o = a->o;

	a->last_summary_ns = now_ns();
	if (o->duration_ns)
		a->end_ns = a->last_summary_ns + o->duration_ns;
	start_event(a);
	if (o->match && !o->has_user && !o->cgroup)
		out_warn(
			&a->out,
			"--match without --user or --cgroup follows any user's process whose command line holds '%s'",
			o->match);
	loop(a);
	finish(a, a->exit_code);
}

int agent_run(const struct opts *o)
{
	struct agent a = {
		.o = o,
		.out = { .f = stdout, .json = o->json, .verbose = o->verbose },
		.epfd = -1,
		.sigfd = -1,
		.timerfd = -1,
		.exit_reason = "done",
	};
	sigset_t pipe;
	int code;

	/* a reader gone is an EPIPE to handle, not a SIGPIPE that kills */
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	sigprocmask(SIG_BLOCK, &pipe, NULL);
	out_set_verbose_libbpf(o->verbose);
	/* one malloc arena: a thread's own would reserve 64 MiB, locked */
	mallopt(M_ARENA_MAX, 1);
	a.out.f = o->quiet ? outstream_null() : NULL;
	if (!a.out.f)
		a.out.f = outstream_open(STDOUT_FILENO, stdout);
	libbpf_set_print(libbpf_print);
	metrics_init(&a.m);
	level_init(&a.lw, NULL);
	domlevel_init(&a.dl, NULL);
	sampler_init(&a.sys, 0, NULL, NULL);
	admission_init(&a.adm, o->has_user, o->user);
	a.mem_total = (uint64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	init_env(&a);
	target_thresholds(&a.env, RC_UNLIMITED, &a.sys_thr);

	code = setup(&a);
	if (!code) {
		run(&a);
		code = a.exit_code;
	}
	teardown(&a);
	return code;
}
