/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The pressure levels the agent tells: its own (one target's, or the
 * machine's) and, with several targets, each memory domain's; published
 * as gauges, handed to each evictor, told as `pressure` events and to the
 * --on-level commands when they change.
 */
#ifndef RAMCACHE_PRESSURE_TELL_H
#define RAMCACHE_PRESSURE_TELL_H

#include <stdbool.h>
#include <stdint.h>

#include "executors/domains.h"
#include "executors/domain_pressure.h"
#include "executors/pressure_watch.h"
#include "executors/targets.h"
#include "emit/metrics.h"
#include "emit/onlevel.h"
#include "emit/out.h"
#include "proc/sampler.h"

struct pressure_tell {
	struct pressure_watch lw; /* the agent's */
	struct domain_levels dl;  /* several targets: each domain's */
	int err;		  /* the read error told last */
};

/* What an update reads, and where it tells. */
struct pressure_tell_env {
	struct targets *ts;
	const struct domain_env *denv;
	const struct sampler *sys;	     /* the machine's */
	const struct rc_thresholds *sys_thr; /* in force without one target */
	uint64_t horizon_ns;		     /* --horizon */
	struct metrics *m;
	struct out *out;
	const struct on_level *cmds; /* --on-level */
	int ncmds;
};

void pressure_tell_init(struct pressure_tell *lv);

/* kswapd on node @nid woke (or went to sleep). */
void pressure_tell_kswapd(struct pressure_tell *lv, int nid, bool awake);

/*
 * Judge every level at @now, BPF having counted @direct direct and
 * @memcg memcg reclaim stalls so far; publish, hand on and tell.
 */
void pressure_tell_update(struct pressure_tell *lv,
			  const struct pressure_tell_env *env, uint64_t direct,
			  uint64_t memcg, uint64_t now);

/*
 * Each memory domain's gauges (headroom, forecast ETA, level); without
 * targets, the machine's as domain 0 with @sys_eta_ns.
 */
void pressure_tell_publish(const struct pressure_tell *lv,
			   const struct pressure_tell_env *env, uint64_t now,
			   uint64_t sys_eta_ns);

#endif /* RAMCACHE_PRESSURE_TELL_H */
