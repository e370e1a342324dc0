// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where the demo's words go: human lines on stdout, or with --json, JSON
 * lines on stdout and the human lines on stderr. Errors always on stderr.
 */
#include <stdarg.h>
#include <stdio.h>

#include "demo.h"

static bool json_mode;

void report_init(bool json)
{
	json_mode = json;
	setvbuf(stdout, NULL, _IOLBF, 0);
}

bool report_json(void)
{
	return json_mode;
}

void report_msg(const char *fmt, ...)
{
	FILE *f = json_mode ? stderr : stdout;
	va_list ap;

	fputs("demo: ", f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
}

void report_err(const char *fmt, ...)
{
	va_list ap;

	fputs("ramcache-demo: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A JSON string on stdout; labels are ours, but escape anyway. */
void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = *s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}
