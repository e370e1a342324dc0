// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer harness for the agent's control page parsers: whatever the
 * bytes, no crash, no out-of-bounds access, and what is accepted is sane.
 */
#include <stdlib.h>
#include <string.h>

#include "control.h"

static void check(int ok)
{
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_entry ents[4];
	struct ctl_layout lay;
	struct ctl_exec ex;
	struct ctl_ack ack;
	enum ctl_why why;
	uint32_t n;

	if (!ctl_parse_header(data, size, &lay, &why)) {
		check(why == CTL_OK);
		check(lay.total_size ==
		      ramcache_ctl_size(lay.max_entries, lay.ring_size));
		check(lay.acks_off + (uint64_t)lay.ring_size * 48 ==
		      lay.total_size);
	} else {
		check(why != CTL_OK && ctl_why_str(why) != NULL);
	}
	ctl_parse_exec(data, size, &ex);
	n = ctl_parse_entries(data, size, ents, 4);
	check(n <= 4);
	for (uint32_t i = 0; i < n; i++)
		check(ents[i].id &&
		      strlen(ents[i].label) <= RAMCACHE_LABEL_LEN);
	if (!ctl_parse_ack(data, size, 1000, &ack))
		check(ack.cmd_seq && ack.cmd_seq <= 1000);
	return 0;
}
