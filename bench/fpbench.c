// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * fpbench: what the agent's fault-path programs cost per run, by the
 * kernel's BPF run-time stats, with N processes tracked at once.
 *
 *   fpbench [--tracked N] [--self] [--empty OBJ | --none] [--size SIZE]
 *           [--rounds R] [--switches N] [--beside OBJ [--first]]
 *   fpbench --empty OBJ --hold
 *
 * Loads the agent's BPF programs (as the agent does: probes chosen from
 * BTF, tp_btf where it can), starts N sleeping processes and tracks them
 * (N-1 and the worker with --self), then a worker faults SIZE of fresh
 * anonymous memory R times (THP off). With --empty OBJ it loads that
 * object's do-nothing programs instead: the floor of the measurement;
 * with --none, no program at all. --beside OBJ also attaches that
 * object's programs on the same tracepoints, after the measured ones (or
 * before, with --first): both then run on the very same faults, so the
 * difference of their costs per run has no drift between runs in it; their
 * figures are reported apart, as "beside". Then, with --switches N, the worker and
 * a child, both pinned to one CPU, pass a byte back and forth N times over
 * two pipes: 2N context switches, whatever runs on sched_switch paying
 * its share. Prints one JSON line: the worker's faults and CPU time, the
 * wall time per context switch, and each program's run time and run count
 * over the worker's run (run counts include every other process's events
 * meanwhile).
 *
 * --hold only attaches, prints {"type":"ready"} and keeps the programs
 * attached until its standard input ends: the end-to-end benchmark's
 * "do-nothing programs" configuration.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kernel/bpfstate.h"
#include "pressure.skel.h"

#define MAX_PROGS 64

struct progstat {
	const char *name;
	int fd;
	bool beside; /* one of the --beside programs */
	__u64 ns, cnt;
};

static int nprogs;
static struct progstat progs[MAX_PROGS];

static void add_prog(struct bpf_program *p, bool beside)
{
	if (nprogs < MAX_PROGS && bpf_program__fd(p) >= 0) {
		progs[nprogs].name = bpf_program__name(p);
		progs[nprogs].beside = beside;
		progs[nprogs++].fd = bpf_program__fd(p);
	}
}

/* The "progs" (or with @beside the "beside") object of the JSON line. */
static void print_progs(bool beside)
{
	printf("\"%s\":{", beside ? "beside" : "progs");
	for (int i = 0, n = 0; i < nprogs; i++) {
		if (!progs[i].cnt || progs[i].beside != beside)
			continue;
		printf("%s\"%s\":{\"run_time_ns\":%llu,\"runs\":%llu}",
		       n++ ? "," : "", progs[i].name,
		       (unsigned long long)progs[i].ns,
		       (unsigned long long)progs[i].cnt);
	}
	printf("}");
}

static void snap(int sign)
{
	for (int i = 0; i < nprogs; i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(progs[i].fd, &info, &len))
			continue;
		progs[i].ns += sign * info.run_time_ns;
		progs[i].cnt += sign * info.run_cnt;
	}
}

static unsigned long parse_size(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*end == 'G' || *end == 'g')
		v <<= 30;
	else if (*end == 'M' || *end == 'm')
		v <<= 20;
	else if (*end == 'K' || *end == 'k')
		v <<= 10;
	return v;
}

/* Load and attach every program of @path (the do-nothing programs). */
static struct bpf_object *attach_all(const char *path, bool beside)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	struct bpf_program *prog;

	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "fpbench: failed to load %s\n", path);
		bpf_object__close(obj);
		return NULL;
	}
	bpf_object__for_each_program(prog, obj)
	{
		if (!bpf_program__attach(prog)) {
			fprintf(stderr, "fpbench: failed to attach %s\n",
				bpf_program__name(prog));
			bpf_object__close(obj);
			return NULL;
		}
		add_prog(prog, beside);
	}
	return obj;
}

static pid_t sleeper(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * @n round trips of a byte between this process and a child on the same
 * CPU: seconds per context switch, or -1.
 */
static double ping_pong(unsigned long n)
{
	int ab[2], ba[2];
	cpu_set_t one;
	double t0, t;
	pid_t kid;
	char c = 0;

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (sched_setaffinity(0, sizeof(one), &one) || pipe(ab) || pipe(ba))
		return -1;
	kid = fork();
	if (kid < 0)
		return -1;
	if (kid == 0) {
		close(ab[1]);
		close(ba[0]);
		while (read(ab[0], &c, 1) == 1 && write(ba[1], &c, 1) == 1)
			;
		_exit(0);
	}
	close(ab[0]);
	close(ba[1]);
	t0 = now_s();
	for (unsigned long i = 0; i < n; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			break;
	t = now_s() - t0;
	close(ab[1]);
	close(ba[0]);
	waitpid(kid, NULL, 0);
	return t / (2.0 * n);
}

/*
 * Fault @size @rounds times once a byte arrives on @go, then @switches
 * round trips; CPU seconds and seconds per switch to @out.
 */
static void worker(int go, int out, unsigned long size, unsigned long rounds,
		   unsigned long switches)
{
	long page = sysconf(_SC_PAGESIZE);
	struct rusage ru0, ru1;
	volatile char sink = 0;
	char c;
	double res[2] = { 0, 0 };
	double cpu;

	if (read(go, &c, 1) != 1)
		_exit(1);
	getrusage(RUSAGE_SELF, &ru0);
	for (unsigned long r = 0; r < rounds; r++) {
		char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			_exit(1);
		madvise(p, size, MADV_NOHUGEPAGE);
		for (unsigned long off = 0; off < size; off += page)
			p[off] = 1;
		sink ^= p[0];
		munmap(p, size);
	}
	getrusage(RUSAGE_SELF, &ru1);
	cpu = ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec +
	      (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6 +
	      ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec +
	      (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
	res[0] = cpu;
	if (switches)
		res[1] = ping_pong(switches);
	if (write(out, res, sizeof(res)) != sizeof(res))
		_exit(1);
	_exit(sink == 42);
}

struct fp_args {
	unsigned long size, rounds, switches;
	int tracked, self, hold, none, beside_first;
	const char *empty, *beside;
};

/* The command line into @a: 0, or 2 (told) on a bad one. */
static int parse_args(int argc, char **argv, struct fp_args *a)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--self"))
			a->self = 1;
		else if (!strcmp(argv[i], "--hold"))
			a->hold = 1;
		else if (!strcmp(argv[i], "--none"))
			a->none = 1;
		else if (!strcmp(argv[i], "--switches") && i + 1 < argc)
			a->switches = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--tracked") && i + 1 < argc)
			a->tracked = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--empty") && i + 1 < argc)
			a->empty = argv[++i];
		else if (!strcmp(argv[i], "--beside") && i + 1 < argc)
			a->beside = argv[++i];
		else if (!strcmp(argv[i], "--first"))
			a->beside_first = 1;
		else if (!strcmp(argv[i], "--size") && i + 1 < argc)
			a->size = parse_size(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			a->rounds = strtoul(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: fpbench [--tracked N] [--self] "
					"[--empty OBJ | --none] [--size SIZE] "
					"[--rounds R] [--switches N] [--hold] "
					"[--beside OBJ [--first]]\n");
			return 2;
		}
	}
	return 0;
}

/* The flags that go together: 0, or 2 (told). */
static int check_args(const struct fp_args *a)
{
	if (a->tracked < 0 || a->tracked > RC_MAX_TARGETS ||
	    (a->self && !a->tracked) || !a->size || !a->rounds) {
		fprintf(stderr,
			"fpbench: --tracked 0..%d (at least 1 with "
			"--self), size and rounds above 0\n",
			RC_MAX_TARGETS);
		return 2;
	}
	if (a->none && (a->empty || a->self)) {
		fprintf(stderr, "fpbench: --none loads nothing: no --empty, "
				"no --self\n");
		return 2;
	}
	if ((a->beside_first && !a->beside) ||
	    (a->beside && (a->none || a->hold))) {
		fprintf(stderr, "fpbench: --first goes with --beside OBJ, "
				"which needs programs to measure (no --none, "
				"no --hold)\n");
		return 2;
	}
	if (a->hold && (!a->empty || a->self)) {
		fprintf(stderr, "fpbench: --hold goes with --empty OBJ\n");
		return 2;
	}
	return 0;
}

/*
 * The agent's programs, as the agent loads them, tracking sleepers (kept
 * in @kids) and, with --self, the worker @wpid. 0 or -1 (told).
 */
static int load_agent(struct bpfstate *b, const struct fp_args *a, pid_t wpid,
		      pid_t *kids, int *nkids)
{
	struct bpfstate_settings o = {
		.filter = true, /* by the tracked set */
		.probe_mode = PROBE_AUTO,
		.burst_faults = 2048,
		.burst_window_ns = 100000000,
		.rss_step = 4 << 20,
	};
	struct bpf_program *prog;

	if (bpfstate_load(b, &o) || bpfstate_attach(b, true) <= 0) {
		fprintf(stderr, "fpbench: failed to load the agent's "
				"programs\n");
		return -1;
	}
	for (int i = 0; i < a->tracked - a->self; i++) {
		kids[*nkids] = sleeper();
		if (bpfstate_track(b, kids[(*nkids)++])) {
			fprintf(stderr, "fpbench: failed to track\n");
			return -1;
		}
	}
	if (a->self && bpfstate_track(b, wpid)) {
		fprintf(stderr, "fpbench: failed to track the "
				"worker\n");
		return -1;
	}
	bpf_object__for_each_program(prog, b->skel->obj) add_prog(prog, false);
	return 0;
}

/* Run the worker once with the stats on; print the result. 0 or -1. */
static int measure(const struct fp_args *a, int go, int res)
{
	double out[2] = { 0, 0 };
	unsigned long pages;
	int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);

	if (stats_fd < 0) {
		fprintf(stderr, "fpbench: failed to enable BPF stats: %s\n",
			strerror(errno));
		return -1;
	}
	snap(-1);
	if (write(go, "x", 1) != 1 ||
	    read(res, out, sizeof(out)) != sizeof(out) || out[1] < 0) {
		fprintf(stderr, "fpbench: the worker failed\n");
		close(stats_fd);
		return -1;
	}
	snap(1);
	pages = a->rounds *
		((a->size + sysconf(_SC_PAGESIZE) - 1) / sysconf(_SC_PAGESIZE));
	printf("{\"tracked\":%d,\"self\":%s,\"empty\":%s,\"none\":%s,"
	       "\"pages\":%lu,\"cpu_s\":%.6f,\"switches\":%lu,"
	       "\"switch_ns\":%.1f,\"beside_first\":%s,",
	       a->none ? 0 : a->tracked, a->self ? "true" : "false",
	       a->empty ? "true" : "false", a->none ? "true" : "false", pages,
	       out[0], a->switches, out[1] * 1e9,
	       a->beside_first ? "true" : "false");
	print_progs(false);
	if (a->beside) {
		printf(",");
		print_progs(true);
	}
	printf("}\n");
	close(stats_fd);
	return 0;
}

/* --hold: the programs stay attached until stdin closes. */
static void hold(void)
{
	char c;

	printf("{\"type\":\"ready\"}\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
}

int main(int argc, char **argv)
{
	struct fp_args a = { .size = 16UL << 20, .rounds = 20, .tracked = 1 };
	pid_t kids[RC_MAX_TARGETS], wpid = 0;
	struct bpf_object *obj = NULL, *bobj = NULL;
	int nkids = 0, go[2], res[2], err = 1;
	struct bpfstate b = {};

	if (parse_args(argc, argv, &a) || check_args(&a))
		return 2;
	if (pipe(go) || pipe(res)) {
		perror("fpbench: pipe");
		return 1;
	}
	wpid = fork();
	if (wpid == 0) {
		close(go[1]);
		close(res[0]);
		worker(go[0], res[1], a.size, a.rounds, a.switches);
	}
	close(go[0]);
	close(res[1]);

	/* a tracepoint runs its programs in the order they were attached */
	if (a.beside && a.beside_first && !(bobj = attach_all(a.beside, true)))
		goto out;
	if (a.empty && !(obj = attach_all(a.empty, false)))
		goto out;
	/* --none: the floor of the floor, the tracepoints without programs */
	if (!a.none && !a.empty && load_agent(&b, &a, wpid, kids, &nkids))
		goto out;
	if (a.beside && !a.beside_first && !(bobj = attach_all(a.beside, true)))
		goto out;
	if (a.hold)
		hold();
	err = a.hold ? 0 : -measure(&a, go[1], res[0]);
out:
	if (wpid > 0) {
		kill(wpid, SIGKILL);
		waitpid(wpid, NULL, 0);
	}
	for (int i = 0; i < nkids; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	if (b.skel)
		bpfstate_destroy(&b);
	bpf_object__close(obj);
	bpf_object__close(bobj);
	return err;
}
