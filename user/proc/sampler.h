/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Headroom of the target: read from /proc/meminfo and its memory cgroup
 * (or taken from another target's read of the same files at the same
 * pass), and between reads moved by the RSS changes the BPF programs
 * report, so a fast allocation is seen at the next rss_stat event, not at
 * the next tick. Feeds every figure to the target's outlook (core/outlook.h).
 */
#ifndef RAMCACHE_SAMPLER_H
#define RAMCACHE_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/cgroup.h"
#include "proc/meminfo.h"
#include "core/outlook.h"
#include "core/policy.h"

struct sampler {
	const char *proc_root;
	const char *cg_root;
	bool has_cg;
	int cg_err; /* why not, from cgroup_find() */
	struct rc_cgroup cg;
	struct rc_meminfo mi;
	struct rc_cgroup_state cs;
	uint64_t headroom;	/* latest estimate */
	uint64_t read_headroom; /* at the last file read */
	uint64_t read_rss; /* target RSS at the last file read, 0 unknown */
	uint64_t rss;	   /* latest target RSS from BPF */
	bool sampled;	   /* a file read was made */
	bool cg_ok;	   /* and its cgroup read into cs */
	uint64_t read_ns;  /* when, if sampled */
	struct rc_outlook outlook; /* of the headroom */
};

/* Find @pid's memory cgroup (0: system only). */
int sampler_init(struct sampler *s, pid_t pid, const char *proc_root,
		 const char *cg_root);

/* Full read of meminfo and the cgroup at @now_ns; adds a sample. */
int sampler_read(struct sampler *s, uint64_t now_ns);

/*
 * Did @src read, at @now_ns, every file sampler_read() of @s would read
 * then (the same /proc and the same cgroup, or @s has none)? Targets that
 * share a cgroup then read it once a tick, not once each.
 */
bool sampler_covers(const struct sampler *src, const struct sampler *s,
		    uint64_t now_ns);

/* As sampler_read() at @now_ns, with what @src read (sampler_covers()). */
void sampler_copy(struct sampler *s, const struct sampler *src,
		  uint64_t now_ns);

/* The target's RSS is now @rss (BPF, at @ts_ns): adjust and add a sample. */
void sampler_rss(struct sampler *s, uint64_t ts_ns, uint64_t rss);

/* The outlook at @now_ns with the headroom now (outlook_view()). */
void sampler_view(const struct sampler *s, uint64_t now_ns, uint64_t horizon_ns,
		  struct rc_view *v);

#endif /* RAMCACHE_SAMPLER_H */
