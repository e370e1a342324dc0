// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * rc_samples: the last RC_SAMPLES_LEN samples, oldest first, in time order
 * even when a stamp trails the newest.
 */
#include "core/samples.h"
#include "test.h"

TEST(samples_come_back_oldest_first)
{
	static struct rc_samples r;
	struct rc_sample out[RC_SAMPLES_LEN];

	ASSERT_EQ(samples_copy(&r, out), 0, "empty");
	samples_push(&r, 10, 1);
	samples_push(&r, 20, 2);
	ASSERT_EQ(samples_copy(&r, out), 2, "two");
	ASSERT_EQ(out[0].t_ns, 10, "oldest first");
	ASSERT_EQ(out[1].bytes, 2, "newest last");
}

TEST(a_trailing_stamp_takes_the_newest_time)
{
	static struct rc_samples r;
	struct rc_sample out[RC_SAMPLES_LEN];

	samples_push(&r, 100, 1);
	samples_push(&r, 90, 2); /* a BPF stamp behind a file read */
	ASSERT_EQ(samples_copy(&r, out), 2, "both kept");
	ASSERT_EQ(out[1].t_ns, 100, "no step back in time");
	ASSERT_EQ(out[1].bytes, 2, "the figure kept");
}

TEST(the_oldest_makes_way)
{
	static struct rc_samples r;
	struct rc_sample out[RC_SAMPLES_LEN];
	unsigned int n;

	for (unsigned int i = 0; i < RC_SAMPLES_LEN + 5; i++)
		samples_push(&r, i, i);
	n = samples_copy(&r, out);
	ASSERT_EQ(n, RC_SAMPLES_LEN, "full");
	ASSERT_EQ(out[0].t_ns, 5, "the first five gone");
	ASSERT_EQ(out[n - 1].t_ns, RC_SAMPLES_LEN + 4, "the newest last");
	for (unsigned int i = 1; i < n; i++)
		ASSERT_TRUE(out[i].t_ns > out[i - 1].t_ns, "in order");
}

TEST_MAIN()
