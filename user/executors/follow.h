/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Whom the agent takes on after start: --match's oldest match, one at a
 * time, and for --all every executor the kernel reports (the uprobe on
 * memfd_create, execve) or a look through /proc finds, as admission.c
 * lets in. This file does the I/O of it (verify, attach, warn); the loop
 * is told through follow_ops what only it can do.
 */
#ifndef RAMCACHE_FOLLOW_H
#define RAMCACHE_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/cadence.h"
#include "core/admission.h"
#include "executors/targets.h"
#include "kernel/discover.h"
#include "emit/metrics.h"
#include "emit/out.h"
#include "proc/match.h"

/* Whom the agent follows: one of these, never a mix. */
enum follow_mode {
	FOLLOW_SYSTEM = 0, /* nobody: the whole machine is watched */
	FOLLOW_PID,	   /* --pid: that process; its exit ends the run */
	FOLLOW_MATCH,	   /* --match: the oldest match, then the next */
	FOLLOW_ALL,	   /* --all: every executor that makes a page */
};

/* What the loop does for follow.c. */
struct follow_ops {
	/* an executor was taken on at @now: read and judge at once */
	void (*adopted)(void *ctx, uint64_t now);
	/* look at the pending pages again no later than @at */
	void (*wake_by)(void *ctx, uint64_t at);
	/* let go of the executors that exited, before a place is taken */
	void (*reap)(void *ctx);
	/* stop following @t, telling why (exec, no_page) */
	void (*drop)(void *ctx, struct target *t, const char *state);
};

struct follow {
	enum follow_mode mode;
	/* --match, --user, --cgroup: whom it may take on (none: anybody) */
	struct match_spec spec;
	struct targets *ts;
	const struct target_env *env;
	struct out *out;
	struct metrics *m;
	const struct follow_ops *ops;
	void *ctx;
	struct discover disc;	/* --all: the kernel's reports */
	struct admission adm;	/* --all: whom to adopt, when to look */
	uint64_t next_match_ns; /* --match: the next look, 0: now */
	pid_t refused_told;	/* --match: the refused pid warned about */
	bool taking;		/* a freed place is being offered */
	int disc_taken;		/* kernel reports taken this turn */
	/* the process a look through /proc is at: whose, since when */
	struct principal scan_who;
	uint64_t scan_t0;
	uint64_t metrics_ns; /* the principals' counts last copied out */
};

/* Follow as @mode says, taking on only whom @spec accepts (copied). */
void follow_init(struct follow *f, enum follow_mode mode,
		 const struct match_spec *spec, struct targets *ts,
		 const struct target_env *env, struct out *out,
		 struct metrics *m, const struct follow_ops *ops, void *ctx);

/* Tell why attaching @pid failed (a process gone is not worth a line). */
void follow_attach_failed(struct follow *f, pid_t pid, int err);

/*
 * --all: the kernel's reports (a uprobe on memfd_create, execve), read
 * from a ring of their own, in the loop's @epfd with @tag. 0, or -1 when
 * they could not be had (told: executors are found by looking through
 * /proc alone).
 */
int follow_discovery(struct follow *f, int epfd, uint32_t tag);

/*
 * The ring's fd is readable: take at most ADMISSION_REPORTS_PER_TURN
 * reports (the rest wait for the next turn: the loop is everybody's).
 */
void follow_take_reports(struct follow *f);

/*
 * Every tick: --match's next look when nobody is followed; --all's look
 * through /proc (a slice of it), the pending reports, the targets without
 * a page.
 */
void follow_tick(struct follow *f, uint64_t now);

/* When the loop must wake for follow_tick(), into @d; how many (<= 3). */
int follow_wakes(const struct follow *f, uint64_t now, struct cadence_due *d);

/* @t is about to be followed no more (dropped, exited, detached). */
void follow_gone(struct follow *f, const struct target *t);

/*
 * A place came free: --all offers it to the executors refused one for
 * lack of it (the longest waiting first), and looks for others soon.
 */
void follow_freed(struct follow *f);

/* Executors that exited while waiting for a place wait no more. */
void follow_prune(struct follow *f);

/* Kernel reports lost so far (0 without the uprobe). */
uint64_t follow_lost(struct follow *f);

void follow_close(struct follow *f);

#endif /* RAMCACHE_FOLLOW_H */
