// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Sizes and durations as the flags spell them; see units.h. No I/O here. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "core/units.h"

/*
 * Decimal "I[.F]" then a unit; value = (I + F) x mult / div, exactly,
 * in 128-bit integers. *rest points past the digits.
 */
static int parse_decimal(const char *s, const char **rest,
			 unsigned __int128 *num, unsigned __int128 *den)
{
	unsigned __int128 n = 0, d = 1;
	bool digits = false;

	for (; *s >= '0' && *s <= '9'; s++) {
		n = n * 10 + (*s - '0');
		if (n > UINT64_MAX)
			return -ERANGE;
		digits = true;
	}
	if (*s == '.') {
		s++;
		for (; *s >= '0' && *s <= '9'; s++) {
			/* Digits beyond 18 decimals cannot matter here. */
			if (d < 1000000000000000000ULL) {
				n = n * 10 + (*s - '0');
				d *= 10;
			}
			digits = true;
		}
	}
	if (!digits)
		return -EINVAL;
	*rest = s;
	*num = n;
	*den = d;
	return 0;
}

static int finish(unsigned __int128 num, unsigned __int128 den,
		  unsigned __int128 mult, unsigned __int128 div, uint64_t *out)
{
	unsigned __int128 v;

	/* num < 10^38 would overflow with mult; num <= 2^64 x 10^18. */
	if (num > ((unsigned __int128)1 << 127) / (mult ? mult : 1))
		return -ERANGE;
	v = num * mult / (den * div);
	if (v > UINT64_MAX)
		return -ERANGE;
	*out = (uint64_t)v;
	return 0;
}

/* parse_decimal() with the arguments of the public parsers checked. */
static int parse_number(const char *s, const uint64_t *out, const char **rest,
			unsigned __int128 *num, unsigned __int128 *den)
{
	if (!s || !out)
		return -EINVAL;
	return parse_decimal(s, rest, num, den);
}

int units_parse_size(const char *s, uint64_t total, uint64_t *out)
{
	static const char units[] = "KMGTP";
	unsigned __int128 num, den, mult = 1;
	const char *p, *u;
	int err;

	err = parse_number(s, out, &p, &num, &den);
	if (err)
		return err;
	if (p[0] == '%' && !p[1]) {
		if (!total)
			return -EINVAL;
		return finish(num, den, total, 100, out);
	}
	/* ' ' & ~0x20 is NUL, which strchr finds at the end of units */
	if (*p && *p != ' ' && (u = strchr(units, *p & ~0x20))) {
		mult = (unsigned __int128)1 << (10 * (u - units + 1));
		p++;
		if ((p[0] == 'i' || p[0] == 'I') &&
		    (p[1] == 'B' || p[1] == 'b'))
			p += 2;
		else if (p[0] == 'B' || p[0] == 'b')
			p++;
	} else if (p[0] == 'B' || p[0] == 'b') {
		p++;
	}
	if (*p)
		return -EINVAL;
	return finish(num, den, mult, 1, out);
}

int units_parse_duration(const char *s, uint64_t *out_ns)
{
	static const struct {
		const char *suffix;
		uint64_t ns;
	} units[] = {
		{ "ns", 1ULL },
		{ "us", 1000ULL },
		{ "ms", 1000000ULL },
		{ "s", 1000000000ULL },
		{ "", 1000000000ULL },
		{ "m", 60000000000ULL },
		{ "min", 60000000000ULL },
	};
	unsigned __int128 num, den;
	const char *p;
	size_t i;
	int err;

	err = parse_number(s, out_ns, &p, &num, &den);
	if (err)
		return err;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(p, units[i].suffix))
			return finish(num, den, units[i].ns, 1, out_ns);
	return -EINVAL;
}
