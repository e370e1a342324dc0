/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* --on-level LEVEL:CMD: run a command when a pressure level is entered. */
#ifndef RAMCACHE_ONLEVEL_H
#define RAMCACHE_ONLEVEL_H

#include <sys/types.h>

#include "args.h"

/*
 * Start every command registered for @level with /bin/sh -c, with
 * RAMCACHE_LEVEL, RAMCACHE_REASONS and RAMCACHE_PID in its environment.
 * Does not wait; returns how many were started.
 */
int onlevel_run(const struct opts *o, int level, const char *level_name,
		const char *reasons, pid_t pid);

/* Reap finished commands without blocking. */
void onlevel_reap(void);

#endif /* RAMCACHE_ONLEVEL_H */
