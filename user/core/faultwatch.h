/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * When the per-fault programs (page_fault_user, rss_stat) are attached.
 * Pure: the caller reads the domains and attaches; this says when.
 *
 * Every process on the machine pays for a program on those tracepoints on
 * each of its page faults, tracked or not. While every followed domain is
 * far from the point where a command could go out, the agent needs none of
 * what they tell (a fault burst, an RSS step the moment it happens): it
 * reads the cgroup's usage and the executors' RSS from /proc instead, at a
 * period short enough that memory cannot run out between two reads. So:
 *
 *   far = headroom - reserve - (spike - excursion) - shrink x LEAD
 *
 * per domain (reserve: the headroom under which commands go out; spike
 * and shrink: what the domain's outlook expects, so a climb or a known
 * transient brings the programs on early). The reads come every
 * far / RATE (within [POLL_MIN, POLL_MAX]): RATE is more than page faults
 * can take on a few cores, so between two reads far cannot go from above
 * the margin to below 0. The programs go on when the least far of the
 * domains is within the margin, RATE x (POLL_MIN + the last attach time),
 * or when the domains are busy (commands out, a reclaim stall or an OOM
 * kill of theirs lately); they go off once every domain has been more
 * than twice the margin away, and not busy, for CALM_NS.
 */
#ifndef RAMCACHE_FAULTWATCH_H
#define RAMCACHE_FAULTWATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/units.h"

#define FAULTWATCH_RATE	       (4ULL << 30) /* bytes/s */
#define FAULTWATCH_POLL_MIN_NS (50 * NSEC_PER_MSEC)
#define FAULTWATCH_POLL_MAX_NS (5 * NSEC_PER_SEC)
/* a shrinking headroom is looked at this far ahead */
#define FAULTWATCH_LEAD_NS (2 * NSEC_PER_SEC)
/* far and quiet this long before the programs go off */
#define FAULTWATCH_CALM_NS (10 * NSEC_PER_SEC)

/* One domain's figures, as its outlook has them. */
struct faultwatch_domain {
	uint64_t headroom;
	uint64_t reserve; /* commands go out below this */
	uint64_t spike;	  /* the transient expected, less what is taken */
	double trend;	  /* bytes/s of the headroom, < 0: shrinking */
};

/* Bytes @d is from needing the programs (0: it needs them now). */
uint64_t faultwatch_far(const struct faultwatch_domain *d);

/* The period of the reads while the programs are off, @far away. */
uint64_t faultwatch_poll_ns(uint64_t far);

/* The margin: what RATE takes in POLL_MIN and @attach_ns. */
uint64_t faultwatch_margin(uint64_t attach_ns);

enum faultwatch_why {
	FAULTWATCH_KEEP = 0,
	FAULTWATCH_NEAR, /* on: a domain is within the margin */
	FAULTWATCH_BUSY, /* on: commands out, or a stall or OOM kill lately */
	FAULTWATCH_CALM, /* off: every domain far and quiet CALM_NS */
	FAULTWATCH_FAR,	 /* off at the first step: every domain far */
};

struct faultwatch {
	bool on;
	bool decided; /* the first step was taken: it decides at once */
	uint64_t far_since_ns; /* far and quiet since, 0: not */
	uint64_t attach_ns;    /* how long the last attach took */
};

/*
 * At @now_ns, the least far of the domains @far, @busy as above: what to
 * do (KEEP, or the reason to switch; w->on is switched already). The
 * first step (the programs are on from the start) turns them off at once
 * when far enough (FAR), with no calm period.
 */
enum faultwatch_why faultwatch_step(struct faultwatch *w, uint64_t far,
				    bool busy, uint64_t now_ns);

/* "near", "busy", "calm" (or "" for KEEP). */
const char *faultwatch_why_name(enum faultwatch_why why);

#endif /* RAMCACHE_FAULTWATCH_H */
