// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Writes the fuzzer's seed corpus: small, valid control pages made by the
 * executor library itself (entries, commands taken, acks written), so the
 * fuzzer starts from what a real executor produces.
 *
 *   fuzz_seed DIR
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ramcache/ramcache.h"

#define OFF(f) offsetof(struct ramcache_ctl, f)

/* Post command @seq by hand, the way the agent does, through the file. */
static int post(int fd, const struct ramcache_ctl *h, uint64_t seq, uint64_t id)
{
	struct ramcache_ctl_cmd c = { .seq = seq, .entry_id = id, .reason = 1 };
	off_t off = (off_t)(h->cmds_off +
			    ((seq - 1) & (h->ring_size - 1)) * sizeof(c));

	if (pwrite(fd, &c, sizeof(c), off) != sizeof(c) ||
	    pwrite(fd, &seq, sizeof(seq), OFF(cmd_head)) != sizeof(seq))
		return -EIO;
	return 0;
}

static int seed(const char *dir, int n, uint32_t entries, uint32_t ring,
		int cmds)
{
	char path[4096], out[4096], buf[1 << 16];
	struct ramcache_command cmd;
	struct ramcache_ctl h;
	struct ramcache *rc;
	ssize_t len;
	int fd, ofd, err;

	snprintf(path, sizeof(path), "%s/.page-%d", dir, n);
	err = ramcache_create(&rc, path, entries, ring);
	if (err)
		return err;
	for (uint32_t i = 0; i < entries; i++) {
		char label[64];
		struct ramcache_entry_info e = {
			.id = 100 + i,
			.bytes = (uint64_t)(i + 1) << 20,
			.used_generation = i,
			.cost_ns = i * 1000000ULL,
			.flags = i % 4 == 1   ? RAMCACHE_F_ACTIVE
				 : i % 4 == 2 ? RAMCACHE_F_MODEL
				 : i % 4 == 3 ? RAMCACHE_F_PINNED
					      : 0,
			.label = label,
		};

		snprintf(label, sizeof(label), "entry-%u", i);
		ramcache_publish(rc, &e);
	}
	ramcache_set_generation(rc, entries);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || pread(fd, &h, sizeof(h), 0) != sizeof(h)) {
		err = -errno;
		goto out;
	}
	for (int s = 1; s <= cmds; s++) {
		if (post(fd, &h, (uint64_t)s, 100 + (uint64_t)s % entries))
			break;
		if (ramcache_poll(rc, &cmd) == 1)
			ramcache_ack(rc, &cmd, 1 + (uint32_t)s % 4, 1 << 20);
	}
	len = pread(fd, buf, sizeof(buf), 0);
	snprintf(out, sizeof(out), "%s/page-%d", dir, n);
	ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (len <= 0 || ofd < 0 || write(ofd, buf, (size_t)len) != len)
		err = -EIO;
	if (ofd >= 0)
		close(ofd);
out:
	if (fd >= 0)
		close(fd);
	ramcache_destroy(rc, true);
	return err;
}

int main(int argc, char **argv)
{
	int err = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_seed DIR\n");
		return 2;
	}
	err = err ?: seed(argv[1], 0, 4, 2, 0);
	err = err ?: seed(argv[1], 1, 8, 4, 3);
	err = err ?: seed(argv[1], 2, 16, 8, 11);
	err = err ?: seed(argv[1], 3, 1, 1, 1);
	if (err) {
		fprintf(stderr, "fuzz_seed: failed to write seeds in %s: %s\n",
			argv[1], strerror(-err));
		return 1;
	}
	return 0;
}
