// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)

#include "core/hist.h"

unsigned int hist_slot(uint64_t v)
{
	unsigned int s = 0;

	while (v > 1) {
		v >>= 1;
		s++;
	}
	return s < HIST_SLOTS ? s : HIST_SLOTS - 1;
}

void hist_add(struct hist *h, uint64_t v)
{
	h->slots[hist_slot(v)]++;
}

uint64_t hist_total(const struct hist *h)
{
	uint64_t t = 0;

	for (int i = 0; i < HIST_SLOTS; i++)
		t += h->slots[i];
	return t;
}

void hist_range(int i, uint64_t *lo, uint64_t *hi)
{
	*lo = i == 0 ? 0 : 1ULL << i;
	*hi = (1ULL << (i + 1)) - 1;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	for (int i = 0; i < HIST_SLOTS; i++)
		dst->slots[i] += src->slots[i];
}
