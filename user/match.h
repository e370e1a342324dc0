/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Find the executor by its command line, for --match. */
#ifndef RAMCACHE_MATCH_H
#define RAMCACHE_MATCH_H

#include <stddef.h>
#include <sys/types.h>

/*
 * True if the NUL-separated @cmdline of @len bytes, its arguments joined
 * by spaces, contains @pattern.
 */
int cmdline_matches(const char *cmdline, size_t len, const char *pattern);

/*
 * The oldest process under @proc_root (lowest start time) whose command
 * line contains @pattern, other than @self and its ancestors; 0 if none,
 * or -errno.
 */
pid_t match_find(const char *proc_root, const char *pattern, pid_t self);

#endif /* RAMCACHE_MATCH_H */
