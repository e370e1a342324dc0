// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <string.h>

#include "core/hist.h"
#include "out/json.h"

#define BAR_WIDTH 40

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

static void slot_range(int i, uint64_t *lo, uint64_t *hi)
{
	*lo = i == 0 ? 0 : 1ULL << i;
	*hi = (1ULL << (i + 1)) - 1;
}

void hist_print(FILE *f, const struct hist *h, const char *unit)
{
	uint64_t max = 0, lo, hi;
	int first = -1, last = -1;

	for (int i = 0; i < HIST_SLOTS; i++) {
		if (!h->slots[i])
			continue;
		if (first < 0)
			first = i;
		last = i;
		if (h->slots[i] > max)
			max = h->slots[i];
	}
	if (last < 0) {
		fprintf(f, "     (no samples)\n");
		return;
	}
	fprintf(f, "%24s : %-10s distribution\n", unit, "count");
	for (int i = first; i <= last; i++) {
		char bar[BAR_WIDTH + 1];
		int n = (int)(h->slots[i] * BAR_WIDTH / max);

		memset(bar, '*', n);
		bar[n] = '\0';
		slot_range(i, &lo, &hi);
		fprintf(f,
			"%10" PRIu64 " -> %-10" PRIu64 " : %-10" PRIu64
			" |%-*s|\n",
			lo, hi, h->slots[i], BAR_WIDTH, bar);
	}
}

void hist_json(struct jw *w, const char *key, const struct hist *h)
{
	uint64_t lo, hi;

	json_array_begin(w, key);
	for (int i = 0; i < HIST_SLOTS; i++) {
		if (!h->slots[i])
			continue;
		slot_range(i, &lo, &hi);
		json_object_begin(w, NULL);
		json_u64(w, "lo", lo);
		json_u64(w, "hi", hi);
		json_u64(w, "count", h->slots[i]);
		json_object_end(w);
	}
	json_array_end(w);
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	for (int i = 0; i < HIST_SLOTS; i++)
		dst->slots[i] += src->slots[i];
}
