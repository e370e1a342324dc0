/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The agent's stdout when it is a pipe or a socket: a reader that stops
 * reading must not stop the agent (no heartbeats, no evictions, SIGTERM
 * never seen while blocked in write). Whole lines that do not fit are
 * dropped and counted instead.
 */
#ifndef RAMCACHE_OUTSTREAM_H
#define RAMCACHE_OUTSTREAM_H

#include <stdbool.h>
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
/* True once a write found no reader at all (EPIPE, reset socket). */
bool outstream_closed(void);

#endif /* RAMCACHE_OUTSTREAM_H */
