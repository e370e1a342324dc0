// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* ramcache-bpf: parse the command line, then hand over to the agent. */
#include <stdio.h>

#include "agent.h"
#include "args.h"

int main(int argc, char **argv)
{
	char err[256];
	struct opts o;

	switch (parse_args(argc, argv, &o, err, sizeof(err))) {
	case ARGS_HELP:
		print_usage(stdout);
		return EXIT_OK;
	case ARGS_VERSION:
		printf("ramcache-bpf %s\n", RAMCACHE_VERSION);
		return EXIT_OK;
	case ARGS_ERROR:
		fprintf(stderr, "ramcache-bpf: %s (see --help)\n", err);
		return EXIT_USAGE;
	case ARGS_RUN:
		break;
	}
	return agent_run(&o);
}
