// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * faultbench: page-fault throughput. Maps SIZE of anonymous memory, writes
 * one byte per page (one minor fault each), unmaps it, and repeats for
 * ROUNDS rounds; prints one JSON line with the pages faulted per second
 * of wall time and per second of its own CPU time (user + system, where
 * the fault handler and any BPF program on its tracepoint run), and when
 * the faulting began (t0_ns, CLOCK_MONOTONIC), so that a watcher's
 * detection delay can be measured against it.
 *
 *   faultbench [--size SIZE] [--rounds N] [--wait]
 *
 * --wait prints {"type":"ready","pid":N} and waits for a line on stdin,
 * so that an agent can start tracking this process first, and after the
 * result waits for another line (or EOF) before exiting.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static double tv_s(const struct timeval *tv)
{
	return tv->tv_sec + tv->tv_usec / 1e6;
}

static unsigned long parse_size(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	switch (*end) {
	case 'G':
	case 'g':
		v <<= 10;
		/* fall through */
	case 'M':
	case 'm':
		v <<= 10;
		/* fall through */
	case 'K':
	case 'k':
		v <<= 10;
	}
	return v;
}

int main(int argc, char **argv)
{
	unsigned long size = 64UL << 20, rounds = 40, pages = 0;
	long page = sysconf(_SC_PAGESIZE);
	volatile char sink = 0;
	char line[64];
	int wait = 0;
	struct rusage ru0, ru1;
	unsigned long long t0;
	double dt, cpu;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait")) {
			wait = 1;
		} else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			size = parse_size(argv[++i]);
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = strtoul(argv[++i], NULL, 10);
		} else {
			fprintf(stderr,
				"usage: faultbench [--size SIZE] [--rounds N] [--wait]\n");
			return 2;
		}
	}
	if (!size || !rounds)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (wait) {
		printf("{\"type\":\"ready\",\"pid\":%d}\n", getpid());
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	getrusage(RUSAGE_SELF, &ru0);
	t0 = now_ns();
	for (unsigned long r = 0; r < rounds; r++) {
		char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			perror("faultbench: mmap");
			return 1;
		}
		/* no transparent huge pages: one fault per small page */
		madvise(p, size, MADV_NOHUGEPAGE);
		for (unsigned long off = 0; off < size; off += page) {
			p[off] = (char)r | 1;
			pages++;
		}
		sink ^= p[size / 2];
		munmap(p, size);
	}
	dt = (now_ns() - t0) / 1e9;
	getrusage(RUSAGE_SELF, &ru1);
	cpu = tv_s(&ru1.ru_utime) - tv_s(&ru0.ru_utime) + tv_s(&ru1.ru_stime) -
	      tv_s(&ru0.ru_stime);
	printf("{\"type\":\"result\",\"pages\":%lu,\"seconds\":%.6f,\"cpu_seconds\":%.6f,\"pages_per_s\":%.1f,\"pages_per_cpu_s\":%.1f,\"t0_ns\":%llu}\n",
	       pages, dt, cpu, pages / dt, cpu > 0 ? pages / cpu : 0.0, t0);
	/* --wait: stay until told, so the agent can be read while we live */
	if (wait && !fgets(line, sizeof(line), stdin))
		return sink == 42;
	return sink == 42;
}
