#!/usr/bin/env python3
"""PressureCache and memoize without the agent: the LRU bound, what the
page shows the agent (small entries in one bucket), commands obeyed at
once or held while an entry is in use, fork(); bad input refused before
anything changes, sizes, one budget for all the caches; functools' and
cachetools' interfaces, repr, pickle and copy; no fcntl or memfd.
Commands are written into the page as docs/control-page.md says the agent
writes them (agentside.py); the real agent's side is in test_agent.py and
test_guard.py."""
import copy
import mmap
import os
import pickle
import random
import subprocess
import sys
import threading
import time
import warnings

from rctest import ROOT, Skip, import_package, main, py_env, test

PYTHON_DIR = os.path.join(ROOT, "python")  # the ramcache module's
import_package(os.path.join(PYTHON_DIR, "ramcache"))
import ramcache  # noqa: E402
from ramcache import page as P  # noqa: E402
from agentside import AgentSide  # noqa: E402

MiB = 1 << 20


def fresh(max_bytes=None):
    """A cache on an Executor of its own (the test owns the page)."""
    ex = ramcache.Executor()
    return ramcache.PressureCache("t", max_bytes=max_bytes, executor=ex), ex


@test
def without_an_agent_it_keeps_to_max_bytes_least_recently_used_first():
    c, ex = fresh(max_bytes=10 * MiB)
    try:
        for i in range(8):
            c.set(i, bytearray(MiB))
        c.get(0)  # used again: the newest now
        for i in range(8, 14):
            c.set(i, bytearray(MiB))
        assert c.bytes <= 10 * MiB and len(c) == 10, (c.bytes, len(c))
        assert 0 in c and 1 not in c and 2 not in c and 3 not in c, sorted(c)
        assert c.stats["evicted_lru"] == 4, c.stats
        assert not c.agent_alive
    finally:
        ex.close()


@test
def the_page_shows_each_entry_with_its_size_age_and_cost():
    c, ex = fresh(max_bytes=1 << 40)
    a = AgentSide(ex.page)
    try:
        c.set("big", b"x" * (3 * MiB), cost=0.25)
        c.set("one", bytearray(MiB))
        ents = a.entries()
        assert len(ents) == 2, ents
        big = next(e for e in ents.values() if e["label"] == "t:'big'")
        assert big["bytes"] == 3 * MiB and big["cost_ns"] == 250_000_000, big
        assert big["flags"] == 0 and big["used_generation"] >= 1, big
        one = next(e for e in ents.values() if e["label"] == "t:'one'")
        assert one["bytes"] == MiB and one["cost_ns"] == 0, one
        del c["big"]
        assert [e["label"] for e in a.entries().values()] == ["t:'one'"]
    finally:
        a.close()
        ex.close()


@test
def a_command_evicts_the_entry_and_is_acked_with_its_bytes():
    c, ex = fresh(max_bytes=1 << 40)
    a = AgentSide(ex.page)
    try:
        a.beat()
        c.set("k", bytearray(2 * MiB))
        eid = next(iter(a.entries()))
        ack = a.ack_for(a.post(eid))
        assert ack == (P.ACK_EVICTED, 2 * MiB), ack
        assert "k" not in c and c.get("k") is None and c.bytes == 0
        assert c.stats["evicted_by_agent"] == 1 and not a.entries()
        assert a.ack_for(a.post(eid)) == (P.ACK_NOT_FOUND, 0)  # gone already
    finally:
        a.close()
        ex.close()


@test
def a_command_for_an_entry_in_use_is_held_until_the_block_ends():
    c, ex = fresh(max_bytes=1 << 40)
    a = AgentSide(ex.page)
    try:
        a.beat()
        c.set("k", bytearray(MiB))
        eid = next(iter(a.entries()))
        with c.hold("k") as v:
            assert isinstance(v, bytearray)
            assert a.entries()[eid]["flags"] == P.F_ACTIVE
            seq = a.post(eid)
            assert a.ack_for(seq, timeout=0.3) is None, "answered while in use"
            assert "k" in c and ex.counts["held"] == 1
        ack = a.ack_for(seq)
        assert ack == (P.ACK_EVICTED, MiB), ack  # obeyed at the end of the block
        assert "k" not in c and ex.counts["busy"] == 0
    finally:
        a.close()
        ex.close()


@test
def an_owner_that_takes_its_commands_acks_them_from_its_own_thread():
    """The owner protocol the ComfyUI package serves on: take_command(cmd)
    gets the command on the serving thread, ack() answers it later from
    another; an on_wake callback's number brings the next turn that soon."""
    ex = ramcache.Executor()
    a = AgentSide(ex.page)
    taken, turns = [], []

    class Owner:
        def take_command(self, cmd):
            taken.append(cmd)

    def wake():
        turns.append(time.monotonic())
        return 5 if taken else None
    try:
        a.beat()
        eid = ex.new_id(Owner())
        ex.page.publish(eid, MiB, 0, 1, 0, "taken")
        ex.on_wake.append(wake)
        ex.on_wake.append(lambda: True)  # not a number of ms: no wish
        time.sleep(0.05)
        n = len(turns)
        time.sleep(0.3)
        assert len(turns) - n < 30, len(turns) - n  # the 100 ms pace, not 1 ms
        seq = a.post(eid)
        end = time.monotonic() + 2
        while not taken and time.monotonic() < end:
            time.sleep(0.01)
        assert taken and taken[0].entry_id == eid, taken
        assert ex.counts["taken"] == 1 and ex.counts["evicted"] == 0
        assert a.ack_for(seq, timeout=0.2) is None, "acked before the owner did"
        n = len(turns)
        time.sleep(0.3)  # asked for a turn every 5 ms, not the 100 ms pace
        assert len(turns) - n >= 10, len(turns) - n
        threading.Thread(target=ex.ack, args=(taken[0], P.ACK_EVICTED, MiB)).start()
        assert a.ack_for(seq) == (P.ACK_EVICTED, MiB)
        ex.forget(eid)
        assert a.ack_for(a.post(eid)) == (P.ACK_NOT_FOUND, 0)  # not the owner's now
        assert len(taken) == 1
    finally:
        a.close()
        ex.close()


@test
def memoize_computes_once_and_publishes_the_cost():
    calls = []

    @ramcache.memoize(max_bytes=1 << 40)
    def slow(x):
        calls.append(x)
        time.sleep(0.02)
        return bytes(x)

    assert slow(1000) == bytes(1000) and slow(1000) == bytes(1000) and calls == [1000]
    assert slow.cache.stats["hits"] == 1 and slow.cache.stats["misses"] == 1
    page = slow.cache._ex.page
    a = AgentSide(page)
    try:
        ents = list(a.entries().values())
        mine = [e for e in ents if e["label"].startswith("memoize_computes_once")]
        assert mine and mine[0]["cost_ns"] >= 20_000_000 and mine[0]["bytes"] == 1000, ents
    finally:
        a.close()


@test
def sizes_are_measured():
    assert ramcache.sizeof(b"x" * 100) == 100
    assert ramcache.sizeof(bytearray(5000)) == 5000
    assert ramcache.sizeof(memoryview(bytearray(64)).cast("Q")) == 64
    assert ramcache.sizeof(mmap.mmap(-1, 8192)) == 8192
    assert ramcache.sizeof([bytes(1000) for _ in range(3)]) > 3000
    shared = bytes(1000)
    assert ramcache.sizeof([shared] * 3) < 2000  # one object, counted once


@test
def a_forked_child_does_not_use_its_parents_page():
    c, ex = fresh(max_bytes=4 * MiB)
    a = AgentSide(ex.page)
    try:
        a.beat()
        c.set("k", bytearray(MiB))
        assert c.agent_alive
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                ok = not c.agent_alive and not ex.mine()
                n0 = a.d[P.E_NR_ENTRIES // 4]
                for i in range(8):  # the LRU bound, not the parent's page
                    c.set(i, bytearray(MiB))
                ok = ok and c.bytes <= 4 * MiB and a.d[P.E_NR_ENTRIES // 4] == n0
                os.write(w, b"1" if ok else b"0")
            finally:
                os._exit(0)
        os.close(w)
        got = os.read(r, 1)
        os.waitpid(pid, 0)
        assert got == b"1", "the child used its parent's page or agent"
        assert len(a.entries()) == 1 and c.agent_alive
    finally:
        a.close()
        ex.close()


@test
def a_bad_set_changes_nothing():
    """Issue 35: a negative size, one of 2**70 or a negative cost raised
    struct.error with the key stored (and 2**70 then evicted everything);
    size='10' was taken. Each is refused before anything changes."""
    c, ex = fresh(max_bytes=8 * MiB)
    a = AgentSide(ex.page)
    try:
        for i in range(4):
            c.set(i, bytearray(MiB))
        before = (list(c), c.bytes, dict(c.stats), sorted(a.entries()))
        bad = [dict(size=-1), dict(size=2 ** 70), dict(size="10"), dict(size=1.5),
               dict(size=True), dict(cost=-1), dict(cost="1"), dict(cost=float("nan")),
               dict(cost=float("inf")), dict(size=9 * MiB)]
        for kw in bad:
            try:
                c.set("k", bytearray(10), **kw)
            except (TypeError, ValueError):
                pass
            else:
                raise AssertionError(f"set(..., {kw}) was taken")
            now = (list(c), c.bytes, dict(c.stats), sorted(a.entries()))
            assert now == before, (kw, now, before)
        try:
            c.set(["unhashable"], 1)
        except TypeError:
            pass
        else:
            raise AssertionError("an unhashable key was taken")
        c.set("k", bytearray(10))
        assert len(c) == 5 and not c.stats["evicted_lru"], c.stats
    finally:
        a.close()
        ex.close()


@test
def max_bytes_takes_sizes_and_refuses_the_rest():
    ex = ramcache.Executor()
    try:
        for v, want in ((4096, 4096), ("1G", 1 << 30), ("512M", 512 * MiB),
                        ("1.5GiB", 3 << 29), ("64 KiB", 64 << 10), (2.0 ** 20, MiB)):
            got = ramcache.PressureCache("t", max_bytes=v, executor=ex).max_bytes
            assert got == want, (v, got, want)
        for v in ("lots", "-1", -1, "1Q", True, [1], float("nan"), 2 ** 64):
            try:
                ramcache.PressureCache("t", max_bytes=v, executor=ex)
            except (TypeError, ValueError) as e:
                assert "max_bytes" in str(e), e
            else:
                raise AssertionError(f"max_bytes={v!r} was taken")
    finally:
        ex.close()


@test
def a_value_larger_than_the_bound_raises_and_the_others_stay():
    """It was silently dropped and every other entry evicted. Now
    ValueError, as cachetools; memoize returns such a result uncached."""
    c, ex = fresh(max_bytes=10 * MiB)
    try:
        for i in range(5):
            c.set(i, bytearray(MiB))
        try:
            c.set("big", b"x", size=11 * MiB)
        except ValueError as e:
            assert "larger than" in str(e), e
        else:
            raise AssertionError("an 11 MiB value taken by a 10 MiB cache")
        assert sorted(c) == [0, 1, 2, 3, 4] and c.bytes == 5 * MiB, (sorted(c), c.bytes)
        assert not c.stats["evicted_lru"]

        @ramcache.memoize(cache=c, size=lambda v: 11 * MiB if v == "big" else 1)
        def make(x):
            return x
        assert make("big") == "big" and make("small") == "small"
        assert "small" in [k[0] for k in c if isinstance(k, tuple)] and len(c) == 6
    finally:
        ex.close()


@test
def the_caches_of_a_process_share_one_budget():
    """Each cache took half of the memory available: three were allowed
    11.34 GiB each of 22.68 GiB. Now they share ramcache.budget: each may
    use all of it, together no more, least recently used first."""
    old = ramcache.budget.max_bytes
    ex = ramcache.Executor()
    ramcache.budget.max_bytes = "12M"
    try:
        cs = [ramcache.PressureCache(f"c{i}", executor=ex) for i in range(3)]
        assert all(c.maxsize == 12 * MiB for c in cs)
        for i in range(10):
            for c in cs:
                c.set(i, bytearray(MiB))
        total = sum(c.bytes for c in cs)
        assert total <= 12 * MiB and ramcache.budget.bytes <= 12 * MiB, total
        assert all(sorted(c) == [6, 7, 8, 9] for c in cs), [sorted(c) for c in cs]
        own = ramcache.PressureCache("own", max_bytes="2M", executor=ex)
        for i in range(4):
            own.set(i, bytearray(MiB))
        assert sorted(own) == [2, 3] and own.maxsize == 2 * MiB
        assert ramcache.budget.bytes <= 12 * MiB
    finally:
        ramcache.budget.max_bytes = old
        ex.close()


@test
def sizeof_follows_what_a_value_holds():
    """It looked one level down: 56 bytes for an object holding a 64 MiB
    bytearray. Containers, objects, numpy-like arrays (a view by its
    base) and torch-like tensors (by storage, once), within caps."""
    class Holder:
        def __init__(self):
            self.buf = bytearray(8 * MiB)

    class Slotted:
        __slots__ = ("buf",)

        def __init__(self):
            self.buf = bytearray(MiB)

    class Array:  # what numpy shows: nbytes, base (None: owns its data)
        def __init__(self, nbytes, base=None):
            self.nbytes, self.base = nbytes, base

    class Storage:
        def __init__(self, n):
            self.n = n

        def nbytes(self):
            return self.n

        def data_ptr(self):
            return id(self)

    class Tensor:
        def __init__(self, storage):
            self.s = storage

        def untyped_storage(self):
            return self.s

    assert ramcache.sizeof(Holder()) >= 8 * MiB
    assert ramcache.sizeof(Slotted()) >= MiB
    arrays = [[Array(MiB), Array(2 * MiB)], [Array(3 * MiB)]]
    assert 6 * MiB <= ramcache.sizeof(arrays) < 6 * MiB + 4096
    base = Array(16 * MiB)
    views = [Array(MiB, base), Array(MiB, base)]
    assert 16 * MiB <= ramcache.sizeof(views) < 17 * MiB  # the base, once
    st = Storage(32 * MiB)
    assert 32 * MiB <= ramcache.sizeof({"a": Tensor(st), "b": Tensor(st)}) < 33 * MiB
    loop = []
    loop.append(loop)
    assert ramcache.sizeof(loop) < 1000
    many = [bytes(100) for _ in range(100_000)]
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        n = ramcache.sizeof(many)
        took = time.perf_counter() - t0
        ramcache.sizeof(many)
    true = sys.getsizeof(many) + 100 * len(many)
    assert 0.8 * true < n < 1.25 * true and took < 0.1, (n, true, took)
    assert len(told) == 1 and "estimate" in str(told[0].message), told  # once
    c, ex = fresh(max_bytes=1 << 40)
    try:  # a size callable of its own, as cachetools' getsizeof
        c2 = ramcache.PressureCache("len", executor=ex, size=len)
        c2.set("k", [1, 2, 3])
        assert c2.bytes == 3 and c2.getsizeof("abcd") == 4
    finally:
        ex.close()


@test
def small_entries_share_one_page_entry():
    """One page of 4,096 entries for the whole process: 5,000 small entries
    took every slot, the large ones came after, unseen, and the agent spent
    64 of 98 evictions on 100-byte entries. Now a cache's entries under
    1 MiB are one page entry, its bucket, which a command evicts least
    recently used first, up to the bytes it showed (64 MiB at most)."""
    c, ex = fresh(max_bytes=1 << 40)
    a = AgentSide(ex.page)
    try:
        for i in range(5000):
            c.set(("s", i), bytes(100))
        for i in range(3):
            c.set(("big", i), bytearray(4 * MiB))
        time.sleep(0.3)  # the serving thread redoes the bucket's entry
        ents = a.entries()
        assert len(ents) == 4, len(ents)
        bucket = [e for e in ents.values() if e["label"] == "t:<5000 entries>"]
        assert bucket and bucket[0]["bytes"] == 500_000, ents
        eid = next(k for k, e in ents.items() if e["label"] == "t:<5000 entries>")
        assert a.ack_for(a.post(eid)) == (P.ACK_EVICTED, 500_000)
        assert len(c) == 3 and c.bytes == 12 * MiB, (len(c), c.bytes)
        for i in range(100):  # 90 MB of them: a command frees the oldest 64 MiB
            c.set(i, b"x", size=900_000)
        c.get(0)
        time.sleep(0.3)
        ents = a.entries()
        eid = next(k for k, e in ents.items() if e["label"] == "t:<100 entries>")
        assert ents[eid]["bytes"] == 64 * MiB, ents[eid]
        status, freed = a.ack_for(a.post(eid))
        assert status == P.ACK_EVICTED and 64 * MiB <= freed < 64 * MiB + 900_000
        left = sorted(k for k in c if isinstance(k, int))
        assert left[0] == 0 and 1 not in left and 99 in left, left  # 0: used again
    finally:
        a.close()
        ex.close()


@test
def memoize_has_functools_cache_info_and_cache_clear():
    @ramcache.memoize(max_bytes="1M")
    def square(x):
        return x * x

    assert square(2) == 4 and square(2) == 4 and square(3) == 9
    info = square.cache_info()
    assert (info.hits, info.misses, info.maxsize) == (1, 2, MiB), info
    assert info.currsize == square.cache.bytes > 0, info
    square.cache_clear()
    assert square.cache_info().currsize == 0 and len(square.cache) == 0


@test
def a_cache_shows_itself_pickles_and_copies():
    """No __repr__; pickle failed (cannot pickle '_thread.RLock');
    copy.copy shared the cache's state; items() counted as hits."""
    c, ex = fresh(max_bytes="4M")
    try:
        c.set("a", bytearray(10), cost=0.5)
        c.set("b", [1, 2])
        assert repr(c).startswith("<PressureCache 't': 2 entries, "), repr(c)
        hits = c.stats["hits"]
        assert c.items() == [("a", bytearray(10)), ("b", [1, 2])] and len(c.values()) == 2
        assert c.keys() == ["a", "b"] and c.stats["hits"] == hits  # looking is no use
        d = pickle.loads(pickle.dumps(c))
        assert isinstance(d, ramcache.PressureCache) and d is not c
        assert d.items() == c.items() and d.name == "t" and d.max_bytes == 4 * MiB
        k = copy.copy(c)
        k.set("c", 1)
        assert "c" not in c and k["a"] is c["a"] and len(c) == 2
        deep = copy.deepcopy(c)
        assert deep["a"] == c["a"] and deep["a"] is not c["a"]
    finally:
        ex.close()


@test
def it_takes_the_place_of_a_cachetools_cache():
    """cachetools.LRUCache with getsizeof and a PressureCache with the same
    size callable, without an agent, fed the same calls: the same entries
    after each, the same ValueError for a value too large; and
    cachetools' own decorators take it."""
    try:
        import cachetools
    except ImportError:
        raise Skip("python3-cachetools is not installed")
    ex = ramcache.Executor()
    try:
        size = lambda v: v[1]  # noqa: E731  (values stand for their size)
        ref = cachetools.LRUCache(maxsize=10 * MiB, getsizeof=size)
        c = ramcache.PressureCache("t", max_bytes=10 * MiB, executor=ex, size=size)
        rnd = random.Random(1)
        for i in range(3000):
            k = rnd.randrange(60)
            if rnd.random() < 0.5:
                v = ("v", (k % 12 + 1) * 2 * MiB // 5 if k != 7 else 11 * MiB)
                outcomes = []
                for cache in (ref, c):
                    try:
                        cache[k] = v
                        outcomes.append("stored")
                    except ValueError:
                        outcomes.append("too large")
                assert outcomes[0] == outcomes[1], (i, k, outcomes)
            else:
                assert ref.get(k) == c.get(k), (i, k)
            assert set(ref) == set(c) and ref.currsize == c.currsize, (i, sorted(ref), sorted(c))
        calls = []

        @cachetools.cached(cache=ramcache.PressureCache("f", executor=ex))
        def f(x):
            calls.append(x)
            return x + 1
        assert f(1) == 2 and f(1) == 2 and calls == [1]
    finally:
        ex.close()


NO_PAGE = """
import os, sys, warnings
if sys.argv[1] == "fcntl":
    sys.modules["fcntl"] = None  # as on Windows: import fcntl fails
else:
    del os.memfd_create  # as on a platform without it
with warnings.catch_warnings(record=True) as told:
    warnings.simplefilter("always")
    import ramcache
    c = ramcache.PressureCache("t", max_bytes="3M")
    d = ramcache.PressureCache("u")
for i in range(6):
    c.set(i, bytearray(1 << 20))
assert len(c) == 3 and c.stats["evicted_lru"] == 3, c.stats
assert sys.argv[1] in c.reason and c.agent_state == "none" and not c.agent_alive, c.reason
assert len(told) == 1 and sys.argv[1] in str(told[0].message), [str(w.message) for w in told]
try:
    c.set("x", 1, size=-1)
except ValueError:
    pass
else:
    raise SystemExit("a negative size was taken")
print("ok", c.reason)
"""


@test
def without_fcntl_or_memfd_each_cache_is_an_lru_and_says_why_once():
    """No fcntl (Windows): import ramcache failed. No memfd: the fallback
    was silent (the reason only in cache.reason). Now both import, run
    on their own bounds, and warn once."""
    env = dict(os.environ)
    env.pop("RAMCACHE_CONTROL", None)
    for missing in ("fcntl", "memfd"):
        p = subprocess.run([sys.executable, "-c", NO_PAGE, missing], capture_output=True,
                           text=True, env=py_env(PYTHON_DIR, base=env), timeout=60)
        assert p.returncode == 0 and p.stdout.startswith("ok"), (missing, p.stdout, p.stderr)
        print(f"# without {missing}: {p.stdout.strip()[3:]}")


@test
def headroom_gives_what_the_shared_cases_say():
    """The package's headroom rule (what its guard and the ComfyUI
    package's count as room) is the agent's: every case of
    tests/fixtures/headroom.txt, which policy_headroom's test reads too."""
    n = 0
    with open(os.path.join(ROOT, "tests", "fixtures", "headroom.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            mem, limit, usage, inactive, mapped, want = line.split()
            got = ramcache.headroom(int(mem), None if limit == "max" else int(limit),
                                    int(usage), ramcache.reclaimable(int(inactive), int(mapped)))
            assert got == int(want), (line, got)
            n += 1
    assert n >= 15, n


main()
