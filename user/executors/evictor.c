// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The evictor's session with a page: opening it (or refusing it, with the
 * reason), the heartbeat and the plan written to it, the executor's side
 * read back (a hung executor, an announcement), and how the page ends.
 * The commands out are evictor_cmds.c's, the entry table evictor_table.c's.
 */
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
#include "executors/evictor_priv.h"
#include "proc/meminfo.h"

#define OPEN_RETRY_NS (NSEC_PER_SEC / 2)

int evictor_init(struct evictor *ev, const struct evict_cfg *cfg,
		 struct out *out, struct metrics *m, const struct ctl_target *t)
{
	memset(ev, 0, sizeof(*ev));
	ev->cfg = *cfg;
	ev->out = out;
	ev->m = m;
	ev->pid = t->pid;
	ev->tgt = *t;
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

__attribute__((format(printf, 4, 5))) void evictor_anomaly(struct evictor *ev,
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
	evictor_close_inflight(ev, "page_dropped");
	control_close(&ev->ctl);
	ev->open = false;
	ev->stalled = false;
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
		evictor_anomaly(
			ev, METRICS_ANOM_CMD_DONE_AHEAD, ex->cmd_done,
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

void evictor_tick(struct evictor *ev, uint64_t now)
{
	struct ctl_exec ex;
	int err;

	if (!ev->open) {
		if (now >= ev->next_open_ns)
			try_open(ev, now);
		if (!ev->open) {
			evictor_complete(ev, now);
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
		evictor_complete(ev, now);
		return;
	}
	heartbeat(ev, now);
	/* the executor's side, read once for both */
	if (!control_read_exec(&ev->ctl, &ex)) {
		check_exec(ev, &ex, now);
		evictor_note_reuse(ev, &ex, now);
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
	evictor_read_acks(ev, now);
	evictor_refresh_held(ev, now);
	evictor_complete(ev, now);
}

uint64_t evictor_next_ns(const struct evictor *ev)
{
	if (ev->nr_inflight)
		return 0;
	return ev->open ? ev->next_beat_ns : ev->next_open_ns;
}

void evictor_set_plan(struct evictor *ev, uint64_t headroom, uint64_t target)
{
	ev->headroom = headroom;
	ev->target = target;
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
		evictor_done_event(ev, &ev->inflight[i],
				   ev->inflight[i].acked ? "ack_only"
							 : "unacked");
	ev->nr_inflight = 0;
	if (ev->open) /* heartbeat and lock 0: the executor falls back at once */
		control_detach(&ev->ctl);
	ev->open = false;
	evictor_free(ev);
}
