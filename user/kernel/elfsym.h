/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where a function starts in an ELF file, found without libelf: the file
 * is an executor's libc, maybe crafted by whoever is root in its container,
 * and the agent reads it as root. Only the section headers, one symbol
 * table and its strings are read, each within a cap, so a file of any
 * shape costs at most ELFSYM_MAX_READ bytes and ELFSYM_MAX_SYMS symbols.
 */
#ifndef RAMCACHE_ELFSYM_H
#define RAMCACHE_ELFSYM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A libc is 1-3 MiB (glibc 2.36: 1.9 MiB, 3100 dynamic symbols). */
#define ELFSYM_MAX_FILE	    (64ULL << 20)
#define ELFSYM_MAX_SECTIONS 256
#define ELFSYM_MAX_SYMS	    (1U << 17)
#define ELFSYM_MAX_STRTAB   (4U << 20)

/* Reads @len bytes at @off of the file into @buf: 0, or -errno. */
typedef int (*elfsym_read_fn)(void *ctx, void *buf, size_t len, uint64_t off);

/*
 * The file offset of function @name (what a uprobe takes) in the 64-bit
 * little-endian ELF file of @size bytes read through @rd: from .dynsym, or
 * .symtab if .dynsym lacks it. Returns 0 with *@off set, -ENOENT if there
 * is no such function, -EFBIG if the file or a table is bigger than the
 * caps above, -ENOEXEC if it is no ELF file of that kind or is
 * inconsistent, or what @rd returned.
 */
int elfsym_func_offset(elfsym_read_fn rd, void *ctx, uint64_t size,
		       const char *name, uint64_t *off);

/* The same for the open file @fd (pread). */
int elfsym_func_offset_fd(int fd, const char *name, uint64_t *off);

#endif /* RAMCACHE_ELFSYM_H */
