"""Section "scaling": the agent's CPU and RSS, and the time from an event to
what it causes, as its work grows (issue 28, item 2): executors under
--all, entries per executor, RSS events per second, executors appearing
and leaving per second. Each curve is judged against the complexity the
code should have: the cost per unit at the largest point at most FACTOR
times the cost per unit at the smallest (above the agent's cost with no
work), which a curve that grows faster than linearly misses.
"""
import contextlib
import os
import subprocess
import sys
import time

from rctest import Memcg, ParentMemcg, Proc
from common import (AGENT, MEMHOG, MiB, OUTPUT, ROOT, dist, is_root, log,
                    mono_ns)
from harness import proc_cpu_rss, start_agent
from sections.footprint import run_ns

EXECUTOR = os.path.join(OUTPUT, "tests", "executor")
RSSFLIP = os.path.join(ROOT, "bench", "rssflip.py")
FACTOR = 2.0
CPU_FLOOR = 0.0001     # of a core: an increment below it is noise
RSS_FLOOR = 64 * 1024  # bytes
EVAL_FLOOR = 1e-6      # s of CPU per evaluation
FLIP_STEP = MiB        # RSS up and down per cycle (--rss-step 512K)
PRESSURE_LIMIT = 256 * MiB
PRESSURE_HOG = 200 * MiB  # leaves less than --headroom: always commands
PRESSURE_FLAGS = ["--headroom", "64M", "--inactive", "128M",
                  "--interval", "1s"]

# what each curve measures, per what unit, and the complexity it should have
CURVES = {
    "executors": {
        "x": "executors", "unit": "executor", "key": "cpu_frac",
        "expect": "each heartbeat wake-up (4 a second, one for all "
                  "pages) ticks every followed executor's page once, and "
                  "each read its /proc files once (a cgroup's files once "
                  "however many executors share it): CPU linear in "
                  "executors, RSS by a "
                  "constant per executor (its page mapped, the evictor's "
                  "arrays sized to the page's capacity)"},
    "entries": {
        "x": "entries", "unit": "entry", "key": "cpu_per_eval_s",
        "expect": "an evaluation scores the entries of a window of the "
                  "table once (at most 8192, EVICT_MAX_SCORED; a big table "
                  "a window at a time): CPU per evaluation linear in "
                  "entries up to the window, then constant, so at most "
                  "linear"},
    "rss_events": {
        "x": "rss events/s", "unit": "rss event", "key": "cpu_frac",
        "expect": "each rss event is read from the ring buffer, compared "
                  "and printed once: constant work per event, CPU linear "
                  "in the rate"},
    "churn": {
        "x": "executors appearing and leaving/s", "unit": "executor",
        "key": "cpu_frac",
        "expect": "an executor that appears is looked up once (uprobe "
                  "report, /proc, its page attached) and dropped once: "
                  "constant work per executor, CPU linear in the rate"},
}


# ------------------------------------------------------------ measuring

def window(pid, seconds, count=None):
    """The agent @pid over @seconds: CPU of all its threads as a fraction
    of a core, VmRSS at the end, and how much count() grew meanwhile."""
    n0 = count() if count else 0
    c0, t0 = run_ns(pid), mono_ns()
    time.sleep(seconds)
    c1, t1 = run_ns(pid), mono_ns()
    n1 = count() if count else 0
    _, rss = proc_cpu_rss(pid)
    return {"cpu_frac": (c1 - c0) / (t1 - t0), "cpu_s": (c1 - c0) / 1e9,
            "rss": rss, "seconds": (t1 - t0) / 1e9, "count": n1 - n0}


def agent_all(dom, *flags):
    """ramcache-bpf --all for the executors in @dom, started."""
    a = Proc([AGENT, "--json", "--all", "--cgroup", dom.rel,
              "--interval", "2s", *flags])
    if not a.wait_type("start", 30):
        a.kill()
        raise RuntimeError("agent did not start: " + " ".join(a.err[-5:]))
    return a


def attached_ms(agent, spawned):
    """ms from each executor's start (@spawned: pid -> mono ns) to the
    agent's `target attached` for it."""
    got = {e["pid"]: e["ts_ns"] for e in list(agent.events)
           if e.get("type") == "target" and e.get("state") == "attached"}
    return [(got[p] - t) / 1e6 for p, t in spawned.items() if p in got]


def wait_attached(agent, pids, timeout):
    """True when the agent said `target attached` for every pid."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = {e.get("pid") for e in list(agent.events)
               if e.get("type") == "target"
               and e.get("state") == "attached"}
        if set(pids) <= got:
            return True
        time.sleep(0.05)
    return False


def executor(dom, entries, *extra):
    """One test executor in @dom's first child; (Popen, start mono ns)."""
    t = mono_ns()
    p = subprocess.Popen([EXECUTOR, "--entries", str(entries), "--bytes",
                          str(MiB), "--wait-ms", "100", *extra],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, preexec_fn=dom.preexec(0))
    return p, t


def end_all(procs):
    """SIGKILL and reap the processes this section started."""
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            p.kill()
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)


# ------------------------------------------------------------ the curves

def executors_point(cfg, dom, n):
    """A fresh agent under --all, @n executors of 100 entries started
    at once; their start -> `target attached`; then a window."""
    agent = agent_all(dom)
    procs = []
    try:
        spawned = {}
        for _ in range(n):
            p, t = executor(dom, 100)
            procs.append(p)
            spawned[p.pid] = t
        ok = wait_attached(agent, spawned, 30)
        time.sleep(cfg["warm_s"])
        w = window(agent.pid, cfg["window_s"])
        return dict(w, x=n, all_attached=ok,
                    attach_ms=dist(attached_ms(agent, spawned)))
    finally:
        agent.kill()
        end_all(procs)


def curve_executors(cfg):
    with ParentMemcg(4096 * MiB, 1, "scaling") as dom:
        base = executors_point(cfg, dom, 0)
        pts = [executors_point(cfg, dom, n) for n in cfg["executors"]]
    return {"base": base, "points": pts}


def evaluations(agent):
    """The `evaluations` count of the agent's last summary."""
    s = agent.of_type("summary")
    return s[-1].get("evaluations", 0) if s else 0


def entries_point(cfg, n):
    """One executor of @n entries followed with --pid: a calm window, then
    a memhog in its memcg leaves less than --headroom, so every
    evaluation posts; its growth -> the first command, and a window
    (CPU per evaluation from the summaries' counts)."""
    with Memcg(PRESSURE_LIMIT, name=f"ramcache-scaling-{os.getpid()}-{n}") \
            as cg:
        ex = Proc([EXECUTOR, "--entries", n, "--bytes", MiB,
                   "--wait-ms", "100"], stdin=True, preexec=cg.preexec())
        agent = hog = None
        try:
            if not ex.wait_type("ready", 30):
                raise RuntimeError("executor did not start: "
                                   + " ".join(ex.err[-3:]))
            agent = start_agent(ex.pid, *PRESSURE_FLAGS)
            if not agent.wait_type("control", 15):
                raise RuntimeError("agent did not attach the page")
            time.sleep(cfg["warm_s"])
            calm = window(agent.pid, cfg["window_s"])
            hog = Proc([MEMHOG, "--grow", PRESSURE_HOG, "--rate", 0,
                        "--hold", 3600], preexec=cg.preexec())
            grown = hog.wait_type("grown", 30)
            first = agent.wait_type("evict", 15)
            time.sleep(cfg["warm_s"] + 1.0)  # a summary after the first
            w = window(agent.pid, cfg["window_s"],
                       lambda: evaluations(agent))
            return {"x": n, "calm": calm, **w,
                    "evals_per_s": w["count"] / w["seconds"],
                    "cpu_per_eval_s": (w["cpu_s"] / w["count"]
                                       if w["count"] else None),
                    "commands": len(agent.of_type("evict")),
                    "event_to_command_ms": (
                        (first["ts_ns"] - grown["_rx_ns"]) / 1e6
                        if first and grown else None)}
        finally:
            for p in (agent, hog, ex):
                if p:
                    p.kill()


def curve_entries(cfg):
    return {"base": None,
            "points": [entries_point(cfg, n) for n in cfg["entries"]]}


def rss_events(agent):
    return sum(1 for e in list(agent.events) if e.get("type") == "rss")


def rss_lag_ms(agent, since_ns):
    """ms from each rss event's kernel stamp to its line read here."""
    return [(e["_rx_ns"] - e["ts_ns"]) / 1e6 for e in list(agent.events)
            if e.get("type") == "rss" and e.get("ts_ns", 0) >= since_ns]


def curve_rss_events(cfg):
    """One agent following rssflip (--fault-probes on, --rss-step 1M): a
    window per rate, still first (the base)."""
    flip = Proc([sys.executable, RSSFLIP, FLIP_STEP], stdin=True)
    agent = None
    try:
        if not flip.wait_type("ready", 15):
            raise RuntimeError("rssflip did not start")
        agent = start_agent(flip.pid, "--fault-probes", "on",
                            "--rss-step", "512K", "--interval", "2s")
        out = []
        for rate in [0, *cfg["rss_rates"]]:
            flip.send(f"{rate / 2}\n")  # two events a cycle
            time.sleep(cfg["warm_s"])
            t = mono_ns()
            w = window(agent.pid, cfg["window_s"],
                       lambda: rss_events(agent))
            out.append(dict(w, x=w["count"] / w["seconds"], asked=rate,
                            lag_ms=dist(rss_lag_ms(agent, t))))
        return {"base": out[0], "points": out[1:]}
    finally:
        if agent:
            agent.kill()
        flip.kill()


def churn_point(cfg, agent, dom, rate):
    """Executors of 16 entries living churn_life_s started at @rate a
    second through a window; their start -> `target attached`."""
    procs, spawned = [], {}
    c0, t0 = run_ns(agent.pid), mono_ns()
    end = time.monotonic() + cfg["window_s"]
    due = time.monotonic()
    while time.monotonic() < end:
        if rate and time.monotonic() >= due:
            p, t = executor(dom, 16, "--ms",
                            str(int(cfg["churn_life_s"] * 1000)))
            procs.append(p)
            spawned[p.pid] = t
            due += 1.0 / rate
        for p in procs:
            p.poll()
        time.sleep(0.005)
    c1, t1 = run_ns(agent.pid), mono_ns()
    end_all(procs)
    _, rss = proc_cpu_rss(agent.pid)
    lat = attached_ms(agent, spawned)
    return {"x": len(spawned) / ((t1 - t0) / 1e9), "asked": rate,
            "cpu_frac": (c1 - c0) / (t1 - t0), "rss": rss,
            "seconds": (t1 - t0) / 1e9, "count": len(spawned),
            "followed": len(lat), "attach_ms": dist(lat)}


def curve_churn(cfg):
    with ParentMemcg(4096 * MiB, 1, "churn") as dom:
        agent = agent_all(dom)
        try:
            time.sleep(cfg["warm_s"])
            out = [churn_point(cfg, agent, dom, r)
                   for r in [0, *cfg["churn_rates"]]]
        finally:
            agent.kill()
    return {"base": out[0], "points": out[1:]}


# ------------------------------------------------------------ judging

def judge(curve, key, floor):
    """Cost per unit ((y - base) / x) at the smallest and largest point,
    and whether the largest's is at most FACTOR times the smallest's; an
    increment under @floor counts as @floor (noise)."""
    pts = [p for p in curve.get("points", [])
           if p.get(key) is not None and p.get("x")]
    if len(pts) < 2:
        return None
    base = (curve.get("base") or {}).get(key) or 0
    lo, hi = min(pts, key=lambda p: p["x"]), max(pts, key=lambda p: p["x"])
    u_lo = max(lo[key] - base, floor) / lo["x"]
    u_hi = max(hi[key] - base, 0) / hi["x"]
    return {"key": key, "x": [lo["x"], hi["x"]], "per_unit": [u_lo, u_hi],
            "ratio": u_hi / u_lo, "ok": u_hi <= FACTOR * u_lo}


def judge_all(res):
    """Every curve's verdicts: CPU, and RSS where it is per unit."""
    out = {}
    for name, c in CURVES.items():
        curve = res.get(name) or {}
        if "points" not in curve:
            continue
        floor = CPU_FLOOR if c["key"] == "cpu_frac" else EVAL_FLOOR
        out[name] = {"cpu": judge(curve, c["key"], floor)}
        if name in ("executors", "entries"):
            out[name]["rss"] = judge(curve, "rss", RSS_FLOOR)
    return out


def bench_scaling(cfg):
    if not is_root():
        return {"skipped": "needs root for the agent and memory cgroups"}
    sc = cfg["scaling"]
    res = {"method": method(sc), "factor": FACTOR,
           "expect": {k: c["expect"] for k, c in CURVES.items()}}
    for name, fn in (("executors", curve_executors),
                     ("entries", curve_entries),
                     ("rss_events", curve_rss_events),
                     ("churn", curve_churn)):
        log(f"scaling: {name}")
        try:
            res[name] = fn(sc)
        except (RuntimeError, OSError) as e:
            res[name] = {"skipped": f"failed: {e}"}
    res["judged"] = judge_all(res)
    return res


def method(sc):
    return (
        f"each point: the agent's CPU (run time of all its threads, "
        f"/proc/PID/task/*/schedstat, over a {sc['window_s']:g} s window "
        f"after {sc['warm_s']:g} s of warm-up, as a fraction of a core) "
        "and VmRSS. Executors: a fresh `--all --cgroup` agent per point, "
        "N test executors of 100 entries started at once in a scratch "
        "cgroup, plenty of memory (no command); event -> what it causes: "
        "executor start -> `target attached`. Entries: one executor "
        "followed with --pid in a 256 MiB memcg, a calm window, then a "
        "memhog of 200 MiB beside it leaves less than --headroom 64M, so "
        "every evaluation posts (the executor acks and publishes a fresh "
        "entry); CPU per evaluation from the summaries' `evaluations`; "
        "memhog grown -> first command. RSS events: one agent following "
        "bench/rssflip.py (1 MiB up and down, --rss-step 512K, --fault-probes"
        " on), the rate counted from the agent's `rss` lines; kernel stamp "
        "-> line read. Churn: one `--all` agent, executors living "
        f"{sc['churn_life_s']:g} s started at the rate through the "
        "window; start -> `target attached`. Base = the same agent with no "
        "work (no executor, still process, no churn)")


# ------------------------------------------------------------ report

def fmt_cost(name, key, v):
    """A per-unit cost of curve @name: RSS in KiB; CPU in µs (of CPU per
    evaluation, or per event where x is a rate), or µs per second."""
    if v is None:
        return "-"
    if key == "rss":
        return f"{v / 1024:.1f} KiB"
    if key == "cpu_per_eval_s" or name in ("rss_events", "churn"):
        return f"{v * 1e6:.2f} µs"
    return f"{v * 1e6:.1f} µs/s"


def point_row(name, p):
    """One table row of a curve's point."""
    cpu = f"{p['cpu_frac'] * 100:.3f}%"
    if name == "entries":
        per = ("-" if p.get("cpu_per_eval_s") is None
               else f"{p['cpu_per_eval_s'] * 1e6:.0f} µs/evaluation, "
               f"{p['evals_per_s']:.1f} evaluations/s")
        lat = p.get("event_to_command_ms")
        lat = "-" if lat is None else f"{lat:.0f} ms"
        cpu = f"{p['calm']['cpu_frac'] * 100:.3f}% calm, {cpu} posting"
    elif name == "rss_events":
        per, lat = f"asked {p['asked']}/s", lag(p["lag_ms"])
    else:
        per = (f"{p['count']} started, {p['followed']} followed"
               if name == "churn" else
               ("all followed" if p["all_attached"] else "NOT all followed"))
        lat = lag(p["attach_ms"])
    x = f"{p['x']:.1f}" if isinstance(p["x"], float) else str(p["x"])
    return f"| {x} | {cpu} | {p['rss'] / MiB:.1f} MiB | {lat} | {per} |"


def lag(d):
    if not d or not d.get("n"):
        return "-"
    return f"p50 {d['p50']:.1f} ms, max {d['max']:.1f} ms (n={d['n']})"


LATENCY = {"executors": "start -> followed", "entries": "memhog grown -> "
           "first command (negative: sooner)", "rss_events": "kernel -> agent's line",
           "churn": "start -> followed"}


def picture_name(name):
    """The SVG file of curve @name, beside BENCHMARKS.md."""
    return f"BENCHMARKS-scaling-{name.replace('_', '-')}.svg"


def curve_md(name, curve, judged, pics):
    """A curve's heading, expected complexity, table, picture (when
    drawn: @pics) and verdict."""
    c = CURVES[name]
    L = [f"### Agent cost against {c['x']}", "",
         f"Expected: {c['expect']}.", ""]
    if "skipped" in curve:
        return L + [f"Skipped: {curve['skipped']}", ""]
    if picture_name(name) in pics:
        L += [f"![agent CPU against {c['x']}]({picture_name(name)})", ""]
    L += [f"| {c['x']} | agent CPU (of a core) | agent RSS | "
          f"{LATENCY[name]} | |", "|---|---|---|---|---|"]
    if curve.get("base"):
        b = curve["base"]
        L.append(f"| 0 (base) | {b['cpu_frac'] * 100:.3f}% | "
                 f"{b['rss'] / MiB:.1f} MiB | - | no work |")
    L += [point_row(name, p) for p in curve["points"]]
    L += [""] + [f"- {v}" for v in curve_verdicts(name, judged)] + [""]
    return L


def curve_verdicts(name, judged):
    """PASS/MISSED lines of one curve."""
    c, v = CURVES[name], []
    for what, j in (judged or {}).items():
        if not j:
            continue
        u = "CPU" if what == "cpu" else "RSS"
        v.append(f"{'PASS' if j['ok'] else 'MISSED'} (scaling against "
                 f"{c['x']}, {u}): "
                 f"{fmt_cost(name, j['key'], j['per_unit'][1])} per "
                 f"{c['unit']} at {j['x'][1]:.0f} against "
                 f"{fmt_cost(name, j['key'], j['per_unit'][0])} at "
                 f"{j['x'][0]:.0f} (x{j['ratio']:.2f}; at most "
                 f"x{FACTOR:.0f} for growth no faster than linear).")
    return v


def report(sec, pics=()):
    L = ["## 6. Scaling", ""]
    if "skipped" in sec:
        return L + [f"Skipped: {sec['skipped']}", ""]
    L += [sec["method"] + ".", "",
          "A cost per unit above the base at the largest point more than "
          f"{sec['factor']:.0f} times the one at the smallest is a curve "
          "that grows faster than the code should (an increment at the "
          f"smallest under {CPU_FLOOR * 100:.2f}% of a core or "
          f"{RSS_FLOOR // 1024} KiB counts as that much: noise).", ""]
    for name in CURVES:
        if name in sec:
            L += curve_md(name, sec[name], sec["judged"].get(name), pics)
    return L


def verdicts(sec):
    if "judged" not in sec:
        return []
    v = []
    for name in CURVES:
        v += curve_verdicts(name, sec["judged"].get(name))
        if "skipped" in sec.get(name, {}):
            v.append(f"Not measured: scaling against {CURVES[name]['x']} "
                     f"({sec[name]['skipped']}).")
    return v
