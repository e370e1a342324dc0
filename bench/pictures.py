"""Pictures of BENCHMARKS.md, drawn by the report's code (report/rcviz)
from bench/results.json: the reaction ramp (one trial) and the outcome runs.

  bench/pictures.py [results.json] [--out DIR]

bench/run.py calls render() after a run; run alone, it redraws the
pictures from a results.json. Stdlib only; rcviz is loaded from report/
by file (rctest.import_package).
"""
import argparse
import json
import os

from rctest import import_package

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import_package(os.path.join(ROOT, "report", "rcviz"))
from rcviz import svg as S  # noqa: E402
from rcviz import timeline as T  # noqa: E402
from rcviz.chart import Chart, Mark  # noqa: E402
from rcviz.record import STATUS_GROUP, build  # noqa: E402
from sections.scaling import CURVES, picture_name  # noqa: E402

RAMP = "BENCHMARKS-ramp.svg"
OUTCOMES = "BENCHMARKS-outcomes.svg"
OUTCOMES_NOSWAP = "BENCHMARKS-outcomes-noswap.svg"
POLICY_NAME = {"unconstrained": "classic cache, no limit (8 GiB memcg)",
               "none": "classic cache (--policy none)",
               "local": "local check after each node (--policy local)",
               "psi": "PSI trigger (--policy psi)",
               "agent": "ramcache-bpf (--policy agent)"}


def _rel(t_ns, t0_ns):
    return None if t_ns is None else (t_ns - t0_ns) / 1e9


def ramp_svg(ramp):
    """One reaction trial: the classic cache's RSS climbing to the limit,
    and when each mechanism noticed."""
    t0 = ramp["t_start"]
    tl = build(ramp["events"], t0_ns=t0)
    tl.duration = max(tl.duration, _rel(ramp["t_end"], t0) or 0)
    tl.memcg_limit = [(0.0, ramp["limit"]), (tl.duration, ramp["limit"])]
    tl.mem_available = []
    for e in ramp["events"]:
        if e.get("pid") in tl.rss and e.get("comm"):
            tl.comms[e["pid"]] = e["comm"]
    t_rec = ramp.get("t_reclaim")

    def ms_after(t):
        if t_rec is None or t is None:
            return ""
        return f" ({(t - t_rec) / 1e6:+.0f} ms)"

    marks = []
    for key, label, color in (
            ("t_reclaim", "first reclaim stall", "#7570b3"),
            ("t_evict", "ramcache-bpf: first command", "#2e8b3a"),
            ("t_psi", "PSI trigger fired", "#e08a00"),
            ("t_oom", "OOM kill", T.OOM_COLOR)):
        t = ramp.get(key)
        if t is None or t > ramp["t_end"] + 10 ** 9:
            continue
        lab = label + ("" if key == "t_reclaim" else ms_after(t))
        marks.append(Mark(_rel(t, t0), lab, key[2:], color,
                          f"{label} at {_rel(t, t0):.3f} s{ms_after(t)}"))
    c = Chart(tl.duration, width=1000, title="Reaction ramp: the classic "
              "cache in a {} cgroup without swap (one trial)".format(
                  S.fmt_bytes(ramp["limit"])),
              t_label="time since the executor started (s)")
    c.marks(marks)
    T.memory_panel(c, tl)
    T.eviction_panel(c, tl)
    T.stall_panel(c, tl)
    return c.finish()


def outcomes_svg(runs, limit, title):
    """One panel per policy: RSS of the demo against the limit, OOM kills,
    evictions; one round."""
    t_end = max((r["trace"]["t_end"] for r in runs), default=1.0)
    c = Chart(t_end, width=1000, title=title,
              t_label="time since the workload started (s)")
    hi = max([limit] + [v for r in runs for _, v in r["trace"]["rss"]])
    dom = (0, hi * 1.08)
    ticks = S.byte_ticks(dom[1], 3)
    for r in runs:
        tr = r["trace"]
        lim = tr.get("limit", limit)
        outcome = ("finished" if r["finished"] else
                   "OOM-killed" if r["oom_kills"] else f"exit {r['rc']}")
        name = POLICY_NAME.get(r["policy"], r["policy"])
        items = [("RSS", "line", {"stroke": T.PALETTE[0],
                                  "stroke_width": 2})]
        if lim < dom[1]:
            items.append(("limit", "line", {"stroke": T.OOM_COLOR,
                                            "stroke_dasharray": "6 3"}))
        if tr["evict"]:
            items.append((f"{len(tr['evict'])} evictions (ticks: green "
                          "evicted, orange busy, red lost)", "rect",
                          {"fill": T.STATUS_COLOR["evicted"]}))
        p = c.panel(f"{name}: {outcome}", 70, items, dom, S.fmt_bytes,
                    ticks)
        p.add(f'<g class="series rss" data-policy="{r["policy"]}">'
              + S.polyline(tr["rss"], c.sx, p.sy, stroke=T.PALETTE[0],
                           stroke_width=2) + "</g>")
        if lim < dom[1]:
            y = p.sy(lim)
            p.add(S.el("line", x1=c.left, y1=y, x2=c.right, y2=y,
                       stroke=T.OOM_COLOR, stroke_dasharray="6 3"))
        for t, status in tr["evict"]:
            x = c.sx(t)
            p.add(S.el("line", x1=x, y1=p.y1 - 8, x2=x, y2=p.y1 - 1,
                       stroke=T.STATUS_COLOR.get(
                           STATUS_GROUP.get(status, "not_found"),
                           "#888"), class_="evict",
                       title=f"eviction at {t:.3f} s: {status}"))
        for t in tr["oom"]:
            x = c.sx(t)
            p.add(S.el("line", x1=x, y1=p.y0, x2=x, y2=p.y1,
                       stroke=T.OOM_COLOR, stroke_width=2, class_="oom",
                       title=f"OOM kill at {t:.3f} s"))
            lab = "OOM kill"
            tx = x + 4 if x + 4 + S.text_width(lab) < c.right else \
                x - 4 - S.text_width(lab)
            p.add(S.text(tx, p.y0 + 14, lab, fill=T.OOM_COLOR,
                         font_weight="bold"))
        if tr.get("finished_t") is not None and r["finished"]:
            x = c.sx(tr["finished_t"])
            p.add(S.el("line", x1=x, y1=p.y0, x2=x, y2=p.y1,
                       stroke="#2e8b3a", stroke_width=2,
                       title=f"finished at {tr['finished_t']:.2f} s"))
            lab = "finished"
            tx = x + 4 if x + 4 + S.text_width(lab) < c.right else \
                x - 4 - S.text_width(lab)
            p.add(S.text(tx, p.y0 + 14, lab, fill="#2e8b3a",
                         font_weight="bold"))
    return c.finish()


def scaling_svg(name, curve, judged, title):
    """One scaling curve: the agent's CPU at each point (log x) against
    the line a linear cost would follow from the smallest point, and the
    factor the verdict allows above it."""
    key = judged["key"]
    base = (curve.get("base") or {}).get(key) or 0
    pts = sorted((p["x"], p[key]) for p in curve["points"]
                 if p.get(key) is not None and p.get("x"))
    u = judged["per_unit"][0]
    x0, x1 = pts[0][0], pts[-1][0]
    scale = 1e6 if key == "cpu_per_eval_s" else 100
    unit = "µs per evaluation" if scale == 1e6 else "% of a core"
    top = max(max(v for _, v in pts), base + 2 * u * x1) * scale * 1.1
    W, H, L, R, T, B = 640, 320, 70, 20, 40, 50
    sx = S.LogScale(x0 / 1.5, x1 * 1.5, L, W - R)
    sy = S.Scale(0, top, H - B, T)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" '
             f'height="{H}" font-family="sans-serif">',
             S.text(L, 22, title, font_weight="bold")]
    for v in S.ticks(0, top, 5)[0]:
        parts += [S.el("line", x1=L, x2=W - R, y1=sy(v), y2=sy(v),
                       stroke="#ddd"),
                  S.text(L - 6, sy(v) + 4, f"{v:g}", anchor="end")]
    for x, _ in pts:
        parts.append(S.text(sx(x), H - B + 16, f"{x:g}", anchor="middle"))
    parts.append(S.text(L + (W - L - R) / 2, H - 12, f"{name} (log)",
                        anchor="middle"))
    parts.append(S.text(12, T - 8, unit))
    for f, dash in ((1, None), (2, "4 3")):
        line = [(x, (base + f * u * x) * scale)
                for x in (x0, x0 * 2, x1 / 2, x1) if x0 <= x <= x1]
        parts.append(S.polyline(line, sx, sy, stroke="#999",
                                stroke_dasharray=dash, class_=f"linear{f}"))
    parts.append(S.polyline([(x, v * scale) for x, v in pts], sx, sy,
                            stroke="#2e8b3a", stroke_width=2,
                            class_="measured"))
    for x, v in pts:
        parts.append(S.el("circle", cx=sx(x), cy=sy(v * scale), r=3.5,
                          fill="#2e8b3a", title=f"{x:g}: {v * scale:.3g}"))
    return "".join(parts) + "</svg>"


def scaling_pictures(res, outdir):
    """One SVG per judged scaling curve; their file names."""
    sc = res.get("scaling") or {}
    written = []
    for name, j in (sc.get("judged") or {}).items():
        if not (j.get("cpu") and sc.get(name, {}).get("points")):
            continue
        fname, x = picture_name(name), CURVES[name]["x"]
        title = (f"Agent CPU against {x}: measured (green), linear from "
                 "the smallest point (grey), x2 (dashed)")
        with open(os.path.join(outdir, fname), "w") as f:
            f.write(scaling_svg(x, sc[name], j["cpu"], title))
        written.append(fname)
    return written


def render(res, outdir):
    """Writes the pictures res has data for; returns their file names."""
    written = []
    ramp = (res.get("reaction") or {}).get("ramp")
    if ramp:
        with open(os.path.join(outdir, RAMP), "w") as f:
            f.write(ramp_svg(ramp))
        written.append(RAMP)
    for key, label, name in (("outcomes", "with zram swap", OUTCOMES),
                             ("outcomes_noswap", "without swap",
                              OUTCOMES_NOSWAP)):
        oc = res.get(key) or {}
        runs = [r for r in oc.get("runs", []) if r.get("trace")
                and r.get("round", 0) == 0]
        if not runs:
            continue
        label = label if oc.get("swap", key == "outcomes") else \
            "without swap"
        limit = max(r["trace"].get("limit", 0) for r in runs
                    if r["policy"] != "unconstrained")
        svg = outcomes_svg(runs, limit, "Outcomes: the demo workload in a "
                           f"{S.fmt_bytes(limit)} cgroup {label}, one round")
        with open(os.path.join(outdir, name), "w") as f:
            f.write(svg)
        written.append(name)
    return written + scaling_pictures(res, outdir)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?",
                    default=os.path.join(ROOT, "bench", "results.json"))
    ap.add_argument("--out", default=ROOT)
    a = ap.parse_args()
    with open(a.results) as f:
        res = json.load(f)
    for name in render(res, a.out):
        print(os.path.join(a.out, name))


if __name__ == "__main__":
    main()
