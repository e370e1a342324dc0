// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "core/faultwatch.h"

uint64_t faultwatch_far(const struct faultwatch_domain *d)
{
	/* written so that a NaN trend makes need NaN: no room */
	double shrink = d->trend >= 0 ? 0 : -d->trend;
	double need = (double)d->reserve + (double)d->spike +
		      shrink * (FAULTWATCH_LEAD_NS / 1e9);

	/* a NaN trend counts as no room at all */
	if (!(need < (double)d->headroom))
		return 0;
	return (uint64_t)((double)d->headroom - need);
}

uint64_t faultwatch_poll_ns(uint64_t far)
{
	/* far / RATE in ns: fits 64 bits for any byte count */
	uint64_t ns = (uint64_t)((unsigned __int128)far * NSEC_PER_SEC /
				 FAULTWATCH_RATE);

	if (ns < FAULTWATCH_POLL_MIN_NS)
		return FAULTWATCH_POLL_MIN_NS;
	return ns > FAULTWATCH_POLL_MAX_NS ? FAULTWATCH_POLL_MAX_NS : ns;
}

uint64_t faultwatch_margin(uint64_t attach_ns)
{
	uint64_t ns =
		FAULTWATCH_POLL_MAX_NS; /* an attach that slow: the most */

	if (attach_ns < FAULTWATCH_POLL_MAX_NS - FAULTWATCH_POLL_MIN_NS)
		ns = FAULTWATCH_POLL_MIN_NS + attach_ns;
	return (uint64_t)((unsigned __int128)FAULTWATCH_RATE * ns /
			  NSEC_PER_SEC);
}

enum faultwatch_why faultwatch_step(struct faultwatch *w, uint64_t far,
				    bool busy, uint64_t now_ns)
{
	uint64_t margin = faultwatch_margin(w->attach_ns);

	if (!w->decided) {
		w->decided = true;
		if (w->on && !busy && far > 2 * margin) {
			w->on = false;
			return FAULTWATCH_FAR;
		}
	}
	if (!w->on) {
		if (!busy && far > margin)
			return FAULTWATCH_KEEP;
		w->on = true;
		w->far_since_ns = 0;
		return busy ? FAULTWATCH_BUSY : FAULTWATCH_NEAR;
	}
	if (busy || far <= 2 * margin) {
		w->far_since_ns = 0;
		return FAULTWATCH_KEEP;
	}
	if (!w->far_since_ns) {
		w->far_since_ns = now_ns;
		return FAULTWATCH_KEEP;
	}
	if (now_ns - w->far_since_ns < FAULTWATCH_CALM_NS)
		return FAULTWATCH_KEEP;
	w->on = false;
	w->far_since_ns = 0;
	return FAULTWATCH_CALM;
}

const char *faultwatch_why_name(enum faultwatch_why why)
{
	switch (why) {
	case FAULTWATCH_NEAR:
		return "near";
	case FAULTWATCH_BUSY:
		return "busy";
	case FAULTWATCH_CALM:
		return "calm";
	case FAULTWATCH_FAR:
		return "far";
	default:
		return "";
	}
}
