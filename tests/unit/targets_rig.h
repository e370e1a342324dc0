/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A table of followed executors for unit tests, filed as target_attach()
 * files them but with no process to pin or files to read: each target in
 * a memory domain, an evictor on a control page when a test gives it one,
 * and a headroom outlook set to the view a test wants. domains_evaluate()
 * plans and posts over it as over the agent's.
 */
#ifndef RAMCACHE_TARGETS_RIG_H
#define RAMCACHE_TARGETS_RIG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/outlook.h"
#include "executors/targets.h"

/* The agent's defaults (setup.c, args.c): a 1 s growth window and horizon. */
#define RIG_WINDOW_NS  1000000000ULL
#define RIG_HORIZON_NS 1000000000ULL

/*
 * A target in @slot of @ts, in domain index @dom whose key is @key (the
 * limiting cgroup's inode; 0: the machine). NULL without memory.
 */
static inline struct target *rig_target(struct targets *ts, int slot, int dom,
					uint64_t key)
{
	struct target *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->slot = slot;
	t->pid = getpid();
	t->uid = getuid();
	t->pidfd = -1;
	t->weight = 1.0;
	t->dom = dom;
	t->domain = key;
	snprintf(t->domain_path, sizeof(t->domain_path), "%s",
		 key ? "/rig" : "machine");
	t->tag.comm = t->comm;
	t->tag.domain = t->domain_path;
	ts->t[slot] = t;
	ts->n++;
	ts->dom_key[dom] = key;
	ts->dom_refs[dom]++;
	return t;
}

/*
 * Give @t an evictor (@cfg, thresholds @thr) wired as setup_evictor() does,
 * and tick it once at @now: true when its control page is attached.
 */
static inline bool rig_evictor(struct target *t, const struct evict_cfg *cfg,
			       const struct rc_thresholds *thr, struct out *out,
			       struct metrics *m, uint64_t now)
{
	t->ctl.pid = t->ctl.ns_pid = t->pid;
	t->ctl.uid = t->ctl.ns_uid = t->uid;
	t->thr = *thr;
	if (evictor_init(&t->ev, cfg, out, m, &t->ctl))
		return false;
	t->ev.rss = t->sm.rss;
	t->ev.outlook = &t->sm.outlook;
	t->ev.tag = &t->tag;
	t->ev.mslot = (unsigned int)t->slot;
	t->evicting = true;
	evictor_tick(&t->ev, now);
	return t->ev.open;
}

/*
 * @t's headroom is @headroom at @now and its outlook (history wiped) sees
 * the lowest headroom within the lead time at @low (<= @headroom): a spike
 * of the difference taken and given back a second ago, no trend.
 */
static inline void rig_view(struct target *t, uint64_t now, uint64_t headroom,
			    uint64_t low)
{
	const uint64_t sec = 1000000000ULL;

	outlook_init(&t->sm.outlook);
	t->sm.headroom = headroom;
	if (low < headroom) {
		outlook_push(&t->sm.outlook, now - sec, headroom);
		outlook_push(&t->sm.outlook, now - sec, low);
	}
	outlook_push(&t->sm.outlook, now, headroom);
}

/* Finish every evictor of @ts at @now (commands out told) and free it all. */
static inline void rig_release(struct targets *ts, uint64_t now)
{
	for (int i = 0; i < RC_MAX_TARGETS; i++) {
		if (ts->t[i] && ts->t[i]->evicting)
			evictor_finish(&ts->t[i]->ev, now);
		free(ts->t[i]);
	}
	memset(ts, 0, sizeof(*ts));
}

#endif /* RAMCACHE_TARGETS_RIG_H */
