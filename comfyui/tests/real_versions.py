"""The package checked in one real ComfyUI version: what test_real_versions.py
asserts (in `make test`) and what comfyui/COMPATIBILITY.md's table is
generated from (real_comfyui.py compat).

One real ComfyUI (its own main.py --cpu, with the command line the
package's README recommends for the version) in a scratch memory cgroup
whose room above ComfyUI's idle usage (ROOM) is less than what the prompts
cache, with the real agent (`ramcache-bpf --pid`, defaults). CHECKS say
what must hold; each reads the same run.
"""
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
import comfyui_api  # noqa: E402
import real_workloads as wl  # noqa: E402
import realcomfy as rc  # noqa: E402

import rctest  # noqa: E402  (the shared harness, linked here)

ROOM = 384 * rc.MiB  # above ComfyUI's idle usage
# The model run: three small checkpoints (modelkit, ~0.7 GiB each once
# loaded) in turn, then the first again, with room for two and a load
MODEL_ROOM = int(1.9 * rc.GiB)
PROMPTS, SIDE, BATCH = 6, 1024, 4  # 6 x 96 MiB cached: 1.5 x the room
FORMS = {"none": "no --cache-ram", "one": "one-value --cache-ram",
         "two": "two-value --cache-ram"}
# What the package wraps (hooks.install), as (file, name, dotted hook)
HOOKS = [("execution.py", "PromptExecutor", "execution.PromptExecutor.__init__"),
         ("execution.py", "PromptExecutor", "execution.PromptExecutor.execute"),
         ("execution.py", "PromptExecutor", "execution.PromptExecutor.reset"),
         ("execution.py", "execute", "execution.execute"),
         ("comfy/utils.py", "set_progress_bar_global_hook",
          "comfy.utils.set_progress_bar_global_hook"),
         ("comfy/utils.py", "load_torch_file", "comfy.utils.load_torch_file"),
         ("comfy/model_management.py", "load_models_gpu",
          "comfy.model_management.load_models_gpu"),
         ("comfy/memory_management.py", "extra_ram_release",
          "comfy.memory_management.extra_ram_release")]


class Missing(Exception):
    """No tree of this version here (nor the tarballs to unpack it from)."""


def tree_of(version):
    if os.path.isfile(os.path.join(rc.tree_path(version), "main.py")):
        return rc.tree_path(version)
    if rc.trees_dir() is None:
        raise Missing("no real ComfyUI: ../shared/comfyui is absent "
                      "(RAMCACHE_COMFYUI_TREES names another folder)")
    return rc.unpack(version)


def expected_hooks(tree):
    """The hooks the package needs that this tree has (read from its source)."""
    out = []
    for f, name, dotted in HOOKS:
        if name in comfyui_api.Source(os.path.join(tree, f)).names:
            out.append(dotted)
    return out


def keys_prompt():
    """The status node inline: EmptyImage -> status -> ImageInvert -> status."""
    g = wl.Graph()
    s1 = g.add("RAMCacheBPFStatus", value=g.add("EmptyImage", width=64, height=64,
                                                  batch_size=1, color=4242))
    up = g.add("ImageScaleBy", image=g.add("ImageInvert", image=s1),
               upscale_method="nearest-exact", scale_by=0.5)
    g.add("RAMCacheBPFStatus", value=up)
    return g.nodes


def image_prompts():
    out = []
    for i in range(PROMPTS):
        g = wl.Graph()
        img = g.add("EmptyImage", width=SIDE, height=SIDE, batch_size=BATCH, color=i + 1)
        out.append(g.preview(g.add("ImageInvert", image=img)))
    return out


def extension(ui):
    js = "/extensions/ramcache_bpf/ramcache.js"
    try:
        return js in ui.http.get("/extensions") and \
            "registerExtension" in ui.http.get(js, raw=True).decode()
    except Exception:
        return False


def run(tree, agent=True):
    """The run every check reads: a dict of what was seen. agent=False is
    the control run (the checks that need the agent must then fail)."""
    out = {"tree": tree, "args": rc.recommended(tree)}
    name = f"ramcache-test-{os.getpid()}-real-{rc.tree_version(tree)}"
    with rctest.Memcg(8 << 30, swap_limit=0, name=name) as cg, \
            rc.started(tree, out["args"], cg, test_nodes=False) as ui:
        out["idle"] = rc.cg_usage(cg)
        cg._w("memory.max" if cg.version == 2 else "memory.limit_in_bytes",
              str(out["idle"] + ROOM))
        out["status0"] = rc.status(ui)
        out["stubbed"] = ui.stubbed()
        out["extension"] = extension(ui)
        events = rc.Events(ui.port)
        if agent:
            ui.agent = rctest.Agent("--pid", ui.pid)
        out["attached"] = agent and rc.wait_attached(ui)
        out["keys"] = [rc.run_prompt(ui, events, keys_prompt()) for _ in range(2)]
        out["prompts"] = []
        for p in image_prompts():
            out["prompts"].append(rc.run_prompt(ui, events, p))
            if not ui.alive():
                break
        out["oom_kills"] = cg.oom_kills()
        out["alive"] = ui.alive()
        out["agent"] = []
        if agent:
            ui.agent.stop()
            out["agent"] = ui.agent.events
        out["exit"] = ui.stop()
        out["log"] = ui.text()
    out["models"] = models_run(tree, out["args"], agent)
    return out


def models_run(tree, args, agent=True):
    """Real model loads (modelkit's small checkpoints, switch()) in a
    second ComfyUI whose limit holds two: what was seen."""
    from modelkit import generate
    files = generate.ensure(tree, size="small")["files"]
    out = {}
    name = f"ramcache-test-{os.getpid()}-models-{rc.tree_version(tree)}"
    with rctest.Memcg(8 << 30, swap_limit=0, name=name) as cg, \
            rc.started(tree, args, cg, test_nodes=False, models=files) as ui:
        idle = rc.cg_usage(cg)
        cg._w("memory.max" if cg.version == 2 else "memory.limit_in_bytes",
              str(idle + MODEL_ROOM))
        events = rc.Events(ui.port)
        if agent:
            ui.agent = rctest.Agent("--pid", ui.pid)
            rc.wait_attached(ui)
        out["prompts"] = []
        for _, p in wl.switch():
            out["prompts"].append(rc.run_prompt(ui, events, p))
            if not ui.alive():
                break
        out["status"] = rc.status(ui)
        out["oom_kills"] = cg.oom_kills()
        out["agent"] = []
        if agent:
            ui.agent.stop()
            out["agent"] = ui.agent.events
    return out


# ------------------------------------------------------------- the checks
# Each takes the run and returns (ok, detail).

def starts(r):
    st = r["status0"]
    want = expected_hooks(r["tree"])
    missing = [h for h in want if h not in st.get("hooks", [])]
    form = (st.get("comfyui") or {}).get("cache_ram")
    ok = st.get("page") is True and not missing and r["extension"] and \
        form == FORMS[rc.cache_ram_form(r["tree"])]
    return ok, {"hooks_missing": missing, "cache_ram": form, "extension": r["extension"]}


def attaches(r):
    ctl = [e for e in r["agent"] if e.get("type") == "control" and e.get("state") == "attached"]
    return bool(r["attached"] and ctl and ctl[0].get("discovery") == "memfd"), ctl[:1]


def keys(r):
    first, second = r["keys"]
    ok = first["ok"] and second["ok"] and not second["executed"] and \
        sorted(second["cached"]) == sorted(keys_prompt())
    return ok, {"second_run_cached": second["cached"], "executed": second["executed"]}


def evicts(r):
    done = [e for e in r["agent"] if e.get("type") == "evict_done"]
    ok_prompts = sum(p["ok"] for p in r["prompts"])
    evicted = [d for d in done if d.get("status") == "evicted"]
    acks = [d["ack_latency_ns"] / 1e6 for d in evicted if "ack_latency_ns" in d]
    ok = ok_prompts == PROMPTS and r["alive"] and r["oom_kills"] == 0 and evicted
    statuses = {}
    for d in done:
        statuses[d.get("status")] = statuses.get(d.get("status"), 0) + 1
    return bool(ok), {"prompts_ok": ok_prompts, "oom_kills": r["oom_kills"],
                      "commands": len(done), "evicted": len(evicted), "statuses": statuses,
                      "freed_mib": round(sum(d.get("bytes_freed", 0) for d in evicted) / rc.MiB),
                      "ack_ms": [round(min(acks)), round(max(acks))] if acks else None,
                      "errors": [p["error"] for p in r["prompts"] if not p["ok"]]}


def models(r):
    """Three checkpoints where two fit: every prompt runs, no OOM kill, the
    agent asks for an earlier checkpoint and ComfyUI's own model manager
    unloads it (status models.unloaded), each load announced and counted."""
    m = r["models"]
    done = [e for e in m["agent"] if e.get("type") == "evict_done"]
    ckpt = [d for d in done if d.get("status") == "evicted"
            and str(d.get("label", "")).endswith("CheckpointLoaderSimple")]
    st = (m["status"] or {}).get("models") or {}
    ok_prompts = sum(p["ok"] for p in m["prompts"])
    ok = ok_prompts == len(wl.SWITCH) and m["oom_kills"] == 0 and ckpt and \
        st.get("unloaded", 0) >= 1 and st.get("agent_counts") and st.get("loads", 0) >= 3
    return bool(ok), {"prompts_ok": ok_prompts, "oom_kills": m["oom_kills"],
                      "checkpoints_evicted": len(ckpt), "unloaded": st.get("unloaded"),
                      "loads": st.get("loads"), "load_s": st.get("load_s"),
                      "waits_ms": st.get("waits_ms"),
                      "errors": [p["error"] for p in m["prompts"] if not p["ok"]]}


def ctrl_c(r):
    trace = re.search(r'File "[^"]*(custom_nodes/ramcache_bpf|' + re.escape(rc.PKG) + ")/",
                      r["log"])
    ok = r["exit"] == 0 and "Stopped server" in r["log"] and not trace
    return ok, {"exit": r["exit"], "tail": None if ok else r["log"][-1500:]}


CHECKS = [("starts_with_the_package", starts), ("agent_finds_the_memfd_page", attaches),
          ("status_node_keeps_cache_keys", keys),
          ("prompts_beyond_the_limit_evicted_0_oom", evicts), ("ctrl_c_exits_0", ctrl_c),
          ("models_loaded_evicted_through_comfyui_0_oom", models)]


def api(tree):
    """The stand-in has every part of this ComfyUI the package uses."""
    problems = comfyui_api.compare(tree, os.path.join(HERE, "standin"),
                                   FORMS[rc.cache_ram_form(tree)])
    return not problems, problems


# ------------------------------------------- COMPATIBILITY.md, generated

BEGIN = "<!-- generated by real_comfyui.py compat: begin -->"
END = "<!-- generated by real_comfyui.py compat: end -->"


def check_version(version, agent=True):
    """Every check of @version as [{"check", "ok", "detail"}] and the run's facts."""
    tree = tree_of(version)
    ok, problems = api(tree)
    checks = [{"check": "stand_in_has_its_api", "ok": ok, "detail": problems}]
    try:
        r = run(tree, agent)
    except Exception as e:
        return {"version": version, "tree": tree, "checks": checks + [
            {"check": "run", "ok": False, "detail": repr(e)}]}
    for name, fn in CHECKS:
        ok, detail = fn(r)
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
    return {"version": version, "tree": tree, "args": r["args"], "idle": r["idle"],
            "form": rc.cache_ram_form(tree), "stubbed": r["stubbed"], "checks": checks}


def upstream(version):
    """(commit, where from) of @version, from the trees' README, or (None, None)."""
    d = rc.trees_dir()
    text = rc.read_text(os.path.join(d, "README.md")) if d else ""
    m = re.search(rf"\|\s*comfyui-{re.escape(version)}\.tar\.gz\s*\|[^|]*\|\s*([0-9a-f]+)\s*\|"
                  r"\s*([0-9-]+)\s*\|\s*([^|]+?)\s*\|", text)
    return (m.group(1), f"{m.group(3)}, {m.group(2)}") if m else (None, None)


def compat_rows(results):
    rows = ["| ComfyUI | upstream commit | `--cache-ram` | command line | checks passed | "
            "what the run saw |", "|---|---|---|---|---|---|"]
    for r in results:
        commit, where = upstream(r["version"])
        passed = sum(c["ok"] for c in r["checks"])
        ev = next((c["detail"] for c in r["checks"] if c["check"].startswith("prompts_")), {})
        failed = [c["check"] for c in r["checks"] if not c["ok"]]
        saw = (f"{ev.get('prompts_ok')}/{PROMPTS} prompts of {SIDE}x{SIDE}x{BATCH} images "
               f"({PROMPTS * 2 * SIDE * SIDE * BATCH * 12 // rc.MiB} MiB cached) in a memcg of "
               f"idle {r.get('idle', 0) // rc.MiB} + {ROOM // rc.MiB} MiB; "
               f"{ev.get('commands')} commands{statuses(ev)}, "
               f"{ev.get('freed_mib')} MiB freed, post -> ack {ev.get('ack_ms')} ms, "
               f"{ev.get('oom_kills')} OOM kills") if ev else "did not run"
        mo = next((c["detail"] for c in r["checks"] if c["check"].startswith("models_")), {})
        if mo:
            saw += (f"; models: {mo.get('prompts_ok')}/{len(wl.SWITCH)} prompts of 3 small "
                    f"checkpoints in idle + {MODEL_ROOM // rc.MiB} MiB, {mo.get('loads')} loads "
                    f"({mo.get('load_s')} s), {mo.get('checkpoints_evicted')} checkpoints "
                    f"evicted, {mo.get('unloaded')} models unloaded by ComfyUI, "
                    f"{mo.get('oom_kills')} OOM kills")
        if failed:
            saw += f"; FAILED: {', '.join(failed)}"
        line = " ".join(["main.py", "--cpu", *r.get("args", [])])
        rows.append(f"| {r['version']} | `{(commit or '?')[:8]}` ({where or '?'}) | "
                    f"{FORMS.get(r.get('form'), '?')} | `{line}` | "
                    f"{passed}/{len(r['checks'])} | {saw} |")
    return rows


def statuses(ev):
    s = ", ".join(f"{v} {k}" for k, v in sorted((ev.get("statuses") or {}).items()))
    return f" ({s})" if s else ""


def write_compat(path, results, head):
    """Replace the generated block of @path (or put it after the title)."""
    block = "\n".join([BEGIN, head, "", *compat_rows(results), END])
    text = rc.read_text(path)
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        first, _, rest = text.partition("\n")
        text = f"{first}\n\n{block}\n{rest}"
    with open(path, "w") as f:
        f.write(text)
