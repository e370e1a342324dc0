#!/usr/bin/env python3
"""An agent killed with SIGKILL is noticed at once by every executor side
the project ships: the C library (tests/helpers/executor, sleeping in
ramcache_wait for up to 1 s at a time), the ramcache Python module (its
Executor's on_agent callback), the document's own Python example (which
polls agent_lock every 5 ms) and the ComfyUI package (served by that same
Executor loop, sleeping in page.wait for up to 100 ms at a time).

What is asserted is the mechanism, never a time: each says "died", which
only agent_lock can tell (the kernel marked it OWNER_DIED as the agent
exited); a heartbeat timeout would say "silent", 1.5 s later. The delay
from the SIGKILL to each side's notice is printed, and measured over 20
kills per side in bench/ (BENCHMARKS.md). Between kills the agent is
started again: each side sees it come back (a new lock).
"""
import os
import shutil
import tempfile

from rctest import AGENT, Skip, main, require_root, test
from rctest.deathwatch import SIDES, kill_and_watch, start

KILLS = int(os.environ.get("RAMCACHE_DEATH_KILLS", "3"))


def run(side):
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")
    d = tempfile.mkdtemp(prefix="ramcache-test-death-")
    ex = start(side, d)
    try:
        ready = ex.wait(lambda e: "ready" in e)
        assert ready, ex.proc.stderr.read() if ex.proc.poll() is not None else "no ready"
        rounds = kill_and_watch(ex, ready["ready"], KILLS)
    finally:
        ex.stop()
        shutil.rmtree(d, ignore_errors=True)
    states = [s for s, _ in rounds]
    ms = sorted(dt / 1e6 for _, dt in rounds)
    print(f"# {side}: {len(rounds)} SIGKILLs, noticed after "
          f"{', '.join(f'{m:.1f}' for m in ms)} ms")
    assert states == ["died"] * len(rounds), \
        f"{side}: {states}: not told by agent_lock (a heartbeat timeout says silent)"


@test
def the_c_library_notices_a_killed_agent_at_once():
    run(SIDES[0])


@test
def the_python_module_notices_a_killed_agent_at_once():
    run(SIDES[1])


@test
def the_documents_example_notices_a_killed_agent_at_once():
    run(SIDES[2])


@test
def the_comfyui_package_notices_a_killed_agent_at_once():
    run(SIDES[3])


main()
