/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The one clock the agent stamps with (CLOCK_MONOTONIC). */
#ifndef RAMCACHE_CLOCK_H
#define RAMCACHE_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "core/units.h"

/* CLOCK_MONOTONIC in ns, as the BPF programs and the control page use. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

#endif /* RAMCACHE_CLOCK_H */
