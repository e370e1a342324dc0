// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * memhog: a test workload whose memory behaviour is known.
 *
 *   memhog [--wait] [--touch PAGES] [--grow SIZE --rate MBPS]
 *          [--map FILE] [--thrash SECS] [--hold SECS] [--tag WORD]
 *
 * --wait     print {"type":"ready"} and wait for a line on stdin first, so
 *            the agent can attach before anything happens
 * --touch N  map N fresh pages and write one byte in each, then print
 *            {"type":"faults","delta":D} with D the change of minflt+majflt
 *            in /proc/self/stat over that work (huge pages are turned off
 *            for the region: one fault per page even where THP is `always`)
 * --grow S   allocate and touch S bytes in 1 MiB steps at --rate MB/s
 *            (0 = as fast as possible), printing {"type":"grown",...}
 * --thrash T after --grow, write every page of the grown region again, pass
 *            after pass, for T seconds: once the region is larger than the
 *            memory it may use, each pass swaps it back in; prints
 *            {"type":"thrashed","passes":N}
 * --map F   map file F read-only (as an executor maps model weights) and
 *            read every page, pass after pass for --thrash T seconds (at
 *            least twice: the second pass is the first to read again; once
 *            without it): past the memory it may use, its pages are
 *            dropped and read again; prints {"type":"mapped",...}
 * --hold T   sleep T seconds before exiting
 * --tag W    ignored: a word on the command line for tests that find the
 *            process by it
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MiB (1UL << 20)

static unsigned long stat_faults(void)
{
	unsigned long minflt = 0, majflt = 0;
	char buf[1024], *p;
	FILE *f = fopen("/proc/self/stat", "r");

	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	p = strrchr(buf, ')');
	/* after "pid (comm) ": state ppid pgrp session tty tpgid flags minflt
	 * cminflt majflt */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %lu %*u %lu",
			 &minflt, &majflt) != 2)
		return 0;
	return minflt + majflt;
}

static void sleep_ns(long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static unsigned long parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'G':
	case 'g':
		v *= 1024;
		/* fall through */
	case 'M':
	case 'm':
		v *= 1024;
		/* fall through */
	case 'K':
	case 'k':
		v *= 1024;
	}
	return (unsigned long)v;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned long thrash(char *p, unsigned long bytes, double secs)
{
	long page = sysconf(_SC_PAGESIZE);
	double end = mono_s() + secs;
	unsigned long passes = 0;

	while (mono_s() < end) {
		for (unsigned long q = 0; q < bytes; q += page)
			p[q]++;
		passes++;
	}
	return passes;
}

/* Read every page of @path's mapping for @secs (one pass at least). */
static void map_file(const char *path, double secs)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long passes = 0;
	volatile char sum = 0;
	double end = mono_s() + secs;
	struct stat st;
	char *p;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		perror("memhog: open");
		exit(1);
	}
	p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		perror("memhog: mmap");
		exit(1);
	}
	do {
		for (off_t q = 0; q < st.st_size; q += page)
			sum += p[q];
		passes++;
	} while (mono_s() < end || (secs > 0 && passes < 2));
	printf("{\"type\":\"mapped\",\"bytes\":%lld,\"passes\":%lu}\n",
	       (long long)st.st_size, passes);
	munmap(p, st.st_size);
}

static char *grow(unsigned long bytes, double rate_mbps)
{
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long page = sysconf(_SC_PAGESIZE);

	if (p == MAP_FAILED) {
		perror("memhog: mmap");
		exit(1);
	}
	for (unsigned long off = 0; off < bytes; off += MiB) {
		unsigned long end = off + MiB < bytes ? off + MiB : bytes;

		for (unsigned long q = off; q < end; q += page)
			p[q] = (char)(q >> 12) | 1;
		if (rate_mbps > 0)
			sleep_ns((long)(1e9 / rate_mbps));
	}
	return p;
}

/* Touch @touch fresh small pages and tell the page faults counted; 0 or 1. */
static int touch_pages(unsigned long touch)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long before = stat_faults(), after;
	char *p = mmap(NULL, touch * page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("memhog: mmap");
		return 1;
	}
	if (madvise(p, touch * page, MADV_NOHUGEPAGE))
		perror("memhog: madvise");
	for (unsigned long i = 0; i < touch; i++)
		p[i * page] = 1;
	after = stat_faults();
	printf("{\"type\":\"faults\",\"delta\":%lu,\"pages\":%lu}\n",
	       after - before, touch);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long touch = 0, grow_bytes = 0;
	double rate = 0, hold = 0, thrash_s = 0;
	const char *map = NULL;
	int wait = 0;
	char line[64];

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--wait")) {
			wait = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "memhog: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--touch"))
			touch = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--grow"))
			grow_bytes = parse_size(v);
		else if (!strcmp(a, "--rate"))
			rate = atof(v);
		else if (!strcmp(a, "--hold"))
			hold = atof(v);
		else if (!strcmp(a, "--thrash"))
			thrash_s = atof(v);
		else if (!strcmp(a, "--map"))
			map = v;
		else if (!strcmp(a, "--tag"))
			continue;
		else {
			fprintf(stderr, "memhog: unknown option %s\n", a);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (wait) {
		printf("{\"type\":\"ready\",\"pid\":%d}\n", getpid());
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	if (touch && touch_pages(touch))
		return 1;
	if (map) {
		map_file(map, thrash_s);
		thrash_s = 0;
	}
	if (grow_bytes) {
		char *p = grow(grow_bytes, rate);

		printf("{\"type\":\"grown\",\"bytes\":%lu}\n", grow_bytes);
		if (thrash_s > 0)
			printf("{\"type\":\"thrashed\",\"passes\":%lu}\n",
			       thrash(p, grow_bytes, thrash_s));
	}
	if (hold > 0)
		sleep_ns((long)(hold * 1e9));
	printf("{\"type\":\"done\"}\n");
	return 0;
}
