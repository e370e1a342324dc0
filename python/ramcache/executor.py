"""The process's side of one control page, served: a thread that beats,
takes the agent's commands, hands each to the owner of its entry, acks, and
watches the agent.

Owners (a PressureCache, or anything with an evict_entry method) hold
entries by id. For a command, the owner's evict_entry(eid) returns
(status, bytes_freed), or HOLD for an entry in use: the command is then
held and obeyed when the owner calls release(eid), as docs/control-page.md
("Busy entries") asks. An owner with a take_command(cmd) method instead
takes its commands as they come and answers each later, from any thread,
with ack(cmd, status, freed): one that may free only on a thread of its
own (the ComfyUI package hands them to its prompt worker). When the agent
dies, is stopped or detaches, every on_agent callback runs at once, on the
serving thread: a killed agent is noticed through agent_lock within
milliseconds, a hung one (stopped, stuck) as "stalled" once its heartbeat
is STALL_NS old, well before the 1.5 s after which the page calls it
"silent". on_wake callbacks run at every turn of the serving thread; one
that returns a number of ms gets the next turn that soon at the latest.

One Executor per process (shared() gives it); after fork() the child's
copy serves nothing and says no agent is alive (the page is its
parent's)."""
from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from . import page as pagemod

log = logging.getLogger("ramcache")

HOLD = object()  # evict_entry's answer for an entry in use
BEAT_NS = pagemod.HEARTBEAT_PERIOD_NS // 2
WAIT_MS = 100  # the longest sleep: a stop is noticed this fast
# A healthy agent beats every 250 ms (HEARTBEAT_PERIOD_NS): a beat 600 ms
# old is two missed, a stopped or stuck agent, 900 ms before the page's
# 1.5 s timeout would say so. The serving thread wakes for that moment.
STALL_NS = 600_000_000
STATES = ("alive", "stalled", "silent", "died", "none")


class Executor:
    """The control page of this process and the thread that serves it.

        ex = Executor()                     # or shared(): the process's one
        eid = ex.new_id(owner)              # owner.evict_entry(eid) answers commands
        ex.page.publish(eid, nbytes, ...)   # what the agent may ask for
        ex.on_agent.append(lambda state, t_ns: ...)

    state is the agent's as the serving thread last saw it: "alive",
    "stalled" (a heartbeat STALL_NS old: stopped or stuck), "silent" (1.5 s
    without one), "died" (killed: the kernel marked agent_lock) or "none"
    (never attached, or detached cleanly); None before the first look.
    counts: commands taken and how each was answered, held commands,
    stalls seen."""

    def __init__(self, path: Optional[str] = None, max_entries: int = 0, ring: int = 0,
                 start: bool = True):
        self.page = pagemod.Page(path, max_entries, ring)
        self.pid = os.getpid()
        self._ids = itertools.count(1)
        self._owners: Dict[int, Any] = {}  # entry id -> owner
        self._held: Dict[int, list] = {}  # entry id -> [Command]
        self._releases: Dict[int, int] = {}  # entry id -> release() calls
        self._lock = threading.Lock()  # _owners, _held, _releases
        self.on_agent: List[Callable[[str, int], Any]] = []  # (state, t_ns)
        # each turn of the serving thread; a number returned: ms to the next
        self.on_wake: List[Callable[[], Optional[int]]] = []
        self.state: Optional[str] = None
        self.changed_ns = 0  # when the serving thread saw it change
        self.counts = {"commands": 0, "evicted": 0, "not_found": 0, "held": 0,
                       "busy": 0, "pinned": 0, "stalls": 0, "taken": 0}
        self._wake_ms: Optional[int] = None  # the soonest turn on_wake asked for
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if start:
            self.start()

    # ------------------------------------------------------------ ids, owners

    def new_id(self, owner: Any) -> int:
        """A fresh entry id owned by @owner (ids are never reused)."""
        eid = next(self._ids)
        with self._lock:
            self._owners[eid] = owner
        return eid

    def forget(self, eid: int) -> None:
        """@eid is gone from its owner: commands for it are not found."""
        with self._lock:
            self._owners.pop(eid, None)
            self._releases.pop(eid, None)
            held = self._held.pop(eid, [])
        for cmd in held:
            self.ack(cmd, pagemod.ACK_NOT_FOUND, 0)
        if self.mine():
            self.page.remove(eid)

    def release(self, eid: int) -> None:
        """@eid is no longer in use: obey the commands held for it now. A
        command whose owner answered HOLD just before this call, and is
        not registered as held yet, sees the count move and is asked
        again (_ask), so no release is lost between the two."""
        with self._lock:
            if eid in self._owners:  # (a forgotten id has nothing to count)
                self._releases[eid] = self._releases.get(eid, 0) + 1
            held = self._held.pop(eid, [])
        for cmd in held:
            self._serve(cmd)

    def in_flight(self) -> bool:
        """A command of the agent's is held for an entry in use: its bytes
        come when the entry is released."""
        return bool(self._held)

    def mine(self) -> bool:
        """This process made the page (not a fork() child of it)."""
        return _pid == self.pid and not self.page.closed

    def agent_state(self) -> str:
        """The agent's state on the page now (one of STATES)."""
        if not self.mine():
            return "none"
        st = self.page.agent_state()
        if st == "alive" and self.page.agent_beat_age() >= STALL_NS:
            return "stalled"
        return st

    def agent_alive(self) -> bool:
        """An agent is attached and beating (not stalled): three reads of
        the page."""
        return self.mine() and self.page.agent_alive() and \
            self.page.agent_beat_age() < STALL_NS

    # ------------------------------------------------------------ serving

    def start(self) -> None:
        """Start the serving thread (a daemon)."""
        self._thread = threading.Thread(target=self._run, name="ramcache", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (the page stays open; the agent finds it silent)."""
        self._stop.set()
        th, self._thread = self._thread, None
        if th is not None and th.ident is not None and th is not threading.current_thread():
            th.join(timeout=2)

    def close(self) -> None:
        """Stop serving and end the page (the agent sees it closed)."""
        self.stop()
        if self.mine():
            self.page.close()

    def ack(self, cmd, status: int, freed: int) -> None:
        """Answer @cmd (an owner with take_command answers its own)."""
        if self.mine():
            self.page.ack(cmd, status, freed)

    def _ask(self, cmd):
        """The owner's answer for @cmd, HOLD only once the command is
        registered as held: a release() that ran between the owner's HOLD
        and the registration moved the entry's count, so ask again."""
        eid = cmd.entry_id
        while True:
            with self._lock:
                owner = self._owners.get(eid)
                releases = self._releases.get(eid, 0)
            if owner is None:
                return pagemod.ACK_NOT_FOUND, 0
            res = owner.evict_entry(eid)
            if res is not HOLD:
                return res
            with self._lock:
                if self._releases.get(eid, 0) == releases and eid in self._owners:
                    self._held.setdefault(eid, []).append(cmd)
                    return HOLD

    def _dispatch(self, cmd):
        """A command just read: to the owner that takes its own, else
        served now."""
        self.counts["commands"] += 1
        with self._lock:
            owner = self._owners.get(cmd.entry_id)
        take = getattr(owner, "take_command", None)
        if take is None:
            self._serve(cmd)
            return
        self.counts["taken"] += 1
        try:
            take(cmd)
        except Exception:  # not taken: the agent hears at once
            log.exception("ramcache: take_command failed")
            self.ack(cmd, pagemod.ACK_BUSY, 0)

    def _serve(self, cmd):
        res = self._ask(cmd)
        if res is HOLD:
            self.counts["held"] += 1
            return
        status, freed = res
        name = {pagemod.ACK_EVICTED: "evicted", pagemod.ACK_NOT_FOUND: "not_found",
                pagemod.ACK_BUSY: "busy", pagemod.ACK_PINNED: "pinned"}[status]
        self.counts[name] += 1
        self.ack(cmd, status, freed)

    def _notice(self, state):
        """The agent's state changed: tell every callback, at once."""
        if state == "stalled":
            self.counts["stalls"] += 1
        self.state = state
        self.changed_ns = pagemod.now_ns()
        for fn in list(self.on_agent):
            try:
                fn(state, self.changed_ns)
            except Exception:  # one callback's fault is not the others'
                log.exception("ramcache: on_agent callback failed")

    def _wake(self):
        soonest = None
        for fn in list(self.on_wake):
            try:
                ms = fn()
            except Exception:
                log.exception("ramcache: on_wake callback failed")
                continue
            if isinstance(ms, (int, float)) and not isinstance(ms, bool) and \
                    (soonest is None or ms < soonest):  # other answers: no wish
                soonest = ms
        self._wake_ms = soonest

    def _sleep_ms(self, now, beat):
        """Until the next beat of ours, the moment the agent's heartbeat
        turns STALL_NS old, the turn an on_wake callback asked for, or
        WAIT_MS, the soonest."""
        until = min(now + WAIT_MS * 1_000_000, beat + BEAT_NS)
        if self.state == "alive":
            until = min(until, now - self.page.agent_beat_age() + STALL_NS)
        if self._wake_ms is not None:
            until = min(until, now + int(self._wake_ms) * 1_000_000)
        return max(1, -(-(until - now) // 1_000_000))

    def _run(self):
        beat = 0
        while not self._stop.is_set() and self.mine():
            try:
                now = pagemod.now_ns()
                if now - beat >= BEAT_NS:
                    self.page.heartbeat()
                    beat = now
                st = self.agent_state()
                if st != self.state:
                    self._notice(st)
                self._wake()
                cmd = self.page.wait(self._sleep_ms(pagemod.now_ns(), beat))
                if cmd is not None:
                    self._dispatch(cmd)
            except Exception:
                if self._stop.is_set() or not self.mine():
                    return
                log.exception("ramcache: serving the control page failed")
                time.sleep(0.5)


_shared = None
_shared_lock = threading.Lock()
_pid = os.getpid()  # this process's, kept by _forked: mine() is called per call


def shared() -> Executor:
    """The process's Executor, made (with a memfd page, or the file in
    $RAMCACHE_CONTROL) on first use. OSError when no page can be made."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.mine():
            _shared = Executor()
        return _shared


def _forked():
    """In a fork() child: the parent's Executor is not ours to serve."""
    global _shared_lock, _pid
    _shared_lock = threading.Lock()
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)
