#!/usr/bin/python3
# Written from README.md and docs/control-page.md alone (not the code), 2026-12-05.
"""An executor of the ramcache-bpf control page, standard library only.

As a module: Page, the memfd control page (entries, commands, acks).
As a program: N jobs, each a blob of real memory published as an entry,
served by the agent at safe points; one JSON object per line on stdout.
No ctypes, so no futex: cmd_head and agent_lock are polled every few ms.
"""
import argparse
import collections
import fcntl
import json
import math
import mmap
import os
import signal
import struct
import sys
import time

MAGIC, VERSION = 0x314C544343524152, 1
HEADER, ENTRY, CMD, ACK = 256, 96, 32, 48
LABEL_LEN = 48
MAX_ENTRIES, MAX_RING = 65536, 4096
HEARTBEAT_TIMEOUT_NS = 1_500_000_000
LOCK_TID_MASK, LOCK_OWNER_DIED = 0x3FFFFFFF, 0x40000000
F_ACTIVE, F_PINNED, F_MODEL = 1, 2, 4
ACK_EVICTED, ACK_NOT_FOUND, ACK_BUSY, ACK_PINNED = 1, 2, 3, 4
REASONS = {1: "headroom", 2: "inactive", 3: "forecast", 4: "reclaim"}
MFD_CLOEXEC, MFD_ALLOW_SEALING = 0x0001, 0x0002
F_ADD_SEALS, F_SEAL_SHRINK = 1033, 0x02

# Header offsets (bytes).
O_MAGIC, O_EXEC_HB, O_ENTRIES_SEQ, O_NR_ENTRIES = 0, 128, 136, 140
O_GENERATION, O_CMD_DONE, O_ACK_HEAD = 144, 152, 160
O_AGENT_HB, O_CMD_HEAD, O_AGENT_LOCK = 192, 224, 236

ENTRY_FMT = "<QQQQQII48s"   # id bytes last_use used_gen cost flags reserved label
ACK_BODY_FMT = "<QQQQII"    # entry_id bytes_freed recv_ns ack_ns status reserved


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def fresh(hb, t=None):
    """A heartbeat is fresh: 0 < hb and |now - hb| < 1.5 s."""
    t = now() if t is None else t
    return 0 < hb and abs(t - hb) < HEARTBEAT_TIMEOUT_NS


def label_bytes(label):
    """UTF-8, at most 48 bytes, cut at a character boundary."""
    raw = str(label).encode("utf-8")
    if len(raw) > LABEL_LEN:
        raw = raw[:LABEL_LEN].decode("utf-8", "ignore").encode("utf-8")
    return raw


class Cmd(collections.namedtuple("Cmd", "seq entry_id recv_ns reason issue_ns")):
    """A command taken from the ring: c[0] is its seq, c[1] its entry id."""
    __slots__ = ()


class Page:
    """The control page: a memfd named "ramcache", open for the process's life."""

    def __init__(self, max_entries, ring, seal=True):
        if not 1 <= max_entries <= MAX_ENTRIES:
            raise ValueError("max_entries must be in 1..65536")
        if not (1 <= ring <= MAX_RING and ring & (ring - 1) == 0):
            raise ValueError("ring must be a power of two in 1..4096")
        self.max_entries, self.ring = max_entries, ring
        self.entries_off = HEADER
        self.cmds_off = self.entries_off + ENTRY * max_entries
        self.acks_off = self.cmds_off + CMD * ring
        self.size = self.acks_off + ACK * ring
        self.fd = os.memfd_create("ramcache", MFD_CLOEXEC | MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, self.size)
        if seal:
            fcntl.fcntl(self.fd, F_ADD_SEALS, F_SEAL_SHRINK)
        self.m = mmap.mmap(self.fd, self.size)      # MAP_SHARED, read-write
        self.q = memoryview(self.m).cast("Q")       # one aligned 8-byte store
        self.d = memoryview(self.m).cast("I")       # one aligned 4-byte store
        self.path = "/proc/self/fd/%d" % self.fd
        self.ids = set()
        self._order, self._slot, self._recs = [], {}, {}  # slot->id, id->slot, id->record
        self._eseq = self._done = self._acked = 0   # own copies, never read back
        self._write_header()

    def _write_header(self):
        struct.pack_into("<IIQIIIIIIIIQQQ", self.m, 8, VERSION, HEADER, self.size,
                         self.max_entries, self.ring, ENTRY, CMD, ACK, os.getpid(),
                         os.geteuid(), 0, self.entries_off, self.cmds_off,
                         self.acks_off)
        self.heartbeat()
        self.q[O_MAGIC // 8] = MAGIC                # last: now it is a page

    # -- executor side --------------------------------------------------

    def heartbeat(self):
        self.q[O_EXEC_HB // 8] = now()

    def set_generation(self, g):
        self.q[O_GENERATION // 8] = g

    def _begin(self):
        self._eseq = (self._eseq + 1) & 0xFFFFFFFF  # odd: the table changes
        self.d[O_ENTRIES_SEQ // 4] = self._eseq

    def _end(self):
        self._eseq = (self._eseq + 1) & 0xFFFFFFFF  # even again
        self.d[O_ENTRIES_SEQ // 4] = self._eseq

    def _slot_off(self, i):
        return self.entries_off + ENTRY * i

    def publish(self, entry_id, nbytes, used_generation, cost_ns, label, flags=0):
        """Insert or update an entry (prepared first, copied in the window)."""
        if not entry_id:
            raise ValueError("entry id 0 is a free slot")
        rec = struct.pack(ENTRY_FMT, entry_id, nbytes, now(), used_generation,
                          cost_ns, flags, 0, label_bytes(label))
        new = entry_id not in self._recs
        if new and len(self._order) >= self.max_entries:
            raise RuntimeError("control page table full")
        i = len(self._order) if new else self._slot[entry_id]
        off = self._slot_off(i)
        self._begin()
        self.m[off:off + ENTRY] = rec
        if new:
            self.d[O_NR_ENTRIES // 4] = i + 1
        self._end()
        if new:
            self._order.append(entry_id)
            self._slot[entry_id] = i
            self.ids.add(entry_id)
        self._recs[entry_id] = rec

    def remove(self, entry_id):
        """Take an entry off the table (the last one moves into its slot)."""
        if entry_id not in self._recs:
            return False
        i, last = self._slot[entry_id], len(self._order) - 1
        moved = self._order[last]
        self._begin()
        if i != last:
            off = self._slot_off(i)
            self.m[off:off + ENTRY] = self._recs[moved]
        off = self._slot_off(last)
        self.m[off:off + ENTRY] = bytes(ENTRY)
        self.d[O_NR_ENTRIES // 4] = last
        self._end()
        self._order[i] = moved
        self._slot[moved] = i
        self._order.pop()
        del self._slot[entry_id], self._recs[entry_id]
        self.ids.discard(entry_id)
        return True

    # -- the agent, seen from the executor -------------------------------

    def agent_alive(self):
        """Fresh agent heartbeat and agent_lock not marked dead (two loads)."""
        if self.d[O_AGENT_LOCK // 4] & LOCK_OWNER_DIED:
            return False
        return fresh(self.q[O_AGENT_HB // 8])

    def agent_owner(self):
        """Who owns commands taken now: the agent's thread id from agent_lock,
        0 for a live agent that does not take the lock (its heartbeat
        decides), None when no agent is there (died, detached, gone)."""
        lock = self.d[O_AGENT_LOCK // 4]
        if lock & LOCK_OWNER_DIED:
            return None
        if lock & LOCK_TID_MASK:
            return lock & LOCK_TID_MASK
        return 0 if fresh(self.q[O_AGENT_HB // 8]) else None

    # -- commands and acks ----------------------------------------------

    def take(self):
        """The next command (a Cmd), or None when the ring is empty."""
        while True:
            nxt, head = self._done + 1, self.q[O_CMD_HEAD // 8]
            if head < nxt:
                return None
            if head - nxt >= self.ring:         # lapped: older slots are gone
                self._done = head - self.ring
                self.q[O_CMD_DONE // 8] = self._done
                continue
            off = self.cmds_off + CMD * ((nxt - 1) % self.ring)
            s1 = self.q[off // 8]
            eid, issue = self.q[off // 8 + 1], self.q[off // 8 + 2]
            reason = self.d[(off + 24) // 4]
            s2 = self.q[off // 8]
            self._done = nxt
            self.q[O_CMD_DONE // 8] = nxt       # consumed, whole or not
            if s1 == s2 == nxt:
                return Cmd(nxt, eid, now(), reason, issue)

    def ack(self, seq, entry_id, status, bytes_freed, recv_ns):
        """Answer command seq once: slot seq 0, the body, seq, then ack_head."""
        if status != ACK_EVICTED:
            bytes_freed = 0
        self._acked += 1
        off = self.acks_off + ACK * ((self._acked - 1) % self.ring)
        self.q[off // 8] = 0
        struct.pack_into(ACK_BODY_FMT, self.m, off + 8, entry_id, bytes_freed,
                         recv_ns, now(), status, 0)
        self.q[off // 8] = seq
        self.q[O_ACK_HEAD // 8] = self._acked

    def close(self):
        """End the page: the map's descriptor and ours both closed."""
        if self.m is None:
            return
        self.q.release()
        self.d.release()
        self.m.close()
        os.close(self.fd)
        self.m = None


# ---------------------------------------------------------------------------
# The program

PIECE = 256 << 10          # bytes touched between two safe points
POLL_S = 0.002             # poll period of cmd_head and agent_lock
COST_NS = 1_000_000        # every blob costs 1 ms to recompute
RING = 64


def rss_bytes():
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * mmap.PAGESIZE


class Executor:
    def __init__(self, args):
        self.page = Page(max(1, args.entries), RING, seal=not args.no_seal)
        pages = math.ceil(args.size * (1 << 20) / mmap.PAGESIZE)
        self.blob_bytes = max(1, pages) * mmap.PAGESIZE
        self.cache = {}            # entry id -> its blob (an mmap)
        self.held = []             # (command, owner token when taken)
        self.job = None            # the entry the running job uses
        self.alive = False         # the agent, as last printed
        self.stop = False
        self.out_ok = True
        self.n = dict(made=0, cmds=0, acks=0, evicted=0, rss_drops=0)
        self.rss_max = rss_bytes()

    def emit(self, **obj):
        if not self.out_ok:
            return
        try:
            print(json.dumps(obj, separators=(",", ":")), flush=True)
        except (BrokenPipeError, ValueError):
            self.out_ok = False

    def note_rss(self):
        r = rss_bytes()
        self.rss_max = max(self.rss_max, r)
        return r

    # -- safe points -------------------------------------------------------

    def safe_point(self):
        """Beat, watch the agent, take every command: hold or obey."""
        self.page.heartbeat()
        alive = self.page.agent_alive()
        if alive != self.alive:
            self.alive = alive
            self.emit(type="agent", alive=alive, t_ns=now())
        self.prune_held()
        while True:
            c = self.page.take()
            if c is None:
                break
            self.n["cmds"] += 1
            self.emit(type="cmd", seq=c.seq, id=c.entry_id,
                      reason=REASONS.get(c.reason, "unknown"), t_ns=c.recv_ns)
            self.handle(c)
        self.note_rss()

    def handle(self, c):
        if self.job is not None and c.entry_id == self.job:
            owner = self.page.agent_owner()
            if owner is not None:          # in use: obeyed when the job ends
                self.held.append((c, owner))
            return                         # its agent is gone: dropped
        self.obey(c)

    def prune_held(self):
        """Drop, unanswered, the held commands whose agent is gone."""
        if self.held:
            owner = self.page.agent_owner()
            self.held = [(c, t) for c, t in self.held if t == owner]

    def obey(self, c):
        """Evict now: out of the cache, off the table, unmapped, acked."""
        blob = self.cache.pop(c.entry_id, None)
        if blob is None:
            self.page.remove(c.entry_id)
            self.send_ack(c, ACK_NOT_FOUND, 0)
            return
        before = self.note_rss()
        self.page.remove(c.entry_id)
        size = len(blob)
        blob.close()                       # munmap: back to the kernel now
        after = rss_bytes()
        self.send_ack(c, ACK_EVICTED, size)
        self.n["evicted"] += 1
        if before - after >= self.blob_bytes / 2:
            self.n["rss_drops"] += 1

    def send_ack(self, c, status, freed):
        self.page.ack(c.seq, c.entry_id, status, freed, c.recv_ns)
        self.n["acks"] += 1

    def serve_until(self, deadline_ns, until=None):
        """Safe points every few ms until the deadline, until() or a signal."""
        while not self.stop:
            self.safe_point()
            if until is not None and until():
                return True
            left = deadline_ns - now()
            if left <= 0:
                return False
            time.sleep(min(POLL_S, left / 1e9))
        return False

    # -- jobs --------------------------------------------------------------

    def run_job(self, k):
        page = self.page
        page.set_generation(k)
        self.emit(type="job", k=k, t_ns=now())
        blob = mmap.mmap(-1, self.blob_bytes, flags=mmap.MAP_PRIVATE)
        self.cache[k] = blob
        self.n["made"] += 1
        self.job = k
        page.publish(k, self.blob_bytes, k, COST_NS, "blob %d" % k, F_ACTIVE)
        for start in range(0, self.blob_bytes, PIECE):
            for off in range(start, min(start + PIECE, self.blob_bytes),
                             mmap.PAGESIZE):
                blob[off] = 1
            self.safe_point()
            if self.stop:
                return
        self.end_job(k)

    def end_job(self, k):
        """The entry is no longer in use: obey what its agent still waits
        for (the entry goes), else publish it again without the flag."""
        self.job = None
        self.prune_held()
        held, self.held = self.held, []
        if held:
            for c, _ in held:
                self.obey(c)
        elif k in self.cache:
            self.page.publish(k, self.blob_bytes, k, COST_NS, "blob %d" % k, 0)

    def wait_start_file(self, path):
        while not self.stop and not os.path.exists(path):
            self.safe_point()
            time.sleep(POLL_S)
        t = now()
        if not self.stop:
            self.emit(type="start", t_ns=t)
        return t

    def run(self, args):
        self.safe_point()
        if args.wait_agent > 0:
            self.serve_until(now() + int(args.wait_agent * 1e9),
                             self.page.agent_alive)
        start = now()
        if args.start_file:
            start = self.wait_start_file(args.start_file)
        for k in range(1, args.entries + 1):
            self.serve_until(start + int(k * args.every_ms * 1e6))
            if self.stop:
                break
            self.run_job(k)
        if not self.stop:
            self.serve_until(now() + int(args.hold_s * 1e9))

    def done(self):
        self.emit(type="done", **self.n, rss_max=self.rss_max,
                  rss_end=rss_bytes(), cached=len(self.cache),
                  interrupted=self.stop)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="ramcache control-page executor")
    p.add_argument("--entries", type=int, default=24, metavar="N")
    p.add_argument("--size", type=float, default=16, metavar="MiB")
    p.add_argument("--every-ms", type=float, default=150, metavar="MS")
    p.add_argument("--hold-s", type=float, default=2, metavar="S")
    p.add_argument("--wait-agent", type=float, default=0, metavar="S")
    p.add_argument("--start-file", metavar="PATH")
    p.add_argument("--no-seal", action="store_true")
    args = p.parse_args(argv)
    if args.entries < 0 or args.entries > MAX_ENTRIES or args.size <= 0:
        p.error("--entries must be 0..65536 and --size above 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    ex = Executor(args)

    def on_signal(signum, frame):
        ex.stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    ex.emit(type="ready", pid=os.getpid(), uid=os.geteuid(), t_ns=now(),
            page=ex.page.path, size=ex.page.size)
    ex.run(args)
    ex.done()
    return 0                   # exiting ends the page: no close needed


if __name__ == "__main__":
    sys.exit(main())
