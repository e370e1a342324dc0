// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Each memory domain's level inputs (domain_pressure_ctx). */
#include <errno.h>
#include <stdlib.h>

#include "executors/domain_pressure.h"
#include "targets_rig.h"
#include "test.h"

#define MiB RC_MIB

static struct target *member(struct targets *ts, int slot, pid_t pid, int dom,
			     uint64_t key, uint64_t headroom)
{
	struct target *t = rig_target(ts, slot, dom, key);

	if (!t)
		abort();
	t->pid = pid;
	t->sm.headroom = headroom;
	t->sm.has_cg = true;
	t->sm.cs.nearest_depth = 1; /* a child of the limiting cgroup */
	t->sm.cg.ino = 1000 + (uint64_t)slot;
	t->thr.headroom_min = 64 * MiB;
	return t;
}

/* Two domains: each gets its own members' headroom, cgroup, pid. */
TEST(domain_level_inputs_are_the_domains)
{
	struct domain_env env = { .window_ns = 10000000000ULL };
	struct targets ts = { 0 };
	struct pressure_watch_ctx c = { 0 };
	struct target *a, *b, *x;
	bool ok = true;

	a = member(&ts, 0, 101, 0, 77, 30 * MiB);
	b = member(&ts, 1, 102, 0, 77, 90 * MiB);
	x = member(&ts, 2, 103, 1, 88, 250 * MiB);
	b->sm.cs.nearest_depth = 0; /* b sits in the limiting cgroup itself */
	x->thr.headroom_min = 32 * MiB;

	if (domain_pressure_ctx(&ts, 0, &env, 1000000000ULL, &c) ||
	    c.headroom != 30 * MiB || c.cg != &b->sm.cs.self ||
	    c.cg_ino != b->sm.cg.ino || c.pid != 0 ||
	    c.thr.headroom_min != 64 * MiB) {
		fprintf(stderr, "domain 0: headroom %llu pid %d cg_ino %llu\n",
			(unsigned long long)c.headroom, (int)c.pid,
			(unsigned long long)c.cg_ino);
		ok = false;
	}
	if (ok && (domain_pressure_ctx(&ts, 1, &env, 1000000000ULL, &c) ||
		   c.headroom != 250 * MiB || c.cg || c.cg_ino ||
		   c.pid != 103 || c.thr.headroom_min != 32 * MiB)) {
		fprintf(stderr, "domain 1: headroom %llu pid %d\n",
			(unsigned long long)c.headroom, (int)c.pid);
		ok = false;
	}
	if (ok &&
	    domain_pressure_ctx(&ts, 2, &env, 1000000000ULL, &c) != -ENOENT)
		ok = false;
	(void)a;
	rig_release(&ts, 0);
	ASSERT_TRUE(ok, "each domain's own inputs");
}

/* A full domain's level is its own: high beside an idle domain's ok. */
TEST(domain_levels_are_apart)
{
	struct domain_env env = { .window_ns = 10000000000ULL };
	struct targets ts = { 0 };
	struct domain_levels *dl = malloc(sizeof(*dl));
	struct pressure_watch_ctx c = { 0 };
	int full, idle;

	member(&ts, 0, 101, 0, 77, 30 * MiB);
	member(&ts, 1, 102, 1, 88, 250 * MiB);
	/* each sits in its limiting cgroup, whose PSI is calm (the fixture
	 * /proc's, the machine's, is not) */
	for (int i = 0; i < 2; i++) {
		ts.t[i]->thr.inactive_min = 128 * MiB;
		ts.t[i]->sm.cs.nearest_depth = 0;
		ts.t[i]->sm.cs.self.psi.available = true;
	}
	domain_pressure_init(dl, fixture("proc"));
	domain_pressure_ctx(&ts, 0, &env, 1000000000ULL, &c);
	domain_pressure_update(dl, &ts, 0, 1000000000ULL, &c);
	domain_pressure_ctx(&ts, 1, &env, 1000000000ULL, &c);
	domain_pressure_update(dl, &ts, 1, 1000000000ULL, &c);
	full = dl->lw[0].cur.level;
	idle = dl->lw[1].cur.level;
	free(dl);
	rig_release(&ts, 0);
	ASSERT_EQ(full, RAMCACHE_LEVEL_HIGH, "30 MiB left of 64 MiB: high");
	ASSERT_EQ(idle, RAMCACHE_LEVEL_OK, "250 MiB left: ok");
}

TEST_MAIN()
