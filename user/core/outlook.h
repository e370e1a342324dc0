/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The outlook of one executor's headroom: a transient spike told from a
 * trend. Pure: the caller pushes samples and what its commands freed and
 * took; nothing here reads a file or a clock.
 *
 * An executor's memory has a rhythm: a node allocates, and frees what it
 * does not keep when it ends; the output it keeps is what stays. So the
 * headroom series is read in two parts:
 *   - the settled headroom: the highest headroom of the last
 *     RC_OUTLOOK_SETTLE_NS (a dip shorter than that leaves it alone);
 *   - the trend: the least-squares slope over the last RC_OUTLOOK_TREND_NS
 *     of the highest headroom of each RC_OUTLOOK_BUCKET_NS: a climb moves
 *     it at its rate, a spike of a fraction of a second only a little;
 *   - the spike: the most memory the executor took within
 *     RC_OUTLOOK_GIVEBACK_NS and gave back within as long, over the last
 *     RC_OUTLOOK_SPIKE_NS (a long climb released at once is no spike;
 *     memory freed by the agent's own commands never counts: it is taken
 *     out of the series, and the time around each command is not learnt
 *     from). The executor is expected to take that much again.
 * The lowest headroom expected within the lead time L is then
 *     low = headroom - max(0, spike - excursion) - max(0, -trend) x L
 * (excursion: how far below the settled headroom it is now, i.e. how much
 * of a spike is already taken). L is how fast the executor makes room: the
 * measured command -> memory freed latency (RC_OUTLOOK_LEAD_*), or the
 * horizon until a few are measured.
 *
 * Sizes are bytes, times nanoseconds.
 */
#ifndef RAMCACHE_OUTLOOK_H
#define RAMCACHE_OUTLOOK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/policy.h"

#define RC_OUTLOOK_BUCKET_NS   250000000ULL    /* one history slot */
#define RC_OUTLOOK_BUCKETS     480	       /* 2 min of slots */
#define RC_OUTLOOK_SETTLE_NS   2000000000ULL   /* a dip this short is a spike */
#define RC_OUTLOOK_GIVEBACK_NS 3000000000ULL   /* memory back within this */
#define RC_OUTLOOK_TREND_NS    3000000000ULL   /* the trend's window */
#define RC_OUTLOOK_ETA_NS      10000000000ULL  /* the level's trend window */
#define RC_OUTLOOK_SPIKE_NS    120000000000ULL /* spikes remembered this long */
/* Commands and what they freed: not learnt from this long either side. */
#define RC_OUTLOOK_QUIET_NS 1000000000ULL
/* Lead time: 2 x p90 latency + one evaluation, within [MIN, horizon]. */
#define RC_OUTLOOK_LEAD_LATS	    16
#define RC_OUTLOOK_LEAD_MIN_SAMPLES 3
#define RC_OUTLOOK_LEAD_MIN_NS	    100000000ULL
#define RC_OUTLOOK_LEAD_EVAL_NS	    50000000ULL

struct rc_outlook_slot {
	uint64_t t;	/* start of the slot */
	int64_t lo, hi; /* lowest and highest adjusted headroom in it */
	bool quiet;	/* a command was out: no spike learnt here */
};

struct rc_outlook {
	struct rc_outlook_slot s[RC_OUTLOOK_BUCKETS];
	unsigned int head, count; /* s[head - 1] is the newest */
	uint64_t freed;		  /* bytes our commands freed, all told */
	uint64_t took;		  /* bytes announced loads took, all told */
	uint64_t quiet_until;	  /* no spike learnt before this */
	uint64_t lat[RC_OUTLOOK_LEAD_LATS];
	unsigned int nr_lat, lat_head;
};

/* What the outlook says now. */
struct rc_view {
	uint64_t headroom;  /* as given */
	uint64_t settled;   /* the settled headroom */
	uint64_t excursion; /* settled - headroom (adjusted), 0 if above */
	uint64_t spike;	    /* the largest transient remembered */
	double trend;	  /* bytes/s of the settled headroom, < 0: shrinking */
	uint64_t lead_ns; /* L */
	uint64_t low;	  /* lowest headroom expected within L */
	bool has_eta;	  /* the headroom shrinks over RC_OUTLOOK_ETA_NS */
	uint64_t eta_ns;  /* until that leaves no room for the spike */
	uint32_t slots;	  /* history the view is made from */
};

void outlook_init(struct rc_outlook *o);

/* The headroom was @headroom at @t_ns (samples in time order). */
void outlook_push(struct rc_outlook *o, uint64_t t_ns, uint64_t headroom);

/*
 * A command posted at @post_ns was done at @now_ns and freed @bytes (0:
 * nothing freed). The bytes are taken out of the series from now on; the
 * time from the post to RC_OUTLOOK_QUIET_NS after now teaches no spike.
 */
void outlook_freed(struct rc_outlook *o, uint64_t post_ns, uint64_t now_ns,
		   uint64_t bytes);

/*
 * The executor's announced loads (announce.h) have taken @total bytes so
 * far, all told (it never goes back): that growth is taken out of the
 * series, as what commands freed is, so a load it said was coming is
 * neither a trend nor a spike. Nothing is learnt around it either.
 */
void outlook_took(struct rc_outlook *o, uint64_t now_ns, uint64_t total);

/* A command was posted at @now_ns: nothing is learnt while it is out. */
void outlook_posted(struct rc_outlook *o, uint64_t now_ns);

/* A command took @ns from its post until its memory was freed (or acked). */
void outlook_latency(struct rc_outlook *o, uint64_t ns);

/* The lead time now: see above; @horizon_ns until enough are measured. */
uint64_t outlook_lead(const struct rc_outlook *o, uint64_t horizon_ns);

/*
 * The view at @now_ns with the headroom now @headroom. Without history
 * (no sample pushed), low = headroom and no trend. Returns the number of
 * slots it used.
 */
uint32_t outlook_view(const struct rc_outlook *o, uint64_t now_ns,
		      uint64_t headroom, uint64_t horizon_ns,
		      struct rc_view *v);

/*
 * When to evict, and how much. The lowest headroom expected (v->low) is
 * compared with the reserves:
 *   < headroom_min: RC_PHASE_HEADROOM (inactive entries, then active ones)
 *   < inactive_min: RC_PHASE_INACTIVE (inactive entries only, no model
 *                   whose reload is known)
 * and the bytes asked for are the shortfall, reserve - low, plus the
 * margin outlook_margin() (so that the next spike's first samples do not
 * ask again at once); never a refill of the headroom to a threshold. The
 * reason is RECLAIM when the kernel already reclaims for the target, else
 * HEADROOM / INACTIVE when the headroom now is below the reserve, else
 * FORECAST.
 */
#define RC_OUTLOOK_MARGIN_MIN (16 * RC_MIB)
#define RC_OUTLOOK_MARGIN_DIV 4 /* margin: a quarter of headroom_min, or MIN */
uint64_t outlook_margin(const struct rc_thresholds *t);
void outlook_plan(const struct rc_view *v, const struct rc_thresholds *t,
		  bool reclaiming, struct rc_plan *p);

#endif /* RAMCACHE_OUTLOOK_H */
