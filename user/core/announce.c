// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* An executor's announcement of an allocation; see announce.h. */
#include "core/announce.h"
#include "ramcache/control.h"

static bool in_force(uint64_t ns, uint64_t bytes, uint64_t now)
{
	uint64_t age = ns > now ? ns - now : now - ns;

	return ns && bytes && age < RAMCACHE_EXPECT_TTL_NS;
}

bool announce_read(struct rc_announce *a, uint64_t ns, uint64_t bytes,
		   uint64_t rss, uint64_t now)
{
	struct rc_announce was = *a;

	if (!in_force(ns, bytes, now)) {
		*a = (struct rc_announce){ 0 };
	} else if (ns != a->ns) {
		*a = (struct rc_announce){ .ns = ns,
					   .bytes = bytes,
					   .rss0 = rss };
	} else {
		a->bytes = bytes;
	}
	return a->ns != was.ns || a->bytes != was.bytes;
}

void announce_rss(struct rc_announce *a, uint64_t rss)
{
	if (a->ns && rss < a->rss0)
		a->rss0 = rss;
}

uint64_t announce_left(const struct rc_announce *a, uint64_t rss, uint64_t cap)
{
	uint64_t grown = rss > a->rss0 ? rss - a->rss0 : 0;
	uint64_t left;

	if (!a->ns)
		return 0;
	left = a->bytes > grown ? a->bytes - grown : 0;
	return cap && left > cap ? cap : left;
}
