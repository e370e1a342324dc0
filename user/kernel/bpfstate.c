// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kernel/bpfstate.h"
#include "pressure.skel.h"

int bpfstate_open(struct bpfstate *b, const struct bpfstate_settings *s)
{
	/*
	 * vmlinux BTF named explicitly: libbpf then takes CO-RE types from it
	 * alone and never walks module BTFs (BPF_BTF_GET_NEXT_ID needs
	 * CAP_SYS_ADMIN), so CAP_BPF and CAP_PERFMON are enough to load.
	 */
	struct bpf_object_open_opts oo = {
		.sz = sizeof(oo),
		.btf_custom_path = "/sys/kernel/btf/vmlinux",
	};
	long page;

	memset(b, 0, sizeof(*b));
	b->ncpus = libbpf_num_possible_cpus();
	if (b->ncpus <= 0)
		return b->ncpus ? b->ncpus : -EINVAL;
	b->skel = pressure_bpf__open_opts(&oo);
	if (!b->skel)
		return errno ? -errno : -EINVAL;
	b->skel->rodata->filter_tgid = s->filter;
	b->skel->rodata->burst_window_ns = s->burst_window_ns;
	b->skel->rodata->burst_faults = s->burst_faults;
	/* the clock is read at most every 64 faults, at multiples of the
	 * lowest set bit of burst_faults so the burst count is still hit */
	b->skel->rodata->burst_check_mask =
		(s->burst_faults & -s->burst_faults) < 64
			? (s->burst_faults & -s->burst_faults) - 1
			: 63;
	page = sysconf(_SC_PAGESIZE);
	b->skel->rodata->page_size = page;
	b->skel->rodata->rss_step_pages = (s->rss_step + page - 1) / page;

	return probes_select(&b->probes, b->skel, s->probe_mode,
			     !b->skel->rodata->filter_tgid);
}

int bpfstate_load_opened(struct bpfstate *b)
{
	int err = pressure_bpf__load(b->skel);

	if (err)
		return err;
	if (!b->skel->rodata->filter_tgid)
		return bpfstate_track(b, 0);
	return 0;
}

int bpfstate_load(struct bpfstate *b, const struct bpfstate_settings *s)
{
	int err = bpfstate_open(b, s);

	return err ? err : bpfstate_load_opened(b);
}

int bpfstate_attach(struct bpfstate *b, bool faults)
{
	b->nr_attached = probes_attach(&b->probes, b->skel, faults);
	return b->nr_attached;
}

int bpfstate_faults(struct bpfstate *b, bool on)
{
	return probes_faults(&b->probes, b->skel, on);
}

int bpfstate_events_open(struct bpfstate *b, bpfstate_event_fn fn, void *ctx)
{
	b->rb = ring_buffer__new(bpfstate_events_fd(b), fn, ctx, NULL);
	return b->rb ? 0 : -errno;
}

int bpfstate_events_epoll_fd(struct bpfstate *b)
{
	return ring_buffer__epoll_fd(b->rb);
}

void bpfstate_events_consume(struct bpfstate *b)
{
	ring_buffer__consume(b->rb);
}

void bpfstate_events_close(struct bpfstate *b)
{
	ring_buffer__free(b->rb);
	b->rb = NULL;
}

static int (*print_fn)(int level, const char *fmt, va_list ap);

static int print_libbpf(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	return print_fn(level, fmt, ap);
}

void bpfstate_set_print(int (*fn)(int level, const char *fmt, va_list ap))
{
	print_fn = fn;
	libbpf_set_print(print_libbpf);
}

void bpfstate_destroy(struct bpfstate *b)
{
	bpfstate_events_close(b);
	probes_detach(&b->probes);
	bpf_link__destroy(b->learn);
	b->learn = NULL;
	pressure_bpf__destroy(b->skel);
	b->skel = NULL;
}

static int slot_of(const struct bpfstate *b, pid_t tgid)
{
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		if (b->slots[i] == tgid)
			return i;
	return -1;
}

/* The counters of @slot summed over CPUs, as counted since load. */
static int read_counters(struct bpfstate *b, __u32 slot, struct track_totals *t)
{
	struct rc_counters *v = calloc(b->ncpus, sizeof(*v));
	int err;

	if (!v)
		return -ENOMEM;
	memset(t, 0, sizeof(*t));
	err = bpf_map__lookup_elem(b->skel->maps.counters, &slot, sizeof(slot),
				   v, sizeof(*v) * b->ncpus, 0);
	for (int c = 0; !err && c < b->ncpus; c++) {
		t->faults += v[c].fault.faults;
		for (int k = 0; k < RC_RECLAIM_KINDS; k++) {
			t->reclaim_count[k] += v[c].stall.count[k];
			t->reclaim_ns[k] += v[c].stall.ns[k];
			t->reclaim_pages[k] += v[c].stall.pages[k];
		}
	}
	free(v);
	return err;
}

/*
 * Start @slot's counts from now: the BPF side's go on from the slot's
 * earlier holders (writing them back would race with its increments of
 * every other slot), so the agent keeps where they stood.
 */
static int restart_counts(struct bpfstate *b, __u32 slot)
{
	return read_counters(b, slot, &b->base[slot]);
}

/* Take @slot's mm out of the index the BPF programs search. */
static void mm_unfile(struct bpfstate *b, int slot)
{
	struct rc_mm *index = b->skel->bss->mm_index;
	__u64 key = b->skel->bss->targets[slot].mm_key;
	__u64 want = (key & ~RC_SLOT_MASK) | (__u64)slot;

	if (!key)
		return;
	for (int i = 0; i < RC_MM_SLOTS; i++) {
		__u64 next = __atomic_load_n(&index[(i + 1) % RC_MM_SLOTS].key,
					     __ATOMIC_RELAXED);
		/* a lookup stops at FREE: leave a tombstone mid-chain */
		__u64 gone = next ? RC_MM_TOMB : RC_MM_FREE, expect = want;

		__atomic_compare_exchange_n(&index[i].key, &expect, gone, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&b->skel->bss->targets[slot].mm_key, 0,
			 __ATOMIC_RELAXED);
}

/* Run the learn_mm iterator over every task for the target in @slot. */
static int mm_learn(struct bpfstate *b, int slot, pid_t tgid)
{
	char buf[64];
	ssize_t n;
	int fd;

	if (!b->learn) {
		b->learn =
			bpf_program__attach_iter(b->skel->progs.learn_mm, NULL);
		if (!b->learn)
			return -errno;
	}
	b->skel->bss->learn_tgid = tgid;
	b->skel->bss->learn_slot = slot;
	fd = bpf_iter_create(bpf_link__fd(b->learn));
	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	close(fd);
	b->skel->bss->learn_tgid = 0;
	if (n < 0)
		return -errno;
	if (!b->skel->bss->targets[slot].mm_key)
		return bpfstate_stat(b, RC_STAT_MM_INDEX_FULL) ? -ENOSPC
							       : -ESRCH;
	return 0;
}

int bpfstate_track(struct bpfstate *b, pid_t tgid)
{
	int slot, err;

	if (!b->skel->rodata->filter_tgid)
		return tgid ? -EINVAL : restart_counts(b, 0);
	if (tgid <= 0)
		return -EINVAL;
	slot = slot_of(b, tgid);
	if (slot < 0)
		slot = slot_of(b, 0);
	if (slot < 0)
		return -ENOSPC;
	err = restart_counts(b, slot);
	if (err)
		return err;
	b->slots[slot] = tgid;
	/* the tgid first, so that an exec from now on files the new mm */
	__atomic_store_n(&b->skel->bss->targets[slot].tgid, tgid,
			 __ATOMIC_RELEASE);
	err = mm_learn(b, slot, tgid);
	if (err)
		bpfstate_untrack(b, tgid);
	return err;
}

int bpfstate_untrack(struct bpfstate *b, pid_t tgid)
{
	int slot = tgid > 0 ? slot_of(b, tgid) : -1;

	if (slot < 0)
		return -ENOENT;
	__atomic_store_n(&b->skel->bss->targets[slot].tgid, 0,
			 __ATOMIC_RELEASE);
	mm_unfile(b, slot);
	b->slots[slot] = 0;
	return 0;
}

void bpfstate_rss_wake(struct bpfstate *b, uint64_t bytes)
{
	uint64_t page = b->skel->rodata->page_size;

	__atomic_store_n(&b->skel->bss->rss_wake_pages,
			 bytes ? (bytes + page - 1) / page : 0,
			 __ATOMIC_RELAXED);
}

int bpfstate_watch_memcg(struct bpfstate *b, uint64_t ino)
{
	int first = memcgref_get(&b->memcgs, ino);
	__u8 one = 1;

	if (first <= 0)
		return first;
	if (!bpf_map__update_elem(b->skel->maps.memcgs, &ino, sizeof(ino), &one,
				  sizeof(one), BPF_ANY))
		return 0;
	first = -errno;
	memcgref_put(&b->memcgs, ino);
	return first;
}

int bpfstate_unwatch_memcg(struct bpfstate *b, uint64_t ino)
{
	int last = memcgref_put(&b->memcgs, ino);

	if (last <= 0)
		return last;
	return bpf_map__delete_elem(b->skel->maps.memcgs, &ino, sizeof(ino), 0)
		       ? -errno
		       : 0;
}

int bpfstate_totals(struct bpfstate *b, pid_t tgid, struct track_totals *t)
{
	const struct track_totals *base;
	__u32 slot = 0;
	int s, err;

	memset(t, 0, sizeof(*t));
	if (b->skel->rodata->filter_tgid) {
		s = tgid > 0 ? slot_of(b, tgid) : -1;
		if (s < 0)
			return -ENOENT;
		slot = s;
	} else if (tgid) {
		return -ENOENT;
	}
	err = read_counters(b, slot, t);
	if (err)
		return err;
	base = &b->base[slot];
	t->faults -= base->faults;
	for (int k = 0; k < RC_RECLAIM_KINDS; k++) {
		t->reclaim_count[k] -= base->reclaim_count[k];
		t->reclaim_ns[k] -= base->reclaim_ns[k];
		t->reclaim_pages[k] -= base->reclaim_pages[k];
	}
	return 0;
}

static uint64_t percpu_sum(struct bpfstate *b, struct bpf_map *map, __u32 key)
{
	__u64 *v = calloc(b->ncpus, sizeof(*v));
	uint64_t sum = 0;

	if (!v)
		return 0;
	if (!bpf_map__lookup_elem(map, &key, sizeof(key), v,
				  sizeof(*v) * b->ncpus, 0))
		for (int c = 0; c < b->ncpus; c++)
			sum += v[c];
	free(v);
	return sum;
}

uint64_t bpfstate_stat(struct bpfstate *b, enum rc_stat idx)
{
	return percpu_sum(b, b->skel->maps.stats, idx);
}

int bpfstate_hist(struct bpfstate *b, enum rc_hist_kind kind, struct hist *h)
{
	memset(h, 0, sizeof(*h));
	if (kind >= RC_HIST_KINDS)
		return -EINVAL;
	for (int i = 0; i < RC_HIST_SLOTS && i < HIST_SLOTS; i++)
		h->slots[i] = percpu_sum(b, b->skel->maps.hists,
					 kind * RC_HIST_SLOTS + i);
	return 0;
}

int bpfstate_events_fd(struct bpfstate *b)
{
	return bpf_map__fd(b->skel->maps.events);
}
