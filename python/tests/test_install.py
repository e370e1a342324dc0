#!/usr/bin/env python3
"""`pip install ./python` as the README says, offline (no index, nothing
to download: the build backend is in the folder), into a fresh venv of
Debian's python3 (pip --python: Debian's pip, python3-pip, which make deps
installs); the installed module works outside the source tree and
uninstalls cleanly. The folder is copied first, so the build writes
nothing into the source tree."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("RAMCACHE_ROOT") or os.path.dirname(os.path.dirname(HERE))
from rctest import main, test  # noqa: E402

PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
USE = """
import os, ramcache
assert ramcache.__file__.startswith(os.environ["VENV"]), ramcache.__file__
c = ramcache.PressureCache("t", max_bytes=3 << 20)
for i in range(6):
    c.set(i, bytearray(1 << 20))
assert len(c) == 3 and c.stats["evicted_lru"] == 3, c.stats
print(ramcache.__version__)
"""


def run(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kw)
    assert p.returncode == 0, f"{argv}: {p.stdout[-1500:]} {p.stderr[-1500:]}"
    return p.stdout


def classifiers():
    """pyproject.toml's classifiers (at least one: the check must have one
    to look for)."""
    import re
    text = open(os.path.join(ROOT, "python", "pyproject.toml")).read()
    m = re.search(r"^classifiers = \[(.*?)\]", text, re.M | re.S)
    out = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    assert out, "pyproject.toml lists no classifiers"
    return out


@test
def pip_installs_the_folder_offline_in_a_venv():
    d = tempfile.mkdtemp(prefix="ramcache-test-pip-")
    try:
        venv = os.path.join(d, "venv")
        run([PYTHON, "-m", "venv", "--without-pip", venv])
        src = os.path.join(d, "python")
        shutil.copytree(os.path.join(ROOT, "python"), src,
                        ignore=shutil.ignore_patterns("tests", "__pycache__"))
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PYTHONPATH="", VENV=venv)
        pip = [PYTHON, "-m", "pip", "--python", os.path.join(venv, "bin", "python")]
        out = run(pip + ["install", src], env=env, cwd=d)
        assert "Successfully installed ramcache-" in out, out
        version = run([os.path.join(venv, "bin", "python"), "-c", USE], env=env, cwd=d)
        want = open(os.path.join(ROOT, "VERSION")).read().strip()
        assert version.strip() == want, (version, want)
        site = run([os.path.join(venv, "bin", "python"), "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=env)
        site = site.strip()
        assert os.path.isfile(os.path.join(site, "ramcache", "py.typed")), \
            "the wheel has no py.typed: type checkers ignore the hints"
        meta = open(os.path.join(site, f"ramcache-{want}.dist-info", "METADATA")).read()
        for c in classifiers():
            assert f"Classifier: {c}\n" in meta, (c, meta[:600])
        run(pip + ["uninstall", "-y", "ramcache"], env=env, cwd=d)
        left = [f for f in os.listdir(site) if f.startswith("ramcache")]
        assert not left, left
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def the_version_is_the_projects():
    want = open(os.path.join(ROOT, "VERSION")).read().strip()
    text = open(os.path.join(ROOT, "python", "pyproject.toml")).read()
    assert f'version = "{want}"' in text
    init = open(os.path.join(ROOT, "python", "ramcache", "__init__.py")).read()
    assert f'__version__ = "{want}"' in init


main()
