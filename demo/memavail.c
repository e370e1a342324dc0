// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Available memory as the local policy sees it: the smallest of
 * MemAvailable and, for our memory cgroup and each ancestor with a limit,
 * limit - usage + inactive file pages (what the kernel can drop cheaply).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

#define CG_ROOT_V1 "/sys/fs/cgroup/memory"
#define CG_ROOT_V2 "/sys/fs/cgroup"

static int read_u64(const char *dir, const char *file, uint64_t *out)
{
	char path[PATH_MAX], buf[64];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	if (!ok)
		return -EIO;
	if (!strncmp(buf, "max", 3)) {
		*out = UINT64_MAX;
		return 0;
	}
	*out = strtoull(buf, NULL, 10);
	return 0;
}

static uint64_t read_stat_key(const char *dir, const char *key)
{
	char path[PATH_MAX], name[64];
	unsigned long long v;
	uint64_t found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.stat", dir);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fscanf(f, "%63s %llu", name, &v) == 2) {
		if (!strcmp(name, key)) {
			found = v;
			break;
		}
	}
	fclose(f);
	return found;
}

/* Our memory cgroup's path inside its hierarchy, from /proc/self/cgroup. */
static int own_cgroup(char *out, size_t len, int *version)
{
	char line[PATH_MAX + 64];
	char v2[PATH_MAX] = "";
	FILE *f = fopen("/proc/self/cgroup", "re");
	int found = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *ctrl = strchr(line, ':'), *path;

		if (!ctrl)
			continue;
		path = strchr(++ctrl, ':');
		if (!path)
			continue;
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		if (!strcmp(ctrl, "")) {
			snprintf(v2, sizeof(v2), "%s", path);
			continue;
		}
		for (char *t = strtok(ctrl, ","); t; t = strtok(NULL, ","))
			if (!strcmp(t, "memory")) {
				snprintf(out, len, "%s", path);
				*version = 1;
				found = 1;
			}
	}
	fclose(f);
	if (found)
		return 0;
	if (v2[0]) {
		snprintf(out, len, "%s", v2);
		*version = 2;
		return 0;
	}
	return -ENOENT;
}

int memavail_init(struct memavail *m)
{
	char rel[PATH_MAX];
	const char *root;
	int err;

	memset(m, 0, sizeof(*m));
	err = own_cgroup(rel, sizeof(rel), &m->version);
	if (err) {
		m->version = 0;
		return 0;
	}
	root = m->version == 1 ? CG_ROOT_V1 : CG_ROOT_V2;
	/* the cgroup itself, then each parent below the root */
	while (m->nr_dirs < (int)(sizeof(m->dirs) / sizeof(m->dirs[0]))) {
		char *slash;

		if (!strcmp(rel, "/") || !rel[0])
			break;
		if (asprintf(&m->dirs[m->nr_dirs], "%s%s", root, rel) < 0)
			return -ENOMEM;
		m->nr_dirs++;
		slash = strrchr(rel, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	return 0;
}

void memavail_free(struct memavail *m)
{
	for (int i = 0; i < m->nr_dirs; i++)
		free(m->dirs[i]);
	m->nr_dirs = 0;
}

static uint64_t meminfo_available(void)
{
	char line[128];
	unsigned long long kb = 0;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb ? kb * 1024 : UINT64_MAX;
}

uint64_t memavail_read(const struct memavail *m)
{
	uint64_t best = meminfo_available();

	for (int i = 0; i < m->nr_dirs; i++) {
		const char *d = m->dirs[i];
		uint64_t limit, usage, avail, file;

		if (m->version == 1) {
			if (read_u64(d, "memory.limit_in_bytes", &limit) ||
			    read_u64(d, "memory.usage_in_bytes", &usage))
				continue;
			file = read_stat_key(d, "total_inactive_file");
		} else {
			if (read_u64(d, "memory.max", &limit) ||
			    read_u64(d, "memory.current", &usage))
				continue;
			file = read_stat_key(d, "inactive_file");
		}
		/* v1 reports "no limit" as a huge page-aligned number */
		if (limit >= (UINT64_MAX >> 2))
			continue;
		avail = usage > limit ? 0 : limit - usage;
		avail += file;
		if (avail < best)
			best = avail;
	}
	return best;
}
