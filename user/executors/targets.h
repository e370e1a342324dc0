/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The executors the agent follows: up to RC_MAX_TARGETS (the BPF side's
 * limit), each with its pidfd in the agent's epoll set, its sampler,
 * thresholds, evictor, RSS growth and memory domain (the nearest cgroup
 * with a memory limit, or the machine).
 */
#ifndef RAMCACHE_TARGETS_H
#define RAMCACHE_TARGETS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/types.h>

#include "core/cadence.h"
#include "kernel/bpfstate.h"
#include "page/control.h"
#include "executors/evictor.h"
#include "core/principal.h"
#include "proc/match.h"
#include "emit/metrics.h"
#include "emit/out.h"
#include "core/samples.h"
#include "proc/sampler.h"

/* How often each target's cgroup is looked up again (it may be moved). */
#define TARGET_CGROUP_PERIOD_NS 1000000000ULL

/* Page faults counted: at the first read, at the last. */
struct fault_count {
	uint64_t base, last;
	bool has;
};

struct target {
	pid_t pid;
	uid_t uid;
	int slot;	       /* index in the table, and its epoll tag */
	struct ctl_target ctl; /* pid and uid in the target's namespaces */
	int pidfd;
	char comm[64];
	struct sampler sm;
	uint64_t memcg_watched; /* its memcg's ino counted as watched, or 0 */
	bool has_rss_file;
	uint64_t rss_file; /* file-backed resident bytes, last rss event */
	uint64_t rss_told; /* RSS of the last rss event (BPF's or polled) */
	/* minflt + majflt (/proc/PID/stat), or the fault program's */
	struct fault_count faults;
	struct evictor ev;
	bool evicting;
	struct rc_thresholds thr;
	struct track_totals prev;
	uint64_t oom_base;	/* the cgroup's oom_kill count at attach */
	uint64_t oom_carry;	/* OOM kills in cgroups it has left */
	double weight;		/* --weight, 1 when none applies */
	uint64_t no_page_since; /* --all: when its page went, 0: it has one */
	struct principal who;	/* --all: whose place it takes */
	int libc;		/* --all: the libc probe it holds, 0: none */
	/* the memory domain: nearest limited cgroup's inode, 0: the machine */
	uint64_t domain;
	int dom; /* its index in struct targets (and in the metrics), -1: none */
	char domain_path[PATH_MAX];
	char cgroup[PATH_MAX]; /* as in /proc/PID/cgroup, "" without a memcg */
	struct out_tag tag;
	struct rc_samples rss; /* RSS, for domain growth */
};

struct targets {
	struct target *t[RC_MAX_TARGETS]; /* NULL: a free slot */
	int n;
	/* domains in use: the key of each index and how many targets in it */
	uint64_t dom_key[RC_MAX_TARGETS];
	int dom_refs[RC_MAX_TARGETS];
};

/* --weight PID=W or PATTERN=W: favour an executor in its domain. */
#define MAX_WEIGHTS 16
struct weight_rule {
	pid_t pid;	   /* 0: by pattern */
	char pattern[128]; /* a piece of the command line, "" with a pid */
	double weight;
};

/* What the command line asks of every target, copied in at set-up. */
struct target_cfg {
	/* --headroom, --inactive: asked for (or the defaults), in bytes */
	bool headroom_set, inactive_set;
	uint64_t headroom, inactive;
	bool evict;		  /* false with --no-evict */
	struct evict_cfg evictor; /* each target's, when it evicts */
	struct weight_rule weights[MAX_WEIGHTS]; /* --weight, in order */
	int nr_weights;
};

/* What attaching needs of the agent. */
struct target_env {
	struct target_cfg cfg;
	struct out *out;
	struct bpfstate *bpf;
	struct metrics *m;
	int epfd;
	uint32_t tag_base; /* epoll tag of slot 0 */
	uint64_t mem_total;
	int *read_err; /* the last read error told, to tell each once */
};

/* The thresholds in force in a cgroup of @cg_limit (RC_UNLIMITED: none). */
void target_thresholds(const struct target_env *env, uint64_t cg_limit,
		       struct rc_thresholds *thr);

/*
 * Follow @pid: pidfd (in the epoll set), BPF tracking, cgroup, sampler,
 * domain and, unless --no-evict, its control page. With @spec the process
 * is judged again once the pidfd pins it. 0 and *out, or -errno: -ESRCH
 * gone, -EACCES no longer matches @spec, -ENOSPC the table is full.
 */
int target_attach(struct targets *ts, const struct target_env *env, pid_t pid,
		  const struct match_spec *spec, struct target **out);

/*
 * Stop following @t (its page's heartbeat cleared, commands in flight
 * reported) and free it; its latency histograms are merged into @ack and
 * @freed first when it was evicting (true returned then).
 */
bool target_detach(struct targets *ts, const struct target_env *env,
		   struct target *t, struct hist *ack, struct hist *freed);

/*
 * @t's page: heartbeat, acks, timeouts (evictor_tick). Until the page is
 * open its name is read again: followed before an exec, an executor is
 * named by the program that made the page.
 */
void target_tick(struct target *t, uint64_t now);

/* The followed process @pid, or NULL. */
struct target *targets_find(const struct targets *ts, pid_t pid);
/* The target in @slot, or NULL. */
struct target *targets_at(const struct targets *ts, int slot);
/* The only target when there is exactly one, else NULL. */
struct target *targets_single(const struct targets *ts);

/* Some target has its page open (evicting). */
bool targets_evicting(const struct targets *ts);

/*
 * Some target is close to a threshold (headroom under twice its
 * inactive_min) or has commands out: the loop follows headroom every tick.
 */
bool targets_pressing(const struct targets *ts);

/*
 * The target nearest its near point (twice its inactive_min): its
 * headroom and near point into *@headroom and *@near_at, left as they are
 * without targets.
 */
void targets_nearest(const struct targets *ts, uint64_t *headroom,
		     uint64_t *near_at);

/*
 * When each evictor must be ticked, into @d (RC_MAX_TARGETS): a heartbeat
 * on time, a look for a page within the cadence's slack. How many.
 */
int targets_wakes(const struct targets *ts, struct cadence_due *d);

/* An rss event of the target: sampler, evictor, growth ring. */
void target_rss(struct target *t, uint64_t ts_ns, uint64_t total,
		uint64_t file);

/* RSS growth over the @window_ns up to @now, for the domain forecast. */
void target_growth(const struct target *t, uint64_t now, uint64_t window_ns,
		   struct rc_growth *g);

/*
 * sampler_read() of @s at @now, or its files as a target read them at
 * @now (sampler_covers()): each cgroup and meminfo read once a pass.
 */
int targets_sample(const struct targets *ts, struct sampler *s, uint64_t now);

/*
 * Read meminfo and the cgroup (targets_sample()); the domain follows a
 * limit set or removed (and the metrics' labels with it).
 */
int target_read(struct targets *ts, const struct target_env *env,
		struct target *t, uint64_t now_ns);

/*
 * The target was moved to another cgroup (a restarted scope, a container
 * runtime): follow it. True if it moved (told as a target event).
 */
bool target_recheck_cgroup(struct targets *ts, const struct target_env *env,
			   struct target *t, uint64_t now_ns);

#endif /* RAMCACHE_TARGETS_H */
