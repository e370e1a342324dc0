// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent: load the BPF programs, follow the targets, and run one epoll
 * loop over the ring buffers, a periodic tick, signals and each target's
 * pidfd. Only this file decides when to stop.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agentstate.h"
#include "kernel/bpfstate.h"
#include "core/cadence.h"
#include "core/pace.h"
#include "proc/clock.h"
#include "kernel/discover.h"
#include "executors/faultprobes.h"
#include "executors/follow.h"
#include "executors/domains.h"
#include "executors/evictor.h"
#include "core/hist.h"
#include "executors/pressure_tell.h"
#include "emit/metrics.h"
#include "proc/oomvictim.h"
#include "emit/metrics_http.h"
#include "emit/onlevel.h"
#include "emit/drops.h"
#include "emit/out.h"
#include "emit/outstream.h"
#include "tick.h"
#include "proc/sampler.h"
#include "executors/summary.h"
#include "executors/targets.h"

/*
 * At exit, how long lines held for a slow reader wait for it to take
 * some (ms; 4 x this in all while it does).
 */
#define OUT_DRAIN_MS 500

/* A failed periodic read is told once, not every tick; 0 rearms it. */
static void report_err(struct agent *a, int *last, int err, const char *what)
{
	out_read_error(&a->out, last, err, what);
}

/* Ask for an evaluation; run_eval() decides when. */
static void evaluate(struct agent *a, uint32_t why)
{
	if (!targets_evicting(&a->ts))
		return;
	pace_request(&a->eval, why);
}

static void run_eval(struct agent *a)
{
	struct target *t;
	uint64_t now;
	uint32_t why;

	if (!a->eval.due || !targets_evicting(&a->ts))
		return;
	now = now_ns();
	if (!pace_start(&a->eval, now, &why))
		return;
	domains_evaluate(&a->ts, &a->denv, now, why);
	for_each_target(a, t, i)
		metrics_set_target(&a->m, (unsigned int)t->slot,
				   t->evicting ? t->ev.target : 0);
	metrics_evaluation(&a->m);
	pace_done(&a->eval, now, now_ns());
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
	a->fp.last_stall_ns = now_ns();
}

int agent_event(void *ctx, void *data, size_t len)
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
		a->fp.last_stall_ns = now;
		evaluate(a, RAMCACHE_REASON_RECLAIM);
		tick_kernel_told(&a->tk, now);
		break;
	case RC_EV_KSWAPD:
		if (len < sizeof(struct rc_kswapd))
			break;
		pressure_tell_kswapd(&a->lv,
				     ((const struct rc_kswapd *)data)->nid,
				     ((const struct rc_kswapd *)data)->awake);
		if (((const struct rc_kswapd *)data)->awake) {
			evaluate(a, RAMCACHE_REASON_RECLAIM);
			tick_kernel_told(&a->tk, now);
		}
		break;
	case RC_EV_OOM_KILL:
		metrics_oom_kill(&a->m);
		a->tk.next_read_ns =
			0; /* the cgroup's count, at the next tick */
		tick_kernel_told(&a->tk, now);
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
	if (!a->tk.cad.tick_ns && targets_pressing(&a->ts))
		tick_read_soon(&a->tk, now);
	out_event(&a->out, data, len);
	return 0;
}

/* One summary: of @t, or of the system when @t is NULL. */
static void summary_of(struct agent *a, struct target *t, uint64_t now)
{
	double dt = (now - a->last_summary_ns) / 1e9;
	struct summary s = { 0 };

	s.interval_s = dt;
	summary_memory(t ? &t->sm : &a->sys, &s);
	summary_level(&a->lv.lw, &s);
	s.drops = bpfstate_stat(&a->bpf, RC_STAT_DROPS);
	s.kswapd_wakes = bpfstate_stat(&a->bpf, RC_STAT_KSWAPD_WAKES);
	s.oom_kills = bpfstate_stat(&a->bpf, RC_STAT_OOM_KILLS);
	s.evaluations = a->eval.runs;
	s.eval_requests = a->eval.requests;
	summary_faults(&a->bpf, a->fp.always, t ? t->pid : 0,
		       t ? &t->faults : &a->sys_faults, dt, &s);
	summary_stalls(&a->bpf, t ? t->pid : 0, t ? &t->prev : &a->sys_prev,
		       &s);
	if (t) {
		summary_target(t, now_ns(), a->horizon_ns, &s);
	} else {
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

static void update_level(struct agent *a, uint64_t now)
{
	pressure_tell_update(&a->lv, &a->lenv,
			     bpfstate_stat(&a->bpf, RC_STAT_DIRECT_RECLAIMS),
			     bpfstate_stat(&a->bpf, RC_STAT_MEMCG_RECLAIMS),
			     now);
}

/* Stop following @t, telling why (@state: exited, exec). */
static void drop_target(struct agent *a, struct target *t, const char *state)
{
	pid_t pid = t->pid;
	char comm[sizeof(t->comm)];

	memcpy(comm, t->comm, sizeof(comm));
	follow_gone(&a->fl, t);
	if (target_detach(&a->ts, &a->env, t, &a->ack_hist, &a->freed_hist))
		a->had_evictor = true;
	out_target(&a->out, state, pid, comm);
	follow_freed(&a->fl);
	/* its domain's gauges went with it: the machine's stand in now */
	if (!a->ts.n) {
		report_err(a, &a->read_err, sampler_read(&a->sys, now_ns()),
			   "memory and cgroup counters");
		pressure_tell_publish(&a->lv, &a->lenv, now_ns(),
				      METRICS_NO_ETA);
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
	if (a->fl.mode == FOLLOW_PID) {
		if (target_detach(&a->ts, &a->env, t, &a->ack_hist,
				  &a->freed_hist))
			a->had_evictor = true;
		a->stop = true;
		a->exit_reason = "target exited";
		return;
	}
	drop_target(a, t, "exited");
	if (a->fl.mode != FOLLOW_ALL) {
		a->fl.next_match_ns = 0;
		tick_arm(&a->tk, now_ns()); /* look for the next one now */
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

/* The loop's side of follow.c. */
static void adopted(void *ctx, uint64_t now)
{
	tick_wake_now(&((struct agent *)ctx)->tk, now);
}

static void wake_by(void *ctx, uint64_t at)
{
	tick_arm_by(&((struct agent *)ctx)->tk, at);
}

static void reap(void *ctx)
{
	reap_exited(ctx);
}

static void drop(void *ctx, struct target *t, const char *state)
{
	drop_target(ctx, t, state);
}

static const struct follow_ops follow_ops = {
	.adopted = adopted,
	.wake_by = wake_by,
	.reap = reap,
	.drop = drop,
};

/* Lost events are never silent (drops_tell()). */
static void check_drops(struct agent *a, uint64_t now)
{
	uint64_t drops = bpfstate_stat(&a->bpf, RC_STAT_DROPS);

	metrics_set_ringbuf_drops(&a->m, drops + follow_lost(&a->fl));
	drops_tell(&a->drops, &a->out, drops, outstream_dropped(), now);
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
	follow_prune(&a->fl);
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
				   : t->rss_told - e.total) < a->rss_step) {
		target_rss(t, now, e.total, r.file);
		metrics_set_rss(&a->m, (unsigned int)t->slot, t->sm.rss);
		return;
	}
	agent_event(a, &e, sizeof(e));
}

/* Read meminfo and the cgroups of every target (and the system's). */
static void read_all(struct agent *a, uint64_t now)
{
	bool bpf = a->fp.always;
	struct target *t;

	for_each_target(a, t, i) {
		if (!t->faults.has) /* the base, at the first read */
			summary_faults(&a->bpf, bpf, t->pid, &t->faults, 0,
				       NULL);
		if (!a->fp.fw.on)
			poll_rss(a, t, now);
		report_err(a, &a->read_err,
			   target_read(&a->ts, &a->env, t, now),
			   "memory and cgroup counters");
	}
	if (!a->ts.n && !a->sys_faults.has)
		summary_faults(&a->bpf, bpf, 0, &a->sys_faults, 0, NULL);
	if (!targets_single(&a->ts))
		report_err(a, &a->read_err,
			   targets_sample(&a->ts, &a->sys, now),
			   "memory and cgroup counters");
}

/* The cadence follows whichever target is nearest its threshold. */
static void cadence_input(struct agent *a, uint64_t now, struct cadence_in *ci)
{
	ci->near = targets_pressing(&a->ts);
	ci->above_ok = a->lv.lw.cur.level > RAMCACHE_LEVEL_OK;
	ci->since_event_ns = now - a->tk.last_event_ns;
	ci->headroom = a->sys.headroom;
	ci->near_at = 2 * a->sys_thr.inactive_min;
	targets_nearest(&a->ts, &ci->headroom, &ci->near_at);
}

/*
 * The next time the loop must wake when nothing else wakes it: on time for
 * heartbeats, commands in flight, reads and retries; periodic chores wait
 * for that wake-up when it comes within their slack (cadence_wake()).
 */
static uint64_t next_tick(struct agent *a, uint64_t now)
{
	struct cadence_due d[RC_MAX_TARGETS + 12];
	uint64_t sum_slack = a->interval_ns / 4, next;
	int n = 0;

	if (a->tk.cad.tick_ns)
		return now + a->tk.cad.tick_ns;
	if (sum_slack > CADENCE_SLACK_NS)
		sum_slack = CADENCE_SLACK_NS;
	d[n++] = (struct cadence_due){ a->tk.next_read_ns, 0 };
	d[n++] = (struct cadence_due){ a->tk.next_level_ns,
				       a->tk.cad.calm ? CADENCE_SLACK_NS : 0 };
	d[n++] = (struct cadence_due){ a->last_summary_ns + a->interval_ns,
				       sum_slack };
	n += targets_wakes(&a->ts, d + n);
	n += follow_wakes(&a->fl, now, d + n);
	if (a->end_ns)
		d[n++] = (struct cadence_due){ a->end_ns, 0 };
	if (a->ts.n)
		d[n++] =
			(struct cadence_due){ a->next_cg_ns, CADENCE_SLACK_NS };
	if (a->eval.due)
		d[n++] = (struct cadence_due){ a->eval.next_ns, 0 };
	next = cadence_wake(d, n);
	return next > now + CADENCE_TICK_NS ? next : now + CADENCE_TICK_NS;
}

/* Heartbeats, acks and timeouts of every page; then maybe an evaluation. */
static void tick_evictors(struct agent *a, uint64_t now, bool fresh)
{
	struct target *t;

	if (!targets_evicting(&a->ts))
		return;
	for_each_target(a, t, i)
		if (t->evicting) {
			target_tick(t, now);
			/* an executor announced a load: judge it now */
			fresh |= t->ev.ann_new;
		}
	/* calm: nothing new to judge but what was just read */
	if (fresh || !a->tk.cad.calm)
		evaluate(a, 0);
	run_eval(a);
	for_each_target(a, t, i) {
		if (!t->evicting)
			continue;
		evictor_tell(&t->ev, now);
		/* nothing left to free: the level says so now, not next read */
		if (t->ev.short_new) {
			t->ev.short_new = false;
			a->tk.next_level_ns = now;
		}
	}
}

static void on_tick(struct agent *a)
{
	uint64_t now = now_ns();
	struct cadence_in ci = { 0 };
	bool fresh = false;

	/* RSS events that did not wake the loop */
	bpfstate_events_consume(&a->bpf);

	follow_tick(&a->fl, now);
	recheck_cgroups(a, now);
	cadence_input(a, now, &ci);
	tick_plan(&a->tk, &ci);
	faultprobes_cadence(&a->fp, &a->tk.cad);
	/* while calm a read may come early, with a wake-up due anyway */
	if (now + (a->tk.cad.calm ? CADENCE_SLACK_NS : 0) >=
		    a->tk.next_read_ns ||
	    !a->tk.cad.read_ns) {
		read_all(a, now);
		faultprobes_watch(&a->fp, now);
		a->tk.next_read_ns = now + a->tk.cad.read_ns;
		fresh = true;
	}
	tick_evictors(a, now, fresh);
	outstream_pump(); /* lines held for a slow reader */
	if (now >= a->tk.next_level_ns) {
		update_level(a, now);
		a->tk.next_level_ns = now + a->tk.cad.level_ns;
		check_drops(a, now);
	} else if (!a->tk.cad.calm) {
		check_drops(a, now);
	}
	if (now - a->last_summary_ns >= a->interval_ns)
		summary(a, now);
	onlevel_reap();
	if (a->end_ns && now >= a->end_ns) {
		a->stop = true;
		a->exit_reason = "duration reached";
	}
	tick_arm(&a->tk, next_tick(a, now));
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
	bpfstate_events_consume(&a->bpf);
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
				bpfstate_events_consume(&a->bpf);
				run_eval(a);
				/* a paced evaluation is run by the timer */
				if (a->eval.due)
					tick_arm_by(&a->tk, a->eval.next_ns);
				break;
			case TAG_DISC:
				follow_take_reports(&a->fl);
				break;
			case TAG_TIMER:
				if (read(a->tk.timerfd, &ticks, sizeof(ticks)) >
				    0)
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
	struct start_info si;

	summary_start(targets_single(&a->ts), &a->sys_thr, &a->bpf.probes,
		      a->fp.always ? "on" : "auto", &si);
	out_start(&a->out, &si);
}

/* Detach every target; true if any was evicting. */
static void detach_all(struct agent *a)
{
	struct target *t;

	for_each_target(a, t, i) {
		follow_gone(&a->fl, t);
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
	a->drops.next_warn_ns = 0;
	check_drops(a, now_ns());
	a->inflight_at_exit = 0;
	for_each_target(a, t, i) {
		a->last_pid = t->pid;
		if (t->evicting)
			a->inflight_at_exit += t->ev.nr_inflight;
	}
	detach_all(a);
	evict = a->had_evictor || a->evict;
	if (a->hist)
		print_hists(a, evict ? &a->ack_hist : NULL,
			    evict ? &a->freed_hist : NULL);
	out_exit(&a->out, a->exit_reason, code);
	if (code == EXIT_OUTPUT_CLOSED)
		out_note(
			&a->out,
			"stdout closed: stopped (exit %d); pid %d detached with its heartbeat cleared, %d commands in flight reported unacked",
			code, (int)a->last_pid, a->inflight_at_exit);
}

/* The last lines (the exit's) held for a slow reader; on stderr what is lost. */
static void drain_stdout(void)
{
	uint64_t before = outstream_dropped();

	outstream_drain(OUT_DRAIN_MS);
	/* on the same unread pipe, a blocking write would never return */
	if (outstream_dropped() > before && !outstream_shares_stderr())
		out_warn(NULL,
			 "stdout not read at exit: %" PRIu64
			 " output lines dropped (%" PRIu64 " in all)",
			 outstream_dropped() - before, outstream_dropped());
}

static void teardown(struct agent *a)
{
	metrics_http_stop(a->http);
	detach_all(a);
	bpfstate_events_close(&a->bpf);
	follow_close(&a->fl);
	bpfstate_destroy(&a->bpf);
	if (a->sigfd >= 0)
		close(a->sigfd);
	if (a->tk.timerfd >= 0)
		close(a->tk.timerfd);
	if (a->epfd >= 0)
		close(a->epfd);
	metrics_destroy(&a->m);
	if (a->out.f != stdout)
		fclose(a->out.f);
	drain_stdout();
}

/* The run's start: its first event, and its end if @o gives a --duration. */
static void start(struct agent *a, const struct opts *o)
{
	a->last_summary_ns = now_ns();
	if (o->duration_ns)
		a->end_ns = a->last_summary_ns + o->duration_ns;
	start_event(a);
	if (o->match && !o->has_user && !o->cgroup)
		out_warn(
			&a->out,
			"--match without --user or --cgroup follows any user's process whose command line holds '%s'",
			o->match);
}

int agent_run(const struct opts *o)
{
	struct agent a = {
		.epfd = -1,
		.sigfd = -1,
		.tk = { .timerfd = -1 },
		.exit_reason = "done",
	};
	sigset_t pipe;
	int code;

	/* a reader gone is an EPIPE to handle, not a SIGPIPE that kills */
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	sigprocmask(SIG_BLOCK, &pipe, NULL);
	/* one malloc arena: a thread's own would reserve 64 MiB, locked */
	mallopt(M_ARENA_MAX, 1);
	agent_configure(&a, o, &follow_ops);
	bpfstate_set_print(out_libbpf_print);
	metrics_init(&a.m);
	pressure_tell_init(&a.lv);
	sampler_init(&a.sys, 0, NULL, NULL);
	a.mem_total = (uint64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	agent_init_env(&a);
	target_thresholds(&a.env, RC_UNLIMITED, &a.sys_thr);

	code = agent_setup(&a, o);
	if (!code) {
		start(&a, o);
		loop(&a);
		finish(&a, a.exit_code);
		code = a.exit_code;
	}
	teardown(&a);
	return code;
}
