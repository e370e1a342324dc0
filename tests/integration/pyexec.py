"""A scriptable executor for protocol tests, written from the control page
layout (include/ramcache/control.h): it creates a page, publishes entries,
beats, takes commands and writes whatever acks a test asks for, right or
wrong. The test process itself is the executor (executor_pid = its pid),
so the agent is started with --pid os.getpid() --control PATH."""
import mmap
import os
import struct
import time

HDR, ENTRY, CMD, ACK = 256, 96, 32, 48
MAGIC = 0x314c544343524152
EXEC, AGENT = 128, 192
EVICTED, NOT_FOUND, BUSY, PINNED = 1, 2, 3, 4


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Page:
    def __init__(self, path, entries=16, ring=8, uid=0, pid=None):
        self.path, self.nent, self.ring = path, entries, ring
        self.eoff = HDR
        self.coff = self.eoff + entries * ENTRY
        self.aoff = self.coff + ring * CMD
        self.size = self.aoff + ring * ACK
        tmp = path + ".tmp"
        if os.path.exists(tmp):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, self.size)
        os.fchown(fd, uid, -1)
        self.m = mmap.mmap(fd, self.size)
        os.close(fd)
        struct.pack_into("<IIQIIIIIIIIQQQ", self.m, 8, 1, HDR, self.size,
                         entries, ring, ENTRY, CMD, ACK,
                         pid or os.getpid(), uid, 0, self.eoff, self.coff,
                         self.aoff)
        self.beat()
        struct.pack_into("<Q", self.m, 0, MAGIC)
        os.rename(tmp, path)
        self.done = 0       # cmd_done
        self.acks = 0       # ack_head
        self.next_id = 1
        self.nr = 0

    def u64(self, off, v=None):
        if v is None:
            return struct.unpack_from("<Q", self.m, off)[0]
        struct.pack_into("<Q", self.m, off, v)

    def beat(self, t=None):
        self.u64(EXEC, now_ns() if t is None else t)

    def publish(self, n, size=64 << 20):
        """n more entries, each of size bytes (nothing behind them)."""
        seq = struct.unpack_from("<I", self.m, EXEC + 8)[0]
        struct.pack_into("<I", self.m, EXEC + 8, seq + 1)
        for _ in range(n):
            off = self.eoff + self.nr * ENTRY
            struct.pack_into("<QQQQQII", self.m, off, self.next_id, size,
                             now_ns(), 0, 0, 0, 0)
            label = f"entry-{self.next_id}".encode()
            self.m[off + 48:off + 48 + len(label)] = label
            self.next_id += 1
            self.nr += 1
        struct.pack_into("<I", self.m, EXEC + 12, self.nr)
        struct.pack_into("<I", self.m, EXEC + 8, seq + 2)

    def cmd_head(self):
        return self.u64(AGENT + 32)

    def agent_heartbeat(self):
        return self.u64(AGENT)

    def take(self):
        """Commands posted and not yet taken: [(seq, entry_id)]."""
        out = []
        head = self.cmd_head()
        while self.done < head and len(out) < self.ring:
            n = self.done + 1
            off = self.coff + ((n - 1) % self.ring) * CMD
            seq, eid = struct.unpack_from("<QQ", self.m, off)
            if seq != n:
                break
            out.append((seq, eid))
            self.done = n
        self.set_done(self.done)
        return out

    def set_done(self, v):
        self.done = v
        self.u64(EXEC + 24, v)

    def ack(self, seq, eid, status=EVICTED, freed=64 << 20):
        """Write ack number ack_head+1, whatever it says."""
        n = self.acks + 1
        off = self.aoff + ((n - 1) % self.ring) * ACK
        t = now_ns()
        self.u64(off, 0)
        struct.pack_into("<QQQQI", self.m, off + 8, eid, freed, t, t, status)
        self.u64(off, seq)
        self.acks = n
        self.u64(EXEC + 32, n)

    def close(self):
        self.m.close()
