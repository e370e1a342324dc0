// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* JSON lines, histograms and event formatting, as a user reads them. */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <ramcache/control.h>

#include "core/hist.h"
#include "emit/histfmt.h"
#include "emit/json.h"
#include "emit/out.h"
#include "kernel/probes.h"
#include "test.h"

static char *capture(void (*fn)(FILE *f, void *ctx), void *ctx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	fn(f, ctx);
	fclose(f);
	return buf;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void write_escapes(FILE *f, void *ctx)
{
	struct jw w;

	json_begin(&w, f);
	json_str(&w, "type", "x\"y\\z\n");
	json_strn(&w, "comm", "ab\x01\xff", 16);
	json_u64(&w, "n", 18446744073709551615ULL);
	json_i64(&w, "neg", -5);
	json_array_begin(&w, "a");
	json_str(&w, NULL, "p");
	json_str(&w, NULL, "q");
	json_array_end(&w);
	json_double(&w, "inf", 1.0 / 0.0);
	json_end(&w);
}

TEST(json_escapes_untrusted_bytes)
{
	char *s = capture(write_escapes, NULL);

	ASSERT_STREQ(
		s,
		"{\"type\":\"x\\\"y\\\\z\\n\",\"comm\":\"ab\\u0001\\u00ff\",\"n\":18446744073709551615,\"neg\":-5,\"a\":[\"p\",\"q\"],\"inf\":null}\n",
		"line");
	free(s);
}

TEST(hist_slots_are_floor_log2)
{
	struct hist h = { 0 };

	ASSERT_EQ(hist_slot(0), 0, "0");
	ASSERT_EQ(hist_slot(1), 0, "1");
	ASSERT_EQ(hist_slot(2), 1, "2");
	ASSERT_EQ(hist_slot(3), 1, "3");
	ASSERT_EQ(hist_slot(1024), 10, "1024");
	ASSERT_EQ(hist_slot(~0ULL), HIST_SLOTS - 1, "capped");
	hist_add(&h, 5);
	hist_add(&h, 6);
	hist_add(&h, 100);
	ASSERT_EQ(h.slots[2], 2, "4..7");
	ASSERT_EQ(h.slots[6], 1, "64..127");
	ASSERT_EQ(hist_total(&h), 3, "total");
}

static void print_hist(FILE *f, void *ctx)
{
	histfmt_text(f, ctx, "usecs");
}

TEST(histfmt_text_shows_ranges_and_bars)
{
	struct hist h = { 0 };
	char *s;

	h.slots[2] = 4;
	h.slots[4] = 2;
	s = capture(print_hist, &h);
	ASSERT_TRUE(strstr(s, "4 -> 7"), s);
	ASSERT_TRUE(strstr(s, "16 -> 31"), s);
	ASSERT_TRUE(strstr(s, "8 -> 15"), "empty middle slot shown");
	ASSERT_TRUE(strstr(s, "|****************************************|"),
		    "full bar for the max");
	free(s);
}

static void reclaim_json(FILE *f, void *ctx)
{
	struct out o = { .f = f, .json = true };
	struct rc_reclaim e = { 0 };

	e.hdr.type = RC_EV_RECLAIM;
	e.hdr.tgid = 77;
	e.hdr.pid = 78;
	e.kind = RC_RECLAIM_MEMCG;
	e.latency_ns = 1234;
	e.nr_reclaimed = 9;
	memcpy(e.comm, "0123456789abcdef", 16); /* no NUL: bounded read */
	out_event(&o, &e, sizeof(e));
	out_event(&o, &e, 4); /* truncated: ignored */
}

TEST(reclaim_event_json)
{
	char *s = capture(reclaim_json, NULL);

	ASSERT_TRUE(strstr(s, "\"type\":\"reclaim\""), s);
	ASSERT_TRUE(strstr(s, "\"kind\":\"memcg\""), s);
	ASSERT_TRUE(strstr(s, "\"pid\":77"), s);
	ASSERT_TRUE(strstr(s, "\"latency_ns\":1234"), s);
	ASSERT_TRUE(strstr(s, "\"comm\":\"0123456789abcdef\""), s);
	ASSERT_EQ(count_lines(s), 1, "exactly one line");
	free(s);
}

static void probe_warnings_json(FILE *f, void *ctx)
{
	struct out o = { .f = f, .json = true };
	struct probes ps = { 0 };

	ps.p[0].tp = "page_fault_user";
	ps.p[0].what = "page faults";
	ps.p[0].off_why = PROBE_MISSING;
	ps.p[1].tp = "rss_stat";
	ps.p[1].what = "RSS";
	ps.p[1].off_why = PROBE_BAD_ARGS;
	strcpy(ps.p[1].sig, "pl?");
	for (int i = 2; i < NR_PROBES; i++)
		ps.p[i].tp = "x";
	out_probe_warnings(&o, &ps);
}

/*
 * Every event opens with its type and a ts_ns (the time it was printed, for
 * those without a kernel or command stamp): a line of s starts so.
 */
static bool has_event(const char *s, const char *type)
{
	char want[64];

	snprintf(want, sizeof(want), "{\"type\":\"%s\",\"ts_ns\":", type);
	for (const char *l = s; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, want, strlen(want)) &&
		    isdigit((unsigned char)l[strlen(want)]))
			return true;
	return false;
}

/* Warnings printed by the probe module reach --json as events. */
TEST(probe_warnings_are_json_events)
{
	char *s = capture(probe_warnings_json, NULL);

	ASSERT_EQ(count_lines(s), 2, s);
	ASSERT_TRUE(has_event(s, "warning"), s);
	ASSERT_TRUE(
		strstr(s,
		       ",\"message\":\"kernel has no tracepoint page_fault_user"),
		s);
	ASSERT_TRUE(strstr(s,
			   "tracepoint rss_stat has arguments (pl?) of no form "
			   "this version knows; RSS not traced"),
		    s);
	free(s);
}

static void evict_json(FILE *f, void *ctx)
{
	struct out o = { .f = f, .json = true };
	struct evict_info e = {
		.pid = 5,
		.ts_ns = 6,
		.seq = 7,
		.id = 8,
		.label = "vae",
		.bytes = 9,
		.reason = RAMCACHE_REASON_FORECAST,
		.active = true,
		.headroom = 10,
		.forecast = 11,
	};
	struct evict_done_info d = {
		.pid = 5,
		.seq = 7,
		.id = 8,
		.label = "vae",
		.status = "evicted",
		.bytes = 9,
		.acked = true,
		.bytes_freed = 12,
		.recv_latency_ns = 13,
		.ack_latency_ns = 14,
		.freed_latency_ns = 15,
	};
	struct control_info c = {
		.state = "dropped",
		.path = "/proc/5/fd/3",
		.discovery = "memfd",
		.pid = 5,
		.ns_pid = 1,
		.why = "truncated",
	};

	out_evict(&o, &e);
	out_evict_done(&o, &d);
	out_control(&o, &c);
}

/* The eviction events keep their field names (README's event table). */
TEST(evict_events_json_fields)
{
	char *s = capture(evict_json, NULL);

	ASSERT_EQ(count_lines(s), 3, s);
	ASSERT_TRUE(has_event(s, "evict_done") && has_event(s, "control"), s);
	ASSERT_TRUE(
		strstr(s,
		       "{\"type\":\"evict\",\"ts_ns\":6,\"pid\":5,\"seq\":7,\"id\":8,\"label\":\"vae\",\"bytes\":9,\"reason\":\"forecast\",\"active\":true,\"headroom\":10,\"forecast\":11}"),
		s);
	ASSERT_TRUE(
		strstr(s,
		       ",\"pid\":5,\"seq\":7,\"id\":8,\"label\":\"vae\",\"status\":\"evicted\",\"bytes\":9,\"bytes_freed\":12,\"recv_latency_ns\":13,\"ack_latency_ns\":14,\"freed_latency_ns\":15}"),
		s);
	ASSERT_TRUE(
		strstr(s,
		       ",\"state\":\"dropped\",\"path\":\"/proc/5/fd/3\",\"discovery\":\"memfd\",\"pid\":5,\"ns_pid\":1,\"reason\":\"truncated\",\"inflight\":0}"),
		s);
	free(s);
}

/* Every hostile byte below is escaped: what is left is printable ASCII. */
static bool terminal_safe(const char *s)
{
	for (const unsigned char *p = (const void *)s; *p; p++)
		if (*p != '\n' && (*p < 0x20 || *p >= 0x7f))
			return false;
	return true;
}

static void oom_text(FILE *f, void *ctx)
{
	struct out o = { .f = f };
	struct rc_oom_kill e = { .hdr = { .type = RC_EV_OOM_KILL } };

	memcpy(e.comm,
	       "\x1b]0;pwn\x07\x9b"
	       "2J\xc2\x9bok",
	       16);
	out_event(&o, &e, sizeof(e));
}

TEST(text_mode_escapes_control_bytes_in_comm)
{
	char *s = capture(oom_text, NULL);

	ASSERT_TRUE(terminal_safe(s), s);
	ASSERT_TRUE(strstr(s, "(\\x1b]0;pwn\\x07\\x9b2J\\xc2\\x9bok)") != NULL,
		    s);
	free(s);
}

static void label_text(FILE *f, void *ctx)
{
	struct out o = { .f = f };
	char label[] = "model\xc2\x85\xe2\x80\xaexe.";
	struct evict_done_info d = { .seq = 7,
				     .status = "evicted",
				     .label = label };
	struct start_info si = { .pid = 1,
				 .comm = "\x1b[31mred",
				 .memcg = "/a\x07"
					  "b" };
	struct probes pr = { 0 };
	struct control_info c = {
		.state = "attached",
		.path = "/dev/shm/\x1b[2J",
		.discovery = "path",
		.pid = 1,
		.ns_pid = 1,
	};

	out_evict_done(&o, &d);
	out_control(&o, &c);
	out_target(&o, "attached", 1, "\x1b[2J");
	si.probes = &pr;
	out_start(&o, &si);
}

TEST(text_mode_escapes_labels_paths_and_names)
{
	char *s = capture(label_text, NULL);

	ASSERT_TRUE(terminal_safe(s), s);
	ASSERT_TRUE(strstr(s, "model\\xc2\\x85\\xe2\\x80\\xaexe.") != NULL, s);
	ASSERT_TRUE(strstr(s, "/dev/shm/\\x1b[2J") != NULL, s);
	ASSERT_TRUE(strstr(s, "(\\x1b[31mred)") != NULL, s);
	ASSERT_TRUE(strstr(s, "/a\\x07b") != NULL, s);
	free(s);
}

static int libbpf_says(const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = out_libbpf_print(0, fmt, ap);
	va_end(ap);
	return n;
}

/* libbpf's messages (-v) name what it read: sanitised, lines kept. */
TEST(libbpf_messages_are_escaped_line_by_line)
{
	char buf[256] = { 0 };
	FILE *f = tmpfile();
	int saved = dup(2);

	if (!ASSERT_TRUE(f && saved >= 0, "stderr to a file"))
		return;
	fflush(stderr);
	dup2(fileno(f), 2);
	out_set_verbose_libbpf(true);
	libbpf_says("libbpf: elf: symbol '%s'\n%s\n", "\x1b]2;pwn\x07",
		    "\xe2\x80\xaeok");
	out_set_verbose_libbpf(false);
	libbpf_says("libbpf: not shown without -v\n");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	ASSERT_STREQ(buf,
		     "libbpf: elf: symbol '\\x1b]2;pwn\\x07'\n"
		     "\\xe2\\x80\\xaeok\n",
		     "escaped, two lines");
}

TEST_MAIN()
