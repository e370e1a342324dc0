// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The command ring (agent -> executor) and the ack ring (executor -> agent).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "probes.h"

#ifndef __NR_futex_waitv
#define __NR_futex_waitv 449 /* the same number on every architecture */
#endif

/* Mark seq consumed; the page copy lets the agent see the ring drain. */
static void consume(struct ramcache *rc, uint64_t seq)
{
	rc->cmd_done = seq;
	rc_store_release(&rc->ctl->cmd_done, seq);
}

/*
 * Take command cmd_done + 1 if the agent has posted it. A slot that does
 * not carry the seq we expect (torn, overwritten, or a crashed agent) is
 * skipped: that command is lost, never run twice or half-read. Each call
 * looks at no more than ring_size + 1 slots.
 */
static int take(struct ramcache *rc, struct ramcache_command *cmd)
{
	uint64_t ring = rc->ring_size;

	for (uint64_t n = 0; n <= ring; n++) {
		uint64_t next = rc->cmd_done + 1;
		uint64_t head = rc_load_acquire(&rc->ctl->cmd_head);
		struct ramcache_ctl_cmd *slot;
		uint64_t s1, s2;

		/* next wrapped past the last seq: nothing is ever posted again */
		if (head < next || !next)
			return 0;
		/* The agent lapped us: the older slots are gone. */
		if (head - next >= ring) {
			consume(rc, head - ring);
			continue;
		}
		slot = &rc->cmds[(next - 1) & (ring - 1)];
		s1 = rc_load_acquire(&slot->seq);
		cmd->entry_id = rc_load(&slot->entry_id);
		cmd->issue_ns = rc_load(&slot->issue_ns);
		cmd->reason = rc_load(&slot->reason);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = rc_load(&slot->seq);
		consume(rc, next);
		if (s1 != next || s2 != next)
			continue;
		cmd->seq = next;
		cmd->recv_ns = ramcache_now_ns();
		RC_PROBE3(command, cmd->seq, cmd->entry_id, cmd->issue_ns);
		return 1;
	}
	return 0;
}

RC_API int ramcache_poll(struct ramcache *rc, struct ramcache_command *cmd)
{
	int ret;

	if (!rc || !cmd)
		return -EINVAL;
	pthread_mutex_lock(&rc->cmd_lock);
	ret = take(rc, cmd);
	pthread_mutex_unlock(&rc->cmd_lock);
	return ret;
}

/* Before futex_waitv (Linux 5.16) the agent's lock is looked at this often. */
#define LOCK_POLL_NS (10 * 1000000ULL)

static int no_waitv; /* the kernel has no futex_waitv */

/* CLOCK_MONOTONIC after @timeout_ms; 0 (never) for a negative one. */
static uint64_t deadline_of(int timeout_ms)
{
	if (timeout_ms < 0)
		return 0;
	return ramcache_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
}

/* Held by a live agent: a thread id, and the kernel has not marked it. */
static bool lock_held(uint32_t lock)
{
	return (lock & RAMCACHE_LOCK_TID_MASK) &&
	       !(lock & RAMCACHE_LOCK_OWNER_DIED);
}

/*
 * The kernel wakes one waiter when the agent dies: wake the others of this
 * process too (a wake writes nothing).
 */
static void pass_on(struct ramcache *rc, uint32_t lock)
{
	if (lock & RAMCACHE_LOCK_OWNER_DIED)
		syscall(SYS_futex, &rc->ctl->agent_lock, FUTEX_WAKE, INT_MAX,
			NULL, NULL, 0);
}

/*
 * Sleep until the word at @a is no longer @va, or the one at @b (when not
 * NULL) no longer @vb, or CLOCK_MONOTONIC reaches @deadline (0: never).
 * Shared futexes: the agent is another process with its own mapping.
 * Returns 0 or -errno; -EAGAIN, -EINTR and -ETIMEDOUT are normal.
 */
static int sleep_on(uint32_t *a, uint32_t va, uint32_t *b, uint32_t vb,
		    uint64_t deadline)
{
	struct futex_waitv w[2] = {
		{ .val = va, .uaddr = (uintptr_t)a, .flags = FUTEX_32 },
		{ .val = vb, .uaddr = (uintptr_t)b, .flags = FUTEX_32 },
	};
	struct timespec ts;

	if (b && !__atomic_load_n(&no_waitv, __ATOMIC_RELAXED)) {
		ts.tv_sec = (time_t)(deadline / 1000000000ULL);
		ts.tv_nsec = (long)(deadline % 1000000000ULL);
		if (syscall(__NR_futex_waitv, w, 2, 0, deadline ? &ts : NULL,
			    CLOCK_MONOTONIC) >= 0)
			return 0;
		if (errno != ENOSYS)
			return -errno;
		__atomic_store_n(&no_waitv, 1, __ATOMIC_RELAXED);
	}
	if (b && rc_load_acquire(b) != vb)
		return -EAGAIN;
	if (b) { /* look at @b again soon */
		uint64_t soon = ramcache_now_ns() + LOCK_POLL_NS;

		if (!deadline || soon < deadline)
			deadline = soon;
	}
	ts.tv_sec = (time_t)(deadline / 1000000000ULL);
	ts.tv_nsec = (long)(deadline % 1000000000ULL);
	/* FUTEX_WAIT_BITSET: an absolute CLOCK_MONOTONIC deadline */
	if (syscall(SYS_futex, a, FUTEX_WAIT_BITSET, va, deadline ? &ts : NULL,
		    NULL, FUTEX_BITSET_MATCH_ANY) == 0)
		return 0;
	return -errno;
}

static bool normal(int ret)
{
	return !ret || ret == -EAGAIN || ret == -EINTR || ret == -ETIMEDOUT;
}

RC_API int ramcache_wait(struct ramcache *rc, struct ramcache_command *cmd,
			 int timeout_ms)
{
	uint32_t val, lock, lock0;
	uint64_t deadline;
	bool watch;
	int ret;

	if (!rc || !cmd)
		return -EINVAL;
	deadline = deadline_of(timeout_ms);
	/* the agent attached now: its death ends the wait */
	lock0 = rc_load_acquire(&rc->ctl->agent_lock);
	watch = lock_held(lock0);
	for (;;) {
		/*
		 * Read the futex word before looking at the ring: the agent
		 * bumps cmd_head before cmd_futex, so a post we miss here
		 * changes the word and the sleep returns at once.
		 */
		val = rc_load_acquire(&rc->ctl->cmd_futex);
		lock = rc_load_acquire(&rc->ctl->agent_lock);
		ret = ramcache_poll(rc, cmd);
		if (ret)
			return ret;
		if (watch && lock != lock0) {
			pass_on(rc, lock);
			return 0;
		}
		if (deadline && ramcache_now_ns() >= deadline)
			return 0;
		ret = sleep_on(&rc->ctl->cmd_futex, val,
			       watch ? &rc->ctl->agent_lock : NULL, lock0,
			       deadline);
		if (!normal(ret))
			return ret;
	}
}

/* When the heartbeat @hb_ns read at @now is stale, if no new one comes. */
static uint64_t stale_at(uint64_t hb_ns, uint64_t now)
{
	uint64_t age = hb_ns > now ? hb_ns - now : now - hb_ns;

	return age >= RAMCACHE_HEARTBEAT_TIMEOUT_NS
		       ? now
		       : now + RAMCACHE_HEARTBEAT_TIMEOUT_NS - age;
}

RC_API int ramcache_watch_agent(struct ramcache *rc, int timeout_ms)
{
	uint64_t deadline, now, until;
	enum ramcache_agent_state st;
	uint32_t lock;
	int ret;

	if (!rc)
		return -EINVAL;
	deadline = deadline_of(timeout_ms);
	for (;;) {
		lock = rc_load_acquire(&rc->ctl->agent_lock);
		st = ramcache_agent_state(rc);
		if (st != RAMCACHE_AGENT_ALIVE) {
			pass_on(rc, lock);
			return st;
		}
		now = ramcache_now_ns();
		if (deadline && now >= deadline)
			return RAMCACHE_AGENT_ALIVE;
		/* look again when the heartbeat would be stale */
		until = stale_at(rc_load_acquire(&rc->ctl->agent_heartbeat_ns),
				 now);
		if (!lock_held(lock) &&
		    until > now + RAMCACHE_HEARTBEAT_PERIOD_NS)
			until = now + RAMCACHE_HEARTBEAT_PERIOD_NS;
		if (deadline && deadline < until)
			until = deadline;
		ret = sleep_on(&rc->ctl->agent_lock, lock, NULL, 0, until);
		if (!normal(ret))
			return ret;
	}
}

RC_API int ramcache_ack(struct ramcache *rc, const struct ramcache_command *cmd,
			uint32_t status, uint64_t bytes_freed)
{
	struct ramcache_ctl_ack *slot;
	uint64_t n;

	if (!rc || !cmd || !cmd->seq)
		return -EINVAL;
	if (status < RAMCACHE_ACK_EVICTED || status > RAMCACHE_ACK_PINNED)
		return -EINVAL;
	pthread_mutex_lock(&rc->cmd_lock);
	if (cmd->seq > rc->cmd_done) {
		pthread_mutex_unlock(&rc->cmd_lock);
		return -EINVAL; /* never taken: not ours to answer */
	}
	n = ++rc->ack_head;
	slot = &rc->acks[(n - 1) & (rc->ring_size - 1)];
	/* seq 0 first: a reader racing this rewrite sees a torn slot. */
	rc_store(&slot->seq, 0);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	rc_store(&slot->entry_id, cmd->entry_id);
	rc_store(&slot->bytes_freed, bytes_freed);
	rc_store(&slot->recv_ns, cmd->recv_ns);
	rc_store(&slot->ack_ns, ramcache_now_ns());
	rc_store(&slot->status, status);
	rc_store(&slot->reserved, 0);
	rc_store_release(&slot->seq, cmd->seq);
	rc_store_release(&rc->ctl->ack_head, n);
	pthread_mutex_unlock(&rc->cmd_lock);
	RC_PROBE3(ack, cmd->seq, status, bytes_freed);
	return 0;
}
