// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The command ring (agent -> executor) and the ack ring (executor -> agent).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "probes.h"

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

/* Shared futex: the agent is another process with its own mapping. */
static int futex_wait(uint32_t *addr, uint32_t val, const struct timespec *ts)
{
	if (syscall(SYS_futex, addr, FUTEX_WAIT, val, ts, NULL, 0) == 0)
		return 0;
	return -errno;
}

RC_API int ramcache_wait(struct ramcache *rc, struct ramcache_command *cmd,
			 int timeout_ms)
{
	uint64_t deadline = 0, now;
	struct timespec ts;
	uint32_t val;
	int ret;

	if (!rc || !cmd)
		return -EINVAL;
	if (timeout_ms >= 0)
		deadline =
			ramcache_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	for (;;) {
		/*
		 * Read the futex word before looking at the ring: the agent
		 * bumps cmd_head before cmd_futex, so a post we miss here
		 * changes the word and FUTEX_WAIT returns at once.
		 */
		val = rc_load_acquire(&rc->ctl->cmd_futex);
		ret = ramcache_poll(rc, cmd);
		if (ret)
			return ret;
		if (timeout_ms < 0) {
			ret = futex_wait(&rc->ctl->cmd_futex, val, NULL);
		} else {
			now = ramcache_now_ns();
			if (now >= deadline)
				return 0;
			ts.tv_sec = (time_t)((deadline - now) / 1000000000ULL);
			ts.tv_nsec = (long)((deadline - now) % 1000000000ULL);
			ret = futex_wait(&rc->ctl->cmd_futex, val, &ts);
		}
		if (ret && ret != -EAGAIN && ret != -EINTR && ret != -ETIMEDOUT)
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
