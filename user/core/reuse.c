// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Reuse of an executor's entries in this session; see reuse.h. */
#include <string.h>

#include "core/reuse.h"

#define MASK (RC_REUSE_SLOTS - 1)

void reuse_init(struct rc_reuse *r)
{
	memset(r, 0, sizeof(*r));
}

static size_t home(uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ULL) >> 32) & MASK;
}

/* The slot of @id, or the free slot where it would go. */
static struct rc_reuse_slot *find(const struct rc_reuse *r, uint64_t id)
{
	size_t i = home(id);

	while (r->s[i].id && r->s[i].id != id)
		i = (i + 1) & MASK;
	return (struct rc_reuse_slot *)&r->s[i];
}

void reuse_note(struct rc_reuse *r, const struct rc_entry *e, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		struct rc_reuse_slot *s;

		if (!e[k].id)
			continue;
		s = find(r, e[k].id);
		if (!s->id) {
			if (r->n >= RC_REUSE_SLOTS / 4 * 3) {
				reuse_init(r);
				s = find(r, e[k].id);
			}
			s->id = e[k].id;
			s->used_generation = e[k].used_generation;
			r->n++;
			continue;
		}
		if (e[k].used_generation > s->used_generation &&
		    s->hits < UINT32_MAX)
			s->hits++;
		if (e[k].used_generation > s->used_generation)
			s->used_generation = e[k].used_generation;
	}
}

uint32_t reuse_hits(const struct rc_reuse *r, uint64_t id)
{
	const struct rc_reuse_slot *s = id ? find(r, id) : NULL;

	return s && s->id ? s->hits : 0;
}
