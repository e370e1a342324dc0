/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Command-line options of ramcache-bpf: parsing only, no side effects. */
#ifndef RAMCACHE_ARGS_H
#define RAMCACHE_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/policy.h"
#include "kernel/probes.h"
#include "emit/onlevel.h"
#include "executors/follow.h"
#include "executors/targets.h"

#define MAX_ON_LEVEL 8

struct opts {
	enum follow_mode follow;
	pid_t pid;	   /* FOLLOW_PID: the process */
	const char *match; /* FOLLOW_MATCH, or a filter of FOLLOW_ALL */
	bool has_user;	   /* --user: only processes of this uid */
	uid_t user;
	const char *cgroup;  /* --cgroup: only processes in or below it */
	const char *control; /* control page path, NULL = default */
	bool json;
	bool quiet; /* nothing on stdout */
	bool hist;
	bool verbose;
	bool dry_run;
	bool evict; /* false with --no-evict */
	bool mlock;
	uint64_t interval_ns;
	uint64_t duration_ns; /* 0 = until the target exits or Ctrl-C */
	uint64_t headroom;    /* bytes, 0 = default */
	uint64_t inactive;    /* bytes, 0 = default */
	bool headroom_set, inactive_set;
	uint64_t horizon_ns; /* forecast horizon */
	uint64_t ack_timeout_ns;
	uint64_t burst_faults;
	uint64_t burst_window_ns;
	uint64_t rss_step;
	enum probe_mode probe_mode;
	bool fault_probes_always; /* --fault-probes on */
	enum rc_score_policy policy;
	const char *metrics; /* ADDR:PORT or NULL */
	struct on_level on_level[MAX_ON_LEVEL];
	int nr_on_level;
	struct weight_rule weights[MAX_WEIGHTS];
	int nr_weights;
};

/* What args_parse wants main to do. */
enum args_result {
	ARGS_RUN = 0,
	ARGS_HELP,    /* --help: print usage, exit 0 */
	ARGS_VERSION, /* --version: exit 0 */
	ARGS_ERROR,   /* message in err, exit 2 */
};

/*
 * Fill @o from argv; @mem_total (bytes of RAM) is what "10%" sizes are of.
 * On ARGS_ERROR a one-line reason is in @err (without the program prefix).
 */
enum args_result args_parse(int argc, char **argv, uint64_t mem_total,
			    struct opts *o, char *err, size_t errlen);

/* One flag: long name, short letter (or a value >= 256), argument name. */
struct arg_opt {
	const char *name;
	int key;
	const char *arg;   /* NULL: takes no argument */
	const char *help;  /* lines separated by '\n' */
	const char *group; /* heading printed before it, or NULL */
};

/*
 * Parse "PID=W" or "PATTERN=W" (W a number in [0.001, 1000]; a PATTERN
 * that is all digits is a pid) into @r. 0 or -EINVAL.
 */
int args_parse_weight(const char *arg, struct weight_rule *r);

/* The table every flag is described in (for --help and its tests). */
const struct arg_opt *args_table(size_t *n);

/* --help, generated from the table. */
void args_usage(FILE *f);

#endif /* RAMCACHE_ARGS_H */
