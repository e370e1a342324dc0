/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * USDT probes (provider "ramcache") so bpftrace/bcc can watch an executor
 * without rebuilding it. Without <sys/sdt.h> they compile to nothing.
 */
#ifndef RAMCACHE_LIB_PROBES_H
#define RAMCACHE_LIB_PROBES_H

#if defined(__has_include)
#if __has_include(<sys/sdt.h>)
#include <sys/sdt.h>
#define RC_PROBE3(name, a, b, c) DTRACE_PROBE3(ramcache, name, a, b, c)
#endif
#endif

#ifndef RC_PROBE3
#define RC_PROBE3(name, a, b, c) \
	do {                     \
		(void)(a);       \
		(void)(b);       \
		(void)(c);       \
	} while (0)
#endif

#endif /* RAMCACHE_LIB_PROBES_H */
