#!/usr/bin/env python3
"""Without libramcache the package logs one clear line and ComfyUI runs
unchanged: prompts, progress hooks and interrupts behave as before."""
import os

os.environ["RAMCACHE_LIB"] = "/nonexistent/libramcache.so"

import env  # noqa: E402
from env import node  # noqa: E402
from rctest import main, test  # noqa: E402

import comfy.model_management  # noqa: E402
import comfy.utils  # noqa: E402

env.worker  # the stand-in's hook is installed before the package loads here
_server = env.comfyui_main.Server()
env.comfyui_main.hijack_progress(_server)
pkg = env.load_package()


@test
def logs_one_clear_line():
    w = env.worker()
    try:
        lines = env.LOG.grep("libramcache not found")
        assert len(lines) == 1, env.LOG.lines
        assert "RAMCACHE_LIB" in lines[0] and "unchanged" in lines[0]
        assert pkg.bridge.BRIDGE.page is None
    finally:
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
        cache = w.executor.caches.outputs
        assert len(cache.cache) == 3
        assert pkg.nodes.status_text(pkg.bridge.BRIDGE.status()).startswith("ramcache: off")
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


if __name__ == "__main__":
    main()
