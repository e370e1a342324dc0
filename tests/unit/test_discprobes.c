// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The libc probes of --all: what an executor holds when the uprobe on the
 * agent's own libc (probe 0) reported it, and when only the scan found it.
 * Probe 0 is a probe like the others: an executor it reported holds it, so
 * the scan does not take it for one the uprobe missed (it warned "found by
 * the scan of /proc, not by the uprobe ... (a raw memfd_create syscall?)"
 * of executors the uprobe had reported).
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernel/discover.h"
#include "test.h"

#define MISSED "not by the uprobe, though its libc"

/* The probes, or a skip: loading them needs root (CAP_BPF, CAP_PERFMON). */
static bool probes_open(struct discover *d)
{
	char why[512];

	if (geteuid()) {
		TEST_SKIP("needs root");
		return false;
	}
	return ASSERT_OK(discover_open(d, why, sizeof(why)), why);
}

TEST(an_executor_the_agents_libc_reported_holds_its_probe)
{
	struct discover d;
	int k;

	if (!probes_open(&d))
		return;
	/* the report's cookie of probe 0, the agent's own libc */
	k = discover_hold(&d, 1);
	ASSERT_NEQ(k, 0, "an executor reported by probe 0 holds a probe");
	discover_release(&d, k);
	ASSERT_OK_PTR(d.libcs[0].link, "probe 0 stays after its release");
	ASSERT_EQ(discover_hold(&d, 0), 0, "no report, no probe");
	ASSERT_EQ(discover_hold(&d, 2), 0, "a free place is no probe");
	ASSERT_EQ(discover_hold(&d, DISC_MAX_LIBC + 1), 0, "out of range");
	discover_close(&d);
}

TEST(an_executor_only_the_scan_found_is_told_of_once_and_holds_a_probe)
{
	struct discover d;
	char why[512];
	pid_t kid;
	int k;

	if (!probes_open(&d))
		return;
	/* this process maps the agent's libc (probe 0) */
	k = discover_scan_found(&d, "/proc", getpid(), true, why, sizeof(why));
	ASSERT_NEQ(k, 0, "holds probe 0");
	ASSERT_TRUE(strstr(why, MISSED), why);
	kid = fork();
	if (kid == 0) {
		pause();
		_exit(0);
	}
	if (ASSERT_GE(kid, 1, "fork")) {
		int k2 = discover_scan_found(&d, "/proc", kid, true, why,
					     sizeof(why));

		ASSERT_EQ(k2, k, "the same probe");
		ASSERT_STREQ(why, "", "told once");
		discover_release(&d, k2);
		kill(kid, SIGKILL);
		waitpid(kid, NULL, 0);
	}
	/* found by the first scan (the uprobe was not on yet): not missed */
	discover_release(&d, k);
	k = discover_scan_found(&d, "/proc", getpid(), false, why, sizeof(why));
	ASSERT_STREQ(why, "", "not missed");
	discover_release(&d, k);
	ASSERT_OK_PTR(d.libcs[0].link, "probe 0 stays");
	discover_close(&d);
}

TEST_MAIN()
