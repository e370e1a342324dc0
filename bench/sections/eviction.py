"""Section "eviction": post -> ack and post -> RSS drop, from the outcome runs,
the executor written from the document, the ComfyUI package on its
stand-in and, with RAMCACHE_COMFYUI, real ComfyUI.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys

from rctest import Memcg, Proc
from common import AGENT, MiB, OUTPUT, ROOT, dist, is_root, log
from harness import free_port, scratch_dir, start_agent


# ------------------------------------------------------------ 3. eviction

COMFY_CHILD = os.path.join(ROOT, "comfyui", "tests", "e2e_comfy.py")


def served_rounds(cfg, c, name, argv, not_ready, is_done, go=False):
    """@c["rounds"] runs of the executor @argv in a memcg of @c["limit"]
    without swap, served by the agent (@c["agent_flags"]) from its first
    line on (@not_ready(line) says why that line will not do, or None);
    with @go it waits for "go" on its standard input. Each run's exit,
    OOM kills, whether it finished (@is_done: a line saying so) and every
    eviction command's latencies; or {"skipped": why}."""
    runs = []
    for r in range(c["rounds"]):
        with Memcg(c["limit"], swap_limit=0) as cg:
            ex = Proc(argv, stdin=go, preexec=cg.preexec())
            agent = None
            try:
                ready = ex.q.get(timeout=60)
                why = not_ready(ready)
                if why:
                    return {"skipped": f"{why} " + " ".join(ex.err[-3:])}
                agent = start_agent(ex.pid, *c["agent_flags"])
                if go:
                    ex.send("go\n")
                ex.wait(cfg["timeout"])
            finally:
                ex.kill()
                if agent:
                    agent.stop()
            oom = cg.oom_kills()
        done = any(is_done(e) for e in ex.events)
        runs.append({"rc": ex.rc, "oom_kills": oom,
                     "finished": done and ex.rc == 0,
                     "evict_done": evict_rows(agent.of_type("evict_done"),
                                              held_seqs(agent))})
        log(f"{name} round {r + 1}: rc {ex.rc}, oom {oom}, "
            f"{len(runs[-1]['evict_done'])} commands")
    return {"runs": runs}


DOCEXEC = os.path.join(ROOT, "tests", "helpers", "docexec.py")


def bench_docexec(cfg):
    """The Python executor written from docs/control-page.md alone
    (tests/helpers/docexec.py) under the agent in a memcg it outgrows:
    every eviction command's latencies."""
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    c = cfg["docexec"]
    res = served_rounds(
        cfg, c, "docexec",
        [sys.executable, DOCEXEC, "--entries", c["entries"], "--size",
         c["size"], "--every-ms", c["every_ms"], "--hold-s", 1,
         "--wait-agent", 10],
        lambda ready: None if ready and ready.get("type") == "ready"
        else "docexec.py did not start:",
        lambda e: e.get("type") == "done")
    if "runs" in res:
        res["method"] = (
            f"tests/helpers/docexec.py (Python, standard library only, "
            f"written from docs/control-page.md) caching {c['entries']} x "
            f"{c['size']} MiB, one every {c['every_ms']} ms, in a "
            f"{c['limit'] // MiB} MiB memcg without swap, ramcache-bpf "
            f"{' '.join(c['agent_flags'])}, {c['rounds']} round(s); it "
            "looks at the page every 2 ms, and every 256 KiB while it makes "
            "an entry (commands for that entry held to the end of its job)")
    return res


def bench_comfy(cfg):
    """The ComfyUI package's stand-in executor (Python) under the agent in
    a memcg it outgrows: every eviction command's latencies."""
    if not os.path.exists(COMFY_CHILD):
        return {"skipped": "comfyui/ (the ComfyUI package and its Python "
                "stand-in executor) is not in this tree"}
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    c = cfg["comfy"]
    # the page as a memfd: the agent finds it in /proc/<pid>/fd
    res = served_rounds(
        cfg, c, "comfyui stand-in",
        [sys.executable, COMFY_CHILD, "--prompts", c["prompts"], "--mib",
         c["mib"], "--steps", c["steps"], "--step-s", c["step_s"],
         "--control", "memfd"],
        lambda ready: None if ready and ready.get("page") else
        "the stand-in has no control page: "
        + str(ready and ready.get("reason")),
        lambda e: bool(e.get("done")), go=True)
    if "runs" in res:
        res["method"] = (
            f"comfyui/tests/e2e_comfy.py (the package on the stand-in "
            f"ComfyUI) caching {c['prompts']} x {c['mib']} MiB in a "
            f"{c['limit'] // MiB} MiB memcg without swap, ramcache-bpf "
            f"{' '.join(c['agent_flags'])}, {c['rounds']} round(s)")
    return res


COMFY_REAL = os.path.join(ROOT, "comfyui", "tests", "real_comfyui.py")


def comfyui_commit(comfy):
    """The checkout's commit id: git's, else DIR/.ramcache-commit or
    RAMCACHE_COMFYUI_COMMIT (None when none says)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        top = subprocess.run(["git", "-C", comfy, "rev-parse",
                              "--show-toplevel", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        lines = top.stdout.split()
        if top.returncode == 0 and len(lines) == 2 and (
                os.path.realpath(lines[0]) == os.path.realpath(comfy)):
            return lines[1]
    with contextlib.suppress(OSError, IndexError):
        with open(os.path.join(comfy, ".ramcache-commit")) as f:
            return f.read().split()[0]
    return os.environ.get("RAMCACHE_COMFYUI_COMMIT") or None


def run_real_comfyui(argv, timeout, logpath):
    """real_comfyui.py with its output in @logpath; past @timeout it gets
    SIGINT (it stops ComfyUI and the agent and removes its cgroups), then
    SIGKILL."""
    with open(logpath, "w") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             env=dict(os.environ, OUTPUT=OUTPUT))
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"real ComfyUI: no result in {timeout} s, stopping it")
            p.send_signal(signal.SIGINT)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            return "timeout"


def comfy_real_skip(comfy, c):
    """Why real ComfyUI is not run here, or None."""
    if not comfy:
        return "set RAMCACHE_COMFYUI to a ComfyUI checkout"
    if not c:
        return "quick mode never runs real ComfyUI"
    comfy = os.path.abspath(comfy)
    if not os.path.isfile(os.path.join(comfy, "main.py")):
        return (f"RAMCACHE_COMFYUI={comfy} is not a ComfyUI "
                "checkout (no main.py)")
    if not os.path.exists(COMFY_REAL):
        return "comfyui/tests/real_comfyui.py is not in this tree"
    if not is_root():
        return "needs root (memcg, BPF)"
    return None


def comfy_real_round(c, comfy, d, r):
    """One round of real_comfyui.py: (its run row, its own summary)."""
    jpath = os.path.join(d, f"real-{r}.json")
    lpath = os.path.join(d, f"real-{r}.log")
    argv = [sys.executable, COMFY_REAL, "run", "ten", "--comfyui",
            comfy, "--mode", "agent", "--limit", c["limit"],
            "--json", jpath,
            *[f"--agent-arg={f}" for f in c["agent_flags"]]]
    rc = run_real_comfyui(argv, c["timeout"], lpath)
    s = {}
    with contextlib.suppress(OSError, ValueError):
        with open(jpath) as f:
            s = json.load(f)
    with open(lpath, errors="replace") as f:
        tail = f.read()[-1500:]
    return {
        "rc": rc, "oom_kills": s.get("oom_kills"),
        "prompts": s.get("count"), "prompts_ok": s.get("ok", 0),
        "idle_bytes": s.get("idle_bytes"),
        "limit_bytes": s.get("limit"),
        "evict_done": (s.get("agent") or {}).get("evict_done", []),
        "log_tail": None if rc == 0 else tail}, s


def comfy_real_method(c, runs, meta, what):
    limits = sorted({x["limit_bytes"] // MiB for x in runs
                     if x["limit_bytes"]})
    idles = sorted({x["idle_bytes"] // MiB for x in runs
                    if x["idle_bytes"]})
    return (
        f"comfyui/tests/real_comfyui.py run ten ran {what}, its own main.py "
        f"--cpu {' '.join(meta.get('args', []))} with the package, in a memcg "
        f"without swap limited to {'/'.join(map(str, limits)) or '?'} MiB "
        f"(idle usage {'/'.join(map(str, idles)) or '?'} MiB); 10 prompts "
        "(EmptyImage 1024x1024 x16 -> ImageInvert -> ImageScale -> "
        "PreviewImage) cache 3840 MiB; ramcache-bpf "
        f"{' '.join(c['agent_flags'])}; {c['rounds']} "
        "round(s). The nodes run on CPU, so the package's safe points "
        "(between nodes) are far apart: a command waits for the node that "
        "is running")


def bench_comfy_real(cfg):
    """The package in a real ComfyUI checkout (RAMCACHE_COMFYUI) under the
    agent, by comfyui/tests/real_comfyui.py: every command's latencies."""
    comfy = os.environ.get("RAMCACHE_COMFYUI")
    c = cfg.get("comfy_real")
    why = comfy_real_skip(comfy, c)
    if why:
        return {"skipped": why}
    comfy = os.path.abspath(comfy)
    commit = comfyui_commit(comfy)
    runs = []
    meta = {}
    with scratch_dir() as d:
        for r in range(c["rounds"]):
            run, s = comfy_real_round(c, comfy, d, r)
            meta = s or meta
            runs.append(run)
            log(f"real ComfyUI round {r + 1}: rc {run['rc']}, "
                f"{run['prompts_ok']}/{run['prompts']} prompts, oom "
                f"{run['oom_kills']}, "
                f"{len(run['evict_done'])} commands")
    short = commit[:8] if commit else None
    what = (f"ComfyUI {meta.get('version') or '?'} (commit "
            f"{short or 'not known: set RAMCACHE_COMFYUI_COMMIT'})")
    return {"name": f"ComfyUI {short or meta.get('version') or '?'} "
            "(Python, real)",
            "commit": commit, "version": meta.get("version"),
            "method": comfy_real_method(c, runs, meta, what),
            "runs": runs}


def evict_rows(done, held=()):
    """What the eviction table reads of the agent's evict_done events;
    "held": the command was for an entry in use (@held: those seqs), which
    the executor obeys at the safe point after it (docs/control-page.md,
    Busy entries), so its ack comes later by design."""
    return [dict({k: e.get(k) for k in ("status", "ack_latency_ns",
                                        "freed_latency_ns", "recv_latency_ns")},
                 held=e.get("seq") in held)
            for e in done]


def held_seqs(agent):
    """Seqs of the commands @agent posted for entries in use."""
    return {e["seq"] for e in agent.of_type("evict") if e.get("active")}


def latency_rows(done):
    acked = [e for e in done if e.get("ack_latency_ns") is not None]
    statuses = {}
    for e in done:
        statuses[e["status"]] = statuses.get(e["status"], 0) + 1
    return {"commands": len(done), "statuses": statuses,
            "busy_per_100": (100.0 * statuses.get("busy", 0) / len(done)
                             if done else None),
            "post_to_recv_ms": dist([e["recv_latency_ns"] / 1e6
                                     for e in acked]),
            "post_to_ack_ms": dist([e["ack_latency_ns"] / 1e6
                                    for e in acked]),
            # entries not in use, obeyed at the next safe point; and those
            # in use, held until the safe point after their use
            "post_to_ack_not_held_ms": dist([e["ack_latency_ns"] / 1e6
                                             for e in acked
                                             if not e.get("held")]),
            "post_to_ack_held_ms": dist([e["ack_latency_ns"] / 1e6
                                         for e in acked if e.get("held")]),
            "post_to_rss_drop_ms": dist([e["freed_latency_ns"] / 1e6
                                         for e in done
                                         if e.get("freed_latency_ns")])}

def executor_rows(x, keep):
    """One executor's latency rows from its runs (a bench_* result), with
    its @keep keys and each run's summary; or why it was skipped."""
    if "runs" not in x:
        return {"skipped": x.get("skipped")}
    res = latency_rows([e for r in x["runs"] for e in r["evict_done"]])
    res.update({k: x[k] for k in keep})
    res["runs"] = [{k: v for k, v in r.items() if k != "evict_done"}
                   for r in x["runs"]]
    return res


def bench_eviction(cfg, outcomes, noswap, comfy, real, doc):
    if ("runs" not in outcomes and "runs" not in noswap
            and "runs" not in comfy and "runs" not in real
            and "runs" not in doc):
        return {"skipped": outcomes.get("skipped", "no outcome runs")}
    done = [e for r in outcomes.get("runs", []) + noswap.get("runs", [])
            if r["policy"] == "agent" for e in r["evict_done"]]
    wl = cfg["workload"]
    step_ms = float(wl[wl.index("--step-ms") + 1])
    res = {"method": (
        "every eviction command of the ramcache-bpf outcome runs (both "
        "variants), of the Python executor written from the control page's "
        "document, of the ComfyUI stand-in runs and of the runs in real "
        "ComfyUI (when RAMCACHE_COMFYUI names a checkout: `sudo make bench "
        "RAMCACHE_COMFYUI=/path/to/ComfyUI`): post = issue_ns on "
        "the control page; received = the executor's recv_ns; ack = its "
        "ack_ns; RSS drop = the first rss_stat event (BPF) after which RSS "
        "fell by half the entry's size from its peak since the post"),
        "c_demo": latency_rows(done),
        # one safe-point interval plus 2 ms
        "target_ms": {"c_demo": step_ms + 2.0}}
    res["python_doc"] = executor_rows(doc, ("method",))
    res["comfyui_standin"] = executor_rows(comfy, ("method",))
    res["comfyui_real"] = executor_rows(
        real, ("name", "commit", "version", "method"))
    return res
