"""A scratch Debian 12 root for the suites that boot or package a system of
their own: tests/roots/build.sh's cached root under an overlay (nothing is
written into the cache), with this tree's `make install` and whatever a
suite adds, then an ext4 image of it (for tests/vm/run.sh to boot with its
own init) or a tar stream (for `podman import`).

    with Sysroot("systemd", "unit") as r:
        r.install()                        # make install DESTDIR=<root>
        r.write("/etc/x", "...")
        img = r.image()                    # removed with the rest on exit

A root left behind by a killed suite (its overlay still mounted) is
removed by the next one.
"""
import contextlib
import glob
import os
import shutil
import signal
import subprocess
import time

from rctest import OUTPUT, ROOT

ROOTS = os.path.join(ROOT, "tests", "roots", "build.sh")
SCRATCH = "/var/tmp"
PREFIX = "ramcache-sysroot-"


def cached_root(name):
    """The path of tests/roots/build.sh's root @name (built on first use)."""
    r = subprocess.run([ROOTS, name], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"tests/roots/build.sh {name}: {r.stderr.strip()}")
    return r.stdout.strip()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def unmount_under(path):
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            target = line.split()[4]
            if target == path or target.startswith(path + "/"):
                mounts.append(target)
    for target in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", target], stderr=subprocess.DEVNULL)


def kill_rooted_under(path):
    """SIGKILL every process whose root directory is @path or below."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        with contextlib.suppress(OSError):
            root = os.readlink(f"/proc/{d}/root")
            if root == path or root.startswith(path + "/"):
                os.kill(int(d), signal.SIGKILL)


def remove_stale():
    """Roots of suites that no longer run: unmount and remove them."""
    for d in glob.glob(os.path.join(SCRATCH, PREFIX + "*")):
        try:
            owner = int(d.rsplit("-", 2)[-2])
        except ValueError:
            continue
        if owner == os.getpid() or _alive(owner):
            continue
        kill_rooted_under(d)
        unmount_under(d)
        shutil.rmtree(d, ignore_errors=True)


class Sysroot:
    def __init__(self, base, tag):
        remove_stale()
        self.base = cached_root(base)
        self.dir = os.path.join(SCRATCH, f"{PREFIX}{tag}-{os.getpid()}-"
                                f"{time.monotonic_ns()}")
        self.root = os.path.join(self.dir, "root")
        for sub in ("upper", "work", "root"):
            os.makedirs(os.path.join(self.dir, sub))
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={self.base},upperdir={self.dir}/upper,"
                        f"workdir={self.dir}/work", self.root], check=True)

    def install(self):
        """`make install` of this tree into the root, as a user's system
        gets it (DESTDIR)."""
        r = subprocess.run(["make", "--no-print-directory", "-C", ROOT,
                            f"OUTPUT={OUTPUT}", f"DESTDIR={self.root}",
                            "install"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
        assert r.returncode == 0, f"make install: {r.stdout[-2000:]}"

    def chroot(self, *argv):
        """A command run in the root (not booted)."""
        r = subprocess.run(["chroot", self.root, *argv], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        assert r.returncode == 0, f"{' '.join(argv)}: {r.stdout[-1000:]}"
        return r.stdout

    def write(self, path, text, mode=0o644):
        full = self.root + path
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
        os.chmod(full, mode)

    def read(self, path):
        with open(self.root + path) as f:
            return f.read()

    def copy_in(self, src, path, mode=0o755):
        full = self.root + path
        os.makedirs(os.path.dirname(full), exist_ok=True)
        shutil.copy(src, full)
        os.chmod(full, mode)

    def image(self, size="2G"):
        """An ext4 image of the root as it is now (sparse, in the scratch
        directory)."""
        img = os.path.join(self.dir, "root.img")
        subprocess.run(["truncate", "-s", size, img], check=True)
        r = subprocess.run(["mkfs.ext4", "-q", "-F", "-d", self.root, img],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=300)
        assert r.returncode == 0, f"mkfs.ext4 -d: {r.stdout[-1000:]}"
        return img

    def close(self):
        kill_rooted_under(self.dir)
        unmount_under(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
