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
#include "metrics.h"
#include "metrics_http.h"

#include "ramcache/control.h"

static char render_buf[METRICS_RENDER_SIZE];

static const char *render(struct metrics *m)
{
	struct metrics_values v;
	int n;

	metrics_snapshot(m, &v);
	n = metrics_render(&v, render_buf, sizeof(render_buf));
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

/*
 * A strict reader for the subset of text format 0.0.4 we emit: HELP and
 * TYPE before a family's samples, well-formed names, labels and values,
 * histogram buckets cumulative with +Inf equal to _count. Returns the
 * number of samples, or -1 with a message.
 */
static int parse_exposition(const char *text)
{
	char family[128] = "", type[16] = "";
	double last_bucket = -1, inf_bucket = -1;
	int samples = 0, lineno = 0;
	const char *p = text;

	if (!*text || text[strlen(text) - 1] != '\n') {
		printf("# exposition does not end in a newline\n");
		return -1;
	}
	while (*p) {
		const char *eol = strchr(p, '\n'), *q = p, *name_end;
		char name[128], *end;
		size_t nl;

		lineno++;
		if (!strncmp(p, "# HELP ", 7) || !strncmp(p, "# TYPE ", 7)) {
			bool is_type = p[2] == 'T';

			q = p + 7;
			while (q < eol && *q != ' ')
				q++;
			nl = (size_t)(q - (p + 7));
			if (!nl || nl >= sizeof(family) || q == eol)
				goto bad;
			if (is_type) {
				if (strncmp(family, p + 7, nl) || family[nl])
					goto bad; /* TYPE without HELP */
				snprintf(type, sizeof(type), "%.*s",
					 (int)(eol - q - 1), q + 1);
				if (strcmp(type, "counter") &&
				    strcmp(type, "gauge") &&
				    strcmp(type, "histogram"))
					goto bad;
				if (!strcmp(type, "counter") &&
				    !ends_with(family, nl, "_total"))
					goto bad;
			} else {
				memcpy(family, p + 7, nl);
				family[nl] = '\0';
				type[0] = '\0';
				last_bucket = inf_bucket = -1;
				if (strncmp(family, "ramcache_", 9))
					goto bad;
			}
			p = eol + 1;
			continue;
		}
		if (*p == '#' || !type[0])
			goto bad;
		if (!name_char(*q, true))
			goto bad;
		while (name_char(*q, false))
			q++;
		name_end = q;
		nl = (size_t)(name_end - p);
		if (nl >= sizeof(name))
			goto bad;
		memcpy(name, p, nl);
		name[nl] = '\0';
		if (*q == '{') {
			q++;
			while (*q != '}') {
				if (!name_char(*q, true))
					goto bad;
				while (name_char(*q, false))
					q++;
				if (q[0] != '=' || q[1] != '"')
					goto bad;
				for (q += 2; *q != '"'; q++) {
					if (*q == '\n' || !*q)
						goto bad;
					if (*q == '\\' &&
					    !strchr("\\\"n", *++q))
						goto bad;
				}
				q++;
				if (*q == ',')
					q++;
				else if (*q != '}')
					goto bad;
			}
			q++;
		}
		if (*q != ' ')
			goto bad;
		q++;
		double val = strtod(q, &end);
		if (end == q || end != eol)
			goto bad;

		if (!strcmp(type, "histogram")) {
			size_t fl = strlen(family);

			if (strncmp(name, family, fl))
				goto bad;
			if (!strcmp(name + fl, "_bucket")) {
				if (!strstr(p, "le=\"") ||
				    strstr(p, "le=\"") > eol)
					goto bad;
				if (val < last_bucket)
					goto bad; /* not cumulative */
				last_bucket = val;
				if (strstr(p, "le=\"+Inf\"") &&
				    strstr(p, "le=\"+Inf\"") < eol) {
					inf_bucket = val;
					last_bucket = -1;
				}
			} else if (!strcmp(name + fl, "_count")) {
				if (val != inf_bucket)
					goto bad;
			} else if (strcmp(name + fl, "_sum")) {
				goto bad;
			}
		} else if (strcmp(name, family)) {
			goto bad;
		}
		samples++;
		p = eol + 1;
	}
	return samples;
bad:
	printf("# bad exposition line %d: %.*s\n", lineno,
	       (int)(strchr(p, '\n') ? strchr(p, '\n') - p : 80), p);
	return -1;
}

TEST(render_lines)
{
	struct metrics m;
	const char *out;

	metrics_init(&m);
	metrics_command_acked(&m, RAMCACHE_ACK_BUSY);
	metrics_command_acked(&m, RAMCACHE_ACK_BUSY);
	metrics_command_acked(&m, RAMCACHE_ACK_EVICTED);
	metrics_command_acked(&m, 77);
	metrics_command_timeout(&m);
	metrics_bytes_evicted(&m, 1 << 20);
	metrics_bytes_evicted(&m, 4096);
	metrics_oom_kill(&m);
	metrics_set_ringbuf_drops(&m, 12);
	metrics_set_level(&m, RAMCACHE_LEVEL_HIGH);
	metrics_set_headroom(&m, -4096);
	metrics_set_target(&m, 268435456);
	metrics_set_rss(&m, 8589934592ULL);
	out = render(&m);

	ASSERT_TRUE(
		has_line(
			out,
			"# HELP ramcache_commands_total Eviction commands by outcome."),
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
	ASSERT_TRUE(strstr(out, "\nramcache_build_info{version=\""), "build");
	ASSERT_GE(parse_exposition(out), 100, "parses");
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

TEST(render_buffer_size)
{
	struct metrics_values v = { 0 };
	static char small[METRICS_RENDER_SIZE];
	int n;

	/* the largest numbers must still fit METRICS_RENDER_SIZE */
	memset(&v, 0xff, sizeof(v));
	v.headroom_bytes = INT64_MIN;
	n = metrics_render(&v, small, sizeof(small));
	ASSERT_GE(n, 1000, "worst case fits");
	ASSERT_EQ(strlen(small), n, "length");

	n = metrics_render(&v, small, (size_t)n + 1);
	ASSERT_GE(n, 1000, "exact size");
	ASSERT_EQ(metrics_render(&v, small, (size_t)n), -ENOSPC, "one short");
	ASSERT_STREQ(small, "", "no partial output");
	ASSERT_EQ(metrics_render(&v, small, 0), -ENOSPC, "empty buffer");
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

	ASSERT_EQ(metrics_parse_addr(NULL, &ss, &len), -EINVAL, "NULL");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char host[INET6_ADDRSTRLEN] = "";
		unsigned int port;
		int err;

		err = metrics_parse_addr(cases[i].s, &ss, &len);
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
	char raw[65536];
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

TEST(http_scrape_moves)
{
	struct metrics_http *h = NULL;
	struct metrics m;
	int fds_before = count_fds();
	double sum;

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

	metrics_oom_kill(&m);
	metrics_evict_ack(&m, 1500000); /* 1.5 ms */
	metrics_evict_freed(&m, 40000000);
	metrics_command_acked(&m, RAMCACHE_ACK_EVICTED);
	metrics_bytes_evicted(&m, 123456789);
	metrics_reclaim_stall(&m, METRICS_RECLAIM_DIRECT, 70000);
	metrics_set_ringbuf_drops(&m, 3);
	metrics_set_level(&m, RAMCACHE_LEVEL_CRITICAL);
	metrics_set_headroom(&m, 1 << 30);
	metrics_set_target(&m, 1 << 29);
	metrics_set_rss(&m, 3ULL << 30);

	if (!scrape(metrics_http_port(h), "second scrape"))
		goto cleanup;
	ASSERT_GE(parse_exposition(reply.body), 100, "body parses again");
	ASSERT_EQ(sample(reply.body, "ramcache_oom_kills_total"), 1, "oom");
	ASSERT_EQ(sample(reply.body, "ramcache_eviction_ack_seconds_count"), 1,
		  "ack count");
	ASSERT_EQ(sample(reply.body,
			 "ramcache_eviction_ack_seconds_bucket{le=\"0.001\"}"),
		  0, "ack below 1ms");
	ASSERT_EQ(sample(reply.body,
			 "ramcache_eviction_ack_seconds_bucket{le=\"0.0025\"}"),
		  1, "ack below 2.5ms");
	sum = sample(reply.body, "ramcache_eviction_ack_seconds_sum");
	ASSERT_EQ(llround(sum * 1e6), 1500, "ack sum in us");
	ASSERT_EQ(sample(reply.body, "ramcache_eviction_freed_seconds_count"),
		  1, "freed count");
	ASSERT_EQ(sample(reply.body,
			 "ramcache_commands_total{status=\"evicted\"}"),
		  1, "evicted");
	ASSERT_EQ(sample(reply.body, "ramcache_evicted_bytes_total"), 123456789,
		  "bytes");
	ASSERT_EQ(
		sample(reply.body,
		       "ramcache_reclaim_stall_seconds_count{kind=\"direct\"}"),
		1, "stall");
	ASSERT_EQ(sample(reply.body, "ramcache_ringbuf_drops_total"), 3,
		  "drops");
	ASSERT_EQ(sample(reply.body, "ramcache_level"), 3, "level");
	ASSERT_EQ(sample(reply.body,
			 "ramcache_level_state{level=\"critical\"}"),
		  1, "level state");
	ASSERT_EQ(sample(reply.body, "ramcache_headroom_bytes"), 1 << 30,
		  "headroom");
	ASSERT_EQ(sample(reply.body, "ramcache_target_bytes"), 1 << 29,
		  "target");
	ASSERT_EQ(sample(reply.body, "ramcache_rss_bytes"), 3ULL << 30, "rss");
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
	metrics_set_rss(&m, 42);
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
};

static void *hammer_fn(void *arg)
{
	struct hammer *hm = arg;

	while (!atomic_load(&hm->stop)) {
		metrics_oom_kill(hm->m);
		metrics_evict_ack(hm->m, hm->rounds % 20000000000ULL);
		metrics_set_level(hm->m, (uint32_t)(hm->rounds % 4));
		hm->rounds++;
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
	metrics_evict_ack(&m, 99999999999ULL);
	metrics_command_acked(&m, RAMCACHE_ACK_PINNED);
	metrics_set_headroom(&m, -1);
	ASSERT_OK(promtool_check(promtool, render(&m)), "busy registry");
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
	metrics_evict_freed(&m, 1);
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
