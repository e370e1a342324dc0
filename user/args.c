// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stddef.h>

#include "args.h"
#include "proc/clock.h"
#include "core/policy.h"
#include "core/units.h"
#include "ramcache/control.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

enum {
	OPT_INTERVAL = 256,
	OPT_DURATION,
	OPT_HIST,
	OPT_VERSION,
	OPT_HEADROOM,
	OPT_INACTIVE,
	OPT_POLICY,
	OPT_DRY_RUN,
	OPT_HORIZON,
	OPT_ACK_TIMEOUT,
	OPT_CONTROL,
	OPT_BURST_FAULTS,
	OPT_BURST_WINDOW,
	OPT_RSS_STEP,
	OPT_PROBE_MODE,
	OPT_FAULT_PROBES,
	OPT_MATCH,
	OPT_METRICS,
	OPT_ON_LEVEL,
	OPT_NO_EVICT,
	OPT_NO_MLOCK,
	OPT_USER,
	OPT_CGROUP,
	OPT_QUIET,
	OPT_ALL,
	OPT_WEIGHT,
};

/*
 * The one description of every flag: getopt_long's table, the usage text
 * and (through a unit test) the README's flag table all come from it.
 * A help text may hold several lines separated by '\n'.
 */
/* @g: the heading printed before this flag, or NULL (same group). */
#define OPT(g, n, k, a, h)                                           \
	{                                                            \
		.name = n, .key = k, .arg = a, .help = h, .group = g \
	}

static const struct arg_opt opts_table[] = {
	OPT("Target", "pid", 'p', "PID",
	    "follow this process; exit 0 when it exits"),
	OPT(NULL, "all", OPT_ALL, NULL,
	    "follow every executor on the machine (each process\n"
	    "holding a control page), as each appears; --match,\n"
	    "--user and --cgroup narrow which ones"),
	OPT(NULL, "match", OPT_MATCH, "PATTERN",
	    "follow the process whose command line contains\n"
	    "PATTERN, and its successor after a restart"),
	OPT(NULL, "user", OPT_USER, "NAME|UID",
	    "with --match or --all: only processes running as\n"
	    "this user"),
	OPT(NULL, "cgroup", OPT_CGROUP, "PATH",
	    "with --match or --all: only processes in this cgroup\n"
	    "or below it (/system.slice/comfyui.service or\n"
	    "/sys/fs/cgroup/...)"),
	OPT(NULL, "control", OPT_CONTROL, "PATH",
	    "control page file (default: the executor's memfd)"),
	OPT("Output", "json", 'j', NULL,
	    "JSON Lines on stdout, one object per event"),
	OPT(NULL, "quiet", OPT_QUIET, NULL,
	    "nothing on stdout (for --metrics or eviction alone);\n"
	    "without it the agent stops when stdout is closed"),
	OPT(NULL, "interval", OPT_INTERVAL, "DUR",
	    "summary every DUR (default 2s)"),
	OPT(NULL, "duration", OPT_DURATION, "DUR",
	    "exit 0 after DUR (default: run until the target\n"
	    "exits or Ctrl-C)"),
	OPT(NULL, "hist", OPT_HIST, NULL,
	    "log2 histograms of stall and eviction latency at exit"),
	OPT(NULL, "metrics", OPT_METRICS, "ADDR:PORT",
	    "serve Prometheus metrics over HTTP"),
	OPT(NULL, "on-level", OPT_ON_LEVEL, "LEVEL:CMD",
	    "run CMD (sh -c) when the level rises to LEVEL or\n"
	    "above (warn, high, critical), or returns to ok;\n"
	    "may be repeated"),
	OPT(NULL, "verbose", 'v', NULL, "libbpf debug output"),
	OPT("Eviction", "headroom", OPT_HEADROOM, "SIZE",
	    "when the headroom expected would fall below SIZE,\n"
	    "evict inactive entries, then active ones of >= 512M,\n"
	    "then any (default min(10G, max(2G, 10% of RAM)); in\n"
	    "a memory cgroup at most 4% of its limit)"),
	OPT(NULL, "inactive", OPT_INACTIVE, "SIZE",
	    "below SIZE evict inactive entries only, but no\n"
	    "model whose reload is known (default: 2 x headroom)"),
	OPT(NULL, "policy", OPT_POLICY, "ram|cost",
	    "ram: 1.3^age x size, models first (default);\n"
	    "cost: size per second of recompute time"),
	OPT(NULL, "horizon", OPT_HORIZON, "DUR",
	    "look at most DUR ahead; the lead time until the\n"
	    "executor's answers are timed (default 1s)"),
	OPT(NULL, "ack-timeout", OPT_ACK_TIMEOUT, "DUR",
	    "count a command lost after DUR (default 5s)"),
	OPT(NULL, "weight", OPT_WEIGHT, "PID|PATTERN=W",
	    "with --all: rank this executor's entries by\n"
	    "score / W in its memory domain (W > 1 keeps them\n"
	    "longer; repeatable); anyone can put PATTERN in a\n"
	    "command line: PID, or --user/--cgroup, is the\n"
	    "trusted form"),
	OPT(NULL, "dry-run", OPT_DRY_RUN, NULL,
	    "report what would be evicted, send nothing"),
	OPT(NULL, "no-evict", OPT_NO_EVICT, NULL, "monitor only"),
	OPT("Tuning", "burst-faults", OPT_BURST_FAULTS, "N",
	    "faults per window and CPU that make a fault_burst\n"
	    "(default 2048)"),
	OPT(NULL, "burst-window", OPT_BURST_WINDOW, "DUR",
	    "fault burst window (default 100ms)"),
	OPT(NULL, "rss-step", OPT_RSS_STEP, "SIZE",
	    "report RSS when it moves by SIZE (default 4M)"),
	OPT(NULL, "probe-mode", OPT_PROBE_MODE, "MODE",
	    "auto, tp_btf or raw_tp (default auto)"),
	OPT(NULL, "fault-probes", OPT_FAULT_PROBES, "WHEN",
	    "auto: the programs on page faults (fault_burst,\n"
	    "rss) only while a domain nears its reserve; on:\n"
	    "always (default auto)"),
	OPT(NULL, "no-mlock", OPT_NO_MLOCK, NULL,
	    "do not lock the agent's memory"),
	OPT(NULL, "help", 'h', NULL, "this text"),
	OPT(NULL, "version", OPT_VERSION, NULL, "print the version"),
};

#define NR_OPTS ARRAY_SIZE(opts_table)

const struct arg_opt *args_table(size_t *n)
{
	*n = NR_OPTS;
	return opts_table;
}

static void build_getopt(struct option *lo, char *shorts)
{
	size_t k = 0;

	*shorts++ = ':'; /* ':' for a missing argument, '?' for unknown */
	for (size_t i = 0; i < NR_OPTS; i++) {
		const struct arg_opt *a = &opts_table[i];

		lo[i] = (struct option){ a->name,
					 a->arg ? required_argument
						: no_argument,
					 NULL, a->key };
		if (a->key < 256) {
			shorts[k++] = a->key;
			if (a->arg)
				shorts[k++] = ':';
		}
	}
	lo[NR_OPTS] = (struct option){ 0 };
	shorts[k] = '\0';
}

static const char usage_head[] =
	"Usage: ramcache-bpf [--pid PID | --match PATTERN | --all] [OPTIONS]\n"
	"\n"
	"Watch memory pressure with BPF (page faults, direct and memcg reclaim,\n"
	"kswapd, OOM kills, RSS) and ask the executor to evict cache entries\n"
	"through its control page before the kernel starts reclaiming.\n"
	"Without --pid, --match or --all the whole system is watched and\n"
	"nothing is evicted.\n"
	"\n";

static const char usage_tail[] =
	"\n"
	"Examples:\n"
	"  sudo ramcache-bpf --pid $(pgrep -f 'ComfyUI/main.py')\n"
	"  sudo ramcache-bpf --match main.py --json --metrics 127.0.0.1:9101\n"
	"  sudo ramcache-bpf --all --weight main.py=4 --json\n"
	"  sudo ramcache-bpf --interval 5s --on-level warn:'notify-send memory'\n"
	"  sudo ramcache-bpf --pid 1234 --duration 60s --hist\n"
	"\n"
	"Exit status: 0 done (target exited, --duration, Ctrl-C); 1 runtime\n"
	"error; 2 bad usage; 3 missing privileges; 4 no such process; 5 kernel\n"
	"not supported (no BTF, no tracepoints), or not in the host's pid\n"
	"namespace.\n";

#define HELP_COL 25

void args_usage(FILE *f)
{
	fputs(usage_head, f);
	for (size_t i = 0; i < NR_OPTS; i++) {
		const struct arg_opt *a = &opts_table[i];
		const char *h = a->help;
		int w;

		if (a->group)
			fprintf(f, "%s:\n", a->group);
		if (a->key < 256)
			w = fprintf(f, "  -%c, --%s", a->key, a->name);
		else
			w = fprintf(f, "      --%s", a->name);
		if (a->arg)
			w += fprintf(f, " %s", a->arg);
		fprintf(f, "%*s", w < HELP_COL ? HELP_COL - w : 1, "");
		for (;;) {
			const char *nl = strchr(h, '\n');

			fprintf(f, "%.*s\n",
				(int)(nl ? nl - h : (long)strlen(h)), h);
			if (!nl)
				break;
			h = nl + 1;
			fprintf(f, "%*s", HELP_COL, "");
		}
	}
	fputs(usage_tail, f);
}

static int parse_level_name(const char *s, size_t len)
{
	for (int i = RAMCACHE_LEVEL_OK; i <= RAMCACHE_LEVEL_CRITICAL; i++) {
		const char *name = policy_level_name(i);

		if (strlen(name) == len && !strncmp(s, name, len))
			return i;
	}
	return -1;
}

#define BAD(...)                                    \
	do {                                        \
		snprintf(err, errlen, __VA_ARGS__); \
		return ARGS_ERROR;                  \
	} while (0)

static void set_defaults(struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->evict = true;
	o->mlock = true;
	o->interval_ns = 2 * NSEC_PER_SEC;
	o->horizon_ns = NSEC_PER_SEC;
	o->ack_timeout_ns = 5 * NSEC_PER_SEC;
	o->burst_faults = 2048;
	o->burst_window_ns = NSEC_PER_SEC / 10;
	o->rss_step = 4 << 20;
}

/* A flag without an argument: the bool it sets, and to what. */
struct switch_flag {
	int key;
	size_t off;
	bool val;
};

static const struct switch_flag switch_flags[] = {
	{ 'j', offsetof(struct opts, json), true },
	{ 'v', offsetof(struct opts, verbose), true },
	{ OPT_HIST, offsetof(struct opts, hist), true },
	{ OPT_DRY_RUN, offsetof(struct opts, dry_run), true },
	{ OPT_NO_EVICT, offsetof(struct opts, evict), false },
	{ OPT_NO_MLOCK, offsetof(struct opts, mlock), false },
	{ OPT_QUIET, offsetof(struct opts, quiet), true },
};

/* False if @c is not a flag without an argument. */
static bool parse_switch(int c, struct opts *o)
{
	for (size_t i = 0; i < ARRAY_SIZE(switch_flags); i++) {
		if (switch_flags[i].key != c)
			continue;
		*(bool *)((char *)o + switch_flags[i].off) =
			switch_flags[i].val;
		return true;
	}
	return false;
}

/* A duration flag: where it goes and its smallest value. */
struct dur_flag {
	int key;
	const char *name;
	size_t off;
	uint64_t min_ns;
};

static const struct dur_flag dur_flags[] = {
	{ OPT_INTERVAL, "interval", offsetof(struct opts, interval_ns),
	  NSEC_PER_SEC / 100 },
	{ OPT_DURATION, "duration", offsetof(struct opts, duration_ns), 1 },
	{ OPT_HORIZON, "horizon", offsetof(struct opts, horizon_ns), 0 },
	{ OPT_ACK_TIMEOUT, "ack-timeout", offsetof(struct opts, ack_timeout_ns),
	  1 },
	{ OPT_BURST_WINDOW, "burst-window",
	  offsetof(struct opts, burst_window_ns), 1 },
};

/* 1 if @c is a duration flag and @arg was taken, 0 if not one, -1 bad. */
static int parse_duration_flag(int c, const char *arg, struct opts *o)
{
	for (size_t i = 0; i < ARRAY_SIZE(dur_flags); i++) {
		const struct dur_flag *d = &dur_flags[i];
		uint64_t *v = (uint64_t *)((char *)o + d->off);

		if (d->key != c)
			continue;
		if (units_parse_duration(arg, v) || *v < d->min_ns)
			return -1;
		return 1;
	}
	return 0;
}

static const char *dur_flag_name(int c)
{
	for (size_t i = 0; i < ARRAY_SIZE(dur_flags); i++)
		if (dur_flags[i].key == c)
			return dur_flags[i].name;
	return "?";
}

static enum args_result parse_on_level(const char *arg, struct opts *o,
				       char *err, size_t errlen)
{
	const char *colon = strchr(arg, ':');
	int lvl;

	if (!colon || !colon[1])
		BAD("invalid --on-level '%s' (LEVEL:CMD)", arg);
	lvl = parse_level_name(arg, colon - arg);
	if (lvl < 0)
		BAD("invalid level in --on-level '%s' (ok, warn, high, critical)",
		    arg);
	if (o->nr_on_level >= MAX_ON_LEVEL)
		BAD("too many --on-level (at most %d)", MAX_ON_LEVEL);
	o->on_level[o->nr_on_level].level = lvl;
	o->on_level[o->nr_on_level].cmd = colon + 1;
	o->nr_on_level++;
	return ARGS_RUN;
}

/* Whole numbers only: "10%" or "2K" is not a count. */
static int parse_count(const char *arg, uint64_t max, uint64_t *v)
{
	unsigned long long n;
	char *end;

	if (*arg < '0' || *arg > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(arg, &end, 10);
	if (errno || *end || n > max)
		return -EINVAL;
	*v = n;
	return 0;
}

static enum args_result parse_size_flag(int c, const char *arg,
					uint64_t mem_total, struct opts *o,
					char *err, size_t errlen)
{
	switch (c) {
	case OPT_HEADROOM:
		if (units_parse_size(arg, mem_total, &o->headroom))
			BAD("invalid --headroom '%s' (e.g. 2G, 512M)", arg);
		o->headroom_set = true;
		break;
	case OPT_INACTIVE:
		if (units_parse_size(arg, mem_total, &o->inactive))
			BAD("invalid --inactive '%s' (e.g. 4G, 0)", arg);
		o->inactive_set = true;
		break;
	case OPT_RSS_STEP:
		if (units_parse_size(arg, mem_total, &o->rss_step) ||
		    !o->rss_step)
			BAD("invalid --rss-step '%s'", arg);
		break;
	}
	return ARGS_RUN;
}

static enum args_result parse_choice(int c, const char *arg, struct opts *o,
				     char *err, size_t errlen)
{
	if (c == OPT_POLICY) {
		if (!strcmp(arg, "ram"))
			o->policy = RC_POLICY_RAM;
		else if (!strcmp(arg, "cost"))
			o->policy = RC_POLICY_COST;
		else
			BAD("invalid --policy '%s' (ram or cost)", arg);
	} else if (c == OPT_FAULT_PROBES) {
		if (!strcmp(arg, "auto"))
			o->fault_probes_always = false;
		else if (!strcmp(arg, "on"))
			o->fault_probes_always = true;
		else
			BAD("invalid --fault-probes '%s' (auto or on)", arg);
	} else {
		if (!strcmp(arg, "auto"))
			o->probe_mode = PROBE_AUTO;
		else if (!strcmp(arg, "tp_btf"))
			o->probe_mode = PROBE_TP_BTF;
		else if (!strcmp(arg, "raw_tp"))
			o->probe_mode = PROBE_RAW_TP;
		else
			BAD("invalid --probe-mode '%s' (auto, tp_btf or raw_tp)",
			    arg);
	}
	return ARGS_RUN;
}

int args_parse_weight(const char *arg, struct weight_rule *r)
{
	const char *eq = strrchr(arg, '=');
	size_t len = eq ? (size_t)(eq - arg) : 0;
	uint64_t v;
	char *end;
	double w;

	if (!len || len >= sizeof(r->pattern) || !eq[1])
		return -EINVAL;
	errno = 0;
	w = strtod(eq + 1, &end);
	if (errno || *end || !(w >= RC_WEIGHT_MIN && w <= RC_WEIGHT_MAX))
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->weight = w;
	memcpy(r->pattern, arg, len);
	if (parse_count(r->pattern, INT_MAX, &v))
		return 0; /* not a number: a pattern */
	if (!v)
		return -EINVAL;
	r->pid = (pid_t)v;
	r->pattern[0] = '\0';
	return 0;
}

/* One option with an argument. */
/* A user name, or a uid; names are looked up once, here. */
static enum args_result parse_user(const char *arg, struct opts *o, char *err,
				   size_t errlen)
{
	struct passwd *pw;
	uint64_t v;

	if (!parse_count(arg, UINT32_MAX - 1, &v))
		o->user = (uid_t)v;
	else if ((pw = getpwnam(arg)))
		o->user = pw->pw_uid;
	else
		BAD("unknown user '%s' for --user", arg);
	o->has_user = true;
	return ARGS_RUN;
}

static enum args_result parse_value(int c, const char *arg, uint64_t mem_total,
				    struct opts *o, char *err, size_t errlen)
{
	uint64_t v;
	int r;

	r = parse_duration_flag(c, arg, o);
	if (r < 0)
		BAD("invalid --%s '%s'%s", dur_flag_name(c), arg,
		    c == OPT_INTERVAL ? " (at least 10ms)" : "");
	if (r > 0)
		return ARGS_RUN;
	switch (c) {
	case 'p':
		if (parse_count(arg, INT_MAX, &v) || !v)
			BAD("invalid pid '%s'", arg);
		o->pid = v;
		return ARGS_RUN;
	case OPT_BURST_FAULTS:
		if (parse_count(arg, UINT32_MAX, &v) || !v)
			BAD("invalid --burst-faults '%s' (a count of faults, e.g. 2048)",
			    arg);
		o->burst_faults = v;
		return ARGS_RUN;
	case OPT_POLICY:
	case OPT_PROBE_MODE:
	case OPT_FAULT_PROBES:
		return parse_choice(c, arg, o, err, errlen);
	case OPT_CONTROL:
		o->control = arg;
		return ARGS_RUN;
	case OPT_MATCH:
		if (!*arg)
			BAD("empty --match pattern");
		o->match = arg;
		return ARGS_RUN;
	case OPT_USER:
		return parse_user(arg, o, err, errlen);
	case OPT_CGROUP:
		if (arg[0] != '/')
			BAD("invalid --cgroup '%s' (an absolute path, as in "
			    "/proc/PID/cgroup)",
			    arg);
		o->cgroup = arg;
		return ARGS_RUN;
	case OPT_METRICS:
		o->metrics = arg;
		return ARGS_RUN;
	case OPT_WEIGHT:
		if (o->nr_weights >= MAX_WEIGHTS)
			BAD("too many --weight (at most %d)", MAX_WEIGHTS);
		if (args_parse_weight(arg, &o->weights[o->nr_weights]))
			BAD("invalid --weight '%s' (PID=W or PATTERN=W, W from 0.001 to 1000)",
			    arg);
		o->nr_weights++;
		return ARGS_RUN;
	case OPT_ON_LEVEL:
		return parse_on_level(arg, o, err, errlen);
	}
	return parse_size_flag(c, arg, mem_total, o, err, errlen);
}

enum args_result args_parse(int argc, char **argv, uint64_t mem_total,
			    struct opts *o, char *err, size_t errlen)
{
	struct option lo[NR_OPTS + 1];
	char shorts[2 * NR_OPTS + 2];
	enum args_result r;
	int c;

	set_defaults(o);
	build_getopt(lo, shorts);
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (c == 'h')
			return ARGS_HELP;
		if (c == OPT_VERSION)
			return ARGS_VERSION;
		if (c == ':')
			BAD("option '%s' needs an argument", argv[optind - 1]);
		if (c == '?')
			BAD("unknown option '%s'", argv[optind - 1]);
		if (c == OPT_ALL)
			o->follow = FOLLOW_ALL;
		if (c == OPT_ALL || parse_switch(c, o))
			continue;
		r = parse_value(c, optarg, mem_total, o, err, errlen);
		if (r != ARGS_RUN)
			return r;
	}
	if (optind < argc)
		BAD("unexpected argument '%s'", argv[optind]);
	if (o->pid && o->match)
		BAD("--pid and --match exclude each other");
	if (o->follow == FOLLOW_ALL && o->pid)
		BAD("--all and --pid exclude each other");
	if (o->follow == FOLLOW_ALL && o->control)
		BAD("--all and --control exclude each other (a page file is one executor's)");
	if ((o->has_user || o->cgroup) && !o->match && o->follow != FOLLOW_ALL)
		BAD("--user and --cgroup go with --match or --all");
	if (o->nr_weights && o->follow != FOLLOW_ALL)
		BAD("--weight goes with --all (it ranks executors against each other)");
	if (o->quiet && o->json)
		BAD("--quiet and --json exclude each other");
	if (o->headroom_set && o->inactive_set && o->inactive &&
	    o->inactive < o->headroom)
		BAD("--inactive must be 0 or at least --headroom");
	if (o->follow != FOLLOW_ALL)
		o->follow = o->pid     ? FOLLOW_PID
			    : o->match ? FOLLOW_MATCH
				       : FOLLOW_SYSTEM;
	return ARGS_RUN;
}
