// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The text-mode sanitiser: what a hostile comm, label or path becomes. */
#include "emit/sanitize.h"
#include "test.h"

static const char *san(const char *s, size_t n)
{
	static char buf[512];

	sanitize_text(buf, sizeof(buf), s, n);
	return buf;
}

#define S(lit) san(lit, sizeof(lit) - 1)

TEST(plain_ascii_is_kept)
{
	ASSERT_STREQ(S("python3 main.py"), "python3 main.py", "ascii");
	ASSERT_STREQ(S(""), "", "empty");
}

TEST(valid_utf8_is_kept)
{
	ASSERT_STREQ(S("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"),
		     "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80",
		     "utf8");
}

TEST(c0_controls_and_del_are_escaped)
{
	ASSERT_STREQ(S("a\x1b[2Jb"), "a\\x1b[2Jb", "ESC");
	ASSERT_STREQ(S("\x07\x08\t\n\r\x7f"), "\\x07\\x08\\x09\\x0a\\x0d\\x7f",
		     "BEL BS TAB LF CR DEL");
	ASSERT_STREQ(S("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07", "OSC title");
}

TEST(c1_controls_are_escaped_raw_and_as_utf8)
{
	/* 0x9b alone is CSI on 8-bit terminals; c2 9b is U+009B CSI */
	ASSERT_STREQ(S("x\x9b"
		       "2Jy"),
		     "x\\x9b2Jy", "raw CSI");
	ASSERT_STREQ(S("x\xc2\x9b"
		       "2Jy"),
		     "x\\xc2\\x9b2Jy", "U+009B");
	ASSERT_STREQ(S("\xc2\x85"), "\\xc2\\x85", "U+0085 NEL");
	ASSERT_STREQ(S("\xc2\xa0"), "\xc2\xa0", "U+00A0 is printable");
}

TEST(bidi_overrides_are_escaped)
{
	ASSERT_STREQ(S("a\xe2\x80\xaez"), "a\\xe2\\x80\\xaez", "U+202E RLO");
	ASSERT_STREQ(S("a\xe2\x81\xa6z"), "a\\xe2\\x81\\xa6z", "U+2066 LRI");
}

TEST(invalid_utf8_is_escaped_byte_by_byte)
{
	ASSERT_STREQ(S("\xff\xfe"), "\\xff\\xfe", "not UTF-8 at all");
	ASSERT_STREQ(S("\xc3"), "\\xc3", "truncated sequence");
	ASSERT_STREQ(S("\xc3("), "\\xc3(", "bad continuation");
	ASSERT_STREQ(S("\xc0\xaf"), "\\xc0\\xaf", "overlong slash");
	ASSERT_STREQ(S("\xed\xa0\x80"), "\\xed\\xa0\\x80", "surrogate");
	ASSERT_STREQ(S("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80",
		     "above U+10FFFF");
}

TEST(backslash_is_doubled_so_escapes_cannot_be_forged)
{
	ASSERT_STREQ(S("a\\x1bb"), "a\\\\x1bb", "literal backslash");
}

TEST(stops_at_nul_and_at_srclen)
{
	ASSERT_STREQ(san("abc\0def", 7), "abc", "NUL");
	ASSERT_STREQ(san("abcdef", 3), "abc", "srclen");
	/* a comm of 16 bytes with no NUL, as BPF hands it over */
	ASSERT_STREQ(san("0123456789abcdefXYZ", 16), "0123456789abcdef",
		     "comm");
}

TEST(truncation_never_splits_a_character_or_an_escape)
{
	char buf[6];
	size_t n;

	n = sanitize_text(buf, sizeof(buf), "ab\x1b", 3);
	ASSERT_STREQ(buf, "ab", "escape does not fit");
	ASSERT_EQ(n, 2, "length");
	n = sanitize_text(buf, sizeof(buf), "abcd\xc3\xa9", 6);
	ASSERT_STREQ(buf, "abcd", "two-byte char does not fit");
	n = sanitize_text(buf, 1, "abc", 3);
	ASSERT_STREQ(buf, "", "room for the NUL only");
	ASSERT_EQ(sanitize_text(buf, 0, "abc", 3), 0, "no room at all");
}

TEST(worst_case_fits_the_documented_size)
{
	char src[16], dst[TEXT_SANITIZED_LEN(sizeof(src))];

	memset(src, 0x9b, sizeof(src));
	ASSERT_EQ(sanitize_text(dst, sizeof(dst), src, sizeof(src)),
		  4 * sizeof(src), "every byte escaped, none cut");
}

TEST(every_byte_pair_gives_printable_output)
{
	char src[2], dst[16];

	for (int a = 0; a < 256; a++)
		for (int b = 0; b < 256; b++) {
			src[0] = (char)a;
			src[1] = (char)b;
			sanitize_text(dst, sizeof(dst), src, 2);
			for (const unsigned char *p = (void *)dst; *p; p++)
				if (*p < 0x20 || *p == 0x7f ||
				    (*p >= 0x80 && *p <= 0x9f &&
				     p == (void *)dst)) {
					FAIL_AT("pair %02x %02x gave byte %02x",
						a, b, *p);
					return;
				}
		}
}

/* A field of tests/fixtures/sanitize.txt: \xHH a byte, \\ a backslash. */
static size_t unescape(char *dst, const char *src)
{
	size_t n = 0;

	while (*src) {
		unsigned int b;

		if (src[0] == '\\' && src[1] == 'x' &&
		    sscanf(src + 2, "%2x", &b) == 1) {
			dst[n++] = (char)b;
			src += 4;
		} else if (src[0] == '\\' && src[1] == '\\') {
			dst[n++] = '\\';
			src += 2;
		} else {
			dst[n++] = *src++;
		}
	}
	dst[n] = '\0';
	return n;
}

/* The vectors ramcache-top and ramcache-report's sanitiser is tested on. */
TEST(gives_what_the_shared_vectors_say)
{
	const char *root = getenv("RAMCACHE_ROOT");
	char path[4096], line[1024], src[512], want[512], got[2048];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/fixtures/sanitize.txt",
		 root ? root : ".");
	f = fopen(path, "re");
	if (!ASSERT_TRUE(f != NULL, path))
		return;
	while (fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t');
		size_t len;

		line[strcspn(line, "\n")] = '\0';
		if (!line[0] || line[0] == '#' || !tab)
			continue;
		*tab = '\0';
		len = unescape(src, line);
		unescape(want, tab + 1);
		sanitize_text(got, sizeof(got), src, len);
		if (strcmp(got, want)) {
			FAIL_AT("'%s': got '%s'", line, got);
			break;
		}
		n++;
	}
	fclose(f);
	ASSERT_GE(n, 30, "vectors read");
}

TEST_MAIN()
