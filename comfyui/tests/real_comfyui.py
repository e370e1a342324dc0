#!/usr/bin/env python3
"""Run the package inside a real ComfyUI checkout with the real agent.

    sudo comfyui/tests/real_comfyui.py --comfyui /path/to/ComfyUI [--commit ID]

What it does (root: a scratch memory cgroup and the agent):
  1. links this package into DIR/custom_nodes/ramcache_bpf (a link it
     made is removed at exit);
  2. starts ComfyUI's own main.py on CPU with Debian's python3 and torch,
     in a memory cgroup named ramcache-real-* (always removed) whose limit
     is smaller than what the workflow caches; third-party modules that
     ComfyUI imports but this workflow never uses and Debian lacks are
     stubbed (never ComfyUI's own modules), see STUBS;
  3. checks /ramcache/status and that ComfyUI serves the frontend extension;
  4. starts build/ramcache-bpf --pid <ComfyUI> and drives prompts over
     ComfyUI's HTTP API: each caches new image tensors, so outputs of
     earlier prompts pile up beyond the cgroup's limit unless evicted;
  5. checks: every prompt ran, the agent's commands were acked "evicted"
     with RSS freed, 0 OOM kills; the status node kept the cache keys of
     the nodes after it (a repeated prompt is all cached); a clean exit of
     --quick-test-for-ci; and, read from the source, that the stand-in has
     every part of this ComfyUI the package uses (comfyui_api.py);
and prints a JSON summary (--json FILE keeps it; "evict_done" has every
command's post -> received, ack and RSS-drop latency as the agent measured
them, recv_/ack_/freed_latency_ns). --no-agent runs the same
prompts without the agent: the control run, which should hit the limit.
Exit status 0 when every check passed.
"""
import argparse
import atexit
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.environ.get("RAMCACHE_ROOT") or os.path.dirname(PKG)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import rctest  # noqa: E402

sys.path.insert(0, HERE)
import comfyui_api  # noqa: E402

MiB = 1 << 20
PYTHON = "/usr/bin/python3"  # Debian's python3 with python3-torch

# Imported by ComfyUI at start-up, unused by the workflow below, missing
# from Debian 12: replaced by empty modules only when not importable.
STUBS = ["safetensors", "einops", "transformers", "tokenizers", "torchsde",
         "kornia", "spandrel", "pydantic_settings", "comfy_kitchen", "av",
         "alembic", "sqlalchemy", "blake3", "comfy_aimdo"]
# Packages ComfyUI reads files from: stubbed as folders with those files.
DATA_STUBS = {
    "comfyui_frontend_package": {
        "static/index.html": "<!doctype html><title>ComfyUI</title>\n"},
    "comfyui_workflow_templates": {
        "templates/index.json": "[]\n",
        "__init__.py": "def iter_templates():\n    return iter(())\n\n\n"
                       "def get_asset_path(template_id, filename):\n    return ''\n"},
    "comfyui_embedded_docs": {"docs/index.html": "\n"},
}
# torch 1.13 lacks dtypes newer ComfyUI names at import time; aliases only,
# never used by this workflow.
TORCH_ALIASES = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                 "float8_e5m2fnuz", "uint16", "uint32", "uint64"]

BOOT = r'''
import importlib.abc, importlib.machinery, importlib.util, os, runpy, sys, types
STUBS, ALIASES, CONTROL = {stubs!r}, {aliases!r}, {control!r}
missing = {{n for n in STUBS if importlib.util.find_spec(n) is None}}

class _Any:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Any()
    def __getattr__(self, n): return _Any()
    def __iter__(self): return iter(())
    def __bool__(self): return False

class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = lambda n: _Any if n[:1].isupper() else _Any()
        return m
    def exec_module(self, m): pass

class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in missing:
            return importlib.machinery.ModuleSpec(name, _Loader(), is_package=True)

class _TorchAliases(importlib.abc.MetaPathFinder):
    """Adds the aliases right after torch loads, when ComfyUI imports it."""
    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(m):
            run(m)
            for n in ALIASES:
                if not hasattr(m, n):
                    setattr(m, n, m.uint8)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _Finder())
sys.meta_path.insert(0, _TorchAliases())
if CONTROL == "file":
    os.environ["RAMCACHE_CONTROL"] = "/dev/shm/ramcache-%d" % os.getpid()
else:
    os.environ.pop("RAMCACHE_CONTROL", None)
print("ramcache-real: stubbed", sorted(missing), flush=True)
d = sys.argv[1]
sys.argv = [os.path.join(d, "main.py")] + sys.argv[2:]
sys.path.insert(0, d)
os.chdir(d)
runpy.run_path(os.path.join(d, "main.py"), run_name="__main__")
'''


def compat():
    spec = importlib.util.spec_from_file_location("ramcache_compat", os.path.join(PKG, "compat.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def cache_ram_family(comfy):
    """The --cache-ram form of a checkout, read from its comfy/cli_args.py."""
    c = compat()
    src = open(os.path.join(comfy, "comfy", "cli_args.py")).read()
    m = re.search(r'"--cache-ram"[^\n]*nargs=(\'[*?]\'|"[*?]")', src)
    if not m:
        return c, c.FAMILY_NO_RAM
    return c, (c.FAMILY_TWO if "*" in m.group(1) else c.FAMILY_ONE)


def make_stubs(tmp, control):
    for pkg, files in DATA_STUBS.items():
        for rel, text in files.items():
            path = os.path.join(tmp, pkg, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        init = os.path.join(tmp, pkg, "__init__.py")
        if not os.path.exists(init):
            open(init, "w").close()
    boot = os.path.join(tmp, "ramcache_real_boot.py")
    with open(boot, "w") as f:
        f.write(BOOT.format(stubs=STUBS, aliases=TORCH_ALIASES, control=control))
    return boot


class Http:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path, raw=False, timeout=10):
        with urllib.request.urlopen(self.base + path, timeout=timeout) as r:
            body = r.read()
            return body if raw else json.loads(body)

    def post(self, path, obj, timeout=30):
        req = urllib.request.Request(self.base + path, data=json.dumps(obj).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())


def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def cg_usage(cg):
    return int(cg.read("memory.current" if cg.version == 2 else "memory.usage_in_bytes"))


def image_prompt(i, side, batch):
    """EmptyImage -> ImageInvert -> ImageScaleBy 1/8 -> status node (an
    output node): two new side x side x batch float tensors cached per
    prompt (colour i), and a small one the status node passes through."""
    return {
        "1": {"class_type": "EmptyImage",
              "inputs": {"width": side, "height": side, "batch_size": batch, "color": i}},
        "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
        "3": {"class_type": "ImageScaleBy",
              "inputs": {"image": ["2", 0], "upscale_method": "nearest-exact", "scale_by": 0.125}},
        "4": {"class_type": "RAMCacheBPFStatus", "inputs": {"value": ["3", 0]}},
    }


def keys_prompt():
    """The status node inline: EmptyImage -> status -> ImageInvert -> status."""
    return {
        "1": {"class_type": "EmptyImage",
              "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 4242}},
        "2": {"class_type": "RAMCacheBPFStatus", "inputs": {"value": ["1", 0]}},
        "3": {"class_type": "ImageInvert", "inputs": {"image": ["2", 0]}},
        "4": {"class_type": "ImageScaleBy",
              "inputs": {"image": ["3", 0], "upscale_method": "nearest-exact", "scale_by": 0.5}},
        "5": {"class_type": "RAMCacheBPFStatus", "inputs": {"value": ["4", 0]}},
    }


def run_prompt(http, prompt, timeout=300):
    pid = http.post("/prompt", {"prompt": prompt, "client_id": "ramcache-real"})["prompt_id"]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        h = http.get(f"/history/{pid}")
        if pid in h and h[pid].get("status", {}).get("completed") is not None:
            st = h[pid]["status"]
            if st.get("status_str") in ("success", "error"):
                return h[pid]
        time.sleep(0.1)
    raise TimeoutError(f"prompt {pid} did not finish")


def cached_nodes(item):
    for name, data in item["status"].get("messages", []):
        if name == "execution_cached":
            return sorted(data.get("nodes", []))
    return []


class ComfyUI:
    def __init__(self, comfy, boot, cg, port, args, log_path):
        self.log = open(log_path, "w")
        into_cg = cg.preexec() if cg else None

        def preexec():
            # Ctrl-C must reach ComfyUI even when this runs in the background
            # (a non-interactive shell starts background jobs ignoring SIGINT)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            if into_cg:
                into_cg()
        self.proc = subprocess.Popen(
            [PYTHON, boot, comfy, "--cpu", "--listen", "127.0.0.1", "--port", str(port),
             "--disable-auto-launch", *args],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=preexec,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.pid = self.proc.pid
        self.log_path = log_path

    def text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_up(self, http, timeout=180):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ComfyUI exited with {self.proc.returncode}:\n"
                                   + self.text()[-3000:])
            try:
                http.get("/system_stats", timeout=2)
                return
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(0.5)
        raise TimeoutError("ComfyUI did not start:\n" + self.text()[-3000:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        # a page file (--control file) outlives a ComfyUI that was killed
        try:
            os.unlink(f"/dev/shm/ramcache-{self.pid}")
        except FileNotFoundError:
            pass
        return self.proc.returncode


def link_package(comfy):
    """Links the package into the checkout; a link this run made is
    removed at exit, so that another tree of this project can run next."""
    dst = os.path.join(comfy, "custom_nodes", "ramcache_bpf")
    if os.path.islink(dst) or os.path.exists(dst):
        if os.path.realpath(dst) != os.path.realpath(PKG):
            raise SystemExit(f"{dst} exists and is not this package "
                             f"({PKG}): remove it")
        return dst
    os.symlink(PKG, dst)
    atexit.register(unlink_package, dst)
    return dst


def unlink_package(dst):
    if os.path.islink(dst) and os.path.realpath(dst) == os.path.realpath(PKG):
        os.unlink(dst)


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


def quick_test(comfy, boot, port, tmp, control):
    """--quick-test-for-ci: start, load the package, exit; must be clean."""
    ui = ComfyUI(comfy, boot, None, port, ["--quick-test-for-ci"], os.path.join(tmp, "quick.log"))
    try:
        rc = ui.proc.wait(180)
    except subprocess.TimeoutExpired:
        rc = "timeout"
    ui.stop()
    text = ui.text()
    return rc, text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--comfyui", required=True, help="a ComfyUI checkout")
    ap.add_argument("--commit", default=None, help="its commit id, for the record")
    ap.add_argument("--port", type=int, default=8190)
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--side", type=int, default=1024, help="image side in pixels")
    ap.add_argument("--batch", type=int, default=16, help="images per prompt")
    ap.add_argument("--room-mib", type=int, default=768,
                    help="cgroup limit above ComfyUI's idle usage")
    ap.add_argument("--agent", default=rctest.AGENT)
    ap.add_argument("--headroom", default="256M")
    ap.add_argument("--inactive", default="512M")
    ap.add_argument("--control", choices=("auto", "memfd", "file"), default="auto",
                    help="memfd (found by the agent through /proc) or a file at "
                         "/dev/shm/ramcache-<pid> (for agents before memfd discovery); "
                         "auto: memfd when the agent's --help mentions it")
    ap.add_argument("--no-agent", action="store_true", help="the control run")
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--api-only", action="store_true",
                    help="only compare the checkout's source with the stand-in (no root)")
    a = ap.parse_args()
    if a.api_only:
        _, fam = cache_ram_family(os.path.abspath(a.comfyui))
        problems = comfyui_api.compare(os.path.abspath(a.comfyui),
                                       os.path.join(HERE, "standin"), fam)
        for p in problems:
            print(p)
        print(f"{fam}: {len(comfyui_api.ITEMS) + 1} parts compared, {len(problems)} problems")
        sys.exit(1 if problems else 0)
    if os.geteuid() != 0:
        raise SystemExit("real_comfyui.py: needs root (memory cgroup, agent)")
    if a.control == "auto":
        r = subprocess.run([a.agent, "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=10)
        a.control = "memfd" if "memfd" in r.stdout else "file"
    comfy = os.path.abspath(a.comfyui)
    c, fam = cache_ram_family(comfy)
    version = None
    vfile = os.path.join(comfy, "comfyui_version.py")
    if os.path.exists(vfile):
        m = re.search(r'__version__\s*=\s*"([^"]+)"', open(vfile).read())
        version = m.group(1) if m else None
    cmdline = c.command_line(fam).split()[2:]
    tmp = tempfile.mkdtemp(prefix="ramcache-real-")
    boot = make_stubs(tmp, a.control)
    link_package(comfy)
    results = []
    summary = {"comfyui": comfy, "version": version, "commit": a.commit,
               "cache_ram": fam, "args": cmdline, "agent": not a.no_agent,
               "control": a.control, "checks": results}
    per_prompt_bytes = 2 * a.side * a.side * 3 * 4 * a.batch
    print(f"ComfyUI {version} ({a.commit or 'commit not given'}), {fam}: "
          f"main.py --cpu {' '.join(cmdline)}", flush=True)

    problems = comfyui_api.compare(comfy, os.path.join(HERE, "standin"), fam)
    check(results, "the stand-in has what this ComfyUI has of what the package uses",
          not problems, problems)

    rc, text = quick_test(comfy, boot, a.port, tmp, a.control)
    loaded = re.search(r"seconds: .*custom_nodes/ramcache_bpf\n", text) and \
        not re.search(r"(IMPORT FAILED|Cannot import).*custom_nodes/ramcache_bpf\b", text)
    check(results, "--quick-test-for-ci exits 0 with the package loaded",
          rc == 0 and loaded and "cannot join thread" not in text,
          {"rc": rc, "tail": text[-600:] if rc != 0 or "Traceback" in text else None})

    # ComfyUI's idle usage first, without a limit, to size the cgroup
    with rctest.Memcg(64 << 30, name=f"ramcache-real-{os.getpid()}-probe") as probe:
        http = Http(a.port)
        ui = ComfyUI(comfy, boot, probe, a.port, cmdline, os.path.join(tmp, "probe.log"))
        try:
            ui.wait_up(http)
            time.sleep(1)
            idle = cg_usage(probe)
        finally:
            ui.stop()
    limit = idle + a.room_mib * MiB
    summary.update(idle_bytes=idle, limit_bytes=limit,
                   cache_bytes=per_prompt_bytes * a.prompts)
    print(f"idle {idle / MiB:.0f} MiB; cgroup limit {limit / MiB:.0f} MiB; the workflow "
          f"caches {per_prompt_bytes * a.prompts / MiB:.0f} MiB "
          f"({a.prompts} prompts x {per_prompt_bytes / MiB:.0f} MiB)", flush=True)

    ag = None
    with rctest.Memcg(limit, swap_limit=0, name=f"ramcache-real-{os.getpid()}") as cg:
        http = Http(a.port)
        ui = ComfyUI(comfy, boot, cg, a.port, cmdline, os.path.join(tmp, "comfyui.log"))
        try:
            ui.wait_up(http)
            st = http.get("/ramcache/status")
            check(results, "/ramcache/status answers before the agent", st.get("page") is True,
                  {k: st.get(k) for k in ("page", "control", "attached", "comfyui", "hooks")})
            exts = http.get("/extensions")
            js = "/extensions/ramcache_bpf/ramcache.js"
            body = http.get(js, raw=True).decode(errors="replace") if js in exts else ""
            check(results, "ComfyUI serves the frontend extension",
                  js in exts and "registerExtension" in body,
                  [e for e in exts if "ramcache" in e])
            if not a.no_agent:
                argv = ["--pid", ui.pid, "--headroom", a.headroom, "--inactive", a.inactive]
                if a.control == "file":
                    argv += ["--control", f"/dev/shm/ramcache-{ui.pid}"]
                rctest.AGENT = a.agent
                ag = rctest.Agent(*argv)
                end = time.monotonic() + 10
                while time.monotonic() < end and not http.get("/ramcache/status")["attached"]:
                    time.sleep(0.2)
                st = http.get("/ramcache/status")
                check(results, "the agent attaches", st["attached"],
                      {k: st.get(k) for k in ("attached", "agent_pid", "level", "headroom")})

            # the status node inline keeps downstream cache keys
            first = run_prompt(http, keys_prompt())
            second = run_prompt(http, keys_prompt())
            check(results, "status node inline: the repeated prompt is all cached",
                  first["status"]["status_str"] == "success"
                  and cached_nodes(second) == ["1", "2", "3", "4", "5"],
                  {"cached_second_run": cached_nodes(second)})

            prompts = []
            for i in range(a.prompts):
                try:
                    item = run_prompt(http, image_prompt(i + 1, a.side, a.batch))
                    ok = item["status"]["status_str"] == "success"
                except (urllib.error.URLError, OSError, TimeoutError, ValueError) as e:
                    ok, item = False, {"error": str(e)}
                now = {}
                if ui.proc.poll() is None:
                    try:
                        now = http.get("/ramcache/status")
                    except (urllib.error.URLError, OSError, ValueError):
                        pass
                prompts.append({"prompt": i, "ok": ok, "rss": rss(ui.pid),
                                "cgroup": cg_usage(cg) if os.path.isdir(cg.path) else None,
                                **{k: now.get(k) for k in ("level", "headroom", "target",
                                                           "entries", "evicted", "settled")}})
                print(f"  prompt {i}: {'ok' if ok else 'FAILED'}  rss "
                      f"{(prompts[-1]['rss'] or 0) / MiB:.0f} MiB  cgroup "
                      f"{(prompts[-1]['cgroup'] or 0) / MiB:.0f} MiB", flush=True)
                if not ok or ui.proc.poll() is not None:
                    break
            summary["prompts"] = prompts
            alive = ui.proc.poll() is None
            st = http.get("/ramcache/status") if alive else {}
            summary["status"] = st
            ooms = cg.oom_kills()
            summary["oom_kills"] = ooms
            all_ok = len(prompts) == a.prompts and all(p["ok"] for p in prompts)
            if a.no_agent:
                check(results, "control run: without the agent the workflow does not fit",
                      not all_ok or ooms > 0, {"prompts_ok": sum(p["ok"] for p in prompts),
                                               "oom_kills": ooms})
            else:
                check(results, "every prompt ran", all_ok and alive,
                      {"prompts_ok": sum(p["ok"] for p in prompts), "alive": alive})
                check(results, "0 OOM kills", ooms == 0, ooms)
                time.sleep(1)
                evicts = [e for e in ag.of_type("evict") if e.get("pid") == ui.pid]
                dones = [e for e in ag.of_type("evict_done") if e.get("pid") == ui.pid]
                evicted = [d for d in dones if d.get("status") == "evicted"]
                freed = sum(d.get("bytes_freed", 0) for d in evicted)
                statuses = {}
                for d in dones:
                    statuses[d.get("status")] = statuses.get(d.get("status"), 0) + 1
                summary["agent"] = {
                    "commands": len(evicts), "acks": len(dones), "statuses": statuses,
                    "settled": st.get("settled"),
                    "evicted": len(evicted), "bytes_freed": freed,
                    "labels": sorted({d.get("label") for d in evicted}),
                    **{f"{k}_latency_ms": sorted(round(d[f"{k}_latency_ns"] / 1e6, 1)
                                                 for d in evicted if f"{k}_latency_ns" in d)
                       for k in ("recv", "ack", "freed")}}
                # every command's outcome: post -> received / ack / RSS drop
                summary["evict_done"] = [{k: d.get(k) for k in (
                    "label", "status", "bytes_freed", "recv_latency_ns",
                    "ack_latency_ns", "freed_latency_ns")} for d in dones]
                check(results, "the agent's commands were acked 'evicted' with RSS freed",
                      evicts and evicted and freed > 0, summary["agent"])
                check(results, "labels name the node (never '?')",
                      evicted and all(d.get("label") not in ("", "?") for d in evicted),
                      summary["agent"]["labels"])
                check(results, "/ramcache/status shows the evictions with latency",
                      st.get("evicted", 0) >= 1 and st["last"]
                      and all(e["latency_ms"] is not None for e in st["last"]),
                      st.get("last", [])[-2:])
        finally:
            if ag is not None:
                ag.stop()
                summary["agent_events"] = [e for e in ag.events if e.get("type") in (
                    "evict", "evict_done", "control", "error", "warning", "start")][:400]
                summary["agent_stderr"] = ag.stderr[-50:]
            rc = ui.stop()
            text = ui.text()
            summary["exit"] = rc
            if not a.no_agent:
                check(results, "Ctrl-C: ComfyUI stops cleanly, no traceback from the package",
                      rc == 0 and "Stopped server" in text and "cannot join thread" not in text
                      and not re.search(r'File "[^"]*(custom_nodes/ramcache_bpf|'
                                        + re.escape(PKG) + r')/', text),
                      {"rc": rc})
            summary["log_tail"] = text[-1500:]
    shutil.rmtree(tmp, ignore_errors=True)
    finish(results, summary, a.json)


if __name__ == "__main__":
    main()
