#!/usr/bin/env python3
"""Cloning comfyui/ into custom_nodes is the whole install: a copy of the
package alone (no build folder, no libramcache anywhere) loads in the
stand-in ComfyUI, makes its memfd page and evicts for an agent; prompts,
progress hooks and interrupts behave as before; shutdown is clean at any
point."""
import os
import shutil
import tempfile
import threading

os.environ["RAMCACHE_LIB"] = "/nonexistent/libramcache.so"  # must not matter
os.environ.pop("RAMCACHE_CONTROL", None)

import env  # noqa: E402
from env import MiB, node  # noqa: E402
from fakeagent import FakeAgent  # noqa: E402
from rctest import main, test  # noqa: E402

import comfy.model_management  # noqa: E402
import comfy.utils  # noqa: E402

CUSTOM_NODES = tempfile.mkdtemp(prefix="ramcache-custom-nodes-")
CLONE = os.path.join(CUSTOM_NODES, "ramcache_bpf")
shutil.copytree(env.PKG, CLONE, ignore=shutil.ignore_patterns("tests", "__pycache__"))

_server = env.comfyui_main.Server()
env.comfyui_main.hijack_progress(_server)  # main.py sets its hook first
pkg = env.comfyui_main.load_custom_node(CLONE)
BRIDGE = pkg.bridge.BRIDGE


@test
def the_clone_is_python_and_javascript_only():
    for dirpath, _, files in os.walk(CLONE):
        for f in files:
            assert f.endswith((".py", ".js", ".md")), os.path.join(dirpath, f)
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
    """atexit may run before the listener started (--quick-test-for-ci) or
    twice; it never raises."""
    Bridge = pkg.bridge.Bridge
    b = Bridge()
    b.close()  # never opened
    b = Bridge()
    b._listener = threading.Thread(target=lambda: None)  # built, not started
    b.close()
    b.close()
    b = Bridge()
    b._open()
    assert b.page is not None and b._listener.is_alive()
    fd = b.page.fd
    b.close()
    assert b.page is None and b._listener is None
    try:
        os.fstat(fd)
        raise AssertionError("the page's fd is still open")
    except OSError:
        pass


if __name__ == "__main__":
    main()
