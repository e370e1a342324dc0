/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `--metrics ADDR:PORT`: serves GET /metrics in Prometheus text format
 * from a libmicrohttpd thread of its own. Everything returns 0 or -errno;
 * the caller words the message, e.g.
 *   ramcache-bpf: failed to listen on 127.0.0.1:9101: Address already in use
 *   ramcache-bpf: invalid --metrics address 'x': expected ADDR:PORT, :PORT
 *   or [IPV6]:PORT
 */
#ifndef RAMCACHE_METRICS_HTTP_H
#define RAMCACHE_METRICS_HTTP_H

#include <stdint.h>
#include <sys/socket.h>

#include "emit/metrics.h"

#define METRICS_HTTP_DEFAULT "127.0.0.1:9101"

struct metrics_http;

/*
 * Parse "A.B.C.D:PORT", "localhost:PORT", "[IPV6]:PORT" or ":PORT" (every
 * IPv4 address) into @ss/@sslen. Numeric addresses only, no DNS; port
 * 0..65535 in decimal (0 picks a free port). Pure. -EINVAL on anything
 * else.
 */
int metrics_http_parse_addr(const char *s, struct sockaddr_storage *ss,
			    socklen_t *sslen);

/*
 * Listen on @addr (as metrics_http_parse_addr takes it) and serve @m until
 * metrics_http_stop. @m must outlive the server. -EINVAL for a bad address,
 * the errno of socket/bind/listen (-EADDRINUSE, -EACCES, -EADDRNOTAVAIL),
 * -ENOMEM, or -EIO when libmicrohttpd refuses to start.
 * The server thread inherits the caller's signal mask: block the signals a
 * signalfd will read before calling this.
 */
int metrics_http_start(struct metrics_http **out, struct metrics *m,
		       const char *addr);

/*
 * metrics_http_start() in two steps: bind the socket (errors as above;
 * metrics_http_stop() frees it), then serve it (-EIO, or the errno of
 * dup): the agent drops its capabilities in between, so the server
 * thread never holds more than the loop does.
 */
int metrics_http_bind(struct metrics_http **out, struct metrics *m,
		      const char *addr);
int metrics_http_run(struct metrics_http *h);

/* The port actually bound (useful with port 0). */
uint16_t metrics_http_port(const struct metrics_http *h);

/* Stop the server thread, close every socket, free @h. NULL is a no-op. */
void metrics_http_stop(struct metrics_http *h);

#endif /* RAMCACHE_METRICS_HTTP_H */
