#!/usr/bin/env python3
"""The package in every real ComfyUI version users run (0.3.64, 0.3.75,
0.25.0, 0.33.0), from the upstream trees in ../shared/comfyui (unpacked
once to /var/tmp/ramcache-comfyui-VERSION; realcomfy.py says how they are
found and which absent third-party modules are stood in for).

Per version (real_versions.py): the stand-in has every part of it the
package uses; in one real ComfyUI with the README's command line, in a
memory cgroup with less room than its prompts cache, and the real agent:
the package loads with every hook it needs that this version has, the
--cache-ram form is detected and the frontend extension served; the agent
finds the memfd page; the status node keeps the cache keys after it; the
prompts all run with 0 OOM kills and the agent's commands acked
"evicted"; Ctrl-C exits 0 with no traceback from the package.
Skips (one line) only when the trees are absent or without root.
"""
import concurrent.futures
import os

import real_versions as rv  # noqa: E402
import realcomfy as rc  # noqa: E402
from rctest import AGENT, FRESH, Skip, main, test  # noqa: E402

RUNS = {}
# two versions at a time: ComfyUI's start is mostly one core's work
POOL = concurrent.futures.ThreadPoolExecutor(max_workers=2)


def tree_of(version):
    try:
        return rv.tree_of(version)
    except rv.Missing as e:
        raise Skip(str(e))


def run(version):
    """The version's run (once; every check reads the same). The first
    call starts every version's run, two at a time."""
    if os.geteuid() != 0:
        raise Skip("needs root (memory cgroup, agent)")
    if not RUNS:
        for v in rc.VERSIONS:
            try:
                RUNS[v] = POOL.submit(rv.run, tree_of(v))
            except Skip as e:
                RUNS[v] = e
    if isinstance(RUNS[version], Skip):
        raise RUNS[version]
    return RUNS[version].result()


def version_tests(v):
    tag = "comfyui_" + v.replace(".", "_")

    def api():
        ok, problems = rv.api(tree_of(v))
        assert ok, problems
    api.__name__ = f"{tag}_stand_in_has_its_api"
    test(api)
    for name, check in rv.CHECKS:
        def case(check=check):
            ok, detail = check(run(v))
            assert ok, detail
        case.__name__ = f"{tag}_{name}"
        test(case)


# In the fresh root (make test-fresh) the oldest and the newest: what it
# proves is that `make deps` installs what real ComfyUI needs; every
# version runs in the host's make test before it.
for _v in (rc.VERSIONS[0], rc.VERSIONS[-1]) if FRESH else rc.VERSIONS:
    version_tests(_v)

if __name__ == "__main__":
    if not os.access(AGENT, os.X_OK):
        print(f"# {AGENT} is not built")
    try:
        main()
    finally:
        POOL.shutdown(wait=True, cancel_futures=True)
