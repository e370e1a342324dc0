// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "proc/readfile.h"

/* Read from @fd into @buf until EOF or @len bytes; count or -errno. */
static ssize_t read_all(int fd, char *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = read(fd, buf + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		off += n;
	}
	return off;
}

ssize_t readfile_prefix(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	if (!len)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read_all(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

int readfile_text(const char *path, char *buf, size_t len)
{
	ssize_t n = readfile_prefix(path, buf, len);

	if (n < 0)
		return n;
	/* a full buffer may be a cut file: refuse rather than misparse */
	return (size_t)n + 1 >= len ? -EFBIG : 0;
}

int readfile_text_at(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	return readfile_text(path, buf, len);
}

int readfile_alloc(const char *path, size_t max, char **out)
{
	size_t cap = 4096, len = 0;
	char *buf = NULL, *nbuf;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		nbuf = realloc(buf, cap);
		if (!nbuf) {
			n = -ENOMEM;
			break;
		}
		buf = nbuf;
		n = read_all(fd, buf + len, cap - len - 1);
		if (n < 0)
			break;
		len += n;
		if (len + 1 < cap) {
			buf[len] = '\0';
			close(fd);
			*out = buf;
			return 0;
		}
		if (cap >= max) {
			n = -EFBIG;
			break;
		}
		cap *= 2;
	}
	close(fd);
	free(buf);
	return n;
}
