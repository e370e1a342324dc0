"""The agent's half of a control page, for tests without the agent:
commands written into the page as docs/control-page.md says the agent
writes them (slot, seq last, cmd_head, cmd_futex), acks and entries read
back. Its importer has loaded ramcache first (rctest.import_package)."""
import mmap
import os
import struct
import time

from ramcache import page as P


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
