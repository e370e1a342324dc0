/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The shared control page: the ABI between an executor (the process that
 * owns a cache, e.g. ComfyUI) and the ramcache-bpf agent.
 *
 * The executor creates the page with memfd_create(RAMCACHE_CTL_MEMFD_NAME,
 * MFD_CLOEXEC | MFD_ALLOW_SEALING), sizes it ramcache_ctl_size(max_entries,
 * ring_size), seals it with F_SEAL_SHRINK, maps it shared and keeps the
 * descriptor open. The agent (root) finds it in /proc/<pid>/fd, takes a
 * copy of the descriptor, checks it (memfd, seal, owner, size, header) and
 * treats every byte as untrusted. An executor that wants a file instead
 * names it in $RAMCACHE_CONTROL (mode 0600, its own uid) and the agent is
 * given the same path with --control. docs/control-page.md is the
 * reference for every field, value and rule.
 *
 * Every field has exactly one writer:
 *   [E] the executor, [A] the agent.
 * All integers are little-endian host order, fixed width, naturally aligned.
 * Times are CLOCK_MONOTONIC nanoseconds.
 *
 * Layout: struct ramcache_ctl, then max_entries x struct ramcache_ctl_entry,
 * then ring_size x struct ramcache_ctl_cmd, then ring_size x
 * struct ramcache_ctl_ack. Offsets are in the header so a reader never
 * computes them from its own idea of the sizes.
 */
#ifndef RAMCACHE_CONTROL_H
#define RAMCACHE_CONTROL_H

#include <stdint.h>

#define RAMCACHE_CTL_MAGIC   0x314c544343524152ULL /* "RARCCTL1" */
#define RAMCACHE_CTL_VERSION 1
/* In /proc/<pid>/fd the page's link reads "/memfd:ramcache (deleted)". */
#define RAMCACHE_CTL_MEMFD_NAME	 "ramcache"
#define RAMCACHE_CTL_ENV	 "RAMCACHE_CONTROL"

#define RAMCACHE_LABEL_LEN	 48
#define RAMCACHE_DEFAULT_ENTRIES 4096
#define RAMCACHE_MAX_ENTRIES	 65536
#define RAMCACHE_DEFAULT_RING	 64 /* power of two */
#define RAMCACHE_MAX_RING	 4096

/*
 * Each side declares the other dead after this long without a heartbeat:
 * with beats every 250 ms, a dead peer is noticed within 2 s of its death.
 */
#define RAMCACHE_HEARTBEAT_TIMEOUT_NS 1500000000ULL
/* How often each side should beat. */
#define RAMCACHE_HEARTBEAT_PERIOD_NS 250000000ULL
/* An announcement (expect_bytes) older than this is ignored. */
#define RAMCACHE_EXPECT_TTL_NS 60000000000ULL

/*
 * Is a peer whose last heartbeat says @hb_ns alive at @now_ns? 0 means no
 * peer. The clock is shared, but the sign of a difference of two untrusted
 * stamps is never trusted: a stamp in the future counts by its distance too.
 */
static inline int ramcache_heartbeat_fresh(uint64_t hb_ns, uint64_t now_ns)
{
	if (!hb_ns)
		return 0;
	if (hb_ns > now_ns)
		return hb_ns - now_ns < RAMCACHE_HEARTBEAT_TIMEOUT_NS;
	return now_ns - hb_ns < RAMCACHE_HEARTBEAT_TIMEOUT_NS;
}

/*
 * agent_lock, a robust futex the agent holds while it is attached: its
 * thread id | RAMCACHE_LOCK_WAITERS. When the agent dies (SIGKILL, an OOM
 * kill, a crash) the kernel itself sets it to RAMCACHE_LOCK_WAITERS |
 * RAMCACHE_LOCK_OWNER_DIED and wakes a waiter, at once and whatever pid
 * namespace either side is in; a clean detach writes 0 and wakes them all.
 */
#define RAMCACHE_LOCK_TID_MASK	 0x3fffffffu
#define RAMCACHE_LOCK_OWNER_DIED 0x40000000u
#define RAMCACHE_LOCK_WAITERS	 0x80000000u

/*
 * Is the agent whose heartbeat says @hb_ns and whose lock says @lock alive
 * at @now_ns? A lock of 0 says nothing (an agent that predates the lock):
 * the heartbeat decides.
 */
static inline int ramcache_agent_fresh(uint64_t hb_ns, uint32_t lock,
				       uint64_t now_ns)
{
	return !(lock & RAMCACHE_LOCK_OWNER_DIED) &&
	       ramcache_heartbeat_fresh(hb_ns, now_ns);
}

/* entry flags */
#define RAMCACHE_F_ACTIVE (1u << 0) /* used by the prompt running now */
#define RAMCACHE_F_PINNED (1u << 1) /* never evict */
#define RAMCACHE_F_MODEL  (1u << 2) /* model weights: cost_ns is its reload */

/* pressure levels written by the agent */
enum ramcache_level {
	RAMCACHE_LEVEL_OK = 0,
	RAMCACHE_LEVEL_WARN = 1,
	RAMCACHE_LEVEL_HIGH = 2,
	RAMCACHE_LEVEL_CRITICAL = 3,
};

/* why a command was issued */
enum ramcache_reason {
	RAMCACHE_REASON_HEADROOM = 1, /* headroom below --headroom */
	RAMCACHE_REASON_INACTIVE = 2, /* headroom below --inactive */
	RAMCACHE_REASON_FORECAST = 3, /* forecast to cross a threshold soon */
	RAMCACHE_REASON_RECLAIM = 4,  /* the kernel is already reclaiming */
};

/* ack status written by the executor */
enum ramcache_status {
	RAMCACHE_ACK_EVICTED = 1,
	RAMCACHE_ACK_NOT_FOUND = 2,
	RAMCACHE_ACK_BUSY = 3, /* in use by the running node, try later */
	RAMCACHE_ACK_PINNED = 4,
};

struct ramcache_ctl_entry {
	uint64_t id;		  /* [E] stable, non-zero; 0 = free slot */
	uint64_t bytes;		  /* [E] memory freed if evicted */
	uint64_t last_use_ns;	  /* [E] */
	uint64_t used_generation; /* [E] generation of the last prompt using it */
	uint64_t cost_ns;	  /* [E] time to recompute, 0 if unknown */
	uint32_t flags;		  /* [E] RAMCACHE_F_* */
	uint32_t reserved;
	char label[RAMCACHE_LABEL_LEN]; /* [E] not NUL-terminated if full */
};

struct ramcache_ctl_cmd {
	/* [A] 1, 2, 3 ...; slot = (seq-1) % ring; zeroed first, written last */
	uint64_t seq;
	uint64_t entry_id; /* [A] */
	uint64_t issue_ns; /* [A] */
	uint32_t reason;   /* [A] enum ramcache_reason */
	uint32_t reserved;
};

struct ramcache_ctl_ack {
	/*
	 * [E] seq of the command answered; zeroed first, written last, so a
	 * reader that sees the same non-zero seq before and after copying
	 * the slot has a whole ack. Ack n (1, 2, 3 ...) is in slot
	 * (n-1) % ring, acks are numbered apart from commands.
	 */
	uint64_t seq;
	uint64_t entry_id;    /* [E] */
	uint64_t bytes_freed; /* [E] */
	uint64_t recv_ns;     /* [E] when the executor saw the command */
	uint64_t ack_ns;      /* [E] when the eviction was done */
	uint32_t status;      /* [E] enum ramcache_status */
	uint32_t reserved;
};

struct ramcache_ctl {
	/* written once by the executor at creation */
	uint64_t magic;	       /* [E] RAMCACHE_CTL_MAGIC */
	uint32_t version;      /* [E] RAMCACHE_CTL_VERSION */
	uint32_t header_size;  /* [E] sizeof(struct ramcache_ctl) */
	uint64_t total_size;   /* [E] file size */
	uint32_t max_entries;  /* [E] */
	uint32_t ring_size;    /* [E] power of two */
	uint32_t entry_size;   /* [E] sizeof(struct ramcache_ctl_entry) */
	uint32_t cmd_size;     /* [E] sizeof(struct ramcache_ctl_cmd) */
	uint32_t ack_size;     /* [E] sizeof(struct ramcache_ctl_ack) */
	uint32_t executor_pid; /* [E] */
	uint32_t executor_uid; /* [E] */
	uint32_t reserved0;
	uint64_t entries_off; /* [E] byte offset of the entry table */
	uint64_t cmds_off;    /* [E] byte offset of the command ring */
	uint64_t acks_off;    /* [E] byte offset of the ack ring */
	uint8_t pad0[48];

	/* executor side, 64-byte aligned */
	uint64_t exec_heartbeat_ns; /* [E] */
	uint32_t entries_seq; /* [E] seqcount: odd while the table changes */
	uint32_t nr_entries;  /* [E] slots in use are [0, nr_entries) */
	uint64_t generation;  /* [E] current prompt generation */
	uint64_t cmd_done;    /* [E] seq of the last command consumed */
	uint64_t ack_head; /* [E] number of acks written (ack n, not a seq) */
	/*
	 * [E] bytes the executor is about to take at once (a model load),
	 * that its RSS does not show yet; 0: none. The agent counts them as
	 * taken, less what the executor's RSS grew by since @expect_ns, and
	 * makes room for them from this executor's own entries.
	 */
	uint64_t expect_bytes;
	/* [E] when expect_bytes was set; ignored once RAMCACHE_EXPECT_TTL_NS old */
	uint64_t expect_ns;
	uint8_t pad1[8];

	/* agent side, 64-byte aligned */
	uint64_t agent_heartbeat_ns; /* [A] 0 = no agent */
	uint32_t agent_pid;	     /* [A] */
	uint32_t level;		     /* [A] enum ramcache_level */
	uint64_t headroom_bytes;     /* [A] as the agent last measured it */
	uint64_t target_bytes;	     /* [A] bytes the agent wants freed now */
	uint64_t cmd_head;	     /* [A] seq of the newest command posted */
	uint32_t cmd_futex;	     /* [A] bumped and woken on every post */
	uint32_t agent_lock; /* [A] robust futex: RAMCACHE_LOCK_* above */
	/*
	 * [A] the expect_ns of the announcement the agent's last evaluation
	 * counted: its commands for it, if any, are posted; 0: none yet.
	 */
	uint64_t expect_seen_ns;
	uint8_t pad2[8];
};

/* Names of statuses and reasons, as the agent's JSON spells them. */
static inline const char *ramcache_status_name(uint32_t status)
{
	switch (status) {
	case RAMCACHE_ACK_EVICTED:
		return "evicted";
	case RAMCACHE_ACK_NOT_FOUND:
		return "not_found";
	case RAMCACHE_ACK_BUSY:
		return "busy";
	case RAMCACHE_ACK_PINNED:
		return "pinned";
	default:
		return "unknown";
	}
}

static inline const char *ramcache_reason_name(uint32_t reason)
{
	switch (reason) {
	case RAMCACHE_REASON_HEADROOM:
		return "headroom";
	case RAMCACHE_REASON_INACTIVE:
		return "inactive";
	case RAMCACHE_REASON_FORECAST:
		return "forecast";
	case RAMCACHE_REASON_RECLAIM:
		return "reclaim";
	default:
		return "unknown";
	}
}

static inline uint64_t ramcache_ctl_size(uint32_t max_entries, uint32_t ring)
{
	return sizeof(struct ramcache_ctl) +
	       (uint64_t)max_entries * sizeof(struct ramcache_ctl_entry) +
	       (uint64_t)ring * sizeof(struct ramcache_ctl_cmd) +
	       (uint64_t)ring * sizeof(struct ramcache_ctl_ack);
}

#endif /* RAMCACHE_CONTROL_H */
