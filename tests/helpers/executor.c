// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * executor: a minimal executor on libramcache for the hardening tests.
 *
 *   executor [--path P] [--entries N] [--bytes B] [--once] [--ms T]
 *            [--wait-ms W]
 *
 * Creates the control page (default a memfd, --path for a file), publishes N
 * entries of B bytes (no memory behind them), then serves commands for T
 * milliseconds (default: until stdin closes or SIGTERM): every command is
 * acked EVICTED and its entry replaced by a fresh one, so an agent that
 * wants memory keeps posting. JSON lines on stdout:
 *   {"type":"ready","pid":P,"uid":U,"path":"..."}
 *   {"type":"cmd","seq":S,"id":I,"t_ns":T}        one per command taken
 *   {"type":"agent","alive":true|false,"state":S,"t_ns":T}   on every change
 *                                      (S: alive, none, died, silent)
 *   {"type":"done","cmds":N,"dups":D}               D: seqs seen twice
 * --once: create, publish, print ready and done, exit (privilege tests).
 * --wait-ms: how long one ramcache_wait may sleep (default 20): the agent's
 * death ends a wait at once, whatever its length.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramcache/ramcache.h"

#define MAX_SEEN 65536

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static int publish(struct ramcache *rc, uint64_t id, uint64_t bytes)
{
	char label[32];
	struct ramcache_entry_info e = {
		.id = id,
		.bytes = bytes,
		.label = label,
	};

	snprintf(label, sizeof(label), "entry-%llu", (unsigned long long)id);
	return ramcache_publish(rc, &e);
}

static bool stdin_closed(void)
{
	struct pollfd p = { .fd = 0, .events = POLLIN };
	char buf[64];

	if (poll(&p, 1, 0) <= 0)
		return false;
	return read(0, buf, sizeof(buf)) <= 0;
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	uint64_t bytes = 64ULL << 20, next_id = 1, cmds = 0, dups = 0;
	unsigned int entries = 16;
	long ms = -1;
	int wait_ms = 20;
	static const char *const states[] = { "none", "alive", "died",
					      "silent" };
	bool once = false, alive = false;
	static uint64_t seen[MAX_SEEN];
	struct ramcache_command cmd;
	struct ramcache *rc;
	uint64_t end = 0, last_seq = 0;
	int err;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--path") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--entries") && i + 1 < argc)
			entries = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
			bytes = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--ms") && i + 1 < argc)
			ms = strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--wait-ms") && i + 1 < argc)
			wait_ms = (int)strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--once"))
			once = true;
		else {
			fprintf(stderr, "executor: bad argument '%s'\n",
				argv[i]);
			return 2;
		}
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);

	/* room for every entry asked for (the default holds 4096) */
	err = ramcache_create(
		&rc, path, entries > RAMCACHE_DEFAULT_ENTRIES ? entries : 0, 0);
	if (err) {
		fprintf(stderr, "executor: failed to create the page: %s\n",
			strerror(-err));
		return 1;
	}
	for (unsigned int i = 0; i < entries; i++) {
		err = publish(rc, next_id++, bytes);
		if (err) {
			fprintf(stderr, "executor: failed to publish: %s\n",
				strerror(-err));
			ramcache_destroy(rc, true);
			return 1;
		}
	}
	printf("{\"type\":\"ready\",\"pid\":%d,\"uid\":%u,\"path\":\"%s\"}\n",
	       (int)getpid(), (unsigned int)geteuid(), ramcache_path(rc));
	fflush(stdout);
	if (ms >= 0)
		end = ramcache_now_ns() + (uint64_t)ms * 1000000ULL;

	while (!once && !stop && !stdin_closed() &&
	       (!end || ramcache_now_ns() < end)) {
		bool now_alive;

		ramcache_heartbeat(rc);
		now_alive = ramcache_agent_alive(rc);
		if (now_alive != alive) {
			int st = ramcache_agent_state(rc);

			alive = now_alive;
			printf("{\"type\":\"agent\",\"alive\":%s,\"state\":\"%s\",\"t_ns\":%llu}\n",
			       alive ? "true" : "false",
			       st >= 0 && st < 4 ? states[st] : "?",
			       (unsigned long long)ramcache_now_ns());
			fflush(stdout);
		}
		err = ramcache_wait(rc, &cmd, wait_ms);
		if (err < 0) {
			fprintf(stderr, "executor: wait: %s\n", strerror(-err));
			break;
		}
		if (err == 0)
			continue;
		cmds++;
		if (cmd.seq <= last_seq)
			dups++; /* out of order or repeated: never allowed */
		for (uint64_t k = 0; k < cmds - 1 && k < MAX_SEEN; k++)
			if (seen[k] == cmd.seq)
				dups++;
		if (cmds - 1 < MAX_SEEN)
			seen[cmds - 1] = cmd.seq;
		last_seq = cmd.seq;
		printf("{\"type\":\"cmd\",\"seq\":%llu,\"id\":%llu,\"t_ns\":%llu}\n",
		       (unsigned long long)cmd.seq,
		       (unsigned long long)cmd.entry_id,
		       (unsigned long long)cmd.recv_ns);
		fflush(stdout);
		if (ramcache_remove(rc, cmd.entry_id) == 0) {
			ramcache_ack(rc, &cmd, RAMCACHE_ACK_EVICTED, bytes);
			publish(rc, next_id++, bytes);
		} else {
			ramcache_ack(rc, &cmd, RAMCACHE_ACK_NOT_FOUND, 0);
		}
	}
	printf("{\"type\":\"done\",\"cmds\":%llu,\"dups\":%llu}\n",
	       (unsigned long long)cmds, (unsigned long long)dups);
	fflush(stdout);
	ramcache_destroy(rc, !once);
	return 0;
}
