// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The loop's clock; see tick.h. */
#include <sys/timerfd.h>
#include <time.h>

#include "tick.h"

void tick_arm(struct tick *tk, uint64_t when)
{
	struct itimerspec its = { 0 };

	tk->armed_ns = when;

	its.it_value.tv_sec = (time_t)(when / NSEC_PER_SEC);
	its.it_value.tv_nsec = (long)(when % NSEC_PER_SEC);
	if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
		its.it_value.tv_nsec = 1; /* zero would disarm it */
	timerfd_settime(tk->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

void tick_arm_by(struct tick *tk, uint64_t at)
{
	if (at < tk->armed_ns)
		tick_arm(tk, at);
}

void tick_wake_now(struct tick *tk, uint64_t now)
{
	tk->cad.calm = false;
	if (tk->rss_wake) {
		bpfstate_rss_wake(tk->bpf, 0);
		tk->rss_wake = 0;
	}
	tk->next_read_ns = now;
	tk->next_level_ns = now;
	tick_arm(tk, now);
}

/*
 * No sooner than a tick after the last read. Only a calm loop wakes at
 * once: a level update on every event would measure rates over periods of
 * microseconds and read /proc, PSI and cgroup files thousands of times a
 * second.
 */
void tick_read_soon(struct tick *tk, uint64_t now)
{
	uint64_t at;

	if (tk->cad.calm) {
		tick_wake_now(tk, now);
		return;
	}
	at = tk->next_read_ns - tk->cad.read_ns + CADENCE_TICK_NS;
	if (at < now)
		at = now;
	if (at >= tk->next_read_ns)
		return;
	tk->next_read_ns = at;
	tick_arm_by(tk, at);
}

void tick_kernel_told(struct tick *tk, uint64_t now)
{
	tk->last_event_ns = now;
	if (tk->cad.calm)
		tick_wake_now(tk, now);
}

void tick_plan(struct tick *tk, const struct cadence_in *ci)
{
	uint64_t step = 0;

	cadence_plan(ci, &tk->cad);
	if (tk->cad.calm && ci->headroom > ci->near_at)
		step = (ci->headroom - ci->near_at) / 4;
	if (step != tk->rss_wake) {
		bpfstate_rss_wake(tk->bpf, step);
		tk->rss_wake = step;
	}
}
