/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Pacing of evaluations. An evaluation reads and scores the executors'
 * whole entry tables, which whoever writes a page makes as big as it likes
 * (65536 entries). So requests are coalesced (one run for however many
 * events asked since the last) and the next run waits PACE_DUTY times as
 * long as the last one took: evaluating takes at most 1/(1 + PACE_DUTY) of
 * the loop, the rest is left for the ring buffer. Pure.
 */
#ifndef RAMCACHE_PACE_H
#define RAMCACHE_PACE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/units.h"

#define PACE_DUTY	4
#define PACE_MIN_GAP_NS (2 * NSEC_PER_MSEC)

struct pace {
	bool due;	   /* asked for since the last run */
	uint32_t why;	   /* the latest request that named a reason */
	uint64_t requests; /* since start */
	uint64_t runs;	   /* since start */
	uint64_t next_ns;  /* no run before this */
};

/* Ask for a run; @why a reason bit (RAMCACHE_REASON_*) or 0. */
void pace_request(struct pace *p, uint32_t why);

/*
 * May a run start at @now? True when one was asked for and the last one's
 * wait is over: the requests are taken, their reason in *@why.
 */
bool pace_start(struct pace *p, uint64_t now, uint32_t *why);

/* The run begun at @start ended at @end: the next waits after it. */
void pace_done(struct pace *p, uint64_t start, uint64_t end);

#endif /* RAMCACHE_PACE_H */
