// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --all: which executors are taken on, and when to look; see admission.h. */
#include <string.h>

#include "core/admission.h"

void admission_init(struct admission *ad, bool has_user, uid_t user)
{
	memset(ad, 0, sizeof(*ad));
	ad->has_user = has_user;
	ad->user = user;
}

struct principal admission_principal(const struct admission *ad, uint32_t uid,
				     uint64_t pidns)
{
	/* the agent's own container is the host, as it sees it */
	return principal_of(&ad->subuids, uid,
			    pidns == ad->own_pidns ? 0 : pidns);
}

bool admission_exempt(const struct admission *ad, struct principal who)
{
	return who.kind == PRINCIPAL_ROOT ||
	       (who.kind == PRINCIPAL_USER && ad->has_user &&
		who.id == ad->user);
}

/* The bucket of @who, refilled to @now; the stalest one is reused. */
static int bucket_of(struct admission *ad, struct principal who, uint64_t now)
{
	double dt;
	int k = 0;

	for (int i = 0; i < RC_MAX_TARGETS; i++) {
		if (ad->budget[i].at_ns &&
		    principal_eq(ad->budget[i].who, who)) {
			k = i;
			goto refill;
		}
		if (ad->budget[i].at_ns < ad->budget[k].at_ns)
			k = i;
	}
	memset(&ad->budget[k], 0, sizeof(ad->budget[k]));
	ad->budget[k].who = who;
	ad->budget[k].tokens = ADMISSION_UID_BURST;
	ad->budget[k].work_ns = ADMISSION_WORK_BURST;
	ad->budget[k].at_ns = now;
refill:
	dt = now > ad->budget[k].at_ns ? (now - ad->budget[k].at_ns) / 1e9 : 0;
	ad->budget[k].tokens += dt * ADMISSION_UID_RATE;
	if (ad->budget[k].tokens > ADMISSION_UID_BURST)
		ad->budget[k].tokens = ADMISSION_UID_BURST;
	ad->budget[k].work_ns += (int64_t)(dt * ADMISSION_WORK_RATE);
	if (ad->budget[k].work_ns > (int64_t)ADMISSION_WORK_BURST)
		ad->budget[k].work_ns = ADMISSION_WORK_BURST;
	if (now > ad->budget[k].at_ns)
		ad->budget[k].at_ns = now;
	return k;
}

/*
 * Bring the next look through /proc forward to @now, or to
 * ADMISSION_RESCAN_LOST_NS after the last when that is later: what it
 * finds makes up for processes refused a look or a place, not for
 * reports the uprobe missed.
 */
static void look_soon(struct admission *ad, uint64_t now)
{
	uint64_t at = ad->last_scan_ns + ADMISSION_RESCAN_LOST_NS;

	if (at < now)
		at = now;
	if (at < ad->next_scan_ns) {
		ad->next_scan_ns = at;
		ad->scan_for_lost = true;
	}
}

/* Why @b (of a limited principal) may not look now, or ADMISSION_OK. */
static enum admission_verdict spent(const struct admission_budget *b)
{
	if (b->work_ns <= 0)
		return ADMISSION_TOO_DEAR;
	return b->tokens < 1 ? ADMISSION_TOO_FAST : ADMISSION_OK;
}

/* When @b, spent at @now, has a look and time for it again. */
static uint64_t ready_at(const struct admission_budget *b, uint64_t now)
{
	double s = 0;

	if (b->tokens < 1)
		s = (1 - b->tokens) / ADMISSION_UID_RATE;
	if (b->work_ns <= 0 &&
	    (double)(1 - b->work_ns) / ADMISSION_WORK_RATE > s)
		s = (double)(1 - b->work_ns) / ADMISSION_WORK_RATE;
	return now + (uint64_t)(s * 1e9) + 1;
}

enum admission_verdict admission_may_look(struct admission *ad,
					  struct principal who, uint64_t now)
{
	int k = bucket_of(ad, who, now);
	enum admission_verdict v;

	if (!admission_exempt(ad, who)) {
		v = spent(&ad->budget[k]);
		if (v != ADMISSION_OK) { /* the next look through /proc */
			ad->budget[k].deferred++;
			return v;
		}
		ad->budget[k].tokens -= 1;
	}
	ad->budget[k].looks++;
	return ADMISSION_OK;
}

bool admission_may_scan(struct admission *ad, struct principal who,
			uint64_t now)
{
	int k = bucket_of(ad, who, now);

	if (admission_exempt(ad, who) || ad->budget[k].work_ns > 0) {
		ad->budget[k].looks++;
		return true;
	}
	ad->budget[k].deferred++;
	return false;
}

void admission_charge(struct admission *ad, struct principal who, uint64_t ns,
		      uint64_t now)
{
	int k = bucket_of(ad, who, now);

	ns = ns > INT32_MAX * NSEC_PER_SEC ? INT32_MAX * NSEC_PER_SEC : ns;
	ad->budget[k].spent_ns += ns;
	/* one look can overdraw: the next waits until it is paid back */
	if (!admission_exempt(ad, who))
		ad->budget[k].work_ns -= (int64_t)ns;
}

enum admission_verdict admission_check(struct admission *ad,
				       struct principal who, int n)
{
	if (admission_exempt(ad, who) || n < ADMISSION_UID_MAX)
		return ADMISSION_OK;
	ad->refused = true;
	return ADMISSION_USER_FULL;
}

void admission_refused(struct admission *ad)
{
	ad->refused = true;
}

bool admission_may_warn(struct admission *ad, unsigned int kind, uint64_t now)
{
	if (kind >= ADMISSION_WARN_KINDS || now < ad->next_warn_ns[kind])
		return false;
	ad->next_warn_ns[kind] = now + ADMISSION_WARN_NS;
	return true;
}

void admission_place_freed(struct admission *ad, uint64_t now)
{
	if (!ad->refused)
		return;
	ad->refused = false;
	look_soon(ad, now);
}

static int pending_of(const struct admission *ad, struct principal who)
{
	int n = 0;

	for (int i = 0; i < ad->npend; i++)
		n += principal_eq(ad->pend[i].who, who);
	return n;
}

/* The oldest report of the principal with the most waiting goes. */
static void forget_one(struct admission *ad)
{
	int most = 0, k = 0;

	for (int i = 0; i < ad->npend; i++) {
		int n = pending_of(ad, ad->pend[i].who);

		if (n > most) {
			most = n;
			k = i; /* the list is in report order: its oldest */
		}
	}
	memmove(ad->pend + k, ad->pend + k + 1,
		(size_t)(ad->npend - k - 1) * sizeof(ad->pend[0]));
	ad->npend--;
}

/*
 * Reported again while it waits (its exec, then the new image's page; the
 * page made again): looked at soon and for longer, free of charge (while
 * its principal's looks have time left), but never past
 * ADMISSION_PEND_MAX_NS from the first report.
 */
static void pend_again(struct admission_pend *p, uint32_t probe, uint64_t now,
		       uint64_t *wake)
{
	uint64_t last = p->since_ns + ADMISSION_PEND_MAX_NS;

	if (probe)
		p->probe = probe;
	p->until_ns = now + ADMISSION_PEND_NS < last ? now + ADMISSION_PEND_NS
						     : last;
	if (p->next_ns > now + ADMISSION_PEND_FIRST_NS)
		p->next_ns = now + ADMISSION_PEND_FIRST_NS;
	*wake = p->next_ns;
}

enum admission_verdict admission_report(struct admission *ad, pid_t pid,
					struct principal who, uint32_t probe,
					uint64_t now, uint64_t *wake)
{
	struct admission_pend *p;

	for (int i = 0; i < ad->npend; i++) {
		if (ad->pend[i].pid != pid)
			continue;
		if (ad->pend[i].looked && now >= ad->pend[i].until_ns) {
			admission_looked(ad, pid); /* given up: anew */
			break;
		}
		/* a principal whose looks took their share waits as it is */
		if (admission_exempt(ad, who) ||
		    ad->budget[bucket_of(ad, who, now)].work_ns > 0)
			pend_again(&ad->pend[i], probe, now, wake);
		return ADMISSION_PENDING;
	}
	/* its own queue is full: its own reports are let go, nobody else's
	 * (found by the next look through /proc, which is not brought
	 * forward for it) */
	if (!admission_exempt(ad, who) &&
	    pending_of(ad, who) >= ADMISSION_PEND_PER_PRINCIPAL)
		return ADMISSION_QUEUE_FULL;
	if (ad->npend == RC_MAX_TARGETS)
		forget_one(ad);
	p = &ad->pend[ad->npend++];
	*p = (struct admission_pend){ .pid = pid,
				      .who = who,
				      .probe = probe,
				      .since_ns = now,
				      .until_ns = now + ADMISSION_PEND_NS,
				      .next_ns =
					      now + ADMISSION_PEND_FIRST_NS };
	*wake = p->next_ns;
	return ADMISSION_OK;
}

bool admission_is_pending(const struct admission *ad, pid_t pid)
{
	for (int i = 0; i < ad->npend; i++)
		if (ad->pend[i].pid == pid)
			return true;
	return false;
}

uint32_t admission_probe(const struct admission *ad, pid_t pid)
{
	for (int i = 0; i < ad->npend; i++)
		if (ad->pend[i].pid == pid)
			return ad->pend[i].probe;
	return 0;
}

/*
 * The budget of pending @p, refilled to @now, when it may be looked at;
 * else NULL, and @p waits until its principal's share is back.
 */
static struct admission_budget *may_take(struct admission *ad,
					 struct admission_pend *p, uint64_t now)
{
	struct admission_budget *b = &ad->budget[bucket_of(ad, p->who, now)];

	if (admission_exempt(ad, p->who) || spent(b) == ADMISSION_OK)
		return b;
	p->next_ns = ready_at(b, now);
	b->deferred++;
	return NULL;
}

/* The due report to look at next (-1: none), its budget in *@bp. */
static int next_turn(struct admission *ad, uint64_t now,
		     struct admission_budget **bp)
{
	struct admission_budget *best_b = NULL;
	int best = -1;

	for (int i = 0; i < ad->npend; i++) {
		struct admission_pend *p = &ad->pend[i];
		struct admission_budget *b;

		if (p->next_ns > now || !(b = may_take(ad, p, now)))
			continue;
		/* the principal whose turn came longest ago; in it, the
		 * report due earliest */
		if (best < 0 || b->turn < best_b->turn ||
		    (b == best_b && p->next_ns < ad->pend[best].next_ns)) {
			best = i;
			best_b = b;
		}
	}
	*bp = best_b;
	return best;
}

int admission_pending(struct admission *ad, uint64_t now, pid_t *pids, int max)
{
	int k = 0, n = 0;

	/* given up ADMISSION_PEND_NS after a look; never unexamined */
	for (int i = 0; i < ad->npend; i++)
		if (!ad->pend[i].looked || now < ad->pend[i].until_ns)
			ad->pend[k++] = ad->pend[i];
	ad->npend = k;
	while (n < max) {
		struct admission_budget *b;
		struct admission_pend *p;
		int i = next_turn(ad, now, &b);

		if (i < 0)
			break;
		p = &ad->pend[i];
		if (!admission_exempt(ad, p->who))
			b->tokens -= 1;
		b->looks++;
		b->turn = ++ad->turns;
		if (!p->looked && p->until_ns < now + ADMISSION_PEND_NS)
			p->until_ns = now + ADMISSION_PEND_NS;
		p->looked = true;
		p->next_ns = now + ADMISSION_PEND_RETRY_NS;
		pids[n++] = p->pid;
	}
	return n;
}

void admission_looked(struct admission *ad, pid_t pid)
{
	int k = 0;

	for (int i = 0; i < ad->npend; i++)
		if (ad->pend[i].pid != pid)
			ad->pend[k++] = ad->pend[i];
	ad->npend = k;
}

void admission_settled(struct admission *ad, pid_t pid)
{
	int k = 0;

	admission_looked(ad, pid);
	for (int i = 0; i < ad->nwaiting; i++)
		if (ad->waiting[i] != pid)
			ad->waiting[k++] = ad->waiting[i];
	ad->nwaiting = k;
}

bool admission_wait(struct admission *ad, pid_t pid)
{
	for (int i = 0; i < ad->nwaiting; i++)
		if (ad->waiting[i] == pid)
			return false;
	if (ad->nwaiting == RC_MAX_TARGETS) /* full: the oldest goes */
		memmove(ad->waiting, ad->waiting + 1,
			(size_t)--ad->nwaiting * sizeof(ad->waiting[0]));
	ad->waiting[ad->nwaiting++] = pid;
	return true;
}

pid_t admission_next_waiting(struct admission *ad)
{
	pid_t pid;

	if (!ad->nwaiting)
		return 0;
	pid = ad->waiting[0];
	memmove(ad->waiting, ad->waiting + 1,
		(size_t)--ad->nwaiting * sizeof(ad->waiting[0]));
	return pid;
}

uint64_t admission_lost(struct admission *ad, uint64_t lost, uint64_t now)
{
	uint64_t n;

	if (lost <= ad->lost ||
	    now < ad->last_scan_ns + ADMISSION_RESCAN_LOST_NS)
		return 0;
	n = lost - ad->lost;
	ad->lost = lost;
	ad->next_scan_ns = now;
	ad->scan_for_lost = true;
	return n;
}

bool admission_scan_due(struct admission *ad, uint64_t now, uint64_t *until)
{
	if (!ad->scan_from) {
		if (now < ad->next_scan_ns)
			return false;
		ad->next_scan_ns = now + (ad->uprobe
						  ? ADMISSION_RESCAN_NS
						  : ADMISSION_RESCAN_BLIND_NS);
		ad->last_scan_ns = now;
	} else if (now < ad->scan_more_ns) {
		return false;
	}
	*until = now + ADMISSION_SCAN_SLICE_NS;
	return true;
}

void admission_scanned(struct admission *ad, uint64_t now)
{
	ad->scan_more_ns = now + ADMISSION_SCAN_GAP_NS;
	if (ad->scan_from)
		return;
	ad->scans++;
	ad->scan_for_lost = false;
}

bool admission_missed(const struct admission *ad)
{
	return ad->scans > 0 && !ad->scan_for_lost;
}

bool admission_pageless(uint64_t *since, bool has_page, uint64_t now)
{
	if (has_page) {
		*since = 0;
		return false;
	}
	if (!*since) {
		*since = now;
		return false;
	}
	return now - *since >= ADMISSION_NO_PAGE_NS;
}

int admission_wakes(const struct admission *ad, uint64_t now,
		    struct cadence_due *d)
{
	int n = 0;

	d[n++] = (struct cadence_due){ ad->scan_from ? ad->scan_more_ns
						     : ad->next_scan_ns,
				       ad->scan_from ? 0 : CADENCE_SLACK_NS };
	if (ad->npend) {
		uint64_t at = UINT64_MAX;

		for (int i = 0; i < ad->npend; i++)
			if (ad->pend[i].next_ns < at)
				at = ad->pend[i].next_ns;
		d[n++] = (struct cadence_due){ at > now ? at : now, 0 };
	}
	return n;
}
