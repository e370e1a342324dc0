// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ramcache-demo: arguments, the control page, the model directory, signals
 * and the final summary. The workload itself is in workload.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "demo.h"

static void on_signal(int sig)
{
	demo_stop_signal = sig;
}

static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* ,"key":value */
static void json_u64(const char *key, uint64_t v)
{
	printf(",\"%s\":%" PRIu64, key, v);
}

static void report_done(const struct demo_opts *o, const struct demo_stats *st)
{
	if (report_json()) {
		printf("{\"type\":\"demo_done\",\"policy\":\"%s\"",
		       demo_policy_name(o->policy));
		json_u64("prompts", st->prompts);
		json_u64("evicted", st->evicted);
		json_u64("bytes_evicted", st->bytes_evicted);
		json_u64("acks", st->acks);
		json_u64("acks_evicted", st->acks_evicted);
		json_u64("acks_busy", st->acks_busy);
		json_u64("held", st->held);
		json_u64("acks_not_found", st->acks_not_found);
		json_u64("local_evictions", st->local_evictions);
		json_u64("psi_events", st->psi_events);
		json_u64("computed", st->computed);
		json_u64("hits", st->hits);
		json_u64("model_loads", st->model_loads);
		json_u64("peak_cached_bytes", st->peak_cached);
		json_u64("elapsed_ms", st->elapsed_ms);
		printf(",\"interrupted\":%s}\n",
		       demo_stop_signal ? "true" : "false");
		return;
	}
	report_msg("done: %u/%u prompts in %.1f s, %" PRIu64
		   " evictions (%.0f MiB), %" PRIu64
		   " agent commands acked, %" PRIu64
		   " outputs computed, %" PRIu64 " cache hits, %" PRIu64
		   " model loads, peak cache %.0f MiB",
		   st->prompts, o->prompts, st->elapsed_ms / 1000.0,
		   st->evicted, (double)st->bytes_evicted / MiB, st->acks,
		   st->computed, st->hits, st->model_loads,
		   (double)st->peak_cached / MiB);
}

int main(int argc, char **argv)
{
	struct demo_stats st = { 0 };
	struct ramcache *rc = NULL;
	struct demo_opts o;
	char tmpdir[] = "/var/tmp/ramcache-demo-XXXXXX";
	const char *dir;
	int err, ret = DEMO_EXIT_ERROR;

	err = demo_parse_args(&o, argc, argv);
	if (err)
		return err > 0 ? DEMO_EXIT_OK : -err;
	report_init(o.json);
	catch_signals();

	if (o.model_dir) {
		dir = o.model_dir;
		if (mkdir(dir, 0700) && errno != EEXIST) {
			report_err("failed to create model directory %s: %s",
				   dir, strerror(errno));
			return DEMO_EXIT_ERROR;
		}
	} else {
		dir = mkdtemp(tmpdir);
		if (!dir) {
			report_err(
				"failed to create a directory in /var/tmp: %s (use --model-dir)",
				strerror(errno));
			return DEMO_EXIT_ERROR;
		}
	}

	/* the classic cache knows nothing of ramcache */
	if (o.policy != DEMO_POLICY_NONE || o.publish) {
		err = ramcache_create(&rc, NULL, 0, 0);
		if (err) {
			report_err("failed to create the control page: %s",
				   strerror(-err));
			goto out;
		}
	}
	if (o.json) {
		printf("{\"type\":\"demo_start\",\"pid\":%d,\"policy\":\"%s\",\"control\":",
		       getpid(), demo_policy_name(o.policy));
		if (rc)
			json_str(ramcache_path(rc));
		else
			fputs("null", stdout);
		printf(",\"prompts\":%u,\"nodes\":%u,\"models\":%u,\"model_size\":%" PRIu64
		       ",\"output_size\":%" PRIu64 "}\n",
		       o.prompts, o.nodes, o.models, o.model_size,
		       o.output_size);
	} else {
		report_msg("pid %d, policy %s, control page %s", getpid(),
			   demo_policy_name(o.policy),
			   rc ? ramcache_path(rc) : "(none)");
	}

	err = workload_run(&o, rc, dir, &st);
	report_done(&o, &st);
	if (demo_stop_signal)
		ret = 128 + demo_stop_signal;
	else if (!err)
		ret = DEMO_EXIT_OK;
out:
	ramcache_destroy(rc, true);
	if (!o.model_dir)
		rmdir(dir);
	return ret;
}
