// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cadence.h"
#include "proc/clock.h"
#include "executors/evictor.h"
#include "proc/meminfo.h"

#define OPEN_RETRY_NS (NSEC_PER_SEC / 2)
/* After an ack, how long to wait for the RSS drop before giving up on it. */
#define FREED_WAIT_NS  NSEC_PER_SEC
#define COOL_PINNED_NS (60 * NSEC_PER_SEC)
/* While commands are held, the table is looked at this often at most. */
#define HELD_READ_NS	(NSEC_PER_SEC / 2)
#define COOL_TIMEOUT_NS (30 * NSEC_PER_SEC)
#define COOL_DRY_RUN_NS (5 * NSEC_PER_SEC)

int evictor_init(struct evictor *ev, const struct evict_cfg *cfg,
		 struct out *out, struct metrics *m, const struct ctl_target *t,
		 const struct rc_thresholds *thr)
{
	memset(ev, 0, sizeof(*ev));
	ev->cfg = *cfg;
	ev->out = out;
	ev->m = m;
	ev->pid = t->pid;
	ev->tgt = *t;
	ev->thr = *thr;
	ev->ctl.fd = -1;
	ev->pidfd = -1;
	ev->self = getpid();
	if (cfg->control)
		snprintf(ev->path, sizeof(ev->path), "%s", cfg->control);
	else
		snprintf(ev->path, sizeof(ev->path), "/proc/%d/fd",
			 (int)t->pid);
	return 0;
}

void evictor_free(struct evictor *ev)
{
	if (ev->open)
		control_close(&ev->ctl);
	ev->open = false;
	free(ev->entries);
	free(ev->rce);
	free(ev->picks);
	ev->entries = NULL;
	ev->rce = NULL;
	ev->picks = NULL;
}

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

static void control_event_info(struct evictor *ev, struct control_info *c)
{
	c->path = ev->open ? ev->ctl.path : ev->path;
	c->discovery = ev->cfg.control ? "path" : "memfd";
	c->pid = ev->pid;
	c->tag = ev->tag;
	c->ns_pid = ev->tgt.ns_pid;
	out_control(ev->out, c);
}

static void control_event(struct evictor *ev, const char *state,
			  const char *why)
{
	struct control_info c = { .state = state, .why = why, .status = -1 };

	control_event_info(ev, &c);
}

__attribute__((format(printf, 4, 5))) static void anomaly(struct evictor *ev,
							  unsigned int kind,
							  uint64_t seq,
							  const char *fmt, ...)
{
	char detail[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	metrics_anomaly(ev->m, ev->mslot, kind, 1);
	out_anomaly(ev->out, ev->pid, metrics_anomaly_name(kind), seq, detail);
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

/*
 * What a refusal by the kernel means for an agent short of privileges:
 * /proc/<pid>/fd of another user is a directory of that user's (EACCES),
 * its links and pidfd_getfd() want ptrace rights over the process (EPERM).
 */
static const char *cap_hint(const struct evictor *ev, int err)
{
	if (ev->cfg.control || ev->ctl.why != CTL_ERR_SYS)
		return "";
	if (err == -EACCES)
		return " (the agent needs CAP_DAC_READ_SEARCH)";
	if (err == -EPERM)
		return " (the agent needs CAP_SYS_PTRACE)";
	return "";
}

static void try_open(struct evictor *ev, uint64_t now)
{
	struct stat st;
	int err;

	ev->next_open_ns = now + OPEN_RETRY_NS;
	if (ev->cfg.control) {
		if (lstat(ev->path, &st))
			return; /* not there yet: keep monitoring */
		err = control_open_at(&ev->ctl, ev->path, &ev->tgt);
	} else {
		err = control_find(&ev->ctl, RC_PROC_ROOT, &ev->tgt);
		if (err == -ENOENT && ev->ctl.why == CTL_OK)
			return; /* no page yet: keep monitoring */
	}
	if (err) {
		/* once per reason: the page is retried every half second */
		if (ev->ctl.why != ev->last_why) {
			const char *why = control_strerror(&ev->ctl, err);

			out_warn(ev->out, "refusing control page %s: %s%s",
				 ev->path, why, cap_hint(ev, err));
			control_event(ev, "refused", why);
		}
		ev->last_why = ev->ctl.why;
		return;
	}
	if (grow_arrays(ev, ev->ctl.lay.max_entries)) {
		out_warn(ev->out, "failed to allocate for control page %s: %s",
			 ev->path, strerror(ENOMEM));
		control_close(&ev->ctl);
		return;
	}
	ev->open = true;
	ev->seq_base = ev->ctl.cmd_head;
	/* an earlier agent's word on an announcement is not ours */
	ev->ann = (struct rc_announce){ 0 };
	ev->ann_counted = 0;
	ev->ann_told = UINT64_MAX;
	ev->earlier_acks = 0;
	ev->last_why = CTL_OK;
	ev->next_beat_ns = now;
	/* before the first heartbeat: our death is news to the executor */
	ev->locked = !control_take_lock(&ev->ctl);
	control_event(ev, "attached", NULL);
}

static void done_event(struct evictor *ev, const struct inflight *f,
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
static void close_inflight(struct evictor *ev, const char *status)
{
	for (int i = 0; i < ev->nr_inflight; i++)
		done_event(ev, &ev->inflight[i], status);
	ev->nr_inflight = 0;
	memset(ev->recent, 0, sizeof(ev->recent));
}

/*
 * How the page ended, in the document's words ("How a page ends"): the
 * executor exited or was killed, closed or replaced its page, or the file
 * changed under us. None of these is a protocol anomaly.
 */
static const char *page_end(struct evictor *ev, struct control_info *c)
{
	struct ctl_exit ex;
	struct stat st;

	if (ev->ctl.why == CTL_ERR_CHANGED)
		return "changed";
	if (ev->ctl.why == CTL_ERR_TRUNCATED)
		return "truncated";
	control_exit_read(RC_PROC_ROOT, ev->pid, ev->pidfd, &ex);
	if (ex.exiting) {
		const char *r =
			control_exit_reason(&ex, &c->signal, &c->status);

		c->oom_kill = ev->oom_killed && c->signal;
		return r;
	}
	if (ev->ctl.memfd)
		return control_link_is_page(ev->ctl.path) ? "replaced"
							  : "closed";
	return lstat(ev->ctl.path, &st) ? "closed" : "replaced";
}

static void drop_page(struct evictor *ev, const char *message)
{
	struct control_info c = { .state = "dropped", .status = -1 };

	c.why = page_end(ev, &c);
	/* the same words however the end was noticed (exit first, or page) */
	if (!strcmp(c.why, "exited"))
		message = "the executor exited";
	else if (!strcmp(c.why, "killed"))
		message = "the executor was killed";
	c.message = message;
	c.inflight = ev->nr_inflight;
	control_event_info(ev, &c);
	/* its commands can never be answered: the next page numbers anew */
	close_inflight(ev, "page_dropped");
	control_close(&ev->ctl);
	ev->open = false;
	ev->stalled = false;
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
				metrics_evict_freed(ev->m, ev->mslot,
						    f->freed_ns - f->issue_ns);
			}
			lead_sample(ev, f);
			done_event(ev, f, ramcache_status_name(f->ack.status));
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
			done_event(ev, f, "timeout");
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
			anomaly(ev, METRICS_ANOM_DUPLICATE_ACK, ack->cmd_seq,
				"command acked a second time");
		else if (ack->entry_id != f->id)
			anomaly(ev, METRICS_ANOM_INVALID_ACK, ack->cmd_seq,
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
		anomaly(ev, METRICS_ANOM_DUPLICATE_ACK, ack->cmd_seq,
			"command acked a second time, after it completed");
	else if (outcome == 0)
		anomaly(ev, METRICS_ANOM_LATE_ACK, ack->cmd_seq,
			"ack after the command timed out");
	else
		anomaly(ev, METRICS_ANOM_INVALID_ACK, ack->cmd_seq,
			"ack for a command this agent did not post");
}

static void read_acks(struct evictor *ev, uint64_t now)
{
	struct ctl_ack acks[64];
	int n = control_read_acks(&ev->ctl, acks, 64);

	for (int k = 0; k < n; k++)
		match_ack(ev, &acks[k], now);
	/* acks the parser threw away: torn, malformed, seq never posted */
	if (ev->ctl.acks_bad > ev->acks_bad_told) {
		uint64_t d = ev->ctl.acks_bad - ev->acks_bad_told;

		anomaly(ev, METRICS_ANOM_INVALID_ACK, 0,
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

		anomaly(ev, METRICS_ANOM_ACK_OVERRUN, 0,
			"%llu acks overwritten before they were read",
			(unsigned long long)d);
		if (d > 1)
			metrics_anomaly(ev->m, ev->mslot,
					METRICS_ANOM_ACK_OVERRUN, d - 1);
		ev->acks_lost_told = ev->ctl.acks_lost;
	}
}

/* A hung executor is not an anomaly: a state of the page, told as such. */
static void stall_event(struct evictor *ev, const char *state, const char *msg)
{
	struct control_info c = { .state = state,
				  .message = msg,
				  .status = -1 };

	control_event_info(ev, &c);
}

/*
 * The executor's side as it is now: a hung executor (stale heartbeat) gets
 * no commands until it beats again; cmd_done ahead of cmd_head (it claims
 * commands nobody posted) is reported and the numbering continues above it,
 * so no seq the executor has seen is ever posted again.
 */
static void check_exec(struct evictor *ev, const struct ctl_exec *ex,
		       uint64_t now)
{
	bool alive = control_exec_alive(ex, now);

	if (!alive && !ev->stalled) {
		char msg[128];

		ev->stalled = true;
		if (ex->heartbeat_ns && ex->heartbeat_ns < now)
			snprintf(
				msg, sizeof(msg),
				"no executor heartbeat for %llu ms: not posting until it beats again",
				(unsigned long long)(now - ex->heartbeat_ns) /
					1000000);
		else
			snprintf(
				msg, sizeof(msg),
				"executor heartbeat unset or in the future: not posting until it beats");
		stall_event(ev, "stalled", msg);
	} else if (alive && ev->stalled) {
		ev->stalled = false;
		stall_event(ev, "resumed",
			    "executor heartbeat back: posting again");
	}
	if (ex->cmd_done > ev->ctl.cmd_head) {
		anomaly(ev, METRICS_ANOM_CMD_DONE_AHEAD, ex->cmd_done,
			"cmd_done %llu is ahead of cmd_head %llu: commands resume at %llu",
			(unsigned long long)ex->cmd_done,
			(unsigned long long)ev->ctl.cmd_head,
			(unsigned long long)ex->cmd_done + 1);
		ev->ctl.cmd_head = ex->cmd_done;
	}
}

static void heartbeat(struct evictor *ev, uint64_t now)
{
	struct ctl_agent a = {
		.heartbeat_ns = now,
		.pid = ev->self,
		.level = ev->level,
		.headroom_bytes = ev->headroom,
		.target_bytes = ev->target,
	};

	if (!cadence_beat_due(ev->next_beat_ns, now))
		return;
	ev->next_beat_ns = now + RAMCACHE_HEARTBEAT_PERIOD_NS;
	control_write_agent(&ev->ctl, &a);
	/* after the plan: the executor reads the target it goes with */
	if (ev->ann_counted != ev->ann_told &&
	    !control_write_expect_seen(&ev->ctl, ev->ann_counted))
		ev->ann_told = ev->ann_counted;
}

uint64_t evictor_announced(const struct evictor *ev, uint64_t cap)
{
	return announce_left(&ev->ann, ev->rss, cap);
}

void evictor_load_rss(struct evictor *ev, uint64_t ts, uint64_t rss)
{
	uint64_t g;

	announce_rss(&ev->ann, rss);
	g = rss > ev->ann.rss0 ? rss - ev->ann.rss0 : 0;
	if (!ev->ann.ns || !ev->outlook)
		return;
	if (g > ev->ann.bytes)
		g = ev->ann.bytes;
	if (g <= ev->ann_grown)
		return;
	ev->ann_grown = g;
	outlook_took(ev->outlook, ts, ev->ann_took + g);
}

void evictor_counted(struct evictor *ev)
{
	ev->ann_counted = ev->ann.ns;
	ev->ann_new = false;
}

void evictor_tell(struct evictor *ev, uint64_t now)
{
	if (ev->open && ev->ann_counted != ev->ann_told) {
		ev->next_beat_ns = 0;
		heartbeat(ev, now);
	}
}

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
static void refresh_held(struct evictor *ev, uint64_t now)
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
static void note_reuse(struct evictor *ev, const struct ctl_exec *ex,
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

void evictor_tick(struct evictor *ev, uint64_t now)
{
	struct ctl_exec ex;
	int err;

	if (!ev->open) {
		if (now >= ev->next_open_ns)
			try_open(ev, now);
		if (!ev->open) {
			complete(ev, now);
			return;
		}
	}
	err = control_check(&ev->ctl);
	/* the descriptor closed, the page still open under another (a dup) */
	if (err && ev->ctl.why == CTL_ERR_REPLACED && ev->ctl.memfd &&
	    !control_refind(&ev->ctl, RC_PROC_ROOT, ev->pid))
		err = control_check(&ev->ctl);
	if (err) {
		drop_page(ev, control_strerror(&ev->ctl, err));
		complete(ev, now);
		return;
	}
	heartbeat(ev, now);
	/* the executor's side, read once for both */
	if (!control_read_exec(&ev->ctl, &ex)) {
		check_exec(ev, &ex, now);
		note_reuse(ev, &ex, now);
		uint64_t was = ev->ann.ns;

		if (announce_read(&ev->ann, ex.expect_ns, ex.expect_bytes,
				  ev->rss, now))
			ev->ann_new = true;
		if (ev->ann.ns !=
		    was) { /* what the last one took stays taken */
			ev->ann_took += ev->ann_grown;
			ev->ann_grown = 0;
		}
	}
	read_acks(ev, now);
	refresh_held(ev, now);
	complete(ev, now);
}

uint64_t evictor_next_ns(const struct evictor *ev)
{
	if (ev->nr_inflight)
		return 0;
	return ev->open ? ev->next_beat_ns : ev->next_open_ns;
}

static bool cooling(struct evictor *ev, uint64_t id, uint64_t now)
{
	for (int i = 0; i < EVICT_MAX_COOLDOWN; i++)
		if (ev->cool[i].id == id && ev->cool[i].until_ns > now)
			return true;
	return false;
}

/* In flight or cooling down, as of the last evictor_candidates(). */
static bool unavailable(uint64_t id, void *ctx)
{
	struct evictor *ev = ctx;

	for (int i = 0; i < ev->nr_inflight; i++)
		if (ev->inflight[i].id == id)
			return true;
	return cooling(ev, id, ev->pick_now);
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

int evictor_candidates(struct evictor *ev, uint64_t now, uint64_t cap,
		       struct rc_domain_member *m)
{
	struct ctl_exec ex;
	int n;

	memset(m, 0, sizeof(*m));
	if (!ev->open || ev->stalled || control_read_exec(&ev->ctl, &ex))
		return 0;
	/* a window of a big table at a time: bounded read and scoring */
	n = read_window(ev, now, &ev->win_start);
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

uint64_t evictor_could_free(struct evictor *ev, uint64_t now)
{
	struct rc_domain_member m;
	uint64_t sum = 0;
	int n;

	/* what commands for inactive entries will free, not yet seen */
	for (int i = 0; i < ev->nr_inflight; i++) {
		const struct inflight *f = &ev->inflight[i];

		if (!f->active && !f->freed_ns &&
		    (!f->acked || f->ack.status == RAMCACHE_ACK_EVICTED))
			sum += f->bytes;
	}
	n = evictor_candidates(ev, now, ev->rss, &m);
	for (int i = 0; i < n; i++) {
		const struct rc_entry *e = &m.entries[i];

		if (!(e->flags & (RAMCACHE_F_ACTIVE | RAMCACHE_F_PINNED)) &&
		    !unavailable(e->id, ev))
			sum = sum + e->bytes < sum ? UINT64_MAX
						   : sum + e->bytes;
	}
	return sum;
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

void evictor_set_plan(struct evictor *ev, uint64_t headroom, uint64_t target)
{
	ev->headroom = headroom;
	ev->target = target;
}

void evictor_evaluate(struct evictor *ev, uint64_t now, const struct rc_view *v,
		      uint32_t why)
{
	struct evict_post p = { .headroom = v->headroom, .now = now };
	struct rc_domain_member m;
	struct rc_plan plan;
	uint64_t pending, covered;
	int n;

	outlook_plan(v, &ev->thr, why != 0, &plan);
	evictor_set_plan(ev, v->headroom, plan.evict ? plan.deficit : 0);
	if (!plan.evict || !ev->open || ev->stalled)
		return;
	pending = evictor_pending(ev);
	if (pending >= plan.deficit)
		return;
	n = evictor_candidates(ev, now, 0, &m);
	if (n <= 0)
		return;
	m.min_bytes = policy_min_bytes(&plan);
	n = policy_select_domain(&m, 1, plan.deficit - pending, plan.phase,
				 ev->cfg.policy, ev->picks, (size_t)n,
				 &covered);
	p.plan = &plan;
	for (int k = 0; k < n; k++)
		if (!evictor_post(ev, ev->picks[k].idx, &p))
			break;
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
	struct ctl_exit ex;

	/* the executor is gone with its page open: the page's end is told */
	if (ev->open &&
	    !control_exit_read(RC_PROC_ROOT, ev->pid, ev->pidfd, &ex) &&
	    ex.exiting) {
		drop_page(ev, "the executor exited");
		evictor_free(ev);
		return;
	}
	for (int i = 0; i < ev->nr_inflight; i++)
		done_event(ev, &ev->inflight[i],
			   ev->inflight[i].acked ? "ack_only" : "unacked");
	ev->nr_inflight = 0;
	if (ev->open) /* heartbeat and lock 0: the executor falls back at once */
		control_detach(&ev->ctl);
	ev->open = false;
	evictor_free(ev);
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
