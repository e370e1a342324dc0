#!/usr/bin/env python3
"""GET /ramcache/status on the stand-in's aiohttp server (built before the
package loads, as ComfyUI's main.py does): JSON with the agent's level,
headroom, eta and the last evictions with their latency."""
import asyncio
import json
import os
import threading
import urllib.request

import env
from env import MiB, node
from fakeagent import FakeAgent
from rctest import main, test

import server  # the stand-in's server.py

from aiohttp import web  # noqa: E402

PROMPT_SERVER = server.PromptServer()
pkg = env.load_package()
BRIDGE = pkg.bridge.BRIDGE


class Http:
    """PromptServer's app on 127.0.0.1 (a free port), on its own loop."""

    def __enter__(self):
        PROMPT_SERVER.add_routes()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self.loop)
            self.runner = web.AppRunner(PROMPT_SERVER.app)
            self.loop.run_until_complete(self.runner.setup())
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            self.loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()
        self.th = threading.Thread(target=run, daemon=True)
        self.th.start()
        assert ready.wait(10), "server did not start"
        return self

    def get(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
            return r.status, r.headers.get("Content-Type"), json.loads(r.read())

    def __exit__(self, *exc):
        fut = asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop)
        fut.result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.th.join(10)


class Fixed(list):
    def append(self, _):
        pass

    def clear(self):
        pass


@test
def route_is_registered_on_the_prompt_server():
    paths = [getattr(r, "path", None) for r in PROMPT_SERVER.routes]
    assert "/ramcache/status" in paths, paths


@test
def status_json_before_and_after_the_agent_attaches():
    w = env.worker(ram=2.0, ram_inactive=16.0)  # newer ComfyUI's default form
    a = FakeAgent(BRIDGE.page.path)
    try:
        with Http() as http:
            code, ctype, st = http.get("/ramcache/status")
            assert code == 200 and ctype.startswith("application/json"), (code, ctype)
            assert st["page"] and st["control"] == "memfd:ramcache", st
            assert st["attached"] is False and st["level"] == "unknown"
            assert st["headroom"] is None and st["eta_s"] is None
            assert st["comfyui"]["cache_type"] == "RAM_PRESSURE", st["comfyui"]
            assert st["hooks"] == [
                "execution.PromptExecutor.__init__", "execution.PromptExecutor.execute",
                "execution.PromptExecutor.reset", "execution.execute",
                "execution.get_output_data", "comfy.utils.set_progress_bar_global_hook", "comfy.utils.load_torch_file",
                "comfy.model_management.load_models_gpu",
                "comfy.model_management.free_memory",
                "comfy.model_management.free_pins",
                "comfy.model_management.cleanup_models_gc",
                "comfy.model_management.unload_all_models",
                "comfy.memory_management.extra_ram_release",
                "comfy.sd.CLIP.__init__", "comfy.sd.VAE.__init__",
                "comfy.model_base.BaseModel.load_model_weights"], st["hooks"]
            # ComfyUI's own policy, and what the package sets aside of it
            own = {r["what"].split(" (")[0]: r for r in st["own_policy"]}
            assert own["inactive threshold"]["now"] == "ComfyUI's (no agent)", own
            assert own["active headroom"]["now"] == "kept", own
            assert all(r["why"] for r in st["own_policy"]), own

            # the agent attaches, headroom falls 64 MiB a second
            a.start_heartbeat()
            p1 = {"old": node("MakeTensor", mib=8, tag="route"), "s": node("Sink", value=["old", 0])}
            assert w.run(p1, ["s"], "r1")[0]
            base = 2048 * MiB
            a.set_level(1, headroom=base - 11 * 16 * MiB, target=8 * MiB)
            # the readings the serving thread would take every 250 ms, fixed here
            # so the serving thread's own ones cannot shift the eta
            BRIDGE.headroom_samples = Fixed((i * 0.25, base - i * 16 * MiB) for i in range(12))
            eid = [e for e, (c, k) in BRIDGE._where.items() if c() is not None][0]
            seq = a.post(eid, reason=2)
            ack = a.wait_ack(seq)
            assert ack and ack["status"] == pkg.page.ACK_EVICTED, ack

            code, _, st = http.get("/ramcache/status")
            assert st["attached"] is True and st["agent_pid"] == os.getpid(), st
            assert st["level"] == "warn" and st["target"] == 8 * MiB
            assert st["headroom"] == base - 11 * 16 * MiB
            # 1856 MiB left, falling 64 MiB/s: about 29 s
            assert st["eta_s"] is not None and 25 < st["eta_s"] < 33, st["eta_s"]
            assert st["evicted"] >= 1 and st["evicted_bytes"] >= 8 * MiB, st
            last = st["last"][-1]
            assert last["label"] == "old:MakeTensor" and last["bytes"] == 8 * MiB, last
            assert last["reason"] == "inactive" and last["latency_ms"] is not None, last
            assert 0 <= last["latency_ms"] < 5000, last
            assert "rss_drop" in last
            own = {r["what"].split(" (")[0]: r for r in st["own_policy"]}
            assert own["inactive threshold"]["now"] == "set aside", own
            for k in ("set_aside_calls", "served_in_node", "comfy_freed", "trims"):
                assert isinstance(st[k], int), (k, st)
    finally:
        BRIDGE.headroom_samples = pkg.bridge.collections.deque(maxlen=64)
        a.set_level(0)
        a.stop_heartbeat()
        a.close()
        w.stop()


@test
def eta_is_none_while_headroom_does_not_fall():
    eta = pkg.eta.eta_seconds
    assert eta([]) is None
    assert eta([(t, 1000 * MiB) for t in range(10)]) is None  # flat
    assert eta([(t, (1000 + t) * MiB) for t in range(10)]) is None  # rising
    e = eta([(t, (1000 - 10 * t) * MiB) for t in range(10)])  # 10 MiB/s, 910 left
    assert abs(e - 91) < 0.5, e
    # only the last 10 s count: an old fall does not make an eta now
    old = [(t, (1000 - 50 * t) * MiB) for t in range(5)]
    assert eta(old + [(100 + t, 500 * MiB) for t in range(10)]) is None


if __name__ == "__main__":
    main()
