// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/oomvictim.h"

/* Value of "Key:\t..." at the start of a line of @s, or NULL. */
static const char *field(const char *s, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = s; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (!strncmp(p, key, n) && p[n] == ':')
			return p + n + 1;
	return NULL;
}

static __u64 kib(const char *s, const char *key)
{
	const char *v = field(s, key);

	return v ? strtoull(v, NULL, 10) * 1024 : 0;
}

int oomvictim_parse(const char *status, struct rc_oom_kill *e)
{
	const char *uid = field(status, "Uid");
	const char *name = field(status, "Name");
	char *end;
	unsigned long u;
	size_t i = 0;

	if (!uid)
		return -EINVAL;
	errno = 0;
	u = strtoul(uid, &end, 10);
	if (end == uid || errno || u >= RC_UID_UNKNOWN)
		return -EINVAL;
	e->victim_uid = u;
	memset(e->comm, 0, sizeof(e->comm));
	while (name && (*name == ' ' || *name == '\t'))
		name++;
	for (; name && name[i] && name[i] != '\n' && i < RC_COMM_LEN - 1; i++)
		e->comm[i] = name[i];
	e->anon_rss = kib(status, "RssAnon");
	e->file_rss = kib(status, "RssFile");
	e->shmem_rss = kib(status, "RssShmem");
	e->total_vm = kib(status, "VmSize");
	return 0;
}

int oomvictim_fill(const char *proc_root, struct rc_oom_kill *e)
{
	struct rc_oom_kill tmp = *e;
	char path[4096], buf[8192];
	ssize_t n;
	int fd, err;

	if (!e->victim_pid || e->victim_pid > 0x7fffffff)
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/%u/status", proc_root, e->victim_pid);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	buf[n] = 0;
	err = oomvictim_parse(buf, &tmp);
	if (!err)
		*e = tmp;
	return err;
}
