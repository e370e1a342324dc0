#!/usr/bin/env python3
"""The programs on page faults (page_fault_user, rss_stat) are attached
only while a followed domain nears the point where commands go out
(--fault-probes auto, the default; README "What the agent costs").

- Far from its limit, the agent runs without them (no link of its own on
  either tracepoint: asked of the kernel), still tells RSS (read from
  /proc) and counts faults as the kernel does.
- An executor growing toward its cgroup's limit brings them on while there
  is still room above the reserve, and fault bursts come from then on; the
  limit raised far away, they go off again after the calm period. Each
  switch is a `fault_probes` event and shows in the metrics.
"""
import json
import os
import subprocess
import time

import promtext  # noqa: E402
from rctest import (free_port, HELPERS, MiB, Agent, Memcg, go, main,  # noqa: E402
                    memhog, ready, require_root, test)

MEMHOG = os.path.join(HELPERS, "memhog")
PER_FAULT = {"page_fault_user", "rss_stat"}


def attached_tracepoints(pid):
    """Tracepoints the BPF links held by process @pid are attached to."""
    ids = set()
    fd_dir = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fd_dir):
        try:
            with open(os.path.join(fd_dir, fd)) as f:
                for line in f:
                    if line.startswith("link_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    out = subprocess.run(["bpftool", "link", "show", "-j"],
                         capture_output=True, text=True, check=True).stdout
    return {ln.get("tp_name") for ln in json.loads(out)
            if ln["id"] in ids and ln.get("tp_name")}


def switches(agent):
    return [e for e in agent.events if e.get("type") == "fault_probes"]


@test
def off_while_far_faults_and_rss_from_proc():
    """A process far from any limit: the per-fault programs are detached
    after the first read (the kernel holds no link of the agent's on
    them, the reclaim and OOM ones stay), the summary's fault count is the
    kernel's own, and no fault_burst comes."""
    require_root()
    pages = 20000
    with memhog("--touch", pages, "--hold", "1") as p:
        pid = ready(p)
        with Agent("--pid", pid, "--interval", "0.5s") as a:
            start = a.wait_type("start", timeout=30)
            assert start and start["fault_probes"] == "auto", start
            first = a.wait_type("fault_probes", timeout=10)
            assert first and first["state"] == "off", first
            assert first["why"] == "far" and first["far"] > first["margin"]
            tps = attached_tracepoints(a.proc.pid)
            assert not tps & PER_FAULT, tps
            assert {"mark_victim", "mm_vmscan_memcg_reclaim_end"} <= tps, tps
            go(p)
            delta = json.loads(p.stdout.readline())
            time.sleep(1.2)  # a summary after the faults
            faults = a.of_type("summary")[-1]["faults"]
            p.wait(timeout=10)
            assert a.wait(timeout=10) == 0, a.stderr
            assert abs(faults - delta["delta"]) <= 0.1 * delta["delta"], (
                faults, delta)
            assert not a.of_type("fault_burst"), a.of_type("fault_burst")
            assert [e["state"] for e in switches(a)] == ["off"], switches(a)
            print(f"# off from the start ({first['far'] // MiB} MiB far); "
                  f"{faults} faults counted from /proc, {delta['delta']} "
                  f"by the process")


@test
def on_as_the_domain_nears_off_once_calm_again():
    """memhog grows toward its 1 GiB cgroup's limit: the programs come on
    while the domain is still above its reserve (far > 0), and fault
    bursts follow; once it has exited (--match: the agent watches the
    machine again, far from its limit) they go off after the calm period.
    The metrics count both switches."""
    require_root()
    port = free_port()
    with Memcg(1024 * MiB) as cg:
        tag = f"ramcache-faultprobes-{os.getpid()}"
        p = subprocess.Popen([MEMHOG, "--wait", "--grow", "800M", "--rate",
                              "200", "--hold", "30", "--tag", tag],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, preexec_fn=cg.preexec())
        a = None
        try:
            pid = ready(p)
            a = Agent("--match", tag, "--interval", "0.5s", "--no-evict",
                      "--metrics", f"127.0.0.1:{port}")
            assert a.wait_for(lambda e: e.get("type") == "target" and
                              e.get("pid") == pid, timeout=30), a.stderr
            first = a.wait_for(lambda e: e.get("type") == "fault_probes" and
                               e["state"] == "off", timeout=30)
            assert first, (switches(a), a.stderr)
            go(p)
            on = a.wait_for(lambda e: e.get("type") == "fault_probes" and
                            e["state"] == "on", timeout=60)
            assert on and on["why"] in ("near", "busy"), switches(a)
            assert 0 < on["far"] <= on["margin"], on
            assert json.loads(p.stdout.readline())["type"] == "grown"
            before = [e for e in a.events if e["ts_ns"] < on["ts_ns"]]
            assert not [e for e in before if e["type"] == "fault_burst"]
            assert [e for e in before if e["type"] == "rss"
                    and e["pid"] == pid], "no RSS read while off"
            assert [e for e in a.events if e["type"] == "fault_burst"
                    and e["ts_ns"] > on["ts_ns"]], "no burst once on"
            assert PER_FAULT <= attached_tracepoints(a.proc.pid)
            p.kill()
            p.wait()
            off = a.wait_for(lambda e: e.get("type") == "fault_probes" and
                             e["state"] == "off" and
                             e["ts_ns"] > on["ts_ns"], timeout=30)
            assert off and off["why"] == "calm", switches(a)
            assert off["ts_ns"] - on["ts_ns"] >= 10e9, (on, off)
            m = promtext.parse(promtext.fetch(f"127.0.0.1:{port}"))
            assert m["ramcache_fault_probes"] == 0, m
            assert m['ramcache_fault_probe_switches_total{state="on"}'] >= 2
            assert m['ramcache_fault_probe_switches_total{state="off"}'] >= 2
            assert m["ramcache_fault_probe_attach_seconds"] > 0, m
            print(f"# on at {on['far'] // MiB} MiB from the reserve "
                  f"(margin {on['margin'] // MiB} MiB), attach "
                  f"{on['took_ns'] / 1e3:.0f} us; off "
                  f"{(off['ts_ns'] - on['ts_ns']) / 1e9:.1f} s later")
        finally:
            p.kill()
            p.wait()
            if a:
                a.stop()


main()
