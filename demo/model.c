// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Models: a file of pseudo-random "weights" generated once, then loaded
 * like safetensors does it: the file mmap'd, its contents copied into
 * anonymous memory. The copy is what eviction gives back for sure; the
 * file pages are page cache the kernel can reclaim on its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "demo.h"

/* a safe point (tick) after each chunk */
#define CHUNK MiB

/* Write @size bytes to @path, then drop them from the page cache. */
int model_generate(const char *path, uint64_t size, unsigned int seed,
		   void (*tick)(void *), void *arg)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL * (seed + 1), done = 0;
	uint64_t *buf;
	int fd, err = 0;
	size_t i;

	buf = malloc(CHUNK);
	if (!buf)
		return -ENOMEM;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	while (done < size) {
		size_t n = size - done < CHUNK ? size - done : CHUNK;
		ssize_t w;

		for (i = 0; i < CHUNK / sizeof(*buf); i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = x;
		}
		w = write(fd, buf, n);
		if (w < 0) {
			err = -errno;
			goto out;
		}
		done += w;
		tick(arg);
	}
	if (fdatasync(fd))
		err = -errno;
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return err;
}

/* Map @path and copy it into fresh anonymous memory: e->map and e->anon. */
int model_load(struct demo_entry *e, const char *path, uint64_t size,
	       void (*tick)(void *), void *arg)
{
	uint64_t off;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	e->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	err = -errno;
	close(fd);
	if (e->map == MAP_FAILED) {
		e->map = NULL;
		return err;
	}
	e->map_len = size;
	madvise(e->map, size, MADV_SEQUENTIAL);
	e->anon = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->anon == MAP_FAILED) {
		e->anon = NULL;
		entry_release(e);
		return -ENOMEM;
	}
	e->anon_len = size;
	madvise(e->anon, size, MADV_HUGEPAGE);
	for (off = 0; off < size; off += CHUNK) {
		size_t n = size - off < CHUNK ? size - off : CHUNK;

		memcpy((char *)e->anon + off, (char *)e->map + off, n);
		tick(arg);
	}
	return 0;
}
