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
 *   faultbench --pair TURNS [--size SIZE] [--rounds N]
 *
 * --wait prints {"type":"ready","pid":N} and waits for a line on stdin,
 * so that an agent can start tracking this process first, and after the
 * result waits for another line (or EOF) before exiting.
 *
 * --pair: two workers forked from here fault in turns, TURNS times each,
 * one pass (ROUNDS x SIZE) a turn, the first of each pair of turns
 * swapped every time; each times its own passes (CPU from getrusage in
 * itself, and wall time). An agent tracks the first and not the second,
 * so both are measured on the same machine at the same moments, which a
 * shared machine's drift between separate runs hides. Prints
 * {"type":"ready","pids":[A,B]}, waits for a line on stdin, then one line
 * per turn pair: {"type":"pair","cpu_ns":[A,B],"wall_ns":[A,B],"pages":N}.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
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

/* read back, so that the writes are not optimised away */
static volatile char sink;

/* One pass: ROUNDS x SIZE mapped, one byte written a page, unmapped. */
static unsigned long pass(unsigned long size, unsigned long rounds)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long pages = 0;

	for (unsigned long r = 0; r < rounds; r++) {
		char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			perror("faultbench: mmap");
			exit(1);
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
	return pages;
}

static unsigned long long cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (unsigned long long)((tv_s(&ru.ru_utime) + tv_s(&ru.ru_stime)) *
				    1e9);
}

struct worker {
	pid_t pid;
	int go, done; /* parent -> worker, worker -> parent */
};

/* A worker: a pass for each 'g' read, its CPU and wall ns written back. */
static int start_worker(struct worker *w, unsigned long size,
			unsigned long rounds)
{
	int down[2], up[2];

	if (pipe(down) || pipe(up))
		return -1;
	w->pid = fork();
	if (w->pid < 0)
		return -1;
	if (!w->pid) {
		unsigned long long t[3];
		char c;

		close(down[1]);
		close(up[0]);
		/* 'q' or EOF: done (a later worker holds this pipe too) */
		while (read(down[0], &c, 1) == 1 && c != 'q') {
			unsigned long long c0 = cpu_ns(), w0 = now_ns();

			t[2] = pass(size, rounds);
			t[0] = cpu_ns() - c0;
			t[1] = now_ns() - w0;
			if (write(up[1], t, sizeof(t)) != sizeof(t))
				_exit(1);
		}
		_exit(0);
	}
	close(down[0]);
	close(up[1]);
	w->go = down[1];
	w->done = up[0];
	return 0;
}

static int turn(struct worker *w, unsigned long long *t)
{
	if (write(w->go, "g", 1) != 1)
		return -1;
	return read(w->done, t, 3 * sizeof(*t)) == 3 * sizeof(*t) ? 0 : -1;
}

static int pair(unsigned long turns, unsigned long size, unsigned long rounds)
{
	struct worker w[2];
	char line[64];
	int err = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < 2; i++)
		if (start_worker(&w[i], size, rounds))
			return 1;
	printf("{\"type\":\"ready\",\"pids\":[%d,%d]}\n", w[0].pid, w[1].pid);
	if (!fgets(line, sizeof(line), stdin))
		err = 1;
	for (unsigned long k = 0; !err && k < turns; k++) {
		unsigned long long t[2][3];
		int first = k & 1;

		if (turn(&w[first], t[first]) || turn(&w[!first], t[!first])) {
			err = 1;
			break;
		}
		printf("{\"type\":\"pair\",\"cpu_ns\":[%llu,%llu],\"wall_ns\":[%llu,%llu],\"pages\":%llu}\n",
		       t[0][0], t[1][0], t[0][1], t[1][1], t[0][2]);
	}
	for (int i = 0; i < 2; i++) {
		(void)!write(w[i].go, "q", 1);
		close(w[i].go);
		waitpid(w[i].pid, NULL, 0);
	}
	return err;
}

int main(int argc, char **argv)
{
	unsigned long size = 64UL << 20, rounds = 40, pages = 0, turns = 0;
	char line[64];
	int wait = 0;
	struct rusage ru0, ru1;
	unsigned long long t0;
	double dt, cpu;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait")) {
			wait = 1;
		} else if (!strcmp(argv[i], "--pair") && i + 1 < argc) {
			turns = strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			size = parse_size(argv[++i]);
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = strtoul(argv[++i], NULL, 10);
		} else {
			fprintf(stderr,
				"usage: faultbench [--size SIZE] [--rounds N] [--wait | --pair TURNS]\n");
			return 2;
		}
	}
	if (!size || !rounds)
		return 2;
	if (turns)
		return pair(turns, size, rounds);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (wait) {
		printf("{\"type\":\"ready\",\"pid\":%d}\n", getpid());
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	getrusage(RUSAGE_SELF, &ru0);
	t0 = now_ns();
	pages = pass(size, rounds);
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
