"""The package's own last line, for when the agent does not serve: ComfyUI
kept from its memory cgroup's limit while the agent is stopped, stuck or
gone (its heartbeat the ramcache Executor's STALL_NS, 600 ms, old: a healthy
agent beats every 250 ms; the 1.5 s heartbeat timeout is too late for a
cache that grows by hundreds of MiB a second).

The rule: with L the limit of the tightest memory cgroup above ComfyUI and
used L less its headroom (ramcache.memory_use(), the agent's rule), when used
passes L less TRIP of L, the inactive entries no node of the running
prompt reads go, least recently used first (models through ComfyUI's own
unload), until used is L less FREE of L. Checked at the worker's safe
points and by the serving thread between prompts, at most every EVERY_S. A live
agent is never second-guessed: it decides. Pure: the figures and the
entries are passed in."""

TRIP = 0.05
FREE = 0.10
EVERY_S = 0.05


def shortfall(use):
    """Bytes to free for @use ((limit, used), or None): 0 below the trip."""
    if use is None:
        return 0
    lim, used = use
    if used <= lim - lim * TRIP:
        return 0
    return max(0, int(used - (lim - lim * FREE)))


def pick(rows, need):
    """Entry ids to free @need bytes, least recently used first, from
    @rows: [(eid, bytes, last use ns, active)]; the active are never
    picked."""
    out, got = [], 0
    for eid, nbytes, _, active in sorted(rows, key=lambda r: r[2]):
        if got >= need:
            break
        if active or nbytes <= 0:
            continue
        out.append(eid)
        got += nbytes
    return out


class Cmd:
    """What _take needs of a command, for the guard's own evictions."""

    def __init__(self, entry_id):
        self.entry_id, self.reason, self.issue_ns = entry_id, 0, 0
