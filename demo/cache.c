// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The cache of models and node outputs, and its mirror on the control page:
 * every change to an entry is published, every eviction returns the memory
 * to the kernel (munmap, then malloc_trim for the small stuff).
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "demo.h"

void cache_init(struct demo_cache *c, struct ramcache *rc)
{
	memset(c, 0, sizeof(*c));
	c->rc = rc;
	c->next_id = 1;
}

void entry_release(struct demo_entry *e)
{
	if (e->anon)
		munmap(e->anon, e->anon_len);
	if (e->map)
		munmap(e->map, e->map_len);
	e->anon = e->map = NULL;
}

void cache_destroy(struct demo_cache *c)
{
	size_t i;

	for (i = 0; i < c->n; i++) {
		entry_release(c->v[i]);
		free(c->v[i]);
	}
	free(c->v);
	if (c->rc)
		ramcache_clear(c->rc);
	c->v = NULL;
	c->n = c->cap = 0;
}

struct demo_entry *cache_find_key(struct demo_cache *c, enum demo_kind kind,
				  uint64_t key)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		if (c->v[i]->kind == kind && c->v[i]->key == key)
			return c->v[i];
	return NULL;
}

struct demo_entry *cache_find_id(struct demo_cache *c, uint64_t id)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		if (c->v[i]->id == id)
			return c->v[i];
	return NULL;
}

int cache_publish(struct demo_cache *c, struct demo_entry *e)
{
	struct ramcache_entry_info info = {
		.id = e->id,
		.bytes = e->anon_len,
		.last_use_ns = e->last_use_ns,
		.used_generation = e->used_generation,
		.cost_ns = e->cost_ns,
		.flags = e->flags,
		.label = e->label,
	};

	return c->rc ? ramcache_publish(c->rc, &info) : 0;
}

/* Take ownership of @e (heap-allocated) and publish it. */
int cache_add(struct demo_cache *c, struct demo_entry *e)
{
	int err;

	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct demo_entry **v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	e->id = c->next_id++;
	if (!e->last_use_ns)
		e->last_use_ns = ramcache_now_ns();
	err = cache_publish(c, e);
	if (err)
		return err;
	c->v[c->n++] = e;
	c->bytes += e->anon_len;
	return 0;
}

/* A cache hit: the entry serves generation @gen. */
void cache_use(struct demo_cache *c, struct demo_entry *e, uint64_t gen)
{
	e->last_use_ns = ramcache_now_ns();
	e->used_generation = gen;
	cache_publish(c, e);
}

void cache_set_active(struct demo_cache *c, struct demo_entry *e, bool on)
{
	uint32_t flags = on ? e->flags | RAMCACHE_F_ACTIVE
			    : e->flags & ~RAMCACHE_F_ACTIVE;

	if (flags == e->flags)
		return;
	e->flags = flags;
	cache_publish(c, e);
}

/* RssAnon of this process, from /proc/self/status. */
uint64_t rss_anon_bytes(void)
{
	char line[128];
	unsigned long long kb = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/*
 * Drop @e from the cache and give its memory back. Returns the bytes the
 * process' anonymous RSS shrank by, as measured.
 */
uint64_t cache_evict(struct demo_cache *c, struct demo_entry *e)
{
	uint64_t before = rss_anon_bytes(), after;
	size_t i;

	for (i = 0; i < c->n; i++)
		if (c->v[i] == e)
			break;
	if (i == c->n)
		return 0;
	c->v[i] = c->v[--c->n];
	if (c->rc)
		ramcache_remove(c->rc, e->id);
	c->bytes -= e->anon_len;
	entry_release(e);
	free(e);
	malloc_trim(0);
	after = rss_anon_bytes();
	c->evicted++;
	c->bytes_evicted += before > after ? before - after : 0;
	return before > after ? before - after : 0;
}

/*
 * The local policy's choice: never what the running node needs; inactive
 * before active, then the oldest generation, then the least recently used.
 */
struct demo_entry *cache_pick_victim(const struct demo_cache *c)
{
	struct demo_entry *best = NULL;
	size_t i;

	for (i = 0; i < c->n; i++) {
		struct demo_entry *e = c->v[i];
		bool ea, ba;

		if (e->busy || (e->flags & RAMCACHE_F_PINNED))
			continue;
		if (!best) {
			best = e;
			continue;
		}
		ea = e->flags & RAMCACHE_F_ACTIVE;
		ba = best->flags & RAMCACHE_F_ACTIVE;
		if (ea != ba) {
			if (!ea)
				best = e;
			continue;
		}
		if (e->used_generation != best->used_generation) {
			if (e->used_generation < best->used_generation)
				best = e;
			continue;
		}
		if (e->last_use_ns < best->last_use_ns)
			best = e;
	}
	return best;
}
