/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The agent's stdout when it is a pipe or a socket: a reader that stops
 * reading must not stop the agent (no heartbeats, no evictions, SIGTERM
 * never seen while blocked in write). Lines that do not fit are held, in
 * order, up to a bound, and written as the reader makes room; the kernel
 * event stream's lines (reclaim, faults, kswapd, rss: thousands a second
 * in a storm) are dropped and counted instead, and so is what overflows
 * the bound.
 */
#ifndef RAMCACHE_OUTSTREAM_H
#define RAMCACHE_OUTSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * A FILE writing to @fd without blocking when @fd is a FIFO or a socket;
 * for anything else (terminal, file) or on failure, @fallback.
 */
FILE *outstream_open(int fd, FILE *fallback);
/* A FILE that discards everything (--quiet), or NULL. */
FILE *outstream_null(void);
/* Lines dropped so far because the reader was not reading. */
uint64_t outstream_dropped(void);
/* Whether the lines written from now on may be dropped (default: no). */
void outstream_droppable(bool on);
/* Write what is held, as far as the reader has room; never waits. */
void outstream_pump(void);
/* Bytes held for a reader that has no room now. */
size_t outstream_held(void);
/* Whether stderr is the pipe or socket stdout is (2>&1): blocking too. */
bool outstream_shares_stderr(void);
/*
 * At exit: write what is held while the reader takes it, giving up after
 * @ms without progress or 4 x @ms in all; what is left is counted dropped.
 */
void outstream_drain(int ms);
/* True once a write found no reader at all (EPIPE, reset socket). */
bool outstream_closed(void);

#endif /* RAMCACHE_OUTSTREAM_H */
