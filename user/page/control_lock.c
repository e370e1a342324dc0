// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "page/control_lock.h"
#include "ramcache/control.h"

#define LOCK_OFF offsetof(struct ramcache_ctl, agent_lock)

/* The thread's robust list: entries in the slots' private pages. */
static struct robust_list_head head = {
	.list = { .next = &head.list },
};
static pid_t owner; /* the thread that registered it, 0 before */

int control_lock_map(struct ctl_lock *l, int fd)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *shared;

	l->held = false;
	l->pgsize = pg > 0 ? (size_t)pg : 4096;
	l->slot = mmap(NULL, 2 * l->pgsize, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (l->slot == MAP_FAILED) {
		l->slot = NULL;
		return -errno;
	}
	shared = mmap(l->slot + l->pgsize, l->pgsize, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_FIXED, fd, 0);
	if (shared == MAP_FAILED) {
		int err = -errno;

		munmap(l->slot, 2 * l->pgsize);
		l->slot = NULL;
		return err;
	}
	return 0;
}

/* Register the list for this thread, once; -EPERM from another thread. */
static int own_list(size_t pgsize)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);

	if (owner)
		return owner == tid ? 0 : -EPERM;
	head.futex_offset = (long)(pgsize + LOCK_OFF);
	if (syscall(SYS_set_robust_list, &head, sizeof(head)))
		return -errno;
	owner = tid;
	return 0;
}

int control_lock_take(struct ctl_lock *l, int fd)
{
	struct robust_list *e;
	uint32_t word;
	int err;

	if (!l->slot || l->held)
		return -EINVAL;
	err = own_list(l->pgsize);
	if (err)
		return err;
	if ((size_t)head.futex_offset != l->pgsize + LOCK_OFF)
		return -EINVAL; /* a slot of another page size: never */
	e = (struct robust_list *)l->slot;
	/* pending while half linked: a death now still releases the word */
	head.list_op_pending = e;
	word = (uint32_t)owner | RAMCACHE_LOCK_WAITERS;
	if (pwrite(fd, &word, sizeof(word), LOCK_OFF) != sizeof(word)) {
		head.list_op_pending = NULL;
		return -EIO;
	}
	e->next = head.list.next;
	head.list.next = e;
	head.list_op_pending = NULL;
	l->held = true;
	/* an executor asleep on the word while no agent held it: one came */
	syscall(SYS_futex, control_lock_addr(l, LOCK_OFF), FUTEX_WAKE, INT_MAX,
		NULL, NULL, 0);
	return 0;
}

static void unlink_entry(struct robust_list *e)
{
	for (struct robust_list *p = &head.list; p->next != &head.list;
	     p = p->next)
		if (p->next == e) {
			p->next = e->next;
			return;
		}
}

void control_lock_drop(struct ctl_lock *l, int fd)
{
	uint32_t zero = 0;

	if (!l->slot)
		return;
	if (l->held) {
		head.list_op_pending = (struct robust_list *)l->slot;
		unlink_entry((struct robust_list *)l->slot);
		if (fd >= 0 &&
		    pwrite(fd, &zero, sizeof(zero), LOCK_OFF) == sizeof(zero))
			syscall(SYS_futex, control_lock_addr(l, LOCK_OFF),
				FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
		head.list_op_pending = NULL;
		l->held = false;
	}
	munmap(l->slot, 2 * l->pgsize);
	l->slot = NULL;
}

void *control_lock_addr(const struct ctl_lock *l, size_t off)
{
	return l->slot + l->pgsize + off;
}
