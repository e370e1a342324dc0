#!/usr/bin/env python3
"""Protocol anomalies from an executor written from the page layout alone
(pyexec.py): every one is an {"type":"anomaly"} event and a count in
ramcache_protocol_anomalies_total{kind=...}, and the agent carries on:
invalid acks (a seq never posted, the wrong entry), duplicate acks,
cmd_done ahead of cmd_head. Not anomalies, told as control events: a hung
executor (stale heartbeat: posting stops, and resumes when it beats
again), and a page re-created under the agent (the old page dropped as
replaced, its commands closed, the new page's acks matched)."""
import contextlib
import os
import shutil
import tempfile
import time

import promtext
from pyexec import EVICTED, Page
from rctest import Agent, main, require_root, test, free_port


@contextlib.contextmanager
def setup(entries=16, ring=8, beat=True, **agent_kw):
    """A page at a scratch path, and an agent that wants everything."""
    require_root()
    d = tempfile.mkdtemp(prefix="ramcache-test-proto-", dir="/dev/shm")
    port = free_port()
    page = Page(os.path.join(d, "page"), entries=entries, ring=ring)
    page.publish(entries)
    a = Agent("--pid", os.getpid(), "--control", page.path, "--headroom",
              "100T", "--interval", "10s", "--ack-timeout", "2s",
              "--metrics", f"127.0.0.1:{port}")
    a.port = port
    try:
        assert a.wait_type("start"), a.stderr
        yield page, a
    finally:
        a.stop()
        page.close()
        shutil.rmtree(d, ignore_errors=True)


def pump(page, a, until, timeout=6.0, on_cmd=None):
    """Beat and serve commands (on_cmd(seq, id), default: ack EVICTED)
    until until() is true; False on timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        page.beat()
        for seq, eid in page.take():
            if on_cmd:
                on_cmd(seq, eid)
            else:
                page.ack(seq, eid, EVICTED)
        if until():
            return True
        a.wait_for(lambda e: False, timeout=0.02)
    return False


def anomalies(a, kind):
    return [e for e in a.of_type("anomaly") if e.get("kind") == kind]


def metric(a, kind):
    m = promtext.scrape(f"127.0.0.1:{a.port}")
    return m.get(f'ramcache_protocol_anomalies_total{{kind="{kind}"}}', -1)


def done_of(a, seq):
    return [e for e in a.of_type("evict_done") if e.get("seq") == seq]


@test
def ack_for_a_seq_never_posted_is_an_invalid_ack():
    with setup() as (page, a):
        got = []
        assert pump(page, a, lambda: got, on_cmd=lambda s, i: got.append(
            (s, i))), "no command posted"
        seq, eid = got[0]
        page.ack(seq + 1000, eid)  # never posted
        assert pump(page, a, lambda: anomalies(a, "invalid_ack")), \
            a.events[-5:]
        ev = anomalies(a, "invalid_ack")[0]
        print(f"# {ev}")
        # the agent still takes right acks afterwards
        page.ack(seq, eid)
        assert pump(page, a, lambda: [e for e in done_of(a, seq)
                                      if e["status"] == "evicted"])
        assert metric(a, "invalid_ack") >= 1


@test
def acks_of_an_earlier_agents_commands_are_no_anomaly():
    """The agent restarts while the executor holds its commands (their
    entries in use): the executor acks them to the next agent, which takes
    them as done, says so once, and matches its own acks as before (each
    was an invalid_ack)."""
    with setup() as (page, a):
        held = []
        assert pump(page, a, lambda: held, on_cmd=lambda s, i: held.append(
            (s, i))), "no command posted"
        a.stop()
        b = Agent(*a.argv[a.argv.index("--json") + 1:-1],
                  f"127.0.0.1:{a.port}")
        b.port = a.port
        try:
            assert b.wait_for(lambda e: e.get("type") == "control"
                              and e.get("state") == "attached", 10), \
                b.events
            for seq, eid in held[:2]:  # fewer than the ack ring holds
                page.ack(seq, eid, EVICTED)
            end = time.monotonic() + 10
            while time.monotonic() < end and not [
                    ln for ln in b.stderr if "earlier agent" in ln]:
                page.beat()
                time.sleep(0.05)
            mine = []
            assert pump(page, b, lambda: [e for e in b.of_type("evict_done")
                                          if e["status"] == "evicted"],
                        on_cmd=lambda s, i: (mine.append(s),
                                             page.ack(s, i, EVICTED))), \
                b.events[-5:]
            assert min(mine) > max(s for s, _ in held), (mine, held)
            assert not anomalies(b, "invalid_ack"), \
                anomalies(b, "invalid_ack")
            assert metric(b, "invalid_ack") == 0
            said = [ln for ln in b.stderr if "earlier agent" in ln]
            assert len(said) == 1, (b.stderr, b.of_type("anomaly"))
        finally:
            b.stop()


@test
def ack_naming_another_entry_is_an_invalid_ack():
    with setup() as (page, a):
        got = []
        assert pump(page, a, lambda: got, on_cmd=lambda s, i: got.append(
            (s, i)))
        seq, eid = got[0]
        page.ack(seq, eid + 777)
        assert pump(page, a, lambda: anomalies(a, "invalid_ack")), \
            a.events[-5:]
        assert anomalies(a, "invalid_ack")[0].get("seq") == seq
        assert metric(a, "invalid_ack") >= 1


@test
def second_ack_of_a_command_is_a_duplicate_ack():
    with setup() as (page, a):
        got = []
        assert pump(page, a, lambda: got, on_cmd=lambda s, i: got.append(
            (s, i)))
        seq, eid = got[0]
        page.ack(seq, eid)
        assert pump(page, a, lambda: done_of(a, seq), timeout=4)
        page.ack(seq, eid)
        assert pump(page, a, lambda: anomalies(a, "duplicate_ack")), \
            a.events[-5:]
        assert anomalies(a, "duplicate_ack")[0].get("seq") == seq
        assert len(done_of(a, seq)) == 1, done_of(a, seq)
        assert metric(a, "duplicate_ack") >= 1


@test
def cmd_done_ahead_of_cmd_head_is_reported_and_posting_goes_on():
    with setup() as (page, a):
        assert pump(page, a, lambda: page.cmd_head() >= 1)
        head = page.cmd_head()
        page.take()
        page.set_done(head + 5)  # consumed commands never posted
        assert pump(page, a, lambda: anomalies(a, "cmd_done_ahead"),
                    on_cmd=lambda s, i: None), a.events[-5:]
        # the agent resynchronises above the executor's claim and posts on
        assert pump(page, a, lambda: page.cmd_head() > head + 5,
                    timeout=8), (page.cmd_head(), head)
        assert metric(a, "cmd_done_ahead") >= 1


@test
def hung_executor_gets_no_commands_until_it_beats_again():
    with setup() as (page, a):
        assert pump(page, a, lambda: page.cmd_head() >= 1,
                    on_cmd=lambda s, i: None)
        # hang: no beats, no acks. A state of the page, not an anomaly
        assert a.wait_for(lambda e: e.get("type") == "control" and
                          e.get("state") == "stalled", timeout=5), \
            a.events[-5:]
        head = page.cmd_head()
        time.sleep(2.5)  # several evaluations wanting memory
        assert page.cmd_head() == head, "posted to a hung executor"
        assert pump(page, a, lambda: [e for e in a.of_type("control")
                                      if e["state"] == "resumed"],
                    on_cmd=lambda s, i: None), a.events[-5:]
        assert pump(page, a, lambda: page.cmd_head() > head), \
            "posting did not resume"
        assert not a.of_type("anomaly"), a.of_type("anomaly")


@test
def recreated_page_is_dropped_as_replaced_and_new_acks_match():
    with setup() as (page, a):
        assert pump(page, a, lambda: page.cmd_head() >= 2,
                    on_cmd=lambda s, i: None)
        old = [e["seq"] for e in a.of_type("evict")]
        # the executor restarts its page (same process, same path)
        page2 = Page(page.path, entries=16, ring=8)
        page2.publish(16)
        try:
            got = []
            assert pump(page2, a, lambda: got,
                        on_cmd=lambda s, i: got.append((s, i))), \
                a.events[-8:]
            seq, eid = got[0]
            page2.ack(seq, eid)
            assert pump(page2, a, lambda: [
                e for e in a.of_type("evict_done")
                if e["seq"] == seq and e["status"] == "evicted"],
                timeout=4), a.of_type("evict_done")
            # an end of the old page, told as such: not an anomaly
            drops = [e for e in a.of_type("control") if e["state"] == "dropped"]
            assert drops and drops[0]["reason"] == "replaced", a.events[-8:]
            assert drops[0]["inflight"] >= len(old), (drops, old)
            closed = [e for e in a.of_type("evict_done")
                      if e["status"] == "page_dropped"]
            assert {e["seq"] for e in closed} >= set(old), (closed, old)
            assert not [e for e in a.of_type("evict_done")
                        if e["status"] == "timeout"], "reported as timeouts"
            assert not a.of_type("anomaly"), a.of_type("anomaly")
        finally:
            page2.close()


main()
