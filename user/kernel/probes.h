/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which tracepoints the BPF programs attach to, and how: tp_btf where the
 * kernel's BTF describes the tracepoint, raw_tp otherwise (or when forced).
 */
#ifndef RAMCACHE_PROBES_H
#define RAMCACHE_PROBES_H

#include <stdbool.h>

enum probe_mode {
	PROBE_AUTO = 0, /* tp_btf where the kernel has it, else raw_tp */
	PROBE_TP_BTF,
	PROBE_RAW_TP,
};

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
	PROBE_BAD_ARGS,	     /* arguments (sig) of no form we know */
	PROBE_ATTACH_FAILED, /* attaching attach_mode failed with err */
};

struct probe {
	const char *tp;	  /* tracepoint name */
	const char *what; /* what it tells, for the warning */
	enum probe_state state;
	int form; /* which of the tracepoint's argument forms, -1: none */
	struct bpf_link *link; /* NULL when not attached */
	enum probe_off off_why;
	char sig[8]; /* the kernel's argument kinds: 'p'ointer, 'i'nteger */
	int err;     /* errno of a failed attach */
	const char *attach_mode;
};

#define NR_PROBES 10
#define MAX_FORMS 3 /* argument forms of one tracepoint across kernels */

struct probes {
	struct probe p[NR_PROBES];
	bool whole;  /* the whole system watched: its own fault programs */
	bool faults; /* the per-fault programs are attached */
};

/*
 * Before load: pick, for each tracepoint, the programs that read the
 * kernel's form of its arguments (per its BTF), tp_btf or raw_tp (those
 * for the whole system when @whole), and disable the others. A tracepoint missing from the kernel, or of a form
 * this version does not know, is left off, its off_why set
 * (out_probe_warnings() tells the user). Returns 0, or -errno when the
 * kernel's BTF cannot be read.
 */
int probes_select(struct probes *ps, struct pressure_bpf *skel,
		  enum probe_mode mode, bool whole);

/*
 * After load: attach every chosen program, those that run on page faults
 * (page_fault_user, rss_stat) only when @faults. A failure sets off_why
 * and the rest keeps working. Returns the number attached, counting the
 * per-fault ones left for later (0 is for main to judge).
 */
int probes_attach(struct probes *ps, struct pressure_bpf *skel, bool faults);

/*
 * Attach (@on) or detach the per-fault programs. 0, or the -errno of the
 * first that failed to attach (it stays off; the others are on).
 */
int probes_faults(struct probes *ps, struct pressure_bpf *skel, bool on);

/* Detach every program (NULL-safe, idempotent). */
void probes_detach(struct probes *ps);

/* "tp_btf", "raw_tp" or "off". */
const char *probe_state_name(enum probe_state s);

#endif /* RAMCACHE_PROBES_H */
