// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "pressure.h" /* before the skeleton: it names our structs */
#include "pressure.skel.h"
#include "probes.h"

struct prog_pair {
	const char *tp;
	const char *what;
	int nargs; /* arguments of the tracepoint our handler expects */
	size_t btf_off, raw_off; /* offsets of the programs in skel->progs */
};

#define PAIR(tp, what, nargs, prog)                                      \
	{                                                                \
		tp, what, nargs,                                         \
			offsetof(struct pressure_bpf, progs.prog##_btf), \
			offsetof(struct pressure_bpf, progs.prog##_raw)  \
	}

static const struct prog_pair pairs[NR_PROBES] = {
	PAIR("page_fault_user", "page faults", 3, fault),
	PAIR("mm_vmscan_direct_reclaim_begin", "direct reclaim", 2,
	     direct_begin),
	PAIR("mm_vmscan_direct_reclaim_end", "direct reclaim", 1, direct_end),
	PAIR("mm_vmscan_memcg_reclaim_begin", "memcg reclaim", 2, memcg_begin),
	PAIR("mm_vmscan_memcg_reclaim_end", "memcg reclaim", 1, memcg_end),
	PAIR("mm_vmscan_kswapd_wake", "kswapd", 3, kswapd_wake),
	PAIR("mm_vmscan_kswapd_sleep", "kswapd", 1, kswapd_sleep),
	PAIR("mark_victim", "OOM kills", 2, oom),
	PAIR("rss_stat", "RSS", 2, rss),
};

static struct bpf_program *prog_at(struct pressure_bpf *skel, size_t off)
{
	return *(struct bpf_program **)((char *)skel + off);
}

const char *probe_state_name(enum probe_state s)
{
	switch (s) {
	case PROBE_USE_BTF:
		return "tp_btf";
	case PROBE_USE_RAW:
		return "raw_tp";
	default:
		return "off";
	}
}

/*
 * Arguments of the tracepoint per the kernel's BTF (btf_trace_<tp> is a
 * typedef of a pointer to a prototype whose first argument is the context),
 * or -ENOENT when the kernel has no such tracepoint.
 */
static int tp_nargs(const struct btf *btf, const char *tp)
{
	const struct btf_type *t;
	char name[128];
	int id;

	snprintf(name, sizeof(name), "btf_trace_%s", tp);
	id = btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF);
	if (id < 0)
		return -ENOENT;
	t = btf__type_by_id(btf, id);
	t = t ? btf__type_by_id(btf, t->type) : NULL; /* pointer */
	t = t ? btf__type_by_id(btf, t->type) : NULL; /* prototype */
	if (!t || !btf_is_func_proto(t))
		return -EINVAL;
	return btf_vlen(t) - 1;
}

int probes_select(struct probes *ps, struct pressure_bpf *skel,
		  enum probe_mode mode)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int err;

	if (!btf)
		return -errno;
	memset(ps, 0, sizeof(*ps));
	for (int i = 0; i < NR_PROBES; i++) {
		const struct prog_pair *pp = &pairs[i];
		struct probe *p = &ps->p[i];
		int n = tp_nargs(btf, pp->tp);

		p->tp = pp->tp;
		p->what = pp->what;
		p->nargs = n;
		p->want_nargs = pp->nargs;
		if (n == -ENOENT) {
			p->off_why = PROBE_MISSING;
			p->state = PROBE_OFF;
		} else if (n != pp->nargs) {
			p->off_why = PROBE_BAD_ARGS;
			p->state = PROBE_OFF;
		} else {
			p->state = mode == PROBE_RAW_TP ? PROBE_USE_RAW
							: PROBE_USE_BTF;
		}
		err = bpf_program__set_autoload(prog_at(skel, pp->btf_off),
						p->state == PROBE_USE_BTF);
		if (!err)
			err = bpf_program__set_autoload(
				prog_at(skel, pp->raw_off),
				p->state == PROBE_USE_RAW);
		if (err) {
			btf__free(btf);
			return err;
		}
	}
	btf__free(btf);
	return 0;
}

int probes_attach(struct probes *ps, struct pressure_bpf *skel)
{
	int n = 0;

	for (int i = 0; i < NR_PROBES; i++) {
		struct probe *p = &ps->p[i];
		struct bpf_program *prog;
		struct bpf_link *link;

		if (p->state == PROBE_OFF)
			continue;
		prog = prog_at(skel, p->state == PROBE_USE_BTF
					     ? pairs[i].btf_off
					     : pairs[i].raw_off);
		link = bpf_program__attach(prog);
		if (!link) {
			p->off_why = PROBE_ATTACH_FAILED;
			p->err = errno;
			p->attach_mode = probe_state_name(p->state);
			p->state = PROBE_OFF;
			continue;
		}
		p->link = link;
		n++;
	}
	return n;
}

void probes_detach(struct probes *ps)
{
	for (int i = 0; i < NR_PROBES; i++) {
		bpf_link__destroy(ps->p[i].link);
		ps->p[i].link = NULL;
	}
}
