#!/usr/bin/env python3
"""The package inside the stand-in ComfyUI, with a fake agent on the page:
executor capture, publishing, eviction at safe points, what must never be
evicted, interrupts, agent absent or killed."""
import os
import stat
import threading
import time

import env
from env import MiB, node
from rctest import main, test

import comfy.model_management
import execution

pkg = env.load_package()
BRIDGE = pkg.bridge.BRIDGE
lib = pkg.page

def agent():
    return env.fake_agent(BRIDGE)


outputs = env.outputs


def entry_for(w, node_id):
    """(entry id, cache key) published for node_id's output."""
    out = outputs(w)
    loc = pkg.evict.locate(out, node_id)
    assert loc is not None, f"no cache key for {node_id}"
    eid = BRIDGE._ids.get((id(loc[0]), loc[1]))
    assert eid, f"{node_id} not published"
    return eid, loc[1]


def fresh(cache_type="RAM_PRESSURE", **kw):
    w = env.worker(cache_type, **kw)
    env.STEP_HOOK.clear()
    return w


def two_prompts(w, mib=16, cls="MakeTensor"):
    """Prompt 1 leaves an 'old' output; prompt 2 makes it inactive."""
    p1 = {"old": node(cls, mib=mib, tag="old"), "s": node("Sink", value=["old", 0])}
    ok, _ = w.run(p1, ["s"], "p1")
    assert ok
    eid, key = entry_for(w, "old")
    return eid, key


@test
def captures_the_executor():
    w = fresh()
    try:
        assert BRIDGE.executor() is w.executor
        assert BRIDGE.exec_thread == w.thread.ident
        # a memfd named "ramcache", found through /proc/<pid>/fd
        assert BRIDGE.page.memfd, BRIDGE.page.path
        link = os.readlink(f"/proc/self/fd/{BRIDGE.page.fd}")
        assert link.startswith("/memfd:ramcache"), link
        st = os.stat(BRIDGE.page.path)
        assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o600
        assert st.st_size == pkg.page.ctl_size(pkg.page.DEFAULT_ENTRIES,
                                               pkg.page.DEFAULT_RING)
        assert env.LOG.grep("start the agent with 'sudo ramcache-bpf --pid")
        # reset() replaces caches: the package must follow
        old = outputs(w)
        w.reset()
        assert outputs(w) is not old and BRIDGE.outputs() is outputs(w)
    finally:
        w.stop()


@test
def publishes_every_entry_with_its_bytes():
    w = fresh()
    a = agent()
    try:
        p = {"pair": node("MakeViewPair", mib=8),
             "m": node("LoadModel", mib=4),
             "t": node("MakeTensor", mib=2),
             "s": node("Sink", value=["pair", 1], other=["m", 0]),
             "s2": node("Sink", value=["pair", 0], other=["t", 0])}
        ok, msgs = w.run(p, ["s", "s2"], "p1")
        assert ok, msgs
        ents = a.entries()
        keys = list(outputs(w).cache)
        assert len(ents) == len(keys), (ents, keys)
        pair, _ = entry_for(w, "pair")
        model, _ = entry_for(w, "m")
        t, _ = entry_for(w, "t")
        assert ents[pair]["bytes"] == 8 * MiB  # view and base: one storage
        assert ents[model]["bytes"] == 5 * MiB  # the patcher's CPU weights
        assert ents[model]["flags"] & lib.F_MODEL
        assert ents[t]["bytes"] == 2 * MiB
        gen = outputs(w).generation
        assert a.generation() == gen
        for e in ents.values():
            assert e["flags"] & lib.F_ACTIVE and e["used_generation"] == gen
            assert 0 < e["last_use_ns"] <= time.monotonic_ns()
        assert ents[pair]["label"] == "pair:MakeViewPair", ents[pair]["label"]
        # a second prompt: the first one's entries age, their ids stay
        p2 = {"t3": node("MakeTensor", mib=1, tag="new"), "s": node("Sink", value=["t3", 0])}
        ok, _ = w.run(p2, ["s"], "p2")
        assert ok
        ents2 = a.entries()
        assert ents2[pair]["used_generation"] == gen
        # its prompt is gone, its label stays: the agent evicts exactly these
        assert ents2[pair]["label"] == "pair:MakeViewPair", ents2[pair]["label"]
        assert not ents2[pair]["flags"] & lib.F_ACTIVE
        assert entry_for(w, "t3")[0] not in ents
        assert a.generation() == gen + 1
        assert a.exec_heartbeat() > 0
    finally:
        w.stop()


@test
def publishes_lru_and_classic_caches():
    a = agent()
    for kind in ("LRU", "CLASSIC"):
        w = fresh(kind)
        try:
            p = {"t": node("MakeTensor", mib=3, tag=kind), "s": node("Sink", value=["t", 0])}
            ok, _ = w.run(p, ["s"], "p1")
            assert ok
            eid, _ = entry_for(w, "t")
            e = a.entries()[eid]
            assert e["bytes"] == 3 * MiB and e["flags"] & lib.F_ACTIVE, (kind, e)
            assert len(a.entries()) == len(outputs(w).cache), kind
        finally:
            w.stop()


@test
def publishes_and_evicts_subcache_entries():
    """Graph expansion: classic caches keep children in subcaches, LRU and
    RAM caches keep them in the main dict with children[parent]."""
    import asyncio
    from comfy_execution.graph import DynamicPrompt
    a = agent()
    a.start_heartbeat()
    try:
        for kind in ("CLASSIC", "RAM_PRESSURE"):
            w = fresh(kind)
            try:
                out = outputs(w)
                dp = DynamicPrompt({"parent": node("Sink", value=1)})
                dp.add_ephemeral_node("child", node("MakeTensor", mib=2, tag=kind),
                                      "parent", "parent")

                async def fill():
                    await out.set_prompt(dp, ["parent"], None)
                    await out.ensure_subcache_for("parent", ["child"])
                    await out.set("child", execution.CacheEntry({}, [[env.faketorch.mib(2)]]))
                asyncio.run(fill())
                with BRIDGE.exec_lock:
                    BRIDGE.publish()
                eid, key = entry_for(w, "child")
                assert a.entries()[eid]["bytes"] == 2 * MiB
                holder = pkg.evict.locate(out, "child")[0]
                if kind == "CLASSIC":
                    assert holder is not out  # it lives in the subcache
                else:
                    assert key in out.children[out.cache_key_set.get_data_key("parent")]
                seq = a.post(eid)  # idle: the serving thread evicts under exec_lock
                ack = a.wait_ack(seq)
                assert ack and ack["status"] == lib.ACK_EVICTED, (kind, ack)
                assert key not in holder.cache
                assert eid not in a.entries()
            finally:
                w.stop()
    finally:
        a.stop_heartbeat()


@test
def handles_graph_expansion():
    """Children of an expanded node: published; a command for one is held
    while the expansion still runs on it, obeyed once nothing needs it."""
    a = agent()
    a.start_heartbeat()
    try:
        for kind in ("CLASSIC", "LRU", "RAM_PRESSURE"):
            w = fresh(kind)
            try:
                log = {}

                def step(i):
                    if i == 1:
                        x1, key = entry_for(w, "x1")
                        log["seq"] = a.post(x1)
                        assert a.wait_taken(log["seq"])
                        log["entry"] = a.entries()[x1]
                        log["holder"] = pkg.evict.locate(outputs(w), "x1")[0]
                        log["key"] = key
                    if i == 2:
                        time.sleep(0.05)
                        log["during"] = a.ack(log["seq"])  # x2 runs on it: held
                env.STEP_HOOK[:] = [step]
                p = {"e": node("Expand", mib=3, tag=kind), "s": node("Sink", value=["e", 0])}
                ok, msgs = w.run(p, ["s"], "p1")
                assert ok, (kind, msgs)
                assert log["during"] is None, (kind, log["during"])
                e = log["entry"]
                assert e["bytes"] == 3 * MiB and e["label"] == "x1:MakeTensor", (kind, e)
                out, holder, key = outputs(w), log["holder"], log["key"]
                if kind == "CLASSIC":
                    assert holder is not out and holder in out.subcaches.values()
                else:
                    assert key in out.children[out.cache_key_set.get_data_key("e")], kind
                ack = a.wait_ack(log["seq"])  # the prompt is over: nothing needs it
                assert ack and ack["status"] == lib.ACK_EVICTED, (kind, ack)
                assert key not in holder.cache
            finally:
                env.STEP_HOOK.clear()
                w.stop()
    finally:
        a.stop_heartbeat()


@test
def evicts_at_a_sampling_step_of_a_long_node():
    w = fresh()
    a = agent()
    a.start_heartbeat()
    try:
        eid, key = two_prompts(w)
        log = {}

        def step(i):
            if i == 1:
                log["seq"] = a.post(eid, reason=2)
                assert a.wait_taken(log["seq"])
                log["posted_step"] = i
            if i == 4:
                log["ack_at_step4"] = a.wait_ack(log["seq"], timeout=2)
        env.STEP_HOOK.append(step)
        p2 = {"k": node("Sampler", steps=6, tag="x"), "s": node("Sink", value=["k", 0])}
        ok, msgs = w.run(p2, ["s"], "p2")
        assert ok, msgs
        ack = log["ack_at_step4"]
        assert ack is not None, "not acked while the sampler ran"
        assert ack["status"] == lib.ACK_EVICTED and ack["id"] == eid
        assert ack["ack_ns"] < env.SEEN["sampler_end_ns"]
        assert ack["bytes_freed"] >= 8 * MiB, ack  # 16 MiB tensor, RSS measured
        out = outputs(w)
        assert key not in out.cache and key not in out.used_generation
        assert key not in out.timestamps and key not in out.children
        assert eid not in a.entries()
        assert BRIDGE.evicted_total >= 1
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def serves_commands_inside_a_node_without_steps():
    """A node without a progress bar: the package's own thread serves the
    command while the node runs; a command for what a pending node still
    reads is held, and obeyed once that node ran."""
    w = fresh()
    a = agent()
    a.start_heartbeat()
    try:
        eid, key = two_prompts(w)
        log = {}

        def post():
            listened, lkey = entry_for(w, "t")
            log["lkey"] = lkey
            log["old"] = a.post(eid)
            log["listened"] = a.post(listened)
            log["acks"] = (a.wait_ack(log["old"], 2), a.wait_ack(log["listened"], 0.3))
            log["gone_in_node"] = key not in outputs(w).cache
            return 1
        env.CALLS.update(post=post)
        p = {"t": node("MakeTensor", mib=2, tag="read-later"),
             "c1": node("Call", tag="post", value=["t", 0]),
             "s": node("Sink", value=["c1", 0], other=["t", 0])}
        ok, msgs = w.run(p, ["s"], "p2")
        assert ok, msgs  # s got t
        old, listened = log["acks"]
        assert old and old["status"] == lib.ACK_EVICTED, old
        assert old["bytes_freed"] >= 8 * MiB, old  # the entry's 16 MiB
        assert listened is None, listened  # held while s still needs t
        assert log["gone_in_node"] and key not in outputs(w).cache
        ack = a.wait_ack(log["listened"])
        assert ack and ack["status"] == lib.ACK_EVICTED, ack
        assert log["lkey"] not in outputs(w).cache
        assert BRIDGE.status()["served_in_node"] >= 1
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def serves_commands_while_a_model_loads():
    """A loader node has no progress bar, and a checkpoint's load holds the
    worker for seconds: a model of an earlier prompt is freed from the
    listener while the node runs (its entry dropped: the model goes with it
    and ComfyUI's own finalizer takes it off the loaded list), before the
    node reads weights (load_torch_file), moves them (load_models_gpu) or
    asks for RAM (extra_ram_release), and not when the node ends."""
    w = fresh()
    a = agent()
    a.start_heartbeat()
    try:
        eid, key = two_prompts(w, cls="LoadModel")
        log = {}

        def loader():
            log["seq"] = a.post(eid)
            log["ack"] = a.wait_ack(log["seq"], 2)
            log["gone"] = key not in outputs(w).cache
            return 1
        env.CALLS["loader"] = loader
        p = {"l": node("Call", tag="loader", value="in"), "s": node("Sink", value=["l", 0])}
        ok, msgs = w.run(p, ["s"], "load-in-node")
        assert ok, msgs
        assert log["ack"] and log["ack"]["status"] == lib.ACK_EVICTED, log
        assert log["gone"], log
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def a_model_waits_while_comfyuis_manager_walks_its_list():
    """Inside load_models_gpu ComfyUI walks its loaded-model list: no model
    is dropped from the serving thread then (its finalizer would edit the list
    under the walk); it goes as soon as the call returns, inside the node."""
    w = fresh()
    a = agent()
    a.start_heartbeat()
    try:
        eid, key = two_prompts(w, cls="LoadModel")
        log = {}

        class Walked:  # what load_models_gpu asks of each model it is given
            def model_patches_models(self):
                log["seq"] = a.post(eid)
                assert a.wait_taken(log["seq"])
                time.sleep(0.3)  # the serving thread tries every 10 ms meanwhile
                log["inside"] = a.ack(log["seq"])
                log["kept"] = key in outputs(w).cache
                return []

        def loader():
            comfy.model_management.load_models_gpu([Walked()])
            log["after"] = a.wait_ack(log["seq"], 2)
            return 1
        env.CALLS["loader"] = loader
        p = {"l": node("Call", tag="loader", value="walk"), "s": node("Sink", value=["l", 0])}
        ok, msgs = w.run(p, ["s"], "load-walk")
        assert ok, msgs
        assert log["inside"] is None and log["kept"], log
        assert log["after"] and log["after"]["status"] == lib.ACK_EVICTED, log
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def a_prompt_starting_under_pressure_waits_for_the_agent():
    """The outputs of earlier prompts become inactive when a prompt starts;
    under pressure the agent gets a moment to ask for them before the first
    node allocates (an agent reacts in a few hundred ms, a node can allocate
    sooner). Without pressure, no wait."""
    w = fresh()
    a = agent()
    a.start_heartbeat()
    stop = threading.Event()
    try:
        eid, key = two_prompts(w)
        log = {}

        def agent_policy():  # asks for inactive entries 200 ms after seeing them
            while not stop.is_set():
                old = [e for e in a.entries().values() if e["id"] == eid
                       and not e["flags"] & lib.F_ACTIVE]
                if old:
                    time.sleep(0.2)
                    log["seq"] = a.post(eid, reason=2)
                    return
                time.sleep(0.01)

        def first():
            log["evicted_before_first_node"] = key not in outputs(w).cache
            return 1
        env.CALLS["first"] = first
        p = {"c": node("Call", tag="first", value="settle"), "s": node("Sink", value=["c", 0])}
        settled = BRIDGE.settled
        a.set_level(1, headroom=100 * MiB, target=16 * MiB)
        th = threading.Thread(target=agent_policy)
        th.start()
        ok, msgs = w.run(p, ["s"], "settle")
        th.join(5)
        assert ok, msgs
        assert BRIDGE.settled == settled + 1
        assert log["evicted_before_first_node"], log
        ack = a.wait_ack(log["seq"])
        assert ack and ack["status"] == lib.ACK_EVICTED, ack
        # no pressure: the next prompt does not wait
        a.set_level(0)
        eid, key = two_prompts(w)
        ok, _ = w.run({"c": node("Call", tag="first", value="calm"),
                       "s": node("Sink", value=["c", 0])}, ["s"], "calm")
        assert ok and BRIDGE.settled == settled + 1
    finally:
        stop.set()
        a.set_level(0)
        a.stop_heartbeat()
        w.stop()


@test
def holds_commands_for_what_the_running_node_uses():
    w = fresh()
    a = agent()
    a.start_heartbeat()
    try:
        # the model is cached by p1 and used by the sampler of p2
        p1 = {"m": node("LoadModel", mib=8), "s": node("Sink", value=["m", 0])}
        assert w.run(p1, ["s"], "p1")[0]
        model_id, model_key = entry_for(w, "m")
        acks = {}

        def step(i):
            if i == 1:
                # "t0" is active too, but its only reader has run already
                t0, _ = entry_for(w, "t0")
                acks["t0"] = a.post(t0)
                acks["model"] = a.post(model_id)
                assert a.wait_taken(acks["model"])
        env.STEP_HOOK.append(step)
        p2 = {"t0": node("MakeTensor", mib=2, tag="t0"),
              "s0": node("Sink", value=["t0", 0]),
              "m": node("LoadModel", mib=8),
              "k": node("Sampler", steps=4, model=["m", 0]),
              "s": node("Sink", value=["k", 0])}
        assert w.run(p2, ["s0", "s"], "p2")[0]
        ack = a.wait_ack(acks["model"])  # held while the sampler ran on it
        assert ack["status"] == lib.ACK_EVICTED, ack
        assert ack["ack_ns"] > env.SEEN["sampler_end_ns"], ack
        assert model_key not in outputs(w).cache
        ack = a.wait_ack(acks["t0"])
        assert ack["status"] == lib.ACK_EVICTED, ack
        assert ack["ack_ns"] < env.SEEN["sampler_end_ns"], ack
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def holds_commands_for_what_a_pending_node_listens_to():
    w = fresh()
    a = agent()
    a.start_heartbeat()
    try:
        # "t" is made before the sampler and read by "s" after it
        p = {"t": node("MakeTensor", mib=4, tag="listened"),
             "k": node("Sampler", steps=4, latent=["t", 0]),
             "u": node("MakeTensor", mib=1, tag="late"),
             "s": node("Sink", value=["k", 0], other=["t", 0])}
        log = {}

        def step(i):
            if i == 1:
                eid, _ = entry_for(w, "t")
                log["seq"] = a.post(eid)
                assert a.wait_taken(log["seq"])
        env.STEP_HOOK.append(step)
        assert w.run(p, ["s", "u"], "p1")[0]  # s got t
        ack = a.wait_ack(log["seq"])  # held until s ran
        assert ack["status"] == lib.ACK_EVICTED, ack
        assert ack["ack_ns"] > env.SEEN["sampler_end_ns"], ack
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def older_execution_lists_protect_what_pending_nodes_read():
    """v0.3.64's ExecutionList has no execution_cache: what must stay is
    then read from pendingNodes and their links (not every active entry)."""
    import types
    from comfy_execution.graph import DynamicPrompt
    w = fresh()
    try:
        p = {"t": node("MakeTensor", mib=1, tag="old-el"), "u": node("MakeTensor", mib=1, tag="free"),
             "k": node("Sampler", steps=1, latent=["t", 0], tag="old-el"),
             "s": node("Sink", value=["k", 0], other=["t", 0])}
        assert w.run(p, ["s", "u"], "old-el")[0]
        out = outputs(w)
        dp = DynamicPrompt(p)
        key = {n: (id(out), out.cache_key_set.get_data_key(n)) for n in p}
        old_list = types.SimpleNamespace(pendingNodes={"s": True}, staged_node_id=None)
        keep = pkg.evict.needed(out, None, dp, old_list)
        assert keep == {key["s"], key["k"], key["t"]}, keep  # not "u"
        keep = pkg.evict.needed(out, "k", dp, types.SimpleNamespace(pendingNodes={},
                                                                    staged_node_id=None))
        assert keep == {key["k"], key["t"]}, keep
        # an expansion in this prompt, or no pendingNodes: keep every active entry
        dp.add_ephemeral_node("x1", node("MakeTensor", mib=1), "k", "k")
        assert pkg.evict.needed(out, None, dp, old_list) is None
        assert pkg.evict.needed(out, None, DynamicPrompt(p), types.SimpleNamespace()) is None
    finally:
        w.stop()


@test
def lets_an_interrupt_through_and_keeps_the_worker_alive():
    w = fresh()
    a = agent()
    a.start_heartbeat()
    try:
        eid, key = two_prompts(w)

        def step(i):
            if i == 2:
                seq = a.post(eid)  # a command is pending: our hook does work
                assert a.wait_taken(seq)
                comfy.model_management.interrupt_current_processing(True)
        env.STEP_HOOK.append(step)
        p = {"k": node("Sampler", steps=6, tag="int"), "s": node("Sink", value=["k", 0])}
        ok, msgs = w.run(p, ["s"], "p2")
        assert not ok
        assert any(m[0] == "execution_interrupted" for m in msgs), msgs
        env.STEP_HOOK.clear()
        p3 = {"k": node("Sampler", steps=2, tag="after"), "s": node("Sink", value=["k", 0])}
        ok, msgs = w.run(p3, ["s"], "p3")
        assert ok, msgs
    finally:
        a.stop_heartbeat()
        w.stop()


@test
def swallows_its_own_errors():
    w = fresh()
    a = agent()
    a.start_heartbeat()
    orig = BRIDGE.serve

    def broken(cmds, **kw):
        raise RuntimeError("boom")
    try:
        eid, _ = two_prompts(w)
        BRIDGE.serve = broken

        log = {}

        def step(i):
            if i == 0:
                log["seq"] = a.post(eid)
                assert a.wait_taken(log["seq"])
        env.STEP_HOOK.append(step)
        p = {"k": node("Sampler", steps=3, tag="err"), "s": node("Sink", value=["k", 0])}
        ok, msgs = w.run(p, ["s"], "p2")
        assert ok, msgs
        assert env.LOG.grep("ramcache: error ")
        ack = a.wait_ack(log["seq"])  # answered all the same
        assert ack and ack["status"] == lib.ACK_BUSY, ack
        seq = a.post(eid)  # and when idle, on the serving thread thread
        ack = a.wait_ack(seq)
        assert ack and ack["status"] == lib.ACK_BUSY, ack
    finally:
        BRIDGE.serve = orig
        a.stop_heartbeat()
        w.stop()


@test
def agent_absent_leaves_comfyui_alone():
    w = fresh()
    a = agent()
    a.die()
    try:
        eid, key = two_prompts(w)
        p = {"k": node("Sampler", steps=3, tag="alone"), "s": node("Sink", value=["k", 0])}
        ok, _ = w.run(p, ["s"], "p2")
        assert ok
        # ComfyUI's own prompt-local release callback is still armed
        cb = env.SEEN["release_callback"]
        assert cb is not None and cb.__wrapped__.__self__ is outputs(w)
        assert key in outputs(w).cache
        st = BRIDGE.status()
        assert st["page"] and not st["attached"]
    finally:
        w.stop()


@test
def agent_killed_mid_prompt():
    w = fresh()
    a = agent()
    a.start_heartbeat()
    try:
        eid, key = two_prompts(w)
        log = {}

        def step(i):
            if i == 1:  # its last command comes in as it dies
                a.die()
                log["seq"] = a.post(eid)
                assert a.wait_taken(log["seq"])
        env.STEP_HOOK.append(step)
        p = {"k": node("Sampler", steps=4, tag="killed"), "s": node("Sink", value=["k", 0])}
        ok, msgs = w.run(p, ["s"], "p2")
        assert ok, msgs
        ack = a.wait_ack(log["seq"])
        assert ack and ack["status"] == lib.ACK_BUSY, ack
        assert key in outputs(w).cache  # nothing evicted for a dead agent
        assert not BRIDGE.status()["attached"]
        env.STEP_HOOK.clear()
        ok, _ = w.run({"t": node("MakeTensor", mib=1, tag="next"),
                       "s": node("Sink", value=["t", 0])}, ["s"], "p3")
        assert ok
    finally:
        w.stop()


@test
def null_cache_does_nothing_and_says_so_once():
    a = agent()
    a.start_heartbeat()
    try:
        # two values (newer) and one (v0.3.7x: cache_args {"lru", "ram": 0})
        for inactive in (0.0, None):
            BRIDGE._said.discard("null")
            BRIDGE._said.discard("args")
            n = len(env.LOG.lines)
            w = fresh("NONE", ram=0.0, ram_inactive=inactive)
            try:
                for i in range(2):
                    ok, _ = w.run({"t": node("MakeTensor", mib=1, tag=str(i)),
                                   "s": node("Sink", value=["t", 0])}, ["s"], f"n{i}")
                    assert ok
                assert a.entries() == {}
                seq = a.post(12345)
                ack = a.wait_ack(seq)
                assert ack["status"] == lib.ACK_NOT_FOUND
                said = [line for line in env.LOG.lines[n:] if "ramcache:" in line]
                assert len([x for x in said if "intermediate cache is disabled" in x]) == 1, said
                assert not [x for x in said if "GB" in x], said
            finally:
                w.stop()
    finally:
        a.stop_heartbeat()


class Nested:
    """A node running a sub-workflow with its own PromptExecutor."""
    FUNCTION = "run"
    RETURN_TYPES = ("TENSOR",)

    def run(self, value, helper=False):
        def build():
            return execution.PromptExecutor(env.comfyui_main.Server(),
                                            cache_type=execution.CacheType.CLASSIC,
                                            cache_args={"ram": 0})

        def sub(box):
            if helper:
                box.append(build())
            box[0].execute({"t": node("MakeTensor", mib=1), "s": node("Sink", value=["t", 0])},
                           "inner", {}, ["s"])
        box = [] if helper else [build()]
        # asyncio.run cannot nest: run the sub-workflow on a helper thread
        th = threading.Thread(target=sub, args=(box,))
        th.start()
        th.join(10)
        assert not th.is_alive(), "the sub-workflow hangs"
        assert box[0].success
        return (value,)


@test
def ignores_an_executor_built_inside_a_prompt():
    w = fresh()
    env.nodes.NODE_CLASS_MAPPINGS["Nested"] = Nested
    try:
        p = {"t": node("MakeTensor", mib=1, tag="outer"), "n": node("Nested", value=["t", 0]),
             "h": node("Nested", value=["n", 0], helper=True),
             "s": node("Sink", value=["h", 0])}
        ok, msgs = w.run(p, ["s"], "p1")
        assert ok, msgs
        assert BRIDGE.executor() is w.executor
        assert BRIDGE.outputs() is outputs(w)
        assert len(agent().entries()) == len(outputs(w).cache) == 4
        # built outside a prompt (an extension at start-up): the worker's
        # next prompt takes ComfyUI's executor back
        stray = execution.PromptExecutor(env.comfyui_main.Server(),
                                         cache_type=execution.CacheType.CLASSIC,
                                         cache_args={"ram": 0})
        assert BRIDGE.executor() is stray
        ok, msgs = w.run(p, ["s"], "p2")
        assert ok, msgs
        assert BRIDGE.executor() is w.executor and BRIDGE.exec_thread == w.thread.ident
        assert len(agent().entries()) == len(outputs(w).cache) == 4
    finally:
        w.stop()


@test
def says_how_comfyui_shares_the_cache():
    """--cache-ram takes one value in older ComfyUI, two in newer ones; an
    inactive headroom above the active one is set aside, and said so."""
    a = agent()
    a.start_heartbeat()
    try:
        for inactive, text in ((None, "takes one --cache-ram value"),
                               (4.0, "(--cache-ram 2.0 4.0) is set aside")):
            BRIDGE._said.discard("args")
            w = fresh(ram=2.0, ram_inactive=inactive)
            try:
                assert w.run({"t": node("MakeTensor", mib=1, tag=str(inactive)),
                              "s": node("Sink", value=["t", 0])}, ["s"], "p")[0]
                assert env.LOG.grep(text), (text, env.LOG.lines[-5:])
            finally:
                w.stop()
        BRIDGE._said.discard("args")
        n = len(env.LOG.grep("--cache-ram"))
        w = fresh(ram=2.0, ram_inactive=0.0)  # as documented: quiet
        try:
            assert w.run({"t": node("MakeTensor", mib=1, tag="zero"),
                          "s": node("Sink", value=["t", 0])}, ["s"], "p")[0]
            assert len(env.LOG.grep("--cache-ram")) == n
        finally:
            w.stop()
    finally:
        a.stop_heartbeat()


@test
def wraps_the_sync_execute_of_older_versions():
    """ComfyUI before async nodes: execute(...) is a plain function."""
    w = fresh()
    try:
        seen = {}

        def execute(server, dynprompt, caches, current_item, extra_data, executed,
                    prompt_id, execution_list, pending_subgraph_results):
            seen["running"] = BRIDGE.running
            return "done"
        wrapped = pkg.hooks._wrap_node_execute(execute)
        BRIDGE.exec_thread = threading.get_ident()
        r = wrapped(None, None, w.executor.caches, "n1", {}, set(), "p", None, {})
        assert r == "done" and seen["running"] == "n1" and BRIDGE.running is None
    finally:
        BRIDGE.exec_thread = w.thread.ident
        w.stop()


@test
def status_node_shows_the_agent():
    w = fresh()
    a = agent()
    a.start_heartbeat()
    a.set_level(2, headroom=300 * MiB, target=64 * MiB)
    try:
        env.nodes.NODE_CLASS_MAPPINGS.update(pkg.NODE_CLASS_MAPPINGS)
        p = {"t": node("MakeTensor", mib=1, tag="st"),
             "st": node("RAMCacheBPFStatus", value=["t", 0]),
             "s": node("Sink", value=["st", 0])}
        ok, msgs = w.run(p, ["s"], "p1")
        assert ok, msgs
        # passes its input through: the sink got the tensor
        out = outputs(w)
        st_entry = out.cache[out.cache_key_set.get_data_key("st")]
        t_entry = out.cache[out.cache_key_set.get_data_key("t")]
        assert st_entry.outputs[0][0] is t_entry.outputs[0][0]
        text = st_entry.ui["text"][0]
        assert "agent attached, pressure high" in text, text
        assert "headroom 300.0 MiB, wants 64.0 MiB freed" in text, text
        st = BRIDGE.status()
        assert st["attached"] and st["level"] == "high" and st["agent_pid"] == os.getpid()
        assert st["headroom"] == 300 * MiB and st["target"] == 64 * MiB
        assert st["comfyui"]["cache_type"] == "RAM_PRESSURE"
        assert st["comfyui"]["recommended"] == "python main.py"
    finally:
        a.set_level(0)
        a.stop_heartbeat()
        w.stop()


@test
def status_node_keeps_the_cache_keys_after_it():
    """Wired inline, the status node must not re-run the nodes after it:
    two runs of the same prompt, the second runs nothing again."""
    w = fresh()
    env.nodes.NODE_CLASS_MAPPINGS.update(pkg.NODE_CLASS_MAPPINGS)
    try:
        p = {"t": node("MakeTensor", mib=1, tag="keys"),
             "st": node("RAMCacheBPFStatus", value=["t", 0]),
             "inv": node("Record", value=["st", 0], name="inv"),
             "scale": node("Record", value=["inv", 0], name="scale"),
             "s": node("Sink", value=["scale", 0])}
        env.RAN.clear()
        assert w.run(p, ["s"], "k1")[0]
        assert env.RAN == ["inv", "scale"], env.RAN
        out = outputs(w)
        keys1 = {n: out.cache_key_set.get_data_key(n) for n in ("inv", "scale", "s")}
        env.RAN.clear()
        assert w.run(p, ["s"], "k2")[0]
        out = outputs(w)
        keys2 = {n: out.cache_key_set.get_data_key(n) for n in ("inv", "scale", "s")}
        assert keys1 == keys2, "cache keys after the status node changed"
        assert env.RAN == [], f"re-ran after the status node: {env.RAN}"
    finally:
        w.stop()


if __name__ == "__main__":
    main()
