/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A small test harness in the spirit of the kernel's test_progs.h: each
 * TEST() is one case, ASSERT_* macros report and return false on failure,
 * and the output is TAP ("ok N - name" / "not ok N - name") for tests/run.py.
 */
#ifndef RAMCACHE_TEST_H
#define RAMCACHE_TEST_H

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct test_case {
	const char *name;
	void (*fn)(void);
};

extern int test_failed_now;
extern const char *test_skip_reason;

#define TEST(name)                                                    \
	static void test_##name(void);                                \
	static struct test_case tc_##name                             \
		__attribute__((used, section("rc_tests"),             \
			       aligned(8))) = { #name, test_##name }; \
	static void test_##name(void)

#define FAIL_AT(fmt, ...)                                                 \
	do {                                                              \
		fprintf(stdout, "# %s:%d: " fmt "\n", __FILE__, __LINE__, \
			##__VA_ARGS__);                                   \
		test_failed_now = 1;                                      \
	} while (0)

#define ASSERT_TRUE(c, what)                                        \
	({                                                          \
		bool ok_ = !!(c);                                   \
		if (!ok_)                                           \
			FAIL_AT("%s: expected true: %s", what, #c); \
		ok_;                                                \
	})
#define ASSERT_FALSE(c, what) ASSERT_TRUE(!(c), what)

#define ASSERT_EQ(a, b, what)                                                  \
	({                                                                     \
		long long a_ = (long long)(a), b_ = (long long)(b);            \
		bool ok_ = a_ == b_;                                           \
		if (!ok_)                                                      \
			FAIL_AT("%s: %s == %lld, expected %lld", what, #a, a_, \
				b_);                                           \
		ok_;                                                           \
	})
#define ASSERT_NEQ(a, b, what)                                              \
	({                                                                  \
		long long a_ = (long long)(a), b_ = (long long)(b);         \
		bool ok_ = a_ != b_;                                        \
		if (!ok_)                                                   \
			FAIL_AT("%s: %s == %lld, expected otherwise", what, \
				#a, a_);                                    \
		ok_;                                                        \
	})
#define ASSERT_GE(a, b, what)                                                 \
	({                                                                    \
		long long a_ = (long long)(a), b_ = (long long)(b);           \
		bool ok_ = a_ >= b_;                                          \
		if (!ok_)                                                     \
			FAIL_AT("%s: %s == %lld, expected >= %lld", what, #a, \
				a_, b_);                                      \
		ok_;                                                          \
	})
#define ASSERT_LE(a, b, what)                                                 \
	({                                                                    \
		long long a_ = (long long)(a), b_ = (long long)(b);           \
		bool ok_ = a_ <= b_;                                          \
		if (!ok_)                                                     \
			FAIL_AT("%s: %s == %lld, expected <= %lld", what, #a, \
				a_, b_);                                      \
		ok_;                                                          \
	})
#define ASSERT_OK(r, what) ASSERT_EQ(r, 0, what)
#define ASSERT_OK_PTR(p, what)                                                 \
	({                                                                     \
		bool ok_ = (p) != NULL;                                        \
		if (!ok_)                                                      \
			FAIL_AT("%s: %s is NULL (errno %d)", what, #p, errno); \
		ok_;                                                           \
	})
#define ASSERT_STREQ(a, b, what)                                               \
	({                                                                     \
		const char *a_ = (a), *b_ = (b);                               \
		bool ok_ = a_ && b_ && strcmp(a_, b_) == 0;                    \
		if (!ok_)                                                      \
			FAIL_AT("%s: %s == \"%s\", expected \"%s\"", what, #a, \
				a_ ? a_ : "(null)", b_ ? b_ : "(null)");       \
		ok_;                                                           \
	})

/* The repository root: tests/run.py sets RAMCACHE_ROOT and runs us there. */
static inline const char *test_root(void)
{
	const char *root = getenv("RAMCACHE_ROOT");

	return root ? root : ".";
}

/* Path of @rel under tests/fixtures; the last four results stay valid. */
static inline const char *fixture(const char *rel)
{
	static char buf[4][4096];
	static int slot;

	slot = (slot + 1) % 4;
	snprintf(buf[slot], sizeof(buf[slot]), "%s/tests/fixtures/%s",
		 test_root(), rel);
	return buf[slot];
}

/* Write @text into @dir/@rel (a scratch copy of a fixture). */
static inline void test_put(const char *dir, const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stdout, "# cannot write %s\n", path);
		test_failed_now = 1;
		return;
	}
	fputs(text, f);
	fclose(f);
}

/*
 * A scratch directory in /tmp (@tag names it) holding copies of the
 * fixtures @rels (a space-separated list) into @dir; false on failure.
 * test_scratch_gone() removes it.
 */
static inline bool test_scratch(char *dir, size_t len, const char *tag,
				const char *rels)
{
	char cmd[1024], one[256];
	const char *p = rels;
	int n = 0;

	snprintf(dir, len, "/tmp/ramcache-test-%s-XXXXXX", tag);
	if (!mkdtemp(dir))
		return false;
	n = snprintf(cmd, sizeof(cmd), "cp -r");
	while (*p) {
		size_t w = strcspn(p, " ");

		snprintf(one, sizeof(one), "%.*s", (int)w, p);
		n += snprintf(cmd + n, sizeof(cmd) - n, " %s", fixture(one));
		p += w;
		p += *p == ' ';
	}
	snprintf(cmd + n, sizeof(cmd) - n, " %s", dir);
	return system(cmd) == 0;
}

static inline void test_scratch_gone(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (dir[0] && system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
}

/* Mark the running case skipped (e.g. needs root); return after it. */
#define TEST_SKIP(reason) (test_skip_reason = (reason))

/* One per test binary: runs every TEST() in the order the linker kept. */
#define TEST_MAIN()                                                          \
	int test_failed_now;                                                 \
	const char *test_skip_reason;                                        \
	extern struct test_case __start_rc_tests[], __stop_rc_tests[];       \
	int main(int argc, char **argv)                                      \
	{                                                                    \
		int n = 0, failed = 0;                                       \
		for (struct test_case *t = __start_rc_tests;                 \
		     t < __stop_rc_tests; t++) {                             \
			if (argc > 1 && !strstr(t->name, argv[1]))           \
				continue;                                    \
			test_failed_now = 0;                                 \
			test_skip_reason = NULL;                             \
			t->fn();                                             \
			n++;                                                 \
			if (test_skip_reason && !test_failed_now)            \
				printf("ok %d - %s # SKIP %s\n", n, t->name, \
				       test_skip_reason);                    \
			else if (test_failed_now)                            \
				printf("not ok %d - %s\n", n, t->name);      \
			else                                                 \
				printf("ok %d - %s\n", n, t->name);          \
			fflush(stdout);                                      \
			failed += test_failed_now;                           \
		}                                                            \
		printf("1..%d\n", n);                                        \
		return failed ? 1 : 0;                                       \
	}

#endif /* RAMCACHE_TEST_H */
