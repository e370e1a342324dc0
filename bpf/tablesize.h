/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The most processes the agent follows at once: the size of the BPF side's
 * tables (pressure.h, discover_ev.h) and of the agent's. A build option,
 * `make MAX_EXECUTORS=N`, which the Makefile writes into rc_build.h (in
 * the build folder): 64 by default, a power of two up to 1024.
 */
#ifndef RAMCACHE_TABLESIZE_H
#define RAMCACHE_TABLESIZE_H

#if __has_include("rc_build.h")
#include "rc_build.h"
#endif
#ifndef RC_MAX_TARGETS
#define RC_MAX_TARGETS 64
#endif
#if RC_MAX_TARGETS == 64
#define RC_TARGET_BITS 6
#elif RC_MAX_TARGETS == 128
#define RC_TARGET_BITS 7
#elif RC_MAX_TARGETS == 256
#define RC_TARGET_BITS 8
#elif RC_MAX_TARGETS == 512
#define RC_TARGET_BITS 9
#elif RC_MAX_TARGETS == 1024
#define RC_TARGET_BITS 10
#else
#error "MAX_EXECUTORS must be 64, 128, 256, 512 or 1024"
#endif

#endif /* RAMCACHE_TABLESIZE_H */
