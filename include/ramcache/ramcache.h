/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libramcache: the executor side of the control page.
 *
 * An executor (a process that caches things in RAM) creates a control page,
 * publishes its cache entries in it, and obeys eviction commands from the
 * ramcache-bpf agent. The library needs no privileges.
 *
 * Threads: one thread may publish (ramcache_publish/remove/set_generation/
 * heartbeat) while one other thread waits for commands (ramcache_wait/poll)
 * and acks them. Every function returns 0 or a positive count on success and
 * -errno on failure, unless said otherwise.
 */
#ifndef RAMCACHE_RAMCACHE_H
#define RAMCACHE_RAMCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "control.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ramcache;

struct ramcache_entry_info {
	uint64_t id; /* non-zero, stable for the life of the entry */
	uint64_t bytes;
	uint64_t last_use_ns; /* 0 = now */
	uint64_t used_generation;
	uint64_t cost_ns;  /* 0 = unknown */
	uint32_t flags;	   /* RAMCACHE_F_* */
	const char *label; /* may be NULL; truncated to RAMCACHE_LABEL_LEN */
};

struct ramcache_command {
	uint64_t seq;
	uint64_t entry_id;
	uint64_t issue_ns; /* agent's post time */
	uint64_t recv_ns;  /* when this executor took it */
	uint32_t reason;   /* enum ramcache_reason */
};

/*
 * Create the control page for this process: a file at @path, or at
 * $RAMCACHE_CONTROL when @path is NULL (an existing file of ours is
 * replaced); when neither names a file, a sealed memfd that the agent finds
 * through /proc/<pid>/fd, held open until ramcache_destroy. @max_entries
 * and @ring_size of 0 pick the defaults.
 */
int ramcache_create(struct ramcache **out, const char *path,
		    uint32_t max_entries, uint32_t ring_size);

/*
 * Unmap and close; remove the file too if @unlink_file (a memfd has no
 * name and vanishes with its last descriptor). NULL is a no-op.
 */
void ramcache_destroy(struct ramcache *rc, bool unlink_file);

/*
 * The path of the control page (valid until ramcache_destroy): the file, or
 * /proc/<pid>/fd/<n> for a memfd (in this process's own pid namespace).
 */
const char *ramcache_path(const struct ramcache *rc);

/* Insert or update the entry with info->id. -ENOSPC when the table is full. */
int ramcache_publish(struct ramcache *rc,
		     const struct ramcache_entry_info *info);

/* Remove the entry with @id; -ENOENT if there is none. */
int ramcache_remove(struct ramcache *rc, uint64_t id);

/* Remove every entry. */
int ramcache_clear(struct ramcache *rc);

/* Set the executor's current generation (one per prompt). */
int ramcache_set_generation(struct ramcache *rc, uint64_t generation);

/* Stamp the executor heartbeat. */
int ramcache_heartbeat(struct ramcache *rc);

/*
 * Announce @bytes about to be taken at once (a model load, a big batch)
 * that the process's RSS does not show yet, so the agent makes room for
 * them from this executor's entries before the allocation runs into the
 * limit; 0 withdraws it (do so once the memory is taken: the agent counts
 * only what the RSS has not grown by since the announcement, and forgets
 * one older than RAMCACHE_EXPECT_TTL_NS). Serve commands while waiting.
 */
int ramcache_expect(struct ramcache *rc, uint64_t bytes);

/*
 * True once the agent has counted the announcement in force: its
 * commands for it, if any, are posted (ramcache_target() then says
 * whether it still wants bytes). False with no announcement, or with an
 * agent that predates announcements: wait a bounded time, never forever.
 */
bool ramcache_expect_seen(const struct ramcache *rc);

/*
 * Take the next command without blocking: 1 and *cmd filled, 0 when there
 * is none. A command taken is never returned again, even across a restart
 * of the agent; each must be answered with ramcache_ack.
 */
int ramcache_poll(struct ramcache *rc, struct ramcache_command *cmd);

/*
 * Block up to @timeout_ms (-1 = forever) for the next command: 1 and *cmd
 * filled, 0 on timeout. Wakes the moment the agent posts (futex), and
 * returns 0 early when the agent attached at the call dies or detaches
 * (check ramcache_agent_alive after a 0).
 */
int ramcache_wait(struct ramcache *rc, struct ramcache_command *cmd,
		  int timeout_ms);

/* Answer command @cmd with @status (enum ramcache_status). */
int ramcache_ack(struct ramcache *rc, const struct ramcache_command *cmd,
		 uint32_t status, uint64_t bytes_freed);

/*
 * True when an agent is attached: its heartbeat is younger than the timeout
 * and the kernel has not marked its lock (agent_lock) as its owner's death.
 * A plain read of the page: call it as often as you like.
 */
bool ramcache_agent_alive(const struct ramcache *rc);

enum ramcache_agent_state {
	RAMCACHE_AGENT_NONE = 0,   /* none attached, or it detached cleanly */
	RAMCACHE_AGENT_ALIVE = 1,  /* attached */
	RAMCACHE_AGENT_DIED = 2,   /* killed or crashed: the kernel said so */
	RAMCACHE_AGENT_SILENT = 3, /* no heartbeat for the timeout (hung) */
};

/* Whether an agent is attached, and if not, how it went. */
enum ramcache_agent_state ramcache_agent_state(const struct ramcache *rc);

/*
 * Sleep until the agent attached now is gone (dies, detaches or falls
 * silent), or @timeout_ms passes (-1 = forever). Returns its state: ALIVE
 * on timeout, otherwise how it went, at once when none is attached. The
 * agent's death wakes it within a millisecond or so, whatever pid
 * namespace either side is in. ramcache_wait wakes on the agent's death
 * too: a thread that waits for commands needs no second one.
 */
int ramcache_watch_agent(struct ramcache *rc, int timeout_ms);

/* The agent's view: level (enum ramcache_level), headroom and target. */
uint32_t ramcache_level(const struct ramcache *rc);
uint64_t ramcache_headroom(const struct ramcache *rc);
uint64_t ramcache_target(const struct ramcache *rc);

/* CLOCK_MONOTONIC in ns, the clock of every stamp on the page. */
uint64_t ramcache_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* RAMCACHE_RAMCACHE_H */
