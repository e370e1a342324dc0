// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Non-blocking stdout for pipes and sockets. Lines are written one by one:
 * a line of at most PIPE_BUF bytes goes into a pipe whole or not at all, so
 * a dropped line never leaves half a JSON object behind. A line already
 * begun (longer lines, sockets) is finished within FINISH_MS.
 *
 * Lines the reader has no room for are held, in order, up to HELD_MAX
 * bytes, and written as room comes (outstream_pump()); only the kernel
 * event stream's lines (outstream_droppable()) are dropped instead, and
 * while anything is held, so that the rare lines (an executor's end, a
 * command, an eviction) are never lost among thousands of reclaim events.
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
#include "proc/clock.h"

#define FINISH_MS 200
#define PIPE_SIZE (1 << 20)
#define HELD_MAX  (256 << 10)

struct outstream {
	int fd;
	bool sock; /* send(MSG_DONTWAIT): the socket itself stays blocking */
};

static struct outstream os_state = { .fd = -1 };
static uint64_t os_dropped;
static bool os_closed;	  /* the reader went away: EPIPE, ECONNRESET */
static bool os_droppable; /* the lines written now may be dropped */
static char os_held[HELD_MAX];
static size_t os_held_len; /* bytes held: whole lines, the first maybe a tail */

/* SIGPIPE is blocked by the agent: a gone reader is an EPIPE here. */
static ssize_t put(const struct outstream *s, const char *p, size_t len)
{
	if (s->sock)
		return send(s->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	return write(s->fd, p, len);
}

/*
 * Bytes of @p written now, without waiting: 0 when the reader has no room,
 * -1 when they cannot be written at all (the reader is gone: os_closed;
 * or an error no wait mends).
 */
static ssize_t put_now(const struct outstream *s, const char *p, size_t len)
{
	ssize_t n;

	do
		n = put(s, p, len);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
		return 0;
	if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
		os_closed = true;
	return -1;
}

/* Keep @len bytes of @p for later; dropped (counted) when they do not fit. */
static void hold(const char *p, size_t len)
{
	if (os_closed || len > HELD_MAX - os_held_len) {
		os_dropped++;
		return;
	}
	memcpy(os_held + os_held_len, p, len);
	os_held_len += len;
}

void outstream_pump(void)
{
	size_t done = 0;

	while (done < os_held_len && os_state.fd >= 0 && !os_closed) {
		const char *p = os_held + done;
		const char *nl = memchr(p, '\n', os_held_len - done);
		size_t len = nl ? (size_t)(nl - p) + 1 : os_held_len - done;
		ssize_t n = put_now(&os_state, p, len);

		if (n == 0 || (n < 0 && os_closed))
			break;
		if (n < 0) { /* this line cannot go: the next may */
			os_dropped++;
			done += len;
			continue;
		}
		done += (size_t)n;
	}
	if (os_closed) { /* no reader: what is held is lost, a line each */
		for (size_t i = done; i < os_held_len; i++)
			os_dropped += os_held[i] == '\n';
		done = os_held_len;
	}
	memmove(os_held, os_held + done, os_held_len - done);
	os_held_len -= done;
}

static void write_line(const struct outstream *s, const char *p, size_t len)
{
	size_t done = 0;

	if (os_held_len) {
		outstream_pump();
		if (os_held_len) { /* after what is held, or not at all */
			if (os_droppable)
				os_dropped++;
			else
				hold(p, len);
			return;
		}
	}
	while (done < len) {
		struct pollfd pfd = { .fd = s->fd, .events = POLLOUT };
		ssize_t n = put_now(s, p + done, len - done);

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0 && done && poll(&pfd, 1, FINISH_MS) > 0)
			continue;
		if (n == 0 && (done || !os_droppable))
			hold(p + done, len - done); /* never half a line */
		else
			os_dropped++; /* reader not reading, gone, or an error */
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

void outstream_droppable(bool on)
{
	os_droppable = on;
}

size_t outstream_held(void)
{
	return os_held_len;
}

bool outstream_shares_stderr(void)
{
	struct stat a, b;

	return os_state.fd >= 0 && !fstat(os_state.fd, &a) &&
	       !fstat(STDERR_FILENO, &b) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

void outstream_drain(int ms)
{
	struct pollfd pfd = { .fd = os_state.fd, .events = POLLOUT };
	uint64_t now = now_ns() / 1000000, quiet_until = now + (uint64_t)ms,
		 end = now + 4 * (uint64_t)ms;

	outstream_pump();
	while (os_held_len && !os_closed && now < quiet_until && now < end) {
		size_t before = os_held_len;
		uint64_t left = (quiet_until < end ? quiet_until : end) - now;

		int r = poll(&pfd, 1,
			     (int)(left < FINISH_MS ? left : FINISH_MS));

		if (r < 0 && errno != EINTR)
			break;
		if (r > 0)
			outstream_pump();
		now = now_ns() / 1000000;
		if (os_held_len < before) /* the reader takes them: wait on */
			quiet_until = now + (uint64_t)ms;
	}
	for (size_t i = 0; i < os_held_len; i++)
		os_dropped += os_held[i] == '\n';
	os_held_len = 0;
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
