// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The evictor's commands out: posting one, matching each ack to it (or
 * telling the anomaly), the RSS drop that shows its memory freed, time-outs,
 * the entries not to command again for a while, and the evict and
 * evict_done events.
 */
#include <string.h>

#include "core/cadence.h"
#include "proc/clock.h"
#include "executors/evictor.h"
#include "executors/evictor_priv.h"

/* After an ack, how long to wait for the RSS drop before giving up on it. */
#define FREED_WAIT_NS	NSEC_PER_SEC
#define COOL_PINNED_NS	(60 * NSEC_PER_SEC)
#define COOL_TIMEOUT_NS (30 * NSEC_PER_SEC)
#define COOL_DRY_RUN_NS (5 * NSEC_PER_SEC)

static struct cooldown *cool(struct evictor *ev, uint64_t id, uint64_t until)
{
	int slot = 0;

	for (int i = 0; i < EVICT_MAX_COOLDOWN; i++) {
		if (ev->cool[i].id == id) {
			slot = i;
			break;
		}
		if (ev->cool[i].until_ns < ev->cool[slot].until_ns)
			slot = i;
	}
	memset(&ev->cool[slot], 0, sizeof(ev->cool[slot]));
	ev->cool[slot].id = id;
	ev->cool[slot].until_ns = until;
	return &ev->cool[slot];
}

/* Answered busy: not again while it stays active (entry @f). */
static void cool_busy(struct evictor *ev, const struct inflight *f)
{
	struct cooldown *c = cool(ev, f->id, UINT64_MAX);

	c->until_inactive = true;
	c->gen = f->used_gen;
	c->bytes = f->bytes;
}

void evictor_done_event(struct evictor *ev, const struct inflight *f,
			const char *status)
{
	struct evict_done_info d = {
		.pid = ev->pid,
		.tag = ev->tag,
		.seq = f->seq,
		.id = f->id,
		.label = f->label,
		.status = status,
		.bytes = f->bytes,
		.acked = f->acked,
		.bytes_freed = f->ack.bytes_freed,
	};

	if (f->acked && f->ack.ack_ns >= f->issue_ns)
		d.ack_latency_ns = f->ack.ack_ns - f->issue_ns;
	if (f->acked && f->ack.recv_ns >= f->issue_ns)
		d.recv_latency_ns = f->ack.recv_ns - f->issue_ns;
	if (f->freed_ns > f->issue_ns)
		d.freed_latency_ns = f->freed_ns - f->issue_ns;
	out_evict_done(ev->out, &d);
}

static void retire(struct evictor *ev, int i)
{
	unsigned int r = ev->recent_head++ % EVICT_RECENT;

	ev->recent[r].seq = ev->inflight[i].seq;
	ev->recent[r].acked = ev->inflight[i].acked;
	ev->inflight[i] = ev->inflight[--ev->nr_inflight];
}

/* A completed command of this page: 1 acked, 0 timed out, -1 unknown. */
static int recent_outcome(const struct evictor *ev, uint64_t seq)
{
	for (unsigned int i = 0; i < EVICT_RECENT; i++)
		if (ev->recent[i].seq == seq)
			return ev->recent[i].acked;
	return -1;
}

/* Close every command of a page that went away, as @status. */
void evictor_close_inflight(struct evictor *ev, const char *status)
{
	for (int i = 0; i < ev->nr_inflight; i++)
		evictor_done_event(ev, &ev->inflight[i], status);
	ev->nr_inflight = 0;
	memset(ev->recent, 0, sizeof(ev->recent));
}

/*
 * How long an eviction took to make room, for the outlook's lead time:
 * post -> RSS drop, else post -> ack (the executor's clock).
 */
static void lead_sample(struct evictor *ev, const struct inflight *f)
{
	if (!ev->outlook || f->ack.status != RAMCACHE_ACK_EVICTED)
		return;
	if (f->freed_ns > f->issue_ns)
		outlook_latency(ev->outlook, f->freed_ns - f->issue_ns);
	else if (f->ack.ack_ns >= f->issue_ns)
		outlook_latency(ev->outlook, f->ack.ack_ns - f->issue_ns);
}

/* Emit evict_done for commands that are complete; drop them. */
void evictor_complete(struct evictor *ev, uint64_t now)
{
	for (int i = 0; i < ev->nr_inflight;) {
		struct inflight *f = &ev->inflight[i];

		if (f->acked) {
			bool evicted = f->ack.status == RAMCACHE_ACK_EVICTED &&
				       f->ack.bytes_freed;

			if (evicted && !f->freed_ns &&
			    now - f->acked_at_ns < FREED_WAIT_NS) {
				i++;
				continue;
			}
			if (f->freed_ns) {
				hist_add(&ev->freed_hist,
					 (f->freed_ns - f->issue_ns) / 1000);
				metrics_evict_freed(ev->m, ev->mslot,
						    f->freed_ns - f->issue_ns);
			}
			lead_sample(ev, f);
			evictor_done_event(ev, f,
					   ramcache_status_name(f->ack.status));
			retire(ev, i);
			continue;
		}
		/* held for an entry still in use: no clock yet */
		if (f->active && !ev->stalled) {
			i++;
			continue;
		}
		if (now - (f->active_ns > f->issue_ns ? f->active_ns
						      : f->issue_ns) >
		    ev->cfg.ack_timeout_ns) {
			/* no answer is the slowest answer */
			if (ev->outlook)
				outlook_latency(ev->outlook,
						ev->cfg.ack_timeout_ns);
			ev->st.timeouts++;
			metrics_command_timeout(ev->m, ev->mslot);
			cool(ev, f->id, now + COOL_TIMEOUT_NS);
			evictor_done_event(ev, f, "timeout");
			retire(ev, i);
			continue;
		}
		i++;
	}
}

static void accept_ack(struct evictor *ev, struct inflight *f,
		       const struct ctl_ack *ack, uint64_t now)
{
	f->acked = true;
	f->ack = *ack;
	f->acked_at_ns = now;
	ev->st.acked++;
	if (f->ack.status < 5)
		ev->st.by_status[f->ack.status]++;
	metrics_command_acked(ev->m, ev->mslot, f->ack.status);
	if (f->ack.status == RAMCACHE_ACK_EVICTED) {
		ev->st.bytes_freed += f->ack.bytes_freed;
		metrics_bytes_evicted(ev->m, ev->mslot, f->ack.bytes_freed);
		/* what it freed is ours, not the executor's rhythm */
		if (ev->outlook)
			outlook_freed(ev->outlook, f->issue_ns, now,
				      f->ack.bytes_freed);
	}
	if (f->ack.ack_ns >= f->issue_ns) {
		hist_add(&ev->ack_hist, (f->ack.ack_ns - f->issue_ns) / 1000);
		metrics_evict_ack(ev->m, ev->mslot,
				  f->ack.ack_ns - f->issue_ns);
	}
	if (f->ack.status == RAMCACHE_ACK_BUSY)
		cool_busy(ev, f);
	else if (f->ack.status == RAMCACHE_ACK_PINNED)
		cool(ev, f->id, now + COOL_PINNED_NS);
}

/* Match one well-formed ack to its command; anything else is an anomaly. */
static void match_ack(struct evictor *ev, const struct ctl_ack *ack,
		      uint64_t now)
{
	int outcome;

	for (int i = 0; i < ev->nr_inflight; i++) {
		struct inflight *f = &ev->inflight[i];

		if (f->seq != ack->cmd_seq)
			continue;
		if (f->acked)
			evictor_anomaly(ev, METRICS_ANOM_DUPLICATE_ACK,
					ack->cmd_seq,
					"command acked a second time");
		else if (ack->entry_id != f->id)
			evictor_anomaly(
				ev, METRICS_ANOM_INVALID_ACK, ack->cmd_seq,
				"ack names entry %llu, the command was for %llu",
				(unsigned long long)ack->entry_id,
				(unsigned long long)f->id);
		else
			accept_ack(ev, f, ack, now);
		return;
	}
	outcome = recent_outcome(ev, ack->cmd_seq);
	if (outcome < 0 && ack->cmd_seq <= ev->seq_base) {
		/* posted before we opened the page: an agent before us (a
		 * restart) asked, and the executor answers still */
		if (!ev->earlier_acks++)
			out_note(
				ev->out,
				"pid %d answers commands of an earlier agent (seq %llu and before): taken as done",
				(int)ev->pid, (unsigned long long)ev->seq_base);
		return;
	}
	if (outcome == 1)
		evictor_anomaly(
			ev, METRICS_ANOM_DUPLICATE_ACK, ack->cmd_seq,
			"command acked a second time, after it completed");
	else if (outcome == 0)
		evictor_anomaly(ev, METRICS_ANOM_LATE_ACK, ack->cmd_seq,
				"ack after the command timed out");
	else
		evictor_anomaly(ev, METRICS_ANOM_INVALID_ACK, ack->cmd_seq,
				"ack for a command this agent did not post");
}

void evictor_read_acks(struct evictor *ev, uint64_t now)
{
	struct ctl_ack acks[64];
	int n = control_read_acks(&ev->ctl, acks, 64);

	for (int k = 0; k < n; k++)
		match_ack(ev, &acks[k], now);
	/* acks the parser threw away: torn, malformed, seq never posted */
	if (ev->ctl.acks_bad > ev->acks_bad_told) {
		uint64_t d = ev->ctl.acks_bad - ev->acks_bad_told;

		evictor_anomaly(
			ev, METRICS_ANOM_INVALID_ACK, 0,
			"%llu acks malformed or for a seq never posted (cmd_head %llu)",
			(unsigned long long)d,
			(unsigned long long)ev->ctl.cmd_head);
		if (d > 1)
			metrics_anomaly(ev->m, ev->mslot,
					METRICS_ANOM_INVALID_ACK, d - 1);
		ev->acks_bad_told = ev->ctl.acks_bad;
	}
	if (ev->ctl.acks_lost > ev->acks_lost_told) {
		uint64_t d = ev->ctl.acks_lost - ev->acks_lost_told;

		evictor_anomaly(ev, METRICS_ANOM_ACK_OVERRUN, 0,
				"%llu acks overwritten before they were read",
				(unsigned long long)d);
		if (d > 1)
			metrics_anomaly(ev->m, ev->mslot,
					METRICS_ANOM_ACK_OVERRUN, d - 1);
		ev->acks_lost_told = ev->ctl.acks_lost;
	}
}

bool evictor_cooling(struct evictor *ev, uint64_t id, uint64_t now)
{
	for (int i = 0; i < EVICT_MAX_COOLDOWN; i++)
		if (ev->cool[i].id == id && ev->cool[i].until_ns > now)
			return true;
	return false;
}

static void evict_event(struct evictor *ev, const struct ctl_entry *e,
			uint64_t seq, const struct evict_post *p)
{
	const struct rc_plan *plan = p->plan;
	uint64_t headroom = p->headroom, now = p->now;
	struct evict_info i = {
		.pid = ev->pid,
		.tag = ev->tag,
		.ts_ns = now,
		.seq = seq,
		.id = e->id,
		.label = e->label,
		.bytes = e->bytes,
		.reason = plan->reason,
		.active = e->flags & RAMCACHE_F_ACTIVE,
		.headroom = headroom,
		.forecast = plan->predicted,
		.has_score = p->has_score,
		.score = p->score,
		.charged = p->charged,
	};

	out_evict(ev->out, &i);
}

bool evictor_post(struct evictor *ev, uint32_t idx, const struct evict_post *p)
{
	const struct ctl_entry *e = &ev->entries[idx];
	struct inflight *fl;
	uint64_t seq = 0;

	if (ev->cfg.dry_run) {
		cool(ev, e->id, p->now + COOL_DRY_RUN_NS);
		evict_event(ev, e, 0, p);
		return true;
	}
	/* no more outstanding than the ack ring holds: none is lost */
	if (ev->nr_inflight >= EVICT_MAX_INFLIGHT ||
	    ev->nr_inflight >= (int)ev->ctl.lay.ring_size)
		return false;
	if (control_post(&ev->ctl, e->id, p->plan->reason, p->now, &seq))
		return false;
	fl = &ev->inflight[ev->nr_inflight++];
	memset(fl, 0, sizeof(*fl));
	fl->seq = seq;
	fl->id = e->id;
	fl->bytes = e->bytes;
	fl->issue_ns = p->now;
	fl->rss_peak = ev->rss;
	fl->used_gen = e->used_generation;
	fl->active = e->flags & RAMCACHE_F_ACTIVE;
	fl->active_ns = p->now;
	memcpy(fl->label, e->label, sizeof(fl->label));
	ev->st.sent++;
	if (ev->outlook)
		outlook_posted(ev->outlook, p->now);
	evict_event(ev, e, seq, p);
	return true;
}

uint64_t evictor_pending(const struct evictor *ev)
{
	uint64_t sum = 0;

	for (int i = 0; i < ev->nr_inflight; i++)
		if (!ev->inflight[i].freed_ns)
			sum += ev->inflight[i].bytes;
	return sum;
}

uint64_t evictor_overdue(const struct evictor *ev, uint64_t now)
{
	uint64_t sum = 0, late = ev->cfg.ack_timeout_ns / 5;

	for (int i = 0; i < ev->nr_inflight; i++) {
		const struct inflight *f = &ev->inflight[i];

		if (!f->freed_ns && !f->acked && now - f->issue_ns >= late)
			sum += f->bytes;
	}
	return sum;
}

void evictor_rss(struct evictor *ev, uint64_t ts, uint64_t rss)
{
	ev->rss = rss;
	for (int i = 0; i < ev->nr_inflight; i++) {
		struct inflight *f = &ev->inflight[i];

		if (f->freed_ns || ts < f->issue_ns)
			continue;
		if (rss > f->rss_peak)
			f->rss_peak = rss;
		if (f->bytes && f->rss_peak - rss >= f->bytes / 2)
			f->freed_ns = ts;
	}
}
