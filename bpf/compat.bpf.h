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

/* One counter, @i a constant: a typed (tp_btf) mm takes no variable offset. */
static __always_inline __s64 mm_counter_at(struct mm_struct *mm, const int i)
{
	if (!bpf_core_type_exists(struct mm_rss_stat___old)) {
		struct percpu_counter *pc = &mm->rss_stat[i];

		return BPF_CORE_READ(pc, count);
	}
	return BPF_CORE_READ((struct mm_struct___old *)mm,
			     rss_stat.count[i].counter);
}

/* Pages in one of mm's RSS counters (MM_FILEPAGES ...), never negative. */
static __always_inline __s64 mm_counter(struct mm_struct *mm, int member)
{
	__s64 v;

	switch (member) {
	case 0:
		v = mm_counter_at(mm, 0);
		break;
	case 1:
		v = mm_counter_at(mm, 1);
		break;
	case 2:
		v = mm_counter_at(mm, 2);
		break;
	case 3:
		v = mm_counter_at(mm, 3);
		break;
	default:
		return 0;
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
