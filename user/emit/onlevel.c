// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <ramcache/control.h>

#include "emit/onlevel.h"
#include "core/policy.h"

extern char **environ;

static int spawn_one(const char *cmd, char **env)
{
	char *argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };
	posix_spawnattr_t attr;
	sigset_t none;
	pid_t child;
	int err;

	/* the agent blocks its signals for signalfd; the command must not */
	sigemptyset(&none);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	err = posix_spawn(&child, "/bin/sh", NULL, &attr, argv, env);
	posix_spawnattr_destroy(&attr);
	return -err;
}

bool onlevel_enters(int want, int prev, int cur)
{
	if (want == RAMCACHE_LEVEL_OK)
		return cur == RAMCACHE_LEVEL_OK && prev != RAMCACHE_LEVEL_OK;
	return prev < want && cur >= want;
}

int onlevel_run(struct out *out, const struct on_level *cmds, int nr, int prev,
		int level, uint32_t reasons, pid_t pid)
{
	char lv[64], rs[512], pd[64], names[256];
	char **env;
	size_t n = 0;
	int started = 0;

	for (char **e = environ; *e; e++)
		n++;
	env = calloc(n + 4, sizeof(*env));
	if (!env)
		return -ENOMEM;
	policy_reasons_format(reasons, names, sizeof(names));
	snprintf(lv, sizeof(lv), "RAMCACHE_LEVEL=%s", policy_level_name(level));
	snprintf(rs, sizeof(rs), "RAMCACHE_REASONS=%s", names);
	snprintf(pd, sizeof(pd), "RAMCACHE_PID=%d", (int)pid);
	n = 0;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "RAMCACHE_", 9))
			env[n++] = *e;
	env[n++] = lv;
	env[n++] = rs;
	env[n++] = pd;
	env[n] = NULL;

	for (int i = 0; i < nr; i++) {
		int err;

		if (!onlevel_enters(cmds[i].level, prev, level))
			continue;
		err = spawn_one(cmds[i].cmd, env);
		if (err)
			out_warn(out,
				 "failed to run --on-level command '%s': %s",
				 cmds[i].cmd, strerror(-err));
		else
			started++;
	}
	free(env);
	return started;
}

void onlevel_reap(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}
