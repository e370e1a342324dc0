// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Who answers for a process; see principal.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/principal.h"

/* A decimal number of at most 32 bits filling [s, end). */
static bool u32_of(const char *s, const char *end, uint32_t *v)
{
	uint64_t n = 0;

	if (s == end)
		return false;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9')
			return false;
		n = n * 10 + (uint64_t)(*s - '0');
		if (n > UINT32_MAX)
			return false;
	}
	*v = (uint32_t)n;
	return true;
}

/* The uid of user @name (@len bytes) in the passwd text @pw. */
static bool uid_of_name(const char *pw, const char *name, size_t len,
			uint32_t *uid)
{
	while (pw && *pw) {
		const char *eol = strchrnul(pw, '\n');
		const char *c1 = memchr(pw, ':', (size_t)(eol - pw));
		const char *c2 =
			c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		const char *c3 =
			c2 ? memchr(c2 + 1, ':', (size_t)(eol - c2 - 1)) : NULL;

		if (c3 && (size_t)(c1 - pw) == len && !memcmp(pw, name, len))
			return u32_of(c2 + 1, c3, uid);
		pw = *eol ? eol + 1 : eol;
	}
	return false;
}

/* One "OWNER:START:COUNT" line [s, eol) into @r. */
static bool parse_line(const char *s, const char *eol, const char *passwd,
		       struct subuid_range *r)
{
	const char *c1 = memchr(s, ':', (size_t)(eol - s));
	const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1))
			    : NULL;

	if (!c1 || !c2 || !u32_of(c1 + 1, c2, &r->start) ||
	    !u32_of(c2 + 1, eol, &r->count) || !r->count ||
	    r->count - 1 > UINT32_MAX - r->start)
		return false;
	return u32_of(s, c1, &r->owner) ||
	       uid_of_name(passwd, s, (size_t)(c1 - s), &r->owner);
}

int subuids_parse(struct subuids *t, const char *subuid, const char *passwd)
{
	t->n = 0;
	while (subuid && *subuid && t->n < SUBUID_MAX) {
		const char *eol = strchrnul(subuid, '\n');

		if (*subuid != '#' &&
		    parse_line(subuid, eol, passwd, &t->r[t->n]))
			t->n++;
		subuid = *eol ? eol + 1 : eol;
	}
	return t->n;
}

struct principal principal_of(const struct subuids *t, uint32_t uid,
			      uint64_t pidns)
{
	struct principal p = { PRINCIPAL_USER, uid };

	for (int i = 0; i < t->n; i++)
		if (uid >= t->r[i].start &&
		    uid - t->r[i].start < t->r[i].count) {
			p.id = t->r[i].owner;
			return p;
		}
	if (uid)
		return p;
	/* the host's root, unless it is a container's */
	if (pidns)
		return (struct principal){ PRINCIPAL_CONTAINER, pidns };
	return (struct principal){ PRINCIPAL_ROOT, 0 };
}

void principal_name(struct principal p, char *buf, size_t len)
{
	switch (p.kind) {
	case PRINCIPAL_ROOT:
		snprintf(buf, len, "root");
		break;
	case PRINCIPAL_USER:
		snprintf(buf, len, "uid %" PRIu64, p.id);
		break;
	case PRINCIPAL_CONTAINER:
		snprintf(buf, len, "the container of pid namespace %" PRIu64,
			 p.id);
		break;
	}
}
