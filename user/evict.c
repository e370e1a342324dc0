// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "evict.h"
#include "json.h"

#define NSEC	      1000000000ULL
#define OPEN_RETRY_NS (NSEC / 2)
/* After an ack, how long to wait for the RSS drop before giving up on it. */
#define FREED_WAIT_NS	NSEC
#define COOL_BUSY_NS	(2 * NSEC)
#define COOL_PINNED_NS	(60 * NSEC)
#define COOL_TIMEOUT_NS (30 * NSEC)
#define COOL_DRY_RUN_NS (5 * NSEC)
#define MiB		(1024.0 * 1024.0)

int evictor_init(struct evictor *ev, const struct opts *o, struct out *out,
		 struct metrics *m, pid_t pid, uid_t uid,
		 const struct rc_thresholds *thr)
{
	memset(ev, 0, sizeof(*ev));
	ev->o = o;
	ev->out = out;
	ev->m = m;
	ev->pid = pid;
	ev->uid = uid;
	ev->thr = *thr;
	ev->ctl.fd = -1;
	if (o->control)
		snprintf(ev->path, sizeof(ev->path), "%s", o->control);
	else
		snprintf(ev->path, sizeof(ev->path), RAMCACHE_CTL_PATH_FMT,
			 (int)pid);
	return 0;
}

void evictor_free(struct evictor *ev)
{
	if (ev->open)
		ctl_close(&ev->ctl);
	ev->open = false;
	free(ev->entries);
	free(ev->rce);
	free(ev->picks);
	ev->entries = NULL;
	ev->rce = NULL;
	ev->picks = NULL;
}

static void cool(struct evictor *ev, uint64_t id, uint64_t until)
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
	ev->cool[slot].id = id;
	ev->cool[slot].until_ns = until;
}

static void control_event(struct evictor *ev, const char *state,
			  const char *why)
{
	char clk[16];

	if (ev->out->json) {
		struct jw w;

		out_json_begin(&w, ev->out->f, "control");
		jw_str(&w, "state", state);
		jw_str(&w, "path", ev->path);
		jw_u64(&w, "pid", ev->pid);
		if (why)
			jw_str(&w, "reason", why);
		jw_end(&w);
		return;
	}
	out_clock(clk, sizeof(clk));
	fprintf(ev->out->f, "%s  control page %s %s%s%s\n", clk, ev->path,
		state, why ? ": " : "", why ? why : "");
	fflush(ev->out->f);
}

static int grow_arrays(struct evictor *ev, uint32_t n)
{
	free(ev->entries);
	free(ev->rce);
	free(ev->picks);
	ev->entries = calloc(n ? n : 1, sizeof(*ev->entries));
	ev->rce = calloc(n ? n : 1, sizeof(*ev->rce));
	ev->picks = calloc(n ? n : 1, sizeof(*ev->picks));
	if (!ev->entries || !ev->rce || !ev->picks)
		return -ENOMEM;
	return 0;
}

static void try_open(struct evictor *ev, uint64_t now)
{
	struct stat st;
	int err;

	ev->next_open_ns = now + OPEN_RETRY_NS;
	if (lstat(ev->path, &st))
		return; /* not there yet: keep monitoring */
	err = ctl_open(&ev->ctl, ev->path, ev->uid, ev->pid);
	if (err) {
		/* once per reason: the path is retried every half second */
		if (ev->ctl.why != ev->last_why)
			out_warn(ev->out, "refusing control page %s: %s",
				 ev->path, ctl_strerror(&ev->ctl, err));
		ev->last_why = ev->ctl.why;
		return;
	}
	if (grow_arrays(ev, ev->ctl.lay.max_entries)) {
		out_warn(ev->out, "failed to allocate for control page %s: %s",
			 ev->path, strerror(ENOMEM));
		ctl_close(&ev->ctl);
		return;
	}
	ev->open = true;
	ev->last_why = CTL_OK;
	ev->next_beat_ns = now;
	control_event(ev, "attached", NULL);
}

static void drop_page(struct evictor *ev, const char *why)
{
	control_event(ev, "dropped", why);
	ctl_close(&ev->ctl);
	ev->open = false;
}

static void done_event(struct evictor *ev, const struct inflight *f,
		       const char *status)
{
	uint64_t ack_lat = 0, freed_lat = 0, recv_lat = 0;
	char clk[16];

	if (f->acked && f->ack.ack_ns >= f->issue_ns)
		ack_lat = f->ack.ack_ns - f->issue_ns;
	if (f->acked && f->ack.recv_ns >= f->issue_ns)
		recv_lat = f->ack.recv_ns - f->issue_ns;
	if (f->freed_ns > f->issue_ns)
		freed_lat = f->freed_ns - f->issue_ns;

	if (ev->out->json) {
		struct jw w;

		out_json_begin(&w, ev->out->f, "evict_done");
		jw_u64(&w, "pid", ev->pid);
		jw_u64(&w, "seq", f->seq);
		jw_u64(&w, "id", f->id);
		jw_str(&w, "label", f->label);
		jw_str(&w, "status", status);
		jw_u64(&w, "bytes", f->bytes);
		if (f->acked) {
			jw_u64(&w, "bytes_freed", f->ack.bytes_freed);
			jw_u64(&w, "recv_latency_ns", recv_lat);
			jw_u64(&w, "ack_latency_ns", ack_lat);
		}
		if (freed_lat)
			jw_u64(&w, "freed_latency_ns", freed_lat);
		jw_end(&w);
		return;
	}
	out_clock(clk, sizeof(clk));
	fprintf(ev->out->f, "%s  evict #%llu %s (%s): %s", clk,
		(unsigned long long)f->seq, f->label[0] ? f->label : "-",
		status, f->acked ? "" : "no ack");
	if (f->acked)
		fprintf(ev->out->f, "%.1f MiB freed, ack after %.2f ms",
			f->ack.bytes_freed / MiB, ack_lat / 1e6);
	if (freed_lat)
		fprintf(ev->out->f, ", RSS down after %.2f ms",
			freed_lat / 1e6);
	fputc('\n', ev->out->f);
	fflush(ev->out->f);
}

static void retire(struct evictor *ev, int i)
{
	ev->inflight[i] = ev->inflight[--ev->nr_inflight];
}

/* Emit evict_done for commands that are complete; drop them. */
static void complete(struct evictor *ev, uint64_t now)
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
				metrics_evict_freed(ev->m,
						    f->freed_ns - f->issue_ns);
			}
			done_event(ev, f, ramcache_status_name(f->ack.status));
			retire(ev, i);
			continue;
		}
		if (now - f->issue_ns > ev->o->ack_timeout_ns) {
			ev->st.timeouts++;
			metrics_command_timeout(ev->m);
			cool(ev, f->id, now + COOL_TIMEOUT_NS);
			done_event(ev, f, "timeout");
			retire(ev, i);
			continue;
		}
		i++;
	}
}

static void read_acks(struct evictor *ev, uint64_t now)
{
	struct ctl_ack acks[64];
	int n = ctl_read_acks(&ev->ctl, acks, 64);

	for (int k = 0; k < n; k++) {
		for (int i = 0; i < ev->nr_inflight; i++) {
			struct inflight *f = &ev->inflight[i];

			if (f->seq != acks[k].cmd_seq || f->acked)
				continue;
			if (acks[k].entry_id != f->id)
				break; /* not our command: ignore */
			f->acked = true;
			f->ack = acks[k];
			f->acked_at_ns = now;
			ev->st.acked++;
			if (f->ack.status < 5)
				ev->st.by_status[f->ack.status]++;
			metrics_command_acked(ev->m, f->ack.status);
			if (f->ack.status == RAMCACHE_ACK_EVICTED) {
				ev->st.bytes_freed += f->ack.bytes_freed;
				metrics_bytes_evicted(ev->m,
						      f->ack.bytes_freed);
			}
			if (f->ack.ack_ns >= f->issue_ns) {
				hist_add(&ev->ack_hist,
					 (f->ack.ack_ns - f->issue_ns) / 1000);
				metrics_evict_ack(ev->m,
						  f->ack.ack_ns - f->issue_ns);
			}
			if (f->ack.status == RAMCACHE_ACK_BUSY)
				cool(ev, f->id, now + COOL_BUSY_NS);
			else if (f->ack.status == RAMCACHE_ACK_PINNED)
				cool(ev, f->id, now + COOL_PINNED_NS);
			break;
		}
	}
}

static void heartbeat(struct evictor *ev, uint64_t now)
{
	struct ctl_agent a = {
		.heartbeat_ns = now,
		.pid = getpid(),
		.level = ev->level,
		.headroom_bytes = ev->headroom,
		.target_bytes = ev->target,
	};

	if (now < ev->next_beat_ns)
		return;
	ev->next_beat_ns = now + RAMCACHE_HEARTBEAT_PERIOD_NS;
	ctl_write_agent(&ev->ctl, &a);
}

void evictor_tick(struct evictor *ev, uint64_t now)
{
	int err;

	if (!ev->open) {
		if (now >= ev->next_open_ns)
			try_open(ev, now);
		if (!ev->open) {
			complete(ev, now);
			return;
		}
	}
	err = ctl_check(&ev->ctl);
	if (err) {
		drop_page(ev, ctl_strerror(&ev->ctl, err));
		complete(ev, now);
		return;
	}
	heartbeat(ev, now);
	read_acks(ev, now);
	complete(ev, now);
}

static bool cooling(struct evictor *ev, uint64_t id, uint64_t now)
{
	for (int i = 0; i < EVICT_MAX_COOLDOWN; i++)
		if (ev->cool[i].id == id && ev->cool[i].until_ns > now)
			return true;
	return false;
}

struct pick_ctx {
	struct evictor *ev;
	uint64_t now;
};

static bool unavailable(uint64_t id, void *ctx)
{
	struct pick_ctx *pc = ctx;

	for (int i = 0; i < pc->ev->nr_inflight; i++)
		if (pc->ev->inflight[i].id == id)
			return true;
	return cooling(pc->ev, id, pc->now);
}

static void evict_event(struct evictor *ev, const struct ctl_entry *e,
			uint64_t seq, uint32_t reason, uint64_t headroom,
			uint64_t predicted, uint64_t now)
{
	char clk[16];

	if (ev->out->json) {
		struct jw w;

		jw_begin(&w, ev->out->f);
		jw_str(&w, "type", "evict");
		jw_u64(&w, "pid", ev->pid);
		/* when it was posted (CLOCK_MONOTONIC, as issue_ns) */
		jw_u64(&w, "ts_ns", now);
		if (seq)
			jw_u64(&w, "seq", seq);
		else
			jw_bool(&w, "dry_run", true);
		jw_u64(&w, "id", e->id);
		jw_str(&w, "label", e->label);
		jw_u64(&w, "bytes", e->bytes);
		jw_str(&w, "reason", ramcache_reason_name(reason));
		jw_bool(&w, "active", e->flags & RAMCACHE_F_ACTIVE);
		jw_u64(&w, "headroom", headroom);
		jw_u64(&w, "forecast", predicted);
		jw_end(&w);
		return;
	}
	out_clock(clk, sizeof(clk));
	fprintf(ev->out->f,
		"%s  %s #%llu %s (%.1f MiB, %s): headroom %.0f MiB, forecast "
		"%.0f MiB\n",
		clk, seq ? "evict" : "would evict", (unsigned long long)seq,
		e->label[0] ? e->label : "-", e->bytes / MiB,
		ramcache_reason_name(reason), headroom / MiB, predicted / MiB);
	fflush(ev->out->f);
}

static uint64_t pending_bytes(const struct evictor *ev)
{
	uint64_t sum = 0;

	for (int i = 0; i < ev->nr_inflight; i++)
		if (!ev->inflight[i].freed_ns)
			sum += ev->inflight[i].bytes;
	return sum;
}

void evictor_evaluate(struct evictor *ev, uint64_t now, uint64_t headroom,
		      const struct rc_forecast *f, uint32_t why)
{
	uint64_t predicted = headroom, deficit, pending, covered;
	struct rc_select_req req = { 0 };
	struct pick_ctx pc = { ev, now };
	struct ctl_exec ex;
	enum rc_phase phase;
	uint32_t reason;
	int n;

	ev->headroom = headroom;
	if (f && f->nr_used >= 2 && f->at_horizon < predicted)
		predicted = f->at_horizon;
	if (predicted < ev->thr.headroom_min) {
		phase = RC_PHASE_HEADROOM;
		deficit = ev->thr.headroom_min - predicted;
		reason = RAMCACHE_REASON_HEADROOM;
	} else if (predicted < ev->thr.inactive_min) {
		phase = RC_PHASE_INACTIVE;
		deficit = ev->thr.inactive_min - predicted;
		reason = RAMCACHE_REASON_INACTIVE;
	} else {
		ev->target = 0;
		return;
	}
	if (why)
		reason = why;
	else if (headroom >= ev->thr.inactive_min ||
		 (phase == RC_PHASE_HEADROOM &&
		  headroom >= ev->thr.headroom_min))
		reason = RAMCACHE_REASON_FORECAST;
	ev->target = deficit;
	if (!ev->open || !ev->o->evict)
		return;
	pending = pending_bytes(ev);
	if (pending >= deficit)
		return;
	deficit -= pending;

	if (ctl_read_exec(&ev->ctl, &ex))
		return;
	n = ctl_read_entries(&ev->ctl, ev->entries, ev->ctl.lay.max_entries);
	if (n <= 0)
		return;
	for (int i = 0; i < n; i++) {
		ev->rce[i].id = ev->entries[i].id;
		ev->rce[i].bytes = ev->entries[i].bytes;
		ev->rce[i].last_use_ns = ev->entries[i].last_use_ns;
		ev->rce[i].used_generation = ev->entries[i].used_generation;
		ev->rce[i].cost_ns = ev->entries[i].cost_ns;
		ev->rce[i].flags = ev->entries[i].flags;
	}
	req.entries = ev->rce;
	req.nr_entries = n;
	req.generation = ex.generation;
	req.deficit = deficit;
	req.phase = phase;
	req.policy = ev->o->policy == SCORE_COST ? RC_POLICY_COST
						 : RC_POLICY_RAM;
	req.in_flight = unavailable;
	req.ctx = &pc;
	n = rc_select(&req, ev->picks, n, &covered);
	for (int k = 0; k < n; k++) {
		const struct ctl_entry *e = &ev->entries[ev->picks[k]];
		struct inflight *fl;
		uint64_t seq = 0;

		if (ev->o->dry_run) {
			cool(ev, e->id, now + COOL_DRY_RUN_NS);
			evict_event(ev, e, 0, reason, headroom, predicted, now);
			continue;
		}
		/* no more outstanding than the ack ring holds: none is lost */
		if (ev->nr_inflight >= EVICT_MAX_INFLIGHT ||
		    ev->nr_inflight >= (int)ev->ctl.lay.ring_size)
			break;
		if (ctl_post(&ev->ctl, e->id, reason, now, &seq))
			break;
		fl = &ev->inflight[ev->nr_inflight++];
		memset(fl, 0, sizeof(*fl));
		fl->seq = seq;
		fl->id = e->id;
		fl->bytes = e->bytes;
		fl->issue_ns = now;
		fl->rss_peak = ev->rss;
		memcpy(fl->label, e->label, sizeof(fl->label));
		ev->st.sent++;
		evict_event(ev, e, seq, reason, headroom, predicted, now);
	}
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

void evictor_set_level(struct evictor *ev, uint32_t level)
{
	ev->level = level;
}

void evictor_finish(struct evictor *ev, uint64_t now)
{
	for (int i = 0; i < ev->nr_inflight; i++)
		done_event(ev, &ev->inflight[i],
			   ev->inflight[i].acked ? "ack_only" : "unacked");
	ev->nr_inflight = 0;
	if (ev->open) {
		struct ctl_agent gone = { 0 };

		/* heartbeat 0: the executor falls back at once */
		ctl_write_agent(&ev->ctl, &gone);
	}
	evictor_free(ev);
}
