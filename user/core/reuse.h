/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reuse seen in this session: how many later prompts used each entry of
 * an executor's page again, counted from the page alone (an entry whose
 * used_generation moved on while it stayed was a cache hit of a later
 * prompt; an upstream node that several workflows share gathers a hit from
 * each). Pure: the caller passes each table it reads.
 *
 * A fixed table of RC_REUSE_SLOTS ids; when it is three quarters full it
 * starts again (what it knew is lost, nothing else): the work per call is
 * bounded by the entries passed whatever the page claims.
 */
#ifndef RAMCACHE_REUSE_H
#define RAMCACHE_REUSE_H

#include <stddef.h>
#include <stdint.h>

#include "core/policy.h"

#define RC_REUSE_SLOTS 8192 /* power of two */

struct rc_reuse_slot {
	uint64_t id; /* 0: free */
	uint64_t used_generation;
	uint32_t hits;
};

struct rc_reuse {
	struct rc_reuse_slot s[RC_REUSE_SLOTS];
	size_t n;
};

void reuse_init(struct rc_reuse *r);

/* Note the entries of one read of the table (any window of it). */
void reuse_note(struct rc_reuse *r, const struct rc_entry *e, size_t n);

/* Later prompts that used entry @id again (0 if never seen). */
uint32_t reuse_hits(const struct rc_reuse *r, uint64_t id);

#endif /* RAMCACHE_REUSE_H */
