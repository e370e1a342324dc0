// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A function's file offset in an untrusted ELF file; see elfsym.h. */
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel/elfsym.h"

#define SYMS_AT_ONCE 512

/* @off + @len within @size, without overflow. */
static bool within(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

static int read_ehdr(elfsym_read_fn rd, void *ctx, uint64_t size,
		     Elf64_Ehdr *eh)
{
	int err;

	if (size > ELFSYM_MAX_FILE)
		return -EFBIG;
	if (size < sizeof(*eh))
		return -ENOEXEC;
	err = rd(ctx, eh, sizeof(*eh), 0);
	if (err)
		return err;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	    eh->e_ident[EI_DATA] != ELFDATA2LSB ||
#else
	    eh->e_ident[EI_DATA] != ELFDATA2MSB ||
#endif
	    eh->e_shentsize != sizeof(Elf64_Shdr) || !eh->e_shnum ||
	    eh->e_shnum > ELFSYM_MAX_SECTIONS ||
	    !within(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr),
		    size))
		return -ENOEXEC;
	return 0;
}

struct table {
	const Elf64_Shdr *sh; /* every section header */
	unsigned int nsh;
	uint64_t size; /* of the file */
	char *str;     /* the symbols' strings, NUL-terminated */
	uint64_t nstr;
};

/* The string table of symbol section @s, read whole into @t->str. */
static int read_strings(elfsym_read_fn rd, void *ctx, const Elf64_Shdr *s,
			struct table *t)
{
	const Elf64_Shdr *st;
	int err;

	if (s->sh_link >= t->nsh)
		return -ENOEXEC;
	st = &t->sh[s->sh_link];
	if (st->sh_type != SHT_STRTAB ||
	    !within(st->sh_offset, st->sh_size, t->size))
		return -ENOEXEC;
	if (st->sh_size > ELFSYM_MAX_STRTAB)
		return -EFBIG;
	t->str = malloc(st->sh_size + 1);
	if (!t->str)
		return -ENOMEM;
	err = rd(ctx, t->str, st->sh_size, st->sh_offset);
	t->str[st->sh_size] = '\0';
	t->nstr = st->sh_size;
	return err;
}

/*
 * The file offset of @sym if it is the function @name: 1 for a global
 * symbol, 2 for a weak one, 0 if not it, -ENOEXEC if it is but points
 * nowhere in the file.
 */
static int match(const struct table *t, const Elf64_Sym *sym, const char *name,
		 uint64_t *off)
{
	const Elf64_Shdr *sec;

	if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC || !sym->st_value ||
	    sym->st_name >= t->nstr || strcmp(t->str + sym->st_name, name))
		return 0;
	if (sym->st_shndx == SHN_UNDEF || sym->st_shndx >= t->nsh)
		return 0;
	sec = &t->sh[sym->st_shndx];
	if (sym->st_value < sec->sh_addr ||
	    sym->st_value - sec->sh_addr >= sec->sh_size)
		return -ENOEXEC;
	/* as uprobes want it: the address made a file offset */
	*off = sym->st_value - sec->sh_addr + sec->sh_offset;
	if (*off >= t->size)
		return -ENOEXEC;
	return ELF64_ST_BIND(sym->st_info) == STB_WEAK ? 2 : 1;
}

/* Look for @name in symbol section @s. */
static int search(elfsym_read_fn rd, void *ctx, const Elf64_Shdr *s,
		  struct table *t, const char *name, uint64_t *off)
{
	Elf64_Sym syms[SYMS_AT_ONCE];
	uint64_t n, weak = 0;
	bool has_weak = false;
	int err;

	if (s->sh_entsize != sizeof(Elf64_Sym) ||
	    !within(s->sh_offset, s->sh_size, t->size))
		return -ENOEXEC;
	n = s->sh_size / sizeof(Elf64_Sym);
	if (n > ELFSYM_MAX_SYMS)
		return -EFBIG;
	err = read_strings(rd, ctx, s, t);
	for (uint64_t i = 0; !err && i < n; i += SYMS_AT_ONCE) {
		uint64_t k = n - i < SYMS_AT_ONCE ? n - i : SYMS_AT_ONCE;

		err = rd(ctx, syms, k * sizeof(*syms),
			 s->sh_offset + i * sizeof(*syms));
		for (uint64_t j = 0; !err && j < k; j++) {
			int m = match(t, &syms[j], name, off);

			if (m == 1)
				goto out;
			if (m < 0)
				err = m;
			if (m == 2 && !has_weak) {
				has_weak = true;
				weak = *off;
			}
		}
	}
	if (!err && has_weak)
		*off = weak;
	else if (!err)
		err = -ENOENT;
out:
	free(t->str);
	t->str = NULL;
	return err;
}

int elfsym_func_offset(elfsym_read_fn rd, void *ctx, uint64_t size,
		       const char *name, uint64_t *off)
{
	static const Elf64_Word kinds[] = { SHT_DYNSYM, SHT_SYMTAB };
	Elf64_Shdr sh[ELFSYM_MAX_SECTIONS];
	struct table t = { .sh = sh, .size = size };
	int err, last = -ENOENT;
	Elf64_Ehdr eh;

	err = read_ehdr(rd, ctx, size, &eh);
	if (!err)
		err = rd(ctx, sh, eh.e_shnum * sizeof(*sh), eh.e_shoff);
	if (err)
		return err;
	t.nsh = eh.e_shnum;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		for (unsigned int i = 0; i < t.nsh; i++) {
			if (sh[i].sh_type != kinds[k])
				continue;
			err = search(rd, ctx, &sh[i], &t, name, off);
			if (!err)
				return 0;
			/* a bad table is reported over a missing name */
			if (last == -ENOENT)
				last = err;
			break; /* one table of each kind */
		}
	return last;
}

static int read_fd(void *ctx, void *buf, size_t len, uint64_t off)
{
	int fd = *(int *)ctx;
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			return -ENOEXEC; /* shorter than it said */
		done += (size_t)n;
	}
	return 0;
}

int elfsym_func_offset_fd(int fd, const char *name, uint64_t *off)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ENOEXEC;
	return elfsym_func_offset(read_fd, &fd, (uint64_t)st.st_size, name,
				  off);
}
