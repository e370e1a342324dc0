"""The process's side of one control page, served: a thread that beats,
takes the agent's commands, hands each to the owner of its entry, acks, and
watches the agent.

Owners (a PressureCache, or anything with an evict_entry method) hold
entries by id. For a command, the owner's evict_entry(eid) returns
(status, bytes_freed), or HOLD for an entry in use: the command is then
held and obeyed when the owner calls release(eid), as docs/control-page.md
("Busy entries") asks. When the agent dies, is stopped or detaches, every
on_agent callback runs at once, on the serving thread: a killed agent is
noticed through agent_lock within milliseconds, a hung one after the 1.5 s
heartbeat timeout.

One Executor per process (shared() gives it); after fork() the child's
copy serves nothing and says no agent is alive (the page is its
parent's)."""
import itertools
import logging
import os
import threading
import time

from . import page as pagemod

log = logging.getLogger("ramcache")

HOLD = object()  # evict_entry's answer for an entry in use
BEAT_NS = pagemod.HEARTBEAT_PERIOD_NS // 2
WAIT_MS = 100  # the longest sleep: a stop is noticed this fast


class Executor:
    def __init__(self, path=None, max_entries=0, ring=0, start=True):
        self.page = pagemod.Page(path, max_entries, ring)
        self.pid = os.getpid()
        self._ids = itertools.count(1)
        self._owners = {}  # entry id -> owner
        self._held = {}  # entry id -> [Command]
        self._lock = threading.Lock()  # _owners, _held
        self.on_agent = []  # callbacks(state: str, t_ns: int)
        self.state = None  # the agent's state as last seen: "alive", "none" ...
        self.changed_ns = 0  # when the serving thread saw it change
        self.counts = {"commands": 0, "evicted": 0, "not_found": 0, "held": 0,
                       "busy": 0, "pinned": 0}
        self._stop = threading.Event()
        self._thread = None
        if start:
            self.start()

    # ------------------------------------------------------------ ids, owners

    def new_id(self, owner):
        """A fresh entry id owned by @owner (ids are never reused)."""
        eid = next(self._ids)
        with self._lock:
            self._owners[eid] = owner
        return eid

    def forget(self, eid):
        """@eid is gone from its owner: commands for it are not found."""
        with self._lock:
            self._owners.pop(eid, None)
            held = self._held.pop(eid, [])
        for cmd in held:
            self._ack(cmd, pagemod.ACK_NOT_FOUND, 0)
        if self.mine():
            self.page.remove(eid)

    def release(self, eid):
        """@eid is no longer in use: obey the commands held for it now."""
        with self._lock:
            held = self._held.pop(eid, [])
        for cmd in held:
            self._serve(cmd)

    def mine(self):
        """This process made the page (not a fork() child of it)."""
        return os.getpid() == self.pid and not self.page.closed

    def agent_alive(self):
        return self.mine() and self.page.agent_alive()

    # ------------------------------------------------------------ serving

    def start(self):
        self._thread = threading.Thread(target=self._run, name="ramcache", daemon=True)
        self._thread.start()

    def close(self):
        """Stop serving and end the page (the agent sees it closed)."""
        self._stop.set()
        th, self._thread = self._thread, None
        if th is not None and th is not threading.current_thread():
            th.join(timeout=2)
        if self.mine():
            self.page.close()

    def _ack(self, cmd, status, freed):
        if self.mine():
            self.page.ack(cmd, status, freed)

    def _serve(self, cmd):
        with self._lock:
            owner = self._owners.get(cmd.entry_id)
        res = (pagemod.ACK_NOT_FOUND, 0) if owner is None else owner.evict_entry(cmd.entry_id)
        if res is HOLD:
            with self._lock:
                self._held.setdefault(cmd.entry_id, []).append(cmd)
            self.counts["held"] += 1
            return
        status, freed = res
        name = {pagemod.ACK_EVICTED: "evicted", pagemod.ACK_NOT_FOUND: "not_found",
                pagemod.ACK_BUSY: "busy", pagemod.ACK_PINNED: "pinned"}[status]
        self.counts[name] += 1
        self._ack(cmd, status, freed)

    def _notice(self, state):
        """The agent's state changed: tell every callback, at once."""
        self.state = state
        self.changed_ns = pagemod.now_ns()
        for fn in list(self.on_agent):
            try:
                fn(state, self.changed_ns)
            except Exception:  # one callback's fault is not the others'
                log.exception("ramcache: on_agent callback failed")

    def _run(self):
        beat = 0
        while not self._stop.is_set() and self.mine():
            try:
                now = pagemod.now_ns()
                if now - beat >= BEAT_NS:
                    self.page.heartbeat()
                    beat = now
                st = self.page.agent_state()
                if st != self.state:
                    self._notice(st)
                cmd = self.page.wait(min(WAIT_MS, max(1, (beat + BEAT_NS - now) // 1_000_000)))
                if cmd is not None:
                    self.counts["commands"] += 1
                    self._serve(cmd)
            except Exception:
                if self._stop.is_set() or not self.mine():
                    return
                log.exception("ramcache: serving the control page failed")
                time.sleep(0.5)


_shared = None
_shared_lock = threading.Lock()


def shared():
    """The process's Executor, made (with a memfd page, or the file in
    $RAMCACHE_CONTROL) on first use. OSError when no page can be made."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.mine():
            _shared = Executor()
        return _shared


def _forked():
    """In a fork() child: the parent's Executor is not ours to serve."""
    global _shared_lock
    _shared_lock = threading.Lock()


os.register_at_fork(after_in_child=_forked)
