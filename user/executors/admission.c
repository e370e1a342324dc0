// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --all: which executors are taken on, and when to look; see admission.h. */
#include <string.h>

#include "executors/admission.h"

void admission_init(struct admission *ad, bool has_user, uid_t user)
{
	memset(ad, 0, sizeof(*ad));
	ad->has_user = has_user;
	ad->user = user;
}

static bool exempt(const struct admission *ad, uid_t uid)
{
	return !uid || (ad->has_user && ad->user == uid);
}

/* The bucket of @uid, refilled to @now; the stalest one is reused. */
static double *tokens_of(struct admission *ad, uid_t uid, uint64_t now)
{
	int k = 0;

	for (int i = 0; i < RC_MAX_TARGETS; i++) {
		if (ad->budget[i].at_ns && ad->budget[i].uid == uid) {
			k = i;
			goto refill;
		}
		if (ad->budget[i].at_ns < ad->budget[k].at_ns)
			k = i;
	}
	ad->budget[k].uid = uid;
	ad->budget[k].tokens = ADMISSION_UID_BURST;
	ad->budget[k].at_ns = now;
refill:
	ad->budget[k].tokens +=
		(now - ad->budget[k].at_ns) / 1e9 * ADMISSION_UID_RATE;
	if (ad->budget[k].tokens > ADMISSION_UID_BURST)
		ad->budget[k].tokens = ADMISSION_UID_BURST;
	ad->budget[k].at_ns = now;
	return &ad->budget[k].tokens;
}

enum admission_verdict admission_check(struct admission *ad, uid_t uid, int n,
				       uint64_t now)
{
	double *t;

	if (exempt(ad, uid))
		return ADMISSION_OK;
	if (n >= ADMISSION_UID_MAX) {
		ad->refused = true;
		return ADMISSION_USER_FULL;
	}
	t = tokens_of(ad, uid, now);
	if (*t >= 1) {
		*t -= 1;
		return ADMISSION_OK;
	}
	ad->refused = true;
	return ADMISSION_TOO_FAST;
}

void admission_refused(struct admission *ad)
{
	ad->refused = true;
}

bool admission_may_warn(struct admission *ad, uint64_t now)
{
	if (now < ad->next_warn_ns)
		return false;
	ad->next_warn_ns = now + ADMISSION_WARN_NS;
	return true;
}

void admission_place_freed(struct admission *ad, uint64_t now)
{
	uint64_t at = ad->last_scan_ns + ADMISSION_RESCAN_LOST_NS;

	if (!ad->refused)
		return;
	ad->refused = false;
	if (at < now)
		at = now;
	if (at < ad->next_scan_ns) {
		ad->next_scan_ns = at;
		ad->scan_for_lost = true;
	}
}

uint64_t admission_pend(struct admission *ad, pid_t pid, uint64_t now)
{
	for (int i = 0; i < ad->npend; i++)
		if (ad->pend[i].pid == pid)
			return 0;
	if (ad->npend == RC_MAX_TARGETS) /* full: the oldest goes */
		memmove(ad->pend, ad->pend + 1,
			(size_t)--ad->npend * sizeof(ad->pend[0]));
	ad->pend[ad->npend].pid = pid;
	ad->pend[ad->npend].until_ns = now + ADMISSION_PEND_NS;
	ad->npend++;
	return now + ADMISSION_PEND_FIRST_NS;
}

int admission_pending(struct admission *ad, uint64_t now, pid_t *pids)
{
	int k = 0;

	for (int i = 0; i < ad->npend; i++)
		if (now < ad->pend[i].until_ns)
			ad->pend[k++] = ad->pend[i];
	ad->npend = k;
	for (int i = 0; i < k; i++)
		pids[i] = ad->pend[i].pid;
	return k;
}

void admission_settled(struct admission *ad, pid_t pid)
{
	int k = 0;

	for (int i = 0; i < ad->npend; i++)
		if (ad->pend[i].pid != pid)
			ad->pend[k++] = ad->pend[i];
	ad->npend = k;
	k = 0;
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
	if (ad->npend)
		d[n++] = (struct cadence_due){ now + ADMISSION_PEND_RETRY_NS,
					       0 };
	return n;
}
