"""Real ComfyUI for the tests and the benchmarks: the upstream trees kept
in ../shared/comfyui unpacked once, ComfyUI's own main.py started on CPU
(Debian's python3 and python3-torch) in a scratch memory cgroup, prompts
driven over its HTTP API and followed on its websocket, memory sampled.

Nothing is written into a tree: each run gets a scratch base directory
(--base-directory: custom_nodes, input, output, temp, user) and an
in-memory database (--database-url sqlite:///:memory:), and Python writes
no bytecode. The package (and, when asked, the test nodes of
realnodes/) are linked into the scratch custom_nodes.

Third-party modules ComfyUI imports at start-up that Debian 12 lacks are
replaced by empty modules, only when they are not importable (STUBS); a
run prints which ones it replaced. ComfyUI's own modules always run.
"""
import asyncio
import contextlib
import fcntl
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import types
import urllib.error
import urllib.request
import uuid

from rctest import free_port, py_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.environ.get("RAMCACHE_ROOT") or os.path.dirname(PKG)
TEST_NODES = os.path.join(HERE, "realnodes")
# The stand-ins real model loads need (modelkit/README.md), turned on in a
# run that links model files into its scratch base.
MODELKIT_BOOT = os.path.join(HERE, "modelkit", "boot.py")
MiB = 1 << 20
GiB = 1 << 30
PYTHON = "/usr/bin/python3"  # Debian's python3 with python3-torch
VERSIONS = ("0.3.64", "0.3.75", "0.25.0", "0.33.0")
UNPACK_TO = os.environ.get("RAMCACHE_COMFYUI_UNPACK", "/var/tmp")

# Imported by ComfyUI at start-up, never used by these workflows, missing
# from Debian 12 (why each, in COMPATIBILITY.md): empty modules, only
# when not importable.
STUBS = ["safetensors", "einops", "transformers", "tokenizers", "torchsde",
         "kornia", "spandrel", "pydantic_settings", "comfy_kitchen", "av",
         "alembic", "sqlalchemy", "blake3", "comfy_aimdo"]
# Debian packages older than a tree requires (its requirements.txt) and
# that then fail ComfyUI's imports: replaced as if absent, with the
# modules that need them. SQLAlchemy 1.4 lacks sqlalchemy.orm.mapped_column
# (2.0), which 0.25.0 and newer import at start-up for their asset database.
TOO_OLD = {"SQLAlchemy": ["sqlalchemy", "alembic"], "av": ["av"],
           "pydantic": ["pydantic", "pydantic_settings"]}
# Packages ComfyUI reads files from (the web frontend, the workflow
# templates, the node docs): folders with those files.
DATA_STUBS = {
    "comfyui_frontend_package": {
        "static/index.html": "<!doctype html><title>ComfyUI</title>\n"},
    "comfyui_workflow_templates": {
        "templates/index.json": "[]\n",
        "__init__.py": "def iter_templates():\n    return iter(())\n\n\n"
                       "def get_asset_path(template_id, filename):\n    return ''\n"},
    "comfyui_embedded_docs": {"docs/index.html": "\n"},
}
# torch 1.13 lacks dtypes newer ComfyUI names at import time; aliases
# only, never used by these workflows.
TORCH_ALIASES = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                 "float8_e5m2fnuz", "uint16", "uint32", "uint64"]

BOOT = r'''
import importlib.abc, importlib.machinery, importlib.util, os, runpy, sys, types
STUBS, FORCE, ALIASES, CONTROL = {stubs!r}, {force!r}, {aliases!r}, {control!r}
missing = {{n for n in STUBS if importlib.util.find_spec(n) is None}} | set(FORCE)

class _Meta(type):
    def __getattr__(cls, n): return _Any()

class _Any(metaclass=_Meta):
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Any()
    def __getattr__(self, n): return _Any()
    def __iter__(self): return iter(())
    def __bool__(self): return False

class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = lambda n: _Meta(n, (_Any,), {{}}) if n[:1].isupper() else _Any()
        return m
    def exec_module(self, m): pass

class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in missing:
            return importlib.machinery.ModuleSpec(name, _Loader(), is_package=True)

def _torch_shims(torch):
    """What ComfyUI names at import time of torch >= 2 that 1.13 lacks."""
    if not hasattr(torch.serialization, "add_safe_globals"):
        torch.serialization.add_safe_globals = lambda globs: None
    if not hasattr(torch.nn, "RMSNorm"):
        class RMSNorm(torch.nn.Module):
            def __init__(self, normalized_shape, eps=None, elementwise_affine=True,
                         device=None, dtype=None):
                super().__init__()
                if isinstance(normalized_shape, int):
                    normalized_shape = (normalized_shape,)
                self.normalized_shape, self.eps = tuple(normalized_shape), eps
                self.elementwise_affine = elementwise_affine
                self.weight = torch.nn.Parameter(torch.ones(
                    self.normalized_shape, device=device, dtype=dtype)) \
                    if elementwise_affine else None
            def forward(self, x):
                dims = tuple(range(-len(self.normalized_shape), 0))
                eps = self.eps or torch.finfo(x.dtype).eps
                y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
                return y * self.weight if self.weight is not None else y
        torch.nn.RMSNorm = RMSNorm
    if not hasattr(torch, "_dynamo"):  # torch.compile is 2.0
        dyn = types.ModuleType("torch._dynamo")
        def disable(fn=None, recursive=True):
            return fn if fn is not None else (lambda f: f)
        dyn.disable = disable
        torch._dynamo = sys.modules["torch._dynamo"] = dyn

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
            _torch_shims(m)
        spec.loader.exec_module = exec_module
        return spec

class _NumpyDtypes(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """numpy.dtypes (numpy 1.25) for numpy 1.24: the dtype classes."""
    def find_spec(self, name, path, target=None):
        if name != "numpy.dtypes" or importlib.machinery.PathFinder.find_spec(
                "dtypes", path) is not None:
            return None
        return importlib.machinery.ModuleSpec(name, self)
    def create_module(self, spec):
        return None
    def exec_module(self, m):
        import numpy
        for t in ("float64", "float32", "float16", "int64", "int32", "uint8", "bool_"):
            name = t.rstrip("_").capitalize() + "DType"
            setattr(m, name.replace("Bool", "Bool"), type(numpy.dtype(t)))

sys.meta_path.insert(0, _Finder())
sys.meta_path.insert(0, _TorchAliases())
sys.meta_path.insert(0, _NumpyDtypes())
if CONTROL == "file":
    os.environ["RAMCACHE_CONTROL"] = "/dev/shm/ramcache-%d" % os.getpid()
else:
    os.environ.pop("RAMCACHE_CONTROL", None)
import faulthandler, signal
faulthandler.register(signal.SIGUSR1, all_threads=True)  # where is it stuck?
MODELKIT = {modelkit!r}
if MODELKIT:  # real model loads: modelkit/boot.py (what it stands in for)
    _mk_spec = importlib.util.spec_from_file_location("ramcache_modelkit_boot", MODELKIT)
    _mk = importlib.util.module_from_spec(_mk_spec)
    _mk_spec.loader.exec_module(_mk)
    _mk.install(missing)
print("ramcache-real: stubbed", sorted(missing), flush=True)
# ComfyUI's own modules come from d, first on PYTHONPATH (realcomfy.ComfyUI
# starts it so), as `python main.py` has it first on sys.path
d = sys.argv[1]
sys.argv = [os.path.join(d, "main.py")] + sys.argv[2:]
os.chdir(d)
runpy.run_path(os.path.join(d, "main.py"), run_name="__main__")
'''


# ------------------------------------------------------------ the trees

def git(args, cwd):
    try:
        r = subprocess.run(["git", *args], cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def trees_dir():
    """The folder of ComfyUI tarballs: $RAMCACHE_COMFYUI_TREES, else
    ../shared/comfyui beside this repository, beside its main worktree, or
    beside the repository it was cloned from (CI's clean clone); None when
    none has them."""
    env = os.environ.get("RAMCACHE_COMFYUI_TREES")
    if env:
        return env if os.path.isdir(env) else None
    repos = [ROOT]
    common = git(["rev-parse", "--path-format=absolute", "--git-common-dir"], ROOT)
    if common:
        repos.append(os.path.dirname(common))
    origin = git(["remote", "get-url", "origin"], ROOT)
    if origin and os.path.isdir(origin):
        repos.append(origin)
    for r in repos:
        d = os.path.join(os.path.dirname(os.path.abspath(r)), "shared", "comfyui")
        if any(os.path.exists(tarball(v, d)) for v in VERSIONS):
            return d
    return None


def available():
    """The versions whose tree is unpacked or whose tarball is found."""
    d = trees_dir()
    return [v for v in VERSIONS if os.path.isfile(os.path.join(tree_path(v), "main.py"))
            or (d and os.path.exists(tarball(v, d)))]


def tarball(version, d):
    return os.path.join(d, f"comfyui-{version}.tar.gz")


def tree_path(version):
    return os.path.join(UNPACK_TO, f"ramcache-comfyui-{version}")


def _lock_path():
    team = "/work/locks/comfyui-unpack.lock"  # shared with other checkouts
    return team if os.path.isdir(os.path.dirname(team)) else \
        os.path.join(UNPACK_TO, "ramcache-comfyui-unpack.lock")


def unpack(version, d=None):
    """The unpacked tree of @version (from @d or trees_dir()), unpacked
    once under a lock into a temporary folder then renamed: a tree that
    exists is complete and read-only to every run."""
    dst = tree_path(version)
    if os.path.isfile(os.path.join(dst, "main.py")):
        return dst
    d = d or trees_dir()
    if not d or not os.path.exists(tarball(version, d)):
        raise FileNotFoundError(f"no ComfyUI {version} tarball in {d}")
    with open(_lock_path(), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(os.path.join(dst, "main.py")):
            return dst
        tmp = tempfile.mkdtemp(prefix=f"ramcache-comfyui-{version}.", dir=UNPACK_TO)
        try:
            with tarfile.open(tarball(version, d)) as t:
                t.extractall(tmp)
            inner = os.path.join(tmp, f"comfyui-{version}")
            os.chmod(inner, 0o755)
            os.rename(inner, dst)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dst


def tree_version(tree):
    m = re.search(r'__version__\s*=\s*"([^"]+)"',
                  read_text(os.path.join(tree, "comfyui_version.py")))
    return m.group(1) if m else None


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def cache_ram_form(tree):
    """'none', 'one' or 'two': the --cache-ram form of a tree, read from
    its comfy/cli_args.py."""
    m = re.search(r'"--cache-ram"[^\n]*nargs=(\'[*?]\'|"[*?]")',
                  read_text(os.path.join(tree, "comfy", "cli_args.py")))
    if not m:
        return "none"
    return "two" if "*" in m.group(1) else "one"


def package_module(name, pkg=PKG):
    """Module @name of the package in folder @pkg, imported as a submodule
    of a parent of its own (the package's modules import each other
    relatively) without running the package's __init__ (which hooks into
    ComfyUI)."""
    parent = "ramcache_pkg_%x" % (hash(os.path.realpath(pkg)) & 0xffffffff)
    if parent not in sys.modules:
        m = types.ModuleType(parent)
        m.__path__ = [pkg]
        sys.modules[parent] = m
    return importlib.import_module(f"{parent}.{name}")


FAMILIES = {"none": "FAMILY_NO_RAM", "one": "FAMILY_ONE", "two": "FAMILY_TWO"}


def recommended(tree, pkg=PKG):
    """The command line the package's README (its compat.py) recommends
    for this tree's --cache-ram form, less 'python main.py'."""
    c = package_module("compat", pkg)
    return c.command_line(getattr(c, FAMILIES[cache_ram_form(tree)])).split()[2:]


def has_flag(tree, flag):
    return f'"{flag}"' in read_text(os.path.join(tree, "comfy", "cli_args.py"))


# ------------------------------------------------------- a scratch base

def _version_tuple(v):
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def installed_version(name):
    """@name's version as PYTHON (the interpreter ComfyUI runs under, not
    necessarily this one) has it installed, or None."""
    p = subprocess.run([PYTHON, "-c", "import importlib.metadata as m, sys\n"
                        "try: print(m.version(sys.argv[1]))\n"
                        "except m.PackageNotFoundError: pass", name],
                       capture_output=True, text=True, timeout=60)
    return p.stdout.strip() or None


def too_old(tree):
    """Modules to replace because Debian's package is older than @tree's
    requirements.txt asks (TOO_OLD)."""
    out = []
    for line in read_text(os.path.join(tree, "requirements.txt")).splitlines():
        m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(>=|~=)\s*([0-9.]+)", line)
        if not m or m.group(1) not in TOO_OLD:
            continue
        have = installed_version(m.group(1))
        if have and _version_tuple(have) < _version_tuple(m.group(3)):
            out += TOO_OLD[m.group(1)]
    return out


class Scratch:
    """A run's scratch folder: the boot script, the data stand-ins and
    the --base-directory whose custom_nodes hold the package (@package:
    True for this one, or another checkout's comfyui/ folder) and the test
    nodes (@test_nodes). Removed by cleanup()."""

    def __init__(self, tree, package=True, test_nodes=True, control="memfd", models=None):
        self.dir = tempfile.mkdtemp(prefix="ramcache-real-", dir="/var/tmp")
        os.chmod(self.dir, 0o755)
        self.base = os.path.join(self.dir, "base")
        nodes = os.path.join(self.base, "custom_nodes")
        os.makedirs(nodes)
        if package:
            os.symlink(PKG if package is True else package,
                       os.path.join(nodes, "ramcache_bpf"))
        if test_nodes:
            os.symlink(TEST_NODES, os.path.join(nodes, "ramcache_test_nodes"))
        for pkg, files in DATA_STUBS.items():
            for rel, text in files.items():
                path = os.path.join(self.dir, pkg, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            init = os.path.join(self.dir, pkg, "__init__.py")
            if not os.path.exists(init):
                open(init, "w").close()
        if models is not None:  # generated model files (modelkit/generate.py)
            from modelkit import workflow
            workflow.link_models(self.base, models, tree)
        self.boot = os.path.join(self.dir, "ramcache_real_boot.py")
        with open(self.boot, "w") as f:
            f.write(BOOT.format(stubs=STUBS, force=too_old(tree), aliases=TORCH_ALIASES,
                                control=control,
                                modelkit=MODELKIT_BOOT if models is not None else None))

    def log(self, name):
        return os.path.join(self.dir, name)

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


# ------------------------------------------------------------- ComfyUI

class Http:
    def __init__(self, port):
        self.port = port
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


class ComfyUI:
    """ComfyUI's main.py --cpu of @tree with @args, in cgroup @cg (an
    object with preexec(), or None), its output in @log."""

    def __init__(self, tree, scratch, args, cg=None, port=None, log="comfyui.log"):
        self.port = port or free_port()
        self.http = Http(self.port)
        self.log_path = scratch.log(log)
        self.log = open(self.log_path, "w")
        self.args = list(args)
        into_cg = cg.preexec() if cg else None

        def preexec():
            # Ctrl-C must reach ComfyUI even when this runs in the background
            # (a non-interactive shell starts background jobs ignoring SIGINT)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            if into_cg:
                into_cg()
        self.proc = subprocess.Popen(
            [PYTHON, scratch.boot, tree, "--cpu", "--listen", "127.0.0.1",
             "--port", str(self.port), "--disable-auto-launch",
             "--base-directory", scratch.base,
             "--database-url", "sqlite:///:memory:", *self.args],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=preexec,
            env=py_env(tree, base=dict(os.environ, PYTHONUNBUFFERED="1",
                                       PYTHONDONTWRITEBYTECODE="1")))
        self.pid = self.proc.pid

    def text(self):
        return read_text(self.log_path)

    def alive(self):
        return self.proc.poll() is None

    def wait_up(self, timeout=180):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.alive():
                raise RuntimeError(f"ComfyUI exited with {self.proc.returncode}:\n"
                                   + self.text()[-3000:])
            try:
                self.http.get("/system_stats", timeout=2)
                return
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(0.3)
        raise TimeoutError("ComfyUI did not start:\n" + self.text()[-3000:])

    def stop(self):
        """Ctrl-C, as a user stops it; its exit status."""
        if self.alive():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"/dev/shm/ramcache-{self.pid}")
        return self.proc.returncode

    def stubbed(self):
        m = re.search(r"ramcache-real: stubbed (\[.*\])", self.text())
        return json.loads(m.group(1).replace("'", '"')) if m else None


@contextlib.contextmanager
def started(tree, args, cg, package=True, test_nodes=True, models=None):
    """ComfyUI of @tree up in @cg in a fresh Scratch (@models: generated
    model files to load); on the way out its agent (ui.agent, when a caller
    set one) and ComfyUI are stopped and the scratch folder removed."""
    scratch = Scratch(tree, package=package, test_nodes=test_nodes, models=models)
    ui = None
    try:
        ui = ComfyUI(tree, scratch, args, cg)
        ui.agent = None
        ui.wait_up()
        yield ui
    finally:
        if ui is not None:
            if ui.agent is not None:
                ui.agent.stop()
            ui.stop()
        scratch.cleanup()


class Events:
    """ComfyUI's websocket messages for one client id, with the time each
    arrived (CLOCK_MONOTONIC ns), read by a thread of its own."""

    def __init__(self, port):
        import aiohttp  # ComfyUI's own dependency (python3-aiohttp)
        self.aiohttp = aiohttp
        self.client_id = f"ramcache-real-{uuid.uuid4().hex[:8]}"
        self.url = f"http://127.0.0.1:{port}/ws?clientId={self.client_id}"
        self.msgs = []
        self.connected = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._t = threading.Thread(target=self._loop.run_until_complete,
                                   args=(self._run(),), daemon=True)
        self._t.start()
        if not self.connected.wait(20):
            raise TimeoutError(f"no websocket at {self.url}")

    async def _run(self):
        aiohttp = self.aiohttp
        with contextlib.suppress(Exception):
            async with aiohttp.ClientSession() as s:
                async with s.ws_connect(self.url, heartbeat=None, max_msg_size=0) as ws:
                    self.connected.set()
                    async for msg in ws:
                        if msg.type != aiohttp.WSMsgType.TEXT:
                            continue
                        with contextlib.suppress(ValueError):
                            self.msgs.append((time.monotonic_ns(), json.loads(msg.data)))

    def of(self, prompt_id, start=0):
        return [(t, m) for t, m in self.msgs[start:]
                if (m.get("data") or {}).get("prompt_id") == prompt_id]


DONE = ("execution_success", "execution_error", "execution_interrupted")


def run_prompt(ui, events, prompt, timeout=600):
    """Queue @prompt and wait for it: {"ok", "wall_s", "executed": node ids
    in the order they ran, "cached": node ids ComfyUI took from its
    cache, "nodes": [[id, class, seconds]], "error"}."""
    start = len(events.msgs)
    t0 = time.monotonic_ns()
    try:
        pid = ui.http.post("/prompt", {"prompt": prompt,
                                       "client_id": events.client_id})["prompt_id"]
    except (urllib.error.URLError, OSError, ValueError) as e:
        return {"ok": False, "error": f"queue: {e}", "executed": [], "cached": [],
                "wall_s": 0.0, "nodes": []}
    end = time.monotonic() + timeout
    status = None
    while time.monotonic() < end and ui.alive():
        mine = events.of(pid, start)
        status = next((m for _, m in mine if m["type"] in DONE), None)
        if status:
            break
        time.sleep(0.01)
    mine = events.of(pid, start)
    t1 = next((t for t, m in mine if m["type"] in DONE), time.monotonic_ns())
    return summarize(prompt, mine, status, t0, t1, ui.alive())


def summarize(prompt, mine, status, t0, t1, alive):
    """A prompt's outcome from its websocket messages (see run_prompt)."""
    executed, cached, starts = [], [], []
    for t, m in mine:
        d = m.get("data") or {}
        if m["type"] == "executing" and d.get("node") is not None:
            executed.append(d["node"])
            starts.append((t, d["node"]))
        elif m["type"] == "execution_cached":
            cached = list(d.get("nodes") or [])
    nodes = []
    for i, (t, n) in enumerate(starts):
        t_end = starts[i + 1][0] if i + 1 < len(starts) else t1
        nodes.append([n, prompt.get(n, {}).get("class_type"), round((t_end - t) / 1e9, 3)])
    err = None
    if status is None:
        err = "ComfyUI died" if not alive else "timeout"
    elif status["type"] != "execution_success":
        d = status.get("data") or {}
        err = f"{status['type']}: {d.get('exception_type')}: {d.get('exception_message')}"
    return {"ok": err is None, "wall_s": round((t1 - t0) / 1e9, 3),
            "executed": executed, "cached": cached, "nodes": nodes, "error": err}


# ------------------------------------------------------ memory sampling

def cg_usage(cg):
    path = "memory.current" if cg.version == 2 else "memory.usage_in_bytes"
    return int(cg.read(path))


def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class Sampler:
    """The cgroup's usage and ComfyUI's RSS every @period_s, with
    CLOCK_MONOTONIC ns (the agent's clock): [t_ns, usage, rss]."""

    def __init__(self, cg, pid, period_s=0.05):
        self.cg, self.pid, self.period = cg, pid, period_s
        self.samples = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                self.samples.append([time.monotonic_ns(), cg_usage(self.cg), rss(self.pid)])
            self._stop.wait(self.period)

    def stop(self):
        self._stop.set()
        self._t.join(5)
        return self.samples


def status(ui):
    """/ramcache/status, or {} when it does not answer."""
    try:
        return ui.http.get("/ramcache/status", timeout=5)
    except (urllib.error.URLError, OSError, ValueError):
        return {}


def wait_attached(ui, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if status(ui).get("attached"):
            return True
        time.sleep(0.1)
    return False


def pct(values, p):
    """The p-th percentile (nearest rank) of @values, None when empty."""
    v = sorted(values)
    if not v:
        return None
    return v[min(len(v) - 1, max(0, -(-len(v) * p // 100) - 1))]
