// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Taking on executors after start (--match, --all); see follow.h. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "executors/follow.h"
#include "page/control.h"
#include "proc/clock.h"
#include "proc/match.h"
#include "proc/readfile.h"

#define MATCH_PERIOD_NS NSEC_PER_SEC
#define SUBUID_PATH	"/etc/subuid"
#define PASSWD_PATH	"/etc/passwd"

#define for_each_target(ts, t, i)                \
	for (int i = 0; i < RC_MAX_TARGETS; i++) \
		if (((t) = (ts)->t[i]))

void follow_init(struct follow *f, enum follow_mode mode,
		 const struct match_spec *spec, struct targets *ts,
		 const struct target_env *env, struct out *out,
		 struct metrics *m, const struct follow_ops *ops, void *ctx)
{
	memset(f, 0, sizeof(*f));
	f->mode = mode;
	f->spec = *spec;
	f->ts = ts;
	f->env = env;
	f->out = out;
	f->m = m;
	f->ops = ops;
	f->ctx = ctx;
	admission_init(&f->adm, spec->has_uid, spec->uid);
}

/* Some of --match, --user, --cgroup was given: each newcomer is judged. */
static bool spec_filters(const struct match_spec *s)
{
	return s->pattern || s->has_uid || s->cgroup;
}

void follow_attach_failed(struct follow *f, pid_t pid, int err)
{
	if (err == -EACCES)
		out_warn(
			f->out,
			"not following pid %d: it changed its command line, user or cgroup while being attached",
			pid);
	else if (err == -ENOSPC)
		out_warn(
			f->out,
			"not following pid %d: already following %d executors, the most one agent can",
			pid, RC_MAX_TARGETS);
	else if (err != -ESRCH)
		out_warn(f->out, "failed to follow pid %d: %s", pid,
			 strerror(-err));
}

/* --match without --all: the oldest match, one at a time. */
static void find_match(struct follow *f, uint64_t now)
{
	struct target *t = NULL;
	const struct match_spec *s = &f->spec;
	struct match_result r;
	pid_t pid;
	int err;

	f->next_match_ns = now + MATCH_PERIOD_NS;
	pid = match_find(RC_PROC_ROOT, s, getpid(), &r);
	if (pid >= 0 && r.refused_pid && r.refused_pid != f->refused_told) {
		out_warn(
			f->out,
			"not following pid %d (uid %u): its command line holds '%s' but it is not %s",
			r.refused_pid, r.refused_uid, s->pattern,
			r.wrong_user ? "of --user" : "in --cgroup");
		f->refused_told = r.refused_pid;
	}
	if (pid <= 0)
		return;
	err = target_attach(f->ts, f->env, pid, s, &t);
	if (err) {
		follow_attach_failed(f, pid, err);
		return;
	}
	out_target_pick(f->out, pid, t->comm, s->pattern, &r);
}

/*
 * Why @pid of @who was not looked at or not followed (@n: its places),
 * told at most every ADMISSION_WARN_NS.
 */
static void tell_refusal(struct follow *f, pid_t pid, struct principal who,
			 enum admission_verdict v, int n, uint64_t now)
{
	char name[64];

	if (v == ADMISSION_OK || v == ADMISSION_PENDING ||
	    !admission_may_warn(&f->adm, v, now))
		return;
	principal_name(who, name, sizeof(name));
	if (v == ADMISSION_TOO_FAST)
		out_warn(
			f->out,
			"not following pid %d: %s starts executors faster than %.0f a second (--user lifts it for a user)",
			pid, name, ADMISSION_UID_RATE);
	else if (v == ADMISSION_TOO_DEAR)
		out_warn(
			f->out,
			"not following pid %d: looking at the processes of %s took its share of the agent's time (%d ms a second)",
			pid, name, (int)(ADMISSION_WORK_RATE / NSEC_PER_MSEC));
	else if (v == ADMISSION_QUEUE_FULL)
		out_warn(
			f->out,
			"not following pid %d: %s has %d reported pages waiting for a look already",
			pid, name, ADMISSION_PEND_PER_PRINCIPAL);
	else if (v == ADMISSION_USER_FULL)
		out_warn(
			f->out,
			"not following pid %d: %s already has %d executors followed, the most for one user or container (--user lifts it for a user)",
			pid, name, n);
}

/* Places taken by @who's executors. */
static int places_of(struct follow *f, struct principal who)
{
	struct target *t;
	int n = 0;

	for_each_target(f->ts, t, i)
		n += principal_eq(t->who, who);
	return n;
}

/*
 * --all: every place is taken: @pid waits for the next one that frees,
 * told once (a `control` event and ramcache_executors_refused_total).
 */
static void no_place(struct follow *f, pid_t pid)
{
	char path[64], why[160];
	struct control_info c = { .state = "refused",
				  .path = path,
				  .discovery = "memfd",
				  .pid = pid,
				  .ns_pid = pid,
				  .why = why };

	admission_refused(&f->adm);
	if (!admission_wait(&f->adm, pid))
		return;
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	snprintf(why, sizeof(why),
		 "no place: following %d executors, the most this agent can "
		 "(MAX_EXECUTORS); it takes the next place that frees",
		 RC_MAX_TARGETS);
	out_control(f->out, &c);
	metrics_executor_refused(f->m);
	metrics_set_waiting(f->m, (uint64_t)f->adm.nwaiting);
}

/*
 * --all: may @pid (of @who, first looked at in @l) take a place, and does
 * it hold a page that passes every check? 0: yes (*@sp: the filter it
 * passed, or NULL), 1: no, never (stop looking), -1: not yet (its page is
 * not there, or not made yet: the kernel reports it at memfd_create(),
 * before it is sized and sealed; the uprobe's are looked at again for
 * ADMISSION_PEND_NS, a scan's at the next scan).
 */
static int may_adopt(struct follow *f, pid_t pid, const struct discover_look *l,
		     struct principal who, const struct match_spec **sp)
{
	uint64_t now = now_ns();
	enum admission_verdict v;
	int err;

	*sp = NULL;
	if (spec_filters(&f->spec)) {
		*sp = &f->spec;
		if (match_verify(RC_PROC_ROOT, *sp, pid, -1))
			return 1; /* not ours, or gone: nothing to tell */
	}
	if (l->fds > CONTROL_MAX_FDS) {
		if (admission_may_warn(&f->adm, ADMISSION_WARN_FDS, now))
			out_warn(
				f->out,
				"not following pid %d: it holds %u descriptors, more than the %d looked through for a page",
				pid, l->fds, CONTROL_MAX_FDS);
		return 1;
	}
	f->ops->reap(f->ctx);
	/* a full share is refused before its page is looked for */
	v = admission_check(&f->adm, who, places_of(f, who));
	if (v != ADMISSION_OK) {
		tell_refusal(f, pid, who, v, places_of(f, who), now);
		return 1;
	}
	err = discover_verify(RC_PROC_ROOT, pid);
	if (err == -EMFILE &&
	    admission_may_warn(&f->adm, ADMISSION_WARN_FDS, now))
		out_warn(
			f->out,
			"not following pid %d: it holds more than %d descriptors, the most looked through for a page",
			pid, CONTROL_MAX_FDS);
	if (err) /* none, or one still being made: look again */
		return err == -ENOENT || err == -EAGAIN ? -1 : 1;
	return 0;
}

/*
 * Follow @pid of @who, found @how, filtered by @sp; reported by the libc
 * probe of cookie @probe (0: found otherwise).
 */
static void take_on(struct follow *f, pid_t pid, struct principal who,
		    const struct match_spec *sp, const char *how,
		    uint32_t probe)
{
	uint64_t now = now_ns();
	struct target *t;
	int err;

	err = target_attach(f->ts, f->env, pid, sp, &t);
	if (err == -ENOSPC) {
		no_place(f, pid);
		return;
	}
	if (err) {
		if (err != -EACCES &&
		    admission_may_warn(&f->adm, ADMISSION_WARN_ATTACH, now))
			follow_attach_failed(f, pid, err);
		return;
	}
	t->who = who;
	t->libc = discover_hold(&f->disc, probe);
	discover_follow(&f->disc, pid, true);
	admission_settled(&f->adm, pid);
	metrics_set_waiting(f->m, (uint64_t)f->adm.nwaiting);
	out_target_found(f->out, pid, &t->tag, t->weight, how);
	f->ops->adopted(f->ctx, now);
}

/*
 * --all: follow @pid if the rules accept it and it holds a page (see
 * may_adopt()); @how it was found. First a cheap look through a pidfd
 * (its status, the size of its descriptor table): the time the looks take
 * is charged to the principal it belongs to. @spend: the look is not paid
 * for yet (a scan found it; the kernel's reports are paid for when they
 * come). True when it is followed or can never be (stop looking).
 */
static bool adopt(struct follow *f, pid_t pid, const char *how, bool spend,
		  uint32_t probe)
{
	uint64_t t0 = now_ns();
	const struct match_spec *sp;
	struct discover_look l;
	struct principal who;
	int verdict;

	if (pid == getpid() || targets_find(f->ts, pid))
		return true;
	if (discover_first_look(RC_PROC_ROOT, pid, &l))
		return true; /* gone */
	who = admission_principal(&f->adm, l.uid, l.pidns);
	if (spend) {
		enum admission_verdict v = admission_may_look(&f->adm, who, t0);

		if (v != ADMISSION_OK) {
			tell_refusal(f, pid, who, v, 0, t0);
			return true;
		}
	}
	verdict = may_adopt(f, pid, &l, who, &sp);
	admission_charge(&f->adm, who, now_ns() - t0, now_ns());
	if (!verdict)
		take_on(f, pid, who, sp, how, probe);
	return verdict >= 0;
}

/*
 * A place freed: the executors refused one for lack of it take it, the
 * longest waiting first, at once (not at the next look through /proc).
 */
static void take_waiting(struct follow *f)
{
	pid_t pid;

	if (f->taking)
		return; /* a target reaped in adopt() frees a place too */
	f->taking = true;
	while (f->ts->n < RC_MAX_TARGETS &&
	       (pid = admission_next_waiting(&f->adm)))
		adopt(f, pid, "waiting", false, 0);
	f->taking = false;
	metrics_set_waiting(f->m, (uint64_t)f->adm.nwaiting);
}

/*
 * The reported pages waiting for a look: a few each turn, within
 * ADMISSION_TURN_NS, the longest waiting first.
 */
static void retry_pending(struct follow *f, uint64_t now)
{
	pid_t pids[ADMISSION_LOOKS_PER_TURN];
	int n = admission_pending(&f->adm, now, pids, ADMISSION_LOOKS_PER_TURN);

	for (int i = 0; i < n; i++) {
		if (adopt(f, pids[i], "uprobe", false,
			  admission_probe(&f->adm, pids[i])))
			admission_looked(&f->adm, pids[i]);
		if (now_ns() - now >= ADMISSION_TURN_NS)
			break;
	}
}

/*
 * --all: a target whose page has been gone (or refused) for
 * ADMISSION_NO_PAGE_NS is no executor any more: let its place go.
 */
static void drop_pageless(struct follow *f, uint64_t now)
{
	struct target *t;

	if (f->mode != FOLLOW_ALL)
		return;
	for_each_target(f->ts, t, i)
		if (admission_pageless(&t->no_page_since,
				       !t->evicting || t->ev.open, now))
			f->ops->drop(f->ctx, t, "no_page");
}

/*
 * A look through /proc is at @pid: its descriptors are gone through only
 * when its principal's share of the time is not spent (a user's processes
 * holding thousands of descriptors spend their own share, nobody else's).
 * Reported by the kernel already: its own look takes it (told as found by
 * the uprobe, paid for once).
 */
static bool scan_may(pid_t pid, void *ctx)
{
	struct follow *f = ctx;
	struct discover_look l;

	f->scan_t0 = now_ns();
	if (targets_find(f->ts, pid) || admission_is_pending(&f->adm, pid) ||
	    discover_first_look(RC_PROC_ROOT, pid, &l))
		return false;
	f->scan_who = admission_principal(&f->adm, l.uid, l.pidns);
	/* more than a page is looked for among: not worth the walk */
	if (l.fds > CONTROL_MAX_FDS)
		return false;
	return admission_may_scan(&f->adm, f->scan_who, f->scan_t0);
}

static void scan_seen(pid_t pid, bool page, void *ctx)
{
	struct follow *f = ctx;
	uint64_t now = now_ns();
	struct target *t;
	char why[512];

	admission_charge(&f->adm, f->scan_who, now - f->scan_t0, now);
	if (!page)
		return;
	adopt(f, pid, "scan", true, 0);
	t = targets_find(f->ts, pid);
	if (!f->adm.uprobe || !t || t->libc)
		return;
	/* its libc too, so the next executors on it are reported at once */
	t->libc = discover_scan_found(&f->disc, RC_PROC_ROOT, pid,
				      admission_missed(&f->adm), why,
				      sizeof(why));
	if (why[0])
		out_warn(f->out, "%s", why);
}

/*
 * The kernel told of a page being made by @e->tgid: nothing of the
 * process is read here, only the admission's books (who made it, as the
 * kernel says, and whether they may have it looked at); it is looked at
 * from the pending list, a few each turn.
 */
static void page_reported(struct follow *f, const struct rc_discover_ev *e)
{
	struct principal who = admission_principal(&f->adm, e->uid, e->pidns);
	uint64_t now = now_ns(), wake = 0;
	enum admission_verdict v;

	v = admission_report(&f->adm, (pid_t)e->tgid, who, e->probe, now,
			     &wake);
	if (v != ADMISSION_OK && v != ADMISSION_PENDING) {
		tell_refusal(f, (pid_t)e->tgid, who, v, 0, now);
		return;
	}
	/* a calm loop may not wake for seconds: look soon */
	f->ops->wake_by(f->ctx, wake);
}

/*
 * The kernel told: a page was created, or a followed executor exec'd. At
 * most ADMISSION_REPORTS_PER_TURN are taken in one turn (the rest wait in
 * the ring for the next): the loop is everybody's.
 */
static int handle_discover(void *ctx, void *data, size_t len)
{
	const struct rc_discover_ev *e = data;
	struct follow *f = ctx;
	struct target *t;

	if (len < sizeof(*e) || !e->tgid || e->tgid > INT32_MAX)
		goto next;
	t = targets_find(f->ts, (pid_t)e->tgid);
	if (e->kind == RC_DISC_PAGE && !t) {
		page_reported(f, e);
	} else if (e->kind == RC_DISC_EXEC && t) {
		/* its page went with the old image, unless it was inherited */
		f->ops->drop(f->ctx, t, "exec");
		page_reported(f, e);
	}
next:
	return ++f->disc_taken < ADMISSION_REPORTS_PER_TURN ? 0 : -EAGAIN;
}

void follow_take_reports(struct follow *f)
{
	f->disc_taken = 0;
	discover_events_consume(&f->disc);
}

static const struct discover_scan_ops scan_ops = { .may = scan_may,
						   .seen = scan_seen };

/*
 * --all: once at start, then slowly, for what the uprobe cannot see, and
 * at once when the kernel's reports were lost to a full ring (a burst of
 * memfd_create or execve while the loop was busy); a look takes at most
 * ADMISSION_SCAN_SLICE_NS of the loop at a time.
 */
static void rescan(struct follow *f, uint64_t now)
{
	uint64_t lost, until;

	if (f->mode != FOLLOW_ALL)
		return;
	lost = admission_lost(
		&f->adm, f->adm.uprobe ? discover_drops(&f->disc) : 0, now);
	if (lost)
		out_warn(
			f->out,
			"%" PRIu64
			" discovery reports lost (ring full); looking through /proc now",
			lost);
	if (!admission_scan_due(&f->adm, now, &until))
		return;
	discover_scan(RC_PROC_ROOT, getpid(), &f->adm.scan_from, until,
		      &scan_ops, f);
	admission_scanned(&f->adm, now);
}

/*
 * /etc/subuid, with /etc/passwd for the names in it: the subordinate uids
 * of a user (their rootless containers') count as that user.
 */
static void load_subuids(struct admission *ad)
{
	char *sub = NULL, *pw = NULL;

	if (readfile_alloc(SUBUID_PATH, 1 << 20, &sub))
		return;
	if (readfile_alloc(PASSWD_PATH, 16 << 20, &pw))
		pw = NULL;
	subuids_parse(&ad->subuids, sub, pw);
	free(sub);
	free(pw);
}

int follow_discovery(struct follow *f, int epfd, uint32_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };
	char why[512] = "";
	int err;

	load_subuids(&f->adm);
	f->adm.own_pidns = discover_own_pidns();
	err = discover_open(&f->disc, why, sizeof(why));
	if (!err) /* a ring of its own, taken from with a budget per turn */
		err = discover_events_open(&f->disc, handle_discover, f);
	if (!err && epoll_ctl(epfd, EPOLL_CTL_ADD,
			      discover_events_epoll_fd(&f->disc), &ev))
		err = -errno;
	if (err) {
		out_warn(
			f->out,
			"%s; new executors are found by looking through /proc every %d s instead",
			why[0] ? why : "failed to watch memfd_create",
			(int)(ADMISSION_RESCAN_BLIND_NS / NSEC_PER_SEC));
		discover_close(&f->disc);
		return -1;
	}
	f->adm.uprobe = true;
	if (why[0])
		out_warn(f->out, "%s", why);
	return 0;
}

void follow_prune(struct follow *f)
{
	int n = f->adm.nwaiting;

	for (int i = n - 1; i >= 0; i--)
		if (kill(f->adm.waiting[i], 0) && errno == ESRCH)
			admission_settled(&f->adm, f->adm.waiting[i]);
	if (f->adm.nwaiting != n)
		metrics_set_waiting(f->m, (uint64_t)f->adm.nwaiting);
}

/* Every second: what each principal's looks cost, into the metrics. */
static void count_principals(struct follow *f, uint64_t now)
{
	char name[METRICS_PRINCIPAL_LEN];

	if (now < f->metrics_ns + NSEC_PER_SEC)
		return;
	f->metrics_ns = now;
	for (unsigned int i = 0; i < RC_MAX_TARGETS; i++) {
		const struct admission_budget *b = &f->adm.budget[i];

		if (!b->at_ns) {
			metrics_principal_set(f->m, i, NULL, 0, 0, 0);
			continue;
		}
		principal_name(b->who, name, sizeof(name));
		metrics_principal_set(f->m, i, name, b->spent_ns, b->looks,
				      b->deferred);
	}
}

void follow_tick(struct follow *f, uint64_t now)
{
	if (f->mode == FOLLOW_MATCH && !f->ts->n && now >= f->next_match_ns)
		find_match(f, now);
	if (f->mode != FOLLOW_ALL)
		return;
	rescan(f, now);
	retry_pending(f, now);
	drop_pageless(f, now);
	count_principals(f, now);
}

int follow_wakes(const struct follow *f, uint64_t now, struct cadence_due *d)
{
	if (f->mode == FOLLOW_MATCH && !f->ts->n) {
		d[0] = (struct cadence_due){ f->next_match_ns,
					     CADENCE_SLACK_NS };
		return 1;
	}
	if (f->mode == FOLLOW_ALL)
		return admission_wakes(&f->adm, now, d);
	return 0;
}

void follow_gone(struct follow *f, const struct target *t)
{
	discover_follow(&f->disc, t->pid, false);
	discover_release(&f->disc, t->libc);
}

void follow_freed(struct follow *f)
{
	if (f->mode != FOLLOW_ALL)
		return;
	admission_place_freed(&f->adm, now_ns());
	take_waiting(f);
}

uint64_t follow_lost(struct follow *f)
{
	return f->adm.uprobe ? discover_drops(&f->disc) : 0;
}

void follow_close(struct follow *f)
{
	discover_close(&f->disc);
}
