/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Capabilities after set-up: once the programs are attached, the rings
 * made and the metrics socket bound, the agent keeps only what its loop
 * uses (docs/hardening.md says which and why) and gives up the rest for
 * good: effective, permitted, inheritable, ambient and (with CAP_SETPCAP)
 * bounding sets, and no_new_privs.
 */
#ifndef RAMCACHE_CAPS_H
#define RAMCACHE_CAPS_H

#include <stdbool.h>
#include <stdint.h>

#define CAPS_BIT(c) (1ULL << (c))

/* What the loop will do, which decides what it keeps. */
struct caps_need {
	bool discover;	 /* --all: uprobes on executors' libc found later,
			  * opened through /proc/PID/map_files */
	bool open_paths; /* --control: a page file of the executor's mode 0600 */
	bool memlock;	 /* locked memory beyond RLIMIT_MEMLOCK */
};

/* The capabilities to keep (bit N: capability N), of those @have. */
uint64_t caps_keep(const struct caps_need *n, uint64_t have);

/*
 * Keep only @keep: 0, or -errno from the first step that failed (nothing
 * more is dropped then). Without CAP_SETPCAP the bounding set and the
 * secure bits are left as they are; with it, root's execve gains nothing
 * either (SECBIT_NOROOT, locked): a command run on a level change holds
 * no capability.
 */
int caps_drop_to(uint64_t keep);

/* The effective set of the calling thread. */
uint64_t caps_effective(void);

/*
 * Would @fn(@ctx) succeed (return 0) holding only @keep? Tried in a child
 * process that drops to @keep first; nothing changes here. Call before any
 * thread starts.
 */
bool caps_would_do(uint64_t keep, int (*fn)(const void *ctx), const void *ctx);

#endif /* RAMCACHE_CAPS_H */
