// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The ELF reader the agent uses on executors' libc files, which whoever is
 * root in a container may craft: the real libc's memfd_create is found
 * where readelf says; crafted files are refused within the caps, reading
 * no more than the caps allow.
 */
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include "kernel/elfsym.h"
#include "test.h"

/* A file in memory, with what was read of it counted. */
struct mem {
	const unsigned char *buf;
	uint64_t size;
	uint64_t read;
};

static int mem_read(void *ctx, void *dst, size_t len, uint64_t off)
{
	struct mem *m = ctx;

	if (off > m->size || len > m->size - off)
		return -ENOEXEC;
	memcpy(dst, m->buf + off, len);
	m->read += len;
	return 0;
}

/* A small shared object: .text at 0x1000, @nsym symbols, the last one
 * "memfd_create" (FUNC, GLOBAL) at 0x1040. */
struct obj {
	Elf64_Ehdr eh;
	Elf64_Shdr sh[4]; /* null, .text, .dynsym, .dynstr */
	char str[32];
	Elf64_Sym sym[4];
	unsigned char text[0x100];
};

static void make_obj(struct obj *o)
{
	memset(o, 0, sizeof(*o));
	memcpy(o->eh.e_ident, ELFMAG, SELFMAG);
	o->eh.e_ident[EI_CLASS] = ELFCLASS64;
	o->eh.e_ident[EI_DATA] = ELFDATA2LSB;
	o->eh.e_ident[EI_VERSION] = EV_CURRENT;
	o->eh.e_type = ET_DYN;
	o->eh.e_machine = EM_X86_64;
	o->eh.e_shoff = offsetof(struct obj, sh);
	o->eh.e_shentsize = sizeof(Elf64_Shdr);
	o->eh.e_shnum = 4;
	o->sh[1] = (Elf64_Shdr){ .sh_type = SHT_PROGBITS,
				 .sh_addr = 0x1000,
				 .sh_offset = offsetof(struct obj, text),
				 .sh_size = sizeof(o->text) };
	o->sh[2] = (Elf64_Shdr){ .sh_type = SHT_DYNSYM,
				 .sh_offset = offsetof(struct obj, sym),
				 .sh_size = sizeof(o->sym),
				 .sh_link = 3,
				 .sh_entsize = sizeof(Elf64_Sym) };
	o->sh[3] = (Elf64_Shdr){ .sh_type = SHT_STRTAB,
				 .sh_offset = offsetof(struct obj, str),
				 .sh_size = sizeof(o->str) };
	memcpy(o->str, "\0open\0memfd_create\0weak", 24);
	o->sym[1] = (Elf64_Sym){ .st_name = 1,
				 .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
				 .st_shndx = 1,
				 .st_value = 0x1010 };
	o->sym[3] = (Elf64_Sym){ .st_name = 6,
				 .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
				 .st_shndx = 1,
				 .st_value = 0x1040 };
}

static int lookup(const void *buf, uint64_t size, const char *name,
		  uint64_t *off, uint64_t *read)
{
	struct mem m = { buf, size, 0 };
	int err = elfsym_func_offset(mem_read, &m, size, name, off);

	if (read)
		*read = m.read;
	return err;
}

TEST(finds_a_function_as_a_file_offset)
{
	struct obj o;
	uint64_t off = 0;

	make_obj(&o);
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd_create", &off, NULL), 0,
		  "found");
	ASSERT_EQ(off, offsetof(struct obj, text) + 0x40, "offset");
	ASSERT_EQ(lookup(&o, sizeof(o), "open", &off, NULL), 0, "open");
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd", &off, NULL), -ENOENT,
		  "a prefix is no match");
	ASSERT_EQ(lookup(&o, sizeof(o), "weak", &off, NULL), -ENOENT,
		  "a name without a symbol");
}

TEST(a_weak_symbol_is_taken_when_there_is_no_global_one)
{
	struct obj o;
	uint64_t off = 0;

	make_obj(&o);
	o.sym[2] = (Elf64_Sym){ .st_name = 19,
				.st_info = ELF64_ST_INFO(STB_WEAK, STT_FUNC),
				.st_shndx = 1,
				.st_value = 0x1080 };
	ASSERT_EQ(lookup(&o, sizeof(o), "weak", &off, NULL), 0, "weak");
	ASSERT_EQ(off, offsetof(struct obj, text) + 0x80, "its offset");
}

TEST(objects_and_undefined_symbols_are_no_functions)
{
	struct obj o;
	uint64_t off;

	make_obj(&o);
	o.sym[3].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd_create", &off, NULL), -ENOENT,
		  "object");
	make_obj(&o);
	o.sym[3].st_shndx = SHN_UNDEF;
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd_create", &off, NULL), -ENOENT,
		  "undefined (an import)");
}

TEST(crafted_headers_are_refused)
{
	struct obj o;
	uint64_t off;

	make_obj(&o);
	o.eh.e_ident[EI_CLASS] = ELFCLASS32;
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd_create", &off, NULL), -ENOEXEC,
		  "32-bit");
	make_obj(&o);
	o.eh.e_shoff = sizeof(o) - 8;
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd_create", &off, NULL), -ENOEXEC,
		  "section headers past the end");
	make_obj(&o);
	o.eh.e_shnum = ELFSYM_MAX_SECTIONS + 1;
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd_create", &off, NULL), -ENOEXEC,
		  "too many sections");
	make_obj(&o);
	o.sh[2].sh_entsize = 1;
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd_create", &off, NULL), -ENOEXEC,
		  "symbols of another size");
	make_obj(&o);
	o.sh[2].sh_link = 9;
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd_create", &off, NULL), -ENOEXEC,
		  "strings in no section");
	make_obj(&o);
	o.sym[3].st_name = 1000;
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd_create", &off, NULL), -ENOENT,
		  "a name past the strings");
	make_obj(&o);
	o.sym[3].st_value = 0x9000;
	ASSERT_EQ(lookup(&o, sizeof(o), "memfd_create", &off, NULL), -ENOEXEC,
		  "an address outside its section");
	ASSERT_EQ(lookup(&o, 10, "memfd_create", &off, NULL), -ENOEXEC,
		  "shorter than a header");
}

TEST(big_tables_and_files_are_refused_before_they_are_read)
{
	struct obj o;
	uint64_t off, read;

	make_obj(&o);
	o.sh[2].sh_size = (uint64_t)(ELFSYM_MAX_SYMS + 1) * sizeof(Elf64_Sym);
	ASSERT_EQ(lookup(&o, ELFSYM_MAX_FILE, "memfd_create", &off, &read),
		  -EFBIG, "too many symbols");
	ASSERT_LE(read, sizeof(o.eh) + sizeof(o.sh), "headers only read");
	make_obj(&o);
	o.sh[3].sh_size = ELFSYM_MAX_STRTAB + 1;
	ASSERT_EQ(lookup(&o, ELFSYM_MAX_FILE, "memfd_create", &off, &read),
		  -EFBIG, "strings too big");
	ASSERT_EQ(lookup(&o, ELFSYM_MAX_FILE + 1, "memfd_create", &off, &read),
		  -EFBIG, "file too big");
	ASSERT_EQ(read, 0, "nothing read");
}

TEST(every_truncation_of_a_good_object_is_refused_or_found)
{
	struct obj o;
	uint64_t off;

	make_obj(&o);
	for (uint64_t n = 0; n < sizeof(o); n++) {
		int err = lookup(&o, n, "memfd_create", &off, NULL);

		if (err && err != -ENOEXEC && err != -ENOENT) {
			FAIL_AT("size %lu: %d", (unsigned long)n, err);
			return;
		}
	}
}

TEST(this_machines_libc_matches_its_dynamic_symbol_table)
{
	const char *path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	uint64_t off = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		test_skip_reason = "no glibc at the Debian path";
		return;
	}
	ASSERT_EQ(elfsym_func_offset_fd(fd, "memfd_create", &off), 0, path);
	ASSERT_TRUE(off > 0, "an offset");
	close(fd);
}

TEST_MAIN()
