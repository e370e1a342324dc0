// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The control page protocol end to end: the executor library (libramcache)
 * on one side, the agent's reader (user/page/control.c) on the other, in two
 * processes where it matters. Pages live in /dev/shm/ramcache-test-*.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ramcache/ramcache.h"
#include "page/control.h"
#include "test.h"

#define OFF(field) offsetof(struct ramcache_ctl, field)

/* ---- helpers ---------------------------------------------------------- */

static void page_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "/dev/shm/ramcache-test-%d-%s", (int)getpid(), name);
	unlink(buf);
}

static uint64_t now_ms(void)
{
	return ramcache_now_ns() / 1000000ULL;
}

static int send_byte(int fd)
{
	char b = 1;

	return write(fd, &b, 1) == 1 ? 0 : -1;
}

static int wait_byte(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char b;

	if (poll(&p, 1, ms) != 1 || read(fd, &b, 1) != 1)
		return -1;
	return 0;
}

struct child {
	pid_t pid;
	int ready; /* child -> parent */
	int go;	   /* parent -> child */
};

typedef void (*child_fn)(const char *path, int ready, int go);

static int spawn(struct child *ch, child_fn fn, const char *path)
{
	int up[2], down[2];

	/* A child that died early must fail the test, not kill the runner. */
	signal(SIGPIPE, SIG_IGN);
	if (pipe(up) || pipe(down))
		return -1;
	ch->pid = fork();
	if (ch->pid < 0)
		return -1;
	if (ch->pid == 0) {
		close(up[0]);
		close(down[1]);
		fn(path, up[1], down[0]);
		_exit(99);
	}
	close(up[1]);
	close(down[0]);
	ch->ready = up[0];
	ch->go = down[1];
	return 0;
}

/* Exit status of the child, or -1 after killing it when it overstays. */
static int reap(struct child *ch, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	int status, ret = -1;

	if (ch->pid <= 0)
		return -1;
	for (;;) {
		pid_t r = waitpid(ch->pid, &status, WNOHANG);

		if (r == ch->pid) {
			ret = WIFEXITED(status) ? WEXITSTATUS(status)
						: 128 + WTERMSIG(status);
			break;
		}
		if (now_ms() > end) {
			kill(ch->pid, SIGKILL);
			waitpid(ch->pid, &status, 0);
			break;
		}
		usleep(1000);
	}
	close(ch->ready);
	close(ch->go);
	ch->pid = 0;
	return ret;
}

/* Read acks until @want arrived or @ms passed; returns how many. */
static int collect_acks(struct ctl *c, struct ctl_ack *out, int want, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	int n = 0, r;

	while (n < want && now_ms() <= end) {
		r = control_read_acks(c, out + n, (uint32_t)(want - n));
		if (r < 0)
			return r;
		n += r;
		if (n < want)
			usleep(500);
	}
	return n;
}

/* A writable view of the page: the test playing a hostile executor. */
static struct ramcache_ctl *map_raw(const char *path, size_t *len)
{
	struct stat st;
	void *p;
	int fd;

	fd = open(path, O_RDWR);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st)) {
		close(fd);
		return NULL;
	}
	*len = (size_t)st.st_size;
	p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static int poke(const char *path, uint64_t off, const void *v, size_t len)
{
	int fd = open(path, O_WRONLY), r;

	if (fd < 0)
		return -errno;
	r = pwrite(fd, v, len, (off_t)off) == (ssize_t)len ? 0 : -EIO;
	close(fd);
	return r;
}

static int poke32(const char *path, uint64_t off, uint32_t v)
{
	return poke(path, off, &v, sizeof(v));
}

static int poke64(const char *path, uint64_t off, uint64_t v)
{
	return poke(path, off, &v, sizeof(v));
}

static int publish(struct ramcache *rc, uint64_t id, uint64_t bytes,
		   const char *label)
{
	struct ramcache_entry_info info = {
		.id = id,
		.bytes = bytes,
		.label = label,
	};

	return ramcache_publish(rc, &info);
}

/* ---- executors (children) --------------------------------------------- */

static const struct {
	uint64_t id;
	uint64_t bytes;
	const char *label;
} demo_entries[] = {
	{ 11, 1000, "alpha" },
	{ 22, 2000, "beta" },
	{ 33, 3000, "gamma" },
};

static uint64_t demo_bytes(uint64_t id)
{
	for (size_t i = 0; i < 3; i++)
		if (demo_entries[i].id == id)
			return demo_entries[i].bytes;
	return 0;
}

/* Evicts three entries, answering each command with the bytes freed. */
static void exec_evictor(const char *path, int ready, int go)
{
	struct ramcache_command cmd;
	struct ramcache *rc;

	if (ramcache_create(&rc, path, 16, 8))
		_exit(2);
	for (size_t i = 0; i < 3; i++)
		if (publish(rc, demo_entries[i].id, demo_entries[i].bytes,
			    demo_entries[i].label))
			_exit(3);
	send_byte(ready);
	for (uint64_t i = 1; i <= 3; i++) {
		uint64_t bytes;

		if (ramcache_wait(rc, &cmd, 5000) != 1)
			_exit(4);
		if (cmd.seq != i || cmd.reason != RAMCACHE_REASON_HEADROOM)
			_exit(5);
		bytes = demo_bytes(cmd.entry_id);
		if (!bytes || ramcache_remove(rc, cmd.entry_id) ||
		    ramcache_ack(rc, &cmd, RAMCACHE_ACK_EVICTED, bytes))
			_exit(6);
	}
	if (wait_byte(go, 5000))
		_exit(7);
	if (!ramcache_agent_alive(rc) ||
	    ramcache_level(rc) != RAMCACHE_LEVEL_HIGH ||
	    ramcache_headroom(rc) != 12345 || ramcache_target(rc) != 6000)
		_exit(8);
	ramcache_destroy(rc, false);
	_exit(0);
}

#define WRAP_RING  4
#define WRAP_TOTAL 21

/* Waits for "go", then takes WRAP_TOTAL commands strictly in order. */
static void exec_in_order(const char *path, int ready, int go)
{
	struct ramcache_command cmd;
	struct ramcache *rc;

	if (ramcache_create(&rc, path, 16, WRAP_RING))
		_exit(2);
	send_byte(ready);
	if (wait_byte(go, 5000))
		_exit(3);
	for (uint64_t i = 1; i <= WRAP_TOTAL; i++) {
		if (ramcache_wait(rc, &cmd, 5000) != 1)
			_exit(4);
		if (cmd.seq != i || cmd.entry_id != 1000 + i)
			_exit(5);
		if (ramcache_ack(rc, &cmd, RAMCACHE_ACK_NOT_FOUND, i))
			_exit(6);
	}
	/* Nothing more may come out of the ring. */
	if (ramcache_poll(rc, &cmd) != 0)
		_exit(7);
	ramcache_destroy(rc, false);
	_exit(0);
}

/* Takes one command, acks it, and dies without cleaning up. */
static void exec_one_then_crash(const char *path, int ready, int go)
{
	struct ramcache_command cmd;
	struct ramcache *rc;

	if (ramcache_create(&rc, path, 16, 8))
		_exit(2);
	send_byte(ready);
	if (ramcache_wait(rc, &cmd, 5000) != 1 || cmd.seq != 1)
		_exit(3);
	if (ramcache_ack(rc, &cmd, RAMCACHE_ACK_EVICTED, 77))
		_exit(4);
	if (wait_byte(go, 5000))
		_exit(5);
	_exit(0);
}

/*
 * Takes commands 1..6 across an agent restart: 1-3, then (after "go")
 * 4-6. Fails on a repeat, a gap, or the half-posted command (entry 999).
 */
static void exec_across_agents(const char *path, int ready, int go)
{
	struct ramcache_command cmd;
	struct ramcache *rc;

	if (ramcache_create(&rc, path, 16, 8))
		_exit(2);
	send_byte(ready);
	for (uint64_t i = 1; i <= 6; i++) {
		if (i == 4 && wait_byte(go, 5000))
			_exit(3);
		if (ramcache_wait(rc, &cmd, 5000) != 1)
			_exit(4);
		if (cmd.seq != i)
			_exit(10 + (int)i);
		if (cmd.entry_id != 100 + i)
			_exit(20 + (int)i);
		if (ramcache_ack(rc, &cmd, RAMCACHE_ACK_EVICTED, i * 10))
			_exit(5);
	}
	if (ramcache_wait(rc, &cmd, 200) != 0)
		_exit(6);
	ramcache_destroy(rc, false);
	_exit(0);
}

/* ---- tests ------------------------------------------------------------ */

TEST(post_and_ack)
{
	struct ctl_entry ents[16];
	struct ctl_ack acks[3];
	struct child ch = { 0 };
	struct ctl c = { .fd = -1 };
	struct ctl_agent a = {
		.heartbeat_ns = ramcache_now_ns(),
		.pid = (uint32_t)getpid(),
		.level = RAMCACHE_LEVEL_HIGH,
		.headroom_bytes = 12345,
		.target_bytes = 6000,
	};
	const uint64_t order[3] = { 22, 11, 33 };
	struct ctl_exec ex;
	char path[128];
	int n;

	page_path(path, sizeof(path), "post");
	if (!ASSERT_OK(spawn(&ch, exec_evictor, path), "spawn"))
		goto out;
	if (!ASSERT_OK(wait_byte(ch.ready, 5000), "executor ready"))
		goto out;
	if (!ASSERT_OK(control_open(&c, path, geteuid(), ch.pid),
		       "control_open"))
		goto out;
	ASSERT_EQ(c.lay.max_entries, 16, "max_entries");
	ASSERT_EQ(c.lay.ring_size, 8, "ring_size");
	ASSERT_EQ(c.cmd_head, 0, "fresh page cmd_head");

	n = control_read_entries(&c, ents, 16);
	if (!ASSERT_EQ(n, 3, "entries published"))
		goto out;
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(ents[i].id, demo_entries[i].id, "entry id");
		ASSERT_EQ(ents[i].bytes, demo_entries[i].bytes, "entry bytes");
		ASSERT_STREQ(ents[i].label, demo_entries[i].label, "label");
	}
	ASSERT_OK(control_read_exec(&c, &ex), "read exec");
	ASSERT_TRUE(control_exec_alive(&ex, ramcache_now_ns()),
		    "executor alive");
	ASSERT_OK(control_write_agent(&c, &a), "write agent");

	for (int i = 0; i < 3; i++) {
		uint64_t seq = 0;

		ASSERT_OK(control_post(&c, order[i], RAMCACHE_REASON_HEADROOM,
				       ramcache_now_ns(), &seq),
			  "post");
		ASSERT_EQ(seq, i + 1, "seq");
	}
	n = collect_acks(&c, acks, 3, 5000);
	if (!ASSERT_EQ(n, 3, "acks"))
		goto out;
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(acks[i].cmd_seq, i + 1, "ack seq");
		ASSERT_EQ(acks[i].entry_id, order[i], "ack entry");
		ASSERT_EQ(acks[i].status, RAMCACHE_ACK_EVICTED, "ack status");
		ASSERT_EQ(acks[i].bytes_freed, demo_bytes(order[i]), "freed");
		ASSERT_LE(acks[i].recv_ns, acks[i].ack_ns, "recv <= ack");
	}
	ASSERT_EQ(control_read_entries(&c, ents, 16), 0, "table empty");
	ASSERT_OK(control_read_exec(&c, &ex), "read exec");
	ASSERT_EQ(ex.cmd_done, 3, "cmd_done");
	ASSERT_EQ(ex.ack_head, 3, "ack_head");
	ASSERT_EQ(c.acks_lost + c.acks_bad, 0, "no lost or torn acks");
	send_byte(ch.go);
	ASSERT_EQ(reap(&ch, 5000), 0, "executor exit");
out:
	if (ch.pid)
		reap(&ch, 0);
	control_close(&c);
	unlink(path);
}

TEST(ring_wrap)
{
	struct ctl_ack acks[WRAP_RING];
	struct child ch = { 0 };
	struct ctl c = { .fd = -1 };
	int seen[WRAP_TOTAL + 1] = { 0 };
	uint64_t posted = 0, acked = 0, end;
	char path[128];

	page_path(path, sizeof(path), "wrap");
	if (!ASSERT_OK(spawn(&ch, exec_in_order, path), "spawn"))
		goto out;
	if (!ASSERT_OK(wait_byte(ch.ready, 5000), "executor ready"))
		goto out;
	if (!ASSERT_OK(control_open(&c, path, geteuid(), ch.pid),
		       "control_open"))
		goto out;
	for (; posted < WRAP_RING; posted++)
		ASSERT_OK(control_post(&c, 1000 + posted + 1, 1, 0, NULL),
			  "post");
	/* The executor has taken nothing yet: the ring is full. */
	ASSERT_EQ(control_post(&c, 9999, 1, 0, NULL), -EBUSY, "full ring");
	ASSERT_EQ(c.cmd_head, WRAP_RING, "cmd_head after EBUSY");
	send_byte(ch.go);

	end = now_ms() + 10000;
	while (acked < WRAP_TOTAL && now_ms() < end) {
		int n, r;

		/* At most ring_size un-acked: no ack can be overwritten. */
		if (posted < WRAP_TOTAL && posted - acked < WRAP_RING) {
			r = control_post(&c, 1000 + posted + 1, 1, 0, NULL);
			if (r == 0)
				posted++;
			else if (!ASSERT_EQ(r, -EBUSY, "post"))
				break;
		}
		n = control_read_acks(&c, acks, WRAP_RING);
		if (!ASSERT_GE(n, 0, "read acks"))
			break;
		for (int i = 0; i < n; i++) {
			uint64_t s = acks[i].cmd_seq;

			if (!ASSERT_LE(s, WRAP_TOTAL, "ack seq range"))
				continue;
			ASSERT_EQ(acks[i].entry_id, 1000 + s, "ack entry");
			ASSERT_EQ(acks[i].bytes_freed, s, "ack bytes");
			ASSERT_EQ(acks[i].status, RAMCACHE_ACK_NOT_FOUND,
				  "status");
			seen[s]++;
			acked++;
		}
		if (!n)
			usleep(200);
	}
	ASSERT_EQ(posted, WRAP_TOTAL, "posted");
	ASSERT_EQ(acked, WRAP_TOTAL, "acked");
	for (int s = 1; s <= WRAP_TOTAL; s++)
		ASSERT_EQ(seen[s], 1, "each seq acked once");
	ASSERT_EQ(c.acks_lost, 0, "acks lost");
	ASSERT_EQ(c.acks_bad, 0, "acks torn");
	ASSERT_EQ(reap(&ch, 5000), 0, "executor exit");
out:
	if (ch.pid)
		reap(&ch, 0);
	control_close(&c);
	unlink(path);
}

TEST(ack_matching)
{
	struct ramcache_command cmd[2], stale = { .seq = 5 };
	struct ramcache *rc = NULL;
	struct ctl c = { .fd = -1 };
	struct ctl_ack acks[4];
	char path[128];
	uint64_t off;

	page_path(path, sizeof(path), "acks");
	if (!ASSERT_OK(ramcache_create(&rc, path, 8, 4), "create"))
		goto out;
	if (!ASSERT_OK(control_open(&c, path, geteuid(), getpid()),
		       "control_open"))
		goto out;
	ASSERT_OK(control_post(&c, 501, RAMCACHE_REASON_RECLAIM, 42, NULL),
		  "p1");
	ASSERT_OK(control_post(&c, 502, RAMCACHE_REASON_FORECAST, 43, NULL),
		  "p2");
	ASSERT_EQ(ramcache_poll(rc, &cmd[0]), 1, "poll 1");
	ASSERT_EQ(ramcache_poll(rc, &cmd[1]), 1, "poll 2");
	ASSERT_EQ(ramcache_poll(rc, &cmd[1]), 0, "poll empty");
	ASSERT_EQ(cmd[0].issue_ns, 42, "issue_ns");
	ASSERT_EQ(cmd[1].reason, RAMCACHE_REASON_FORECAST, "reason");
	/* A command never taken cannot be answered. */
	ASSERT_EQ(ramcache_ack(rc, &stale, RAMCACHE_ACK_EVICTED, 1), -EINVAL,
		  "ack untaken");
	ASSERT_EQ(ramcache_ack(rc, &cmd[0], 0, 1), -EINVAL, "bad status");

	/* Out of order: the agent matches by cmd_seq, not by position. */
	ASSERT_OK(ramcache_ack(rc, &cmd[1], RAMCACHE_ACK_BUSY, 0), "ack 2");
	ASSERT_OK(ramcache_ack(rc, &cmd[0], RAMCACHE_ACK_PINNED, 0), "ack 1");
	if (!ASSERT_EQ(control_read_acks(&c, acks, 4), 2, "two acks"))
		goto out;
	ASSERT_EQ(acks[0].cmd_seq, 2, "first ack is for seq 2");
	ASSERT_EQ(acks[0].entry_id, 502, "entry 502");
	ASSERT_EQ(acks[0].status, RAMCACHE_ACK_BUSY, "busy");
	ASSERT_EQ(acks[1].cmd_seq, 1, "then seq 1");
	ASSERT_EQ(acks[1].status, RAMCACHE_ACK_PINNED, "pinned");
	ASSERT_EQ(control_read_acks(&c, acks, 4), 0, "nothing twice");

	/* Forged ack for a command never posted (seq 9 > cmd_head 2). */
	off = c.lay.acks_off + 2 * sizeof(struct ramcache_ctl_ack);
	ASSERT_OK(poke64(path, off + 40, RAMCACHE_ACK_EVICTED), "status");
	ASSERT_OK(poke64(path, off, 9), "forge seq");
	ASSERT_OK(poke64(path, OFF(ack_head), 3), "forge head");
	ASSERT_EQ(control_read_acks(&c, acks, 4), 0, "forged ack dropped");
	ASSERT_EQ(c.acks_bad, 1, "counted as bad");

	/* A slot caught mid-rewrite (seq zeroed first) is torn, skipped. */
	off = c.lay.acks_off + 3 * sizeof(struct ramcache_ctl_ack);
	ASSERT_OK(poke64(path, off, 0), "zero seq");
	ASSERT_OK(poke64(path, OFF(ack_head), 4), "head 4");
	ASSERT_EQ(control_read_acks(&c, acks, 4), 0, "torn ack dropped");
	ASSERT_EQ(c.acks_bad, 2, "counted as bad");

	/* ack_head far ahead: at most ring_size slots read, rest lost. */
	ASSERT_OK(poke64(path, OFF(ack_head), 1000), "head 1000");
	/* Slots 1-2 still hold acks for seqs 2 and 1: stale repeats. */
	if (ASSERT_EQ(control_read_acks(&c, acks, 4), 2, "stale repeats")) {
		ASSERT_EQ(acks[0].cmd_seq, 2, "repeat of seq 2");
		ASSERT_EQ(acks[1].cmd_seq, 1, "repeat of seq 1");
	}
	ASSERT_EQ(c.acks_lost, 1000 - 4 - 4, "lost counted");
	ASSERT_EQ(c.ack_seen, 1000, "caught up");
out:
	control_close(&c);
	ramcache_destroy(rc, true);
	unlink(path);
}

struct ack_storm {
	struct ramcache *rc;
	struct ramcache_command cmd[2];
	volatile int stop;
	long n;
};

/* Rewrites the one ack slot of a ring of 1 as fast as it can. */
static void *ack_storm(void *arg)
{
	struct ack_storm *st = arg;

	while (!st->stop) {
		const struct ramcache_command *cmd = &st->cmd[st->n & 1];

		ramcache_ack(st->rc, cmd, RAMCACHE_ACK_EVICTED, cmd->seq * 10);
		/* Pause now and then so some reads find a quiet slot. */
		if (!(++st->n & 1023))
			sched_yield();
	}
	return NULL;
}

/*
 * A reader racing a writer on the same ack slot: every ack it returns must
 * be whole (entry and bytes belong to its cmd_seq), never a mix of two.
 */
TEST(torn_acks)
{
	struct ramcache *rc = NULL;
	struct ctl c = { .fd = -1 };
	struct ack_storm st = { 0 };
	struct ctl_ack acks[1];
	long good = 0, mixed = 0, calls = 0, errs = 0;
	pthread_t th;
	char path[128];
	uint64_t end;

	page_path(path, sizeof(path), "stormy");
	if (!ASSERT_OK(ramcache_create(&rc, path, 8, 1), "create"))
		goto out;
	if (!ASSERT_OK(control_open(&c, path, geteuid(), getpid()),
		       "control_open"))
		goto out;
	ASSERT_OK(control_post(&c, 501, 1, 0, NULL), "post 1");
	ASSERT_EQ(ramcache_poll(rc, &st.cmd[0]), 1, "take 1");
	ASSERT_OK(control_post(&c, 502, 1, 0, NULL), "post 2");
	ASSERT_EQ(ramcache_poll(rc, &st.cmd[1]), 1, "take 2");
	st.rc = rc;
	if (!ASSERT_OK(pthread_create(&th, NULL, ack_storm, &st), "thread"))
		goto out;
	/* Enough races to matter, bounded in time on a slow machine. */
	end = now_ms() + 3000;
	while (now_ms() < end && (good < 200 || calls < 20000)) {
		int n = control_read_acks(&c, acks, 1);

		calls++;
		if (n != 1) {
			if (n < 0)
				errs++;
			continue;
		}
		if (acks[0].entry_id == 500 + acks[0].cmd_seq &&
		    acks[0].bytes_freed == acks[0].cmd_seq * 10)
			good++;
		else
			mixed++;
	}
	st.stop = 1;
	pthread_join(th, NULL);
	printf("# %ld acks written, %ld calls, %ld errs, %ld read whole, %" PRIu64
	       " torn skipped\n",
	       st.n, calls, errs, good, c.acks_bad);
	ASSERT_EQ(mixed, 0, "no mixed acks");
	ASSERT_GE(good, 1, "some acks read");
out:
	control_close(&c);
	ramcache_destroy(rc, true);
	unlink(path);
}

/* A bad agent: a head with no command behind it, then one far ahead. */
TEST(executor_skips_bad_slots)
{
	struct ramcache_command cmd;
	struct ramcache *rc = NULL;
	struct ctl c = { .fd = -1 };
	struct ctl_exec ex;
	char path[128];
	uint64_t seq = 0;
	int i;

	page_path(path, sizeof(path), "badslots");
	if (!ASSERT_OK(ramcache_create(&rc, path, 8, 4), "create"))
		goto out;
	ASSERT_OK(poke64(path, OFF(cmd_head), 1), "head 1, slot empty");
	ASSERT_EQ(ramcache_poll(rc, &cmd), 0, "empty slot not taken");
	ASSERT_OK(poke64(path, OFF(cmd_head), 1000000), "head far ahead");
	for (i = 0; i < 10 && ramcache_poll(rc, &cmd) == 0; i++)
		;
	ASSERT_EQ(i, 10, "nothing taken from garbage");
	if (!ASSERT_OK(control_open(&c, path, geteuid(), getpid()),
		       "control_open"))
		goto out;
	ASSERT_OK(control_read_exec(&c, &ex), "exec");
	ASSERT_EQ(ex.cmd_done, 1000000, "skipped up to the head, bounded");
	ASSERT_OK(control_post(&c, 9, 1, 0, &seq), "post");
	ASSERT_EQ(seq, 1000001, "continues after the head");
	ASSERT_EQ(ramcache_poll(rc, &cmd), 1, "real command taken");
	ASSERT_EQ(cmd.entry_id, 9, "entry");
	ASSERT_EQ(ramcache_poll(rc, &cmd), 0, "once");
out:
	control_close(&c);
	ramcache_destroy(rc, true);
	unlink(path);
}

struct pub_storm {
	struct ramcache *rc;
	volatile int stop;
	uint64_t v;
};

/* Rewrites 8 entries forever; within one entry every field holds v. */
static void *pub_storm(void *arg)
{
	struct pub_storm *st = arg;
	char label[RAMCACHE_LABEL_LEN + 1];

	while (!st->stop) {
		uint64_t v = ++st->v;
		struct ramcache_entry_info info = {
			.id = 1 + v % 8,
			.bytes = v,
			.last_use_ns = v,
			.used_generation = v,
			.cost_ns = v,
			.flags = (uint32_t)v,
			.label = label,
		};

		snprintf(label, sizeof(label), "v%" PRIu64, v);
		ramcache_publish(st->rc, &info);
		if (!(v % 64))
			ramcache_remove(st->rc, 1 + (v / 64) % 8);
	}
	return NULL;
}

/* Snapshots taken while the table changes are each internally whole. */
TEST(entries_under_writer)
{
	struct ramcache *rc = NULL;
	struct ctl c = { .fd = -1 };
	struct pub_storm st = { 0 };
	struct ctl_entry ents[8];
	long snaps = 0, busy = 0, mixed = 0;
	char want[RAMCACHE_LABEL_LEN + 1];
	pthread_t th;
	char path[128];
	uint64_t end;

	page_path(path, sizeof(path), "pubstorm");
	if (!ASSERT_OK(ramcache_create(&rc, path, 8, 4), "create"))
		goto out;
	if (!ASSERT_OK(control_open(&c, path, geteuid(), getpid()),
		       "control_open"))
		goto out;
	st.rc = rc;
	if (!ASSERT_OK(pthread_create(&th, NULL, pub_storm, &st), "thread"))
		goto out;
	end = now_ms() + 3000;
	while (now_ms() < end && snaps < 20000) {
		int n = control_read_entries(&c, ents, 8);

		if (n == -EAGAIN) {
			busy++;
			continue;
		}
		if (!ASSERT_GE(n, 0, "snapshot"))
			break;
		snaps++;
		for (int i = 0; i < n; i++) {
			const struct ctl_entry *e = &ents[i];

			snprintf(want, sizeof(want), "v%" PRIu64, e->bytes);
			if (e->last_use_ns != e->bytes ||
			    e->cost_ns != e->bytes ||
			    e->flags != (uint32_t)e->bytes ||
			    e->used_generation != e->bytes ||
			    strcmp(e->label, want) || e->id != 1 + e->bytes % 8)
				mixed++;
		}
	}
	st.stop = 1;
	pthread_join(th, NULL);
	printf("# %" PRIu64 " publishes, %ld snapshots, %ld busy\n", st.v,
	       snaps, busy);
	ASSERT_EQ(mixed, 0, "no entry mixes two writes");
	ASSERT_GE(snaps, 100, "snapshots taken");
out:
	control_close(&c);
	ramcache_destroy(rc, true);
	unlink(path);
}

TEST(torn_entries)
{
	struct ramcache *rc = NULL;
	struct ctl c = { .fd = -1 };
	struct ramcache_ctl *raw = NULL;
	struct ctl_entry ents[8];
	struct ramcache_ctl_entry *e;
	size_t len = 0;
	char path[128];
	uint64_t t0;
	uint32_t seq;

	page_path(path, sizeof(path), "torn");
	if (!ASSERT_OK(ramcache_create(&rc, path, 8, 4), "create"))
		goto out;
	ASSERT_OK(publish(rc, 1, 10, "one"), "publish 1");
	ASSERT_OK(publish(rc, 2, 20, "two"), "publish 2");
	ASSERT_OK(publish(rc, 1, 15, "one'"), "update 1");
	if (!ASSERT_OK(control_open(&c, path, geteuid(), getpid()),
		       "control_open"))
		goto out;
	raw = map_raw(path, &len);
	if (!ASSERT_OK_PTR(raw, "map"))
		goto out;
	seq = raw->entries_seq;
	ASSERT_EQ(seq % 2, 0, "seq even at rest");
	ASSERT_EQ(seq, 6, "one begin/end per publish");

	/* A writer stuck mid-update: the agent gives up, it does not hang. */
	raw->entries_seq = seq + 1;
	t0 = now_ms();
	ASSERT_EQ(control_read_entries(&c, ents, 8), -EAGAIN, "odd seq");
	ASSERT_LE(now_ms() - t0, 1000, "bounded retries");
	raw->entries_seq = seq;
	if (!ASSERT_EQ(control_read_entries(&c, ents, 8), 2, "after writer"))
		goto out;
	ASSERT_EQ(ents[0].bytes, 15, "update in place");
	ASSERT_STREQ(ents[0].label, "one'", "updated label");

	/* Hostile table: nr_entries too big, label full of junk, id 0. */
	raw->nr_entries = 1000;
	e = (void *)((char *)raw + raw->entries_off);
	memset(e[1].label, 'x', RAMCACHE_LABEL_LEN);
	e[1].label[3] = '\033';
	e[2].id = 0;
	e[3].id = 7;
	if (!ASSERT_EQ(control_read_entries(&c, ents, 8), 3,
		       "clamped, id 0 out"))
		goto out;
	ASSERT_EQ(strlen(ents[1].label), RAMCACHE_LABEL_LEN, "terminated");
	ASSERT_EQ(ents[1].label[3], '?', "control byte replaced");
	ASSERT_EQ(ents[2].id, 7, "entry 7");
	raw->nr_entries = 2;
	e[3].id = 0;

	ASSERT_EQ(ramcache_remove(rc, 1), 0, "remove");
	ASSERT_EQ(ramcache_remove(rc, 1), -ENOENT, "remove twice");
	if (ASSERT_EQ(control_read_entries(&c, ents, 8), 1, "one left"))
		ASSERT_EQ(ents[0].id, 2, "last moved into the hole");
	for (uint64_t id = 100; id < 107; id++)
		ASSERT_OK(publish(rc, id, id, NULL), "fill");
	ASSERT_EQ(publish(rc, 200, 1, NULL), -ENOSPC, "table full");
	ASSERT_EQ(publish(rc, 0, 1, NULL), -EINVAL, "id 0");
	ASSERT_OK(ramcache_clear(rc), "clear");
	ASSERT_EQ(control_read_entries(&c, ents, 8), 0, "cleared");
	ASSERT_EQ(raw->entries_seq % 2, 0, "seq even after clear");
out:
	if (raw)
		munmap(raw, len);
	control_close(&c);
	ramcache_destroy(rc, true);
	unlink(path);
}

TEST(executor_restart)
{
	struct child a = { 0 }, b = { 0 };
	struct ctl c = { .fd = -1 };
	struct ctl_ack ack;
	uint64_t seq = 0;
	pid_t old_pid;
	char path[128];
	int err;

	page_path(path, sizeof(path), "erestart");
	if (!ASSERT_OK(spawn(&a, exec_one_then_crash, path), "spawn a") ||
	    !ASSERT_OK(wait_byte(a.ready, 5000), "a ready"))
		goto out;
	if (!ASSERT_OK(control_open(&c, path, geteuid(), a.pid), "open a"))
		goto out;
	ASSERT_OK(control_post(&c, 5, 1, 0, NULL), "post to a");
	if (ASSERT_EQ(collect_acks(&c, &ack, 1, 5000), 1, "ack from a"))
		ASSERT_EQ(ack.bytes_freed, 77, "a's ack");
	old_pid = a.pid;
	send_byte(a.go);
	ASSERT_EQ(reap(&a, 5000), 0, "a exits");
	ASSERT_OK(control_check(&c), "crashed executor's page still valid");

	/* The new executor replaces the page: the agent must notice. */
	if (!ASSERT_OK(spawn(&b, exec_one_then_crash, path), "spawn b") ||
	    !ASSERT_OK(wait_byte(b.ready, 5000), "b ready"))
		goto out;
	ASSERT_EQ(control_check(&c), -ESTALE, "old page stale");
	ASSERT_EQ(c.why, CTL_ERR_REPLACED, "replaced");
	control_close(&c);
	err = control_open(&c, path, geteuid(), old_pid);
	ASSERT_EQ(err, -ESRCH, "new page, old pid");
	ASSERT_EQ(c.why, CTL_ERR_PID, "pid refused");
	if (!ASSERT_OK(control_open(&c, path, geteuid(), b.pid), "open b"))
		goto out;
	ASSERT_EQ(c.cmd_head, 0, "new page starts over");
	ASSERT_OK(control_post(&c, 6, 1, 0, &seq), "post to b");
	ASSERT_EQ(seq, 1, "seq 1 on the new page");
	if (ASSERT_EQ(collect_acks(&c, &ack, 1, 5000), 1, "ack from b"))
		ASSERT_EQ(ack.entry_id, 6, "b's ack");
	send_byte(b.go);
	ASSERT_EQ(reap(&b, 5000), 0, "b exits");
out:
	if (a.pid)
		reap(&a, 0);
	if (b.pid)
		reap(&b, 0);
	control_close(&c);
	unlink(path);
}

TEST(agent_restart)
{
	struct ctl_ack acks[8];
	struct child ch = { 0 };
	struct ctl c = { .fd = -1 };
	struct ramcache_ctl_cmd half = { .entry_id = 999 };
	uint64_t seq = 0, off;
	char path[128];
	int n;

	page_path(path, sizeof(path), "arestart");
	if (!ASSERT_OK(spawn(&ch, exec_across_agents, path), "spawn") ||
	    !ASSERT_OK(wait_byte(ch.ready, 5000), "ready"))
		goto out;

	/* Agent 1: three commands answered, two more left in the ring. */
	if (!ASSERT_OK(control_open(&c, path, geteuid(), ch.pid), "open 1"))
		goto out;
	for (uint64_t i = 1; i <= 3; i++)
		ASSERT_OK(control_post(&c, 100 + i, 1, 0, NULL), "post");
	ASSERT_EQ(collect_acks(&c, acks, 3, 5000), 3, "acks 1-3");
	for (uint64_t i = 4; i <= 5; i++)
		ASSERT_OK(control_post(&c, 100 + i, 1, 0, NULL), "post");
	control_close(&c);

	/* It died half-way through posting seq 6: slot written, no head. */
	off = c.lay.cmds_off + 5 * sizeof(half);
	half.seq = 6;
	ASSERT_OK(poke(path, off, &half, sizeof(half)), "half post");

	/* Agent 2 continues the sequence; the half post is overwritten. */
	if (!ASSERT_OK(control_open(&c, path, geteuid(), ch.pid), "open 2"))
		goto out;
	ASSERT_EQ(c.cmd_head, 5, "continues from the page");
	ASSERT_OK(control_post(&c, 106, 1, 0, &seq), "post 6");
	ASSERT_EQ(seq, 6, "seq 6");
	send_byte(ch.go);
	n = collect_acks(&c, acks, 3, 5000);
	if (ASSERT_EQ(n, 3, "acks 4-6")) {
		for (int i = 0; i < 3; i++) {
			ASSERT_EQ(acks[i].cmd_seq, 4 + i, "seq");
			ASSERT_EQ(acks[i].entry_id, 104 + i, "entry");
			ASSERT_EQ(acks[i].bytes_freed, (4 + i) * 10, "bytes");
		}
	}
	/* The executor checks it saw 1..6 once each and never entry 999. */
	ASSERT_EQ(reap(&ch, 5000), 0, "executor verdict");
out:
	if (ch.pid)
		reap(&ch, 0);
	control_close(&c);
	unlink(path);
}

/* One malformed page per case; each must be refused for its own reason. */
struct refusal {
	const char *name;
	int (*spoil)(const char *path, struct ramcache *rc);
	int err;
	enum ctl_why why;
};

static int spoil_nothing(const char *path, struct ramcache *rc)
{
	return 0;
}

static int spoil_missing(const char *path, struct ramcache *rc)
{
	return unlink(path);
}

static int spoil_magic(const char *path, struct ramcache *rc)
{
	return poke64(path, OFF(magic), 0x4141414141414141ULL);
}

static int spoil_version(const char *path, struct ramcache *rc)
{
	return poke32(path, OFF(version), RAMCACHE_CTL_VERSION + 1);
}

static int spoil_entry_size(const char *path, struct ramcache *rc)
{
	return poke32(path, OFF(entry_size), 64);
}

static int spoil_ring(const char *path, struct ramcache *rc)
{
	return poke32(path, OFF(ring_size), 3);
}

static int spoil_offsets(const char *path, struct ramcache *rc)
{
	return poke64(path, OFF(cmds_off), 256 + 8 * 96 + 8);
}

static int spoil_grow(const char *path, struct ramcache *rc)
{
	return truncate(path, (off_t)ramcache_ctl_size(8, 4) + 4096);
}

static int spoil_shrink(const char *path, struct ramcache *rc)
{
	return truncate(path, 100);
}

static int spoil_total_size(const char *path, struct ramcache *rc)
{
	return poke64(path, OFF(total_size), ramcache_ctl_size(8, 4) + 1);
}

static int spoil_owner(const char *path, struct ramcache *rc)
{
	return chown(path, 65534, 65534);
}

static int spoil_uid_field(const char *path, struct ramcache *rc)
{
	return poke32(path, OFF(executor_uid), geteuid() + 1);
}

static int spoil_pid_field(const char *path, struct ramcache *rc)
{
	return poke32(path, OFF(executor_pid), (uint32_t)getpid() + 1);
}

static int spoil_mode(const char *path, struct ramcache *rc)
{
	return chmod(path, 0644);
}

static int spoil_links(const char *path, struct ramcache *rc)
{
	char other[160];

	snprintf(other, sizeof(other), "%s.link", path);
	return link(path, other);
}

/* The path becomes a symlink to a perfectly valid page. */
static int spoil_symlink(const char *path, struct ramcache *rc)
{
	char real[160];

	snprintf(real, sizeof(real), "%s.real", path);
	if (rename(path, real))
		return -1;
	return symlink(real, path);
}

static int spoil_fifo(const char *path, struct ramcache *rc)
{
	return unlink(path) || mkfifo(path, 0600);
}

static int spoil_dir(const char *path, struct ramcache *rc)
{
	return unlink(path) || mkdir(path, 0700);
}

static int spoil_cmd_done(const char *path, struct ramcache *rc)
{
	return poke64(path, OFF(cmd_done), 5);
}

static const struct refusal refusals[] = {
	{ "valid", spoil_nothing, 0, CTL_OK },
	{ "missing", spoil_missing, -ENOENT, CTL_ERR_SYS },
	{ "magic", spoil_magic, -EPROTO, CTL_ERR_MAGIC },
	{ "version", spoil_version, -EPROTONOSUPPORT, CTL_ERR_VERSION },
	{ "entry_size", spoil_entry_size, -EPROTO, CTL_ERR_RECORD_SIZE },
	{ "ring", spoil_ring, -EINVAL, CTL_ERR_GEOMETRY },
	{ "offsets", spoil_offsets, -EPROTO, CTL_ERR_OFFSETS },
	{ "grown", spoil_grow, -EINVAL, CTL_ERR_TOTAL_SIZE },
	{ "shrunk", spoil_shrink, -EINVAL, CTL_ERR_SIZE },
	{ "total_size", spoil_total_size, -EINVAL, CTL_ERR_TOTAL_SIZE },
	{ "owner", spoil_owner, -EPERM, CTL_ERR_OWNER },
	{ "uid_field", spoil_uid_field, -EPERM, CTL_ERR_UID },
	{ "pid_field", spoil_pid_field, -ESRCH, CTL_ERR_PID },
	{ "mode", spoil_mode, -EPERM, CTL_ERR_MODE },
	{ "links", spoil_links, -EPERM, CTL_ERR_LINKS },
	{ "symlink", spoil_symlink, -ELOOP, CTL_ERR_SYMLINK },
	{ "fifo", spoil_fifo, -EINVAL, CTL_ERR_NOT_REGULAR },
	{ "dir", spoil_dir, -EINVAL, CTL_ERR_NOT_REGULAR },
	{ "cmd_done", spoil_cmd_done, -EPROTO, CTL_ERR_PROTOCOL },
};

static void unlink_all(const char *path)
{
	char other[160];

	snprintf(other, sizeof(other), "%s.link", path);
	unlink(other);
	snprintf(other, sizeof(other), "%s.real", path);
	unlink(other);
	if (unlink(path))
		rmdir(path);
}

TEST(refusals)
{
	const char *seen[CTL_ERR_MAX] = { 0 };
	char path[128];

	page_path(path, sizeof(path), "refuse");
	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		const struct refusal *r = &refusals[i];
		struct ramcache *rc = NULL;
		struct ctl c;
		uint64_t t0;
		int err;

		if (r->spoil == spoil_owner && geteuid() != 0) {
			printf("# %s: needs root, skipped\n", r->name);
			continue;
		}
		if (!ASSERT_OK(ramcache_create(&rc, path, 8, 4), r->name))
			continue;
		if (!ASSERT_OK(r->spoil(path, rc), r->name))
			goto next;
		t0 = now_ms();
		err = control_open(&c, path, geteuid(), getpid());
		ASSERT_LE(now_ms() - t0, 1000, "open never hangs");
		if (!ASSERT_EQ(err, r->err, r->name) ||
		    !ASSERT_EQ(c.why, r->why, r->name))
			printf("# %s: %s\n", r->name,
			       control_strerror(&c, err));
		if (!err) {
			ASSERT_OK(control_check(&c), "valid page checks");
			control_close(&c);
		}
		ASSERT_EQ(c.fd, -1, "closed after refusal");
		seen[r->why] = control_strerror(&c, err);
next:
		ramcache_destroy(rc, false);
		unlink_all(path);
	}
	/* Every reason prints its own line. */
	for (int i = 0; i < CTL_ERR_MAX; i++)
		for (int j = i + 1; j < CTL_ERR_MAX; j++)
			if (seen[i] && seen[j])
				ASSERT_FALSE(strcmp(seen[i], seen[j]) == 0,
					     "distinct reasons");
	for (int i = 0; i < CTL_ERR_MAX; i++)
		for (int j = i + 1; j < CTL_ERR_MAX; j++)
			ASSERT_FALSE(strcmp(control_why_str(i),
					    control_why_str(j)) == 0,
				     "distinct strings");
}

TEST(truncated_after_open)
{
	struct ramcache *rc = NULL;
	struct ctl c = { .fd = -1 };
	struct ctl_entry ents[8];
	struct ctl_ack acks[4];
	struct ctl_exec ex;
	struct stat st;
	char path[128];

	page_path(path, sizeof(path), "trunc");
	if (!ASSERT_OK(ramcache_create(&rc, path, 8, 4), "create"))
		goto out;
	ASSERT_OK(publish(rc, 1, 10, "one"), "publish");
	if (!ASSERT_OK(control_open(&c, path, geteuid(), getpid()),
		       "control_open"))
		goto out;
	if (!ASSERT_OK(truncate(path, 0), "truncate"))
		goto out;
	/* Nothing below may SIGBUS; each reports the truncation. */
	ASSERT_EQ(control_check(&c), -ESTALE, "check");
	ASSERT_EQ(c.why, CTL_ERR_CHANGED, "changed size");
	ASSERT_EQ(control_read_entries(&c, ents, 8), -EIO, "entries");
	ASSERT_EQ(c.why, CTL_ERR_TRUNCATED, "truncated");
	ASSERT_EQ(control_read_exec(&c, &ex), -EIO, "exec side");
	ASSERT_EQ(control_read_acks(&c, acks, 4), -EIO, "acks");
	ASSERT_EQ(control_post(&c, 1, 1, 0, NULL), -EIO, "post");
	ASSERT_EQ(control_wake(&c), -EFAULT, "wake faults, no SIGBUS");
	/* A refused post must not have grown the file back. */
	ASSERT_OK(stat(path, &st), "stat");
	ASSERT_EQ(st.st_size, 0, "file untouched");
	ASSERT_EQ(c.cmd_head, 0, "nothing posted");
out:
	control_close(&c);
	/* The library's own mapping is past EOF now: destroy only unmaps. */
	ramcache_destroy(rc, true);
	unlink(path);
}

TEST(path_swapped)
{
	struct ramcache *rc = NULL;
	struct ctl c = { .fd = -1 };
	char path[128], real[160];

	page_path(path, sizeof(path), "swap");
	snprintf(real, sizeof(real), "%s.real", path);
	if (!ASSERT_OK(ramcache_create(&rc, path, 8, 4), "create"))
		goto out;
	if (!ASSERT_OK(control_open(&c, path, geteuid(), getpid()),
		       "control_open"))
		goto out;
	/* Same inode behind a symlink is still a swap. */
	ASSERT_OK(rename(path, real), "rename");
	ASSERT_OK(symlink(real, path), "symlink");
	ASSERT_EQ(control_check(&c), -ESTALE, "symlink swapped in");
	ASSERT_EQ(c.why, CTL_ERR_REPLACED, "replaced");
	unlink(path);
	ASSERT_OK(mkfifo(path, 0600), "mkfifo");
	c.why = CTL_OK;
	ASSERT_EQ(control_check(&c), -ESTALE, "fifo swapped in");
	unlink(path);
	c.why = CTL_OK;
	ASSERT_EQ(control_check(&c), -ESTALE, "removed");
	ASSERT_EQ(c.why, CTL_ERR_REPLACED, "removed");
out:
	control_close(&c);
	ramcache_destroy(rc, false);
	unlink(real);
	unlink(path);
}

struct late_post {
	struct ctl *c;
	int delay_ms;
};

static void *post_later(void *arg)
{
	struct late_post *lp = arg;

	usleep((useconds_t)lp->delay_ms * 1000);
	control_post(lp->c, 77, RAMCACHE_REASON_HEADROOM, ramcache_now_ns(),
		     NULL);
	return NULL;
}

TEST(wait_wakes_and_times_out)
{
	struct ramcache_command cmd;
	struct ramcache *rc = NULL;
	struct ctl c = { .fd = -1 };
	struct late_post lp = { &c, 100 };
	pthread_t th;
	char path[128];
	uint64_t t0, dt;

	page_path(path, sizeof(path), "wait");
	if (!ASSERT_OK(ramcache_create(&rc, path, 8, 4), "create"))
		goto out;
	if (!ASSERT_OK(control_open(&c, path, geteuid(), getpid()),
		       "control_open"))
		goto out;
	t0 = now_ms();
	ASSERT_EQ(ramcache_wait(rc, &cmd, 150), 0, "timeout");
	dt = now_ms() - t0;
	ASSERT_GE(dt, 140, "waited");
	ASSERT_LE(dt, 1000, "not much longer");

	/* Posted from another mapping of the file: the shared futex wakes. */
	if (!ASSERT_OK(pthread_create(&th, NULL, post_later, &lp), "thread"))
		goto out;
	t0 = now_ms();
	ASSERT_EQ(ramcache_wait(rc, &cmd, 10000), 1, "woken");
	dt = now_ms() - t0;
	pthread_join(th, NULL);
	ASSERT_LE(dt, 2000, "woken well before the timeout");
	ASSERT_EQ(cmd.entry_id, 77, "the posted command");
	ASSERT_GE(cmd.recv_ns, cmd.issue_ns, "recv after issue");
out:
	control_close(&c);
	ramcache_destroy(rc, true);
	unlink(path);
}

/* The parsers are fed garbage and every one-byte mutation of a header. */
TEST(parse_garbage)
{
	unsigned char good[sizeof(struct ramcache_ctl)], buf[sizeof(good)];
	uint64_t cap =
		ramcache_ctl_size(RAMCACHE_MAX_ENTRIES, RAMCACHE_MAX_RING);
	static const unsigned char vals[] = { 0, 1, 2, 3, 0x7f, 0x80, 0xff };
	struct ramcache *rc = NULL;
	struct ctl_layout lay;
	struct ctl_entry ents[4];
	struct ctl_ack ack;
	enum ctl_why why;
	unsigned int seed = 1;
	char path[128];
	int fd, accepted = 0;

	page_path(path, sizeof(path), "parse");
	if (!ASSERT_OK(ramcache_create(&rc, path, 8, 4), "create"))
		goto out;
	fd = open(path, O_RDONLY);
	if (!ASSERT_GE(fd, 0, "open") ||
	    !ASSERT_EQ(pread(fd, good, sizeof(good), 0), sizeof(good), "rd"))
		goto out;
	close(fd);
	ASSERT_OK(control_parse_header(good, sizeof(good), &lay, &why), "good");
	ASSERT_EQ(control_parse_header(good, sizeof(good) - 1, &lay, &why),
		  -EINVAL, "short");
	ASSERT_EQ(why, CTL_ERR_SIZE, "short why");

	for (size_t i = 0; i < sizeof(good); i++) {
		for (size_t v = 0; v < sizeof(vals); v++) {
			memcpy(buf, good, sizeof(buf));
			buf[i] = vals[v];
			if (control_parse_header(buf, sizeof(buf), &lay,
						 &why)) {
				ASSERT_NEQ(why, CTL_OK, "refusal has a why");
				continue;
			}
			accepted++;
			/* Accepted: the geometry must hold together. */
			if (!ASSERT_EQ(lay.acks_off + lay.ring_size * 48ULL,
				       lay.total_size, "layout") ||
			    !ASSERT_LE(lay.total_size, cap, "cap"))
				goto out;
		}
	}
	ASSERT_GE(accepted, 1, "untouched bytes still accepted");
	for (int i = 0; i < 20000; i++) {
		for (size_t j = 0; j < sizeof(buf); j++)
			buf[j] = (unsigned char)rand_r(&seed);
		if (i & 1) /* keep the magic so deeper checks run */
			memcpy(buf, good, 16);
		if (!control_parse_header(buf, sizeof(buf), &lay, &why))
			ASSERT_LE(lay.total_size, cap, "random accepted");
		if (control_parse_entries(buf, sizeof(buf), ents, 4) > 0)
			ASSERT_LE(strlen(ents[0].label), RAMCACHE_LABEL_LEN,
				  "label bounded");
		if (!control_parse_ack(buf, 48, 1ULL << 40, &ack))
			ASSERT_LE(ack.status, RAMCACHE_ACK_PINNED, "status");
	}
	ASSERT_EQ(control_parse_ack(buf, 47, ~0ULL, &ack), -EINVAL,
		  "short ack");
out:
	ramcache_destroy(rc, true);
	unlink(path);
}

TEST_MAIN()
