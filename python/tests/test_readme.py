#!/usr/bin/env python3
"""python/README.md's example runs as written (issue 35: render, send and
model were undefined): the first ```python block, alone in a fresh
interpreter with the module on its path, no agent; and the install steps
it gives name a venv."""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("RAMCACHE_ROOT") or os.path.dirname(os.path.dirname(HERE))
from rctest import main, test  # noqa: E402

README = os.path.join(ROOT, "python", "README.md")


def example():
    with open(README) as f:
        m = re.search(r"^```python\n(.*?)^```$", f.read(), re.S | re.M)
    assert m, "no ```python block in the README"
    return m.group(1)


@test
def the_readme_example_runs_as_written():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    env.pop("RAMCACHE_CONTROL", None)
    with tempfile.TemporaryDirectory(prefix="ramcache-readme-") as d:
        p = subprocess.run([sys.executable, "-c", example()], capture_output=True,
                           text=True, cwd=d, env=env, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    out = p.stdout.splitlines()
    assert out[0] == str(4 << 20) and out[1].startswith("CacheInfo(hits=1, misses=1"), out
    assert out[2].startswith("<PressureCache 'thumbnails': 1 entries"), out


@test
def the_readme_says_to_install_into_a_venv():
    with open(README) as f:
        text = f.read()
    assert "python3 -m venv" in text and "externally-managed-environment" in text


main()
