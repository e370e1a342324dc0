// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Command-line parsing: defaults, units, and the errors users see. */
#include "args.h"
#include "test.h"

#define ARGV(...) ((char *[]){ "ramcache-bpf", __VA_ARGS__, NULL })
#define ARGC(...) \
	((int)(sizeof((char *[]){ "x", __VA_ARGS__ }) / sizeof(char *)))
#define MEM (16ULL << 30)
#define PARSE(o, err, ...)                                            \
	args_parse(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), MEM, o, err, \
		   sizeof(err))

TEST(defaults)
{
	char *argv[] = { "ramcache-bpf", NULL };
	char err[128];
	struct opts o;

	ASSERT_EQ(args_parse(1, argv, MEM, &o, err, sizeof(err)), ARGS_RUN,
		  "run");
	ASSERT_EQ(o.pid, 0, "no pid");
	ASSERT_EQ(o.follow, FOLLOW_SYSTEM, "whole system");
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
	ASSERT_EQ(o.follow, FOLLOW_PID, "follows the pid");
	ASSERT_TRUE(o.json, "json");
	ASSERT_EQ(o.interval_ns, 500000000ULL, "interval");
	ASSERT_EQ(o.headroom, 3ULL << 29, "1.5G");
	ASSERT_EQ(o.inactive, 3ULL << 30, "3G");
	ASSERT_EQ(o.policy, RC_POLICY_COST, "policy");
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

TEST(one_follow_mode_from_the_flags)
{
	char err[128];
	struct opts o;

	ASSERT_EQ(PARSE(&o, err, "--match", "main.py"), ARGS_RUN, err);
	ASSERT_EQ(o.follow, FOLLOW_MATCH, "--match");
	ASSERT_EQ(PARSE(&o, err, "--all"), ARGS_RUN, err);
	ASSERT_EQ(o.follow, FOLLOW_ALL, "--all");
	ASSERT_EQ(PARSE(&o, err, "--match", "main.py", "--all"), ARGS_RUN, err);
	ASSERT_EQ(o.follow, FOLLOW_ALL, "--all with --match as a filter");
	ASSERT_STREQ(o.match, "main.py", "the filter");
	ASSERT_EQ(PARSE(&o, err, "--all", "--pid", "3"), ARGS_ERROR,
		  "--all and --pid");
}

/* review R7: what --help says goes with --all, and --weight alone */
TEST(all_scoping_in_help_and_weight_needs_all)
{
	char err[128], *text = NULL;
	size_t len = 0;
	struct opts o;
	FILE *f = open_memstream(&text, &len);

	if (!ASSERT_OK_PTR(f, "memstream"))
		return;
	args_usage(f);
	fclose(f);
	ASSERT_TRUE(strstr(text, "NAME|UID    with --match or --all"),
		    "--user");
	ASSERT_TRUE(strstr(text, "PATH      with --match or --all"),
		    "--cgroup");
	free(text);
	ASSERT_EQ(PARSE(&o, err, "--weight", "foo=2"), ARGS_ERROR, "alone");
	ASSERT_TRUE(strstr(err, "--weight goes with --all"), err);
	ASSERT_EQ(PARSE(&o, err, "--pid", "1", "--weight", "1=2"), ARGS_ERROR,
		  "with --pid");
	ASSERT_EQ(PARSE(&o, err, "--all", "--weight", "foo=2"), ARGS_RUN,
		  "with --all");
}

/* README.md's flag table, first column, as one string ("" if not found). */
static void readme_flags(char *buf, size_t len)
{
	char path[512], line[1024];
	bool in_table = false;
	size_t off = 0;
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s/README.md", test_root());
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *end;

		if (!strncmp(line, "| flag | meaning |", 18)) {
			in_table = true;
			continue;
		}
		if (!in_table || !strncmp(line, "| ---", 5))
			continue;
		if (line[0] != '|')
			break;
		end = strchr(line + 1, '|');
		/* "\|" inside a cell is an escaped bar, not the column end */
		while (end && end[-1] == '\\')
			end = strchr(end + 1, '|');
		if (end && off < len)
			off += snprintf(buf + off, len - off, "%.*s ",
					(int)(end - line), line);
	}
	fclose(f);
}

/* Does @flag ("--pid") stand in @text as a whole flag? */
static bool has_flag(const char *text, const char *flag)
{
	size_t n = strlen(flag);

	for (const char *p = strstr(text, flag); p; p = strstr(p + 1, flag)) {
		char next = p[n];

		if ((p == text || (p[-1] != '-' && p[-1] != '[' &&
				   !(p[-1] >= 'a' && p[-1] <= 'z'))) &&
		    !(next == '-' || (next >= 'a' && next <= 'z')))
			return true;
	}
	return false;
}

TEST(readme_documents_every_flag)
{
	const struct arg_opt *t;
	char flags[8192], name[64];
	size_t n;

	readme_flags(flags, sizeof(flags));
	if (!ASSERT_TRUE(flags[0],
			 "README.md has a '| flag | meaning |' table"))
		return;
	t = args_table(&n);
	for (size_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "--%s", t[i].name);
		ASSERT_TRUE(has_flag(flags, name), name);
		if (t[i].key < 256) {
			snprintf(name, sizeof(name), "-%c", t[i].key);
			ASSERT_TRUE(has_flag(flags, name), name);
		}
	}
}

TEST(readme_flags_all_exist)
{
	const struct arg_opt *t;
	char flags[8192];
	size_t n;

	readme_flags(flags, sizeof(flags));
	t = args_table(&n);
	for (char *p = strstr(flags, "--"); p; p = strstr(p + 2, "--")) {
		size_t len = strspn(p + 2, "abcdefghijklmnopqrstuvwxyz-");
		bool found = false;

		for (size_t i = 0; i < n; i++)
			found |= strlen(t[i].name) == len &&
				 !strncmp(t[i].name, p + 2, len);
		if (!found)
			FAIL_AT("README flag --%.*s is not an option", (int)len,
				p + 2);
	}
}

TEST(help_is_generated_from_the_table)
{
	const struct arg_opt *t;
	char *text = NULL;
	size_t len = 0, n;
	FILE *f = open_memstream(&text, &len);

	if (!ASSERT_OK_PTR(f, "memstream"))
		return;
	args_usage(f);
	fclose(f);
	t = args_table(&n);
	for (size_t i = 0; i < n; i++) {
		char name[64];

		snprintf(name, sizeof(name), "--%s", t[i].name);
		ASSERT_TRUE(has_flag(text, name), name);
		ASSERT_TRUE(strstr(text, t[i].help) || strchr(t[i].help, '\n'),
			    t[i].help);
	}
	ASSERT_TRUE(strstr(text, "Exit status"), "exit codes");
	free(text);
}

TEST(burst_faults_is_a_count)
{
	char err[128];
	struct opts o;

	ASSERT_EQ(PARSE(&o, err, "--burst-faults", "10%"), ARGS_ERROR, "10%");
	ASSERT_TRUE(strstr(err, "--burst-faults"), err);
	ASSERT_EQ(PARSE(&o, err, "--burst-faults", "2K"), ARGS_ERROR, "2K");
	ASSERT_EQ(PARSE(&o, err, "--burst-faults", "0"), ARGS_ERROR, "0");
	ASSERT_EQ(PARSE(&o, err, "--burst-faults", "512"), ARGS_RUN, err);
	ASSERT_EQ(o.burst_faults, 512, "512");
}

TEST(percent_sizes_use_the_ram_passed_in)
{
	char err[128];
	struct opts o;

	ASSERT_EQ(PARSE(&o, err, "--headroom", "10%"), ARGS_RUN, err);
	ASSERT_EQ(o.headroom, MEM / 10, "10% of MEM");
	ASSERT_EQ(args_parse(ARGC("--headroom", "10%"),
			     ARGV("--headroom", "10%"), 0, &o, err,
			     sizeof(err)),
		  ARGS_ERROR, "no RAM size: percent refused");
}

TEST_MAIN()
