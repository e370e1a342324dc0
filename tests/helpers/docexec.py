#!/usr/bin/env python3
"""An executor written from docs/control-page.md alone: Python standard
library only, nothing taken from the C library or the agent's code.

It makes its control page as a sealed memfd, caches --entries blobs of
--size MiB of real anonymous memory (one mmap each, so an eviction gives
the memory back to the kernel at once), one every --every-ms, and keeps
all of them: with no agent it grows until its memory cgroup kills it. It
obeys eviction commands and answers each with an ack.

One JSON object per line on stdout: "ready" (pid, uid, page), "agent"
(seen or lost), "cmd" (each command taken), "done" (totals). Exits 0 after
the last entry and --hold-s more seconds, or on SIGTERM/SIGINT.
"""
import argparse
import fcntl
import json
import mmap
import os
import signal
import struct
import sys
import time

# docs/control-page.md, "Values"
MAGIC = 0x314C544343524152
VERSION = 1
HEARTBEAT_PERIOD_NS = 250_000_000
HEARTBEAT_TIMEOUT_NS = 1_500_000_000
LABEL_LEN = 48
ACK_EVICTED, ACK_NOT_FOUND, ACK_BUSY, ACK_PINNED = 1, 2, 3, 4

# docs/control-page.md, "Layout": record sizes and header offsets
HEADER_SIZE, ENTRY_SIZE, CMD_SIZE, ACK_SIZE = 256, 96, 32, 48
OFF_MAGIC = 0
OFF_EXEC_HEARTBEAT = 128
OFF_ENTRIES_SEQ = 136
OFF_NR_ENTRIES = 140
OFF_GENERATION = 144
OFF_CMD_DONE = 152
OFF_ACK_HEAD = 160
OFF_AGENT_HEARTBEAT = 192
OFF_LEVEL = 204
OFF_CMD_HEAD = 224


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def say(**kw):
    print(json.dumps(kw), flush=True)


class Page:
    """The executor's side of one control page (a sealed memfd)."""

    def __init__(self, max_entries, ring, seal=True):
        self.max_entries = max_entries
        self.ring = ring
        # "Size formula"
        self.entries_off = 256
        self.cmds_off = self.entries_off + 96 * max_entries
        self.acks_off = self.cmds_off + 32 * ring
        self.size = self.acks_off + 48 * ring
        # "Finding the page": memfd, size, seal, map, keep the fd
        self.fd = os.memfd_create("ramcache",
                                  os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, self.size)
        if seal:
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        self.m = mmap.mmap(self.fd, self.size, mmap.MAP_SHARED,
                           mmap.PROT_READ | mmap.PROT_WRITE)
        # publishing stores and loads: one aligned 8- or 4-byte access
        self.q = memoryview(self.m).cast("Q")
        self.w = memoryview(self.m).cast("I")
        self.ids = []  # ids[i] is the entry in slot i
        self.entries_seq = 0
        self.cmd_done = 0  # our own copy, never read back
        self.ack_head = 0
        # "Creating the page": every header field, then the magic
        struct.pack_into("<IIQIIIIIIIIQQQ", self.m, 8, VERSION, HEADER_SIZE,
                         self.size, max_entries, ring, ENTRY_SIZE, CMD_SIZE,
                         ACK_SIZE, os.getpid(), os.geteuid(), 0,
                         self.entries_off, self.cmds_off, self.acks_off)
        self.heartbeat()
        self.store64(OFF_MAGIC, MAGIC)

    def store64(self, off, v):
        self.q[off // 8] = v

    def load64(self, off):
        return self.q[off // 8]

    def store32(self, off, v):
        self.w[off // 4] = v

    @property
    def path(self):
        return f"/proc/{os.getpid()}/fd/{self.fd}"

    def heartbeat(self):
        self.store64(OFF_EXEC_HEARTBEAT, now_ns())

    def agent_alive(self):
        hb = self.load64(OFF_AGENT_HEARTBEAT)
        return hb != 0 and abs(now_ns() - hb) < HEARTBEAT_TIMEOUT_NS

    def level(self):
        return self.w[OFF_LEVEL // 4]

    # "Entry table (seqcount)"
    def _begin(self):
        self.entries_seq += 1
        self.store32(OFF_ENTRIES_SEQ, self.entries_seq)

    def _end(self):
        self.store32(OFF_NR_ENTRIES, len(self.ids))
        self.entries_seq += 1
        self.store32(OFF_ENTRIES_SEQ, self.entries_seq)

    def _write_entry(self, slot, eid, nbytes, last_use, gen, cost, flags,
                     label):
        raw = label.encode()[:LABEL_LEN].ljust(LABEL_LEN, b"\0")
        struct.pack_into("<QQQQQII48s", self.m,
                         self.entries_off + ENTRY_SIZE * slot, eid, nbytes,
                         last_use, gen, cost, flags, 0, raw)

    def publish(self, eid, nbytes, gen, cost_ns, label, flags=0):
        if len(self.ids) >= self.max_entries:
            return False
        self._begin()
        self._write_entry(len(self.ids), eid, nbytes, now_ns(), gen, cost_ns,
                          flags, label)
        self.ids.append(eid)
        self._end()
        return True

    def remove(self, eid):
        slot = self.ids.index(eid)
        last = len(self.ids) - 1
        self._begin()
        if slot != last:  # keep the table dense: the last moves in
            off = self.entries_off
            self.m[off + ENTRY_SIZE * slot:off + ENTRY_SIZE * (slot + 1)] = \
                self.m[off + ENTRY_SIZE * last:off + ENTRY_SIZE * (last + 1)]
            self.ids[slot] = self.ids[last]
        self.ids.pop()
        self._end()

    def set_generation(self, gen):
        self.store64(OFF_GENERATION, gen)

    # "Commands (agent -> executor)"
    def take(self):
        """(seq, entry_id, issue_ns, reason) of the next command, or None."""
        while True:
            nxt = self.cmd_done + 1
            head = self.load64(OFF_CMD_HEAD)
            if head < nxt:
                return None
            if head - nxt >= self.ring:  # lapped: the older slots are gone
                self.cmd_done = head - self.ring
                continue
            off = self.cmds_off + CMD_SIZE * ((nxt - 1) % self.ring)
            s1 = self.load64(off)
            eid, issue, reason = struct.unpack_from("<QQI", self.m, off + 8)
            s2 = self.load64(off)
            self.cmd_done = nxt
            self.store64(OFF_CMD_DONE, nxt)
            if s1 == nxt and s2 == nxt:
                return nxt, eid, issue, reason

    # "Acks (executor -> agent)"
    def ack(self, seq, eid, status, freed, recv_ns):
        n = self.ack_head + 1
        off = self.acks_off + ACK_SIZE * ((n - 1) % self.ring)
        self.store64(off, 0)
        struct.pack_into("<QQQQI", self.m, off + 8, eid, freed, recv_ns,
                         now_ns(), status)
        self.store64(off, seq)
        self.ack_head = n
        self.store64(OFF_ACK_HEAD, n)

    def close(self):
        self.q.release()
        self.w.release()
        self.m.close()
        os.close(self.fd)


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def blob(nbytes):
    """nbytes of anonymous memory, every page touched."""
    m = mmap.mmap(-1, nbytes, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    page = os.sysconf("SC_PAGE_SIZE")
    for off in range(0, nbytes, page):
        m[off] = 1
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=24)
    ap.add_argument("--size", type=int, default=16, help="MiB per entry")
    ap.add_argument("--every-ms", type=int, default=150)
    ap.add_argument("--hold-s", type=float, default=2.0)
    ap.add_argument("--wait-agent", type=float, default=0,
                    help="seconds to wait for an agent before caching")
    ap.add_argument("--start-file", default=None,
                    help="after the agent is seen, make no entry before "
                    "this file exists (several executors start in step)")
    ap.add_argument("--no-seal", action="store_true",
                    help="leave the page unsealed (the agent must refuse it)")
    a = ap.parse_args()
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))

    page = Page(max_entries=256, ring=64, seal=not a.no_seal)
    say(type="ready", pid=os.getpid(), uid=os.geteuid(), page=page.path,
        size=page.size)
    end = time.monotonic() + a.wait_agent
    while a.wait_agent and not page.agent_alive() and not stop:
        if time.monotonic() > end:
            break
        page.heartbeat()
        time.sleep(0.02)
    while a.start_file and not os.path.exists(a.start_file) and not stop:
        if time.monotonic() > end:
            break
        page.heartbeat()
        time.sleep(0.02)
    if a.start_file:
        say(type="start", t_ns=now_ns())

    cache = {}
    nbytes = a.size << 20
    made = cmds = acks = evicted = rss_drops = 0
    rss_max = 0
    alive = False
    next_make = time.monotonic()
    last_beat = 0
    done_at = None
    while not stop:
        t = time.monotonic()
        if now_ns() - last_beat >= HEARTBEAT_PERIOD_NS // 2:
            page.heartbeat()
            last_beat = now_ns()
            if page.agent_alive() != alive:
                alive = not alive
                say(type="agent", alive=alive)
        while True:
            c = page.take()
            if c is None:
                break
            seq, eid, _, reason = c
            recv = now_ns()
            cmds += 1
            say(type="cmd", seq=seq, id=eid, reason=reason)
            if eid in cache:
                before = rss()
                page.remove(eid)
                cache.pop(eid).close()
                after = rss()
                rss_drops += before - after >= nbytes // 2
                page.ack(seq, eid, ACK_EVICTED, nbytes, recv)
                evicted += 1
            else:
                page.ack(seq, eid, ACK_NOT_FOUND, 0, recv)
            acks += 1
        if made < a.entries and t >= next_make:
            made += 1
            cache[made] = blob(nbytes)
            page.set_generation(made)
            page.publish(made, nbytes, made, 50_000_000, f"blob {made}")
            # a fixed clock, not "every_ms after the last one": executors
            # started in step stay in step even where making an entry is
            # slow (an emulated machine), so entry N is as old in each
            next_make += a.every_ms / 1000
            rss_max = max(rss_max, rss())
        if made == a.entries and done_at is None:
            done_at = t + a.hold_s
        if done_at is not None and t >= done_at:
            break
        time.sleep(0.005)
    say(type="done", made=made, cmds=cmds, acks=acks, evicted=evicted,
        rss_drops=rss_drops, rss_max=rss_max, rss_end=rss(),
        cached=len(cache), interrupted=bool(stop))
    page.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
