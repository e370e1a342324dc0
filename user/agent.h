/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The agent's event loop: ring buffer, timers, signals and the target. */
#ifndef RAMCACHE_AGENT_H
#define RAMCACHE_AGENT_H

#include "args.h"

/* Exit codes, documented in --help and the README. */
enum exit_code {
	EXIT_OK = 0,
	EXIT_RUNTIME = 1,
	EXIT_USAGE = 2,
	EXIT_PRIVILEGE = 3,
	EXIT_NO_PROCESS = 4,
	EXIT_UNSUPPORTED = 5,
	EXIT_OUTPUT_CLOSED = 6, /* stdout's reader went away (not --quiet) */
};

/* Run until the target exits, --duration passes or a signal; an exit code. */
int agent_run(const struct opts *o);

#endif /* RAMCACHE_AGENT_H */
