"""Smoke run: each real ComfyUI version (realcomfy.py's harness, main.py
--cpu, no memory cgroup) loads the generated model files with its own
loader nodes and samples with them, the stand-ins and torch shims on.

Per version, in one ComfyUI: checkpoint A, checkpoint B, checkpoint A with
LoRA 1, then the split loaders (UNETLoader unet-a, CLIPLoader clip-l,
VAELoader vae); each prompt's outcome, its loader nodes' seconds, which
nodes ComfyUI took from its cache, and ComfyUI's memory after it
(/proc/PID/status: VmRSS, RssAnon, RssFile; VmHWM is the peak). With
--full VERSION, one more ComfyUI of that version runs the full-size
checkpoint A once.

    cd comfyui/tests && /usr/bin/python3 -m modelkit.smoke [--versions 0.3.64,0.33.0] \
        [--full 0.33.0] [--json out.json]

(a module of the tests folder, as it imports realcomfy from there)
"""
import argparse
import contextlib
import json
import re
import sys

import realcomfy as rc
from modelkit import boot, generate, workflow

MiB = 1 << 20
# ComfyUI's log lines about loading models and running prompts.
LOG_LINES = re.compile(r"model weight dtype|model_type|Requested to load|loaded completely|"
                       r"loaded partially|Prompt executed in|lora key not loaded|"
                       r"ERROR|Traceback|Exception|missing|unexpected|Cannot import|"
                       r"IMPORT FAILED", re.I)


@contextlib.contextmanager
def modelkit_boot():
    """realcomfy's BOOT with boot.snippet() in it, for the Scratch made
    inside (this process's copy of realcomfy only; the file is untouched)."""
    saved = rc.BOOT
    rc.BOOT = boot.with_modelkit(saved)
    try:
        yield
    finally:
        rc.BOOT = saved


@contextlib.contextmanager
def comfy_with_models(tree, files, args=(), cg=None):
    """ComfyUI of @tree up with the stand-ins and shims on and generate.py's
    @files linked into its scratch models folder; stopped and its scratch
    folder removed on the way out (as realcomfy.started does)."""
    with modelkit_boot():
        scratch = rc.Scratch(tree, package=False, test_nodes=False)
    ui = None
    try:
        workflow.link_models(scratch.base, files, tree)
        ui = rc.ComfyUI(tree, scratch, list(args), cg)
        ui.wait_up()
        yield ui
    finally:
        if ui is not None:
            ui.stop()
        scratch.cleanup()


def memory(pid):
    """ComfyUI's memory in MiB: rss, anon, file (RssAnon, RssFile) and
    peak (VmHWM)."""
    keys = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "VmHWM": "peak"}
    out = {}
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in keys:
                    out[keys[name]] = round(int(rest.split()[0]) / 1024, 1)
    return out


def run_one(ui, events, label, prompt):
    """One prompt: its outcome, load seconds (its loader nodes' time),
    wall seconds, cached nodes, memory after it."""
    r = rc.run_prompt(ui, events, prompt)
    loaders = workflow.loader_nodes(prompt)
    timed = [n for n in r["nodes"] if n[0] in loaders]
    return {"prompt": label, "ok": r["ok"], "error": r["error"], "wall_s": r["wall_s"],
            "load_s": round(sum(n[2] for n in timed), 3) if timed else None,
            "loaders": timed, "cached": r["cached"], "nodes": r["nodes"],
            "memory_mib": memory(ui.pid)}


def small_prompts(names):
    """[(label, prompt)] of the per-version sequence (file ids -> names)."""
    return [("ckpt A", workflow.checkpoint_prompt(names["ckpt-a"])),
            ("ckpt B", workflow.checkpoint_prompt(names["ckpt-b"])),
            ("ckpt A + LoRA 1", workflow.checkpoint_prompt(names["ckpt-a"], names["lora-1"])),
            ("split unet-a + clip-l + vae",
             workflow.split_prompt(names["unet-a"], names["clip-l"], names["vae"]))]


def run_version(version, files, prompts, args=()):
    """@prompts in one ComfyUI of @version with @files linked: its report."""
    tree = rc.unpack(version)
    with comfy_with_models(tree, files, args) as ui:
        events = rc.Events(ui.port)
        start = memory(ui.pid)
        results = [run_one(ui, events, label, p) for label, p in prompts]
        end = memory(ui.pid)
        lines = ui.text().splitlines()
        log, tail = [ln for ln in lines if LOG_LINES.search(ln)], lines[-150:]
        stubbed = ui.stubbed()
    return {"version": version, "stubbed": stubbed, "memory_at_start_mib": start,
            "peak_rss_mib": end.get("peak"), "prompts": results,
            "ok": all(r["ok"] for r in results), "log": log[-60:],
            "log_tail": [] if all(r["ok"] for r in results) else tail}


def summary_line(rep):
    """One human line per prompt of a version's report."""
    lines = []
    for r in rep["prompts"]:
        m = r["memory_mib"]
        lines.append(f"{rep['version']:>7} {r['prompt']:<28} {'ok' if r['ok'] else 'FAIL':<4} "
                     f"load {r['load_s']}s wall {r['wall_s']}s rss {m.get('rss')} MiB "
                     f"(anon {m.get('anon')}, file {m.get('file')}) cached {r['cached']}"
                     + (f" error {r['error']}" if r["error"] else ""))
    lines.append(f"{rep['version']:>7} start rss {rep['memory_at_start_mib'].get('rss')} MiB, "
                 f"peak {rep['peak_rss_mib']} MiB")
    return "\n".join(lines)


def run_small(versions, out, comfy_args, report):
    """The small files' prompts in each of @versions, into @report."""
    gen = generate.ensure(rc.unpack(versions[-1]), "small", "all", out)
    report["generate"]["small"] = gen
    names = {f["id"]: f["name"] for f in gen["files"]}
    for v in versions:
        rep = run_version(v, gen["files"], small_prompts(names), comfy_args)
        print(summary_line(rep), file=sys.stderr, flush=True)
        report["versions"].append(rep)


def run_full(version, out, comfy_args, report):
    """The full-size checkpoint A once in a fresh ComfyUI of @version."""
    full = generate.ensure(rc.unpack(version), "full", "ckpt-a", out)
    report["generate"]["full"] = full
    prompt = workflow.checkpoint_prompt(full["files"][0]["name"])
    rep = run_version(version, full["files"], [("full ckpt A", prompt)], comfy_args)
    print(summary_line(rep), file=sys.stderr, flush=True)
    report["full"] = rep


def main(argv=None):
    """The command line (see the module docstring); 0 when every prompt
    succeeded."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", default=",".join(rc.VERSIONS),
                    help="versions for the small files' prompts ('' for none)")
    ap.add_argument("--full", default=None, help="also run the full-size checkpoint in VERSION")
    ap.add_argument("--out", default=generate.DEFAULT_DIR, help="model files' scratch folder")
    ap.add_argument("--json", default=None, help="write the report here too")
    ap.add_argument("comfy_args", nargs="*", help="more ComfyUI arguments (after --)")
    a = ap.parse_args(argv)
    versions = [v for v in a.versions.split(",") if v]
    report = {"generate": {}, "versions": []}
    if versions:
        run_small(versions, a.out, a.comfy_args, report)
    if a.full:
        run_full(a.full, a.out, a.comfy_args, report)
    text = json.dumps(report, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    print(text)
    ok = all(r["ok"] for r in report["versions"]) and report.get("full", {}).get("ok", True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
