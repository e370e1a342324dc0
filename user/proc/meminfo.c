// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Readers of /proc/meminfo, /proc/vmstat, /proc/pressure/memory, <pid>/stat. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/meminfo.h"
#include "proc/readfile.h"

/* The biggest of these files (vmstat) is about 8 KiB today. */
#define RC_PROCFILE_MAX 65536

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static int read_small_file(const char *path, char **out)
{
	return readfile_alloc(path, RC_PROCFILE_MAX, out);
}

static void join(char *dst, size_t len, const char *root, const char *rel)
{
	snprintf(dst, len, "%s/%s", root ? root : RC_PROC_ROOT, rel);
}

/* @rel under the proc root, whole, into *@buf (the caller frees it). */
static int read_proc(const char *root, const char *rel, char **buf)
{
	char path[PATH_MAX];

	join(path, sizeof(path), root, rel);
	return read_small_file(path, buf);
}

/*
 * Call @fn on every "key<sep>value" line of @rel under the proc root (the
 * key NUL-terminated; lines without @sep skipped). Returns the sum of what
 * @fn returned (how many lines it took), or -errno.
 */
static int for_each_pair(const char *root, const char *rel, char sep,
			 int (*fn)(const char *key, const char *val, void *ctx),
			 void *ctx)
{
	char *buf, *line, *p, *save = NULL;
	int taken = 0, err;

	err = read_proc(root, rel, &buf);
	if (err)
		return err;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		p = strchr(line, sep);
		if (!p)
			continue;
		*p = '\0';
		taken += fn(line, p + 1, ctx);
	}
	free(buf);
	return taken;
}

/* Strict unsigned decimal; 0 or -EINVAL/-ERANGE. */
static int parse_u64(const char *s, char **end, uint64_t *v)
{
	unsigned long long x;

	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	x = strtoull(s, end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	*v = x;
	return 0;
}

/* What a meminfo line tells besides its value. */
enum mi_mark {
	MI_TOTAL = 1,	  /* required: without it the file is not meminfo */
	MI_AVAILABLE = 2, /* absent before Linux 3.14 */
};

struct kv_field {
	const char *key;
	size_t off;
	unsigned int mark; /* enum mi_mark bits */
};

#define MI(key, field, mark)                                  \
	{                                                     \
		key, offsetof(struct rc_meminfo, field), mark \
	}

static const struct kv_field meminfo_fields[] = {
	MI("MemTotal", mem_total, MI_TOTAL),
	MI("MemFree", mem_free, 0),
	MI("MemAvailable", mem_available, MI_AVAILABLE),
	MI("Buffers", buffers, 0),
	MI("Cached", cached, 0),
	MI("SwapTotal", swap_total, 0),
	MI("SwapFree", swap_free, 0),
	MI("Active(anon)", active_anon, 0),
	MI("Inactive(anon)", inactive_anon, 0),
	MI("Active(file)", active_file, 0),
	MI("Inactive(file)", inactive_file, 0),
	MI("Shmem", shmem, 0),
};

struct meminfo_ctx {
	struct rc_meminfo *mi;
	unsigned int seen; /* enum mi_mark bits */
};

/* One meminfo line: 1 if it is a field we keep. */
static int meminfo_line(const char *key, const char *val, void *ctx)
{
	struct meminfo_ctx *c = ctx;
	char *end;
	uint64_t v;

	if (parse_u64(val, &end, &v))
		return 0;
	while (*end == ' ')
		end++;
	/* Every size line is in kB; counts like HugePages_* have none. */
	if (strncmp(end, "kB", 2) != 0)
		return 0;
	if (v > UINT64_MAX / 1024)
		v = UINT64_MAX / 1024;
	for (size_t i = 0; i < ARRAY_SIZE(meminfo_fields); i++) {
		if (strcmp(key, meminfo_fields[i].key))
			continue;
		*(uint64_t *)((char *)c->mi + meminfo_fields[i].off) = v * 1024;
		c->seen |= meminfo_fields[i].mark;
		return 1;
	}
	return 0;
}

int meminfo_read(const char *proc_root, struct rc_meminfo *mi)
{
	struct meminfo_ctx c = { mi, 0 };
	int n;

	memset(mi, 0, sizeof(*mi));
	n = for_each_pair(proc_root, "meminfo", ':', meminfo_line, &c);
	if (n < 0)
		return n;
	mi->has_mem_available = c.seen & MI_AVAILABLE;
	return c.seen & MI_TOTAL ? 0 : -ENODATA;
}

/* Adds to a field: a key once per zone on old kernels, so sums. */
struct vm_field {
	const char *key;
	size_t off;
};

#define VM(key, field)                                 \
	{                                              \
		key, offsetof(struct rc_vmstat, field) \
	}

/* Keys matched whole. */
static const struct vm_field vmstat_fields[] = {
	VM("workingset_refault_anon", workingset_refault_anon),
	VM("workingset_refault_file", workingset_refault_file),
	VM("workingset_refault", workingset_refault_file),
	VM("pswpin", pswpin),
	VM("pswpout", pswpout),
	VM("pgmajfault", pgmajfault),
	VM("pgfault", pgfault),
	VM("oom_kill", oom_kill),
};

/* Keys also matched as "<key>_<zone>" (allocstall_normal, ...). */
static const struct vm_field vmstat_zoned[] = {
	VM("allocstall", allocstall),
	VM("pgscan_kswapd", pgscan_kswapd),
	VM("pgscan_direct", pgscan_direct),
	VM("pgsteal_kswapd", pgsteal_kswapd),
	VM("pgsteal_direct", pgsteal_direct),
};

static bool vm_match(const struct vm_field *f, bool zoned, const char *key)
{
	size_t n = strlen(f->key);

	if (strncmp(key, f->key, n))
		return false;
	if (key[n] == '\0')
		return true;
	/* pgscan_direct_throttle is a different thing, not a zone. */
	return zoned && key[n] == '_' && strcmp(key + n, "_throttle");
}

/* The field @key adds to, or NULL. */
static uint64_t *vm_field_of(struct rc_vmstat *vs, const char *key)
{
	for (size_t i = 0; i < ARRAY_SIZE(vmstat_fields); i++)
		if (vm_match(&vmstat_fields[i], false, key))
			return (uint64_t *)((char *)vs + vmstat_fields[i].off);
	for (size_t i = 0; i < ARRAY_SIZE(vmstat_zoned); i++)
		if (vm_match(&vmstat_zoned[i], true, key))
			return (uint64_t *)((char *)vs + vmstat_zoned[i].off);
	return NULL;
}

/* One vmstat line: 1 if it adds to a field. */
static int vmstat_line(const char *key, const char *val, void *ctx)
{
	uint64_t v, *dst = vm_field_of(ctx, key);

	if (!dst || parse_u64(val, NULL, &v))
		return 0;
	*dst = v > UINT64_MAX - *dst ? UINT64_MAX : *dst + v;
	return 1;
}

int meminfo_vmstat_read(const char *proc_root, struct rc_vmstat *vs)
{
	int n;

	memset(vs, 0, sizeof(*vs));
	n = for_each_pair(proc_root, "vmstat", ' ', vmstat_line, vs);
	if (n < 0)
		return n;
	return n ? 0 : -ENODATA;
}

/* One "some avg10=0.00 avg60=0.00 avg300=0.00 total=0" line. */
static int psi_parse_line(const char *s, double *avg10, double *avg60,
			  double *avg300, uint64_t *total)
{
	unsigned long long t;
	int n = 0;

	if (sscanf(s, " avg10=%lf avg60=%lf avg300=%lf total=%llu%n", avg10,
		   avg60, avg300, &t, &n) != 4 ||
	    !n)
		return -EINVAL;
	/* Percentages: reject NaN, inf and nonsense from a fake file. */
	if (!(*avg10 >= 0 && *avg10 <= 100) ||
	    !(*avg60 >= 0 && *avg60 <= 100) ||
	    !(*avg300 >= 0 && *avg300 <= 100))
		return -EINVAL;
	*total = t;
	return 0;
}

int meminfo_psi_read_file(const char *path, struct rc_psi *psi)
{
	char *buf, *line, *save = NULL;
	bool some = false;
	int err = 0;

	memset(psi, 0, sizeof(*psi));
	err = read_small_file(path, &buf);
	if (err == -ENOENT || err == -EOPNOTSUPP)
		return 0;
	if (err)
		return err;
	for (line = strtok_r(buf, "\n", &save); line && !err;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "some ", 5)) {
			err = psi_parse_line(line + 4, &psi->some_avg10,
					     &psi->some_avg60,
					     &psi->some_avg300,
					     &psi->some_total_us);
			some = !err;
		} else if (!strncmp(line, "full ", 5)) {
			err = psi_parse_line(line + 4, &psi->full_avg10,
					     &psi->full_avg60,
					     &psi->full_avg300,
					     &psi->full_total_us);
			psi->has_full = !err;
		}
	}
	free(buf);
	if (!err && !some)
		err = -EINVAL;
	if (err) {
		memset(psi, 0, sizeof(*psi));
		return err;
	}
	psi->available = true;
	return 0;
}

int meminfo_psi_read(const char *proc_root, struct rc_psi *psi)
{
	char path[PATH_MAX];

	join(path, sizeof(path), proc_root, "pressure/memory");
	return meminfo_psi_read_file(path, psi);
}

int meminfo_pidstat_parse(const char *line, uint64_t page_size,
			  struct rc_pidstat *ps)
{
	/* Field numbers as in proc(5): 3 = state, 10 minflt, 12 majflt. */
	uint64_t v[25] = { 0 };
	long long rss;
	const char *p;
	char *end;
	int field;

	memset(ps, 0, sizeof(*ps));
	/* comm may hold spaces and ')' itself: the last ')' ends it. */
	p = strrchr(line, ')');
	if (!p || p[1] != ' ' || !p[2] || p[2] == ' ')
		return -EINVAL;
	ps->state = p[2];
	p += 3;
	for (field = 4; field <= 24; field++) {
		if (*p++ != ' ')
			return -EINVAL;
		if (field == 24) {
			/* rss is signed in the kernel's format ("%ld"). */
			errno = 0;
			rss = strtoll(p, &end, 10);
			if (end == p || errno)
				return -EINVAL;
			v[field] = rss > 0 ? (uint64_t)rss : 0;
		} else {
			/* Some fields are signed (tpgid -1): keep the bits. */
			errno = 0;
			if (*p == '-')
				strtoll(p, &end, 10);
			else
				v[field] = strtoull(p, &end, 10);
			if (end == p || errno)
				return -EINVAL;
		}
		p = end;
	}
	ps->minflt = v[10];
	ps->majflt = v[12];
	ps->rss_pages = v[24];
	if (page_size && ps->rss_pages > UINT64_MAX / page_size)
		ps->rss_bytes = UINT64_MAX;
	else
		ps->rss_bytes = ps->rss_pages * page_size;
	return 0;
}

struct pidrss_ctx {
	struct rc_pidrss *r;
	unsigned int seen;
};

/* One <pid>/status line: 1 if it is one of the Rss* sizes. */
static int pidrss_line(const char *key, const char *val, void *ctx)
{
	static const char *const keys[] = { "RssAnon", "RssFile", "RssShmem" };
	struct pidrss_ctx *c = ctx;
	uint64_t *to[] = { &c->r->anon, &c->r->file, &c->r->shmem }, v;
	char *end;

	for (unsigned int i = 0; i < ARRAY_SIZE(keys); i++) {
		if (strcmp(key, keys[i]))
			continue;
		if (parse_u64(val, &end, &v) || strncmp(end, " kB", 3))
			return 0;
		*to[i] = v > UINT64_MAX / 1024 ? UINT64_MAX : v * 1024;
		c->seen |= 1U << i;
		return 1;
	}
	return 0;
}

int meminfo_pidrss_read(const char *proc_root, int pid, struct rc_pidrss *r)
{
	struct pidrss_ctx c = { NULL, 0 };
	char rel[32];
	int n;

	memset(r, 0, sizeof(*r));
	c.r = r;
	if (pid <= 0)
		return -EINVAL;
	snprintf(rel, sizeof(rel), "%d/status", pid);
	n = for_each_pair(proc_root, rel, ':', pidrss_line, &c);
	if (n < 0)
		return n;
	return c.seen == 7 ? 0 : -ENODATA;
}

int meminfo_pidstat_read(const char *proc_root, int pid, struct rc_pidstat *ps)
{
	char path[PATH_MAX], rel[32], *buf;
	long page_size = sysconf(_SC_PAGESIZE);
	int err;

	memset(ps, 0, sizeof(*ps));
	if (pid <= 0)
		return -EINVAL;
	snprintf(rel, sizeof(rel), "%d/stat", pid);
	join(path, sizeof(path), proc_root, rel);
	err = read_small_file(path, &buf);
	if (err)
		return err;
	err = meminfo_pidstat_parse(buf, page_size > 0 ? page_size : 4096, ps);
	free(buf);
	return err;
}
