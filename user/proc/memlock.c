// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The agent's own memory locked in; see memlock.h. */
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "proc/memlock.h"

/* Read in the agent's own segments (the first object is the program). */
static int populate_self(struct dl_phdr_info *info, size_t size, void *data)
{
	long page = sysconf(_SC_PAGESIZE);

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo, hi;

		if (ph->p_type != PT_LOAD)
			continue;
		lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(page - 1);
		hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		for (uintptr_t p = lo; p < hi; p += page)
			(void)*(volatile const char *)p;
	}
	return 1;
}

/*
 * Before any thread starts (a thread started earlier would have its whole
 * stack locked in). MCL_ONFAULT locks pages as they are first used instead
 * of reading every library in whole: libmicrohttpd's TLS libraries alone
 * are 2 MiB the agent never runs. The agent's own code and data are read
 * in up front; what the loop uses of libc and libbpf is in after its first
 * ticks.
 */
int memlock_self(void)
{
	malloc_trim(0); /* the kernel BTF parsed at load is freed memory */
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)) {
		/* kernels before 4.4 have no MCL_ONFAULT */
		if (errno != EINVAL || mlockall(MCL_CURRENT | MCL_FUTURE))
			return -errno;
	}
	dl_iterate_phdr(populate_self, NULL);
	return 0;
}
