#!/usr/bin/env python3
"""A command for an output no pending node reads is served inside the
running node, in every real ComfyUI tree of ../shared/comfyui, each started
with the command line the package's README recommends for it (0.3.64:
`--cache-lru 64`), tests/fakeagent.py as the agent on its memfd page.

The prompt: EmptyImage -> ImageInvert -> RAMCacheTestGrow (a long custom
node with ComfyUI's ProgressBar, where the package has its per-step safe
point) -> PreviewImage. While the long node runs, EmptyImage's output is
read by no pending node: a command for it is acked `evicted` before the
node ends and the entry leaves ComfyUI's cache. The running node's input
(ImageInvert's output) is held: its command is not served before the node
ends.

Skips (one line) only when the trees are absent.
"""
import threading
import time

import realcomfy as rc  # noqa: E402
from fakeagent import page_of  # noqa: E402
from rctest import Skip, main, test  # noqa: E402

ACK_EVICTED = 1
SLOW_S, STEPS = 4.0, 40


def prompt(colour):
    return {"1": {"class_type": "EmptyImage",
                  "inputs": {"width": 512, "height": 512, "batch_size": 2,
                             "color": colour}},
            "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
            "3": {"class_type": "RAMCacheTestGrow",
                  "inputs": {"image": ["2", 0], "mib": 16, "seconds": SLOW_S,
                             "steps": STEPS, "seed": colour}},
            "4": {"class_type": "PreviewImage", "inputs": {"images": ["3", 0]}}}


def wait_for(cond, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.005)
    return None


def node_event(events, start, kind, node):
    return next((t for t, m in events.msgs[start:] if m["type"] == kind and
                 (m.get("data") or {}).get("node") == node), None)


def commands_inside_the_long_node(ui, events, a):
    """Post the two commands once node 3 runs: {label: ack or None}, the
    node's start and end (monotonic ns), the prompt's outcome."""
    start = len(events.msgs)
    log = {}

    def agent():
        log["node_start"] = wait_for(lambda: node_event(events, start, "executing", "3"), 120)
        by = {e["label"]: e for e in a.entries().values()}
        log["entries"] = sorted(by)
        seqs = {lab: a.post(by[lab]["id"], reason=2)
                for lab in ("2:ImageInvert", "1:EmptyImage") if lab in by}
        free = by.get("1:EmptyImage", {}).get("id")
        log["1:EmptyImage"] = wait_for(lambda: a.ack(seqs["1:EmptyImage"]), SLOW_S + 20)
        # the table the agent scores from no longer lists it (a republish
        # only at the node's end would have it command the entry again)
        log["gone"] = wait_for(lambda: free not in a.entries() and time.monotonic_ns(),
                               SLOW_S + 20)
        log["2:ImageInvert"] = wait_for(lambda: a.ack(seqs["2:ImageInvert"]), SLOW_S + 20)
    th = threading.Thread(target=agent)
    th.start()
    r = rc.run_prompt(ui, events, prompt(len(events.msgs) % 200 + 1))
    th.join(SLOW_S + 60)
    log["node_end"] = node_event(events, start, "executing", "4")
    # the long node's last steps (ComfyUI's progress messages, 0.1 s apart):
    # an ack before them was not made at the node's end
    log["late"] = next((t for t, m in events.msgs[start:] if m["type"] == "progress" and
                        (m.get("data") or {}).get("value", 0) >= STEPS - 2), None)
    return r, log


def check(version):
    tree = rc.unpack(version)
    args = rc.recommended(tree)
    with rc.started(tree, args, None, test_nodes=True) as ui:
        events = rc.Events(ui.port)
        a = page_of(ui)
        a.start_heartbeat()
        try:
            r, log = commands_inside_the_long_node(ui, events, a)
            left = {e["label"] for e in a.entries().values()}
        finally:
            a.stop_heartbeat()
    assert r["ok"], (version, r)
    assert log.get("node_start"), (version, "the long node never ran", log)
    free, held = log.get("1:EmptyImage"), log.get("2:ImageInvert")
    assert free and free["status"] == ACK_EVICTED, \
        (version, args, "no pending node reads EmptyImage's output, yet not evicted "
         "inside the long node", log)
    assert log["node_end"] and free["ack_ns"] < log["node_end"], \
        (version, "acked after the long node ended", free["ack_ns"], log["node_end"])
    assert "1:EmptyImage" not in left, (version, "acked but still listed", sorted(left))
    assert log["gone"] and log["gone"] < log["late"], \
        (version, "evicted but listed in the entry table until the node's end", log)
    assert log["late"], (version, "no progress messages of the long node")
    assert held is None or held["status"] != ACK_EVICTED or held["ack_ns"] > log["late"], \
        (version, "the running node's input was evicted under it", held, log["late"])


def versions():
    if not rc.available():
        raise Skip("no ../shared/comfyui: the real trees are absent")
    return rc.available()


@test
def an_output_no_pending_node_reads_is_evicted_inside_a_running_node():
    failed = []
    for v in versions():
        try:
            check(v)
        except AssertionError as e:
            failed.append(str(e)[:1500])
    assert not failed, "\n".join(failed)


if __name__ == "__main__":
    main()
