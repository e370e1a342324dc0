// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --all's admission, without root: each user's share of the places and
 * rate of adoptions, the reports looked at again while a page is being
 * made, the looks through /proc (in slices, sooner when reports were lost
 * or a refused executor may now have a place), and targets without a page.
 */
#include "executors/admission.h"
#include "test.h"

#define SEC NSEC_PER_SEC
#define MS  NSEC_PER_MSEC
#define T0  (1000 * SEC) /* a clock that has run a while */

static struct admission fresh(void)
{
	struct admission ad;

	admission_init(&ad, false, 0);
	return ad;
}

TEST(root_and_the_named_user_are_never_limited)
{
	struct admission ad;

	admission_init(&ad, true, 1000);
	for (int i = 0; i < 100; i++) {
		ASSERT_EQ(admission_check(&ad, 0, 60, T0), ADMISSION_OK,
			  "root");
		ASSERT_EQ(admission_check(&ad, 1000, 60, T0), ADMISSION_OK,
			  "--user");
	}
	ASSERT_FALSE(ad.refused, "nothing refused");
	ASSERT_EQ(admission_check(&ad, 1001, ADMISSION_UID_MAX, T0),
		  ADMISSION_USER_FULL, "another user is");
}

TEST(a_user_takes_at_most_a_share_of_the_places)
{
	struct admission ad = fresh();

	ASSERT_EQ(admission_check(&ad, 1000, ADMISSION_UID_MAX - 1, T0),
		  ADMISSION_OK, "one place left");
	ASSERT_FALSE(ad.refused, "not refused");
	ASSERT_EQ(admission_check(&ad, 1000, ADMISSION_UID_MAX, T0),
		  ADMISSION_USER_FULL, "full");
	ASSERT_TRUE(ad.refused, "the refusal is remembered");
	ASSERT_EQ(admission_check(&ad, 1001, ADMISSION_UID_MAX - 1, T0),
		  ADMISSION_OK, "another user's share is its own");
}

TEST(a_user_adopts_a_burst_then_at_the_rate)
{
	struct admission ad = fresh();
	int ok = 0;

	for (int i = 0; i < 100; i++)
		ok += admission_check(&ad, 1000, 0, T0) == ADMISSION_OK;
	ASSERT_EQ(ok, (int)ADMISSION_UID_BURST, "a burst at once");
	ASSERT_EQ(admission_check(&ad, 1000, 0, T0), ADMISSION_TOO_FAST,
		  "then too fast");
	ASSERT_TRUE(ad.refused, "refused");
	/* the bucket refills at the rate: one adoption per 1/rate s */
	ASSERT_EQ(admission_check(&ad, 1000, 0,
				  T0 + (uint64_t)(SEC / ADMISSION_UID_RATE)),
		  ADMISSION_OK, "one more after 1/rate s");
	ASSERT_EQ(admission_check(&ad, 1000, 0,
				  T0 + (uint64_t)(SEC / ADMISSION_UID_RATE)),
		  ADMISSION_TOO_FAST, "but not two");
	/* another user has a bucket of its own */
	ASSERT_EQ(admission_check(&ad, 1001, 0, T0), ADMISSION_OK, "other");
	/* a long pause refills no more than a burst */
	ok = 0;
	for (int i = 0; i < 100; i++)
		ok += admission_check(&ad, 1000, 0, T0 + 3600 * SEC) ==
		      ADMISSION_OK;
	ASSERT_EQ(ok, (int)ADMISSION_UID_BURST, "a burst, no more");
}

TEST(more_users_than_buckets_reuse_the_stalest)
{
	struct admission ad = fresh();

	for (uid_t u = 1; u <= RC_MAX_TARGETS; u++)
		ASSERT_EQ(admission_check(&ad, u, 0, T0 + u), ADMISSION_OK,
			  "each user once");
	/* uid 1's bucket (the stalest) goes to a newcomer, full */
	ASSERT_EQ(admission_check(&ad, 5000, 0, T0 + 1000), ADMISSION_OK,
		  "newcomer");
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		ASSERT_NEQ(ad.budget[i].uid, 1, "uid 1 forgotten");
}

TEST(refusals_are_told_at_most_every_warn_period)
{
	struct admission ad = fresh();

	ASSERT_TRUE(admission_may_warn(&ad, T0), "the first");
	ASSERT_FALSE(admission_may_warn(&ad, T0 + 1), "not again at once");
	ASSERT_FALSE(admission_may_warn(&ad, T0 + ADMISSION_WARN_NS - 1),
		     "nor within the period");
	ASSERT_TRUE(admission_may_warn(&ad, T0 + ADMISSION_WARN_NS), "after");
}

TEST(a_place_freed_after_a_refusal_brings_the_look_forward)
{
	struct admission ad = fresh();
	uint64_t until;

	ASSERT_TRUE(admission_scan_due(&ad, T0, &until), "first look at once");
	ad.scan_from = 0;
	admission_scanned(&ad, T0);
	ASSERT_EQ(ad.next_scan_ns, T0 + ADMISSION_RESCAN_BLIND_NS,
		  "blind: every 2 s");
	ad.next_scan_ns = T0 + ADMISSION_RESCAN_NS; /* as with the uprobe */

	admission_place_freed(&ad, T0 + SEC);
	ASSERT_EQ(ad.next_scan_ns, T0 + ADMISSION_RESCAN_NS,
		  "nobody refused: no change");
	admission_refused(&ad);
	admission_place_freed(&ad, T0 + SEC);
	ASSERT_EQ(ad.next_scan_ns, T0 + ADMISSION_RESCAN_LOST_NS,
		  "at most every RESCAN_LOST after the last look");
	ASSERT_TRUE(ad.scan_for_lost, "a look for the refused");
	ASSERT_FALSE(ad.refused, "told once");
	admission_refused(&ad);
	admission_place_freed(&ad, T0 + 20 * SEC);
	ASSERT_EQ(ad.next_scan_ns, T0 + ADMISSION_RESCAN_LOST_NS,
		  "never later than already due");
}

TEST(a_look_goes_in_slices_and_counts_when_done)
{
	struct admission ad = fresh();
	uint64_t until;

	ad.uprobe = true;
	ASSERT_TRUE(admission_scan_due(&ad, T0, &until), "due");
	ASSERT_EQ(until, T0 + ADMISSION_SCAN_SLICE_NS, "one slice");
	ASSERT_EQ(ad.next_scan_ns, T0 + ADMISSION_RESCAN_NS, "next look");
	ad.scan_from = 4242; /* the slice ran out at pid 4242 */
	admission_scanned(&ad, T0);
	ASSERT_EQ(ad.scans, 0, "not done");
	ASSERT_FALSE(admission_scan_due(&ad, T0 + ADMISSION_SCAN_GAP_NS - 1,
					&until),
		     "the loop runs between slices");
	ASSERT_TRUE(admission_scan_due(&ad, T0 + ADMISSION_SCAN_GAP_NS, &until),
		    "the next slice");
	ASSERT_EQ(ad.next_scan_ns, T0 + ADMISSION_RESCAN_NS,
		  "a slice does not move the next look");
	ad.scan_from = 0;
	admission_scanned(&ad, T0 + ADMISSION_SCAN_GAP_NS);
	ASSERT_EQ(ad.scans, 1, "done");
	ASSERT_TRUE(admission_missed(&ad),
		    "the uprobe should report what later looks find");
	ASSERT_FALSE(admission_scan_due(&ad, T0 + ADMISSION_RESCAN_NS - 1,
					&until),
		     "not before the period");
	ASSERT_TRUE(admission_scan_due(&ad, T0 + ADMISSION_RESCAN_NS, &until),
		    "then again");
}

TEST(lost_reports_bring_a_look_at_once_at_most_so_often)
{
	struct admission ad = fresh();
	uint64_t until;

	ad.uprobe = true;
	ASSERT_TRUE(admission_scan_due(&ad, T0, &until), "first look");
	admission_scanned(&ad, T0);
	ASSERT_EQ(admission_lost(&ad, 0, T0 + 10 * SEC), 0, "none lost");
	ASSERT_EQ(admission_lost(&ad, 7, T0 + ADMISSION_RESCAN_LOST_NS - 1), 0,
		  "too soon after the last look");
	ASSERT_EQ(admission_lost(&ad, 7, T0 + ADMISSION_RESCAN_LOST_NS), 7,
		  "7 lost");
	ASSERT_EQ(ad.next_scan_ns, T0 + ADMISSION_RESCAN_LOST_NS, "look now");
	ASSERT_FALSE(admission_missed(&ad), "those were lost, not missed");
	ASSERT_EQ(admission_lost(&ad, 7, T0 + 20 * SEC), 0, "told once");
	ASSERT_TRUE(admission_scan_due(&ad, T0 + ADMISSION_RESCAN_LOST_NS,
				       &until),
		    "due");
	admission_scanned(&ad, T0 + ADMISSION_RESCAN_LOST_NS);
	ASSERT_TRUE(admission_missed(&ad), "the look made up for them");
	ASSERT_EQ(admission_lost(&ad, 9, T0 + 2 * ADMISSION_RESCAN_LOST_NS), 2,
		  "only the new ones");
}

TEST(reported_pages_are_looked_for_a_while)
{
	struct admission ad = fresh();
	pid_t pids[RC_MAX_TARGETS];

	ASSERT_EQ(admission_pend(&ad, 100, T0), T0 + ADMISSION_PEND_FIRST_NS,
		  "look again soon");
	ASSERT_EQ(admission_pend(&ad, 100, T0 + 1), 0, "pending already");
	ASSERT_EQ(admission_pend(&ad, 101, T0 + SEC),
		  T0 + SEC + ADMISSION_PEND_FIRST_NS, "another");
	ASSERT_EQ(admission_pending(&ad, T0 + 10 * MS, pids), 2, "both");
	ASSERT_EQ(pids[0], 100, "in order");
	ASSERT_EQ(pids[1], 101, "in order");
	admission_settled(&ad, 101);
	ASSERT_EQ(admission_pending(&ad, T0 + 20 * MS, pids), 1, "one left");
	ASSERT_EQ(admission_pending(&ad, T0 + ADMISSION_PEND_NS, pids), 0,
		  "given up after PEND_NS");
}

TEST(a_full_pending_list_forgets_the_oldest)
{
	struct admission ad = fresh();
	pid_t pids[RC_MAX_TARGETS];

	for (int i = 0; i <= RC_MAX_TARGETS; i++)
		admission_pend(&ad, 100 + i, T0);
	ASSERT_EQ(admission_pending(&ad, T0, pids), RC_MAX_TARGETS, "full");
	ASSERT_EQ(pids[0], 101, "the oldest went");
	ASSERT_EQ(pids[RC_MAX_TARGETS - 1], 100 + RC_MAX_TARGETS, "newest");
}

TEST(executors_refused_for_lack_of_a_place_take_the_next_in_order)
{
	struct admission ad = fresh();

	ASSERT_EQ(admission_next_waiting(&ad), 0, "nobody waits");
	ASSERT_TRUE(admission_wait(&ad, 100), "100 waits: tell it");
	ASSERT_TRUE(admission_wait(&ad, 200), "200 waits");
	ASSERT_FALSE(admission_wait(&ad, 100), "told once");
	ASSERT_EQ(ad.nwaiting, 2, "each once");
	admission_settled(&ad, 200); /* followed another way, or gone */
	ASSERT_TRUE(admission_wait(&ad, 300), "300 waits");
	ASSERT_EQ(admission_next_waiting(&ad), 100, "the longest waiting");
	ASSERT_EQ(admission_next_waiting(&ad), 300, "then the next");
	ASSERT_EQ(admission_next_waiting(&ad), 0, "then nobody");
	for (int i = 0; i <= RC_MAX_TARGETS; i++)
		admission_wait(&ad, 1000 + i);
	ASSERT_EQ(ad.nwaiting, RC_MAX_TARGETS, "bounded");
	ASSERT_EQ(admission_next_waiting(&ad), 1001, "the oldest forgotten");
}

TEST(a_target_without_a_page_goes_after_a_while)
{
	uint64_t since = 0;

	ASSERT_FALSE(admission_pageless(&since, false, T0), "just gone");
	ASSERT_FALSE(admission_pageless(&since, false,
					T0 + ADMISSION_NO_PAGE_NS - 1),
		     "not yet");
	ASSERT_FALSE(admission_pageless(&since, true, T0 + SEC), "came back");
	ASSERT_EQ(since, 0, "forgotten");
	ASSERT_FALSE(admission_pageless(&since, false, T0 + 2 * SEC), "again");
	ASSERT_TRUE(admission_pageless(&since, false,
				       T0 + 2 * SEC + ADMISSION_NO_PAGE_NS),
		    "let go");
}

TEST(the_loop_wakes_for_the_next_look_and_pending_pages)
{
	struct admission ad = fresh();
	struct cadence_due d[2];
	uint64_t until;

	ad.uprobe = true;
	admission_scan_due(&ad, T0, &until);
	admission_scanned(&ad, T0);
	ASSERT_EQ(admission_wakes(&ad, T0, d), 1, "the next look only");
	ASSERT_EQ(d[0].at, T0 + ADMISSION_RESCAN_NS, "at");
	ASSERT_EQ(d[0].slack, CADENCE_SLACK_NS, "with slack");
	ad.scan_from = 77;
	admission_scanned(&ad, T0);
	admission_pend(&ad, 100, T0);
	ASSERT_EQ(admission_wakes(&ad, T0, d), 2, "slice and pending");
	ASSERT_EQ(d[0].at, T0 + ADMISSION_SCAN_GAP_NS, "the next slice");
	ASSERT_EQ(d[0].slack, 0, "on time");
	ASSERT_EQ(d[1].at, T0 + ADMISSION_PEND_RETRY_NS, "pending");
}

TEST_MAIN()
