// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Pure parsers for the control page: bytes in, checked values out. No I/O,
 * so a fuzzer can drive them with anything.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "page/control.h"

#define EXEC_OFF offsetof(struct ramcache_ctl, exec_heartbeat_ns)
#define EXEC_LEN (offsetof(struct ramcache_ctl, agent_heartbeat_ns) - EXEC_OFF)

static const char *const why_str[CTL_ERR_MAX] = {
	[CTL_OK] = "ok",
	[CTL_ERR_SYS] = "system error",
	[CTL_ERR_SYMLINK] = "path is a symlink",
	[CTL_ERR_NOT_REGULAR] = "not a regular file",
	[CTL_ERR_OWNER] = "not owned by the executor's uid",
	[CTL_ERR_MODE] = "accessible to other users (mode must be 0600)",
	[CTL_ERR_LINKS] = "has more than one hard link",
	[CTL_ERR_SIZE] = "file size out of range",
	[CTL_ERR_MAGIC] = "bad magic, not a ramcache control page",
	[CTL_ERR_VERSION] = "unsupported control page version",
	[CTL_ERR_RECORD_SIZE] = "record sizes differ from this agent's",
	[CTL_ERR_GEOMETRY] = "max_entries or ring_size out of range",
	[CTL_ERR_TOTAL_SIZE] = "total_size does not match the geometry or file",
	[CTL_ERR_OFFSETS] = "section offsets do not match the sizes",
	[CTL_ERR_UID] = "executor_uid is not the file's owner",
	[CTL_ERR_PID] = "executor_pid is not the watched process",
	[CTL_ERR_TRUNCATED] = "page was truncated",
	[CTL_ERR_CHANGED] = "page changed size",
	[CTL_ERR_REPLACED] = "page was removed or replaced",
	[CTL_ERR_PROTOCOL] = "executor state is inconsistent",
	[CTL_ERR_NOT_MEMFD] = "not a sealable memfd",
	[CTL_ERR_SEALS] = "not sealed against shrinking (F_SEAL_SHRINK)",
	[CTL_ERR_ACCESS] = "descriptor is not open for reading and writing",
};

const char *control_why_str(enum ctl_why why)
{
	if ((unsigned int)why >= CTL_ERR_MAX)
		return "unknown reason";
	return why_str[why];
}

bool control_why_unfinished(enum ctl_why why)
{
	return why == CTL_ERR_SEALS || why == CTL_ERR_SIZE ||
	       why == CTL_ERR_MAGIC;
}

static int refuse(enum ctl_why *why, enum ctl_why w, int err)
{
	*why = w;
	return err;
}

int control_parse_header(const void *buf, size_t len, struct ctl_layout *out,
			 enum ctl_why *why)
{
	struct ramcache_ctl h;
	uint32_t ring;

	*why = CTL_OK;
	if (len < sizeof(h))
		return refuse(why, CTL_ERR_SIZE, -EINVAL);
	memcpy(&h, buf, sizeof(h)); /* alignment-safe, read once */
	if (h.magic != RAMCACHE_CTL_MAGIC)
		return refuse(why, CTL_ERR_MAGIC, -EPROTO);
	if (h.version != RAMCACHE_CTL_VERSION)
		return refuse(why, CTL_ERR_VERSION, -EPROTONOSUPPORT);
	if (h.header_size != sizeof(h) ||
	    h.entry_size != sizeof(struct ramcache_ctl_entry) ||
	    h.cmd_size != sizeof(struct ramcache_ctl_cmd) ||
	    h.ack_size != sizeof(struct ramcache_ctl_ack))
		return refuse(why, CTL_ERR_RECORD_SIZE, -EPROTO);
	ring = h.ring_size;
	if (!h.max_entries || h.max_entries > RAMCACHE_MAX_ENTRIES || !ring ||
	    ring > RAMCACHE_MAX_RING || (ring & (ring - 1)))
		return refuse(why, CTL_ERR_GEOMETRY, -EINVAL);
	if (h.total_size != ramcache_ctl_size(h.max_entries, ring))
		return refuse(why, CTL_ERR_TOTAL_SIZE, -EINVAL);
	/* Only the canonical layout: nothing to gain from anything else. */
	if (h.entries_off != sizeof(h) ||
	    h.cmds_off !=
		    h.entries_off + (uint64_t)h.max_entries * h.entry_size ||
	    h.acks_off != h.cmds_off + (uint64_t)ring * h.cmd_size)
		return refuse(why, CTL_ERR_OFFSETS, -EPROTO);

	out->total_size = h.total_size;
	out->entries_off = h.entries_off;
	out->cmds_off = h.cmds_off;
	out->acks_off = h.acks_off;
	out->max_entries = h.max_entries;
	out->ring_size = ring;
	out->executor_pid = h.executor_pid;
	out->executor_uid = h.executor_uid;
	return 0;
}

int control_parse_exec(const void *buf, size_t len, struct ctl_exec *out)
{
	struct ramcache_ctl h;

	if (len < EXEC_LEN)
		return -EINVAL;
	memcpy((char *)&h + EXEC_OFF, buf, EXEC_LEN);
	*out = (struct ctl_exec){ .heartbeat_ns = h.exec_heartbeat_ns,
				  .entries_seq = h.entries_seq,
				  .nr_entries = h.nr_entries,
				  .generation = h.generation,
				  .cmd_done = h.cmd_done,
				  .ack_head = h.ack_head,
				  .expect_bytes = h.expect_bytes,
				  .expect_ns = h.expect_ns };
	return 0;
}

/* Labels end up in logs and JSON: stop at NUL, no control bytes. */
static void copy_label(char *dst, const char *src)
{
	size_t i;

	for (i = 0; i < RAMCACHE_LABEL_LEN && src[i]; i++) {
		unsigned char ch = (unsigned char)src[i];

		dst[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	dst[i] = '\0';
}

uint32_t control_parse_entries(const void *buf, size_t len,
			       struct ctl_entry *out, uint32_t cap)
{
	const struct ramcache_ctl_entry *src = buf;
	size_t nr = len / sizeof(*src);
	struct ramcache_ctl_entry e;
	uint32_t n = 0;

	for (size_t i = 0; i < nr && n < cap; i++) {
		memcpy(&e, &src[i], sizeof(e));
		if (!e.id)
			continue;
		out[n].id = e.id;
		out[n].bytes = e.bytes;
		out[n].last_use_ns = e.last_use_ns;
		out[n].used_generation = e.used_generation;
		out[n].cost_ns = e.cost_ns;
		out[n].flags = e.flags;
		copy_label(out[n].label, e.label);
		n++;
	}
	return n;
}

int control_parse_ack(const void *buf, size_t len, uint64_t max_seq,
		      struct ctl_ack *out)
{
	struct ramcache_ctl_ack a;

	if (len < sizeof(a))
		return -EINVAL;
	memcpy(&a, buf, sizeof(a));
	if (!a.seq || a.seq > max_seq || a.status < RAMCACHE_ACK_EVICTED ||
	    a.status > RAMCACHE_ACK_PINNED)
		return -EINVAL;
	out->cmd_seq = a.seq;
	out->entry_id = a.entry_id;
	out->bytes_freed = a.bytes_freed;
	out->recv_ns = a.recv_ns;
	out->ack_ns = a.ack_ns;
	out->status = a.status;
	return 0;
}

bool control_exec_alive(const struct ctl_exec *e, uint64_t now_ns)
{
	return ramcache_heartbeat_fresh(e->heartbeat_ns, now_ns);
}
