// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "emit/json.h"

/* The escape JSON has for @c, or NULL. */
static const char *escape_of(unsigned char c)
{
	switch (c) {
	case '"':
		return "\\\"";
	case '\\':
		return "\\\\";
	case '\n':
		return "\\n";
	case '\t':
		return "\\t";
	}
	return NULL;
}

void json_quote(FILE *f, const char *s, size_t len)
{
	fputc('"', f);
	for (size_t i = 0; i < len && s[i]; i++) {
		unsigned char c = s[i];
		const char *esc = escape_of(c);

		/* control bytes and non-ASCII from the kernel or an
		 * untrusted page are escaped, never passed raw */
		if (esc)
			fputs(esc, f);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void key(struct jw *w, const char *k)
{
	int d = w->depth < 8 ? w->depth : 7;

	if (!w->first[d])
		fputc(',', w->f);
	w->first[d] = false;
	if (k) {
		json_quote(w->f, k, strlen(k));
		fputc(':', w->f);
	}
}

void json_begin(struct jw *w, FILE *f)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->first[0] = true;
	fputc('{', f);
}

void json_end(struct jw *w)
{
	fputs("}\n", w->f);
	fflush(w->f);
}

void json_str(struct jw *w, const char *k, const char *val)
{
	key(w, k);
	json_quote(w->f, val ? val : "", val ? strlen(val) : 0);
}

void json_strn(struct jw *w, const char *k, const char *val, size_t len)
{
	key(w, k);
	json_quote(w->f, val, strnlen(val, len));
}

void json_u64(struct jw *w, const char *k, uint64_t val)
{
	key(w, k);
	fprintf(w->f, "%" PRIu64, val);
}

void json_i64(struct jw *w, const char *k, int64_t val)
{
	key(w, k);
	fprintf(w->f, "%" PRId64, val);
}

void json_double(struct jw *w, const char *k, double val)
{
	key(w, k);
	if (isfinite(val))
		fprintf(w->f, "%.6g", val);
	else
		fputs("null", w->f);
}

void json_bool(struct jw *w, const char *k, bool val)
{
	key(w, k);
	fputs(val ? "true" : "false", w->f);
}

static void open_nested(struct jw *w, const char *k, char c)
{
	key(w, k);
	fputc(c, w->f);
	if (w->depth < 7)
		w->depth++;
	w->first[w->depth] = true;
}

void json_array_begin(struct jw *w, const char *k)
{
	open_nested(w, k, '[');
}

static void close_nested(struct jw *w, char c)
{
	fputc(c, w->f);
	if (w->depth > 0)
		w->depth--;
}

void json_array_end(struct jw *w)
{
	close_nested(w, ']');
}

void json_object_begin(struct jw *w, const char *k)
{
	open_nested(w, k, '{');
}

void json_object_end(struct jw *w)
{
	close_nested(w, '}');
}
