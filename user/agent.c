// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent: load the BPF programs, follow the target, and run one epoll
 * loop over the ring buffer, a periodic tick, signals and the target's
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
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "agent.h"
#include "bpfstate.h"
#include "cadence.h"
#include "clock.h"
#include "evict.h"
#include "hist.h"
#include "level.h"
#include "match.h"
#include "metrics.h"
#include "oomvictim.h"
#include "metrics_http.h"
#include "onlevel.h"
#include "output.h"
#include "outstream.h"
#include "readfile.h"
#include "sampler.h"

#define MATCH_PERIOD_NS	   NSEC_PER_SEC
#define FORECAST_WINDOW_NS NSEC_PER_SEC
#define EVAL_MIN_GAP_NS	   (2 * 1000000ULL)
/*
 * An evaluation reads and scores the executor's whole entry table, which
 * whoever writes the page makes as big as it likes (65536 entries). So
 * evaluations are coalesced (at most one per drain of the ring buffer or
 * tick, however many events asked for one) and the next waits EVAL_DUTY
 * times as long as the last one took: evaluating takes at most
 * 1/(1 + EVAL_DUTY) of the loop, the rest is left for the ring buffer.
 */
#define EVAL_DUTY 4
/* How often the target's cgroup is looked up again (it may be moved). */
#define CGROUP_PERIOD_NS NSEC_PER_SEC
#define BTF_PATH	 "/sys/kernel/btf/vmlinux"
#define DROP_WARN_NS	 (10 * NSEC_PER_SEC)

struct target {
	pid_t pid; /* 0: none */
	uid_t uid;
	struct ctl_target ctl; /* pid and uid in the target's namespaces */
	int pidfd;
	char comm[64];
	struct sampler sm;
	bool has_rss_file;
	uint64_t rss_file; /* file-backed resident bytes, last rss event */
	struct evictor ev;
	bool evicting;
	struct rc_thresholds thr;
	struct track_totals prev;
	uint64_t oom_base;  /* the cgroup's oom_kill count at attach */
	uint64_t oom_carry; /* OOM kills in cgroups it has left */
};

struct agent {
	const struct opts *o;
	struct out out;
	struct bpfstate bpf;
	struct ring_buffer *rb;
	struct metrics m;
	struct metrics_http *http;
	int epfd, sigfd, timerfd;
	struct target t;
	struct sampler sys; /* without a target */
	struct level_watch lw;
	uint64_t mem_total;
	struct rc_thresholds sys_thr; /* in force without a target */
	uint64_t last_summary_ns, next_level_ns, next_match_ns, next_eval_ns;
	bool eval_due;	    /* an event or tick asked for an evaluation */
	uint32_t eval_why;  /* the latest trigger that named a reason */
	uint64_t eval_reqs; /* requests, for evaluations per event */
	uint64_t evals;
	uint64_t end_ns;
	uint64_t drops_told, out_told, next_drop_warn_ns;
	uint64_t next_read_ns;
	uint64_t last_event_ns; /* last reclaim, kswapd or OOM event */
	struct cadence cad;	/* as planned at the last tick */
	uint64_t armed_ns;	/* when the timer fires next */
	uint64_t next_cg_ns;	/* when to look for a cgroup move again */
	pid_t refused_told;	/* --match: last refused pid warned about */
	/* eviction latency of every target followed, for --hist */
	struct hist ack_hist, freed_hist;
	bool had_evictor;
	int inflight_at_exit;	 /* commands out when the loop stopped */
	int read_err, level_err; /* last errors told, to tell each once */
	bool stop;
	int exit_code;
	const char *exit_reason;
};

enum { TAG_RB = 1, TAG_SIG, TAG_TIMER, TAG_PID };

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list args)
{
	return out_libbpf_print(level, fmt, args);
}

static int read_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	n = rc_read_prefix(path, buf, len);
	if (n < 0)
		return n;
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return 0;
}

static struct sampler *sampler_of(struct agent *a)
{
	return a->t.pid ? &a->t.sm : &a->sys;
}

/* The thresholds in force for a target in a cgroup of @cg_limit, or none. */
static void thresholds(const struct agent *a, uint64_t cg_limit,
		       struct rc_thresholds *thr)
{
	struct rc_threshold_in in = {
		.mem_total = a->mem_total,
		.cg_limit = cg_limit,
		.headroom_set = a->o->headroom_set,
		.headroom = a->o->headroom,
		.inactive_set = a->o->inactive_set,
		.inactive = a->o->inactive,
	};

	rc_thresholds_resolve(&in, thr);
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

/*
 * Follow @pid: BPF filter, cgroup, sampler, control page. With @spec
 * (--match), the process is judged again once the pidfd pins it.
 */
static int target_attach(struct agent *a, pid_t pid,
			 const struct match_spec *spec)
{
	struct target *t = &a->t;
	struct rc_pidstat ps;
	char path[64];
	struct stat st;
	int err;

	memset(t, 0, sizeof(*t));
	t->pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (t->pidfd < 0)
		return -errno;
	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (stat(path, &st)) {
		err = -errno;
		close(t->pidfd);
		return err;
	}
	if (read_comm(pid, t->comm, sizeof(t->comm)))
		snprintf(t->comm, sizeof(t->comm), "?");
	/* what was read by pid belongs to the process the pidfd pins */
	err = spec ? match_verify(RC_PROC_ROOT, spec, pid, t->pidfd)
		   : pidfd_alive(t->pidfd);
	if (err) {
		close(t->pidfd);
		t->pidfd = -1;
		return err;
	}
	t->pid = pid;
	t->uid = st.st_uid;
	err = bpfstate_track(&a->bpf, pid);
	if (err)
		goto fail;
	sampler_init(&t->sm, pid, NULL, NULL);
	if (!rc_pidstat_read(RC_PROC_ROOT, pid, &ps))
		t->sm.rss = ps.rss_bytes;
	/* the cgroup and RSS were read by pid: still the pidfd's process? */
	err = pidfd_alive(t->pidfd);
	if (err)
		goto fail;
	report_err(a, &a->read_err, sampler_read(&t->sm, now_ns()),
		   "memory and cgroup counters");
	t->oom_base = t->sm.cs.self.oom_kill;
	a->next_cg_ns = now_ns() + CGROUP_PERIOD_NS;
	if (t->sm.has_cg && t->sm.cg.ino)
		bpfstate_watch_memcg(&a->bpf, t->sm.cg.ino);
	thresholds(a, t->sm.has_cg ? t->sm.cs.limit : RC_UNLIMITED, &t->thr);
	if (ctl_target_read(RC_PROC_ROOT, pid, t->uid, &t->ctl))
		t->ctl.ns_pid = pid;
	if (a->o->evict) {
		struct evict_cfg cfg = {
			.control = a->o->control,
			.dry_run = a->o->dry_run,
			.policy = a->o->policy == SCORE_COST ? RC_POLICY_COST
							     : RC_POLICY_RAM,
			.ack_timeout_ns = a->o->ack_timeout_ns,
		};

		err = evictor_init(&t->ev, &cfg, &a->out, &a->m, &t->ctl,
				   &t->thr);
		if (err)
			out_warn(
				&a->out,
				"failed to set up eviction for pid %d: %s; monitoring only",
				pid, strerror(-err));
		t->ev.rss = t->sm.rss;
		t->evicting = !err;
	}
	err = epoll_add(a->epfd, t->pidfd, TAG_PID);
	if (err)
		goto fail;
	metrics_exec_bind(&a->m, 0, pid, t->comm, NULL, 0);
	metrics_set_rss(&a->m, 0, t->sm.rss);
	return 0;
fail:
	bpfstate_untrack(&a->bpf, pid);
	close(t->pidfd);
	t->pid = 0;
	return err;
}

static void target_detach(struct agent *a)
{
	struct target *t = &a->t;

	if (!t->pid)
		return;
	if (t->evicting) {
		evictor_finish(&t->ev, now_ns());
		hist_merge(&a->ack_hist, &t->ev.ack_hist);
		hist_merge(&a->freed_hist, &t->ev.freed_hist);
		a->had_evictor = true;
	}
	t->evicting = false;
	metrics_exec_unbind(&a->m, 0);
	if (t->sm.has_cg && t->sm.cg.ino)
		bpfstate_unwatch_memcg(&a->bpf, t->sm.cg.ino);
	bpfstate_untrack(&a->bpf, t->pid);
	epoll_ctl(a->epfd, EPOLL_CTL_DEL, t->pidfd, NULL);
	close(t->pidfd);
	t->pidfd = -1;
	t->pid = 0;
}

/* Ask for an evaluation; run_eval() decides when. */
static void evaluate(struct agent *a, uint64_t now, uint32_t why)
{
	if (!a->t.pid || !a->t.evicting)
		return;
	a->eval_due = true;
	a->eval_reqs++;
	if (why)
		a->eval_why = why;
}

static void run_eval(struct agent *a)
{
	struct target *t = &a->t;
	uint64_t now, cost, gap;
	struct rc_forecast f;
	uint32_t why;

	if (!a->eval_due || !t->pid || !t->evicting)
		return;
	now = now_ns();
	if (now < a->next_eval_ns)
		return;
	why = a->eval_why;
	a->eval_due = false;
	a->eval_why = 0;
	if (sampler_forecast(&t->sm, FORECAST_WINDOW_NS, a->o->horizon_ns, &f))
		evictor_evaluate(&t->ev, now, t->sm.headroom, NULL, why);
	else
		evictor_evaluate(&t->ev, now, t->sm.headroom, &f, why);
	metrics_set_target(&a->m, 0, t->ev.target);
	metrics_evaluation(&a->m);
	a->evals++;
	cost = now_ns() - now;
	gap = EVAL_DUTY * cost > EVAL_MIN_GAP_NS ? EVAL_DUTY * cost
						 : EVAL_MIN_GAP_NS;
	a->next_eval_ns = now + cost + gap;
}

/* Close to a threshold, or commands out: follow headroom every tick. */
static bool pressing(const struct agent *a)
{
	const struct target *t = &a->t;

	if (!t->pid)
		return false;
	if (t->evicting && t->ev.nr_inflight)
		return true;
	return t->sm.headroom / 2 < t->thr.inactive_min;
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
	a->next_read_ns = now;
	a->next_level_ns = now;
	arm(a, now);
}

/* A reclaim stall, kswapd awake or an OOM kill: memory is being fought for. */
static void kernel_told(struct agent *a, uint64_t now)
{
	a->last_event_ns = now;
	if (a->cad.calm)
		wake_now(a, now);
}

static int handle_event(void *ctx, void *data, size_t len)
{
	struct agent *a = ctx;
	const struct rc_event_hdr *h = data;
	struct target *t = &a->t;
	struct rc_oom_kill oom;
	uint64_t now;

	if (len < sizeof(*h))
		return 0;
	now = now_ns();
	switch (h->type) {
	case RC_EV_RSS:
		if (len < sizeof(struct rc_rss) || !t->pid ||
		    (pid_t)h->tgid != t->pid)
			break;
		sampler_rss(&t->sm, h->ts_ns,
			    ((const struct rc_rss *)data)->total);
		t->rss_file = ((const struct rc_rss *)data)->file;
		t->has_rss_file = true;
		if (t->evicting)
			evictor_rss(&t->ev, h->ts_ns, t->sm.rss);
		metrics_set_rss(&a->m, 0, t->sm.rss);
		evaluate(a, now, 0);
		break;
	case RC_EV_RECLAIM:
		if (len < sizeof(struct rc_reclaim))
			break;
		metrics_reclaim_stall(
			&a->m, ((const struct rc_reclaim *)data)->kind,
			((const struct rc_reclaim *)data)->latency_ns);
		evaluate(a, now, RAMCACHE_REASON_RECLAIM);
		kernel_told(a, now);
		break;
	case RC_EV_KSWAPD:
		if (len < sizeof(struct rc_kswapd))
			break;
		level_kswapd(&a->lw, ((const struct rc_kswapd *)data)->nid,
			     ((const struct rc_kswapd *)data)->awake);
		if (((const struct rc_kswapd *)data)->awake) {
			evaluate(a, now, RAMCACHE_REASON_RECLAIM);
			kernel_told(a, now);
		}
		break;
	case RC_EV_OOM_KILL:
		metrics_oom_kill(&a->m);
		a->next_read_ns = 0; /* the cgroup's count, at the next tick */
		kernel_told(a, now);
		if (len >= sizeof(oom) && oom_victim_partial(data)) {
			/* a pid-only kernel: /proc may still know the rest */
			memcpy(&oom, data, sizeof(oom));
			oom_victim_fill(RC_PROC_ROOT, &oom);
			data = &oom;
			len = sizeof(oom);
		}
		if (len >= sizeof(oom) && a->t.pid &&
		    (pid_t)((const struct rc_oom_kill *)data)->victim_pid ==
			    a->t.pid)
			metrics_exec_oom_kill(&a->m, 0);
		break;
	case RC_EV_FAULT_BURST:
		evaluate(a, now, 0);
		break;
	}
	/* the target's growth or a command posted: tick from now on */
	if (!a->cad.tick_ns && pressing(a))
		wake_now(a, now);
	out_event(&a->out, data, len);
	return 0;
}

static void fill_summary(struct agent *a, uint64_t now, struct summary *s)
{
	struct target *t = &a->t;
	struct sampler *sm = sampler_of(a);
	double dt = (now - a->last_summary_ns) / 1e9;
	struct track_totals tt;
	struct rc_forecast f;

	if (bpfstate_totals(&a->bpf, t->pid, &tt))
		memset(&tt, 0, sizeof(tt));
	s->pid = t->pid;
	s->interval_s = dt;
	s->rss = t->pid ? sm->rss : 0;
	s->has_rss_file = t->pid && t->has_rss_file;
	s->rss_file = t->rss_file;
	s->faults = tt.faults;
	s->faults_per_s = dt > 0 && tt.faults >= t->prev.faults
				  ? (tt.faults - t->prev.faults) / dt
				  : 0;
	for (int k = 0; k < RC_RECLAIM_KINDS; k++) {
		s->stalls[k] = tt.reclaim_count[k] - t->prev.reclaim_count[k];
		s->stall_ns[k] = tt.reclaim_ns[k] - t->prev.reclaim_ns[k];
	}
	t->prev = tt;
	s->mem_available = sm->mi.mem_available;
	s->has_memcg = sm->has_cg;
	if (sm->has_cg) {
		s->memcg_limit = sm->cs.limit;
		s->memcg_usage = sm->cs.usage;
	}
	s->headroom = sm->headroom;
	if (t->pid &&
	    !sampler_forecast(sm, FORECAST_WINDOW_NS, a->o->horizon_ns, &f)) {
		s->has_forecast = true;
		s->forecast = f.at_horizon;
	}
	s->threshold_headroom = t->pid ? t->thr.headroom_min
				       : a->sys_thr.headroom_min;
	s->threshold_inactive = t->pid ? t->thr.inactive_min
				       : a->sys_thr.inactive_min;
	s->drops = bpfstate_stat(&a->bpf, RC_STAT_DROPS);
	s->kswapd_wakes = bpfstate_stat(&a->bpf, RC_STAT_KSWAPD_WAKES);
	s->oom_kills = bpfstate_stat(&a->bpf, RC_STAT_OOM_KILLS);
	s->evaluations = a->evals;
	s->eval_requests = a->eval_reqs;
	if (t->pid && sm->has_cg) {
		s->has_cgroup_oom = true;
		s->oom_kills_cgroup =
			sm->cs.self.oom_kill >= t->oom_base
				? sm->cs.self.oom_kill - t->oom_base
				: 0;
	}
	s->level = rc_level_name(a->lw.cur.level);
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
	if (sm->has_cg) {
		const struct rc_cgroup_events *e = &sm->cs.self.ev;

		s->has_limit_events = e->has_limit_events;
		s->memcg_high = e->high;
		s->memcg_max = e->max;
		s->has_swap_events = e->has_swap_events;
		s->swap_max = e->swap_max;
		s->swap_fail = e->swap_fail;
	}
	if (t->evicting) {
		s->evict_sent = t->ev.st.sent;
		s->evict_acked = t->ev.st.acked;
		s->evict_timeouts = t->ev.st.timeouts;
		s->bytes_evicted = t->ev.st.bytes_freed;
	}
}

static void summary(struct agent *a, uint64_t now)
{
	struct summary s = { 0 };

	fill_summary(a, now, &s);
	out_summary(&a->out, &s);
	a->last_summary_ns = now;
}

/* The one target's memory domain: its limiting cgroup, or the machine. */
static void metrics_domain(struct agent *a, const struct sampler *sm,
			   uint64_t eta_ns)
{
	bool limited = a->t.pid && sm->has_cg && sm->cs.limit != RC_UNLIMITED;
	char name[PATH_MAX] = "machine";

	if (limited) {
		snprintf(name, sizeof(name), "%s", sm->cg.rel);
		for (int d = 0; d < sm->cs.limit_depth; d++) {
			char *slash = strrchr(name, '/');

			if (!slash || slash == name)
				break;
			*slash = '\0';
		}
	}
	metrics_domain_set(&a->m, 0, name,
			   limited ? sm->cs.limit : sm->mi.mem_total,
			   (int64_t)sm->headroom, eta_ns, a->lw.cur.level);
}

static void update_level(struct agent *a, uint64_t now)
{
	struct sampler *sm = sampler_of(a);
	struct level_ctx c = { 0 };
	struct pressure_info pi = { 0 };
	int prev = a->lw.cur.level;
	struct rc_forecast f;
	int changed;

	c.pid = a->t.pid;
	c.direct_stalls = bpfstate_stat(&a->bpf, RC_STAT_DIRECT_RECLAIMS);
	c.memcg_stalls = bpfstate_stat(&a->bpf, RC_STAT_MEMCG_RECLAIMS);
	c.headroom = sm->headroom;
	if (a->t.pid && sm->has_cg) {
		c.cg = &sm->cs.self;
		c.cg_ino = sm->cg.ino;
	}
	c.thr = a->t.pid ? a->t.thr : a->sys_thr;
	if (!sampler_forecast(sm, 10 * NSEC_PER_SEC, 0, &f) && f.has_eta) {
		c.has_eta = true;
		c.eta_ns = f.eta_ns;
	}
	changed = level_update(&a->lw, now, &c);
	report_err(a, &a->level_err, changed < 0 ? changed : 0,
		   "the kernel's reclaim counters");
	metrics_set_level(&a->m, a->lw.cur.level);
	metrics_set_headroom(&a->m, (int64_t)sm->headroom);
	metrics_domain(a, sm, c.has_eta ? c.eta_ns : METRICS_NO_ETA);
	if (a->t.evicting)
		evictor_set_level(&a->t.ev, a->lw.cur.level);
	if (changed <= 0)
		return;
	pi.level = rc_level_name(a->lw.cur.level);
	pi.reasons = a->lw.cur.reasons;
	pi.has_eta = c.has_eta;
	pi.eta_s = c.eta_ns / 1e9;
	pi.headroom = sm->headroom;
	pi.pid = a->t.pid;
	out_pressure(&a->out, &pi);
	if (changed == LEVEL_CHANGED)
		onlevel_run(&a->out, a->o->on_level, a->o->nr_on_level, prev,
			    a->lw.cur.level, a->lw.cur.reasons, a->t.pid);
}

static void match_spec_of(const struct opts *o, struct match_spec *s)
{
	s->pattern = o->match;
	s->has_uid = o->has_user;
	s->uid = o->user;
	s->cgroup = o->cgroup;
}

static void find_match(struct agent *a, uint64_t now)
{
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
	err = target_attach(a, pid, &s);
	if (err) {
		if (err == -EACCES)
			out_warn(
				&a->out,
				"not following pid %d: it changed its command line, user or cgroup while being attached",
				pid);
		else if (err != -ESRCH)
			out_warn(&a->out, "failed to follow pid %d: %s", pid,
				 strerror(-err));
		return;
	}
	out_target_pick(&a->out, pid, a->t.comm, s.pattern, &r);
}

/* Lost events are never silent: a warning at most every DROP_WARN_NS. */
static void check_drops(struct agent *a, uint64_t now)
{
	uint64_t drops = bpfstate_stat(&a->bpf, RC_STAT_DROPS);

	uint64_t lines = outstream_dropped();

	metrics_set_ringbuf_drops(&a->m, drops);
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

/*
 * The target was moved to another cgroup (a restarted scope, a container
 * runtime): follow it, or headroom and thresholds stay the old cgroup's.
 * The lookup goes by pid, so it counts only if the pidfd's process is
 * still alive after it.
 */
static void recheck_cgroup(struct agent *a, uint64_t now)
{
	struct target *t = &a->t;
	struct rc_cgroup cg;
	bool has;

	if (!t->pid || now < a->next_cg_ns)
		return;
	a->next_cg_ns = now + CGROUP_PERIOD_NS;
	has = !rc_cgroup_find(RC_PROC_ROOT, RC_CGROUP_ROOT, t->pid, &cg);
	if (pidfd_alive(t->pidfd))
		return; /* gone: the pidfd tells the loop */
	if (has == t->sm.has_cg && (!has || (cg.ino == t->sm.cg.ino &&
					     !strcmp(cg.path, t->sm.cg.path))))
		return;
	if (t->sm.has_cg) {
		if (t->sm.cs.self.oom_kill > t->oom_base)
			t->oom_carry += t->sm.cs.self.oom_kill - t->oom_base;
		if (t->sm.cg.ino)
			bpfstate_unwatch_memcg(&a->bpf, t->sm.cg.ino);
	}
	t->sm.has_cg = has;
	if (has)
		t->sm.cg = cg;
	memset(&t->sm.cs, 0, sizeof(t->sm.cs));
	report_err(a, &a->read_err, sampler_read(&t->sm, now),
		   "memory and cgroup counters");
	t->oom_base = t->sm.cs.self.oom_kill;
	if (has && cg.ino)
		bpfstate_watch_memcg(&a->bpf, cg.ino);
	thresholds(a, has ? t->sm.cs.limit : RC_UNLIMITED, &t->thr);
	if (t->evicting)
		t->ev.thr = t->thr;
	metrics_exec_relabel(&a->m, 0, has ? cg.rel : NULL, 0);
	out_target_cgroup(&a->out, t->pid, t->comm, has ? cg.path : NULL,
			  has ? cg.version : 0);
}

/* The next time the loop must wake when nothing else wakes it. */
static uint64_t next_tick(struct agent *a, uint64_t now)
{
	uint64_t next = a->next_read_ns;

	if (a->cad.tick_ns)
		return now + a->cad.tick_ns;
	if (a->next_level_ns < next)
		next = a->next_level_ns;
	if (a->last_summary_ns + a->o->interval_ns < next)
		next = a->last_summary_ns + a->o->interval_ns;
	if (a->t.evicting && evictor_next_ns(&a->t.ev) < next)
		next = evictor_next_ns(&a->t.ev);
	if (a->o->match && !a->t.pid && a->next_match_ns < next)
		next = a->next_match_ns;
	if (a->end_ns && a->end_ns < next)
		next = a->end_ns;
	if (a->t.pid && a->next_cg_ns < next)
		next = a->next_cg_ns;
	if (a->eval_due && a->next_eval_ns < next)
		next = a->next_eval_ns;
	return next > now + CADENCE_TICK_NS ? next : now + CADENCE_TICK_NS;
}

static void on_tick(struct agent *a)
{
	uint64_t now = now_ns();
	struct cadence_in ci = { 0 };
	struct sampler *sm;
	bool fresh = false;

	if (a->o->match && !a->t.pid && now >= a->next_match_ns)
		find_match(a, now);
	recheck_cgroup(a, now);
	sm = sampler_of(a);
	ci.near = pressing(a);
	ci.above_ok = a->lw.cur.level > RAMCACHE_LEVEL_OK;
	ci.since_event_ns = now - a->last_event_ns;
	ci.headroom = sm->headroom;
	ci.near_at = 2 * (a->t.pid ? a->t.thr.inactive_min
				   : a->sys_thr.inactive_min);
	cadence_plan(&ci, &a->cad);
	if (now >= a->next_read_ns || !a->cad.read_ns) {
		report_err(a, &a->read_err, sampler_read(sm, now),
			   "memory and cgroup counters");
		a->next_read_ns = now + a->cad.read_ns;
		fresh = true;
	}
	if (a->t.evicting) {
		evictor_tick(&a->t.ev, now);
		/* calm: nothing new to judge but what was just read */
		if (fresh || !a->cad.calm)
			evaluate(a, now, 0);
		run_eval(a);
	}
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

static void on_target_exit(struct agent *a)
{
	pid_t pid = a->t.pid;

	/* drain what the target left behind first */
	ring_buffer__consume(a->rb);
	sampler_read(&a->t.sm, now_ns()); /* its cgroup's OOM kills too */
	summary(a, now_ns());
	target_detach(a);
	if (!a->o->match) {
		a->stop = true;
		a->exit_reason = "target exited";
		return;
	}
	out_target(&a->out, "exited", pid, a->t.comm);
	a->next_match_ns = 0;
	arm(a, now_ns()); /* look for the next one now */
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
	int err;

	if (access(BTF_PATH, R_OK))
		return out_fail(
			&a->out, EXIT_UNSUPPORTED,
			"kernel BTF not found at %s: this kernel needs CONFIG_DEBUG_INFO_BTF=y",
			BTF_PATH);
	err = bpfstate_load(&a->bpf, a->o);
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
	err = bpfstate_attach(&a->bpf);
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
	err = metrics_http_start(&a->http, &a->m, a->o->metrics);
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
			switch (evs[i].data.u32) {
			case TAG_RB:
				ring_buffer__consume(a->rb);
				run_eval(a);
				/* a paced evaluation is run by the timer */
				if (a->eval_due &&
				    a->next_eval_ns < a->armed_ns)
					arm(a, a->next_eval_ns);
				break;
			case TAG_TIMER:
				if (read(a->timerfd, &ticks, sizeof(ticks)) > 0)
					on_tick(a);
				break;
			case TAG_SIG:
				on_signal(a);
				break;
			case TAG_PID:
				on_target_exit(a);
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
	struct start_info si = { 0 };
	struct target *t = &a->t;

	si.pid = t->pid;
	si.ns_pid = t->ctl.ns_pid;
	si.comm = t->pid ? t->comm : NULL;
	si.probes = &a->bpf.probes;
	if (t->pid && t->sm.has_cg) {
		si.memcg = t->sm.cg.path;
		si.memcg_version = t->sm.cg.version;
	}
	if (t->evicting)
		si.control = t->ev.path;
	si.headroom = t->pid ? t->thr.headroom_min : a->sys_thr.headroom_min;
	si.inactive = t->pid ? t->thr.inactive_min : a->sys_thr.inactive_min;
	out_start(&a->out, &si);
}

/* Follow --pid from the start: its errors are fatal. */
static int setup_target(struct agent *a)
{
	pid_t pid = a->o->pid;
	int err;

	if (!pid)
		return 0;
	err = target_attach(a, pid, NULL);
	if (err == -ESRCH)
		return out_fail(&a->out, EXIT_NO_PROCESS, "no such process: %d",
				pid);
	if (err)
		return out_fail(&a->out, EXIT_RUNTIME,
				"failed to follow pid %d: %s", pid,
				strerror(-err));
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

	if (o->pid && kill(o->pid, 0) && errno == ESRCH)
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
	code = setup_target(a);
	if (code)
		return code;
	err = o->mlock ? lock_memory() : 0;
	if (err)
		out_warn(
			&a->out,
			"failed to lock the agent's memory: %s; it may be paged out under pressure",
			strerror(-err));
	return setup_metrics(a);
}

/* After the loop: last summary, histograms, the exit event. */
static void finish(struct agent *a, int code)
{
	pid_t pid = a->t.pid;
	bool evict = a->had_evictor || a->t.evicting || a->o->evict;

	if (a->t.pid) {
		sampler_read(&a->t.sm, now_ns()); /* counts as of the end */
		summary(a, now_ns());
	}
	/* the last totals, whatever the rate limit: nothing lost unsaid */
	a->next_drop_warn_ns = 0;
	check_drops(a, now_ns());
	a->inflight_at_exit = a->t.evicting ? a->t.ev.nr_inflight : 0;
	target_detach(a);
	if (a->o->hist)
		print_hists(a, evict ? &a->ack_hist : NULL,
			    evict ? &a->freed_hist : NULL);
	out_exit(&a->out, a->exit_reason, code);
	if (code == EXIT_OUTPUT_CLOSED)
		out_note(
			&a->out,
			"stdout closed: stopped (exit %d); pid %d detached with its heartbeat cleared, %d commands in flight reported unacked",
			code, (int)pid, a->inflight_at_exit);
}

static void teardown(struct agent *a)
{
	metrics_http_stop(a->http);
	target_detach(a);
	ring_buffer__free(a->rb);
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

int agent_run(const struct opts *o)
{
	struct agent a = {
		.o = o,
		.out = { .f = stdout, .json = o->json, .verbose = o->verbose },
		.epfd = -1,
		.sigfd = -1,
		.timerfd = -1,
		.t = { .pidfd = -1 },
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
	sampler_init(&a.sys, 0, NULL, NULL);
	a.mem_total = (uint64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	thresholds(&a, RC_UNLIMITED, &a.sys_thr);

	code = setup(&a);
	if (!code) {
		a.last_summary_ns = now_ns();
		if (o->duration_ns)
			a.end_ns = a.last_summary_ns + o->duration_ns;
		start_event(&a);
		if (o->match && !o->has_user && !o->cgroup)
			out_warn(
				&a.out,
				"--match without --user or --cgroup follows any user's process whose command line holds '%s'",
				o->match);
		loop(&a);
		code = a.exit_code;
		finish(&a, code);
	}
	teardown(&a);
	return code;
}
