#!/usr/bin/env python3
"""Cloning comfyui/ into custom_nodes is the whole install: a copy of the
package alone (no build folder, no libramcache anywhere) loads in the
stand-in ComfyUI, makes its memfd page and evicts for an agent; prompts,
progress hooks and interrupts behave as before; shutdown is clean at any
point.

The package's page is the ramcache module (python/ramcache), which the
folder carries as ramcache/, a link to ../python/ramcache. Each way of
installing the folder is tried: a copy that follows the link (cp -rL, as
here), the folder linked into custom_nodes (the README's way), and a copy
that kept the link but lost its target (cp -r), which uses a ramcache
installed with pip or says in one line what is missing."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

os.environ["RAMCACHE_LIB"] = "/nonexistent/libramcache.so"  # must not matter
os.environ.pop("RAMCACHE_CONTROL", None)

import env  # noqa: E402
from env import MiB, node  # noqa: E402
from fakeagent import FakeAgent  # noqa: E402
from rctest import main, py_env, test  # noqa: E402

import comfy.model_management  # noqa: E402
import comfy.utils  # noqa: E402

CUSTOM_NODES = tempfile.mkdtemp(prefix="ramcache-custom-nodes-")
atexit.register(shutil.rmtree, CUSTOM_NODES, True)
CLONE = os.path.join(CUSTOM_NODES, "ramcache_bpf")
# as git clones it: tracked files only (no tests, no bytecode caches)
shutil.copytree(env.PKG, CLONE, ignore=shutil.ignore_patterns("tests", "__pycache__"))
# what the clone ships, listed before ComfyUI imports it (importing writes
# __pycache__/*.pyc into the clone unless PYTHONDONTWRITEBYTECODE is set)
CLONED = [os.path.join(d, f) for d, _, files in os.walk(CLONE) for f in files]

_server = env.comfyui_main.Server()
env.comfyui_main.hijack_progress(_server)  # main.py sets its hook first
pkg = env.comfyui_main.load_custom_node(CLONE)
BRIDGE = pkg.bridge.BRIDGE


@test
def the_clone_is_python_and_javascript_only():
    assert any(f.endswith("__init__.py") for f in CLONED), CLONED
    for f in CLONED:  # py.typed: the module's empty marker of type hints
        assert f.endswith((".py", ".js", ".md", "/py.typed")), f
    src = "".join(open(os.path.join(CLONE, f)).read() for f in os.listdir(CLONE)
                  if f.endswith(".py"))
    assert "libramcache.so" not in src and "RAMCACHE_LIB" not in src


@test
def loads_and_evicts_without_any_build():
    w = env.worker()
    a = None
    try:
        assert BRIDGE.page is not None and BRIDGE.page.memfd, BRIDGE.disabled
        assert pkg.__file__.startswith(CLONE)
        a = FakeAgent(BRIDGE.page.path)
        a.start_heartbeat()
        p = {"t": node("MakeTensor", mib=8, tag="clone"), "s": node("Sink", value=["t", 0])}
        assert w.run(p, ["s"], "c1")[0]
        eid = next(e for e, v in a.entries().items() if v["bytes"] == 8 * MiB)
        ack = a.wait_ack(a.post(eid))
        assert ack and ack["status"] == pkg.page.ACK_EVICTED, ack
        assert len(w.executor.caches.outputs.cache) == 1  # the sink's entry stays
        assert eid not in a.entries()
    finally:
        if a is not None:
            a.stop_heartbeat()
            a.close()
        w.stop()


@test
def prompts_run_unchanged():
    w = env.worker()
    try:
        p = {"t": node("MakeTensor", mib=1), "k": node("Sampler", steps=3, latent=["t", 0]),
             "s": node("Sink", value=["k", 0])}
        ok, msgs = w.run(p, ["s"], "p1")
        assert ok, msgs
        assert [v for _, v, _ in w.server.progress][-3:] == [1, 2, 3]
        assert len(w.executor.caches.outputs.cache) == 3
    finally:
        w.stop()


@test
def hook_installed_before_load_is_wrapped():
    """The package loaded after main.py set the progress hook still sees it."""
    assert getattr(comfy.utils.PROGRESS_BAR_HOOK, "__ramcache_wrapped__", False)


@test
def interrupts_still_work():
    w = env.worker()
    try:
        env.STEP_HOOK[:] = [lambda i: i == 1 and comfy.model_management.interrupt_current_processing()]
        p = {"k": node("Sampler", steps=4), "s": node("Sink", value=["k", 0])}
        ok, msgs = w.run(p, ["s"], "p1")
        assert not ok and any(m[0] == "execution_interrupted" for m in msgs), msgs
        env.STEP_HOOK.clear()
        assert w.run(p, ["s"], "p2")[0]
    finally:
        w.stop()


@test
def close_is_clean_at_any_point():
    """atexit may run before the serving thread started (--quick-test-for-ci)
    or twice; it never raises."""
    Bridge = pkg.bridge.Bridge
    b = Bridge()
    b.close()  # never opened
    b = Bridge()
    b.ex = pkg.page.executor.Executor(start=False)  # made, not serving yet
    b.page = b.ex.page
    b.close()
    b.close()
    assert b.page is None and b.ex.page.closed
    b = Bridge()
    b._open()
    th = b.ex._thread
    assert b.page is not None and th.is_alive() and b._turn in b.ex.on_wake
    fd = b.page.fd
    b.close()
    assert b.page is None and not th.is_alive() and b.ex._thread is None
    try:
        os.fstat(fd)
        raise AssertionError("the page's fd is still open")
    except OSError:
        pass


LOAD_IN_A_FRESH_PROCESS = """
import json, os, sys
import comfyui_main
try:
    pkg = comfyui_main.load_custom_node(sys.argv[1])
except ImportError as e:
    print(json.dumps({"error": str(e)}))
    sys.exit(0)
b = pkg.bridge.Bridge()
b._open()
print(json.dumps({"module": pkg.page.Page.__module__,
                  "file": os.path.realpath(sys.modules[pkg.page.Page.__module__].__file__),
                  "memfd": b.page is not None and b.page.memfd,
                  "disabled": b.disabled}))
b.close()
"""


def load_elsewhere(folder, extra_path=()):
    """Load the package at @folder in a new stand-in ComfyUI process (the
    stand-in and @extra_path alone on its PYTHONPATH); what it says (the
    page module it used, or the import error)."""
    p = subprocess.run([sys.executable, "-c", LOAD_IN_A_FRESH_PROCESS, folder],
                       capture_output=True, text=True, timeout=60,
                       env=py_env(os.path.join(env.HERE, "standin"), *extra_path,
                                  base=dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
                                            PYTHONPATH="")))
    assert p.returncode == 0, p.stderr[-2000:]
    return __import__("json").loads(p.stdout.strip().splitlines()[-1])


RAMCACHE_SRC = os.path.realpath(os.path.join(env.ROOT, "python", "ramcache", "page.py"))


@test
def the_copy_carries_the_ramcache_module():
    """cp -rL (copytree follows links): ramcache/ is a real folder in the
    copy and the page comes from it, not from the repository."""
    assert not os.path.islink(os.path.join(CLONE, "ramcache"))
    assert os.path.isfile(os.path.join(CLONE, "ramcache", "page.py"))
    mod = BRIDGE.page.__class__.__module__
    assert mod == "ramcache_bpf.ramcache.page", mod
    got = load_elsewhere(CLONE)
    assert got.get("memfd") and got["file"] == os.path.join(
        os.path.realpath(CLONE), "ramcache", "page.py"), got


@test
def a_linked_folder_finds_the_module_through_its_link():
    """The README's install: custom_nodes/ramcache_bpf -> the repository's
    comfyui/; its ramcache/ link resolves to python/ramcache."""
    d = tempfile.mkdtemp(prefix="ramcache-custom-nodes-")
    try:
        link = os.path.join(d, "ramcache_bpf")
        os.symlink(env.PKG, link)
        got = load_elsewhere(link)
        assert got.get("memfd"), got
        assert got["module"] == "ramcache_bpf.ramcache.page", got
        assert got["file"] == RAMCACHE_SRC, got
    finally:
        shutil.rmtree(d)


@test
def a_copy_with_a_dangling_link_uses_an_installed_module_or_says_what_is_missing():
    """cp -r keeps ramcache/ as a link to ../python/ramcache, which is not
    there next to the copy: without an installed ramcache the import fails
    with one line saying how to install; with one (here: on the path, as
    pip puts it) the package uses it."""
    d = tempfile.mkdtemp(prefix="ramcache-custom-nodes-")
    try:
        copy = os.path.join(d, "ramcache_bpf")
        shutil.copytree(env.PKG, copy, symlinks=True,
                        ignore=shutil.ignore_patterns("tests", "__pycache__"))
        assert os.path.islink(os.path.join(copy, "ramcache"))
        assert not os.path.exists(os.path.join(copy, "ramcache"))
        got = load_elsewhere(copy)
        err = got.get("error", "")
        assert err.startswith("ramcache: the ramcache module is missing") and \
            "cp -rL" in err and "pip install" in err and "\n" not in err, got
        got = load_elsewhere(copy, [os.path.join(env.ROOT, "python")])
        assert got.get("memfd") and got["module"] == "ramcache.page", got
        assert got["file"] == RAMCACHE_SRC, got
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
