// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Eviction policy and pressure maths; see policy.h. No I/O here. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/policy.h"

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* pct percent of v, exactly (rounded down); pct <= 100. */
static uint64_t pct_of(uint64_t v, uint64_t pct)
{
	return (uint64_t)((unsigned __int128)v * pct / 100);
}

uint64_t policy_headroom(uint64_t mem_available, uint64_t cg_limit,
			 uint64_t cg_usage, uint64_t cg_inactive_file)
{
	uint64_t room;

	if (cg_limit >= RC_LIMIT_UNLIMITED_MIN)
		return mem_available;
	room = cg_limit > cg_usage ? cg_limit - cg_usage : 0;
	/* Reclaimable page cache is room, but never beyond the limit. */
	room = min_u64(sat_add(room, min_u64(cg_inactive_file, cg_usage)),
		       cg_limit);
	return min_u64(mem_available, room);
}

uint64_t policy_reclaimable(uint64_t inactive_file, uint64_t mapped_file)
{
	return inactive_file > mapped_file ? inactive_file - mapped_file : 0;
}

void policy_thresholds_fix(struct rc_thresholds *t)
{
	if (t->inactive_min < t->headroom_min)
		t->inactive_min = t->headroom_min;
}

void policy_thresholds_default(uint64_t mem_total, struct rc_thresholds *t)
{
	uint64_t h = pct_of(mem_total, RC_HEADROOM_PERCENT);

	h = min_u64(RC_HEADROOM_CEIL, max_u64(RC_HEADROOM_FLOOR, h));
	t->headroom_min = h;
	t->inactive_min = max_u64(h, min_u64(sat_mul(h, RC_INACTIVE_FACTOR),
					     mem_total / 2));
	policy_thresholds_fix(t);
}

void policy_thresholds_scale(uint64_t cg_limit, struct rc_thresholds *t)
{
	uint64_t cap;

	if (cg_limit >= RC_LIMIT_UNLIMITED_MIN)
		return;
	cap = max_u64(pct_of(cg_limit, RC_CGROUP_PERCENT),
		      RC_CGROUP_MIN_HEADROOM);
	t->headroom_min = min_u64(t->headroom_min, cap);
	t->inactive_min =
		min_u64(t->inactive_min, sat_mul(cap, RC_INACTIVE_FACTOR));
	policy_thresholds_fix(t);
}

void policy_thresholds_resolve(const struct rc_threshold_in *in,
			       struct rc_thresholds *t)
{
	policy_thresholds_default(in->mem_total, t);
	policy_thresholds_scale(in->cg_limit, t);
	if (in->headroom_set) {
		t->headroom_min = in->headroom;
		if (!in->inactive_set)
			t->inactive_min =
				sat_mul(in->headroom, RC_INACTIVE_FACTOR);
	}
	if (in->inactive_set)
		t->inactive_min = in->inactive;
	policy_thresholds_fix(t);
}

uint32_t policy_entry_age(uint64_t generation, uint64_t used_generation)
{
	if (used_generation >= generation)
		return 0;
	return (uint32_t)min_u64(generation - used_generation, RC_AGE_CAP);
}

static double ram_score(const struct rc_entry *e, uint64_t generation)
{
	/* At most 1.3^256 x 1.8e19 ~ 1e48: far from DBL_MAX. */
	return pow(RC_AGE_BASE,
		   policy_entry_age(generation, e->used_generation)) *
	       ((double)e->bytes + 0.05);
}

/* A model whose reload the executor has measured (cost_ns). */
static bool reloadable(const struct rc_entry *e)
{
	return (e->flags & RAMCACHE_F_MODEL) && e->cost_ns;
}

double policy_score(const struct rc_entry *e, uint64_t generation,
		    enum rc_score_policy policy)
{
	double s = ram_score(e, generation);

	if (policy == RC_POLICY_COST && e->cost_ns)
		s /= (double)max_u64(e->cost_ns, RC_COST_MIN_NS) / 1e9;
	else if (reloadable(e))
		s /= (double)max_u64(e->cost_ns, RC_RELOAD_MIN_NS) / 1e9;
	return s / (1.0 + e->reuse);
}

static int tier(const struct rc_entry *e)
{
	if (!(e->flags & RAMCACHE_F_ACTIVE))
		return 0;
	return e->bytes >= RC_BIG_ACTIVE ? 1 : 2;
}

/*
 * Class within a tier: inactive models first, as ComfyUI drops them,
 * unless their reload cost is known: then their score weighs it.
 */
static int klass(const struct rc_entry *e)
{
	return (e->flags & RAMCACHE_F_MODEL) &&
			       !(e->flags & RAMCACHE_F_ACTIVE) && !reloadable(e)
		       ? 0
		       : 1;
}

#define CMP(a, b)                                  \
	do {                                       \
		if ((a) != (b))                    \
			return (a) < (b) ? -1 : 1; \
	} while (0)

/* The order of policy_entry_cmp(), with the scores @sa and @sb given. */
static int cmp_scored(const struct rc_entry *a, const struct rc_entry *b,
		      double sa, double sb, enum rc_score_policy policy)
{
	CMP(tier(a), tier(b));
	CMP(klass(a), klass(b));
	if (policy == RC_POLICY_COST)
		CMP(a->cost_ns == 0, b->cost_ns == 0);
	CMP(sb, sa); /* higher score first */
	CMP(a->last_use_ns, b->last_use_ns);
	CMP(a->id, b->id);
	return 0;
}

int policy_entry_cmp(const struct rc_entry *a, const struct rc_entry *b,
		     uint64_t generation, enum rc_score_policy policy)
{
	return cmp_scored(a, b, policy_score(a, generation, policy),
			  policy_score(b, generation, policy), policy);
}

uint64_t policy_min_bytes(const struct rc_plan *p)
{
	if (p->reason == RAMCACHE_REASON_HEADROOM ||
	    p->reason == RAMCACHE_REASON_RECLAIM)
		return 0;
	return RC_TINY_BYTES;
}

bool policy_entry_eligible(const struct rc_entry *e, enum rc_phase phase)
{
	if (!e->id || !e->bytes || (e->flags & RAMCACHE_F_PINNED))
		return false;
	/* the inactive reserve is for what is cheap to make again: not a
	 * model whose reload the executor measured (seconds of disk and CPU
	 * for a few hundred MiB of margin) */
	if (phase == RC_PHASE_INACTIVE &&
	    ((e->flags & RAMCACHE_F_ACTIVE) || reloadable(e)))
		return false;
	return true;
}

/* One eligible candidate of policy_select_domain(), scored once. */
struct cand {
	const struct rc_entry *e;
	double score; /* weighted */
	uint32_t member, idx;
};

static int cmp_cand(const void *pa, const void *pb, void *arg)
{
	const struct cand *a = pa, *b = pb;
	int r = cmp_scored(a->e, b->e, a->score, b->score,
			   *(const enum rc_score_policy *)arg);

	if (r)
		return r;
	/* identical entries (same id too): keep member, then table order */
	CMP(a->member, b->member);
	CMP(a->idx, b->idx);
	return 0;
}

/*
 * Open-addressing set of picked (member, id) pairs (id 0 is never
 * eligible, so 0 marks a free slot), so a corrupt table that repeats an
 * id costs O(1) per entry to skip.
 */
struct pick_key {
	uint64_t id;
	uint32_t member;
};

static bool pickset_add(struct pick_key *set, size_t mask, uint64_t id,
			uint32_t member)
{
	size_t i = (size_t)((id ^ ((uint64_t)member << 48)) *
			    0x9e3779b97f4a7c15ULL) &
		   mask;

	while (set[i].id) {
		if (set[i].id == id && set[i].member == member)
			return false;
		i = (i + 1) & mask;
	}
	set[i].id = id;
	set[i].member = member;
	return true;
}

/* A weight as the planner uses it: outside [min, max] or NaN is clamped. */
double policy_weight(double w)
{
	if (!(w >= RC_WEIGHT_MIN))
		return w > 0 ? RC_WEIGHT_MIN : 1.0;
	return w > RC_WEIGHT_MAX ? RC_WEIGHT_MAX : w;
}

/* The eligible entries of every member, weighted; how many, or -errno. */
static ssize_t gather(const struct rc_domain_member *m, size_t nr,
		      enum rc_phase phase, enum rc_score_policy policy,
		      struct cand **out)
{
	size_t total = 0, n = 0;
	struct cand *c;

	for (size_t k = 0; k < nr; k++) {
		if (!m[k].entries && m[k].nr_entries)
			return -EINVAL;
		if (m[k].nr_entries > INT_MAX - total)
			return -EINVAL;
		total += m[k].nr_entries;
	}
	c = calloc(total ? total : 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (size_t k = 0; k < nr; k++) {
		double w = policy_weight(m[k].weight);

		for (size_t i = 0; i < m[k].nr_entries; i++) {
			const struct rc_entry *e = &m[k].entries[i];

			if (!policy_entry_eligible(e, phase) ||
			    e->bytes < m[k].min_bytes)
				continue;
			if (m[k].in_flight && m[k].in_flight(e->id, m[k].ctx))
				continue;
			c[n].e = e;
			c[n].score =
				policy_score(e, m[k].generation, policy) / w;
			c[n].member = (uint32_t)k;
			c[n].idx = (uint32_t)i;
			n++;
		}
	}
	*out = c;
	return (ssize_t)n;
}

/*
 * Entries under their member's spare_below stay unless they make the
 * difference: the bigger candidates cannot cover @deficit and the small
 * ones can close what they leave. Otherwise they would be lost for nothing
 * (a GiB short is not made up by text encodings of 240 KiB, which took
 * seconds) or for what the big ones free anyway. Compacts @c; its new
 * length.
 */
static size_t spare_small(const struct rc_domain_member *m, struct cand *c,
			  size_t n, uint64_t deficit)
{
	uint64_t big = 0, small = 0;
	size_t kept = 0;

	for (size_t i = 0; i < n; i++) {
		if (c[i].e->bytes < m[c[i].member].spare_below)
			small = sat_add(small, c[i].e->bytes);
		else
			big = sat_add(big, c[i].e->bytes);
	}
	if (!small || (big < deficit && deficit <= sat_add(big, small)))
		return n;
	for (size_t i = 0; i < n; i++)
		if (c[i].e->bytes >= m[c[i].member].spare_below)
			c[kept++] = c[i];
	return kept;
}

int policy_select_domain(const struct rc_domain_member *m, size_t nr,
			 uint64_t deficit, enum rc_phase phase,
			 enum rc_score_policy policy, struct rc_pick *out,
			 size_t out_max, uint64_t *covered)
{
	size_t cap = 2, picked = 0;
	uint64_t sum = 0, *left;
	struct pick_key *set;
	struct cand *c = NULL;
	ssize_t n;

	*covered = 0;
	if ((!m && nr) || nr > UINT32_MAX || (!out && out_max))
		return -EINVAL;
	if (!deficit || !nr || !out_max)
		return 0;
	n = gather(m, nr, phase, policy, &c);
	if (n < 0)
		return (int)n;
	n = (ssize_t)spare_small(m, c, (size_t)n, deficit);
	while (cap < 2 * (size_t)n)
		cap *= 2;
	set = calloc(cap, sizeof(*set));
	if (!set) {
		free(c);
		return -ENOMEM;
	}
	qsort_r(c, (size_t)n, sizeof(*c), cmp_cand, &policy);
	left = calloc(nr, sizeof(*left));
	if (!left) {
		free(c);
		free(set);
		return -ENOMEM;
	}
	for (size_t k = 0; k < nr; k++)
		left[k] = m[k].capped ? m[k].cap : UINT64_MAX;
	for (ssize_t i = 0; i < n && sum < deficit && picked < out_max; i++) {
		uint32_t k = c[i].member;
		uint64_t b = c[i].e->bytes < left[k] ? c[i].e->bytes : left[k];

		/* a member that cannot free more is passed over */
		if (!b)
			continue;
		/* A corrupt table may repeat an id: evicting it once is enough. */
		if (!pickset_add(set, cap - 1, c[i].e->id, k))
			continue;
		out[picked].member = k;
		out[picked].idx = c[i].idx;
		out[picked].score = c[i].score;
		picked++;
		if (left[k] != UINT64_MAX)
			left[k] -= b;
		sum = sat_add(sum, b);
	}
	free(left);
	free(c);
	free(set);
	*covered = sum;
	return (int)picked;
}

int policy_select(const struct rc_select_req *req, uint32_t *out,
		  size_t out_max, uint64_t *covered)
{
	struct rc_domain_member m = { 0 };
	struct rc_pick *picks;
	int n;

	*covered = 0;
	if (!req || (!req->entries && req->nr_entries) ||
	    req->nr_entries > INT_MAX || (!out && out_max))
		return -EINVAL;
	if (!req->deficit || !req->nr_entries || !out_max)
		return 0;
	picks = calloc(out_max < req->nr_entries ? out_max : req->nr_entries,
		       sizeof(*picks));
	if (!picks)
		return -ENOMEM;
	m.entries = req->entries;
	m.nr_entries = req->nr_entries;
	m.generation = req->generation;
	m.weight = 1.0;
	m.in_flight = req->in_flight;
	m.ctx = req->ctx;
	n = policy_select_domain(
		&m, 1, req->deficit, req->phase, req->policy, picks,
		out_max < req->nr_entries ? out_max : req->nr_entries, covered);
	for (int i = 0; i < n; i++)
		out[i] = picks[i].idx;
	free(picks);
	return n;
}

/* The value of step series @s at @t: its newest sample at or before @t. */
static bool step_at(const struct rc_sample *s, size_t n, uint64_t t,
		    uint64_t *v)
{
	for (size_t i = n; i > 0; i--) {
		if (s[i - 1].t_ns <= t) {
			*v = s[i - 1].bytes;
			return true;
		}
	}
	return false;
}

int policy_growth_rate(const struct rc_sample *s, size_t n, bool whole,
		       uint64_t now_ns, uint64_t window_ns, double *rate,
		       uint32_t *nr_used)
{
	uint64_t from, base, span = window_ns;
	uint32_t m = 0;

	*rate = 0;
	if (nr_used)
		*nr_used = 0;
	if (!s || !n || !window_ns)
		return -EINVAL;
	/* a stamp ahead of @now_ns (another clock's) moves now there */
	for (size_t i = 0; i < n; i++)
		if (s[i].t_ns > now_ns)
			now_ns = s[i].t_ns;
	from = now_ns > window_ns ? now_ns - window_ns : 0;
	for (size_t i = 0; i < n; i++)
		m += s[i].t_ns > from;
	if (nr_used)
		*nr_used = m;
	if (!step_at(s, n, from, &base)) {
		base = s[0].bytes;
		if (!whole)
			span = now_ns - s[0].t_ns;
	}
	if (!span)
		return 0;
	*rate = ((double)s[n - 1].bytes - (double)base) / ((double)span / 1e9);
	return 0;
}

/* at_horizon and the ETA of headroom @h moving at @rate bytes/s. */
static void forecast_from_rate(double h, double rate, uint64_t horizon_ns,
			       struct rc_forecast *f)
{
	double pred = h + rate * ((double)horizon_ns / 1e9);

	f->rate = rate;
	if (!(pred > 0))
		f->at_horizon = 0;
	else if (pred >= 18446744073709551616.0)
		f->at_horizon = UINT64_MAX;
	else
		f->at_horizon = (uint64_t)pred;
	if (rate < 0) {
		double eta = h / -rate * 1e9;

		f->has_eta = true;
		f->eta_ns = eta >= 18446744073709551616.0 ? UINT64_MAX
							  : (uint64_t)eta;
	}
}

int policy_domain_forecast(uint64_t headroom, const struct rc_growth *g,
			   size_t n, uint64_t horizon_ns, struct rc_forecast *f)
{
	double rate = 0;

	memset(f, 0, sizeof(*f));
	if (!n || !g)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		/* a NaN or inf from a bad series counts as no growth */
		if (isfinite(g[i].rate))
			rate += g[i].rate;
		if (g[i].nr_used > f->nr_used)
			f->nr_used = g[i].nr_used;
	}
	if (!isfinite(rate))
		rate = rate > 0 ? 1e300 : -1e300;
	/* what the members grow by comes out of the headroom they share */
	forecast_from_rate((double)headroom, -rate, horizon_ns, f);
	return 0;
}

uint64_t policy_shared_headroom(const struct rc_share *m, size_t n)
{
	uint64_t least = UINT64_MAX, took = 0, gave = 0;

	for (size_t i = 0; i < n; i++) {
		if (m[i].read_headroom < least)
			least = m[i].read_headroom;
		if (!m[i].read_rss)
			continue;
		if (m[i].rss >= m[i].read_rss)
			took = sat_add(took, m[i].rss - m[i].read_rss);
		else
			gave = sat_add(gave, m[i].read_rss - m[i].rss);
	}
	if (least == UINT64_MAX)
		return least;
	if (took >= gave)
		return least > took - gave ? least - (took - gave) : 0;
	return sat_add(least, gave - took);
}

static const char *const reason_names[RC_R_NR] = {
	"kswapd",	"direct_reclaim", "memcg_reclaim", "refault_file",
	"refault_anon", "swap_in",	  "swap_out",	   "major_faults",
	"psi_some",	"psi_full",	  "headroom",	   "eta",
	"cannot_free",
};

const char *policy_reason_name(uint32_t bit)
{
	int i;

	if (!bit || (bit & (bit - 1)))
		return NULL;
	i = __builtin_ctz(bit);
	return i < RC_R_NR ? reason_names[i] : NULL;
}

size_t policy_reasons_format(uint32_t reasons, char *buf, size_t len)
{
	size_t off = 0;
	int i, n;

	if (len)
		buf[0] = '\0';
	for (i = 0; i < RC_R_NR; i++) {
		if (!(reasons & (1u << i)))
			continue;
		/* Past the end: only count, as snprintf() does. */
		if (off < len)
			n = snprintf(buf + off, len - off, "%s%s",
				     off ? "," : "", reason_names[i]);
		else
			n = snprintf(NULL, 0, "%s%s", off ? "," : "",
				     reason_names[i]);
		if (n > 0)
			off += n;
	}
	return off;
}

const char *policy_level_name(enum ramcache_level level)
{
	static const char *const names[] = {
		[RAMCACHE_LEVEL_OK] = "ok",
		[RAMCACHE_LEVEL_WARN] = "warn",
		[RAMCACHE_LEVEL_HIGH] = "high",
		[RAMCACHE_LEVEL_CRITICAL] = "critical",
	};

	return (unsigned int)level < sizeof(names) / sizeof(names[0])
		       ? names[level]
		       : "unknown";
}

/* Events in the interval scaled to per second. */
static double per_sec(uint64_t count, uint64_t interval_ns)
{
	return (double)count * 1e9 /
	       (double)(interval_ns ? interval_ns : 1000000000ULL);
}

static void raise_level(struct rc_pressure *out, uint32_t bit,
			enum ramcache_level level)
{
	out->reasons |= bit;
	if (level > out->level)
		out->level = level;
}

static void rate_signal(struct rc_pressure *out, uint32_t bit, double rate,
			double warn, double high)
{
	if (rate >= high)
		raise_level(out, bit, RAMCACHE_LEVEL_HIGH);
	else if (rate >= warn)
		raise_level(out, bit, RAMCACHE_LEVEL_WARN);
}

void policy_pressure_eval(const struct rc_pressure_in *in,
			  struct rc_pressure *out)
{
	uint64_t iv = in->interval_ns;
	struct rc_rates *r = &out->rates;

	out->level = RAMCACHE_LEVEL_OK;
	out->reasons = 0;
	r->refault_file = per_sec(in->refault_file, iv);
	r->refault_anon = per_sec(in->refault_anon, iv);
	r->swap_in = per_sec(in->swap_in, iv);
	r->swap_out = per_sec(in->swap_out, iv);
	r->major_faults = per_sec(in->major_faults, iv);
	if (in->kswapd_awake)
		raise_level(out, RC_R_KSWAPD, RAMCACHE_LEVEL_WARN);
	if (in->direct_reclaims)
		raise_level(out, RC_R_DIRECT_RECLAIM, RAMCACHE_LEVEL_HIGH);
	if (in->memcg_reclaims)
		raise_level(out, RC_R_MEMCG_RECLAIM, RAMCACHE_LEVEL_HIGH);
	rate_signal(out, RC_R_REFAULT_FILE, r->refault_file,
		    RC_REFAULT_FILE_WARN, RC_REFAULT_FILE_HIGH);
	rate_signal(out, RC_R_REFAULT_ANON, r->refault_anon,
		    RC_REFAULT_ANON_WARN, RC_REFAULT_ANON_HIGH);
	rate_signal(out, RC_R_SWAP_IN, r->swap_in, RC_SWAP_WARN, RC_SWAP_HIGH);
	rate_signal(out, RC_R_SWAP_OUT, r->swap_out, RC_SWAP_WARN,
		    RC_SWAP_HIGH);
	rate_signal(out, RC_R_MAJOR_FAULTS, r->major_faults, RC_MAJFLT_WARN,
		    RC_MAJFLT_HIGH);
	/* NaN compares false everywhere: a bogus PSI value fires nothing. */
	if (in->psi_present) {
		rate_signal(out, RC_R_PSI_SOME, in->psi_some_avg10,
			    RC_PSI_SOME_WARN, RC_PSI_SOME_HIGH);
		if (in->psi_full_avg10 >= RC_PSI_FULL_CRIT)
			raise_level(out, RC_R_PSI_FULL,
				    RAMCACHE_LEVEL_CRITICAL);
		else if (in->psi_full_avg10 >= RC_PSI_FULL_HIGH)
			raise_level(out, RC_R_PSI_FULL, RAMCACHE_LEVEL_HIGH);
	}
	if (in->headroom < in->thr.headroom_min / 4)
		raise_level(out, RC_R_HEADROOM, RAMCACHE_LEVEL_CRITICAL);
	else if (in->headroom < in->thr.headroom_min)
		raise_level(out, RC_R_HEADROOM, RAMCACHE_LEVEL_HIGH);
	else if (in->headroom < in->thr.inactive_min)
		raise_level(out, RC_R_HEADROOM, RAMCACHE_LEVEL_WARN);
	if (in->cannot_free)
		raise_level(out, RC_R_CANNOT_FREE, RAMCACHE_LEVEL_HIGH);
	if (in->has_eta) {
		if (in->eta_ns < RC_ETA_CRIT_NS)
			raise_level(out, RC_R_ETA, RAMCACHE_LEVEL_CRITICAL);
		else if (in->eta_ns < RC_ETA_HIGH_NS)
			raise_level(out, RC_R_ETA, RAMCACHE_LEVEL_HIGH);
		else if (in->eta_ns < RC_ETA_WARN_NS)
			raise_level(out, RC_R_ETA, RAMCACHE_LEVEL_WARN);
	}
}
