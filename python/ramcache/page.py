"""The executor's side of the control page, in pure Python (stdlib only).

The one Python implementation of the page: the ComfyUI package uses it,
and so does ramcache.PressureCache. Layout and protocol:
include/ramcache/control.h and docs/control-page.md.
The page is a memfd named "ramcache" (sealed against shrinking, kept open
for the life of the process, found by the agent through /proc/<pid>/fd), or
the file named by $RAMCACHE_CONTROL (mode 0600, built without a name,
then linked under a temporary one and renamed into place, as libramcache
does).

Every method raises OSError with a "failed to <verb> <object>" message, so
callers decide what is fatal. Every field is read and written through a
memoryview cast to 8- or 4-byte words: one aligned store of the whole
field, which the document calls a publishing store (struct.pack_into packs
byte by byte, and a reader could see half a seq). The seq-last protocol of
the rings and the seqcount of the entry table give the agent whole records.
"""
import contextlib
import ctypes
import errno
import fcntl
import mmap
import os
import struct
import tempfile
import threading
import time

# --- include/ramcache/control.h ---------------------------------------------
CTL_MAGIC = 0x314C544343524152  # "RARCCTL1"
CTL_VERSION = 1
CTL_ENV = "RAMCACHE_CONTROL"
MEMFD_NAME = "ramcache"
LABEL_LEN = 48
DEFAULT_ENTRIES = 4096
MAX_ENTRIES = 65536
DEFAULT_RING = 64
MAX_RING = 4096
HEARTBEAT_TIMEOUT_NS = 1_500_000_000
HEARTBEAT_PERIOD_NS = 250_000_000
EXPECT_TTL_NS = 60_000_000_000

# agent_lock: a robust futex the agent holds while attached (its thread id |
# LOCK_WAITERS); the kernel sets LOCK_OWNER_DIED (and clears the id) and wakes
# a waiter when the agent dies; a clean detach writes 0.
LOCK_TID_MASK = 0x3FFFFFFF
LOCK_OWNER_DIED = 0x40000000
LOCK_WAITERS = 0x80000000

F_ACTIVE = 1 << 0
F_PINNED = 1 << 1
F_MODEL = 1 << 2

LEVELS = ("ok", "warn", "high", "critical")
REASONS = {1: "headroom", 2: "inactive", 3: "forecast", 4: "reclaim"}
ACK_EVICTED, ACK_NOT_FOUND, ACK_BUSY, ACK_PINNED = 1, 2, 3, 4

HEADER_SIZE = 256
ENTRY_SIZE = 96
CMD_SIZE = 32
ACK_SIZE = 48

# struct ramcache_ctl: creation fields (offsets 0..87)
H_MAGIC, H_VERSION, H_HEADER_SIZE, H_TOTAL_SIZE = 0, 8, 12, 16
H_MAX_ENTRIES, H_RING_SIZE, H_ENTRY_SIZE, H_CMD_SIZE, H_ACK_SIZE = 24, 28, 32, 36, 40
H_EXECUTOR_PID, H_EXECUTOR_UID = 44, 48
H_ENTRIES_OFF, H_CMDS_OFF, H_ACKS_OFF = 56, 64, 72
# executor side (128..191)
E_HEARTBEAT, E_ENTRIES_SEQ, E_NR_ENTRIES, E_GENERATION = 128, 136, 140, 144
E_CMD_DONE, E_ACK_HEAD, E_EXPECT_BYTES, E_EXPECT_NS = 152, 160, 168, 176
# agent side (192..255)
A_HEARTBEAT, A_PID, A_LEVEL, A_HEADROOM, A_TARGET = 192, 200, 204, 208, 216
A_CMD_HEAD, A_CMD_FUTEX, A_AGENT_LOCK, A_EXPECT_SEEN = 224, 232, 236, 240
# struct ramcache_ctl_cmd
C_SEQ, C_ENTRY_ID, C_ISSUE_NS, C_REASON = 0, 8, 16, 24
# struct ramcache_ctl_ack
K_SEQ, K_ENTRY_ID, K_BYTES_FREED, K_RECV_NS, K_ACK_NS, K_STATUS, K_RESERVED = \
    0, 8, 16, 24, 32, 40, 44
# struct ramcache_ctl_entry: id, bytes, last_use_ns, used_generation,
# cost_ns, flags, reserved, label[48]
ENTRY = struct.Struct("=QQQQQII48s")
# ------------------------------------------------------------------------------

SYS_futex = {"x86_64": 202, "aarch64": 98, "riscv64": 98,
             "ppc64le": 221, "s390x": 238}.get(os.uname().machine)
SYS_futex_waitv = 449 if SYS_futex is not None else None  # one number everywhere
# shared futexes (no FUTEX_PRIVATE_FLAG): the agent is another process
FUTEX_WAKE = 1
FUTEX_WAIT_BITSET = 9  # an absolute CLOCK_MONOTONIC deadline
FUTEX_BITSET_MATCH_ANY = 0xFFFFFFFF
FUTEX_32 = 2
LOCK_POLL_NS = 10_000_000  # without futex_waitv (Linux < 5.16)
AGENT_STATES = ("none", "alive", "died", "silent")


class _Waitv(ctypes.Structure):
    _fields_ = [("val", ctypes.c_uint64), ("uaddr", ctypes.c_uint64),
                ("flags", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _timespec(deadline_ns):
    if deadline_ns is None:
        return None
    return ctypes.byref(_Timespec(deadline_ns // 1_000_000_000,
                                  deadline_ns % 1_000_000_000))


def lock_held(lock):
    """agent_lock held by a live agent: a thread id the kernel has not
    marked as dead."""
    return bool(lock & LOCK_TID_MASK) and not lock & LOCK_OWNER_DIED


def agent_fresh(hb_ns, lock, now):
    """Alive by the heartbeat, and the kernel did not mark the lock (a lock
    of 0 says nothing: an agent older than the lock)."""
    return (not lock & LOCK_OWNER_DIED and hb_ns != 0
            and abs(now - hb_ns) < HEARTBEAT_TIMEOUT_NS)

_no_waitv = []  # [True] once the kernel said ENOSYS

_libc = None


def _syscall():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


def ctl_size(max_entries, ring):
    return HEADER_SIZE + max_entries * ENTRY_SIZE + ring * (CMD_SIZE + ACK_SIZE)


def now_ns():
    return time.monotonic_ns()  # CLOCK_MONOTONIC, the page's clock


def _fail(what, e):
    code = e.errno if isinstance(e, OSError) and e.errno else errno.EIO
    return OSError(code, f"failed to {what}: {os.strerror(code)}")


class Command:
    """One command taken from the ring (fields as in struct ramcache_command)."""
    __slots__ = ("seq", "entry_id", "issue_ns", "recv_ns", "reason")

    def __init__(self, seq, entry_id, issue_ns, recv_ns, reason):
        self.seq, self.entry_id, self.issue_ns = seq, entry_id, issue_ns
        self.recv_ns, self.reason = recv_ns, reason

    def __repr__(self):
        return (f"Command(seq={self.seq}, entry_id={self.entry_id}, "
                f"reason={self.reason})")


def _open_unnamed(d):
    """A file without a name in directory d (O_TMPFILE), or None where the
    kernel or file system has none, or no /proc can name it later."""
    if not hasattr(os, "O_TMPFILE") or not os.access("/proc/self/fd", os.X_OK):
        return None
    try:
        return os.open(d, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return None
        raise


class _Unlinkable(Exception):
    """The unnamed page could not be given a name: build it named."""


def _link_unnamed(fd, d, base):
    """Name the unnamed file fd base + 8 random characters in d (linkat
    with AT_SYMLINK_FOLLOW through /proc/self/fd); the name."""
    try:
        procfd = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        raise _Unlinkable() from None
    try:
        for _ in range(100):
            tmp = os.path.join(d, base + os.urandom(4).hex())
            try:
                os.link(str(fd), tmp, src_dir_fd=procfd, follow_symlinks=True)
                return tmp
            except FileExistsError:
                continue
            except OSError:
                raise _Unlinkable() from None
        raise _Unlinkable()
    finally:
        os.close(procfd)


class Page:
    """One control page. path None: $RAMCACHE_CONTROL when set, else a memfd."""

    def __init__(self, path=None, max_entries=0, ring=0):
        max_entries = max_entries or DEFAULT_ENTRIES
        ring = ring or DEFAULT_RING
        if max_entries > MAX_ENTRIES or ring > MAX_RING or ring & (ring - 1):
            raise OSError(errno.EINVAL, "failed to create the control page: "
                          "bad table sizes")
        if path is None:
            path = os.environ.get(CTL_ENV) or None
        self.max_entries = max_entries
        self.ring = ring
        self.size = ctl_size(max_entries, ring)
        self.fd = -1
        self.m = None
        self._ino = None
        self.pub_lock = threading.RLock()  # batch() holds it around publish()
        self.cmd_lock = threading.Lock()
        self._ids = []  # ids[i] is the id in entry slot i
        self._slot = {}  # id -> i
        self._entries_seq = 0
        self._shadow = bytearray(max_entries * ENTRY_SIZE)  # the table, private
        self._dirty = None  # (from, to) bytes of _shadow not yet in the page
        self._batch = 0
        self._cmd_done = 0
        self._ack_head = 0
        self._expect_ns = self._expect_bytes = 0  # the announcement in force
        self._futex = self._lock = None  # ctypes views of the futex words
        self._q = self._d = None  # the page as 8- and 4-byte words
        try:
            if path:
                self._make_file(path)
            else:
                self._make_memfd()
        except OSError as e:
            if e.errno == errno.ENOSYS and e.strerror:
                raise OSError(e.errno, f"failed to create the control page: {e.strerror}") \
                    from None
            raise _fail("create the control page", e) from None
        # a ctypes view of the futex word, for FUTEX_WAIT
        self._futex = ctypes.c_uint32.from_buffer(self.m, A_CMD_FUTEX)
        self._lock = ctypes.c_uint32.from_buffer(self.m, A_AGENT_LOCK)

    # ------------------------------------------------------------ creation

    def _make_memfd(self):
        if not hasattr(os, "memfd_create") or not hasattr(fcntl, "F_ADD_SEALS"):
            raise OSError(errno.ENOSYS, "no memfd_create here (Linux only); "
                          f"set {CTL_ENV} to a file path")
        fd = os.memfd_create(MEMFD_NAME, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, self.size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            self._map(fd)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.path = f"/proc/{os.getpid()}/fd/{fd}"
        self.memfd = True
        self._init_header()

    def _make_file(self, path):
        """Build the page unnamed (O_TMPFILE) in path's directory, link it
        under a fresh temporary name and rename that over path: the agent
        never sees half a page, a symlink planted at path is replaced, never
        followed, and a process killed while building it leaves no file.
        Where O_TMPFILE or the link through /proc is not possible, build
        under an O_EXCL temporary name instead."""
        d = os.path.dirname(os.path.abspath(path))
        base = os.path.basename(path) + "."
        fd = _open_unnamed(d)
        if fd is not None:
            try:
                self._build_file(fd, None, path,
                                 lambda: _link_unnamed(fd, d, base))
                return
            except _Unlinkable:
                pass
        fd, tmp = tempfile.mkstemp(prefix=base, dir=d)
        self._build_file(fd, tmp, path, None)

    def _build_file(self, fd, tmp, path, link):
        """Size, map and fill the page in fd (closed here), then rename it
        (tmp, or the name link() gives it) over path. On any error nothing
        stays mapped and no temporary name is left behind."""
        try:
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, self.size)
            self._map(fd)
            st = os.fstat(fd)
            self._init_header()
            if tmp is None:
                tmp = link()
            os.rename(tmp, path)
        except BaseException:
            self._unmap()
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            raise
        finally:
            os.close(fd)
        self._ino = (st.st_dev, st.st_ino)
        self.path = path
        self.memfd = False

    def _map(self, fd):
        self.m = mmap.mmap(fd, self.size, mmap.MAP_SHARED,
                           mmap.PROT_READ | mmap.PROT_WRITE)
        self._q = memoryview(self.m).cast("Q")
        self._d = memoryview(self.m).cast("I")

    def _unmap(self):
        """Release every view of the map, then the map (which holds a
        descriptor of its own: the page lives until this)."""
        self._futex = self._lock = None
        for v in (self._q, self._d):
            if v is not None:
                v.release()
        self._q = self._d = None
        m, self.m = self.m, None
        if m is not None:
            try:
                m.close()
            except BufferError:
                pass  # a view still exported (a test's); freed with the process

    def _init_header(self):
        w32, w64 = self._w32, self._w64
        w32(H_VERSION, CTL_VERSION)
        w32(H_HEADER_SIZE, HEADER_SIZE)
        w64(H_TOTAL_SIZE, self.size)
        w32(H_MAX_ENTRIES, self.max_entries)
        w32(H_RING_SIZE, self.ring)
        w32(H_ENTRY_SIZE, ENTRY_SIZE)
        w32(H_CMD_SIZE, CMD_SIZE)
        w32(H_ACK_SIZE, ACK_SIZE)
        w32(H_EXECUTOR_PID, os.getpid())
        w32(H_EXECUTOR_UID, os.geteuid())
        self.entries_off = HEADER_SIZE
        self.cmds_off = self.entries_off + self.max_entries * ENTRY_SIZE
        self.acks_off = self.cmds_off + self.ring * CMD_SIZE
        w64(H_ENTRIES_OFF, self.entries_off)
        w64(H_CMDS_OFF, self.cmds_off)
        w64(H_ACKS_OFF, self.acks_off)
        w64(E_HEARTBEAT, now_ns())
        w64(H_MAGIC, CTL_MAGIC)  # last: a page without it is not a page yet

    def close(self, unlink=True):
        """Unmap; remove the file only if it is still ours (not a successor's)."""
        if self.m is None:
            return
        if unlink and not self.memfd:
            try:
                st = os.lstat(self.path)
                if (st.st_dev, st.st_ino) == self._ino:
                    os.unlink(self.path)
            except OSError:
                pass
        self._unmap()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @property
    def closed(self):
        return self.m is None

    # ------------------------------------------------------------ raw fields

    # One aligned load or store of the whole field (every offset passed is
    # a multiple of the field's size): a publishing store.

    def _r32(self, off):
        return self._d[off >> 2]

    def _r64(self, off):
        return self._q[off >> 3]

    def _w32(self, off, v):
        self._d[off >> 2] = v & 0xFFFFFFFF

    def _w64(self, off, v):
        self._q[off >> 3] = v & 0xFFFFFFFFFFFFFFFF

    # ------------------------------------------------------------ entry table

    # The entry table is written through a private copy: a change (or a
    # batch of them) is made there, then copied into the page inside one
    # seqcount window, a single memcpy long. The window a reader can find
    # odd stays microseconds even when this thread is preempted or the GIL
    # changes hands between entries: an agent that retries a few times
    # never has to give up on this page.

    @contextlib.contextmanager
    def batch(self):
        """Publish and remove as one change of the table (the agent sees
        all of it or none)."""
        with self.pub_lock:
            self._batch += 1
            try:
                yield self
            finally:
                self._batch -= 1
                if not self._batch:
                    self._flush()

    def _touch(self, lo, hi):
        d = self._dirty
        self._dirty = (lo, hi) if d is None else (min(d[0], lo), max(d[1], hi))

    def _flush(self):
        if self._dirty is None or self.m is None:
            return
        lo, hi = self._dirty
        self._dirty = None
        off = self.entries_off
        odd = (self._entries_seq + 1) & 0xFFFFFFFF
        self._w32(E_ENTRIES_SEQ, odd)
        self.m[off + lo:off + hi] = self._shadow[lo:hi]
        self._w32(E_NR_ENTRIES, len(self._ids))
        self._entries_seq = (odd + 1) & 0xFFFFFFFF
        self._w32(E_ENTRIES_SEQ, self._entries_seq)

    def publish(self, eid, nbytes, last_use_ns, generation, flags,
                label="", cost_ns=0):
        """Add or update entry eid. False when the table is full."""
        if not eid:
            raise OSError(errno.EINVAL, "failed to publish an entry: id 0")
        raw = label.encode("utf-8", "replace")[:LABEL_LEN] if isinstance(label, str) \
            else bytes(label)[:LABEL_LEN]
        raw = raw.split(b"\0", 1)[0]
        with self.batch():
            i = self._slot.get(eid)
            if i is None:
                if len(self._ids) == self.max_entries:
                    return False
                i = len(self._ids)
                self._ids.append(eid)
                self._slot[eid] = i
            ENTRY.pack_into(self._shadow, i * ENTRY_SIZE, eid, nbytes,
                            last_use_ns or now_ns(), generation, cost_ns, flags, 0, raw)
            self._touch(i * ENTRY_SIZE, (i + 1) * ENTRY_SIZE)
        return True

    def remove(self, eid):
        """Remove entry eid (no error when it is not there)."""
        with self.batch():
            i = self._slot.pop(eid, None)
            if i is None:
                return
            last = len(self._ids) - 1
            sh = self._shadow
            if i != last:  # keep [0, nr_entries) dense: the last fills the hole
                a, b = last * ENTRY_SIZE, i * ENTRY_SIZE
                sh[b:b + ENTRY_SIZE] = sh[a:a + ENTRY_SIZE]
                self._ids[i] = self._ids[last]
                self._slot[self._ids[i]] = i
                self._touch(b, b + ENTRY_SIZE)
            sh[last * ENTRY_SIZE:(last + 1) * ENTRY_SIZE] = bytes(ENTRY_SIZE)
            self._touch(last * ENTRY_SIZE, (last + 1) * ENTRY_SIZE)
            self._ids.pop()

    def clear(self):
        with self.batch():
            n = len(self._ids)
            self._shadow[:n * ENTRY_SIZE] = bytes(n * ENTRY_SIZE)
            self._touch(0, n * ENTRY_SIZE)
            self._ids.clear()
            self._slot.clear()

    def set_generation(self, gen):
        self._w64(E_GENERATION, gen)

    def heartbeat(self):
        self._w64(E_HEARTBEAT, now_ns())

    def expect(self, nbytes):
        """Announce @nbytes about to be taken at once (a model load) that
        the RSS does not show yet: the agent makes room for them from this
        executor's entries. 0 withdraws it; withdraw once the memory is
        taken (the agent counts only what the RSS has not grown by since,
        and forgets an announcement after EXPECT_TTL_NS)."""
        nbytes = max(0, min(int(nbytes), (1 << 64) - 1))
        ns = now_ns() if nbytes else 0
        self._w64(E_EXPECT_BYTES, nbytes)  # the size before its stamp
        self._w64(E_EXPECT_NS, ns)
        self._expect_ns, self._expect_bytes = ns, nbytes

    def expect_less(self, nbytes):
        """Lower the announcement in force to @nbytes, its stamp kept: the
        same allocation, smaller (what the executor freed for it stayed in
        its heap, for the allocation to take again). No announcement in
        force: nothing."""
        if self._expect_ns:
            self._expect_bytes = max(0, min(int(nbytes), self._expect_bytes))
            self._w64(E_EXPECT_BYTES, self._expect_bytes)

    def expect_seen(self):
        """The agent has counted the announcement in force: its commands
        for it, if any, are posted. False with none, and with an agent
        that predates announcements (wait a bounded time)."""
        mine = self._expect_ns
        return bool(mine) and self._r64(A_EXPECT_SEEN) == mine

    # ------------------------------------------------------------ commands

    def _consume(self, seq):
        self._cmd_done = seq
        self._w64(E_CMD_DONE, seq)

    def _take(self):
        """Command cmd_done + 1 if posted. A slot without the seq we expect
        (torn, overwritten, a crashed agent) is skipped: that command is
        lost, never run twice or half-read."""
        ring = self.ring
        for _ in range(ring + 1):
            nxt = self._cmd_done + 1
            head = self._r64(A_CMD_HEAD)
            if head < nxt:
                return None
            if head - nxt >= ring:  # the agent lapped us
                self._consume(head - ring)
                continue
            off = self.cmds_off + ((nxt - 1) & (ring - 1)) * CMD_SIZE
            s1 = self._r64(off + C_SEQ)
            eid = self._r64(off + C_ENTRY_ID)
            issue = self._r64(off + C_ISSUE_NS)
            reason = self._r32(off + C_REASON)
            s2 = self._r64(off + C_SEQ)
            self._consume(nxt)
            if s1 != nxt or s2 != nxt:
                continue
            return Command(nxt, eid, issue, now_ns(), reason)
        return None

    def poll(self):
        with self.cmd_lock:
            return self._take()

    def wait(self, timeout_ms):
        """The next command, or None after timeout_ms (< 0: no timeout), or
        None at once when the agent attached at the call dies or detaches
        (look at agent_alive() after a None)."""
        deadline = None if timeout_ms < 0 else now_ns() + timeout_ms * 1_000_000
        lock0 = self._r32(A_AGENT_LOCK)
        watch = lock_held(lock0)  # the agent attached now: its death ends the wait
        while True:
            # the futex word first: a post we miss in poll() changes it
            val = self._r32(A_CMD_FUTEX)
            lock = self._r32(A_AGENT_LOCK)
            cmd = self.poll()
            if cmd is not None:
                return cmd
            if watch and lock != lock0:
                self._pass_on(lock)
                return None
            if deadline is not None and now_ns() >= deadline:
                return None
            self._sleep(self._futex, val, self._lock if watch else None, lock0,
                        deadline)

    def watch_agent(self, timeout_ms):
        """Sleep until the agent attached now is gone, or timeout_ms passes
        (< 0: never): "alive" on timeout, else how it went ("none": none
        attached or a clean detach, "died": killed or crashed, as the kernel
        says at once, "silent": no heartbeat for 1.5 s). At once when no
        agent is attached."""
        deadline = None if timeout_ms < 0 else now_ns() + timeout_ms * 1_000_000
        while True:
            lock = self._r32(A_AGENT_LOCK)
            st = self.agent_state()
            if st != "alive":
                self._pass_on(lock)
                return st
            now = now_ns()
            if deadline is not None and now >= deadline:
                return "alive"
            hb = self._r64(A_HEARTBEAT)
            until = now + HEARTBEAT_TIMEOUT_NS - min(abs(now - hb), HEARTBEAT_TIMEOUT_NS)
            if not lock_held(lock):  # nothing wakes us: look every beat
                until = min(until, now + HEARTBEAT_PERIOD_NS)
            if deadline is not None:
                until = min(until, deadline)
            self._sleep(self._lock, lock, None, 0, until)

    def _pass_on(self, lock):
        """The kernel wakes one waiter when the agent dies: wake the others
        of this process too (a wake writes nothing)."""
        if lock & LOCK_OWNER_DIED and SYS_futex is not None and self._lock is not None:
            _syscall()(ctypes.c_long(SYS_futex), ctypes.byref(self._lock),
                       ctypes.c_int(FUTEX_WAKE), ctypes.c_int(0x7FFFFFFF),
                       None, None, ctypes.c_int(0))

    def _sleep(self, a, va, b, vb, deadline):
        """Sleep until futex word a is no longer va, or b (a ctypes word, or
        None) no longer vb, or CLOCK_MONOTONIC reaches deadline (None:
        never)."""
        if SYS_futex is None or a is None:
            left = 0.005 if deadline is None else (deadline - now_ns()) / 1e9
            time.sleep(max(0.0, min(0.005, left)))
            return
        sc = _syscall()
        if b is not None and not _no_waitv:
            w = (_Waitv * 2)((va, ctypes.addressof(a), FUTEX_32, 0),
                             (vb, ctypes.addressof(b), FUTEX_32, 0))
            r = sc(ctypes.c_long(SYS_futex_waitv), w, ctypes.c_uint(2), ctypes.c_uint(0),
                   _timespec(deadline), ctypes.c_int(time.CLOCK_MONOTONIC))
            if r >= 0:
                return
            e = ctypes.get_errno()
            if e != errno.ENOSYS:
                return self._normal(e)
            _no_waitv.append(True)
        if b is not None:
            if b.value != vb:
                return
            soon = now_ns() + LOCK_POLL_NS
            deadline = soon if deadline is None else min(deadline, soon)
        r = sc(ctypes.c_long(SYS_futex), ctypes.byref(a), ctypes.c_int(FUTEX_WAIT_BITSET),
               ctypes.c_uint32(va), _timespec(deadline), None,
               ctypes.c_uint32(FUTEX_BITSET_MATCH_ANY))
        if r != 0:
            self._normal(ctypes.get_errno())

    @staticmethod
    def _normal(e):
        if e not in (errno.EAGAIN, errno.EINTR, errno.ETIMEDOUT):
            raise OSError(e, f"failed to wait for the agent: {os.strerror(e)}")

    def ack(self, cmd, status, freed):
        if cmd is None or not cmd.seq or status not in (ACK_EVICTED, ACK_NOT_FOUND,
                                                        ACK_BUSY, ACK_PINNED):
            raise OSError(errno.EINVAL, "failed to ack a command: "
                          f"{os.strerror(errno.EINVAL)}")
        with self.cmd_lock:
            if cmd.seq > self._cmd_done:  # never taken: not ours to answer
                raise OSError(errno.EINVAL, "failed to ack a command: not taken")
            self._ack_head += 1
            n = self._ack_head
            off = self.acks_off + ((n - 1) & (self.ring - 1)) * ACK_SIZE
            self._w64(off + K_SEQ, 0)  # a reader racing the rewrite sees a torn slot
            self._w64(off + K_ENTRY_ID, cmd.entry_id)
            self._w64(off + K_BYTES_FREED, freed)
            self._w64(off + K_RECV_NS, cmd.recv_ns)
            self._w64(off + K_ACK_NS, now_ns())
            self._w32(off + K_STATUS, status)
            self._w32(off + K_RESERVED, 0)
            self._w64(off + K_SEQ, cmd.seq)
            self._w64(E_ACK_HEAD, n)

    # ------------------------------------------------------------ agent side

    def agent_alive(self):
        """An agent is attached: its heartbeat is fresh and the kernel has
        not marked its lock as its death. Two reads of the page."""
        return agent_fresh(self._r64(A_HEARTBEAT), self._r32(A_AGENT_LOCK), now_ns())

    def agent_state(self):
        """"alive", or how it is not: "none" (never attached, or detached
        cleanly), "died" (killed or crashed), "silent" (heartbeat stale)."""
        lock = self._r32(A_AGENT_LOCK)
        hb = self._r64(A_HEARTBEAT)
        if lock & LOCK_OWNER_DIED:
            return "died"
        if not hb:
            return "none"
        if abs(now_ns() - hb) >= HEARTBEAT_TIMEOUT_NS:
            return "silent"
        return "alive"

    def agent_beat_age(self):
        """ns since the agent's last heartbeat, by distance (0: none):
        over a few beat periods, a stopped or stuck agent (it keeps its
        lock; the heartbeat timeout is far longer)."""
        hb = self._r64(A_HEARTBEAT)
        return abs(now_ns() - hb) if hb else 0

    def agent_pid(self):
        return self._r32(A_PID)

    def level(self):
        return self._r32(A_LEVEL)

    def headroom(self):
        return self._r64(A_HEADROOM)

    def target(self):
        return self._r64(A_TARGET)

    @staticmethod
    def now_ns():
        return now_ns()


# What `from ramcache.page import *` gives (the ComfyUI package's page.py).
__all__ = [n for n, v in list(globals().items())
           if not n.startswith("_") and type(v).__name__ != "module"]
