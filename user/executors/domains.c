// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Memory domains: group, plan and evict across executors; see domains.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "executors/domains.h"

struct domain {
	struct target *m[RC_MAX_TARGETS];
	int n;
	bool own; /* one member of several, for what it takes itself */
};

/* The targets of domain index @dom (only those evicting, if @evicting). */
static void gather(const struct targets *ts, int dom, bool evicting,
		   struct domain *d)
{
	d->n = 0;
	d->own = false;
	for (int i = 0; i < RC_MAX_TARGETS; i++) {
		struct target *t = ts->t[i];

		if (t && t->dom == dom && (t->evicting || !evicting))
			d->m[d->n++] = t;
	}
}

/* The outlook of a domain of several: their growth added up. */
static void shared_view(const struct domain *d, const struct domain_env *env,
			uint64_t now, uint64_t headroom, struct rc_view *v)
{
	struct rc_growth g[RC_MAX_TARGETS];
	struct rc_forecast f;

	memset(v, 0, sizeof(*v));
	v->headroom = v->settled = v->low = headroom;
	v->lead_ns = env->horizon_ns;
	for (int k = 0; k < d->n; k++)
		target_growth(d->m[k], now, env->window_ns, &g[k]);
	if (policy_domain_forecast(headroom, g, (size_t)d->n, env->horizon_ns,
				   &f))
		return;
	v->trend = f.rate;
	v->low = f.at_horizon < headroom ? f.at_horizon : headroom;
	v->has_eta = f.has_eta;
	v->eta_ns = f.eta_ns;
}

/*
 * The headroom now of domain @dom, from every member (evicting or not: all
 * of them take from the one limit); *@n their number. A member not read
 * yet counts with its estimate as it stands and no growth known.
 */
static uint64_t shared_headroom(const struct targets *ts, int dom, int *n)
{
	struct rc_share m[RC_MAX_TARGETS];

	*n = 0;
	for (int i = 0; i < RC_MAX_TARGETS; i++) {
		const struct target *t = ts->t[i];

		if (!t || t->dom != dom)
			continue;
		m[*n].read_headroom = t->sm.sampled ? t->sm.read_headroom
						    : t->sm.headroom;
		m[*n].read_rss = t->sm.sampled ? t->sm.read_rss : 0;
		m[*n].rss = t->sm.rss;
		(*n)++;
	}
	return policy_shared_headroom(m, (size_t)*n);
}

/* The outlook of domain @dom whose members to act on are @d. */
static void outlook(const struct targets *ts, int dom, const struct domain *d,
		    const struct domain_env *env, uint64_t now,
		    struct rc_view *v)
{
	int n;
	uint64_t headroom = shared_headroom(ts, dom, &n);

	if (n < 2 && d->n == 1) {
		sampler_view(&d->m[0]->sm, now, env->horizon_ns, v);
		return;
	}
	shared_view(d, env, now, headroom, v);
}

/* The domain's limit, the most an announcement may count for. */
static uint64_t limit_of(const struct target *t)
{
	return t->domain && t->sm.has_cg ? t->sm.cs.limit : t->sm.mi.mem_total;
}

/* What the members of @d announced and their RSS does not show yet. */
static uint64_t announced(const struct domain *d)
{
	uint64_t sum = 0, cap = limit_of(d->m[0]);

	for (int k = 0; k < d->n; k++) {
		uint64_t a = evictor_announced(&d->m[k]->ev, cap);

		sum = sum + a < sum ? UINT64_MAX : sum + a;
	}
	return sum;
}

/*
 * The plan view @v makes for the members @d, who take @ann bytes more
 * before long (announced, or their share of the domain's growth); its
 * headroom.
 */
static uint64_t plan_view(const struct domain *d, struct rc_view v,
			  uint32_t why, uint64_t ann, struct rc_plan *p)
{
	uint64_t over = 0;

	/* below 0: what the announcement overshoots is asked for too */
	if (ann > v.low)
		over = ann - v.low;
	v.low = v.low > ann ? v.low - ann : 0;
	/* members share the limit, so their thresholds are the same */
	outlook_plan(&v, &d->m[0]->thr, why != 0, p);
	if (p->evict)
		p->deficit = p->deficit + over < over ? UINT64_MAX
						      : p->deficit + over;
	for (int k = 0; k < d->n; k++)
		evictor_set_plan(&d->m[k]->ev, v.headroom,
				 p->evict ? p->deficit : 0);
	return v.headroom;
}

/* The plan the domain's outlook makes for @d, @ann more taken; its headroom. */
static uint64_t plan(const struct targets *ts, int dom, const struct domain *d,
		     const struct domain_env *env, uint64_t now, uint32_t why,
		     uint64_t ann, struct rc_plan *p)
{
	struct rc_view v;

	outlook(ts, dom, d, env, now, &v);
	return plan_view(d, v, why, ann, p);
}

int domains_outlook(const struct targets *ts, int dom,
		    const struct domain_env *env, uint64_t now,
		    struct domain_outlook *o)
{
	struct domain d;
	const struct target *t;

	memset(o, 0, sizeof(*o));
	gather(ts, dom, false, &d);
	if (!d.n)
		return -ENOENT;
	t = d.m[0];
	o->name = t->domain_path;
	/* the nearest limit's own size is not read; the tightest one is */
	o->limit = limit_of(t);
	outlook(ts, dom, &d, env, now, &o->v);
	o->headroom = o->v.headroom;
	return 0;
}

/*
 * The most one entry of @t, or all its commands out, may count for in a
 * domain of several (for the domain or for its own share): its RSS as the
 * kernel counts it. Alone, an executor that claims more than it holds
 * only fools itself: no cap (0).
 */
static uint64_t claim_cap(const struct domain *d, int k)
{
	uint64_t rss = d->m[k]->sm.rss, page = 4096;

	if (d->n < 2 && !d->own)
		return 0;
	return rss > page ? rss : page;
}

/*
 * What member @k's commands out count for against the domain's @deficit
 * at @now: no more than it holds, and those overdue (taken, not answered
 * for a fifth of the ack timeout) no more than an even share of the
 * deficit: an executor that takes commands and answers none, listing
 * fresh entries all along, must not hold the others' evictions for the
 * ack timeout.
 */
static uint64_t counted(const struct domain *d, int k, uint64_t deficit,
			uint64_t now)
{
	uint64_t cap = claim_cap(d, k);
	uint64_t out = evictor_pending(&d->m[k]->ev);
	uint64_t late = evictor_overdue(&d->m[k]->ev, now);
	uint64_t share = d->n > 1 ? deficit / (uint64_t)d->n : deficit;
	uint64_t n = out - late + (late < share ? late : share);

	return cap && n > cap ? cap : n;
}

/* An even share of @deficit overdue already: no more commands for now. */
static bool holds_its_share(const struct domain *d, int k, uint64_t deficit,
			    uint64_t now)
{
	return d->n > 1 &&
	       evictor_overdue(&d->m[k]->ev, now) >= deficit / (uint64_t)d->n;
}

/*
 * Memory about to run out (the lowest headroom expected within the lead
 * time below --headroom) and what the members could free without waiting
 * for a job to end (evictor_could_free(): inactive entries, and commands
 * out for them) does not cover the plan's deficit: each member says once
 * what of its own is out of reach (cannot_free), whatever commands for
 * active entries are out. The episode ends when a plan is covered again.
 */
static void tell_short(const struct domain *d, const struct rc_plan *p,
		       uint64_t now)
{
	const struct target *t = d->m[0];
	uint64_t limit = t->domain && t->sm.has_cg ? t->sm.cs.limit : 0;
	uint64_t could = 0;

	if (p->phase == RC_PHASE_HEADROOM)
		for (int k = 0; k < d->n && could < p->deficit; k++) {
			uint64_t c = evictor_could_free(&d->m[k]->ev, now);

			could = could + c < could ? UINT64_MAX : could + c;
		}
	for (int k = 0; k < d->n; k++) {
		if (p->phase != RC_PHASE_HEADROOM || could >= p->deficit)
			evictor_short_over(&d->m[k]->ev);
		else
			evictor_cannot_free(&d->m[k]->ev, p->deficit,
					    p->deficit - could, limit);
	}
}

/* Rank the entries of every member together and post the picks. */
static void post(const struct domain *d, const struct domain_env *env,
		 const struct rc_plan *p, uint64_t deficit,
		 struct evict_post *ep)
{
	struct rc_domain_member mm[RC_MAX_TARGETS];
	bool full[RC_MAX_TARGETS] = { false };
	struct rc_pick *picks;
	size_t total = 0;
	uint64_t covered;
	int n;

	for (int k = 0; k < d->n; k++) {
		uint64_t cap = claim_cap(d, k);
		uint64_t out = evictor_pending(&d->m[k]->ev);

		n = evictor_candidates(&d->m[k]->ev, ep->now, cap, &mm[k]);
		mm[k].weight = d->m[k]->weight;
		mm[k].min_bytes = policy_min_bytes(p);
		mm[k].spare_below = RC_TINY_BYTES;
		/* what it can still free: what it holds less what it has out */
		mm[k].capped = cap != 0;
		mm[k].cap = cap > out ? cap - out : 0;
		/* its share overdue already: the others are asked */
		if (holds_its_share(d, k, p->deficit, ep->now))
			mm[k].cap = 0;
		total += n > 0 ? (size_t)n : 0;
	}
	if (!total)
		return;
	picks = calloc(total, sizeof(*picks));
	if (!picks)
		return;
	n = policy_select_domain(mm, (size_t)d->n, deficit, p->phase,
				 env->policy, picks, total, &covered);
	ep->has_score = d->n > 1 || d->own;
	ep->charged = d->own ? "own" : "domain";
	for (int i = 0; i < n; i++) {
		uint32_t k = picks[i].member;

		/* one executor's ring full: the others still get theirs */
		if (full[k])
			continue;
		ep->score = picks[i].score;
		if (!evictor_post(&d->m[k]->ev, picks[i].idx, ep))
			full[k] = true;
	}
	free(picks);
}

/*
 * Post for the members @d what plan @p asks beyond @base bytes (asked
 * of the domain already), what they have out counted against it.
 */
static void post_plan(const struct domain *d, const struct domain_env *env,
		      uint64_t now, uint64_t headroom, const struct rc_plan *p,
		      uint64_t base)
{
	struct evict_post ep = { .now = now, .headroom = headroom, .plan = p };
	uint64_t pending = base;

	if (!p->evict)
		return;
	/* what a member has out counts for no more than it holds, and its
	 * overdue commands for no more than a share */
	for (int k = 0; k < d->n; k++)
		pending += counted(d, k, p->deficit, now);
	if (pending >= p->deficit)
		return;
	post(d, env, p, p->deficit - pending, &ep);
}

/* A lone executor: its own outlook, its announcement part of its plan. */
static void evaluate_one(const struct targets *ts, int dom,
			 const struct domain *d, const struct domain_env *env,
			 uint64_t now, uint32_t why)
{
	struct rc_plan p;
	uint64_t h = plan(ts, dom, d, env, now, why, announced(d), &p);

	tell_short(d, &p, now);
	post_plan(d, env, now, h, &p, 0);
}

/*
 * What each member of @d takes within the lead time: its share of what
 * the members' growth takes from the domain (@all, their outlook; shared
 * among those that grow by growth rate over --weight: a favoured member's
 * growth is charged more to the others that grow), and what it announced.
 */
static void takes_of(const struct domain *d, const struct domain_env *env,
		     uint64_t now, const struct rc_view *all, uint64_t *takes)
{
	uint64_t grown = all->headroom > all->low ? all->headroom - all->low
						  : 0;
	double rate[RC_MAX_TARGETS], sum = 0;

	for (int k = 0; k < d->n; k++) {
		struct rc_growth g;

		target_growth(d->m[k], now, env->window_ns, &g);
		rate[k] = isfinite(g.rate) && g.rate > 0 ? g.rate : 0;
		rate[k] /= policy_weight(d->m[k]->weight);
		sum += rate[k];
	}
	for (int k = 0; k < d->n; k++) {
		struct domain one = { .m = { d->m[k] }, .n = 1 };
		double share = sum > 0 ? (double)grown * (rate[k] / sum) : 0;
		uint64_t ann = announced(&one);

		takes[k] = share >= 1.8e19 ? UINT64_MAX : (uint64_t)share;
		takes[k] = takes[k] + ann < ann ? UINT64_MAX : takes[k] + ann;
	}
}

/*
 * Several executors on one limit. What is short now is the domain's: its
 * least valuable entries go, whoever holds them. What growth (or an
 * announced load) will take is charged to who grows: each member makes
 * room for its own share from its own entries, so no one's growth, a
 * burst it frees itself or a model it loads, evicts another's cache.
 */
static void evaluate_shared(const struct targets *ts, int dom,
			    const struct domain *d,
			    const struct domain_env *env, uint64_t now,
			    uint32_t why)
{
	uint64_t takes[RC_MAX_TARGETS], base;
	struct rc_view all, nowv;
	struct rc_plan p;

	outlook(ts, dom, d, env, now, &all);
	nowv = all;
	nowv.low = nowv.headroom; /* no growth: what is short now */
	plan_view(d, nowv, why, 0, &p);
	tell_short(d, &p, now);
	post_plan(d, env, now, nowv.headroom, &p, 0);
	base = p.evict ? p.deficit : 0;
	takes_of(d, env, now, &all, takes);
	for (int k = 0; k < d->n; k++) {
		struct domain one = { .m = { d->m[k] }, .n = 1, .own = true };

		if (!takes[k])
			continue;
		plan_view(&one, nowv, why, takes[k], &p);
		if (p.evict) /* its own growth it cannot make room for */
			tell_short(&one, &p, now);
		post_plan(&one, env, now, nowv.headroom, &p, base);
	}
}

static void evaluate(const struct targets *ts, int dom, const struct domain *d,
		     const struct domain_env *env, uint64_t now, uint32_t why)
{
	int n = 0;

	for (int i = 0; i < RC_MAX_TARGETS; i++)
		n += ts->t[i] && ts->t[i]->dom == dom;
	if (n < 2 && d->n == 1)
		evaluate_one(ts, dom, d, env, now, why);
	else
		evaluate_shared(ts, dom, d, env, now, why);
	for (int k = 0; k < d->n; k++)
		evictor_counted(&d->m[k]->ev);
}

void domains_evaluate(struct targets *ts, const struct domain_env *env,
		      uint64_t now, uint32_t why)
{
	struct domain d;

	for (int dom = 0; dom < RC_MAX_TARGETS; dom++) {
		if (!ts->dom_refs[dom])
			continue;
		gather(ts, dom, true, &d);
		if (d.n)
			evaluate(ts, dom, &d, env, now, why);
	}
}
