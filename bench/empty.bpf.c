// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The floor of the fault-path benchmark: programs that do nothing, on the
 * tracepoints the agent's fast path uses. What the kernel's BPF run-time
 * stats charge them is the cost of the call and of the stats themselves.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tp_btf/page_fault_user")
int BPF_PROG(fault_empty)
{
	return 0;
}

SEC("tp_btf/rss_stat")
int BPF_PROG(rss_empty)
{
	return 0;
}
