// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "core/samples.h"

void samples_push(struct rc_samples *r, uint64_t t_ns, uint64_t bytes)
{
	unsigned int last = (r->head + RC_SAMPLES_LEN - 1) % RC_SAMPLES_LEN;

	if (r->count && r->s[last].t_ns > t_ns)
		t_ns = r->s[last].t_ns;
	r->s[r->head].t_ns = t_ns;
	r->s[r->head].bytes = bytes;
	r->head = (r->head + 1) % RC_SAMPLES_LEN;
	if (r->count < RC_SAMPLES_LEN)
		r->count++;
}

unsigned int samples_copy(const struct rc_samples *r, struct rc_sample *out)
{
	unsigned int start =
		(r->head + RC_SAMPLES_LEN - r->count) % RC_SAMPLES_LEN;

	for (unsigned int i = 0; i < r->count; i++)
		out[i] = r->s[(start + i) % RC_SAMPLES_LEN];
	return r->count;
}
