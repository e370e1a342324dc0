// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>

#include "executors/pressure_watch.h"

void pressure_watch_init(struct pressure_watch *lw, const char *proc_root)
{
	memset(lw, 0, sizeof(*lw));
	lw->proc_root = proc_root ? proc_root : RC_PROC_ROOT;
}

void pressure_watch_kswapd(struct pressure_watch *lw, unsigned int nid,
			   bool awake)
{
	if (nid >= PRESSURE_MAX_NODES)
		nid = PRESSURE_MAX_NODES - 1;
	if (awake)
		lw->kswapd_awake[nid / 64] |= 1ULL << (nid % 64);
	else
		lw->kswapd_awake[nid / 64] &= ~(1ULL << (nid % 64));
}

static uint64_t delta(uint64_t now, uint64_t prev)
{
	return now > prev ? now - prev : 0;
}

/* The files of this period: system counters, the target's, PSI. */
struct pressure_read {
	struct rc_vmstat vm;
	struct rc_pidstat ps;
	struct rc_cgroup_events cg;
	struct rc_psi psi;
};

static int read_period(struct pressure_watch *lw,
		       const struct pressure_watch_ctx *c,
		       struct pressure_read *r)
{
	int err;

	memset(r, 0, sizeof(*r));
	err = meminfo_vmstat_read(lw->proc_root, &r->vm);
	if (err)
		return err;
	if (c->pid > 0 && meminfo_pidstat_read(lw->proc_root, c->pid, &r->ps))
		r->ps.majflt = lw->prev_majflt;
	if (meminfo_psi_read(lw->proc_root, &r->psi))
		r->psi.available = false;
	if (c->cg) {
		r->cg = c->cg->ev;
		/* a new cgroup (--match found another process) starts afresh */
		if (c->cg_ino != lw->prev_cg_ino) {
			lw->prev_cg = r->cg;
			lw->prev_cg_ino = c->cg_ino;
		}
		if (c->cg->psi.available)
			r->psi = c->cg->psi;
	} else {
		lw->prev_cg_ino = 0;
	}
	return 0;
}

/* The next period starts at @now with these counters. */
static void start_period(struct pressure_watch *lw,
			 const struct pressure_watch_ctx *c,
			 const struct pressure_read *r, uint64_t now)
{
	lw->prev_vm = r->vm;
	if (c->cg)
		lw->prev_cg = r->cg;
	lw->prev_majflt = r->ps.majflt;
	lw->prev_direct = c->direct_stalls;
	lw->prev_memcg = c->memcg_stalls;
	lw->last_ns = now;
}

/* Counts of the period, from the cgroup where it counts them. */
static void period_counts(struct pressure_watch *lw,
			  const struct pressure_watch_ctx *c,
			  const struct pressure_read *r,
			  struct rc_pressure_in *in)
{
	const struct rc_vmstat *pv = &lw->prev_vm;

	for (unsigned int i = 0; i < PRESSURE_MAX_NODES / 64; i++)
		in->kswapd_awake |= lw->kswapd_awake[i] != 0;
	in->direct_reclaims = delta(c->direct_stalls, lw->prev_direct);
	in->memcg_reclaims = delta(c->memcg_stalls, lw->prev_memcg);
	if (c->cg && r->cg.has_limit_events) {
		/* the cgroup's own count of reclaim at memory.high/max */
		uint64_t hits = delta(r->cg.high, lw->prev_cg.high) +
				delta(r->cg.max, lw->prev_cg.max);

		if (hits > in->memcg_reclaims)
			in->memcg_reclaims = hits;
	}
	lw->refault_memcg = c->cg && r->cg.has_refault;
	lw->swap_memcg = c->cg && (r->cg.has_swap ||
				   (r->cg.has_swap_bytes && r->cg.has_refault));
	lw->psi_memcg = c->cg && c->cg->psi.available;
	if (lw->refault_memcg) {
		in->refault_anon =
			delta(r->cg.refault_anon, lw->prev_cg.refault_anon);
		in->refault_file =
			delta(r->cg.refault_file, lw->prev_cg.refault_file);
	} else {
		in->refault_anon = delta(r->vm.workingset_refault_anon,
					 pv->workingset_refault_anon);
		in->refault_file = delta(r->vm.workingset_refault_file,
					 pv->workingset_refault_file);
	}
	if (lw->swap_memcg && r->cg.has_swap) {
		in->swap_in = delta(r->cg.pswpin, lw->prev_cg.pswpin);
		in->swap_out = delta(r->cg.pswpout, lw->prev_cg.pswpout);
	} else if (lw->swap_memcg) {
		/*
		 * v2 without pswpin/pswpout (6.1): anon refaults are the pages
		 * read back from swap, the growth of memory.swap.current the
		 * net swap-out (in the 4 KiB pages the thresholds count).
		 */
		in->swap_in =
			delta(r->cg.refault_anon, lw->prev_cg.refault_anon);
		in->swap_out =
			delta(r->cg.swap_bytes, lw->prev_cg.swap_bytes) / 4096;
	} else {
		in->swap_in = delta(r->vm.pswpin, pv->pswpin);
		in->swap_out = delta(r->vm.pswpout, pv->pswpout);
	}
	in->major_faults = delta(r->ps.majflt, lw->prev_majflt);
}

int pressure_watch_update(struct pressure_watch *lw, uint64_t now,
			  const struct pressure_watch_ctx *c)
{
	struct rc_pressure_in in = { 0 };
	struct rc_pressure out;
	struct pressure_read r;
	int err;

	err = read_period(lw, c, &r);
	if (err)
		return err;
	if (!lw->have_prev) {
		start_period(lw, c, &r, now);
		lw->have_prev = true;
	}
	in.interval_ns = now - lw->last_ns;
	period_counts(lw, c, &r, &in);
	in.psi_present = r.psi.available;
	in.psi_some_avg10 = r.psi.some_avg10;
	in.psi_full_avg10 = r.psi.has_full ? r.psi.full_avg10 : 0;
	in.headroom = c->headroom;
	in.thr = c->thr;
	in.has_eta = c->has_eta;
	in.eta_ns = c->eta_ns;
	in.cannot_free = c->cannot_free;
	policy_pressure_eval(&in, &out);
	lw->in = in;
	/* an empty period changes nothing */
	if (in.interval_ns)
		start_period(lw, c, &r, now);
	if (out.level != lw->cur.level) {
		lw->cur = out;
		lw->reported = out.reasons;
		return LEVEL_CHANGED;
	}
	lw->cur = out;
	/* a level entered on the forecast alone says so before swap starts */
	if (out.reasons & ~lw->reported) {
		lw->reported |= out.reasons;
		return LEVEL_NEW_REASON;
	}
	return 0;
}
