// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The agent's pressure level and each domain's; see pressure_tell.h. */
#include "executors/pressure_tell.h"
#include "proc/clock.h"

#define for_each_target(ts, t, i)                \
	for (int i = 0; i < RC_MAX_TARGETS; i++) \
		if (((t) = (ts)->t[i]))

void pressure_tell_init(struct pressure_tell *lv)
{
	pressure_watch_init(&lv->lw, NULL);
	domain_pressure_init(&lv->dl, NULL);
	lv->err = 0;
}

void pressure_tell_kswapd(struct pressure_tell *lv, int nid, bool awake)
{
	pressure_watch_kswapd(&lv->lw, nid, awake);
	domain_pressure_kswapd(&lv->dl, nid, awake);
}

/* The sampler the agent's level goes by: one target's, or the machine's. */
static const struct sampler *sampler_of(const struct pressure_tell_env *env)
{
	const struct target *t = targets_single(env->ts);

	return t ? &t->sm : env->sys;
}

/* Domain @d's level: its own with several targets, else the agent's. */
static enum ramcache_level domain_level_of(const struct pressure_tell *lv,
					   const struct targets *ts, int d)
{
	return ts->n > 1 ? lv->dl.lw[d].cur.level : lv->lw.cur.level;
}

void pressure_tell_publish(const struct pressure_tell *lv,
			   const struct pressure_tell_env *env, uint64_t now,
			   uint64_t sys_eta_ns)
{
	struct domain_outlook o;

	if (!env->ts->n) {
		metrics_domain_set(env->m, 0, "machine", env->sys->mi.mem_total,
				   (int64_t)env->sys->headroom, sys_eta_ns,
				   lv->lw.cur.level);
		return;
	}
	for (int d = 0; d < RC_MAX_TARGETS; d++) {
		if (!env->ts->dom_refs[d] ||
		    domains_outlook(env->ts, d, env->denv, now, &o))
			continue;
		metrics_domain_set(env->m, (unsigned int)d, o.name, o.limit,
				   (int64_t)o.headroom,
				   o.v.has_eta ? o.v.eta_ns : METRICS_NO_ETA,
				   domain_level_of(lv, env->ts, d));
	}
}

/* The agent's headroom: the least of its targets', or the machine's. */
static uint64_t least_headroom(const struct pressure_tell_env *env)
{
	uint64_t h = sampler_of(env)->headroom;
	struct target *t;

	for_each_target(env->ts, t, i)
		if (t->sm.headroom < h)
			h = t->sm.headroom;
	return h;
}

/*
 * With several targets, each domain's level from its own inputs; a
 * `pressure` event tagged with the domain when it changes. The reclaim
 * stalls BPF counts are the machine's (there are no per-cgroup ones):
 * every domain sees them, and its cgroup's own memory.events beside.
 */
static void update_domains(struct pressure_tell *lv,
			   const struct pressure_tell_env *env, uint64_t now,
			   const struct pressure_watch_ctx *base)
{
	for (int d = 0; d < RC_MAX_TARGETS; d++) {
		struct pressure_watch_ctx c = *base;
		struct pressure_info pi = { 0 };
		struct domain_outlook o;
		int changed;

		if (!env->ts->dom_refs[d] ||
		    domain_pressure_ctx(env->ts, d, env->denv, now, &c))
			continue;
		changed = domain_pressure_update(&lv->dl, env->ts, d, now, &c);
		/* the outlook (a forecast) again only for the name, and only
		 * when there is news to tell */
		if ((changed != LEVEL_CHANGED && changed != LEVEL_NEW_REASON) ||
		    domains_outlook(env->ts, d, env->denv, now, &o))
			continue;
		pi.level = policy_level_name(lv->dl.lw[d].cur.level);
		pi.reasons = lv->dl.lw[d].cur.reasons;
		pi.has_eta = c.has_eta;
		pi.eta_s = c.eta_ns / 1e9;
		pi.headroom = c.headroom;
		pi.pid = c.pid;
		pi.domain = o.name;
		out_pressure(env->out, &pi);
	}
}

/* The agent's own level's inputs at @now. */
static void pressure_inputs(const struct pressure_tell_env *env,
			    uint64_t direct, uint64_t memcg, uint64_t now,
			    struct pressure_watch_ctx *c)
{
	const struct target *one = targets_single(env->ts);
	const struct sampler *sm = sampler_of(env);
	struct rc_view v;

	c->pid = one ? one->pid : 0;
	c->direct_stalls = direct;
	c->memcg_stalls = memcg;
	c->headroom = sm->headroom;
	if (one && sm->has_cg) {
		c->cg = &sm->cs.self;
		c->cg_ino = sm->cg.ino;
	}
	c->thr = one ? one->thr : *env->sys_thr;
	c->cannot_free = one && one->evicting && one->ev.short_told;
	/* time until full from the settled trend: a spike is no warning */
	sampler_view(sm, now, env->horizon_ns, &v);
	if (v.has_eta) {
		c->has_eta = true;
		c->eta_ns = v.eta_ns;
	}
}

/* Publish the gauges and hand each evictor its domain's level. */
static void hand_on(struct pressure_tell *lv,
		    const struct pressure_tell_env *env, uint64_t now,
		    const struct pressure_watch_ctx *c)
{
	struct target *t;

	metrics_set_level(env->m, lv->lw.cur.level);
	metrics_set_headroom(env->m, (int64_t)least_headroom(env));
	pressure_tell_publish(lv, env, now,
			      c->has_eta ? c->eta_ns : METRICS_NO_ETA);
	for_each_target(env->ts, t, i)
		if (t->evicting)
			evictor_set_level(&t->ev,
					  t->dom >= 0
						  ? domain_level_of(lv, env->ts,
								    t->dom)
						  : lv->lw.cur.level);
}

void pressure_tell_update(struct pressure_tell *lv,
			  const struct pressure_tell_env *env, uint64_t direct,
			  uint64_t memcg, uint64_t now)
{
	struct pressure_info pi = { 0 };
	int prev = lv->lw.cur.level;
	struct pressure_watch_ctx c = { 0 };
	int changed;

	pressure_inputs(env, direct, memcg, now, &c);
	changed = pressure_watch_update(&lv->lw, now, &c);
	out_read_error(env->out, &lv->err, changed < 0 ? changed : 0,
		       "the kernel's reclaim counters");
	if (env->ts->n > 1)
		update_domains(lv, env, now, &c);
	hand_on(lv, env, now, &c);
	if (changed <= 0)
		return;
	pi.level = policy_level_name(lv->lw.cur.level);
	pi.reasons = lv->lw.cur.reasons;
	pi.has_eta = c.has_eta;
	pi.eta_s = c.eta_ns / 1e9;
	pi.headroom = sampler_of(env)->headroom;
	pi.pid = c.pid;
	out_pressure(env->out, &pi);
	if (changed == LEVEL_CHANGED)
		onlevel_run(env->out, env->cmds, env->ncmds, prev,
			    lv->lw.cur.level, lv->lw.cur.reasons, c.pid);
}
