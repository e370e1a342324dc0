// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The numbers of a summary line and of the start event; see summary.h. */
#include <string.h>

#include "executors/summary.h"

void summary_memory(const struct sampler *sm, struct summary *s)
{
	s->mem_available = sm->mi.mem_available;
	s->has_memcg = sm->has_cg;
	s->headroom = sm->headroom;
	if (!sm->has_cg)
		return;
	s->memcg_limit = sm->cs.limit;
	s->memcg_usage = sm->cs.usage;
	s->has_limit_events = sm->cs.self.ev.has_limit_events;
	s->memcg_high = sm->cs.self.ev.high;
	s->memcg_max = sm->cs.self.ev.max;
	s->has_swap_events = sm->cs.self.ev.has_swap_events;
	s->swap_max = sm->cs.self.ev.swap_max;
	s->swap_fail = sm->cs.self.ev.swap_fail;
}

void summary_level(const struct pressure_watch *lw, struct summary *s)
{
	s->level = policy_level_name(lw->cur.level);
	s->reasons = lw->cur.reasons;
	s->has_eta = lw->in.has_eta;
	s->eta_s = lw->in.eta_ns / 1e9;
	s->refault_file_s = lw->cur.rates.refault_file;
	s->refault_anon_s = lw->cur.rates.refault_anon;
	s->swap_in_s = lw->cur.rates.swap_in;
	s->swap_out_s = lw->cur.rates.swap_out;
	s->majflt_s = lw->cur.rates.major_faults;
	s->psi = lw->in.psi_present;
	s->psi_some = lw->in.psi_some_avg10;
	s->psi_full = lw->in.psi_full_avg10;
	if (lw->have_prev) {
		s->refaults_from = lw->refault_memcg ? "memcg" : "system";
		s->swap_from = lw->swap_memcg ? "memcg" : "system";
		s->psi_from = lw->psi_memcg ? "memcg" : "system";
	}
}

void summary_faults(struct bpfstate *bpf, bool from_bpf, pid_t pid,
		    struct fault_count *fc, double dt, struct summary *s)
{
	struct track_totals tt;
	struct rc_pidstat ps;
	struct rc_vmstat vm;
	uint64_t n;

	if (from_bpf) {
		if (bpfstate_totals(bpf, pid, &tt))
			return;
		n = tt.faults; /* since tracking began */
		if (!fc->has)
			fc->base = fc->last = 0;
		fc->has = true;
	} else if (pid ? meminfo_pidstat_read(RC_PROC_ROOT, pid, &ps)
		       : meminfo_vmstat_read(RC_PROC_ROOT, &vm)) {
		return; /* gone: the last figures stand */
	} else {
		n = pid ? ps.minflt + ps.majflt : vm.pgfault;
	}
	if (!fc->has) {
		fc->base = fc->last = n;
		fc->has = true;
	}
	if (!s)
		return;
	s->faults = n - fc->base;
	s->faults_per_s = dt > 0 && n >= fc->last ? (n - fc->last) / dt : 0;
	fc->last = n;
}

void summary_stalls(struct bpfstate *bpf, pid_t pid, struct track_totals *prev,
		    struct summary *s)
{
	struct track_totals tt;

	if (bpfstate_totals(bpf, pid, &tt))
		memset(&tt, 0, sizeof(tt));
	for (int k = 0; k < RC_RECLAIM_KINDS; k++) {
		s->stalls[k] = tt.reclaim_count[k] - prev->reclaim_count[k];
		s->stall_ns[k] = tt.reclaim_ns[k] - prev->reclaim_ns[k];
	}
	*prev = tt;
}

void summary_target(const struct target *t, uint64_t now, uint64_t horizon_ns,
		    struct summary *s)
{
	struct rc_view v;

	s->pid = t->pid;
	s->tag = &t->tag;
	s->rss = t->sm.rss;
	s->has_rss_file = t->has_rss_file;
	s->rss_file = t->rss_file;
	if (t->sm.sampled) {
		sampler_view(&t->sm, now, horizon_ns, &v);
		s->has_forecast = true;
		s->forecast = v.low;
	}
	s->threshold_headroom = t->thr.headroom_min;
	s->threshold_inactive = t->thr.inactive_min;
	if (t->sm.has_cg) {
		s->has_cgroup_oom = true;
		s->oom_kills_cgroup =
			t->sm.cs.self.oom_kill >= t->oom_base
				? t->sm.cs.self.oom_kill - t->oom_base
				: 0;
	}
	if (t->evicting) {
		s->evict_sent = t->ev.st.sent;
		s->evict_acked = t->ev.st.acked;
		s->evict_timeouts = t->ev.st.timeouts;
		s->evict_busy = t->ev.st.by_status[RAMCACHE_ACK_BUSY];
		s->bytes_evicted = t->ev.st.bytes_freed;
	}
}

void summary_start(const struct target *t, const struct rc_thresholds *sys_thr,
		   const struct probes *probes, const char *fault_probes,
		   struct start_info *si)
{
	memset(si, 0, sizeof(*si));
	si->probes = probes;
	si->fault_probes = fault_probes;
	si->headroom = sys_thr->headroom_min;
	si->inactive = sys_thr->inactive_min;
	if (!t)
		return;
	si->pid = t->pid;
	si->ns_pid = t->ctl.ns_pid;
	si->comm = t->comm;
	if (t->sm.has_cg) {
		si->memcg = t->sm.cg.path;
		si->memcg_version = t->sm.cg.version;
	}
	if (t->evicting)
		si->control = t->ev.path;
	si->headroom = t->thr.headroom_min;
	si->inactive = t->thr.inactive_min;
}
