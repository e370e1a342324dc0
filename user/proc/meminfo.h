/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Readers of the system-wide memory files under /proc: meminfo, vmstat,
 * pressure/memory and <pid>/stat. Every reader takes the proc root (NULL
 * means "/proc") so tests point it at tests/fixtures/proc.
 *
 * All return 0 on success and -errno on failure; the output struct is zeroed
 * first, so a field the kernel does not report reads as 0. Sizes are bytes,
 * counters are raw kernel counters (pages or events).
 */
#ifndef RAMCACHE_MEMINFO_H
#define RAMCACHE_MEMINFO_H

#include <stdbool.h>
#include <stdint.h>

#define RC_PROC_ROOT "/proc"

struct rc_meminfo {
	uint64_t mem_total;
	uint64_t mem_free;
	uint64_t mem_available;
	uint64_t buffers;
	uint64_t cached;
	uint64_t swap_total;
	uint64_t swap_free;
	uint64_t active_anon;
	uint64_t inactive_anon;
	uint64_t active_file;
	uint64_t inactive_file;
	uint64_t shmem;
	bool has_mem_available; /* absent before Linux 3.14 */
};

/* Cumulative counters since boot; the caller takes differences. */
struct rc_vmstat {
	uint64_t workingset_refault_anon; /* 0 before 5.9 */
	uint64_t workingset_refault_file; /* "workingset_refault" before 5.9 */
	uint64_t pswpin;
	uint64_t pswpout;
	uint64_t pgmajfault;
	uint64_t pgfault;	 /* every fault, minor and major */
	uint64_t allocstall;	 /* sum of allocstall_* (or allocstall) */
	uint64_t pgscan_kswapd;	 /* sum over zones on old kernels */
	uint64_t pgscan_direct;	 /* ditto */
	uint64_t pgsteal_kswapd; /* ditto */
	uint64_t pgsteal_direct; /* ditto */
	uint64_t oom_kill;
};

struct rc_psi {
	bool available; /* false: no PSI (file absent or CONFIG_PSI=n) */
	bool has_full;
	double some_avg10, some_avg60, some_avg300;
	double full_avg10, full_avg60, full_avg300;
	uint64_t some_total_us;
	uint64_t full_total_us;
};

struct rc_pidstat {
	char state;
	uint64_t minflt;
	uint64_t majflt;
	uint64_t rss_pages;
	uint64_t rss_bytes; /* rss_pages x page size */
};

/* <proc_root>/meminfo. -ENODATA if MemTotal is missing. */
int meminfo_read(const char *proc_root, struct rc_meminfo *mi);

/* <proc_root>/vmstat. -ENODATA if none of the known counters is present. */
int meminfo_vmstat_read(const char *proc_root, struct rc_vmstat *vs);

/*
 * Parse a PSI file (memory.pressure of a cgroup or /proc/pressure/memory).
 * A missing file (or EOPNOTSUPP on read, as with psi=0) is not an error:
 * returns 0 with psi->available = false. -EINVAL if the file is malformed.
 */
int meminfo_psi_read_file(const char *path, struct rc_psi *psi);

/* <proc_root>/pressure/memory, as meminfo_psi_read_file(). */
int meminfo_psi_read(const char *proc_root, struct rc_psi *psi);

/*
 * <proc_root>/<pid>/stat. -ENOENT (or -ESRCH) if the process is gone,
 * -EINVAL if the line cannot be parsed.
 */
int meminfo_pidstat_read(const char *proc_root, int pid, struct rc_pidstat *ps);

/* A process's resident memory by kind, bytes (<pid>/status). */
struct rc_pidrss {
	uint64_t anon, file, shmem;
};

/*
 * <proc_root>/<pid>/status: RssAnon, RssFile and RssShmem (Linux 4.5 and
 * later). 0, -ENODATA when they are not all there, or -errno.
 */
int meminfo_pidrss_read(const char *proc_root, int pid, struct rc_pidrss *r);

/* Parse one /proc/<pid>/stat line; page_size converts rss. 0 or -EINVAL. */
int meminfo_pidstat_parse(const char *line, uint64_t page_size,
			  struct rc_pidstat *ps);

#endif /* RAMCACHE_MEMINFO_H */
