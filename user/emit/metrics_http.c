// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The metrics endpoint on libmicrohttpd. We make the listening socket
 * ourselves so a failure comes back as a precise errno (MHD only says
 * "NULL") and port 0 can be read back. MHD gets a duplicate it owns and
 * closes in MHD_stop_daemon; whether it closes it when it fails to start is
 * not documented, so we only ever close our own copy.
 *
 * Idle connections cannot lock scrapes out: a connection that holds no
 * request (never sent one, or waits between keep-alive requests) is shut
 * down, oldest first, when a new one arrives and MAX_IDLE are already idle.
 * Every callback runs on MHD's one polling thread, so the table needs no
 * lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "emit/metrics.h"
#include "emit/metrics_http.h"

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mhd_result;
#else
typedef int mhd_result;
#endif

#if MHD_VERSION < 0x00095300
#define MHD_USE_INTERNAL_POLLING_THREAD MHD_USE_SELECT_INTERNALLY
#endif

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* hard cap; requests in progress beyond MAX_IDLE are slow readers */
#define MAX_CONNECTIONS	       64
#define MAX_CONNECTIONS_PER_IP 48
#define MAX_IDLE	       8
#define LISTEN_BACKLOG	       64
#define CONNECTION_TIMEOUT_S   10
/* the handler renders into a heap buffer: MHD's own frames need ~20 KiB */
#define THREAD_STACK_SIZE (128 * 1024)

struct conn {
	struct MHD_Connection *c; /* NULL: free slot */
	int fd;
	bool busy;	  /* a request is being answered */
	uint64_t idle_ns; /* since when it holds no request */
};

struct metrics_http {
	struct MHD_Daemon *daemon;
	struct metrics *m;
	/* only MHD's one thread renders: one copy of the values will do */
	struct metrics_values *snap;
	size_t render_size;
	uint16_t port;
	int fd; /* the bound socket, until the server takes it */
	bool ipv6;
	struct conn conns[MAX_CONNECTIONS];
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;
	size_t n = 0;

	for (; s[n]; n++) {
		if (s[n] < '0' || s[n] > '9' || n >= 5)
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[n] - '0');
	}
	if (!n || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int metrics_http_parse_addr(const char *s, struct sockaddr_storage *ss,
			    socklen_t *sslen)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	char host[INET6_ADDRSTRLEN];
	const char *colon;
	uint16_t port;
	size_t hl;

	if (!s)
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));

	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		hl = (size_t)(end - s - 1);
		if (!hl || hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		if (parse_port(end + 2, &port) ||
		    inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			return -EINVAL;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		*sslen = sizeof(*sin6);
		return 0;
	}

	colon = strrchr(s, ':');
	/* a second colon means an IPv6 address without its brackets */
	if (!colon || memchr(s, ':', (size_t)(colon - s)))
		return -EINVAL;
	hl = (size_t)(colon - s);
	if (hl >= sizeof(host) || parse_port(colon + 1, &port))
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (!hl)
		sin->sin_addr.s_addr = htonl(INADDR_ANY);
	else if (!strcmp(host, "localhost"))
		sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
		return -EINVAL;
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	*sslen = sizeof(*sin);
	return 0;
}

static mhd_result reply(struct MHD_Connection *conn, unsigned int code,
			const char *text)
{
	struct MHD_Response *resp;
	mhd_result ret;

	resp = MHD_create_response_from_buffer(strlen(text), (void *)text,
					       MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; charset=utf-8");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					"GET, HEAD");
	ret = MHD_queue_response(conn, code, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Render the snapshot into a buffer grown until it fits; NULL: no memory. */
static char *render(struct metrics_http *h, int *len)
{
	size_t size = h->render_size;
	char *buf;

	for (;;) {
		buf = malloc(size);
		if (!buf)
			return NULL;
		*len = metrics_render(h->snap, buf, size);
		if (*len >= 0 || size >= METRICS_RENDER_MAX)
			break;
		free(buf);
		size *= 2;
	}
	h->render_size = size; /* the next scrape starts there */
	return buf;
}

static mhd_result serve_metrics(struct metrics_http *h,
				struct MHD_Connection *conn)
{
	struct MHD_Response *resp;
	mhd_result ret;
	char *buf;
	int len;

	metrics_snapshot(h->m, h->snap);
	buf = render(h, &len);
	if (!buf)
		return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
			     "out of memory\n");
	if (len < 0) {
		free(buf);
		return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
			     "metrics do not fit the render buffer\n");
	}
	resp = MHD_create_response_from_buffer((size_t)len, buf,
					       MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				CONTENT_TYPE);
	ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

static struct conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* Shut the oldest idle connection but @keep down when MAX_IDLE are idle. */
static void shed_idle(struct metrics_http *h, const struct conn *keep)
{
	struct conn *oldest = NULL;
	int idle = 0;

	for (int i = 0; i < MAX_CONNECTIONS; i++) {
		struct conn *k = &h->conns[i];

		if (!k->c || k->busy || k == keep || k->fd < 0)
			continue;
		idle++;
		if (!oldest || k->idle_ns < oldest->idle_ns)
			oldest = k;
	}
	/* MHD sees end of file on its next poll and closes the connection */
	if (idle >= MAX_IDLE && oldest) {
		shutdown(oldest->fd, SHUT_RDWR);
		oldest->fd = -1;
	}
}

static void on_connection(void *cls, struct MHD_Connection *c, void **sctx,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct metrics_http *h = cls;
	const union MHD_ConnectionInfo *ci;
	struct conn *k = *sctx;

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (k)
			memset(k, 0, sizeof(*k));
		*sctx = NULL;
		return;
	}
	for (int i = 0; i < MAX_CONNECTIONS && !k; i++)
		if (!h->conns[i].c)
			k = &h->conns[i];
	if (!k)
		return; /* MHD never has more than MAX_CONNECTIONS */
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	k->c = c;
	k->fd = ci ? ci->connect_fd : -1;
	k->busy = false;
	k->idle_ns = mono_ns();
	*sctx = k;
	shed_idle(h, k);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct conn *k = conn_of(c);

	if (k) {
		k->busy = false;
		k->idle_ns = mono_ns();
	}
}

static mhd_result answer(void *cls, struct MHD_Connection *conn,
			 const char *url, const char *method,
			 const char *version, const char *upload_data,
			 size_t *upload_data_size, void **req_cls)
{
	struct metrics_http *h = cls;
	struct conn *k = conn_of(conn);

	if (k)
		k->busy = true;

	/* HEAD is GET without the body, which MHD drops for us */
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
			     "method not allowed\n");
	if (strcmp(url, "/metrics"))
		return reply(conn, MHD_HTTP_NOT_FOUND,
			     "not found: metrics are at /metrics\n");
	return serve_metrics(h, conn);
}

static int listen_on(const struct sockaddr_storage *ss, socklen_t sslen,
		     uint16_t *port)
{
	struct sockaddr_storage bound;
	socklen_t blen = sizeof(bound);
	int one = 1, fd, err;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* restarts must not wait for TIME_WAIT; a live listener still wins */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (const struct sockaddr *)ss, sslen) ||
	    listen(fd, LISTEN_BACKLOG) ||
	    getsockname(fd, (struct sockaddr *)&bound, &blen)) {
		err = -errno;
		close(fd);
		return err;
	}
	if (bound.ss_family == AF_INET6)
		*port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
	else
		*port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
	return fd;
}

int metrics_http_bind(struct metrics_http **out, struct metrics *m,
		      const char *addr)
{
	struct sockaddr_storage ss;
	struct metrics_http *h;
	socklen_t sslen;
	int err;

	err = metrics_http_parse_addr(addr, &ss, &sslen);
	if (err)
		return err;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->snap = malloc(sizeof(*h->snap));
	if (!h->snap) {
		free(h);
		return -ENOMEM;
	}
	h->render_size = METRICS_RENDER_SIZE;
	h->m = m;
	h->ipv6 = ss.ss_family == AF_INET6;
	h->fd = listen_on(&ss, sslen, &h->port);
	if (h->fd < 0) {
		err = h->fd;
		free(h->snap);
		free(h);
		return err;
	}
	*out = h;
	return 0;
}

int metrics_http_run(struct metrics_http *h)
{
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD;
	int mhd_fd;

	mhd_fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
	if (mhd_fd < 0)
		return -errno;
	if (h->ipv6)
		flags |= MHD_USE_IPv6;
#if MHD_VERSION >= 0x00095300
	flags |= MHD_USE_AUTO;
#endif
	h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, answer, h,
				     MHD_OPTION_LISTEN_SOCKET, mhd_fd,
				     MHD_OPTION_CONNECTION_LIMIT,
				     (unsigned int)MAX_CONNECTIONS,
				     MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				     (unsigned int)MAX_CONNECTIONS_PER_IP,
				     MHD_OPTION_CONNECTION_TIMEOUT,
				     (unsigned int)CONNECTION_TIMEOUT_S,
				     MHD_OPTION_NOTIFY_CONNECTION,
				     on_connection, h,
				     MHD_OPTION_NOTIFY_COMPLETED, on_completed,
				     h, MHD_OPTION_THREAD_STACK_SIZE,
				     (size_t)THREAD_STACK_SIZE, MHD_OPTION_END);
	if (!h->daemon) {
		close(mhd_fd);
		return -EIO;
	}
	close(h->fd);
	h->fd = -1;
	return 0;
}

int metrics_http_start(struct metrics_http **out, struct metrics *m,
		       const char *addr)
{
	int err = metrics_http_bind(out, m, addr);

	if (err)
		return err;
	err = metrics_http_run(*out);
	if (err) {
		metrics_http_stop(*out);
		*out = NULL;
	}
	return err;
}

uint16_t metrics_http_port(const struct metrics_http *h)
{
	return h->port;
}

void metrics_http_stop(struct metrics_http *h)
{
	if (!h)
		return;
	if (h->daemon)
		MHD_stop_daemon(h->daemon);
	if (h->fd >= 0)
		close(h->fd);
	free(h->snap);
	free(h);
}
