"""The agent's half of the control page, for tests that need a command or a
heartbeat without the real agent. Layout from include/ramcache/control.h:
header 0..127 (offsets of the tables in it), executor side 128..191, agent
side 192..255; commands are published by writing seq last."""
import ctypes
import mmap
import os
import re
import struct
import threading
import time

MAGIC = 0x314C544343524152
SYS_futex = {"x86_64": 202, "aarch64": 98, "riscv64": 98}.get(os.uname().machine, 202)
FUTEX_WAKE = 1

# header
H_MAGIC, H_RING, H_ENTRIES_OFF, H_CMDS_OFF, H_ACKS_OFF = 0, 28, 56, 64, 72
H_MAX_ENTRIES, H_ENTRY_SIZE, H_CMD_SIZE, H_ACK_SIZE = 24, 32, 36, 40
# executor side
E_HEARTBEAT, E_SEQ, E_NR, E_GEN, E_CMD_DONE, E_ACK_HEAD = 128, 136, 140, 144, 152, 160
# agent side
A_HEARTBEAT, A_PID, A_LEVEL, A_HEADROOM, A_TARGET, A_CMD_HEAD, A_FUTEX = \
    192, 200, 204, 208, 216, 224, 232
E_EXPECT_BYTES, E_EXPECT_NS, A_EXPECT_SEEN = 168, 176, 240

_libc = ctypes.CDLL(None, use_errno=True)


def now_ns():
    return time.monotonic_ns()  # CLOCK_MONOTONIC, the page's clock


def _u64_at(off):
    """A method that reads the page's u64 at @off."""
    return lambda self: self.u64(off)


class FakeAgent:
    def __init__(self, path):
        """path: the page's file, or /proc/<pid>/fd/<n> for a memfd (a
        magic link: opened without O_NOFOLLOW, as the agent does)."""
        self.path = path
        nofollow = 0 if path.startswith("/proc/") else os.O_NOFOLLOW
        fd = os.open(path, os.O_RDWR | nofollow)
        try:
            self.size = os.fstat(fd).st_size
            self.m = mmap.mmap(fd, self.size)
        finally:
            os.close(fd)
        assert self.u64(H_MAGIC) == MAGIC, "bad magic"
        self.ring = self.u32(H_RING)
        self.entries_off = self.u64(H_ENTRIES_OFF)
        self.cmds_off = self.u64(H_CMDS_OFF)
        self.acks_off = self.u64(H_ACKS_OFF)
        self.entry_size = self.u32(H_ENTRY_SIZE)
        self.cmd_size = self.u32(H_CMD_SIZE)
        self.ack_size = self.u32(H_ACK_SIZE)
        self.seq = self.u64(A_CMD_HEAD)
        self._beat = None
        self._stop = threading.Event()
        addr = ctypes.addressof(ctypes.c_char.from_buffer(self.m))
        self._futex_addr = addr + A_FUTEX

    def close(self):
        self.stop_heartbeat()
        self._futex_addr = None
        try:
            self.m.close()
        except BufferError:
            pass  # the from_buffer view keeps it; the process exit frees it

    # raw fields
    def u32(self, off):
        return struct.unpack_from("<I", self.m, off)[0]

    def u64(self, off):
        return struct.unpack_from("<Q", self.m, off)[0]

    def w32(self, off, v):
        struct.pack_into("<I", self.m, off, v)

    def w64(self, off, v):
        struct.pack_into("<Q", self.m, off, v)

    # agent side
    def beat(self, at=None):
        self.w32(A_PID, os.getpid())
        self.w64(A_HEARTBEAT, now_ns() if at is None else at)

    def start_heartbeat(self, period=0.1):
        self.stop_heartbeat()
        self._stop.clear()

        def run():
            while not self._stop.is_set():
                self.beat()
                self._stop.wait(period)
        self._beat = threading.Thread(target=run, daemon=True)
        self._beat.start()
        self.beat()

    def stop_heartbeat(self):
        if self._beat is not None:
            self._stop.set()
            self._beat.join(2)
            self._beat = None

    def die(self):
        """As if killed 3 s ago: the heartbeat is older than the timeout."""
        self.stop_heartbeat()
        self.beat(max(1, now_ns() - 3_000_000_000))

    def set_level(self, level, headroom=0, target=0):
        self.w64(A_HEADROOM, headroom)
        self.w64(A_TARGET, target)
        self.w32(A_LEVEL, level)

    def post(self, entry_id, reason=1):
        self.seq += 1
        seq = self.seq
        off = self.cmds_off + ((seq - 1) % self.ring) * self.cmd_size
        self.w64(off + 8, entry_id)
        self.w64(off + 16, now_ns())
        self.w32(off + 24, reason)
        self.w64(off, seq)  # last: the slot is now valid
        self.w64(A_CMD_HEAD, seq)
        self.w32(A_FUTEX, (self.u32(A_FUTEX) + 1) & 0xFFFFFFFF)
        _libc.syscall(SYS_futex, ctypes.c_void_p(self._futex_addr), FUTEX_WAKE,
                      0x7FFFFFFF, None, None, 0)
        return seq

    def expected(self):
        """(expect_bytes, expect_ns): the executor's announcement."""
        return self.u64(E_EXPECT_BYTES), self.u64(E_EXPECT_NS)

    def count_announcement(self):
        """Echo the announcement in force (expect_seen_ns), as the agent
        does once its plan counts it."""
        self.w64(A_EXPECT_SEEN, self.u64(E_EXPECT_NS))

    # executor side, read: its generation, heartbeat and commands done
    generation = _u64_at(E_GEN)
    exec_heartbeat = _u64_at(E_HEARTBEAT)
    cmd_done = _u64_at(E_CMD_DONE)

    def entries(self):
        """Consistent snapshot of the entry table: {id: dict}."""
        for _ in range(1000):
            s1 = self.u32(E_SEQ)
            if s1 & 1:
                time.sleep(0.001)
                continue
            n = self.u32(E_NR)
            raw = self.m[self.entries_off:self.entries_off + n * self.entry_size]
            if self.u32(E_SEQ) != s1:
                continue
            out = {}
            for i in range(n):
                b = raw[i * self.entry_size:(i + 1) * self.entry_size]
                eid, nbytes, last, ug, cost, flags = struct.unpack_from("<QQQQQI", b)
                label = b[48:96].split(b"\0", 1)[0].decode(errors="replace")
                out[eid] = {"id": eid, "bytes": nbytes, "last_use_ns": last,
                            "used_generation": ug, "cost_ns": cost,
                            "flags": flags, "label": label}
            return out
        raise TimeoutError("entry table never stable")

    def ack(self, seq):
        """The ack of command @seq, or None: acks are numbered apart from
        commands (ack n in slot (n - 1) % ring, in the order the executor
        answered), so the ring's live acks are searched for the seq."""
        head = self.u64(E_ACK_HEAD)
        for n in range(head, max(0, head - self.ring), -1):
            off = self.acks_off + ((n - 1) % self.ring) * self.ack_size
            if self.u64(off) != seq:
                continue
            _, eid, freed, recv, done, status = struct.unpack_from("<QQQQQI", self.m, off)
            if self.u64(off) != seq:  # rewritten while read
                continue
            return {"seq": seq, "id": eid, "bytes_freed": freed, "recv_ns": recv,
                    "ack_ns": done, "status": status}
        return None

    def wait_ack(self, seq, timeout=5.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            a = self.ack(seq)
            if a is not None:
                return a
            time.sleep(0.002)
        return None

    def wait_taken(self, seq, timeout=5.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.cmd_done() >= seq:
                return True
            time.sleep(0.001)
        return False

    def find(self, pred):
        return [e for e in self.entries().values() if pred(e)]


def page_of(ui):
    """The fake agent on the memfd page of a real ComfyUI (realcomfy's
    running server @ui), as the package's log line names it."""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        m = re.search(r"control page memfd 'ramcache' \(fd (\d+) of pid (\d+)\)", ui.text())
        if m:
            return FakeAgent(f"/proc/{m.group(2)}/fd/{m.group(1)}")
        time.sleep(0.2)
    raise AssertionError("no control page in ComfyUI's log:\n" + ui.text()[-2000:])
