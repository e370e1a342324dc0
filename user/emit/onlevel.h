/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* --on-level LEVEL:CMD: run a command when a pressure level is entered. */
#ifndef RAMCACHE_ONLEVEL_H
#define RAMCACHE_ONLEVEL_H

#include <stdbool.h>
#include <sys/types.h>

#include <stdint.h>

#include "emit/out.h"

/* --on-level LEVEL:CMD */
struct on_level {
	int level; /* enum ramcache_level */
	const char *cmd;
};

/*
 * True when the level moving from @prev to @cur enters @want: for warn,
 * high and critical, rising from below @want to @want or above (a jump
 * from ok to critical enters all three); for ok, coming back to ok.
 */
bool onlevel_enters(int want, int prev, int cur);

/*
 * Start every command registered for a level that the move from @prev to
 * @level enters (of the @nr in @cmds), with /bin/sh -c and RAMCACHE_LEVEL
 * (the level now), RAMCACHE_REASONS (the names of the RC_R_* bits in
 * @reasons, comma-separated) and RAMCACHE_PID in its environment. A command
 * that cannot start is a warning on @out. Does not wait; returns how many
 * were started, or -ENOMEM.
 */
int onlevel_run(struct out *out, const struct on_level *cmds, int nr, int prev,
		int level, uint32_t reasons, pid_t pid);

/* Reap finished commands without blocking. */
void onlevel_reap(void);

#endif /* RAMCACHE_ONLEVEL_H */
