// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer harness for what the agent does with an executor's bytes: the
 * control page parsers (header, executor side, entry table, ack slots) and
 * the eviction policy run over whatever entries they let through.
 *
 * The input is a control page image of any length, read the way the agent
 * reads a real one: the header, the executor side at its fixed offset, the
 * entry table and ack ring at the offsets the header gives (when it passes)
 * or else at the canonical ones. The last bytes also choose the policy knobs
 * so the fuzzer explores phase, policy and deficit too.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "page/control.h"
#include "core/policy.h"

#define EXEC_OFF offsetof(struct ramcache_ctl, exec_heartbeat_ns)
#define EXEC_LEN (offsetof(struct ramcache_ctl, agent_heartbeat_ns) - EXEC_OFF)
/* Cap what one input may ask for, like the agent caps max_entries. */
#define FUZZ_MAX_ENTRIES 1024

static uint64_t tail_u64(const uint8_t *data, size_t size, size_t back)
{
	uint64_t v = 0;

	if (size >= back + sizeof(v))
		memcpy(&v, data + size - back - sizeof(v), sizeof(v));
	return v;
}

static bool odd_inflight(uint64_t id, void *ctx)
{
	return (id ^ (uintptr_t)ctx) & 1;
}

static void run_policy(const struct ctl_entry *e, uint32_t n,
		       const struct ctl_exec *ex, uint64_t knobs,
		       uint64_t deficit)
{
	struct rc_entry *rce = calloc(n ? n : 1, sizeof(*rce));
	uint32_t *picks = calloc(n ? n : 1, sizeof(*picks));
	struct rc_select_req req = { 0 };
	uint64_t covered = 0, sum = 0;
	int got;

	if (!rce || !picks)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		rce[i].id = e[i].id;
		rce[i].bytes = e[i].bytes;
		rce[i].last_use_ns = e[i].last_use_ns;
		rce[i].used_generation = e[i].used_generation;
		rce[i].cost_ns = e[i].cost_ns;
		rce[i].flags = e[i].flags;
	}
	req.entries = rce;
	req.nr_entries = n;
	req.generation = ex->generation;
	req.deficit = deficit;
	req.phase = (knobs & 1) ? RC_PHASE_HEADROOM : RC_PHASE_INACTIVE;
	req.policy = (knobs & 2) ? RC_POLICY_COST : RC_POLICY_RAM;
	req.in_flight = (knobs & 4) ? odd_inflight : NULL;
	req.ctx = (void *)(uintptr_t)(knobs >> 8);
	got = policy_select(&req, picks, n, &covered);
	if (got < 0)
		goto out;
	if ((uint32_t)got > n)
		abort();
	for (int k = 0; k < got; k++) {
		const struct rc_entry *p;

		if (picks[k] >= n)
			abort();
		p = &rce[picks[k]];
		/* The policy must never pick what may not go. */
		if (!policy_entry_eligible(p, req.phase))
			abort();
		sum = sum + p->bytes < sum ? UINT64_MAX : sum + p->bytes;
	}
	if (got && sum != covered)
		abort();
	for (int k = 0; k < got; k++)
		for (int j = k + 1; j < got; j++)
			if (rce[picks[k]].id == rce[picks[j]].id)
				abort();
	for (uint32_t i = 0; i < n; i++)
		(void)policy_score(&rce[i], ex->generation, req.policy);
out:
	free(rce);
	free(picks);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_layout lay = { 0 };
	struct ctl_exec ex = { 0 };
	enum ctl_why why = CTL_OK;
	uint64_t entries_off = sizeof(struct ramcache_ctl);
	uint64_t acks_off = 0, ring = 1, max_seq;
	size_t tlen = 0;
	struct ctl_entry *ents;
	struct ctl_ack ack;
	uint32_t n, cap;

	if (!control_parse_header(data, size, &lay, &why)) {
		if (why != CTL_OK || !lay.max_entries || !lay.ring_size ||
		    (lay.ring_size & (lay.ring_size - 1)) ||
		    lay.total_size !=
			    ramcache_ctl_size(lay.max_entries, lay.ring_size) ||
		    lay.acks_off + (uint64_t)lay.ring_size *
					    sizeof(struct ramcache_ctl_ack) !=
			    lay.total_size)
			abort(); /* accepted something it should not have */
		entries_off = lay.entries_off;
		acks_off = lay.acks_off;
		ring = lay.ring_size;
	} else if (why == CTL_OK || why >= CTL_ERR_MAX) {
		abort(); /* a refusal must say why */
	}
	(void)control_why_str(why);

	if (size >= EXEC_OFF)
		control_parse_exec(data + EXEC_OFF, size - EXEC_OFF, &ex);
	else
		control_parse_exec(data, size, &ex);
	(void)control_exec_alive(&ex, tail_u64(data, size, 16));

	if (size > entries_off)
		tlen = size - entries_off;
	if (lay.max_entries &&
	    tlen > (size_t)lay.max_entries * sizeof(struct ramcache_ctl_entry))
		tlen = (size_t)lay.max_entries *
		       sizeof(struct ramcache_ctl_entry);
	cap = (uint32_t)(tlen / sizeof(struct ramcache_ctl_entry));
	if (cap > FUZZ_MAX_ENTRIES)
		cap = FUZZ_MAX_ENTRIES;
	ents = calloc(cap ? cap : 1, sizeof(*ents));
	if (!ents)
		return 0;
	n = control_parse_entries(tlen ? data + entries_off : data, tlen, ents,
				  cap);
	if (n > cap)
		abort();
	for (uint32_t i = 0; i < n; i++) {
		if (!ents[i].id || strlen(ents[i].label) > RAMCACHE_LABEL_LEN)
			abort();
		for (const char *p = ents[i].label; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				abort();
	}

	/* Acks: every slot of the ring that the input covers. */
	max_seq = tail_u64(data, size, 8);
	if (!acks_off)
		acks_off = size / 2;
	for (uint64_t i = 0; i < ring && acks_off < size; i++) {
		uint64_t off = acks_off + i * sizeof(struct ramcache_ctl_ack);

		if (off >= size)
			break;
		if (!control_parse_ack(data + off, size - off, max_seq, &ack) &&
		    (!ack.cmd_seq || ack.cmd_seq > max_seq ||
		     ack.status < RAMCACHE_ACK_EVICTED ||
		     ack.status > RAMCACHE_ACK_PINNED))
			abort();
	}

	run_policy(ents, n, &ex, tail_u64(data, size, 0),
		   tail_u64(data, size, 24));
	free(ents);
	return 0;
}
