// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The table of followed executors; see targets.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proc/clock.h"
#include "proc/readfile.h"
#include "executors/targets.h"

void target_thresholds(const struct target_env *env, uint64_t cg_limit,
		       struct rc_thresholds *thr)
{
	struct rc_threshold_in in = {
		.mem_total = env->mem_total,
		.cg_limit = cg_limit,
		.headroom_set = env->cfg.headroom_set,
		.headroom = env->cfg.headroom,
		.inactive_set = env->cfg.inactive_set,
		.inactive = env->cfg.inactive,
	};

	policy_thresholds_resolve(&in, thr);
}

static void report_read(const struct target_env *env, int err)
{
	out_read_error(env->out, env->read_err, err,
		       "memory and cgroup counters");
}

/*
 * Memcg reclaim of @t's cgroup @ino is reported while a target is in it
 * (counted per cgroup: one leaving does not stop it for the others).
 */
static void watch_memcg(const struct target_env *env, struct target *t,
			uint64_t ino)
{
	static bool told;
	int err = bpfstate_watch_memcg(env->bpf, ino);

	t->memcg_watched = err ? 0 : ino;
	if (err && !told) {
		told = true;
		out_warn(
			env->out,
			"failed to watch memory cgroup %s for reclaim stalls: %s; memcg reclaim of its other tasks is not reported",
			t->sm.cg.path, strerror(-err));
	}
}

static void unwatch_memcg(const struct target_env *env, struct target *t)
{
	if (t->memcg_watched)
		bpfstate_unwatch_memcg(env->bpf, t->memcg_watched);
	t->memcg_watched = 0;
}

static int read_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	n = readfile_prefix(path, buf, len);
	if (n < 0)
		return n;
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return 0;
}

void target_tick(struct target *t, uint64_t now)
{
	char comm[sizeof(t->comm)];

	/* read by pid: kept only while the pidfd says it is the same */
	if (!t->ev.open && !read_comm(t->pid, comm, sizeof(comm)) &&
	    match_pidfd_alive(t->pidfd) == 0)
		memcpy(t->comm, comm, sizeof(comm));
	evictor_tick(&t->ev, now);
}

/* The first --weight rule naming @pid or a piece of its command line. */
static double weight_of(const struct target_cfg *cfg, pid_t pid)
{
	const struct weight_rule *w = cfg->weights;
	char path[64], cmd[4096];
	ssize_t n;

	for (int i = 0; i < cfg->nr_weights; i++)
		if (w[i].pid == pid)
			return w[i].weight;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	n = readfile_prefix(path, cmd, sizeof(cmd));
	for (int i = 0; n > 0 && i < cfg->nr_weights; i++)
		if (w[i].pattern[0] &&
		    match_cmdline(cmd, (size_t)n, w[i].pattern))
			return w[i].weight;
	return 1.0;
}

/* @rel without its last @up components ("/" at the top). */
static void ancestor(const char *rel, int up, char *out, size_t len)
{
	char *slash;

	snprintf(out, len, "%s", rel);
	while (up-- > 0 && (slash = strrchr(out, '/'))) {
		*slash = '\0';
		if (!out[0]) {
			snprintf(out, len, "/");
			break;
		}
	}
}

/* The domain and tags from what the sampler read last. */
static void update_domain(struct target *t)
{
	const struct rc_cgroup_state *cs = &t->sm.cs;

	if (t->sm.has_cg) {
		snprintf(t->cgroup, sizeof(t->cgroup), "%s", t->sm.cg.rel);
		t->tag.cgroup = t->cgroup;
	} else {
		t->cgroup[0] = '\0';
		t->tag.cgroup = NULL;
	}
	if (t->sm.has_cg && cs->nearest_depth >= 0 && cs->nearest_ino) {
		t->domain = cs->nearest_ino;
		ancestor(t->sm.cg.rel, cs->nearest_depth, t->domain_path,
			 sizeof(t->domain_path));
	} else {
		t->domain = 0;
		snprintf(t->domain_path, sizeof(t->domain_path), "machine");
	}
	t->tag.comm = t->comm;
	t->tag.domain = t->domain_path;
}

/* Leave domain index @d; the last one out clears its metrics. */
static void domain_put(struct targets *ts, const struct target_env *env, int d)
{
	if (d < 0 || --ts->dom_refs[d] > 0)
		return;
	ts->dom_refs[d] = 0;
	metrics_domain_clear(env->m, (unsigned int)d);
}

/* The index of domain @key: the one in use, or the lowest free one. */
static int domain_get(struct targets *ts, uint64_t key)
{
	int free_d = -1;

	for (int d = 0; d < RC_MAX_TARGETS; d++) {
		if (ts->dom_refs[d] && ts->dom_key[d] == key) {
			ts->dom_refs[d]++;
			return d;
		}
		if (!ts->dom_refs[d] && free_d < 0)
			free_d = d;
	}
	/* at most one domain per target: there is always a free one */
	ts->dom_key[free_d] = key;
	ts->dom_refs[free_d] = 1;
	return free_d;
}

/* After a read or a move: file the target under its (new) domain. */
static void sync_domain(struct targets *ts, const struct target_env *env,
			struct target *t)
{
	char old[sizeof(t->cgroup)];

	snprintf(old, sizeof(old), "%s", t->cgroup);
	update_domain(t);
	if (t->dom >= 0 && ts->dom_key[t->dom] == t->domain &&
	    !strcmp(old, t->cgroup))
		return;
	if (t->dom < 0 || ts->dom_key[t->dom] != t->domain) {
		domain_put(ts, env, t->dom);
		t->dom = domain_get(ts, t->domain);
	}
	metrics_exec_relabel(env->m, (unsigned int)t->slot, t->tag.cgroup,
			     (unsigned int)t->dom);
}

int targets_sample(const struct targets *ts, struct sampler *s, uint64_t now)
{
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		if (ts->t[i] && sampler_covers(&ts->t[i]->sm, s, now)) {
			sampler_copy(s, &ts->t[i]->sm, now);
			return 0;
		}
	return sampler_read(s, now);
}

int target_read(struct targets *ts, const struct target_env *env,
		struct target *t, uint64_t now)
{
	int err = targets_sample(ts, &t->sm, now);

	sync_domain(ts, env, t);
	return err;
}

static void setup_evictor(struct target *t, const struct target_env *env)
{
	int err;

	err = evictor_init(&t->ev, &env->cfg.evictor, env->out, env->m,
			   &t->ctl);
	if (err)
		out_warn(
			env->out,
			"failed to set up eviction for pid %d: %s; monitoring only",
			t->pid, strerror(-err));
	t->ev.rss = t->sm.rss;
	t->ev.outlook = &t->sm.outlook;
	t->ev.pidfd = t->pidfd; /* how it ended, once it has */
	t->ev.tag = &t->tag;
	t->ev.mslot = (unsigned int)t->slot;
	t->evicting = !err;
}

/* Pin @pid with a pidfd and check it is (still) what @spec accepts. */
static int pin(struct target *t, pid_t pid, const struct match_spec *spec)
{
	char path[64];
	struct stat st;
	int err;

	t->pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (t->pidfd < 0)
		return -errno;
	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (stat(path, &st))
		return -errno;
	if (read_comm(pid, t->comm, sizeof(t->comm)))
		snprintf(t->comm, sizeof(t->comm), "?");
	/* what was read by pid belongs to the process the pidfd pins */
	err = spec ? match_verify(RC_PROC_ROOT, spec, pid, t->pidfd)
		   : match_pidfd_alive(t->pidfd);
	if (err)
		return err;
	t->pid = pid;
	t->uid = st.st_uid;
	return 0;
}

/* Sampler, cgroup, thresholds and domain of a pinned, tracked target. */
static int start_sampling(struct targets *ts, struct target *t,
			  const struct target_env *env)
{
	struct rc_pidstat ps;
	int err;

	sampler_init(&t->sm, t->pid, NULL, NULL);
	if (t->sm.cg_err == -EXDEV)
		out_warn(
			env->out,
			"pid %d: its memory cgroup is outside this agent's cgroup namespace, so its limit is not watched, only the machine's memory: run the agent in the host's (--cgroupns=host)",
			t->pid);
	if (!meminfo_pidstat_read(RC_PROC_ROOT, t->pid, &ps))
		t->sm.rss = ps.rss_bytes;
	/* the cgroup and RSS were read by pid: still the pidfd's process? */
	err = match_pidfd_alive(t->pidfd);
	if (err)
		return err;
	report_read(env, sampler_read(&t->sm, now_ns()));
	update_domain(t);
	t->dom = domain_get(ts, t->domain);
	t->oom_base = t->sm.cs.self.oom_kill;
	if (t->sm.has_cg && t->sm.cg.ino)
		watch_memcg(env, t, t->sm.cg.ino);
	target_thresholds(env, t->sm.has_cg ? t->sm.cs.limit : RC_UNLIMITED,
			  &t->thr);
	if (control_target_read(RC_PROC_ROOT, t->pid, t->uid, &t->ctl))
		t->ctl.ns_pid = t->pid;
	return 0;
}

static int free_slot(const struct targets *ts)
{
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		if (!ts->t[i])
			return i;
	return -ENOSPC;
}

int target_attach(struct targets *ts, const struct target_env *env, pid_t pid,
		  const struct match_spec *spec, struct target **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int slot = free_slot(ts), err;
	struct target *t;

	if (slot < 0)
		return slot;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->slot = slot;
	t->pidfd = -1;
	t->dom = -1;
	err = pin(t, pid, spec);
	if (err)
		goto fail_pin;
	err = bpfstate_track(env->bpf, pid);
	if (err)
		goto fail_pin;
	err = start_sampling(ts, t, env);
	if (err)
		goto fail;
	t->weight = weight_of(&env->cfg, pid);
	if (env->cfg.evict)
		setup_evictor(t, env);
	ev.data.u32 = env->tag_base + (uint32_t)slot;
	if (epoll_ctl(env->epfd, EPOLL_CTL_ADD, t->pidfd, &ev)) {
		err = -errno;
		if (t->evicting)
			evictor_finish(&t->ev, now_ns());
		goto fail;
	}
	ts->t[slot] = t;
	ts->n++;
	metrics_exec_bind(env->m, (unsigned int)slot, pid, t->comm,
			  t->tag.cgroup, (unsigned int)t->dom);
	metrics_set_rss(env->m, (unsigned int)slot, t->sm.rss);
	*out = t;
	return 0;
fail:
	domain_put(ts, env, t->dom);
	unwatch_memcg(env, t);
	bpfstate_untrack(env->bpf, pid);
fail_pin:
	if (t->pidfd >= 0)
		close(t->pidfd);
	free(t);
	return err;
}

bool target_detach(struct targets *ts, const struct target_env *env,
		   struct target *t, struct hist *ack, struct hist *freed)
{
	bool was = t->evicting;

	if (t->evicting) {
		evictor_finish(&t->ev, now_ns());
		hist_merge(ack, &t->ev.ack_hist);
		hist_merge(freed, &t->ev.freed_hist);
	}
	metrics_exec_unbind(env->m, (unsigned int)t->slot);
	domain_put(ts, env, t->dom);
	unwatch_memcg(env, t);
	bpfstate_untrack(env->bpf, t->pid);
	epoll_ctl(env->epfd, EPOLL_CTL_DEL, t->pidfd, NULL);
	close(t->pidfd);
	ts->t[t->slot] = NULL;
	ts->n--;
	free(t);
	return was;
}

struct target *targets_find(const struct targets *ts, pid_t pid)
{
	for (int i = 0; pid > 0 && i < RC_MAX_TARGETS; i++)
		if (ts->t[i] && ts->t[i]->pid == pid)
			return ts->t[i];
	return NULL;
}

struct target *targets_at(const struct targets *ts, int slot)
{
	return slot >= 0 && slot < RC_MAX_TARGETS ? ts->t[slot] : NULL;
}

struct target *targets_single(const struct targets *ts)
{
	if (ts->n != 1)
		return NULL;
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		if (ts->t[i])
			return ts->t[i];
	return NULL;
}

void target_rss(struct target *t, uint64_t ts_ns, uint64_t total, uint64_t file)
{
	/* before the sample: an announced load is no trend */
	if (t->evicting)
		evictor_load_rss(&t->ev, ts_ns, total);
	sampler_rss(&t->sm, ts_ns, total);
	t->rss_file = file;
	t->has_rss_file = true;
	if (t->evicting)
		evictor_rss(&t->ev, ts_ns, t->sm.rss);
	samples_push(&t->rss, ts_ns, total);
}

void target_growth(const struct target *t, uint64_t now, uint64_t window_ns,
		   struct rc_growth *g)
{
	struct rc_sample tmp[RC_SAMPLES_LEN];
	unsigned int n = samples_copy(&t->rss, tmp);

	memset(g, 0, sizeof(*g));
	if (n)
		policy_growth_rate(tmp, n, n < RC_SAMPLES_LEN, now, window_ns,
				   &g->rate, &g->nr_used);
}

/* Counters and tracking move to the new cgroup @cg (has: there is one). */
static void move_cgroup(struct targets *ts, struct target *t,
			const struct target_env *env, bool has,
			const struct rc_cgroup *cg, uint64_t now)
{
	if (t->sm.has_cg) {
		if (t->sm.cs.self.oom_kill > t->oom_base)
			t->oom_carry += t->sm.cs.self.oom_kill - t->oom_base;
	}
	unwatch_memcg(env, t);
	t->sm.has_cg = has;
	if (has)
		t->sm.cg = *cg;
	memset(&t->sm.cs, 0, sizeof(t->sm.cs));
	report_read(env, target_read(ts, env, t, now));
	t->oom_base = t->sm.cs.self.oom_kill;
	if (has && cg->ino)
		watch_memcg(env, t, cg->ino);
	target_thresholds(env, has ? t->sm.cs.limit : RC_UNLIMITED, &t->thr);
}

/*
 * The lookup goes by pid, so it counts only if the pidfd's process is
 * still alive after it.
 */
bool target_recheck_cgroup(struct targets *ts, const struct target_env *env,
			   struct target *t, uint64_t now)
{
	struct rc_cgroup cg;
	bool has;

	has = !cgroup_find(RC_PROC_ROOT, RC_CGROUP_ROOT, t->pid, &cg);
	if (match_pidfd_alive(t->pidfd))
		return false; /* gone: the pidfd tells the loop */
	if (has == t->sm.has_cg && (!has || (cg.ino == t->sm.cg.ino &&
					     !strcmp(cg.path, t->sm.cg.path))))
		return false;
	move_cgroup(ts, t, env, has, &cg, now);
	out_target_cgroup(env->out, t->pid, t->comm, has ? cg.path : NULL,
			  has ? cg.version : 0);
	return true;
}

bool targets_evicting(const struct targets *ts)
{
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		if (ts->t[i] && ts->t[i]->evicting)
			return true;
	return false;
}

static bool pressing(const struct target *t)
{
	if (t->evicting && (t->ev.nr_inflight || t->ev.ann.ns))
		return true;
	return t->sm.headroom / 2 < t->thr.inactive_min;
}

bool targets_pressing(const struct targets *ts)
{
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		if (ts->t[i] && pressing(ts->t[i]))
			return true;
	return false;
}

void targets_nearest(const struct targets *ts, uint64_t *headroom,
		     uint64_t *near_at)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < RC_MAX_TARGETS; i++) {
		const struct target *t = ts->t[i];
		uint64_t near, above;

		if (!t)
			continue;
		near = 2 * t->thr.inactive_min + evictor_announced(&t->ev, 0);
		if (near < 2 * t->thr.inactive_min)
			near = UINT64_MAX;
		above = t->sm.headroom > near ? t->sm.headroom - near : 0;
		if (above < best) {
			best = above;
			*headroom = t->sm.headroom;
			*near_at = near;
		}
	}
}

int targets_wakes(const struct targets *ts, struct cadence_due *d)
{
	int n = 0;

	for (int i = 0; i < RC_MAX_TARGETS; i++)
		if (ts->t[i] && ts->t[i]->evicting)
			/* a heartbeat is on time; a look for a page is not */
			d[n++] = (struct cadence_due){
				evictor_next_ns(&ts->t[i]->ev),
				ts->t[i]->ev.open ? 0 : CADENCE_SLACK_NS
			};
	return n;
}
