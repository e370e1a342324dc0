// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The programs on page faults switched as domains near; see faultprobes.h. */
#include <string.h>

#include "executors/faultprobes.h"
#include "proc/clock.h"

#define for_each_target(ts, t, i)                \
	for (int i = 0; i < RC_MAX_TARGETS; i++) \
		if (((t) = (ts)->t[i]))

/* How far a domain, by its sampler @sm and reserves @thr, is from the
 * point where the programs on page faults are needed. */
static uint64_t far_of(struct faultprobes *fp, const struct sampler *sm,
		       const struct rc_thresholds *thr, uint64_t now)
{
	struct faultwatch_domain d = { 0 };
	struct rc_view v;

	if (!sm->sampled)
		return 0; /* nothing read yet */
	sampler_view(sm, now, fp->horizon_ns, &v);
	d.headroom = v.headroom;
	d.reserve = thr->inactive_min;
	d.spike = v.spike > v.excursion ? v.spike - v.excursion : 0;
	d.trend = v.trend;
	return faultwatch_far(&d);
}

/* The nearest of the domains followed (the machine without a target). */
static uint64_t least_far(struct faultprobes *fp, uint64_t now)
{
	uint64_t far, least = UINT64_MAX;
	struct target *t;

	if (!fp->ts->n)
		return far_of(fp, fp->sys, fp->sys_thr, now);
	for_each_target(fp->ts, t, i) {
		far = far_of(fp, &t->sm, &t->thr, now);
		if (far < least)
			least = far;
	}
	return least;
}

/* Commands out, or a reclaim stall or an OOM kill of ours lately. */
static bool faults_busy(struct faultprobes *fp, uint64_t now)
{
	struct target *t;

	if (fp->last_stall_ns && now - fp->last_stall_ns < FAULTWATCH_CALM_NS)
		return true;
	for_each_target(fp->ts, t, i)
		if (t->evicting && t->ev.nr_inflight)
			return true;
	return false;
}

/*
 * Tell the state of the programs on page faults: @why, by @margin, and
 * the switch took @took_ns.
 */
static void tell_faults(struct faultprobes *fp, const char *why,
			uint64_t margin, uint64_t took_ns)
{
	struct fault_probes_info f = { .on = fp->fw.on,
				       .why = why,
				       .far = fp->far,
				       .margin = margin,
				       .took_ns = took_ns };

	out_fault_probes(fp->out, &f);
}

/* Attach (@on) or detach the programs on page faults, timed. */
uint64_t faultprobes_switch(struct faultprobes *fp, bool on)
{
	uint64_t t0 = now_ns(), took;
	int err = bpfstate_faults(fp->bpf, on);

	took = now_ns() - t0;
	if (err) {
		out_warn(
			fp->out,
			"failed to attach the programs on page faults: %s; RSS is read from /proc instead",
			strerror(-err));
		bpfstate_faults(fp->bpf, false);
		fp->failed = true;
		on = false;
	} else if (on) {
		fp->fw.attach_ns = took;
	}
	fp->fw.on = on;
	metrics_fault_probes(fp->m, on, took);
	return took;
}

/* After a read: the programs on page faults on or off as needed. */
void faultprobes_watch(struct faultprobes *fp, uint64_t now)
{
	bool first = !fp->fw.decided, busy;
	uint64_t took, margin = faultwatch_margin(fp->fw.attach_ns);
	enum faultwatch_why why;

	if (fp->always || fp->failed)
		return;
	fp->far = least_far(fp, now);
	busy = faults_busy(fp, now);
	why = faultwatch_step(&fp->fw, fp->far, busy, now);
	if (why != FAULTWATCH_KEEP) {
		took = faultprobes_switch(fp, fp->fw.on);
		tell_faults(fp,
			    fp->failed ? "failed" : faultwatch_why_name(why),
			    margin, took);
	} else if (first) { /* on since the start: say why, once */
		tell_faults(fp, busy ? "busy" : "near", margin,
			    fp->fw.attach_ns);
	}
}

void faultprobes_cadence(const struct faultprobes *fp, struct cadence *cad)
{
	uint64_t p;

	if (fp->fw.on || !cad->read_ns)
		return;
	p = faultwatch_poll_ns(fp->far);
	if (p < cad->read_ns)
		cad->read_ns = p;
}
