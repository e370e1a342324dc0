"""The control page and its serving loop: the ramcache module
(python/ramcache), the one Python implementation of them.

This folder carries the module as ramcache/, a link to ../python/ramcache,
so cloning, linking or copying the folder into custom_nodes (cp -rL: the
link followed) is still the whole install. Where a copy kept the link but
not its target (cp -r), a ramcache installed with pip (pip install
python/) is used instead."""
try:
    from .ramcache.page import *  # noqa: F401,F403
    from .ramcache.cache import memory_use  # noqa: F401
    from .ramcache import executor  # noqa: F401  (the serving loop)
except ImportError:
    try:
        from ramcache.page import *  # noqa: F401,F403
        from ramcache.cache import memory_use  # noqa: F401
        from ramcache import executor  # noqa: F401
    except ImportError:
        raise ImportError(
            "ramcache: the ramcache module is missing: this folder's "
            "ramcache/ is a link to ../python/ramcache of ramcache-bpf; "
            "link the folder into custom_nodes, copy it with cp -rL, or "
            "pip install the project's python/ folder") from None
