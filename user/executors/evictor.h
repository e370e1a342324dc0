/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Eviction: attach to the executor's control page, decide from headroom and
 * its forecast what to evict, post commands, match acks, and trace each
 * command's latency (post -> ack from the executor's stamps, post -> RSS
 * drop from the kernel's rss_stat).
 */
#ifndef RAMCACHE_EVICT_H
#define RAMCACHE_EVICT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "page/control.h"
#include "core/announce.h"
#include "core/hist.h"
#include "core/outlook.h"
#include "core/reuse.h"
#include "emit/metrics.h"
#include "emit/out.h"
#include "core/policy.h"

#define EVICT_MAX_INFLIGHT 64
#define EVICT_MAX_COOLDOWN 64
#define EVICT_RECENT	   256 /* completed commands kept to judge late acks */
/*
 * Entries read and scored per evaluation: a bigger table is taken a window
 * at a time, the window moving on each evaluation, so one evaluation costs
 * about the same whatever size the executor gave its page.
 */
#define EVICT_MAX_SCORED 8192

struct inflight {
	uint64_t seq;
	uint64_t id;
	uint64_t bytes; /* as published */
	uint64_t issue_ns;
	uint64_t rss_peak; /* highest RSS seen since the post */
	uint64_t freed_ns; /* 0 until RSS dropped by half of bytes */
	uint64_t used_gen; /* the entry's used_generation when posted */
	/*
	 * The entry was active when posted, and still is as of @active_ns:
	 * the executor holds the command until its next safe point, and it
	 * does not time out while the entry stays active.
	 */
	bool active;
	uint64_t active_ns;
	bool acked;
	struct ctl_ack ack;
	uint64_t acked_at_ns; /* our clock, when we read the ack */
	char label[RAMCACHE_LABEL_LEN + 1];
};

/*
 * An entry not to command again until @until_ns (timed out, pinned), or,
 * when @until_inactive, until it stops being active: its flag cleared, its
 * used_generation no longer @gen, or gone from the table (answered busy).
 */
struct cooldown {
	uint64_t id;
	uint64_t until_ns;
	uint64_t gen;
	uint64_t bytes;
	bool until_inactive;
};

struct evict_stats {
	uint64_t sent;
	uint64_t acked;
	uint64_t by_status[5]; /* index: enum ramcache_status */
	uint64_t timeouts;
	uint64_t bytes_freed;
};

/* What the evictor needs of the command line. */
struct evict_cfg {
	const char *control; /* page file; NULL: the memfd in /proc/<pid>/fd */
	bool dry_run;
	enum rc_score_policy policy;
	uint64_t ack_timeout_ns;
};

struct evictor {
	struct evict_cfg cfg;
	struct out *out;
	struct metrics *m;
	unsigned int mslot; /* the executor's metrics slot (0 after init) */
	pid_t pid;
	pid_t self;	       /* the agent's pid, told in each heartbeat */
	struct ctl_target tgt; /* pid and uid here and in its namespaces */
	char path[PATH_MAX];   /* --control, or /proc/<pid>/fd to search */
	bool open;
	struct ctl ctl;
	enum ctl_why last_why; /* to warn once per reason */
	uint64_t next_open_ns;
	uint64_t next_beat_ns;
	uint32_t level; /* written to the page */
	uint64_t headroom, target;
	uint64_t rss;
	struct ctl_entry *entries;
	struct rc_entry *rce;
	struct rc_pick *picks;
	uint64_t pick_now;	   /* clock of the last evictor_candidates() */
	const struct out_tag *tag; /* set by the caller, or NULL */
	struct inflight inflight[EVICT_MAX_INFLIGHT];
	int nr_inflight;
	struct cooldown cool[EVICT_MAX_COOLDOWN];
	struct evict_stats st;
	struct hist ack_hist, freed_hist; /* usecs */
	/* commands of this page completed lately: a second ack is a dup */
	struct {
		uint64_t seq;
		bool acked;
	} recent[EVICT_RECENT];
	unsigned int recent_head;
	uint64_t acks_bad_told, acks_lost_told; /* of ctl.acks_bad/lost */
	uint64_t seq_base;     /* cmd_head when we opened the page */
	uint64_t earlier_acks; /* acks of commands an earlier agent posted */
	bool stalled;	       /* executor heartbeat stale: nothing is posted */
	bool locked;	       /* we hold the page's agent_lock */
	int pidfd;	       /* the executor's, owned by its target; or -1 */
	bool oom_killed;       /* the OOM killer chose the executor */
	bool short_told;       /* a cannot_free event for this episode is out */
	bool short_new;	       /* and the level has not been judged since */
	uint64_t held_read_ns; /* when held commands were last looked at */
	int nr_read;	       /* entries of the last window read */
	bool read_whole;       /* that window was the whole table */
	uint32_t win_start;    /* first slot of the table's next window */
	/*
	 * The target's outlook (may be NULL): told when a command goes out,
	 * what it freed and how long that took.
	 */
	struct rc_outlook *outlook;
	/*
	 * The executor's announcement of an allocation (announce.h): as last
	 * read; the stamp an evaluation counted and the one told back.
	 */
	struct rc_announce ann;
	bool ann_new; /* changed since the last evaluation */
	uint64_t ann_counted, ann_told;
	/* what the RSS grew by under this announcement, and under earlier ones */
	uint64_t ann_grown, ann_took;
	struct rc_reuse reuse; /* of the page's entries, this session */
	uint32_t reuse_seq;    /* entries_seq of the last table noted */
	uint32_t reuse_start;  /* next window of a big table to note */
};

/*
 * Set up for target @t. The page is the file at cfg->control, or else the
 * memfd found in the target's /proc/<pid>/fd.
 */
int evictor_init(struct evictor *ev, const struct evict_cfg *cfg,
		 struct out *out, struct metrics *m,
		 const struct ctl_target *t);
void evictor_free(struct evictor *ev);

/*
 * Periodic work at @now_ns: pick up or re-check the page, heartbeat, read
 * acks, time out lost commands.
 */
void evictor_tick(struct evictor *ev, uint64_t now_ns);

/*
 * When evictor_tick is next needed: the heartbeat, or the next look for
 * the page; 0 (as soon as possible) while commands are out.
 */
uint64_t evictor_next_ns(const struct evictor *ev);

/* What a post is part of, for its evict event. */
struct evict_post {
	const struct rc_plan *plan;
	uint64_t headroom; /* the (domain's) headroom planned with */
	uint64_t now;
	bool has_score; /* ranked across a domain: say by what */
	double score;
	const char *charged; /* "domain" or "own" (out.h) */
};

/*
 * The domain planner's view of this executor: read a window of its entry
 * table into the evictor and describe it in @m (weight 1, in-flight and
 * cooling entries excluded). No entry counts for more than @cap bytes
 * (the executor's RSS: a page may claim anything, and a claim bigger than
 * the memory the process holds would cover the deficit of others in its
 * domain); 0: no cap. Returns the entries read; 0 when the page is not
 * open, the executor stalled or the table unreadable.
 */
int evictor_candidates(struct evictor *ev, uint64_t now_ns, uint64_t cap,
		       struct rc_domain_member *m);

/*
 * Post entry @idx of the last evictor_candidates() read. False when no
 * more can go out now (the ring is full or the post failed).
 */
bool evictor_post(struct evictor *ev, uint32_t idx, const struct evict_post *p);

/*
 * Bytes the executor announced and its RSS does not show yet, at most
 * @cap (0: no cap). evictor_counted() after an evaluation that counted
 * them; evictor_tell() writes that back at once (expect_seen_ns, with the
 * plan), so the executor waiting on it goes on.
 */
uint64_t evictor_announced(const struct evictor *ev, uint64_t cap);
void evictor_counted(struct evictor *ev);
/*
 * The executor's RSS is @rss at @ts: what an announced load took of it
 * goes to the outlook (outlook_took()), not into its trend.
 */
void evictor_load_rss(struct evictor *ev, uint64_t ts_ns, uint64_t rss);
void evictor_tell(struct evictor *ev, uint64_t now_ns);

/*
 * What this executor could still free at @now without waiting for a job
 * to end: its inactive entries not commanded yet (no more than its RSS
 * each) and the commands out for inactive ones, not yet freed. Active
 * entries are not counted: they go at a safe point, if one comes in time.
 * Of a big table, the window evictor_candidates() reads next: it is read,
 * not moved on.
 */
uint64_t evictor_could_free(struct evictor *ev, uint64_t now_ns);

/* Bytes of commands out whose memory has not been seen freed yet. */
uint64_t evictor_pending(const struct evictor *ev);

/*
 * Of those, the bytes of commands not answered at @now though posted
 * EVICT_OVERDUE_NS ago or more (a fifth of the ack timeout): an executor
 * that answers answers sooner, one that takes commands and answers none
 * is seen for what it is long before they time out.
 */
uint64_t evictor_overdue(const struct evictor *ev, uint64_t now);

/* The headroom and bytes to free written with the next heartbeat. */
void evictor_set_plan(struct evictor *ev, uint64_t headroom, uint64_t target);

/* The target's RSS from BPF at @ts_ns, for post -> freed latencies. */
void evictor_rss(struct evictor *ev, uint64_t ts_ns, uint64_t rss);

/* Level to publish on the page. */
void evictor_set_level(struct evictor *ev, uint32_t level);

/*
 * In a domain that needs @wanted bytes and can get @wanted - @short_bytes:
 * say once per episode what of this executor's is out of reach (active,
 * held, busy, pinned), from its last evictor_candidates() read. @limit is
 * the domain's. evictor_short_over() ends the episode.
 */
void evictor_cannot_free(struct evictor *ev, uint64_t wanted,
			 uint64_t short_bytes, uint64_t limit);
void evictor_short_over(struct evictor *ev);

/* Close the page and report commands still in flight as lost. */
void evictor_finish(struct evictor *ev, uint64_t now_ns);

#endif /* RAMCACHE_EVICT_H */
