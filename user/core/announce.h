/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What an executor's announcement counts for: bytes it is about to take at
 * once (a model load) that its RSS does not show yet, written on its page
 * as expect_bytes and expect_ns (docs/control-page.md, "Announcing an
 * allocation"). The agent counts what the RSS has not grown by since it
 * first read the announcement, no more than the domain's limit, and
 * forgets one whose stamp is RAMCACHE_EXPECT_TTL_NS away from now (either
 * way: the stamp is the executor's, untrusted). Pure.
 */
#ifndef RAMCACHE_ANNOUNCE_H
#define RAMCACHE_ANNOUNCE_H

#include <stdbool.h>
#include <stdint.h>

struct rc_announce {
	uint64_t ns;	/* the executor's expect_ns; 0: none in force */
	uint64_t bytes; /* its expect_bytes */
	uint64_t rss0;	/* the executor's lowest RSS since it was first read */
};

/*
 * The page says @ns and @bytes at @now, the executor's RSS being @rss:
 * @a follows (a new stamp takes the RSS as its base; 0 bytes, a 0 stamp
 * or a stale one is none). True when the announcement in force changed.
 */
bool announce_read(struct rc_announce *a, uint64_t ns, uint64_t bytes,
		   uint64_t rss, uint64_t now);

/*
 * The executor's RSS is now @rss: a fall (what commands freed while it
 * waited to load) lowers the base the growth is counted from.
 */
void announce_rss(struct rc_announce *a, uint64_t rss);

/*
 * Bytes still to come at @rss: the announcement less what the RSS grew by
 * since (from its lowest since), at most @cap (0: no cap). 0 when none is
 * in force.
 */
uint64_t announce_left(const struct rc_announce *a, uint64_t rss, uint64_t cap);

#endif /* RAMCACHE_ANNOUNCE_H */
