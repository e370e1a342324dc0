/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Find the executor by its command line, for --match, among the processes
 * of one user and/or one cgroup (--user, --cgroup), and re-check the pick
 * once a pidfd pins it. Everything takes the /proc root as a parameter so
 * tests can point it at a fixture.
 */
#ifndef RAMCACHE_MATCH_H
#define RAMCACHE_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct match_spec {
	const char *pattern; /* a piece of the command line; NULL: any */
	bool has_uid;	     /* --user: real and effective uid must be uid */
	uid_t uid;
	const char *cgroup; /* --cgroup: the process's cgroup or below it */
};

/* What match_find() saw, so the agent can say why it picked a process. */
struct match_result {
	pid_t pid; /* the pick, 0 if none */
	uid_t uid;
	unsigned long long start;  /* clock ticks after boot */
	char cgroup[256];	   /* of the pick, as /proc/PID/cgroup says */
	unsigned int matched;	   /* command lines that held the pattern */
	unsigned int wrong_user;   /* of those, refused by --user */
	unsigned int wrong_cgroup; /* of those, refused by --cgroup */
	pid_t refused_pid;	   /* the newest one refused, for a warning */
	uid_t refused_uid;
};

/*
 * True if the NUL-separated @cmdline of @len bytes, its arguments joined
 * by spaces, contains @pattern.
 */
int match_cmdline(const char *cmdline, size_t len, const char *pattern);

/*
 * True if cgroup @path (as in /proc/PID/cgroup) is @want or below it.
 * @want may also be given under /sys/fs/cgroup, as v2
 * (/sys/fs/cgroup/a/b) or v1 (/sys/fs/cgroup/memory/a/b, then only the
 * line of that controller counts). @cgroup_file is the text of
 * /proc/PID/cgroup.
 */
bool match_cgroup_within(const char *cgroup_file, const char *want);

/*
 * The oldest process under @proc_root (lowest start time) that @s
 * accepts, other than @self and its ancestors; 0 if none, or -errno.
 * @r (may be NULL) is filled in either case.
 */
pid_t match_find(const char *proc_root, const struct match_spec *s, pid_t self,
		 struct match_result *r);

/*
 * After pidfd_open(): read @pid's command line, uid and cgroup again and
 * check that @pidfd (if >= 0) still names a live process, so what was read
 * belongs to the process the pidfd pins and not to one that reused the
 * pid. 0 if it still matches @s; -ESRCH if it has gone; -EACCES if it no
 * longer matches (it changed its command line, uid or cgroup).
 */
int match_verify(const char *proc_root, const struct match_spec *s, pid_t pid,
		 int pidfd);

/* 0 if @pidfd names a process that has not exited, else -ESRCH. */
int match_pidfd_alive(int pidfd);

#endif /* RAMCACHE_MATCH_H */
