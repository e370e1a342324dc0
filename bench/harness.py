"""The benchmarks' side of the harness, on top of rctest (memory cgroups,
zram, processes with their JSON lines): the agent started on a pid, CPU and
RSS of a process, a memory cgroup's room and counters, PSI triggers, the
sampler of a run, and the demo started behind a gate.
"""
import contextlib
import os
import select
import shutil
import threading
import time

from rctest import Proc, free_port  # noqa: F401  (sections take it from here)
from common import AGENT, DEMO, PSI_TRIGGER, mono_ns


def start_agent(pid, *flags):
    return agent_following(["--pid", pid], *flags)


def agent_following(who, *flags, timeout=15):
    """The agent with --json following @who (["--pid", PID], or ["--all",
    "--cgroup", PATH]), once it said `start`."""
    a = Proc([AGENT, "--json", *who, *flags])
    if not a.wait_type("start", timeout):
        a.kill()
        raise RuntimeError("agent did not start: " + " ".join(a.err[-5:]))
    return a


def proc_cpu_rss(pid):
    """(utime+stime seconds, VmRSS bytes) of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    tick = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / tick
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return cpu, rss


def ru_cpu(ru):
    return ru.ru_utime + ru.ru_stime


# ------------------------------------------------------------ cgroup I/O

def memcg_avail(cg):
    """limit - usage + inactive file, as the demo's local policy sees it."""
    if cg.version == 2:
        limit = cg.read("memory.max").strip()
        limit = 1 << 62 if limit == "max" else int(limit)
        usage = int(cg.read("memory.current"))
        key = "inactive_file"
    else:
        limit = int(cg.read("memory.limit_in_bytes"))
        usage = int(cg.read("memory.usage_in_bytes"))
        key = "total_inactive_file"
    stat = memcg_stat(cg)
    return max(0, limit - usage) + stat.get(key, 0)


def memcg_stat(cg):
    out = {}
    for line in cg.read("memory.stat").splitlines():
        k, _, v = line.partition(" ")
        with contextlib.suppress(ValueError):
            out[k] = int(v)
    return out


def vmstat(key):
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k == key:
                return int(v)
    return 0


class PsiWatch:
    """A PSI trigger polled in a thread; the first fire is recorded."""

    def __init__(self, cg):
        self.path = "/proc/pressure/memory"
        if cg.version == 2:
            self.path = os.path.join(cg.path, "memory.pressure")
        self.fires = []
        self.error = None
        self._stop = False
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)
            os.write(self.fd, PSI_TRIGGER.encode() + b"\0")
        except OSError as e:
            self.fd = None
            self.error = str(e)
            return
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        p = select.poll()
        p.register(self.fd, select.POLLPRI)
        while not self._stop:
            for _, ev in p.poll(50):
                if ev & select.POLLERR:
                    self.error = "POLLERR"
                    return
                if ev & select.POLLPRI:
                    self.fires.append(mono_ns())

    def close(self):
        self._stop = True
        if self.fd is not None:
            self._t.join(timeout=2)
            os.close(self.fd)


def memcg_swap(cg):
    """Bytes of the memcg's memory in swap now."""
    if cg.version == 2:
        with contextlib.suppress(OSError, ValueError):
            return int(cg.read("memory.swap.current"))
        return 0
    st = memcg_stat(cg)
    return st.get("total_swap", st.get("swap", 0))


class Sampler:
    """Available memory of a memcg every 10 ms, (mono_ns, bytes), and
    the peak of its swap use."""

    def __init__(self, cg):
        self.cg = cg
        self.trace = []
        self.swap_peak = 0
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop:
            with contextlib.suppress(OSError, ValueError):
                self.trace.append((mono_ns(), memcg_avail(self.cg)))
                self.swap_peak = max(self.swap_peak, memcg_swap(self.cg))
            time.sleep(0.01)

    def close(self):
        self._stop = True
        self._t.join(timeout=2)


@contextlib.contextmanager
def scratch_dir():
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="ramcache-bench-", dir="/var/tmp")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def gated_demo(cg, mdir, policy, cfg, extra=()):
    """The demo behind a shell that waits for a line on stdin, so the
    agent can track its pid (kept across exec) before anything runs."""
    argv = ["/bin/sh", "-c", 'read x; exec "$@"', "sh", DEMO, "--json",
            "--policy", policy, "--model-dir", mdir, *cfg["workload"],
            *extra]
    return Proc(argv, stdin=True, preexec=cg.preexec())


def demo_done(demo):
    d = demo.of_type("demo_done")
    return d[0] if d else None
