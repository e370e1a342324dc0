// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Lost events and lines told; see drops.h. */
#include <inttypes.h>

#include "emit/drops.h"
#include "proc/clock.h"

void drops_tell(struct drops *d, struct out *o, uint64_t events, uint64_t lines,
		uint64_t now)
{
	if (now < d->next_warn_ns ||
	    (events <= d->events_told && lines <= d->lines_told))
		return;
	if (events > d->events_told)
		out_warn(o,
			 "ring buffer full: %" PRIu64
			 " events dropped (%" PRIu64
			 " in all); the agent is falling behind the kernel",
			 events - d->events_told, events);
	if (lines > d->lines_told)
		out_warn(o,
			 "stdout not read: %" PRIu64
			 " output lines dropped (%" PRIu64 " in all)",
			 lines - d->lines_told, lines);
	d->events_told = events;
	d->lines_told = lines;
	d->next_warn_ns = now + DROPS_WARN_NS;
}
