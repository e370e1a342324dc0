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

/* Reports lost to a full ring (read by the agent: it scans /proc then). */
__u64 drops;

static __always_inline void emit(__u32 tgid, __u32 kind)
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
	bpf_ringbuf_submit(e, 0);
}

SEC("uprobe")
int BPF_KPROBE(memfd_enter, const char *name)
{
	char buf[RC_DISCOVER_NAME_LEN + 1] = {};
	const char want[] = RC_DISCOVER_NAME;

	if (bpf_probe_read_user_str(buf, sizeof(buf), name) !=
	    RC_DISCOVER_NAME_LEN)
		return 0;
	for (int i = 0; i < RC_DISCOVER_NAME_LEN; i++)
		if (buf[i] != want[i])
			return 0;
	emit(bpf_get_current_pid_tgid() >> 32, RC_DISC_PAGE);
	return 0;
}

SEC("raw_tp/sched_process_exec")
int exec_raw(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (bpf_map_lookup_elem(&followed, &tgid))
		emit(tgid, RC_DISC_EXEC);
	return 0;
}
