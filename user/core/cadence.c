// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "core/cadence.h"

void cadence_plan(const struct cadence_in *in, struct cadence *out)
{
	uint64_t far, read_ns;

	out->calm = !in->near && !in->above_ok &&
		    in->since_event_ns >= CADENCE_SETTLE_NS;
	out->tick_ns = in->near ? CADENCE_TICK_NS : 0;
	if (!out->calm) {
		out->read_ns = in->near ? 0 : CADENCE_READ_BUSY_NS;
		out->level_ns = CADENCE_LEVEL_BUSY_NS;
		return;
	}
	far = in->headroom > in->near_at ? in->headroom - in->near_at : 0;
	/* far / rate in ns: fits 64 bits for any byte count */
	read_ns = (uint64_t)((unsigned __int128)far * 1000000000ULL /
			     CADENCE_ALLOC_RATE);
	if (read_ns < CADENCE_READ_MIN_NS)
		read_ns = CADENCE_READ_MIN_NS;
	if (read_ns > CADENCE_READ_MAX_NS)
		read_ns = CADENCE_READ_MAX_NS;
	out->read_ns = read_ns;
	out->level_ns = CADENCE_LEVEL_CALM_NS;
}

uint64_t cadence_wake(const struct cadence_due *d, int n)
{
	uint64_t limit = UINT64_MAX, wake = 0;

	for (int i = 0; i < n; i++) {
		uint64_t late = d[i].at + d[i].slack;

		if (late < d[i].at) /* wrapped: no limit */
			late = UINT64_MAX;
		if (late < limit)
			limit = late;
	}
	for (int i = 0; i < n; i++)
		if (d[i].at <= limit && d[i].at > wake)
			wake = d[i].at;
	return n ? wake : UINT64_MAX;
}

bool cadence_beat_due(uint64_t next_ns, uint64_t now)
{
	return now >= next_ns || next_ns - now <= CADENCE_BEAT_EARLY_NS;
}
