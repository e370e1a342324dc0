// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --policy psi: the executor evicts on its own when a PSI trigger fires.
 * A thread polls a trigger on our memory cgroup's memory.pressure (cgroup
 * v2) or on the system's /proc/pressure/memory (cgroup v1 has no
 * per-cgroup PSI) and counts the events; the executor evicts at its next
 * safe point. This is the "PSI-trigger-driven eviction" that benchmarks
 * compare ramcache-bpf with.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"

#define PSI_POLL_MS 100

static int psi_open(const struct memavail *m, const char *trigger, char *path,
		    size_t len)
{
	int fd = -1;

	if (m->version == 2 && m->nr_dirs > 0) {
		snprintf(path, len, "%s/memory.pressure", m->dirs[0]);
		fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	}
	if (fd < 0) {
		snprintf(path, len, "/proc/pressure/memory");
		fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	if (write(fd, trigger, strlen(trigger) + 1) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static void *psi_thread(void *arg)
{
	struct psi_watch *w = arg;
	struct pollfd pfd = { .fd = w->fd, .events = POLLPRI };

	while (!w->stop) {
		int n = poll(&pfd, 1, PSI_POLL_MS);

		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (pfd.revents & POLLERR)
			break;
		if (pfd.revents & POLLPRI) {
			w->last_ns = ramcache_now_ns();
			__atomic_add_fetch(&w->events, 1, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

int psi_start(struct psi_watch *w, const struct memavail *m,
	      const char *trigger)
{
	char path[PATH_MAX];
	int err;

	memset(w, 0, sizeof(*w));
	w->fd = psi_open(m, trigger, path, sizeof(path));
	if (w->fd < 0)
		return w->fd;
	err = pthread_create(&w->thread, NULL, psi_thread, w);
	if (err) {
		close(w->fd);
		w->fd = -1;
		return -err;
	}
	w->running = true;
	report_msg("psi: trigger \"%s\" on %s", trigger, path);
	return 0;
}

void psi_stop(struct psi_watch *w)
{
	if (!w->running)
		return;
	w->stop = 1;
	pthread_join(w->thread, NULL);
	close(w->fd);
	w->running = false;
}

/* Events since the last call. */
unsigned int psi_take(struct psi_watch *w)
{
	unsigned int now, n;

	if (!w->running)
		return 0;
	now = __atomic_load_n(&w->events, __ATOMIC_ACQUIRE);
	n = now - w->seen;
	w->seen = now;
	return n;
}
