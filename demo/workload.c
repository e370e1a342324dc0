// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The prompt/node model. A workflow is a chain of nodes: node 0 loads a
 * checkpoint (a model), every later node turns the previous node's output
 * into its own, and sampling nodes run in steps. Each prompt changes one
 * node's input (a seed, a text), so the nodes before it are cache hits and
 * the nodes from it on are recomputed, as in ComfyUI. Prompts use the
 * models in turn, two prompts each.
 *
 * Safe points: between nodes, after each sampling step, after every MiB of
 * a node's output or a model's copy, and at once when a command comes while
 * a node waits on its "GPU" (a sleep the command thread wakes). At each the
 * executor beats its heartbeat and obeys queued agent commands; between
 * nodes the local policy checks its own available memory. An entry a node
 * is using is marked busy (active on the page) first: a command for it is
 * held and obeyed at the first safe point after the node is done with it
 * (docs/control-page.md, "Busy entries").
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "demo.h"

volatile int demo_stop_signal;

/* What a node needs besides its output: huge-page rounding, small stuff. */
#define ALLOC_SLACK (16 * MiB)

struct run {
	const struct demo_opts *o;
	struct ramcache *rc;
	struct demo_cache cache;
	struct cmdq cmdq;
	struct memavail mem;
	struct psi_watch psi;
	struct demo_stats *st;
	char (*model_paths)[PATH_MAX];
	uint64_t gen;
	uint64_t last_beat_ns;
	uint64_t start_ns;
	bool agent_alive; /* as of the last safe point */
	bool said_local;
	/* commands for entries in use, obeyed when they no longer are */
	struct ramcache_command held[RAMCACHE_DEFAULT_RING];
	unsigned int nr_held;
};

static const char *const node_names[] = {
	"checkpoint", "clip_encode", "empty_latent", "ksampler",
	"vae_decode", "upscale",     "ksampler_hr",  "vae_decode_hr",
};

static void node_name(const struct demo_opts *o, unsigned int i, char *buf,
		      size_t len)
{
	if (i < sizeof(node_names) / sizeof(node_names[0]))
		snprintf(buf, len, "%s", node_names[i]);
	else
		snprintf(buf, len, "node%u", i);
}

/* Sampling nodes run --steps steps with a safe point after each. */
static bool node_samples(const struct demo_opts *o, unsigned int i)
{
	if (o->nodes < 4)
		return i == o->nodes - 1;
	return i % 3 == 0;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t z = a * 0x9e3779b97f4a7c15ULL + b + 0x632be59bd9b4e019ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t ms_since(uint64_t t0)
{
	return (ramcache_now_ns() - t0) / 1000000;
}

static void report_evict(const char *by, const char *label, uint64_t id,
			 uint64_t seq, uint32_t status, uint64_t bytes,
			 uint64_t latency_ns)
{
	if (report_json()) {
		printf("{\"type\":\"demo_evict\",\"by\":\"%s\",\"seq\":%" PRIu64
		       ",\"id\":%" PRIu64 ",\"label\":",
		       by, seq, id);
		json_str(label);
		printf(",\"status\":\"%s\",\"bytes_freed\":%" PRIu64
		       ",\"latency_us\":%" PRIu64 "}\n",
		       ramcache_status_name(status), bytes, latency_ns / 1000);
		return;
	}
	if (seq)
		report_msg(
			"agent cmd %" PRIu64
			": %s %s, %.1f MiB freed, %.2f ms after it was issued",
			seq, ramcache_status_name(status),
			label[0] ? label : "?", (double)bytes / MiB,
			latency_ns / 1e6);
	else
		report_msg("local: evicted %s, %.1f MiB freed", label,
			   (double)bytes / MiB);
}

static void serve_command(struct run *r, const struct ramcache_command *cmd)
{
	struct demo_entry *e = cache_find_id(&r->cache, cmd->entry_id);
	char label[RAMCACHE_LABEL_LEN] = "";
	uint32_t status;
	uint64_t bytes = 0;
	int err;

	if (e && e->busy && !(e->flags & RAMCACHE_F_PINNED) &&
	    r->nr_held < RAMCACHE_DEFAULT_RING) {
		r->held[r->nr_held++] =
			*cmd; /* until the node is done with it */
		r->st->held++;
		return;
	}
	if (e)
		snprintf(label, sizeof(label), "%s", e->label);
	if (!e) {
		status = RAMCACHE_ACK_NOT_FOUND;
	} else if (e->flags & RAMCACHE_F_PINNED) {
		status = RAMCACHE_ACK_PINNED;
	} else if (e->busy) { /* more held than the ring: never */
		status = RAMCACHE_ACK_BUSY;
	} else {
		bytes = cache_evict(&r->cache, e);
		status = RAMCACHE_ACK_EVICTED;
	}
	err = ramcache_ack(r->rc, cmd, status, bytes);
	if (err)
		report_err("failed to ack command %" PRIu64 ": %s", cmd->seq,
			   strerror(-err));
	r->st->acks++;
	if (status == RAMCACHE_ACK_EVICTED)
		r->st->acks_evicted++;
	else if (status == RAMCACHE_ACK_BUSY)
		r->st->acks_busy++;
	else if (status == RAMCACHE_ACK_NOT_FOUND)
		r->st->acks_not_found++;
	report_evict("agent", label, cmd->entry_id, cmd->seq, status, bytes,
		     ramcache_now_ns() - cmd->issue_ns);
}

/* The held commands whose entries are no longer in use (or gone). */
static void serve_held(struct run *r)
{
	unsigned int n = r->nr_held, k = 0;
	struct ramcache_command cmds[RAMCACHE_DEFAULT_RING];

	memcpy(cmds, r->held, n * sizeof(cmds[0]));
	r->nr_held = 0;
	for (unsigned int i = 0; i < n; i++) {
		struct demo_entry *e =
			cache_find_id(&r->cache, cmds[i].entry_id);

		if (e && e->busy)
			r->held[k++] = cmds[i];
		else
			serve_command(r, &cmds[i]);
	}
	r->nr_held += k;
}

/*
 * A safe point: called often, even inside long copies. Keeps the heartbeat
 * fresh and obeys the agent's queued commands (none but with --policy
 * agent).
 */
static void tick(void *arg)
{
	struct run *r = arg;
	struct ramcache_command cmd;
	uint64_t now;

	if (!r->rc)
		return;
	now = ramcache_now_ns();
	if (now - r->last_beat_ns >= RAMCACHE_HEARTBEAT_PERIOD_NS) {
		ramcache_heartbeat(r->rc);
		r->last_beat_ns = now;
	}
	serve_held(r);
	while (cmdq_pop(&r->cmdq, &cmd))
		serve_command(r, &cmd);
}

/* The "GPU" time of a step: asleep, woken by commands to obey them. */
static void sleep_ms(struct run *r, unsigned int ms)
{
	uint64_t end = ramcache_now_ns() + ms * 1000000ULL, now;

	while (!demo_stop_signal && (now = ramcache_now_ns()) < end) {
		/* at least every 50 ms: the heartbeat */
		cmdq_wait(&r->cmdq,
			  end - now < 50000000 ? end : now + 50000000);
		tick(r);
	}
}

/* Evict what the running node does not need until @want is available. */
static void evict_until(struct run *r, uint64_t want)
{
	struct demo_entry *e;

	while (memavail_read(&r->mem) < want) {
		char label[RAMCACHE_LABEL_LEN];
		uint64_t id, bytes;

		e = cache_pick_victim(&r->cache);
		if (!e)
			return;
		snprintf(label, sizeof(label), "%s", e->label);
		id = e->id;
		bytes = cache_evict(&r->cache, e);
		r->st->local_evictions++;
		report_evict("local", label, id, 0, RAMCACHE_ACK_EVICTED, bytes,
			     0);
	}
}

/* --policy psi: the trigger fired, so free at least one entry. */
static void evict_one(struct run *r)
{
	struct demo_entry *e = cache_pick_victim(&r->cache);
	char label[RAMCACHE_LABEL_LEN];
	uint64_t id, bytes;

	if (!e)
		return;
	snprintf(label, sizeof(label), "%s", e->label);
	id = e->id;
	bytes = cache_evict(&r->cache, e);
	r->st->local_evictions++;
	report_evict("local", label, id, 0, RAMCACHE_ACK_EVICTED, bytes, 0);
}

/*
 * Before every big allocation, whatever the policy but none: the process
 * never allocates into certain OOM, even while an agent it trusts is late
 * (it is declared dead only after RAMCACHE_HEARTBEAT_TIMEOUT_NS).
 */
static void make_room(struct run *r, uint64_t bytes)
{
	if (r->o->policy != DEMO_POLICY_NONE)
		evict_until(r, bytes + ALLOC_SLACK);
}

/* @boundary: between nodes, where the local policy runs too. */
static void safe_point(struct run *r, bool boundary)
{
	tick(r);
	if (r->cache.bytes > r->st->peak_cached)
		r->st->peak_cached = r->cache.bytes;
	if (r->o->policy == DEMO_POLICY_NONE)
		return;
	if (r->o->policy == DEMO_POLICY_PSI) {
		unsigned int n = psi_take(&r->psi);

		/* at any safe point: the trigger is the whole policy */
		if (n) {
			r->st->psi_events += n;
			evict_one(r);
			evict_until(r, r->o->local_headroom);
		}
		return;
	}
	if (r->o->policy == DEMO_POLICY_AGENT) {
		/* tick() above obeyed the queued commands */
		bool alive = ramcache_agent_alive(r->rc);
		if (alive && !r->agent_alive)
			report_msg("agent attached: obeying its commands");
		else if (!alive && r->agent_alive)
			report_msg(
				"agent heartbeat lost: falling back to the local policy");
		else if (!alive && !r->said_local)
			report_msg(
				"no agent: using the local policy until one attaches");
		r->said_local = true;
		r->agent_alive = alive;
		if (alive)
			return;
	}
	if (boundary)
		evict_until(r, r->o->local_headroom);
}

/*
 * Write every page of [off, off + len) of @e, reading @in as we go, with a
 * safe point every MiB.
 */
static void fill(struct run *r, struct demo_entry *e,
		 const struct demo_entry *in, size_t off, size_t len)
{
	const unsigned char *src = in ? in->anon : NULL;
	unsigned char *dst = e->anon;
	size_t page = 4096, p;

	for (p = off; p < off + len; p += page) {
		size_t n = off + len - p < page ? off + len - p : page;
		unsigned char v = (unsigned char)(e->key >> ((p / page) % 8));

		if (src)
			v ^= src[p % in->anon_len];
		memset(dst + p, v | 1, n);
		if ((p + page) % MiB == 0)
			tick(r);
	}
}

static struct demo_entry *compute_node(struct run *r, unsigned int i,
				       uint64_t key,
				       const struct demo_entry *in,
				       unsigned int prompt)
{
	const struct demo_opts *o = r->o;
	uint64_t t0 = ramcache_now_ns();
	struct demo_entry *e;
	char name[32];
	int err;

	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->kind = DEMO_KIND_OUTPUT;
	e->key = key;
	node_name(o, i, name, sizeof(name));
	snprintf(e->label, sizeof(e->label), "%s@p%u", name, prompt + 1);
	make_room(r, o->output_size);
	e->anon = mmap(NULL, o->output_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->anon == MAP_FAILED) {
		free(e);
		return NULL;
	}
	e->anon_len = o->output_size;
	/* fewer page faults; munmap still returns it at once */
	madvise(e->anon, e->anon_len, MADV_HUGEPAGE);
	if (node_samples(o, i)) {
		size_t per = (o->output_size / o->steps + 4095) & ~4095ULL;

		for (unsigned int s = 0; s < o->steps; s++) {
			size_t off = (size_t)s * per;

			if (off < e->anon_len)
				fill(r, e, in, off,
				     e->anon_len - off < per ? e->anon_len - off
							     : per);
			sleep_ms(r, o->step_ms);
			safe_point(r, false);
		}
		if ((size_t)o->steps * per < e->anon_len)
			fill(r, e, in, o->steps * per,
			     e->anon_len - o->steps * per);
	} else {
		fill(r, e, in, 0, e->anon_len);
		sleep_ms(r, o->step_ms);
	}
	e->cost_ns = ramcache_now_ns() - t0;
	e->used_generation = r->gen;
	e->flags = RAMCACHE_F_ACTIVE;
	e->busy = true;
	err = cache_add(&r->cache, e);
	if (err) {
		report_err("failed to publish %s: %s", e->label,
			   strerror(-err));
		entry_release(e);
		free(e);
		return NULL;
	}
	r->st->computed++;
	return e;
}

static struct demo_entry *get_model(struct run *r, unsigned int m)
{
	uint64_t key = mix(0x6d6f64656cULL, m), t0;
	struct demo_entry *e = cache_find_key(&r->cache, DEMO_KIND_MODEL, key);
	int err;

	if (e) {
		cache_use(&r->cache, e, r->gen);
		return e;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	t0 = ramcache_now_ns();
	make_room(r, r->o->model_size);
	err = model_load(e, r->model_paths[m], r->o->model_size, tick, r);
	if (err) {
		report_err("failed to load model %s: %s", r->model_paths[m],
			   strerror(-err));
		free(e);
		return NULL;
	}
	e->kind = DEMO_KIND_MODEL;
	e->key = key;
	e->model = m;
	e->cost_ns = ramcache_now_ns() - t0;
	e->used_generation = r->gen;
	e->flags = RAMCACHE_F_MODEL;
	snprintf(e->label, sizeof(e->label), "model-%u", m);
	err = cache_add(&r->cache, e);
	if (err) {
		report_err("failed to publish %s: %s", e->label,
			   strerror(-err));
		entry_release(e);
		free(e);
		return NULL;
	}
	r->st->model_loads++;
	return e;
}

static void report_prompt(struct run *r, unsigned int p, unsigned int m,
			  unsigned int changed, unsigned int hits,
			  unsigned int computed, bool loaded)
{
	const struct demo_opts *o = r->o;
	uint64_t evicted = r->cache.evicted;
	char name[32];

	if (changed)
		node_name(o, changed, name, sizeof(name));
	else
		snprintf(name, sizeof(name), "all");
	if (report_json()) {
		printf("{\"type\":\"demo_prompt\",\"prompt\":%u,\"prompts\":%u,\"model\":%u,\"model_loaded\":%s,\"changed_node\":",
		       p + 1, o->prompts, m, loaded ? "true" : "false");
		json_str(name);
		printf(",\"hits\":%u,\"computed\":%u,\"cached_bytes\":%" PRIu64
		       ",\"entries\":%zu,\"evicted\":%" PRIu64
		       ",\"bytes_evicted\":%" PRIu64 ",\"rss_anon\":%" PRIu64
		       ",\"elapsed_ms\":%" PRIu64 "}\n",
		       hits, computed, r->cache.bytes, r->cache.n, evicted,
		       r->cache.bytes_evicted, rss_anon_bytes(),
		       ms_since(r->start_ns));
		return;
	}
	report_msg(
		"prompt %u/%u: model-%u%s, changed %s: %u cached, %u computed; cache %.0f MiB in %zu entries, %" PRIu64
		" evicted so far, %.1f s",
		p + 1, o->prompts, m, loaded ? " (loaded)" : "", name, hits,
		computed, (double)r->cache.bytes / MiB, r->cache.n, evicted,
		ms_since(r->start_ns) / 1000.0);
}

/*
 * What prompt @p changes, against the last prompt on the same model: most
 * often the seed of the first sampler, sometimes the text, sometimes any
 * node. Returns the node index.
 */
static unsigned int pick_change(const struct demo_opts *o, uint64_t *rng,
				unsigned int p)
{
	unsigned int sampler = 1;

	while (sampler < o->nodes - 1 && !node_samples(o, sampler))
		sampler++;
	*rng = mix(*rng, p);
	switch (*rng % 4) {
	case 0:
	case 1:
		return sampler;
	case 2:
		return 1;
	}
	return 1 + (*rng >> 8) % (o->nodes - 1);
}

static int run_prompt(struct run *r, unsigned int p, uint64_t (*params)[64],
		      uint64_t *rng)
{
	const struct demo_opts *o = r->o;
	unsigned int nodes = o->nodes, m = (p / 2) % o->models, changed = 0;
	unsigned int hits = 0, computed = 0, i, start;
	uint64_t keys[64];
	uint64_t loads = r->st->model_loads;
	struct demo_entry *model, *in = NULL, *out;

	r->gen = p + 1;
	if (r->rc)
		ramcache_set_generation(r->rc, r->gen);
	if (p > 0) {
		changed = pick_change(o, rng, p);
		params[m][changed]++;
	}
	keys[0] = mix(0x6d6f64656cULL, m);
	for (i = 1; i < nodes; i++)
		keys[i] = mix(mix(keys[i - 1], i), params[m][i]);

	/* the last node whose output is still cached: start after it */
	for (start = nodes - 1; start > 0; start--) {
		in = cache_find_key(&r->cache, DEMO_KIND_OUTPUT, keys[start]);
		if (in)
			break;
	}
	if (in) {
		hits++;
		in->busy = true;
		cache_use(&r->cache, in, r->gen);
		cache_set_active(&r->cache, in, true);
	}
	if (start == nodes - 1)
		goto done;

	model = get_model(r, m);
	if (!model)
		return -ENOMEM;
	model->busy = true;
	cache_set_active(&r->cache, model, true);
	safe_point(r, true);

	for (i = start + 1; i < nodes && !demo_stop_signal; i++) {
		out = compute_node(r, i, keys[i], in ? in : model, p);
		if (!out)
			return -ENOMEM;
		computed++;
		if (in) {
			in->busy = false;
			cache_set_active(&r->cache, in, false);
		}
		in = out;
		safe_point(r, true);
	}
	model->busy = false;
	cache_set_active(&r->cache, model, false);
done:
	if (in) {
		in->busy = false;
		cache_set_active(&r->cache, in, false);
	}
	if (demo_stop_signal)
		return 0;
	r->st->prompts++;
	r->st->hits += hits;
	report_prompt(r, p, m, changed, hits, computed,
		      r->st->model_loads != loads);
	safe_point(r, true);
	return 0;
}

static void wait_agent(struct run *r)
{
	uint64_t end = ramcache_now_ns() + r->o->wait_agent_s * 1000000000ULL;

	report_msg("waiting up to %u s for the agent (ramcache-bpf --pid %d)",
		   r->o->wait_agent_s, getpid());
	while (!ramcache_agent_alive(r->rc) && !demo_stop_signal) {
		if (ramcache_now_ns() >= end) {
			report_msg("no agent after %u s: starting anyway",
				   r->o->wait_agent_s);
			return;
		}
		tick(r);
		sleep_ms(r, 20);
	}
}

static int generate_models(struct run *r, const char *dir)
{
	const struct demo_opts *o = r->o;
	uint64_t t0 = ramcache_now_ns();

	r->model_paths = calloc(o->models, sizeof(*r->model_paths));
	if (!r->model_paths)
		return -ENOMEM;
	for (unsigned int m = 0; m < o->models && !demo_stop_signal; m++) {
		snprintf(r->model_paths[m], PATH_MAX, "%s/model-%u.bin", dir,
			 m);
		int err = model_generate(r->model_paths[m], o->model_size, m,
					 tick, r);
		if (err) {
			report_err("failed to write model file %s: %s",
				   r->model_paths[m], strerror(-err));
			return err;
		}
	}
	report_msg("generated %u model file(s) of %.0f MiB in %s (%.1f s)",
		   o->models, (double)o->model_size / MiB, dir,
		   ms_since(t0) / 1000.0);
	return 0;
}

int workload_run(const struct demo_opts *o, struct ramcache *rc,
		 const char *model_dir, struct demo_stats *st)
{
	struct run r = { .o = o, .rc = rc, .st = st };
	uint64_t(*params)[64] = NULL;
	uint64_t rng = 42;
	int err;

	cache_init(&r.cache, rc);
	params = calloc(o->models, sizeof(*params));
	if (!params)
		return -ENOMEM;
	err = memavail_init(&r.mem);
	if (err)
		goto out;
	err = generate_models(&r, model_dir);
	if (err)
		goto out;
	if (o->policy == DEMO_POLICY_AGENT) {
		if (o->wait_agent_s)
			wait_agent(&r);
		err = cmdq_start(&r.cmdq, rc);
		if (err) {
			report_err("failed to start the command thread: %s",
				   strerror(-err));
			goto out;
		}
	}
	if (o->policy == DEMO_POLICY_PSI) {
		err = psi_start(&r.psi, &r.mem, o->psi_trigger);
		if (err) {
			report_err("failed to set the PSI trigger \"%s\": %s",
				   o->psi_trigger, strerror(-err));
			goto out;
		}
	}
	r.start_ns = ramcache_now_ns();
	for (unsigned int p = 0; p < o->prompts && !demo_stop_signal; p++) {
		err = run_prompt(&r, p, params, &rng);
		if (err) {
			report_err("prompt %u failed: %s", p + 1,
				   strerror(-err));
			break;
		}
	}
	st->elapsed_ms = ms_since(r.start_ns);
out:
	psi_stop(&r.psi);
	cmdq_stop(&r.cmdq);
	/* commands taken but not served still get their answer */
	if (rc) {
		struct ramcache_command cmd;

		while (cmdq_pop(&r.cmdq, &cmd))
			serve_command(&r, &cmd);
	}
	st->peak_cached = st->peak_cached > r.cache.bytes ? st->peak_cached
							  : r.cache.bytes;
	st->evicted = r.cache.evicted;
	st->bytes_evicted = r.cache.bytes_evicted;
	cache_destroy(&r.cache);
	memavail_free(&r.mem);
	free(params);
	if (r.model_paths) {
		for (unsigned int m = 0; m < o->models; m++)
			if (r.model_paths[m][0])
				unlink(r.model_paths[m]);
		free(r.model_paths);
	}
	return err;
}
