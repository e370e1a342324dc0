#!/usr/bin/python3
"""rssflip: a process whose RSS goes up and down at a set rate, for the
scaling section (RSS events per second).

  rssflip.py STEP_BYTES

Prints {"type":"ready","pid":N}; then reads rates from stdin, one a line
(cycles per second, 0 = still): each cycle maps STEP_BYTES of anonymous
memory (huge pages off), writes one byte per page and unmaps it, so the RSS
rises and falls by STEP_BYTES once per cycle. Exits at EOF. Stdlib only.
"""
import json
import mmap
import os
import select
import sys
import time

PAGE = mmap.PAGESIZE


def cycle(step):
    """One rise and fall of the RSS by @step bytes."""
    m = mmap.mmap(-1, step, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        m.madvise(mmap.MADV_NOHUGEPAGE)
    m[::PAGE] = b"x" * (step // PAGE)
    m.close()


def next_rate(timeout):
    """A new rate from stdin within @timeout s, None if none came, -1 at
    EOF."""
    r, _, _ = select.select([sys.stdin], [], [], max(0.0, timeout))
    if not r:
        return None
    line = sys.stdin.readline()
    return float(line) if line.strip() else -1


def main():
    step = int(sys.argv[1])
    print(json.dumps({"type": "ready", "pid": os.getpid()}), flush=True)
    rate, due = 0.0, time.monotonic()
    while True:
        wait = due - time.monotonic() if rate > 0 else 3600
        got = next_rate(wait)
        if got == -1:
            return 0
        if got is not None:
            rate, due = got, time.monotonic()
            continue
        cycle(step)
        due += 1.0 / rate
        # behind by more than a second: start again from now
        due = max(due, time.monotonic() - 1.0)


if __name__ == "__main__":
    sys.exit(main())
