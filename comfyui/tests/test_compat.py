#!/usr/bin/env python3
"""Which ComfyUI the package is in, from what its PromptExecutor carries,
as seen in the real versions (COMPATIBILITY.md): the --cache-ram form, the
cache kind, the recommended command line and what is said once."""
import enum
import types

import env
from rctest import main, test

pkg = env.load_package()
C = pkg.compat


class CacheType(enum.Enum):  # the enum's members differ between versions
    CLASSIC = 0
    LRU = 1
    DEPENDENCY_AWARE = 2
    NONE = 3
    RAM_PRESSURE = 4


def cache(kind):
    c = types.SimpleNamespace(cache={}, subcaches={})
    if kind == "ram":
        c.timestamps, c.used_generation, c.generation = {}, {}, 1
    elif kind == "lru":
        c.used_generation, c.generation = {}, 1
    elif kind == "dependency":
        c.descendants, c.ancestors, c.executed_nodes = {}, {}, set()
    elif kind == "null":
        c = types.SimpleNamespace()
    return c


def executor(cache_type, kind, cache_args=None, cache_size=None):
    ex = types.SimpleNamespace(cache_type=cache_type,
                               caches=types.SimpleNamespace(outputs=cache(kind)))
    if cache_args is not None:
        ex.cache_args = cache_args
    if cache_size is not None:
        ex.cache_size = cache_size
    return ex


@test
def v0_3_64_classic_lru_and_dependency_aware():
    """PromptExecutor(server, cache_type, cache_size): no cache_args."""
    d = C.describe(executor(CacheType.LRU, "lru", cache_size=64), "0.3.64")
    assert d == {"version": "0.3.64", "cache_type": "LRU", "cache_class": "SimpleNamespace",
                 "cache": "lru", "cache_ram": C.FAMILY_NO_RAM,
                 "recommended": "python main.py --cache-lru 64"}, d
    d = C.describe(executor(CacheType.DEPENDENCY_AWARE, "dependency"))
    assert d["cache"] == "dependency" and d["cache_type"] == "DEPENDENCY_AWARE"
    assert C.advice(C.FAMILY_NO_RAM, "dependency", {}) is None  # publish says it
    assert "--cache-lru N" in C.advice(C.FAMILY_NO_RAM, "classic", {})[1]
    assert C.advice(C.FAMILY_NO_RAM, "lru", {}) is None
    # cache_type=False is the classic cache in every version
    assert C.describe(executor(False, "classic", cache_size=0))["cache_type"] == "CLASSIC"


@test
def v0_3_75_one_value_cache_ram():
    args = {"lru": 0, "ram": 1.0}
    d = C.describe(executor(CacheType.RAM_PRESSURE, "ram", cache_args=args))
    assert d["cache_ram"] == C.FAMILY_ONE and d["recommended"] == "python main.py --cache-ram 1"
    level, text = C.advice(C.FAMILY_ONE, "ram", args)
    assert level == "info" and "less than 1.0 GB is available" in text
    # --cache-none there: cache_args {"lru": 0, "ram": 0}, NullCache: never
    # "frees inactive entries below 0 GB headroom"
    none = {"lru": 0, "ram": 0}
    assert C.describe(executor(CacheType.NONE, "null", cache_args=none))["cache"] == "null"
    assert C.advice(C.FAMILY_ONE, "null", none) is None
    # classic or LRU there: ComfyUI frees nothing on its own, nothing to say
    assert C.advice(C.FAMILY_ONE, "classic", {"lru": 0, "ram": 0}) is None


@test
def newest_two_value_cache_ram():
    args = {"lru": 0, "ram": 4.0, "ram_inactive": 0.0}
    d = C.describe(executor(CacheType.RAM_PRESSURE, "ram", cache_args=args))
    assert d["cache_ram"] == C.FAMILY_TWO and d["recommended"] == "python main.py"
    assert C.advice(C.FAMILY_TWO, "ram", args) is None
    level, text = C.advice(C.FAMILY_TWO, "ram", dict(args, ram_inactive=96.0))
    assert level == "info" and "(--cache-ram 4.0 96.0) is set aside" in text, text


if __name__ == "__main__":
    main()
