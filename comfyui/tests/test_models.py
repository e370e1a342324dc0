#!/usr/bin/env python3
"""Models in the stand-in ComfyUI, with a fake agent on the page: a model
file about to be read is announced (expect_bytes) and the load waits for
the agent to make room, serving its commands; the load is measured and a
cached model's reload cost published; a command for a model goes through
ComfyUI's own unload (free_memory) before its entry is dropped; until the
agent has counted a load, the models of earlier prompts stay ComfyUI's to
drop (its inactive-threshold release is not set aside)."""
import os
import tempfile
import threading
import time

import env
from env import MiB, node
from rctest import main, test

import comfy.model_management as mm
import comfy.utils
from comfy_execution import caching

pkg = env.load_package()
BRIDGE = pkg.bridge.BRIDGE
models = pkg.models
lib = pkg.page


def agent():
    return env.fake_agent(BRIDGE)


def model_file(mib):
    """A scratch model file of @mib MiB (removed at exit)."""
    fd, path = tempfile.mkstemp(prefix="ramcache-model-", suffix=".safetensors")
    os.ftruncate(fd, mib * MiB)
    os.close(fd)
    import atexit
    atexit.register(lambda: os.path.exists(path) and os.unlink(path))
    return path


def worker():
    """0.33.0's defaults: its inactive threshold above all RAM."""
    caching.virtual_memory_available = lambda: 8 << 30
    w = env.worker("RAM_PRESSURE", ram=2.4, ram_inactive=24.0)
    env.STEP_HOOK.clear()
    return w


def earlier_model(w, tag, mib=8):
    """A loader's output of a finished prompt; (entry id, key)."""
    p = {"m": node("LoadModel", mib=mib, tag=tag), "s": node("Sink", value=["m", 0])}
    ok, msgs = w.run(p, ["s"], "p-" + tag)
    assert ok, msgs
    loc = pkg.evict.locate(env.outputs(w), "m")
    return BRIDGE._ids[(id(loc[0]), loc[1])], loc[1]


def loader_prompt(path, tag):
    env.CALLS["load-" + tag] = lambda: comfy.utils.load_torch_file(path)
    return {"l": node("Call", tag="load-" + tag), "s": node("Sink", value=["l", 0])}


@test
def loads_are_learnt():
    loads = models.Loads()
    assert loads.estimate(100) == 250, "before any load: 2.5 x the file"
    assert loads.reload_ns(1 << 30) == 0, "unknown"
    loads.record(100 * MiB, 2.0, 160 * MiB)
    assert loads.estimate(100) == 160, loads.ratio
    assert loads.reload_ns(160 * MiB) == 2_000_000_000
    loads.record(100 * MiB, 1.0, -5 * MiB)  # the agent freed more than it took
    assert loads.count == 2 and loads.estimate(100) == 160, "teaches no ratio"
    assert models.file_bytes(4) == 0 and models.file_bytes("/nonexistent") == 0


@test
def what_evictions_leave_in_the_heap_for_a_load_is_told_and_counted():
    """Memory an eviction frees while a model loads stays in the heap (no
    trim: the load takes it again without page faults), so the RSS does
    not show it go: the announcement shrinks by it at once (else the agent,
    seeing no room come back, asks for more models), and the load counts
    it as taken (else the RSS growth per file byte, what the next load is
    announced as, learns too little: measured falling from 1.9 to 0.57 over
    a session of real checkpoints)."""
    rss = [1000 * MiB]
    told = []

    class Page:
        def expect(self, n):
            told.append(("expect", n))

        def expect_less(self, n):
            told.append(("less", n))

    loads = models.Loads()
    watch = models.LoadWatch(loads, lambda: rss[0])
    page = Page()
    assert watch.begin(model_file(100), page) == 250 * MiB
    watch.reuse(page, 100 * MiB)
    assert told[-1] == ("less", 150 * MiB), told
    rss[0] += 150 * MiB  # a load of 250 MiB, 100 of them from the heap
    assert watch.end(page) and told[-1] == ("expect", 0), told
    assert loads.ratio == 2.5, f"took 250 MiB for a 100 MiB file: {loads.ratio}"
    watch.reuse(page, 10 * MiB)  # no load running: nothing to count
    assert watch.running is None and told[-1] == ("less", 0), told


@test
def a_model_load_gets_its_room_from_the_agent_first():
    """The loader's file is announced before it is read; the agent's
    command for an earlier model is served while the load waits; the
    announcement is counted, then the file is read, then withdrawn."""
    w = worker()
    a = agent()
    a.start_heartbeat()
    path = model_file(8)
    log = {}

    def play():  # the agent: sees the announcement, asks, counts it
        end = time.monotonic() + 5
        while a.expected()[0] == 0 and time.monotonic() < end:
            time.sleep(0.005)
        log["expected"] = a.expected()[0]
        log["ack"] = a.wait_ack(a.post(eid), 3)
        a.count_announcement()
    try:
        eid, key = earlier_model(w, "old")
        BRIDGE._silent_pid = None
        t = threading.Thread(target=play)
        t.start()
        real = comfy.utils.load_torch_file.__wrapped__
        env.CALLS["read"] = lambda: log.setdefault("read_with", a.expected()[0])
        ok, msgs = w.run(loader_prompt(path, "new"), ["s"], "load")
        t.join(5)
        assert ok, msgs
        assert log["expected"] == int(8 * MiB * models.FIRST_RATIO), log
        assert log["ack"] and log["ack"]["status"] == lib.ACK_EVICTED, log
        assert key not in env.outputs(w).cache
        assert a.expected() == (0, 0), "withdrawn once the node ended"
        st = BRIDGE.status()["models"]
        assert st["loads"] == 1 and st["file_bytes"] == 8 * MiB, st
        assert st["agent_counts"] and st["waits_ms"][-1] < 1000, st
        assert real is not None
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def an_agent_that_never_counts_is_waited_for_once():
    w = worker()
    a = agent()
    a.start_heartbeat()
    try:
        BRIDGE._silent_pid = BRIDGE._echo_pid = None
        path = model_file(1)
        for i in range(2):
            ok, msgs = w.run(loader_prompt(path, str(i)), ["s"], f"load{i}")
            assert ok, msgs
        waits = BRIDGE.status()["models"]["waits_ms"]
        assert waits[-2] >= 0.9 * pkg.bridge.LOAD_WAIT_S * 1e3, waits
        assert waits[-1] == 0 and BRIDGE._silent_pid == os.getpid(), waits
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def a_model_command_unloads_it_through_comfyui():
    """The model an entry holds is unloaded by ComfyUI's free_memory (its
    patches undone, off the loaded list), the other loaded models kept;
    then the entry goes. Posted between prompts (a command inside a node
    may be served by the serving thread, which only drops the entry)."""
    w = worker()
    a = agent()
    a.start_heartbeat()
    try:
        BRIDGE._echo_pid = os.getpid()  # an agent that makes room for loads
        eid, key = earlier_model(w, "unload")
        patcher = env.outputs(w).cache[key].outputs[0][0]
        mine = mm.LoadedModel(patcher)
        other = mm.LoadedModel(comfy.model_patcher.ModelPatcher(object()))
        mm.current_loaded_models[:] = [mine, other]
        # between prompts: the serving thread serves it, holding the lock ComfyUI's
        # worker takes for its own unloads (inside a node it would only drop
        # the entry, the model going with its last reference)
        ack = a.wait_ack(a.post(eid), 3)
        assert ack and ack["status"] == lib.ACK_EVICTED, ack
        assert key not in env.outputs(w).cache
        assert mine.unloaded and mm.current_loaded_models == [other], \
            "ComfyUI's own unload did not run"
        assert not other.unloaded
        assert BRIDGE.status()["models"]["unloaded"] >= 1
    finally:
        mm.current_loaded_models[:] = []
        a.stop_heartbeat()
        w.stop()


@test
def a_clone_counts_its_models_weights_once_and_goes_with_it():
    """A LoRA loader's output shares its checkpoint's weights: the page
    counts them once, on the checkpoint's entry, and a command for that
    entry drops the clone's too (while the clone lives, the weights stay)."""
    w = worker()
    a = agent()
    a.start_heartbeat()
    try:
        BRIDGE._echo_pid = os.getpid()
        p = {"m": node("LoadModel", mib=8, tag="shared"),
             "l": node("CloneModel", model=["m", 0], tag="shared"),
             "s": node("Sink", value=["l", 0])}
        ok, msgs = w.run(p, ["s"], "p-clone")
        assert ok, msgs
        out = env.outputs(w)
        (cm, km), (cl, kl) = pkg.evict.locate(out, "m"), pkg.evict.locate(out, "l")
        em, el = BRIDGE._ids[(id(cm), km)], BRIDGE._ids[(id(cl), kl)]
        BRIDGE.publish()
        ents = a.entries()
        assert ents[em]["bytes"] == 9 * MiB, ents[em]
        assert ents[el]["bytes"] == 0, ("the clone's shared weights counted twice", ents[el])
        log = {}
        env.CALLS["ask-clone"] = lambda: log.setdefault("seq", a.post(em))
        ok, msgs = w.run({"c": node("Call", tag="ask-clone"),
                          "s": node("Sink", value=["c", 0])}, ["s"], "ask-clone")
        assert ok, msgs
        ack = a.wait_ack(log["seq"], 3)
        assert ack and ack["status"] == lib.ACK_EVICTED, ack
        assert km not in cm.cache and kl not in cl.cache, \
            "the clone kept the model's weights alive"
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def earlier_models_stay_comfyuis_to_drop_until_the_agent_counts_a_load():
    w = worker()
    a = agent()
    a.start_heartbeat()
    try:
        BRIDGE._echo_pid = None
        _, key = earlier_model(w, "kept-by-comfyui")
        ok, _ = w.run({"x": node("MakeTensor", mib=1, tag="n1"),
                       "s": node("Sink", value=["x", 0])}, ["s"], "n1")
        assert ok and key not in env.outputs(w).cache, \
            "an agent that never counted a load: ComfyUI's own release stays"
        BRIDGE._echo_pid = os.getpid()  # the agent counted one
        _, key = earlier_model(w, "kept-by-agent")
        ok, _ = w.run({"x": node("MakeTensor", mib=1, tag="n2"),
                       "s": node("Sink", value=["x", 0])}, ["s"], "n2")
        assert ok and key in env.outputs(w).cache, "set aside for the agent"
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def a_stalled_agent_leaves_the_guard_to_keep_the_limit():
    """An agent that stops beating (SIGSTOP keeps its lock) no longer
    counts as serving after 0.6 s: ComfyUI's own release is back, and
    near the cgroup's limit the package's guard evicts the least recently
    used inactive entries itself; a beating agent is never second-guessed."""
    w = worker()
    a = agent()
    a.start_heartbeat()
    try:
        BRIDGE._echo_pid = os.getpid()
        lim = 1 << 30
        BRIDGE.memory_use = lambda: (lim, lim - 20 * MiB)  # 2% left: past the trip
        eid, key = earlier_model(w, "guarded", mib=8)
        BRIDGE._guard_next = 0
        ok, _ = w.run({"x": node("MakeTensor", mib=1, tag="g1"),
                       "s": node("Sink", value=["x", 0])}, ["s"], "g1")
        assert ok and key in env.outputs(w).cache, "the guard acted beside a live agent"
        a.stop_heartbeat()
        a.beat(time.monotonic_ns() - 700_000_000)  # stopped 0.7 s ago: lock kept
        assert not BRIDGE.agent_alive(), "a stalled agent still counted"
        BRIDGE._guard_next = 0
        assert BRIDGE.guard() > 0 and key not in env.outputs(w).cache
        assert BRIDGE.status()["guard_evicted"] >= 8 * MiB
    finally:
        BRIDGE.memory_use = pkg.page.memory_use
        a.stop_heartbeat()
        w.stop()


if __name__ == "__main__":
    main()
