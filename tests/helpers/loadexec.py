#!/usr/bin/env python3
"""An executor that loads something big, for tests/integration/test_announce.py:
the project's Python module's page (python/ramcache), ENTRIES entries of
MIB MiB each held in real memory, inactive (an earlier job's), obeyed on
command. Then, on a line "load N [ANNOUNCE]" on stdin, it takes N MiB at
once, as a model load does: with ANNOUNCE (default N) > 0 it first
announces ANNOUNCE MiB (expect_bytes) and serves commands until the agent
has counted it and wants nothing more (at most WAIT s), then touches the
N MiB, then withdraws the announcement. One JSON line per event on stdout:

  {"type": "ready", "pid"}
  {"type": "evicted", "id", "during": "wait"|"idle"|"load"}
  {"type": "waited", "ms", "seen", "served"}
  {"type": "loaded", "mib"}
  {"type": "burst", "n"}

A line "burst N MS COUNT EVERY_MS" takes N MiB, holds it MS ms and frees
it, COUNT times, one every EVERY_MS ms (a tenant's transient growth); a
line "grow N" takes N MiB 8 MiB at a time, a safe point after each, and
keeps it ({"type": "grown", "mib"}: a tenant that keeps what it took).

usage: loadexec.py ENTRIES MIB [--stale] [--pinned]
  --stale: announce with a stamp 61 s old (the agent must ignore it)
  --pinned: the entries are published pinned (never evicted)
The project's python/ is on its PYTHONPATH (rctest.py_env).
"""
import json
import os
import select
import sys
import time

from ramcache import page as pagemod

MiB = 1 << 20
WAIT = 3.0


def say(**kw):
    print(json.dumps(kw), flush=True)


class LoadExec:
    def __init__(self, entries, mib, stale, pinned=False):
        self.page = pagemod.Page()
        self.blobs = {}
        self.stale = stale
        flags = pagemod.F_PINNED if pinned else 0
        self.page.set_generation(2)
        with self.page.batch():
            for i in range(1, entries + 1):
                blob = bytearray(mib * MiB)
                blob[::4096] = b"x" * len(blob[::4096])  # in RAM, not just mapped
                self.blobs[i] = blob
                self.page.publish(i, mib * MiB, time.monotonic_ns(), 1, flags,
                                  f"blob-{i}", 0)

    def serve(self, during):
        """Take and obey every command waiting; how many."""
        n = 0
        while True:
            cmd = self.page.poll()
            if cmd is None:
                return n
            blob = self.blobs.pop(cmd.entry_id, None)
            freed = len(blob) if blob is not None else 0
            del blob
            with self.page.batch():
                self.page.remove(cmd.entry_id)
            self.page.ack(cmd, pagemod.ACK_EVICTED if freed else pagemod.ACK_NOT_FOUND,
                          freed)
            say(type="evicted", id=cmd.entry_id, during=during)
            n += 1

    def announce(self, nbytes):
        self.page.expect(nbytes)
        if self.stale:  # the stamp of an announcement a minute old
            self.page._w64(pagemod.E_EXPECT_NS,
                           pagemod.now_ns() - pagemod.EXPECT_TTL_NS - 10**9)

    def wait_room(self):
        start, served = time.monotonic(), 0
        while time.monotonic() - start < WAIT:
            self.page.heartbeat()
            served += self.serve("wait")
            if self.page.expect_seen() and not self.page.target():
                break
            time.sleep(0.01)
        say(type="waited", ms=round((time.monotonic() - start) * 1e3, 1),
            seen=self.page.expect_seen(), served=served)

    def load(self, mib, announce_mib):
        if announce_mib:
            self.announce(announce_mib * MiB)
            self.wait_room()
        block = bytearray(mib * MiB)
        block[::4096] = b"y" * len(block[::4096])
        self.blobs[-1] = block  # held, never published
        self.page.expect(0)
        say(type="loaded", mib=mib)

    def burst(self, mib, hold_ms, count, every_ms):
        """Transient growth, freed each time: what it took is back before
        the next."""
        for n in range(count):
            start = time.monotonic()
            block = bytearray(mib * MiB)
            block[::4096] = b"z" * len(block[::4096])
            self.pause(hold_ms / 1e3, "burst")
            del block
            say(type="burst", n=n)
            self.pause(every_ms / 1e3 - (time.monotonic() - start), "burst")

    def grow(self, mib):
        for _ in range(0, mib, 8):
            block = bytearray(8 * MiB)
            block[::4096] = b"g" * len(block[::4096])
            self.blobs[-2 - len(self.blobs)] = block  # held, never published
            self.pause(0.01, "grow")
        say(type="grown", mib=mib)

    def pause(self, seconds, during):
        end = time.monotonic() + max(0.0, seconds)
        while time.monotonic() < end:
            self.page.heartbeat()
            self.serve(during)
            time.sleep(0.01)

    def run(self):
        say(type="ready", pid=os.getpid())
        while True:
            self.page.heartbeat()
            self.serve("idle")
            r, _, _ = select.select([sys.stdin], [], [], 0.05)
            if not r:
                continue
            line = sys.stdin.readline()
            if not line:
                return
            words = line.split()
            if words and words[0] == "burst":
                self.burst(*(int(w) for w in words[1:5]))
            if words and words[0] == "grow":
                self.grow(int(words[1]))
            if words and words[0] == "load":
                mib = int(words[1])
                self.load(mib, int(words[2]) if len(words) > 2 else mib)
                self.serve("load")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    LoadExec(int(args[0]), int(args[1]), "--stale" in sys.argv,
             "--pinned" in sys.argv).run()


if __name__ == "__main__":
    main()
