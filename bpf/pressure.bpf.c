// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Memory-pressure events of the tracked processes (or of the whole system):
 * page faults, direct and memcg reclaim stalls, kswapd, OOM kills and RSS.
 *
 * Each tracepoint has a tp_btf and a raw_tp program sharing one handler (and
 * one pair per form of its arguments across kernels); the agent keeps the
 * one the kernel supports and disables the others. The fault and rss_stat
 * fast paths read kernel memory directly under tp_btf; everything else
 * uses BPF_CORE_READ, which works under both.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "compat.bpf.h"
#include "pressure.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the agent before load. */
const volatile bool filter_tgid = false; /* false: whole system (slot 0) */
const volatile __u64 burst_window_ns = 100000000; /* 100 ms */
const volatile __u64 burst_faults = 2048;	  /* per window and CPU */
/* read the clock every burst_check_mask + 1 faults, not on every fault */
const volatile __u64 burst_check_mask = 0;
const volatile __u64 rss_step_pages = 1024; /* 4 MiB of 4 KiB pages */
const volatile __u64 page_size = 4096;

/*
 * The tracked processes (written by the agent) and the mm of each, filed
 * by a hash of its key (see mm_key_ptr()) with what the fast paths need
 * of it on the same cache line. A fault or an RSS change of an untracked
 * process costs one load here and a compare; neither fast path reads the
 * settings above, which sit on another page.
 */
struct rc_target targets[RC_MAX_TARGETS];
struct rc_mm mm_index[RC_MM_SLOTS];

/* The address of mm_index as a number, once a program has needed it. */
volatile __u64 mm_index_addr;

/* RSS movement that wakes the agent, in pages; 0: every event does. */
volatile __u64 rss_wake_pages;

/* The target whose mm the learn_mm iterator looks for (agent-written). */
volatile __u32 learn_tgid;
volatile __u32 learn_slot;

/* mm's filed so far: each entry's gen */
__u64 learn_gen;

/* Every slot's counters, per CPU: the key is the slot. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RC_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct rc_counters);
} counters SEC(".maps");

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
 * One handler, two ways in: prog_btf (tp_btf, BTF-typed arguments, direct
 * reads of kernel memory) and prog_raw (raw_tp, probe reads). The agent
 * keeps the one the kernel supports; `btf` tells the handler which it is.
 */
#define TP_BOTH(prog, tp, call, args...)                        \
	SEC("tp_btf/" tp)                                       \
	int BPF_PROG(prog##_btf, args)                          \
	{                                                       \
		const bool btf __attribute__((unused)) = true;  \
		return call;                                    \
	}                                                       \
	SEC("raw_tp/" tp)                                       \
	int BPF_PROG(prog##_raw, args)                          \
	{                                                       \
		const bool btf __attribute__((unused)) = false; \
		return call;                                    \
	}

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		(*v)++;
}

/*
 * Reserve an event of the current task (its tgid replaced by @tgid when
 * that is not 0); a full ring buffer counts a drop instead of blocking.
 */
static __always_inline void *event_reserve(__u64 size, __u32 type, __u32 tgid)
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
	h->tgid = tgid ? tgid : id >> 32;
	h->cpu = bpf_get_smp_processor_id();
	h->ts_ns = bpf_ktime_get_ns();
	return h;
}

/*
 * Submit flags of an event that must reach the agent now. The default
 * wakes the reader only when it has read everything before this event:
 * not while quiet RSS events wait in the ring (or did a moment ago, when
 * the agent stopped asking for them). A forced wake-up always does.
 */
static __always_inline __u64 wake_now(void)
{
	return BPF_RB_FORCE_WAKEUP;
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

/* ---- which process is tracked: its mm, found in mm_index ---- */

/*
 * A process is known by its mm's key: the mm pointer minus the address of
 * mm_index, a number a tp_btf program gets from a typed pointer with one
 * subtraction (pointer - pointer is a number for a privileged program).
 * A target's mm_key of 0 is no mm. Two mm's lie further apart than
 * RC_SLOT_MASK, so an index entry keeps the slot in the key's low bits;
 * and no key, not even that of a NULL mm, has only low bits, so none
 * matches a FREE, TOMB or BUSY entry.
 */
static __always_inline __u64 mm_key_ptr(const struct mm_struct *mm)
{
	__u64 d = (__u64)mm - (__u64)mm_index;

	/* keep the difference whole: no rewriting into a number minus a
	 * pointer, which the verifier refuses */
	barrier_var(d);
	return d;
}

/* mm_index's address as a number (set by the first program that needs it). */
static __always_inline __u64 index_addr(void)
{
	__u64 base = mm_index_addr;

	if (!base) {
		/* a privileged program may store a pointer as a number */
		mm_index_addr = (__u64)mm_index;
		base = mm_index_addr;
	}
	return base;
}

/* The key of an mm known as a number (raw_tp: read with probe reads). */
static __always_inline __u64 mm_key_num(__u64 mm)
{
	return mm ? mm - index_addr() : 0;
}

static __always_inline __u64 mm_entry(__u64 key, __u32 slot)
{
	return (key & ~RC_SLOT_MASK) | slot;
}

/*
 * An mm's first entry: bits of its place in its slab, folded with those of
 * its slab's place. Shifts and an xor, no multiply: it is on the path of
 * every fault, ahead of the load that turns untracked processes away.
 */
#define MM_OFF_MASK ((RC_MM_SLOTS - 1) * sizeof(struct rc_mm))

static __always_inline __u32 mm_hash(__u64 key)
{
	/* a byte offset in mm_index: an entry is 64 bytes */
	return (key ^ (key >> 9)) & MM_OFF_MASK;
}

/* Entry @i of the probe sequence of hash @h. */
static __always_inline struct rc_mm *mm_probe(__u32 h, int i)
{
	return (void *)mm_index +
	       ((h + i * sizeof(struct rc_mm)) & MM_OFF_MASK);
}

/* The entry of the tracked mm with @key, or NULL: one load for anyone else. */
static __always_inline struct rc_mm *mm_find(__u64 key)
{
	__u32 h = mm_hash(key);

#pragma unroll
	for (int i = 0; i < RC_MM_PROBES; i++) {
		struct rc_mm *m = mm_probe(h, i);
		__u64 e = m->key;

		if (e == RC_MM_FREE)
			return NULL;
		/* the same key above the slot bits */
		if ((e ^ key) <= RC_SLOT_MASK)
			return m;
	}
	return NULL;
}

static __always_inline __u32 mm_slot_of(const struct rc_mm *m)
{
	return m->key & RC_SLOT_MASK;
}

/* Remove entry @m, filed as @want (unless it changed meanwhile). */
static __always_inline void mm_remove(struct rc_mm *m, __u64 want)
{
	__u32 next = ((m - mm_index) + 1) & (RC_MM_SLOTS - 1);

	/* a lookup stops at FREE: mid-chain, leave a tombstone */
	__sync_val_compare_and_swap(
		&m->key, want, mm_index[next].key ? RC_MM_TOMB : RC_MM_FREE);
}

static __always_inline void mm_unindex(__u64 key, __u32 slot)
{
	__u32 h = mm_hash(key);
	__u64 want = mm_entry(key, slot);

	for (int i = 0; i < RC_MM_PROBES; i++) {
		struct rc_mm *m = mm_probe(h, i);
		__u64 e = m->key;

		if (e == RC_MM_FREE)
			return;
		if (e == want) {
			mm_remove(m, want);
			return;
		}
	}
}

/*
 * File @key for @slot: claim a free entry (BUSY, so that no lookup takes
 * it half filled in), fill it in, then publish the key.
 */
static __always_inline bool mm_index_add(__u64 key, __u32 slot)
{
	__u32 h = mm_hash(key);
	__u64 want = mm_entry(key, slot);

	for (int i = 0; i < RC_MM_PROBES; i++) {
		struct rc_mm *m = mm_probe(h, i);
		__u64 old = m->key;

		if (old == want)
			return true;
		if ((old != RC_MM_FREE && old != RC_MM_TOMB) ||
		    __sync_val_compare_and_swap(&m->key, old, RC_MM_BUSY) !=
			    old)
			continue;
		m->check_mask = burst_check_mask;
		m->step = rss_step_pages;
		m->gen = __sync_add_and_fetch(&learn_gen, 1);
		/* the first RSS change is news */
		for (int j = 0; j < 4; j++)
			m->pages[j] = -(__s64)rss_step_pages - 1;
		__sync_val_compare_and_swap(&m->key, RC_MM_BUSY, want);
		return true;
	}
	return false;
}

/*
 * File the mm of @key as the one of target @slot (its first mm, or a new
 * one after exec), unfiling the old one; the next RSS change is reported.
 */
static __always_inline void mm_learn(__u32 slot, __u64 key)
{
	struct rc_target *t;

	slot &= RC_SLOT_MASK;
	t = &targets[slot];
	if (t->mm_key == key)
		return;
	if (t->mm_key)
		mm_unindex(t->mm_key, slot);
	t->mm_key = 0;
	if (!key)
		return;
	/* two mm's keys differ above the slot bits only if their objects lie
	 * that far apart: an mm_struct is over 1 KiB on a 64-bit kernel */
	if (bpf_core_type_size(struct mm_struct) < RC_MAX_TARGETS) {
		stat_inc(RC_STAT_MM_INDEX_FULL);
		return;
	}
	t->woke_pages = 0;
	t->quiet = 0;
	if (mm_index_add(key, slot))
		t->mm_key = key;
	else
		stat_inc(RC_STAT_MM_INDEX_FULL);
}

/* The current task's mm as a number (raw_tp). */
static __always_inline __u64 current_mm_num(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	return (__u64)BPF_CORE_READ(task, mm);
}

static __always_inline __u64 current_key(bool btf)
{
	if (btf)
		return mm_key_ptr(bpf_get_current_task_btf()->mm);
	return mm_key_num(current_mm_num());
}

/* Slot of the current task's process (0 when the whole system is watched). */
static __always_inline int current_slot(bool btf)
{
	struct rc_mm *m;

	if (!filter_tgid)
		return 0;
	m = mm_find(current_key(btf));
	return m ? mm_slot_of(m) : -1;
}

static __always_inline struct rc_counters *counters_of(__u32 slot)
{
	return bpf_map_lookup_elem(&counters, &slot);
}

static __always_inline __u32 tgid_of(int slot)
{
	return filter_tgid ? targets[slot & RC_SLOT_MASK].tgid : 0;
}

/* The agent runs this over all tasks to learn a new target's mm. */
SEC("iter/task")
int learn_mm(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;

	/* any live thread: a group leader that exited has no mm */
	if (!task || task->tgid != learn_tgid || !task->mm)
		return 0;
	index_addr(); /* for the raw_tp programs and the agent */
	mm_learn(learn_slot, mm_key_ptr(task->mm));
	return 0;
}

/* A tracked process's exec brings a new mm: file it in place of the old. */
static __always_inline int handle_exec(bool btf)
{
	__u32 tgid;
	__u64 key;

	__u32 i;

	if (!filter_tgid)
		return 0;
	/* a task without memory files none */
	key = current_mm_num() ? current_key(btf) : 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	/* the loop only compares: one mm_learn() after it for the verifier
	 * to follow, however big the table */
	for (i = 0; i < RC_MAX_TARGETS; i++)
		if (targets[i].tgid == tgid)
			break;
	if (i < RC_MAX_TARGETS)
		mm_learn(i, key);
	return 0;
}

TP_BOTH(exec, "sched_process_exec", handle_exec(btf), struct task_struct *p,
	pid_t old_pid, struct linux_binprm *bprm)

/* ---- page faults: counted per CPU, an event only for a burst ---- */

/*
 * Every burst_check_mask + 1 faults of @slot on this CPU (@n of them so
 * far): read the clock, start a new window when the old one is over (or
 * was counted for the slot's earlier mm: *@gen_of tells, read only here;
 * NULL for the whole system), and emit a burst when the window's count
 * crosses burst_faults.
 */
static __noinline int burst_check(struct rc_track *t, int slot, __u64 n,
				  const __u64 *gen_of)
{
	const __u64 batch = burst_check_mask + 1;
	struct rc_fault_burst *e;
	__u64 now, wf, gen;

	if (!t)
		return 0;
	now = bpf_ktime_get_ns();
	gen = gen_of ? *gen_of : 0;
	if (t->gen != gen || now - t->window_start_ns > burst_window_ns) {
		/* the faults of this batch open the new window */
		t->gen = gen;
		t->window_start_ns = now;
		t->window_base = n - batch;
	}
	wf = n - t->window_base;
	if (wf < burst_faults || wf - batch >= burst_faults)
		return 0;
	e = event_reserve(sizeof(*e), RC_EV_FAULT_BURST, tgid_of(slot));
	if (!e)
		return 0;
	e->window_ns = now - t->window_start_ns;
	e->faults = wf;
	bpf_ringbuf_submit(e, wake_now());
	return 0;
}

/*
 * A fault of @slot: an increment of its per-CPU counter @t (this program is
 * the only writer of it on this CPU, with IRQs off: x86 traces the fault
 * before enabling them), and the clock every @mask + 1 faults.
 */
static __always_inline int fault_count(struct rc_track *t, int slot, __u64 mask,
				       const __u64 *gen_of)
{
	__u64 n = ++t->faults;

	if (n & mask)
		return 0;
	return burst_check(t, slot, n, gen_of);
}

/*
 * A fault of the tracked mm of @m, in @slot. Apart, so that an untracked
 * fault's program saves and restores no registers.
 */
static __noinline int fault_tracked(struct rc_mm *m, __u32 slot)
{
	struct rc_counters *c;

	slot &= RC_SLOT_MASK;
	c = counters_of(slot);
	if (!c)
		return 0;
	return fault_count(&c->fault, slot, m->check_mask, &m->gen);
}

/*
 * Whose fault it is comes from the current task's mm alone; an untracked
 * process's costs the mm load and one mm_index load.
 */
static __always_inline int handle_fault(bool btf)
{
	struct rc_mm *m = mm_find(current_key(btf));

	return m ? fault_tracked(m, mm_slot_of(m)) : 0;
}

TP_BOTH(fault, "page_fault_user", handle_fault(btf), unsigned long address,
	struct pt_regs *regs, unsigned long error_code)

/* The whole system, when nothing is filtered: every fault is slot 0's. */
static __always_inline int handle_fault_all(void)
{
	struct rc_counters *c = counters_of(0);

	return c ? fault_count(&c->fault, 0, burst_check_mask, NULL) : 0;
}

TP_BOTH(fault_all, "page_fault_user", handle_fault_all(), unsigned long address,
	struct pt_regs *regs, unsigned long error_code)

/* ---- direct and memcg reclaim: begin/end pairs per thread ---- */

static __always_inline bool reclaim_wanted(__u32 kind)
{
	struct task_struct *task;
	__u64 ino;

	if (current_slot(false) >= 0)
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
	struct rc_counters *c;
	struct rc_reclaim *e;
	__u64 lat, *slot;
	__u32 idx;
	int who;

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

	who = current_slot(false);
	c = who >= 0 ? counters_of(who & RC_SLOT_MASK) : NULL;
	if (c && kind < RC_RECLAIM_KINDS) {
		struct rc_stalls *st = &c->stall;

		st->count[kind]++;
		st->ns[kind] += lat;
		st->pages[kind] += nr_reclaimed;
	}

	e = event_reserve(sizeof(*e), RC_EV_RECLAIM, 0);
	if (e) {
		task = (struct task_struct *)bpf_get_current_task();
		e->kind = kind;
		e->order = s->order;
		e->latency_ns = lat;
		e->nr_reclaimed = nr_reclaimed;
		e->memcg_id = task_memcg_ino(task);
		bpf_get_current_comm(e->comm, sizeof(e->comm));
		bpf_ringbuf_submit(e, wake_now());
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
	e = event_reserve(sizeof(*e), RC_EV_KSWAPD, 0);
	if (!e)
		return 0;
	e->nid = nid;
	e->zid = zid;
	e->order = order;
	e->awake = awake;
	bpf_ringbuf_submit(e, wake_now());
	return 0;
}

TP_BOTH(kswapd_wake, "mm_vmscan_kswapd_wake",
	handle_kswapd(nid, zid, order, true), int nid, int zid, int order)

TP_BOTH(kswapd_sleep, "mm_vmscan_kswapd_sleep", handle_kswapd(nid, 0, 0, false),
	int nid)

/* ---- OOM kills, of anything: an OOM elsewhere is a warning too ---- */

static __always_inline int oom_event(struct task_struct *task, __u32 pid,
				     __u32 uid)
{
	struct rc_oom_kill *e;
	struct mm_struct *mm = NULL;

	stat_inc(RC_STAT_OOM_KILLS);
	e = event_reserve(sizeof(*e), RC_EV_OOM_KILL, 0);
	if (!e)
		return 0;
	e->victim_pid = pid;
	e->victim_uid = uid;
	e->comm[0] = 0;
	if (task) {
		e->victim_pid = BPF_CORE_READ(task, tgid);
		BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
		mm = BPF_CORE_READ(task, mm);
	}
	if (mm) {
		e->file_rss = mm_counter(mm, 0) * page_size;
		e->anon_rss = mm_counter(mm, 1) * page_size;
		e->shmem_rss = mm_counter(mm, 3) * page_size;
		e->total_vm = BPF_CORE_READ(mm, total_vm) * page_size;
	} else {
		e->file_rss = e->anon_rss = e->shmem_rss = e->total_vm = 0;
	}
	bpf_ringbuf_submit(e, wake_now());
	return 0;
}

TP_BOTH(oom, "mark_victim", oom_event(task, 0, uid), struct task_struct *task,
	__u32 uid)

/*
 * Before 6.8 mark_victim passed only the victim's pid. The OOM killer runs
 * in the task that ran out of memory, which is often the victim: then the
 * rest is read from it; otherwise the agent fills in what /proc still has.
 */
static __always_inline int oom_pid_event(int pid)
{
	struct task_struct *task;
	__u64 id = bpf_get_current_pid_tgid();

	if ((__u32)pid != (__u32)id && (__u32)pid != id >> 32)
		return oom_event(NULL, pid, RC_UID_UNKNOWN);
	task = (struct task_struct *)bpf_get_current_task();
	return oom_event(task, pid, BPF_CORE_READ(task, cred, uid.val));
}

TP_BOTH(oom_pid, "mark_victim", oom_pid_event(pid), int pid)

/* ---- RSS of the tracked processes, as the kernel accounts it ---- */

static __always_inline __s64 absdiff(__s64 a, __s64 b)
{
	return a > b ? a - b : b - a;
}

/* One RSS counter of @mm in pages, read directly (tp_btf, since v6.2). */
static __always_inline __s64 mm_counter_direct(struct mm_struct *mm, int member)
{
	__s64 v;

	if (bpf_core_type_exists(struct mm_rss_stat___old))
		return mm_counter(mm, member);
	switch (member) {
	case 0:
		v = mm->rss_stat[0].count;
		break;
	case 1:
		v = mm->rss_stat[1].count;
		break;
	case 2:
		v = mm->rss_stat[2].count;
		break;
	default:
		v = mm->rss_stat[3].count;
		break;
	}
	return v < 0 ? 0 : v;
}

/*
 * Wake the agent for this RSS event of @t (now @total pages) if it moved
 * rss_wake_pages since the last that did, or too many did not; else leave
 * it in the ring for the agent's next wake-up.
 */
static __always_inline __u64 rss_flags(struct rc_target *t, __s64 total)
{
	__u64 step = rss_wake_pages;

	if (!step)
		return wake_now();
	if (absdiff(total, t->woke_pages) < step && ++t->quiet < RC_QUIET_MAX)
		return BPF_RB_NO_WAKEUP;
	t->woke_pages = total;
	t->quiet = 0;
	return BPF_RB_FORCE_WAKEUP;
}

/*
 * A report is due for the tracked mm of @m: read every counter (but the
 * one the kernel just passed, @cur pages of @member) and emit.
 */
static __noinline int rss_report(struct mm_struct *mm, struct rc_mm *m,
				 int member, __s64 cur)
{
	__u64 entry = m->key;
	__u32 slot = entry & RC_SLOT_MASK;
	struct rc_target *t = &targets[slot];
	__s64 file, anon, shmem;
	struct rc_rss *e;

	/* the teardown of a process's memory (exit, or exec's old image) is
	 * not news, and its mm is about to be freed: unfile it */
	if (!BPF_CORE_READ(mm, mm_users.counter)) {
		mm_remove(m, entry);
		if (mm_entry(t->mm_key, slot) == entry)
			t->mm_key = 0;
		return 0;
	}
	file = member == 0 ? cur : mm_counter(mm, 0);
	anon = member == 1 ? cur : mm_counter(mm, 1);
	shmem = member == 3 ? cur : mm_counter(mm, 3);
	m->pages[0] = file;
	m->pages[1] = anon;
	m->pages[2] = member == 2 ? cur : mm_counter(mm, 2);
	m->pages[3] = shmem;
	e = event_reserve(sizeof(*e), RC_EV_RSS, t->tgid);
	if (!e)
		return 0;
	e->anon = anon * page_size;
	e->file = file * page_size;
	e->shmem = shmem * page_size;
	e->total = (file + anon + shmem) * page_size;
	bpf_ringbuf_submit(e, rss_flags(t, file + anon + shmem));
	return 0;
}

/*
 * @member of the tracked @mm (entry @m) changed; @count is its new value in
 * pages where the kernel passes it (before v6.2), negative where it must
 * be read: directly under tp_btf, with probe reads under raw_tp. A change
 * smaller than the entry's step is no news.
 */
static __always_inline int rss_changed(struct mm_struct *mm, struct rc_mm *m,
				       int member, long count, bool btf)
{
	__s64 cur;

	if (member < 0 || member > 3)
		return 0;
	if (count >= 0)
		cur = count;
	else
		cur = btf ? mm_counter_direct(mm, member)
			  : mm_counter(mm, member);
	if (absdiff(cur, m->pages[member & 3]) < m->step)
		return 0;
	return rss_report(mm, m, member, cur);
}

/* Apart from the lookup, so that an untracked process's saves no registers. */
static __noinline int rss_changed_btf(struct mm_struct *mm, struct rc_mm *m,
				      int member, long count)
{
	return rss_changed(mm, m, member, count, true);
}

static __noinline int rss_changed_raw(struct mm_struct *mm, struct rc_mm *m,
				      int member, long count)
{
	return rss_changed(mm, m, member, count, false);
}

/*
 * Any process's RSS change costs an mm_index load; the target's, a read of
 * the counter and a compare on the entry's cache line. In whole-system
 * mode nothing is filed: no per-process RSS.
 */
static __always_inline int handle_rss(struct mm_struct *mm, int member,
				      long count, bool btf)
{
	struct rc_mm *m;

	if (btf) {
		m = mm_find(mm_key_ptr(mm));
		return m ? rss_changed_btf(mm, m, member, count) : 0;
	}
	m = mm_find(mm_key_num((__u64)mm));
	return m ? rss_changed_raw(mm, m, member, count) : 0;
}

/* v6.2 and later: the counters are per-CPU, the tracepoint gives none. */
TP_BOTH(rss, "rss_stat", handle_rss(mm, member, -1, btf), struct mm_struct *mm,
	int member)

/* v5.5 to v6.1: the changed counter's new value comes along. */
TP_BOTH(rss_count, "rss_stat", handle_rss(mm, member, count, btf),
	struct mm_struct *mm, int member, long count)

/*
 * The first form (v5.5-rc1, replaced before v5.5 was released): no mm, the
 * current task's own RSS.
 */
TP_BOTH(rss_nomm, "rss_stat",
	handle_rss((struct mm_struct *)current_mm_num(), member, count, false),
	int member, long count)
