// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Which capabilities the loop keeps, by what it will do (caps_keep). */
#include <linux/capability.h>

#include "caps.h"
#include "test.h"

#define B(c) (1ULL << (c))
#define ALL  (B(CAP_LAST_CAP + 1) - 1)
#define LOOP (B(CAP_BPF) | B(CAP_SYS_PTRACE) | B(CAP_DAC_READ_SEARCH))

TEST(pid_mode_keeps_bpf_ptrace_and_read_search)
{
	struct caps_need n = { 0 };

	ASSERT_EQ(caps_keep(&n, ALL), LOOP, "of all");
	ASSERT_FALSE(caps_keep(&n, ALL) & B(CAP_SYS_ADMIN), "no SYS_ADMIN");
}

TEST(all_adds_perfmon_and_map_files)
{
	struct caps_need n = { .discover = true };

	ASSERT_EQ(caps_keep(&n, ALL),
		  LOOP | B(CAP_PERFMON) | B(CAP_CHECKPOINT_RESTORE), "--all");
}

TEST(control_path_adds_dac_override_memlock_ipc_lock)
{
	struct caps_need n = { .open_paths = true, .memlock = true };

	ASSERT_EQ(caps_keep(&n, ALL),
		  LOOP | B(CAP_DAC_OVERRIDE) | B(CAP_IPC_LOCK), "--control");
}

TEST(only_what_was_given_is_kept)
{
	struct caps_need n = { .discover = true };
	uint64_t unit = B(CAP_BPF) | B(CAP_PERFMON) | B(CAP_SYS_PTRACE) |
			B(CAP_DAC_OVERRIDE) | B(CAP_IPC_LOCK);

	/* no CAP_DAC_READ_SEARCH: CAP_DAC_OVERRIDE lists /proc/PID/fd */
	ASSERT_EQ(caps_keep(&n, unit),
		  B(CAP_BPF) | B(CAP_PERFMON) | B(CAP_SYS_PTRACE) |
			  B(CAP_DAC_OVERRIDE),
		  "a unit's set");
	ASSERT_EQ(caps_keep(&n, 0), 0, "none given, none kept");
}

TEST_MAIN()
