/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libramcache internals: the handle, the layout checks and the shared-memory
 * access helpers every file of the library uses.
 */
#ifndef RAMCACHE_LIB_INTERNAL_H
#define RAMCACHE_LIB_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ramcache/ramcache.h"

#define RC_API __attribute__((visibility("default")))

/* The ABI is fixed: a layout change must be a version bump, not an accident. */
_Static_assert(sizeof(struct ramcache_ctl) == 256, "header size");
_Static_assert(offsetof(struct ramcache_ctl, exec_heartbeat_ns) == 128,
	       "executor side offset");
_Static_assert(offsetof(struct ramcache_ctl, agent_heartbeat_ns) == 192,
	       "agent side offset");
_Static_assert(offsetof(struct ramcache_ctl, cmd_futex) % 4 == 0,
	       "futex word alignment");
_Static_assert(offsetof(struct ramcache_ctl, expect_bytes) == 168 &&
		       offsetof(struct ramcache_ctl, expect_ns) == 176 &&
		       offsetof(struct ramcache_ctl, expect_seen_ns) == 240,
	       "announcement offsets");
_Static_assert(sizeof(struct ramcache_ctl_entry) == 96, "entry size");
_Static_assert(sizeof(struct ramcache_ctl_cmd) == 32, "cmd size");
_Static_assert(sizeof(struct ramcache_ctl_ack) == 48, "ack size");

struct ramcache {
	struct ramcache_ctl *ctl; /* the whole page, MAP_SHARED */
	struct ramcache_ctl_entry *entries;
	struct ramcache_ctl_cmd *cmds;
	struct ramcache_ctl_ack *acks;
	size_t size;
	uint32_t max_entries;
	uint32_t ring_size;
	dev_t dev;
	ino_t ino;
	int fd;	    /* the memfd, kept open so the agent can find it; or -1 */
	char *path; /* the file, or /proc/<pid>/fd/<fd> for a memfd */

	/*
	 * Private copies of what we write: the page is never read back for
	 * our own state, so nobody else's write can rewind it.
	 */
	pthread_mutex_t pub_lock; /* entry table, generation */
	uint64_t *ids;		  /* ids[i] is the id in entries[i] */
	uint32_t nr_entries;
	uint32_t entries_seq;

	uint64_t expect_ns; /* the announcement in force, 0: none */

	pthread_mutex_t cmd_lock; /* command ring and ack ring */
	uint64_t cmd_done;
	uint64_t ack_head;
};

#define rc_load(p)	       __atomic_load_n((p), __ATOMIC_RELAXED)
#define rc_load_acquire(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define rc_store(p, v)	       __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define rc_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

#endif /* RAMCACHE_LIB_INTERNAL_H */
