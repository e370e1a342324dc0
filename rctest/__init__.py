"""The harness the Python test suites and the benchmarks share: TAP output,
scratch memory cgroups (v1 or v2) and zram swap that are always removed, and
a wrapper around the agent's JSON stream.

A suite is a script:

    from rctest import test, main
    @test
    def something(): assert ...
    main()

Each @test prints "ok N - name", "not ok N - name" or "ok N - name # SKIP why"
(raise Skip("why")). main() exits 1 if any case failed.

Nothing in the suites, their helpers or the benchmarks edits sys.path
(test_lint holds them to it): a child Python gets the project's folders on
PYTHONPATH from py_env(), and a package outside this process's path
(python/ramcache, report/rcviz) is imported by file with import_package().
The comfyui suites' stand-in ComfyUI is the one exception
(comfyui/tests/env.py).
"""
import atexit
import contextlib
import importlib.util
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

# realpath: the suites and the benchmarks import this package through a
# link beside them (tests/integration/rctest, comfyui/tests/rctest,
# bench/rctest), all to this one folder.
ROOT = os.environ.get("RAMCACHE_ROOT") or os.path.dirname(
    os.path.dirname(os.path.realpath(__file__)))
OUTPUT = os.environ.get("OUTPUT") or os.path.join(ROOT, "build")
AGENT = os.path.join(OUTPUT, "ramcache-bpf")
DEMO = os.path.join(OUTPUT, "ramcache-demo")
HELPERS = os.path.join(OUTPUT, "tests")
MiB = 1 << 20

_cases = []


class Skip(Exception):
    pass


def test(fn):
    _cases.append(fn)
    return fn


# make test-fresh: the suites run in a debootstrap'd root to prove the
# install steps (tests/fresh/run.sh)
FRESH = os.environ.get("RAMCACHE_FRESH") == "1"


def repeats(n):
    """How often a suite repeats a run that counts a rare failure (an OOM
    kill in one run of ten): @n, or 2 in the fresh root (make test-fresh,
    RAMCACHE_FRESH=1), which proves the install steps; the rate is counted
    by the make test on the host before it, on the same kernel."""
    return min(n, 2) if FRESH else n


def require_root():
    if os.geteuid() != 0:
        raise Skip("needs root")


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    n = failed = 0
    for fn in _cases:
        if only and only not in fn.__name__:
            continue
        n += 1
        try:
            fn()
            print(f"ok {n} - {fn.__name__}", flush=True)
        except Skip as e:
            print(f"ok {n} - {fn.__name__} # SKIP {e}", flush=True)
        except Exception:  # report every failure, keep going
            failed += 1
            for line in traceback.format_exc().splitlines():
                print(f"# {line}")
            print(f"not ok {n} - {fn.__name__}", flush=True)
    print(f"1..{n}")
    sys.exit(1 if failed else 0)


# ---------------------------------------------------------------- imports

def py_env(*dirs, base=None):
    """A copy of @base (default os.environ) with @dirs first on its
    PYTHONPATH, in that order: the environment of a child Python that
    imports the project's modules (python/ for ramcache, a helper's
    folder). A wrapper that clears the environment (sudo, a VM) drops it:
    give such a child `env PYTHONPATH=...` in its argv instead."""
    env = dict(os.environ if base is None else base)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([*map(str, dirs), *([old] if old else [])])
    return env


def import_package(folder):
    """The package in @folder imported by file under the folder's name (its
    submodules then come from its own __path__), once per process, without
    putting @folder's parent on sys.path: python/ramcache or report/rcviz
    for a suite that imports them, each then importable by name."""
    name = os.path.basename(os.path.normpath(folder))
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(folder, "__init__.py"),
            submodule_search_locations=[folder])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


# ---------------------------------------------------------------- users

NOBODY = 65534
# a python another user may run (sys.executable may sit under /root)
SYS_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) \
    else sys.executable


def as_user(uid, then=None):
    """A preexec_fn: @then() (e.g. a cgroup move), then become @uid (its
    gid the same number, no supplementary groups)."""
    def f():
        if then:
            then()
        os.setgid(uid)
        os.setgroups([])
        os.setuid(uid)
    return f


def own_libc():
    """The libc this Python runs on (as the agent finds its own)."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libc.so"):
                return path
    raise Skip("no libc.so in this process's maps")


def helpers_any_uid_reads():
    """tests/helpers/docexec.py copied to a directory every uid can read
    (removed at exit): the checkout may sit where only root can enter (a
    clone in /root, as in make test-fresh), and executors of other users
    run it."""
    d = tempfile.mkdtemp(prefix="ramcache-helpers-", dir="/var/tmp")
    atexit.register(shutil.rmtree, d, True)
    os.chmod(d, 0o755)
    os.chmod(shutil.copy(os.path.join(ROOT, "tests", "helpers",
                                      "docexec.py"), d), 0o644)
    return d


# ---------------------------------------------------------------- cgroups

def memcg_version():
    """2 when the memory controller is on the unified hierarchy, else 1."""
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        with open("/sys/fs/cgroup/cgroup.controllers") as f:
            if "memory" in f.read().split():
                return 2
    if os.path.isdir("/sys/fs/cgroup/memory"):
        return 1
    return 0


class ParentMemcg:
    """A scratch parent memory cgroup with a limit and @n children without
    one (a memory domain of several executors), removed on exit with
    whatever still runs in it. @tag names it (ramcache-TAG-PID-NS).
    @child_limit gives each child a limit of its own instead: @n domains
    under one parent, as @n containers on a node."""

    def __init__(self, limit, n, tag, child="ex", child_limit=None):
        self.version = memcg_version()
        if self.version == 0:
            raise Skip("no memory cgroup controller")
        base = ("/sys/fs/cgroup" if self.version == 2
                else "/sys/fs/cgroup/memory")
        self.rel = f"/ramcache-{tag}-{os.getpid()}-{time.monotonic_ns()}"
        self.path = base + self.rel
        self.children = []
        os.mkdir(self.path)
        try:
            if self.version == 2:
                self._w(self.path, "memory.max", str(limit))
                self._w(self.path, "memory.swap.max", "0")
                self._w(self.path, "cgroup.subtree_control", "+memory")
            else:
                self._w(self.path, "memory.limit_in_bytes", str(limit))
                with contextlib.suppress(OSError):
                    self._w(self.path, "memory.memsw.limit_in_bytes",
                            str(limit))
                with contextlib.suppress(OSError):
                    self._w(self.path, "memory.swappiness", "0")
            for i in range(n):
                path = f"{self.path}/ramcache-{child}{i}"
                os.mkdir(path)
                self.children.append(path)
                if child_limit is not None:
                    self._limit(path, child_limit)
        except BaseException:
            self.remove()
            raise

    @staticmethod
    def _w(d, f, v):
        with open(os.path.join(d, f), "w") as fh:
            fh.write(v)

    def _limit(self, d, limit):
        """A limit on cgroup @d, none of it in swap."""
        if self.version == 2:
            self._w(d, "memory.max", str(limit))
            self._w(d, "memory.swap.max", "0")
        else:
            self._w(d, "memory.limit_in_bytes", str(limit))

    @staticmethod
    def _r(d, f):
        with open(os.path.join(d, f)) as fh:
            return fh.read()

    def preexec(self, i):
        """A preexec_fn that moves the child process into child @i."""
        path = os.path.join(self.children[i], "cgroup.procs")

        def f():
            with open(path, "w") as fh:
                fh.write("0")
        return f

    def usage(self):
        return int(self._r(self.path, "memory.current" if self.version == 2
                           else "memory.usage_in_bytes"))

    def oom_kills(self):
        """OOM kills in the domain: v1 counts a kill in the victim's own
        cgroup, v2 in every ancestor too (so the larger of the parent's
        count and the children's sum)."""
        f = "memory.events" if self.version == 2 else "memory.oom_control"
        counts = []
        for d in [self.path] + self.children:
            n = 0
            with contextlib.suppress(OSError):
                for line in self._r(d, f).splitlines():
                    k, v = line.split()
                    if k == "oom_kill":
                        n = int(v)
            counts.append(n)
        if self.version == 2:
            return max(counts[0], sum(counts[1:]))
        return sum(counts)

    def remove(self):
        for d in self.children[::-1] + [self.path]:
            for _ in range(100):
                if not os.path.isdir(d):
                    break
                with contextlib.suppress(OSError):
                    for p in self._r(d, "cgroup.procs").split():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(p), signal.SIGKILL)
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.05)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.remove()


class Memcg:
    """A scratch memory cgroup named ramcache-test-*, removed on exit.

    swap_limit is how much of the cgroup may go to swap: 0 (the default)
    keeps tests deterministic on machines where swap is on, None leaves
    the kernel's default.
    """

    def __init__(self, limit, swap_limit=0, name=None):
        self.version = memcg_version()
        if self.version == 0:
            raise Skip("no memory cgroup controller")
        base = "/sys/fs/cgroup" if self.version == 2 else "/sys/fs/cgroup/memory"
        name = name or f"ramcache-test-{os.getpid()}-{int(time.monotonic() * 1000)}"
        self.path = os.path.join(base, name)
        os.mkdir(self.path)
        try:
            if self.version == 2:
                self._w("memory.max", str(limit))
                if swap_limit is not None:
                    self._w("memory.swap.max", str(swap_limit))
            else:
                self._w("memory.limit_in_bytes", str(limit))
                if swap_limit is not None:
                    with contextlib.suppress(OSError):
                        self._w("memory.memsw.limit_in_bytes",
                                str(limit + swap_limit))
                    with contextlib.suppress(OSError):
                        self._w("memory.swappiness",
                                "0" if swap_limit == 0 else "60")
        except BaseException:
            self.remove()
            raise

    def _w(self, f, v):
        with open(os.path.join(self.path, f), "w") as fh:
            fh.write(v)

    def read(self, f):
        with open(os.path.join(self.path, f)) as fh:
            return fh.read()

    def add(self, pid):
        self._w("cgroup.procs", str(pid))

    def preexec(self):
        """For subprocess preexec_fn: move the child in before exec."""
        path = os.path.join(self.path, "cgroup.procs")

        def f():
            with open(path, "w") as fh:
                fh.write("0")
        return f

    def oom_kills(self):
        if self.version == 2:
            for line in self.read("memory.events").splitlines():
                k, v = line.split()
                if k == "oom_kill":
                    return int(v)
            return 0
        for line in self.read("memory.oom_control").splitlines():
            k, v = line.split()
            if k == "oom_kill":
                return int(v)
        return 0

    def remove(self):
        if not os.path.isdir(self.path):
            return
        for _ in range(100):
            try:
                pids = [int(p) for p in self.read("cgroup.procs").split()]
            except OSError:
                pids = []
            for p in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"could not remove {self.path}")

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.remove()


# ---------------------------------------------------------------- zram swap

class ZramSwap:
    """zram0 as swap for the duration; swapoff and reset afterwards."""

    def __init__(self, size=1 << 30):
        if not os.path.exists("/sys/block/zram0"):
            raise Skip("no zram0 device")
        with open("/proc/swaps") as f:
            if "zram0" in f.read():
                raise Skip("zram0 is already in use as swap")
        self.size = size

    def __enter__(self):
        subprocess.run(["swapoff", "/dev/zram0"], stderr=subprocess.DEVNULL)
        with open("/sys/block/zram0/reset", "w") as f:
            f.write("1")
        with open("/sys/block/zram0/disksize", "w") as f:
            f.write(str(self.size))
        try:
            subprocess.run(["mkswap", "/dev/zram0"], check=True,
                           stdout=subprocess.DEVNULL)
            subprocess.run(["swapon", "/dev/zram0"], check=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *a):
        subprocess.run(["swapoff", "/dev/zram0"], stderr=subprocess.DEVNULL)
        with contextlib.suppress(OSError):
            with open("/sys/block/zram0/reset", "w") as f:
                f.write("1")


# ---------------------------------------------------------------- the agent

def wait_event(seen, q, pred, timeout=10.0):
    """First event of @seen, or then of queue @q (None: the stream ended),
    for which pred(ev) is true; None after @timeout seconds."""
    for ev in list(seen):
        if pred(ev):
            return ev
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return None
        try:
            ev = q.get(timeout=left)
        except queue.Empty:
            return None
        if ev is None:
            return None
        if pred(ev):
            return ev


class Agent:
    """ramcache-bpf with --json, its events collected by a reader thread."""

    def __init__(self, *args, stderr_to=None, prefix=()):
        """@prefix: a command the agent is run under (unshare ...)."""
        if not os.access(AGENT, os.X_OK):
            raise RuntimeError(f"{AGENT} is not built")
        self.argv = [*prefix, AGENT, "--json", *map(str, args)]
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.events = []
        self.q = queue.Queue()
        self.stderr = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()
        self._e = threading.Thread(target=self._read_err, daemon=True)
        self._e.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"type": "unparsable", "line": line}
            self.events.append(ev)
            self.q.put(ev)
        self.q.put(None)

    def _read_err(self):
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def wait_for(self, pred, timeout=10.0):
        """First event (seen before or after) for which pred(ev) is true."""
        return wait_event(self.events, self.q, pred, timeout)

    def wait_type(self, typ, timeout=10.0):
        return self.wait_for(lambda e: e.get("type") == typ, timeout)

    def wait_target(self, pid, state="attached", timeout=10.0):
        """The `target` event of @pid in @state (attached, exited, ...)."""
        return self.wait_for(lambda e: e.get("type") == "target"
                             and e.get("pid") == pid
                             and e.get("state") == state, timeout)

    def of_type(self, typ):
        return [e for e in self.events if e.get("type") == typ]

    def stop(self, timeout=10.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        # the readers end at EOF; a slow (emulated) machine may still be
        # draining a backlog of lines after the agent exited
        self._t.join(timeout=60)
        self._e.join(timeout=60)
        return rc

    def wait(self, timeout=30.0):
        rc = self.proc.wait(timeout=timeout)
        self._t.join(timeout=5)
        self._e.join(timeout=5)
        return rc

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.stop()


def free_port():
    """A TCP port on 127.0.0.1 free a moment ago (for --metrics and such)."""
    import socket
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Proc:
    """A child with its JSON lines collected and its rusage at exit."""

    def __init__(self, argv, stdin=False, preexec=None, env=None):
        self.argv = [str(a) for a in argv]
        self.p = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            text=True, preexec_fn=preexec, env=env)
        self.pid = self.p.pid
        self.events = []
        self.q = queue.Queue()
        self.err = []
        self.rusage = None
        self.rc = None
        self.end_ns = None
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()
        self._e = threading.Thread(target=self._read_err, daemon=True)
        self._e.start()

    def _read(self):
        for line in self.p.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            ev["_rx_ns"] = mono_ns()
            self.events.append(ev)
            self.q.put(ev)
        self.q.put(None)

    def _read_err(self):
        for line in self.p.stderr:
            self.err.append(line.rstrip("\n"))

    def wait_type(self, typ, timeout):
        for ev in list(self.events):
            if ev.get("type") == typ:
                return ev
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                ev = self.q.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                return None
            if ev is None:
                return None
            if ev.get("type") == typ:
                return ev
        return None

    def send(self, line="\n"):
        self.p.stdin.write(line)
        self.p.stdin.flush()

    def wait(self, timeout):
        """Reap with wait4 (for rusage); SIGKILL after @timeout."""
        if self.rc is not None:
            return self.rc
        end = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(self.pid, os.WNOHANG)
            if pid == self.pid:
                break
            if time.monotonic() >= end:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                pid, status, ru = os.wait4(self.pid, 0)
                break
            time.sleep(0.01)
        self.end_ns = mono_ns()
        self.rusage = ru
        self.rc = os.waitstatus_to_exitcode(status)
        self.p.returncode = self.rc
        self._t.join(timeout=5)
        self._e.join(timeout=5)
        return self.rc

    def stop(self, timeout=10):
        if self.rc is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGINT)
        return self.wait(timeout)

    def kill(self):
        if self.rc is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.wait(5)

    def of_type(self, typ):
        return [e for e in self.events if e.get("type") == typ]


# ---------------------------------------------------------------- demo

DEMO_TIMEOUT = 180


def require_demo():
    if not os.access(DEMO, os.X_OK):
        raise RuntimeError(f"{DEMO} is not built")


class Demo:
    """ramcache-demo --json, optionally inside a memcg, its events parsed."""

    def __init__(self, *args, memcg=None, mdir=None):
        argv = [DEMO, "--json", *map(str, args)]
        if mdir:
            argv += ["--model-dir", mdir]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=memcg.preexec() if memcg else None)
        self.out = self.err = ""
        self.events = []
        self._err_lines = None

    def follow_stderr(self):
        """Read stderr as it comes, for said(); wait() collects it."""
        self._err_lines = []
        err, self.proc.stderr = self.proc.stderr, None

        def read():
            for line in err:
                self._err_lines.append(line)
        self._err_thread = threading.Thread(target=read, daemon=True)
        self._err_thread.start()

    def said(self, text):
        return any(text in line for line in self._err_lines)

    def control_path(self):
        """The page's memfd in /proc/<pid>/fd, "" until it exists."""
        return memfd_page(self.proc.pid)

    def wait(self, timeout=DEMO_TIMEOUT):
        try:
            self.out, self.err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.out, self.err = self.proc.communicate()
            raise AssertionError(f"demo still running after {timeout} s")
        finally:
            if self._err_lines is not None:
                self._err_thread.join(timeout=10)
                self.err = "".join(self._err_lines)
        self.events = [json.loads(line) for line in self.out.splitlines()
                       if line.startswith("{")]
        return self.proc.returncode

    def of_type(self, typ):
        return [e for e in self.events if e.get("type") == typ]

    def done(self):
        d = self.of_type("demo_done")
        assert len(d) == 1, f"no demo_done: {self.out[-2000:]}{self.err[-2000:]}"
        return d[0]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def memfd_page(pid):
    """/proc/<pid>/fd/<n> of the process's control page memfd, or ""."""
    d = f"/proc/{pid}/fd"
    try:
        names = os.listdir(d)
    except OSError:
        return ""
    for n in sorted(names, key=int):
        try:
            if os.readlink(f"{d}/{n}").startswith("/memfd:ramcache"):
                return f"{d}/{n}"
        except OSError:
            pass
    return ""


def wait_page(pid, timeout=10.0):
    """memfd_page(pid) once the process has made it; "" after timeout."""
    end = time.monotonic() + timeout
    while True:
        path = memfd_page(pid)
        if path or time.monotonic() > end:
            return path
        time.sleep(0.02)


MEMHOG = os.path.join(HELPERS, "memhog")


def hog(*args, preexec=None):
    """tests/helpers/memhog, waiting for "go" on stdin (see ready, go)."""
    return subprocess.Popen([MEMHOG, "--wait", *map(str, args)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, preexec_fn=preexec)


def ready(p):
    """The pid memhog reports once it is set up."""
    ev = json.loads(p.stdout.readline())
    assert ev["type"] == "ready", ev
    return ev["pid"]


def go(p):
    p.stdin.write("go\n")
    p.stdin.flush()


def reap(p):
    p.kill()
    p.wait()


@contextlib.contextmanager
def memhog(*args, preexec=None):
    """hog() that is killed and reaped however the test ends."""
    p = hog(*args, preexec=preexec)
    try:
        yield p
    finally:
        reap(p)


@contextlib.contextmanager
def scratch_dir(prefix, parent="/var/tmp"):
    """A directory named ramcache-test-<prefix>..., removed at the end."""
    d = tempfile.mkdtemp(prefix=f"ramcache-test-{prefix}", dir=parent)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def wait_path(path, timeout=4.0):
    """True once @path exists, False after @timeout seconds."""
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True


def spawn(argv, **kw):
    return subprocess.Popen(list(map(str, argv)), **kw)


def read_stat_faults(pid):
    """minflt + majflt of a process from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[7]) + int(fields[9])


# ---------------------------------------------------------------- terminal

class Tmux:
    """A detached tmux session running a shell, 120x40, killed on exit
    (a terminal a test can read back: screen, title, alternate screen)."""

    def __init__(self, tag="top"):
        if not shutil.which("tmux"):
            raise RuntimeError("tmux is not installed (make deps)")
        self.name = f"ramcache-test-{tag}-{os.getpid()}"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x",
                        "120", "-y", "40", "env PS1='$ ' bash --norc"],
                       check=True)

    def keys(self, *keys):
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys],
                       check=True)

    def screen(self):
        return subprocess.run(["tmux", "capture-pane", "-p", "-t",
                               self.name], capture_output=True, text=True,
                              check=True).stdout

    def fmt(self, f):
        return subprocess.run(["tmux", "display", "-p", "-t", self.name, f],
                              capture_output=True, text=True,
                              check=True).stdout.strip()

    def child(self):
        """Pid of the command running in the shell, or None."""
        shell = self.fmt("#{pane_pid}")
        p = subprocess.run(["pgrep", "-P", shell], capture_output=True,
                           text=True)
        pids = p.stdout.split()
        return int(pids[0]) if pids else None

    def wait_screen(self, pred, timeout):
        end = time.monotonic() + timeout
        s = self.screen()
        while not pred(s) and time.monotonic() < end:
            time.sleep(0.25)
            s = self.screen()
        return s

    def close(self):
        subprocess.run(["tmux", "kill-session", "-t", self.name],
                       stderr=subprocess.DEVNULL)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
