/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One sanitiser for every string of outside origin printed in text mode
 * (process names, cgroup paths, control page paths, entry labels): whoever
 * named the process or wrote the label must not be able to move the
 * operator's cursor, retitle the terminal or hide text. JSON output has its
 * own escaping (json.c) and does not use this.
 */
#ifndef RAMCACHE_SANITIZE_H
#define RAMCACHE_SANITIZE_H

#include <stddef.h>

/*
 * Copy at most @srclen bytes of @src (up to its first NUL) to @dst, a
 * buffer of @dstlen bytes, always NUL-terminated. Valid UTF-8 is kept as
 * it is; C0 controls, DEL, C1 controls (raw 0x80-0x9f and U+0080-U+009F),
 * bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069), and
 * every byte that is not part of valid UTF-8 are written as \xHH per byte;
 * a backslash is written as \\ so the escapes cannot be forged. Output is
 * cut only between whole characters or whole escapes. Returns the length
 * written (strlen(dst)).
 */
size_t sanitize_text(char *dst, size_t dstlen, const char *src, size_t srclen);

/* Room for a sanitised copy of @n bytes (4 output bytes per input byte). */
#define TEXT_SANITIZED_LEN(n) (4 * (n) + 1)

#endif /* RAMCACHE_SANITIZE_H */
