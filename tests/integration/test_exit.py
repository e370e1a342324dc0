#!/usr/bin/env python3
"""However the agent ends, nothing is lost: a closed stdout (`--json | head`)
is a clean detach with exit 6 (heartbeat cleared, commands in flight
reported), --quiet runs on without stdout, --hist histograms are complete
when the target exits, and summaries tell the target cgroup's OOM kills
from the system's."""
import contextlib
import json
import os
import signal
import struct
import subprocess
import time

import promtext
from rctest import (free_port, AGENT, HELPERS, MiB, Agent, Memcg, go, main, memhog,
                    ready, require_root, test)

EXECUTOR = os.path.join(HELPERS, "executor")
AGENT_HEARTBEAT_OFF = 192


@contextlib.contextmanager
def executor(*args):
    p = subprocess.Popen([EXECUTOR, *map(str, args)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    try:
        ev = json.loads(p.stdout.readline())
        assert ev["type"] == "ready", ev
        p.ready = ev
        yield p
    finally:
        p.kill()
        p.wait()


def agent_heartbeat(path):
    with open(path, "rb") as f:
        f.seek(AGENT_HEARTBEAT_OFF)
        return struct.unpack("<Q", f.read(8))[0]


@test
def closed_stdout_detaches_cleanly_with_exit_6():
    """--json | head -c 100: no SIGPIPE death (141), heartbeat cleared."""
    require_root()
    with executor("--entries", 32) as ex:
        r, w = os.pipe()
        a = subprocess.Popen([AGENT, "--json", "--pid", str(ex.ready["pid"]),
                              "--headroom", "100T", "--interval", "0.2s"],
                             stdout=w, stderr=subprocess.PIPE, text=True)
        os.close(w)
        try:
            got = b""
            while len(got) < 100:
                got += os.read(r, 100 - len(got))
            # wait until the agent beats on the page, then go away
            end = time.monotonic() + 5
            while time.monotonic() < end and not agent_heartbeat(
                    ex.ready["path"]):
                time.sleep(0.05)
            assert agent_heartbeat(ex.ready["path"]), "agent never beat"
        finally:
            os.close(r)
        try:
            rc = a.wait(timeout=15)
        finally:
            if a.poll() is None:
                a.kill()
                a.wait()
        err = a.stderr.read()
        print(f"# exit {rc}; {err.strip().splitlines()[-1:]}")
        assert rc == 6, (rc, err)
        assert "stdout closed" in err, err
        assert agent_heartbeat(ex.ready["path"]) == 0, "heartbeat left set"


@test
def quiet_agent_runs_on_without_stdout():
    require_root()
    port = free_port()
    with executor("--entries", 32) as ex:
        r, w = os.pipe()
        os.close(r)  # nobody will ever read
        a = subprocess.Popen([AGENT, "--quiet", "--pid", str(ex.ready["pid"]),
                              "--headroom", "100T", "--interval", "0.2s",
                              "--metrics", f"127.0.0.1:{port}"],
                             stdout=w, stderr=subprocess.PIPE, text=True)
        os.close(w)
        try:
            time.sleep(2)
            assert a.poll() is None, (a.returncode, a.stderr.read())
            m = promtext.scrape(f"127.0.0.1:{port}")
            evicted = m.get('ramcache_commands_total{status="evicted"}', 0)
            assert evicted > 0, "no eviction while quiet"
            a.send_signal(signal.SIGTERM)
            rc = a.wait(timeout=10)
        finally:
            if a.poll() is None:
                a.kill()
                a.wait()
        assert rc == 0, (rc, a.stderr.read())


@test
def hist_is_complete_when_the_target_exits():
    require_root()
    with executor("--entries", 32) as ex:
        with Agent("--pid", str(ex.ready["pid"]), "--headroom", "100T",
                   "--hist", "--interval", "10s") as a:
            assert a.wait_for(lambda e: len(
                [d for d in a.of_type("evict_done")
                 if d.get("status") == "evicted"]) >= 10 or
                e.get("type") == "exit", timeout=15)
            ex.kill()
            ex.wait()
            rc = a.wait(timeout=15)
    assert rc == 0, a.stderr
    assert a.of_type("exit")[-1]["reason"] == "target exited"
    acked = [d for d in a.of_type("evict_done") if "ack_latency_ns" in d]
    hists = {h["name"]: h for h in a.of_type("hist")}
    print(f"# {len(acked)} acked; evict_ack count "
          f"{hists.get('evict_ack', {}).get('count')}")
    assert len(acked) >= 10, len(acked)
    assert hists["evict_ack"]["count"] == len(acked), hists["evict_ack"]


@test
def summary_tells_cgroup_and_system_oom_kills_apart():
    """One OOM kill in another cgroup, then one in the target's."""
    require_root()
    with Memcg(64 * MiB) as cg, Memcg(64 * MiB, name=f"ramcache-test-{os.getpid()}-other") as other:
        with memhog("--grow", "512M", preexec=cg.preexec()) as p:
            pid = ready(p)
            with Agent("--pid", pid, "--interval", "0.5s") as a:
                assert a.wait_type("start"), a.stderr
                with memhog("--grow", "512M",
                            preexec=other.preexec()) as q:
                    ready(q)
                    go(q)
                    assert q.wait(timeout=30) == -9
                go(p)
                rc = a.wait(timeout=30)
            assert rc == 0, a.stderr
            s = a.of_type("summary")[-1]
            print(f"# last summary: oom_kills_cgroup "
                  f"{s.get('oom_kills_cgroup')}, oom_kills_system "
                  f"{s.get('oom_kills_system')}")
            assert s["oom_kills_cgroup"] == 1, s
            assert s["oom_kills_system"] >= 2, s
            assert cg.oom_kills() == 1


main()
