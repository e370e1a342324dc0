#!/usr/bin/env python3
"""Conformance of the control page: the same cases run against the C
library (build/libramcache.so through ctypes) and the package's pure-Python
page (the ramcache module, python/ramcache, which the package's page.py
imports; on a file and on a memfd), read back by a fake agent
written from include/ramcache/control.h. Fails, never skips, when the C
library is not built."""
import atexit
import fcntl
import inspect
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time

import env
from env import MiB
from fakeagent import FakeAgent
from rctest import main, py_env, test

import clib

pkg = env.load_package()
P = pkg.page
# the folder holding the ramcache module the package uses
RAMCACHE_PARENT = os.path.dirname(os.path.dirname(inspect.getfile(P.Page)))

_so = None


def c_library():
    global _so
    if _so is None:
        env.require_library()
        so, where = clib.find()
        assert so is not None, f"libramcache not loadable: {where}"
        _so = so
    return _so


class Impl:
    def __init__(self, name):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix="ramcache-conf-")
        atexit.register(shutil.rmtree, self.dir, True)
        self.n = 0

    def make(self, max_entries=0, ring=0):
        self.n += 1
        path = os.path.join(self.dir, f"page{self.n}")
        if self.name == "c-file":
            return clib.Page(c_library(), path, max_entries, ring)
        if self.name == "py-file":
            return P.Page(path, max_entries, ring)
        old = os.environ.pop(P.CTL_ENV, None)
        try:
            return P.Page(None, max_entries, ring)
        finally:
            if old is not None:
                os.environ[P.CTL_ENV] = old


IMPLS = [Impl("c-file"), Impl("py-file"), Impl("py-memfd")]


def conformance(fn):
    """One TAP case per implementation."""
    for impl in IMPLS:
        def case(impl=impl):
            page = impl.make()
            agent = FakeAgent(page.path)
            try:
                fn(impl, page, agent)
            finally:
                agent.close()
                page.close()
        case.__name__ = f"{fn.__name__}[{impl.name}]"
        test(case)
    return fn


def ack_slot(agent, n):
    """Ack number n (1, 2, ...) as the agent reads it."""
    off = agent.acks_off + ((n - 1) % agent.ring) * agent.ack_size
    seq, eid, freed, recv, done, status = struct.unpack_from("<QQQQQI", agent.m, off)
    return {"seq": seq, "id": eid, "bytes_freed": freed, "recv_ns": recv,
            "ack_ns": done, "status": status}


@conformance
def header_matches_control_h(impl, page, a):
    st = os.stat(page.path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert st.st_uid == os.geteuid()
    size = P.ctl_size(P.DEFAULT_ENTRIES, P.DEFAULT_RING)
    assert st.st_size == size == a.size
    u32, u64 = a.u32, a.u64
    assert u64(P.H_MAGIC) == P.CTL_MAGIC and u32(P.H_VERSION) == P.CTL_VERSION
    assert u32(P.H_HEADER_SIZE) == 256 and u64(P.H_TOTAL_SIZE) == size
    assert (u32(P.H_MAX_ENTRIES), u32(P.H_RING_SIZE)) == (P.DEFAULT_ENTRIES, P.DEFAULT_RING)
    assert (u32(P.H_ENTRY_SIZE), u32(P.H_CMD_SIZE), u32(P.H_ACK_SIZE)) == (96, 32, 48)
    assert u32(P.H_EXECUTOR_PID) == os.getpid() and u32(P.H_EXECUTOR_UID) == os.geteuid()
    assert u64(P.H_ENTRIES_OFF) == 256
    assert u64(P.H_CMDS_OFF) == 256 + P.DEFAULT_ENTRIES * 96
    assert u64(P.H_ACKS_OFF) == u64(P.H_CMDS_OFF) + P.DEFAULT_RING * 32
    assert 0 < u64(P.E_HEARTBEAT) <= time.monotonic_ns()
    assert u64(P.A_HEARTBEAT) == 0 and u64(P.A_CMD_HEAD) == 0


@conformance
def entry_table_stays_dense(impl, page, a):
    assert page.publish(1, 10 * MiB, 111, 1, P.F_ACTIVE, "1:VAEDecode", 5)
    assert page.publish(2, 20 * MiB, 222, 1, P.F_MODEL, "2:CheckpointLoader")
    assert page.publish(3, 30 * MiB, 333, 2, 0, "x" * 60)
    ents = a.entries()
    assert sorted(ents) == [1, 2, 3]
    assert ents[1] == {"id": 1, "bytes": 10 * MiB, "last_use_ns": 111, "used_generation": 1,
                       "cost_ns": 5, "flags": P.F_ACTIVE, "label": "1:VAEDecode"}
    assert ents[2]["flags"] == P.F_MODEL and ents[2]["label"] == "2:CheckpointLoader"
    assert ents[3]["label"] == "x" * 48  # full: no NUL
    # update in place, then remove the first: the last fills the hole
    assert page.publish(2, 21 * MiB, 223, 2, 0, "2:CheckpointLoader")
    page.remove(1)
    page.remove(99)  # not there: no error
    assert a.u32(P.E_NR_ENTRIES) == 2 and a.u32(P.E_ENTRIES_SEQ) % 2 == 0
    first = struct.unpack_from("<Q", a.m, a.entries_off)[0]
    assert first == 3, first
    hole = a.m[a.entries_off + 2 * 96:a.entries_off + 3 * 96]
    assert hole == bytes(96)
    assert a.entries()[2]["bytes"] == 21 * MiB
    page.clear()
    assert a.entries() == {} and a.u32(P.E_NR_ENTRIES) == 0
    page.set_generation(7)
    assert a.generation() == 7


@conformance
def full_table_refuses_a_new_entry(impl, page, a):
    small = impl.make(max_entries=4, ring=4)
    try:
        for i in range(1, 5):
            assert small.publish(i, i, 1, 1, 0, "")
        assert small.publish(5, 5, 1, 1, 0, "") is False
        assert small.publish(4, 44, 1, 1, 0, "")  # an update still fits
    finally:
        small.close()


@conformance
def commands_in_order_and_acks_numbered_apart(impl, page, a):
    assert page.poll() is None
    s1, s2 = a.post(11, reason=1), a.post(12, reason=2)
    c1, c2 = page.poll(), page.poll()
    assert (c1.seq, c1.entry_id, c1.reason) == (s1, 11, 1)
    assert (c2.seq, c2.entry_id, c2.reason) == (s2, 12, 2)
    assert c1.issue_ns > 0 and c1.recv_ns >= c1.issue_ns
    assert page.poll() is None and a.cmd_done() == 2
    page.ack(c2, P.ACK_BUSY, 0)  # answered out of order: ack 1 is seq 2
    page.ack(c1, P.ACK_EVICTED, 5 * MiB)
    k1, k2 = ack_slot(a, 1), ack_slot(a, 2)
    assert (k1["seq"], k1["id"], k1["status"]) == (2, 12, P.ACK_BUSY)
    assert (k2["seq"], k2["id"], k2["status"], k2["bytes_freed"]) == (1, 11, P.ACK_EVICTED, 5 * MiB)
    assert k2["recv_ns"] == c1.recv_ns and k2["ack_ns"] >= k2["recv_ns"]
    assert a.u64(P.E_ACK_HEAD) == 2


@conformance
def a_command_never_taken_cannot_be_acked(impl, page, a):
    a.post(5)
    c = page.poll()
    c.seq = 2  # not posted yet
    try:
        page.ack(c, P.ACK_EVICTED, 0)
    except OSError:
        return
    raise AssertionError("acked a command that was never taken")


@conformance
def a_lapped_ring_keeps_the_newest(impl, page, a):
    small = impl.make(max_entries=4, ring=4)
    sa = FakeAgent(small.path)
    try:
        for i in range(10):
            sa.post(100 + i)
        got = []
        while (c := small.poll()) is not None:
            got.append((c.seq, c.entry_id))
        assert got == [(7, 106), (8, 107), (9, 108), (10, 109)], got
    finally:
        sa.close()
        small.close()


@conformance
def a_torn_slot_is_skipped(impl, page, a):
    s = a.post(21)
    a.post(22)
    off = a.cmds_off + ((s - 1) % a.ring) * a.cmd_size
    a.w64(off, 999)  # the agent died halfway through rewriting it
    c = page.poll()
    assert c is not None and (c.seq, c.entry_id) == (s + 1, 22), c
    assert page.poll() is None


@conformance
def wait_wakes_on_a_post_and_times_out(impl, page, a):
    t0 = time.monotonic()
    assert page.wait(50) is None
    assert time.monotonic() - t0 >= 0.045
    got = []
    th = threading.Thread(target=lambda: got.append(page.wait(10_000)))
    th.start()
    time.sleep(0.05)
    seq = a.post(31)
    th.join(15)
    assert got and got[0] is not None and got[0].seq == seq, got


@conformance
def agent_liveness_follows_its_heartbeat(impl, page, a):
    assert not page.agent_alive()
    a.beat()
    assert page.agent_alive()
    a.beat(time.monotonic_ns() - 3_000_000_000)
    assert not page.agent_alive()
    a.beat(time.monotonic_ns() + 3_000_000_000)  # from the future: not trusted
    assert not page.agent_alive()
    a.set_level(3, headroom=123 * MiB, target=45 * MiB)
    assert (page.level(), page.headroom(), page.target()) == (3, 123 * MiB, 45 * MiB)
    page.heartbeat()
    assert abs(a.exec_heartbeat() - time.monotonic_ns()) < 5_000_000_000


@conformance
def hostile_agent_fields_stay_bounded(impl, page, a):
    """A command head at the end of the u64 range, an unknown level and
    reason: every poll looks at ring + 1 slots at most and returns."""
    a.w64(P.A_CMD_HEAD, (1 << 64) - 1)
    a.w32(P.A_LEVEL, 99)
    for _ in range(3):
        assert page.poll() is None
    assert page.level() == 99
    off = a.cmds_off
    a.w64(P.A_CMD_HEAD, 0)
    a.w64(off, 1)  # a slot whose seq the head never announced
    assert page.poll() is None


def _script(page, agent):
    page.set_generation(3)
    page.publish(1, 1 << 30, 1000, 2, P.F_MODEL, "3:CheckpointLoaderSimple", 7)
    page.publish(2, 12345, 2000, 3, P.F_ACTIVE, "ü" * 30)
    page.publish(3, 99, 3000, 1, 0, "")
    page.remove(1)
    agent.post(2)
    agent.post(3)
    c = page.poll()
    page.ack(c, P.ACK_BUSY, 0)
    c = page.poll()
    page.ack(c, P.ACK_EVICTED, 4096)


@test
def python_and_c_write_the_same_bytes():
    """The same calls on both: every byte equal but the clocks."""
    pages = []
    for impl in (IMPLS[0], IMPLS[1]):
        page = impl.make(max_entries=8, ring=4)
        agent = FakeAgent(page.path)
        _script(page, agent)
        raw = bytearray(agent.m[:])
        for off in (P.E_HEARTBEAT,):
            raw[off:off + 8] = bytes(8)
        for n in (1, 2):  # ack recv_ns and ack_ns
            o = agent.acks_off + (n - 1) * 48
            raw[o + 24:o + 40] = bytes(16)
        for n in (1, 2):  # command issue_ns (the fake agent's clock)
            o = agent.cmds_off + (n - 1) * 32
            raw[o + 16:o + 24] = bytes(8)
        pages.append(bytes(raw))
        agent.close()
        page.close()
    c, py = pages
    diff = [i for i in range(len(c)) if c[i] != py[i]]
    assert not diff, f"{len(diff)} bytes differ, first at {diff[:8]}"


@test
def memfd_page_is_sealed_private_and_named():
    old = os.environ.pop(P.CTL_ENV, None)
    page = P.Page()
    try:
        assert page.memfd and page.path == f"/proc/{os.getpid()}/fd/{page.fd}"
        assert os.readlink(page.path).startswith("/memfd:ramcache")
        seals = fcntl.fcntl(page.fd, fcntl.F_GET_SEALS)
        assert seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_GROW, seals
        try:
            os.ftruncate(page.fd, 4096)
            raise AssertionError("a sealed page could be shrunk")
        except PermissionError:
            pass
        assert fcntl.fcntl(page.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        assert stat.S_IMODE(os.fstat(page.fd).st_mode) == 0o600
    finally:
        page.close()
        if old is not None:
            os.environ[P.CTL_ENV] = old


@test
def file_page_replaces_a_planted_symlink_and_is_removed_only_if_ours():
    d = tempfile.mkdtemp(prefix="ramcache-conf-")
    target = os.path.join(d, "victim")
    open(target, "w").write("keep")
    path = os.path.join(d, "page")
    os.symlink(target, path)
    page = P.Page(path)
    assert not os.path.islink(path) and open(target).read() == "keep"
    assert [f for f in os.listdir(d) if f.startswith("page.")] == []  # no temp left
    # a successor's page at the same path is not ours to remove
    os.rename(path, path + ".mine")
    open(path, "w").close()
    page.close()
    assert os.path.exists(path)
    page2 = P.Page(os.path.join(d, "page2"))
    page2.close()
    assert not os.path.exists(os.path.join(d, "page2"))
    shutil.rmtree(d)


@test
def a_batch_of_changes_reaches_the_agent_whole():
    """publish/remove in page.batch() land in the page at once, in one
    seqcount window: a reader sees the table before or after, never half
    of it, and never an odd seqcount between two calls."""
    page = P.Page(None)
    try:
        fa = FakeAgent(page.path)
        page.publish(1, MiB, 1, 1, 0, "a")
        page.publish(2, MiB, 1, 1, 0, "b")
        seq0 = fa.u32(P.E_ENTRIES_SEQ)
        with page.batch():
            page.remove(1)
            page.publish(3, 2 * MiB, 2, 2, P.F_ACTIVE, "c")
            page.publish(2, 3 * MiB, 2, 2, 0, "b")
            seen = fa.entries()
            assert sorted(seen) == [1, 2] and seen[2]["bytes"] == MiB, seen
            assert fa.u32(P.E_ENTRIES_SEQ) == seq0, "the window opened early"
        now = fa.entries()
        assert sorted(now) == [2, 3], now
        assert now[2]["bytes"] == 3 * MiB and now[3]["flags"] == P.F_ACTIVE, now
        assert fa.u32(P.E_ENTRIES_SEQ) == seq0 + 2, "one window for the batch"
        fa.close()
    finally:
        page.close()


KILLED_WHILE_BUILDING = """
import os, signal, sys
from ramcache import page
page.Page._init_header = lambda self: os.kill(os.getpid(), signal.SIGKILL)
page.Page(sys.argv[1])
"""


@test
def file_page_killed_while_building_or_failing_leaves_no_file():
    """A process killed half way through building its page (SIGKILL, as an
    OOM kill) leaves nothing in the directory; nor does a failed rename."""
    d = tempfile.mkdtemp(prefix="ramcache-test-page-", dir="/dev/shm")
    try:
        path = os.path.join(d, "page")
        p = subprocess.run([sys.executable, "-c", KILLED_WHILE_BUILDING, path],
                           capture_output=True, text=True, timeout=60,
                           env=py_env(RAMCACHE_PARENT))
        assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr)
        assert os.listdir(d) == [], os.listdir(d)
        os.makedirs(os.path.join(path, "x"))  # rename over it fails
        try:
            P.Page(path)
        except OSError as e:
            assert e.strerror.startswith("failed to create the control page"), e
        else:
            raise AssertionError("a page renamed over a directory")
        assert os.listdir(d) == ["page"], os.listdir(d)
    finally:
        shutil.rmtree(d)


@test
def bad_sizes_are_refused_with_a_clear_error():
    for kw in ({"ring": 3}, {"ring": P.MAX_RING * 2}, {"max_entries": P.MAX_ENTRIES + 1}):
        try:
            P.Page(None, **kw)
        except OSError as e:
            assert e.strerror.startswith("failed to create the control page"), e
            continue
        raise AssertionError(f"accepted {kw}")


if __name__ == "__main__":
    main()
