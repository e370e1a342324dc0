// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "emit/sanitize.h"

/*
 * Length of the valid UTF-8 sequence at @s (at most @n bytes) and its code
 * point, or 0 if the bytes there are not valid UTF-8 (overlong forms,
 * surrogates and code points above U+10FFFF are invalid).
 */
static size_t utf8_len(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len;
	uint32_t c;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		c = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		c = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		c = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
	    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	*cp = c;
	return len;
}

/* Characters that change how a terminal shows what follows. */
static bool unsafe(uint32_t c)
{
	return c < 0x20 || (c >= 0x7f && c <= 0x9f) ||
	       (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

size_t sanitize_text(char *dst, size_t dstlen, const char *src, size_t srclen)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)src;
	size_t o = 0, i = 0;

	if (!dstlen)
		return 0;
	while (i < srclen && s[i]) {
		uint32_t cp = 0;
		size_t len = utf8_len(s + i, srclen - i, &cp);
		size_t end = i + len;

		/* stop at a NUL inside what looked like a sequence */
		if (len && memchr(s + i, 0, len))
			len = 0;
		if (len && !unsafe(cp) && cp != '\\') {
			if (o + len >= dstlen)
				break;
			memcpy(dst + o, s + i, len);
			o += len;
			i = end;
			continue;
		}
		if (cp == '\\' && len == 1) {
			if (o + 2 >= dstlen)
				break;
			dst[o++] = '\\';
			dst[o++] = '\\';
			i++;
			continue;
		}
		/* escape the whole character, or the one invalid byte */
		if (!len)
			len = 1;
		if (o + 4 * len >= dstlen)
			break;
		for (size_t k = 0; k < len; k++, i++) {
			dst[o++] = '\\';
			dst[o++] = 'x';
			dst[o++] = hex[s[i] >> 4];
			dst[o++] = hex[s[i] & 0xf];
		}
	}
	dst[o] = '\0';
	return o;
}
