// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Who answers for a process under --all's limits: a user with the
 * subordinate uids /etc/subuid gives them, the host's root, or a
 * container whose root is the host's.
 */
#include "core/principal.h"
#include "test.h"

static const char PASSWD[] = "root:x:0:0:root:/root:/bin/bash\n"
			     "alice:x:1000:1000::/home/alice:/bin/sh\n"
			     "bob:x:1001:1001::/home/bob:/bin/sh\n";

TEST(subuid_lines_by_name_and_by_uid)
{
	struct subuids t;

	ASSERT_EQ(subuids_parse(&t,
				"alice:100000:65536\n"
				"1001:165536:65536\n"
				"# a comment\n"
				"nobody-here:300000:10\n"
				"bob:bad:1\n"
				"bob:400000:0\n"
				"bob:4294967295:2\n"
				"bob:500000:10",
				PASSWD),
		  3, "three good lines");
	ASSERT_EQ(t.r[0].owner, 1000, "alice by name");
	ASSERT_EQ(t.r[1].owner, 1001, "bob by uid");
	ASSERT_EQ(t.r[2].start, 500000, "a last line without a newline");
	ASSERT_EQ(subuids_parse(&t, "alice:100000:65536\n", NULL), 0,
		  "names need passwd");
	ASSERT_EQ(subuids_parse(&t, NULL, PASSWD), 0, "no file");
}

TEST(a_subuid_counts_as_its_owner)
{
	struct subuids t;
	struct principal p;

	subuids_parse(&t, "alice:100000:65536\n", PASSWD);
	p = principal_of(&t, 100000, 0);
	ASSERT_TRUE(p.kind == PRINCIPAL_USER && p.id == 1000, "first");
	p = principal_of(&t, 165535, 4026532481ULL);
	ASSERT_TRUE(p.kind == PRINCIPAL_USER && p.id == 1000,
		    "last, in a container");
	p = principal_of(&t, 165536, 0);
	ASSERT_TRUE(p.kind == PRINCIPAL_USER && p.id == 165536,
		    "past the range: itself");
	p = principal_of(&t, 1000, 0);
	ASSERT_TRUE(p.kind == PRINCIPAL_USER && p.id == 1000, "alice");
}

TEST(root_of_a_container_is_the_container)
{
	struct subuids t = { .n = 0 };
	struct principal a = principal_of(&t, 0, 4026532481ULL);
	struct principal b = principal_of(&t, 0, 4026532999ULL);
	struct principal host = principal_of(&t, 0, 0);

	ASSERT_TRUE(a.kind == PRINCIPAL_CONTAINER && a.id == 4026532481ULL,
		    "container");
	ASSERT_FALSE(principal_eq(a, b), "two containers are two");
	ASSERT_TRUE(host.kind == PRINCIPAL_ROOT, "the host's root");
	ASSERT_TRUE(principal_of(&t, 1000, 4026532481ULL).kind ==
			    PRINCIPAL_USER,
		    "a user in a container is the user");
}

TEST_MAIN()
