"""PressureCache: a dict the ramcache-bpf agent can evict from, with bounds
of its own for when no agent serves it; memoize: a decorator that caches a
function's results in one.

Each entry of 1 MiB or more is published on the process's control page
with its size, when it was last used and what it costs to recompute; the
smaller ones of a cache share one page entry, its bucket. The agent evicts
the entries worth least (old, big, cheap) when memory gets short, before
the kernel has to reclaim. Without a live agent (none started, it died:
noticed within milliseconds, or it stalled: its heartbeat 600 ms old) each
cache keeps to its max_bytes and all of them together to the process's
budget, least recently used first. Whatever the agent does, a last-line
guard keeps the process's memory cgroup from its limit (see _Guard).

Locks: each cache has its own; no code holds two caches' locks at once
(evictions across caches take them one after the other); the executor's
and the page's locks are taken inside a cache's, never the other way."""
from __future__ import annotations

import collections
import contextlib
import functools
import math
import mmap
import os
import re
import reprlib
import sys
import threading
import time
import types
import warnings
import weakref
from typing import (Any, Callable, Dict, Hashable, Iterable, Iterator, List,
                    Optional, Tuple)

try:
    from . import executor as execmod
    from . import page as pagemod
    NO_PAGE: Optional[str] = None
except ImportError as _e:  # no fcntl (Windows): no page, every cache an LRU
    execmod = pagemod = None  # type: ignore[assignment]
    NO_PAGE = f"no control page on this platform ({_e})"

_MISSING = object()
U63 = (1 << 63) - 1  # sizes and costs go into u64 fields: kept below 2**63
SMALL_BYTES = 1 << 20  # entries smaller than this share their cache's bucket
BUCKET_BYTES = 64 << 20  # what one command for a bucket frees, at most
BUCKET_EVERY_NS = 100_000_000  # a bucket's page entry redone this often, at most
SIZEOF_DEPTH = 8  # sizeof: containers followed this deep ...
SIZEOF_OBJECTS = 10_000  # ... and this many objects looked at, at most
# The guard (_Guard): a check at most every GUARD_EVERY_NS (or once 1% of
# the limit was set since the last); it fires when the cgroup's free memory
# is below the largest of the last GUARD_RECENT entries set + GUARD_TRIP of
# the limit, and evicts until it is that entry + GUARD_FREE of the limit.
GUARD_EVERY_NS = 10_000_000
GUARD_RECENT = 64
GUARD_TRIP = 0.025
GUARD_FREE = 0.075
_EPOCH_NS = time.monotonic_ns()
_now_ns = time.monotonic_ns  # CLOCK_MONOTONIC, the page's clock


def _gen(now: int) -> int:
    """The page's generation: seconds since this module was loaded, so an
    entry's age is how long it has not been used (one clock for every
    cache of the process, which share the page)."""
    return (now - _EPOCH_NS) // 1_000_000_000 + 1


_warned: set = set()


def _warn_once(kind: str, msg: str, stacklevel: int) -> None:
    """Warn of @kind once a process (@stacklevel: the user's call)."""
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn(msg, RuntimeWarning, stacklevel=stacklevel + 1)


# ---------------------------------------------------------------- sizes

_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgtp]?)(?:i?b)?\s*", re.I)


def parse_bytes(value: Any, what: str = "max_bytes") -> int:
    """@value as a number of bytes: an int, a finite float, or a string
    such as "1G", "512M", "1.5GiB", "4096" (K, M, G, T, P are powers of
    1024, as the agent's sizes). TypeError or ValueError, naming @what,
    for anything else, a negative size or one of 2**63 or more."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"{what} must be an int of bytes or a size such as '1G', "
                        f"not {type(value).__name__}")
    if isinstance(value, str):
        m = _SIZE.fullmatch(value)
        if not m:
            raise ValueError(f"{what} must be a size such as '1G', '512M' or "
                             f"'1048576', not {value!r}")
        n = float(m[1]) * 1024 ** " kmgtp".index(m[2].lower() or " ")
    else:
        n = value
    if isinstance(n, float) and not math.isfinite(n):
        raise ValueError(f"{what} must be a finite size, not {value!r}")
    if n < 0 or n > U63:
        raise ValueError(f"{what} must be from 0 to 2**63 - 1 bytes, not {value!r}")
    return int(n)


def _check_size(size: Any) -> int:
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"size must be an int of bytes, not {type(size).__name__}")
    if size < 0 or size > U63:
        raise ValueError(f"size must be from 0 to 2**63 - 1 bytes, not {size}")
    return size


def _cost_ns(cost: Any) -> int:
    """Seconds to recompute, as the page's nanoseconds (None: unknown)."""
    if cost is None:
        return 0
    if isinstance(cost, bool) or not isinstance(cost, (int, float)):
        raise TypeError(f"cost must be seconds (an int or a float), not "
                        f"{type(cost).__name__}")
    if not math.isfinite(cost) or cost < 0 or cost * 1e9 > U63:
        raise ValueError(f"cost must be from 0 to 9.2e9 seconds, not {cost!r}")
    return int(cost * 1e9)


_FOLLOW = (dict, list, tuple, set, frozenset, collections.deque)
_LEAVES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, types.CodeType, types.FrameType)


class _Walk:
    """One sizeof(): each object counted once (shared ones too), at most
    SIZEOF_OBJECTS looked at and SIZEOF_DEPTH levels followed; cut says
    whether the caps stopped it (the size is then an estimate)."""

    def __init__(self):
        self.seen: set = set()
        self.left = SIZEOF_OBJECTS
        self.cut = False

    def size(self, v: Any, depth: int) -> int:
        if id(v) in self.seen:
            return 0
        self.seen.add(id(v))
        self.left -= 1
        n = self.buffer(v, depth)
        if n is not None:
            return n
        n = sys.getsizeof(v, 0)
        kids = _children(v)
        if kids is None:
            return n
        if depth <= 0:
            self.cut = True
            return n
        return n + self.items(kids, depth - 1)

    def items(self, kids: Tuple[Iterable, int], depth: int) -> int:
        """The items' sizes; past the cap, the rest estimated at the mean of
        those counted."""
        it, total = kids
        n = i = 0
        try:
            for i, k in enumerate(it):
                if self.left <= 0:
                    self.cut = True
                    return n + (total - i) * n // i if i else n
                n += self.size(k, depth)
        except RuntimeError:  # changed size while we looked (another thread)
            self.cut = True
        return n

    def buffer(self, v: Any, depth: int) -> Optional[int]:
        """Bytes of a buffer (bytes, arrays, tensors, maps), or None."""
        t = type(v)
        if t is bytes or t is bytearray:
            return len(v)
        if t is memoryview:
            return v.nbytes
        if isinstance(v, mmap.mmap):
            try:
                return len(v)
            except ValueError:  # closed
                return 0
        storage = getattr(v, "untyped_storage", None)
        if callable(storage) and not isinstance(v, type):  # a torch tensor
            return self.tensor(v, storage)
        n = getattr(v, "nbytes", None)
        if isinstance(n, int) and not isinstance(v, type):  # numpy, or alike
            base = getattr(v, "base", None)  # a view keeps its base alive
            if base is not None and (isinstance(base, (bytes, bytearray, mmap.mmap))
                                     or isinstance(getattr(base, "nbytes", None), int)):
                return self.size(base, depth)
            return n
        return None

    def tensor(self, v: Any, storage: Callable) -> int:
        """Its storage's bytes, once for every view of it."""
        try:
            s = storage()
            key = ("storage", s.data_ptr())
            if key in self.seen:
                return 0
            self.seen.add(key)
            return int(s.nbytes())
        except Exception:
            try:
                return int(v.element_size() * v.nelement())
            except Exception:
                return sys.getsizeof(v, 0)


def _children(v: Any) -> Optional[Tuple[Iterable, int]]:
    """What @v holds that sizeof follows, and how many: a container's
    items, a dict's keys and values, a plain object's attributes."""
    if isinstance(v, dict):
        return (x for kv in v.items() for x in kv), 2 * len(v)
    if isinstance(v, _FOLLOW):
        return iter(v), len(v)
    if isinstance(v, _LEAVES):
        return None
    attrs = getattr(v, "__dict__", None)
    slots = [getattr(v, s, None) for c in type(v).__mro__
             for s in getattr(c, "__slots__", ())
             if isinstance(s, str) and s not in ("__dict__", "__weakref__")]
    if isinstance(attrs, dict):
        return iter(list(attrs.values()) + slots), len(attrs) + len(slots)
    return (iter(slots), len(slots)) if slots else None


def sizeof(value: Any) -> int:
    """Bytes of RAM @value holds: buffers by their length, numpy arrays by
    their nbytes (a view by its base's), torch tensors by their storage's
    bytes (once per storage), containers, dicts and plain objects by what
    they hold, each object once. Bounded: SIZEOF_DEPTH levels and
    SIZEOF_OBJECTS objects at most, the rest of a container estimated from
    the items counted, with a one-time warning; pass size= (to set, or a
    cache's size callable) for anything it cannot see, such as memory a C
    extension holds."""
    t = type(value)
    if t is bytes or t is bytearray:
        return len(value)
    w = _Walk()
    n = w.size(value, SIZEOF_DEPTH)
    if w.cut:
        _warn_once("sizeof", f"ramcache.sizeof: a {t.__name__} too deep or too large to "
                   f"walk whole (over {SIZEOF_DEPTH} levels or {SIZEOF_OBJECTS} objects): "
                   "its size is an estimate; pass size= for such values", 2)
    return n


# ---------------------------------------------------------------- memory

class _Memcg:
    """The memory cgroups above this process that have a limit (its own
    and its ancestors', v1 or v2), their files kept open: a read is a few
    pread(2) calls. Limits set on cgroups after this was made are not
    seen."""

    def __init__(self):
        # limit, usage and stat fds; memory.stat's inactive and mapped file keys
        self.levels: List[Tuple[int, int, int, Tuple[bytes, bytes]]] = []
        for d, v2 in _cgroup_dirs():
            files = ("memory.max", "memory.current", "memory.stat") if v2 else \
                ("memory.limit_in_bytes", "memory.usage_in_bytes", "memory.stat")
            fds = []
            try:
                for f in files:
                    fds.append(os.open(os.path.join(d, f), os.O_RDONLY | os.O_CLOEXEC))
                limited = _limit(fds[0]) is not None
            except (OSError, ValueError):
                limited = False
            if not limited:
                for fd in fds:
                    os.close(fd)
                continue
            keys = (b"\ninactive_file ", b"\nfile_mapped ") if v2 else \
                (b"\ntotal_inactive_file ", b"\ntotal_mapped_file ")
            self.levels.append((fds[0], fds[1], fds[2], keys))

    def read(self) -> Optional[Tuple[int, int]]:
        """(limit, limit less its headroom) of the level with the least
        headroom (headroom(), MemAvailable aside), or None (no limit, or the
        files went away)."""
        best = None
        for lim_fd, use_fd, stat_fd, keys in self.levels:
            try:
                lim = _limit(lim_fd)
                use = int(os.pread(use_fd, 64, 0))
                stat = b"\n" + os.pread(stat_fd, 16384, 0)
                inactive, mapped = (_stat_value(stat, k) for k in keys)
            except (OSError, ValueError):
                continue
            if lim is None:
                continue
            room = headroom(None, lim, use, reclaimable(inactive, mapped))
            if best is None or room < best[0] - best[1]:
                best = (lim, lim - room)
        return best


def _stat_value(stat: bytes, key: bytes) -> int:
    """The value of @key ("\\nname ") in memory.stat's text, 0 without it."""
    i = stat.find(key)
    return int(stat[i + len(key):stat.index(b"\n", i + 1)]) if i >= 0 else 0


# A limit at or above this is none (RC_LIMIT_UNLIMITED_MIN in the agent).
LIMIT_NONE = 1 << 60


def reclaimable(inactive_file: int, mapped_file: int) -> int:
    """A memory cgroup's page cache the kernel takes back cheaply: its
    inactive file pages less the file pages processes map (a mapped model's
    weights look inactive until read twice, yet dropping them makes the
    process fault them back). The agent's rule (policy_reclaimable);
    tests/fixtures/headroom.txt holds both to it."""
    return max(0, inactive_file - mapped_file)


def headroom(mem_available: Optional[int], limit: Optional[int], usage: int,
             reclaimable_bytes: int) -> Optional[int]:
    """Bytes that can still be allocated before reclaim works hard: the
    lower of @mem_available and, with a @limit (None, or LIMIT_NONE and
    above: none), limit - usage (0 at least) + @reclaimable_bytes (no more
    than usage), never more than the limit. None when neither is known.
    The agent's rule (policy_headroom); tests/fixtures/headroom.txt."""
    room = None
    if limit is not None and limit < LIMIT_NONE:
        room = min(max(0, limit - usage) + min(max(0, reclaimable_bytes), usage), limit)
    if mem_available is None or room is None:
        return mem_available if room is None else room
    return min(mem_available, room)


def _limit(fd: int) -> Optional[int]:
    v = os.pread(fd, 64, 0).strip()
    if v == b"max":
        return None
    n = int(v)
    return None if n >= LIMIT_NONE else n  # v1 says "no limit" with ~2**63


def _cgroup_dirs() -> List[Tuple[str, bool]]:
    """The memory cgroup directories of this process, its own first, then
    each parent up to the hierarchy's root: (path, cgroup v2)."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    v1 = v2 = None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            v1 = path
        elif ctrls == "":
            v2 = path
    if v1 is not None:  # the controller on v1 (a hybrid system's v2 has none)
        own = ("/sys/fs/cgroup/memory", v1, False)
    elif v2 is not None and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        own = ("/sys/fs/cgroup", v2, True)
    else:
        return []
    base, path, v2 = own
    out = []
    while True:
        d = base + path.rstrip("/")
        if os.path.isdir(d):
            out.append((d, v2))
        if path in ("", "/"):
            return out
        path = os.path.dirname(path.rstrip("/"))


_memcg: Optional[_Memcg] = None
_memcg_lock = threading.Lock()


def _cgroup() -> _Memcg:
    global _memcg
    with _memcg_lock:
        if _memcg is None:
            _memcg = _Memcg()
        return _memcg


def memory_use() -> Optional[Tuple[int, int]]:
    """(limit, used) of the memory cgroup above this process with the least
    room: its limit, and what counts as used, the limit less its headroom
    (headroom(): usage less the page cache the kernel takes back cheaply,
    the agent's rule); None without a limit. The files are kept open and
    read with pread: cheap enough for every safe point."""
    return _cgroup().read()


def available_bytes() -> Optional[int]:
    """Memory this process could still use: headroom() of MemAvailable
    and the tightest of its memory cgroups (the agent's rule); None when
    neither can be read."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    r = _cgroup().read()
    if r is not None and (avail is None or r[0] - r[1] < avail):
        avail = r[0] - r[1]
    return avail


def _human(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            break
    return f"{n:.1f} {unit}"


# ---------------------------------------------------------------- the process

class Budget:
    """What all the caches of this process keep to together while no agent
    serves them (ramcache.budget, the one instance).

    max_bytes: half of the memory available (available_bytes()) when it
    is first asked for, which the first cache does; unbounded when that
    cannot be read. Set it to an int or a size string ("8G") before or
    after making caches. Each cache may use all of it, and its own
    max_bytes, when it has one, bounds it further: when a set takes the
    caches' total over the budget, the least recently used entries of all
    of them go first. bytes: the caches' total now."""

    def __init__(self):
        self._max: Optional[int] = None
        self._lock = threading.Lock()
        self._bytes = 0
        self._dead: List[int] = []  # bytes of caches collected, not yet taken off
        self._serial = 0
        self._caches: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    @property
    def max_bytes(self) -> int:
        """The budget in bytes (settable: an int or "8G")."""
        if self._max is None:
            avail = available_bytes()
            with self._lock:
                if self._max is None:
                    self._max = U63 if avail is None else avail // 2
        return self._max

    @max_bytes.setter
    def max_bytes(self, value: Any) -> None:
        self._max = parse_bytes(value, "the budget")

    @property
    def bytes(self) -> int:
        """What the caches of the process hold now, together."""
        if self._dead:
            self._add(0)
        return self._bytes

    def caches(self) -> List["PressureCache"]:
        """Every cache of this process that is still alive."""
        with self._lock:
            return list(self._caches.values())

    def _join(self, cache: "PressureCache") -> None:
        with self._lock:
            self._serial += 1
            self._caches[self._serial] = cache
        weakref.finalize(cache, self._gone, cache._acct)

    def _add(self, n: int) -> None:
        with self._lock:
            while self._dead:
                n -= self._dead.pop()
            self._bytes += n

    def _gone(self, acct: List[int]) -> None:
        """A cache was collected with acct[0] bytes: no longer counted. A
        finalizer, run by any allocation (inside _add too): it only queues
        the bytes (list.append needs no lock), _add takes them off."""
        self._dead.append(acct[0])

    def __repr__(self) -> str:
        return f"<ramcache.Budget {_human(self.bytes)} of {_human(self.max_bytes)}>"


budget = Budget()


class _Guard:
    """The last line: the process's memory cgroup kept from its limit by the
    caches themselves, whatever the agent does (ramcache.guard, the one
    instance).

    The rule: with L the limit of the tightest memory cgroup above the
    process, used its usage less inactive file pages, and big the largest
    of the last GUARD_RECENT entries set (room for the next, at most L/2):
    when L - used < big + 2.5% of L, the least recently used entries of
    all the caches (never one in use) are evicted until L - used >= big +
    7.5% of L. It acts unless an agent is alive and has a command in flight
    (one held for an entry in use: its bytes are coming): with no agent,
    a stalled or dead one, or one that is not acting, it acts. Checked at
    set() (at most every GUARD_EVERY_NS, or at once when 1% of L was set
    since the last check) and at each wake-up of the serving thread (at
    least every 100 ms). Without a memory cgroup limit it does nothing.

    Counts: checks, fired (checks that evicted), evicted (bytes); last:
    what the last check saw."""

    def __init__(self):
        self._lock = threading.Lock()
        self._recent = [0] * GUARD_RECENT
        self._i = 0
        self._next_ns = 0
        self._since = 0
        self._step = 0
        self.checks = self.fired = self.evicted = 0
        self.last: Optional[Dict[str, int]] = None

    def grew(self, size: int) -> None:
        """An entry of @size bytes was set (unlocked: a lost update only
        moves a check a little)."""
        i = self._i
        self._i = i + 1
        self._recent[i % GUARD_RECENT] = size
        self._since += size
        if self._since >= self._step or _now_ns() >= self._next_ns:
            self.check()

    def bounds(self, lim: int) -> Tuple[int, int]:
        """(trip, target): the usage above which the guard fires, and the
        one it evicts down to, for a limit of @lim bytes."""
        big = min(max(self._recent), lim // 2)
        return lim - big - int(lim * GUARD_TRIP), lim - big - int(lim * GUARD_FREE)

    def check(self) -> int:
        """Look at the cgroup now and evict if the rule says so: the bytes
        freed."""
        if not self._lock.acquire(blocking=False):
            return 0  # another thread is at it
        try:
            self._next_ns = _now_ns() + GUARD_EVERY_NS
            self._since = 0
            r = _cgroup().read()
            if r is None:
                self._step = U63
                return 0
            lim, used = r
            self._step = max(1, lim // 100)
            self.checks += 1
            trip, target = self.bounds(lim)
            self.last = {"limit": lim, "used": used, "trip": trip, "target": target}
            if used <= trip:
                return 0
            freed = _shed([c for c in budget.caches() if c._guard_may()],
                          used - target, "evicted_guard")
            if freed:
                self.fired += 1
                self.evicted += freed
            return freed
        finally:
            self._lock.release()


guard = _Guard()


def _shed(caches: List["PressureCache"], need: int, stat: str) -> int:
    """Free @need bytes from @caches: the least recently used entry of all
    of them first (never one in use), each cache's lock taken alone; the
    bytes freed (less when what is left is in use)."""
    freed = 0
    left = list(caches)
    while freed < need and left:
        heads = [(t, i, c) for i, c in enumerate(left) for t in [c._oldest_ns()]
                 if t is not None]
        if not heads:
            break
        heads.sort()
        c = heads[0][2]
        got, n = c._drop_lru(need - freed, heads[1][0] if len(heads) > 1 else None, stat)
        freed += got
        left = [h[2] for h in heads[int(n == 0):]]
    return freed


_hooked: "weakref.WeakSet" = weakref.WeakSet()
_hook_lock = threading.Lock()


def _hook(ex: Any) -> None:
    """The caches' callbacks on @ex, once: the agent's state passed to each
    cache on it, and at each wake-up of its thread the buckets redone and
    the guard's check when due."""
    with _hook_lock:
        if ex in _hooked:
            return
        _hooked.add(ex)
    ref = weakref.ref(ex)

    def agent(state: str, t_ns: int) -> None:
        for c in budget.caches():
            if c._ex is ref():
                c._on_agent(state, t_ns)

    def wake() -> None:
        for c in budget.caches():
            if c._ex is ref() and c._bucket_dirty:
                c._flush_bucket()
        if _now_ns() >= guard._next_ns:
            guard.check()

    ex.on_agent.append(agent)
    ex.on_wake.append(wake)


def _executor(executor: Any) -> Tuple[Any, Optional[str]]:
    """The executor a cache serves on, or None and why not (then warned
    once: the cache is an LRU of its own)."""
    if executor is not None:
        return executor, None
    if execmod is None:
        why = NO_PAGE
    else:
        try:
            return execmod.shared(), None
        except OSError as e:  # not Linux, no memfd
            why = e.strerror or str(e)
    _warn_once("page", f"ramcache: {why}: the agent cannot see these caches; each keeps "
               "to its own bound, least recently used first", 3)
    return None, why


# ---------------------------------------------------------------- the cache

class _Entry:
    __slots__ = ("eid", "value", "size", "cost_ns", "used_ns", "used_gen", "holds")

    def __init__(self, value: Any, size: int, cost_ns: int, now: int):
        self.eid = 0  # its page entry; 0: in the cache's bucket
        self.value, self.size, self.cost_ns = value, size, cost_ns
        self.used_ns, self.used_gen, self.holds = now, _gen(now), 0


class PressureCache(collections.abc.MutableMapping):
    """A dict whose entries the ramcache-bpf agent may evict.

        cache = PressureCache("thumbnails", max_bytes="2G")
        cache.set(key, value, size=nbytes, cost=0.8)   # 0.8 s to make again
        value = cache.get(key)                         # None once evicted
        with cache.hold(key) as value: ...             # in use: not evicted

    size defaults to the cache's size callable (size=, as cachetools'
    getsizeof), else sizeof(value); cost (seconds to recompute) to unknown.
    Bounds, while no agent is alive: max_bytes (an int or "1G"; default:
    none of its own) and the process's budget (ramcache.budget), least
    recently used first; a value larger than either raises ValueError and
    nothing changes (as cachetools does). With a live agent, the agent
    decides, and ramcache.guard keeps the memory cgroup from its limit
    whatever happens. Every method is atomic under the cache's lock: safe
    from any thread. The interface of cachetools.Cache too (maxsize,
    currsize, getsizeof, popitem, __missing__), so it goes wherever one
    does (@cachetools.cached(cache))."""

    def __init__(self, name: str = "cache", max_bytes: Any = None, executor: Any = None, *,
                 size: Optional[Callable[[Any], int]] = None):
        if size is not None and not callable(size):
            raise TypeError(f"size must be a callable giving a value's bytes, not "
                            f"{type(size).__name__}")
        self.name = str(name)
        self._max = None if max_bytes is None else parse_bytes(max_bytes)
        self._size = size
        self._lock = threading.RLock()
        self._d: "collections.OrderedDict[Any, _Entry]" = collections.OrderedDict()
        self._keys: Dict[int, Any] = {}  # page id -> key, of entries published alone
        # the rest (small entries, and those the page had no room for): one
        # page entry, least recently used first
        self._bucket: "collections.OrderedDict[Any, _Entry]" = collections.OrderedDict()
        self._bucket_bytes = self._bucket_cost = 0
        self._bucket_eid = self._bucket_pub = self._bucket_ns = 0
        self._bucket_dirty = False
        self._acct = [0]  # bytes (a list: the budget's finalizer reads it)
        self._hits = self._misses = 0
        self._counts: collections.Counter = collections.Counter()
        self._agent_was: Optional[str] = None
        self.fallback_ns = 0
        self._ex, self.reason = _executor(executor)
        budget._join(self)
        if self._ex is not None:
            _hook(self._ex)

    # ------------------------------------------------------------ what it holds

    @property
    def bytes(self) -> int:
        """Bytes held now (the sizes of its entries)."""
        return self._acct[0]

    currsize = bytes

    @property
    def max_bytes(self) -> int:
        """Its own bound, or the budget's when it has none."""
        return budget.max_bytes if self._max is None else self._max

    @max_bytes.setter
    def max_bytes(self, value: Any) -> None:
        self._max = None if value is None else parse_bytes(value)

    @property
    def maxsize(self) -> int:
        """The largest value it takes: its bound and the budget's, the
        smaller (cachetools' name)."""
        m = budget.max_bytes
        return m if self._max is None else min(self._max, m)

    @property
    def stats(self) -> collections.Counter:
        """hits, misses; evicted_by_agent and evicted_bytes (the agent's
        commands), evicted_lru (its own bounds), evicted_guard (the guard);
        fallbacks (times the agent was lost), unpublished (entries the
        page had no room for, in the bucket instead). A copy."""
        with self._lock:
            c = collections.Counter(self._counts)
            c["hits"], c["misses"] = self._hits, self._misses
        return c

    def getsizeof(self, value: Any) -> int:
        """@value's bytes: the cache's size callable, else sizeof()."""
        return _check_size(self._size(value) if self._size else sizeof(value))

    # ------------------------------------------------------------ the mapping

    def set(self, key: Hashable, value: Any, size: Optional[int] = None,
            cost: Optional[float] = None) -> None:
        """Cache @value under @key: @size bytes (default getsizeof(value)),
        @cost seconds to compute it again (default unknown). TypeError or
        ValueError (a bad size or cost, an unhashable key, a value larger
        than maxsize) before anything changes."""
        size = self._check(key, value, size)
        cost_ns = _cost_ns(cost)
        with self._lock:
            self._store(key, value, size, cost_ns)
        self._grew(size)

    def _check(self, key: Any, value: Any, size: Optional[int]) -> int:
        hash(key)
        size = self.getsizeof(value) if size is None else _check_size(size)
        if size > self.maxsize:
            raise ValueError(f"ramcache: {self.name}: a value of {size} bytes is larger than "
                             f"the cache's bound ({self.maxsize} bytes): not cached")
        return size

    def _store(self, key: Any, value: Any, size: int, cost_ns: int) -> None:
        now = _now_ns()
        e = _Entry(value, size, cost_ns, now)
        old = self._d.pop(key, None)
        if old is not None and old.eid and not old.holds and size >= SMALL_BYTES \
                and self._ex.mine():
            e.eid = old.eid  # the same page entry, updated in place
            self._acct[0] -= old.size
            budget._add(-old.size)
        elif old is not None:
            self._unlink(key, old)
        self._d[key] = e
        self._acct[0] += size
        budget._add(size)
        if e.eid:
            self._publish(key, e, now)
        else:
            self._place(key, e, now)

    def _grew(self, size: int) -> None:
        """After a set, outside the lock (evictions may take other caches'):
        its own bounds when no agent serves it, the guard."""
        if not self._agent_on():
            self._keep_bounds()
        guard.grew(size)

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value under @key (a use: it becomes the most recent), or
        @default."""
        with self._lock:
            e = self._d.get(key)
            if e is None:
                self._misses += 1
                return default
            self._hits += 1
            self._touch(key, e)
            return e.value

    def _touch(self, key: Any, e: _Entry) -> None:
        self._d.move_to_end(key)
        now = e.used_ns = _now_ns()
        gen = _gen(now)
        if e.eid:
            if gen != e.used_gen:  # what the agent ranks by: at most once a second
                e.used_gen = gen
                if self._ex.mine():
                    self._publish(key, e, now)
        else:
            e.used_gen = gen
            self._bucket.move_to_end(key)
            self._bucket_dirty = True

    def peek(self, key: Hashable, default: Any = None) -> Any:
        """The value under @key without using it (no hit, no move)."""
        with self._lock:
            e = self._d.get(key)
            return default if e is None else e.value

    def __getitem__(self, key: Hashable) -> Any:
        v = self.get(key, _MISSING)
        return self.__missing__(key) if v is _MISSING else v

    def __missing__(self, key: Hashable) -> Any:
        """What cache[key] gives for a key it lacks: KeyError (a subclass
        may compute it, as with cachetools.Cache)."""
        raise KeyError(key)

    def __setitem__(self, key: Hashable, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: Hashable) -> None:
        with self._lock:
            e = self._d.pop(key)
            self._unlink(key, e)

    def pop(self, key: Hashable, default: Any = _MISSING) -> Any:
        """Remove @key and give its value, else @default (KeyError without
        one)."""
        with self._lock:
            e = self._d.pop(key, None)
            if e is None:
                if default is _MISSING:
                    raise KeyError(key)
                return default
            self._unlink(key, e)
            return e.value

    def popitem(self) -> Tuple[Any, Any]:
        """Remove the least recently used entry: (key, value). KeyError
        when empty."""
        with self._lock:
            if not self._d:
                raise KeyError(f"{self.name} is empty")
            key, e = self._d.popitem(last=False)
            self._unlink(key, e)
            return key, e.value

    def setdefault(self, key: Hashable, default: Any = None) -> Any:
        """The value under @key; if none, @default is cached and given."""
        size = None
        with self._lock:
            e = self._d.get(key)
            if e is not None:
                self._hits += 1
                self._touch(key, e)
                return e.value
            size = self._check(key, default, None)
            self._misses += 1
            self._store(key, default, size, 0)
        self._grew(size)
        return default

    def update(self, other: Any = (), **kw: Any) -> None:
        """Set every pair of @other (a mapping or pairs) and @kw, as one
        change: all are checked (hashable, size, bound) before any is
        stored."""
        pairs = list(other.items() if hasattr(other, "items") else other) + list(kw.items())
        sized = [(k, v, self._check(k, v, None)) for k, v in pairs]
        with self._lock:
            for k, v, n in sized:
                self._store(k, v, n, 0)
        self._grew(max((n for _, _, n in sized), default=0))

    def keys(self) -> List[Any]:  # type: ignore[override]
        """The keys, least recently used first (a copy: not a use)."""
        with self._lock:
            return list(self._d)

    def values(self) -> List[Any]:  # type: ignore[override]
        """The values, least recently used first (a copy: not a use)."""
        with self._lock:
            return [e.value for e in self._d.values()]

    def items(self) -> List[Tuple[Any, Any]]:  # type: ignore[override]
        """(key, value) pairs, least recently used first (a copy: not a
        use)."""
        with self._lock:
            return [(k, e.value) for k, e in self._d.items()]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._d

    def clear(self) -> None:
        """Remove every entry (those in use too)."""
        with self._lock:
            gone = list(self._d.items())
            self._d.clear()
            with self._batch():
                for key, e in gone:
                    self._unlink(key, e)
                self._publish_bucket(_now_ns())

    def __repr__(self) -> str:
        return (f"<PressureCache {self.name!r}: {len(self._d)} entries, {_human(self.bytes)} "
                f"of {_human(self.maxsize)}, agent {self.agent_state}>")

    def __reduce__(self) -> Tuple[Any, ...]:
        """Pickled or copied: the name, bound and entries (values, sizes,
        costs), made again as a new cache on the page of the process that
        loads it (copy.copy: the same values, copy.deepcopy: copies)."""
        with self._lock:
            items = [(k, e.value, e.size, e.cost_ns / 1e9) for k, e in self._d.items()]
        return _rebuild, (type(self), self.name, self._max, items)

    # ------------------------------------------------------------ in use

    class _Hold:
        __slots__ = ("cache", "key", "e")

        def __init__(self, cache: "PressureCache", key: Any):
            self.cache, self.key, self.e = cache, key, None

        def __enter__(self) -> Any:
            c = self.cache
            with c._lock:
                e = self.e = c._d.get(self.key)
                if e is None:
                    c._misses += 1
                    return None
                e.holds += 1
                c._hits += 1
                c._touch(self.key, e)
                if e.holds == 1 and e.eid and c._ex.mine():
                    c._publish(self.key, e, _now_ns())
                return e.value

        def __exit__(self, *exc: Any) -> bool:
            c, e = self.cache, self.e
            if e is None:
                return False
            with c._lock:
                e.holds -= 1
                last = not e.holds
                if last and e.eid and c._d.get(self.key) is e and c._ex.mine():
                    c._publish(self.key, e, _now_ns())
            if last and e.eid:
                c._ex.release(e.eid)  # the commands held for it, obeyed now
            return False

    def hold(self, key: Hashable) -> "PressureCache._Hold":
        """with cache.hold(key) as value: the entry is in use (its value, or
        None if it is not cached): neither the agent nor the cache's own
        bounds evict it; the agent's command for it waits for the end of
        the block."""
        return self._Hold(self, key)

    # ------------------------------------------------------------ the page

    @property
    def agent_alive(self) -> bool:
        """An agent serves this cache: attached and beating (not stalled)."""
        return self._agent_on()

    @property
    def agent_state(self) -> str:
        """The agent's state: "alive", "stalled", "silent", "died" or
        "none" (also without a page: see reason)."""
        return self._ex.agent_state() if self._ex is not None else "none"

    def _agent_on(self) -> bool:
        return self._ex is not None and self._ex.agent_alive()

    def _guard_may(self) -> bool:
        """The guard may evict here: unless an agent is alive with a command
        in flight."""
        ex = self._ex
        return ex is None or not ex.in_flight() or not ex.agent_alive()

    def _batch(self) -> Any:
        ex = self._ex
        return ex.page.batch() if ex is not None and ex.mine() else contextlib.nullcontext()

    def _label(self, key: Any) -> str:
        t = type(key)
        r = repr(key[:pagemod.LABEL_LEN]) if t is str else repr(key) if t is int \
            else reprlib.repr(key)  # bounded work for a large key
        return f"{self.name}:{r}"[:pagemod.LABEL_LEN]

    def _publish(self, key: Any, e: _Entry, now: int) -> bool:
        page = self._ex.page
        if not page.publish(e.eid, e.size, e.used_ns, e.used_gen,
                            pagemod.F_ACTIVE if e.holds else 0, self._label(key), e.cost_ns):
            return False
        page.set_generation(_gen(now))
        return True

    def _place(self, key: Any, e: _Entry, now: int) -> None:
        """On the page alone (1 MiB or more, while the table has room), or
        in the bucket."""
        ex = self._ex
        if e.size >= SMALL_BYTES and ex is not None and ex.mine():
            e.eid = ex.new_id(self)
            if self._publish(key, e, now):
                self._keys[e.eid] = key
                return
            ex.forget(e.eid)
            e.eid = 0
            self._counts["unpublished"] += 1
        self._bucket[key] = e
        self._bucket_bytes += e.size
        self._bucket_cost += e.cost_ns
        self._bucket_dirty = True
        if now - self._bucket_ns >= BUCKET_EVERY_NS:
            self._publish_bucket(now)

    def _unlink(self, key: Any, e: _Entry) -> None:
        """@e, out of the cache's dict already, out of everything else."""
        if e.eid:
            self._keys.pop(e.eid, None)
            self._ex.forget(e.eid)
        else:
            self._bucket.pop(key, None)
            self._bucket_bytes -= e.size
            self._bucket_cost -= e.cost_ns
            self._bucket_dirty = True
        self._acct[0] -= e.size
        budget._add(-e.size)

    def _publish_bucket(self, now: int) -> None:
        """The bucket's page entry: the bytes of its oldest entries, up to
        BUCKET_BYTES (what a command for it frees), as old as its least
        recently used entry, their share of the bucket's cost."""
        self._bucket_dirty = False
        self._bucket_ns = now
        ex = self._ex
        if ex is None or not ex.mine():
            return
        if not self._bucket:
            if self._bucket_eid:
                ex.forget(self._bucket_eid)
            self._bucket_eid = self._bucket_pub = 0
            return
        if not self._bucket_eid:
            self._bucket_eid = ex.new_id(self)
        head = next(iter(self._bucket.values()))
        pub = min(self._bucket_bytes, BUCKET_BYTES)
        cost = self._bucket_cost * pub // max(1, self._bucket_bytes)
        label = f"{self.name}:<{len(self._bucket)} entries>"[:pagemod.LABEL_LEN]
        if ex.page.publish(self._bucket_eid, pub, head.used_ns, head.used_gen, 0, label,
                           min(cost, U63)):
            self._bucket_pub = pub
            ex.page.set_generation(_gen(now))
        else:
            self._counts["unpublished"] += 1

    def _flush_bucket(self) -> None:
        with self._lock:
            if self._bucket_dirty:
                self._publish_bucket(_now_ns())

    def evict_entry(self, eid: int) -> Any:
        """The agent's command for entry @eid (on the serving thread):
        (status, bytes freed), or HOLD for an entry in use."""
        with self._lock:
            if eid == self._bucket_eid:
                return self._evict_bucket()
            key = self._keys.get(eid, _MISSING)
            e = self._d.get(key) if key is not _MISSING else None
            if e is None or e.eid != eid:
                return pagemod.ACK_NOT_FOUND, 0
            if e.holds:
                return execmod.HOLD
            del self._d[key]
            self._unlink(key, e)
            self._counts["evicted_by_agent"] += 1
            self._counts["evicted_bytes"] += e.size
        return pagemod.ACK_EVICTED, e.size

    def _evict_bucket(self) -> Tuple[int, int]:
        """A command for the bucket: its least recently used entries (not
        those in use) until the bytes it showed are freed."""
        gone, freed = [], 0
        for key, e in self._bucket.items():
            if freed >= self._bucket_pub:
                break
            if not e.holds:
                gone.append((key, e))
                freed += e.size
        if not gone:
            return (pagemod.ACK_BUSY if self._bucket else pagemod.ACK_NOT_FOUND), 0
        with self._batch():
            for key, e in gone:
                del self._d[key]
                self._unlink(key, e)
            self._ex.forget(self._bucket_eid)  # a new entry for what is left
            self._bucket_eid = self._bucket_pub = 0
            self._publish_bucket(_now_ns())
        self._counts["evicted_by_agent"] += len(gone)
        self._counts["evicted_bytes"] += freed
        return pagemod.ACK_EVICTED, freed

    # ------------------------------------------------------------ own bounds

    def _oldest_ns(self) -> Optional[int]:
        """When its least recently used entry not in use was used, or None."""
        with self._lock:
            for e in self._d.values():
                if not e.holds:
                    return e.used_ns
        return None

    def _drop_lru(self, need: int, until: Optional[int], stat: str) -> Tuple[int, int]:
        """Evict least recently used entries not in use, used at @until or
        before (None: any), until @need bytes are freed: (bytes, entries)."""
        with self._lock:
            gone, freed = [], 0
            for key, e in self._d.items():
                if freed >= need or until is not None and e.used_ns > until and gone:
                    break
                if not e.holds:
                    gone.append((key, e))
                    freed += e.size
            with self._batch():
                for key, e in gone:
                    del self._d[key]
                    self._unlink(key, e)
            self._counts[stat] += len(gone)
        return freed, len(gone)

    def _keep_bounds(self) -> None:
        """No agent serves it: its own bound, then the budget."""
        over = self.bytes - self.maxsize
        if over > 0:
            self._drop_lru(over, None, "evicted_lru")
        over = budget.bytes - budget.max_bytes
        if over > 0:
            _shed([c for c in budget.caches() if not c._agent_on()], over, "evicted_lru")

    def _on_agent(self, state: str, t_ns: int) -> None:
        was, self._agent_was = self._agent_was, state
        if state != "alive":
            if was == "alive":
                self._counts["fallbacks"] += 1
                self.fallback_ns = t_ns
            self._keep_bounds()
            guard.check()


def _rebuild(cls: type, name: str, max_bytes: Optional[int],
             items: List[Tuple[Any, Any, int, float]]) -> PressureCache:
    c = cls(name, max_bytes)
    for k, v, size, cost in items:
        with contextlib.suppress(ValueError):  # larger than this process's budget
            c.set(k, v, size=size, cost=cost)
    return c


# ---------------------------------------------------------------- memoize

CacheInfo = collections.namedtuple("CacheInfo", "hits misses maxsize currsize")
CacheInfo.__doc__ = ("functools' CacheInfo, for a memoized function: hits, misses, "
                     "maxsize and currsize in bytes (cachetools' sense)")


def _key(args: tuple, kwargs: dict) -> Any:
    return (args, tuple(sorted(kwargs.items()))) if kwargs else args


def memoize(fn: Optional[Callable] = None, *, cache: Optional[PressureCache] = None,
            size: Optional[Callable[[Any], int]] = None, max_bytes: Any = None,
            key: Optional[Callable[..., Any]] = None, name: Optional[str] = None) -> Any:
    """Cache a function's results in a PressureCache, with what each call
    cost as the entry's recompute cost:

        @memoize
        def thumbnail(path): ...

        @memoize(size=lambda img: img.nbytes, max_bytes="1G")
        def decode(path): ...

    size(result) gives an entry's bytes (default sizeof), key(*args,
    **kwargs) its key (default: the arguments, which must be hashable),
    name the cache's (default the function's qualified name). A result
    larger than the cache's bound is returned and not cached. The wrapper
    has functools' cache_info() and cache_clear(), and .cache."""
    def deco(f: Callable) -> Callable:
        c = cache if cache is not None else PressureCache(
            name or getattr(f, "__qualname__", "memoize"), max_bytes=max_bytes, size=size)
        sz = size if cache is not None else None  # else the cache's own size=

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            k = key(*args, **kwargs) if key else _key(args, kwargs)
            v = c.get(k, _MISSING)
            if v is not _MISSING:
                return v
            t0 = time.perf_counter()
            v = f(*args, **kwargs)
            with contextlib.suppress(ValueError):  # too large: not cached
                c.set(k, v, size=sz(v) if sz else None, cost=time.perf_counter() - t0)
            return v

        def cache_info() -> CacheInfo:
            """functools': hits, misses, maxsize and currsize (bytes)."""
            return CacheInfo(c._hits, c._misses, c.maxsize, c.bytes)

        wrapper.cache = c  # type: ignore[attr-defined]
        wrapper.cache_info = cache_info  # type: ignore[attr-defined]
        wrapper.cache_clear = c.clear  # type: ignore[attr-defined]
        return wrapper
    return deco(fn) if fn is not None else deco


__all__ = ["PressureCache", "memoize", "sizeof", "available_bytes", "memory_use", "parse_bytes",
           "headroom", "reclaimable", "budget", "Budget", "guard", "CacheInfo", "NO_PAGE"]
