// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --all's admission, without root: each user's share of the places and
 * rate of adoptions, the reports looked at again while a page is being
 * made, the looks through /proc (in slices, sooner when reports were lost
 * or a refused executor may now have a place), and targets without a page.
 */
#include "core/admission.h"
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

static struct principal user(uint32_t uid)
{
	return (struct principal){ PRINCIPAL_USER, uid };
}

static const struct principal ROOT = { PRINCIPAL_ROOT, 0 };

TEST(root_and_the_named_user_are_never_limited)
{
	struct admission ad;

	admission_init(&ad, true, 1000);
	for (int i = 0; i < 100; i++) {
		ASSERT_EQ(admission_check(&ad, ROOT, 60), ADMISSION_OK, "root");
		ASSERT_EQ(admission_check(&ad, user(1000), 60), ADMISSION_OK,
			  "--user");
		ASSERT_EQ(admission_may_look(&ad, ROOT, T0), ADMISSION_OK,
			  "root is looked at");
		ASSERT_EQ(admission_may_look(&ad, user(1000), T0), ADMISSION_OK,
			  "--user is looked at");
	}
	ASSERT_FALSE(ad.refused, "nothing refused");
	ASSERT_EQ(admission_check(&ad, user(1001), ADMISSION_UID_MAX),
		  ADMISSION_USER_FULL, "another user is");
}

TEST(a_user_takes_at_most_a_share_of_the_places)
{
	struct admission ad = fresh();

	ASSERT_EQ(admission_check(&ad, user(1000), ADMISSION_UID_MAX - 1),
		  ADMISSION_OK, "one place left");
	ASSERT_FALSE(ad.refused, "not refused");
	ASSERT_EQ(admission_check(&ad, user(1000), ADMISSION_UID_MAX),
		  ADMISSION_USER_FULL, "full");
	ASSERT_TRUE(ad.refused, "the refusal is remembered");
	ASSERT_EQ(admission_check(&ad, user(1001), ADMISSION_UID_MAX - 1),
		  ADMISSION_OK, "another user's share is its own");
}

TEST(a_container_root_and_subuids_are_principals_of_their_own)
{
	struct admission ad = fresh();
	struct principal p;

	subuids_parse(&ad.subuids, "1000:100000:65536\n", NULL);
	ad.own_pidns = 4026531836ULL;
	p = admission_principal(&ad, 0, 4026532481ULL);
	ASSERT_EQ(p.kind, PRINCIPAL_CONTAINER, "root in a container");
	ASSERT_FALSE(admission_exempt(&ad, p), "is limited");
	ASSERT_EQ(admission_check(&ad, p, ADMISSION_UID_MAX),
		  ADMISSION_USER_FULL, "to a share of the places");
	p = admission_principal(&ad, 0, 4026531836ULL);
	ASSERT_EQ(p.kind, PRINCIPAL_ROOT, "the agent's own container is home");
	ASSERT_TRUE(admission_exempt(&ad, p), "root there is not limited");
	p = admission_principal(&ad, 123456, 4026532481ULL);
	ASSERT_TRUE(principal_eq(p, user(1000)), "a subuid is its owner");
}

TEST(a_principal_is_looked_at_a_burst_then_at_the_rate)
{
	struct admission ad = fresh();
	int ok = 0;

	for (int i = 0; i < 100; i++)
		ok += admission_may_look(&ad, user(1000), T0) == ADMISSION_OK;
	ASSERT_EQ(ok, (int)ADMISSION_UID_BURST, "a burst at once");
	ASSERT_EQ(admission_may_look(&ad, user(1000), T0), ADMISSION_TOO_FAST,
		  "then too fast");
	/* the bucket refills at the rate: one look per 1/rate s */
	ASSERT_EQ(admission_may_look(&ad, user(1000),
				     T0 + (uint64_t)(SEC / ADMISSION_UID_RATE)),
		  ADMISSION_OK, "one more after 1/rate s");
	ASSERT_EQ(admission_may_look(&ad, user(1000),
				     T0 + (uint64_t)(SEC / ADMISSION_UID_RATE)),
		  ADMISSION_TOO_FAST, "but not two");
	/* another user has a bucket of its own */
	ASSERT_EQ(admission_may_look(&ad, user(1001), T0), ADMISSION_OK,
		  "other");
	/* a long pause refills no more than a burst */
	ok = 0;
	for (int i = 0; i < 100; i++)
		ok += admission_may_look(&ad, user(1000), T0 + 3600 * SEC) ==
		      ADMISSION_OK;
	ASSERT_EQ(ok, (int)ADMISSION_UID_BURST, "a burst, no more");
}

TEST(dear_looks_pause_a_principal_until_its_share_is_back)
{
	struct admission ad = fresh();
	uint64_t t = T0;

	ASSERT_EQ(admission_may_look(&ad, user(1000), t), ADMISSION_OK,
		  "first");
	/* a process of a million descriptors: a look of 300 ms */
	admission_charge(&ad, user(1000), 300 * MS, t);
	ASSERT_EQ(admission_may_look(&ad, user(1000), t), ADMISSION_TOO_DEAR,
		  "its share is spent");
	ASSERT_EQ(admission_may_look(&ad, user(1001), t), ADMISSION_OK,
		  "another's is not");
	admission_charge(&ad, ROOT, 10 * SEC, t);
	ASSERT_EQ(admission_may_look(&ad, ROOT, t), ADMISSION_OK,
		  "root is not charged");
	/* 100 ms overdrawn come back at 20 ms a second: 5 s later */
	t += 4 * SEC;
	ASSERT_EQ(admission_may_look(&ad, user(1000), t), ADMISSION_TOO_DEAR,
		  "not after 4 s");
	t += 2 * SEC;
	ASSERT_EQ(admission_may_look(&ad, user(1000), t), ADMISSION_OK,
		  "after 6 s");
}

TEST(more_users_than_buckets_reuse_the_stalest)
{
	struct admission ad = fresh();

	for (uid_t u = 1; u <= RC_MAX_TARGETS; u++)
		ASSERT_EQ(admission_may_look(&ad, user(u), T0 + u),
			  ADMISSION_OK, "each user once");
	/* uid 1's bucket (the stalest) goes to a newcomer, full */
	ASSERT_EQ(admission_may_look(&ad, user(5000), T0 + 1000), ADMISSION_OK,
		  "newcomer");
	for (int i = 0; i < RC_MAX_TARGETS; i++)
		ASSERT_FALSE(principal_eq(ad.budget[i].who, user(1)),
			     "uid 1 forgotten");
}

TEST(refusals_are_told_at_most_every_warn_period)
{
	struct admission ad = fresh();
	unsigned int k = ADMISSION_USER_FULL;

	ASSERT_TRUE(admission_may_warn(&ad, k, T0), "the first");
	ASSERT_FALSE(admission_may_warn(&ad, k, T0 + 1), "not again at once");
	ASSERT_FALSE(admission_may_warn(&ad, k, T0 + ADMISSION_WARN_NS - 1),
		     "nor within the period");
	ASSERT_TRUE(admission_may_warn(&ad, k, T0 + ADMISSION_WARN_NS),
		    "after");
	ASSERT_FALSE(admission_may_warn(&ad, ADMISSION_WARN_KINDS, T0),
		     "no kind past the last");
}

TEST(one_reason_told_often_does_not_hide_another)
{
	struct admission ad = fresh();

	ASSERT_TRUE(admission_may_warn(&ad, ADMISSION_TOO_FAST, T0),
		    "too fast");
	ASSERT_FALSE(admission_may_warn(&ad, ADMISSION_TOO_FAST, T0 + 1),
		     "too fast again");
	ASSERT_TRUE(admission_may_warn(&ad, ADMISSION_USER_FULL, T0 + 1),
		    "places full, in the same period");
	ASSERT_TRUE(admission_may_warn(&ad, ADMISSION_WARN_FDS, T0 + 2),
		    "descriptors, in the same period");
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

TEST(looks_refused_for_a_users_pace_bring_no_look_through_proc_forward)
{
	struct admission ad = fresh();
	uint64_t until;
	int n = 0;

	ad.uprobe = true;
	ASSERT_TRUE(admission_scan_due(&ad, T0, &until), "first look");
	ad.scan_from = 0;
	admission_scanned(&ad, T0);
	ASSERT_EQ(ad.next_scan_ns, T0 + ADMISSION_RESCAN_NS, "then rarely");
	while (admission_may_look(&ad, user(1000), T0 + SEC) == ADMISSION_OK)
		n++;
	ASSERT_EQ(n, (int)ADMISSION_UID_BURST, "a burst of looks");
	/* a flooding user would pull the look through every process of the
	 * machine forward, again and again */
	ASSERT_EQ(ad.next_scan_ns, T0 + ADMISSION_RESCAN_NS,
		  "the refusal brings nothing forward");
	ASSERT_EQ(ad.budget[0].deferred, 1, "counted as put off");
	ASSERT_EQ(ad.budget[0].looks, (uint64_t)ADMISSION_UID_BURST,
		  "and the looks");
}

TEST(a_look_through_proc_passes_by_a_principal_whose_time_is_spent)
{
	struct admission ad = fresh();

	ASSERT_TRUE(admission_may_scan(&ad, user(1000), T0), "at first");
	admission_charge(&ad, user(1000), 2 * ADMISSION_WORK_BURST, T0);
	ASSERT_FALSE(admission_may_scan(&ad, user(1000), T0), "spent");
	ASSERT_TRUE(admission_may_scan(&ad, user(1001), T0),
		    "another user's processes are looked through");
	ASSERT_TRUE(admission_may_scan(&ad, ROOT, T0), "and root's");
	/* 2 x the burst: paid back at the rate, then some */
	ASSERT_TRUE(admission_may_scan(&ad, user(1000),
				       T0 + (uint64_t)(1.01e9 *
						       ADMISSION_WORK_BURST /
						       ADMISSION_WORK_RATE)),
		    "its share back");
}

TEST(a_reported_page_is_pending_until_looked_at)
{
	struct admission ad = fresh();
	uint64_t wake = 0;

	ASSERT_FALSE(admission_is_pending(&ad, 42), "nothing reported");
	ASSERT_EQ(admission_report(&ad, 42, user(1000), 7, T0, &wake),
		  ADMISSION_OK, "reported");
	ASSERT_TRUE(admission_is_pending(&ad, 42), "pending");
	ASSERT_FALSE(admission_is_pending(&ad, 43), "another is not");
	admission_looked(&ad, 42);
	ASSERT_FALSE(admission_is_pending(&ad, 42), "looked at");
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
	uint64_t wake = 0;

	ASSERT_EQ(admission_report(&ad, 100, user(1000), 0, T0, &wake),
		  ADMISSION_OK, "pending");
	ASSERT_EQ(wake, T0 + ADMISSION_PEND_FIRST_NS, "look again soon");
	ASSERT_EQ(admission_report(&ad, 100, user(1000), 0, T0 + 1, &wake),
		  ADMISSION_PENDING, "pending already");
	ASSERT_EQ(admission_report(&ad, 101, user(1000), 0, T0 + SEC, &wake),
		  ADMISSION_OK, "another");
	ASSERT_EQ(wake, T0 + SEC + ADMISSION_PEND_FIRST_NS, "its look");
	ASSERT_EQ(admission_pending(&ad, T0 + 10 * MS, pids, RC_MAX_TARGETS), 1,
		  "the first only is due");
	ASSERT_EQ(pids[0], 100, "the first");
	ASSERT_EQ(admission_pending(&ad, T0 + SEC + 10 * MS, pids,
				    RC_MAX_TARGETS),
		  2, "both");
	ASSERT_EQ(pids[0], 100, "the one due earliest first");
	admission_settled(&ad, 101);
	ASSERT_EQ(admission_pending(&ad, T0 + 10 * MS + ADMISSION_PEND_NS, pids,
				    RC_MAX_TARGETS),
		  0, "given up PEND_NS after its first look");
}

TEST(a_page_reported_after_an_exec_is_looked_for_longer)
{
	struct admission ad = fresh();
	pid_t pids[RC_MAX_TARGETS];
	uint64_t wake = 0, page = T0 + ADMISSION_PEND_NS - 10 * MS;

	/* the exec, then the new image's page just before the look ends */
	ASSERT_EQ(admission_report(&ad, 100, ROOT, 0, T0, &wake), ADMISSION_OK,
		  "exec");
	ASSERT_EQ(admission_pending(&ad, T0 + 10 * MS, pids, RC_MAX_TARGETS), 1,
		  "looked at");
	ASSERT_EQ(admission_report(&ad, 100, ROOT, 7, page, &wake),
		  ADMISSION_PENDING, "its page");
	ASSERT_TRUE(wake <= page + ADMISSION_PEND_FIRST_NS, "looked at soon");
	ASSERT_EQ(admission_probe(&ad, 100), 7, "the page's probe");
	ASSERT_EQ(admission_pending(&ad, page + ADMISSION_PEND_NS - MS, pids,
				    RC_MAX_TARGETS),
		  1, "still looked for after the first report's end");
	/* reported on and on, looked at each time: never past
	 * ADMISSION_PEND_MAX_NS */
	for (uint64_t t = page; t < T0 + 3 * ADMISSION_PEND_MAX_NS;
	     t += 100 * MS) {
		admission_report(&ad, 100, ROOT, 7, t, &wake);
		admission_pending(&ad, t + ADMISSION_PEND_FIRST_NS, pids,
				  RC_MAX_TARGETS);
	}
	ASSERT_TRUE(admission_is_pending(&ad, 100), "pending anew");
	ASSERT_EQ(admission_pending(&ad,
				    T0 + 3 * ADMISSION_PEND_MAX_NS +
					    ADMISSION_PEND_MAX_NS,
				    pids, RC_MAX_TARGETS),
		  0, "given up within PEND_MAX_NS of its last report anew");
}

TEST(a_spent_users_report_waits_for_its_share_and_is_never_let_go_unseen)
{
	struct admission ad = fresh();
	pid_t pids[RC_MAX_TARGETS];
	uint64_t wake, back;

	ASSERT_EQ(admission_report(&ad, 100, user(1000), 0, T0, &wake),
		  ADMISSION_OK, "first");
	admission_charge(&ad, user(1000), 10 * ADMISSION_WORK_BURST, T0);
	ASSERT_EQ(admission_pending(&ad, T0 + ADMISSION_PEND_NS, pids,
				    RC_MAX_TARGETS),
		  0, "not looked at while its share is spent");
	ASSERT_TRUE(admission_is_pending(&ad, 100), "nor let go");
	back = T0 +
	       (uint64_t)(1e9 * 9 * ADMISSION_WORK_BURST / ADMISSION_WORK_RATE);
	ASSERT_EQ(admission_pending(&ad, back - SEC, pids, RC_MAX_TARGETS), 0,
		  "still spent");
	ASSERT_EQ(admission_pending(&ad, back + SEC, pids, RC_MAX_TARGETS), 1,
		  "looked at once its share is back");
	ASSERT_EQ(pids[0], 100, "the report");
}

TEST(principals_with_reports_due_take_turns)
{
	struct admission ad = fresh();
	pid_t pids[RC_MAX_TARGETS];
	uint64_t wake;
	int n;

	for (int i = 0; i < ADMISSION_PEND_PER_PRINCIPAL; i++)
		admission_report(&ad, 100 + i, user(1000), 0, T0, &wake);
	ASSERT_EQ(admission_pending(&ad, T0 + 10 * MS, pids, 2), 2,
		  "the flood's first two");
	/* a quiet user's report, due after all of the flood's */
	admission_report(&ad, 500, user(2000), 0, T0 + 20 * MS, &wake);
	ASSERT_EQ(admission_pending(&ad, T0 + 30 * MS, pids, 1), 1, "a turn");
	ASSERT_EQ(pids[0], 500, "the quiet user's, ahead of the flood's");
	/* then they alternate: every report of the flood is due again */
	admission_report(&ad, 501, user(2000), 0, T0 + 31 * MS, &wake);
	n = admission_pending(&ad, T0 + 200 * MS, pids, 4);
	ASSERT_EQ(n, 4, "four looks");
	ASSERT_EQ(pids[0] >= 100 && pids[0] < 200, true, "the flood's turn");
	ASSERT_EQ(pids[1] >= 500, true, "then the quiet one's");
}

TEST(a_report_again_while_pending_costs_nothing)
{
	struct admission ad = fresh();
	uint64_t wake;

	ASSERT_EQ(admission_report(&ad, 100, user(1000), 0, T0, &wake),
		  ADMISSION_OK, "first");
	for (int i = 0; i < 1000; i++)
		ASSERT_EQ(admission_report(&ad, 100, user(1000), 0, T0, &wake),
			  ADMISSION_PENDING, "again");
	for (int i = 1; i < ADMISSION_PEND_PER_PRINCIPAL; i++)
		ASSERT_EQ(admission_report(&ad, 100 + i, user(1000), 0, T0,
					   &wake),
			  ADMISSION_OK, "others of the same user");
}

TEST(a_report_looked_at_leaves_the_pending_list_not_the_waiting_one)
{
	struct admission ad = fresh();
	pid_t pids[RC_MAX_TARGETS];
	uint64_t wake;

	admission_report(&ad, 100, ROOT, 0, T0, &wake);
	/* looked at: every place was taken, so it waits for one */
	ASSERT_TRUE(admission_wait(&ad, 100), "waits");
	admission_looked(&ad, 100);
	ASSERT_EQ(admission_pending(&ad, T0 + SEC, pids, RC_MAX_TARGETS), 0,
		  "no longer pending");
	ASSERT_EQ(admission_next_waiting(&ad), 100, "still waiting");
}

TEST(a_principal_has_at_most_a_few_reports_waiting)
{
	struct admission ad = fresh();
	uint64_t wake;
	pid_t pid = 100;

	for (int i = 0; i < ADMISSION_PEND_PER_PRINCIPAL; i++)
		ASSERT_EQ(admission_report(&ad, pid++, user(1000), 0, T0,
					   &wake),
			  ADMISSION_OK, "waits");
	ASSERT_EQ(admission_report(&ad, pid++, user(1000), 0, T0, &wake),
		  ADMISSION_QUEUE_FULL, "one more does not");
	ASSERT_EQ(admission_report(&ad, pid++, user(1001), 0, T0, &wake),
		  ADMISSION_OK, "another user's does");
	ASSERT_EQ(admission_report(&ad, pid++, ROOT, 0, T0, &wake),
		  ADMISSION_OK, "root's does");
}

TEST(reports_past_the_rate_wait_in_their_users_queue)
{
	struct admission ad = fresh();
	pid_t pids[RC_MAX_TARGETS];
	uint64_t wake;
	int looked = 0, n;

	/* a flood of one user's processes, each reported once, each looked
	 * at as soon as it may be */
	for (int i = 0; i < 1000; i++) {
		admission_report(&ad, 100 + i, user(1000), 0, T0, &wake);
		n = admission_pending(&ad, T0 + ADMISSION_PEND_FIRST_NS, pids,
				      RC_MAX_TARGETS);
		looked += n;
		for (int k = 0; k < n; k++)
			admission_settled(&ad, pids[k]);
	}
	ASSERT_EQ(looked, (int)ADMISSION_UID_BURST, "a burst is looked at");
	ASSERT_EQ(ad.npend, ADMISSION_PEND_PER_PRINCIPAL, "a queue waits");
	n = admission_pending(&ad, T0 + ADMISSION_PEND_FIRST_NS + SEC, pids,
			      RC_MAX_TARGETS);
	ASSERT_EQ(n, (int)ADMISSION_UID_RATE, "then at the rate");
}

TEST(a_full_pending_list_forgets_the_oldest_of_the_most_waiting)
{
	struct admission ad = fresh();
	pid_t pids[RC_MAX_TARGETS];
	uint64_t wake;
	int i;

	/* the oldest report is uid 1000's; then uid 2000 has 16 waiting,
	 * 47 other users one each */
	admission_report(&ad, 100, user(1000), 0, T0, &wake);
	for (i = 1; i <= ADMISSION_PEND_PER_PRINCIPAL; i++)
		admission_report(&ad, 100 + i, user(2000), 0, T0 + (uint64_t)i,
				 &wake);
	for (; i < RC_MAX_TARGETS; i++)
		admission_report(&ad, 100 + i, user(3000 + i), 0,
				 T0 + (uint64_t)i, &wake);
	ASSERT_EQ(admission_report(&ad, 100 + i, user(5000), 0, T0 + 100,
				   &wake),
		  ADMISSION_OK, "one more");
	ASSERT_EQ(admission_pending(&ad, T0 + SEC, pids, RC_MAX_TARGETS),
		  RC_MAX_TARGETS, "full");
	ASSERT_EQ(pids[0], 100, "the oldest report, uid 1000's, stays");
	for (int k = 0; k < RC_MAX_TARGETS; k++)
		ASSERT_NEQ(pids[k], 101, "uid 2000's oldest went");
}

TEST(a_turn_looks_at_a_few_and_the_rest_wait_their_turn)
{
	struct admission ad = fresh();
	pid_t pids[RC_MAX_TARGETS], seen[40] = { 0 };
	uint64_t wake, t = T0 + 10 * MS;
	int n;

	for (int i = 0; i < 40; i++)
		admission_report(&ad, 100 + i, ROOT, 0, T0, &wake);
	for (int turn = 0; turn < 5; turn++) {
		n = admission_pending(&ad, t, pids, ADMISSION_LOOKS_PER_TURN);
		ASSERT_EQ(n, ADMISSION_LOOKS_PER_TURN, "a few a turn");
		for (int i = 0; i < n; i++)
			seen[pids[i] - 100]++;
	}
	for (int i = 0; i < 40; i++)
		ASSERT_EQ(seen[i], 1, "each once in five turns");
	ASSERT_EQ(admission_pending(&ad, t, pids, RC_MAX_TARGETS), 0,
		  "then not again until the retry");
	ASSERT_EQ(admission_pending(&ad, t + ADMISSION_PEND_RETRY_NS, pids,
				    RC_MAX_TARGETS),
		  40, "all at the retry");
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
	uint64_t until, wake;

	ad.uprobe = true;
	admission_scan_due(&ad, T0, &until);
	admission_scanned(&ad, T0);
	ASSERT_EQ(admission_wakes(&ad, T0, d), 1, "the next look only");
	ASSERT_EQ(d[0].at, T0 + ADMISSION_RESCAN_NS, "at");
	ASSERT_EQ(d[0].slack, CADENCE_SLACK_NS, "with slack");
	ad.scan_from = 77;
	admission_scanned(&ad, T0);
	admission_report(&ad, 100, ROOT, 0, T0, &wake);
	ASSERT_EQ(admission_wakes(&ad, T0, d), 2, "slice and pending");
	ASSERT_EQ(d[0].at, T0 + ADMISSION_SCAN_GAP_NS, "the next slice");
	ASSERT_EQ(d[0].slack, 0, "on time");
	ASSERT_EQ(d[1].at, T0 + ADMISSION_PEND_FIRST_NS, "pending");
}

TEST_MAIN()
