// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Discovery for --all: the kernel tells the agent when a process creates
 * its control page, instead of the agent polling /proc. A uprobe on libc's
 * memfd_create reports the calls that name "ramcache", at entry: the page
 * does not exist yet, so the agent looks for it a moment later (and gives
 * up if none comes). There is no uretprobe: it would cost every
 * memfd_create on the machine a second trap, whatever the name. A raw
 * tracepoint on
 * sched_process_exec reports execve of the processes the agent follows, so
 * it looks for their page again. Nothing here runs for other processes
 * beyond one string compare per memfd_create (rare) and one hash lookup
 * per execve.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "discover_ev.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} disc_events SEC(".maps");

/* The executors the agent follows (written by the agent). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RC_DISCOVER_MAX);
	__type(key, __u32); /* tgid */
	__type(value, __u8);
} followed SEC(".maps");

/*
 * When each process that made a page last had it reported: one calling
 * memfd_create("ramcache") in a loop is reported once per
 * RC_DISCOVER_QUIET_NS (the agent looks for the page for seconds after a
 * report anyway), so it cannot fill the ring for everybody else.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, __u64);
} reported SEC(".maps");

/* Reports lost to a full ring (read by the agent: it scans /proc then). */
__u64 drops;
/* Calls not reported: the same process again within RC_DISCOVER_QUIET_NS. */
__u64 quiet;

/*
 * The inode of the current task's pid namespace at level 1 (the first
 * below the host's): every namespace a container nests inside its own has
 * the container's at that level. 0 for a task of the host's.
 */
static __always_inline __u64 outer_pidns(void)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	struct upid up = {};

	if (!pid || BPF_CORE_READ(pid, level) < 1)
		return 0;
	/* numbers[1]; a flexible array, so by offset and size */
	bpf_probe_read_kernel(
		&up, sizeof(up),
		(void *)pid + bpf_core_field_offset(struct pid, numbers) +
			bpf_core_type_size(struct upid));
	return up.ns ? BPF_CORE_READ(up.ns, ns.inum) : 0;
}

static __always_inline void emit(__u32 tgid, __u32 kind, __u32 probe)
{
	struct rc_discover_ev *e;

	e = bpf_ringbuf_reserve(&disc_events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&drops, 1);
		return;
	}
	e->tgid = tgid;
	e->kind = kind;
	e->ts_ns = bpf_ktime_get_ns();
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->probe = probe;
	e->pidns = outer_pidns();
	bpf_ringbuf_submit(e, 0);
}

SEC("uprobe")
int BPF_KPROBE(memfd_enter, const char *name)
{
	char buf[RC_DISCOVER_NAME_LEN + 1] = {};
	const char want[] = RC_DISCOVER_NAME;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 now, *last;

	if (bpf_probe_read_user_str(buf, sizeof(buf), name) !=
	    RC_DISCOVER_NAME_LEN)
		return 0;

	for (int i = 0; i < RC_DISCOVER_NAME_LEN; i++)
		if (buf[i] != want[i])
			return 0;
	now = bpf_ktime_get_ns();
	last = bpf_map_lookup_elem(&reported, &tgid);
	if (last && now - *last < RC_DISCOVER_QUIET_NS) {
		__sync_fetch_and_add(&quiet, 1);
		return 0;
	}
	bpf_map_update_elem(&reported, &tgid, &now, BPF_ANY);
	emit(tgid, RC_DISC_PAGE, (__u32)bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("raw_tp/sched_process_exec")
int exec_raw(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (bpf_map_lookup_elem(&followed, &tgid))
		emit(tgid, RC_DISC_EXEC, 0);
	return 0;
}
