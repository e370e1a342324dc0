/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The loop's clock: one one-shot timer, armed for the next wake-up, and
 * when the loop reads and judges next (core/cadence.h plans how often).
 */
#ifndef RAMCACHE_TICK_H
#define RAMCACHE_TICK_H

#include <stdint.h>

#include "core/cadence.h"
#include "core/units.h"
#include "kernel/bpfstate.h"

struct tick {
	int timerfd;
	struct bpfstate *bpf;	/* whose RSS events wake the loop */
	struct cadence cad;	/* as planned at the last tick */
	uint64_t armed_ns;	/* when the timer fires next */
	uint64_t next_read_ns;	/* the next read of meminfo and cgroups */
	uint64_t next_level_ns; /* the next level update */
	uint64_t last_event_ns; /* last reclaim, kswapd or OOM event */
	uint64_t rss_wake;	/* bytes of RSS movement that wake the loop */
};

/* Wake the loop at @when (CLOCK_MONOTONIC): the timer is one-shot. */
void tick_arm(struct tick *tk, uint64_t when);

/* ... no later than @at. */
void tick_arm_by(struct tick *tk, uint64_t at);

/* Calm no more: read and judge at once, then tick as when busy. */
void tick_wake_now(struct tick *tk, uint64_t now);

/*
 * An event made a target pressing while the loop does not tick (busy but
 * far): the next read comes forward (at once only when calm).
 */
void tick_read_soon(struct tick *tk, uint64_t now);

/* A reclaim stall, kswapd awake or an OOM kill at @now. */
void tick_kernel_told(struct tick *tk, uint64_t now);

/*
 * Plan the cadence from @ci; while calm, a target's RSS events wake the
 * loop only once its RSS has moved a quarter of the way to the near point.
 */
void tick_plan(struct tick *tk, const struct cadence_in *ci);

#endif /* RAMCACHE_TICK_H */
