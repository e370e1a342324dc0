/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernel struct layouts that changed across versions, read with CO-RE.
 * Everything here is a read of a kernel field; nothing writes.
 */
#ifndef RAMCACHE_COMPAT_BPF_H
#define RAMCACHE_COMPAT_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

/*
 * Before v6.2 (commit f1a7941243c1 "mm: convert mm's rss stats into
 * percpu_counter") mm->rss_stat was a struct of atomic_long_t counters.
 */
struct mm_rss_stat___old {
	atomic_long_t count[4];
} __attribute__((preserve_access_index));

struct mm_struct___old {
	struct mm_rss_stat___old rss_stat;
} __attribute__((preserve_access_index));

/* Pages in one of mm's RSS counters (MM_FILEPAGES ...), never negative. */
static __always_inline __s64 mm_counter(struct mm_struct *mm, int member)
{
	__s64 v = 0;

	if (member < 0 || member > 3)
		return 0;
	if (!bpf_core_type_exists(struct mm_rss_stat___old)) {
		struct percpu_counter *pc = &mm->rss_stat[member];

		v = BPF_CORE_READ(pc, count);
	} else {
		struct mm_struct___old *old = (void *)mm;

		v = BPF_CORE_READ(old, rss_stat.count[member].counter);
	}
	return v < 0 ? 0 : v;
}

/* Inode number of the task's memory cgroup directory (v1 or v2), 0 if none. */
static __always_inline __u64 task_memcg_ino(struct task_struct *task)
{
	int id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	struct cgroup_subsys_state *css;

	if (id < 0 || id >= CGROUP_SUBSYS_COUNT)
		return 0;
	css = BPF_CORE_READ(task, cgroups, subsys[id]);
	if (!css)
		return 0;
	return BPF_CORE_READ(css, cgroup, kn, id);
}

#endif /* RAMCACHE_COMPAT_BPF_H */
