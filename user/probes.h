/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which tracepoints the BPF programs attach to, and how: tp_btf where the
 * kernel's BTF describes the tracepoint, raw_tp otherwise (or when forced).
 */
#ifndef RAMCACHE_PROBES_H
#define RAMCACHE_PROBES_H

#include <stdbool.h>

#include "args.h"

struct pressure_bpf;
struct bpf_link;

enum probe_state {
	PROBE_OFF = 0, /* not chosen yet, or the kernel lacks it */
	PROBE_USE_BTF,
	PROBE_USE_RAW,
};

/* Why a tracepoint is off, for the warning output.c prints. */
enum probe_off {
	PROBE_OK = 0,
	PROBE_MISSING,	     /* the kernel has no such tracepoint */
	PROBE_BAD_ARGS,	     /* nargs arguments, want_nargs expected */
	PROBE_ATTACH_FAILED, /* attaching attach_mode failed with err */
};

struct probe {
	const char *tp;	  /* tracepoint name */
	const char *what; /* what it tells, for the warning */
	enum probe_state state;
	struct bpf_link *link; /* NULL when not attached */
	enum probe_off off_why;
	int nargs, want_nargs;
	int err; /* errno of a failed attach */
	const char *attach_mode;
};

#define NR_PROBES 9

struct probes {
	struct probe p[NR_PROBES];
};

/*
 * Before load: pick tp_btf or raw_tp for each tracepoint and disable the
 * other program. A tracepoint missing from the kernel is left off, its
 * off_why set (out_probe_warnings() tells the user). Returns 0, or -errno
 * when the kernel's BTF cannot be read.
 */
int probes_select(struct probes *ps, struct pressure_bpf *skel,
		  enum probe_mode mode);

/*
 * After load: attach every chosen program. A failure sets off_why and the
 * rest keeps working. Returns the number attached (0 is for main to judge).
 */
int probes_attach(struct probes *ps, struct pressure_bpf *skel);

/* Detach every program (NULL-safe, idempotent). */
void probes_detach(struct probes *ps);

/* "tp_btf", "raw_tp" or "off". */
const char *probe_state_name(enum probe_state s);

#endif /* RAMCACHE_PROBES_H */
