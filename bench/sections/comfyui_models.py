"""Section "comfyui_models" of `make bench`: real model loads in real
ComfyUI, alone against the package and ramcache-bpf, side by side in one
run, with PASS/MISSED verdicts for the goals of issue 39.

It runs comfyui/tests/real_comfyui.py table (its JSON is the interface)
on the model session (real_workloads.models: a user switching between
three SD1.5 checkpoints and two LoRAs, re-running prompts with a new seed,
ten prompts CheckpointLoaderSimple [-> LoraLoader] -> CLIPTextEncode ->
KSampler -> VAEDecode) with modelkit's generated files: full-size
checkpoints (2.1 GB on disk, ~3.9 GiB in RAM on CPU) on the newest
version, small ones (441 MB, ~0.7 GiB) on the newest and the oldest, at a
limit with room for all three models, one that holds two, and one that
holds one and the outputs. bench() runs; report() and verdicts() are pure
over its result.
"""
import json
import mmap
import os
import resource
import shutil
import sys
import time

from common import OUTPUT, is_root, log
from sections import comfyui_versions as cv

RUNNER = cv.RUNNER
NEWEST, OLDEST = "0.33.0", "0.3.64"
GiB = 1 << 30
# (version, case, limits: room for all, two, one; configurations)
PLAN = [(NEWEST, "models-full", ["16G", "11G", "7G"],
         ["alone:default", "alone:classic", "agent:default"]),
        (NEWEST, "models", ["3.5G", "2.2G", "1.5G"],
         ["alone:default", "alone:classic", "agent:default"]),
        (OLDEST, "models", ["3.5G", "2.2G", "1.5G"], ["alone:default", "agent:recommended"])]
ROOM = {0: "all three", 1: "two", 2: "one and the outputs"}
WALL_SLACK = 1.05  # one run each: what the machine's drift alone can swing


def bench_comfyui_models(cfg):
    """The section, when RAMCACHE_COMFYUI_MODELS asks for it (about an hour
    and a half on 2 cores): "all", "small" (the small models only) or
    "full" (the full-size ones only, about 50 minutes)."""
    asked = os.environ.get("RAMCACHE_COMFYUI_MODELS")
    if not cfg.get("comfy_versions"):
        return {"skipped": "quick mode never runs real ComfyUI"}
    if not asked:
        return {"skipped": "set RAMCACHE_COMFYUI_MODELS=all (or small): "
                "`sudo make bench RAMCACHE_COMFYUI_MODELS=all`"}
    if not is_root():
        return {"skipped": "needs root (memcg, BPF)"}
    d = os.path.join(OUTPUT, "bench", "comfyui-models")
    os.makedirs(d, exist_ok=True)
    if asked not in ("all", "small", "full"):
        return {"skipped": f"RAMCACHE_COMFYUI_MODELS={asked!r}: say all, small or full"}
    return bench(dict(cfg["comfy_versions"], only=asked), d)


def bench(cfg, scratch):
    """Every run of PLAN; the results as the runner wrote them."""
    have = cv.versions()
    results, t0 = [], time.monotonic()
    for i, (version, case, limits, only) in enumerate(PLAN):
        full = case.endswith("-full")
        if version not in have or (cfg.get("only") == "small" and full) or \
                (cfg.get("only") == "full" and not full):
            continue
        out = os.path.join(scratch, f"plan{i}")
        shutil.rmtree(out, ignore_errors=True)
        argv = [sys.executable, RUNNER, "table", "--versions", version, "--cases", case,
                "--limits", *limits, "--only", *only, "--runs", "1", "--out", out]
        log(f"comfyui models: {' '.join(argv[2:])}")
        cv.run_table(argv, os.path.join(scratch, f"plan{i}.log"), cfg["timeout"] * 4)
        try:
            with open(os.path.join(out, "results.json")) as f:
                results += json.load(f)
        except (OSError, ValueError) as e:
            results.append({"error": f"plan {i}: no results ({e})"})
    for r in results:
        r.pop("prompts", None)
        (r.get("agent") or {}).pop("evict_done", None)
    return {"seconds": round(time.monotonic() - t0), "results": results,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "method": METHOD, "fault_us": fault_cost_us()}


def fault_cost_us(size=256 << 20, turns=3):
    """What one minor fault on fresh anonymous memory costs on this machine
    (us, the median of @turns touching @size a page at a time): a run's
    extra faults times this is the time they took. Machines differ by 20x
    here (a nested VM against bare metal), so the wall time of runs that
    fault more moves with it."""
    page, costs = mmap.PAGESIZE, []
    for _ in range(turns):
        m = mmap.mmap(-1, size)
        f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.monotonic()
        for off in range(0, size, page):
            m[off] = 1
        dt = time.monotonic() - t0
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        m.close()
        if faults > 0:
            costs.append(dt / faults * 1e6)
    return round(sorted(costs)[len(costs) // 2], 2) if costs else None


METHOD = ("comfyui/tests/real_comfyui.py table, one turn of each configuration in turn: "
          "ComfyUI's own main.py --cpu (Debian's python3-torch 1.13) in a scratch memory "
          "cgroup without swap at the limit shown, alone or with the package and "
          "`ramcache-bpf --pid` (defaults). Models: comfyui/tests/modelkit's SD1.5 "
          "checkpoints built with ComfyUI's own classes, random fp16 weights, loaded by "
          "ComfyUI's own nodes through stand-ins only for what Debian 12 lacks "
          "(safetensors: the real format and its private file mapping; einops; the CLIP "
          "tokenizer). The session: A B A+LoRA1 C A' B+LoRA2 A+LoRA1' C' B' A'' (' a new "
          "seed), each CheckpointLoaderSimple [-> LoraLoader] -> CLIPTextEncode -> "
          "KSampler (64x64, 1 step) -> VAEDecode -> PreviewImage; model loads are the "
          "loader nodes ComfyUI ran (websocket), their seconds the nodes' own; hits the "
          "nodes of finished prompts it did not run. Each run starts with the model files out of the "
          "page cache (posix_fadvise DONTNEED): what an earlier run read is read from disk again")


# ----------------------------------------------------------------- report

def configs(results, version, case, limit):
    return [r for r in results if "error" not in r and r.get("version") == version
            and r.get("case") == case and abs(r["limit"] - limit) < GiB / 16]


def loads(r):
    return (r.get("model_loads") or {}).get("count")


def load_s(r):
    return (r.get("model_loads") or {}).get("seconds")


def cpu(r):
    """ComfyUI's (user s, sys s, minor faults) over the run, or Nones."""
    p = r.get("proc") or {}
    return p.get("user_s"), p.get("sys_s"), p.get("minflt")


def row(r):
    who = "ComfyUI alone" if r["mode"] == "alone" else "package + agent"
    ag = r.get("agent") or {}
    user, sys_s, faults = cpu(r)
    return (f"| {r['version']} | {'full' if r['case'].endswith('-full') else 'small'} | "
            f"{r['limit'] / GiB:g} GiB | {who}, `{' '.join(r['args']) or 'default cache'}` | "
            f"{r.get('ok')}/{r.get('count')} | {loads(r)} | {load_s(r)} | "
            f"{r.get('hits')} | {r.get('wall_s', 0):.1f} | "
            f"{'-' if user is None else f'{user:.0f} / {sys_s:.0f}'} | "
            f"{'-' if faults is None else f'{faults / 1e6:.2f}'} | {r.get('oom_kills')} | "
            f"{(r.get('peak_bytes') or 0) / GiB:.2f} | "
            f"{'-' if r['mode'] == 'alone' else ag.get('commands', 0)} |")


def where_time_went(results, fault_us):
    """A line per limit where both finished: the agent's run against ComfyUI
    alone's default cache in wall, user and kernel seconds and minor faults
    (and, with @fault_us, what those faults cost on this machine)."""
    out = []
    for version, case, limits, _ in PLAN:
        for lim in limits:
            runs = configs(results, version, case, cv_size(lim))
            alone = [r for r in runs if r["mode"] == "alone" and r["cache"] == "default"]
            agent = [r for r in runs if r["mode"] == "agent"]
            if not (alone and agent and finished(alone[0]) and finished(agent[0])):
                continue
            (au, asy, af), (gu, gsy, gf) = cpu(alone[0]), cpu(agent[0])
            if None in (au, asy, af, gu, gsy, gf):
                continue
            cost = "" if not fault_us else \
                f" (at {fault_us:g} us a fault here: {(gf - af) * fault_us / 1e6:+.0f} s)"
            wall = agent[0]["wall_s"] - alone[0]["wall_s"]
            out.append(f"- {version} {case} {lim}: the agent's run {wall:+.1f} s wall, "
                       f"{gu - au:+.1f} s user, "
                       f"{gsy - asy:+.1f} s in the kernel, {(gf - af) / 1e6:+.2f} M minor "
                       f"faults{cost} against ComfyUI alone")
    return out


def report(sec):
    L = ["## Real model loads: ComfyUI alone and with the agent", ""]
    if "skipped" in sec:
        return L + [f"Skipped: {sec['skipped']}", ""]
    L += [sec["method"] + ".", "",
          "| version | models | limit | configuration | prompts ok | model loads | load s | "
          "hits | wall s | ComfyUI's user / sys s | minor faults (M) | OOM kills | peak GiB | "
          "agent commands |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    done = [r for r in sec["results"] if "error" not in r]
    done.sort(key=lambda r: (r["version"] != NEWEST, not r["case"].endswith("-full"),
                             -r["limit"], r["mode"] != "alone", r["cache"]))
    L += [row(r) for r in done]
    L += [f"- {r['error']}" for r in sec["results"] if "error" in r]
    L += ["", f"{len(sec['results'])} runs in {sec['seconds']} s ({sec['date']}).", ""]
    went = where_time_went(sec["results"], sec.get("fault_us"))
    if went:
        L += ["Where the wall time went (ComfyUI's own CPU seconds and page faults, "
              "from /proc/PID/stat):", ""] + went + [""]
    return L


# --------------------------------------------------------------- verdicts

def verdicts(sec):
    """"PASS ..." / "MISSED ..." for each (version, models, limit): the
    package + agent against ComfyUI alone's default cache."""
    if "skipped" in sec:
        return []
    out = []
    for version, case, limits, _ in PLAN:
        for i, lim in enumerate(limits):
            runs = configs(sec["results"], version, case, cv_size(lim))
            alone = [r for r in runs if r["mode"] == "alone" and r["cache"] == "default"]
            agent = [r for r in runs if r["mode"] == "agent"]
            if alone and agent:
                out += [cv.verdict(ok, text) for ok, text in limit_verdicts(
                    alone[0], agent[0], f"{version} {case} {lim} (room for {ROOM[i]})",
                    fewer=i > 0)]
    return out


def cv_size(text):
    return int(float(text[:-1]) * GiB)


def finished(r):
    return r.get("ok") == r.get("count") and not r.get("oom_kills")


def limit_verdicts(alone, agent, where, fewer):
    """The goals at one limit: no reload ComfyUI alone avoids; fewer reloads
    and less wall time where memory holds fewer models than the session
    uses (@fewer), and no more wall time where it holds them all (a user
    never worse off); no OOM kill where it finishes, finishing where it is
    killed."""
    v = []
    if finished(alone):
        v.append((finished(agent) and agent["oom_kills"] == 0,
                  f"{where}: 0 OOM kills where ComfyUI alone finishes "
                  f"({agent.get('ok')}/{agent.get('count')} prompts, {agent.get('oom_kills')} kills)"))
        v.append(((loads(agent) or 0) <= (loads(alone) or 0),
                  f"{where}: never a model reload ComfyUI alone avoids "
                  f"({loads(agent)} loads against {loads(alone)})"))
        if not fewer:  # room for every model: fewer loads must not cost time
            v.append((finished(agent) and agent["wall_s"] <= alone["wall_s"] * WALL_SLACK,
                      f"{where}: no more wall time than ComfyUI alone, within "
                      f"{WALL_SLACK - 1:.0%} ({agent.get('wall_s', 0):.0f} / "
                      f"{alone['wall_s']:.0f} s)"))
        if fewer:
            v.append(((loads(agent) or 0) < (loads(alone) or 0)
                      and agent["wall_s"] < alone["wall_s"],
                      f"{where}: fewer reloads and less wall time than ComfyUI alone "
                      f"({loads(agent)} / {loads(alone)} loads, {agent['wall_s']:.0f} / "
                      f"{alone['wall_s']:.0f} s)"))
    else:
        v.append((finished(agent), f"{where}: ComfyUI alone is OOM-killed "
                  f"({alone.get('ok')}/{alone.get('count')} prompts); with the agent "
                  f"{agent.get('ok')}/{agent.get('count')}, {agent.get('oom_kills')} kills"))
    return v
