// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpfstate.h"
#include "pressure.skel.h"

int bpfstate_load(struct bpfstate *b, const struct opts *o)
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
	int err;

	memset(b, 0, sizeof(*b));
	b->ncpus = libbpf_num_possible_cpus();
	if (b->ncpus <= 0)
		return b->ncpus ? b->ncpus : -EINVAL;
	b->skel = pressure_bpf__open_opts(&oo);
	if (!b->skel)
		return errno ? -errno : -EINVAL;
	b->skel->rodata->filter_tgid = o->pid != 0 || o->match != NULL;
	b->skel->rodata->burst_window_ns = o->burst_window_ns;
	b->skel->rodata->burst_faults = o->burst_faults;
	/* the clock is read at most every 64 faults, at multiples of the
	 * lowest set bit of burst_faults so the burst count is still hit */
	b->skel->rodata->burst_check_mask =
		(o->burst_faults & -o->burst_faults) < 64
			? (o->burst_faults & -o->burst_faults) - 1
			: 63;
	b->skel->rodata->rss_step = o->rss_step;
	b->skel->rodata->page_size = sysconf(_SC_PAGESIZE);

	err = probes_select(&b->probes, b->skel, o->probe_mode);
	if (err)
		return err;
	err = pressure_bpf__load(b->skel);
	if (err)
		return err;
	if (!b->skel->rodata->filter_tgid)
		return bpfstate_track(b, 0);
	return 0;
}

int bpfstate_attach(struct bpfstate *b)
{
	b->nr_attached = probes_attach(&b->probes, b->skel);
	return b->nr_attached;
}

void bpfstate_destroy(struct bpfstate *b)
{
	probes_detach(&b->probes);
	pressure_bpf__destroy(b->skel);
	b->skel = NULL;
}

int bpfstate_track(struct bpfstate *b, pid_t tgid)
{
	struct rc_track *zero = calloc(b->ncpus, sizeof(*zero));
	__u32 slot = 0;
	int err;

	if (!zero)
		return -ENOMEM;
	/* one target at a time: slot 0 starts from zero for each */
	b->skel->bss->target_tgid = 0;
	err = bpf_map__update_elem(b->skel->maps.tracked, &slot, sizeof(slot),
				   zero, sizeof(*zero) * b->ncpus, BPF_ANY);
	free(zero);
	if (err)
		return err;
	b->tracked = tgid;
	memset(&b->skel->bss->rss_state, 0, sizeof(b->skel->bss->rss_state));
	b->skel->bss->target_tgid = tgid;
	return 0;
}

int bpfstate_untrack(struct bpfstate *b, pid_t tgid)
{
	if (b->skel->bss->target_tgid != (__u32)tgid)
		return -ENOENT;
	b->skel->bss->target_tgid = 0;
	return 0;
}

int bpfstate_watch_memcg(struct bpfstate *b, uint64_t ino)
{
	__u8 one = 1;

	return bpf_map__update_elem(b->skel->maps.memcgs, &ino, sizeof(ino),
				    &one, sizeof(one), BPF_ANY);
}

int bpfstate_unwatch_memcg(struct bpfstate *b, uint64_t ino)
{
	return bpf_map__delete_elem(b->skel->maps.memcgs, &ino, sizeof(ino), 0);
}

int bpfstate_totals(struct bpfstate *b, pid_t tgid, struct track_totals *t)
{
	struct rc_track *v;
	__u32 slot = 0;
	int err;

	memset(t, 0, sizeof(*t));
	if (tgid != b->tracked)
		return -ENOENT;
	v = calloc(b->ncpus, sizeof(*v));
	if (!v)
		return -ENOMEM;
	err = bpf_map__lookup_elem(b->skel->maps.tracked, &slot, sizeof(slot),
				   v, sizeof(*v) * b->ncpus, 0);
	for (int c = 0; !err && c < b->ncpus; c++) {
		t->faults += v[c].faults;
		for (int k = 0; k < RC_RECLAIM_KINDS; k++) {
			t->reclaim_count[k] += v[c].reclaim_count[k];
			t->reclaim_ns[k] += v[c].reclaim_ns[k];
			t->reclaim_pages[k] += v[c].reclaim_pages[k];
		}
	}
	free(v);
	return err;
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
