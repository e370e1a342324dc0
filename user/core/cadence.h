/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How often the agent's loop reads memory figures: every tick while memory
 * is short or anything is happening, seldom while it is calm. Pure.
 *
 * Near (a threshold close, or commands out): a tick every CADENCE_TICK_NS,
 * reading every tick. Busy (a level above ok, or a reclaim, kswapd or OOM
 * event in the last CADENCE_SETTLE_NS, with the threshold still far):
 * reads every CADENCE_READ_BUSY_NS and the level every
 * CADENCE_LEVEL_BUSY_NS, and no tick in between: what could bring the
 * threshold near in the meantime (an RSS step, a reclaim stall) is a BPF
 * event that wakes the loop. Calm: the headroom cannot shrink faster than memory can
 * be taken, so /proc and cgroup files are read once the headroom above the
 * near point could be gone at CADENCE_ALLOC_RATE (never sooner than
 * CADENCE_READ_MIN_NS apart, never later than CADENCE_READ_MAX_NS), the
 * level is updated every CADENCE_LEVEL_CALM_NS, and in between the loop
 * sleeps until the kernel tells it something: an RSS step of the target, a
 * reclaim stall, kswapd waking, an OOM kill (BPF events).
 */
#ifndef RAMCACHE_CADENCE_H
#define RAMCACHE_CADENCE_H

#include <stdbool.h>
#include <stdint.h>

#define CADENCE_TICK_NS	      (50 * 1000000ULL)
#define CADENCE_READ_BUSY_NS  (250 * 1000000ULL)
#define CADENCE_READ_MIN_NS   (250 * 1000000ULL)
#define CADENCE_READ_MAX_NS   (5000 * 1000000ULL)
#define CADENCE_LEVEL_BUSY_NS (500 * 1000000ULL)
#define CADENCE_LEVEL_CALM_NS (5000 * 1000000ULL)
#define CADENCE_SETTLE_NS     (5000 * 1000000ULL)
/* faster than page faults fill memory on a few cores (bytes per second) */
#define CADENCE_ALLOC_RATE (4ULL << 30)

struct cadence_in {
	bool near;		 /* headroom under near_at, or commands out */
	bool above_ok;		 /* the level is above ok */
	uint64_t since_event_ns; /* since the last reclaim/kswapd/OOM event */
	uint64_t headroom;	 /* bytes, last estimate */
	uint64_t near_at;	 /* headroom under which memory is short */
};

struct cadence {
	bool calm;
	uint64_t tick_ns; /* wake at least this often; 0: only when a read,
			   * a level update or a summary is due */
	uint64_t read_ns; /* between reads of /proc and cgroup files; 0: every tick */
	uint64_t level_ns; /* between level updates */
};

void cadence_plan(const struct cadence_in *in, struct cadence *out);

/*
 * A time the loop must act (CLOCK_MONOTONIC), and how late it may act
 * (0: on time). Periodic chores (a summary, a cgroup check) wait up to
 * their slack for a wake-up that is due anyway, so an idle agent wakes once
 * for all of them instead of once each.
 */
struct cadence_due {
	uint64_t at;
	uint64_t slack;
};

#define CADENCE_SLACK_NS (250 * 1000000ULL)

/*
 * A control page's heartbeat is due every RAMCACHE_HEARTBEAT_PERIOD_NS
 * (250 ms); one due within CADENCE_BEAT_EARLY_NS (half that) goes out
 * early, with the wake-up at hand. Pages followed from different times then
 * beat together after a period or two, and the loop wakes once a period
 * for all of them instead of once for each (capped at one wake-up every
 * CADENCE_TICK_NS: with four pages or more, twenty wake-ups a second,
 * each ticking every page). No beat is later than before: the wake-up is
 * still due at the earliest heartbeat.
 */
#define CADENCE_BEAT_EARLY_NS (125 * 1000000ULL)

/* Is a heartbeat due at @next_ns to go out at @now? */
bool cadence_beat_due(uint64_t next_ns, uint64_t now);

/*
 * When to wake for @n deadlines (UINT64_MAX if none): the latest of them
 * that keeps every one within its slack. Waking there runs every deadline
 * due by then; none is put off needlessly (the wake is at a deadline, not
 * at a deadline plus its slack), so what is re-armed from the wake-up does
 * not drift.
 */
uint64_t cadence_wake(const struct cadence_due *d, int n);

#endif /* RAMCACHE_CADENCE_H */
