"""The running side: the process's control page, served by the ramcache
module's Executor (python/ramcache/executor.py: its one serving loop beats,
reads commands and follows the agent), and what only ComfyUI's cache needs.

Threads:
  - the executor thread (ComfyUI's prompt worker) publishes the cache and
    evicts at safe points (hooks.py calls safe_point());
  - the serving thread (the Executor's) reads the commands for the
    entries published here and hands them to this bridge (take_command),
    which queues them for the worker; at each of its turns (_turn) it acks
    what the worker did. When no prompt runs it may evict itself, holding
    exec_lock, which the executor holds for the whole of execute() and
    reset(): the cache is never touched by two threads at once.
"""
import collections
import logging
import os
import queue
import threading
import time
import weakref

from . import compat, evict, guard, models, ownmemory, ownpolicy, shares, sizing
from .eta import eta_seconds
from .reclaim import Reclaim
from .window import NodeWindow
from . import page as pagemod
from .page import executor as serving

log = logging.getLogger("ramcache")

# At a prompt's first safe point, while the agent asks for bytes, how long
# the executor waits for it to ask for the outputs that just became inactive
# (the agent reacts within a few hundred ms; a first node can allocate
# faster), and how often it looks whether the agent still asks.
SETTLE_S = 0.6
SETTLE_POLL_S = 0.02
# Before a model file is read, how long the load waits for the agent to
# count its announcement and make room (commands served meanwhile): the
# agent reads pages at every heartbeat, 250 ms; a load takes seconds.
LOAD_WAIT_S = 1.0
LOAD_QUIET_S = 2 * pagemod.HEARTBEAT_PERIOD_NS / 1e9
# While commands wait for the serving thread itself, its next turn comes
# this soon (else the Executor's own pace: beats, the agent's state).
WAIT_BUSY_MS = 10


class Bridge:
    def __init__(self):
        self.page = None
        self.ex = None  # the Executor that serves the page
        self.disabled = None  # reason string once we gave up
        self.executor = None  # weakref to PromptExecutor
        self.exec_thread = None
        self.exec_lock = threading.RLock()
        self.pub_lock = threading.Lock()  # publish-side library calls
        self.interrupt_types = ()
        self.hooks = []  # what hooks.install wrapped in this ComfyUI
        # what the executor is doing, set by the hooks
        self.running = None
        self.dynprompt = None
        self.execution_list = None
        self.prompts = 0
        self.in_prompt = False
        self.prompt_started = False  # no node of this prompt ran yet
        self.settled = 0  # prompts that waited for the agent at their start
        # entry ids (the Executor's: one id space per page)
        self._ids = {}  # (id(cache), key) -> entry id
        self._id_key = {}  # entry id -> (id(cache), key)
        self._where = {}  # entry id -> (weakref(cache), key)
        self._published = {}  # entry id -> what we last wrote
        # entry id -> (id(value), bytes, has_model, plain, {storage: bytes})
        self._sizes = {}
        self.shares = shares.Shares()  # storages entries share: once
        self._last_use = {}  # entry id -> (used_generation, mono ns, wall)
        self._labels = {}  # entry id -> label, kept while the entry lives
        self._gone_labels = {}  # entry id -> label of an entry just evicted
        self._pin_eids = {}  # ownmemory pool -> entry id
        self.mm = None  # comfy.model_management, set by hooks.install
        self.mm_busy = 0  # inside its load_models_gpu or extra_ram_release
        # held around the manager's calls that walk its loaded list (hooks.py)
        # and by the serving thread while a model it dropped inside a node goes
        self.mm_lock = threading.RLock()
        self.loads = models.Loads()
        self.load = models.LoadWatch(self.loads, lambda: self.reclaim.read_rss(),
                                     lambda: self.freed_total)
        self.load_waits = []  # ms each announced load waited, the last 8
        self._echo_pid = None  # the agent that counted an announcement
        self._silent_pid = None  # one that let a wait run out uncounted
        self.unloaded = 0  # models ComfyUI's manager unloaded for commands
        self._idle_serving = False  # the serving thread serves between prompts
        self._for_load = False  # the worker serves for an announced load
        self._last_served = 0.0  # when the wait last served a command
        self._guard_next = 0.0  # the guard looks again no sooner
        self.guard_evicted = 0  # bytes the guard evicted itself
        self.memory_use = pagemod.memory_use  # (limit, used) of the cgroup
        self._node_t0 = 0  # when the running node started (monotonic ns)
        self._node_ns = {}  # entry id -> ns its node took to run
        self._gen = 0  # the generation last published
        self._newly_inactive = 0  # entries the last publish saw go inactive
        # command flow
        self.window = NodeWindow()
        self.reclaim = Reclaim()
        self.inbox = queue.Queue()
        self.deferred = collections.deque()  # for the worker only
        self.held = collections.deque()  # their entry is in use: obeyed once not
        self._agent_was_alive = False
        self.agent_lost_ns = None  # when the agent was last seen to go
        self.served_in_node = 0  # evictions made while a node ran
        # ComfyUI's own policy (ownpolicy.py)
        self.own_wrapped = []
        self.set_aside_calls = 0  # its inactive-threshold releases skipped
        self.comfy_freed = 0  # published entries ComfyUI dropped itself
        self.outbox = queue.Queue()
        self.outstanding = 0
        self.evictions = collections.deque(maxlen=8)
        self.evicted_total = 0
        self.evicted_bytes = 0  # what the evicted entries held (our estimate)
        self.freed_total = 0  # RSS drop measured after the eviction
        self.headroom_samples = collections.deque(maxlen=64)
        self._said = set()
        self._last_sample = 0  # when headroom_samples last grew (ns)

    # ------------------------------------------------------------ setup

    def say_once(self, tag, level, msg, *args):
        if tag not in self._said:
            self._said.add(tag)
            log.log(level, "ramcache: " + msg, *args)

    def attach(self, executor):
        """Called from PromptExecutor.__init__ on ComfyUI's prompt worker.
        An executor some node builds while a prompt runs (to run a
        sub-workflow) is not ComfyUI's: keep the one we have."""
        if self.in_prompt:
            self.say_once("nested", logging.INFO, "ignoring a PromptExecutor "
                          "built inside a prompt")
            return
        self.executor = weakref.ref(executor)
        self.exec_thread = threading.get_ident()
        if self.page is None and self.disabled is None:
            self._open()

    def _open(self):
        try:
            ex = serving.shared()
        except OSError as e:
            self.disabled = e.strerror or str(e)
            log.warning("ramcache: %s; ComfyUI runs unchanged.", self.disabled)
            return
        self.ex, self.page = ex, ex.page
        ex.on_agent.append(self._follow_agent)
        ex.on_wake.append(self._turn)
        where = (f"memfd '{pagemod.MEMFD_NAME}' (fd {self.page.fd} of pid {os.getpid()})"
                 if self.page.memfd else self.page.path)
        log.info("ramcache: control page %s; start the agent with "
                 "'sudo ramcache-bpf --pid %d'", where, os.getpid())

    def close(self):
        """Stop serving and remove the page; safe at any point of start-up
        or shutdown, and more than once."""
        ex = self.ex
        if ex is not None:
            ex.stop()
        # not while the executor is inside serve(): it reads the page
        locked = self.exec_lock.acquire(timeout=2)
        try:
            with self.pub_lock:
                page, self.page = self.page, None
                if ex is not None:
                    ex.close()
                elif page is not None:
                    page.close(unlink=True)
        finally:
            if locked:
                self.exec_lock.release()

    def owns(self, executor):
        return self.executor is not None and self.executor() is executor

    def owns_caches(self, caches):
        ex = self.executor() if self.executor else None
        return ex is not None and getattr(ex, "caches", None) is caches

    def outputs(self):
        """executor.caches.outputs, read afresh: reset() replaces it."""
        ex = self.executor() if self.executor else None
        caches = getattr(ex, "caches", None)
        return getattr(caches, "outputs", None)

    def agent_alive(self):
        """An agent is attached and serving: alive, and beating (one that
        is stopped or stuck keeps its lock: its stale beat tells, within
        the Executor's STALL_NS, long before the heartbeat timeout)."""
        ex = self.ex
        return self.page is not None and ex is not None and ex.agent_alive()

    def status(self):
        """What the status node, the /ramcache/status route and the tests
        show. Plain JSON types only."""
        page = self.page
        ex = self.executor() if self.executor else None
        st = {"page": page is not None, "reason": self.disabled,
              "control": None, "attached": False, "agent_pid": None,
              "level": "unknown", "headroom": None, "target": None, "eta_s": None,
              "cache": compat.kind(self.outputs()),
              "comfyui": compat.describe(ex, compat.comfyui_version()) if ex else None,
              "entries": len(self._published),
              "evicted": self.evicted_total, "evicted_bytes": self.evicted_bytes,
              "rss_drop": self.freed_total, "settled": self.settled,
              "served_in_node": self.served_in_node, "held": len(self.held),
              "comfy_freed": self.comfy_freed,
              "trims": self.reclaim.trims, "trims_returned": self.reclaim.trims_returned,
              "own_policy": None, "set_aside_calls": self.set_aside_calls,
              "hooks": list(self.hooks),
              "guard_evicted": self.guard_evicted,
              "models": self._models_status(),
              "last": self._last_evictions()}
        if page is not None and not page.closed:
            st["control"] = ("memfd:" + pagemod.MEMFD_NAME) if page.memfd else page.path
            alive = page.agent_alive()
            st["attached"] = alive
            if alive:
                lv = page.level()
                st["agent_pid"] = page.agent_pid()
                st["level"] = pagemod.LEVELS[lv] if lv < len(pagemod.LEVELS) else str(lv)
                st["headroom"] = page.headroom()
                st["target"] = page.target()
                st["eta_s"] = eta_seconds(list(self.headroom_samples))
        if ex is not None:
            st["own_policy"] = self.own_policy(st["cache"], st["attached"])
        return st

    def _models_status(self):
        st = self.loads.status()
        st.update({"announced": self.load.announced, "waits_ms": list(self.load_waits),
                   "unloaded": self.unloaded,
                   "loaded": [list(m) for m in models.loaded(self.mm)],
                   "agent_counts": self._echo_pid is not None})
        return st

    def own_policy(self, kind, attached):
        """ownpolicy.describe() with what applies now: a part set aside
        while the agent is attached is "set aside" with it, "ComfyUI's"
        without it."""
        rows = ownpolicy.describe(kind, self.cache_args())
        for r in rows:
            if r["state"] == ownpolicy.SET_ASIDE:
                r["now"] = "set aside" if attached else "ComfyUI's (no agent)"
            else:
                r["now"] = r["state"]
        return rows

    def _last_evictions(self):
        """A copy of the recent evictions, read from another thread (the
        server's) while the executor may append: retry a mutated deque."""
        for _ in range(5):
            try:
                return [dict(e) for e in self.evictions]
            except RuntimeError:
                continue
        return []

    # ------------------------------------------------------------ publishing

    def _entry_id(self, cache, key):
        k = (id(cache), key)
        eid = self._ids.get(k)
        if eid is None:
            eid = self.ex.new_id(self)
            self._ids[k] = eid
            self._id_key[eid] = k
            self._where[eid] = (weakref.ref(cache), key)
        return eid

    def _label(self, eid, names, cache, key, dynprompt):
        """'node:Class' while the entry's prompt names it; afterwards the
        label it had (a key outlives its prompt's key set)."""
        node_id = names.get((id(cache), key))
        if node_id is None:
            return self._labels.get(eid, "?")
        cls = ""
        if dynprompt is not None:
            try:
                cls = dynprompt.get_node(node_id).get("class_type", "")
            except Exception:
                pass
        label = f"{node_id}:{cls}" if cls else str(node_id)
        if cls or eid not in self._labels:
            self._labels[eid] = label
        return self._labels[eid]

    def publish(self):
        """Mirror the outputs cache, and ComfyUI's pinned memory, into the
        page: add, update, remove."""
        if self.page is None:
            return
        outputs = self.outputs()
        k = compat.kind(outputs)
        self._say_kind(outputs, k)
        gen = evict.generation(outputs)
        if gen is None:
            gen = self.prompts
        self._gen = gen
        now = time.monotonic_ns()
        names = evict.node_of_key(outputs) if k != "null" else {}
        dynprompt = getattr(outputs, "dynprompt", None) or self.dynprompt
        rows, values = [], {}
        for cache, key, value in (evict.walk(outputs) if k != "null" else ()):
            row = self._row(outputs, cache, key, value, gen, now)
            if row is not None:
                label = self._label(row[0], names, cache, key, dynprompt)
                rows.append((row[0], row[1], label))
                values[row[0]] = value
        rows = self.shares.count(rows, self._sizes, lambda eid, n: self._cost(
            eid, values[eid], self._sizes[eid], n))
        rows += self._pin_rows(gen, now)
        seen = {r[0] for r in rows}

        def was_active(eid):
            prev = self._published.get(eid)  # (row, label)
            return prev is None or prev[0][3] & pagemod.F_ACTIVE
        self._newly_inactive = sum(1 for eid, row, _ in rows
                                   if not row[3] & pagemod.F_ACTIVE and was_active(eid))
        self._write(rows, [eid for eid in self._published if eid not in seen], gen)
        self._drop_ids([e for e in self._where if e not in seen])

    def _say_kind(self, outputs, k):
        ex = self.executor() if self.executor else None
        if ex is not None and not hasattr(ex, "caches"):
            self.say_once("old", logging.WARNING, "this ComfyUI has no "
                          "executor.caches (too old): nothing to publish or evict")
        elif k == "null":
            self.say_once("null", logging.INFO, "the intermediate cache is "
                          "disabled (--cache-none): nothing to publish or evict")
        elif k == "dependency":
            self.say_once("null", logging.INFO, "the intermediate cache keeps "
                          "outputs only until their readers ran (--cache-none): "
                          "nothing stays between prompts for the agent to free")
        else:
            self.say_once("kind", logging.INFO, "publishing ComfyUI's %s output "
                          "cache (%s)", k, type(outputs).__name__)

    def _row(self, outputs, cache, key, value, gen, now):
        """(entry id, (bytes, last use, used generation, flags, cost)) of one
        cache entry, or None for an unhashable key."""
        try:
            eid = self._entry_id(cache, key)
        except TypeError:
            return None
        memo = self._sizes.get(eid)
        if memo is None or memo[0] != id(value):
            memo = self._sizes[eid] = (id(value),) + sizing.entry_sizing(value)
        ug = evict.used_generation(outputs, key)
        ug = gen if ug is None else ug
        # last use: RAMPressureCache's wall stamp on the page's clock, else
        # when we first saw this generation; unchanged stays put
        wall = evict.last_use_wall(outputs, key)
        prev = self._last_use.get(eid)
        if prev and prev[0] == ug and prev[2] == wall:
            last = prev[1]
        elif wall is not None:
            last = evict.wall_to_mono_ns(wall, time.time(), now)
        else:
            last = now
        self._last_use[eid] = (ug, last, wall)
        flags = pagemod.F_ACTIVE if evict.is_active(outputs, key) else 0
        if memo[2]:
            flags |= pagemod.F_MODEL
        return eid, (memo[1], last, ug, flags, self._cost(eid, value, memo))

    def _cost(self, eid, value, memo, nbytes=None):
        """ns to have the entry again: a model's reload at this process's
        measured seconds per byte of model (@nbytes, else all it holds),
        else what its node took."""
        cost = int(float(getattr(value, "exec_time", 0) or 0) * 1e9)
        if memo[2]:
            cost = self.loads.reload_ns(memo[1] if nbytes is None else nbytes) or cost
        return cost or self._node_ns.get(eid, 0)

    def _pin_rows(self, gen, now):
        """ComfyUI's pinned memory as entries (ownmemory.py): one per pool
        that holds any."""
        rows = []
        for pool, n in ownmemory.pins(self.mm).items():
            if n <= 0:
                continue
            eid = self._pin_eids.get(pool)
            if eid is None:
                eid = self._pin_eids[pool] = self.ex.new_id(self)
            prev = self._published.get(eid)
            last = prev[0][1] if prev and prev[0][0] == n else now
            active = pool == "prompt"
            flags = pagemod.F_MODEL | (pagemod.F_ACTIVE if active else 0)
            rows.append((eid, (n, last, gen if active else max(0, gen - 1), flags, 0),
                         ownmemory.POOLS[pool]))
        return rows

    def refresh_pins(self):
        """ComfyUI's free_pins ran (its own or ours): the pin entries follow."""
        if self.page is None or not self._pin_eids:
            return
        with self.window.lock:
            rows = self._pin_rows(self._gen, time.monotonic_ns())
            seen = {r[0] for r in rows}
            self._write(rows, [e for e in self._pin_eids.values()
                               if e in self._published and e not in seen], None)

    def _write(self, rows, gone, gen):
        """One change of the table: the agent reads all of it or none."""
        with self.pub_lock:
            if self.page is None:
                return
            if gen is not None:
                self.page.set_generation(gen)
            with self.page.batch():
                for eid in gone:
                    self.page.remove(eid)
                    del self._published[eid]
                for eid, row, label in rows:
                    if self._published.get(eid) == (row, label):
                        continue
                    if self.page.publish(eid, row[0], row[1], row[2], row[3], label,
                                         row[4]):
                        self._published[eid] = (row, label)
                    else:
                        self.say_once("full", logging.WARNING,
                                      "control page full, some entries are not published")

    def _forget(self, eids):
        """Entries that left the cache: off the page and the maps (under
        the window's lock)."""
        with self.pub_lock:
            if self.page is not None:
                with self.page.batch():
                    for eid in eids:
                        if self._published.pop(eid, None) is not None:
                            self.page.remove(eid)
        for eid in eids:
            self._gone_labels[eid] = self._labels.get(eid, "?")
        self._drop_ids(eids)

    def _drop_ids(self, eids):
        for eid in eids:
            if self._where.pop(eid, None) is None:
                continue
            self.ex.forget(eid)
            self._ids.pop(self._id_key.pop(eid), None)
            self._sizes.pop(eid, None)
            self.shares.forget(eid)
            self._node_ns.pop(eid, None)
            self._last_use.pop(eid, None)
            self._labels.pop(eid, None)

    # ------------------------------------------------------------ evicting

    def on_executor_thread(self):
        return self.exec_thread is not None and threading.get_ident() == self.exec_thread

    def pending(self):
        return not self.inbox.empty() or bool(self.deferred)

    def _drain(self, worker=True):
        """The commands waiting: for the worker (or between prompts) all of
        them, for the serving thread inside a node the new ones (what a node uses
        stays in use until a node ends: the worker looks at held ones again
        at its next safe point)."""
        cmds = []
        queues = (self.deferred, self.held) if worker else ()
        for q in queues:
            while q:
                cmds.append(q.popleft())
        while True:
            try:
                cmds.append(self.inbox.get_nowait())
            except queue.Empty:
                return cmds

    def safe_point(self, republish):
        """Executor thread only: publish if asked, serve queued commands."""
        if self.page is None or not self.on_executor_thread():
            return
        with self.window.lock:
            if republish:
                self.publish()
            cmds = self._drain()
        if cmds:
            self.answer(cmds, lambda *r: self.outbox.put(r))
        self.guard()

    def guard(self):
        """The last line while the agent does not serve (guard.py): on the
        worker thread, or from the serving thread between prompts (exec_lock
        held). Bytes it evicted."""
        now = time.monotonic()
        if self.page is None or self.agent_alive() or now < self._guard_next:
            return 0
        self._guard_next = now + guard.EVERY_S
        need = guard.shortfall(self.memory_use())
        if not need:
            return 0
        rows = [(eid, row[0], row[1], bool(row[3] & pagemod.F_ACTIVE))
                for eid, (row, _) in list(self._published.items())]
        cmds = [guard.Cmd(eid) for eid in guard.pick(rows, need)]
        with self.window.lock:
            results, values, _, _, _ = self._take(cmds, in_node=False)
        values.clear()
        freed = sum(r[3] for r in results if r[1] == pagemod.ACK_EVICTED)
        self.guard_evicted += freed
        if freed:
            self.say_once("guard", logging.WARNING, "the agent does not serve and "
                          "ComfyUI's memory cgroup is near its limit: evicted %d MiB "
                          "of earlier outputs itself (said once)", freed >> 20)
            self.reclaim.trim()
        return freed

    def asking(self):
        """The agent wants bytes freed now (target_bytes > 0): its commands
        for the deficit are on their way. A level alone (a forecast, a warn
        with room) brings none."""
        page = self.page
        return page is not None and page.agent_alive() and page.target() > 0

    def settle(self):
        """Executor thread, at a prompt's first safe point: when the agent is
        asking for bytes and outputs of earlier prompts have just become
        inactive, give it up to SETTLE_S to ask for them before the first
        node allocates; not a moment once it stops asking. Returns how many
        commands were served."""
        if self.page is None or not self._newly_inactive or not self.on_executor_thread():
            return 0
        if not self.asking():
            return 0
        self.settled += 1
        served = 0
        newly = self._newly_inactive
        start = time.monotonic()
        deadline = start + SETTLE_S
        while self.asking():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:  # short naps: a target gone to 0 ends the wait at once
                cmds = [self.inbox.get(timeout=min(left, SETTLE_POLL_S))]
            except queue.Empty:
                continue
            cmds += self._drain()
            self.answer(cmds, lambda *r: self.outbox.put(r))
            served += len(cmds)
        msg = ("prompt %d started while the agent asked for %d bytes (%d entries "
               "just became inactive): waited %.0f ms, %d commands served")
        args = (self.prompts, self.page.target() if self.page else 0, newly,
                (time.monotonic() - start) * 1e3, served)
        if "settle" in self._said:
            log.debug("ramcache: " + msg, *args)
        else:
            self.say_once("settle", logging.INFO, msg + " (said once)", *args)
        return served

    # ------------------------------------------------------------ model loads

    def node_started(self):
        self._node_t0 = time.monotonic_ns()

    def node_ended(self, node_id):
        """Worker thread, the node @node_id just returned: what it took
        to run is its output's cost; a load in it is measured and its
        announcement withdrawn."""
        took = time.monotonic_ns() - self._node_t0 if self._node_t0 else 0
        self._node_t0 = 0
        loc = evict.locate(self.outputs(), node_id) if took and self.ex else None
        if loc is not None:
            try:
                self._node_ns[self._entry_id(*loc)] = took
            except TypeError:  # an unhashable key is never published
                pass
        page = self.page if self.page is not None and not self.page.closed else None
        # a load that did not wait: the agent has counted it by its end
        if page is not None and self.load.running and page.expect_seen():
            self._echo_pid = page.agent_pid()
        with self.pub_lock:
            self.load.end(page)

    def before_load(self, path):
        """Worker thread, inside a node, before a model file is read:
        announce what the load will take and give the agent up to
        LOAD_WAIT_S to count it and make room (commands served here)."""
        if self.running is None or not self.on_executor_thread():
            return
        page = self.page if self.agent_alive() else None
        with self.pub_lock:
            need = self.load.begin(path, page)
        # with twice the room it needs, the load need not wait to be counted
        if page is not None and page.headroom() < 2 * need:
            self.await_room(page)

    def await_room(self, page):
        """Serve commands until the agent has counted the announcement and
        wants nothing more, LOAD_WAIT_S at most; no wait at all for an agent
        that let one run out uncounted (it predates announcements)."""
        pid = page.agent_pid()
        if pid == self._silent_pid:
            self.load_waits.append(0.0)
            del self.load_waits[:-8]
            return
        start = self._last_served = time.monotonic()
        self._for_load = True
        try:
            while page.agent_alive() and time.monotonic() - start < LOAD_WAIT_S:
                if not self._wait_step(page):
                    break
        finally:
            self._for_load = False

        if page.expect_seen():
            self._echo_pid = pid
        elif page.agent_alive() and self._echo_pid != pid:
            self._silent_pid = pid  # never counted one: it predates them
        self.load_waits.append(round((time.monotonic() - start) * 1e3, 1))
        del self.load_waits[:-8]

    def _wait_step(self, page):
        """One step of await_room: serve what waits (what the evictions
        leave in the heap, the load reuses: the announcement shrinks by
        it), or say whether to go on waiting."""
        with self.window.lock:
            cmds = self._drain()
        now = time.monotonic()
        if cmds:
            self.answer(cmds, lambda *r: self.outbox.put(r))
            self._last_served = now
            return True
        # counted, and it wants nothing more, or has sent nothing more for
        # two of its beats (what is left of its entries it cannot have)
        if page.expect_seen() and self.outstanding <= len(self.held) and \
                (not page.target() or now - self._last_served >= LOAD_QUIET_S):
            return False
        time.sleep(SETTLE_POLL_S)
        return True

    def agent_takes_models(self):
        """The agent attached now has counted a load's announcement: it
        can make room for models while they load. Until one of its own
        has, the models of earlier prompts stay ComfyUI's to drop."""
        page = self.page
        if page is not None and self._echo_pid == page.agent_pid():
            return True
        return not self._inactive_models()

    def _inactive_models(self):
        return any(row[3] & pagemod.F_MODEL and not row[3] & pagemod.F_ACTIVE
                   for row, _ in list(self._published.values()))

    def answer(self, cmds, sink, in_node=False):
        """serve(cmds) and pass every result to sink(cmd, status, freed),
        "busy" for all when serving failed: each command gets its ack, now
        or, held, once its entry is no longer in use. What serve() left to
        do after the acks runs whatever the sink does."""
        results = [(c, pagemod.ACK_BUSY, 0) for c in cmds]
        release = None
        try:
            results, later, held, release = self.serve(cmds, in_node=in_node)
            self.deferred.extend(later)
            self.held.extend(held)
        finally:
            try:
                for r in results:
                    sink(*r[:3])
            finally:
                if release is not None:
                    release()

    def serve(self, cmds, in_node=False):
        """Evict for each command: ([[cmd, status, bytes_freed, bytes]],
        commands left for the worker, commands held while their entry is in
        use, what is left to do after the acks or None). in_node: from the
        serving thread while a node runs, which frees plain data (tensors
        and containers: nothing of ComfyUI's or a node's runs when they go)
        and, while ComfyUI's model manager is idle, models (below), and
        leaves the rest, and everything once the window has closed, to the
        worker."""
        if not self.page.agent_alive():
            self.say_once("dead", logging.INFO, "agent gone: commands left "
                          "unanswered by eviction, ComfyUI's own policy applies")
            return [(c, pagemod.ACK_BUSY, 0) for c in cmds], [], [], None
        # A model inside a node (a load that needs the room, item 4 of the
        # model design): its entry dropped, the model goes with its last
        # reference, and ComfyUI's own finalizer (cleanup_models) takes it
        # off the loaded list, in this thread. So the manager's lock is held
        # until the values are gone: the worker does not walk that list
        # meanwhile (hooks.py takes the lock around the manager's calls).
        # (Taken inside the window's lock, never waited for: the worker holds
        # the window's lock when it unloads through the manager.)
        mm_held = busy = False
        models = closed = 0
        try:
            with self.window.lock:
                closed = in_node and self.window.node is None
                # (while the worker waits for an announced load it serves
                # itself, through ComfyUI's unload: models are left to it)
                mine = in_node and not closed and self.mm is not None and not self._for_load
                mm_held = mine and self.mm_lock.acquire(blocking=False)
                busy = mine and not mm_held
                if not closed:
                    before = self.reclaim.read_rss()  # before: pins go inside _take
                    results, values, later, held, models = self._take(cmds, in_node,
                                                                      mm_held)
        finally:
            if mm_held and not models:
                self.mm_lock.release()
                mm_held = False
        if closed:
            return [], list(cmds), [], None
        if busy:  # the manager's call ends soon: the serving thread tries again then
            later = self._retry_models(later)
        evicted = [r for r in results if r[1] == pagemod.ACK_EVICTED]
        total = sum(r[3] for r in evicted)
        # a load running takes again what goes now: left in the heap for it
        for_load = self._for_load or self.load.running is not None

        def release():
            try:
                values.clear()  # the last references: the memory goes now
            finally:
                if mm_held:
                    self.mm_lock.release()
            if evicted:
                # the process's RSS drop, split by the entries' sizes: memory
                # actually returned (more than the entries: other garbage went
                # with them; less: storage shared with a live tensor)
                freed = self.reclaim.returned(before, total, may_collect=not in_node,
                                              trim=not for_load)
                if for_load and total > freed:  # left in the heap for the load
                    with self.pub_lock:
                        self.load.reuse(self.page, total - freed)
                self._record(results, freed, total, in_node)
        if not in_node:
            release()
            return results, later, held, None
        # Inside a node the ack goes as soon as the entries are out of the
        # cache, with their bytes: unmapping 200 MB takes 20 ms of CPU, and
        # hundreds of ms on a loaded machine, which the agent sees in its
        # own RSS readings (command -> ack -> memory freed).
        for r in results:
            if r[1] == pagemod.ACK_EVICTED:
                r[2] = r[3]
        return results, later, held, release

    def _retry_models(self, later):
        """The commands of @later for models go back to the inbox, where
        the serving thread looks again in WAIT_BUSY_MS (the worker's next safe
        point may be the node's end); the others are returned."""
        rest = []
        for c in later:
            if self._sizes.get(c.entry_id, (0, 0, False, False))[2]:
                self.inbox.put(c)
            else:
                rest.append(c)
        return rest

    def _take(self, cmds, in_node, models_ok=False):
        """Under the window's lock: remove what may go. [cmd, status, freed,
        bytes] per command answered, the removed values, the commands left
        for the worker, the commands held (their entry is in use: the
        running node reads it, or a node still pending will), and how many
        of the removed hold models. in_node: plain data only, and models
        too with @models_ok (the caller holds the model manager's lock)."""
        outputs = self.outputs()
        k = compat.kind(outputs)
        if k == "null":
            return [[c, pagemod.ACK_NOT_FOUND, 0, 0] for c in cmds], [], [], [], 0
        keep = evict.needed(outputs, self.running, self.dynprompt, self.execution_list)
        results, values, later, held, gone = [], [], [], [], []
        models = 0
        pools = {eid: pool for pool, eid in self._pin_eids.items()}
        for c in cmds:
            if c.entry_id in pools:
                self._take_pins(c, pools[c.entry_id], in_node, results, later)
                continue
            group = self.shares.group(c.entry_id, self._where)
            if not group:
                results.append([c, pagemod.ACK_NOT_FOUND, 0, 0])
                continue
            if any(((id(cache), key) in keep if keep is not None
                    else evict.is_active(outputs, key)) for _, cache, key in group):
                held.append(c)
                continue
            memos = [self._sizes.get(eid, (0, 0, False, False)) for eid, _, _ in group]
            if in_node and not all(m[3] or (models_ok and m[2]) for m in memos):
                later.append(c)
                continue
            nbytes = 0
            for (eid, cache, key), memo in zip(group, memos):
                if memo[2]:
                    models += 1
                    self._unload(cache.cache[key])
                values.append(evict.remove(cache, key))
                gone.append(eid)
                nbytes += self.shares.bytes_of(eid, memo[1])
            results.append([c, pagemod.ACK_EVICTED, 0, nbytes])
        self._forget(gone)
        return results, values, later, held, models

    def _unload(self, value):
        """ComfyUI's own unload of the models an entry holds: on its worker
        thread outside its own model loading (which walks the loaded list),
        or between prompts from the serving thread, which then holds exec_lock
        (and so does ComfyUI's worker for its own unloads: hooks.py). Inside
        a node on the serving thread it never runs: models wait for the worker."""
        if self.mm is None or self.mm_busy:
            return
        if not self.on_executor_thread() and not self._idle_serving:
            return
        try:
            self.unloaded += models.unload(self.mm, value)
        except self.interrupt_types:
            raise
        except Exception:
            self.say_once("unload", logging.WARNING, "ComfyUI's model unload failed "
                          "for a command (the entry is dropped all the same)")
            log.debug("ramcache: unload", exc_info=True)

    def _take_pins(self, c, pool, in_node, results, later):
        """A command for ComfyUI's pinned memory: its own free_pins, on its
        worker thread only (it walks the loaded models and their buffers):
        held for the worker while a node runs, "busy" between prompts (the
        worker may be unloading models outside any prompt)."""
        if in_node:
            later.append(c)
            return
        if not self.on_executor_thread():
            results.append([c, pagemod.ACK_BUSY, 0, 0])
            return
        n = ownmemory.pins(self.mm).get(pool, 0)
        freed = ownmemory.free(self.mm, pool, n) if n else 0
        self._gone_labels[c.entry_id] = ownmemory.POOLS[pool]
        results.append([c, pagemod.ACK_EVICTED if freed else pagemod.ACK_NOT_FOUND, 0, freed])

    def _record(self, results, freed, total, in_node):
        done_ns = time.monotonic_ns()
        n = sum(1 for r in results if r[1] == pagemod.ACK_EVICTED)
        for r in results:
            if r[1] != pagemod.ACK_EVICTED:
                continue
            c = r[0]
            share = r[3] / total if total else 1 / n
            measured = int(freed * share)
            if not in_node:  # in a node the ack went with the entries' bytes
                r[2] = measured
            self.evicted_total += 1
            self.evicted_bytes += r[3]
            self.freed_total += measured
            if in_node:
                self.served_in_node += 1
            self.evictions.append({
                "id": c.entry_id, "label": self._gone_labels.pop(c.entry_id, "?"),
                "bytes": r[3], "rss_drop": measured,
                "reason": pagemod.REASONS.get(c.reason, "unknown"),
                "latency_ms": round(max(0, done_ns - c.issue_ns) / 1e6, 3)
                if c.issue_ns else None,
                "in_node": in_node, "time": time.time()})

    # ------------------------------------------------------------ ComfyUI's own frees

    def cache_args(self):
        ex = self.executor() if self.executor else None
        return getattr(ex, "cache_args", None)

    def adopt(self):
        """Wrap the served output cache's own release (ownpolicy.adopt)."""
        outputs = self.outputs()
        if outputs is not None and compat.kind(outputs) != "null":
            self.own_wrapped = ownpolicy.adopt(outputs, self)

    def own_release(self, orig, *args, **kwargs):
        """ComfyUI's own ram_release, poll or clean_unused: nobody else in
        the cache while it walks it, and what it dropped leaves the page at
        once (an agent asking for it would get not_found)."""
        with self.window.shut():
            r = orig(*args, **kwargs)
            self.prune()
        return r

    def prune(self):
        """Drop from the page the entries no longer in their cache."""
        with self.window.lock:
            gone = []
            for eid, (ref, key) in list(self._where.items()):
                cache = ref()
                if cache is None or key not in getattr(cache, "cache", {}):
                    gone.append(eid)
            if gone:
                self.comfy_freed += sum(1 for e in gone if e in self._published)
                self._forget(gone)
                for eid in gone:
                    self._gone_labels.pop(eid, None)
            return len(gone)

    # ------------------------------------------------------------ serving

    def take_command(self, cmd):
        """Serving thread: a command for an entry of ours (the Executor's
        owner protocol). It waits for the worker's next safe point, or for
        _turn() between prompts or inside a node's window."""
        self.outstanding += 1
        self.inbox.put(cmd)

    def _turn(self):
        """Each turn of the serving thread: ack what the worker did, take
        a headroom sample per beat, serve what waits. Its next turn comes
        within WAIT_BUSY_MS while commands wait for it."""
        try:
            while True:
                try:
                    cmd, status, freed = self.outbox.get_nowait()
                except queue.Empty:
                    break
                self.ex.ack(cmd, status, freed)
                self.outstanding -= 1
            self._sample(time.monotonic_ns())
            if self.outstanding or not self.agent_alive():
                self._serve_waiting()
        except Exception:  # keep serving; the page may recover
            if "serving" not in self._said:
                log.exception("ramcache: serving error (further ones not logged)")
                self._said.add("serving")
        return WAIT_BUSY_MS if self.outstanding > len(self.held) else None

    def _sample(self, now):
        """The agent's headroom once per beat, for the status's eta."""
        if now - self._last_sample < serving.BEAT_NS:
            return
        self._last_sample = now
        if self.agent_alive():
            self.headroom_samples.append((now / 1e9, self.page.headroom()))
        else:
            self.headroom_samples.clear()

    def _follow_agent(self, state, _t_ns):
        """on_agent: the agent came, or went (died, detached, silent or
        stalled), as the serving thread saw it: ComfyUI's own policy is
        back from then on (every wrapper asks agent_alive()); said once
        per departure, with how it went."""
        alive = state == "alive"
        if alive == self._agent_was_alive:
            return
        self._agent_was_alive = alive
        if alive:
            self.agent_lost_ns = None
            return
        self.agent_lost_ns = time.monotonic_ns()
        how = {"died": "died", "silent": "went silent (no heartbeat for 1.5 s)",
               "stalled": "stopped beating (stopped or stuck)",
               "none": "detached"}.get(state, "is gone")
        log.info("ramcache: the agent %s: ComfyUI's own RAM policy applies again; "
                 "%d commands waiting are answered busy", how, self.outstanding)

    def _serve_waiting(self):
        """Commands that wait: served from here inside a node's window, or at
        once between prompts (no safe point of the worker comes before the
        next prompt)."""
        if not self.exec_lock.acquire(blocking=False):
            self._serve_in_node()
            return
        try:  # no prompt runs: the cache is ours for a moment
            self._idle_serving = True
            cmds = self._drain()
            if cmds:
                self.answer(cmds, self._ack_waiting)
            self.guard()
        finally:
            self._idle_serving = False
            self.exec_lock.release()

    def _ack_waiting(self, cmd, status, freed):
        self.ex.ack(cmd, status, freed)
        self.outstanding -= 1

    def _serve_in_node(self):
        """While a node's code runs, serve what waits from this thread
        (window.py); what only the worker may free waits for it."""
        with self.window.lock:
            if self.window.node is None:
                return
            cmds = self._drain(worker=False)
        if not cmds:
            return
        try:  # serve() holds the window's lock only while it removes entries
            self.answer(cmds, self._ack_waiting, in_node=True)
        except Exception:  # answered "busy"; keep listening
            self.say_once("err-in-node", logging.ERROR, "error serving a command "
                          "inside a node (further ones not logged)")
            log.debug("ramcache: error serving inside a node", exc_info=True)


BRIDGE = Bridge()
