/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * agent_lock: the robust futex the agent holds on every page it is attached
 * to, so that the kernel itself tells the executor the moment the agent dies
 * (SIGKILL, an OOM kill, a crash): it marks the word OWNER_DIED and wakes a
 * waiter, before the agent's memory is torn down, whatever namespaces the
 * two are in.
 *
 * The kernel walks a per-thread list of robust futexes when the thread
 * exits, each futex at (list entry + one futex_offset for the whole list).
 * Each page gets a slot of two pages of the agent's address space: the
 * first private, holding the list entry (a pointer the executor can never
 * write), the second the page's first page, mapped shared. So every futex
 * is at entry + page size + offsetof(agent_lock), one offset for all. The
 * agent writes the word with pwrite() only; the shared mapping is for the
 * kernel (the exit walk, FUTEX_WAKE).
 *
 * The list is the calling thread's (set_robust_list replaces the one glibc
 * registered, which only robust mutexes use, and the agent has none): take
 * and drop locks from one thread, the one whose death should count.
 */
#ifndef RAMCACHE_USER_PAGE_CONTROL_LOCK_H
#define RAMCACHE_USER_PAGE_CONTROL_LOCK_H

#include <stdbool.h>
#include <stddef.h>

struct ctl_lock {
	char *slot; /* 2 pages: the list entry, then the page's first page */
	size_t pgsize;
	bool held; /* linked into the list, the word written */
};

/*
 * Map the first page of @fd into @l's slot; -errno. Needed before
 * control_lock_take and for ctl_lock_wake_addr.
 */
int control_lock_map(struct ctl_lock *l, int fd);
/*
 * Write this thread's id | RAMCACHE_LOCK_WAITERS into @fd's agent_lock and
 * put it on the thread's robust list. -errno (the heartbeat is then the
 * executor's only news of our death): -EPERM from another thread than the
 * first caller's, -ENOSYS without robust futexes.
 */
int control_lock_take(struct ctl_lock *l, int fd);
/*
 * Off the robust list; when @fd >= 0, agent_lock = 0 and every waiter woken
 * (a clean detach). Unmaps the slot. Safe on a lock never mapped.
 */
void control_lock_drop(struct ctl_lock *l, int fd);
/* Where the page's @off is in the slot's shared page, for FUTEX_WAKE. */
void *control_lock_addr(const struct ctl_lock *l, size_t off);

#endif /* RAMCACHE_USER_PAGE_CONTROL_LOCK_H */
