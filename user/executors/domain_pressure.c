// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The pressure level of each memory domain; see domain_pressure.h. */
#include <errno.h>
#include <string.h>

#include "executors/domain_pressure.h"

void domain_pressure_init(struct domain_levels *dl, const char *proc_root)
{
	dl->proc_root = proc_root;
	for (int d = 0; d < RC_MAX_TARGETS; d++) {
		pressure_watch_init(&dl->lw[d], proc_root);
		dl->key[d] = 0;
		dl->used[d] = false;
	}
}

void domain_pressure_kswapd(struct domain_levels *dl, unsigned int nid,
			    bool awake)
{
	for (int d = 0; d < RC_MAX_TARGETS; d++)
		pressure_watch_kswapd(&dl->lw[d], nid, awake);
}

int domain_pressure_ctx(const struct targets *ts, int dom,
			const struct domain_env *env, uint64_t now_ns,
			struct pressure_watch_ctx *c)
{
	struct domain_outlook o;
	const struct target *only = NULL;
	int n = 0;

	if (domains_outlook(ts, dom, env, now_ns, &o))
		return -ENOENT;
	c->headroom = o.headroom;
	c->has_eta = o.v.has_eta;
	c->eta_ns = o.v.has_eta ? o.v.eta_ns : 0;
	c->cg = NULL;
	c->cg_ino = 0;
	for (int i = 0; i < RC_MAX_TARGETS; i++) {
		const struct target *t = ts->t[i];

		if (!t || t->dom != dom)
			continue;
		/* members share the limit, so their thresholds are the same */
		if (!n)
			c->thr = t->thr;
		only = t;
		n++;
		if (t->evicting && t->ev.short_told)
			c->cannot_free = true;
		/*
		 * The limiting cgroup's own counters when a member sits in
		 * it; members all in child cgroups leave the refault, swap
		 * and PSI rates system-wide.
		 */
		if (!c->cg && t->domain && t->sm.has_cg &&
		    t->sm.cs.nearest_depth == 0) {
			c->cg = &t->sm.cs.self;
			c->cg_ino = t->sm.cg.ino;
		}
	}
	/* major faults are one process's: only a domain of one has them */
	c->pid = n == 1 ? only->pid : 0;
	return 0;
}

int domain_pressure_update(struct domain_levels *dl, const struct targets *ts,
			   int dom, uint64_t now_ns,
			   const struct pressure_watch_ctx *c)
{
	uint64_t key = ts->dom_key[dom];

	if (!dl->used[dom] || dl->key[dom] != key) {
		uint64_t awake[PRESSURE_MAX_NODES / 64];

		/* a new domain at this index: its rates start afresh */
		memcpy(awake, dl->lw[dom].kswapd_awake, sizeof(awake));
		pressure_watch_init(&dl->lw[dom], dl->proc_root);
		memcpy(dl->lw[dom].kswapd_awake, awake, sizeof(awake));
		dl->key[dom] = key;
		dl->used[dom] = true;
	}
	return pressure_watch_update(&dl->lw[dom], now_ns, c);
}
