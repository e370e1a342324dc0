// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The agent's commands arrive at any time but may only be obeyed at a safe
 * point of the executor. A thread blocks in ramcache_wait() and queues each
 * command; the executor pops them at its safe points, and one that waits
 * (its "GPU" time) is woken at once to obey them.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "demo.h"

/* How long one wait lasts, so that cmdq_stop() is prompt. */
#define WAIT_MS 100

static void *cmdq_thread(void *arg)
{
	struct cmdq *q = arg;
	struct ramcache_command cmd;

	while (!__atomic_load_n(&q->stop, __ATOMIC_RELAXED)) {
		int r = ramcache_wait(q->rc, &cmd, WAIT_MS);

		if (r < 0) {
			report_err("failed to wait for commands: %s",
				   strerror(-r));
			usleep(WAIT_MS * 1000);
			continue;
		}
		if (r == 0)
			continue;
		pthread_mutex_lock(&q->lock);
		while (q->tail - q->head == CMDQ_LEN && !q->stop)
			pthread_cond_wait(&q->space, &q->lock);
		q->q[q->tail++ % CMDQ_LEN] = cmd;
		pthread_cond_signal(&q->ready);
		pthread_mutex_unlock(&q->lock);
	}
	return NULL;
}

int cmdq_start(struct cmdq *q, struct ramcache *rc)
{
	pthread_condattr_t attr;
	int err;

	memset(q, 0, sizeof(*q));
	q->rc = rc;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->space, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&q->ready, &attr);
	pthread_condattr_destroy(&attr);
	err = pthread_create(&q->thread, NULL, cmdq_thread, q);
	if (err)
		return -err;
	q->running = true;
	return 0;
}

void cmdq_stop(struct cmdq *q)
{
	if (!q->running)
		return;
	pthread_mutex_lock(&q->lock);
	__atomic_store_n(&q->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&q->space);
	pthread_cond_broadcast(&q->ready);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	q->running = false;
}

bool cmdq_pop(struct cmdq *q, struct ramcache_command *cmd)
{
	bool got = false;

	if (!q->rc)
		return false;
	pthread_mutex_lock(&q->lock);
	if (q->head != q->tail) {
		*cmd = q->q[q->head++ % CMDQ_LEN];
		got = true;
		pthread_cond_signal(&q->space);
	}
	pthread_mutex_unlock(&q->lock);
	return got;
}

void cmdq_wait(struct cmdq *q, uint64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline_ns / 1000000000ULL),
		.tv_nsec = (long)(deadline_ns % 1000000000ULL),
	};

	if (!q->running) {
		uint64_t now = ramcache_now_ns();

		if (now < deadline_ns) {
			ts.tv_sec =
				(time_t)((deadline_ns - now) / 1000000000ULL);
			ts.tv_nsec =
				(long)((deadline_ns - now) % 1000000000ULL);
			nanosleep(&ts, NULL);
		}
		return;
	}
	pthread_mutex_lock(&q->lock);
	/* ramcache_now_ns is CLOCK_MONOTONIC, the condition's clock */
	while (q->head == q->tail && !q->stop &&
	       pthread_cond_timedwait(&q->ready, &q->lock, &ts) == 0)
		;
	pthread_mutex_unlock(&q->lock);
}
