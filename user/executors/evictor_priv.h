/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Between the evictor's three files only: evictor.c (the page session),
 * evictor_cmds.c (the commands out and their acks) and evictor_table.c
 * (the entry table's window). Other modules use evictor.h.
 */
#ifndef RAMCACHE_EVICTOR_PRIV_H
#define RAMCACHE_EVICTOR_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "executors/evictor.h"

/* A protocol anomaly of @kind (enum metrics_anomaly): counted and told. */
__attribute__((format(printf, 4, 5))) void
evictor_anomaly(struct evictor *ev, unsigned int kind, uint64_t seq,
		const char *fmt, ...);

/* evictor_cmds.c */
/* Is @id not to be commanded at @now (timed out, pinned, dry run)? */
bool evictor_cooling(struct evictor *ev, uint64_t id, uint64_t now);
/* The evict_done event of command @f, as @status. */
void evictor_done_event(struct evictor *ev, const struct inflight *f,
			const char *status);
/* Close every command of a page that went away, as @status. */
void evictor_close_inflight(struct evictor *ev, const char *status);
/* Commands complete (acked and freed, or timed out) are told and go. */
void evictor_complete(struct evictor *ev, uint64_t now);
/* The acks written since the last read, matched to their commands. */
void evictor_read_acks(struct evictor *ev, uint64_t now);

/* evictor_table.c */
/* Commands held or entries busy, and no read lately: read the table. */
void evictor_refresh_held(struct evictor *ev, uint64_t now);
/* The executor changed its table: note which entries were used again. */
void evictor_note_reuse(struct evictor *ev, const struct ctl_exec *ex,
			uint64_t now);

#endif /* RAMCACHE_EVICTOR_PRIV_H */
