/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ABI between bpf/discover.bpf.c and user/kernel/discover.c: how the kernel tells
 * the agent that a process is creating a control page (a memfd named
 * "ramcache", seen by a uprobe at the entry of libc's memfd_create) or
 * that a followed executor ran execve.
 */
#ifndef RAMCACHE_DISCOVER_EV_H
#define RAMCACHE_DISCOVER_EV_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "tablesize.h"

#define RC_DISCOVER_NAME     "ramcache"
#define RC_DISCOVER_NAME_LEN 9		    /* with its NUL */
#define RC_DISCOVER_MAX	     RC_MAX_TARGETS /* followed executors */
/* A process's calls are reported at most this often. */
#define RC_DISCOVER_QUIET_NS (100ULL * 1000 * 1000)

enum rc_discover_kind {
	RC_DISC_PAGE = 1, /* memfd_create("ramcache") called, no page yet */
	RC_DISC_EXEC = 2, /* a followed process ran execve */
};

/*
 * Who made the call, as the kernel knows it, so the agent can hold each
 * one to its limits before it reads anything of the process: the real uid
 * (the host's), the inode of its outermost pid namespace below the host's
 * (0: the host's; a container's otherwise, however deep it nests), and
 * which of the agent's probes fired (the cookie it was attached with).
 */
struct rc_discover_ev {
	__u32 tgid;
	__u32 kind; /* enum rc_discover_kind */
	__u64 ts_ns;
	__u32 uid;
	__u32 probe; /* the uprobe's cookie; 0 for an exec */
	__u64 pidns;
};

#endif /* RAMCACHE_DISCOVER_EV_H */
