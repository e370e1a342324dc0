"""ramcache: any Python program's side of the ramcache-bpf control page.

The agent (ramcache-bpf, root) watches a process's memory pressure from
the kernel and asks it, through a shared page, to drop cache entries
before the kernel reclaims or the OOM killer strikes. This package is that
process's side, standard library only:

  - ramcache.page.Page: the page itself (entry table, commands, acks,
    heartbeat), as docs/control-page.md describes it.

See python/README.md and docs/control-page.md.
"""
from .page import Page

__version__ = "0.1.0"
__all__ = ["Page", "__version__"]
