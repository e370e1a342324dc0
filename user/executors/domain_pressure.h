/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The pressure level of each memory domain (--all with several
 * executors): one pressure_watch per domain index, evaluated with the
 * domain's own inputs (headroom, forecast, limiting cgroup). The maths
 * is policy_pressure_eval(), as for the machine's level.
 */
#ifndef RAMCACHE_DOMAIN_PRESSURE_H
#define RAMCACHE_DOMAIN_PRESSURE_H

#include <stdint.h>

#include "executors/domains.h"
#include "executors/pressure_watch.h"

struct domain_levels {
	struct pressure_watch lw[RC_MAX_TARGETS];
	uint64_t key[RC_MAX_TARGETS]; /* the domain each watch is of */
	bool used[RC_MAX_TARGETS];
	const char *proc_root; /* NULL: /proc */
};

void domain_pressure_init(struct domain_levels *dl, const char *proc_root);
/* kswapd of node @nid woke or slept: every domain's watch hears it. */
void domain_pressure_kswapd(struct domain_levels *dl, unsigned int nid,
			    bool awake);

/*
 * Fill @c (its BPF stall counters already set by the caller) with
 * domain @dom's inputs: least headroom of its members, its outlook's ETA,
 * its members' thresholds, and the counters of its limiting cgroup when a
 * member sits in it. -ENOENT when no target is in @dom.
 */
int domain_pressure_ctx(const struct targets *ts, int dom,
			const struct domain_env *env, uint64_t now_ns,
			struct pressure_watch_ctx *c);

/*
 * Evaluate domain @dom at @now_ns with @c (a watch starts afresh when
 * the index now names another domain). Returns as pressure_watch_update().
 */
int domain_pressure_update(struct domain_levels *dl, const struct targets *ts,
			   int dom, uint64_t now_ns,
			   const struct pressure_watch_ctx *c);

#endif /* RAMCACHE_DOMAIN_PRESSURE_H */
