// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>

#include "level.h"

void level_init(struct level_watch *lw, const char *proc_root)
{
	memset(lw, 0, sizeof(*lw));
	lw->proc_root = proc_root ? proc_root : RC_PROC_ROOT;
}

void level_kswapd(struct level_watch *lw, unsigned int nid, bool awake)
{
	if (nid >= LEVEL_MAX_NODES)
		nid = LEVEL_MAX_NODES - 1;
	if (awake)
		lw->kswapd_awake[nid / 64] |= 1ULL << (nid % 64);
	else
		lw->kswapd_awake[nid / 64] &= ~(1ULL << (nid % 64));
}

static uint64_t delta(uint64_t now, uint64_t prev)
{
	return now > prev ? now - prev : 0;
}

int level_update(struct level_watch *lw, uint64_t now,
		 const struct level_ctx *c)
{
	struct rc_pressure_in in = { 0 };
	struct rc_pidstat ps = { 0 };
	struct rc_cgroup_events cg = { 0 };
	struct rc_pressure out;
	struct rc_vmstat vm;
	struct rc_psi psi;
	double secs;
	int err;

	err = rc_vmstat_read(lw->proc_root, &vm);
	if (err)
		return err;
	if (c->pid > 0 && rc_pidstat_read(lw->proc_root, c->pid, &ps))
		ps.majflt = lw->prev_majflt;
	if (rc_psi_read(lw->proc_root, &psi))
		psi.available = false;

	if (c->cg) {
		cg = c->cg->ev;
		/* a new cgroup (--match found another process) starts afresh */
		if (c->cg_ino != lw->prev_cg_ino) {
			lw->prev_cg = cg;
			lw->prev_cg_ino = c->cg_ino;
		}
		if (c->cg->psi.available)
			psi = c->cg->psi;
	} else {
		lw->prev_cg_ino = 0;
	}

	if (!lw->have_prev) {
		lw->prev_vm = vm;
		lw->prev_majflt = ps.majflt;
		lw->prev_direct = c->direct_stalls;
		lw->prev_memcg = c->memcg_stalls;
		lw->last_ns = now;
		lw->have_prev = true;
	}
	in.interval_ns = now - lw->last_ns;
	for (unsigned int i = 0; i < LEVEL_MAX_NODES / 64; i++)
		in.kswapd_awake |= lw->kswapd_awake[i] != 0;
	in.direct_reclaims = delta(c->direct_stalls, lw->prev_direct);
	in.memcg_reclaims = delta(c->memcg_stalls, lw->prev_memcg);
	if (c->cg && cg.has_limit_events) {
		/* the cgroup's own count of reclaim at memory.high/max */
		uint64_t hits = delta(cg.high, lw->prev_cg.high) +
				delta(cg.max, lw->prev_cg.max);

		if (hits > in.memcg_reclaims)
			in.memcg_reclaims = hits;
	}
	lw->refault_memcg = c->cg && cg.has_refault;
	lw->swap_memcg = c->cg && (cg.has_swap ||
				   (cg.has_swap_bytes && cg.has_refault));
	lw->psi_memcg = c->cg && c->cg->psi.available;
	if (lw->refault_memcg) {
		in.refault_anon =
			delta(cg.refault_anon, lw->prev_cg.refault_anon);
		in.refault_file =
			delta(cg.refault_file, lw->prev_cg.refault_file);
	} else {
		in.refault_anon = delta(vm.workingset_refault_anon,
					lw->prev_vm.workingset_refault_anon);
		in.refault_file = delta(vm.workingset_refault_file,
					lw->prev_vm.workingset_refault_file);
	}
	if (lw->swap_memcg && cg.has_swap) {
		in.swap_in = delta(cg.pswpin, lw->prev_cg.pswpin);
		in.swap_out = delta(cg.pswpout, lw->prev_cg.pswpout);
	} else if (lw->swap_memcg) {
		/*
		 * v2 without pswpin/pswpout (6.1): anon refaults are the pages
		 * read back from swap, the growth of memory.swap.current the
		 * net swap-out (in the 4 KiB pages the thresholds count).
		 */
		in.swap_in = delta(cg.refault_anon, lw->prev_cg.refault_anon);
		in.swap_out = delta(cg.swap_bytes, lw->prev_cg.swap_bytes) /
			      4096;
	} else {
		in.swap_in = delta(vm.pswpin, lw->prev_vm.pswpin);
		in.swap_out = delta(vm.pswpout, lw->prev_vm.pswpout);
	}
	in.major_faults = delta(ps.majflt, lw->prev_majflt);
	in.psi_present = psi.available;
	in.psi_some_avg10 = psi.some_avg10;
	in.psi_full_avg10 = psi.has_full ? psi.full_avg10 : 0;
	in.headroom = c->headroom;
	in.thr = c->thr;
	in.has_eta = c->has_eta;
	in.eta_ns = c->eta_ns;
	rc_pressure_eval(&in, &out);

	secs = in.interval_ns ? in.interval_ns / 1e9 : 1.0;
	lw->refault_file_s = in.refault_file / secs;
	lw->refault_anon_s = in.refault_anon / secs;
	lw->swap_in_s = in.swap_in / secs;
	lw->swap_out_s = in.swap_out / secs;
	lw->majflt_s = in.major_faults / secs;
	lw->psi_available = psi.available;
	lw->psi_some = psi.some_avg10;
	lw->psi_full = psi.full_avg10;
	lw->in = in;

	/* the next period starts now; an empty period changes nothing */
	if (in.interval_ns) {
		lw->prev_vm = vm;
		if (c->cg)
			lw->prev_cg = cg;
		lw->prev_majflt = ps.majflt;
		lw->prev_direct = c->direct_stalls;
		lw->prev_memcg = c->memcg_stalls;
		lw->last_ns = now;
	}
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
