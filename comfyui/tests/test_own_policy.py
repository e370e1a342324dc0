#!/usr/bin/env python3
"""ComfyUI's own RAM policy beside the agent (stand-in of 0.33.0, whose
RAM-pressure cache drops outputs of earlier prompts after every node while
available RAM is below --cache-ram's second value): set aside while the
agent is attached and restored when it is not; its real-shortage release
kept; what it frees leaves the page at once; no wait at a prompt's start
unless the agent asks for bytes; malloc_trim only where it returns memory;
the status says all of it."""
import gc
import threading
import time

import env
from env import MiB, node
from rctest import main, test

import comfy.memory_management as cmm
import comfy.model_management
from comfy_execution import caching

pkg = env.load_package()
BRIDGE = pkg.bridge.BRIDGE
lib = pkg.page
GiB = 1 << 30
ROOM = 8 * GiB  # psutil's available memory, as the stand-in's ram_release reads it

def agent():
    return env.fake_agent(BRIDGE)


outputs = env.outputs


def default_worker():
    """0.33.0's defaults on a 24 GiB machine: --cache-ram 2.4 24."""
    w = env.worker("RAM_PRESSURE", ram=2.4, ram_inactive=24.0)
    env.STEP_HOOK.clear()
    return w


def entry_key(w, node_id):
    loc = pkg.evict.locate(outputs(w), node_id)
    assert loc is not None, node_id
    return BRIDGE._ids.get((id(loc[0]), loc[1])), loc[1]


def earlier_output(w, tag, mib=4):
    p = {"old": node("MakeTensor", mib=mib, tag=tag), "s": node("Sink", value=["old", 0])}
    ok, msgs = w.run(p, ["s"], "p-" + tag)
    assert ok, msgs
    return entry_key(w, "old")


def two_node_prompt(tag):
    return {"a": node("MakeTensor", mib=1, tag=tag),
            "b": node("MakeTensor", mib=1, tag=tag + "b"),
            "s": node("Sink", value=["a", 0], other=["b", 0])}


def set_available(n):
    caching.virtual_memory_available = lambda: n


@test
def comfyui_keeps_earlier_outputs_while_the_agent_is_attached():
    """With room, ComfyUI's default drops every earlier output after the
    first node of the next prompt; with the agent attached they stay (the
    agent frees them when memory is really short), and ComfyUI's policy is
    back as soon as the agent is gone."""
    set_available(ROOM)
    w = default_worker()
    a = agent()
    try:
        a.start_heartbeat()
        eid, key = earlier_output(w, "kept")
        calls = getattr(BRIDGE, "set_aside_calls", 0)
        ok, _ = w.run(two_node_prompt("next"), ["s"], "next")
        assert ok
        assert key in outputs(w).cache, "ComfyUI dropped an earlier output with room"
        assert eid in a.entries() and not a.entries()[eid]["flags"] & lib.F_ACTIVE
        assert BRIDGE.set_aside_calls >= calls + 2  # one per node
        st = BRIDGE.status()
        rows = {r["what"].split(" (")[0]: r for r in st["own_policy"]}
        assert rows["inactive threshold"]["now"] == "set aside", rows
        assert rows["active headroom"]["now"] == "kept", rows

        a.die()  # the agent is gone: ComfyUI's own policy again
        ok, _ = w.run(two_node_prompt("alone"), ["s"], "alone")
        assert ok
        assert key not in outputs(w).cache, "ComfyUI's policy not restored"
        assert eid not in a.entries()
        rows = {r["what"].split(" (")[0]: r for r in BRIDGE.status()["own_policy"]}
        assert rows["inactive threshold"]["now"] == "ComfyUI's (no agent)", rows
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def comfyui_still_frees_when_the_host_is_really_short():
    """Below the active headroom ComfyUI's own release runs, agent or not."""
    w = default_worker()
    a = agent()
    try:
        a.start_heartbeat()
        set_available(ROOM)
        eid, key = earlier_output(w, "short")
        set_available(1 * GiB)  # below --cache-ram's 2.4 GB
        ok, _ = w.run(two_node_prompt("short-next"), ["s"], "short-next")
        assert ok
        assert key not in outputs(w).cache
        assert eid not in a.entries()
    finally:
        set_available(ROOM)
        a.stop_heartbeat()
        w.stop()


@test
def what_comfyui_frees_leaves_the_page_at_once():
    """ComfyUI's release inside a node (extra_ram_release before a model
    pins or loads) drops earlier outputs: the page no longer lists them the
    moment it returns, and a command for one is answered at once."""
    w = default_worker()
    a = agent()
    log = {}
    try:
        a.start_heartbeat()
        set_available(ROOM)
        eid, key = earlier_output(w, "freed-in-node")

        def pin():
            set_available(1 * GiB)
            try:
                cmm.extra_ram_release(cmm.RAM_CACHE_HEADROOM)
            finally:
                set_available(ROOM)
            log["gone"] = key not in outputs(w).cache
            log["listed"] = eid in a.entries()
            seq = a.post(eid)
            log["ack"] = a.wait_ack(seq, 2)
            return 1
        env.CALLS["pin"] = pin
        ok, msgs = w.run({"c": node("Call", tag="pin", value="x"),
                          "s": node("Sink", value=["c", 0])}, ["s"], "pin")
        assert ok, msgs
        assert log["gone"], "ComfyUI's release did not run"
        assert not log["listed"], "the page still lists what ComfyUI freed"
        assert log["ack"] and log["ack"]["status"] == lib.ACK_NOT_FOUND, log
        assert BRIDGE.status()["comfy_freed"] >= 1
    finally:
        set_available(ROOM)
        a.stop_heartbeat()
        w.stop()


@test
def no_wait_at_a_prompt_start_unless_the_agent_asks():
    """A level with room (a forecast's warn) brings no command: the first
    node does not wait. target_bytes > 0 is the agent asking: it waits then,
    and only until the agent stops asking."""
    set_available(ROOM)
    w = default_worker()
    a = agent()
    stop = threading.Event()
    try:
        a.start_heartbeat()
        earlier_output(w, "warn")
        a.set_level(1, headroom=5 * GiB, target=0)
        settled = BRIDGE.settled
        ok, _ = w.run(two_node_prompt("warn-next"), ["s"], "warn-next")
        assert ok and BRIDGE.settled == settled, "waited with room"

        eid, key = earlier_output(w, "asked")
        a.set_level(2, headroom=100 * MiB, target=4 * MiB)

        def agent_policy():  # asks for the entry once it is inactive
            while not stop.is_set():
                e = a.entries().get(eid)
                if e and not e["flags"] & lib.F_ACTIVE:
                    seq = a.post(eid, reason=1)
                    a.wait_ack(seq, 2)
                    a.set_level(0)  # done: no more asking
                    return
                stop.wait(0.01)
        th = threading.Thread(target=agent_policy)
        th.start()
        ok, _ = w.run(two_node_prompt("asked-next"), ["s"], "asked-next")
        th.join(5)
        assert ok and BRIDGE.settled == settled + 1
        assert key not in outputs(w).cache
    finally:
        stop.set()
        a.set_level(0)
        a.stop_heartbeat()
        w.stop()


@test
def malloc_trim_runs_only_where_it_returns_memory():
    """A tensor of its own mapping returns its memory when dropped: no trim,
    no collection. Memory that stays in the heap after a drop is chased."""
    set_available(ROOM)
    w = env.worker("RAM_PRESSURE", ram=2.4, ram_inactive=0.0)
    a = agent()
    try:
        a.start_heartbeat()
        eid, key = earlier_output(w, "trim", mib=16)
        before = BRIDGE.status().get("trims")
        ok, _ = w.run(two_node_prompt("trim-next"), ["s"], "trim-next")
        assert ok
        full = []

        def on_gc(phase, info):
            if phase == "start" and info["generation"] == 2:
                full.append(info)
        gc.callbacks.append(on_gc)
        try:
            seq = a.post(eid)  # idle: served by the listener
            ack = a.wait_ack(seq)
        finally:
            gc.callbacks.remove(on_gc)
        assert ack and ack["status"] == lib.ACK_EVICTED and ack["bytes_freed"] >= 8 * MiB, ack
        assert not full, "a full garbage collection though RSS dropped"
        assert BRIDGE.status()["trims"] == before, "malloc_trim ran though RSS dropped"
    finally:
        a.stop_heartbeat()
        w.stop()

    # the rule itself, on a process whose RSS we play
    rss = [100 * MiB]
    log = []
    r = pkg.reclaim.Reclaim(read_rss=lambda: rss[0], trim=lambda: log.append("trim"),
                            collect=lambda: log.append("gc"))
    rss[0] = 84 * MiB
    assert r.returned(100 * MiB, 16 * MiB, True) == 16 * MiB and log == []
    assert r.returned(100 * MiB, 1 * MiB, True) == 16 * MiB and log == []  # too small
    rss[0] = 99 * MiB  # 1 of 16 MiB back: stuck in the heap
    assert r.returned(100 * MiB, 16 * MiB, False) == 1 * MiB and log == ["trim"]
    log.clear()

    def trim_returns():
        log.append("trim")
        rss[0] = 90 * MiB
    r.trim = trim_returns
    assert r.returned(100 * MiB, 16 * MiB, True) == 10 * MiB and log == ["trim"]
    assert r.trims_returned == 1


def dynamic_model(mib, state="earlier"):
    """A dynamic-VRAM model (CUDA only upstream) holding mib MiB of pinned
    host RAM, loaded in ComfyUI's model list."""
    from comfy.model_patcher import ModelPatcherDynamic
    m = ModelPatcherDynamic(env.faketorch.Module(), pins=[env.faketorch.mib(1)
                                                          for _ in range(mib)])
    m.model.dynamic_pins[m.load_device]["current_prompt"] = state == "prompt"
    comfy.model_management.current_loaded_models.insert(
        0, comfy.model_management.LoadedModel(m))
    return m


def pin_entries(a):
    return {e["label"]: e for e in a.entries().values() if e["label"].startswith("pins:")}


@test
def comfyuis_pinned_memory_is_on_the_page_and_freed_by_its_own_free_pins():
    """Pins of models the prompt does not use: an inactive model entry; of
    the prompt's models: active. A command for them runs ComfyUI's
    free_pins on its worker thread (held while a node's code runs, served
    at the node's next safe point); what ComfyUI frees itself leaves the
    page at once."""
    mm = comfy.model_management
    set_available(ROOM)
    w = default_worker()
    a = agent()
    calls = []
    orig = mm.free_pins
    log = {}
    try:
        a.start_heartbeat()
        old = dynamic_model(8)
        dynamic_model(2, state="prompt")
        ok, _ = w.run(two_node_prompt("pins"), ["s"], "pins")
        assert ok
        pins = pin_entries(a)
        assert set(pins) == {"pins:earlier workflows", "pins:this prompt"}, pins
        early, now = pins["pins:earlier workflows"], pins["pins:this prompt"]
        assert early["bytes"] == 8 * MiB and now["bytes"] == 2 * MiB, pins
        assert early["flags"] & lib.F_MODEL and not early["flags"] & lib.F_ACTIVE, early
        assert now["flags"] & lib.F_ACTIVE, now

        def spy(*args, **kwargs):
            calls.append((args, kwargs))
            return orig(*args, **kwargs)
        mm.free_pins = spy  # ComfyUI's function, as the package finds it

        def load():
            log["seq"] = a.post(early["id"])
            assert a.wait_taken(log["seq"])
            time.sleep(0.05)
            log["held"] = a.ack(log["seq"])  # not the listener's to free
            mm.load_models_gpu([])  # a safe point of the worker
            log["ack"] = a.wait_ack(log["seq"], 2)
            return 1
        env.CALLS["load"] = load
        ok, msgs = w.run({"c": node("Call", tag="load", value="pins"),
                          "s": node("Sink", value=["c", 0])}, ["s"], "pins-load")
        assert ok, msgs
        assert log["held"] is None, log
        assert log["ack"] and log["ack"]["status"] == lib.ACK_EVICTED, log
        assert log["ack"]["bytes_freed"] >= 4 * MiB, log
        assert calls and calls[0][0][0] == 8 * MiB, calls  # ComfyUI's own function
        assert old.loaded_ram_size() == 0
        assert "pins:earlier workflows" not in pin_entries(a)

        dynamic_model(4)  # ComfyUI frees it itself, in a node
        ok, _ = w.run(two_node_prompt("pins-again"), ["s"], "pins-again")
        assert ok and pin_entries(a)["pins:earlier workflows"]["bytes"] == 4 * MiB

        def comfy_frees():
            mm.free_pins(64 * MiB)
            log["listed"] = "pins:earlier workflows" in pin_entries(a)
            return 1
        env.CALLS["frees"] = comfy_frees
        ok, _ = w.run({"c": node("Call", tag="frees", value="x"),
                       "s": node("Sink", value=["c", 0])}, ["s"], "pins-comfy")
        assert ok and log["listed"] is False, log
    finally:
        mm.free_pins = orig
        mm.current_loaded_models.clear()
        a.stop_heartbeat()
        w.stop()


@test
def the_agents_death_is_noticed_at_once():
    """The kernel marks the agent's lock when it dies: the package says so
    and notes when, and ComfyUI's own policy is back at its next call."""
    set_available(ROOM)
    w = default_worker()
    a = agent()
    try:
        a.start_heartbeat()
        earlier_output(w, "death")
        end = time.monotonic() + 2
        while BRIDGE.agent_lost_ns is not None and time.monotonic() < end:
            time.sleep(0.01)
        assert BRIDGE.agent_lost_ns is None
        a.stop_heartbeat()
        a.w32(lib.A_AGENT_LOCK, 0xC0000000)  # as the kernel leaves it (OWNER_DIED)
        t0 = time.monotonic_ns()
        end = time.monotonic() + 2
        while BRIDGE.agent_lost_ns is None and time.monotonic() < end:
            time.sleep(0.005)
        assert BRIDGE.agent_lost_ns is not None and BRIDGE.agent_lost_ns >= t0
        assert env.LOG.grep("ramcache: the agent died"), env.LOG.lines[-3:]
        assert not BRIDGE.agent_alive()
    finally:
        a.w32(lib.A_AGENT_LOCK, 0)
        a.stop_heartbeat()
        w.stop()


@test
def status_says_what_is_set_aside_per_version():
    """Every cache kind and --cache-ram form has its rows."""
    d = pkg.ownpolicy.describe
    two = d("ram", {"lru": 0, "ram": 2.4, "ram_inactive": 24.0})
    assert [r["state"] for r in two] == [pkg.ownpolicy.SET_ASIDE, "kept"], two
    off = d("ram", {"lru": 0, "ram": 4.0, "ram_inactive": 0.0})
    assert off[0]["state"] == "off", off
    one = d("ram", {"lru": 0, "ram": 1.0})  # 0.3.7x
    assert [r["state"] for r in one] == ["kept"] and "poll" in one[0]["what"], one
    for kind in ("classic", "lru", "null", "dependency"):
        rows = d(kind, {"lru": 64, "ram": 0})
        assert rows and all(r["state"] == "kept" and r["why"] for r in rows), (kind, rows)
    assert pkg.ownpolicy.is_inactive_call({"ram": 2.4, "ram_inactive": 24.0},
                                          int(24.0 * GiB), False)
    assert not pkg.ownpolicy.is_inactive_call({"ram": 2.4, "ram_inactive": 24.0},
                                              int(2.4 * GiB), False)
    assert not pkg.ownpolicy.is_inactive_call({"ram": 2.4, "ram_inactive": 24.0},
                                              int(24.0 * GiB), True)


main()
