// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A transient spike told from a trend; see outlook.h. No I/O here. */
#include <stdlib.h>
#include <string.h>

#include "core/outlook.h"

#define N RC_OUTLOOK_BUCKETS

static int64_t to_i64(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* Slot @i counted from the oldest. */
static const struct rc_outlook_slot *slot_at(const struct rc_outlook *o,
					     unsigned int i)
{
	return &o->s[(o->head + N - o->count + i) % N];
}

static struct rc_outlook_slot *newest(struct rc_outlook *o)
{
	return &o->s[(o->head + N - 1) % N];
}

/*
 * The headroom with what our commands freed and what announced loads took
 * taken out: the executor's own course.
 */
static int64_t adjusted(const struct rc_outlook *o, uint64_t headroom)
{
	int64_t a = to_i64(headroom) - to_i64(o->freed);
	int64_t t = to_i64(o->took);

	return a > INT64_MAX - t ? INT64_MAX : a + t;
}

void outlook_init(struct rc_outlook *o)
{
	memset(o, 0, sizeof(*o));
}

void outlook_push(struct rc_outlook *o, uint64_t t, uint64_t headroom)
{
	int64_t a = adjusted(o, headroom);
	uint64_t start = t - t % RC_OUTLOOK_BUCKET_NS;
	struct rc_outlook_slot *s;

	/* a stamp behind the newest slot counts in the newest slot */
	if (!o->count || start > newest(o)->t) {
		s = &o->s[o->head];
		o->head = (o->head + 1) % N;
		if (o->count < N)
			o->count++;
		s->t = start;
		s->lo = s->hi = a;
		s->quiet = t < o->quiet_until;
		return;
	}
	s = newest(o);
	if (a < s->lo)
		s->lo = a;
	if (a > s->hi)
		s->hi = a;
	if (t < o->quiet_until)
		s->quiet = true;
}

static void quiet_until(struct rc_outlook *o, uint64_t t)
{
	if (t > o->quiet_until)
		o->quiet_until = t;
}

void outlook_posted(struct rc_outlook *o, uint64_t now)
{
	quiet_until(o, now + RC_OUTLOOK_QUIET_NS);
	if (o->count && newest(o)->t + RC_OUTLOOK_BUCKET_NS > now)
		newest(o)->quiet = true;
}

void outlook_freed(struct rc_outlook *o, uint64_t post, uint64_t now,
		   uint64_t bytes)
{
	/* what the executor gave back while the command was out was ours */
	for (unsigned int i = 0; i < o->count; i++) {
		struct rc_outlook_slot *s = &o->s[(o->head + N - 1 - i) % N];

		if (s->t + RC_OUTLOOK_BUCKET_NS <= post)
			break;
		s->quiet = true;
	}
	o->freed = o->freed > UINT64_MAX - bytes ? UINT64_MAX
						 : o->freed + bytes;
	quiet_until(o, now + RC_OUTLOOK_QUIET_NS);
}

void outlook_took(struct rc_outlook *o, uint64_t now, uint64_t total)
{
	if (total <= o->took)
		return;
	o->took = total;
	outlook_posted(o, now);
}

void outlook_latency(struct rc_outlook *o, uint64_t ns)
{
	o->lat[o->lat_head] = ns;
	o->lat_head = (o->lat_head + 1) % RC_OUTLOOK_LEAD_LATS;
	if (o->nr_lat < RC_OUTLOOK_LEAD_LATS)
		o->nr_lat++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t outlook_lead(const struct rc_outlook *o, uint64_t horizon)
{
	uint64_t v[RC_OUTLOOK_LEAD_LATS], p90, lead;

	if (o->nr_lat < RC_OUTLOOK_LEAD_MIN_SAMPLES ||
	    horizon <= RC_OUTLOOK_LEAD_MIN_NS)
		return horizon;
	memcpy(v, o->lat, sizeof(v));
	qsort(v, o->nr_lat, sizeof(v[0]), cmp_u64);
	p90 = v[(o->nr_lat * 9 + 9) / 10 - 1];
	lead = p90 > horizon ? horizon : 2 * p90 + RC_OUTLOOK_LEAD_EVAL_NS;
	if (lead < RC_OUTLOOK_LEAD_MIN_NS)
		lead = RC_OUTLOOK_LEAD_MIN_NS;
	return lead > horizon ? horizon : lead;
}

/* Is slot @s within @window before @now (any part of it)? */
static bool within(const struct rc_outlook_slot *s, uint64_t now,
		   uint64_t window)
{
	return s->t + RC_OUTLOOK_BUCKET_NS + window > now;
}

/* Least-squares slope (bytes/s) of the slots' highs in the last @window. */
static double slope(const struct rc_outlook *o, uint64_t now, uint64_t window,
		    uint32_t *used)
{
	double mt = 0, mh = 0, sxy = 0, sxx = 0;
	unsigned int first = o->count, m;

	while (first > 0 && within(slot_at(o, first - 1), now, window))
		first--;
	m = o->count - first;
	*used = m;
	if (m < 2)
		return 0;
	for (unsigned int i = first; i < o->count; i++) {
		mt += (double)(int64_t)(slot_at(o, i)->t - now) / 1e9;
		mh += (double)slot_at(o, i)->hi;
	}
	mt /= m;
	mh /= m;
	for (unsigned int i = first; i < o->count; i++) {
		double dt =
			(double)(int64_t)(slot_at(o, i)->t - now) / 1e9 - mt;

		sxy += dt * ((double)slot_at(o, i)->hi - mh);
		sxx += dt * dt;
	}
	return sxx > 0 ? sxy / sxx : 0;
}

/*
 * The most the executor took within RC_OUTLOOK_GIVEBACK_NS of slot @i's
 * low and gave back within as long after it: min(drop into it, rise out of
 * it). A long climb released at once (a prompt's end) is no spike: little
 * of it was taken quickly. 0 when a command was out around it.
 */
static int64_t dip(const struct rc_outlook *o, unsigned int i)
{
	const struct rc_outlook_slot *d = slot_at(o, i);
	int64_t before = d->hi, after = INT64_MIN;

	for (unsigned int k = i; k-- > 0;) {
		const struct rc_outlook_slot *s = slot_at(o, k);

		if (s->quiet || d->t - s->t > RC_OUTLOOK_GIVEBACK_NS)
			break;
		if (s->hi > before)
			before = s->hi;
	}
	for (unsigned int k = i + 1; k < o->count; k++) {
		const struct rc_outlook_slot *s = slot_at(o, k);

		if (s->quiet)
			return 0;
		if (s->t - d->t > RC_OUTLOOK_GIVEBACK_NS)
			break;
		if (s->hi > after)
			after = s->hi;
	}
	if (after == INT64_MIN)
		return 0;
	return (before < after ? before : after) - d->lo;
}

/* The largest spike (dip()) of the last RC_OUTLOOK_SPIKE_NS. */
static uint64_t spike(const struct rc_outlook *o, uint64_t now)
{
	int64_t best = 0;

	for (unsigned int i = 0; i < o->count; i++) {
		const struct rc_outlook_slot *d = slot_at(o, i);
		int64_t v;

		if (d->quiet || !within(d, now, RC_OUTLOOK_SPIKE_NS))
			continue;
		v = dip(o, i);
		if (v > best)
			best = v;
	}
	return (uint64_t)best;
}

/* The settled (highest) adjusted headroom of the last RC_OUTLOOK_SETTLE_NS. */
static int64_t settled(const struct rc_outlook *o, uint64_t now, int64_t a)
{
	for (unsigned int i = o->count; i > 0; i--) {
		const struct rc_outlook_slot *s = slot_at(o, i - 1);

		if (!within(s, now, RC_OUTLOOK_SETTLE_NS))
			break;
		if (s->hi > a)
			a = s->hi;
	}
	return a;
}

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Bytes @rate (bytes/s, < 0 shrinking) takes over @ns, as a size. */
static uint64_t taken(double rate, uint64_t ns)
{
	double b = -rate * ((double)ns / 1e9);

	if (!(b > 0))
		return 0;
	return b >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)b;
}

uint32_t outlook_view(const struct rc_outlook *o, uint64_t now,
		      uint64_t headroom, uint64_t horizon, struct rc_view *v)
{
	int64_t a = adjusted(o, headroom), top;
	uint64_t rest, need;
	uint32_t used = 0, used_long;
	double rate_long;

	memset(v, 0, sizeof(*v));
	v->headroom = v->settled = v->low = headroom;
	v->lead_ns = outlook_lead(o, horizon);
	if (!o->count)
		return 0;
	top = settled(o, now, a);
	v->excursion = (uint64_t)(top - a);
	v->settled = headroom + v->excursion;
	v->spike = spike(o, now);
	v->trend = slope(o, now, RC_OUTLOOK_TREND_NS, &used);
	v->slots = used;
	rest = sat_sub(v->spike, v->excursion);
	need = rest + taken(v->trend, v->lead_ns);
	v->low = sat_sub(headroom, need < rest ? UINT64_MAX : need);
	rate_long = slope(o, now, RC_OUTLOOK_ETA_NS, &used_long);
	if (rate_long < 0) {
		double eta = (double)sat_sub(headroom, rest) / -rate_long * 1e9;

		v->has_eta = true;
		v->eta_ns = eta >= 18446744073709551616.0 ? UINT64_MAX
							  : (uint64_t)eta;
	}
	return used;
}

uint64_t outlook_margin(const struct rc_thresholds *t)
{
	uint64_t m = t->headroom_min / RC_OUTLOOK_MARGIN_DIV;

	return m > RC_OUTLOOK_MARGIN_MIN ? m : RC_OUTLOOK_MARGIN_MIN;
}

void outlook_plan(const struct rc_view *v, const struct rc_thresholds *t,
		  bool reclaiming, struct rc_plan *p)
{
	uint64_t thr, deficit;

	memset(p, 0, sizeof(*p));
	p->predicted = v->low;
	if (v->low < t->headroom_min) {
		p->phase = RC_PHASE_HEADROOM;
		thr = t->headroom_min;
	} else if (v->low < t->inactive_min) {
		p->phase = RC_PHASE_INACTIVE;
		thr = t->inactive_min;
	} else {
		return;
	}
	deficit = thr - v->low + outlook_margin(t);
	p->evict = true;
	p->deficit = deficit < thr - v->low ? UINT64_MAX : deficit;
	if (reclaiming)
		p->reason = RAMCACHE_REASON_RECLAIM;
	else if (v->headroom >= thr)
		p->reason = RAMCACHE_REASON_FORECAST;
	else if (p->phase == RC_PHASE_HEADROOM)
		p->reason = RAMCACHE_REASON_HEADROOM;
	else
		p->reason = RAMCACHE_REASON_INACTIVE;
}
