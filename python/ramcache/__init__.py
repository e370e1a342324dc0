"""ramcache: any Python program's side of the ramcache-bpf control page.

The agent (ramcache-bpf, run as root) watches a process's memory pressure
from the kernel and, through a shared page, asks it to drop cache entries
before the kernel reclaims or the OOM killer strikes. This package is that
process's side, standard library only:

  PressureCache   a dict the agent can evict from (LRU on its own bounds
                  when no agent is alive); cachetools.Cache's interface
  memoize         a decorator caching a function's results in one, with
                  functools' cache_info() and cache_clear()
  budget          what the process's caches keep to together without an
                  agent (ramcache.budget.max_bytes = "8G")
  guard           the last line: the caches evict on their own when the
                  process's memory cgroup nears its limit
  sizeof          a value's bytes, containers and arrays followed
  Executor        the page served by a thread: commands, acks, heartbeat,
                  the agent's death or stall noticed at once (shared() is
                  the process's)
  Page            the page itself (ramcache.page), as docs/control-page.md
                  describes it

Without fcntl (Windows) or memfd there is no page: Executor, shared, HOLD
and Page are None, every cache keeps to its own bounds, and NO_PAGE (or a
cache's reason) says why. See python/README.md.
"""
from .cache import (NO_PAGE, Budget, CacheInfo, PressureCache, available_bytes, budget,
                    guard, headroom, memoize, memory_use, parse_bytes, reclaimable, sizeof)

try:
    from .executor import HOLD, STALL_NS, Executor, shared
    from .page import Page
except ImportError:  # no fcntl: cache.NO_PAGE says so
    HOLD = STALL_NS = Executor = shared = Page = None  # type: ignore[assignment,misc]

__version__ = "0.1.0"
__all__ = ["PressureCache", "memoize", "sizeof", "available_bytes", "memory_use", "parse_bytes",
           "headroom", "reclaimable", "budget", "Budget", "guard", "CacheInfo", "NO_PAGE",
           "Executor", "shared",
           "HOLD", "STALL_NS", "Page", "__version__"]
