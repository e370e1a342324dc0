/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One JSON object per line (JSON Lines), built field by field:
 *
 *	struct jw w;
 *	json_begin(&w, stdout);
 *	json_str(&w, "type", "start");
 *	json_u64(&w, "pid", pid);
 *	json_end(&w);		// writes "}\n" and flushes
 */
#ifndef RAMCACHE_JSON_H
#define RAMCACHE_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct jw {
	FILE *f;
	int depth;
	bool first[8];
};

void json_begin(struct jw *w, FILE *f);
void json_end(struct jw *w);
void json_str(struct jw *w, const char *key, const char *val);
/* A string of at most @len bytes that need not be NUL-terminated. */
void json_strn(struct jw *w, const char *key, const char *val, size_t len);
void json_u64(struct jw *w, const char *key, uint64_t val);
void json_i64(struct jw *w, const char *key, int64_t val);
void json_double(struct jw *w, const char *key, double val);
void json_bool(struct jw *w, const char *key, bool val);
/* Nested arrays and objects; @key is NULL inside an array. */
void json_array_begin(struct jw *w, const char *key);
void json_array_end(struct jw *w);
void json_object_begin(struct jw *w, const char *key);
void json_object_end(struct jw *w);
/* Write a JSON string literal with escaping (used for array items too). */
void json_quote(FILE *f, const char *s, size_t len);

#endif /* RAMCACHE_JSON_H */
