#!/usr/bin/env python3
"""The package in every real ComfyUI version users run (0.3.64, 0.3.75,
0.25.0, 0.33.0), from the upstream trees in ../shared/comfyui (unpacked
once to /var/tmp/ramcache-comfyui-VERSION; realcomfy.py says how they are
found and which absent third-party modules are stood in for).

Per version, one real ComfyUI (its own main.py --cpu, with the command line
the package's README recommends for it) in a scratch memory cgroup whose
room above ComfyUI's idle usage is less than what the prompts cache, with
the real agent (`ramcache-bpf --pid`, defaults):
  - the stand-in has every part of this ComfyUI the package uses;
  - ComfyUI starts with the package: every hook it needs that this version
    has is installed, the --cache-ram form is detected, the frontend
    extension is served;
  - the agent finds the memfd page and attaches;
  - the status node inline keeps the cache keys after it;
  - the prompts (1.5 x the room) all run with 0 OOM kills in the cgroup,
    the agent's commands acked "evicted";
  - Ctrl-C: ComfyUI exits 0 with no traceback from the package.
Skips (one line) only when the trees are absent or without root.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import comfyui_api  # noqa: E402
import real_workloads as wl  # noqa: E402
import realcomfy as rc  # noqa: E402

sys.path.insert(0, os.path.join(rc.ROOT, "tests", "integration"))
from rctest import AGENT, Agent, Memcg, Skip, main, test  # noqa: E402

ROOM = 384 * rc.MiB  # above ComfyUI's idle usage
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
RUNS = {}


def tree_of(version):
    """The unpacked tree, or Skip when neither it nor the tarballs are here."""
    if os.path.isfile(os.path.join(rc.tree_path(version), "main.py")):
        return rc.tree_path(version)
    if rc.trees_dir() is None:
        raise Skip("no real ComfyUI: ../shared/comfyui is absent "
                   "(RAMCACHE_COMFYUI_TREES names another folder)")
    return rc.unpack(version)


def expected_hooks(tree):
    """The hooks the package needs that this tree has (read from its source)."""
    out = []
    for f, name, dotted in HOOKS:
        src = comfyui_api.Source(os.path.join(tree, f))
        if name in src.names:
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


def run(version):
    """One ComfyUI of @version with the package and the agent; what the
    tests check, kept so that each test reads the same run."""
    if version in RUNS:
        if isinstance(RUNS[version], Exception):
            raise RUNS[version]
        return RUNS[version]
    tree = tree_of(version)
    if os.geteuid() != 0:
        raise Skip("needs root (memory cgroup, agent)")
    try:
        RUNS[version] = _run(tree)
    except Exception as e:
        RUNS[version] = e
        raise
    return RUNS[version]


def _run(tree):
    from real_comfyui import recommended
    out = {"tree": tree, "args": recommended(tree)}
    with Memcg(8 << 30, swap_limit=0) as cg, \
            rc.started(tree, out["args"], cg, test_nodes=False) as ui:
        idle = rc.cg_usage(cg)
        cg._w("memory.max" if cg.version == 2 else "memory.limit_in_bytes", str(idle + ROOM))
        out["status0"] = rc.status(ui)
        out["extension"] = extension(ui)
        events = rc.Events(ui.port)
        ui.agent = Agent("--pid", ui.pid)
        out["attached"] = rc.wait_attached(ui)
        out["keys"] = [rc.run_prompt(ui, events, keys_prompt()) for _ in range(2)]
        out["prompts"] = prompts(ui, events)
        out["oom_kills"] = cg.oom_kills()
        out["alive"] = ui.alive()
        ui.agent.stop()
        out["agent"] = ui.agent.events
        out["exit"] = ui.stop()
        out["log"] = ui.text()
    return out


def extension(ui):
    js = "/extensions/ramcache_bpf/ramcache.js"
    try:
        exts = ui.http.get("/extensions")
        return js in exts and "registerExtension" in ui.http.get(js, raw=True).decode()
    except Exception:
        return False


def prompts(ui, events):
    out = []
    for i in range(PROMPTS):
        g = wl.Graph()
        img = g.add("EmptyImage", width=SIDE, height=SIDE, batch_size=BATCH, color=i + 1)
        g.preview(g.add("ImageInvert", image=img))
        out.append(rc.run_prompt(ui, events, g.nodes))
        if not ui.alive():
            break
    return out


def version_tests(v):
    def api():
        tree = tree_of(v)
        problems = comfyui_api.compare(tree, os.path.join(HERE, "standin"),
                                       FORMS[rc.cache_ram_form(tree)])
        assert not problems, problems

    def starts():
        r = run(v)
        st = r["status0"]
        assert st.get("page") is True, st
        want = expected_hooks(r["tree"])
        missing = [h for h in want if h not in st.get("hooks", [])]
        assert not missing, f"hooks not installed: {missing} (have {st.get('hooks')})"
        form = (st.get("comfyui") or {}).get("cache_ram")
        assert form == FORMS[rc.cache_ram_form(r["tree"])], st.get("comfyui")
        assert r["extension"], "ComfyUI does not serve ramcache.js"

    def attaches():
        r = run(v)
        ctl = [e for e in r["agent"] if e.get("type") == "control"
               and e.get("state") == "attached"]
        assert r["attached"] and ctl and ctl[0].get("discovery") == "memfd", ctl

    def keys():
        first, second = run(v)["keys"]
        assert first["ok"] and second["ok"], (first, second)
        assert sorted(second["cached"]) == sorted(keys_prompt()) and not second["executed"], \
            second

    def evicts():
        r = run(v)
        done = [e for e in r["agent"] if e.get("type") == "evict_done"]
        ok = [p["ok"] for p in r["prompts"]]
        assert ok == [True] * PROMPTS and r["alive"], (ok, [p["error"] for p in r["prompts"]])
        assert r["oom_kills"] == 0, r["oom_kills"]
        assert any(d.get("status") == "evicted" for d in done), \
            [d.get("status") for d in done]

    def ctrl_c():
        r = run(v)
        trace = re.search(r'File "[^"]*(custom_nodes/ramcache_bpf|' + re.escape(rc.PKG) + ")/",
                          r["log"])
        assert r["exit"] == 0 and "Stopped server" in r["log"] and not trace, \
            (r["exit"], r["log"][-1500:])

    tag = "comfyui_" + v.replace(".", "_")
    for name, fn in (("stand_in_has_its_api", api), ("starts_with_the_package", starts),
                     ("agent_finds_the_memfd_page", attaches),
                     ("status_node_keeps_cache_keys", keys),
                     ("prompts_beyond_the_limit_evicted_0_oom", evicts),
                     ("ctrl_c_exits_0", ctrl_c)):
        fn.__name__ = f"{tag}_{name}"
        test(fn)


for _v in rc.VERSIONS:
    version_tests(_v)

if __name__ == "__main__":
    if not os.access(AGENT, os.X_OK):
        print(f"# {AGENT} is not built")
    main()
