"""ctypes binding to libramcache (include/ramcache/ramcache.h), for the
conformance suite (test_page.py) that runs the same cases against the C
library and the pure-Python page (python/ramcache/page.py), with the
same method names. The package itself does not use the library.

find() looks in $RAMCACHE_LIB, then the project's build folder, then the
system library path. Every wrapper raises OSError with the library's -errno
turned into a message.
"""
import ctypes
import ctypes.util
import errno
import os

LABEL_LEN = 48


class EntryInfo(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("last_use_ns", ctypes.c_uint64),
        ("used_generation", ctypes.c_uint64),
        ("cost_ns", ctypes.c_uint64),
        ("flags", ctypes.c_uint32),
        ("label", ctypes.c_char_p),
    ]


class Command(ctypes.Structure):
    _fields_ = [
        ("seq", ctypes.c_uint64),
        ("entry_id", ctypes.c_uint64),
        ("issue_ns", ctypes.c_uint64),
        ("recv_ns", ctypes.c_uint64),
        ("reason", ctypes.c_uint32),
    ]


def candidates():
    """Paths tried in order; the last is a bare name for the loader.
    $RAMCACHE_LIB, when set, is the only one."""
    env = os.environ.get("RAMCACHE_LIB")
    if env:
        return [env]  # an explicit choice: never fall back behind its back
    out = []
    here = os.path.dirname(os.path.realpath(__file__))
    project = os.path.dirname(os.path.dirname(here))
    out.append(os.path.join(os.environ.get("OUTPUT") or os.path.join(project, "build"),
                            "libramcache.so"))
    out.append(ctypes.util.find_library("ramcache") or "libramcache.so.1")
    return out


def find():
    """(CDLL, path) or (None, reason)."""
    tried = []
    for path in candidates():
        if os.path.isabs(path) and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return _bind(ctypes.CDLL(path)), path
        except (OSError, AttributeError) as e:
            tried.append(f"{path} ({e})")
    return None, "tried " + ", ".join(tried)


def _bind(so):
    P = ctypes.c_void_p
    u32, u64, i = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
    sigs = {
        "ramcache_create": (i, [ctypes.POINTER(P), ctypes.c_char_p, u32, u32]),
        "ramcache_destroy": (None, [P, ctypes.c_bool]),
        "ramcache_path": (ctypes.c_char_p, [P]),
        "ramcache_publish": (i, [P, ctypes.POINTER(EntryInfo)]),
        "ramcache_remove": (i, [P, u64]),
        "ramcache_clear": (i, [P]),
        "ramcache_set_generation": (i, [P, u64]),
        "ramcache_heartbeat": (i, [P]),
        "ramcache_poll": (i, [P, ctypes.POINTER(Command)]),
        "ramcache_wait": (i, [P, ctypes.POINTER(Command), i]),
        "ramcache_ack": (i, [P, ctypes.POINTER(Command), u32, u64]),
        "ramcache_agent_alive": (ctypes.c_bool, [P]),
        "ramcache_level": (u32, [P]),
        "ramcache_headroom": (u64, [P]),
        "ramcache_target": (u64, [P]),
        "ramcache_now_ns": (u64, []),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(so, name)
        fn.restype = res
        fn.argtypes = args
    return so


def _check(what, rc):
    if rc < 0:
        raise OSError(-rc, f"failed to {what}: {os.strerror(-rc)}")
    return rc


class Page:
    """One control page; the methods map 1:1 onto the C API."""

    def __init__(self, so, path=None, max_entries=0, ring=0):
        self.so = so
        self.h = ctypes.c_void_p()
        p = path.encode() if path else None
        _check("create the control page",
               so.ramcache_create(ctypes.byref(self.h), p, max_entries, ring))
        self.path = so.ramcache_path(self.h).decode()
        self.memfd = False
        self.fd = -1

    @property
    def closed(self):
        return not self.h

    def close(self, unlink=True):
        if self.h:
            self.so.ramcache_destroy(self.h, unlink)
            self.h = ctypes.c_void_p()

    def publish(self, eid, nbytes, last_use_ns, generation, flags,
                label="", cost_ns=0):
        info = EntryInfo(eid, nbytes, last_use_ns, generation, cost_ns, flags,
                         label.encode("utf-8", "replace")[:LABEL_LEN])
        rc = self.so.ramcache_publish(self.h, ctypes.byref(info))
        if rc == -errno.ENOSPC:
            return False
        _check("publish an entry", rc)
        return True

    def remove(self, eid):
        rc = self.so.ramcache_remove(self.h, eid)
        if rc != -errno.ENOENT:
            _check("remove an entry", rc)

    def clear(self):
        _check("clear the entry table", self.so.ramcache_clear(self.h))

    def set_generation(self, gen):
        _check("set the generation", self.so.ramcache_set_generation(self.h, gen))

    def heartbeat(self):
        _check("stamp the heartbeat", self.so.ramcache_heartbeat(self.h))

    def poll(self):
        cmd = Command()
        if _check("poll for a command", self.so.ramcache_poll(self.h, ctypes.byref(cmd))):
            return cmd
        return None

    def wait(self, timeout_ms):
        cmd = Command()
        if _check("wait for a command",
                  self.so.ramcache_wait(self.h, ctypes.byref(cmd), timeout_ms)):
            return cmd
        return None

    def ack(self, cmd, status, freed):
        _check("ack a command", self.so.ramcache_ack(self.h, ctypes.byref(cmd), status, freed))

    def agent_alive(self):
        return bool(self.so.ramcache_agent_alive(self.h))

    def level(self):
        return self.so.ramcache_level(self.h)

    def headroom(self):
        return self.so.ramcache_headroom(self.h)

    def target(self):
        return self.so.ramcache_target(self.h)

    def now_ns(self):
        return self.so.ramcache_now_ns()
