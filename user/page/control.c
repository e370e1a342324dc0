// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent's I/O on an executor's control page: open and validate, read
 * with pread, write with pwrite, wake with a shared futex. Parsing is in
 * control_parse.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "page/control.h"

/* How often a snapshot retries a busy (odd or moving) entry table. */
#define CTL_SNAPSHOT_TRIES 16

#define OFF(field)	   offsetof(struct ramcache_ctl, field)

static int fail(struct ctl *c, enum ctl_why why, int err)
{
	c->why = why;
	return err;
}

/* A short transfer means the file shrank under us: never trust the rest. */
static int io_at(struct ctl *c, void *buf, size_t len, uint64_t off, bool write)
{
	ssize_t n;

	do {
		n = write ? pwrite(c->fd, buf, len, (off_t)off)
			  : pread(c->fd, buf, len, (off_t)off);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return fail(c, CTL_ERR_SYS, -errno);
	if ((size_t)n != len)
		return fail(c, CTL_ERR_TRUNCATED, -EIO);
	return 0;
}

static int read_at(struct ctl *c, void *buf, size_t len, uint64_t off)
{
	return io_at(c, buf, len, off, false);
}

static int write_at(struct ctl *c, const void *buf, size_t len, uint64_t off)
{
	return io_at(c, (void *)buf, len, off, true);
}

static int write_u64(struct ctl *c, uint64_t v, uint64_t off)
{
	return write_at(c, &v, sizeof(v), off);
}

const char *control_strerror(const struct ctl *c, int err)
{
	if (c->why != CTL_OK && c->why != CTL_ERR_SYS)
		return control_why_str(c->why);
	return strerror(err < 0 ? -err : err);
}

static int check_type(struct ctl *c, const struct stat *st)
{
	if (S_ISLNK(st->st_mode))
		return fail(c, CTL_ERR_SYMLINK, -ELOOP);
	if (!S_ISREG(st->st_mode))
		return fail(c, CTL_ERR_NOT_REGULAR, -EINVAL);
	return 0;
}

static int check_file(struct ctl *c, const struct stat *st, uid_t uid)
{
	uint64_t cap =
		ramcache_ctl_size(RAMCACHE_MAX_ENTRIES, RAMCACHE_MAX_RING);

	if (st->st_uid != uid)
		return fail(c, CTL_ERR_OWNER, -EPERM);
	if (st->st_mode & (S_ISUID | S_ISGID | S_ISVTX | S_IRWXG | S_IRWXO))
		return fail(c, CTL_ERR_MODE, -EPERM);
	if (st->st_nlink != 1)
		return fail(c, CTL_ERR_LINKS, -EPERM);
	if (st->st_size < (off_t)sizeof(struct ramcache_ctl) ||
	    (uint64_t)st->st_size > cap)
		return fail(c, CTL_ERR_SIZE, -EINVAL);
	return 0;
}

/*
 * Look at the path with O_PATH first so nothing but a regular file is ever
 * really opened (a FIFO or device open can block or have side effects),
 * then reopen that very inode through /proc/self/fd.
 */
static int open_regular(struct ctl *c, const char *path, struct stat *st)
{
	char proc[64];
	struct stat pst;
	int pfd, fd, err;

	pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return fail(c, CTL_ERR_SYS, -errno);
	if (fstat(pfd, &pst)) {
		err = fail(c, CTL_ERR_SYS, -errno);
		goto out;
	}
	err = check_type(c, &pst);
	if (err)
		goto out;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) /* no /proc: same checks by path */
		fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
					O_CLOEXEC);
	if (fd < 0) {
		err = fail(c, CTL_ERR_SYS, -errno);
		goto out;
	}
	if (fstat(fd, st)) {
		err = fail(c, CTL_ERR_SYS, -errno);
	} else if (st->st_dev != pst.st_dev || st->st_ino != pst.st_ino) {
		err = fail(c, CTL_ERR_REPLACED, -ESTALE);
	} else {
		c->fd = fd;
		goto out;
	}
	close(fd);
out:
	close(pfd);
	return err;
}

/* Pick up where the previous agent (if any) left the rings. */
static int read_rings(struct ctl *c)
{
	struct ctl_exec e;
	char buf[OFF(agent_heartbeat_ns) - OFF(exec_heartbeat_ns)];
	int err;

	err = read_at(c, &c->cmd_head, sizeof(c->cmd_head), OFF(cmd_head));
	if (!err)
		err = read_at(c, &c->cmd_futex, sizeof(c->cmd_futex),
			      OFF(cmd_futex));
	if (!err)
		err = read_at(c, buf, sizeof(buf), OFF(exec_heartbeat_ns));
	if (err)
		return err;
	control_parse_exec(buf, sizeof(buf), &e);
	if (e.cmd_done > c->cmd_head)
		return fail(c, CTL_ERR_PROTOCOL, -EPROTO);
	c->ack_seen = e.ack_head;
	return 0;
}

static void ctl_init(struct ctl *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* The header and the rings of an open, type-checked file of size @st. */
static int adopt(struct ctl *c, const char *path, const struct stat *st,
		 const struct ctl_target *t)
{
	unsigned char hdr[sizeof(struct ramcache_ctl)];
	int err;

	err = read_at(c, hdr, sizeof(hdr), 0);
	if (err)
		return err;
	err = control_parse_header(hdr, sizeof(hdr), &c->lay, &c->why);
	if (err)
		return err;
	if (c->lay.total_size != (uint64_t)st->st_size)
		return fail(c, CTL_ERR_TOTAL_SIZE, -EINVAL);
	if (c->lay.executor_uid != (uint32_t)t->ns_uid)
		return fail(c, CTL_ERR_UID, -EPERM);
	if (t->ns_pid > 0 && c->lay.executor_pid != (uint32_t)t->ns_pid)
		return fail(c, CTL_ERR_PID, -ESRCH);
	err = read_rings(c);
	if (err)
		return err;

	c->dev = st->st_dev;
	c->ino = st->st_ino;
	c->path = strdup(path);
	c->table = malloc((size_t)c->lay.max_entries *
			  sizeof(struct ramcache_ctl_entry));
	if (!c->path || !c->table)
		return fail(c, CTL_ERR_SYS, -ENOMEM);
	err = control_lock_map(&c->lock, c->fd);
	if (err)
		return fail(c, CTL_ERR_SYS, err);
	return 0;
}

int control_open_at(struct ctl *c, const char *path, const struct ctl_target *t)
{
	struct stat st;
	int err;

	ctl_init(c);
	err = open_regular(c, path, &st);
	if (err)
		return err;
	err = check_file(c, &st, t->uid);
	if (!err)
		err = adopt(c, path, &st, t);
	if (err)
		control_close(c);
	return err;
}

int control_open(struct ctl *c, const char *path, uid_t expect_uid,
		 pid_t expect_pid)
{
	struct ctl_target t = {
		.pid = expect_pid,
		.ns_pid = expect_pid,
		.uid = expect_uid,
		.ns_uid = expect_uid,
	};

	return control_open_at(c, path, &t);
}

/*
 * What makes a descriptor a page we may map and write: a memfd (tmpfs or
 * hugetlbfs, the only files with seals) that cannot shrink, so no access
 * of ours or the executor's can SIGBUS; the seal also tells it from any
 * other tmpfs file, which is born with F_SEAL_SEAL and nothing else.
 */
static int check_memfd(struct ctl *c, const struct stat *st, uid_t uid)
{
	uint64_t cap =
		ramcache_ctl_size(RAMCACHE_MAX_ENTRIES, RAMCACHE_MAX_RING);
	struct statfs sfs;
	int seals, fl;

	if (!S_ISREG(st->st_mode))
		return fail(c, CTL_ERR_NOT_REGULAR, -EINVAL);
	if (fstatfs(c->fd, &sfs))
		return fail(c, CTL_ERR_SYS, -errno);
	if (sfs.f_type != TMPFS_MAGIC && sfs.f_type != HUGETLBFS_MAGIC)
		return fail(c, CTL_ERR_NOT_MEMFD, -EINVAL);
	seals = fcntl(c->fd, F_GET_SEALS);
	if (seals < 0)
		return fail(c, CTL_ERR_NOT_MEMFD, -EINVAL);
	if (!(seals & F_SEAL_SHRINK))
		return fail(c, CTL_ERR_SEALS, -EPERM);
	fl = fcntl(c->fd, F_GETFL);
	if (fl < 0)
		return fail(c, CTL_ERR_SYS, -errno);
	if ((fl & O_ACCMODE) != O_RDWR)
		return fail(c, CTL_ERR_ACCESS, -EACCES);
	if (st->st_uid != uid)
		return fail(c, CTL_ERR_OWNER, -EPERM);
	if (st->st_size < (off_t)sizeof(struct ramcache_ctl) ||
	    (uint64_t)st->st_size > cap)
		return fail(c, CTL_ERR_SIZE, -EINVAL);
	return 0;
}

int control_open_memfd(struct ctl *c, int fd, const char *link,
		       const struct ctl_target *t)
{
	struct stat st;
	int err;

	ctl_init(c);
	c->fd = fd;
	c->memfd = true;
	if (fstat(fd, &st))
		err = fail(c, CTL_ERR_SYS, -errno);
	else
		err = check_memfd(c, &st, t->uid);
	if (!err)
		err = adopt(c, link, &st, t);
	if (err)
		control_close(c);
	return err;
}

void control_close(struct ctl *c)
{
	control_lock_drop(&c->lock, -1);
	if (c->fd >= 0)
		close(c->fd);
	free(c->table);
	free(c->path);
	c->fd = -1;
	c->table = NULL;
	c->path = NULL;
}

int control_check(struct ctl *c)
{
	struct stat st;

	if (fstat(c->fd, &st))
		return fail(c, CTL_ERR_SYS, -errno);
	if ((uint64_t)st.st_size != c->lay.total_size)
		return fail(c, CTL_ERR_CHANGED, -ESTALE);
	if (c->memfd) {
		/* Closed or replaced by the executor, or the executor is gone. */
		if (stat(c->path, &st) || st.st_dev != c->dev ||
		    st.st_ino != c->ino)
			return fail(c, CTL_ERR_REPLACED, -ESTALE);
		return 0;
	}
	if (st.st_nlink == 0)
		return fail(c, CTL_ERR_REPLACED, -ESTALE);
	/* Renamed over, unlinked, or swapped for a symlink or FIFO. */
	if (lstat(c->path, &st) || st.st_dev != c->dev || st.st_ino != c->ino)
		return fail(c, CTL_ERR_REPLACED, -ESTALE);
	return 0;
}

int control_take_lock(struct ctl *c)
{
	return control_lock_take(&c->lock, c->fd);
}

void control_detach(struct ctl *c)
{
	struct ctl_agent gone = { 0 };
	struct stat st;

	/* never write into a file that is no longer the page it was */
	if (!fstat(c->fd, &st) && (uint64_t)st.st_size == c->lay.total_size &&
	    !control_write_agent(c, &gone)) {
		control_write_expect_seen(c, 0);
		control_lock_drop(&c->lock, c->fd);
	}
	control_close(c);
}

int control_read_exec(struct ctl *c, struct ctl_exec *out)
{
	char buf[OFF(agent_heartbeat_ns) - OFF(exec_heartbeat_ns)];
	int err;

	err = read_at(c, buf, sizeof(buf), OFF(exec_heartbeat_ns));
	if (err)
		return err;
	return control_parse_exec(buf, sizeof(buf), out);
}

/*
 * Seqcount reader over three preads. Each is a separate syscall, so they
 * happen in order; the executor orders its stores with release fences.
 */
int control_read_entries_window(struct ctl *c, uint32_t first, uint32_t count,
				struct ctl_entry *out, uint32_t *nr_slots)
{
	uint32_t pair[2], seq2, nr, n;
	size_t len;
	int err;

	for (int i = 0; i < CTL_SNAPSHOT_TRIES; i++) {
		if (i)
			sched_yield();
		err = read_at(c, pair, sizeof(pair), OFF(entries_seq));
		if (err)
			return err;
		if (pair[0] & 1)
			continue;
		nr = pair[1];
		if (nr > c->lay.max_entries)
			nr = c->lay.max_entries;
		*nr_slots = nr;
		n = first < nr ? nr - first : 0;
		if (n > count)
			n = count;
		len = (size_t)n * sizeof(struct ramcache_ctl_entry);
		err = n ? read_at(c, c->table, len,
				  c->lay.entries_off +
					  (uint64_t)first *
						  sizeof(struct ramcache_ctl_entry))
			: 0;
		if (!err)
			err = read_at(c, &seq2, sizeof(seq2), OFF(entries_seq));
		if (err)
			return err;
		if (seq2 == pair[0])
			return (int)control_parse_entries(c->table, len, out,
							  count);
	}
	return -EAGAIN;
}

int control_read_entries(struct ctl *c, struct ctl_entry *out, uint32_t cap)
{
	uint32_t nr;

	return control_read_entries_window(c, 0, cap, out, &nr);
}

int control_write_agent(struct ctl *c, const struct ctl_agent *a)
{
	struct ramcache_ctl h;
	size_t len = OFF(cmd_head) - OFF(agent_heartbeat_ns);

	h.agent_heartbeat_ns = a->heartbeat_ns;
	h.agent_pid = a->pid;
	h.level = a->level;
	h.headroom_bytes = a->headroom_bytes;
	h.target_bytes = a->target_bytes;
	return write_at(c, (char *)&h + OFF(agent_heartbeat_ns), len,
			OFF(agent_heartbeat_ns));
}

int control_write_expect_seen(struct ctl *c, uint64_t ns)
{
	return write_u64(c, ns, OFF(expect_seen_ns));
}

int control_wake(struct ctl *c)
{
	void *word = control_lock_addr(&c->lock, OFF(cmd_futex));

	/* Shared futex: the kernel keys it by inode and offset. */
	if (syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0) < 0)
		return -errno;
	return 0;
}

/*
 * Slot body, then its seq, then cmd_head, then the futex word: each a
 * separate pwrite, in the order the executor reads them back.
 */
int control_post(struct ctl *c, uint64_t entry_id, uint32_t reason,
		 uint64_t issue_ns, uint64_t *seq)
{
	struct ramcache_ctl_cmd cmd = {
		.entry_id = entry_id,
		.issue_ns = issue_ns,
		.reason = reason,
	};
	uint64_t next = c->cmd_head + 1, off;
	struct ctl_exec e;
	int err;

	err = control_read_exec(c, &e);
	if (err)
		return err;
	if (e.cmd_done > c->cmd_head)
		return fail(c, CTL_ERR_PROTOCOL, -EPROTO);
	if (c->cmd_head - e.cmd_done >= c->lay.ring_size)
		return -EBUSY;

	off = c->lay.cmds_off +
	      ((next - 1) & (c->lay.ring_size - 1)) * sizeof(cmd);
	cmd.seq = next;
	err = write_u64(c, 0, off);
	if (!err)
		err = write_at(c, (char *)&cmd + sizeof(cmd.seq),
			       sizeof(cmd) - sizeof(cmd.seq),
			       off + sizeof(cmd.seq));
	if (!err)
		err = write_u64(c, next, off);
	if (!err)
		err = write_u64(c, next, OFF(cmd_head));
	if (err)
		return err;
	c->cmd_head = next;
	c->cmd_futex++;
	err = write_at(c, &c->cmd_futex, sizeof(c->cmd_futex), OFF(cmd_futex));
	if (err)
		return err;
	if (seq)
		*seq = next;
	/* A failed wake is not a failed post: the executor polls too. */
	control_wake(c);
	return 0;
}

/* Copy slot @n if its seq is the same before and after: a whole ack. */
static int read_ack(struct ctl *c, uint64_t n, struct ctl_ack *out)
{
	uint64_t off =
		c->lay.acks_off + ((n - 1) & (c->lay.ring_size - 1)) *
					  sizeof(struct ramcache_ctl_ack);
	unsigned char slot[sizeof(struct ramcache_ctl_ack)];
	uint64_t s1, s2;
	int err;

	err = read_at(c, &s1, sizeof(s1), off);
	if (!err)
		err = read_at(c, slot, sizeof(slot), off);
	if (!err)
		err = read_at(c, &s2, sizeof(s2), off);
	if (err)
		return err;
	if (control_parse_ack(slot, sizeof(slot), c->cmd_head, out) ||
	    s1 != out->cmd_seq || s2 != out->cmd_seq)
		return -EAGAIN;
	return 0;
}

int control_read_acks(struct ctl *c, struct ctl_ack *out, uint32_t cap)
{
	uint64_t head;
	uint32_t n = 0;
	int err;

	err = read_at(c, &head, sizeof(head), OFF(ack_head));
	if (err)
		return err;
	if (head < c->ack_seen) { /* rewound: resync, nothing to trust */
		c->ack_seen = head;
		return 0;
	}
	if (head - c->ack_seen > c->lay.ring_size) {
		c->acks_lost += head - c->lay.ring_size - c->ack_seen;
		c->ack_seen = head - c->lay.ring_size;
	}
	while (c->ack_seen < head && n < cap) {
		err = read_ack(c, c->ack_seen + 1, &out[n]);
		if (err == -EAGAIN)
			c->acks_bad++;
		else if (err)
			return err;
		else
			n++;
		c->ack_seen++;
	}
	return (int)n;
}
