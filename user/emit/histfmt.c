// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A log2 histogram as text bars or JSON slots; see histfmt.h. */
#include <inttypes.h>
#include <string.h>

#include "emit/histfmt.h"

#define BAR_WIDTH 40

void histfmt_text(FILE *f, const struct hist *h, const char *unit)
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
		hist_range(i, &lo, &hi);
		fprintf(f,
			"%10" PRIu64 " -> %-10" PRIu64 " : %-10" PRIu64
			" |%-*s|\n",
			lo, hi, h->slots[i], BAR_WIDTH, bar);
	}
}

void histfmt_json(struct jw *w, const char *key, const struct hist *h)
{
	uint64_t lo, hi;

	json_array_begin(w, key);
	for (int i = 0; i < HIST_SLOTS; i++) {
		if (!h->slots[i])
			continue;
		hist_range(i, &lo, &hi);
		json_object_begin(w, NULL);
		json_u64(w, "lo", lo);
		json_u64(w, "hi", hi);
		json_u64(w, "count", h->slots[i]);
		json_object_end(w);
	}
	json_array_end(w);
}
