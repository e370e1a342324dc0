/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A log2 histogram (core/hist.h) printed: text bars, or JSON slots. */
#ifndef RAMCACHE_HISTFMT_H
#define RAMCACHE_HISTFMT_H

#include <stdio.h>

#include "core/hist.h"
#include "emit/json.h"

/* Print as an ASCII table with bars, @unit names the values ("usecs"). */
void histfmt_text(FILE *f, const struct hist *h, const char *unit);

/* Print as a JSON array of {"lo":..,"hi":..,"count":..} for non-empty slots. */
void histfmt_json(struct jw *w, const char *key, const struct hist *h);

#endif /* RAMCACHE_HISTFMT_H */
