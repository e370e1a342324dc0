// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The evictor's view of the entry table: a window of it read at a time
 * (a big table costs no more per evaluation than a small one), what it
 * says of entries in use and used again, the candidates it offers the
 * planner, and what is out of reach when a domain is short.
 */
#include <string.h>

#include "core/cadence.h"
#include "proc/clock.h"
#include "executors/evictor.h"
#include "executors/evictor_priv.h"

/* While commands are held, the table is looked at this often at most. */
#define HELD_READ_NS (NSEC_PER_SEC / 2)

/* Entry @id in the last window read, or NULL. */
static const struct ctl_entry *read_entry(const struct evictor *ev, uint64_t id)
{
	for (int i = 0; i < ev->nr_read; i++)
		if (ev->entries[i].id == id)
			return &ev->entries[i];
	return NULL;
}

/*
 * What the last table read says of entries in use: a held command's entry
 * still active (its clock waits) or not (its clock starts), an entry
 * answered busy no longer active (it may be commanded again). Absent from
 * a read of the whole table is no longer active.
 */
static void note_active(struct evictor *ev, uint64_t now)
{
	/* the window is scanned only for slots that wait on it */
	for (int i = 0; i < ev->nr_inflight; i++) {
		struct inflight *f = &ev->inflight[i];
		const struct ctl_entry *e;

		if (f->acked || !f->active)
			continue;
		e = read_entry(ev, f->id);
		if (!e && !ev->read_whole)
			continue;
		f->active_ns = now;
		if (!e || !(e->flags & RAMCACHE_F_ACTIVE))
			f->active = false;
	}
	for (int i = 0; i < EVICT_MAX_COOLDOWN; i++) {
		struct cooldown *c = &ev->cool[i];
		const struct ctl_entry *e;

		if (!c->until_inactive)
			continue;
		e = read_entry(ev, c->id);
		if (!e && !ev->read_whole)
			continue;
		if (!e || !(e->flags & RAMCACHE_F_ACTIVE) ||
		    e->used_generation != c->gen)
			memset(c, 0, sizeof(*c));
	}
}

/*
 * The window of the table at *@start into ev->entries (*@start moves on:
 * a big table a window at a time), and what it says of entries in use;
 * -errno.
 */
static int read_window(struct evictor *ev, uint64_t now, uint32_t *start)
{
	uint32_t slots = 0, first = *start;
	int n;

	n = control_read_entries_window(&ev->ctl, first, EVICT_MAX_SCORED,
					ev->entries, &slots);
	if (n < 0)
		return n;
	*start = first + EVICT_MAX_SCORED < slots ? first + EVICT_MAX_SCORED
						  : 0;
	ev->nr_read = n;
	ev->read_whole = !first && slots <= EVICT_MAX_SCORED;
	ev->held_read_ns = now;
	note_active(ev, now);
	return n;
}

/* Commands held or entries busy, and no read lately: look at the table. */
void evictor_refresh_held(struct evictor *ev, uint64_t now)
{
	bool waiting = false;

	for (int i = 0; i < ev->nr_inflight && !waiting; i++)
		waiting = ev->inflight[i].active && !ev->inflight[i].acked;
	for (int i = 0; i < EVICT_MAX_COOLDOWN && !waiting; i++)
		waiting = ev->cool[i].until_inactive;
	if (waiting && now - ev->held_read_ns >= HELD_READ_NS)
		read_window(ev, now, &ev->win_start);
}

/* Entries @ev->entries[0, n) as the planner sees them, reuse included. */
static void to_rc(struct evictor *ev, int n, uint64_t cap)
{
	for (int i = 0; i < n; i++) {
		if (cap && ev->entries[i].bytes > cap)
			ev->entries[i].bytes = cap;
		ev->rce[i].id = ev->entries[i].id;
		ev->rce[i].bytes = ev->entries[i].bytes;
		ev->rce[i].last_use_ns = ev->entries[i].last_use_ns;
		ev->rce[i].used_generation = ev->entries[i].used_generation;
		ev->rce[i].cost_ns = ev->entries[i].cost_ns;
		ev->rce[i].flags = ev->entries[i].flags;
	}
	reuse_note(&ev->reuse, ev->rce, (size_t)n);
	for (int i = 0; i < n; i++)
		ev->rce[i].reuse = reuse_hits(&ev->reuse, ev->rce[i].id);
}

/*
 * The executor changed its table: note which entries later prompts used
 * again (a window of a big table per change, as evictor_candidates()).
 */
void evictor_note_reuse(struct evictor *ev, const struct ctl_exec *ex,
			uint64_t now)
{
	int n;

	if (ev->stalled || ex->entries_seq == ev->reuse_seq ||
	    (ex->entries_seq & 1))
		return;
	n = read_window(ev, now, &ev->reuse_start);
	if (n < 0)
		return;
	ev->reuse_seq = ex->entries_seq;
	to_rc(ev, n, 0);
}

/* In flight or cooling down, as of the last evictor_candidates(). */
static bool unavailable(uint64_t id, void *ctx)
{
	struct evictor *ev = ctx;

	for (int i = 0; i < ev->nr_inflight; i++)
		if (ev->inflight[i].id == id)
			return true;
	return evictor_cooling(ev, id, ev->pick_now);
}

/* evictor_candidates() of the window at *@start, which moves on past it. */
static int candidates(struct evictor *ev, uint64_t now, uint64_t cap,
		      struct rc_domain_member *m, uint32_t *start)
{
	struct ctl_exec ex;
	int n;

	memset(m, 0, sizeof(*m));
	if (!ev->open || ev->stalled || control_read_exec(&ev->ctl, &ex))
		return 0;
	/* a window of a big table at a time: bounded read and scoring */
	n = read_window(ev, now, start);
	if (n < 0)
		return 0;
	to_rc(ev, n, cap);
	ev->pick_now = now;
	m->entries = ev->rce;
	m->nr_entries = (size_t)n;
	m->generation = ex.generation;
	m->weight = 1.0;
	m->in_flight = unavailable;
	m->ctx = ev;
	return n;
}

int evictor_candidates(struct evictor *ev, uint64_t now, uint64_t cap,
		       struct rc_domain_member *m)
{
	return candidates(ev, now, cap, m, &ev->win_start);
}

uint64_t evictor_could_free(struct evictor *ev, uint64_t now)
{
	struct rc_domain_member m;
	uint32_t start = ev->win_start;
	uint64_t sum = 0;
	int n;

	/* what commands for inactive entries will free, not yet seen */
	for (int i = 0; i < ev->nr_inflight; i++) {
		const struct inflight *f = &ev->inflight[i];

		if (!f->active && !f->freed_ns &&
		    (!f->acked || f->ack.status == RAMCACHE_ACK_EVICTED))
			sum += f->bytes;
	}
	/*
	 * the window this evaluation's posts read next, not moved on: else
	 * an evaluation in the headroom phase moves it twice, and of a table
	 * of two windows its posts only ever see the second
	 */
	n = candidates(ev, now, ev->rss, &m, &start);
	for (int i = 0; i < n; i++) {
		const struct rc_entry *e = &m.entries[i];

		if (!(e->flags & (RAMCACHE_F_ACTIVE | RAMCACHE_F_PINNED)) &&
		    !unavailable(e->id, ev))
			sum = sum + e->bytes < sum ? UINT64_MAX
						   : sum + e->bytes;
	}
	return sum;
}

void evictor_cannot_free(struct evictor *ev, uint64_t wanted,
			 uint64_t short_bytes, uint64_t limit)
{
	struct cannot_free_info c = {
		.pid = ev->pid,
		.ns_pid = ev->tgt.ns_pid,
		.wanted = wanted,
		.short_bytes = short_bytes,
		.limit = limit,
		.tag = ev->tag,
	};
	uint64_t most = 0;

	if (ev->short_told || !ev->open)
		return;
	for (int i = 0; i < ev->nr_inflight; i++)
		if (ev->inflight[i].active && !ev->inflight[i].acked)
			c.held_bytes += ev->inflight[i].bytes;
	for (int i = 0; i < EVICT_MAX_COOLDOWN; i++)
		if (ev->cool[i].until_inactive)
			c.busy_bytes += ev->cool[i].bytes;
	for (int i = 0; i < ev->nr_read; i++) {
		const struct ctl_entry *e = &ev->entries[i];

		if (e->flags & RAMCACHE_F_PINNED)
			c.pinned_bytes += e->bytes;
		else if ((e->flags & RAMCACHE_F_ACTIVE) &&
			 !unavailable(e->id, ev))
			c.active_bytes += e->bytes;
	}
	c.why = "active";
	most = c.active_bytes;
	if (c.held_bytes > most) {
		c.why = "held";
		most = c.held_bytes;
	}
	if (c.busy_bytes > most) {
		c.why = "busy";
		most = c.busy_bytes;
	}
	if (c.pinned_bytes > most) {
		c.why = "pinned";
		most = c.pinned_bytes;
	}
	if (!most)
		return; /* nothing of ours is out of reach */
	ev->short_told = true;
	ev->short_new = true;
	out_cannot_free(ev->out, &c);
}

void evictor_short_over(struct evictor *ev)
{
	ev->short_told = false;
}
