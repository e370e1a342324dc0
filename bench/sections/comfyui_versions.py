"""Section "comfyui_versions" of `make bench`: ComfyUI alone against ComfyUI
with the package and ramcache-bpf, in every real version kept in
../shared/comfyui, side by side in one run, with PASS/MISSED verdicts for
the goals of issues 24 and 29.

It runs comfyui/tests/real_comfyui.py table (its JSON is the interface; the
runner says how ComfyUI is started and what each workload is): for each
version the reuse session at a limit with room (6 GiB), where everything
just fits (2.5 GiB) and tight (1.5 GiB), and the 10-prompt run (1.5 GiB),
ComfyUI's default cache against the package + agent with the README's
command line, configurations in alternating turns; on the newest version
also --cache-classic and the package + agent with ComfyUI's default
cache, and the long-node and large-batch cases. bench() runs, report()
and verdicts() are pure over its result.
"""
import json
import os
import shutil
import subprocess
import sys
import time

from common import OUTPUT, ROOT, is_root, log

RUNNER = os.path.join(ROOT, "comfyui", "tests", "real_comfyui.py")
NEWEST = "0.33.0"
GiB = 1 << 30
# (versions: "all", "older" or "newest"; cases; limits; configurations;
# turns per run asked for). On the newest version every cache is compared
# in one table, where a configuration whose command line is another's runs
# once. The short cases judged on a few percent of wall time take more
# turns: one turn of the 10-prompt run varies by a fifth either way on this
# machine (x0.80..x1.20 in 4 paired turns of 0.3.64), so it is judged on
# the median of its turns side by side.
TEN_TURNS, BATCH_TURNS = 5, 3
PLAN = [("newest", ["session"], ["6G", "2.5G", "1.5G"],
         ["alone:default", "alone:classic", "agent:recommended", "agent:default"], 1),
        ("older", ["session"], ["6G", "2.5G", "1.5G"], ["alone:default", "agent:recommended"],
         1),
        ("all", ["ten"], ["1.5G"], ["alone:default", "agent:recommended"], TEN_TURNS),
        ("newest", ["long"], ["1.5G"], ["alone:default", "agent:recommended"], 1),
        ("newest", ["batch"], ["1.5G"], ["alone:default", "agent:recommended"],
         BATCH_TURNS)]
HITS_WITH_ROOM = 80  # of the session's 125 nodes (87 at most)
SLOWER = 1.05  # "never slower than ComfyUI alone by more than 5%"
ACK_P99_MS = 100


def versions():
    """The versions the runner can run here ([] without the trees)."""
    p = subprocess.run([sys.executable, RUNNER, "versions"], capture_output=True, text=True,
                       timeout=60)
    return p.stdout.split() if p.returncode == 0 else []


def bench_comfyui_versions(cfg):
    """The section, when RAMCACHE_COMFYUI_VERSIONS asks for it: 'all' or a
    list of versions (it takes hours on 2 cores)."""
    asked = os.environ.get("RAMCACHE_COMFYUI_VERSIONS")
    c = cfg.get("comfy_versions")
    if not c:
        return {"skipped": "quick mode never runs real ComfyUI"}
    if not asked:
        return {"skipped": "set RAMCACHE_COMFYUI_VERSIONS=all (or a list of "
                "versions): `sudo make bench RAMCACHE_COMFYUI_VERSIONS=all`"}
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    # kept: the runner's own JSON (per prompt and node) and logs of each table
    d = os.path.join(OUTPUT, "bench", "comfyui-versions")
    os.makedirs(d, exist_ok=True)
    cases = os.environ.get("RAMCACHE_COMFYUI_CASES")
    return bench(dict(c, versions=None if asked == "all" else asked.split(),
                      cases=cases.split(",") if cases else None), d)


def bench(cfg, scratch):
    """Every run of PLAN (cfg: {"runs", "versions", "timeout"}); the
    results as the runner wrote them, and how they were measured."""
    have = versions()
    want = [v for v in (cfg.get("versions") or have) if v in have]
    if not want:
        return {"skipped": "no real ComfyUI: ../shared/comfyui is absent "
                "(RAMCACHE_COMFYUI_TREES names another folder)"}
    results, t0 = [], time.monotonic()
    for i, (which, cases, limits, only, turns) in enumerate(PLAN):
        cases = [c for c in cases if not cfg.get("cases") or c in cfg["cases"]]
        if not cases:
            continue
        vs = {"all": want, "newest": [NEWEST],
              "older": [v for v in want if v != NEWEST]}[which]
        vs = [v for v in vs if v in want]
        if not vs:
            continue
        out = os.path.join(scratch, f"plan{i}")
        shutil.rmtree(out, ignore_errors=True)  # an earlier run's results are not this one's
        argv = [sys.executable, RUNNER, "table", "--versions", *vs, "--cases", *cases,
                "--limits", *limits, "--only", *only, "--runs", str(cfg["runs"] * turns),
                "--out", out]
        log(f"comfyui versions: {' '.join(argv[2:])}")
        run_table(argv, os.path.join(scratch, f"plan{i}.log"), cfg["timeout"])
        try:
            with open(os.path.join(out, "results.json")) as f:
                results += json.load(f)
        except (OSError, ValueError) as e:
            results.append({"error": f"plan {i}: no results ({e})"})
    for r in results:
        r.pop("prompts", None)  # per-node detail stays in the runner's JSON
        (r.get("agent") or {}).pop("evict_done", None)
    return {"versions": want, "runs": cfg["runs"], "seconds": round(time.monotonic() - t0),
            "method": method(cfg), "results": results, "cases": cfg.get("cases"),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def merge_earlier(sec, old, date):
    """A run of some cases or versions only (RAMCACHE_COMFYUI_CASES, a list
    in RAMCACHE_COMFYUI_VERSIONS) with `--merge`: the rows of the other
    (case, version) pairs come from the earlier run @old (of @date), each
    stamped with the date of the run that measured it, said so in the
    report."""
    if "results" not in sec or "results" not in (old or {}):
        return sec
    ran_cases, ran_versions = sec.get("cases"), set(sec.get("versions") or ())
    kept = [dict(r, date=row_date(r, old, date)) for r in old["results"]
            if "error" not in r and not ((not ran_cases or r.get("case") in ran_cases)
                                         and r.get("version") in ran_versions)]
    if not kept:
        return sec
    by_date = {}
    for r in kept:
        by_date.setdefault(r["date"], set()).add(f"{r.get('case')} ({r.get('version')})")
    return dict(sec, results=sec["results"] + kept,
                earlier={"dates": {d: sorted(p) for d, p in sorted(by_date.items())}})


def row_date(r, old, date):
    """When row @r of the earlier run @old was measured: its own stamp, or
    that of the run before it that @old kept it from, or @old's."""
    if r.get("date"):
        return r["date"]
    e = (old or {}).get("earlier") or {}
    if r.get("case") in e.get("cases", ()) and e.get("date"):
        return e["date"]
    return old.get("date", date)


def run_table(argv, logpath, timeout):
    """The runner's table; past @timeout SIGTERM, on which it stops ComfyUI
    and the agent and removes its cgroup."""
    with open(logpath, "w") as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"comfyui versions: no end in {timeout} s, stopping the runner")
            p.terminate()
            p.wait()


def method(cfg):
    return (f"comfyui/tests/real_comfyui.py table, {cfg['runs']} turn(s) of each "
            f"configuration ({TEN_TURNS * cfg['runs']} of the 10-prompt run and "
            f"{BATCH_TURNS * cfg['runs']} of the large batch, each judged on the median of "
            "its turns' ratios, agent over alone, turn by turn), alternating: ComfyUI's own main.py --cpu (Debian's "
            "python3-torch) in a scratch memory cgroup without swap at the limit shown, "
            "alone or with the package and `ramcache-bpf --pid` (defaults). The reuse "
            "session: 20 prompts of four workflows on 2048x2048 images (Blur, Sharpen, "
            "Invert, lanczos and bicubic ScaleBy, Blend) alternated A B A' C B' A D C' "
            "D' A'' ..., 125 node executions, 38 with a cache that keeps everything; "
            "hits are the nodes of finished prompts ComfyUI did not run (its "
            "websocket's executing messages): taken from its cache, or not needed "
            "because what reads them was. The 10-prompt run: EmptyImage 1024x1024x16 -> ImageInvert -> "
            "ImageScale -> PreviewImage, ~384 MiB cached per prompt. Long node: a test "
            "node, first of its prompt (so no ComfyUI check runs before it), growing "
            "RAM by 1 GiB over 10 s in ProgressBar steps after a prompt that cached 384 "
            "MiB, three times; large batch: ImageScaleBy lanczos x1.5 of 16 1024x1024 "
            "images (~1 GiB at its peak, no progress hook) after the same: both fit "
            "in 1.5 GiB only once the earlier output is gone. post -> ack: the agent's evict_done "
            "ack_latency_ns of commands posted while a core node ran, for entries the page "
            "showed inactive (served inside the node) and, apart, for active ones (a pending "
            "node reads them: held until it is done)")


# ----------------------------------------------------------------- report

def pick(results, version, case, limit, mode, cache):
    """The runs of one configuration (every turn)."""
    return [r for r in results if "error" not in r and r["version"] == version
            and r["case"] == case and abs(r["limit"] - limit * GiB) < GiB / 16
            and r["mode"] == mode and r["cache"] == cache]


def hits(r):
    """Nodes ComfyUI did not have to run (older results: those it listed as cached)."""
    return r.get("hits", r.get("cached"))


def med(runs, key):
    get = hits if key == "hits" else (lambda r: r.get(key))
    v = sorted(get(r) for r in runs if get(r) is not None)
    return v[len(v) // 2] if v else None


def ms(v):
    return "-" if v is None else f"{v:.0f}"


def row(r):
    ag = r.get("agent") or {}
    core, held = core_acks(ag)
    who = "ComfyUI alone" if r["mode"] == "alone" else "package + agent"
    reasons = ", ".join(f"{k} {v}" for k, v in sorted((ag.get("by_reason") or {}).items()))
    cmds = "-" if r["mode"] == "alone" else str(ag.get("commands", 0))
    return (f"| {r['version']} | {r['case']} | {r['limit'] / GiB:g} GiB | {who}, "
            f"`{' '.join(r['args']) or 'default cache'}` | {r.get('ok')}/{r.get('count')} | "
            f"{r.get('wall_s', 0):.1f} | {r.get('executed')} / {hits(r)} | "
            f"{r.get('oom_kills')} | {cmds}{' (' + reasons + ')' if reasons else ''} | "
            f"{ms(core.get('p50'))} / {ms(core.get('p99'))} | {held.get('n', 0) or '-'}"
            f"{' (' + ms(held.get('p99')) + ')' if held.get('n') else ''} |")


def core_acks(ag):
    """post -> ack while a core node ran: of inactive entries (served in
    the node), and of active ones (held until no pending node reads them).
    Results from before the split: all of them as served."""
    if "core_inactive_ack_ms" not in ag:
        return ag.get("core_ack_ms") or {}, {}
    return ag["core_inactive_ack_ms"] or {}, ag.get("core_active_ack_ms") or {}


def report(sec):
    """Markdown lines of the section."""
    L = ["## ComfyUI alone and with the agent, every real version", ""]
    if "skipped" in sec:
        return L + [f"Skipped: {sec['skipped']}", ""]
    L += [sec["method"] + ".", "",
          "| version | case | limit | configuration | prompts ok | wall s | executed / "
          "hits | OOM kills | agent commands (by reason) | post -> ack p50 / p99 ms "
          "(core nodes, inactive entries) | held: commands for active entries in core "
          "nodes (p99 ms) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    order = {"session": 0, "ten": 1, "long": 2, "batch": 3}
    done = sorted((r for r in sec["results"] if "error" not in r), key=lambda r: (
        sec["versions"].index(r["version"]) if r["version"] in sec["versions"] else 99,
        order.get(r["case"], 9), -r["limit"], r["mode"] != "alone", r["cache"]))
    L += [row(r) for r in done]
    L += [f"- {r.get('version')} {r.get('case')} {r.get('mode')} {r.get('cache')}: "
          f"{r['error']}" for r in sec["results"] if "error" in r]
    L += ["", f"{len(sec['results'])} runs in {sec['seconds']} s."]
    if sec.get("earlier"):
        e = sec["earlier"]
        what = ", ".join(sec.get("cases") or ["every case"])
        dates = e.get("dates") or {e.get("date"): e.get("cases", [])}
        L += [f"This run measured {what} in {', '.join(sec.get('versions') or [])}; "
              + "; ".join(f"the rows of {', '.join(p)} are from the run of {d}"
                          for d, p in dates.items()) + "."]
    return L + [""]


# --------------------------------------------------------------- verdicts

def verdict(ok, text):
    return ("PASS" if ok else "MISSED") + f" {text}"


def session_verdicts(res, v):
    """Issue 29's goals for the reuse session in version @v."""
    out = []
    for limit, where in ((6, "with room (6 GiB)"), (2.5, "where everything fits (2.5 GiB)")):
        ag = pick(res, v, "session", limit, "agent", "recommended")
        alone = pick(res, v, "session", limit, "alone", "default")
        if not ag:
            continue
        cmds = max((r.get("agent") or {}).get("commands", 0) for r in ag)
        least = min(hits(r) or 0 for r in ag)
        out.append(verdict(cmds == 0 and least >= HITS_WITH_ROOM and all(
            r["ok"] == r["count"] for r in ag),
            f"({v}, reuse session {where}): the agent evicts nothing and keeps the hits: "
            f"{cmds} commands, {least} hits (goal >= {HITS_WITH_ROOM} of 125); ComfyUI alone "
            f"{med(alone, 'hits')} hits, {med(alone, 'wall_s')} s against "
            f"{med(ag, 'wall_s')} s"))
    ag = pick(res, v, "session", 1.5, "agent", "recommended")
    alone = pick(res, v, "session", 1.5, "alone", "default")
    if ag and alone:
        ratio = med(ag, "wall_s") / med(alone, "wall_s")
        ok = (med(ag, "hits") >= med(alone, "hits") and ratio <= SLOWER
              and all(r.get("oom_kills") == 0 for r in ag))
        out.append(verdict(ok, f"({v}, reuse session, tight 1.5 GiB): {med(ag, 'hits')} "
                           f"hits against {med(alone, 'hits')} alone, wall time x{ratio:.2f} "
                           f"of ComfyUI alone (goal <= {SLOWER}), OOM kills "
                           f"{[r.get('oom_kills') for r in ag]}"))
    return out


def paired_ratios(ag, alone):
    """Wall time with the agent over ComfyUI alone, turn by turn (the
    runner alternates the configurations, so turn i of each ran side by
    side: the machine's drift over the run cancels); sorted."""
    base = {r["turn"]: r["wall_s"] for r in alone
            if r.get("wall_s") and r.get("turn") is not None}
    return sorted(r["wall_s"] / base[r["turn"]] for r in ag
                  if r.get("wall_s") and base.get(r.get("turn")))


def ratio_text(ag, alone):
    """(ratio, its words): the median of the paired ratios with their
    range, or the ratio of the medians when turns cannot be paired."""
    rs = paired_ratios(ag, alone)
    if len(rs) >= 2:
        r = rs[len(rs) // 2] if len(rs) % 2 else (rs[len(rs) // 2 - 1] + rs[len(rs) // 2]) / 2
        return r, (f"x{r:.2f}, the median of {len(rs)} turns side by side "
                   f"(each x{rs[0]:.2f}..x{rs[-1]:.2f})")
    r = med(ag, "wall_s") / med(alone, "wall_s")
    return r, f"x{r:.2f}"


def ten_verdict(res, v):
    ag = pick(res, v, "ten", 1.5, "agent", "recommended")
    alone = pick(res, v, "ten", 1.5, "alone", "default")
    if not (ag and alone):
        return []
    both = all(r["ok"] == r["count"] for r in ag + alone)
    ratio, words = ratio_text(ag, alone)
    return [verdict(both and ratio <= SLOWER,
                    f"({v}, 10-prompt run, 1.5 GiB): with the agent {words} the wall time "
                    f"of ComfyUI alone (goal <= {SLOWER}; medians {med(ag, 'wall_s')} s against "
                    f"{med(alone, 'wall_s')} s; prompts ok {[r['ok'] for r in ag]} against "
                    f"{[r['ok'] for r in alone]})")]


def survive_verdicts(res):
    out = []
    for case, what in (("long", "a node growing RAM for 10 s"),
                       ("batch", "ImageScaleBy lanczos of a large batch")):
        ag = pick(res, NEWEST, case, 1.5, "agent", "recommended")
        alone = pick(res, NEWEST, case, 1.5, "alone", "default")
        if ag:
            ok = all(r["ok"] == r["count"] and r.get("oom_kills") == 0 for r in ag)
            # where ComfyUI alone finishes too, the agent must not make it slower
            both = bool(alone) and all(r["ok"] == r["count"] and not r.get("oom_kills")
                                       for r in alone)
            slower = ""
            if both:
                ratio, words = ratio_text(ag, alone)
                ok = ok and ratio <= SLOWER
                slower = (f"; both finish: wall time {words} of ComfyUI alone "
                          f"(goal <= {SLOWER})")
            out.append(verdict(ok, f"({NEWEST}, {what} after a cached prompt, 1.5 GiB): "
                               f"with the agent {[r['ok'] for r in ag]}/{ag[0]['count']} "
                               f"prompts, OOM kills {[r.get('oom_kills') for r in ag]}; "
                               f"ComfyUI alone {[r['ok'] for r in alone]}, OOM kills "
                               f"{[r.get('oom_kills') for r in alone]}{slower}"))
    return out


def ack_verdict(res):
    """Commands for entries no pending node reads are served inside any
    node; those for entries in use are held until the node is done (by
    design: not counted against the goal, shown beside it)."""
    runs = [core_acks(r.get("agent") or {}) for r in res
            if r.get("mode") == "agent" and "error" not in r]
    p99 = [c.get("p99") for c, _ in runs if c.get("p99") is not None]
    held = [h.get("p99") for _, h in runs if h.get("p99") is not None]
    if not p99:
        return []
    also = (f"; {sum(h.get('n', 0) for _, h in runs)} commands for active entries, "
            f"held until their node was done, p99 up to {max(held):.0f} ms"
            if held else "; no command for an active entry")
    return [verdict(max(p99) <= ACK_P99_MS,
                    f"(post -> ack during core nodes, every agent run, entries no pending "
                    f"node reads): p99 per run {min(p99):.0f}-{max(p99):.0f} ms (goal <= "
                    f"{ACK_P99_MS} ms){also}")]


def verdicts(sec):
    """PASS/MISSED lines for the goals of issues 24 and 29."""
    if not sec or "results" not in sec:
        return []
    res = sec["results"]
    out = []
    for v in sec["versions"]:
        out += session_verdicts(res, v) + ten_verdict(res, v)
    return out + survive_verdicts(res) + ack_verdict(res)
