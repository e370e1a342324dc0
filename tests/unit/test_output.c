// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* JSON lines, histograms and event formatting, as a user reads them. */
#include "hist.h"
#include "json.h"
#include "output.h"
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

	jw_begin(&w, f);
	jw_str(&w, "type", "x\"y\\z\n");
	jw_strn(&w, "comm", "ab\x01\xff", 16);
	jw_u64(&w, "n", 18446744073709551615ULL);
	jw_i64(&w, "neg", -5);
	jw_array_begin(&w, "a");
	jw_str(&w, NULL, "p");
	jw_str(&w, NULL, "q");
	jw_array_end(&w);
	jw_double(&w, "inf", 1.0 / 0.0);
	jw_end(&w);
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
	hist_print(f, ctx, "usecs");
}

TEST(hist_print_shows_ranges_and_bars)
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

TEST_MAIN()
