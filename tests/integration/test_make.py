#!/usr/bin/env python3
"""A new user's plain `make` on a machine without the build's packages.

The packages are not removed: each case runs make in a private mount
namespace (unshare -m) where what a package provides is hidden (an empty
tmpfs over its header directory, /dev/null over its program), so the host
is never touched. Plain `make` must stop before building anything, say in
one line what is missing and to run `sudo make deps`, and never run
apt-get (a recorder named apt-get is first on PATH).
"""
import os
import shutil
import subprocess
import tempfile

from rctest import ROOT, main, require_root, test  # noqa: E402


def make_hidden(hide_dirs=(), hide_files=(), args=(), timeout=120):
    """make -C ROOT with OUTPUT in a scratch directory, in a mount namespace
    where hide_dirs are empty and hide_files are /dev/null. Returns
    (returncode, stdout, stderr, whether OUTPUT was created, whether
    apt-get or dpkg was run)."""
    require_root()
    work = tempfile.mkdtemp(prefix="ramcache-test-make-")
    try:
        bin_dir = os.path.join(work, "bin")
        os.mkdir(bin_dir)
        marker = os.path.join(work, "apt-ran")
        for tool in ("apt-get", "apt", "dpkg-query", "dpkg"):
            p = os.path.join(bin_dir, tool)
            with open(p, "w") as f:
                f.write(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\nexit 1\n")
            os.chmod(p, 0o755)
        out = os.path.join(work, "out")
        script = "".join(f"mount -t tmpfs none '{d}' && " for d in hide_dirs)
        script += "".join(f"mount --bind /dev/null '{f}' && " for f in hide_files)
        script += 'root=$1 out=$2; shift 2; exec make -C "$root" OUTPUT="$out" "$@"'
        env = dict(os.environ, PATH=bin_dir + ":" + os.environ.get(
            "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"))
        env.pop("MAKEFLAGS", None)
        env.pop("MFLAGS", None)
        p = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", ROOT,
                            out, *args], capture_output=True, text=True,
                           timeout=timeout, env=env)
        return (p.returncode, p.stdout, p.stderr, os.path.exists(out),
                os.path.exists(marker))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def program(name):
    """The file a program on PATH really is (a symlink's target)."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    assert path, f"{name} is not installed here (make deps)"
    return os.path.realpath(path)


def one_line(stderr):
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@test
def plain_make_without_libbpf_dev_says_to_run_make_deps():
    rc, out, err, built, apt = make_hidden(hide_dirs=["/usr/include/bpf"])
    assert rc != 0, f"make succeeded without bpf/*.h: {out[-500:]}"
    line = one_line(err)
    assert "fatal error" not in err, err
    assert "ramcache-bpf: failed to find bpf/bpf_core_read.h" in line, line
    assert "missing packages libbpf-dev " in line, line
    assert "run 'sudo make deps'" in line, line
    assert not built, "make built something before saying what is missing"
    assert not apt, "plain make ran apt-get or dpkg"


@test
def plain_make_names_every_missing_package():
    rc, out, err, built, apt = make_hidden(
        hide_dirs=["/usr/include/bpf"],
        hide_files=[program("clang"), program("bpftool")])
    assert rc != 0, out[-500:]
    line = one_line(err)
    assert "missing packages bpftool clang libbpf-dev (run 'sudo make " \
        "deps')" in line, line
    assert not built and not apt, (built, apt)


@test
def goals_that_install_or_clean_are_not_stopped_by_the_check():
    for goals in (["deps"], ["clean"], ["deps", "all"]):
        rc, out, err, built, apt = make_hidden(
            hide_dirs=["/usr/include/bpf"], args=["-n", *goals])
        assert rc == 0 and "failed to find" not in err, (goals, rc, err)


@test
def with_every_package_there_make_builds():
    rc, out, err, built, apt = make_hidden(args=["-n"])
    assert rc == 0, err
    assert "failed to find" not in err, err
    assert "-target bpf" in out, out[-1000:]
    assert not apt, "plain make ran apt-get or dpkg"


@test
def a_user_without_sbin_on_path_builds_with_bpftool():
    """Debian gives users a PATH without /usr/sbin, where bpftool is."""
    require_root()
    out = tempfile.mkdtemp(prefix="ramcache-test-make-")
    try:
        # a copy the user can read (a clone under /root is not)
        src = os.path.join(out, "src")
        shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
            ".git", "build", "node_modules", "fuzz-corpus"))
        for d, dirs, files in os.walk(out):
            os.chmod(d, 0o755)
        p = subprocess.run(
            ["setpriv", "--reuid", "65534", "--regid", "65534",
             "--clear-groups", "env", "-i", "HOME=/tmp",
             "PATH=/usr/local/bin:/usr/bin:/bin", "make", "-n", "-C", src,
             f"OUTPUT={out}/build"], capture_output=True, text=True,
            timeout=120)
        assert p.returncode == 0, p.stderr
        gen = [ln for ln in p.stdout.splitlines() if "gen skeleton" in ln]
        # bpftool by its full path, as `bpftool` alone is not found
        assert gen and all(os.path.isabs(ln.split()[0]) and
                           os.access(ln.split()[0], os.X_OK)
                           for ln in gen), gen
    finally:
        shutil.rmtree(out, ignore_errors=True)


INSTALLED = r"""
set -e
work=$1 root=$2
# a private /usr/local and /etc: nothing written here reaches the host
mount -t tmpfs none /usr/local
mkdir -p "$work/upper" "$work/wd"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$work/upper,workdir=$work/wd" /etc
make -s -C "$root" install >/dev/null
cat > "$work/prog.c" <<'C'
#include <ramcache/ramcache.h>
#include <stdio.h>
int main(void)
{
	struct ramcache *rc;
	int err = ramcache_create(&rc, NULL, 0, 0);

	if (!err)
		ramcache_destroy(rc, true);
	printf("create %d\n", err);
	return err ? 1 : 0;
}
C
cc -I/usr/local/include "$work/prog.c" -L/usr/local/lib -lramcache -o "$work/prog"
exec "$work/prog"
"""


@test
def after_make_install_a_program_linked_with_libramcache_runs():
    """sudo make install, then an executor built with -lramcache runs (the
    loader's cache knows the new library: make install runs ldconfig)."""
    require_root()
    work = tempfile.mkdtemp(prefix="ramcache-test-make-")
    try:
        env = {k: v for k, v in os.environ.items()
               if k not in ("MAKEFLAGS", "MFLAGS")}
        p = subprocess.run(["unshare", "-m", "sh", "-c", INSTALLED, "sh", work,
                            ROOT], capture_output=True, text=True, timeout=300,
                           env=env)
        assert p.returncode == 0 and "create 0" in p.stdout, \
            (p.returncode, p.stdout, p.stderr[-1500:])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
