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

struct settings {
	const char *path;
	uint64_t bytes;
	unsigned int entries;
	long ms;
	int wait_ms;
	bool once;
};

/* The commands taken so far, and whether any came twice. */
struct taken {
	uint64_t next_id, cmds, dups, last_seq;
	uint64_t seen[MAX_SEEN];
};

/* 0, or 2 (told) for a bad argument. */
static int parse_args(int argc, char **argv, struct settings *st)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--path") && i + 1 < argc)
			st->path = argv[++i];
		else if (!strcmp(argv[i], "--entries") && i + 1 < argc)
			st->entries = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
			st->bytes = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--ms") && i + 1 < argc)
			st->ms = strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--wait-ms") && i + 1 < argc)
			st->wait_ms = (int)strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--once"))
			st->once = true;
		else {
			fprintf(stderr, "executor: bad argument '%s'\n",
				argv[i]);
			return 2;
		}
	}
	return 0;
}

/* The page with st->entries published, or NULL (told). */
static struct ramcache *create_page(const struct settings *st, struct taken *tk)
{
	struct ramcache *rc;
	int err;

	/* room for every entry asked for (the default holds 4096) */
	err = ramcache_create(
		&rc, st->path,
		st->entries > RAMCACHE_DEFAULT_ENTRIES ? st->entries : 0, 0);
	if (err) {
		fprintf(stderr, "executor: failed to create the page: %s\n",
			strerror(-err));
		return NULL;
	}
	for (unsigned int i = 0; i < st->entries; i++) {
		err = publish(rc, tk->next_id++, st->bytes);
		if (err) {
			fprintf(stderr, "executor: failed to publish: %s\n",
				strerror(-err));
			ramcache_destroy(rc, true);
			return NULL;
		}
	}
	return rc;
}

/* An `agent` line when the agent's liveness changed from *@alive. */
static void tell_agent(struct ramcache *rc, bool *alive)
{
	static const char *const states[] = { "none", "alive", "died",
					      "silent" };
	bool now_alive = ramcache_agent_alive(rc);
	int st;

	if (now_alive == *alive)
		return;
	st = ramcache_agent_state(rc);
	*alive = now_alive;
	printf("{\"type\":\"agent\",\"alive\":%s,\"state\":\"%s\",\"t_ns\":%llu}\n",
	       *alive ? "true" : "false", st >= 0 && st < 4 ? states[st] : "?",
	       (unsigned long long)ramcache_now_ns());
	fflush(stdout);
}

/* Count @cmd (a seq seen before is a dup), tell it, ack it. */
static void take(struct ramcache *rc, const struct ramcache_command *cmd,
		 struct taken *tk, uint64_t bytes)
{
	tk->cmds++;
	if (cmd->seq <= tk->last_seq)
		tk->dups++; /* out of order or repeated: never allowed */
	for (uint64_t k = 0; k < tk->cmds - 1 && k < MAX_SEEN; k++)
		if (tk->seen[k] == cmd->seq)
			tk->dups++;
	if (tk->cmds - 1 < MAX_SEEN)
		tk->seen[tk->cmds - 1] = cmd->seq;
	tk->last_seq = cmd->seq;
	printf("{\"type\":\"cmd\",\"seq\":%llu,\"id\":%llu,\"t_ns\":%llu}\n",
	       (unsigned long long)cmd->seq, (unsigned long long)cmd->entry_id,
	       (unsigned long long)cmd->recv_ns);
	fflush(stdout);
	if (ramcache_remove(rc, cmd->entry_id) == 0) {
		ramcache_ack(rc, cmd, RAMCACHE_ACK_EVICTED, bytes);
		publish(rc, tk->next_id++, bytes);
	} else {
		ramcache_ack(rc, cmd, RAMCACHE_ACK_NOT_FOUND, 0);
	}
}

/* Serve commands until told to stop, stdin closes or --ms ends. */
static void serve(struct ramcache *rc, const struct settings *st,
		  struct taken *tk)
{
	uint64_t end = 0;
	struct ramcache_command cmd;
	bool alive = false;
	int err;

	if (st->ms >= 0)
		end = ramcache_now_ns() + (uint64_t)st->ms * 1000000ULL;
	while (!st->once && !stop && !stdin_closed() &&
	       (!end || ramcache_now_ns() < end)) {
		ramcache_heartbeat(rc);
		tell_agent(rc, &alive);
		err = ramcache_wait(rc, &cmd, st->wait_ms);
		if (err < 0) {
			fprintf(stderr, "executor: wait: %s\n", strerror(-err));
			break;
		}
		if (err > 0)
			take(rc, &cmd, tk, st->bytes);
	}
}

int main(int argc, char **argv)
{
	struct settings st = {
		.bytes = 64ULL << 20, .entries = 16, .ms = -1, .wait_ms = 20
	};
	static struct taken tk = { .next_id = 1 };
	struct ramcache *rc;

	if (parse_args(argc, argv, &st))
		return 2;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	rc = create_page(&st, &tk);
	if (!rc)
		return 1;
	printf("{\"type\":\"ready\",\"pid\":%d,\"uid\":%u,\"path\":\"%s\"}\n",
	       (int)getpid(), (unsigned int)geteuid(), ramcache_path(rc));
	fflush(stdout);
	serve(rc, &st, &tk);
	printf("{\"type\":\"done\",\"cmds\":%llu,\"dups\":%llu}\n",
	       (unsigned long long)tk.cmds, (unsigned long long)tk.dups);
	fflush(stdout);
	ramcache_destroy(rc, !st.once);
	return 0;
}
