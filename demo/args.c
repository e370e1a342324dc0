// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Command line of ramcache-demo. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

#ifndef RAMCACHE_VERSION
#define RAMCACHE_VERSION "0.0.0"
#endif

static const char usage[] =
	"Usage: ramcache-demo [OPTION]...\n"
	"Play a ComfyUI-like workflow: load models, cache node outputs across\n"
	"prompts, and evict entries as the chosen policy says.\n"
	"\n"
	"  --policy none|local|agent|psi (default agent)\n"
	"      none: never evict (the classic cache); local: evict after each\n"
	"      node while available memory is below --local-headroom; agent:\n"
	"      obey ramcache-bpf, local while no agent is alive; psi: evict\n"
	"      like local, but only when a PSI trigger fires. All but none\n"
	"      also evict before an allocation that cannot fit.\n"
	"  --psi-trigger SPEC   psi policy: the trigger, on our memory\n"
	"      cgroup's memory.pressure (v2) or /proc/pressure/memory\n"
	"      (default \"some 150000 2000000\")\n"
	"  --prompts N          prompts to run (default 8)\n"
	"  --nodes N            nodes per prompt, loader included (2..64, 6)\n"
	"  --output-size SIZE   bytes of each node output (default 16M)\n"
	"  --model-size SIZE    bytes of each model (default 96M)\n"
	"  --models N           models, two prompts each in turn (default 2)\n"
	"  --steps N            steps of each sampling node (default 10)\n"
	"  --step-ms MS         time of a step or a short node (default 30)\n"
	"  --local-headroom SIZE\n"
	"      local policy: memory to keep available (default model size +\n"
	"      2 x output size); the smallest of MemAvailable and, for our\n"
	"      memory cgroup and its parents, limit - usage + inactive file\n"
	"  --model-dir DIR      where model files are generated (default a new\n"
	"                       directory in /var/tmp, removed at exit)\n"
	"  --wait-agent SECS    agent policy: wait up to SECS for the agent\n"
	"                       before the first prompt (default 0)\n"
	"  --publish            none policy: publish the cache on a control\n"
	"      page all the same, obeying nothing (for benchmarks: an agent\n"
	"      in --dry-run sees the ramp of the classic cache)\n"
	"  --json               JSON lines on stdout, messages on stderr\n"
	"  --help, --version\n"
	"\n"
	"SIZE takes a K, M or G suffix (powers of 1024).\n"
	"Exit status: 0 all prompts ran, 1 error, 2 usage, 128+N stopped by\n"
	"signal N after cleaning up.\n";

const char *demo_policy_name(enum demo_policy p)
{
	switch (p) {
	case DEMO_POLICY_NONE:
		return "none";
	case DEMO_POLICY_LOCAL:
		return "local";
	case DEMO_POLICY_AGENT:
		return "agent";
	case DEMO_POLICY_PSI:
		return "psi";
	}
	return "?";
}

static int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end || v == 0 || v > (1ULL << 40))
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_uint(const char *s, unsigned int min, unsigned int max,
		      unsigned int *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

enum {
	OPT_POLICY = 256,
	OPT_PROMPTS,
	OPT_NODES,
	OPT_OUTPUT_SIZE,
	OPT_MODEL_SIZE,
	OPT_MODELS,
	OPT_STEPS,
	OPT_STEP_MS,
	OPT_LOCAL_HEADROOM,
	OPT_MODEL_DIR,
	OPT_WAIT_AGENT,
	OPT_PSI_TRIGGER,
	OPT_PUBLISH,
	OPT_JSON,
	OPT_HELP,
	OPT_VERSION,
};

static const struct option longopts[] = {
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "prompts", required_argument, NULL, OPT_PROMPTS },
	{ "nodes", required_argument, NULL, OPT_NODES },
	{ "output-size", required_argument, NULL, OPT_OUTPUT_SIZE },
	{ "model-size", required_argument, NULL, OPT_MODEL_SIZE },
	{ "models", required_argument, NULL, OPT_MODELS },
	{ "steps", required_argument, NULL, OPT_STEPS },
	{ "step-ms", required_argument, NULL, OPT_STEP_MS },
	{ "local-headroom", required_argument, NULL, OPT_LOCAL_HEADROOM },
	{ "model-dir", required_argument, NULL, OPT_MODEL_DIR },
	{ "wait-agent", required_argument, NULL, OPT_WAIT_AGENT },
	{ "psi-trigger", required_argument, NULL, OPT_PSI_TRIGGER },
	{ "publish", no_argument, NULL, OPT_PUBLISH },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

static int bad(const char *opt, const char *val)
{
	fprintf(stderr, "ramcache-demo: invalid value for --%s: '%s'\n", opt,
		val);
	fprintf(stderr, "Try 'ramcache-demo --help'.\n");
	return -DEMO_EXIT_USAGE;
}

/* A numeric option: the field it fills and its range. */
struct num_opt {
	int key;
	size_t off;
	unsigned int min, max;
};

#define NUM(key, field, min, max)                                \
	{                                                        \
		key, offsetof(struct demo_opts, field), min, max \
	}

static const struct num_opt num_opts[] = {
	NUM(OPT_PROMPTS, prompts, 1, 1000000),
	NUM(OPT_NODES, nodes, 2, 64),
	NUM(OPT_MODELS, models, 1, 64),
	NUM(OPT_STEPS, steps, 1, 10000),
	NUM(OPT_STEP_MS, step_ms, 0, 60000),
	NUM(OPT_WAIT_AGENT, wait_agent_s, 0, 3600),
};

static const struct {
	int key;
	size_t off;
} size_opts[] = {
	{ OPT_OUTPUT_SIZE, offsetof(struct demo_opts, output_size) },
	{ OPT_MODEL_SIZE, offsetof(struct demo_opts, model_size) },
	{ OPT_LOCAL_HEADROOM, offsetof(struct demo_opts, local_headroom) },
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* 0 taken, 1 not a number or size option, <0 a bad value. */
static int parse_value(struct demo_opts *o, int c, const char *name,
		       const char *arg)
{
	for (size_t i = 0; i < ARRAY_SIZE(num_opts); i++)
		if (num_opts[i].key == c)
			return parse_uint(arg, num_opts[i].min, num_opts[i].max,
					  (unsigned int *)((char *)o +
							   num_opts[i].off))
				       ? bad(name, arg)
				       : 0;
	for (size_t i = 0; i < ARRAY_SIZE(size_opts); i++)
		if (size_opts[i].key == c)
			return parse_size(arg, (uint64_t *)((char *)o +
							    size_opts[i].off))
				       ? bad(name, arg)
				       : 0;
	return 1;
}

static int parse_policy(struct demo_opts *o, const char *name, const char *arg)
{
	static const enum demo_policy all[] = {
		DEMO_POLICY_NONE,
		DEMO_POLICY_LOCAL,
		DEMO_POLICY_AGENT,
		DEMO_POLICY_PSI,
	};

	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		if (!strcmp(arg, demo_policy_name(all[i]))) {
			o->policy = all[i];
			return 0;
		}
	}
	return bad(name, arg);
}

/* Options that are not numbers: 0, 1 (--help/--version answered) or <0. */
static int parse_other(struct demo_opts *o, int c, const char *name,
		       char **argv)
{
	switch (c) {
	case OPT_POLICY:
		return parse_policy(o, name, optarg);
	case OPT_PSI_TRIGGER:
		if (strncmp(optarg, "some ", 5) && strncmp(optarg, "full ", 5))
			return bad(name, optarg);
		o->psi_trigger = optarg;
		return 0;
	case OPT_MODEL_DIR:
		o->model_dir = optarg;
		return 0;
	case OPT_PUBLISH:
		o->publish = true;
		return 0;
	case OPT_JSON:
		o->json = true;
		return 0;
	case OPT_HELP:
		fputs(usage, stdout);
		return 1;
	case OPT_VERSION:
		printf("ramcache-demo %s\n", RAMCACHE_VERSION);
		return 1;
	}
	fprintf(stderr, "ramcache-demo: unknown option '%s'\n",
		argv[optind - 1]);
	fprintf(stderr, "Try 'ramcache-demo --help'.\n");
	return -DEMO_EXIT_USAGE;
}

/*
 * Fill @o from the command line. Returns 0 to run, 1 when --help or
 * --version answered, or -DEMO_EXIT_USAGE.
 */
int demo_parse_args(struct demo_opts *o, int argc, char **argv)
{
	int c, idx, r;

	*o = (struct demo_opts){
		.policy = DEMO_POLICY_AGENT,
		.prompts = 8,
		.nodes = 6,
		.models = 2,
		.steps = 10,
		.step_ms = 30,
		.output_size = 16 * MiB,
		.model_size = 96 * MiB,
		.psi_trigger = "some 150000 2000000",
	};
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		const char *name = c >= OPT_POLICY && c <= OPT_VERSION
					   ? longopts[c - OPT_POLICY].name
					   : NULL;

		r = parse_value(o, c, name, optarg);
		if (r == 1)
			r = parse_other(o, c, name, argv);
		if (r)
			return r;
	}
	if (optind < argc) {
		fprintf(stderr, "ramcache-demo: unexpected argument '%s'\n",
			argv[optind]);
		return -DEMO_EXIT_USAGE;
	}
	if (!o->local_headroom)
		o->local_headroom = o->model_size + 2 * o->output_size;
	return 0;
}
