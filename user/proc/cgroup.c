// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Locate a process's memory cgroup (v1 or v2) and read its limits. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/cgroup.h"
#include "proc/readfile.h"

/* memory.stat is ~1.5 KiB, /proc/<pid>/cgroup a few hundred bytes. */
#define RC_CGFILE_MAX 16384

/* Leading/trailing blanks allowed, nothing else. */
static int parse_u64_text(const char *s, uint64_t *v)
{
	unsigned long long x;
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	while (*end == ' ' || *end == '\t' || *end == '\n')
		end++;
	if (*end)
		return -EINVAL;
	*v = x;
	return 0;
}

static uint64_t norm_limit(uint64_t v)
{
	return v >= RC_LIMIT_UNLIMITED_MIN ? RC_UNLIMITED : v;
}

/*
 * A one-number file; a missing one reads as @missing. A limit file may say
 * "max" (@limit). A garbled file is an error: guessing "unlimited" would
 * hide a real limit.
 */
/* 1 with @name read into @buf, 0 when there is no such file, or -errno. */
static int read_optional(const char *dir, const char *name, char *buf,
			 size_t len)
{
	int err = readfile_text_at(dir, name, buf, len);

	return err == -ENOENT ? 0 : err ? err : 1;
}

static int read_number(const char *dir, const char *name, bool limit,
		       uint64_t missing, uint64_t *v)
{
	char buf[64];
	int err;

	*v = missing;
	err = read_optional(dir, name, buf, sizeof(buf));
	if (err <= 0)
		return err;
	if (limit && !strncmp(buf, "max", 3) && (buf[3] == '\n' || !buf[3]))
		return 0;
	err = parse_u64_text(buf, v);
	if (!err && limit)
		*v = norm_limit(*v);
	return err;
}

/* A limit file: "max" or a number. Missing = unlimited. */
static int read_limit(const char *dir, const char *name, uint64_t *v)
{
	return read_number(dir, name, true, RC_UNLIMITED, v);
}

/* A counter file; missing = 0. */
static int read_counter(const char *dir, const char *name, uint64_t *v)
{
	return read_number(dir, name, false, 0, v);
}

/* "key value" lines (memory.stat, memory.events, memory.oom_control). */
static bool find_key(const char *text, const char *key, uint64_t *v)
{
	size_t klen = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (!strncmp(p, key, klen) && p[klen] == ' ') {
			unsigned long long x;

			if (sscanf(p + klen, " %llu", &x) == 1) {
				*v = x;
				return true;
			}
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return false;
}

/* A counter file that a kernel may lack: *has says whether it was there. */
static int read_counter_has(const char *dir, const char *name, uint64_t *v,
			    bool *has)
{
	char buf[64];
	int err;

	*v = 0;
	*has = false;
	err = read_optional(dir, name, buf, sizeof(buf));
	if (err <= 0)
		return err;
	err = parse_u64_text(buf, v);
	*has = !err;
	return err;
}

/* @pfx@name (v1's hierarchical total_ keys), else @name. */
static bool stat_key(const char *buf, const char *pfx, const char *name,
		     uint64_t *v)
{
	char key[64];

	snprintf(key, sizeof(key), "%s%s", pfx, name);
	return find_key(buf, key, v) || (*pfx && find_key(buf, name, v));
}

/* memory.stat once: reclaimable cache and the event counters. */
static int read_stat(const char *dir, const char *pfx, struct rc_cgroup_mem *m)
{
	struct rc_cgroup_events *e = &m->ev;
	char buf[RC_CGFILE_MAX];
	int err;

	m->inactive_file = m->mapped_file = 0;
	memset(e, 0, sizeof(*e));
	err = read_optional(dir, "memory.stat", buf, sizeof(buf));
	if (err <= 0)
		return err;
	stat_key(buf, pfx, "inactive_file", &m->inactive_file);
	if (!stat_key(buf, pfx, "mapped_file", &m->mapped_file))
		stat_key(buf, "", "file_mapped", &m->mapped_file);
	e->has_refault =
		stat_key(buf, pfx, "workingset_refault_anon",
			 &e->refault_anon) &&
		stat_key(buf, pfx, "workingset_refault_file", &e->refault_file);
	e->has_swap = stat_key(buf, pfx, "pswpin", &e->pswpin) &&
		      stat_key(buf, pfx, "pswpout", &e->pswpout);
	stat_key(buf, pfx, "pgmajfault", &e->pgmajfault);
	return 0;
}

enum cg_file { CG_LIMIT, CG_USAGE, CG_SWAP_LIMIT, CG_SWAP_USAGE, CG_EVENTS };

/*
 * Each file in cgroup v1 and v2. v1's swap files count memory + swap, and
 * its memory.stat keys are hierarchical with a total_ prefix.
 */
static const char *const cg_names[][2] = {
	[CG_LIMIT] = { "memory.limit_in_bytes", "memory.max" },
	[CG_USAGE] = { "memory.usage_in_bytes", "memory.current" },
	[CG_SWAP_LIMIT] = { "memory.memsw.limit_in_bytes", "memory.swap.max" },
	[CG_SWAP_USAGE] = { "memory.memsw.usage_in_bytes",
			    "memory.swap.current" },
	[CG_EVENTS] = { "memory.oom_control", "memory.events" },
};

/* v1's memsw counts memory + swap; swap alone is the difference. */
static void memsw_to_swap(struct rc_cgroup_mem *m)
{
	uint64_t memsw_limit = m->swap_limit, memsw_usage = m->swap_usage;

	m->swap_usage = memsw_usage > m->usage ? memsw_usage - m->usage : 0;
	if (memsw_limit == RC_UNLIMITED || m->limit == RC_UNLIMITED)
		m->swap_limit = RC_UNLIMITED;
	else
		m->swap_limit = memsw_limit > m->limit ? memsw_limit - m->limit
						       : 0;
}

/* oom_kill, and the counts of hitting the limits (rc_cgroup_events). */
static int read_events(const char *dir, int version, struct rc_cgroup_mem *m)
{
	/* v1: a charge fails at memsw first when both limits are alike */
	static const char *const failcnt[] = { "memory.failcnt",
					       "memory.memsw.failcnt" };
	struct rc_cgroup_events *e = &m->ev;
	char buf[RC_CGFILE_MAX];
	int err;

	err = read_optional(dir, cg_names[CG_EVENTS][version - 1], buf,
			    sizeof(buf));
	if (err < 0)
		return err;
	if (err) {
		find_key(buf, "oom_kill", &m->oom_kill);
		if (version == 2)
			e->has_limit_events = find_key(buf, "high", &e->high) &&
					      find_key(buf, "max", &e->max);
	}
	if (version == 1) {
		for (size_t i = 0; i < sizeof(failcnt) / sizeof(*failcnt);
		     i++) {
			uint64_t n;
			bool has;

			err = read_counter_has(dir, failcnt[i], &n, &has);
			if (err)
				return err;
			e->max += n;
			e->has_limit_events |= has;
		}
		return 0;
	}
	/* absent without swap accounting (swapaccount=0) */
	err = read_optional(dir, "memory.swap.events", buf, sizeof(buf));
	if (err < 0)
		return err;
	if (err)
		e->has_swap_events = find_key(buf, "max", &e->swap_max) &&
				     find_key(buf, "fail", &e->swap_fail);
	return 0;
}

/* The files of cgroup @version (1 or 2) both have. */
static int read_mem(const char *dir, int version, struct rc_cgroup_mem *m)
{
	const int v = version - 1;
	int err;

	err = read_limit(dir, cg_names[CG_LIMIT][v], &m->limit);
	if (!err)
		err = read_counter(dir, cg_names[CG_USAGE][v], &m->usage);
	if (!err)
		err = read_stat(dir, version == 1 ? "total_" : "", m);
	if (!err)
		err = read_limit(dir, cg_names[CG_SWAP_LIMIT][v],
				 &m->swap_limit);
	if (!err)
		err = read_counter_has(dir, cg_names[CG_SWAP_USAGE][v],
				       &m->swap_usage, &m->ev.has_swap_bytes);
	if (!err)
		err = read_events(dir, version, m);
	if (err)
		return err;
	if (version == 1) {
		memsw_to_swap(m);
		m->ev.has_swap_bytes = false; /* memsw is not swap alone */
	} else {
		m->ev.swap_bytes = m->swap_usage;
	}
	return 0;
}

static int read_v2(const char *dir, struct rc_cgroup_mem *m)
{
	char path[PATH_MAX];
	int err;

	err = read_mem(dir, 2, m);
	if (err)
		return err;
	if (snprintf(path, sizeof(path), "%s/memory.pressure", dir) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	return meminfo_psi_read_file(path, &m->psi);
}

/*
 * @m emptied (nothing limited) for a read of @dir, which must be a
 * directory: its inode into *@ino; -errno.
 */
static int dir_start(int version, const char *dir, struct rc_cgroup_mem *m,
		     uint64_t *ino)
{
	struct stat st;

	memset(m, 0, sizeof(*m));
	m->limit = RC_UNLIMITED;
	m->swap_limit = RC_UNLIMITED;
	if (stat(dir, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	*ino = st.st_ino;
	return version == 1 || version == 2 ? 0 : -EINVAL;
}

int cgroup_read_dir(int version, const char *dir, struct rc_cgroup_mem *m)
{
	uint64_t ino;
	int err = dir_start(version, dir, m, &ino);

	if (err)
		return err;
	return version == 1 ? read_mem(dir, 1, m) : read_v2(dir, m);
}

/*
 * An ancestor's limit and, when it has one, what the room under it takes
 * (usage, memory.stat); its inode into *@ino. Its other files go unread:
 * only the cgroup's own counters are kept. -ENOENT if @dir does not exist.
 */
static int read_ancestor(int version, const char *dir, struct rc_cgroup_mem *m,
			 uint64_t *ino)
{
	const int v = version - 1;
	int err = dir_start(version, dir, m, ino);

	if (!err)
		err = read_limit(dir, cg_names[CG_LIMIT][v], &m->limit);
	if (err || m->limit == RC_UNLIMITED)
		return err;
	err = read_counter(dir, cg_names[CG_USAGE][v], &m->usage);
	return err ? err : read_stat(dir, version == 1 ? "total_" : "", m);
}

int cgroup_dir_ino(const char *path, uint64_t *ino)
{
	struct stat st;

	if (stat(path, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	*ino = st.st_ino;
	return 0;
}

/* Is word a member of the list separated by any of seps? */
static bool has_word(const char *list, const char *word, const char *seps)
{
	size_t wlen = strlen(word);
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, seps);

		if (n == wlen && !strncmp(p, word, n))
			return true;
		p += n;
		if (*p)
			p++;
	}
	return false;
}

static bool v2_has_memory(const char *mount)
{
	char buf[1024];

	if (readfile_text_at(mount, "cgroup.controllers", buf, sizeof(buf)))
		return false;
	return has_word(buf, "memory", " \n");
}

static bool path_safe(const char *rel)
{
	const char *p;

	if (rel[0] != '/')
		return false;
	for (p = rel; (p = strstr(p, "..")); p += 2)
		if (p[-1] == '/' && (p[2] == '/' || !p[2]))
			return false;
	return true;
}

int cgroup_find(const char *proc_root, const char *cg_root, int pid,
		struct rc_cgroup *cg)
{
	char path[PATH_MAX], buf[RC_CGFILE_MAX], *line, *save = NULL;
	const char *v1_rel = NULL, *v2_rel = NULL;
	int n, err;

	memset(cg, 0, sizeof(*cg));
	if (pid <= 0)
		return -EINVAL;
	if (!proc_root)
		proc_root = RC_PROC_ROOT;
	if (!cg_root)
		cg_root = RC_CGROUP_ROOT;
	snprintf(path, sizeof(path), "%s/%d/cgroup", proc_root, pid);
	err = readfile_text(path, buf, sizeof(buf));
	if (err)
		return err;
	/* "hierarchy-id:controller-list:path" */
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2;

		if (!c1 || !(c2 = strchr(c1 + 1, ':')))
			continue;
		*c2 = '\0';
		if (!strcmp(line, "0:") && c1[1] == '\0')
			v2_rel = c2 + 1;
		else if (has_word(c1 + 1, "memory", ","))
			v1_rel = c2 + 1;
	}
	if (v1_rel) {
		cg->version = 1;
		n = snprintf(cg->mount, sizeof(cg->mount), "%s/memory",
			     cg_root);
	} else if (v2_rel) {
		cg->version = 2;
		n = snprintf(cg->mount, sizeof(cg->mount), "%s", cg_root);
		if (!v2_has_memory(cg->mount)) {
			n = snprintf(cg->mount, sizeof(cg->mount), "%s/unified",
				     cg_root);
			if (!v2_has_memory(cg->mount))
				return -ENOENT;
		}
	} else {
		return -ENOENT;
	}
	if (n >= (int)sizeof(cg->mount))
		return -ENAMETOOLONG;
	line = (char *)(v1_rel ? v1_rel : v2_rel);
	/* above the root of the reader's cgroup namespace: not under its
	 * mount at all */
	if (!strncmp(line, "/..", 3) && (line[3] == '/' || !line[3]))
		return -EXDEV;
	if (!path_safe(line))
		return -EINVAL;
	if (snprintf(cg->rel, sizeof(cg->rel), "%s", line) >=
		    (int)sizeof(cg->rel) ||
	    snprintf(cg->path, sizeof(cg->path), "%s%s", cg->mount,
		     strcmp(line, "/") ? line : "") >= (int)sizeof(cg->path))
		return -ENAMETOOLONG;
	return cgroup_dir_ino(cg->path, &cg->ino);
}

/* Level @depth (inode @ino) read into @m: the nearest limit, the least room. */
static void note_level(struct rc_cgroup_state *st, int depth, uint64_t ino,
		       const struct rc_cgroup_mem *m, uint64_t *best)
{
	uint64_t room;

	if (m->limit == RC_UNLIMITED)
		return;
	if (st->nearest_depth < 0) {
		st->nearest_depth = depth;
		st->nearest_ino = ino;
	}
	room = policy_headroom(UINT64_MAX, m->limit, m->usage,
			       policy_reclaimable(m->inactive_file,
						  m->mapped_file));
	if (room < *best) {
		*best = room;
		st->limit = m->limit;
		st->usage = m->usage;
		st->inactive_file = m->inactive_file;
		st->mapped_file = m->mapped_file;
		st->limit_depth = depth;
		st->limit_ino = ino;
	}
}

int cgroup_read(const struct rc_cgroup *cg, struct rc_cgroup_state *st)
{
	char dir[PATH_MAX];
	size_t mlen = strlen(cg->mount);
	uint64_t best = UINT64_MAX, ino = 0;
	int depth = 0, err;

	memset(st, 0, sizeof(*st));
	err = cgroup_read_dir(cg->version, cg->path, &st->self);
	if (err)
		return err;
	st->limit = RC_UNLIMITED;
	st->nearest_depth = -1;
	st->usage = st->self.usage;
	st->inactive_file = st->self.inactive_file;
	st->mapped_file = st->self.mapped_file;
	if (st->self.limit != RC_UNLIMITED &&
	    (err = cgroup_dir_ino(cg->path, &ino)))
		return err;
	note_level(st, 0, ino, &st->self, &best);
	snprintf(dir, sizeof(dir), "%s", cg->path);
	/* A parent's limit binds its children: walk up to the mount. */
	for (;;) {
		struct rc_cgroup_mem m;
		char *slash;

		if (strlen(dir) <= mlen)
			break;
		slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < mlen)
			break;
		*slash = '\0';
		depth++;
		err = read_ancestor(cg->version, dir, &m, &ino);
		if (err)
			return err;
		note_level(st, depth, ino, &m, &best);
	}
	return 0;
}
