// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent's set-up, before its loop (agent.c) runs: the BPF programs
 * and their ring, the loop's descriptors, --pid's target, --all's
 * discovery, the metrics server, and the capabilities dropped once
 * nothing more needs them. Each failure is told once, with its exit code.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "agent.h"
#include "agentstate.h"
#include "caps.h"
#include "core/cadence.h"
#include "kernel/discover.h"
#include "proc/clock.h"
#include "proc/memlock.h"
#include "emit/outstream.h"

#define FORECAST_WINDOW_NS NSEC_PER_SEC
#define BTF_PATH	   "/sys/kernel/btf/vmlinux"

static int epoll_add(int epfd, int fd, uint32_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

static void setup_discover(struct agent *a)
{
	if (a->fl.mode == FOLLOW_ALL)
		follow_discovery(&a->fl, a->epfd, TAG_DISC);
}

static int setup_bpf(struct agent *a, const struct opts *o)
{
	struct bpfstate_settings bs = {
		.filter = o->follow != FOLLOW_SYSTEM,
		.probe_mode = o->probe_mode,
		.burst_faults = o->burst_faults,
		.burst_window_ns = o->burst_window_ns,
		.rss_step = o->rss_step,
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
		faultprobes_switch(&a->fp, true);
	out_probe_warnings(&a->out, &a->bpf.probes);
	if (err <= 0)
		return out_fail(
			&a->out, EXIT_UNSUPPORTED,
			"no tracepoint could be attached (-v for details)");
	err = bpfstate_events_open(&a->bpf, agent_event, a);
	if (err)
		return out_fail(&a->out, EXIT_RUNTIME,
				"failed to create ring buffer: %s",
				strerror(-err));
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
	a->tk.timerfd =
		timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (a->sigfd < 0 || a->tk.timerfd < 0 || a->epfd < 0)
		return -errno;
	if (timerfd_settime(a->tk.timerfd, 0, &its, NULL))
		return -errno;
	err = epoll_add(a->epfd, a->sigfd, TAG_SIG);
	if (!err)
		err = epoll_add(a->epfd, a->tk.timerfd, TAG_TIMER);
	return err;
}

/* --metrics ADDR:PORT (@addr, NULL without it) bound. */
static int setup_metrics(struct agent *a, const char *addr)
{
	int err;

	if (!addr)
		return 0;
	err = metrics_http_bind(&a->http, &a->m, addr);
	if (err == -EINVAL)
		return out_fail(
			&a->out, EXIT_USAGE,
			"invalid --metrics address '%s': expected ADDR:PORT, :PORT or [IPV6]:PORT",
			addr);
	if (err)
		return out_fail(&a->out, EXIT_RUNTIME,
				"failed to listen on %s: %s", addr,
				strerror(-err));
	return 0;
}

/* The metrics server's thread, once the agent holds no more than it needs. */
static int serve_metrics(struct agent *a, const char *addr)
{
	int err = a->http ? metrics_http_run(a->http) : 0;

	if (err)
		return out_fail(&a->out, EXIT_RUNTIME,
				"failed to serve metrics on %s: %s", addr,
				strerror(-err));
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

static void drop_privileges(struct agent *a, const struct opts *o)
{
	uint64_t have = caps_effective(), keep;
	struct rlimit lim = { 0 };
	struct caps_need n = {
		.discover = o->follow == FOLLOW_ALL,
		.open_paths = o->control != NULL,
	};
	int err;

	n.memlock = o->mlock && (getrlimit(RLIMIT_MEMLOCK, &lim) ||
				 lim.rlim_cur != RLIM_INFINITY);
	keep = caps_keep(&n, have);
	/* some kernels create a uprobe for CAP_SYS_ADMIN only: --all then
	 * keeps it, or finds executors on another libc by the scan alone */
	if (a->fl.adm.uprobe && !caps_would_do(keep, try_probe, &a->fl.disc) &&
	    (have & CAPS_BIT(CAP_SYS_ADMIN)) &&
	    caps_would_do(keep | CAPS_BIT(CAP_SYS_ADMIN), try_probe,
			  &a->fl.disc)) {
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

/* Follow --pid @pid (0: none) from the start: its errors are fatal. */
static int setup_target(struct agent *a, pid_t pid)
{
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

int agent_setup(struct agent *a, const struct opts *o)
{
	int code, err;

	if (o->follow == FOLLOW_PID && kill(o->pid, 0) && errno == ESRCH &&
	    !discover_own_pidns())
		return out_fail(&a->out, EXIT_NO_PROCESS, "no such process: %d",
				o->pid);
	/* what it lacks to load its programs is told first */
	code = setup_bpf(a, o);
	if (code)
		return code;
	/* its programs see the host's pids, /proc this namespace's */
	if (o->follow != FOLLOW_SYSTEM && discover_own_pidns())
		return out_fail(
			&a->out, EXIT_UNSUPPORTED,
			"this agent runs in a pid namespace of its own and would follow nobody (the kernel reports the host's pids): run it in the host's (--pid=host, hostPID: true)");
	if (setup_fds(a) ||
	    epoll_add(a->epfd, bpfstate_events_epoll_fd(&a->bpf), TAG_RB))
		return out_fail(&a->out, EXIT_RUNTIME,
				"failed to set up the event loop: %s",
				strerror(errno));
	a->env.epfd = a->epfd;
	code = setup_target(a, o->pid);
	if (code)
		return code;
	setup_discover(a);
	err = o->mlock ? memlock_self() : 0;
	if (err)
		out_warn(
			&a->out,
			"failed to lock the agent's memory: %s; it may be paged out under pressure",
			strerror(-err));
	code = setup_metrics(a, o->metrics);
	if (code)
		return code;
	drop_privileges(a, o);
	return serve_metrics(a, o->metrics);
}

_Static_assert(sizeof(((struct target_cfg *)0)->weights) ==
		       sizeof(((struct opts *)0)->weights),
	       "every --weight rule is copied");
_Static_assert(sizeof(((struct agent *)0)->on_level) ==
		       sizeof(((struct opts *)0)->on_level),
	       "every --on-level command is copied");

/* What every target is to be, as @o says (struct target_cfg). */
static void configure_targets(struct target_cfg *c, const struct opts *o)
{
	c->headroom_set = o->headroom_set;
	c->headroom = o->headroom;
	c->inactive_set = o->inactive_set;
	c->inactive = o->inactive;
	c->evict = o->evict;
	c->evictor.control = o->control;
	c->evictor.dry_run = o->dry_run;
	c->evictor.policy = o->policy;
	c->evictor.ack_timeout_ns = o->ack_timeout_ns;
	c->nr_weights = o->nr_weights;
	memcpy(c->weights, o->weights, sizeof(c->weights));
}

void agent_configure(struct agent *a, const struct opts *o,
		     const struct follow_ops *ops)
{
	struct match_spec spec = { .pattern = o->match,
				   .has_uid = o->has_user,
				   .uid = o->user,
				   .cgroup = o->cgroup };

	out_set_verbose_libbpf(o->verbose);
	a->out.json = o->json;
	a->out.verbose = o->verbose;
	a->out.f = o->quiet ? outstream_null() : NULL;
	if (!a->out.f)
		a->out.f = outstream_open(STDOUT_FILENO, stdout);
	a->interval_ns = o->interval_ns;
	a->horizon_ns = o->horizon_ns;
	a->rss_step = o->rss_step;
	a->evict = o->evict;
	a->hist = o->hist;
	memcpy(a->on_level, o->on_level, sizeof(a->on_level));
	configure_targets(&a->env.cfg, o);
	a->fp.horizon_ns = o->horizon_ns;
	a->fp.always = o->fault_probes_always;
	a->lenv.horizon_ns = o->horizon_ns;
	a->lenv.cmds = a->on_level;
	a->lenv.ncmds = o->nr_on_level;
	a->denv.policy = o->policy;
	a->denv.window_ns = FORECAST_WINDOW_NS;
	a->denv.horizon_ns = o->horizon_ns;
	follow_init(&a->fl, o->follow, &spec, &a->ts, &a->env, &a->out, &a->m,
		    ops, a);
}

void agent_init_env(struct agent *a)
{
	a->env.out = &a->out;
	a->env.bpf = &a->bpf;
	a->env.m = &a->m;
	a->env.epfd = -1;
	a->env.tag_base = TAG_PID;
	a->env.mem_total = a->mem_total;
	a->env.read_err = &a->read_err;
	a->tk.bpf = &a->bpf;
	a->fp.ts = &a->ts;
	a->fp.sys = &a->sys;
	a->fp.sys_thr = &a->sys_thr;
	a->fp.bpf = &a->bpf;
	a->fp.out = &a->out;
	a->fp.m = &a->m;
	a->lenv.ts = &a->ts;
	a->lenv.denv = &a->denv;
	a->lenv.sys = &a->sys;
	a->lenv.sys_thr = &a->sys_thr;
	a->lenv.m = &a->m;
	a->lenv.out = &a->out;
}
