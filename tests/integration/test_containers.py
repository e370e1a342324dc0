#!/usr/bin/env python3
"""Executors where users run them: in a container, as another user, next to
a hostile user, and killed.

* The C demo in its own pid, mount and IPC namespaces with a private
  /dev/shm (what Docker and Kubernetes give ComfyUI), as uid 65534, under
  an agent on the host that only knows its host pid: found, commands
  acked, no OOM kill, RSS dropped.
* The pure-Python executor written from the document, in the same kind of
  container.
* Another user owns /dev/shm/ramcache-<pid> for the next few thousand pids
  before an executor starts: it is served all the same.
* A SIGKILLed executor leaves nothing in /dev/shm.
* The agent with only the capabilities docs/containers.md gives it finds a
  page in a container; without CAP_SYS_PTRACE or CAP_DAC_READ_SEARCH it
  refuses it and names the one it lacks.
* An agent in a cgroup namespace of its own says it cannot watch the
  executor's limit, and a --cgroup scope of host paths follows nobody from
  there (why the DaemonSet scopes by --user).
* The agent with the DaemonSet's capabilities and seccomp profile through
  its life: --match and --all, metrics, --on-level, SIGTERM.
"""
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from rctest import (free_port, AGENT, DEMO, HELPERS, MiB, ROOT, Agent, Memcg,  # noqa
                    Skip, main, memfd_page, require_root, test, wait_page)

NOBODY = 65534
SQUATTER = 65533
LIMIT = 384 * MiB
WORKLOAD = ["--prompts", 8, "--nodes", 6, "--models", 2, "--model-size",
            "96M", "--output-size", "16M", "--steps", 10, "--step-ms", 20]
DOCEXEC = os.path.join(ROOT, "tests", "helpers", "docexec.py")
EXECUTOR = os.path.join(HELPERS, "executor")
CONTAINERS_MD = os.path.join(ROOT, "docs", "containers.md")
MANIFEST = os.path.join(ROOT, "contrib", "kubernetes", "ramcache-bpf.yaml")
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
             "--clear-groups"]


def require_tools():
    require_root()
    for exe in (AGENT, DEMO):
        if not os.access(exe, os.X_OK):
            raise Skip(f"{exe} is not built")
    for tool in ("unshare", "setpriv"):
        if not shutil.which(tool):
            raise Skip(f"no {tool}")


def container(argv):
    """@argv as pid 1 of new pid, mount and IPC namespaces, with a private
    /proc and /dev/shm, as uid 65534."""
    inner = " ".join(["mount -t tmpfs -o size=16m,mode=1777 tmpfs /dev/shm",
                      "&& exec", *AS_NOBODY, *map(str, argv)])
    return ["unshare", "--pid", "--mount", "--ipc", "--fork", "--mount-proc",
            "--propagation", "private", "sh", "-c", inner]


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        with contextlib.suppress(OSError):
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
            if int(s[s.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(d))
    return out


def host_pid_of(proc, timeout=10.0):
    """The host pid of pid 1 in the container unshare started."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        kids = children(proc.pid)
        if kids:
            return kids[0]
        if proc.poll() is not None:  # the container is gone already: say why
            out, err = proc.communicate()
            said = [o[-2000:] for o in (err, out) if o]
            raise AssertionError(f"the container exited {proc.returncode} before its "
                                 f"init was seen: {said}")
        time.sleep(0.02)
    raise AssertionError("the container's init never appeared")


def shm_names():
    return {n for n in os.listdir("/dev/shm") if n.startswith("ramcache")}


@contextlib.contextmanager
def model_dir():
    d = tempfile.mkdtemp(prefix="ramcache-test-ct-", dir="/var/tmp")
    os.chown(d, NOBODY, NOBODY)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def image_copy(path):
    """@path copied where uid 65534 can read it, as a container image holds
    its own code: the checkout may sit in a directory only root can enter
    (a clone in /root, as on a fresh machine)."""
    with model_dir() as d:
        copy = os.path.join(d, os.path.basename(path))
        shutil.copy(path, copy)
        os.chmod(copy, 0o644)
        yield copy


class Run:
    """A process whose JSON lines on stdout are collected at the end."""

    def __init__(self, argv, memcg):
        self.proc = subprocess.Popen(
            list(map(str, argv)), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, preexec_fn=memcg.preexec())
        self.out = self.err = ""

    def wait(self, timeout=180):
        try:
            self.out, self.err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.out, self.err = self.proc.communicate()
            raise AssertionError(f"still running after {timeout} s")
        return self.proc.returncode

    def events(self, typ):
        evs = [json.loads(ln) for ln in self.out.splitlines()
               if ln.startswith("{")]
        return [e for e in evs if e.get("type") == typ]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def attached(agent):
    return [e for e in agent.of_type("control") if e["state"] == "attached"]


def check_agent(agent, host_pid, ns_pid):
    att = attached(agent)
    assert att, (f"never attached: {agent.of_type('control')} "
                 f"{agent.stderr[-5:]}")
    assert att[0]["discovery"] == "memfd", att[0]
    assert att[0]["pid"] == host_pid and att[0]["ns_pid"] == ns_pid, att[0]
    start = agent.of_type("start")[0]
    assert start["pid"] == host_pid and start["ns_pid"] == ns_pid, start
    done = [e for e in agent.of_type("evict_done")
            if e["status"] == "evicted"]
    assert done, agent.events[-20:]
    # post -> RSS actually down, seen by the kernel's rss_stat
    assert any(e.get("freed_latency_ns", 0) > 0 for e in done), done[-5:]


def demo_served(wrap_container, mdir, cg):
    argv = [DEMO, "--json", "--policy", "agent", "--wait-agent", 30,
            *WORKLOAD, "--model-dir", mdir]
    run = Run(container(argv) if wrap_container else AS_NOBODY + argv, cg)
    agent = None
    try:
        pid = host_pid_of(run.proc) if wrap_container else run.proc.pid
        assert wait_page(pid), f"no memfd page in /proc/{pid}/fd"
        if wrap_container:
            # the page is no file in the container's /dev/shm either
            assert os.listdir(f"/proc/{pid}/root/dev/shm") == []
        agent = Agent("--pid", pid, "--headroom", "64M", "--inactive",
                      "128M")
        rc = run.wait()
    finally:
        run.kill()
        if agent:
            agent.stop()
    assert rc == 0, f"exit {rc}: {run.err[-2000:]}"
    assert cg.oom_kills() == 0, "OOM kill in the cgroup"
    done = run.events("demo_done")
    assert done and done[0]["prompts"] == 8, run.out[-2000:]
    assert done[0]["acks_evicted"] >= 1, done[0]
    start = run.events("demo_start")[0]
    return pid, start, agent, done[0]


@test
def demo_in_a_container_as_another_user_is_served():
    require_tools()
    with Memcg(LIMIT) as cg, model_dir() as d:
        pid, start, agent, done = demo_served(True, d, cg)
        assert start["pid"] == 1, start  # pid 1 of its own namespace
        assert start["control"].startswith("/proc/1/fd/"), start
        check_agent(agent, pid, 1)
        print(f"# host pid {pid} = pid 1 inside; "
              f"{done['acks_evicted']} evictions acked")


@test
def document_executor_in_a_container_is_served():
    require_tools()
    with Memcg(256 * MiB) as cg, image_copy(DOCEXEC) as docexec:
        run = Run(container([sys.executable, docexec, "--wait-agent", 20]),
                  cg)
        agent = None
        try:
            pid = host_pid_of(run.proc)
            assert wait_page(pid), "no memfd page"
            agent = Agent("--pid", pid, "--headroom", "64M", "--inactive",
                          "128M")
            rc = run.wait(timeout=120)
        finally:
            run.kill()
            if agent:
                agent.stop()
        assert rc == 0, f"exit {rc}: {run.err[-2000:]}"
        assert cg.oom_kills() == 0
        ready = run.events("ready")[0]
        assert ready["pid"] == 1 and ready["uid"] == NOBODY, ready
        done = run.events("done")[0]
        assert done["acks"] == done["cmds"] >= 1, done
        assert done["rss_drops"] >= 1, done
        check_agent(agent, pid, 1)


@contextlib.contextmanager
def squatted(n):
    """/dev/shm/ramcache-<pid> for the next @n pids, owned by another user:
    what any local user could do to the old fixed names."""
    with open("/proc/sys/kernel/ns_last_pid") as f:
        last = int(f.read())
    made = {}
    try:
        for pid in range(last + 1, last + n + 1):
            path = f"/dev/shm/ramcache-{pid}"
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                continue  # someone else's: neither ours to count nor to remove
            made[pid] = path
            os.fchown(fd, SQUATTER, SQUATTER)
            os.close(fd)
        yield set(made)
    finally:
        for path in made.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


@test
def names_squatted_by_another_user_do_not_stop_an_executor():
    require_tools()
    with Memcg(LIMIT) as cg, model_dir() as d, squatted(3000) as pids:
        pid, start, agent, done = demo_served(False, d, cg)
        assert pid in pids, f"pid {pid} was not squatted: test proves nothing"
        assert os.stat(f"/dev/shm/ramcache-{pid}").st_uid == SQUATTER
        check_agent(agent, pid, pid)


@test
def sigkilled_executor_leaves_nothing_in_dev_shm():
    require_tools()
    before = shm_names()
    with model_dir() as d:
        p = subprocess.Popen(
            AS_NOBODY + [DEMO, "--policy", "agent", "--wait-agent", "30",
                         "--model-dir", d], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            page = wait_page(p.pid)
            assert page, "no page"
            assert os.stat(page).st_uid == NOBODY
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait()
        assert not memfd_page(p.pid)
    assert shm_names() == before, shm_names() - before


def documented_caps():
    """--cap-add of the Docker line in docs/containers.md, and the
    capabilities the DaemonSet adds."""
    with open(CONTAINERS_MD) as f:
        docker = set(re.findall(r"--cap-add=(\w+)", f.read()))
    with open(MANIFEST) as f:
        text = f.read()
    add = text[text.index("add:"):text.index("seccompProfile")]
    return docker, set(re.findall(r"^\s+- (\w+)", add, re.M))


def brief_agent(pid, caps, seconds=2.5):
    """The agent with no capability but @caps for @seconds; its events and
    stderr lines."""
    bset = "-all," + ",".join("+" + c.lower() for c in sorted(caps))
    p = subprocess.Popen(["setpriv", f"--bounding-set={bset}",
                          "--inh-caps=-all", AGENT, "--json", "--pid",
                          str(pid)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(seconds)
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    evs = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    return evs, err.splitlines()


@test
def agent_with_the_documented_capabilities_only():
    require_tools()
    docker, k8s = documented_caps()
    assert {"BPF", "PERFMON", "SYS_PTRACE", "DAC_READ_SEARCH"} <= docker, docker
    assert docker <= k8s, f"the DaemonSet lacks {docker - k8s}"
    ex = subprocess.Popen(container([EXECUTOR, "--entries", 4]),
                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    try:
        pid = host_pid_of(ex)
        assert wait_page(pid), "no memfd page in the container"
        evs, err = brief_agent(pid, docker)
        ctl = [e for e in evs if e.get("type") == "control"]
        assert ctl and ctl[0]["state"] == "attached", (ctl, err[-5:])
        assert ctl[0]["ns_pid"] == 1, ctl[0]
        for lack in ("SYS_PTRACE", "DAC_READ_SEARCH"):
            evs, err = brief_agent(pid, docker - {lack})
            ctl = [e for e in evs if e.get("type") == "control"]
            assert [e["state"] for e in ctl] == ["refused"], (lack, ctl)
            hint = [ln for ln in err if "refusing control page" in ln]
            assert len(hint) == 1 and f"needs CAP_{lack}" in hint[0], hint
            assert any(e.get("type") == "start" for e in evs), "not running"
    finally:
        ex.kill()
        ex.wait()


SECCOMP = os.path.join(ROOT, "contrib", "kubernetes", "seccomp",
                       "ramcache-bpf.json")
UNITSANDBOX = os.path.join(ROOT, "tests", "integration", "unitsandbox.py")


def host_caps():
    with open("/proc/self/status") as f:
        bnd = int(re.search(r"^CapBnd:\s*(\w+)", f.read(), re.M).group(1), 16)
    return bnd


def under_the_daemonsets_grants(less=()):
    """A prefix running the agent as the DaemonSet does: its capabilities
    (those this machine has to give), no new privileges, and its seccomp
    profile as the runtime loads it on x86-64 (less the calls @less),
    installed by unitsandbox.py."""
    import unitsandbox
    with open(SECCOMP) as f:
        prof = json.load(f)
    names = {n for e in prof["syscalls"] for n in e["names"]} - set(less)
    caps = [c.lower() for c in sorted(documented_caps()[1])
            if host_caps() >> unitsandbox.CAP_NAMES.index(c.lower()) & 1]
    return ("setpriv", "--bounding-set=-all," + ",".join(
                "+" + c for c in caps), "--inh-caps=-all", "--no-new-privs",
            sys.executable, UNITSANDBOX, "--seccomp", ",".join(sorted(names)),
            "--errno", str(prof["defaultErrnoRet"]), "--")


def filtered(agent):
    """The agent runs under a seccomp filter and no new privileges."""
    with open(f"/proc/{agent.proc.pid}/status") as f:
        st = dict(ln.split(":", 1) for ln in f if ":" in ln)
    return st["Seccomp"].strip() == "2" and st["NoNewPrivs"].strip() == "1"


def zombies(pid):
    """Children of @pid that exited and were not waited for."""
    out = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            with open(f"/proc/{p}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
            if st[0] == "Z" and int(st[1]) == pid:
                out.append(int(p))
    return out


def stopped_cleanly(agent):
    """SIGTERM: exit 0, and no call refused (EPERM) on the way."""
    os.kill(agent.proc.pid, signal.SIGTERM)
    assert agent.wait(10) == 0, agent.stderr[-5:]
    ex = agent.of_type("exit")
    assert ex and ex[-1]["reason"] == "terminated", ex
    refused = [ln for ln in agent.stderr if "not permitted" in ln]
    assert not refused, refused


def match_life_under_the_profile(cg, mdir, mark):
    """--match --user, as the DaemonSet: the demo of another user served,
    the metrics scraped, an --on-level command run."""
    import urllib.request
    port = free_port()
    agent = Agent("--match", mdir, "--user", NOBODY, "--metrics",
                  f"127.0.0.1:{port}", "--on-level",
                  f"warn:echo $RAMCACHE_LEVEL >>{mark}; /bin/true && "
                  f"echo ran >>{mark}", "--headroom", "64M",
                  "--inactive", "128M", "--interval", "250ms",
                  prefix=under_the_daemonsets_grants())
    run = Run(AS_NOBODY + [DEMO, "--json", "--policy", "agent",
                           "--wait-agent", 30, *WORKLOAD, "--model-dir",
                           mdir], cg)
    try:
        assert agent.wait_type("start", 60), agent.stderr
        assert filtered(agent)
        assert run.wait() == 0, run.err[-2000:]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                    timeout=10) as r:
            assert r.status == 200 and b"ramcache_" in r.read()
        # each turn of the loop reaps the commands that ended
        end = time.monotonic() + 3
        while zombies(agent.proc.pid) and time.monotonic() < end:
            time.sleep(0.1)
        assert not zombies(agent.proc.pid), "--on-level commands not reaped"
        stopped_cleanly(agent)
    finally:
        run.kill()
        agent.stop()
    assert cg.oom_kills() == 0, "OOM kill in the cgroup"
    done = run.events("demo_done")
    assert done and done[0]["acks_evicted"] >= 1, run.out[-2000:]
    with open(mark) as f:
        said = f.read().split()
    assert said[0] in ("warn", "high", "critical") and "ran" in said, said


def all_life_under_the_profile(cg):
    """--all: an executor found, its page dropped when it is killed."""
    agent = Agent("--all", "--cgroup", "/" + os.path.basename(cg.path),
                  "--interval", "250ms", prefix=under_the_daemonsets_grants())
    ex = subprocess.Popen([sys.executable, DOCEXEC, "--entries", "2",
                           "--size", "1", "--hold-s", "60"],
                          stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, preexec_fn=cg.preexec())
    try:
        assert agent.wait_type("start", 60), agent.stderr
        assert agent.wait_target(ex.pid, timeout=30), agent.stderr[-5:]
        # the target is taken on before its page is opened (next tick):
        # a kill in between ends a target that never had a page to drop
        assert agent.wait_for(lambda e: e.get("type") == "control" and
                              e.get("pid") == ex.pid and
                              e.get("state") == "attached", 30), \
            agent.events[-5:]
        ex.kill()
        ex.wait()
        drop = agent.wait_for(lambda e: e.get("type") == "control" and
                              e.get("state") == "dropped", 10)
        assert drop and drop["reason"] == "killed", agent.events[-5:]
        stopped_cleanly(agent)
    finally:
        ex.kill()
        ex.wait()
        agent.stop()


@test
def agent_lives_under_the_daemonsets_seccomp_profile():
    """The agent with the DaemonSet's capabilities, no new privileges and
    its seccomp profile (the calls strace saw the agent make): --match
    --user serves another user's demo (commands acked, no OOM kill) with
    its metrics scraped and an --on-level command run; --all finds an
    executor and drops its page when it is killed; SIGTERM ends each with
    exit 0, and no call was refused. The same filter less bpf stops the
    agent at once (exit 3): the filter is in force."""
    require_tools()
    p = subprocess.run([*under_the_daemonsets_grants(less={"bpf"}), AGENT,
                        "--duration", "1"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 3, (p.returncode, p.stderr)
    with Memcg(LIMIT) as cg, model_dir() as d, \
            tempfile.TemporaryDirectory(prefix="ramcache-test-") as marks:
        match_life_under_the_profile(cg, d, os.path.join(marks, "level"))
    with Memcg(LIMIT) as cg:
        all_life_under_the_profile(cg)


@test
def a_cgroup_scope_follows_nobody_from_a_pods_cgroup_namespace():
    """Why the DaemonSet has no --cgroup: on cgroup v2 nodes a pod gets a
    cgroup namespace of its own, and from there another pod's cgroup reads
    "/../<...>". The agent in such a namespace given the executor's cgroup
    (as the host names it, as a kubepods slice would be) in --cgroup
    follows nobody; in the host's namespace it follows the executor."""
    require_tools()
    tag = f"ramcache-test-scope-{os.getpid()}"
    with Memcg(LIMIT, name=f"{tag}-ex") as ex_cg, \
            Memcg(1024 * MiB, name=f"{tag}-agent") as ag_cg:
        sleeper = subprocess.Popen(["sleep", "513.25"],
                                   preexec_fn=ex_cg.preexec())
        try:
            for private in (True, False):
                prefix = ("sh", "-c", f"echo $$ > {ag_cg.path}/cgroup.procs"
                          " && exec unshare --cgroup \"$@\"", "sh") \
                    if private else ()
                agent = Agent("--match", "sleep 513.25", "--cgroup",
                              f"/{tag}-ex", "--interval", "250ms",
                              prefix=prefix)
                try:
                    assert agent.wait_type("start", 60), agent.stderr
                    ev = agent.wait_target(sleeper.pid, timeout=3)
                finally:
                    agent.stop()
                assert bool(ev) != private, (private, ev, agent.stderr)
        finally:
            sleeper.kill()
            sleeper.wait()


@test
def agent_in_a_cgroup_namespace_of_its_own_says_so():
    """An agent in a private cgroup namespace (Docker's default on cgroup
    v2 without --cgroupns=host) sees the executor's cgroup as "/../x",
    which it cannot name under its mount: it says once that the limit is
    not watched and what to do, and follows the process all the same; in
    the host's namespace the same process is followed in its cgroup."""
    require_tools()
    with Memcg(LIMIT, name=f"ramcache-test-cgns-ex-{os.getpid()}") as ex_cg, \
            Memcg(1024 * MiB,
                  name=f"ramcache-test-cgns-agent-{os.getpid()}") as ag_cg:
        sleeper = subprocess.Popen(["sleep", "60"],
                                   preexec_fn=ex_cg.preexec())
        try:
            for private in (True, False):
                prefix = ("sh", "-c", f"echo $$ > {ag_cg.path}/cgroup.procs"
                          " && exec unshare --cgroup \"$@\"", "sh") \
                    if private else ()
                agent = Agent("--pid", sleeper.pid, prefix=prefix)
                try:
                    ev = agent.wait_type("start", timeout=60)
                    assert ev, agent.stderr
                finally:
                    agent.stop()
                said = [ln for ln in agent.stderr if "--cgroupns=host" in ln]
                if private:
                    assert len(said) == 1, agent.stderr
                    assert f"pid {sleeper.pid}" in said[0], said
                    assert not ev.get("memcg"), ev
                else:
                    assert not said, agent.stderr
                    assert ev.get("memcg", "").endswith(
                        os.path.basename(ex_cg.path)), ev
        finally:
            sleeper.kill()
            sleeper.wait()


main()
