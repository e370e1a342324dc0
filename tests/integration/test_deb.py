#!/usr/bin/env python3
"""The Debian packages (`make deb`, debian/): the five packages of
VERSION, what they depend on (from what the binaries link), lintian with
no error or warning (and each override explained beside it), a program
built with pkg-config against libramcache-dev, and `make install` then
`make uninstall` leaving only the settings.

Then, as a Debian user installs them, in a debootstrap'd bookworm root
(tests/roots/build.sh's minbase, under an overlay, its apt lists and
downloads kept in $RAMCACHE_CACHE between runs): `apt install` of the
previous version's packages (the same tree, built with a lower version)
pulls only Debian packages; the settings in /etc/default/ramcache-bpf,
edited, survive the upgrade to this version's; then `ramcache-bpf
--version`, `man ramcache-bpf` (and the other pages), the unit (present,
not enabled), the completion, the Python module and the ComfyUI package
work; `apt purge` leaves no file behind (the root listed before and
after). The unit under systemd as PID 1 is test_systemd_boot.py's, which
boots it installed from this package.

Under make test-fresh (RAMCACHE_FRESH=1) only the packages and lintian:
the fresh root has no debootstrap cache of its own, and the host ran the
rest."""
import contextlib
import fcntl
import glob
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time

import debpkg  # noqa: E402
from rctest import FRESH, OUTPUT, ROOT, Skip, main, require_root, test  # noqa: E402

CACHE = os.environ.get("RAMCACHE_CACHE", "/var/cache/ramcache-bpf")
DEFAULTS = "/etc/default/ramcache-bpf"
EDIT = ("RAMCACHE_USER=comfy", "RAMCACHE_USER=edited-before-the-upgrade")
ROOT_ENV = ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
            "LC_ALL=C.UTF-8", "DEBIAN_FRONTEND=noninteractive"]
# Not listed: mount points, and what dpkg and apt keep about themselves
# (dpkg's database is asked instead), their logs, and the caches of
# debconf and man-db.
UNLISTED = ("proc", "sys", "dev", "run", "tmp", "var/lib/dpkg", "var/lib/apt",
            "var/cache/apt", "var/log", "var/cache/debconf", "var/cache/man")


# ------------------------------------------------------------------ packages

@test
def make_deb_builds_the_five_packages_of_version():
    debs = debpkg.build()
    for name, deb in debs.items():
        assert debpkg.field(deb, "Version") == debpkg.version(), deb
    agent = debs["ramcache-bpf"]
    depends = debpkg.field(agent, "Depends")
    print(f"# ramcache-bpf Depends: {depends}")
    assert re.search(r"\blibbpf1 \(", depends), depends  # shlibs, versioned
    assert "python3" not in depends, depends  # only the viewers need it
    assert "python3" in debpkg.field(agent, "Recommends")
    files = debpkg.contents(agent)
    for path in ("/usr/bin/ramcache-bpf", "/lib/systemd/system/"
                 "ramcache-bpf.service", DEFAULTS,
                 "/usr/share/man/man8/ramcache-bpf.8.gz",
                 "/usr/share/bash-completion/completions/ramcache-bpf"):
        assert path in files, (path, files)
    dev = debpkg.contents(debs["libramcache-dev"])
    assert any(p.endswith("/pkgconfig/libramcache.pc") for p in dev), dev
    assert "/usr/share/man/man3/libramcache.3.gz" in dev, dev


def remove_lintian_leftovers(uid, since):
    """lintian leaves its databases (mldbm-*) in /tmp, whatever TMPDIR
    says: remove those of @uid made since @since (time.time())."""
    for path in glob.glob("/tmp/mldbm-*"):
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_uid == uid and st.st_mtime >= since - 1:
                os.unlink(path)


def lintian_tags(changes):
    """lintian's E: and W: lines about @changes (run as nobody when
    root, on a copy: it unpacks what it checks)."""
    work = tempfile.mkdtemp(prefix="ramcache-test-lintian-")
    nobody = ["setpriv", "--reuid", "65534", "--regid", "65534",
              "--clear-groups"] if os.geteuid() == 0 else []
    start = time.time()
    try:
        for f in os.listdir(os.path.dirname(changes)):
            shutil.copy(os.path.join(os.path.dirname(changes), f), work)
        os.chmod(work, 0o755)
        r = subprocess.run([*nobody, "env", f"HOME={work}",
                            "lintian", "--info", "--display-experimental",
                            os.path.join(work, os.path.basename(changes))],
                           capture_output=True, text=True, timeout=600,
                           cwd=work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        remove_lintian_leftovers(65534 if nobody else os.geteuid(), start)
    assert r.returncode in (0, 1) and "internal error" not in r.stderr, \
        (r.returncode, r.stderr[-2000:])
    lines = r.stdout.splitlines()
    for line in lines:
        print(f"# lintian: {line}")
    return [ln for ln in lines if re.match(r"^[EW]: ", ln)]


@test
def lintian_finds_no_error_or_warning():
    if not shutil.which("lintian"):
        raise Skip("lintian missing: run 'sudo make deps'")
    debpkg.build()
    bad = lintian_tags(debpkg.changes())
    assert not bad, "\n".join(bad)


@test
def every_lintian_override_says_why():
    """A comment right above each overridden tag (lintian shows it)."""
    found = 0
    for name in sorted(os.listdir(os.path.join(ROOT, "debian"))):
        if not name.endswith("lintian-overrides"):
            continue
        with open(os.path.join(ROOT, "debian", name)) as f:
            lines = f.read().splitlines()
        for i, line in enumerate(lines):
            if line.strip() and not line.startswith("#"):
                found += 1
                assert i and lines[i - 1].startswith("# "), (name, line)
    print(f"# {found} overridden tags")


PROGRAM = """#include <ramcache/ramcache.h>
#include <stdio.h>
int main(void)
{
	struct ramcache *rc;
	int err = ramcache_create(&rc, NULL, 0, 0);

	if (!err)
		ramcache_destroy(rc, true);
	printf("create %d\\n", err);
	return err ? 1 : 0;
}
"""


@test
def a_program_built_with_pkg_config_from_the_dev_package_runs():
    debs = debpkg.build()
    work = tempfile.mkdtemp(prefix="ramcache-test-deb-")
    try:
        for pkg in ("libramcache1", "libramcache-dev"):
            subprocess.run(["dpkg-deb", "-x", debs[pkg], work], check=True)
        pcdir = subprocess.run(
            ["sh", "-c", f"echo {work}/usr/lib/*/pkgconfig"],
            capture_output=True, text=True, check=True).stdout.strip()
        env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=work,
                   PKG_CONFIG_LIBDIR=pcdir)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs",
                                "libramcache"], capture_output=True,
                               text=True, env=env, check=True).stdout.split()
        print(f"# pkg-config --cflags --libs libramcache: {flags}")
        with open(os.path.join(work, "prog.c"), "w") as f:
            f.write(PROGRAM)
        prog = os.path.join(work, "prog")
        subprocess.run(["cc", os.path.join(work, "prog.c"), *flags, "-o",
                        prog], check=True, timeout=120)
        libdir = next(f[2:] for f in flags if f.startswith("-L"))
        r = subprocess.run([prog], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, LD_LIBRARY_PATH=libdir))
        assert r.returncode == 0 and "create 0" in r.stdout, (r.stdout,
                                                              r.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def make_uninstall_leaves_only_the_settings():
    work = tempfile.mkdtemp(prefix="ramcache-test-deb-")
    try:
        for goal in ("install", "uninstall"):
            r = subprocess.run(["make", "-s", "--no-print-directory", "-C",
                                ROOT, f"OUTPUT={OUTPUT}", f"DESTDIR={work}",
                                goal], capture_output=True, text=True,
                               timeout=600)
            assert r.returncode == 0, (goal, r.stdout + r.stderr)
            left = sorted(os.path.relpath(os.path.join(d, f), work)
                          for d, _, files in os.walk(work) for f in files)
            if goal == "install":
                assert len(left) > 20, left
        print(f"# after make install and make uninstall: {left}")
        assert left == ["etc/default/ramcache-bpf"], left
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------ a fresh root

class Root:
    """One minbase root for the checks below, with apt set up (its lists
    and downloads in CACHE) and man-db installed, the packages of both
    versions in /tmp/debs."""

    def __init__(self):
        from sysroot import Sysroot
        keep = os.path.join(CACHE, "deb-test")
        os.makedirs(keep, exist_ok=True)
        self.lock = open(os.path.join(keep, ".lock"), "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)  # one suite at a time on it
        self.r = Sysroot("minbase", "deb")
        try:
            self.setup(keep)
        except BaseException:
            self.close()
            raise

    def setup(self, keep):
        mirror = subprocess.run([os.path.join(ROOT, "tests", "roots",
                                              "build.sh"), "--mirror"],
                                capture_output=True, text=True,
                                check=True).stdout.strip()
        self.r.write("/etc/apt/sources.list",
                     f"deb {mirror} bookworm main\n"
                     f"deb {mirror} bookworm-updates main\n")
        with open("/etc/resolv.conf") as f:
            self.r.write("/etc/resolv.conf", f.read())
        for sub in ("var/lib/apt/lists", "var/cache/apt/archives"):
            kept = os.path.join(keep, sub.split("/")[-1])
            os.makedirs(os.path.join(kept, "partial"), exist_ok=True)
            subprocess.run(["mount", "--bind", kept,
                            os.path.join(self.r.root, sub)], check=True)
        self.run("apt-get", "update", "-qq")
        self.apt("install", "man-db")
        self.debs = {}
        for tag, ver in (("prev", debpkg.previous()), ("cur", None)):
            self.debs[tag] = []
            for deb in sorted(debpkg.build(ver).values()):
                path = f"/tmp/debs/{tag}/{os.path.basename(deb)}"
                self.r.copy_in(deb, path, 0o644)
                self.debs[tag].append(path)
        self.before = self.listing()

    def run(self, *argv, check=True):
        r = subprocess.run(["chroot", self.r.root, *ROOT_ENV, *argv],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=600)
        assert r.returncode == 0 or not check, \
            f"{' '.join(argv)}: exit {r.returncode}: {r.stdout[-2000:]}"
        return r.stdout

    def apt(self, *args):
        return self.run("apt-get", "-y", "-q", "--no-install-recommends",
                        *args)

    def listing(self):
        """Every path in the root, less UNLISTED."""
        found = set()
        for d, dirs, files in os.walk(self.r.root):
            rel = os.path.relpath(d, self.r.root)
            dirs[:] = [x for x in dirs if os.path.normpath(
                os.path.join(rel, x)) not in UNLISTED]
            found.update(os.path.normpath(os.path.join(rel, x))
                         for x in dirs + files)
        return found

    def close(self):
        self.r.close()
        self.lock.close()


ROOTS = []


def fresh_root():
    if FRESH:
        raise Skip("make test-fresh: the host ran it (no debootstrap cache)")
    require_root()
    if not ROOTS:
        try:
            ROOTS.append(Root())
        except Exception as e:
            ROOTS.append(e)
    if isinstance(ROOTS[0], Exception):
        raise AssertionError(f"no fresh root: {ROOTS[0]}")
    return ROOTS[0]


@test
def apt_install_pulls_only_debian_packages():
    root = fresh_root()
    sim = root.apt("install", "-s", *root.debs["prev"])
    inst = re.findall(r"^Inst (\S+) \((\S+) (.*?) \[", sim, re.M)
    ours = {n for n, _, origin in inst if origin == "local-deb"}
    others = [(n, origin) for n, _, origin in inst if origin != "local-deb"]
    print(f"# apt install of the five pulls {len(others)} packages: "
          f"{sorted(n for n, _ in others)}")
    assert ours == set(debpkg.PACKAGES), inst
    bad = [(n, o) for n, o in others
           if not all(x.strip().startswith("Debian:") for x in o.split(","))]
    assert not bad, bad
    root.apt("install", *root.debs["prev"])
    assert root.run("ramcache-bpf", "--version").strip() == \
        f"ramcache-bpf {debpkg.previous()}"


@test
def the_upgrade_keeps_the_edited_settings():
    root = fresh_root()
    text = root.r.read(DEFAULTS)
    assert EDIT[0] in text, text
    root.r.write(DEFAULTS, text.replace(*EDIT))
    out = root.apt("install", *root.debs["cur"])
    assert "Unpacking ramcache-bpf (" + debpkg.version() + ") over (" + \
        debpkg.previous() + ")" in out, out[-2000:]
    after = root.r.read(DEFAULTS)
    assert EDIT[1] in after and EDIT[0] not in after, after
    assert root.run("ramcache-bpf", "--version").strip() == \
        f"ramcache-bpf {debpkg.version()}"


@test
def installed_pages_unit_completion_and_modules():
    root = fresh_root()
    for args, want in ((["ramcache-bpf"], "--headroom"),
                       (["ramcache-report"], "--output"),
                       (["ramcache-top"], "--record"),
                       (["3", "libramcache"], "ramcache_wait")):
        page = root.run("env", "MANWIDTH=80", "man", "-P", "cat", *args)
        assert "NAME" in page and want in page, (args, page[:500])
    unit = "/lib/systemd/system/ramcache-bpf.service"
    assert "ExecStart=/usr/bin/ramcache-bpf " in root.r.read(unit)
    wants = root.r.root + "/etc/systemd/system/multi-user.target.wants"
    assert not os.path.lexists(wants + "/ramcache-bpf.service"), \
        "the unit was enabled before it was configured"
    comp = root.r.root + "/usr/share/bash-completion/completions/"
    assert all(os.path.exists(comp + n) for n in ("ramcache-bpf",
                                                  "ramcache-report",
                                                  "ramcache-top"))
    root.run("python3", "-c", "import ramcache.page")
    root.run("ramcache-report", "--help")
    root.run("ramcache-top", "--help")
    assert os.path.isfile(root.r.root + "/usr/share/ramcache-bpf/comfyui/"
                          "ramcache/page.py"), "the package's link is broken"


@test
def purge_leaves_no_file_behind():
    root = fresh_root()
    root.apt("purge", "--autoremove", *debpkg.PACKAGES)
    status = root.run("dpkg-query", "-W", "-f", "${Package} ${Status}\\n",
                      *debpkg.PACKAGES, check=False)
    assert " installed" not in status and "config-files" not in status, status
    after = root.listing()
    print(f"# {len(root.before)} paths before the install, {len(after)} "
          "after the purge")
    assert after == root.before, (f"left: {sorted(after - root.before)}; "
                                  f"gone: {sorted(root.before - after)}")


try:
    main()
finally:
    for r in ROOTS:
        if isinstance(r, Root):
            r.close()
