/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Eviction policy and pressure maths: pure functions over plain structs.
 * Nothing here reads a file or a clock; the caller gathers the inputs
 * (meminfo.h, cgroup.h, the BPF events, the control page) and passes them in.
 * Every input may come from an untrusted control page: no function here
 * overflows, divides by zero or returns NaN/inf for any input.
 *
 * Sizes are bytes, times are nanoseconds.
 */
#ifndef RAMCACHE_POLICY_H
#define RAMCACHE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ramcache/control.h>

#include "core/units.h"

/* ------------------------------------------------------------------ */
/* Headroom and thresholds                                             */

/*
 * Bytes that can still be allocated before reclaim must work hard:
 * the lower of mem_available (system) and, when the cgroup has a limit
 * (< RC_LIMIT_UNLIMITED_MIN), limit - usage + cg_reclaimable (page cache
 * the kernel drops cheaply, policy_reclaimable()). Saturates at 0 and at
 * the limit (reclaimable cache cannot add room beyond the limit).
 */
uint64_t policy_headroom(uint64_t mem_available, uint64_t cg_limit,
			 uint64_t cg_usage, uint64_t cg_reclaimable);

/*
 * The cgroup's page cache the kernel takes back cheaply: its inactive file
 * pages less the file pages processes map (an executor's mapped model
 * weights are inactive until read twice, yet dropping them makes it fault
 * them back: not room).
 */
uint64_t policy_reclaimable(uint64_t inactive_file, uint64_t mapped_file);

/*
 * The two thresholds, as ComfyUI's --cache-ram: below inactive_min evict
 * inactive entries only (no model whose reload is known); below
 * headroom_min evict inactive, then active.
 * inactive_min >= headroom_min always (policy_thresholds_fix() enforces it).
 */
struct rc_thresholds {
	uint64_t headroom_min;
	uint64_t inactive_min;
};

/* ComfyUI's default headroom: min(10 GiB, max(2 GiB, 10% of RAM)). */
#define RC_HEADROOM_FLOOR   (2 * RC_GIB)
#define RC_HEADROOM_CEIL    (10 * RC_GIB)
#define RC_HEADROOM_PERCENT 10
/*
 * inactive_min = 2 x headroom_min: entries no running prompt needs are
 * cheap to drop, so shed them at twice the distance; that leaves the
 * active ones (whose loss costs the running prompt a recompute) for when
 * headroom has really halved again. Capped at half of RAM so a big box
 * does not drop its whole cache while half the memory is still free.
 */
#define RC_INACTIVE_FACTOR 2

/* Defaults for a machine with mem_total bytes of RAM. */
void policy_thresholds_default(uint64_t mem_total, struct rc_thresholds *t);

/*
 * Scale thresholds for a target inside a cgroup with limit cg_limit
 * (unlimited: unchanged). A 256 MiB memcg cannot keep 2 GiB free, so each
 * threshold becomes min(itself, RC_CGROUP_PERCENT of the limit) for the
 * headroom and twice that for the inactive one, with a floor of
 * RC_CGROUP_MIN_HEADROOM. The reserves are small because the outlook
 * (core/outlook.h) adds what the executor is expected to need on top:
 * its spikes and its trend over the lead time; a quarter of the limit
 * kept free on top of that evicted where everything fits. Explicit user
 * values should not be passed through this.
 */
#define RC_CGROUP_PERCENT      4
#define RC_CGROUP_MIN_HEADROOM (16 * RC_MIB)
void policy_thresholds_scale(uint64_t cg_limit, struct rc_thresholds *t);

/* Make inactive_min >= headroom_min. */
void policy_thresholds_fix(struct rc_thresholds *t);

/* What the thresholds in force are made of. */
struct rc_threshold_in {
	uint64_t mem_total;
	uint64_t cg_limit; /* of the target's memory cgroup; RC_UNLIMITED: none */
	bool headroom_set; /* --headroom */
	uint64_t headroom;
	bool inactive_set; /* --inactive */
	uint64_t inactive;
};

/*
 * The thresholds in force, for the whole system and for a target alike:
 * the defaults for mem_total, scaled to cg_limit; --headroom replaces
 * headroom_min and, unless --inactive is given too, sets inactive_min to
 * RC_INACTIVE_FACTOR x headroom; --inactive replaces inactive_min. Always
 * inactive_min >= headroom_min.
 */
void policy_thresholds_resolve(const struct rc_threshold_in *in,
			       struct rc_thresholds *t);

/* ------------------------------------------------------------------ */
/* Scoring and selection                                               */

/* Mirror of struct ramcache_ctl_entry, minus the label. */
struct rc_entry {
	uint64_t id;
	uint64_t bytes;
	uint64_t last_use_ns;
	uint64_t used_generation;
	uint64_t cost_ns; /* 0 = unknown */
	uint32_t flags;	  /* RAMCACHE_F_* */
	uint32_t reuse;	  /* later prompts that used it again (core/reuse.h) */
};

enum rc_score_policy {
	/*
	 * ComfyUI RAMPressureCache: 1.3^age x (bytes + 0.05). Upstream sums
	 * tensor bytes and adds a 0.05 baseline (so a zero-size entry still
	 * scores, its ties broken by last use), i.e. the unit is bytes.
	 */
	RC_POLICY_RAM = 0,
	/*
	 * ComfyUI ScoreCache: 1.3^age x (bytes + 0.05) / max(cost s, 1 ms):
	 * big entries that are cheap to rebuild go first. Entries with
	 * unknown cost (0) rank AFTER every entry with a known cost, by
	 * their RAM score: upstream treats unknown as 1 ms, i.e. free to
	 * rebuild, which would evict the entries we know least about first.
	 */
	RC_POLICY_COST = 1,
};

/* 1.3: upstream's RAM_CACHE_OLD_WORKFLOW_OOM_MULTIPLIER. */
#define RC_AGE_BASE 1.3
/* Ages above this score alike (1.3^256 ~ 1e29): no overflow, still finite. */
#define RC_AGE_CAP 256
/* Entries at least this big are the second tier in the headroom phase. */
#define RC_BIG_ACTIVE (512 * RC_MIB)
/* Floor on recompute time in the cost policy (upstream: 1 ms). */
#define RC_COST_MIN_NS 1000000ULL
/*
 * Floor on a model's reload time in the RAM policy: a model entry
 * (RAMCACHE_F_MODEL) with a known cost_ns (its measured reload) scores its
 * RAM score over its reload seconds, at least this many: a 2 GiB
 * checkpoint that takes 10 s to load scores as 205 MiB of output, so it
 * outlives the outputs nobody reads (1.3^age grows theirs).
 */
#define RC_RELOAD_MIN_NS 1000000000ULL

/* generation - used_generation, 0 if negative, at most RC_AGE_CAP. */
uint32_t policy_entry_age(uint64_t generation, uint64_t used_generation);

/*
 * Score of one entry: higher = evict earlier within its class. Always
 * finite and >= 0. Does not include the class ordering below. A model
 * with a known reload cost is divided by its reload seconds in the RAM
 * policy (RC_RELOAD_MIN_NS), by its cost in the cost policy. Divided by
 * 1 + reuse: an entry later prompts of this session used again is likely
 * to be used again (a shared upstream node), whatever the policy.
 */
double policy_score(const struct rc_entry *e, uint64_t generation,
		    enum rc_score_policy policy);

enum rc_phase {
	/* below inactive_min: inactive entries only, and no model whose
	 * reload is known (RAMCACHE_F_MODEL with cost_ns) */
	RC_PHASE_INACTIVE = 0,
	RC_PHASE_HEADROOM = 1, /* below headroom_min: inactive, then active */
};

/*
 * Eviction order, first to go first: by tier (headroom phase: inactive,
 * then active >= RC_BIG_ACTIVE, then other active; inactive phase: only
 * tier inactive), then inactive model entries whose reload cost is not
 * known ("old models first", as ComfyUI drops them), then
 * (cost policy) known-cost before unknown-cost, then higher score, then
 * older last_use_ns, then lower id. Returns <0, 0, >0 like strcmp.
 */
int policy_entry_cmp(const struct rc_entry *a, const struct rc_entry *b,
		     uint64_t generation, enum rc_score_policy policy);

/*
 * Does the phase allow evicting e at all? Never pinned, never id 0 or
 * empty; in RC_PHASE_INACTIVE neither an active entry nor a model with a
 * measured reload: the inactive reserve sheds what is cheap to make
 * again, and a model goes only when the headroom itself is short.
 */
bool policy_entry_eligible(const struct rc_entry *e, enum rc_phase phase);

/* Returns true if an eviction of this id is already in flight. */
typedef bool (*rc_inflight_fn)(uint64_t id, void *ctx);

struct rc_select_req {
	const struct rc_entry *entries;
	size_t nr_entries;
	uint64_t generation;
	uint64_t deficit; /* bytes to free; 0 picks nothing */
	enum rc_phase phase;
	enum rc_score_policy policy;
	rc_inflight_fn in_flight; /* may be NULL */
	void *ctx;
};

/*
 * Pick eligible entries in policy_entry_cmp() order until their bytes cover
 * the deficit, and no more (the last pick is the one that covers it).
 * Writes indices into req->entries to out[] (at most out_max) and the sum
 * of their bytes (saturating) to *covered. Returns the number picked, or
 * -EINVAL (NULL table with entries, nr_entries > INT_MAX) / -ENOMEM. Fewer bytes than the deficit means nothing else is
 * eligible (or out_max was reached). Duplicate ids are picked once.
 */
int policy_select(const struct rc_select_req *req, uint32_t *out,
		  size_t out_max, uint64_t *covered);

/* An executor of a memory domain, for policy_select_domain(). */
struct rc_domain_member {
	const struct rc_entry *entries;
	size_t nr_entries;
	uint64_t generation; /* of this executor's page */
	/*
	 * --weight: scores are divided by it, so W > 1 keeps this executor's
	 * entries longer (within their class); 1 is neutral. Clamped to
	 * [RC_WEIGHT_MIN, RC_WEIGHT_MAX]; 0, negative or NaN counts as 1.
	 */
	double weight;
	/*
	 * With @capped, this member's picks count for at most @cap bytes in
	 * all (what it can still free: its RSS less what it has out); once
	 * that is reached its other entries are passed over.
	 */
	bool capped;
	uint64_t cap;
	/* entries of fewer bytes are passed over (RC_TINY_BYTES; 0: none) */
	uint64_t min_bytes;
	/*
	 * entries of fewer bytes go only when they make the difference
	 * (RC_TINY_BYTES, see there; 0: no such rule)
	 */
	uint64_t spare_below;
	rc_inflight_fn in_flight; /* may be NULL */
	void *ctx;
};

/*
 * Entries smaller than this free nothing worth what they cost to make
 * again (a text encoding of 240 KiB took seconds): never for a forecast or
 * the inactive reserve (rc_domain_member.min_bytes); when the headroom is
 * already short (reason headroom or reclaim) only when they make the
 * difference: the bigger entries cannot cover the deficit and the small
 * ones can close what they leave (rc_domain_member.spare_below).
 */
#define RC_TINY_BYTES (1024 * 1024ULL)

#define RC_WEIGHT_MIN 0.001
#define RC_WEIGHT_MAX 1000.0

/* A --weight clamped to [RC_WEIGHT_MIN, RC_WEIGHT_MAX]; 0, < 0 or NaN: 1. */
double policy_weight(double w);

/* One entry picked: member index, index in its table, weighted score. */
struct rc_pick {
	uint32_t member;
	uint32_t idx;
	double score;
};

/*
 * policy_select() over the entries of several executors that share one
 * memory limit: every eligible entry of every member is ranked in one
 * policy_entry_cmp() order, each with its own page's generation and its
 * score divided by its member's weight (ties: lower member, then table
 * order), and picked until the deficit is covered. So the least valuable
 * entries of the domain go first, whichever executor holds them; no
 * executor is drained before another. Duplicate ids within a member are
 * picked once. A capped member's picks count for no more than its cap
 * (an entry over what is left counts for what is left). Returns the number picked (at most out_max), or -EINVAL /
 * -ENOMEM; *covered is the sum of their bytes (saturating).
 */
int policy_select_domain(const struct rc_domain_member *m, size_t nr,
			 uint64_t deficit, enum rc_phase phase,
			 enum rc_score_policy policy, struct rc_pick *out,
			 size_t out_max, uint64_t *covered);

/* ------------------------------------------------------------------ */
/* Forecast                                                            */

struct rc_sample {
	uint64_t t_ns;
	uint64_t bytes; /* RSS (see policy_growth_rate) */
};

struct rc_forecast {
	double rate;	     /* d(bytes)/dt in bytes/s, < 0 shrinking */
	uint64_t at_horizon; /* predicted headroom horizon_ns ahead */
	bool has_eta;	     /* headroom shrinking */
	uint64_t eta_ns;     /* time until headroom reaches 0 */
	uint32_t nr_used;    /* samples in the window */
};

/*
 * What a step figure (RSS: it holds between samples, which come when it
 * moves) grew by over the window_ns up to @now_ns, per second: the value at
 * @now_ns (the newest sample) less the value at now_ns - window_ns (the
 * newest sample at or before it), over window_ns. Before the first sample
 * the figure is taken to have held its first value when @whole (nothing
 * older was dropped); otherwise the rate is over the span the samples
 * cover. A burst is spread over the window and a burst long past counts
 * nothing, where a slope through the burst's own samples would run on at
 * its pace. nr_used: samples inside the window. 0 or -EINVAL (n == 0,
 * window_ns == 0).
 */
int policy_growth_rate(const struct rc_sample *s, size_t n, bool whole,
		       uint64_t now_ns, uint64_t window_ns, double *rate,
		       uint32_t *nr_used);

/* One executor's RSS growth, bytes/s, from policy_growth_rate(). */
struct rc_growth {
	double rate;
	uint32_t nr_used; /* samples it came from */
};

/*
 * Forecast the headroom executors sharing one limit leave: @headroom now,
 * moving by minus the sum of their RSS growth rates (one shrinking offsets
 * another growing). nr_used is the most samples any member's rate came
 * from; a NaN/inf rate counts as 0. Returns 0, or -EINVAL (n == 0).
 */
int policy_domain_forecast(uint64_t headroom, const struct rc_growth *g,
			   size_t n, uint64_t horizon_ns,
			   struct rc_forecast *f);

/* One member of a shared limit as its last file read left it. */
struct rc_share {
	uint64_t read_headroom; /* the headroom that read found */
	uint64_t read_rss;	/* its RSS then (0: unknown) */
	uint64_t rss;		/* its RSS now */
};

/*
 * The headroom now of executors sharing one limit: the least any read
 * found, less what all of them took since their reads (or plus what they
 * gave back). Each RSS event moves one member's own estimate only, yet
 * every member's growth comes out of the one limit. Saturates at 0 and at
 * UINT64_MAX; UINT64_MAX when @n is 0.
 */
uint64_t policy_shared_headroom(const struct rc_share *m, size_t n);

/* ------------------------------------------------------------------ */
/* When to evict                                                       */

struct rc_plan {
	bool evict;
	enum rc_phase phase;
	uint64_t deficit;	     /* bytes to free: the shortfall + margin */
	uint64_t predicted;	     /* the lowest headroom expected */
	enum ramcache_reason reason; /* valid when evict */
};

/* core/outlook.h makes the plan (outlook_plan()). */

/*
 * The smallest entry @p may evict: any when the headroom is short now
 * (reason headroom or reclaim), RC_TINY_BYTES for a forecast or the
 * inactive reserve.
 */
uint64_t policy_min_bytes(const struct rc_plan *p);

/* ------------------------------------------------------------------ */
/* Pressure level                                                      */

/* Inputs over one interval: counts are events/pages within interval_ns. */
struct rc_pressure_in {
	uint64_t interval_ns; /* 0 is taken as 1 s */
	bool kswapd_awake;
	uint64_t direct_reclaims; /* direct reclaim stalls (system) */
	uint64_t memcg_reclaims;  /* memcg reclaim stalls in the target's cg */
	uint64_t refault_anon;	  /* pages, workingset_refault_anon delta */
	uint64_t refault_file;	  /* pages */
	uint64_t swap_in;	  /* pages, pswpin delta */
	uint64_t swap_out;	  /* pages, pswpout delta */
	uint64_t major_faults;	  /* of the target process */
	bool psi_present;
	double psi_some_avg10; /* percent */
	double psi_full_avg10;
	uint64_t headroom;
	struct rc_thresholds thr;
	bool has_eta;
	uint64_t eta_ns;
	bool cannot_free; /* an executor said it cannot free what is needed */
};

enum rc_reason_bit {
	/* the kernel reclaims */
	RC_R_KSWAPD = 1u << 0,
	RC_R_DIRECT_RECLAIM = 1u << 1,
	RC_R_MEMCG_RECLAIM = 1u << 2,
	/* what reclaim took comes back */
	RC_R_REFAULT_FILE = 1u << 3,
	RC_R_REFAULT_ANON = 1u << 4,
	RC_R_SWAP_IN = 1u << 5,
	RC_R_SWAP_OUT = 1u << 6,
	RC_R_MAJOR_FAULTS = 1u << 7,
	/* tasks wait for memory */
	RC_R_PSI_SOME = 1u << 8,
	RC_R_PSI_FULL = 1u << 9,
	/* room left, now and forecast */
	RC_R_HEADROOM = 1u << 10,
	RC_R_ETA = 1u << 11,
	/* what is left to free is in use: at least high (cannot_free) */
	RC_R_CANNOT_FREE = 1u << 12,
	RC_R_NR = 13,
};

/*
 * Thresholds. Each signal raises the level to at least the one given;
 * the result is the highest, and every signal that fired sets its bit.
 * Rates are per second, pages of 4 KiB in mind.
 *   kswapd awake                        WARN  (background reclaim started)
 *   direct reclaim stall >= 1           HIGH  (allocations already wait)
 *   memcg reclaim stall >= 1            HIGH  (the cgroup is at its limit)
 *   refault_file >= 2560/s (10 MiB/s)   WARN, >= 25600/s (100 MiB/s) HIGH
 *   refault_anon >= 256/s (1 MiB/s)     WARN, >= 2560/s HIGH
 *   swap_in, swap_out >= 256/s          WARN, >= 2560/s HIGH
 *   major faults of target >= 100/s     WARN, >= 1000/s HIGH
 *   PSI some avg10 >= 5 %               WARN, >= 20 % HIGH
 *   PSI full avg10 >= 1 %               HIGH, >= 10 % CRITICAL
 *   headroom < inactive_min             WARN
 *   headroom < headroom_min             HIGH
 *   headroom < headroom_min / 4         CRITICAL
 *   ETA to 0 headroom < 30 s            WARN, < 5 s HIGH, < 1 s CRITICAL
 */
#define RC_REFAULT_FILE_WARN 2560
#define RC_REFAULT_FILE_HIGH 25600
#define RC_REFAULT_ANON_WARN 256
#define RC_REFAULT_ANON_HIGH 2560
#define RC_SWAP_WARN	     256
#define RC_SWAP_HIGH	     2560
#define RC_MAJFLT_WARN	     100
#define RC_MAJFLT_HIGH	     1000
#define RC_PSI_SOME_WARN     5.0
#define RC_PSI_SOME_HIGH     20.0
#define RC_PSI_FULL_HIGH     1.0
#define RC_PSI_FULL_CRIT     10.0
#define RC_ETA_WARN_NS	     30000000000ULL
#define RC_ETA_HIGH_NS	     5000000000ULL
#define RC_ETA_CRIT_NS	     1000000000ULL

/* The per-second rates the level was judged on (pages, faults). */
struct rc_rates {
	double refault_file, refault_anon;
	double swap_in, swap_out;
	double major_faults;
};

struct rc_pressure {
	enum ramcache_level level;
	uint32_t reasons; /* RC_R_* */
	struct rc_rates rates;
};

void policy_pressure_eval(const struct rc_pressure_in *in,
			  struct rc_pressure *out);

/* Name of one reason bit ("kswapd", "direct_reclaim", ...) or NULL. */
const char *policy_reason_name(uint32_t bit);

/*
 * Reason names joined by "," into buf, always NUL-terminated when len > 0
 * ("" if none). Returns the length the full string needs, as snprintf().
 */
size_t policy_reasons_format(uint32_t reasons, char *buf, size_t len);

/* "ok", "warn", "high", "critical" (or "unknown"). */
const char *policy_level_name(enum ramcache_level level);

#endif /* RAMCACHE_POLICY_H */
