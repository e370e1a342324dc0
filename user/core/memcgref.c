// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Counting the targets in each watched memory cgroup; see memcgref.h. */
#include <errno.h>

#include "core/memcgref.h"

static int slot_of(const struct memcg_refs *r, uint64_t ino)
{
	for (int i = 0; i < RC_MAX_MEMCGS; i++)
		if (r->count[i] && r->ino[i] == ino)
			return i;
	return -1;
}

int memcgref_get(struct memcg_refs *r, uint64_t ino)
{
	int i = slot_of(r, ino);

	if (i >= 0) {
		r->count[i]++;
		return 0;
	}
	for (i = 0; i < RC_MAX_MEMCGS; i++) {
		if (r->count[i])
			continue;
		r->ino[i] = ino;
		r->count[i] = 1;
		return 1;
	}
	return -ENOSPC;
}

int memcgref_put(struct memcg_refs *r, uint64_t ino)
{
	int i = slot_of(r, ino);

	if (i < 0)
		return -ENOENT;
	return --r->count[i] == 0;
}
