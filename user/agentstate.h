/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The agent's state, shared by its loop (agent.c) and its set-up
 * (setup.c): one struct for the whole run, made in agent_run().
 */
#ifndef RAMCACHE_AGENTSTATE_H
#define RAMCACHE_AGENTSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "core/hist.h"
#include "core/pace.h"
#include "executors/domains.h"
#include "executors/faultprobes.h"
#include "executors/follow.h"
#include "executors/pressure_tell.h"
#include "executors/targets.h"
#include "kernel/bpfstate.h"
#include "emit/drops.h"
#include "emit/metrics.h"
#include "emit/metrics_http.h"
#include "emit/out.h"
#include "proc/sampler.h"
#include "tick.h"

struct agent {
	/* what the command line asked of the loop, copied in at set-up */
	uint64_t interval_ns; /* between summaries */
	uint64_t horizon_ns;  /* of the forecast */
	uint64_t rss_step;    /* RSS change that makes a polled rss event */
	bool evict;	      /* false with --no-evict */
	bool hist;	      /* --hist: latency histograms at exit */
	struct on_level on_level[MAX_ON_LEVEL]; /* --on-level's commands */
	struct out out;
	struct bpfstate bpf;
	struct metrics m;
	struct metrics_http *http;
	int epfd, sigfd;
	struct targets ts;
	struct target_env env;
	struct domain_env denv;
	struct follow fl;   /* --match and --all: whom to take on, when */
	struct sampler sys; /* without a single target */
	struct track_totals sys_prev;
	struct fault_count sys_faults; /* the system's (/proc/vmstat) */
	struct faultprobes fp; /* the programs on page faults: on or off */
	struct pressure_tell
		lv; /* the agent's pressure level and each domain's */
	struct pressure_tell_env lenv;
	uint64_t mem_total;
	struct rc_thresholds sys_thr; /* in force without a single target */
	uint64_t last_summary_ns;
	/* evaluations: at most one per ring buffer drain or tick, paced */
	struct pace eval;
	uint64_t end_ns;
	struct drops drops;
	struct tick tk;	     /* when the loop wakes, reads and judges */
	uint64_t next_cg_ns; /* when to look for cgroup moves again */
	/* eviction latency of every target followed, for --hist */
	struct hist ack_hist, freed_hist;
	bool had_evictor;
	int inflight_at_exit; /* commands out when the loop stopped */
	pid_t last_pid;	      /* the last target, for the exit note */
	int read_err;	      /* the last read error told, to tell it once */
	bool stop;
	int exit_code;
	const char *exit_reason;
};

/* Epoll tags; target slot i is TAG_PID + i. */
enum { TAG_RB = 1, TAG_SIG, TAG_TIMER, TAG_DISC, TAG_PID = 16 };

#define for_each_target(a, t, i)                 \
	for (int i = 0; i < RC_MAX_TARGETS; i++) \
		if (((t) = (a)->ts.t[i]))

/* A record of the ring buffer (bpfstate_events_open()'s callback). */
int agent_event(void *ctx, void *data, size_t len);

/*
 * Read @o once, into what the loop and each module keep of it (the output,
 * the agent's fields, the targets', the levels', the domains' and the
 * programs on page faults' settings), and start following as it says
 * (@ops: the loop's side of follow.c).
 */
void agent_configure(struct agent *a, const struct opts *o,
		     const struct follow_ops *ops);

/* What targets, domains and levels need of the agent, once it exists. */
void agent_init_env(struct agent *a);

/*
 * Everything before the loop, as @o asks: the programs, the loop's
 * descriptors, --pid's target, --all's discovery, the metrics server, the
 * capabilities dropped. 0, or an exit code (told already).
 */
int agent_setup(struct agent *a, const struct opts *o);

#endif /* RAMCACHE_AGENTSTATE_H */
