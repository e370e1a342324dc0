#!/usr/bin/env python3
"""The package's part of ComfyUI's RAM policy in real ComfyUI 0.33.0 (the
newest tree in ../shared/comfyui, its default RAM-pressure cache, plain
`python main.py`), with tests/fakeagent.py as the agent on its memfd page:

- with the agent attached, the outputs of an earlier prompt stay cached
  through the next prompt (ComfyUI's inactive threshold, which drops them
  after the first node whatever the room, is set aside);
- a command for one of them, posted while a long core node runs
  (PreviewImage of eight 1024x1024 images: PNG encoding, no progress hook),
  is acked "evicted" before that node ends;
- once the agent is gone, ComfyUI's own policy drops them again, and the
  page lists nothing ComfyUI dropped.

Skips (one line) only when the trees are absent.
"""
import threading
import time

import realcomfy as rc  # noqa: E402
from fakeagent import page_of  # noqa: E402
from rctest import Skip, main, test  # noqa: E402

VERSION = "0.33.0"
ACK_EVICTED = 1
F_ACTIVE = 1


def images(colour, side=1024, batch=8, preview_full=False):
    """EmptyImage -> ImageInvert -> preview: of a thumbnail, or of the
    full images (a long core node: eight PNGs, no progress hook)."""
    p = {"1": {"class_type": "EmptyImage",
               "inputs": {"width": side, "height": side, "batch_size": batch,
                          "color": colour}},
         "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}}}
    if preview_full:
        p["3"] = {"class_type": "PreviewImage", "inputs": {"images": ["1", 0]}}
    else:
        p["3"] = {"class_type": "ImageScaleBy",
                  "inputs": {"image": ["2", 0], "upscale_method": "nearest-exact",
                             "scale_by": 1 / 32}}
        p["4"] = {"class_type": "PreviewImage", "inputs": {"images": ["3", 0]}}
    return p


def by_label(a):
    return {e["label"]: e for e in a.entries().values()}


def wait_for(cond, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.005)
    return None


@test
def keeps_earlier_outputs_and_serves_commands_inside_a_core_node():
    if not rc.available():
        raise Skip("no ../shared/comfyui: the real trees are absent")
    tree = rc.unpack(VERSION)
    with rc.started(tree, [], None, test_nodes=False) as ui:
        events = rc.Events(ui.port)
        a = page_of(ui)
        a.start_heartbeat()
        try:
            r = rc.run_prompt(ui, events, images(0x102030))
            assert r["ok"], r
            first = by_label(a)
            invert = first["2:ImageInvert"]
            assert invert["bytes"] >= 90 << 20, invert  # 8 x 1024 x 1024 x 3 floats

            # the next prompt: its preview of full images is a long core node
            start = len(events.msgs)
            log = {}

            def agent():
                t = wait_for(lambda: next((t for t, m in events.msgs[start:]
                                           if m["type"] == "executing" and
                                           (m.get("data") or {}).get("node") == "3"), None))
                log["node_start"] = t
                log["seq"] = a.post(invert["id"], reason=2)
                log["ack"] = wait_for(lambda: a.ack(log["seq"]), 120)
            th = threading.Thread(target=agent)
            th.start()
            r = rc.run_prompt(ui, events, images(0x405060, preview_full=True))
            th.join(130)
            assert r["ok"], r
            kept = a.entries()
            old = kept.get(first["1:EmptyImage"]["id"])
            assert old is not None, ("ComfyUI dropped an earlier output with the "
                                     "agent attached", sorted(by_label(a)))
            assert not old["flags"] & F_ACTIVE, old
            ack = log.get("ack")
            assert ack and ack["status"] == ACK_EVICTED, log
            done = next(t for t, m in events.msgs[start:]
                        if m["type"] == "executed" and (m.get("data") or {}).get("node") == "3")
            assert log["node_start"] < done, log
            assert ack["ack_ns"] < done, ("acked after the node ended", ack["ack_ns"], done)
            assert invert["id"] not in a.entries()

            # the agent goes: ComfyUI's policy is back, the page follows it
            a.die()
            time.sleep(0.5)
            r = rc.run_prompt(ui, events, images(0x708090))
            assert r["ok"], r
            left = a.entries()
            assert first["1:EmptyImage"]["id"] not in left, "ComfyUI's policy not back"
            assert not [e for e in left.values() if not e["flags"] & F_ACTIVE], \
                ("the page lists outputs ComfyUI dropped", sorted(by_label(a)))
        finally:
            a.stop_heartbeat()


if __name__ == "__main__":
    main()
