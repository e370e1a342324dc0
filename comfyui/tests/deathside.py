#!/usr/bin/env python3
"""The ComfyUI package's side of rctest/deathwatch.py: the stand-in ComfyUI
with the package loaded and a worker running, printing a JSON line each
time the listener's own page.wait returns with the agent's state changed
({"state": ..., "t_ns": ...}), after {"ready": pid}. Ends at a line on
stdin."""
import json
import os
import sys
import time

os.environ.pop("RAMCACHE_CONTROL", None)
import env  # noqa: E402  (the stand-in ComfyUI, this folder's)


def main():
    pkg = env.load_package()
    bridge = pkg.bridge.BRIDGE
    w = env.worker("RAM_PRESSURE", ram=1.0, ram_inactive=0)
    page = bridge.page
    wait, state = page.wait, [None]

    def watched(ms):  # the listener's own wait, reported as it returns
        cmd = wait(ms)
        st = page.agent_state()
        if st != state[0]:
            state[0] = st
            print(json.dumps({"state": st, "t_ns": time.monotonic_ns()}), flush=True)
        return cmd

    page.wait = watched
    print(json.dumps({"ready": os.getpid()}), flush=True)
    sys.stdin.readline()
    w.stop()
    bridge.close()


if __name__ == "__main__":
    main()
