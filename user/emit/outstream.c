// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Non-blocking stdout for pipes and sockets. Lines are written one by one:
 * a line of at most PIPE_BUF bytes goes into a pipe whole or not at all, so
 * a dropped line never leaves half a JSON object behind. A line already
 * begun (longer lines, sockets) is finished within FINISH_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emit/outstream.h"

#define FINISH_MS 200
#define PIPE_SIZE (1 << 20)

struct outstream {
	int fd;
	bool sock; /* send(MSG_DONTWAIT): the socket itself stays blocking */
};

static struct outstream os_state = { .fd = -1 };
static uint64_t os_dropped;
static bool os_closed; /* the reader went away: EPIPE, ECONNRESET */

/* SIGPIPE is blocked by the agent: a gone reader is an EPIPE here. */
static ssize_t put(const struct outstream *s, const char *p, size_t len)
{
	if (s->sock)
		return send(s->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	return write(s->fd, p, len);
}

static void write_line(const struct outstream *s, const char *p, size_t len)
{
	size_t done = 0;

	while (done < len) {
		struct pollfd pfd = { .fd = s->fd, .events = POLLOUT };
		ssize_t n = put(s, p + done, len - done);

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && done &&
		    poll(&pfd, 1, FINISH_MS) > 0)
			continue;
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET ||
			      errno == ENOTCONN))
			os_closed = true;
		os_dropped++; /* reader not reading, or gone */
		return;
	}
}

static ssize_t os_write(void *cookie, const char *buf, size_t size)
{
	const struct outstream *s = cookie;
	size_t off = 0;

	while (off < size) {
		const char *nl = memchr(buf + off, '\n', size - off);
		size_t len = nl ? (size_t)(nl - (buf + off)) + 1 : size - off;

		write_line(s, buf + off, len);
		off += len;
	}
	return (ssize_t)size; /* never an error: stdio would stop writing */
}

FILE *outstream_open(int fd, FILE *fallback)
{
	cookie_io_functions_t io = { .write = os_write };
	char proc[64];
	struct stat st;
	FILE *f;
	int nfd;

	if (fstat(fd, &st))
		return fallback;
	if (S_ISSOCK(st.st_mode)) {
		os_state.fd = fd;
		os_state.sock = true;
	} else if (S_ISFIFO(st.st_mode)) {
		/*
		 * A new open file description of the same pipe: O_NONBLOCK on
		 * it leaves the one children (--on-level) inherit alone.
		 */
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		nfd = open(proc, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (nfd < 0)
			return fallback;
		/* room for bursts a reader catches up with; best effort */
		fcntl(nfd, F_SETPIPE_SZ, PIPE_SIZE);
		os_state.fd = nfd;
	} else {
		return fallback;
	}
	f = fopencookie(&os_state, "w", io);
	if (!f) {
		if (!os_state.sock)
			close(os_state.fd);
		os_state.fd = -1;
		return fallback;
	}
	/* big enough for any one event; out.c flushes after each */
	setvbuf(f, NULL, _IOFBF, 1 << 16);
	return f;
}

uint64_t outstream_dropped(void)
{
	return os_dropped;
}

bool outstream_closed(void)
{
	return os_closed;
}

static ssize_t null_write(void *cookie, const char *buf, size_t size)
{
	return (ssize_t)size;
}

FILE *outstream_null(void)
{
	cookie_io_functions_t io = { .write = null_write };

	return fopencookie(NULL, "w", io);
}
