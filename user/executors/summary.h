/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a summary line and the start event say, gathered from the parts
 * that hold it: the sampler, the level watch, a target, and the fault and
 * stall counts (BPF's totals, or /proc's). The caller prints.
 */
#ifndef RAMCACHE_SUMMARY_H
#define RAMCACHE_SUMMARY_H

#include <stdint.h>

#include "executors/pressure_watch.h"
#include "executors/targets.h"
#include "kernel/bpfstate.h"
#include "emit/out.h"
#include "proc/sampler.h"

/* Memory and the cgroup's counts, from @sm. */
void summary_memory(const struct sampler *sm, struct summary *s);

/* The level, its reasons and the rates and PSI behind them, from @lw. */
void summary_level(const struct pressure_watch *lw, struct summary *s);

/*
 * Faults of @pid (0: the system): counted by the fault program with
 * @from_bpf (--fault-probes on: since tracking began), else as the kernel
 * counts them in /proc, since the first read (@fc), whether the program
 * is attached or not. Per second since the last, @dt seconds ago. With @s
 * NULL, only the base is taken.
 */
void summary_faults(struct bpfstate *bpf, bool from_bpf, pid_t pid,
		    struct fault_count *fc, double dt, struct summary *s);

/* Reclaim stalls of @pid (0: the system) since @prev, which moves on. */
void summary_stalls(struct bpfstate *bpf, pid_t pid, struct track_totals *prev,
		    struct summary *s);

/*
 * A target's own part: RSS, the lowest headroom its outlook expects at
 * @now within @horizon_ns, thresholds, its cgroup's OOM kills since it was
 * followed, its evictions. The faults are summary_faults()'.
 */
void summary_target(const struct target *t, uint64_t now, uint64_t horizon_ns,
		    struct summary *s);

/*
 * The start event: of @t, or of the machine (@t NULL) with @sys_thr;
 * @fault_probes "on" or "auto".
 */
void summary_start(const struct target *t, const struct rc_thresholds *sys_thr,
		   const struct probes *probes, const char *fault_probes,
		   struct start_info *si);

#endif /* RAMCACHE_SUMMARY_H */
