/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How many followed targets sit in each watched memory cgroup: the BPF
 * side's memcgs map holds an inode while at least one target is in it,
 * so one executor leaving does not stop the reports for the others.
 */
#ifndef RAMCACHE_MEMCGREF_H
#define RAMCACHE_MEMCGREF_H

#include <stdint.h>
#include <linux/types.h>

#include "pressure.h"

struct memcg_refs {
	uint64_t ino[RC_MAX_MEMCGS];
	unsigned int count[RC_MAX_MEMCGS]; /* 0: the entry is free */
};

/*
 * One more target in @ino (not 0): 1 when it is the first (watch it
 * now), 0 when it was counted already, -ENOSPC when RC_MAX_MEMCGS others
 * are.
 */
int memcgref_get(struct memcg_refs *r, uint64_t ino);
/*
 * One target fewer in @ino: 1 when it was the last (unwatch it now), 0
 * when others remain, -ENOENT when @ino was not counted.
 */
int memcgref_put(struct memcg_refs *r, uint64_t ino);

#endif /* RAMCACHE_MEMCGREF_H */
