// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "args.h"
#include "policy.h"
#include "ramcache/control.h"

#define NSEC 1000000000ULL

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
	OPT_MATCH,
	OPT_METRICS,
	OPT_ON_LEVEL,
	OPT_NO_EVICT,
	OPT_NO_MLOCK,
};

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "json", no_argument, NULL, 'j' },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{ "duration", required_argument, NULL, OPT_DURATION },
	{ "hist", no_argument, NULL, OPT_HIST },
	{ "verbose", no_argument, NULL, 'v' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ "help", no_argument, NULL, 'h' },
	{ "headroom", required_argument, NULL, OPT_HEADROOM },
	{ "inactive", required_argument, NULL, OPT_INACTIVE },
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
	{ "no-evict", no_argument, NULL, OPT_NO_EVICT },
	{ "horizon", required_argument, NULL, OPT_HORIZON },
	{ "ack-timeout", required_argument, NULL, OPT_ACK_TIMEOUT },
	{ "control", required_argument, NULL, OPT_CONTROL },
	{ "burst-faults", required_argument, NULL, OPT_BURST_FAULTS },
	{ "burst-window", required_argument, NULL, OPT_BURST_WINDOW },
	{ "rss-step", required_argument, NULL, OPT_RSS_STEP },
	{ "probe-mode", required_argument, NULL, OPT_PROBE_MODE },
	{ "match", required_argument, NULL, OPT_MATCH },
	{ "metrics", required_argument, NULL, OPT_METRICS },
	{ "on-level", required_argument, NULL, OPT_ON_LEVEL },
	{ "no-mlock", no_argument, NULL, OPT_NO_MLOCK },
	{ 0 },
};

void print_usage(FILE *f)
{
	fputs("Usage: ramcache-bpf [--pid PID | --match PATTERN] [OPTIONS]\n"
	      "\n"
	      "Watch memory pressure with BPF (page faults, direct and memcg "
	      "reclaim,\n"
	      "kswapd, OOM kills, RSS) and ask the executor to evict cache "
	      "entries\n"
	      "through its control page before the kernel starts reclaiming.\n"
	      "Without --pid or --match the whole system is watched.\n"
	      "\n"
	      "Target:\n"
	      "  -p, --pid PID          follow this process; exit 0 when it "
	      "exits\n"
	      "      --match PATTERN    follow the process whose command line "
	      "contains\n"
	      "                         PATTERN, and its successor after a "
	      "restart\n"
	      "      --control PATH     control page file (default: the "
	      "executor's memfd)\n"
	      "Output:\n"
	      "  -j, --json             JSON Lines on stdout, one object per "
	      "event\n"
	      "      --interval DUR     summary every DUR (default 2s)\n"
	      "      --duration DUR     exit 0 after DUR (default: run until "
	      "the target\n"
	      "                         exits or Ctrl-C)\n"
	      "      --hist             log2 histograms of stall and eviction "
	      "latency at exit\n"
	      "      --metrics ADDR:PORT  serve Prometheus metrics over HTTP\n"
	      "      --on-level LEVEL:CMD run CMD (sh -c) when the level rises "
	      "to LEVEL or\n"
	      "                         above (warn, high, critical), or "
	      "returns to ok;\n"
	      "                         may be repeated\n"
	      "  -v, --verbose          libbpf debug output\n"
	      "Eviction:\n"
	      "      --headroom SIZE    below SIZE of headroom evict inactive "
	      "entries, then\n"
	      "                         active ones of >= 512M, then any\n"
	      "                         (default min(10G, max(2G, 10% of "
	      "RAM)), scaled to\n"
	      "                         the target's memory cgroup)\n"
	      "      --inactive SIZE    below SIZE evict inactive entries "
	      "only\n"
	      "                         (default: 2 x headroom)\n"
	      "      --policy ram|cost  ram: 1.3^age x size, models first "
	      "(default);\n"
	      "                         cost: size per second of recompute "
	      "time\n"
	      "      --horizon DUR      forecast headroom DUR ahead (default "
	      "1s)\n"
	      "      --ack-timeout DUR  count a command lost after DUR "
	      "(default 5s)\n"
	      "      --dry-run          report what would be evicted, send "
	      "nothing\n"
	      "      --no-evict         monitor only\n"
	      "Tuning:\n"
	      "      --burst-faults N   faults per window and CPU that make a "
	      "fault_burst\n"
	      "                         (default 2048)\n"
	      "      --burst-window DUR fault burst window (default 100ms)\n"
	      "      --rss-step SIZE    report RSS when it moves by SIZE "
	      "(default 4M)\n"
	      "      --probe-mode MODE  auto, tp_btf or raw_tp (default auto)\n"
	      "      --no-mlock         do not lock the agent's memory\n"
	      "  -h, --help             this text\n"
	      "      --version          print the version\n"
	      "\n"
	      "Examples:\n"
	      "  sudo ramcache-bpf --pid $(pgrep -f 'ComfyUI/main.py')\n"
	      "  sudo ramcache-bpf --match main.py --json --metrics "
	      "127.0.0.1:9101\n"
	      "  sudo ramcache-bpf --interval 5s --on-level warn:'notify-send "
	      "memory'\n"
	      "  sudo ramcache-bpf --pid 1234 --duration 60s --hist\n"
	      "\n"
	      "Exit status: 0 done (target exited, --duration, Ctrl-C); 1 "
	      "runtime\n"
	      "error; 2 bad usage; 3 missing privileges; 4 no such process; 5 "
	      "kernel\n"
	      "not supported (no BTF, no tracepoints).\n",
	      f);
}

static int parse_level_name(const char *s, size_t len)
{
	static const char *names[] = { "ok", "warn", "high", "critical" };

	for (int i = 0; i < 4; i++)
		if (strlen(names[i]) == len && !strncmp(s, names[i], len))
			return i;
	return -1;
}

#define BAD(...)                                    \
	do {                                        \
		snprintf(err, errlen, __VA_ARGS__); \
		return ARGS_ERROR;                  \
	} while (0)

enum args_result parse_args(int argc, char **argv, struct opts *o, char *err,
			    size_t errlen)
{
	uint64_t mem_total =
		(uint64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	uint64_t v;
	char *end;
	long n;
	int c;

	memset(o, 0, sizeof(*o));
	o->evict = true;
	o->mlock = true;
	o->interval_ns = 2 * NSEC;
	o->horizon_ns = NSEC;
	o->ack_timeout_ns = 5 * NSEC;
	o->burst_faults = 2048;
	o->burst_window_ns = NSEC / 10;
	o->rss_step = 4 << 20;
	optind = 0;
	opterr = 0;

	while ((c = getopt_long(argc, argv, ":p:jvh", long_opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || n <= 0 ||
			    n > INT_MAX)
				BAD("invalid pid '%s'", optarg);
			o->pid = n;
			break;
		case 'j':
			o->json = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			return ARGS_HELP;
		case OPT_VERSION:
			return ARGS_VERSION;
		case OPT_HIST:
			o->hist = true;
			break;
		case OPT_DRY_RUN:
			o->dry_run = true;
			break;
		case OPT_NO_EVICT:
			o->evict = false;
			break;
		case OPT_NO_MLOCK:
			o->mlock = false;
			break;
		case OPT_INTERVAL:
			if (rc_parse_duration(optarg, &o->interval_ns) ||
			    o->interval_ns < NSEC / 100)
				BAD("invalid --interval '%s' (at least 10ms)",
				    optarg);
			break;
		case OPT_DURATION:
			if (rc_parse_duration(optarg, &o->duration_ns) ||
			    !o->duration_ns)
				BAD("invalid --duration '%s'", optarg);
			break;
		case OPT_HORIZON:
			if (rc_parse_duration(optarg, &o->horizon_ns))
				BAD("invalid --horizon '%s'", optarg);
			break;
		case OPT_ACK_TIMEOUT:
			if (rc_parse_duration(optarg, &o->ack_timeout_ns) ||
			    !o->ack_timeout_ns)
				BAD("invalid --ack-timeout '%s'", optarg);
			break;
		case OPT_BURST_WINDOW:
			if (rc_parse_duration(optarg, &o->burst_window_ns) ||
			    !o->burst_window_ns)
				BAD("invalid --burst-window '%s'", optarg);
			break;
		case OPT_HEADROOM:
			if (rc_parse_size(optarg, mem_total, &o->headroom))
				BAD("invalid --headroom '%s' (e.g. 2G, 512M)",
				    optarg);
			o->headroom_set = true;
			break;
		case OPT_INACTIVE:
			if (rc_parse_size(optarg, mem_total, &o->inactive))
				BAD("invalid --inactive '%s' (e.g. 4G, 0)",
				    optarg);
			o->inactive_set = true;
			break;
		case OPT_RSS_STEP:
			if (rc_parse_size(optarg, mem_total, &o->rss_step) ||
			    !o->rss_step)
				BAD("invalid --rss-step '%s'", optarg);
			break;
		case OPT_BURST_FAULTS:
			if (rc_parse_size(optarg, mem_total, &v) || !v)
				BAD("invalid --burst-faults '%s'", optarg);
			o->burst_faults = v;
			break;
		case OPT_POLICY:
			if (!strcmp(optarg, "ram"))
				o->policy = SCORE_RAM;
			else if (!strcmp(optarg, "cost"))
				o->policy = SCORE_COST;
			else
				BAD("invalid --policy '%s' (ram or cost)",
				    optarg);
			break;
		case OPT_PROBE_MODE:
			if (!strcmp(optarg, "auto"))
				o->probe_mode = PROBE_AUTO;
			else if (!strcmp(optarg, "tp_btf"))
				o->probe_mode = PROBE_TP_BTF;
			else if (!strcmp(optarg, "raw_tp"))
				o->probe_mode = PROBE_RAW_TP;
			else
				BAD("invalid --probe-mode '%s' (auto, tp_btf "
				    "or raw_tp)",
				    optarg);
			break;
		case OPT_CONTROL:
			o->control = optarg;
			break;
		case OPT_MATCH:
			if (!*optarg)
				BAD("empty --match pattern");
			o->match = optarg;
			break;
		case OPT_METRICS:
			o->metrics = optarg;
			break;
		case OPT_ON_LEVEL: {
			const char *colon = strchr(optarg, ':');
			int lvl;

			if (!colon || !colon[1])
				BAD("invalid --on-level '%s' (LEVEL:CMD)",
				    optarg);
			lvl = parse_level_name(optarg, colon - optarg);
			if (lvl < 0)
				BAD("invalid level in --on-level '%s' (ok, "
				    "warn, high, critical)",
				    optarg);
			if (o->nr_on_level >= MAX_ON_LEVEL)
				BAD("too many --on-level (at most %d)",
				    MAX_ON_LEVEL);
			o->on_level[o->nr_on_level].level = lvl;
			o->on_level[o->nr_on_level].cmd = colon + 1;
			o->nr_on_level++;
			break;
		}
		case ':':
			BAD("option '%s' needs an argument", argv[optind - 1]);
		default:
			BAD("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		BAD("unexpected argument '%s'", argv[optind]);
	if (o->pid && o->match)
		BAD("--pid and --match exclude each other");
	if (o->headroom_set && o->inactive_set && o->inactive &&
	    o->inactive < o->headroom)
		BAD("--inactive must be 0 or at least --headroom");
	return ARGS_RUN;
}
