#!/usr/bin/env python3
"""bench/run.py --quick: the benchmark harness runs and writes a
well-formed results JSON and a table. No timing is asserted: the numbers
of a quick run on a shared machine mean nothing."""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from rctest import OUTPUT, ROOT, Skip, main, test  # noqa: E402

SECTIONS = ("overhead", "tax", "footprint", "reaction", "outcomes",
            "eviction", "agentdeath", "scaling")
_res = {}


def run_quick():
    if "res" in _res:
        return _res["res"]
    fb = os.path.join(OUTPUT, "bench", "faultbench")
    assert os.access(fb, os.X_OK), f"{fb} is not built"
    d = tempfile.mkdtemp(prefix="ramcache-test-bench-")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"),
                        "--quick", "--out", d], capture_output=True,
                       text=True, timeout=300,
                       env=dict(os.environ, OUTPUT=OUTPUT,
                                RAMCACHE_COMFYUI=d))
    assert p.returncode == 0, p.stderr[-3000:]
    with open(os.path.join(d, "results.json")) as f:
        res = json.load(f)
    with open(os.path.join(d, "BENCHMARKS.md")) as f:
        md = f.read()
    pics = {}
    for name in os.listdir(d):
        if name.endswith(".svg"):
            with open(os.path.join(d, name)) as f:
                pics[name] = f.read()
            os.unlink(os.path.join(d, name))
    for name in ("results.json", "BENCHMARKS.md"):
        os.unlink(os.path.join(d, name))
    os.rmdir(d)
    _res["res"] = (res, md)
    _res["pics"] = pics
    return _res["res"]


@test
def quick_run_writes_results_json():
    res, _ = run_quick()
    assert res["quick"] is True
    for k in ("machine", "command", "date", "verdicts", "outcomes_noswap",
              *SECTIONS):
        assert k in res, k
    m = res["machine"]
    assert m["cpus"] >= 1 and m["kernel"]
    for s in SECTIONS:
        sec = res[s]
        assert isinstance(sec, dict)
        assert "skipped" in sec or "method" in sec, (s, sec)
    o = res["overhead"]
    if "skipped" not in o:
        assert o["ratios"]["none"]["ratio"] == 1.0
        for r in o["ratios"].values():
            assert r["median_cpu"] > 0 and r["median_wall"] > 0
    if os.geteuid() == 0:
        assert "rows" in res["reaction"], res["reaction"]
        rows = res["outcomes"]["rows"]
        assert set(rows) == {"unconstrained", "none", "local", "psi",
                             "agent"}
        for r in rows.values():
            assert r["runs"] >= 1
        fp = res["footprint"]
        for k in ("idle", "idle_executor"):
            assert fp[k]["rss"] > 0 and fp[k]["cpu_frac"] >= 0, fp[k]
            assert fp[k]["scrapes"] >= 1, ("metrics never answered", fp[k])
            assert fp[k]["rss_parts"], fp[k]
        assert set(fp["met"]) == {"rss", "cpu"}, fp
        # a node of 8 executors in 8 domains, each seen in its scrape
        node = fp["node"]
        assert node["rss"] > 0 and node["scrapes"] >= 1, node
        assert node["series"]["executors"] == node["series"]["domains"] \
            == node["executors"] == 8, node
        assert set(fp["daemonset"]) >= {"requests", "limits"}, fp
        # every scaling curve measured at its two quick points
        sc = res["scaling"]
        for k in ("executors", "entries", "rss_events", "churn"):
            assert len(sc[k].get("points", [])) == 2, (k, sc[k])
        # the fault tax: each turn ran in the state it claims
        tx = res["tax"]["rows"]
        assert tx["calm_self"]["probes"] == ["off"], tx["calm_self"]
        assert tx["calm_other"]["probes"] == ["off"], tx["calm_other"]
        assert tx["near_self"]["probes"] == ["on"], tx["near_self"]
        assert set(res["tax"]["ramp"]) == {"auto", "on"}, res["tax"]
        ev = res["eviction"]
        assert "c_demo" in ev and "comfyui_standin" in ev, ev
        # the executor written from the document, served for real
        pd = ev["python_doc"]
        assert pd["post_to_ack_ms"]["n"] >= 1, pd
        assert all(r["finished"] and r["oom_kills"] == 0
                   for r in pd["runs"]), pd["runs"]
        if os.path.isdir(os.path.join(ROOT, "comfyui", "tests")):
            cs = ev["comfyui_standin"]
            assert "skipped" in cs or "post_to_ack_ms" in cs, cs
        # real ComfyUI takes minutes: never in --quick, even with
        # RAMCACHE_COMFYUI set (run_quick sets it)
        assert "quick mode" in ev["comfyui_real"].get("skipped", ""), ev


def section_out(name, sec):
    """The verdicts and report of bench/sections/@name.py on @sec, as
    bench/run.py imports it (from bench/)."""
    p = subprocess.run([sys.executable, "-c", "import json, sys; "
                        f"from sections import {name} as m; "
                        "sec = json.load(sys.stdin); print(json.dumps("
                        "{'verdicts': m.verdicts(sec), 'report': m.report(sec)}))"],
                       cwd=os.path.join(ROOT, "bench"), input=json.dumps(sec), text=True,
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def comfy_versions(sec):
    return section_out("comfyui_versions", sec)


def comfy_models(sec):
    return section_out("comfyui_models", sec)


def session_run(limit_gib, mode, cached, wall, commands=0, cache="default", ooms=0,
                case="session", ok=20):
    return {"version": "0.33.0", "case": case, "limit": int(limit_gib * (1 << 30)),
            "mode": mode, "cache": cache if mode == "alone" else "recommended",
            "args": [], "ok": ok, "count": 20 if case == "session" else 10,
            "cached": cached, "wall_s": wall, "executed": 125 - cached,
            "oom_kills": ooms, "agent": {"commands": commands} if mode == "agent" else None}


@test
def comfy_versions_verdicts_say_missed_where_the_agent_loses():
    """The verdicts of the real-ComfyUI section, on the figures issue 29
    measured at e8e9cff (MISSED) and on figures that meet every goal."""
    bad = [session_run(6, "alone", 14, 27.8), session_run(6, "agent", 88, 10.4),
           session_run(2.5, "alone", 14, 27.0), session_run(2.5, "agent", 7, 44.7, 104),
           session_run(1.5, "alone", 14, 24.9), session_run(1.5, "agent", 3, 44.2, 114),
           session_run(1.5, "alone", 0, 5.1, case="ten", ok=10),
           session_run(1.5, "agent", 0, 9.6, 46, case="ten", ok=10)]
    sec = {"versions": ["0.33.0"], "results": bad, "seconds": 1, "method": "m", "runs": 1}
    v = comfy_versions(sec)["verdicts"]
    assert [x.split()[0] for x in v] == ["PASS", "MISSED", "MISSED", "MISSED"], v
    good = [dict(r) for r in bad]
    good[3].update(cached=87, wall_s=12.0, agent={"commands": 0})
    good[5].update(cached=20, wall_s=24.0)
    good[7].update(wall_s=5.2)
    out = comfy_versions(dict(sec, results=good))
    assert all(x.startswith("PASS") for x in out["verdicts"]), out["verdicts"]
    md = "\n".join(out["report"])
    assert md.count("| 0.33.0 | session |") == 6 and "| 0.33.0 | ten |" in md, md
    # the large batch: surviving is not enough where ComfyUI alone survives
    # too (as measured at 85dddbc: 6.9 s against 3.7 s); alone OOM-killed,
    # any wall time passes
    batch = [session_run(1.5, "alone", 0, 3.7, case="batch", ok=2),
             session_run(1.5, "agent", 0, 6.9, 5, case="batch", ok=2)]
    for r in batch:
        r["count"] = 2
    v = comfy_versions(dict(sec, results=good + batch))["verdicts"]
    assert v[-1].startswith("MISSED") and "x1.86" in v[-1], v
    batch[0].update(ok=1, oom_kills=1)
    v = comfy_versions(dict(sec, results=good + batch))["verdicts"]
    assert v[-1].startswith("PASS") and "both finish" not in v[-1], v


def models_run(limit, mode, loads, wall, ok=10, ooms=0):
    return {"version": "0.33.0", "case": "models-full", "limit": int(limit * (1 << 30)),
            "mode": mode, "cache": "default", "args": [], "ok": ok, "count": 10,
            "hits": 20, "wall_s": wall, "oom_kills": ooms, "peak_bytes": 1 << 30,
            "model_loads": {"count": loads, "seconds": loads * 10.0},
            "agent": {"commands": 3} if mode == "agent" else None}


@test
def only_a_section_that_exists_is_taken():
    """--only with a name no section has (a typo, the module's spelling of
    another) ends at once with one line naming the sections; the module's
    spelling of a real one is taken (an earlier run measured nothing for
    "comfyui_models" and said so only in the table)."""
    run_py = os.path.join(ROOT, "bench", "run.py")
    p = subprocess.run([sys.executable, run_py, "--only", "pycache,comfyui-modelz"],
                       capture_output=True, text=True, timeout=60)
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 2 and "comfyui-modelz" in last and \
        "comfyui-models" in last, (p.returncode, p.stderr)
    p = subprocess.run([sys.executable, "-c", "import sys; import run; "
                        "sys.argv = ['run.py', '--only', 'comfyui_models, pycache']; "
                        "print(run.parse_args().only)"],
                       cwd=os.path.join(ROOT, "bench"), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout.split() == ["comfyui-models,pycache"], \
        (p.stdout, p.stderr)


@test
def comfy_models_verdicts_say_missed_where_the_agent_loses():
    """Issue 39's goals, judged against ComfyUI alone: a reload it avoids,
    no fewer reloads where memory holds fewer models, more wall time where
    it holds them all, an OOM kill where it finishes: MISSED; finishing
    where it is killed: PASS."""
    sec = {"seconds": 1, "date": "d", "method": "m", "results": [
        models_run(16, "alone", 4, 300), models_run(16, "agent", 5, 200),
        models_run(11, "alone", 10, 400), models_run(11, "agent", 10, 300),
        models_run(7, "alone", 3, 90, ok=3, ooms=1), models_run(7, "agent", 10, 380)]}
    out = comfy_models(sec)
    v = out["verdicts"]
    assert any(x.startswith("MISSED") and "16G" in x and "reload" in x for x in v), v
    assert any(x.startswith("MISSED") and "11G" in x and "fewer reloads" in x for x in v), v
    assert any(x.startswith("PASS") and "7G" in x and "OOM-killed" in x for x in v), v
    assert any(x.startswith("PASS") and "16G" in x and "wall time" in x for x in v), v
    assert sum(1 for line in out["report"] if line.startswith("| 0.33.0")) == 6, out["report"]
    # with room for every model, fewer loads bought with more wall time
    # leave the user worse off: MISSED (the 2026-12-05 run: 259.5 / 207.6 s)
    sec["results"][:2] = [models_run(16, "alone", 13, 207.6), models_run(16, "agent", 7, 259.5)]
    v = comfy_models(sec)["verdicts"]
    assert any(x.startswith("MISSED") and "16G" in x and "wall time" in x for x in v), v
    assert any(x.startswith("PASS") and "16G" in x and "reload" in x for x in v), v


@test
def comfy_models_report_says_where_the_wall_time_went():
    """Each limit both finished gets a line of the agent's run against
    ComfyUI alone in wall, user and kernel seconds and minor faults, their
    cost when the run measured one fault's; a run without CPU figures (an
    older result) gets none and its row dashes."""
    runs = [models_run(16, "alone", 13, 210.0), models_run(16, "agent", 9, 223.0),
            models_run(11, "alone", 13, 231.0), models_run(11, "agent", 13, 236.0)]
    runs[0]["proc"] = {"user_s": 144.0, "sys_s": 67.0, "minflt": 7_300_000}
    runs[1]["proc"] = {"user_s": 143.5, "sys_s": 86.5, "minflt": 9_500_000}
    sec = {"seconds": 1, "date": "d", "method": "m", "results": runs, "fault_us": 10.0}
    lines = comfy_models(sec)["report"]
    went = [x for x in lines if x.startswith("- 0.33.0")]
    assert went == ["- 0.33.0 models-full 16G: the agent's run +13.0 s wall, -0.5 s user, "
                    "+19.5 s in the kernel, +2.20 M minor faults (at 10 us a fault here: "
                    "+22 s) against ComfyUI alone"], went
    rows = [x for x in lines if x.startswith("| 0.33.0")]
    assert "| 144 / 67 | 7.30 |" in rows[0] and "| - | - |" in rows[2], rows


@test
def comfy_versions_ten_is_judged_turn_by_turn():
    """The 10-prompt run's turns ran side by side: its ratio is the median
    of each turn's agent over alone, so a machine that slowed down in one
    turn moves both sides of that turn (the ratio of the medians would say
    x1.20 on these figures); without turns, the ratio of the medians."""
    def ten(mode, wall, turn):
        return dict(session_run(1.5, mode, 0, wall, case="ten", ok=10), turn=turn)
    runs = [ten("alone", 10.0, 0), ten("agent", 10.4, 0), ten("alone", 20.0, 1),
            ten("agent", 20.8, 1), ten("alone", 10.0, 2), ten("agent", 12.0, 2)]
    sec = {"versions": ["0.33.0"], "results": runs, "seconds": 1, "method": "m", "runs": 1}
    v = [x for x in comfy_versions(sec)["verdicts"] if "10-prompt" in x]
    assert len(v) == 1 and v[0].startswith("PASS") and "x1.04, the median of 3" in v[0], v
    runs[3]["wall_s"] = 22.0  # turn 1: x1.10, the median now
    v = [x for x in comfy_versions(sec)["verdicts"] if "10-prompt" in x]
    assert v[0].startswith("MISSED") and "x1.10" in v[0], v
    for r in runs:
        r.pop("turn")
    v = [x for x in comfy_versions(sec)["verdicts"] if "10-prompt" in x]
    assert v[0].startswith("MISSED") and "x1.20 the wall" in v[0], v


@test
def tax_verdicts_pass_only_what_the_run_can_tell():
    """A calm tax within its 0.5% goal passes only when no agent against no
    agent is within it too: with the method's own noise at -3.5% (as on
    2026-12-02 16:26), -4% says nothing about a 0.5% tax."""
    def rows(noise):
        r = {k: {"ratio": 1.0, "iqr": [0.99, 1.01]} for k in
             ("none_far_again", "calm_other", "calm_self", "near_self", "near_other")}
        r["none_far_again"]["ratio"] = 1 + noise
        r["calm_other"]["ratio"] = 0.96
        return r
    ramp = {"auto": {"evict_p50_ms": -1200}, "on": {"evict_p50_ms": -1200}}
    code = ("import json, sys; from sections import tax; a = json.load(sys.stdin); "
            "print(json.dumps([tax.verdicts({'rows': r, 'ramp': a['ramp']}) "
            "for r in a['rows']]))")
    p = subprocess.run([sys.executable, "-c", code], cwd=os.path.join(ROOT, "bench"),
                       text=True, capture_output=True, timeout=60,
                       input=json.dumps({"rows": [rows(0.001), rows(-0.035)], "ramp": ramp}))
    assert p.returncode == 0, p.stderr
    quiet, noisy = json.loads(p.stdout)
    calm = [x for x in quiet if "calm" in x]
    assert calm and all(x.startswith("PASS") for x in calm), quiet
    calm = [x for x in noisy if "calm" in x]
    assert calm and all(x.startswith("MISSED") and "not resolved" in x for x in calm), noisy
    assert any(x.startswith("PASS") for x in noisy if "ramp" in x), noisy


@test
def comfy_versions_ack_goal_leaves_out_only_held_commands():
    """post -> ack in core nodes: commands for entries no pending node
    reads count against the 100 ms goal; those for entries in use are held
    by design and shown beside it; results from before the split count
    every command."""
    def run(agent):
        r = session_run(1.5, "agent", 0, 2.5, 5, case="batch", ok=2)
        r.update(count=2, agent=dict(agent, commands=5))
        return r

    def ack_line(agent):
        sec = {"versions": ["0.33.0"], "results": [run(agent)], "seconds": 1,
               "method": "m", "runs": 1}
        out = comfy_versions(sec)
        return out["verdicts"][-1], "\n".join(out["report"])

    v, md = ack_line({"core_inactive_ack_ms": {"n": 4, "p50": 1, "p99": 5},
                      "core_active_ack_ms": {"n": 1, "p50": 501, "p99": 501}})
    assert v.startswith("PASS") and "1 commands for active entries" in v, v
    assert "| 1 (501) |" in md, md
    v, _ = ack_line({"core_inactive_ack_ms": {"n": 4, "p50": 1, "p99": 300},
                     "core_active_ack_ms": {"n": 0, "p50": None, "p99": None}})
    assert v.startswith("MISSED") and "300 ms" in v, v
    v, _ = ack_line({"core_ack_ms": {"n": 5, "p50": 1, "p99": 501}})
    assert v.startswith("MISSED") and "501 ms" in v, v


def scaling_out(sec):
    """judge_all, verdicts and report of bench/sections/scaling.py on
    @sec, and its pictures' names, as bench/run.py imports them."""
    d = tempfile.mkdtemp(prefix="ramcache-test-scaling-")
    code = ("import json, sys, pictures; from sections import scaling as s; "
            "sec = json.load(sys.stdin); sec['judged'] = s.judge_all(sec); "
            f"pics = pictures.scaling_pictures({{'scaling': sec}}, {d!r}); "
            "print(json.dumps({'verdicts': s.verdicts(sec), 'pics': pics, "
            "'report': s.report(sec, pics)}))")
    p = subprocess.run([sys.executable, "-c", code],
                       cwd=os.path.join(ROOT, "bench"), input=json.dumps(sec),
                       text=True, capture_output=True, timeout=60)
    for name in os.listdir(d):
        os.unlink(os.path.join(d, name))
    os.rmdir(d)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def scaling_curve(xs, cost, base=0.001):
    """A synthetic curve: CPU (of a core) base + cost(x) at each x."""
    return {"base": {"cpu_frac": base, "rss": 8 << 20},
            "points": [{"x": x, "cpu_frac": base + cost(x), "rss": 8 << 20,
                        "all_attached": True, "seconds": 8,
                        "attach_ms": {"n": x, "p50": 2, "max": 9},
                        "count": x * 8, "followed": x * 8}
                       for x in xs]}


@test
def scaling_verdicts_say_missed_where_a_curve_is_super_linear():
    """The scaling section's verdicts on synthetic curves: a linear one
    passes, a quadratic one (the cost per executor 64 times larger at 64
    than at 1) is MISSED; the report shows both with their pictures."""
    sec = {"method": "m", "factor": 2.0,
           "executors": scaling_curve([1, 4, 16, 64], lambda x: 1e-4 * x),
           "churn": scaling_curve([1, 4, 16], lambda x: 1e-4 * x * x)}
    out = scaling_out(sec)
    v = out["verdicts"]
    assert [x.split()[0] for x in v] == ["PASS", "PASS", "MISSED"], v
    assert "executors appearing and leaving/s, CPU" in v[2], v
    assert "(x16.00;" in v[2] and "1600.00 µs per executor" in v[2], v
    md = "\n".join(out["report"])
    assert md.startswith("## 6. Scaling") and "| 64 | 0.740% |" in md, md
    assert sorted(out["pics"]) == ["BENCHMARKS-scaling-churn.svg",
                                   "BENCHMARKS-scaling-executors.svg"], out
    assert "](BENCHMARKS-scaling-churn.svg)" in md, md
    # a per-unit cost that only noise made small at the first point is
    # not a miss: an increment under the floor counts as the floor
    sec["churn"] = scaling_curve([1, 4, 16], lambda x: 1e-4 * x)
    sec["churn"]["points"][0]["cpu_frac"] = 0.001
    v = scaling_out(sec)["verdicts"]
    assert v[2].startswith("PASS"), v


def merged(old, sec, date="D0"):
    """bench's merge_earlier(@sec, @old, @date) and its report, run in bench/."""
    p = subprocess.run(
        [sys.executable, "-c", "import json, sys; "
         "from sections import comfyui_versions as cv; a = json.load(sys.stdin); "
         "m = cv.merge_earlier(a['sec'], a['old'], a['date']); "
         "print(json.dumps({'m': m, 'md': cv.report(m)}))"],
        cwd=os.path.join(ROOT, "bench"), text=True, capture_output=True,
        timeout=60, input=json.dumps({"old": old, "sec": sec, "date": date}))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    return out["m"], "\n".join(out["md"])


@test
def comfy_versions_some_cases_keep_the_others_from_the_earlier_run():
    """RAMCACHE_COMFYUI_CASES=ten with --merge: the new run's ten rows,
    the earlier run's session rows, and the report says which is which;
    a run of every case keeps nothing of the earlier one."""
    new = [session_run(1.5, "alone", 0, 5.1, case="ten", ok=10)]
    old = {"results": [session_run(1.5, "alone", 0, 9.9, case="ten", ok=10),
                       session_run(6, "alone", 14, 27.8)]}
    sec = {"versions": ["0.33.0"], "results": new, "seconds": 1,
           "method": "m", "runs": 1, "cases": ["ten"]}
    m, md = merged(old, sec)
    walls = sorted((r["case"], r["wall_s"]) for r in m["results"])
    assert walls == [("session", 27.8), ("ten", 5.1)], walls
    assert "rows of session (0.33.0) are from the run of D0" in md
    n, _ = merged(old, dict(sec, cases=None))
    assert len(n["results"]) == 1, n
    # a run of one version keeps the other versions' rows of the same case
    other = dict(session_run(1.5, "alone", 0, 7.7, case="ten", ok=10), version="0.3.64")
    m, _ = merged({"results": old["results"] + [other]}, sec)
    got = sorted((r["case"], r["version"], r["wall_s"]) for r in m["results"])
    assert got == [("session", "0.33.0", 27.8), ("ten", "0.3.64", 7.7),
                   ("ten", "0.33.0", 5.1)], got
    # merged twice: each kept row says the run that measured it
    m, md = merged({"results": old["results"] + [other], "date": "D1",
                    "earlier": {"date": "D0", "cases": ["session"]}}, sec, "D9")
    got = sorted((r["case"], r["version"], r.get("date")) for r in m["results"])
    assert got == [("session", "0.33.0", "D0"), ("ten", "0.3.64", "D1"),
                   ("ten", "0.33.0", None)], got
    assert ("the rows of session (0.33.0) are from the run of D0; the rows of "
            "ten (0.3.64) are from the run of D1") in md, md


def fleet_missing(md, node):
    """What of the fleet table and the DaemonSet's check @md lacks, for
    the node measured (@node: the footprint section's `node`)."""
    se = node["series"]
    n = node["executors"]
    want = [f"| idle, a node: --all following {n} executors in {n} domains |",
            f"### Fleet: 1,000 nodes x {n} executors",
            # the fleet is the measured node x 1,000, the arithmetic shown
            f"| Prometheus series | {se['total']:,} | one scrape | "
            f"{se['total'] * 1000:,} |",
            f"| samples/s at a 15 s scrape | {se['total'] / 15:,.1f} | "
            f"{se['total']} / 15 s | {se['total'] * 1000 / 15:,.0f} |",
            "| scrape traffic at a 15 s scrape | ",
            f"{se['bytes']:,} B / 15 s |", "| agent CPU, idle | ",
            "| agent RSS, idle | "]
    out = [w for w in want if w not in md]
    targets = md.partition("## Targets and misses")[2]
    checks = [ln for ln in targets.splitlines()
              if f"(the DaemonSet, per node of {n} executors): " in ln]
    # a PASS or MISSED for each request and the limit
    if len(checks) != 3 or not all(
            ln.startswith(("- PASS (", "- MISSED (")) for ln in checks):
        out.append(f"3 DaemonSet verdicts in Targets and misses: {checks}")
    return out


def footprint_md(sec):
    """BENCHMARKS.md's footprint section and verdicts for @sec, as
    bench/run.py writes them."""
    code = ("import json, sys, report, verdicts; "
            "f = json.load(sys.stdin); "
            "print('\\n'.join(report.footprint_report(f) + "
            "['## Targets and misses'] + "
            "['- ' + v for v in verdicts.footprint_verdicts(f)]))")
    p = subprocess.run([sys.executable, "-c", code],
                       cwd=os.path.join(ROOT, "bench"), input=json.dumps(sec),
                       text=True, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


@test
def fleet_table_checked_against_a_report_without_it():
    """The fleet table and the DaemonSet's check from a node's figures; a
    footprint section without the node has neither (so the quick run's
    check would fail on it), and a limit under the storm's peak x 1.5 is
    MISSED."""
    idle = {"cpu_frac": 0.0007, "rss": 7 << 20, "drops": 0,
            "kernel_events": {}, "rss_parts": {},
            "series": {"total": 203, "fixed": 131, "per_executor": 67,
                       "executors": 1, "per_domain": 5, "domains": 1,
                       "bytes": 18000, "with_domain": 72, "domain_chars": 7}}
    node = dict(idle, rss=12 << 20, cpu_frac=0.0012, executors=8,
                fault_programs="off",
                series={"total": 707, "fixed": 131, "per_executor": 67,
                        "executors": 8, "per_domain": 5, "domains": 8,
                        "bytes": 92009, "with_domain": 576,
                        "domain_chars": 49})
    sec = {"method": "m", "idle": idle, "idle_executor": idle,
           "targets": {"rss": 8 << 20, "cpu_frac": 0.001},
           "met": {"rss": True, "cpu": True},
           "storm": {"cpu_frac": 0.03, "rss": 23 << 20, "drops": 0,
                     "faults_per_s_of_target": 4e5},
           "daemonset": {"requests": {"cpu": 0.01, "memory": 16 << 20},
                         "limits": {"memory": 64 << 20}, "file": "ds.yaml"}}
    md = footprint_md(dict(sec, node=node))
    assert fleet_missing(md, node) == [], (fleet_missing(md, node), md)
    assert "| bytes of a scrape | 92.0 kB | one scrape | 92.0 MB |" in md, md
    assert "| agent RSS, idle | 12.0 MiB | the node row | 11.7 GiB |" in md
    # 1.5 x (23 MiB + 5 MiB more at 8 executors) = 42 MiB
    assert "- PASS (the DaemonSet, per node of 8 executors): memory limit " \
        "64 MiB, at least 1.5 x (23.0 MiB storm peak + 5.0 MiB" in md, md
    without = footprint_md(dict(sec, node={"skipped": "failed: x"}))
    missing = fleet_missing(without, node)
    assert len(missing) >= 8, missing
    assert "Not measured: the agent on a node of 8 executors" in without
    low = dict(sec, node=node, daemonset={
        "requests": {"cpu": 0.001, "memory": 8 << 20},
        "limits": {"memory": 40 << 20}})
    v = [ln for ln in footprint_md(low).splitlines()
         if "(the DaemonSet, per node" in ln]
    assert [ln.split()[1] for ln in v] == ["MISSED"] * 3, v


@test
def quick_run_writes_a_table():
    res, md = run_quick()
    assert md.startswith("# Benchmarks")
    assert "quick mode" in md
    assert res["machine"]["kernel"] in md
    for h in ("## 1. Fault-path overhead", "## 2. Reaction latency",
              "## 3. Eviction latency", "## 4. Outcomes", "## 5. Footprint",
              "## Targets and misses"):
        assert h in md, h
    assert "| configuration |" in md or "Skipped" in md
    if os.geteuid() == 0:
        for row in ("ramcache-bpf", "PSI-trigger-driven eviction",
                    "ComfyUI-style local eviction", "classic cache"):
            assert row in md, row
        assert "| ComfyUI (Python, real) | - | - | - | - | skipped: " in md
        assert "| Python, from the document (docexec.py) | post -> ack |" \
            in md
        # the per-run costs beside do-nothing programs, and their control
        assert "| control: do-nothing beside do-nothing |" in md
        # the fleet table from the node measured, the DaemonSet's check
        node = res["footprint"]["node"]
        assert fleet_missing(md, node) == [], (fleet_missing(md, node), md)


@test
def quick_run_draws_the_pictures():
    """The ramp of one reaction trial and the outcome runs, as SVG beside
    BENCHMARKS.md and shown in it, drawn from this run's figures."""
    if os.geteuid() != 0:
        raise Skip("needs root: the ramp and the outcomes are not run")
    res, md = run_quick()
    pics = _res["pics"]
    scal = sorted(p for p in pics if p.startswith("BENCHMARKS-scaling-"))
    assert sorted(set(pics) - set(scal)) == ["BENCHMARKS-outcomes.svg",
                                             "BENCHMARKS-ramp.svg"], pics
    # a picture per scaling curve measured (judged) in the quick run
    judged = res["scaling"].get("judged", {})
    assert len(scal) == sum(1 for j in judged.values() if j.get("cpu")), (
        scal, judged)
    assert sorted(res["pictures"]) == sorted(pics)
    for name in pics:
        assert f"]({name})" in md, name
    svgns = "{http://www.w3.org/2000/svg}"
    ramp = ET.fromstring(pics["BENCHMARKS-ramp.svg"])
    marks = [g for g in ramp.iter(svgns + "g")
             if "mark" in (g.get("class") or "").split()]
    kinds = {(g.get("class") or "").split()[1] for g in marks}
    r = res["reaction"]["ramp"]
    want = {k[2:] for k in ("t_reclaim", "t_evict", "t_oom")
            if r.get(k) is not None}
    assert want <= kinds, (want, kinds)
    rss = [e for e in r["events"] if e["type"] == "rss"]
    assert rss and any("rss" in (g.get("class") or "")
                       for g in ramp.iter(svgns + "g"))
    oc = ET.fromstring(pics["BENCHMARKS-outcomes.svg"])
    panels = [g.get("data-name") for g in oc.iter(svgns + "g")
              if "panel" in (g.get("class") or "").split()]
    runs = [x for x in res["outcomes"]["runs"] if x["round"] == 0]
    assert len(panels) == len(runs), panels
    ooms = [x for x in oc.iter(svgns + "line")
            if "oom" in (x.get("class") or "").split()]
    assert len(ooms) == sum(len(x["trace"]["oom"]) for x in runs)


@test
def demo_psi_policy_runs():
    """--policy psi sets its trigger and finishes a small workload."""
    demo = os.path.join(OUTPUT, "ramcache-demo")
    p = subprocess.run([demo, "--policy", "psi", "--json", "--prompts", "2",
                        "--model-size", "4M", "--output-size", "2M",
                        "--steps", "2", "--step-ms", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    done = [json.loads(x) for x in p.stdout.splitlines()
            if '"demo_done"' in x]
    assert done and done[0]["policy"] == "psi", p.stdout[-500:]
    assert "psi_events" in done[0]
    assert "psi: trigger" in p.stderr, p.stderr
    bad = subprocess.run([demo, "--policy", "psi", "--psi-trigger", "x"],
                         capture_output=True, text=True)
    assert bad.returncode == 2


@test
def demo_publish_gives_the_classic_cache_a_control_page():
    """--policy none --publish: entries published, nothing evicted."""
    demo = os.path.join(OUTPUT, "ramcache-demo")
    p = subprocess.run([demo, "--policy", "none", "--publish", "--json",
                        "--prompts", "2", "--model-size", "4M",
                        "--output-size", "2M", "--steps", "2",
                        "--step-ms", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    evs = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    start = [e for e in evs if e["type"] == "demo_start"][0]
    assert start["control"], start
    done = [e for e in evs if e["type"] == "demo_done"][0]
    assert done["evicted"] == 0 and done["policy"] == "none", done


if __name__ == "__main__":
    main()
