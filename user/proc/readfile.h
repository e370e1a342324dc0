/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading the small files of /proc and the cgroup filesystems: they report
 * size 0, so each is read until EOF. Every reader opens with O_CLOEXEC,
 * retries EINTR and returns -errno.
 */
#ifndef RAMCACHE_READFILE_H
#define RAMCACHE_READFILE_H

#include <stddef.h>
#include <sys/types.h>

/*
 * At most @len - 1 bytes of @path into @buf, NUL-terminated (the file may
 * hold NULs, as cmdline does). Returns the number of bytes read, or -errno.
 */
ssize_t readfile_prefix(const char *path, char *buf, size_t len);

/*
 * The whole of @path into @buf, NUL-terminated: 0, -EFBIG when it does not
 * fit (a truncated file is never parsed), or -errno.
 */
int readfile_text(const char *path, char *buf, size_t len);

/* "@dir/@name" read as readfile_text(); -ENAMETOOLONG for a long path. */
int readfile_text_at(const char *dir, const char *name, char *buf, size_t len);

/*
 * The whole of @path into a malloc'ed NUL-terminated buffer of at most
 * @max bytes (-EFBIG beyond). The caller frees *@out.
 */
int readfile_alloc(const char *path, size_t max, char **out);

#endif /* RAMCACHE_READFILE_H */
