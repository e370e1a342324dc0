// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The metrics registry, its Prometheus text rendering and the HTTP endpoint
 * scraped over real TCP. promtool, when installed (or named by $PROMTOOL),
 * checks both a render and a live scrape.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "emit/metrics.h"
#include "emit/metrics_http.h"

#include "ramcache/control.h"

static char render_buf[METRICS_RENDER_MAX];
static struct metrics_values snap;

static const char *render(struct metrics *m)
{
	int n;

	metrics_snapshot(m, &snap);
	n = metrics_render(&snap, render_buf, sizeof(render_buf));
	if (n < 0)
		return "";
	return render_buf;
}

/* @line (without its newline) is a whole line of @text. */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

/* The value of the sample `@series value` in @text, NAN if absent. */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; (p = strstr(p, series)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return NAN;
}

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       c == ':' || (!first && c >= '0' && c <= '9');
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len >= n && !memcmp(s + len - n, suffix, n);
}

/* What a reader of the exposition knows of the family it is in. */
struct expo {
	char family[128], type[16];
	double last_bucket, inf_bucket;
};

/* A `# HELP` or `# TYPE` line [@p, @eol) into @x; -1 if it is bad. */
static int expo_meta(struct expo *x, const char *p, const char *eol)
{
	bool is_type = p[2] == 'T';
	const char *q = p + 7;
	size_t nl;

	while (q < eol && *q != ' ')
		q++;
	nl = (size_t)(q - (p + 7));
	if (!nl || nl >= sizeof(x->family) || q == eol)
		return -1;
	if (!is_type) {
		memcpy(x->family, p + 7, nl);
		x->family[nl] = '\0';
		x->type[0] = '\0';
		x->last_bucket = x->inf_bucket = -1;
		return strncmp(x->family, "ramcache_", 9) ? -1 : 0;
	}
	if (strncmp(x->family, p + 7, nl) || x->family[nl])
		return -1; /* TYPE without HELP */
	snprintf(x->type, sizeof(x->type), "%.*s", (int)(eol - q - 1), q + 1);
	if (strcmp(x->type, "counter") && strcmp(x->type, "gauge") &&
	    strcmp(x->type, "histogram"))
		return -1;
	if (!strcmp(x->type, "counter") && !ends_with(x->family, nl, "_total"))
		return -1;
	return 0;
}

/* The labels `{a="b",...}` at @q: what follows them, or NULL if bad. */
static const char *expo_labels(const char *q)
{
	q++;
	while (*q != '}') {
		if (!name_char(*q, true))
			return NULL;
		while (name_char(*q, false))
			q++;
		if (q[0] != '=' || q[1] != '"')
			return NULL;
		for (q += 2; *q != '"'; q++) {
			if (*q == '\n' || !*q)
				return NULL;
			if (*q == '\\' && !strchr("\\\"n", *++q))
				return NULL;
		}
		q++;
		if (*q == ',')
			q++;
		else if (*q != '}')
			return NULL;
	}
	return q + 1;
}

/* Sample @name = @val of a histogram line @p (to @eol); -1 if bad. */
static int expo_histogram(struct expo *x, const char *name, double val,
			  const char *p, const char *eol)
{
	size_t fl = strlen(x->family);

	if (strncmp(name, x->family, fl))
		return -1;
	if (!strcmp(name + fl, "_bucket")) {
		if (!strstr(p, "le=\"") || strstr(p, "le=\"") > eol)
			return -1;
		if (val < x->last_bucket)
			return -1; /* not cumulative */
		x->last_bucket = val;
		if (strstr(p, "le=\"+Inf\"") &&
		    strstr(p, "le=\"+Inf\"") < eol) {
			x->inf_bucket = val;
			x->last_bucket = -1;
		}
		return 0;
	}
	if (!strcmp(name + fl, "_count"))
		return val != x->inf_bucket ? -1 : 0;
	return strcmp(name + fl, "_sum") ? -1 : 0;
}

/* A sample line [@p, @eol) of the family in @x; -1 if it is bad. */
static int expo_sample(struct expo *x, const char *p, const char *eol)
{
	const char *q = p;
	char name[128], *end;
	double val;
	size_t nl;

	if (*p == '#' || !x->type[0] || !name_char(*q, true))
		return -1;
	while (name_char(*q, false))
		q++;
	nl = (size_t)(q - p);
	if (nl >= sizeof(name))
		return -1;
	memcpy(name, p, nl);
	name[nl] = '\0';
	if (*q == '{' && !(q = expo_labels(q)))
		return -1;
	if (*q != ' ')
		return -1;
	q++;
	val = strtod(q, &end);
	if (end == q || end != eol)
		return -1;
	if (!strcmp(x->type, "histogram"))
		return expo_histogram(x, name, val, p, eol);
	return strcmp(name, x->family) ? -1 : 0;
}

/*
 * A strict reader for the subset of text format 0.0.4 we emit: HELP and
 * TYPE before a family's samples, well-formed names, labels and values,
 * histogram buckets cumulative with +Inf equal to _count. Returns the
 * number of samples, or -1 with a message.
 */
static int parse_exposition(const char *text)
{
	struct expo x = { .last_bucket = -1, .inf_bucket = -1 };
	int samples = 0, lineno = 0;
	const char *p = text;

	if (!*text || text[strlen(text) - 1] != '\n') {
		printf("# exposition does not end in a newline\n");
		return -1;
	}
	while (*p) {
		const char *eol = strchr(p, '\n');

		lineno++;
		if (!strncmp(p, "# HELP ", 7) || !strncmp(p, "# TYPE ", 7)) {
			if (expo_meta(&x, p, eol))
				goto bad;
		} else if (expo_sample(&x, p, eol)) {
			goto bad;
		} else {
			samples++;
		}
		p = eol + 1;
	}
	return samples;
bad:
	printf("# bad exposition line %d: %.*s\n", lineno,
	       (int)(strchr(p, '\n') ? strchr(p, '\n') - p : 80), p);
	return -1;
}

/* The reader itself: each rule it checks refuses a line that breaks it. */
TEST(exposition_reader_refuses_bad_lines)
{
#define FAM  "# HELP ramcache_x_total X.\n# TYPE ramcache_x_total counter\n"
#define HIST "# HELP ramcache_h H.\n# TYPE ramcache_h histogram\n"
	static const char *const bad[] = {
		FAM "ramcache_x_total 1",  /* no newline at the end */
		"ramcache_x_total 1\n",	   /* no HELP, TYPE */
		"# HELP other_total X.\n", /* not ours */
		"# HELP ramcache_x X.\n# TYPE ramcache_x counter\n", /* _total */
		"# HELP ramcache_x X.\n# TYPE ramcache_y gauge\n",
		"# HELP ramcache_x X.\n# TYPE ramcache_x summary\n",
		FAM "ramcache_y_total 1\n",	       /* another family */
		FAM "ramcache_x_total{a=\"b} 1\n",     /* label not closed */
		FAM "ramcache_x_total{a=\"\\q\"} 1\n", /* bad escape */
		FAM "ramcache_x_total{1a=\"b\"} 1\n",  /* bad label name */
		FAM "ramcache_x_total one\n",	       /* not a number */
		FAM "ramcache_x_total 1 2\n",
		HIST
		"ramcache_h_bucket{le=\"1\"} 2\nramcache_h_bucket{le=\"+Inf\"} 1\n",
		HIST "ramcache_h_bucket{le=\"+Inf\"} 2\nramcache_h_count 3\n",
		HIST "ramcache_h_max 1\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ASSERT_EQ(parse_exposition(bad[i]), -1, bad[i]);
	ASSERT_EQ(
		parse_exposition(
			FAM
			"ramcache_x_total{a=\"b\\\"\",c=\"\"} 1\n" HIST
			"ramcache_h_bucket{le=\"1\"} 1\nramcache_h_bucket{le=\"+Inf\"} 2\n"
			"ramcache_h_sum 3\nramcache_h_count 2\n"),
		5, "a good exposition");
#undef FAM
#undef HIST
}

/* render_lines: the machine-wide families. */
static void render_lines_totals(const char *out)
{
	ASSERT_TRUE(
		has_line(
			out,
			"# HELP ramcache_commands_total Eviction commands by outcome, every executor."),
		"help");
	ASSERT_TRUE(has_line(out, "# TYPE ramcache_commands_total counter"),
		    "type");
	ASSERT_TRUE(has_line(out, "ramcache_commands_total{status=\"busy\"} 2"),
		    "busy");
	ASSERT_TRUE(has_line(out,
			     "ramcache_commands_total{status=\"evicted\"} 1"),
		    "evicted");
	ASSERT_TRUE(has_line(out,
			     "ramcache_commands_total{status=\"not_found\"} 0"),
		    "not_found");
	ASSERT_TRUE(has_line(out,
			     "ramcache_commands_total{status=\"pinned\"} 0"),
		    "pinned");
	ASSERT_TRUE(has_line(out,
			     "ramcache_commands_total{status=\"timeout\"} 1"),
		    "timeout");
	ASSERT_TRUE(has_line(out,
			     "ramcache_commands_total{status=\"invalid\"} 1"),
		    "unknown ack status");
	ASSERT_TRUE(has_line(out, "ramcache_evicted_bytes_total 1052672"),
		    "bytes");
	ASSERT_TRUE(has_line(out, "ramcache_oom_kills_total 1"), "oom");
	ASSERT_TRUE(has_line(out, "ramcache_ringbuf_drops_total 12"), "drops");
	ASSERT_TRUE(has_line(out, "# TYPE ramcache_level gauge"), "level type");
	ASSERT_TRUE(has_line(out, "ramcache_level 2"), "level");
	ASSERT_TRUE(has_line(out, "ramcache_level_state{level=\"high\"} 1"),
		    "level state");
	ASSERT_TRUE(has_line(out, "ramcache_level_state{level=\"ok\"} 0"),
		    "level state ok");
	ASSERT_TRUE(has_line(out, "ramcache_headroom_bytes -4096"), "headroom");
	ASSERT_TRUE(has_line(out, "ramcache_target_bytes 268435456"), "target");
	ASSERT_TRUE(has_line(out, "ramcache_rss_bytes 8589934592"), "rss");
	ASSERT_TRUE(has_line(out, "ramcache_executors 1"), "executors");
}

/* render_lines: the families of slot 0. */
static void render_lines_executor(const char *out)
{
#define EXEC "{slot=\"0\",comm=\"comfy\",domain=\"/a\""
	ASSERT_TRUE(has_line(out, "ramcache_executor_commands_total" EXEC
				  ",status=\"busy\"} 2"),
		    "busy of slot 0");
	ASSERT_TRUE(has_line(out, "ramcache_executor_commands_total" EXEC
				  ",status=\"invalid\"} 1"),
		    "invalid of slot 0");
	ASSERT_TRUE(has_line(out, "ramcache_executor_evicted_bytes_total" EXEC
				  "} 1052672"),
		    "bytes of slot 0");
	ASSERT_TRUE(has_line(out,
			     "ramcache_executor_oom_kills_total" EXEC "} 0"),
		    "a machine-wide OOM kill is not the executor's");
	ASSERT_TRUE(has_line(out,
			     "ramcache_executor_rss_bytes" EXEC "} 8589934592"),
		    "rss of slot 0");
	ASSERT_TRUE(has_line(out, "ramcache_executor_target_bytes" EXEC
				  "} 268435456"),
		    "target of slot 0");
	ASSERT_TRUE(has_line(out, "ramcache_executor_up" EXEC "} 1"), "up");
	ASSERT_TRUE(has_line(out, "ramcache_executor_info" EXEC
				  ",pid=\"4242\",cgroup=\"/a\"} 1"),
		    "info");
	ASSERT_TRUE(has_line(out,
			     "ramcache_executor_eviction_ack_seconds_count" EXEC
			     "} 0"),
		    "ack histogram of slot 0");
#undef EXEC
}

/* render_lines: the families of domain 0. */
static void render_lines_domain(const char *out)
{
	ASSERT_TRUE(has_line(out, "ramcache_domain_level{domain=\"/a\"} 2"),
		    "domain level");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_domain_limit_bytes{domain=\"/a\"} 1073741824"),
		"domain limit");
	ASSERT_TRUE(
		has_line(out,
			 "ramcache_domain_headroom_bytes{domain=\"/a\"} -4096"),
		"domain headroom");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_domain_forecast_eta_seconds{domain=\"/a\"} 2.500000000"),
		"domain eta");
	ASSERT_TRUE(has_line(out, "ramcache_domain_executors{domain=\"/a\"} 1"),
		    "domain executors");
}

TEST(render_lines)
{
	struct metrics m;
	const char *out;

	metrics_init(&m);
	ASSERT_OK(metrics_exec_bind(&m, 0, 4242, "comfy", "/a", 0), "bind");
	metrics_command_acked(&m, 0, RAMCACHE_ACK_BUSY);
	metrics_command_acked(&m, 0, RAMCACHE_ACK_BUSY);
	metrics_command_acked(&m, 0, RAMCACHE_ACK_EVICTED);
	metrics_command_acked(&m, 0, 77);
	metrics_command_timeout(&m, 0);
	metrics_bytes_evicted(&m, 0, 1 << 20);
	metrics_bytes_evicted(&m, 0, 4096);
	metrics_oom_kill(&m);
	metrics_set_ringbuf_drops(&m, 12);
	ASSERT_OK(metrics_domain_set(&m, 0, "/a", 1 << 30, -4096, 2500000000ULL,
				     RAMCACHE_LEVEL_HIGH),
		  "domain");
	metrics_set_level(&m, RAMCACHE_LEVEL_HIGH);
	metrics_set_headroom(&m, -4096);
	metrics_set_target(&m, 0, 268435456);
	metrics_set_rss(&m, 0, 8589934592ULL);
	out = render(&m);

	render_lines_totals(out);
	render_lines_executor(out);
	render_lines_domain(out);
	ASSERT_TRUE(strstr(out, "\nramcache_build_info{version=\""), "build");
	ASSERT_GE(parse_exposition(out), 100, "parses");
	metrics_destroy(&m);
}

/* Lines of @text that are samples, not comments. */
static int count_samples(const char *text)
{
	int n = 0;

	for (const char *p = text; *p; p = strchr(p, '\n') + 1)
		n += *p != '#';
	return n;
}

/*
 * exec_slot_lifecycle: slot 7 bound with a hostile comm, counted, then
 * its executor gone: its last counts stay, nothing more is counted.
 */
static void slot_seven_exits(struct metrics *m)
{
	const char *out;

	/* a hostile comm stays one valid label value */
	ASSERT_OK(metrics_exec_bind(m, 7, 100, "ev\"il\n\x1b[2J\\", "/cg", 2),
		  "bind 7");
	metrics_command_timeout(m, 7);
	metrics_exec_oom_kill(m, 7);
	metrics_set_rss(m, 7, 4096);
	out = render(m);
#define SEVEN \
	"{slot=\"7\",comm=\"ev\\\"il\\\\x0a\\\\x1b[2J\\\\\\\\\",domain=\"2\""
	ASSERT_TRUE(has_line(out, "ramcache_executor_commands_total" SEVEN
				  ",status=\"timeout\"} 1"),
		    "escaped comm, domain index until the domain is set");
	ASSERT_TRUE(has_line(out,
			     "ramcache_executor_oom_kills_total" SEVEN "} 1"),
		    "oom of slot 7");
	ASSERT_TRUE(has_line(out,
			     "ramcache_commands_total{status=\"timeout\"} 2"),
		    "totals keep counting");
	ASSERT_GE(parse_exposition(out), 100, "hostile comm parses");

	metrics_exec_unbind(m, 7);
	out = render(m);
	ASSERT_TRUE(has_line(out, "ramcache_executor_up" SEVEN "} 0"),
		    "exited: up 0");
	ASSERT_TRUE(has_line(out,
			     "ramcache_executor_oom_kills_total" SEVEN "} 1"),
		    "exited: final OOM kill still scraped");
	ASSERT_TRUE(has_line(out, "ramcache_executor_rss_bytes" SEVEN "} 0"),
		    "exited: rss 0");
	ASSERT_TRUE(has_line(out, "ramcache_executors 0"), "none attached");
	metrics_command_timeout(m, 7);
	out = render(m);
	ASSERT_TRUE(has_line(out, "ramcache_executor_commands_total" SEVEN
				  ",status=\"timeout\"} 1"),
		    "an exited slot counts nothing more");
#undef SEVEN
}

TEST(exec_slot_lifecycle)
{
	const char *out;
	struct metrics m;

	metrics_init(&m);
	out = render(&m);
	ASSERT_TRUE(!strstr(out, "ramcache_executor_"), "no slot: no family");
	ASSERT_TRUE(!strstr(out, "ramcache_domain_"), "no domain: no family");
	ASSERT_TRUE(has_line(out, "ramcache_executors 0"), "none attached");

	ASSERT_EQ(metrics_exec_bind(&m, METRICS_SLOTS, 1, "x", NULL, 0),
		  -EINVAL, "slot out of range");
	ASSERT_EQ(metrics_exec_bind(&m, 0, 1, "x", NULL, METRICS_DOMAINS),
		  -EINVAL, "domain out of range");
	ASSERT_EQ(metrics_domain_set(&m, METRICS_DOMAINS, "d", 0, 0, 0, 0),
		  -EINVAL, "domain set out of range");
	ASSERT_EQ(metrics_exec_relabel(&m, 0, "/y", 0), -EINVAL,
		  "relabel of a free slot");

	/* updates to a slot not attached count machine-wide only */
	metrics_command_timeout(&m, 7);
	metrics_bytes_evicted(&m, METRICS_SLOTS + 3, 10);
	out = render(&m);
	ASSERT_TRUE(has_line(out,
			     "ramcache_commands_total{status=\"timeout\"} 1"),
		    "total of a free slot");
	ASSERT_TRUE(has_line(out, "ramcache_evicted_bytes_total 10"),
		    "total of an out-of-range slot");
	ASSERT_TRUE(!strstr(out, "slot=\"7\""), "free slot not rendered");

	slot_seven_exits(&m);

	/* reuse replaces the labels and starts the counts again */
	metrics_domain_set(&m, 2, "/pod", 1 << 20, 4096, METRICS_NO_ETA, 0);
	ASSERT_OK(metrics_exec_bind(&m, 7, 101, "next", NULL, 2), "rebind 7");
	ASSERT_OK(metrics_exec_relabel(&m, 7, "/pod/c", 2), "relabel");
	out = render(&m);
	ASSERT_TRUE(!strstr(out, "comm=\"ev"), "old labels gone");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_executor_commands_total{slot=\"7\",comm=\"next\",domain=\"/pod\",status=\"timeout\"} 0"),
		"counts start again");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_executor_info{slot=\"7\",comm=\"next\",domain=\"/pod\",pid=\"101\",cgroup=\"/pod/c\"} 1"),
		"info follows the new process");
	ASSERT_TRUE(has_line(out,
			     "ramcache_domain_executors{domain=\"/pod\"} 1"),
		    "domain counts it");
	metrics_domain_clear(&m, 2);
	out = render(&m);
	ASSERT_TRUE(!strstr(out, "ramcache_domain_"), "cleared domain gone");
	metrics_destroy(&m);
}

/* No gauge of a domain nobody is in stays frozen; labels stay stable. */
TEST(domains_follow_their_executors)
{
	const char *out;
	struct metrics m;

	metrics_init(&m);
	/* the machine watched alone, before any executor */
	metrics_domain_set(&m, 0, "machine", 1 << 30, 1 << 29, 20000000000ULL,
			   RAMCACHE_LEVEL_HIGH);
	out = render(&m);
	ASSERT_TRUE(has_line(out,
			     "ramcache_domain_executors{domain=\"machine\"} 0"),
		    "machine alone");

	/* an executor in a domain not set yet: its index, then its name */
	metrics_exec_bind(&m, 4, 10, "a", NULL, 3);
	out = render(&m);
	ASSERT_TRUE(!strstr(out, "domain=\"machine\""),
		    "the machine alone is gone once an executor is elsewhere");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_executor_up{slot=\"4\",comm=\"a\",domain=\"3\"} 1"),
		"index until the domain is set");
	metrics_domain_set(&m, 3, "/pod", 1 << 30, 1 << 20, 5000000000ULL,
			   RAMCACHE_LEVEL_CRITICAL);
	metrics_exec_bind(&m, 5, 11, "b", NULL, 3);
	out = render(&m);
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_executor_up{slot=\"4\",comm=\"a\",domain=\"/pod\"} 1"),
		"named once set");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_executor_up{slot=\"5\",comm=\"b\",domain=\"/pod\"} 1"),
		"named at bind");
	ASSERT_TRUE(has_line(out,
			     "ramcache_domain_executors{domain=\"/pod\"} 2"),
		    "two in the domain");

	/* one leaves: the domain stays; the last leaves: it goes */
	metrics_exec_unbind(&m, 4);
	ASSERT_TRUE(
		has_line(
			render(&m),
			"ramcache_domain_forecast_eta_seconds{domain=\"/pod\"} 5.000000000"),
		"one left: still there");
	metrics_exec_unbind(&m, 5);
	out = render(&m);
	ASSERT_TRUE(!strstr(out, "ramcache_domain_"),
		    "no executor left: no frozen domain gauge");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_executor_up{slot=\"5\",comm=\"b\",domain=\"/pod\"} 0"),
		"the exited executor keeps its domain label");

	/* moving an executor away empties its old domain */
	metrics_domain_set(&m, 1, "/x", 0, 0, METRICS_NO_ETA, 0);
	metrics_exec_bind(&m, 0, 12, "c", NULL, 1);
	metrics_domain_set(&m, 2, "/y", 0, 0, METRICS_NO_ETA, 0);
	ASSERT_OK(metrics_exec_relabel(&m, 0, "/y/c", 2), "move");
	out = render(&m);
	ASSERT_TRUE(!strstr(out, "{domain=\"/x\"}"), "old domain gone");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_executor_up{slot=\"0\",comm=\"c\",domain=\"/y\"} 1"),
		"new domain label");
	ASSERT_GE(parse_exposition(out), 100, "parses");
	metrics_destroy(&m);
}

/* Processes that come and go do not grow the exposition. */
TEST(principals_count_what_looking_for_executors_cost)
{
	const char *out;
	struct metrics m;

	metrics_init(&m);
	ASSERT_TRUE(!strstr(render(&m), "ramcache_discovery_"),
		    "no principal, no family");
	ASSERT_OK(metrics_principal_set(&m, 2, "uid 1000", 1500000000ULL, 40,
					7),
		  "set");
	ASSERT_OK(metrics_principal_set(&m, 5, "a \"b\"\n", 0, 1, 0), "set");
	ASSERT_EQ(metrics_principal_set(&m, METRICS_PRINCIPALS, "x", 0, 0, 0),
		  -EINVAL, "out of range");
	out = render(&m);
	ASSERT_GE(parse_exposition(out), 100, "valid exposition");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_discovery_seconds_total{principal=\"uid 1000\"} 1.500000000"),
		"seconds");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_discovery_looks_total{principal=\"uid 1000\"} 40"),
		"looks");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_discovery_deferred_total{principal=\"uid 1000\"} 7"),
		"deferred");
	metrics_principal_set(&m, 2, NULL, 0, 0, 0);
	ASSERT_TRUE(!strstr(render(&m), "uid 1000"), "cleared");
	metrics_destroy(&m);
}

TEST(series_bounded_under_churn)
{
	struct metrics m;
	char comm[32];
	int full = 0, n, per_exec, fixed;

	metrics_init(&m);
	fixed = count_samples(render(&m));
	metrics_exec_bind(&m, 0, 1, "one", NULL, 0);
	per_exec = count_samples(render(&m)) - fixed;
	printf("# series: %d fixed, %d per executor\n", fixed, per_exec);
	ASSERT_EQ(per_exec, 67, "series per executor");
	metrics_domain_set(&m, 0, "machine", 1, 1, 1, 0);
	ASSERT_EQ(count_samples(render(&m)) - fixed - per_exec, 5,
		  "series per domain");
	for (int pid = 2; pid < 5000; pid++) {
		unsigned int slot = (unsigned int)pid % METRICS_SLOTS;

		metrics_exec_unbind(&m, slot);
		snprintf(comm, sizeof(comm), "proc%d", pid);
		metrics_exec_bind(&m, slot, pid, comm, NULL, 0);
		metrics_command_timeout(&m, slot);
		if (pid == 2 * METRICS_SLOTS) /* each slot bound once or more */
			full = count_samples(render(&m));
	}
	n = count_samples(render(&m));
	ASSERT_EQ(full, fixed + 5 + METRICS_SLOTS * per_exec,
		  "every slot used once");
	ASSERT_EQ(n, full, "4000 more processes: no more series");
	ASSERT_TRUE(
		has_line(render(&m),
			 "ramcache_commands_total{status=\"timeout\"} 4998"),
		"totals count every process");

	/* a full node of pods on cgroup v2: what one scrape weighs */
	for (unsigned int i = 0; i < METRICS_SLOTS; i++) {
		char dom[METRICS_DOMAIN_LEN];

		snprintf(
			dom, sizeof(dom),
			"/kubepods.slice/kubepods-burstable.slice/"
			"kubepods-burstable-pod%08x_1a2b_4c3d_8e9f_0123456789ab.slice",
			i);
		metrics_domain_set(&m, i, dom, 8ULL << 30, 1ULL << 30,
				   METRICS_NO_ETA, 0);
		metrics_exec_bind(&m, i, 100000 + (int)i, "python3", dom, i);
	}
	n = count_samples(render(&m));
	ASSERT_EQ(n, fixed + METRICS_SLOTS * (per_exec + 5), "a pod a slot");
	printf("# %d executors in %d pod cgroups: %d series, %zu bytes\n",
	       METRICS_SLOTS, METRICS_SLOTS, n, strlen(render(&m)));
	metrics_destroy(&m);
}

TEST(histogram_cumulative)
{
	static const char *const name = "ramcache_reclaim_stall_seconds";
	struct metrics m;
	const char *out;
	char line[160];

	metrics_init(&m);
	metrics_reclaim_stall(&m, METRICS_RECLAIM_MEMCG, 1000); /* = 1us */
	metrics_reclaim_stall(&m, METRICS_RECLAIM_MEMCG, 1001);
	metrics_reclaim_stall(&m, METRICS_RECLAIM_MEMCG, 3000000000ULL);
	metrics_reclaim_stall(&m, METRICS_RECLAIM_MEMCG, 20000000000ULL);
	metrics_reclaim_stall(&m, METRICS_RECLAIM_KINDS, 5); /* ignored */
	metrics_reclaim_stall(&m, METRICS_RECLAIM_DIRECT, 0);
	out = render(&m);

	ASSERT_TRUE(has_line(out,
			     "# TYPE ramcache_reclaim_stall_seconds histogram"),
		    "type");
#define BUCKET(le, n)                                                          \
	snprintf(line, sizeof(line), "%s_bucket{kind=\"memcg\",le=\"%s\"} %d", \
		 name, le, n);                                                 \
	ASSERT_TRUE(has_line(out, line), line)
	BUCKET("1e-06", 1);
	BUCKET("2.5e-06", 2);
	BUCKET("2.5", 2);
	BUCKET("5", 3);
	BUCKET("10", 3);
	BUCKET("+Inf", 4);
#undef BUCKET
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_reclaim_stall_seconds_sum{kind=\"memcg\"} 23.000002001"),
		"sum");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_reclaim_stall_seconds_count{kind=\"memcg\"} 4"),
		"count");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_reclaim_stall_seconds_bucket{kind=\"direct\",le=\"1e-06\"} 1"),
		"zero lands in the first bucket");
	ASSERT_TRUE(
		has_line(
			out,
			"ramcache_reclaim_stall_seconds_count{kind=\"direct\"} 1"),
		"direct count");
	ASSERT_TRUE(
		has_line(out,
			 "ramcache_eviction_ack_seconds_bucket{le=\"+Inf\"} 0"),
		"unlabelled histogram");
	ASSERT_TRUE(has_line(out,
			     "ramcache_eviction_freed_seconds_sum 0.000000000"),
		    "unlabelled sum");
	ASSERT_GE(parse_exposition(out), 100, "parses");

	for (unsigned int i = 1; i < METRICS_HIST_BOUNDS; i++)
		ASSERT_TRUE(metrics_bound_ns(i) > metrics_bound_ns(i - 1),
			    "bounds increase");
	ASSERT_EQ(metrics_bound_ns(0), 1000, "1us");
	ASSERT_EQ(metrics_bound_ns(METRICS_HIST_BOUNDS - 1), 10000000000ULL,
		  "10s");
	for (unsigned int i = 0; i < METRICS_HIST_BOUNDS; i++)
		ASSERT_EQ(llround(strtod(metrics_bound_le(i), NULL) * 1e9),
			  metrics_bound_ns(i), metrics_bound_le(i));
	ASSERT_STREQ(metrics_bound_le(METRICS_HIST_BOUNDS), "+Inf", "+Inf");
	metrics_destroy(&m);
}

/* Every slot and domain bound with the longest labels and largest values. */
static void fill_worst(struct metrics *m)
{
	char comm[METRICS_COMM_LEN * 4], cg[METRICS_CGROUP_LEN * 4];
	char dom[METRICS_DOMAIN_LEN * 4];

	/* '"' survives sanitising and doubles when escaped */
	memset(comm, '"', sizeof(comm) - 1);
	comm[sizeof(comm) - 1] = '\0';
	memset(cg, '"', sizeof(cg) - 1);
	cg[sizeof(cg) - 1] = '\0';
	memset(dom, '"', sizeof(dom) - 1);
	dom[sizeof(dom) - 1] = '\0';
	/* bound first: a domain nobody is in does not last past a bind */
	for (unsigned int i = 0; i < METRICS_SLOTS; i++)
		metrics_exec_bind(m, i, INT32_MIN, comm, cg, i);
	for (unsigned int d = 0; d < METRICS_DOMAINS; d++) {
		dom[0] = (char)('A' + d / 26); /* names must differ */
		dom[1] = (char)('a' + d % 26);
		metrics_domain_set(m, d, dom, UINT64_MAX, INT64_MIN,
				   UINT64_MAX - 1, RAMCACHE_LEVEL_CRITICAL);
	}
	pthread_mutex_lock(&m->lock);
	for (unsigned int i = 0; i < METRICS_SLOTS; i++) {
		struct metrics_exec *e = &m->v.exec[i];

		memset(&e->evict_ack, 0xff, sizeof(e->evict_ack));
		memset(&e->evict_freed, 0xff, sizeof(e->evict_freed));
		memset(e->commands, 0xff, sizeof(e->commands));
		memset(e->anomalies, 0xff, sizeof(e->anomalies));
		e->evicted_bytes = e->oom_kills = e->rss_bytes =
			e->target_bytes = UINT64_MAX;
	}
	memset(m->v.reclaim_stall, 0xff, sizeof(m->v.reclaim_stall));
	memset(&m->v.evict_ack, 0xff, sizeof(m->v.evict_ack));
	memset(&m->v.evict_freed, 0xff, sizeof(m->v.evict_freed));
	memset(m->v.commands, 0xff, sizeof(m->v.commands));
	memset(m->v.anomalies, 0xff, sizeof(m->v.anomalies));
	m->v.evaluations = m->v.evicted_bytes = m->v.oom_kills =
		m->v.ringbuf_drops = UINT64_MAX;
	m->v.level = RAMCACHE_LEVEL_CRITICAL;
	m->v.headroom_bytes = INT64_MIN;
	pthread_mutex_unlock(&m->lock);
}

TEST(render_buffer_size)
{
	static char small[METRICS_RENDER_MAX];
	struct metrics m;
	int n;

	/* an empty registry fits the first buffer the server tries */
	metrics_init(&m);
	metrics_snapshot(&m, &snap);
	n = metrics_render(&snap, small, METRICS_RENDER_SIZE);
	ASSERT_GE(n, 1000, "empty registry fits METRICS_RENDER_SIZE");

	fill_worst(&m);
	metrics_snapshot(&m, &snap);
	n = metrics_render(&snap, small, sizeof(small));
	ASSERT_GE(n, METRICS_RENDER_SIZE, "worst case fits METRICS_RENDER_MAX");
	ASSERT_EQ(strlen(small), n, "length");
	printf("# worst case: %d bytes\n", n);
	ASSERT_GE(parse_exposition(small), 64 * 69, "worst case parses");

	n = metrics_render(&snap, small, (size_t)n + 1);
	ASSERT_GE(n, METRICS_RENDER_SIZE, "exact size");
	ASSERT_EQ(metrics_render(&snap, small, (size_t)n), -ENOSPC,
		  "one short");
	ASSERT_STREQ(small, "", "no partial output");
	ASSERT_EQ(metrics_render(&snap, small, 0), -ENOSPC, "empty buffer");
	metrics_destroy(&m);
}

TEST(escape_label)
{
	char buf[32];

	ASSERT_EQ(metrics_escape_label(buf, sizeof(buf), "a\\b\"c\nd"), 10,
		  "length");
	ASSERT_STREQ(buf, "a\\\\b\\\"c\\nd", "escaped");
	ASSERT_EQ(metrics_escape_label(buf, sizeof(buf), "plain 1.0"), 9,
		  "plain");
	ASSERT_STREQ(buf, "plain 1.0", "plain copy");
	ASSERT_EQ(metrics_escape_label(buf, sizeof(buf), ""), 0, "empty");
	ASSERT_EQ(metrics_escape_label(buf, 4, "abcd"), -ENOSPC, "no room");
	ASSERT_EQ(metrics_escape_label(buf, 4, "ab\""), -ENOSPC,
		  "no room for escape");
	ASSERT_EQ(metrics_escape_label(buf, 4, "abc"), 3, "just fits");
}

TEST(parse_addr)
{
	static const struct {
		const char *s;
		int err;
		int family;
		const char *host;
		unsigned int port;
	} cases[] = {
#define BAD(s) { s, -EINVAL, 0, NULL, 0 }
		{ "127.0.0.1:9101", 0, AF_INET, "127.0.0.1", 9101 },
		{ "0.0.0.0:80", 0, AF_INET, "0.0.0.0", 80 },
		{ ":9101", 0, AF_INET, "0.0.0.0", 9101 },
		{ "localhost:9101", 0, AF_INET, "127.0.0.1", 9101 },
		{ "10.1.2.3:0", 0, AF_INET, "10.1.2.3", 0 },
		{ "127.0.0.1:65535", 0, AF_INET, "127.0.0.1", 65535 },
		{ "[::1]:9101", 0, AF_INET6, "::1", 9101 },
		{ "[::]:9101", 0, AF_INET6, "::", 9101 },
		{ "[fe80::1:2]:1", 0, AF_INET6, "fe80::1:2", 1 },
		{ "[::ffff:127.0.0.1]:9", 0, AF_INET6, "::ffff:127.0.0.1", 9 },
		BAD(""),
		BAD(":"),
		BAD("9101"),
		BAD("127.0.0.1"),
		BAD("127.0.0.1:"),
		BAD("127.0.0.1:65536"),
		BAD("127.0.0.1:99999999999999999999"),
		BAD("127.0.0.1:-1"),
		BAD("127.0.0.1:+80"),
		BAD("127.0.0.1:80 "),
		BAD("127.0.0.1:0x50"),
		BAD(" 127.0.0.1:80"),
		BAD("127.0.0:80"),
		BAD("256.0.0.1:80"),
		BAD("example.com:80"),
		BAD("::1:9101"),
		BAD("[::1]9101"),
		BAD("[::1]:"),
		BAD("[]:80"),
		BAD("[::1:80"),
		BAD("[127.0.0.1]:80"),
		BAD("[::1]:80:80"),
		BAD("[zz::1]:80"),
		BAD("[0000:0000:0000:0000:0000:0000:0000:0000:0]:80"),
	};
#undef BAD
	struct sockaddr_storage ss;
	socklen_t len;

	ASSERT_EQ(metrics_http_parse_addr(NULL, &ss, &len), -EINVAL, "NULL");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char host[INET6_ADDRSTRLEN] = "";
		unsigned int port;
		int err;

		err = metrics_http_parse_addr(cases[i].s, &ss, &len);
		if (!ASSERT_EQ(err, cases[i].err, cases[i].s) || err)
			continue;
		ASSERT_EQ(ss.ss_family, cases[i].family, cases[i].s);
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

			ASSERT_EQ(len, sizeof(*sin), cases[i].s);
			inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
			port = ntohs(sin->sin_port);
		} else {
			struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

			ASSERT_EQ(len, sizeof(*sin6), cases[i].s);
			inet_ntop(AF_INET6, &sin6->sin6_addr, host,
				  sizeof(host));
			port = ntohs(sin6->sin6_port);
		}
		ASSERT_STREQ(host, cases[i].host, cases[i].s);
		ASSERT_EQ(port, cases[i].port, cases[i].s);
	}
}

struct http_reply {
	int status;
	char headers[1024];
	char *body; /* into raw */
	char raw[METRICS_RENDER_MAX + 4096];
};

/* One request over a fresh TCP connection; 0 or -errno. */
static int http_request(int family, uint16_t port, const char *method,
			const char *path, struct http_reply *r)
{
	struct sockaddr_storage ss = { 0 };
	struct timeval tv = { .tv_sec = 5 };
	char req[256], *sep;
	size_t got = 0;
	socklen_t len;
	int fd, n;

	if (family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = in6addr_loopback;
		sin6->sin6_port = htons(port);
		len = sizeof(*sin6);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sin->sin_port = htons(port);
		len = sizeof(*sin);
	}
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&ss, len))
		goto fail;
	n = snprintf(req, sizeof(req),
		     "%s %s HTTP/1.1\r\nHost: localhost\r\n"
		     "Connection: close\r\nContent-Length: 0\r\n\r\n",
		     method, path);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		goto fail;
	while (got < sizeof(r->raw) - 1) {
		ssize_t k = recv(fd, r->raw + got, sizeof(r->raw) - 1 - got, 0);

		if (k < 0)
			goto fail;
		if (!k)
			break;
		got += (size_t)k;
	}
	close(fd);
	if (got == sizeof(r->raw) - 1)
		return -EMSGSIZE; /* never judge a cut body */
	r->raw[got] = '\0';
	sep = strstr(r->raw, "\r\n\r\n");
	if (!sep || sscanf(r->raw, "HTTP/1.%*d %d", &r->status) != 1)
		return -EPROTO;
	snprintf(r->headers, sizeof(r->headers), "%.*s", (int)(sep - r->raw),
		 r->raw);
	r->body = sep + 4;
	return 0;
fail:
	n = -errno;
	close(fd);
	return n;
}

static struct http_reply reply;

static bool scrape(uint16_t port, const char *what)
{
	if (!ASSERT_OK(http_request(AF_INET, port, "GET", "/metrics", &reply),
		       what))
		return false;
	return ASSERT_EQ(reply.status, 200, what);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* http_scrape_moves: one of each thing the metrics count, on slot 5. */
static void move_everything(struct metrics *m)
{
	metrics_exec_bind(m, 5, 99, "x", NULL, 1);
	metrics_oom_kill(m);
	metrics_evict_ack(m, 5, 1500000); /* 1.5 ms */
	metrics_evict_freed(m, 5, 40000000);
	metrics_command_acked(m, 5, RAMCACHE_ACK_EVICTED);
	metrics_bytes_evicted(m, 5, 123456789);
	metrics_reclaim_stall(m, METRICS_RECLAIM_DIRECT, 70000);
	metrics_set_ringbuf_drops(m, 3);
	metrics_domain_set(m, 1, "machine", 0, 1 << 30, METRICS_NO_ETA,
			   RAMCACHE_LEVEL_CRITICAL);
	metrics_set_level(m, RAMCACHE_LEVEL_CRITICAL);
	metrics_set_headroom(m, 1 << 30);
	metrics_set_target(m, 5, 1 << 29);
	metrics_set_rss(m, 5, 3ULL << 30);
}

/* http_scrape_moves: the second scrape's @body shows move_everything(). */
static void check_moved(const char *body)
{
	double sum;

	ASSERT_EQ(sample(body, "ramcache_oom_kills_total"), 1, "oom");
	ASSERT_EQ(sample(body, "ramcache_eviction_ack_seconds_count"), 1,
		  "ack count");
	ASSERT_EQ(sample(body,
			 "ramcache_eviction_ack_seconds_bucket{le=\"0.001\"}"),
		  0, "ack below 1ms");
	ASSERT_EQ(sample(body,
			 "ramcache_eviction_ack_seconds_bucket{le=\"0.0025\"}"),
		  1, "ack below 2.5ms");
	sum = sample(body, "ramcache_eviction_ack_seconds_sum");
	ASSERT_EQ(llround(sum * 1e6), 1500, "ack sum in us");
	ASSERT_EQ(sample(body, "ramcache_eviction_freed_seconds_count"), 1,
		  "freed count");
	ASSERT_EQ(sample(body, "ramcache_commands_total{status=\"evicted\"}"),
		  1, "evicted");
	ASSERT_EQ(sample(body, "ramcache_evicted_bytes_total"), 123456789,
		  "bytes");
	ASSERT_EQ(
		sample(body,
		       "ramcache_reclaim_stall_seconds_count{kind=\"direct\"}"),
		1, "stall");
	ASSERT_EQ(sample(body, "ramcache_ringbuf_drops_total"), 3, "drops");
	ASSERT_EQ(sample(body, "ramcache_level"), 3, "level");
	ASSERT_EQ(sample(body, "ramcache_level_state{level=\"critical\"}"), 1,
		  "level state");
	ASSERT_EQ(sample(body, "ramcache_headroom_bytes"), 1 << 30, "headroom");
	ASSERT_EQ(sample(body, "ramcache_target_bytes"), 1 << 29, "target");
	ASSERT_EQ(sample(body, "ramcache_rss_bytes"), 3ULL << 30, "rss");
	ASSERT_EQ(
		sample(body,
		       "ramcache_executor_eviction_ack_seconds_count{slot=\"5\",comm=\"x\",domain=\"machine\"}"),
		1, "ack count of slot 5");
	ASSERT_TRUE(
		isinf(sample(
			body,
			"ramcache_domain_forecast_eta_seconds{domain=\"machine\"}")),
		"no eta is +Inf");
}

TEST(http_scrape_moves)
{
	struct metrics_http *h = NULL;
	struct metrics m;
	int fds_before = count_fds();

	metrics_init(&m);
	if (!ASSERT_OK(metrics_http_start(&h, &m, "127.0.0.1:0"), "start"))
		goto cleanup;
	ASSERT_NEQ(metrics_http_port(h), 0, "port picked");

	if (!scrape(metrics_http_port(h), "first scrape"))
		goto cleanup;
	ASSERT_TRUE(
		strcasestr(
			reply.headers,
			"\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8"),
		"content type");
	ASSERT_GE(parse_exposition(reply.body), 100, "body parses");
	ASSERT_EQ(sample(reply.body, "ramcache_oom_kills_total"), 0, "oom 0");
	ASSERT_EQ(sample(reply.body, "ramcache_eviction_ack_seconds_count"), 0,
		  "ack count 0");
	ASSERT_EQ(sample(reply.body, "ramcache_level"), 0, "level 0");

	move_everything(&m);
	if (!scrape(metrics_http_port(h), "second scrape"))
		goto cleanup;
	ASSERT_GE(parse_exposition(reply.body), 100, "body parses again");
	check_moved(reply.body);
cleanup:
	metrics_http_stop(h);
	metrics_destroy(&m);
	ASSERT_EQ(count_fds(), fds_before, "every socket closed");
}

/* A connected TCP socket to 127.0.0.1:@port that sends @text, or -errno. */
static int open_idle(uint16_t port, const char *text)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
		.sin_port = htons(port),
	};
	struct timeval tv = { .tv_sec = 5 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    (text && send(fd, text, strlen(text), MSG_NOSIGNAL) < 0)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

#define FLOOD 64

/*
 * Connections that send nothing, half a request, or wait after a keep-alive
 * reply hold no request: they are shed, oldest first, and a scrape that
 * comes after 64 of them is answered.
 */
TEST(http_idle_connection_flood_does_not_block_scrapes)
{
	static const char *const kinds[] = { NULL,
					     "GET /metrics HTTP/1.1\r\nHost: "
					     "x\r\n",
					     "GET /metrics HTTP/1.1\r\nHost: "
					     "x\r\n\r\n" };
	struct metrics_http *h = NULL;
	int fds[FLOOD], opened = 0;
	struct metrics m;
	char buf[256];
	ssize_t n;

	metrics_init(&m);
	if (!ASSERT_OK(metrics_http_start(&h, &m, "127.0.0.1:0"), "start"))
		goto cleanup;
	for (; opened < FLOOD; opened++) {
		fds[opened] =
			open_idle(metrics_http_port(h), kinds[opened % 3]);
		if (!ASSERT_GE(fds[opened], 0, "idle connection"))
			break;
	}
	ASSERT_TRUE(scrape(metrics_http_port(h), "scrape after the flood"),
		    "scrape");
	ASSERT_GE(parse_exposition(reply.body), 100, "body parses");
	ASSERT_TRUE(scrape(metrics_http_port(h), "second scrape"), "scrape");
	/* the first idle connection was shut down by the server: end of file */
	if (opened) {
		n = recv(fds[0], buf, sizeof(buf), 0);
		ASSERT_EQ(n, 0, "oldest idle connection closed by the server");
	}
cleanup:
	while (opened-- > 0)
		close(fds[opened]);
	metrics_http_stop(h);
	metrics_destroy(&m);
}

/* The stack pointer of thread @tid blocked in a system call, or 0. */
static unsigned long thread_sp(pid_t tid)
{
	unsigned long v[9];
	char path[64];
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fscanf(f, "%lu %lx %lx %lx %lx %lx %lx %lx %lx", &v[0], &v[1],
		   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]);
	fclose(f);
	return n == 9 ? v[7] : 0;
}

/* Size of the mapping that holds @addr, or 0. */
static unsigned long mapping_size(unsigned long addr)
{
	unsigned long lo, hi, size = 0;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= addr &&
		    addr < hi)
			size = hi - lo;
	fclose(f);
	return size;
}

/* The server thread's stack is sized to what it uses, not glibc's 8 MiB. */
TEST(http_thread_stack_is_small)
{
	struct metrics_http *h = NULL;
	struct metrics m;
	struct dirent *d;
	int threads = 0;
	DIR *dir;

	metrics_init(&m);
	if (!ASSERT_OK(metrics_http_start(&h, &m, "127.0.0.1:0"), "start"))
		goto cleanup;
	if (!scrape(metrics_http_port(h), "scrape"))
		goto cleanup;
	dir = opendir("/proc/self/task");
	if (!ASSERT_OK_PTR(dir, "open /proc/self/task"))
		goto cleanup;
	while ((d = readdir(dir))) {
		pid_t tid = atoi(d->d_name);
		unsigned long sp = 0;

		if (tid <= 0 || tid == getpid())
			continue;
		/* blocked in poll or epoll_wait once the reply is out */
		for (int i = 0; i < 500 && !sp; i++) {
			sp = thread_sp(tid);
			if (!sp)
				usleep(10000);
		}
		if (!ASSERT_NEQ(sp, 0, "server thread in a system call"))
			continue;
		threads++;
		ASSERT_LE(mapping_size(sp), 256 * 1024, "thread stack size");
	}
	closedir(dir);
	ASSERT_EQ(threads, 1, "one server thread");
cleanup:
	metrics_http_stop(h);
	metrics_destroy(&m);
}

TEST(http_paths_and_methods)
{
	struct metrics_http *h = NULL;
	struct metrics m;
	uint16_t port;

	metrics_init(&m);
	if (!ASSERT_OK(metrics_http_start(&h, &m, "127.0.0.1:0"), "start"))
		goto cleanup;
	port = metrics_http_port(h);

	if (ASSERT_OK(http_request(AF_INET, port, "GET", "/", &reply), "/"))
		ASSERT_EQ(reply.status, 404, "/ is 404");
	if (ASSERT_OK(http_request(AF_INET, port, "GET", "/metricsx", &reply),
		      "/metricsx"))
		ASSERT_EQ(reply.status, 404, "/metricsx is 404");
	if (ASSERT_OK(http_request(AF_INET, port, "POST", "/metrics", &reply),
		      "POST")) {
		ASSERT_EQ(reply.status, 405, "POST is 405");
		ASSERT_TRUE(strcasestr(reply.headers, "\r\nAllow: GET, HEAD"),
			    "Allow header");
	}
	if (ASSERT_OK(http_request(AF_INET, port, "DELETE", "/x", &reply),
		      "DELETE"))
		ASSERT_EQ(reply.status, 405, "DELETE is 405");
	if (ASSERT_OK(http_request(AF_INET, port, "HEAD", "/metrics", &reply),
		      "HEAD")) {
		ASSERT_EQ(reply.status, 200, "HEAD is 200");
		ASSERT_STREQ(reply.body, "", "HEAD has no body");
	}
	if (ASSERT_OK(http_request(AF_INET, port, "GET", "/metrics?x=1",
				   &reply),
		      "query string"))
		ASSERT_EQ(reply.status, 200, "query string ignored");
cleanup:
	metrics_http_stop(h);
	metrics_destroy(&m);
}

TEST(http_start_errors)
{
	struct metrics_http *a = NULL, *b = NULL;
	struct metrics m;
	char addr[32];

	metrics_init(&m);
	ASSERT_EQ(metrics_http_start(&b, &m, "nonsense"), -EINVAL, "garbage");
	ASSERT_EQ(metrics_http_start(&b, &m, "127.0.0.1:99999"), -EINVAL,
		  "bad port");
	/* TEST-NET-1 is not an address of this host */
	ASSERT_EQ(metrics_http_start(&b, &m, "192.0.2.1:0"), -EADDRNOTAVAIL,
		  "foreign address");
	if (!ASSERT_OK(metrics_http_start(&a, &m, "127.0.0.1:0"), "first"))
		goto cleanup;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", metrics_http_port(a));
	ASSERT_EQ(metrics_http_start(&b, &m, addr), -EADDRINUSE, "port taken");
	ASSERT_STREQ(strerror(EADDRINUSE), "Address already in use", "message");
	metrics_http_stop(a);
	a = NULL;
	/* the port is free again right after a clean stop */
	if (ASSERT_OK(metrics_http_start(&b, &m, addr), "rebind"))
		ASSERT_TRUE(scrape(metrics_http_port(b), "after rebind"),
			    "scrape");
cleanup:
	metrics_http_stop(a);
	metrics_http_stop(b);
	metrics_http_stop(NULL);
	metrics_destroy(&m);
}

TEST(http_ipv6)
{
	struct metrics_http *h = NULL;
	struct metrics m;
	int fd, err;

	fd = socket(AF_INET6, SOCK_STREAM, 0);
	if (fd < 0) {
		TEST_SKIP("no IPv6 sockets");
		return;
	}
	close(fd);
	metrics_init(&m);
	err = metrics_http_start(&h, &m, "[::1]:0");
	if (err == -EADDRNOTAVAIL) {
		TEST_SKIP("no ::1 on this host");
		goto cleanup;
	}
	if (!ASSERT_OK(err, "start on [::1]"))
		goto cleanup;
	metrics_exec_bind(&m, 0, 1, "x", NULL, 0);
	metrics_set_rss(&m, 0, 42);
	if (ASSERT_OK(http_request(AF_INET6, metrics_http_port(h), "GET",
				   "/metrics", &reply),
		      "scrape over IPv6")) {
		ASSERT_EQ(reply.status, 200, "status");
		ASSERT_EQ(sample(reply.body, "ramcache_rss_bytes"), 42, "rss");
	}
	/* bound to ::1 only: nothing listens on 127.0.0.1 at that port */
	ASSERT_EQ(http_request(AF_INET, metrics_http_port(h), "GET", "/metrics",
			       &reply),
		  -ECONNREFUSED, "not on IPv4");
cleanup:
	metrics_http_stop(h);
	metrics_destroy(&m);
}

struct hammer {
	struct metrics *m;
	atomic_bool stop;
	unsigned long rounds;
	atomic_bool started;
};

static void *hammer_fn(void *arg)
{
	struct hammer *hm = arg;

	while (!atomic_load(&hm->stop)) {
		metrics_oom_kill(hm->m);
		metrics_evict_ack(hm->m, 0, hm->rounds % 20000000000ULL);
		metrics_domain_set(hm->m, 0, "machine", 0, 0, METRICS_NO_ETA,
				   (uint32_t)(hm->rounds % 4));
		if (hm->rounds % 64 == 0) /* slot churn beside the renderer */
			metrics_exec_bind(hm->m, (hm->rounds / 64) % 4, 1, "c",
					  NULL, 0);
		hm->rounds++;
		atomic_store(&hm->started, true);
	}
	return NULL;
}

/* The event loop updates while the server thread renders. */
TEST(http_concurrent_updates)
{
	struct hammer hm = { 0 };
	struct metrics_http *h = NULL;
	struct metrics m;
	double last = -1;
	pthread_t t;

	metrics_init(&m);
	hm.m = &m;
	if (!ASSERT_OK(metrics_http_start(&h, &m, "127.0.0.1:0"), "start"))
		goto cleanup;
	if (!ASSERT_OK(pthread_create(&t, NULL, hammer_fn, &hm), "thread"))
		goto cleanup;
	/* on a busy machine the thread may start after 50 scrapes */
	while (!atomic_load(&hm.started))
		usleep(1000);
	for (int i = 0; i < 50; i++) {
		double oom, count;

		if (!scrape(metrics_http_port(h), "scrape"))
			break;
		if (!ASSERT_GE(parse_exposition(reply.body), 100, "parses"))
			break;
		oom = sample(reply.body, "ramcache_oom_kills_total");
		count = sample(reply.body,
			       "ramcache_eviction_ack_seconds_count");
		/* a snapshot is consistent: one update is all or nothing */
		ASSERT_TRUE(oom >= count && oom <= count + 1, "consistent");
		ASSERT_TRUE(oom >= last, "counter never goes back");
		last = oom;
	}
	atomic_store(&hm.stop, true);
	pthread_join(t, NULL);
	ASSERT_GE(last, 1, "updates seen");
cleanup:
	metrics_http_stop(h);
	metrics_destroy(&m);
}

static bool executable(char *buf, size_t len, const char *dir, size_t n,
		       const char *file)
{
	snprintf(buf, len, "%.*s/%s", (int)n, dir, file);
	return n && !access(buf, X_OK);
}

/*
 * $PROMTOOL, else promtool on $PATH, else $OUTPUT/promtool/usr/bin/promtool
 * (the binary alone, unpacked from the Debian package); NULL when none.
 */
static const char *find_promtool(char *buf, size_t len)
{
	const char *env = getenv("PROMTOOL"), *path = getenv("PATH");
	const char *output = getenv("OUTPUT");

	if (env && *env)
		return access(env, X_OK) ? NULL : env;
	while (path && *path) {
		size_t n = strcspn(path, ":");

		if (executable(buf, len, path, n, "promtool"))
			return buf;
		path += n + (path[n] == ':');
	}
	if (!output || !*output)
		output = "build";
	if (executable(buf, len, output, strlen(output),
		       "promtool/usr/bin/promtool"))
		return buf;
	return NULL;
}

/* Exit status of `promtool check metrics` fed @text; its output is shown. */
static int promtool_check(const char *promtool, const char *text)
{
	char tmp[] = "/tmp/test_metrics.XXXXXX", cmd[2 * PATH_MAX], line[512];
	size_t n = strlen(text);
	int fd, st;
	FILE *p;

	fd = mkstemp(tmp);
	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != (ssize_t)n) {
		close(fd);
		unlink(tmp);
		return -EIO;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "'%s' check metrics < '%s' 2>&1", promtool,
		 tmp);
	p = popen(cmd, "r");
	if (!p) {
		unlink(tmp);
		return -errno;
	}
	while (fgets(line, sizeof(line), p))
		printf("# promtool: %s", line);
	st = pclose(p);
	unlink(tmp);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(promtool_check_metrics)
{
	struct metrics_http *h = NULL;
	char path[PATH_MAX];
	const char *promtool = find_promtool(path, sizeof(path));
	struct metrics m;

	if (!promtool) {
		TEST_SKIP(
			"no promtool: set $PROMTOOL, or put it on $PATH or in $OUTPUT/promtool/usr/bin");
		return;
	}
	metrics_init(&m);
	ASSERT_OK(promtool_check(promtool, render(&m)), "empty registry");
	metrics_reclaim_stall(&m, METRICS_RECLAIM_DIRECT, 12345);
	metrics_exec_bind(&m, 0, 1, "a\nb\\c\"d\x1b\xff", "/x", 0);
	metrics_evict_ack(&m, 0, 99999999999ULL);
	metrics_command_acked(&m, 0, RAMCACHE_ACK_PINNED);
	metrics_domain_set(&m, 0, "machine", 1, -1, 3, 1);
	metrics_exec_bind(&m, 1, 2, "b", NULL, 0);
	metrics_exec_unbind(&m, 1);
	ASSERT_OK(promtool_check(promtool, render(&m)), "busy registry");
	fill_worst(&m);
	ASSERT_OK(promtool_check(promtool, render(&m)), "every slot bound");
	if (ASSERT_OK(metrics_http_start(&h, &m, "127.0.0.1:0"), "start") &&
	    scrape(metrics_http_port(h), "scrape"))
		ASSERT_OK(promtool_check(promtool, reply.body), "live scrape");
	metrics_http_stop(h);
	metrics_destroy(&m);
}

/* The scraper and parser the integration tests use, against the server. */
TEST(python_promtext_scrape)
{
	const char *root = getenv("RAMCACHE_ROOT"), *python = getenv("PYTHON");
	char script[PATH_MAX], cmd[2 * PATH_MAX], line[512];
	struct metrics_http *h = NULL;
	struct metrics m;
	int st;
	FILE *p;

	snprintf(script, sizeof(script), "%s/tests/integration/promtext.py",
		 root && *root ? root : ".");
	if (!python || !*python)
		python = "python3";
	if (access(script, R_OK)) {
		TEST_SKIP("tests/integration/promtext.py not found");
		return;
	}
	metrics_init(&m);
	metrics_evict_freed(&m, 0, 1);
	fill_worst(&m);
	if (!ASSERT_OK(metrics_http_start(&h, &m, "127.0.0.1:0"), "start"))
		goto cleanup;
	snprintf(cmd, sizeof(cmd), "'%s' '%s' --scrape 127.0.0.1:%u 2>&1",
		 python, script, metrics_http_port(h));
	p = popen(cmd, "r");
	if (!ASSERT_OK_PTR(p, "popen"))
		goto cleanup;
	while (fgets(line, sizeof(line), p))
		printf("# %s", line);
	st = pclose(p);
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 127)
		TEST_SKIP("no python3");
	else
		ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			    "promtext.py accepts the scrape");
cleanup:
	metrics_http_stop(h);
	metrics_destroy(&m);
}

TEST_MAIN()
