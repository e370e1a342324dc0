/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The agent's own memory locked in, so a storm never pages the watcher out. */
#ifndef RAMCACHE_MEMLOCK_H
#define RAMCACHE_MEMLOCK_H

/*
 * mlockall() of what is mapped and what will be, pages locked as they are
 * first used; the agent's own code and data read in at once. Call before
 * any thread starts. 0 or -errno.
 */
int memlock_self(void);

#endif /* RAMCACHE_MEMLOCK_H */
