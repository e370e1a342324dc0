#!/usr/bin/env python3
"""PressureCache and memoize without the agent: the LRU bound, what the
page shows the agent, commands obeyed at once or held while an entry is in
use, fork(). Commands are written into the page as docs/control-page.md
says the agent writes them (slot, seq last, cmd_head, cmd_futex); the
real agent's side is in test_agent.py."""
import mmap
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("RAMCACHE_ROOT") or os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "python")]

import ramcache  # noqa: E402
from ramcache import page as P  # noqa: E402
from rctest import main, test  # noqa: E402

MiB = 1 << 20


class AgentSide:
    """The agent's half, written through a map of our own (as the agent's
    pwrite would), read back for acks and entries."""

    def __init__(self, page):
        fd = os.open(page.path, os.O_RDWR)
        try:
            self.m = mmap.mmap(fd, page.size)
        finally:
            os.close(fd)
        self.q = memoryview(self.m).cast("Q")
        self.d = memoryview(self.m).cast("I")
        self.ring, self.cmds_off, self.acks_off = page.ring, page.cmds_off, page.acks_off
        self.head = 0
        self.acks = 0

    def beat(self):
        self.q[P.A_HEARTBEAT // 8] = P.now_ns()

    def post(self, eid):
        self.head += 1
        off = self.cmds_off + 32 * ((self.head - 1) % self.ring)
        self.q[off // 8] = 0
        struct.pack_into("<QQI", self.m, off + 8, eid, P.now_ns(), 1)
        self.q[off // 8] = self.head
        self.q[P.A_CMD_HEAD // 8] = self.head
        self.d[P.A_CMD_FUTEX // 4] += 1
        return self.head

    def ack_for(self, seq, timeout=2.0):
        """The ack of command @seq: (status, bytes_freed), or None."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            n = self.q[P.E_ACK_HEAD // 8]
            for k in range(1, n + 1):
                off = self.acks_off + 48 * ((k - 1) % self.ring)
                s, _, freed, _, _, status = struct.unpack_from("<QQQQQI", self.m, off)
                if s == seq:
                    return status, freed
            time.sleep(0.005)
        return None

    def entries(self):
        n = self.d[P.E_NR_ENTRIES // 4]
        out = {}
        for i in range(n):
            e = P.ENTRY.unpack_from(self.m, P.HEADER_SIZE + P.ENTRY_SIZE * i)
            out[e[0]] = {"bytes": e[1], "used_generation": e[3], "cost_ns": e[4],
                         "flags": e[5], "label": e[7].rstrip(b"\0").decode()}
        return out

    def close(self):
        self.q.release()
        self.d.release()
        self.m.close()


def fresh(max_bytes=None):
    """A cache on an Executor of its own (the test owns the page)."""
    ex = ramcache.Executor()
    return ramcache.PressureCache("t", max_bytes=max_bytes, executor=ex), ex


@test
def without_an_agent_it_keeps_to_max_bytes_least_recently_used_first():
    c, ex = fresh(max_bytes=10 * MiB)
    try:
        for i in range(8):
            c.set(i, bytearray(MiB))
        c.get(0)  # used again: the newest now
        for i in range(8, 14):
            c.set(i, bytearray(MiB))
        assert c.bytes <= 10 * MiB and len(c) == 10, (c.bytes, len(c))
        assert 0 in c and 1 not in c and 2 not in c and 3 not in c, sorted(c)
        assert c.stats["evicted_lru"] == 4, c.stats
        assert not c.agent_alive
    finally:
        ex.close()


@test
def the_page_shows_each_entry_with_its_size_age_and_cost():
    c, ex = fresh(max_bytes=1 << 40)
    a = AgentSide(ex.page)
    try:
        c.set("big", b"x" * (3 * MiB), cost=0.25)
        c.set("small", bytearray(1000))
        ents = a.entries()
        assert len(ents) == 2, ents
        big = next(e for e in ents.values() if e["label"] == "t:'big'")
        assert big["bytes"] == 3 * MiB and big["cost_ns"] == 250_000_000, big
        assert big["flags"] == 0 and big["used_generation"] >= 1, big
        small = next(e for e in ents.values() if e["label"] == "t:'small'")
        assert small["bytes"] == 1000 and small["cost_ns"] == 0, small
        del c["big"]
        assert [e["label"] for e in a.entries().values()] == ["t:'small'"]
    finally:
        a.close()
        ex.close()


@test
def a_command_evicts_the_entry_and_is_acked_with_its_bytes():
    c, ex = fresh(max_bytes=1 << 40)
    a = AgentSide(ex.page)
    try:
        a.beat()
        c.set("k", bytearray(2 * MiB))
        eid = next(iter(a.entries()))
        ack = a.ack_for(a.post(eid))
        assert ack == (P.ACK_EVICTED, 2 * MiB), ack
        assert "k" not in c and c.get("k") is None and c.bytes == 0
        assert c.stats["evicted_by_agent"] == 1 and not a.entries()
        assert a.ack_for(a.post(eid)) == (P.ACK_NOT_FOUND, 0)  # gone already
    finally:
        a.close()
        ex.close()


@test
def a_command_for_an_entry_in_use_is_held_until_the_block_ends():
    c, ex = fresh(max_bytes=1 << 40)
    a = AgentSide(ex.page)
    try:
        a.beat()
        c.set("k", bytearray(MiB))
        eid = next(iter(a.entries()))
        with c.hold("k") as v:
            assert isinstance(v, bytearray)
            assert a.entries()[eid]["flags"] == P.F_ACTIVE
            seq = a.post(eid)
            assert a.ack_for(seq, timeout=0.3) is None, "answered while in use"
            assert "k" in c and ex.counts["held"] == 1
        ack = a.ack_for(seq)
        assert ack == (P.ACK_EVICTED, MiB), ack  # obeyed at the end of the block
        assert "k" not in c and ex.counts["busy"] == 0
    finally:
        a.close()
        ex.close()


@test
def memoize_computes_once_and_publishes_the_cost():
    calls = []

    @ramcache.memoize(max_bytes=1 << 40)
    def slow(x):
        calls.append(x)
        time.sleep(0.02)
        return bytes(x)

    assert slow(1000) == bytes(1000) and slow(1000) == bytes(1000) and calls == [1000]
    assert slow.cache.stats["hits"] == 1 and slow.cache.stats["misses"] == 1
    page = slow.cache._ex.page
    a = AgentSide(page)
    try:
        ents = list(a.entries().values())
        mine = [e for e in ents if e["label"].startswith("memoize_computes_once")]
        assert mine and mine[0]["cost_ns"] >= 20_000_000 and mine[0]["bytes"] == 1000, ents
    finally:
        a.close()


@test
def sizes_are_measured():
    assert ramcache.sizeof(b"x" * 100) == 100
    assert ramcache.sizeof(bytearray(5000)) == 5000
    assert ramcache.sizeof(memoryview(bytearray(64)).cast("Q")) == 64
    assert ramcache.sizeof(mmap.mmap(-1, 8192)) == 8192
    assert ramcache.sizeof([b"x" * 1000] * 3) > 3000


@test
def a_forked_child_does_not_use_its_parents_page():
    c, ex = fresh(max_bytes=4 * MiB)
    a = AgentSide(ex.page)
    try:
        a.beat()
        c.set("k", bytearray(MiB))
        assert c.agent_alive
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                ok = not c.agent_alive and not ex.mine()
                n0 = a.d[P.E_NR_ENTRIES // 4]
                for i in range(8):  # the LRU bound, not the parent's page
                    c.set(i, bytearray(MiB))
                ok = ok and c.bytes <= 4 * MiB and a.d[P.E_NR_ENTRIES // 4] == n0
                os.write(w, b"1" if ok else b"0")
            finally:
                os._exit(0)
        os.close(w)
        got = os.read(r, 1)
        os.waitpid(pid, 0)
        assert got == b"1", "the child used its parent's page or agent"
        assert len(a.entries()) == 1 and c.agent_alive
    finally:
        a.close()
        ex.close()


main()
