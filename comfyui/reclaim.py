"""How much RAM an eviction returned, and the least work to return it.

Dropping a cache entry frees its tensors at once: glibc serves allocations
of 32 MiB and more (and most below, once the threshold adapts) with mmap,
and munmap hands them straight back. What stays in malloc's heap is
returned only by malloc_trim, and what sits in a reference cycle only by
the garbage collector; both cost time (a full gc of a ComfyUI process takes
tens of ms). So they run only when the process's RSS did not drop by what
the entries held: never when the memory is already back.
"""
import ctypes
import gc
import os

# The RSS drop counts as "returned" from this share of the entries' bytes.
RETURNED_SHARE = 0.5
# Below this many bytes an eviction is not worth a trim or a collection.
MIN_CHASE = 4 << 20

_trim = None
_statm = (None, None)  # (pid, fd) kept open: one pread per reading
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _pread_keeping_the_gil():
    """libc's pread called through PyDLL, which keeps the GIL: reading
    statm takes microseconds, while giving the GIL up and taking it back
    from a busy prompt worker costs up to a switch interval (5 ms) and, on
    a loaded machine, a wait for a CPU besides. os.pread as a fallback."""
    try:
        f = ctypes.PyDLL(None).pread
        f.restype = ctypes.c_ssize_t
        f.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long)
    except (OSError, AttributeError):
        return lambda fd: os.pread(fd, 128, 0)

    def read(fd):
        buf = ctypes.create_string_buffer(128)  # one per call: two threads read
        n = f(fd, buf, 128, 0)
        if n < 0:
            raise OSError(ctypes.get_errno(), "pread")
        return buf.raw[:n]
    return read


_read = _pread_keeping_the_gil()


def rss():
    global _statm
    try:
        pid, fd = _statm
        if pid != os.getpid():  # first reading, or a forked child
            fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
            _statm = (os.getpid(), fd)
        return int(_read(fd).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def malloc_trim():
    global _trim
    if _trim is None:
        try:
            _trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _trim = False  # not glibc
    if _trim:
        _trim(0)


class Reclaim:
    """What the last returns cost: counters shown in the status."""

    def __init__(self, read_rss=rss, trim=malloc_trim, collect=gc.collect):
        self.read_rss, self.trim, self.collect = read_rss, trim, collect
        self.trims = 0  # malloc_trim calls
        self.trims_returned = 0  # ... that lowered RSS further
        self.collects = 0

    def returned(self, before, expected, may_collect, trim=True):
        """RSS dropped since `before` (bytes, >= 0) once the evicted values
        are gone. `expected` is what they held. A trim (then, where
        may_collect, a gc and a trim) only while the drop is short of it,
        and never without @trim: memory freed for a model about to load
        stays in the heap, where the load takes it again without a page
        fault (a fault of a reload's ~175k costs microseconds each)."""
        drop = max(0, before - self.read_rss())
        if expected < MIN_CHASE or drop >= expected * RETURNED_SHARE:
            return drop
        steps = [self._trim] if trim else []
        if may_collect:  # a cycle keeps it: collected, trimmed if asked
            steps.append(self._collect_and_trim if trim else self._collect)
        for step in steps:
            step()
            now = max(0, before - self.read_rss())
            if now > drop:
                self.trims_returned += 1
                drop = now
            if drop >= expected * RETURNED_SHARE:
                break
        return drop

    def _trim(self):
        self.trims += 1
        self.trim()

    def _collect(self):
        self.collects += 1
        self.collect()

    def _collect_and_trim(self):
        self._collect()
        self._trim()
