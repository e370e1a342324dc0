/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Who answers for a process, for the limits --all holds each one to: a
 * user, counting the subordinate uids /etc/subuid gives them (a rootless
 * container's), or a container whose root is the host's root (its
 * outermost pid namespace below the agent's), or root itself. Pure: the
 * tables are parsed from text the caller read.
 */
#ifndef RAMCACHE_PRINCIPAL_H
#define RAMCACHE_PRINCIPAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum principal_kind {
	PRINCIPAL_ROOT,	     /* uid 0 in the agent's pid namespace */
	PRINCIPAL_USER,	     /* id: a uid */
	PRINCIPAL_CONTAINER, /* id: inode of its outermost pid namespace */
};

struct principal {
	enum principal_kind kind;
	uint64_t id;
};

#define SUBUID_MAX 256

struct subuid_range {
	uint32_t owner; /* the user the range is given to */
	uint32_t start, count;
};

struct subuids {
	struct subuid_range r[SUBUID_MAX];
	int n;
};

/*
 * Parse /etc/subuid (@subuid: "NAME_OR_UID:START:COUNT" lines) into @t,
 * names looked up in @passwd (the text of /etc/passwd; NULL: numeric
 * owners only). Lines that do not parse, name no known user or overflow
 * are skipped; returns how many were kept.
 */
int subuids_parse(struct subuids *t, const char *subuid, const char *passwd);

/*
 * The principal of a process whose real uid is @uid and whose outermost
 * pid namespace below the agent's has inode @pidns (0: it is in the
 * agent's).
 */
struct principal principal_of(const struct subuids *t, uint32_t uid,
			      uint64_t pidns);

static inline bool principal_eq(struct principal a, struct principal b)
{
	return a.kind == b.kind && a.id == b.id;
}

/* "uid 1000", "the container of pid namespace 4026532481", "root" */
void principal_name(struct principal p, char *buf, size_t len);

#endif /* RAMCACHE_PRINCIPAL_H */
