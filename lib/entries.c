// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The entry table: the executor's cache entries as the agent sees them,
 * updated under the entries_seq seqcount.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "probes.h"

/* Seqcount writer: odd while the table is inconsistent. */
static void table_begin(struct ramcache *rc)
{
	rc_store(&rc->ctl->entries_seq, ++rc->entries_seq);
	/* The odd count must be visible before any entry store. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void table_end(struct ramcache *rc)
{
	rc_store(&rc->ctl->nr_entries, rc->nr_entries);
	rc_store_release(&rc->ctl->entries_seq, ++rc->entries_seq);
}

static int find(const struct ramcache *rc, uint64_t id)
{
	for (uint32_t i = 0; i < rc->nr_entries; i++)
		if (rc->ids[i] == id)
			return (int)i;
	return -1;
}

static void fill(struct ramcache_ctl_entry *e,
		 const struct ramcache_entry_info *info)
{
	char label[RAMCACHE_LABEL_LEN] = { 0 };

	if (info->label)
		memcpy(label, info->label, strnlen(info->label, sizeof(label)));
	rc_store(&e->id, info->id);
	rc_store(&e->bytes, info->bytes);
	rc_store(&e->last_use_ns,
		 info->last_use_ns ? info->last_use_ns : ramcache_now_ns());
	rc_store(&e->used_generation, info->used_generation);
	rc_store(&e->cost_ns, info->cost_ns);
	rc_store(&e->flags, info->flags);
	rc_store(&e->reserved, 0);
	memcpy(e->label, label, sizeof(label));
}

RC_API int ramcache_publish(struct ramcache *rc,
			    const struct ramcache_entry_info *info)
{
	int i, err = 0;

	if (!rc || !info || !info->id)
		return -EINVAL;
	pthread_mutex_lock(&rc->pub_lock);
	i = find(rc, info->id);
	if (i < 0) {
		if (rc->nr_entries == rc->max_entries) {
			err = -ENOSPC;
			goto out;
		}
		i = (int)rc->nr_entries;
	}
	table_begin(rc);
	fill(&rc->entries[i], info);
	if ((uint32_t)i == rc->nr_entries) {
		rc->ids[i] = info->id;
		rc->nr_entries++;
	}
	table_end(rc);
	RC_PROBE3(publish, info->id, info->bytes, info->flags);
out:
	pthread_mutex_unlock(&rc->pub_lock);
	return err;
}

RC_API int ramcache_remove(struct ramcache *rc, uint64_t id)
{
	uint32_t last;
	int i;

	if (!rc || !id)
		return -EINVAL;
	pthread_mutex_lock(&rc->pub_lock);
	i = find(rc, id);
	if (i < 0) {
		pthread_mutex_unlock(&rc->pub_lock);
		return -ENOENT;
	}
	/* Keep [0, nr_entries) dense: move the last entry into the hole. */
	last = rc->nr_entries - 1;
	table_begin(rc);
	if ((uint32_t)i != last) {
		memcpy(&rc->entries[i], &rc->entries[last],
		       sizeof(rc->entries[i]));
		rc->ids[i] = rc->ids[last];
	}
	memset(&rc->entries[last], 0, sizeof(rc->entries[last]));
	rc->ids[last] = 0;
	rc->nr_entries--;
	table_end(rc);
	pthread_mutex_unlock(&rc->pub_lock);
	return 0;
}

RC_API int ramcache_clear(struct ramcache *rc)
{
	if (!rc)
		return -EINVAL;
	pthread_mutex_lock(&rc->pub_lock);
	table_begin(rc);
	memset(rc->entries, 0, (size_t)rc->nr_entries * sizeof(*rc->entries));
	memset(rc->ids, 0, (size_t)rc->nr_entries * sizeof(*rc->ids));
	rc->nr_entries = 0;
	table_end(rc);
	pthread_mutex_unlock(&rc->pub_lock);
	return 0;
}

RC_API int ramcache_set_generation(struct ramcache *rc, uint64_t generation)
{
	if (!rc)
		return -EINVAL;
	rc_store_release(&rc->ctl->generation, generation);
	return 0;
}

RC_API int ramcache_heartbeat(struct ramcache *rc)
{
	if (!rc)
		return -EINVAL;
	rc_store_release(&rc->ctl->exec_heartbeat_ns, ramcache_now_ns());
	return 0;
}

RC_API int ramcache_expect(struct ramcache *rc, uint64_t bytes)
{
	uint64_t ns = bytes ? ramcache_now_ns() : 0;

	if (!rc)
		return -EINVAL;
	/* the size first: a reader that sees the new stamp sees its size */
	rc_store(&rc->ctl->expect_bytes, bytes);
	rc_store_release(&rc->ctl->expect_ns, ns);
	__atomic_store_n(&rc->expect_ns, ns, __ATOMIC_RELAXED);
	return 0;
}

RC_API bool ramcache_expect_seen(const struct ramcache *rc)
{
	uint64_t mine = __atomic_load_n(&rc->expect_ns, __ATOMIC_RELAXED);

	return mine && rc_load_acquire(&rc->ctl->expect_seen_ns) == mine;
}
