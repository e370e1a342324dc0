/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* log2 histograms: slot i counts values v with floor(log2(v)) == i (0 and 1 in slot 0). */
#ifndef RAMCACHE_HIST_H
#define RAMCACHE_HIST_H

#include <stdint.h>

#define HIST_SLOTS 32

struct hist {
	uint64_t slots[HIST_SLOTS];
};

/* The slot a value falls into (capped at the last slot). */
unsigned int hist_slot(uint64_t v);
void hist_add(struct hist *h, uint64_t v);
uint64_t hist_total(const struct hist *h);
/* Add every count of @src to @dst. */
void hist_merge(struct hist *dst, const struct hist *src);

/* The values slot @i counts: @lo to @hi, both included. */
void hist_range(int i, uint64_t *lo, uint64_t *hi);

#endif /* RAMCACHE_HIST_H */
