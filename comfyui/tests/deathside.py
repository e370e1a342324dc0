#!/usr/bin/env python3
"""The ComfyUI package's side of rctest/deathwatch.py: the stand-in ComfyUI
with the package loaded and a worker running, printing a JSON line each
time the package's serving loop (the ramcache Executor it runs on) sees
the agent's state change ({"state": ..., "t_ns": ...}: its on_agent
callbacks, the bridge's among them), after {"ready": pid}. Ends at a line
on stdin."""
import json
import os
import sys

os.environ.pop("RAMCACHE_CONTROL", None)
import env  # noqa: E402  (the stand-in ComfyUI, this folder's)


def main():
    pkg = env.load_package()
    bridge = pkg.bridge.BRIDGE
    w = env.worker("RAM_PRESSURE", ram=1.0, ram_inactive=0)
    bridge.ex.on_agent.append(
        lambda st, t: print(json.dumps({"state": st, "t_ns": t}), flush=True))
    print(json.dumps({"ready": os.getpid()}), flush=True)
    sys.stdin.readline()
    w.stop()
    bridge.close()


if __name__ == "__main__":
    main()
