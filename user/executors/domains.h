/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Memory domains: the followed executors that share a limit (the nearest
 * cgroup with a memory limit, or the machine). Each domain is planned as
 * one: its headroom, a forecast from the sum of its members' RSS growth,
 * and, when that falls short, the lowest-value entries across all its
 * members (policy_select_domain) are evicted.
 */
#ifndef RAMCACHE_DOMAINS_H
#define RAMCACHE_DOMAINS_H

#include <stdint.h>

#include "core/policy.h"
#include "executors/targets.h"

struct domain_env {
	enum rc_score_policy policy;
	uint64_t window_ns;  /* of samples the forecast is made from */
	uint64_t horizon_ns; /* --horizon */
};

/* What a domain looks like now, for its metrics. */
struct domain_outlook {
	const char *name; /* the limiting cgroup's path, or "machine" */
	uint64_t limit;	  /* bytes: the limit, or the machine's RAM */
	uint64_t headroom;
	struct rc_view v; /* the outlook (core/outlook.h) */
};

/*
 * Domain index @dom of @ts at @now_ns: 0, or -ENOENT when no target is in
 * it. A domain of one executor has that executor's outlook; several add up
 * their RSS growth over the last second (policy_growth_rate) and take it
 * from the shared headroom over --horizon (policy_domain_forecast).
 */
int domains_outlook(const struct targets *ts, int dom,
		    const struct domain_env *env, uint64_t now_ns,
		    struct domain_outlook *o);

/*
 * Plan every domain of @ts at @now_ns and post what each needs. @why is
 * the trigger (enum ramcache_reason) when the kernel already reclaims, 0
 * otherwise. A domain of one executor is planned exactly as a single
 * target always was (its own headroom series' forecast).
 */
void domains_evaluate(struct targets *ts, const struct domain_env *env,
		      uint64_t now_ns, uint32_t why);

#endif /* RAMCACHE_DOMAINS_H */
