// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent's stdout on a pipe whose reader stopped reading: the kernel
 * event stream's lines are dropped, every other line is held in order and
 * written once the reader makes room; with no reader at all, what is held
 * is counted lost.
 */
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "emit/outstream.h"
#include "test.h"

/* Everything the pipe holds now, appended to @buf (NUL-terminated). */
static size_t drain(int fd, char *buf, size_t cap, size_t len)
{
	char chunk[65536];
	ssize_t n;

	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		if (len + (size_t)n < cap) {
			memcpy(buf + len, chunk, (size_t)n);
			len += (size_t)n;
		}
	buf[len] = '\0';
	return len;
}

static void line(FILE *f, bool droppable, const char *text)
{
	outstream_droppable(droppable);
	fprintf(f, "%s\n", text);
	fflush(f);
	outstream_droppable(false);
}

TEST(a_full_pipe_drops_the_event_stream_and_holds_the_rest_in_order)
{
	static char got[1 << 16];
	uint64_t dropped;
	int p[2], fills = 0;
	FILE *f;

	signal(SIGPIPE, SIG_IGN); /* as the agent blocks it: an EPIPE */
	if (!ASSERT_OK(pipe2(p, O_CLOEXEC), "pipe"))
		return;
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	f = outstream_open(p[1], NULL);
	if (!ASSERT_TRUE(f != NULL, "outstream on a pipe"))
		return;
	/* the reader does not read: fill the pipe with events */
	while (outstream_dropped() == 0 && fills++ < (1 << 22))
		line(f, true, "{\"type\":\"reclaim\",\"pages\":12345678}");
	ASSERT_EQ(outstream_dropped(), 1, "the first event with no room");
	dropped = outstream_dropped();
	line(f, false, "{\"type\":\"control\",\"state\":\"dropped\"}");
	ASSERT_EQ(outstream_dropped(), dropped, "an end is never dropped");
	ASSERT_TRUE(outstream_held() > 0, "it is held");
	line(f, true, "{\"type\":\"reclaim\",\"late\":1}");
	ASSERT_EQ(outstream_dropped(), dropped + 1,
		  "an event behind a held line goes");
	line(f, false, "{\"type\":\"exit\"}");
	/* the reader catches up: what was held comes, in order, whole */
	drain(p[0], got, sizeof(got), 0);
	outstream_pump();
	ASSERT_EQ(outstream_held(), 0, "all written");
	drain(p[0], got, sizeof(got), 0);
	ASSERT_STREQ(got,
		     "{\"type\":\"control\",\"state\":\"dropped\"}\n"
		     "{\"type\":\"exit\"}\n",
		     "held lines after the reader made room");
	/* a reader that never reads: the exit's drain gives up, counting */
	while (outstream_held() == 0 && fills++ < (1 << 23))
		line(f, false, "{\"type\":\"evict\"}");
	dropped = outstream_dropped();
	outstream_drain(50);
	ASSERT_EQ(outstream_held(), 0, "given up");
	ASSERT_EQ(outstream_dropped(), dropped + 1, "the held line counted");
	ASSERT_FALSE(outstream_closed(), "the reader is still there");
	/* no reader at all: held lines are lost, and counted */
	line(f, false, "{\"type\":\"evict\"}");
	ASSERT_TRUE(outstream_held() > 0, "held again");
	close(p[0]);
	dropped = outstream_dropped();
	outstream_drain(100);
	ASSERT_TRUE(outstream_closed(), "the reader is gone");
	ASSERT_TRUE(outstream_dropped() > dropped, "held lines counted lost");
	ASSERT_EQ(outstream_held(), 0, "nothing held for no one");
	fclose(f);
}

TEST_MAIN()
