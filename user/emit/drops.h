/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Lost events and lines are never silent: told, at most every 10 s. */
#ifndef RAMCACHE_DROPS_H
#define RAMCACHE_DROPS_H

#include <stdint.h>

#include "emit/out.h"

#define DROPS_WARN_NS (10 * NSEC_PER_SEC)

struct drops {
	uint64_t events_told, lines_told; /* the totals told last */
	uint64_t next_warn_ns;		  /* 0: tell at once */
};

/*
 * The ring buffer has dropped @events and stdout @lines so far: a warning
 * for each that grew since it was last told, no sooner than DROPS_WARN_NS
 * after the last.
 */
void drops_tell(struct drops *d, struct out *o, uint64_t events, uint64_t lines,
		uint64_t now);

#endif /* RAMCACHE_DROPS_H */
