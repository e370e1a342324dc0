"""This tree's Debian packages for the suites that install them
(test_deb.py, test_systemd_boot.py, the container images of engine.py):
`make deb`, which builds them again only when a file of the tree changed,
and where they are.

    debs = debpkg.build()                       # {package: path}, VERSION's
    old = debpkg.build(debpkg.previous())       # the same tree, a lower version
"""
import fcntl
import glob
import os
import subprocess

from rctest import OUTPUT, ROOT

PACKAGES = ("ramcache-bpf", "libramcache1", "libramcache-dev",
            "python3-ramcache", "ramcache-bpf-comfyui")


def version():
    with open(os.path.join(ROOT, "VERSION")) as f:
        return f.read().strip()


def previous():
    """A version below VERSION's, for the release before it: dpkg puts
    1.2.3~prev1 before 1.2.3."""
    return version() + "~prev1"


def out_dir(deb_version=None):
    if deb_version in (None, version()):
        return os.path.join(OUTPUT, "deb")
    return os.path.join(OUTPUT, "deb-" + deb_version.replace("~", "-"))


def build(deb_version=None):
    """`make deb` (DEB_VERSION=@deb_version, into a folder of its own when
    it is not VERSION's); {package name: path of its .deb}."""
    out = out_dir(deb_version)
    argv = ["make", "--no-print-directory", "-C", ROOT, f"OUTPUT={OUTPUT}",
            f"DEB_OUT={out}", "deb"]
    if deb_version:
        argv.append(f"DEB_VERSION={deb_version}")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    os.makedirs(OUTPUT, exist_ok=True)
    with open(os.path.join(OUTPUT, ".deb.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # suites running side by side
        r = subprocess.run(argv, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=1200,
                           env=env)
    assert r.returncode == 0, f"make deb: {r.stdout[-3000:]}"
    debs = {os.path.basename(p).split("_")[0]: p
            for p in glob.glob(os.path.join(out, "*.deb"))}
    assert sorted(debs) == sorted(PACKAGES), debs
    return debs


def changes(deb_version=None):
    """The .changes file of the last build (what lintian reads)."""
    found = glob.glob(os.path.join(out_dir(deb_version), "*.changes"))
    assert len(found) == 1, found
    return found[0]


def field(deb, name):
    r = subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True,
                       text=True, check=True)
    return r.stdout.strip()


def contents(deb):
    """The paths a .deb installs (./-less), with symlinks' targets."""
    r = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True,
                       text=True, check=True)
    return [" ".join(ln.split()[5:])[1:] for ln in r.stdout.splitlines()]
