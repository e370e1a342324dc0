// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Memory-pressure events of the tracked processes (or of the whole system):
 * page faults, direct and memcg reclaim stalls, kswapd, OOM kills and RSS.
 *
 * Each tracepoint has a tp_btf and a raw_tp program sharing one handler; the
 * agent keeps the one the kernel supports and disables the other. Handlers
 * read kernel memory with BPF_CORE_READ so they work under both.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "compat.bpf.h"
#include "pressure.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define PF_EXITING 0x00000004 /* include/linux/sched.h */

/* Set by the agent before load. */
const volatile bool filter_tgid = false; /* false: whole system (key 0) */
const volatile __u64 burst_window_ns = 100000000; /* 100 ms */
const volatile __u64 burst_faults = 2048;	  /* per window and CPU */
/* read the clock every burst_check_mask + 1 faults, not on every fault */
const volatile __u64 burst_check_mask = 0;
const volatile __u64 rss_step = 4 << 20; /* bytes */
const volatile __u64 page_size = 4096;

/*
 * The followed process, 0 for none; the agent writes it at run time. An
 * untracked process's fault costs this compare, not a map lookup.
 */
volatile __u32 target_tgid;

/* Slot 0: the target (or, with no filter, the whole system). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rc_track);
} tracked SEC(".maps");

/* RSS of the target as last emitted; shared between CPUs. */
struct rc_rss_state rss_state;

/* Memory cgroups (by directory inode) whose reclaim is reported. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RC_MAX_MEMCGS);
	__type(key, __u64);
	__type(value, __u8);
} memcgs SEC(".maps");

struct reclaim_start {
	__u64 ts;
	__u32 kind;
	__u32 order;
};

/* thread id -> start of its reclaim stall */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, struct reclaim_start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RC_HIST_KINDS *RC_HIST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RC_STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/*
 * Mapped twice into the agent (the wrap-around), so every byte here is two
 * in its RSS; 256 KiB holds thousands of events, drops are counted.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} events SEC(".maps");

/*
 * One handler, two ways in: prog_btf (tp_btf, BTF-typed arguments) and
 * prog_raw (raw_tp). The agent keeps the one the kernel supports.
 */
#define TP_BOTH(prog, tp, call, args...) \
	SEC("tp_btf/" tp)                \
	int BPF_PROG(prog##_btf, args)   \
	{                                \
		return call;             \
	}                                \
	SEC("raw_tp/" tp)                \
	int BPF_PROG(prog##_raw, args)   \
	{                                \
		return call;             \
	}

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		(*v)++;
}

/* Reserve an event; a full ring buffer counts a drop instead of blocking. */
static __always_inline void *event_reserve(__u64 size, __u32 type)
{
	struct rc_event_hdr *h = bpf_ringbuf_reserve(&events, size, 0);
	__u64 id;

	if (!h) {
		stat_inc(RC_STAT_DROPS);
		return NULL;
	}
	id = bpf_get_current_pid_tgid();
	h->type = type;
	h->pid = (__u32)id;
	h->tgid = id >> 32;
	h->cpu = bpf_get_smp_processor_id();
	h->ts_ns = bpf_ktime_get_ns();
	return h;
}

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	/* bounded loop the verifier can see through */
	for (int i = 0; i < 64 && v > 1; i++) {
		v >>= 1;
		r++;
	}
	return r;
}

static __always_inline struct rc_track *track_lookup(__u32 tgid)
{
	__u32 key = 0;

	if (filter_tgid && tgid != target_tgid)
		return NULL;
	return bpf_map_lookup_elem(&tracked, &key);
}

/* ---- page faults: a compare for others, one lookup for the target ---- */

static __always_inline int handle_fault(void)
{
	struct rc_fault_burst *e;
	struct rc_track *t;
	__u64 now, n;

	t = track_lookup(bpf_get_current_pid_tgid() >> 32);
	if (!t)
		return 0;
	t->faults++;
	n = ++t->window_faults;
	if (n & burst_check_mask)
		return 0;
	now = bpf_ktime_get_ns();
	if (now - t->window_start_ns > burst_window_ns) {
		t->window_start_ns = now;
		t->window_faults = n = 1;
	}
	if (n != burst_faults)
		return 0;
	e = event_reserve(sizeof(*e), RC_EV_FAULT_BURST);
	if (!e)
		return 0;
	e->window_ns = now - t->window_start_ns;
	e->faults = t->window_faults;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

TP_BOTH(fault, "page_fault_user", handle_fault(), unsigned long address,
	struct pt_regs *regs, unsigned long error_code)

/* ---- direct and memcg reclaim: begin/end pairs per thread ---- */

static __always_inline bool reclaim_wanted(__u32 kind)
{
	struct task_struct *task;
	__u64 ino;

	if (track_lookup(bpf_get_current_pid_tgid() >> 32))
		return true;
	if (kind != RC_RECLAIM_MEMCG)
		return false;
	task = (struct task_struct *)bpf_get_current_task();
	ino = task_memcg_ino(task);
	return ino && bpf_map_lookup_elem(&memcgs, &ino);
}

static __always_inline int handle_reclaim_begin(__u32 kind, int order)
{
	struct reclaim_start s = {};
	__u32 pid = (__u32)bpf_get_current_pid_tgid();

	if (!reclaim_wanted(kind))
		return 0;
	s.ts = bpf_ktime_get_ns();
	s.kind = kind;
	s.order = order;
	bpf_map_update_elem(&starts, &pid, &s, BPF_ANY);
	return 0;
}

static __always_inline int handle_reclaim_end(__u32 kind,
					      unsigned long nr_reclaimed)
{
	__u32 pid = (__u32)bpf_get_current_pid_tgid();
	struct reclaim_start *s;
	struct task_struct *task;
	struct rc_reclaim *e;
	struct rc_track *t;
	__u64 lat, *slot;
	__u32 idx;

	s = bpf_map_lookup_elem(&starts, &pid);
	if (!s)
		return 0;
	lat = bpf_ktime_get_ns() - s->ts;
	if (s->kind != kind) {
		bpf_map_delete_elem(&starts, &pid);
		return 0;
	}

	idx = log2_u64(lat / 1000);
	if (idx >= RC_HIST_SLOTS)
		idx = RC_HIST_SLOTS - 1;
	idx += kind * RC_HIST_SLOTS;
	slot = bpf_map_lookup_elem(&hists, &idx);
	if (slot)
		(*slot)++;
	stat_inc(kind == RC_RECLAIM_DIRECT ? RC_STAT_DIRECT_RECLAIMS
					   : RC_STAT_MEMCG_RECLAIMS);

	t = track_lookup(bpf_get_current_pid_tgid() >> 32);
	if (t && kind < RC_RECLAIM_KINDS) {
		t->reclaim_count[kind]++;
		t->reclaim_ns[kind] += lat;
		t->reclaim_pages[kind] += nr_reclaimed;
	}

	e = event_reserve(sizeof(*e), RC_EV_RECLAIM);
	if (e) {
		task = (struct task_struct *)bpf_get_current_task();
		e->kind = kind;
		e->order = s->order;
		e->latency_ns = lat;
		e->nr_reclaimed = nr_reclaimed;
		e->memcg_id = task_memcg_ino(task);
		bpf_get_current_comm(e->comm, sizeof(e->comm));
		bpf_ringbuf_submit(e, 0);
	}
	bpf_map_delete_elem(&starts, &pid);
	return 0;
}

TP_BOTH(direct_begin, "mm_vmscan_direct_reclaim_begin",
	handle_reclaim_begin(RC_RECLAIM_DIRECT, order), int order, gfp_t gfp)

TP_BOTH(direct_end, "mm_vmscan_direct_reclaim_end",
	handle_reclaim_end(RC_RECLAIM_DIRECT, nr_reclaimed),
	unsigned long nr_reclaimed)

TP_BOTH(memcg_begin, "mm_vmscan_memcg_reclaim_begin",
	handle_reclaim_begin(RC_RECLAIM_MEMCG, order), int order, gfp_t gfp)

TP_BOTH(memcg_end, "mm_vmscan_memcg_reclaim_end",
	handle_reclaim_end(RC_RECLAIM_MEMCG, nr_reclaimed),
	unsigned long nr_reclaimed)

/* ---- kswapd: system-wide, the first sign of kernel reclaim ---- */

static __always_inline int handle_kswapd(int nid, int zid, int order,
					 bool awake)
{
	struct rc_kswapd *e;

	if (awake)
		stat_inc(RC_STAT_KSWAPD_WAKES);
	e = event_reserve(sizeof(*e), RC_EV_KSWAPD);
	if (!e)
		return 0;
	e->nid = nid;
	e->zid = zid;
	e->order = order;
	e->awake = awake;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

TP_BOTH(kswapd_wake, "mm_vmscan_kswapd_wake",
	handle_kswapd(nid, zid, order, true), int nid, int zid, int order)

TP_BOTH(kswapd_sleep, "mm_vmscan_kswapd_sleep", handle_kswapd(nid, 0, 0, false),
	int nid)

/* ---- OOM kills, of anything: an OOM elsewhere is a warning too ---- */

static __always_inline int handle_victim(struct task_struct *task, __u32 uid)
{
	struct rc_oom_kill *e;
	struct mm_struct *mm;

	stat_inc(RC_STAT_OOM_KILLS);
	e = event_reserve(sizeof(*e), RC_EV_OOM_KILL);
	if (!e)
		return 0;
	e->victim_pid = BPF_CORE_READ(task, tgid);
	e->victim_uid = uid;
	BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
	mm = BPF_CORE_READ(task, mm);
	if (mm) {
		e->file_rss = mm_counter(mm, 0) * page_size;
		e->anon_rss = mm_counter(mm, 1) * page_size;
		e->shmem_rss = mm_counter(mm, 3) * page_size;
		e->total_vm = BPF_CORE_READ(mm, total_vm) * page_size;
	} else {
		e->file_rss = e->anon_rss = e->shmem_rss = e->total_vm = 0;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

TP_BOTH(oom, "mark_victim", handle_victim(task, uid), struct task_struct *task,
	__u32 uid)

/* ---- RSS of the tracked processes, as the kernel accounts it ---- */

static __always_inline __s64 absdiff(__s64 a, __s64 b)
{
	return a > b ? a - b : b - a;
}

static __always_inline int handle_rss(struct mm_struct *mm, int member)
{
	struct task_struct *task;
	struct rc_rss_state *st;
	__u64 file, anon, shmem;
	struct rc_rss *e;
	__u32 tgid, idx;
	__s64 cur;

	/* Whole-system mode reports no per-process RSS. */
	if (!filter_tgid)
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	if (tgid != target_tgid || member < 0 || member > 3)
		return 0;
	st = &rss_state;
	if (st->mm != (__u64)mm) {
		/* the first event, or a new image after exec: learn the mm in
		 * the process's own context; remote accesses are not its RSS */
		task = (struct task_struct *)bpf_get_current_task();
		if (BPF_CORE_READ(task, mm) != mm)
			return 0;
		st->mm = (__u64)mm;
		for (int i = 0; i < 4; i++)
			st->pages[i] = -(__s64)(rss_step / page_size) - 1;
	}
	idx = member;
	/* keep the mask: the verifier needs the bound the compiler drops */
	barrier_var(idx);
	idx &= 3;
	cur = mm_counter(mm, idx);
	if (absdiff(cur, st->pages[idx]) * page_size < rss_step)
		return 0;

	file = mm_counter(mm, 0);
	anon = mm_counter(mm, 1);
	shmem = mm_counter(mm, 3);
	st->pages[0] = file;
	st->pages[1] = anon;
	st->pages[2] = mm_counter(mm, 2);
	st->pages[3] = shmem;
	st->total = (file + anon + shmem) * page_size;
	/* the teardown of an exiting process is not news */
	task = (struct task_struct *)bpf_get_current_task();
	if (BPF_CORE_READ(task, flags) & PF_EXITING)
		return 0;

	e = event_reserve(sizeof(*e), RC_EV_RSS);
	if (!e)
		return 0;
	e->anon = anon * page_size;
	e->file = file * page_size;
	e->shmem = shmem * page_size;
	e->total = st->total;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

TP_BOTH(rss, "rss_stat", handle_rss(mm, member), struct mm_struct *mm,
	int member)
