/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The agent's side of the control page. The agent runs as root and the page
 * belongs to an unprivileged executor, so every byte of it is untrusted:
 * the page is read with pread() into private buffers (a truncated file gives
 * a short read, never SIGBUS, and nothing is read twice), parsed by pure
 * functions, and written with pwrite(). The only mapping is the first page,
 * which the kernel alone touches: FUTEX_WAKE, and agent_lock at our death
 * (control_lock.h).
 *
 * Every function returns 0 (or a count) on success and -errno on failure.
 * When a page is refused, c->why says why; control_strerror() gives the line to
 * print. A refused page must be closed; -EAGAIN and -EBUSY are transient.
 */
#ifndef RAMCACHE_USER_CONTROL_H
#define RAMCACHE_USER_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "page/control_lock.h"
#include "ramcache/control.h"

/* Why a page was refused or dropped. */
/*
 * Descriptors of a process looked through for its page, at most: each is
 * a readlink in /proc, and a process may hold a million. One holding more
 * is refused (-EMFILE).
 */
#define CONTROL_MAX_FDS 4096

enum ctl_why {
	CTL_OK = 0,
	CTL_ERR_SYS,	     /* a syscall failed: see the errno returned */
	CTL_ERR_SYMLINK,     /* the path is a symlink */
	CTL_ERR_NOT_REGULAR, /* FIFO, directory, device, socket */
	CTL_ERR_OWNER,	     /* not owned by the expected uid */
	CTL_ERR_MODE,	     /* group/other access or special bits */
	CTL_ERR_LINKS,	     /* more than one hard link */
	CTL_ERR_SIZE,	     /* file size below the header or above the cap */
	CTL_ERR_MAGIC,
	CTL_ERR_VERSION,
	CTL_ERR_RECORD_SIZE, /* header/entry/cmd/ack size differ from ours */
	CTL_ERR_GEOMETRY,    /* max_entries or ring_size out of range */
	CTL_ERR_TOTAL_SIZE,  /* total_size != geometry or != file size */
	CTL_ERR_OFFSETS,     /* sections not where the sizes put them */
	CTL_ERR_UID,	     /* executor_uid != the file's owner */
	CTL_ERR_PID,	     /* executor_pid != the process we watch */
	CTL_ERR_TRUNCATED,   /* a read came back short */
	CTL_ERR_CHANGED,     /* the file changed size after open */
	CTL_ERR_REPLACED,    /* the path now names another file, or none */
	CTL_ERR_PROTOCOL,    /* executor state impossible (cmd_done > head) */
	CTL_ERR_NOT_MEMFD,   /* discovered descriptor is no sealable memfd */
	CTL_ERR_SEALS,	     /* memfd without F_SEAL_SHRINK */
	CTL_ERR_ACCESS,	     /* descriptor not open for reading and writing */
	CTL_ERR_MAX,
};

/*
 * The process whose page it is, seen from the agent (pid, uid: what /proc
 * shows here) and from inside its own namespaces (ns_pid, ns_uid: what the
 * executor writes in the page's header).
 */
struct ctl_target {
	pid_t pid;
	pid_t ns_pid; /* 0: any */
	uid_t uid;
	uid_t ns_uid;
};

/* Geometry of a page that passed control_parse_header(). */
struct ctl_layout {
	uint64_t total_size;
	uint64_t entries_off;
	uint64_t cmds_off;
	uint64_t acks_off;
	uint32_t max_entries;
	uint32_t ring_size;
	uint32_t executor_pid;
	uint32_t executor_uid;
};

/* The executor's side of the header, as read (not yet trusted). */
struct ctl_exec {
	uint64_t heartbeat_ns;
	uint64_t generation;
	uint64_t cmd_done;
	uint64_t ack_head;
	uint64_t expect_bytes; /* an announced allocation, see announce.h */
	uint64_t expect_ns;
	uint32_t entries_seq;
	uint32_t nr_entries;
};

/* The agent's side of the header. heartbeat_ns 0 tells "no agent". */
struct ctl_agent {
	uint64_t heartbeat_ns;
	uint32_t pid;
	uint32_t level; /* enum ramcache_level */
	uint64_t headroom_bytes;
	uint64_t target_bytes;
};

/* A sanitized entry: id != 0, label NUL-terminated and printable. */
struct ctl_entry {
	uint64_t id;
	uint64_t bytes;
	uint64_t last_use_ns;
	uint64_t used_generation;
	uint64_t cost_ns;
	uint32_t flags;
	char label[RAMCACHE_LABEL_LEN + 1];
};

/* A whole ack: cmd_seq in [1, our cmd_head], status a known value. */
struct ctl_ack {
	uint64_t cmd_seq;
	uint64_t entry_id;
	uint64_t bytes_freed;
	uint64_t recv_ns;
	uint64_t ack_ns;
	uint32_t status; /* enum ramcache_status */
};

struct ctl {
	int fd;
	struct ctl_lock lock; /* agent_lock; its map serves FUTEX_WAKE too */
	char *path; /* the file, or /proc/<pid>/fd/<n> of a discovered memfd */
	bool memfd; /* found in the executor's fd table, not at a path */
	dev_t dev;
	ino_t ino;
	struct ctl_layout lay;
	void *table;	   /* private copy of the entry table */
	uint64_t cmd_head; /* seq of the last command posted */
	uint32_t cmd_futex;
	uint64_t ack_seen;  /* acks [1, ack_seen] have been read */
	uint64_t acks_lost; /* overwritten before we read them */
	uint64_t acks_bad;  /* torn or malformed, skipped */
	enum ctl_why why;
};

/* Pure parsers: no I/O, any bytes in, safe for a fuzzer. */

/* 0 and *out filled, or -errno with *why set. */
int control_parse_header(const void *buf, size_t len, struct ctl_layout *out,
			 enum ctl_why *why);
/* @buf holds the 64-byte executor side; -EINVAL if @len is short. */
int control_parse_exec(const void *buf, size_t len, struct ctl_exec *out);
/* Copies entries with id != 0 from @len bytes of table; returns how many. */
uint32_t control_parse_entries(const void *buf, size_t len,
			       struct ctl_entry *out, uint32_t cap);
/* One ack slot; -EINVAL if empty or malformed or cmd_seq > @max_seq. */
int control_parse_ack(const void *buf, size_t len, uint64_t max_seq,
		      struct ctl_ack *out);
/* True if @e's heartbeat is younger than RAMCACHE_HEARTBEAT_TIMEOUT_NS. */
bool control_exec_alive(const struct ctl_exec *e, uint64_t now_ns);
/* One line for @why. */
const char *control_why_str(enum ctl_why why);
/*
 * True if a page refused for @why may be one still being made: a memfd is
 * sized, sealed and given its header (the magic last) after
 * memfd_create(), so a look in between sees these.
 */
bool control_why_unfinished(enum ctl_why why);
/* The reason for @err on @c: c->why's line, or strerror(-err). */
const char *control_strerror(const struct ctl *c, int err);

/* True if a /proc/<pid>/fd link text names a ramcache memfd. */
bool control_memfd_link(const char *link);
/* The last (innermost) pid of the "NSpid:" line of a status file. */
int control_parse_nspid(const char *status, pid_t *inner);
/* @outer uid through a uid_map's "inner outer count" lines; -ENOENT. */
int control_parse_uid_map(const char *map, uint32_t outer, uint32_t *inner);

/* How an executor ended (control_end.c). */
struct ctl_exit {
	bool exiting;  /* exiting, a zombie, or gone */
	bool has_code; /* @code is known */
	int code; /* wait status: signal in the low 7 bits, else status << 8 */
};
/* The exit fields of a /proc/<pid>/stat text; -EINVAL if it is not one. */
int control_parse_stat_exit(const char *stat, struct ctl_exit *out);
/*
 * How process @pid (@pidfd, or -1) stands: from @proc/<pid>/stat, or when
 * it is gone, from the pidfd (Linux 6.15 keeps the exit code of a reaped
 * process there). Returns 0.
 */
int control_exit_read(const char *proc, pid_t pid, int pidfd,
		      struct ctl_exit *out);
/* "killed" (*sig set) or "exited" (*status set, or -1 when unknown). */
const char *control_exit_reason(const struct ctl_exit *e, int *sig,
				int *status);
/*
 * The memfd page @c is still open in @pid under another descriptor (a
 * dup, Python's mmap): follow that one (c->path). -ENOENT if none.
 */
int control_refind(struct ctl *c, const char *proc, pid_t pid);
/* True if the /proc/<pid>/fd/<n> @link names a ramcache memfd. */
bool control_link_is_page(const char *link);

/* I/O on one page. */

/*
 * Fill @t for process @pid running as @uid (both as the agent sees them)
 * from @proc/<pid>/status and uid_map. -ESRCH if the process is gone.
 */
int control_target_read(const char *proc, pid_t pid, uid_t uid,
			struct ctl_target *t);
/*
 * Find the page of @t among its open descriptors (link text starting
 * "/memfd:ramcache"), copy the descriptor with pidfd_getfd() and open it as
 * control_open_memfd() does; the first that passes wins. -ENOENT if there is
 * no candidate, -EMFILE once CONTROL_MAX_FDS were looked at without a page;
 * otherwise the last refusal, with c->why set.
 */
int control_find(struct ctl *c, const char *proc, const struct ctl_target *t);
/*
 * Validate and adopt @fd (closed on failure), a descriptor taken from the
 * executor: a regular file on tmpfs/hugetlbfs whose seals include
 * F_SEAL_SHRINK, open read-write, owned by t->uid; then the same header
 * checks as control_open. @link is the /proc/<pid>/fd/<n> it came from, which
 * control_check() watches for the executor closing or replacing it.
 */
int control_open_memfd(struct ctl *c, int fd, const char *link,
		       const struct ctl_target *t);
/* control_open() for @t: the file owner is t->uid, the header says t->ns_*. */
int control_open_at(struct ctl *c, const char *path,
		    const struct ctl_target *t);

/*
 * Open and validate the page at @path, written by process @expect_pid
 * (0: any) running as @expect_uid. Continues the command sequence found in
 * the page, so a restarted agent never reuses a seq; acks written before
 * the open are skipped. On failure c->why is set and c needs no close.
 */
int control_open(struct ctl *c, const char *path, uid_t expect_uid,
		 pid_t expect_pid);
void control_close(struct ctl *c);
/*
 * Take agent_lock (before the first heartbeat): from then on the kernel
 * tells the executor at once if this process dies. -errno when it cannot;
 * the heartbeat still does, 1.5 s later.
 */
int control_take_lock(struct ctl *c);
/*
 * A clean detach: the agent side zeroed (heartbeat 0: no agent),
 * agent_lock 0 and its waiters woken, then closed.
 */
void control_detach(struct ctl *c);
/* Cheap per-cycle check: -ESTALE if truncated, resized or replaced. */
int control_check(struct ctl *c);
int control_read_exec(struct ctl *c, struct ctl_exec *out);
/*
 * Consistent copy of the entry table (seqcount, bounded retries): the
 * number of entries written to @out, or -EAGAIN if the executor kept the
 * table busy (or odd forever).
 */
int control_read_entries(struct ctl *c, struct ctl_entry *out, uint32_t cap);
/*
 * The same for slots [@first, @first + @count) of the table only (a big
 * table read a window at a time); *@nr_slots gets the table's nr_entries.
 * @out holds @count entries.
 */
int control_read_entries_window(struct ctl *c, uint32_t first, uint32_t count,
				struct ctl_entry *out, uint32_t *nr_slots);
int control_write_agent(struct ctl *c, const struct ctl_agent *a);
/* expect_seen_ns: the executor's announcement stamped @ns is counted. */
int control_write_expect_seen(struct ctl *c, uint64_t ns);
/*
 * Post "evict @entry_id" and wake the executor; *seq gets its seq.
 * -EBUSY when the ring is full (the executor has not taken older ones).
 */
int control_post(struct ctl *c, uint64_t entry_id, uint32_t reason,
		 uint64_t issue_ns, uint64_t *seq);
/* FUTEX_WAKE the executor; -EFAULT (not SIGBUS) if the page is gone. */
int control_wake(struct ctl *c);
/*
 * Up to @cap new acks, oldest first. An ack may be returned twice or name
 * a command this agent did not post (an earlier agent's): match by cmd_seq
 * against outstanding commands and drop the rest.
 */
int control_read_acks(struct ctl *c, struct ctl_ack *out, uint32_t cap);

#endif /* RAMCACHE_USER_CONTROL_H */
