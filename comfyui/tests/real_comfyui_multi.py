#!/usr/bin/env python3
"""Several real ComfyUI servers sharing one memory limit, one agent --all.

    sudo comfyui/tests/real_comfyui_multi.py --comfyui /path/to/ComfyUI [--commit ID]

As on a server with one ComfyUI per GPU: N instances of the same checkout
(real main.py on CPU, set up as real_comfyui.py does), each in its own
scratch cgroup, under one parent cgroup (ramcache-real-multi-*, always
removed, no swap) limited to N x (idle + --room-mib). One agent,
`ramcache-bpf --all --cgroup <parent>`, finds every instance's page and
evicts across them. The instances run their prompts at the same time
(one thread each); each prompt caches --batch new side x side images.

Checks: every prompt of every instance ran, 0 OOM kills in the parent and
its children, each instance got commands and acked them evicted with RSS
freed, the agent saw one memory domain, and the entries it took were the
lowest-value ones across the instances: the pages of all instances are
read (never written) every 20 ms, and at each command the evicted entry's
score (1.3^generation age x bytes, the package's README and
user/core/policy.c) is compared with the entries the other instances kept in
the same tier (inactive, active). Prints a JSON summary (--json keeps it).
--no-agent is the control run. Exit status 0 when every check passed.
"""
import argparse
import contextlib
import json
import os
import re
import sys
import threading
import time

import real_workloads as wl  # noqa: E402
import realcomfy as rc  # noqa: E402
from fakeagent import FakeAgent  # noqa: E402

import rctest  # noqa: E402  (comfyui/tests/rctest, the shared harness)

MiB = rc.MiB
F_ACTIVE, F_PINNED = 1, 2
AGE_BASE = 1.3
# instances run their prompts independently: one may be a prompt ahead
SKEW = AGE_BASE ** 2


def Parent(limit, n):
    """A parent memory cgroup with a limit and n children (one per
    instance) without one."""
    if rctest.memcg_version() == 0:
        raise SystemExit("real_comfyui_multi.py: no memory cgroup controller")
    return rctest.ParentMemcg(limit, n, "real-multi", child="gpu")


def child_cgroup(parent, i):
    """Child i of @parent as real_comfyui.ComfyUI takes a cgroup."""
    class Child:
        @staticmethod
        def preexec():
            return parent.preexec(i)
    return Child


def memfd_page(pid, timeout=60):
    """/proc/PID/fd/N of the ComfyUI's memfd page, once it is made."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:ramcache"):
                        return f"/proc/{pid}/fd/{fd}"
        time.sleep(0.2)
    return None


class Pages:
    """Snapshots of every instance's page (read only) every 20 ms."""

    def __init__(self, pids):
        self.readers = {}
        for pid in pids:
            path = memfd_page(pid)
            if path:
                self.readers[pid] = FakeAgent(path)
        self.snaps = []  # (t_ns, {pid: (generation, {id: entry})})
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            snap = {}
            for pid, r in self.readers.items():
                with contextlib.suppress(Exception):
                    snap[pid] = (r.generation(), r.entries())
            self.snaps.append((time.monotonic_ns(), snap))
            self._stop.wait(float(os.environ.get("RAMCACHE_SNAPSHOT_S", "0.02")))

    def before(self, t_ns):
        """The last snapshot taken at or before t_ns: (its time, it)."""
        best = (None, None)
        for t, s in self.snaps:
            if t > t_ns:
                break
            best = (t, s)
        return best

    def history(self, pid, eid, t_ns, span_ns=300_000_000):
        """[ms from t_ns, flags] of entry eid of pid while they change."""
        out = []
        for t, s in self.snaps:
            if abs(t - t_ns) > span_ns or pid not in s:
                continue
            e = s[pid][1].get(eid)
            f = None if e is None else e["flags"]
            if not out or out[-1][1] != f:
                out.append([round((t - t_ns) / 1e6, 1), f])
        return out

    def after(self, t_ns):
        """The first snapshot taken after t_ns: (its time, it)."""
        for t, s in self.snaps:
            if t > t_ns:
                return t, s
        return None, None

    def stop(self):
        self._stop.set()
        self._t.join(5)
        for r in self.readers.values():
            r.close()


def tier(e):
    return 0 if not e["flags"] & F_ACTIVE else 1


def score(e, gen):
    age = max(0, gen - e["used_generation"])
    return AGE_BASE ** min(age, 256) * (e["bytes"] + 0.05)


def ranking(evicts, pages, pids):
    """Each command against the entries the other instances kept then:
    how many were compared, and those where another instance kept an
    entry of the same tier worth evicting first (score above the evicted
    one's by more than SKEW) that no command had asked for yet. A kept
    entry counts only when the snapshots just before and just after the
    command agree on its tier: an output is published when its node ends
    and marked active when the next node starts reading it, so a snapshot
    20 ms old can show as inactive what the agent rightly saw active."""
    asked = {}  # (pid, id) -> when its command was posted
    for e in evicts:
        asked.setdefault((e["pid"], e["id"]), e["ts_ns"])
    compared, worse = 0, []
    for e in evicts:
        t, snap = pages.before(e["ts_ns"])
        _, later = pages.after(e["ts_ns"])
        if not snap or e["pid"] not in snap:
            continue
        gen, ents = snap[e["pid"]]
        mine = ents.get(e["id"])
        if mine is None:
            continue
        s = score(mine, gen)
        compared += 1
        for q in pids:
            if q == e["pid"] or q not in snap:
                continue
            qgen, qents = snap[q]
            for x in qents.values():
                if (x["flags"] & F_PINNED or tier(x) != tier(mine)
                        or asked.get((q, x["id"]), e["ts_ns"] + 1) <= e["ts_ns"]):
                    continue
                y = later.get(q, (0, {}))[1].get(x["id"]) if later else None
                if y is None or tier(y) != tier(x):
                    continue
                if score(x, qgen) > s * SKEW:
                    worse.append({
                        "at_ms": (e["ts_ns"] - evicts[0]["ts_ns"]) / 1e6,
                        "snapshot_ms_before": (e["ts_ns"] - t) / 1e6,
                        "evicted": [e["pid"], e["id"], mine["label"], mine["bytes"],
                                    gen - mine["used_generation"], mine["flags"]],
                        "kept": [q, x["id"], x["label"], x["bytes"],
                                 qgen - x["used_generation"], x["flags"]],
                        "kept_asked_ms_later": (asked[(q, x["id"])] - e["ts_ns"]) / 1e6
                        if (q, x["id"]) in asked else None,
                        "kept_flags_ms": pages.history(q, x["id"], e["ts_ns"])})
                    break
    return compared, worse


def check(results, name, ok, detail=None):
    results.append({"check": name, "ok": bool(ok), "detail": detail})
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail is not None else ""),
          flush=True)


def finish(results, summary, json_path):
    """Count the checks into the summary, keep it (json_path), print the
    last line and exit 0 only when every check passed."""
    failed = [r for r in results if not r["ok"]]
    summary["passed"] = len(results) - len(failed)
    summary["failed"] = len(failed)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


def image_prompt(colour, side, batch):
    """EmptyImage -> ImageInvert -> preview: two side x side x batch images cached."""
    g = wl.Graph()
    img = g.add("EmptyImage", width=side, height=side, batch_size=batch, color=colour)
    return g.preview(g.add("ImageInvert", image=img))


def drive(i, ui, cg_usage, a, out):
    """Instance i's prompts, one after the other."""
    events = rc.Events(ui.port)
    for k in range(a.prompts):
        r = rc.run_prompt(ui, events, image_prompt(1000 * (i + 1) + k, a.side, a.batch))
        ok = r["ok"]
        if not ok:
            out.append({"prompt": k, "ok": False, "error": r["error"]})
        else:
            out.append({"prompt": k, "ok": ok, "rss": rc.rss(ui.pid),
                        "parent": cg_usage()})
        print(f"  gpu{i} prompt {k}: {'ok' if ok else 'FAILED'}  rss "
              f"{(out[-1].get('rss') or 0) / MiB:.0f} MiB  parent "
              f"{(out[-1].get('parent') or 0) / MiB:.0f} MiB", flush=True)
        if not ok or ui.proc.poll() is not None:
            return


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--comfyui", required=True, help="a ComfyUI checkout")
    ap.add_argument("--commit", default=None, help="its commit id, for the record")
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--port", type=int, default=8190, help="the first instance's")
    ap.add_argument("--prompts", type=int, default=10, help="per instance")
    ap.add_argument("--side", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--room-mib", type=int, default=1024,
                    help="per instance, above its idle usage")
    ap.add_argument("--agent", default=rctest.AGENT)
    ap.add_argument("--headroom", default="256M")
    ap.add_argument("--inactive", default="512M")
    ap.add_argument("--favour-first", type=float, default=None, metavar="W",
                    help="give the agent --weight PID=W for the first instance: "
                         "its entries then rank W times lower, so the check on "
                         "the ranking (unweighted scores) must fail")
    ap.add_argument("--machine", action="store_true",
                    help="plain --all: every executor on the machine, not only "
                         "those under the parent cgroup (--cgroup)")
    ap.add_argument("--no-agent", action="store_true", help="the control run")
    ap.add_argument("--json", help="write the summary here")
    return ap.parse_args()


def idle_usage(comfy, scratch, cmdline, port):
    """One instance's memory once it is up and idle."""
    with rctest.Memcg(64 << 30, name=f"ramcache-real-multi-{os.getpid()}-probe") as probe:
        ui = rc.ComfyUI(comfy, scratch, cmdline, probe, port, "probe.log")
        try:
            ui.wait_up()
            time.sleep(1)
            return rc.cg_usage(probe)
        finally:
            ui.stop()


def attach(a, uis, parent, results):
    """The agent, --all in the parent cgroup, attached to every instance."""
    pids = [ui.pid for ui in uis]
    rctest.AGENT = a.agent
    extra = ["--weight", f"{pids[0]}={a.favour_first:g}"] if a.favour_first else []
    scope = [] if a.machine else ["--cgroup", parent.rel]
    ag = rctest.Agent("--all", *scope, "--headroom", a.headroom, "--inactive", a.inactive,
                      *extra)
    end = time.monotonic() + 20
    att = []
    while time.monotonic() < end:
        att = [ui.http.get("/ramcache/status")["attached"] for ui in uis]
        if all(att):
            break
        time.sleep(0.2)
    check(results, "the agent attaches to every instance", all(att), att)
    return ag


def run_all(uis, parent, a):
    """Every instance's prompts, the instances at once."""
    runs = [[] for _ in uis]
    threads = [threading.Thread(target=drive, args=(i, ui, parent.usage, a, runs[i]))
               for i, ui in enumerate(uis)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return runs


def per_instance(ag, pids):
    evicts = [e for e in ag.of_type("evict") if e.get("pid") in pids]
    dones = [e for e in ag.of_type("evict_done") if e.get("pid") in pids]
    per = {}
    for i, pid in enumerate(pids):
        ev = [d for d in dones if d["pid"] == pid and d.get("status") == "evicted"]
        sts = {}
        for d in dones:
            if d["pid"] == pid:
                sts[d.get("status")] = sts.get(d.get("status"), 0) + 1
        acks = sorted(d["ack_latency_ns"] / 1e6 for d in ev if "ack_latency_ns" in d)
        per[f"gpu{i}"] = {"pid": pid, "commands": sum(e["pid"] == pid for e in evicts),
                          "statuses": sts, "evicted": len(ev),
                          "bytes_freed": sum(d.get("bytes_freed", 0) for d in ev),
                          "ack_ms_p50": acks[len(acks) // 2] if acks else None}
    return evicts, per


def agent_checks(results, summary, ag, pages, pids, parent):
    """Acks per instance, one memory domain, the ranking across instances."""
    time.sleep(1)
    pages.stop()
    evicts, per = per_instance(ag, pids)
    summary["per_instance"] = per
    check(results, "each instance's commands were acked evicted with RSS freed",
          all(v["evicted"] and v["bytes_freed"] > 0 for v in per.values()), per)
    targets = [e for e in ag.of_type("target")
               if e.get("state") == "attached" and e.get("pid") in pids]
    doms = sorted({str(e.get("domain")) for e in targets})
    summary["domains"] = doms
    check(results, "one memory domain: the parent cgroup",
          {e["pid"] for e in targets} == set(pids) and doms == [parent.rel],
          {"attached": [e.get("pid") for e in targets], "domains": doms})
    batches = {}
    for e in evicts:
        batches.setdefault(e["ts_ns"], set()).add(e["pid"])
    compared, worse = ranking(evicts, pages, pids)
    summary["ranking"] = {"evaluations": len(batches),
                          "mixed": sum(len(p) > 1 for p in batches.values()),
                          "compared": compared, "worse": len(worse), "examples": worse[:5],
                          "scores_reported": sum("score" in e for e in evicts)}
    check(results, "the entries taken were the lowest-value ones across the instances",
          compared >= len(evicts) // 2 and not worse, summary["ranking"])


def outcome_checks(results, summary, uis, parent, runs, a):
    alive = [ui.alive() for ui in uis]
    ooms = summary["oom_kills"] = parent.oom_kills()
    ok_counts = [sum(p["ok"] for p in r) for r in runs]
    all_ok = all(k == a.prompts for k in ok_counts) and all(alive)
    if a.no_agent:
        check(results, "control run: without the agent the instances do not fit",
              not all_ok or ooms > 0, {"prompts_ok": ok_counts, "alive": alive, "oom_kills": ooms})
        return
    check(results, "every prompt of every instance ran", all_ok,
          {"prompts_ok": ok_counts, "alive": alive})
    check(results, "0 OOM kills in the parent cgroup", ooms == 0, ooms)


def stop_all(results, summary, uis, ag, pages, a):
    if pages is not None:
        pages.stop()
    if ag is not None:
        ag.stop()
        summary["agent_events"] = [e for e in ag.events if e.get("type") not in (
            "rss", "reclaim", "fault_burst", "kswapd")][:5000]
        summary["agent_stderr"] = ag.stderr[-50:]
    codes = summary["exit"] = [ui.stop() for ui in uis]
    texts = [ui.text() for ui in uis]
    trace = re.compile(r'File "[^"]*(custom_nodes/ramcache_bpf|' + re.escape(rc.PKG) + r')/')
    if not a.no_agent and uis:
        check(results, "Ctrl-C: every instance stops cleanly",
              all(code == 0 and "Stopped server" in t and not trace.search(t)
                  for code, t in zip(codes, texts)), codes)
    summary["log_tails"] = [t[-800:] for t in texts]


def main():
    a = parse()
    if os.geteuid() != 0:
        raise SystemExit("real_comfyui_multi.py: needs root (memory cgroups, agent)")
    n, comfy = a.instances, os.path.abspath(a.comfyui)
    fam, cmdline = rc.cache_ram_form(comfy), rc.recommended(comfy)
    scratch = rc.Scratch(comfy, package=True, test_nodes=False)
    results = []
    summary = {"comfyui": comfy, "commit": a.commit, "cache_ram": fam, "args": cmdline,
               "instances": n, "agent": not a.no_agent, "favour_first": a.favour_first,
               "machine": a.machine, "checks": results}
    per_prompt = 2 * a.side * a.side * 3 * 4 * a.batch
    print(f"{n} x ComfyUI ({a.commit or 'commit not given'}), --cache-ram form {fam}: "
          f"main.py --cpu {' '.join(cmdline)}", flush=True)
    idle = idle_usage(comfy, scratch, cmdline, a.port)
    limit = n * (idle + a.room_mib * MiB)
    summary.update(idle_bytes=idle, limit_bytes=limit, cache_bytes=n * per_prompt * a.prompts)
    print(f"idle {idle / MiB:.0f} MiB each; parent limit {limit / MiB:.0f} MiB; "
          f"the workflows cache {n * per_prompt * a.prompts / MiB:.0f} MiB "
          f"({n} x {a.prompts} prompts x {per_prompt / MiB:.0f} MiB)", flush=True)
    ag = pages = None
    uis = []
    with Parent(limit, n) as parent:
        try:
            for i in range(n):
                uis.append(rc.ComfyUI(comfy, scratch, cmdline, child_cgroup(parent, i),
                                      a.port + i, f"gpu{i}.log"))
            for ui in uis:
                ui.wait_up()
            pids = summary["pids"] = [ui.pid for ui in uis]
            if not a.no_agent:
                ag = attach(a, uis, parent, results)
                pages = Pages(pids)
            runs = summary["prompts"] = run_all(uis, parent, a)
            outcome_checks(results, summary, uis, parent, runs, a)
            if not a.no_agent:
                agent_checks(results, summary, ag, pages, pids, parent)
        finally:
            stop_all(results, summary, uis, ag, pages, a)
    scratch.cleanup()
    finish(results, summary, a.json)


if __name__ == "__main__":
    main()
