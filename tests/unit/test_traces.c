// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Recorded executor traces (tests/fixtures/traces, format in its README)
 * replayed through the pure decision code: the outlook, the plan and the
 * selection, as the agent runs them. The replay stands in for the
 * executor's answers: a command is done ack_ns after its post and frees the
 * entry's bytes from then on (the trace's usage less everything freed), so
 * the headroom the decision sees reacts to what it asked for. Dry runs
 * free nothing (as the reaction bench runs the agent with --dry-run).
 */
#include "test.h"
#include "core/outlook.h"
#include "core/policy.h"
#include "core/reuse.h"

#define MAX_SAMPLES 65536
#define MAX_PAGES   1024
#define MAX_ENTRIES 65536
#define MAX_MARKS   4096
#define MAX_CMDS    1024

struct tr_sample {
	uint64_t t, usage, reclaimable, rss;
};

struct tr_page {
	uint64_t t, generation;
	uint32_t first, n; /* in trace.entries */
};

struct trace {
	uint64_t limit;
	struct tr_sample *m;
	struct tr_page *p;
	struct rc_entry *e;
	uint64_t *r; /* reclaim began */
	uint32_t nm, np, ne, nr;
};

static bool parse_line(struct trace *tr, const char *line)
{
	unsigned long long a, b, c, d, mapped = 0;
	unsigned int f;

	if (line[0] == '#' || line[0] == '\n' || line[0] == 'n' ||
	    !strncmp(line, "trace ", 6) || !strncmp(line, "end", 3))
		return true;
	if (sscanf(line, "limit %llu", &a) == 1) {
		tr->limit = a;
	} else if (sscanf(line, "m %llu %llu %llu %llu %llu", &a, &b, &c, &d,
			  &mapped) >= 4) {
		if (tr->nm == MAX_SAMPLES)
			return false;
		/* page cache mapped by a process is not cheap to take back */
		c -= mapped < c ? mapped : c;
		tr->m[tr->nm++] = (struct tr_sample){ a * 1000, b, c, d };
	} else if (sscanf(line, "p %llu %llu", &a, &b) == 2) {
		if (tr->np == MAX_PAGES)
			return false;
		tr->p[tr->np++] = (struct tr_page){ a * 1000, b, tr->ne, 0 };
	} else if (sscanf(line, "e %llu %llu %llu %u", &a, &b, &c, &f) == 4) {
		if (!tr->np || tr->ne == MAX_ENTRIES)
			return false;
		tr->e[tr->ne++] = (struct rc_entry){
			.id = a, .bytes = b, .used_generation = c, .flags = f
		};
		tr->p[tr->np - 1].n++;
	} else if (sscanf(line, "r %llu", &a) == 1) {
		if (tr->nr == MAX_MARKS)
			return false;
		tr->r[tr->nr++] = a * 1000;
	} else {
		return false;
	}
	return true;
}

static void trace_free(struct trace *tr)
{
	free(tr->m);
	free(tr->p);
	free(tr->e);
	free(tr->r);
	memset(tr, 0, sizeof(*tr));
}

static bool trace_load(const char *name, struct trace *tr)
{
	char path[256], line[512];
	bool ok = true;
	FILE *f;

	memset(tr, 0, sizeof(*tr));
	snprintf(path, sizeof(path), "traces/%s.trace", name);
	f = fopen(fixture(path), "r");
	if (!ASSERT_OK_PTR(f, name))
		return false;
	tr->m = calloc(MAX_SAMPLES, sizeof(*tr->m));
	tr->p = calloc(MAX_PAGES, sizeof(*tr->p));
	tr->e = calloc(MAX_ENTRIES, sizeof(*tr->e));
	tr->r = calloc(MAX_MARKS, sizeof(*tr->r));
	while (ok && tr->m && tr->p && tr->e && tr->r &&
	       fgets(line, sizeof(line), f))
		ok = parse_line(tr, line);
	fclose(f);
	if (!ASSERT_TRUE(ok && tr->nm > 1, "trace parsed")) {
		trace_free(tr);
		return false;
	}
	return true;
}

struct replay_cfg {
	uint64_t limit; /* 0: the trace's */
	struct rc_thresholds thr;
	uint64_t horizon_ns;
	uint64_t ack_ns; /* the executor's answer time */
	uint64_t eval_ns;
	bool dry_run;
	uint64_t until_ns; /* 0: the whole trace */
};

struct cmd {
	uint64_t t, id, bytes, generation;
	bool active, done;
};

struct replay {
	struct replay_cfg cfg;
	struct rc_outlook o;
	struct cmd cmds[MAX_CMDS];
	int n;
	uint64_t freed, asked;
	uint64_t first_t; /* of the first command, 0: none */
	int active_cmds;
	int64_t worst_over; /* most anon over the limit (< 0: never over) */
	int level;	    /* highest level the outlook's eta gave */
	const struct tr_page *page;
	struct rc_reuse reuse;
	struct rc_entry cand[MAX_ENTRIES / 16];
};

static bool sent(const struct replay *r, uint64_t id)
{
	for (int i = 0; i < r->n; i++)
		if (r->cmds[i].id == id)
			return true;
	return false;
}

static bool in_flight(uint64_t id, void *ctx)
{
	return sent(ctx, id);
}

/* Acks due by @now: the bytes are gone from the executor's usage. */
static void answer(struct replay *r, uint64_t now)
{
	for (int i = 0; i < r->n; i++) {
		struct cmd *c = &r->cmds[i];

		if (c->done || c->t + r->cfg.ack_ns > now)
			continue;
		c->done = true;
		if (r->cfg.dry_run)
			continue;
		r->freed += c->bytes;
		outlook_freed(&r->o, c->t, now, c->bytes);
		outlook_latency(&r->o, r->cfg.ack_ns);
	}
}

static uint64_t pending(const struct replay *r)
{
	uint64_t sum = 0;

	for (int i = 0; i < r->n; i++)
		if (!r->cmds[i].done)
			sum += r->cmds[i].bytes;
	return sum;
}

static void post(struct replay *r, const struct trace *tr,
		 const struct rc_plan *p, uint64_t now)
{
	const struct tr_page *pg = r->page;
	uint32_t idx[256], nr = pg->n < MAX_ENTRIES / 16 ? pg->n : 0;
	struct rc_select_req q = {
		.entries = r->cand,
		.nr_entries = nr,
		.generation = pg->generation,
		.deficit = p->deficit - pending(r),
		.phase = p->phase,
		.policy = RC_POLICY_RAM,
		.in_flight = in_flight,
		.ctx = r,
	};
	uint64_t covered;
	int n;

	for (uint32_t i = 0; i < nr; i++) {
		r->cand[i] = tr->e[pg->first + i];
		r->cand[i].reuse = reuse_hits(&r->reuse, r->cand[i].id);
	}
	n = policy_select(&q, idx, 256, &covered);
	for (int i = 0; i < n && r->n < MAX_CMDS; i++) {
		const struct rc_entry *e = &q.entries[idx[i]];

		r->cmds[r->n++] = (struct cmd){ now,
						e->id,
						e->bytes,
						e->used_generation,
						e->flags & RAMCACHE_F_ACTIVE,
						false };
		r->asked += e->bytes;
		r->active_cmds += !!(e->flags & RAMCACHE_F_ACTIVE);
		if (!r->first_t)
			r->first_t = now;
		outlook_posted(&r->o, now);
	}
}

/* The level the outlook's time-until-full alone gives. */
static int eta_level(const struct rc_view *v, const struct rc_thresholds *t)
{
	struct rc_pressure_in in = { .headroom = UINT64_MAX, .thr = *t };
	struct rc_pressure out;

	in.has_eta = v->has_eta;
	in.eta_ns = v->eta_ns;
	policy_pressure_eval(&in, &out);
	return out.level;
}

static void decide(struct replay *r, const struct trace *tr, uint64_t now,
		   uint64_t headroom)
{
	struct rc_view v;
	struct rc_plan p;
	int lvl;

	outlook_view(&r->o, now, headroom, r->cfg.horizon_ns, &v);
	lvl = eta_level(&v, &r->cfg.thr);
	if (lvl > r->level)
		r->level = lvl;
	outlook_plan(&v, &r->cfg.thr, false, &p);
	if (p.evict && r->page && pending(r) < p.deficit)
		post(r, tr, &p, now);
}

/* Replay @tr; the outcome in @r. */
static void replay(const struct trace *tr, const struct replay_cfg *cfg,
		   struct replay *r)
{
	uint64_t limit = cfg->limit ? cfg->limit : tr->limit, next = 0;
	uint32_t pi = 0;

	memset(r, 0, sizeof(*r));
	reuse_init(&r->reuse);
	r->cfg = *cfg;
	r->worst_over = INT64_MIN;
	outlook_init(&r->o);
	for (uint32_t i = 0; i < tr->nm; i++) {
		const struct tr_sample *s = &tr->m[i];
		uint64_t usage, anon, h;

		if (cfg->until_ns && s->t > cfg->until_ns)
			break;
		answer(r, s->t);
		while (pi < tr->np && tr->p[pi].t <= s->t) {
			r->page = &tr->p[pi++];
			reuse_note(&r->reuse, tr->e + r->page->first,
				   r->page->n);
		}
		usage = s->usage > r->freed ? s->usage - r->freed : 0;
		anon = usage > s->reclaimable ? usage - s->reclaimable : 0;
		if ((int64_t)(anon - limit) > r->worst_over)
			r->worst_over = (int64_t)(anon - limit);
		h = policy_headroom(UINT64_MAX, limit, usage, s->reclaimable);
		outlook_push(&r->o, s->t, h);
		if (s->t < next)
			continue;
		next = s->t + cfg->eval_ns;
		decide(r, tr, s->t, h);
	}
}

/*
 * Evictions that cost a recompute: the trace shows a later prompt using
 * the entry again (a later snapshot with a newer used_generation).
 */
static int misses(const struct trace *tr, const struct replay *r)
{
	int n = 0;

	for (int i = 0; i < r->n; i++) {
		const struct cmd *c = &r->cmds[i];
		bool again = false;

		for (uint32_t p = 0; p < tr->np && !again; p++) {
			const struct tr_page *pg = &tr->p[p];

			if (pg->t <= c->t)
				continue;
			for (uint32_t k = 0; k < pg->n && !again; k++)
				again = tr->e[pg->first + k].id == c->id &&
					tr->e[pg->first + k].used_generation >
						c->generation;
		}
		n += again;
	}
	return n;
}

/* The thresholds the agent resolves for a cgroup of @limit on 24 GiB. */
static struct rc_thresholds defaults(uint64_t limit)
{
	struct rc_threshold_in in = { .mem_total = 24 * RC_GIB,
				      .cg_limit = limit };
	struct rc_thresholds t;

	policy_thresholds_resolve(&in, &t);
	return t;
}

static struct replay_cfg comfy_cfg(uint64_t limit)
{
	return (struct replay_cfg){ .limit = limit,
				    .thr = defaults(limit),
				    .horizon_ns = 1000000000ULL,
				    .ack_ns = 100000000ULL,
				    .eval_ns = 50000000ULL };
}

static void say(const char *name, const struct replay *r)
{
	printf("# %s: %d commands (%d active), %llu MiB asked, first at %.2f s, worst anon over the limit %lld MiB, eta level %d\n",
	       name, r->n, r->active_cmds, (unsigned long long)(r->asked >> 20),
	       r->first_t / 1e9, (long long)(r->worst_over / (1 << 20)),
	       r->level);
}

#define GIB(x) ((uint64_t)((x) * (double)RC_GIB))
#define MIB(x) ((uint64_t)(x) << 20)

/* What the trace needs freed at least to stay under @limit: anon over it. */
static uint64_t needed(const struct trace *tr, uint64_t limit)
{
	uint64_t most = 0;

	for (uint32_t i = 0; i < tr->nm; i++) {
		uint64_t anon = tr->m[i].usage - tr->m[i].reclaimable;

		if (tr->m[i].usage > tr->m[i].reclaimable && anon > limit &&
		    anon - limit > most)
			most = anon - limit;
	}
	return most;
}

/*
 * Issue 29's spike: a blur or sharpen takes a few hundred MiB for a moment
 * and gives it back, with over a GB free (prompts 1 to 3 of the session in
 * a 1.8 GiB limit: 1.1 GB free before the first blur). No command.
 */
TEST(spike_with_room_makes_no_command)
{
	struct replay_cfg c = comfy_cfg(GIB(1.8));
	struct trace tr;
	struct replay r;

	if (!trace_load("comfy-reuse", &tr))
		return;
	c.until_ns = 22700000000ULL;
	replay(&tr, &c, &r);
	say("spike", &r);
	ASSERT_EQ(r.n, 0, "commands during the spikes");
	ASSERT_TRUE(r.worst_over < 0, "the spikes fit");
	trace_free(&tr);
}

/*
 * A steady climb to the limit (the demo's ramp of BENCHMARKS section 2,
 * with its flags and --dry-run): the first command at least 1 s before
 * the first reclaim stall, as before.
 */
TEST(steady_climb_commands_a_second_ahead_of_reclaim)
{
	struct replay_cfg c = { .thr = { MIB(64), MIB(128) },
				.horizon_ns = 1000000000ULL,
				.ack_ns = 5000000ULL,
				.eval_ns = 10000000ULL,
				.dry_run = true };
	struct trace tr;
	struct replay r;

	if (!trace_load("demo-ramp", &tr))
		return;
	replay(&tr, &c, &r);
	say("ramp", &r);
	if (ASSERT_TRUE(tr.nr > 0 && r.first_t, "reclaim and a command"))
		ASSERT_LE(r.first_t + 1000000000ULL, tr.r[0],
			  "first command 1 s before reclaim");
	trace_free(&tr);
}

/*
 * A climb that turns short of the limit: the session's cache grows to
 * 1.8 GiB and stops, 2.75 GiB leaves 340 MiB at its highest. Few
 * commands, little asked, never over.
 */
TEST(climb_that_turns_asks_little)
{
	struct replay_cfg c = comfy_cfg(GIB(2.75));
	struct trace tr;
	struct replay r;

	if (!trace_load("comfy-reuse", &tr))
		return;
	replay(&tr, &c, &r);
	say("turn", &r);
	ASSERT_LE(r.n, 2, "commands");
	ASSERT_LE(r.asked, MIB(256), "bytes asked");
	ASSERT_TRUE(r.worst_over < 0, "never over the limit");
	trace_free(&tr);
}

/*
 * Issue 29's session in real ComfyUI 0.33.0 where everything fits
 * (2.5 GiB): the blur's and the prompt ends' releases teach no spike
 * bigger than a node takes, nothing is evicted.
 */
TEST(fits_in_comfyui_033_evicts_nothing)
{
	struct replay_cfg c = comfy_cfg(GIB(2.5));
	struct trace tr;
	struct replay r;

	if (!trace_load("comfy033-session", &tr))
		return;
	replay(&tr, &c, &r);
	say("0.33 fits", &r);
	ASSERT_EQ(r.n, 0, "commands");
	trace_free(&tr);
}

/* Where everything fits (3 GiB) and with room (6 GiB): nothing evicted. */
TEST(fits_evicts_nothing)
{
	static const double limits[] = { 3, 6 };
	struct trace tr;
	struct replay r;

	if (!trace_load("comfy-reuse", &tr))
		return;
	for (size_t i = 0; i < 2; i++) {
		struct replay_cfg c = comfy_cfg(GIB(limits[i]));

		replay(&tr, &c, &r);
		say(i ? "room" : "fits", &r);
		ASSERT_EQ(r.n, 0, "commands");
	}
	/* with room, no time-until-full warning either */
	ASSERT_EQ(r.level, RAMCACHE_LEVEL_OK, "level with room");
	trace_free(&tr);
}

/*
 * Tight (1.5 GiB, the session needs 2.4 at its highest): it stays under
 * the limit, asks for no active entry, and for at most half as much again
 * as the least that keeps it under.
 */
TEST(tight_asks_for_the_shortfall)
{
	struct replay_cfg c = comfy_cfg(GIB(1.5));
	struct trace tr;
	struct replay r;
	uint64_t least;

	if (!trace_load("comfy-reuse", &tr))
		return;
	least = needed(&tr, GIB(1.5));
	replay(&tr, &c, &r);
	say("tight", &r);
	printf("# tight: at least %llu MiB must go, %d would-be misses\n",
	       (unsigned long long)(least >> 20), misses(&tr, &r));
	ASSERT_TRUE(r.worst_over < 0, "never over the limit");
	ASSERT_EQ(r.active_cmds, 0, "active entries asked for");
	ASSERT_LE(r.asked, least + least / 2, "bytes asked");
	trace_free(&tr);
}

TEST_MAIN()
