// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Reuse counted from the page, and what it does to the order of eviction. */
#include "test.h"
#include "core/reuse.h"

static struct rc_reuse r;

static void see(uint64_t id, uint64_t ug)
{
	struct rc_entry e = { .id = id, .bytes = 1, .used_generation = ug };

	reuse_note(&r, &e, 1);
}

TEST(a_later_prompt_using_an_entry_is_a_reuse)
{
	reuse_init(&r);
	see(5, 1);
	ASSERT_EQ(reuse_hits(&r, 5), 0, "new");
	see(5, 1);
	ASSERT_EQ(reuse_hits(&r, 5), 0, "same prompt");
	see(5, 3);
	ASSERT_EQ(reuse_hits(&r, 5), 1, "prompt 3 used it");
	see(5, 2);
	ASSERT_EQ(reuse_hits(&r, 5), 1, "an older generation is no use");
	see(5, 4);
	ASSERT_EQ(reuse_hits(&r, 5), 2, "and prompt 4");
	ASSERT_EQ(reuse_hits(&r, 6), 0, "never seen");
	ASSERT_EQ(reuse_hits(&r, 0), 0, "id 0");
}

TEST(a_full_table_starts_again)
{
	reuse_init(&r);
	see(1, 1);
	see(1, 2);
	for (uint64_t id = 2; id < 2 * RC_REUSE_SLOTS; id++)
		see(id, 1);
	ASSERT_LE(r.n, RC_REUSE_SLOTS / 4 * 3, "bounded");
	ASSERT_EQ(reuse_hits(&r, 1), 0, "forgotten, not wrong");
}

TEST(reused_entries_go_after_the_others)
{
	struct rc_entry e[] = {
		{ .id = 1, .bytes = 100, .used_generation = 1, .reuse = 2 },
		{ .id = 2, .bytes = 100, .used_generation = 1 },
		{ .id = 3, .bytes = 150, .used_generation = 1, .reuse = 1 },
	};
	struct rc_select_req q = { .entries = e,
				   .nr_entries = 3,
				   .generation = 4,
				   .deficit = 1000,
				   .phase = RC_PHASE_INACTIVE };
	uint32_t out[3];
	uint64_t covered;

	ASSERT_EQ(policy_select(&q, out, 3, &covered), 3, "all picked");
	/* scores 100 / 1, then 150 / 2, then 100 / 3 */
	ASSERT_EQ(out[0], 1, "never reused first");
	ASSERT_EQ(out[1], 2, "reused once, though bigger");
	ASSERT_EQ(out[2], 0, "reused twice last");
}

TEST_MAIN()
