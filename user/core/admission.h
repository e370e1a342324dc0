/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --all: which executors the agent takes on, and when it looks for them.
 * Pure: the agent reads /proc, attaches and warns; this module keeps the
 * reports whose page is not ready yet, each user's budget, the schedule of
 * the looks through /proc, the lost kernel reports and the refusals, and
 * says what to do (adopt these, drop that, look at T).
 */
#ifndef RAMCACHE_ADMISSION_H
#define RAMCACHE_ADMISSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/types.h>

#include "core/cadence.h"
#include "core/units.h"
#include "core/principal.h"
#include "pressure.h"

/*
 * /proc is looked through once at start, then only this often, for the
 * executors the uprobe cannot see (another libc: a container's, a static
 * binary); every ADMISSION_RESCAN_BLIND_NS when the uprobe is not attached.
 */
#define ADMISSION_RESCAN_NS	  (30 * NSEC_PER_SEC)
#define ADMISSION_RESCAN_BLIND_NS (2 * NSEC_PER_SEC)
/* a look takes at most a slice of the loop at a time, this far apart */
#define ADMISSION_SCAN_SLICE_NS (20 * NSEC_PER_MSEC)
#define ADMISSION_SCAN_GAP_NS	(50 * NSEC_PER_MSEC)
/* a look at once when the kernel's reports were lost, at most this often */
#define ADMISSION_RESCAN_LOST_NS (5 * NSEC_PER_SEC)
/*
 * A page reported by the uprobe is looked for this long from the first
 * look at it (it is being made); a report is never let go unexamined.
 */
#define ADMISSION_PEND_NS (2 * NSEC_PER_SEC)
/* a report again (an exec, then its page) looks on, this long at most */
#define ADMISSION_PEND_MAX_NS	(2 * ADMISSION_PEND_NS)
#define ADMISSION_PEND_FIRST_NS (5 * NSEC_PER_MSEC) /* the first look again */
#define ADMISSION_PEND_RETRY_NS (50 * NSEC_PER_MSEC)
/* A target without a page this long is let go. */
#define ADMISSION_NO_PAGE_NS (5 * NSEC_PER_SEC)
/*
 * Processes of one principal (a user, with its subordinate uids, or a
 * container) the agent may look at, per second and at once: any process
 * can call memfd_create("ramcache"), and each report or find costs a look
 * at the process (its status, descriptors and page) before anything else.
 * A report past the rate waits in its principal's queue; the principals
 * with reports due take turns (round-robin), so that one user's reports
 * never delay another's by more than a turn each.
 */
#define ADMISSION_UID_RATE  10.0
#define ADMISSION_UID_BURST 16.0
/*
 * And the time those looks may take: a principal whose processes are dear
 * to look at (thousands of descriptors) waits until its share of the loop
 * is back, 2% of the time, at most 200 ms at once. The looks through /proc
 * pay from the same share: the processes of a principal whose share is
 * spent are passed by until the next look.
 */
#define ADMISSION_WORK_RATE  (20 * NSEC_PER_MSEC) /* per second */
#define ADMISSION_WORK_BURST (200 * NSEC_PER_MSEC)
/* Places one principal's executors may take (root and --user: all). */
#define ADMISSION_UID_MAX (RC_MAX_TARGETS / 4)
/* Reported pages of one principal waiting for a look (its places). */
#define ADMISSION_PEND_PER_PRINCIPAL ADMISSION_UID_MAX
/*
 * In one turn of the loop: the kernel's reports taken from its ring, the
 * processes looked at and the time those looks may take, so that signals,
 * summaries and heartbeats are never more than a turn away.
 */
#define ADMISSION_REPORTS_PER_TURN 256
#define ADMISSION_LOOKS_PER_TURN   8
#define ADMISSION_TURN_NS	   (5 * NSEC_PER_MSEC)
/* At most this often a warning about executors not followed. */
#define ADMISSION_WARN_NS (10 * NSEC_PER_SEC)

/* Why a process was not looked at or was refused a place. */
enum admission_verdict {
	ADMISSION_OK = 0,
	ADMISSION_TOO_FAST,   /* more looks than ADMISSION_UID_RATE a second */
	ADMISSION_TOO_DEAR,   /* its looks took their share of the loop */
	ADMISSION_USER_FULL,  /* ADMISSION_UID_MAX places are its already */
	ADMISSION_PENDING,    /* reported again while it waits for a look */
	ADMISSION_QUEUE_FULL, /* ADMISSION_PEND_PER_PRINCIPAL wait already */
	ADMISSION_VERDICTS
};

/*
 * What a warning about a process not followed tells: a verdict above, or
 * one of these. Each kind has its own period, so that one reason told
 * often (a user starting executors too fast) never hides another (the
 * same user's places all taken).
 */
enum {
	ADMISSION_WARN_FDS = ADMISSION_VERDICTS, /* too many descriptors */
	ADMISSION_WARN_ATTACH,			 /* following it failed */
	ADMISSION_WARN_KINDS
};

/* A page reported by the kernel, waiting for a look. */
struct admission_pend {
	pid_t pid;
	struct principal who;
	uint32_t probe;	   /* which probe reported it (its cookie) */
	bool looked;	   /* looked at once at least */
	uint64_t since_ns; /* first reported */
	uint64_t until_ns; /* given up then, once looked at */
	uint64_t next_ns;  /* the next look */
};

/* A principal's share of the looks, and what it spent (the metrics). */
struct admission_budget {
	struct principal who;
	double tokens;	   /* looks */
	int64_t work_ns;   /* time for looks */
	uint64_t at_ns;	   /* last refill, 0: a free entry */
	uint64_t turn;	   /* the turn its last report was looked at in */
	uint64_t spent_ns; /* time its looks took, in all */
	uint64_t looks;	   /* processes of it looked at */
	uint64_t deferred; /* looks put off: its share was spent */
};

struct admission {
	bool uprobe;   /* the kernel reports new pages (else: looks only) */
	bool has_user; /* --user: its uid is exempt from the limits */
	uid_t user;
	struct subuids subuids; /* /etc/subuid, as read at start */
	uint64_t own_pidns;	/* the agent's outermost pid namespace, or 0 */
	uint64_t next_scan_ns;	/* the next look through /proc */
	uint64_t last_scan_ns;
	pid_t scan_from;       /* a look under way: the last pid looked at */
	uint64_t scan_more_ns; /* when it goes on */
	unsigned int scans;    /* looks done to the end */
	uint64_t lost;	       /* kernel reports lost, as last acted on */
	bool scan_for_lost;    /* this look makes up for lost reports */
	bool refused;	       /* an executor was refused a place since */
	uint64_t turns;	       /* reports looked at, in all: the turn */
	/* refused for lack of a place, oldest first: they take the next */
	pid_t waiting[RC_MAX_TARGETS];
	int nwaiting;
	struct admission_pend pend[RC_MAX_TARGETS]; /* reported, not ready */
	int npend;
	uint64_t next_warn_ns[ADMISSION_WARN_KINDS]; /* per kind */
	/* per principal (root and --user: counted, never limited) */
	struct admission_budget budget[RC_MAX_TARGETS];
};

/*
 * Empty state; @has_user and @user as --user. A look is due at once; the
 * caller sets ad->uprobe once the kernel's reports are on.
 */
void admission_init(struct admission *ad, bool has_user, uid_t user);

/* Who answers for a process of real uid @uid in pid namespace @pidns. */
struct principal admission_principal(const struct admission *ad, uint32_t uid,
				     uint64_t pidns);

/* root and --user's uid are held to no limit. */
bool admission_exempt(const struct admission *ad, struct principal who);

/*
 * May a process of @who that a look through /proc found holding a page
 * be looked at, at @now? Spends one of its looks when it may; when it may
 * not, the next look through /proc finds it again.
 */
enum admission_verdict admission_may_look(struct admission *ad,
					  struct principal who, uint64_t now);

/*
 * May the look through /proc go through the descriptors of a process of
 * @who at @now? Not while its principal's share of the time is spent
 * (counted as put off).
 */
bool admission_may_scan(struct admission *ad, struct principal who,
			uint64_t now);

/* A look at a process of @who took @ns: its share of the loop pays. */
void admission_charge(struct admission *ad, struct principal who, uint64_t ns,
		      uint64_t now);

/*
 * May an executor of @who take a place, @n of its being followed? One
 * principal holds at most ADMISSION_UID_MAX: any process can make a memfd
 * named "ramcache", and one user's must not keep out everybody else's.
 */
enum admission_verdict admission_check(struct admission *ad,
				       struct principal who, int n);

/* An executor was refused a place for lack of one. */
void admission_refused(struct admission *ad);

/*
 * @pid was refused a place because every one is taken: it waits for the
 * next one that frees (oldest first; when RC_MAX_TARGETS wait, the oldest
 * is forgotten, and a look through /proc finds it again). Returns true
 * when it was not waiting yet: tell the refusal once.
 */
bool admission_wait(struct admission *ad, pid_t pid);

/*
 * The executor to offer a freed place to (the longest waiting), taken
 * off the list, or 0 when none waits.
 */
pid_t admission_next_waiting(struct admission *ad);

/*
 * True at most every ADMISSION_WARN_NS for each @kind (a verdict or an
 * ADMISSION_WARN_*): tell a refusal of that kind now.
 */
bool admission_may_warn(struct admission *ad, unsigned int kind, uint64_t now);

/*
 * A place came free: when an executor was refused one since, the next
 * look is brought forward to now (at most every ADMISSION_RESCAN_LOST_NS
 * after the last).
 */
void admission_place_freed(struct admission *ad, uint64_t now);

/*
 * The kernel reported a page made by @pid of @who (through probe @probe):
 * nothing of the process is read here, nothing is spent. Unless it is
 * pending already or @who has ADMISSION_PEND_PER_PRINCIPAL waiting, it
 * waits for its look (admission_pending), and *@wake is when to look
 * first. When the list is full, the oldest report of the principal with
 * the most waiting goes.
 */
enum admission_verdict admission_report(struct admission *ad, pid_t pid,
					struct principal who, uint32_t probe,
					uint64_t now, uint64_t *wake);

/* The probe that reported pending @pid, 0 if it is not pending. */
uint32_t admission_probe(const struct admission *ad, pid_t pid);

/* Is @pid reported by the kernel and waiting for its look? */
bool admission_is_pending(const struct admission *ad, pid_t pid);

/*
 * At most @max pending pids to look at at @now, into @pids: of the
 * principals with a report due and looks left, the one whose turn came
 * longest ago first (its report due earliest), each pid spending one of
 * its principal's looks; a principal with none left waits for its share
 * (its reports stay). Each is looked at again ADMISSION_PEND_RETRY_NS
 * later unless settled, and forgotten ADMISSION_PEND_NS after its first
 * look. Returns how many.
 */
int admission_pending(struct admission *ad, uint64_t now, pid_t *pids, int max);

/* @pid is followed, or never can be: stop looking at it (and waiting). */
void admission_settled(struct admission *ad, pid_t pid);

/*
 * The report of @pid was looked at to the end (followed, refused, or
 * waiting for a place): it is no longer pending.
 */
void admission_looked(struct admission *ad, pid_t pid);

/*
 * The kernel's reports lost so far is @lost: when more than last time and
 * the last look was ADMISSION_RESCAN_LOST_NS ago, a look is due at once.
 * Returns how many were newly lost (tell it), or 0.
 */
uint64_t admission_lost(struct admission *ad, uint64_t lost, uint64_t now);

/*
 * A slice of a look through /proc is due at @now: the caller looks from
 * ad->scan_from on (which it advances; 0 when done) until *until, then
 * calls admission_scanned().
 */
bool admission_scan_due(struct admission *ad, uint64_t now, uint64_t *until);
void admission_scanned(struct admission *ad, uint64_t now);

/*
 * An executor found by a look should have been reported by the kernel:
 * the uprobe was on and this look is neither the first nor one making up
 * for lost reports.
 */
bool admission_missed(const struct admission *ad);

/*
 * A target's page is there (@has_page) or not at @now, its *@since kept
 * by the caller: true when it has been gone ADMISSION_NO_PAGE_NS (let the
 * target go).
 */
bool admission_pageless(uint64_t *since, bool has_page, uint64_t now);

/*
 * When the loop must wake for admission (the next look, or its next
 * slice, and the pending reports), into @d; returns how many (at most 2).
 */
int admission_wakes(const struct admission *ad, uint64_t now,
		    struct cadence_due *d);

#endif /* RAMCACHE_ADMISSION_H */
