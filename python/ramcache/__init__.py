"""ramcache: any Python program's side of the ramcache-bpf control page.

The agent (ramcache-bpf, run as root) watches a process's memory pressure
from the kernel and, through a shared page, asks it to drop cache entries
before the kernel reclaims or the OOM killer strikes. This package is that
process's side, standard library only:

  PressureCache   a dict the agent can evict from (LRU on its own when no
                  agent is alive)
  memoize         a decorator caching a function's results in one
  Executor        the page served by a thread: commands, acks, heartbeat,
                  the agent's death noticed at once (shared() is the
                  process's)
  Page            the page itself (ramcache.page), as docs/control-page.md
                  describes it

See python/README.md.
"""
from .cache import PressureCache, available_bytes, memoize, sizeof
from .executor import HOLD, Executor, shared
from .page import Page

__version__ = "0.1.0"
__all__ = ["PressureCache", "memoize", "sizeof", "available_bytes", "Executor",
           "shared", "HOLD", "Page", "__version__"]
