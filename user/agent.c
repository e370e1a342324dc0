// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent: load the BPF programs, follow the target, and run one epoll
 * loop over the ring buffer, a periodic tick, signals and the target's
 * pidfd. Only this file decides when to stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "agent.h"
#include "bpfstate.h"
#include "hist.h"
#include "json.h"
#include "output.h"

#define NSEC	 1000000000ULL
#define TICK_NS	 (50 * 1000000ULL)
#define BTF_PATH "/sys/kernel/btf/vmlinux"

struct agent {
	const struct opts *o;
	struct out out;
	struct bpfstate bpf;
	struct ring_buffer *rb;
	int epfd, sigfd, timerfd, pidfd;
	pid_t pid;
	char comm[64];
	uint64_t start_ns, last_summary_ns, end_ns;
	struct track_totals prev;
	uint64_t rss;
	bool stop;
	int exit_code;
	const char *exit_reason;
};

static bool verbose;

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list args)
{
	if (level == LIBBPF_DEBUG && !verbose)
		return 0;
	if (level != LIBBPF_DEBUG && !verbose)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * NSEC + ts.tv_nsec;
}

static int read_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return 0;
}

static int epoll_add(int epfd, int fd, uint32_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

enum { TAG_RB = 1, TAG_SIG, TAG_TIMER, TAG_PID };

static int handle_event(void *ctx, void *data, size_t len)
{
	struct agent *a = ctx;
	const struct rc_event_hdr *h = data;

	if (len < sizeof(*h))
		return 0;
	if (h->type == RC_EV_RSS && len >= sizeof(struct rc_rss) &&
	    (pid_t)h->tgid == a->pid)
		a->rss = ((const struct rc_rss *)data)->total;
	out_event(&a->out, data, len);
	return 0;
}

static void summary(struct agent *a, uint64_t now)
{
	struct track_totals t;
	struct summary s = { .pid = a->pid };
	double dt = (now - a->last_summary_ns) / 1e9;

	if (bpfstate_totals(&a->bpf, a->pid, &t))
		memset(&t, 0, sizeof(t));
	s.interval_s = dt;
	s.rss = a->rss;
	s.faults = t.faults;
	s.faults_per_s = dt > 0 ? (t.faults - a->prev.faults) / dt : 0;
	for (int k = 0; k < RC_RECLAIM_KINDS; k++) {
		s.stalls[k] = t.reclaim_count[k] - a->prev.reclaim_count[k];
		s.stall_ns[k] = t.reclaim_ns[k] - a->prev.reclaim_ns[k];
	}
	s.drops = bpfstate_stat(&a->bpf, RC_STAT_DROPS);
	s.kswapd_wakes = bpfstate_stat(&a->bpf, RC_STAT_KSWAPD_WAKES);
	s.oom_kills = bpfstate_stat(&a->bpf, RC_STAT_OOM_KILLS);
	out_summary(&a->out, &s);
	a->prev = t;
	a->last_summary_ns = now;
}

static void on_tick(struct agent *a)
{
	uint64_t now = now_ns();

	if (now - a->last_summary_ns >= a->o->interval_ns)
		summary(a, now);
	if (a->end_ns && now >= a->end_ns) {
		a->stop = true;
		a->exit_reason = "duration reached";
	}
}

static void on_signal(struct agent *a)
{
	struct signalfd_siginfo si;

	if (read(a->sigfd, &si, sizeof(si)) != sizeof(si))
		return;
	a->stop = true;
	a->exit_reason = si.ssi_signo == SIGINT ? "interrupted" : "terminated";
}

static void print_hists(struct agent *a)
{
	static const char *names[RC_HIST_KINDS] = { "direct reclaim", "memcg "
								      "reclai"
								      "m" };
	struct hist h;

	for (int k = 0; k < RC_HIST_KINDS; k++) {
		if (bpfstate_hist(&a->bpf, k, &h))
			continue;
		if (a->out.json) {
			struct jw w;

			jw_begin(&w, a->out.f);
			jw_str(&w, "type", "hist");
			jw_str(&w, "name",
			       k ? "memcg_reclaim" : "direct_reclaim");
			jw_str(&w, "unit", "usecs");
			hist_json(&w, "slots", &h);
			jw_end(&w);
		} else {
			fprintf(a->out.f, "\n%s stall latency:\n", names[k]);
			hist_print(a->out.f, &h, "usecs");
		}
	}
}

static int fail(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("ramcache-bpf: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

static int setup_target(struct agent *a)
{
	a->pid = a->o->pid;
	if (!a->pid)
		return 0;
	a->pidfd = syscall(SYS_pidfd_open, a->pid, 0);
	if (a->pidfd < 0) {
		if (errno == ESRCH)
			return fail(EXIT_NO_PROCESS, "no such process: %d",
				    a->pid);
		return fail(EXIT_RUNTIME, "failed to open pid %d: %s", a->pid,
			    strerror(errno));
	}
	if (read_comm(a->pid, a->comm, sizeof(a->comm)))
		snprintf(a->comm, sizeof(a->comm), "?");
	return 0;
}

static int setup_bpf(struct agent *a)
{
	int err;

	if (access(BTF_PATH, R_OK))
		return fail(EXIT_UNSUPPORTED,
			    "kernel BTF not found at %s: this kernel needs "
			    "CONFIG_DEBUG_INFO_BTF=y",
			    BTF_PATH);
	err = bpfstate_load(&a->bpf, a->o);
	if (err == -EPERM || err == -EACCES)
		return fail(EXIT_PRIVILEGE,
			    "failed to load BPF programs: %s (run as root or "
			    "grant CAP_BPF and CAP_PERFMON)",
			    strerror(-err));
	if (err)
		return fail(EXIT_UNSUPPORTED,
			    "failed to load BPF programs: %s (-v shows the "
			    "verifier log)",
			    strerror(-err));
	if (a->pid) {
		err = bpfstate_track(&a->bpf, a->pid);
		if (err)
			return fail(EXIT_RUNTIME, "failed to track pid %d: %s",
				    a->pid, strerror(-err));
	}
	err = bpfstate_attach(&a->bpf);
	if (err <= 0)
		return fail(EXIT_UNSUPPORTED, "no tracepoint could be attached "
					      "(-v for details)");
	a->rb = ring_buffer__new(bpfstate_events_fd(&a->bpf), handle_event, a,
				 NULL);
	if (!a->rb)
		return fail(EXIT_RUNTIME, "failed to create ring buffer: %s",
			    strerror(errno));
	return 0;
}

static int setup_fds(struct agent *a)
{
	struct itimerspec its = {
		.it_interval = { 0, TICK_NS },
		.it_value = { 0, TICK_NS },
	};
	sigset_t mask;
	int err;

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
	err = epoll_add(a->epfd, ring_buffer__epoll_fd(a->rb), TAG_RB);
	if (!err)
		err = epoll_add(a->epfd, a->sigfd, TAG_SIG);
	if (!err)
		err = epoll_add(a->epfd, a->timerfd, TAG_TIMER);
	if (!err && a->pidfd >= 0)
		err = epoll_add(a->epfd, a->pidfd, TAG_PID);
	return err;
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
			a->exit_code = fail(EXIT_RUNTIME, "epoll_wait: %s",
					    strerror(errno));
			return;
		}
		for (int i = 0; i < n; i++) {
			switch (evs[i].data.u32) {
			case TAG_RB:
				ring_buffer__consume(a->rb);
				break;
			case TAG_TIMER:
				if (read(a->timerfd, &ticks, sizeof(ticks)) > 0)
					on_tick(a);
				break;
			case TAG_SIG:
				on_signal(a);
				break;
			case TAG_PID:
				/* drain what the target left behind first */
				ring_buffer__consume(a->rb);
				a->stop = true;
				a->exit_reason = "target exited";
				break;
			}
		}
	}
}

int agent_run(const struct opts *o)
{
	struct agent a = {
		.o = o,
		.out = { .f = stdout, .json = o->json, .verbose = o->verbose },
		.epfd = -1,
		.sigfd = -1,
		.timerfd = -1,
		.pidfd = -1,
		.exit_reason = "done",
	};
	struct start_info si = { 0 };
	int code;

	verbose = o->verbose;
	libbpf_set_print(libbpf_print);

	code = setup_target(&a);
	if (code)
		goto cleanup;
	code = setup_bpf(&a);
	if (code)
		goto cleanup;
	if (setup_fds(&a)) {
		code = fail(EXIT_RUNTIME, "failed to set up the event loop: %s",
			    strerror(errno));
		goto cleanup;
	}
	if (o->mlock && mlockall(MCL_CURRENT | MCL_FUTURE))
		out_warn(&a.out,
			 "failed to lock the agent's memory: %s; it may be "
			 "paged out under pressure",
			 strerror(errno));

	a.start_ns = a.last_summary_ns = now_ns();
	if (o->duration_ns)
		a.end_ns = a.start_ns + o->duration_ns;
	si.pid = a.pid;
	si.comm = a.pid ? a.comm : NULL;
	si.probes = &a.bpf.probes;
	out_start(&a.out, &si);

	loop(&a);
	code = a.exit_code;
	summary(&a, now_ns());
	if (o->hist)
		print_hists(&a);
	out_exit(&a.out, a.exit_reason, code);

cleanup:
	ring_buffer__free(a.rb);
	bpfstate_destroy(&a.bpf);
	if (a.pidfd >= 0)
		close(a.pidfd);
	if (a.sigfd >= 0)
		close(a.sigfd);
	if (a.timerfd >= 0)
		close(a.timerfd);
	if (a.epfd >= 0)
		close(a.epfd);
	return code;
}
