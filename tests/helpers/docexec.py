#!/usr/bin/python3
# Written from README.md and docs/control-page.md alone (not the code), 2026-12-02.
"""An executor for ramcache-bpf written from docs/control-page.md alone.

Standard library only (Python 3.11), no ctypes: it polls ``cmd_head`` and
``agent_lock`` every few milliseconds instead of sleeping on the futexes
("Commands", "Watching the agent" and "Python" in control-page.md).

As a program:

    docexec.py [--entries N=24] [--size MiB=16] [--every-ms MS=150]
               [--hold-s S=2] [--wait-agent S=0] [--start-file PATH]
               [--no-seal]

As a module: ``Page(max_entries, ring, seal=True)``, with ``publish``,
``remove``, ``set_generation``, ``heartbeat``, ``agent_alive``, ``take``,
``ack``, ``close`` and the attribute ``path``.
"""

import argparse
import collections
import fcntl
import json
import mmap
import os
import signal
import struct
import sys
import time

# ---------------------------------------------------------------- values

MAGIC = 0x314C544343524152          # RAMCACHE_CTL_MAGIC, the bytes "RARCCTL1"
VERSION = 1                         # RAMCACHE_CTL_VERSION
MEMFD_NAME = "ramcache"             # RAMCACHE_CTL_MEMFD_NAME
HEADER_SIZE = 256
ENTRY_SIZE = 96
CMD_SIZE = 32
ACK_SIZE = 48
LABEL_LEN = 48                      # RAMCACHE_LABEL_LEN
MAX_ENTRIES = 65536                 # RAMCACHE_MAX_ENTRIES
MAX_RING = 4096                     # RAMCACHE_MAX_RING
DEFAULT_RING = 64                   # RAMCACHE_DEFAULT_RING
HEARTBEAT_PERIOD_NS = 250_000_000   # RAMCACHE_HEARTBEAT_PERIOD_NS
HEARTBEAT_TIMEOUT_NS = 1_500_000_000  # RAMCACHE_HEARTBEAT_TIMEOUT_NS
LOCK_TID_MASK = 0x3FFFFFFF          # RAMCACHE_LOCK_TID_MASK
LOCK_OWNER_DIED = 0x40000000        # RAMCACHE_LOCK_OWNER_DIED
LOCK_WAITERS = 0x80000000           # RAMCACHE_LOCK_WAITERS

F_ACTIVE, F_PINNED, F_MODEL = 1, 2, 4               # RAMCACHE_F_*
LEVEL_OK, LEVEL_WARN, LEVEL_HIGH, LEVEL_CRITICAL = 0, 1, 2, 3
REASON_HEADROOM, REASON_INACTIVE, REASON_FORECAST, REASON_RECLAIM = 1, 2, 3, 4
ACK_EVICTED, ACK_NOT_FOUND, ACK_BUSY, ACK_PINNED = 1, 2, 3, 4

REASON_NAMES = {REASON_HEADROOM: "headroom", REASON_INACTIVE: "inactive",
                REASON_FORECAST: "forecast", REASON_RECLAIM: "reclaim"}
STATUS_NAMES = {ACK_EVICTED: "evicted", ACK_NOT_FOUND: "not_found",
                ACK_BUSY: "busy", ACK_PINNED: "pinned"}

# Header offsets ("Header: struct ramcache_ctl").
H_MAGIC = 0
H_VERSION = 8
H_EXEC_HEARTBEAT = 128
H_ENTRIES_SEQ = 136
H_NR_ENTRIES = 140
H_GENERATION = 144
H_CMD_DONE = 152
H_ACK_HEAD = 160
H_AGENT_HEARTBEAT = 192
H_AGENT_PID = 200
H_LEVEL = 204
H_HEADROOM = 208
H_TARGET = 216
H_CMD_HEAD = 224
H_CMD_FUTEX = 232
H_AGENT_LOCK = 236

# Offsets 8..79, in order: version, header_size, total_size,
# max_entries, ring_size, entry_size, cmd_size, ack_size, executor_pid,
# executor_uid, reserved0, entries_off, cmds_off, acks_off (pad0 stays 0).
HEADER_FMT = "<IIQIIIIIIIIQQQ"
# One entry: id, bytes, last_use_ns, used_generation, cost_ns, flags,
# reserved, label.
ENTRY_FMT = "<QQQQQII48s"
# The body of one ack, after its seq: entry_id, bytes_freed, recv_ns,
# ack_ns, status, reserved.
ACK_BODY_FMT = "<QQQQII"

assert struct.calcsize(HEADER_FMT) == 80 - 8   # 8..79; pad0 (80..127) stays 0
assert struct.calcsize(ENTRY_FMT) == ENTRY_SIZE
assert struct.calcsize(ACK_BODY_FMT) == ACK_SIZE - 8

U64 = (1 << 64) - 1
U32 = (1 << 32) - 1
MFD_NOEXEC_SEAL = getattr(os, "MFD_NOEXEC_SEAL", 0x0008)   # linux/memfd.h


def now():
    """CLOCK_MONOTONIC nanoseconds, the page's clock."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def ctl_size(max_entries, ring_size):
    """The size formula: (entries_off, cmds_off, acks_off, total_size)."""
    entries_off = HEADER_SIZE
    cmds_off = entries_off + ENTRY_SIZE * max_entries
    acks_off = cmds_off + CMD_SIZE * ring_size
    return entries_off, cmds_off, acks_off, acks_off + ACK_SIZE * ring_size


def encode_label(label):
    """UTF-8, at most 48 bytes (never cut inside a character), NUL-padded
    by struct's "48s"."""
    if isinstance(label, str):
        raw = label.encode("utf-8")
        if len(raw) > LABEL_LEN:
            raw = raw[:LABEL_LEN]
            while raw:
                try:
                    raw.decode("utf-8")
                    break
                except UnicodeDecodeError:
                    raw = raw[:-1]
        return raw
    return bytes(label or b"")[:LABEL_LEN]


class Command(collections.namedtuple("Command",
                                     "seq entry_id recv_ns reason issue_ns")):
    """A command taken from the ring. Indexes 0..2 are (seq, entry_id,
    recv_ns), as the document's example returns them."""
    __slots__ = ()

    @property
    def id(self):
        return self.entry_id


class Page:
    """The executor's side of one control page: a sealed memfd named
    "ramcache", mapped MAP_SHARED read-write, kept open while it lives."""

    def __init__(self, max_entries=4096, ring=DEFAULT_RING, seal=True):
        max_entries, ring = int(max_entries), int(ring)
        if not 1 <= max_entries <= MAX_ENTRIES:
            raise ValueError("max_entries must be in 1..%d" % MAX_ENTRIES)
        if not (1 <= ring <= MAX_RING and ring & (ring - 1) == 0):
            raise ValueError("ring must be a power of two in 1..%d" % MAX_RING)
        self.max_entries, self.ring = max_entries, ring
        (self.entries_off, self.cmds_off, self.acks_off,
         self.size) = ctl_size(max_entries, ring)
        self.fd = self.m = self.q = self.d = None
        self.closed = False

        # 1. memfd_create("ramcache", MFD_CLOEXEC | MFD_ALLOW_SEALING), with
        #    MFD_NOEXEC_SEAL where the kernel knows it (as the C library).
        flags = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
        try:
            self.fd = os.memfd_create(MEMFD_NAME, flags | MFD_NOEXEC_SEAL)
        except OSError:
            self.fd = os.memfd_create(MEMFD_NAME, flags)
        try:
            # 2. sized once, for the life of the page;
            os.ftruncate(self.fd, self.size)
            # 3. sealed against shrinking (required) and growing, as the C
            #    library does; --no-seal leaves it unsealed.
            self.sealed = bool(seal)
            if seal:
                fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS,
                            fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                            | fcntl.F_SEAL_SEAL)
            # 4. mapped MAP_SHARED, read and write. Python's map keeps a
            #    descriptor of its own (a dup of fd): both are closed in
            #    close().
            self.m = mmap.mmap(self.fd, self.size, mmap.MAP_SHARED,
                               mmap.PROT_READ | mmap.PROT_WRITE)
            self.q = memoryview(self.m).cast("Q")   # q[off // 8]: one 8-byte store
            self.d = memoryview(self.m).cast("I")   # d[off // 4]: one 4-byte store
        except BaseException:
            self._release()
            raise
        self.path = "/proc/%d/fd/%d" % (os.getpid(), self.fd)
        self.pid = os.getpid()

        # Private state, never read back from the page.
        self._eseq = 0          # entries_seq
        self._ids = []          # slot -> entry id
        self._recs = []         # slot -> the 96 bytes written there
        self._slot = {}         # entry id -> slot
        self._cmd_done = 0      # cmd_done
        self._ack_head = 0      # ack_head

        # 5. the header: offsets 8..127 (plain stores), exec_heartbeat_ns,
        #    then magic last (publishing store).
        struct.pack_into(HEADER_FMT, self.m, H_VERSION,
                         VERSION, HEADER_SIZE, self.size, max_entries, ring,
                         ENTRY_SIZE, CMD_SIZE, ACK_SIZE,
                         os.getpid() & U32, os.geteuid() & U32, 0,
                         self.entries_off, self.cmds_off, self.acks_off)
        self.heartbeat()
        self.q[H_MAGIC // 8] = MAGIC

    # ------------------------------------------------------------ header

    def heartbeat(self):
        """exec_heartbeat_ns = now (publishing store); at least every 250 ms."""
        self.q[H_EXEC_HEARTBEAT // 8] = now()

    def set_generation(self, gen):
        """generation (publishing store): when a job starts, before the
        entries it uses say so in used_generation."""
        self.q[H_GENERATION // 8] = int(gen) & U64

    # ------------------------------------------------------------- agent

    def agent_lock(self):
        return self.d[H_AGENT_LOCK // 4]

    def agent_state(self):
        """'alive', or how not: 'died' (the kernel marked agent_lock),
        'none' (no heartbeat: none yet, or a clean detach), 'silent'
        (heartbeat older than 1.5 s)."""
        if self.d[H_AGENT_LOCK // 4] & LOCK_OWNER_DIED:
            return "died"
        hb = self.q[H_AGENT_HEARTBEAT // 8]
        if hb == 0:
            return "none"
        return "alive" if abs(now() - hb) < HEARTBEAT_TIMEOUT_NS else "silent"

    def agent_alive(self):
        """Two loads: a fresh agent_heartbeat_ns and no OWNER_DIED in
        agent_lock."""
        return self.agent_state() == "alive"

    def agent_info(self):
        """The agent's hints: (agent_pid, level, headroom_bytes, target_bytes)."""
        return (self.d[H_AGENT_PID // 4], self.d[H_LEVEL // 4],
                self.q[H_HEADROOM // 8], self.q[H_TARGET // 8])

    # ------------------------------------------------------ entry table

    def _begin(self):
        self._eseq = (self._eseq + 1) & U32
        self.d[H_ENTRIES_SEQ // 4] = self._eseq          # odd: changing

    def _end(self):
        self._eseq = (self._eseq + 1) & U32
        self.d[H_ENTRIES_SEQ // 4] = self._eseq          # even: done

    def _slot_off(self, slot):
        return self.entries_off + ENTRY_SIZE * slot

    def publish(self, eid, nbytes, gen, cost_ns, label, flags=0):
        """Add entry eid, or update it in its slot. False when eid is 0 or
        the table is full."""
        eid = int(eid)
        if self.closed or not 0 < eid <= U64:
            return False
        slot = self._slot.get(eid)
        new = slot is None
        if new:
            if len(self._ids) >= self.max_entries:
                return False
            slot = len(self._ids)
        # Prepared outside the window: the window only copies.
        rec = struct.pack(ENTRY_FMT, eid, int(nbytes) & U64, now(),
                          int(gen) & U64, int(cost_ns) & U64,
                          int(flags) & U32, 0, encode_label(label))
        off = self._slot_off(slot)
        nr = slot + 1 if new else len(self._ids)
        self._begin()
        self.m[off:off + ENTRY_SIZE] = rec
        if new:
            self.d[H_NR_ENTRIES // 4] = nr
        self._end()
        if new:
            self._ids.append(eid)
            self._recs.append(rec)
            self._slot[eid] = slot
        else:
            self._recs[slot] = rec
        return True

    def remove(self, eid):
        """Remove entry eid, moving the last one into its slot (the table
        stays dense). False when there is no such entry."""
        slot = self._slot.get(int(eid))
        if slot is None or self.closed:
            return False
        last = len(self._ids) - 1
        moved = self._recs[last]
        zero = bytes(ENTRY_SIZE)
        off, last_off = self._slot_off(slot), self._slot_off(last)
        self._begin()
        if slot != last:
            self.m[off:off + ENTRY_SIZE] = moved
        self.m[last_off:last_off + ENTRY_SIZE] = zero
        self.d[H_NR_ENTRIES // 4] = last
        self._end()
        del self._slot[int(eid)]
        if slot != last:
            moved_id = self._ids[last]
            self._ids[slot], self._recs[slot] = moved_id, moved
            self._slot[moved_id] = slot
        self._ids.pop()
        self._recs.pop()
        return True

    def entries(self):
        """The ids published, in slot order."""
        return list(self._ids)

    # --------------------------------------------------------- commands

    def take(self):
        """The next command to run, as a Command (seq, entry_id, recv_ns,
        reason, issue_ns), or None when there is none. Lapped, torn or
        unfinished commands are consumed and skipped."""
        while not self.closed:
            nxt = self._cmd_done + 1
            head = self.q[H_CMD_HEAD // 8]               # publishing load
            if head < nxt:
                return None
            if head - nxt >= self.ring:
                # Lapped: the older slots are gone. Consumed, never run.
                self._cmd_done = head - self.ring
                self.q[H_CMD_DONE // 8] = self._cmd_done
                continue
            off = self.cmds_off + CMD_SIZE * ((nxt - 1) % self.ring)
            s1 = self.q[off // 8]
            eid = self.q[off // 8 + 1]
            issue_ns = self.q[off // 8 + 2]
            reason = self.d[(off + 24) // 4]
            s2 = self.q[off // 8]
            recv_ns = now()
            self._cmd_done = nxt
            self.q[H_CMD_DONE // 8] = nxt                # consumed, whole or not
            if s1 == s2 == nxt:
                return Command(nxt, eid, recv_ns, reason, issue_ns)
        return None

    def cmd_futex(self):
        return self.d[H_CMD_FUTEX // 4]

    # ------------------------------------------------------------- acks

    def ack(self, seq, eid, status, freed, recv_ns):
        """Answer command seq once. Returns the ack's number n."""
        if self.closed:
            return 0
        n = self._ack_head + 1
        off = self.acks_off + ACK_SIZE * ((n - 1) % self.ring)
        self.q[off // 8] = 0                             # seq 0 while it changes
        struct.pack_into(ACK_BODY_FMT, self.m, off + 8, int(eid) & U64,
                         int(freed) & U64, int(recv_ns) & U64, now(),
                         int(status) & U32, 0)
        self.q[off // 8] = int(seq) & U64                # the command's seq
        self._ack_head = n
        self.q[H_ACK_HEAD // 8] = n                      # ack_head
        return n

    # ------------------------------------------------------------ close

    def _release(self):
        for view in (self.q, self.d):
            if view is not None:
                view.release()
        self.q = self.d = None
        if self.m is not None:
            self.m.close()          # the map's own descriptor goes here
            self.m = None
        if self.fd is not None:
            os.close(self.fd)       # and the page with this one
            self.fd = None

    def close(self):
        """End the page: release the views, close the map (and its
        descriptor) and our descriptor."""
        if not self.closed:
            self.closed = True
            self._release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ================================================================ program

POLL_S = 0.002      # how often cmd_head and agent_lock are looked at
COST_NS = 50_000_000
MIB = 1 << 20
SAFE_POINT_BYTES = 256 << 10    # a safe point after each 256 KiB made


class Executor:
    def __init__(self, args):
        self.args = args
        self.blob_bytes = max(mmap.PAGESIZE,
                              -(-int(args.size * MIB) // mmap.PAGESIZE)
                              * mmap.PAGESIZE)
        n = max(1, min(args.entries, MAX_ENTRIES))
        self.page = Page(n, DEFAULT_RING, seal=not args.no_seal)
        self.blobs = {}         # entry id -> mmap
        self.active = None      # the entry the running job uses
        self.held = []          # commands held for it
        self.alive = False
        self.stop = False
        self.made = self.cmds = self.acks = self.evicted = self.rss_drops = 0
        self.statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        self.rss_max = 0
        self.rss()

    # -------------------------------------------------------------- io

    @staticmethod
    def emit(obj):
        try:
            sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            pass

    def rss(self):
        pages = int(os.pread(self.statm, 128, 0).split()[1])
        rss = pages * mmap.PAGESIZE
        if rss > self.rss_max:
            self.rss_max = rss
        return rss

    # ---------------------------------------------------- safe points

    def service(self):
        """A safe point: beat, see how the agent is, take every command;
        commands for the entry in use are held, any other is obeyed now."""
        page = self.page
        page.heartbeat()
        alive = page.agent_alive()
        if alive != self.alive:
            self.alive = alive
            self.emit({"type": "agent", "alive": alive})
        while True:
            cmd = page.take()
            if cmd is None:
                break
            self.cmds += 1
            self.emit({"type": "cmd", "seq": cmd.seq, "id": cmd.entry_id,
                       "reason": REASON_NAMES.get(cmd.reason, cmd.reason)})
            if self.active is not None and cmd.entry_id == self.active:
                self.held.append(cmd)       # in use: obeyed when the job ends
            else:
                self.obey(cmd)
        self.rss()

    def obey(self, cmd):
        blob = self.blobs.pop(cmd.entry_id, None)
        if blob is None:
            self.page.ack(cmd.seq, cmd.entry_id, ACK_NOT_FOUND, 0, cmd.recv_ns)
            self.acks += 1
            return
        before = self.rss()
        freed = len(blob)
        self.page.remove(cmd.entry_id)      # off the table first,
        blob.close()                        # munmap: back to the kernel now,
        after = self.rss()
        self.page.ack(cmd.seq, cmd.entry_id, ACK_EVICTED, freed, cmd.recv_ns)
        self.acks += 1                      # then the ack
        self.evicted += 1
        if before - after >= self.blob_bytes // 2:
            self.rss_drops += 1

    def idle_until(self, deadline_ns):
        while not self.stop:
            self.service()
            left = deadline_ns - now()
            if left <= 0:
                return
            time.sleep(min(POLL_S, left / 1e9))

    # ----------------------------------------------------------- jobs

    def job(self, k):
        """Make entry k: real memory, 256 KiB at a time, a safe point after
        each; the entry is active (in use) while its job runs."""
        label = "blob %d" % k
        page = self.page
        page.set_generation(k)
        self.emit({"type": "job", "k": k, "t_ns": now()})
        blob = mmap.mmap(-1, self.blob_bytes, flags=mmap.MAP_PRIVATE,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.blobs[k] = blob
        self.active = k
        page.publish(k, self.blob_bytes, k, COST_NS, label, F_ACTIVE)
        self.made += 1
        step = mmap.PAGESIZE
        for start in range(0, self.blob_bytes, SAFE_POINT_BYTES):
            for off in range(start, min(start + SAFE_POINT_BYTES,
                                        self.blob_bytes), step):
                blob[off] = 1               # real memory: every page touched
            self.service()                  # a safe point after each piece
            if self.stop:
                break
        # The job is over (or cut short): the entry is no longer in use.
        self.active = None
        held, self.held = self.held, []
        for cmd in held:
            self.obey(cmd)
        if k in self.blobs:
            page.publish(k, self.blob_bytes, k, COST_NS, label, 0)
        self.rss()

    # ------------------------------------------------------------ run

    def run(self):
        a = self.args
        self.emit({"type": "ready", "pid": os.getpid(), "uid": os.geteuid(),
                   "page": self.page.path, "size": self.page.size})
        self.service()
        deadline = now() + int(a.wait_agent * 1e9)
        while not self.stop and not self.alive and now() < deadline:
            time.sleep(POLL_S)
            self.service()
        if a.start_file:
            while not self.stop and not os.path.exists(a.start_file):
                time.sleep(POLL_S)
                self.service()
        start = now()
        if a.start_file and not self.stop:
            self.emit({"type": "start", "t_ns": start})
        every = int(a.every_ms * 1e6)
        last = now()
        for k in range(1, a.entries + 1):
            self.idle_until(start + k * every)
            if self.stop:
                break
            self.job(k)
            last = now()
        self.idle_until(last + int(a.hold_s * 1e9))
        self.service()
        rss_end = self.rss()
        self.emit({"type": "done", "made": self.made, "cmds": self.cmds,
                   "acks": self.acks, "evicted": self.evicted,
                   "rss_drops": self.rss_drops, "rss_max": self.rss_max,
                   "rss_end": rss_end, "cached": len(self.blobs),
                   "interrupted": self.stop})
        return 0


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="ramcache executor written from docs/control-page.md")
    p.add_argument("--entries", type=int, default=24, metavar="N",
                   help="entries to make, ids 1..N (default 24)")
    p.add_argument("--size", type=float, default=16, metavar="MiB",
                   help="each entry's blob, MiB (default 16)")
    p.add_argument("--every-ms", type=float, default=150, metavar="MS",
                   help="entry k at start + k * MS (default 150)")
    p.add_argument("--hold-s", type=float, default=2, metavar="S",
                   help="exit S seconds after the last entry (default 2)")
    p.add_argument("--wait-agent", type=float, default=0, metavar="S",
                   help="wait up to S seconds for a live agent first")
    p.add_argument("--start-file", metavar="PATH",
                   help="then make no entry before PATH exists")
    p.add_argument("--no-seal", action="store_true",
                   help="leave the memfd unsealed (the agent refuses it)")
    a = p.parse_args(argv)
    if a.entries < 0 or a.entries > MAX_ENTRIES:
        p.error("--entries must be in 0..%d" % MAX_ENTRIES)
    if a.size <= 0 or a.every_ms < 0 or a.hold_s < 0 or a.wait_agent < 0:
        p.error("sizes and times must be positive")
    return a


def main(argv=None):
    args = parse_args(argv)
    ex = Executor(args)

    def on_signal(signum, frame):
        ex.stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # The page ends when the process exits (every descriptor of it goes).
    return ex.run()


if __name__ == "__main__":
    sys.exit(main())
