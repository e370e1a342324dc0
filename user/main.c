// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* ramcache-bpf: parse the command line, then hand over to the agent. */
#include <stdio.h>
#include <unistd.h>

#include "agent.h"
#include "args.h"
#include "emit/out.h"

int main(int argc, char **argv)
{
	uint64_t mem_total =
		(uint64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	char err[256];
	struct opts o;

	switch (args_parse(argc, argv, mem_total, &o, err, sizeof(err))) {
	case ARGS_HELP:
		args_usage(stdout);
		return EXIT_OK;
	case ARGS_VERSION:
		printf("ramcache-bpf %s\n", RAMCACHE_VERSION);
		return EXIT_OK;
	case ARGS_ERROR:
		return out_fail(NULL, EXIT_USAGE, "%s (see --help)", err);
	case ARGS_RUN:
		break;
	}
	return agent_run(&o);
}
