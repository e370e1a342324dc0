"""PressureCache: a dict the ramcache-bpf agent can evict from, and an LRU
bound of its own when no agent is there; memoize: a decorator that caches a
function's results in one.

Each entry is published on the process's control page with its size, when
it was last used and what it costs to recompute; the agent evicts the
entries that are worth least (old, big, cheap) when memory gets short,
before the kernel has to reclaim. Without a live agent (none started, or
it died: noticed within milliseconds) the cache keeps to max_bytes,
least recently used first."""
import collections
import functools
import mmap
import sys
import threading
import time

from . import executor as execmod
from . import page as pagemod

_MISSING = object()
LABEL_KEY_LEN = 32


def sizeof(value):
    """Bytes of RAM @value holds, as well as can be told without walking
    it deeply: buffers by their length, arrays and tensors by their
    nbytes, containers by their items one level down."""
    n = getattr(value, "nbytes", None)  # numpy arrays, memoryviews
    if isinstance(n, int):
        return n
    if callable(getattr(value, "element_size", None)) and callable(getattr(value, "nelement", None)):
        try:  # a torch tensor
            return int(value.element_size() * value.nelement())
        except Exception:
            pass
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, mmap.mmap):
        try:
            return len(value)
        except ValueError:  # closed
            return 0
    n = sys.getsizeof(value, 0)
    if isinstance(value, dict):
        n += sum(sys.getsizeof(k, 0) + sys.getsizeof(v, 0) for k, v in value.items())
    elif isinstance(value, (list, tuple, set, frozenset)):
        n += sum(sys.getsizeof(v, 0) for v in value)
    return n


def available_bytes():
    """Memory this process could still use: MemAvailable, or what its
    memory cgroup leaves (limit - usage + inactive file), the smaller."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    cg = _cgroup_headroom()
    if cg is not None and (avail is None or cg < avail):
        avail = cg
    return avail


def _read_int(path):
    try:
        with open(path) as f:
            v = f.read().strip()
        return None if v == "max" else int(v)
    except (OSError, ValueError):
        return None


def _stat(path, key):
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
    except (OSError, ValueError):
        pass
    return 0


def _cgroup_headroom():
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if ctrls == "":  # v2
            d = "/sys/fs/cgroup" + path
            lim, use = _read_int(d + "/memory.max"), _read_int(d + "/memory.current")
            inactive = _stat(d + "/memory.stat", "inactive_file")
        elif "memory" in ctrls.split(","):
            d = "/sys/fs/cgroup/memory" + path
            lim, use = _read_int(d + "/memory.limit_in_bytes"), _read_int(d + "/memory.usage_in_bytes")
            inactive = _stat(d + "/memory.stat", "total_inactive_file")
            if lim is not None and lim >= 1 << 62:
                lim = None
        else:
            continue
        if lim is not None and use is not None:
            return max(0, lim - use + inactive)
    return None


class _Entry:
    __slots__ = ("eid", "value", "size", "cost_ns", "used_ns", "used_gen", "holds")

    def __init__(self, eid, value, size, cost_ns, gen):
        self.eid, self.value, self.size, self.cost_ns = eid, value, size, cost_ns
        self.used_ns, self.used_gen, self.holds = pagemod.now_ns(), gen, 0


class PressureCache(collections.abc.MutableMapping):
    """A dict whose entries the ramcache-bpf agent may evict.

        cache = PressureCache("thumbnails")
        cache.set(key, value, size=nbytes, cost=0.8)   # 0.8 s to make again
        value = cache.get(key)                         # None once evicted
        with cache.hold(key) as value: ...             # in use: not evicted

    size defaults to sizeof(value); cost (seconds to recompute) to unknown.
    max_bytes bounds the cache, least recently used first, while no agent
    is alive (default: half of the memory available when it was made); with
    a live agent, the agent decides. Thread-safe."""

    def __init__(self, name="cache", max_bytes=None, executor=None):
        self.name = name
        self.max_bytes = max_bytes if max_bytes is not None else (available_bytes() or 0) // 2
        self._lock = threading.RLock()
        self._d = collections.OrderedDict()  # key -> _Entry, least recent first
        self._keys = {}  # entry id -> key
        self.bytes = 0
        self.stats = collections.Counter()
        self._epoch = time.monotonic()
        try:
            self._ex = executor or execmod.shared()
        except OSError as e:  # no page (not Linux, no memfd): an LRU cache
            self._ex = None
            self.reason = e.strerror or str(e)
        else:
            self.reason = None
            self._ex.on_agent.append(self._on_agent)

    # ------------------------------------------------------------ the mapping

    def _gen(self):
        """The page's generation: seconds since the cache was made, so an
        entry's age is how long it has not been used."""
        return int(time.monotonic() - self._epoch) + 1

    def set(self, key, value, size=None, cost=None):
        """Cache @value under @key: @size bytes (default sizeof(value)),
        @cost seconds to compute it again (default unknown)."""
        size = sizeof(value) if size is None else int(size)
        cost_ns = int(cost * 1e9) if cost else 0
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self.bytes -= old.size
                self._drop_id(old)
            eid = self._ex.new_id(self) if self._ex else 0
            e = _Entry(eid, value, size, cost_ns, self._gen())
            self._d[key] = e
            self._keys[eid] = key
            self.bytes += size
            self._publish(key, e)
            self._trim()

    def get(self, key, default=None):
        with self._lock:
            e = self._d.get(key)
            if e is None:
                self.stats["misses"] += 1
                return default
            self.stats["hits"] += 1
            self._d.move_to_end(key)
            gen = self._gen()
            e.used_ns = pagemod.now_ns()
            if gen != e.used_gen:  # what the agent ranks by: at most once a second
                e.used_gen = gen
                self._publish(key, e)
            return e.value

    def __getitem__(self, key):
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return v

    def __setitem__(self, key, value):
        self.set(key, value)

    def __delitem__(self, key):
        with self._lock:
            e = self._d.pop(key)
            self.bytes -= e.size
        self._drop_id(e)

    def __contains__(self, key):
        with self._lock:
            return key in self._d

    def __iter__(self):
        with self._lock:
            return iter(list(self._d))

    def __len__(self):
        return len(self._d)

    def clear(self):
        with self._lock:
            gone = list(self._d.values())
            self._d.clear()
            self.bytes = 0
        for e in gone:
            self._drop_id(e)

    class _Hold:
        def __init__(self, cache, key):
            self.cache, self.key, self.e = cache, key, None

        def __enter__(self):
            c = self.cache
            with c._lock:
                self.e = c._d.get(self.key)
                if self.e is None:
                    c.stats["misses"] += 1
                    return None
                self.e.holds += 1
                c._publish(self.key, self.e)
            return c.get(self.key)

        def __exit__(self, *exc):
            c, e = self.cache, self.e
            if e is None:
                return False
            with c._lock:
                e.holds -= 1
                last = not e.holds
                if last and c._d.get(self.key) is e:
                    c._publish(self.key, e)
            if last and c._ex is not None:
                c._ex.release(e.eid)  # the commands held for it, obeyed now
            return False

    def hold(self, key):
        """with cache.hold(key) as value: the entry is in use (its value, or
        None if it is not cached); the agent's command for it waits for the
        end of the block."""
        return self._Hold(self, key)

    # ------------------------------------------------------------ the page

    @property
    def agent_alive(self):
        return self._ex is not None and self._ex.agent_alive()

    def _label(self, key):
        return f"{self.name}:{key!r}"[:pagemod.LABEL_LEN]

    def _publish(self, key, e):
        ex = self._ex
        if ex is None or not ex.mine():
            return
        flags = pagemod.F_ACTIVE if e.holds else 0
        if not ex.page.publish(e.eid, e.size, e.used_ns, e.used_gen, flags,
                               self._label(key), e.cost_ns):
            self.stats["unpublished"] += 1  # the page is full
        ex.page.set_generation(self._gen())

    def _drop_id(self, e):
        self._keys.pop(e.eid, None)
        if self._ex is not None and e.eid:
            self._ex.forget(e.eid)

    def evict_entry(self, eid):
        """The agent's command for entry @eid (on the serving thread)."""
        with self._lock:
            key = self._keys.get(eid, _MISSING)
            e = self._d.get(key) if key is not _MISSING else None
            if e is None or e.eid != eid:
                return pagemod.ACK_NOT_FOUND, 0
            if e.holds:
                return execmod.HOLD
            del self._d[key]
            self.bytes -= e.size
            self.stats["evicted_by_agent"] += 1
            self.stats["evicted_bytes"] += e.size
        self._keys.pop(eid, None)
        if self._ex.mine():
            self._ex.page.remove(eid)
        return pagemod.ACK_EVICTED, e.size

    # ------------------------------------------------------------ fallback

    def _trim(self):
        """Without a live agent, least recently used out to max_bytes (an
        entry in use stays)."""
        if self.agent_alive or not self.max_bytes:
            return
        with self._lock:
            for key in list(self._d):
                if self.bytes <= self.max_bytes:
                    break
                e = self._d[key]
                if e.holds:
                    continue
                del self._d[key]
                self.bytes -= e.size
                self.stats["evicted_lru"] += 1
                self._drop_id(e)

    def _on_agent(self, state, t_ns):
        if state != "alive":
            self.stats["fallbacks"] += 1
            self.fallback_ns = t_ns
            self._trim()


def _key(args, kwargs):
    return (args, tuple(sorted(kwargs.items()))) if kwargs else args


def memoize(fn=None, *, cache=None, size=None, max_bytes=None, key=None):
    """Cache a function's results in a PressureCache, with what each call
    cost as the entry's recompute cost:

        @memoize
        def thumbnail(path): ...

        @memoize(size=lambda img: img.nbytes, max_bytes=1 << 30)
        def decode(path): ...

    size(result) gives an entry's bytes (default sizeof), key(*args,
    **kwargs) its key (default: the arguments, which must be hashable).
    The cache is the wrapper's .cache."""
    def deco(f):
        c = cache if cache is not None else PressureCache(
            getattr(f, "__qualname__", "memoize"), max_bytes=max_bytes)

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            k = key(*args, **kwargs) if key else _key(args, kwargs)
            v = c.get(k, _MISSING)
            if v is not _MISSING:
                return v
            t0 = time.perf_counter()
            v = f(*args, **kwargs)
            c.set(k, v, size=size(v) if size else None, cost=time.perf_counter() - t0)
            return v

        wrapper.cache = c
        return wrapper
    return deco(fn) if fn is not None else deco


__all__ = ["PressureCache", "memoize", "sizeof", "available_bytes"]
