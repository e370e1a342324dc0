// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Pacing of evaluations; see pace.h. */
#include "core/pace.h"

void pace_request(struct pace *p, uint32_t why)
{
	p->due = true;
	p->requests++;
	if (why)
		p->why = why;
}

bool pace_start(struct pace *p, uint64_t now, uint32_t *why)
{
	if (!p->due || now < p->next_ns)
		return false;
	*why = p->why;
	p->due = false;
	p->why = 0;
	return true;
}

void pace_done(struct pace *p, uint64_t start, uint64_t end)
{
	uint64_t cost = end - start;
	uint64_t gap = PACE_DUTY * cost > PACE_MIN_GAP_NS ? PACE_DUTY * cost
							  : PACE_MIN_GAP_NS;

	p->runs++;
	p->next_ns = start + cost + gap;
}
