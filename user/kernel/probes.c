// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "pressure.h" /* before the skeleton: it names our structs */
#include "pressure.skel.h"
#include "kernel/probes.h"

/*
 * One form of a tracepoint's arguments and the two programs that read it
 * (and, for a tracepoint whose programs differ when the whole system is
 * watched, the two for that; 0: the same). sig spells the arguments'
 * kinds: 'p' a pointer, 'i' an integer.
 */
struct form {
	const char *sig;
	size_t btf_off, raw_off; /* offsets of the programs in the skeleton */
	size_t all_btf_off, all_raw_off;
};

struct tracepoint {
	const char *tp;
	const char *what;
	struct form forms[MAX_FORMS];
};

#define PROG_OFF(prog) offsetof(struct pressure_bpf, progs.prog)
#define FORM(sig, prog)                                               \
	{                                                             \
		sig, PROG_OFF(prog##_btf), PROG_OFF(prog##_raw), 0, 0 \
	}
#define FORM_ALL(sig, prog, all)                                  \
	{                                                         \
		sig, PROG_OFF(prog##_btf), PROG_OFF(prog##_raw),  \
			PROG_OFF(all##_btf), PROG_OFF(all##_raw), \
	}

/* Newest form first; a kernel whose form is not listed leaves it off. */
static const struct tracepoint tps[NR_PROBES] = {
	{ "page_fault_user",
	  "page faults",
	  { FORM_ALL("ipi", fault, fault_all) } },
	{ "mm_vmscan_direct_reclaim_begin",
	  "direct reclaim",
	  { FORM("ii", direct_begin) } },
	{ "mm_vmscan_direct_reclaim_end",
	  "direct reclaim",
	  { FORM("i", direct_end) } },
	{ "mm_vmscan_memcg_reclaim_begin",
	  "memcg reclaim",
	  { FORM("ii", memcg_begin) } },
	{ "mm_vmscan_memcg_reclaim_end",
	  "memcg reclaim",
	  { FORM("i", memcg_end) } },
	{ "mm_vmscan_kswapd_wake", "kswapd", { FORM("iii", kswapd_wake) } },
	{ "mm_vmscan_kswapd_sleep", "kswapd", { FORM("i", kswapd_sleep) } },
	/* (task, uid) since v6.8, (pid) before */
	{ "mark_victim", "OOM kills", { FORM("pi", oom), FORM("i", oom_pid) } },
	/* (mm, member) since v6.2, (mm, member, count) since v5.5, (member,
	 * count) in v5.5-rc1 only */
	{ "rss_stat",
	  "RSS",
	  { FORM("pi", rss), FORM("pii", rss_count), FORM("ii", rss_nomm) } },
	{ "sched_process_exec", "RSS after exec", { FORM("pip", exec) } },
};

static struct bpf_program *prog_at(struct pressure_bpf *skel, size_t off)
{
	return *(struct bpf_program **)((char *)skel + off);
}

/* The program of form @f for @state, @whole: watching the whole system. */
static struct bpf_program *form_prog(struct pressure_bpf *skel,
				     const struct form *f,
				     enum probe_state state, bool whole)
{
	bool btf = state == PROBE_USE_BTF;

	if (whole && f->all_btf_off)
		return prog_at(skel, btf ? f->all_btf_off : f->all_raw_off);
	return prog_at(skel, btf ? f->btf_off : f->raw_off);
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

/* 'p' for a pointer, 'i' for an integer or enum, '?' otherwise. */
static char kind_of(const struct btf *btf, __u32 id)
{
	const struct btf_type *t = btf__type_by_id(btf, id);

	while (t && (btf_is_typedef(t) || btf_is_mod(t)))
		t = btf__type_by_id(btf, t->type);
	if (!t)
		return '?';
	if (btf_is_ptr(t))
		return 'p';
	if (btf_is_int(t) || btf_is_enum(t) || btf_is_enum64(t))
		return 'i';
	return '?';
}

/*
 * The kinds of the tracepoint's arguments per the kernel's BTF into @sig
 * (btf_trace_<tp> is a typedef of a pointer to a prototype whose first
 * argument is the context). Returns 0, or -ENOENT when the kernel has no
 * such tracepoint.
 */
static int tp_sig(const struct btf *btf, const char *tp, char *sig, size_t len)
{
	const struct btf_param *p;
	const struct btf_type *t;
	char name[128];
	int id, n;

	snprintf(name, sizeof(name), "btf_trace_%s", tp);
	id = btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF);
	if (id < 0)
		return -ENOENT;
	t = btf__type_by_id(btf, id);
	t = t ? btf__type_by_id(btf, t->type) : NULL; /* pointer */
	t = t ? btf__type_by_id(btf, t->type) : NULL; /* prototype */
	if (!t || !btf_is_func_proto(t) || btf_vlen(t) < 1)
		return -EINVAL;
	p = btf_params(t);
	n = btf_vlen(t) - 1;
	if ((size_t)n >= len)
		return -E2BIG;
	for (int i = 0; i < n; i++)
		sig[i] = kind_of(btf, p[i + 1].type);
	sig[n] = 0;
	return 0;
}

/* Index of the form matching @sig, or -1. */
static int form_of(const struct tracepoint *tp, const char *sig)
{
	for (int f = 0; f < MAX_FORMS && tp->forms[f].sig; f++)
		if (!strcmp(tp->forms[f].sig, sig))
			return f;
	return -1;
}

int probes_select(struct probes *ps, struct pressure_bpf *skel,
		  enum probe_mode mode, bool whole)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int err = 0;

	if (!btf)
		return -errno;
	memset(ps, 0, sizeof(*ps));
	ps->whole = whole;
	for (int i = 0; i < NR_PROBES && !err; i++) {
		const struct tracepoint *tp = &tps[i];
		struct probe *p = &ps->p[i];
		char sig[sizeof(p->sig)];
		int n = tp_sig(btf, tp->tp, sig, sizeof(sig));

		p->tp = tp->tp;
		p->what = tp->what;
		p->form = n ? -1 : form_of(tp, sig);
		snprintf(p->sig, sizeof(p->sig), "%s", n ? "?" : sig);
		if (n == -ENOENT)
			p->off_why = PROBE_MISSING;
		else if (p->form < 0)
			p->off_why = PROBE_BAD_ARGS;
		if (p->form >= 0)
			p->state = mode == PROBE_RAW_TP ? PROBE_USE_RAW
							: PROBE_USE_BTF;
		/* off first: two forms may share one program */
		for (int f = 0; f < MAX_FORMS && tp->forms[f].sig && !err;
		     f++) {
			for (int w = 0; w < 2 && !err; w++) {
				err = bpf_program__set_autoload(
					form_prog(skel, &tp->forms[f],
						  PROBE_USE_BTF, w),
					false);
				if (!err)
					err = bpf_program__set_autoload(
						form_prog(skel, &tp->forms[f],
							  PROBE_USE_RAW, w),
						false);
			}
		}
		if (p->form >= 0 && !err)
			err = bpf_program__set_autoload(
				form_prog(skel, &tp->forms[p->form], p->state,
					  whole),
				true);
	}
	btf__free(btf);
	return err;
}

/* Tracepoint @i runs on page faults: attached only when needed. */
static bool per_fault(int i)
{
	return !strcmp(tps[i].tp, "page_fault_user") ||
	       !strcmp(tps[i].tp, "rss_stat");
}

/* Attach probe @i; a failure leaves it off for good. 0 or -errno. */
static int attach_one(struct probes *ps, struct pressure_bpf *skel, int i)
{
	struct probe *p = &ps->p[i];
	struct bpf_link *link;

	if (p->state == PROBE_OFF || p->link)
		return 0;
	link = bpf_program__attach(
		form_prog(skel, &tps[i].forms[p->form], p->state, ps->whole));
	if (!link) {
		p->off_why = PROBE_ATTACH_FAILED;
		p->err = errno;
		p->attach_mode = probe_state_name(p->state);
		p->state = PROBE_OFF;
		return -p->err;
	}
	p->link = link;
	return 0;
}

int probes_attach(struct probes *ps, struct pressure_bpf *skel, bool faults)
{
	int n = 0;

	for (int i = 0; i < NR_PROBES; i++) {
		if (per_fault(i) && !faults) {
			n += ps->p[i].state != PROBE_OFF;
			continue;
		}
		attach_one(ps, skel, i);
		n += ps->p[i].link != NULL;
	}
	ps->faults = faults;
	return n;
}

int probes_faults(struct probes *ps, struct pressure_bpf *skel, bool on)
{
	int err = 0;

	for (int i = 0; i < NR_PROBES; i++) {
		if (!per_fault(i))
			continue;
		if (on) {
			int e = attach_one(ps, skel, i);

			err = err ? err : e;
		} else {
			bpf_link__destroy(ps->p[i].link);
			ps->p[i].link = NULL;
		}
	}
	ps->faults = on;
	return err;
}

void probes_detach(struct probes *ps)
{
	for (int i = 0; i < NR_PROBES; i++) {
		bpf_link__destroy(ps->p[i].link);
		ps->p[i].link = NULL;
	}
}
