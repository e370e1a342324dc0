// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <string.h>

#include "proc/sampler.h"

int sampler_init(struct sampler *s, pid_t pid, const char *proc_root,
		 const char *cg_root)
{
	memset(s, 0, sizeof(*s));
	s->proc_root = proc_root ? proc_root : RC_PROC_ROOT;
	s->cg_root = cg_root ? cg_root : RC_CGROUP_ROOT;
	if (pid > 0)
		s->cg_err = cgroup_find(s->proc_root, s->cg_root, pid, &s->cg);
	s->has_cg = pid > 0 && !s->cg_err;
	return 0;
}

/* The headroom now from what was read into s->mi and s->cs; a sample. */
static void take(struct sampler *s, uint64_t now_ns)
{
	uint64_t limit = RC_UNLIMITED, usage = 0, room = 0;

	if (s->cg_ok) {
		limit = s->cs.limit;
		usage = s->cs.usage;
		room = policy_reclaimable(s->cs.inactive_file,
					  s->cs.mapped_file);
	}
	s->headroom = policy_headroom(s->mi.mem_available, limit, usage, room);
	s->read_headroom = s->headroom;
	s->read_rss = s->rss;
	s->sampled = true;
	s->read_ns = now_ns;
	outlook_push(&s->outlook, now_ns, s->headroom);
}

int sampler_read(struct sampler *s, uint64_t now_ns)
{
	int err = meminfo_read(s->proc_root, &s->mi);

	if (err)
		return err;
	s->cg_ok = s->has_cg && !cgroup_read(&s->cg, &s->cs);
	take(s, now_ns);
	return 0;
}

bool sampler_covers(const struct sampler *src, const struct sampler *s,
		    uint64_t now_ns)
{
	if (src == s || !src->sampled || src->read_ns != now_ns ||
	    strcmp(src->proc_root, s->proc_root))
		return false;
	if (!s->has_cg)
		return true;
	return src->has_cg && src->cg.ino == s->cg.ino &&
	       src->cg.version == s->cg.version &&
	       !strcmp(src->cg.path, s->cg.path);
}

void sampler_copy(struct sampler *s, const struct sampler *src, uint64_t now_ns)
{
	s->mi = src->mi;
	if (s->has_cg) {
		s->cs = src->cs;
		s->cg_ok = src->cg_ok;
	}
	take(s, now_ns);
}

void sampler_rss(struct sampler *s, uint64_t ts_ns, uint64_t rss)
{
	s->rss = rss;
	if (!s->read_rss || !s->sampled)
		return;
	/* what the target took since the last read came out of headroom */
	s->headroom = policy_shared_headroom(
		&(struct rc_share){ .read_headroom = s->read_headroom,
				    .read_rss = s->read_rss,
				    .rss = rss },
		1);
	outlook_push(&s->outlook, ts_ns, s->headroom);
}

void sampler_view(const struct sampler *s, uint64_t now_ns, uint64_t horizon_ns,
		  struct rc_view *v)
{
	outlook_view(&s->outlook, now_ns, s->headroom, horizon_ns, v);
}
