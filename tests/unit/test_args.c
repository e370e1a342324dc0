// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Command-line parsing: defaults, units, and the errors users see. */
#include "args.h"
#include "test.h"

#define ARGV(...) ((char *[]){ "ramcache-bpf", __VA_ARGS__, NULL })
#define ARGC(...) \
	((int)(sizeof((char *[]){ "x", __VA_ARGS__ }) / sizeof(char *)))
#define PARSE(o, err, ...) \
	parse_args(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), o, err, sizeof(err))

TEST(defaults)
{
	char *argv[] = { "ramcache-bpf", NULL };
	char err[128];
	struct opts o;

	ASSERT_EQ(parse_args(1, argv, &o, err, sizeof(err)), ARGS_RUN, "run");
	ASSERT_EQ(o.pid, 0, "whole system");
	ASSERT_EQ(o.interval_ns, 2000000000ULL, "interval 2s");
	ASSERT_EQ(o.ack_timeout_ns, 5000000000ULL, "ack timeout");
	ASSERT_TRUE(o.evict && o.mlock, "evict and mlock on");
	ASSERT_FALSE(o.headroom_set, "headroom default");
}

TEST(full_command_line)
{
	char err[128];
	struct opts o;

	ASSERT_EQ(PARSE(&o, err, "--pid", "42", "--json", "--interval", "500ms",
			"--headroom", "1.5G", "--inactive", "3G", "--policy",
			"cost", "--on-level", "warn:echo hi", "--probe-mode",
			"raw_tp", "--duration", "1m"),
		  ARGS_RUN, err);
	ASSERT_EQ(o.pid, 42, "pid");
	ASSERT_TRUE(o.json, "json");
	ASSERT_EQ(o.interval_ns, 500000000ULL, "interval");
	ASSERT_EQ(o.headroom, 3ULL << 29, "1.5G");
	ASSERT_EQ(o.inactive, 3ULL << 30, "3G");
	ASSERT_EQ(o.policy, SCORE_COST, "policy");
	ASSERT_EQ(o.nr_on_level, 1, "on-level");
	ASSERT_EQ(o.on_level[0].level, 1, "warn");
	ASSERT_STREQ(o.on_level[0].cmd, "echo hi", "cmd");
	ASSERT_EQ(o.probe_mode, PROBE_RAW_TP, "probe mode");
	ASSERT_EQ(o.duration_ns, 60000000000ULL, "1m");
}

TEST(errors_name_the_flag)
{
	char err[128];
	struct opts o;

	ASSERT_EQ(PARSE(&o, err, "--pid", "-3"), ARGS_ERROR, "neg pid");
	ASSERT_TRUE(strstr(err, "invalid pid"), err);
	ASSERT_EQ(PARSE(&o, err, "--pid", "12x"), ARGS_ERROR, "junk pid");
	ASSERT_EQ(PARSE(&o, err, "--interval", "fast"), ARGS_ERROR, "interval");
	ASSERT_TRUE(strstr(err, "--interval"), err);
	ASSERT_EQ(PARSE(&o, err, "--pid", "1", "--match", "x"), ARGS_ERROR,
		  "pid and match");
	ASSERT_EQ(PARSE(&o, err, "--on-level", "purple:x"), ARGS_ERROR,
		  "level");
	ASSERT_EQ(PARSE(&o, err, "--headroom", "4G", "--inactive", "1G"),
		  ARGS_ERROR, "inactive below headroom");
	ASSERT_EQ(PARSE(&o, err, "stray"), ARGS_ERROR, "positional");
	ASSERT_TRUE(strstr(err, "stray"), err);
	ASSERT_EQ(PARSE(&o, err, "--help"), ARGS_HELP, "help");
	ASSERT_EQ(PARSE(&o, err, "--version"), ARGS_VERSION, "version");
}

TEST_MAIN()
