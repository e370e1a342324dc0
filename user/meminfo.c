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

#include "meminfo.h"

/* The biggest of these files (vmstat) is about 8 KiB today. */
#define RC_PROCFILE_MAX 65536

/*
 * Read a whole small file into a NUL-terminated malloc'ed buffer.
 * procfs files report size 0, so read until EOF.
 */
static int read_small_file(const char *path, char **out)
{
	size_t cap = 4096, len = 0;
	char *buf, *nbuf;
	ssize_t n;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		if (len + 1 >= cap) {
			if (cap >= RC_PROCFILE_MAX) {
				err = -EFBIG;
				goto fail;
			}
			cap *= 2;
			nbuf = realloc(buf, cap);
			if (!nbuf) {
				err = -ENOMEM;
				goto fail;
			}
			buf = nbuf;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto fail;
		}
		if (n == 0)
			break;
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	*out = buf;
	return 0;
fail:
	close(fd);
	free(buf);
	return err;
}

static void join(char *dst, size_t len, const char *root, const char *rel)
{
	snprintf(dst, len, "%s/%s", root ? root : RC_PROC_ROOT, rel);
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

struct kv_field {
	const char *key;
	size_t off;
};

#define MI(key, field)                                  \
	{                                               \
		key, offsetof(struct rc_meminfo, field) \
	}

static const struct kv_field meminfo_fields[] = {
	MI("MemTotal", mem_total),
	MI("MemFree", mem_free),
	MI("MemAvailable", mem_available),
	MI("Buffers", buffers),
	MI("Cached", cached),
	MI("SwapTotal", swap_total),
	MI("SwapFree", swap_free),
	MI("Active(anon)", active_anon),
	MI("Inactive(anon)", inactive_anon),
	MI("Active(file)", active_file),
	MI("Inactive(file)", inactive_file),
	MI("Shmem", shmem),
};

int rc_meminfo_read(const char *proc_root, struct rc_meminfo *mi)
{
	char path[PATH_MAX], *buf, *line, *save = NULL;
	bool has_total = false;
	int err;

	memset(mi, 0, sizeof(*mi));
	join(path, sizeof(path), proc_root, "meminfo");
	err = read_small_file(path, &buf);
	if (err)
		return err;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(line, ':'), *end;
		uint64_t v;
		size_t i;

		if (!colon)
			continue;
		*colon = '\0';
		if (parse_u64(colon + 1, &end, &v))
			continue;
		while (*end == ' ')
			end++;
		/* Every size line is in kB; counts like HugePages_* have none. */
		if (strncmp(end, "kB", 2) != 0)
			continue;
		if (v > UINT64_MAX / 1024)
			v = UINT64_MAX / 1024;
		for (i = 0;
		     i < sizeof(meminfo_fields) / sizeof(meminfo_fields[0]);
		     i++) {
			if (strcmp(line, meminfo_fields[i].key))
				continue;
			*(uint64_t *)((char *)mi + meminfo_fields[i].off) =
				v * 1024;
			if (i == 0)
				has_total = true;
			if (i == 2)
				mi->has_mem_available = true;
		}
	}
	free(buf);
	return has_total ? 0 : -ENODATA;
}

/* Adds to a field; sums cover per-zone variants on old kernels. */
struct vm_field {
	const char *key;
	bool prefix; /* key matches "<key>_<anything>" too */
	size_t off;
};

#define VM(key, prefix, field)                                 \
	{                                                      \
		key, prefix, offsetof(struct rc_vmstat, field) \
	}

static const struct vm_field vmstat_fields[] = {
	VM("workingset_refault_anon", false, workingset_refault_anon),
	VM("workingset_refault_file", false, workingset_refault_file),
	VM("workingset_refault", false, workingset_refault_file),
	VM("pswpin", false, pswpin),
	VM("pswpout", false, pswpout),
	VM("pgmajfault", false, pgmajfault),
	VM("allocstall", true, allocstall),
	VM("pgscan_kswapd", true, pgscan_kswapd),
	VM("pgscan_direct", true, pgscan_direct),
	VM("pgsteal_kswapd", true, pgsteal_kswapd),
	VM("pgsteal_direct", true, pgsteal_direct),
	VM("oom_kill", false, oom_kill),
};

static bool vm_match(const struct vm_field *f, const char *key)
{
	size_t n = strlen(f->key);

	if (strncmp(key, f->key, n))
		return false;
	if (key[n] == '\0')
		return true;
	/* pgscan_direct_throttle is a different thing, not a zone. */
	return f->prefix && key[n] == '_' && strcmp(key + n, "_throttle");
}

int rc_vmstat_read(const char *proc_root, struct rc_vmstat *vs)
{
	char path[PATH_MAX], *buf, *line, *save = NULL;
	int found = 0, err;

	memset(vs, 0, sizeof(*vs));
	join(path, sizeof(path), proc_root, "vmstat");
	err = read_small_file(path, &buf);
	if (err)
		return err;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');
		uint64_t v, *dst;
		size_t i;

		if (!sp)
			continue;
		*sp = '\0';
		if (parse_u64(sp + 1, NULL, &v))
			continue;
		for (i = 0;
		     i < sizeof(vmstat_fields) / sizeof(vmstat_fields[0]);
		     i++) {
			if (!vm_match(&vmstat_fields[i], line))
				continue;
			dst = (uint64_t *)((char *)vs + vmstat_fields[i].off);
			*dst = v > UINT64_MAX - *dst ? UINT64_MAX : *dst + v;
			found++;
			break;
		}
	}
	free(buf);
	return found ? 0 : -ENODATA;
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

int rc_psi_read_file(const char *path, struct rc_psi *psi)
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

int rc_psi_read(const char *proc_root, struct rc_psi *psi)
{
	char path[PATH_MAX];

	join(path, sizeof(path), proc_root, "pressure/memory");
	return rc_psi_read_file(path, psi);
}

int rc_pidstat_parse(const char *line, uint64_t page_size,
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

int rc_pidstat_read(const char *proc_root, int pid, struct rc_pidstat *ps)
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
	err = rc_pidstat_parse(buf, page_size > 0 ? page_size : 4096, ps);
	free(buf);
	return err;
}
