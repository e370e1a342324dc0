/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The agent's side of core/faultwatch.h: the programs on page faults
 * attached only while a followed domain nears its reserve (or the agent
 * is busy), switched and told (a fault_probes event, metrics); while
 * they are off, reads come often enough to see a domain coming near.
 */
#ifndef RAMCACHE_FAULTPROBES_H
#define RAMCACHE_FAULTPROBES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/cadence.h"
#include "core/faultwatch.h"
#include "executors/targets.h"
#include "kernel/bpfstate.h"
#include "emit/metrics.h"
#include "emit/out.h"
#include "proc/sampler.h"

struct faultprobes {
	struct faultwatch fw;	/* on or off, and since when */
	bool failed;		/* they failed to attach: reads only */
	uint64_t far;		/* the nearest domain, at the last look */
	uint64_t last_stall_ns; /* last reclaim stall, or OOM kill of ours */
	uint64_t horizon_ns;	/* of the forecast that tells how far */
	bool always;		/* --fault-probes on: never switched off */
	/* what it reads, and where it tells */
	const struct targets *ts;
	const struct sampler *sys;	     /* the machine's */
	const struct rc_thresholds *sys_thr; /* in force without a target */
	struct bpfstate *bpf;
	struct out *out;
	struct metrics *m;
};

/* Attach (@on) or detach the programs on page faults; how long it took. */
uint64_t faultprobes_switch(struct faultprobes *fp, bool on);

/* After a read at @now: the programs on or off as the domains need. */
void faultprobes_watch(struct faultprobes *fp, uint64_t now);

/* While they are off, @cad's reads come often enough for the nearest. */
void faultprobes_cadence(const struct faultprobes *fp, struct cadence *cad);

#endif /* RAMCACHE_FAULTPROBES_H */
