#!/usr/bin/env python3
"""PressureCache from many threads at once, without the agent (its side
written into the page by agentside.AgentSide): a command held for an entry
in use is obeyed however the end of the hold falls against the serving
thread (issue 38 item 3), and eight threads of mixed calls, with commands
coming, keep the books right (issue 35: pop(k, None) raised KeyError,
items() and values() too, under the MutableMapping defaults)."""
import os
import random
import threading
import time

from rctest import ROOT, import_package, main, test

import_package(os.path.join(ROOT, "python", "ramcache"))
import ramcache  # noqa: E402
from ramcache import page as P  # noqa: E402
from agentside import AgentSide  # noqa: E402

MiB = 1 << 20
THREADS = 8
OPS = 1_000_000  # in all, or as many as STRESS_S allows
STRESS_S = 30.0


def fresh(max_bytes):
    ex = ramcache.Executor()
    return ramcache.PressureCache("t", max_bytes=max_bytes, executor=ex), ex


def page_id(a, key):
    """The page id of the entry published for @key (label t:KEY)."""
    want = f"t:{key!r}"
    return next(eid for eid, e in a.entries().items() if e["label"] == want)


@test
def a_release_while_the_hold_answer_is_on_its_way_is_not_lost():
    """The owner answers HOLD, and before the serving thread has held the
    command the hold ends (its release finds nothing to obey): 20 ms
    injected there, 20 commands, each must be acked, evicted."""
    c, ex = fresh(1 << 40)
    a = AgentSide(ex.page)
    real = c.evict_entry
    ending = [None]

    def answer_then_dawdle(eid):
        res = real(eid)
        if res is ramcache.HOLD:
            ending[0].set()  # the block ends now ...
            time.sleep(0.02)  # ... while the answer is on its way
        return res

    c.evict_entry = answer_then_dawdle
    lost = []
    try:
        for i in range(20):
            c.set(i, bytearray(MiB))
            eid = page_id(a, i)
            inside, ending[0] = threading.Event(), threading.Event()

            def holder(key=i, end=ending[0]):
                with c.hold(key):
                    inside.set()
                    end.wait(2)

            t = threading.Thread(target=holder)
            t.start()
            inside.wait(2)
            seq = a.post(eid)
            t.join()
            ack = a.ack_for(seq, timeout=1.0)
            if ack != (P.ACK_EVICTED, MiB):
                lost.append((i, ack))
        assert not lost, f"{len(lost)} of 20 commands never obeyed: {lost[:5]}"
        assert len(c) == 0, sorted(c)
    finally:
        a.close()
        ex.close()


def one_call(c, rnd, k):
    """One call of the mix; KeyError only where the mapping promises it."""
    op = rnd.random()
    if op < 0.30:
        c.set(k, b"v", size=rnd.choice((100, 4096, 2 * MiB)), cost=0.001)
    elif op < 0.55:
        c.get(k)
    elif op < 0.65:
        c.pop(k, None)
    elif op < 0.70:
        with c.hold(k):
            pass
    elif op < 0.75:
        c.setdefault(k, b"d")
    elif op < 0.79:
        c.items()
    elif op < 0.83:
        c.values()
    elif op < 0.86:
        list(c)
    elif op < 0.88:
        c.update({k: b"u", k + 1: b"w"})
    elif op < 0.92:
        return (k in c) + len(c)
    else:
        try:
            if op < 0.95:
                del c[k]
            elif op < 0.97:
                c.popitem()
            else:
                c[k]
        except KeyError:
            pass
    return 0


def books(c, a=None):
    """What must hold between calls: bytes == the entries' sizes, the
    process's budget == its caches' bytes, each entry of 1 MiB or more on
    the page alone (or in the bucket when it had no room), nothing else
    (@a: the page, read once the calls are over)."""
    with c._lock:
        sizes = sum(e.size for e in c._d.values())
        assert c.bytes == sizes, (c.bytes, sizes)
        assert ramcache.budget.bytes == sum(x.bytes for x in ramcache.budget.caches())
        alone = {e.eid for e in c._d.values() if e.eid}
        assert set(c._keys) == alone, "page ids and entries differ"
        bucket = [e for e in c._d.values() if not e.eid]
        assert c._bucket_bytes == sum(e.size for e in bucket)
        if a is None:
            return
        on_page = set(a.entries()) - {c._bucket_eid}
        assert on_page == alone, (len(on_page), len(alone))


@test
def eight_threads_of_mixed_calls_keep_the_books():
    c, ex = fresh(64 * MiB)
    a = AgentSide(ex.page)
    errors, done = [], []
    end = time.monotonic() + STRESS_S
    stop = threading.Event()

    def worker(seed):
        rnd = random.Random(seed)
        n = 0
        while n < OPS // THREADS and time.monotonic() < end:
            try:
                one_call(c, rnd, rnd.randrange(2000))
            except Exception as e:
                errors.append(f"{type(e).__name__}: {e}")
            n += 1
        done.append(n)

    def agent():  # commands for what the page shows, and the books looked at
        rnd = random.Random(99)
        while not stop.is_set():
            ids = list(a.entries())
            if ids:
                a.post(rnd.choice(ids))
            time.sleep(0.002)
            if rnd.random() < 0.05:
                try:
                    books(c)
                except AssertionError as e:
                    errors.append(f"books: {e}")

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    ag = threading.Thread(target=agent)
    try:
        t0 = time.monotonic()
        for t in ts + [ag]:
            t.start()
        for t in ts:
            t.join()
        stop.set()
        ag.join()
        took = time.monotonic() - t0
        assert not errors, f"{len(errors)} errors, e.g. {sorted(set(errors))[:5]}"
        time.sleep(0.3)  # the last commands served
        books(c, a)
        print(f"# {sum(done)} calls by {THREADS} threads in {took:.1f} s, "
              f"{ex.counts['commands']} commands served, stats {dict(c.stats)}")
    finally:
        stop.set()
        a.close()
        ex.close()


main()
