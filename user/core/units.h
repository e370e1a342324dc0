/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Units the agent counts in (bytes, nanoseconds, "no limit") and the
 * parsers of sizes and durations as the flags spell them. Pure: no I/O.
 */
#ifndef RAMCACHE_UNITS_H
#define RAMCACHE_UNITS_H

#include <stdint.h>

#define RC_MIB (1ULL << 20)
#define RC_GIB (1ULL << 30)

/* A cgroup limit at or above this is "no limit" (v1 writes ~2^63). */
#define RC_LIMIT_UNLIMITED_MIN (1ULL << 60)
#define RC_UNLIMITED	       UINT64_MAX

#define NSEC_PER_SEC	       ((uint64_t)1000000000)
#define NSEC_PER_MSEC	       ((uint64_t)1000000)

/*
 * Parse a size: plain bytes ("1048576"), a number with a binary suffix
 * K, M, G, T (also KB/KiB ..., case-insensitive, all powers of 1024,
 * optional 'B' alone = bytes), a decimal fraction ("1.5G"), or a percent of
 * total ("10%"; -EINVAL if total is 0). Spaces are not allowed. Returns 0,
 * -EINVAL on garbage (empty, sign, "inf", trailing text) or -ERANGE when it
 * does not fit in 64 bits. Fractions of a byte are dropped.
 */
int units_parse_size(const char *s, uint64_t total, uint64_t *out);

/*
 * Parse a duration: "500ms", "2s", "1.5" (seconds), "250us", "100ns",
 * "1m" (minutes). Returns 0, -EINVAL or -ERANGE as units_parse_size().
 */
int units_parse_duration(const char *s, uint64_t *out_ns);

#endif /* RAMCACHE_UNITS_H */
