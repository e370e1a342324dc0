#!/usr/bin/env python3
"""How --all finds executors: the uprobe on memfd_create and the scan.

Executors here are docexec (an executor written from the docs), so the
page they make passes every check the agent makes before following one.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from rctest import (AGENT, ROOT, Agent, Memcg, Skip, main,  # noqa: E402
                    own_libc, require_root, scratch_dir, test, wait_page)

DOCEXEC = os.path.join(ROOT, "tests", "helpers", "docexec.py")


def docexec(env=None, hold=20, preexec=None):
    return subprocess.Popen(
        [sys.executable, DOCEXEC, "--entries", "2", "--size", "1",
         "--hold-s", str(hold)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env, preexec_fn=preexec)


def agent_probes(pid):
    """The uprobes and uretprobes process @pid has attached (bpftool)."""
    out = subprocess.run(["bpftool", "perf", "show", "--json"],
                         capture_output=True, text=True, check=True).stdout
    return [e for e in json.loads(out)
            if e.get("pid") == pid and "probe" in e.get("fd_type", "")]


def require_agent():
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")


@test
def all_probes_memfd_create_at_entry_only():
    """--all puts one uprobe on memfd_create and no uretprobe (a uretprobe
    costs every memfd_create on the machine a second trap, whatever the
    name), and an executor started after the agent is still found by it."""
    require_agent()
    agent = Agent("--all", "--no-evict", "--interval", "10s")
    ex = None
    try:
        assert agent.wait_type("start", timeout=60), agent.stderr
        probes = agent_probes(agent.proc.pid)
        kinds = sorted(p["fd_type"] for p in probes)
        assert kinds and set(kinds) == {"uprobe"}, probes
        ex = docexec()
        ev = agent.wait_target(ex.pid)
        assert ev and ev["discovery"] == "uprobe", (ev, agent.stderr)
    finally:
        if ex:
            ex.kill()
            ex.wait()
        agent.stop()


# One call from each of N processes: a process's calls are reported once
# per RC_DISCOVER_QUIET_NS, however many it makes.
FLOOD = """
import os
for _ in range(N):
    pid = os.fork()
    if pid == 0:
        os.close(os.memfd_create("ramcache"))
        os._exit(0)
    os.waitpid(pid, 0)
"""


@test
def lost_reports_bring_a_look_through_proc_at_once():
    """When memfd_create reports fill the kernel's ring while the agent
    is not reading (here: stopped), the executor whose report was lost is
    found by a look through /proc at once, with a warning, instead of at
    the next 30 s scan."""
    require_agent()
    agent = Agent("--all", "--no-evict", "--interval", "1s")
    ex = None
    try:
        assert agent.wait_type("start", timeout=60), agent.stderr
        # past the first look through /proc (the loop's first tick)
        assert agent.wait_type("summary", timeout=10), agent.stderr
        os.kill(agent.proc.pid, signal.SIGSTOP)
        try:
            # 64 KiB of 40-byte reports (with their header): 1640 fill it
            subprocess.run([sys.executable, "-c",
                            FLOOD.replace("N", "2500")], check=True)
            ex = docexec()
            assert wait_page(ex.pid, 10), "the executor made no page"
        finally:
            os.kill(agent.proc.pid, signal.SIGCONT)
        ev = agent.wait_target(ex.pid, timeout=10)
        assert ev, ("not found within 10 s", agent.stderr[-5:])
        assert ev["discovery"] == "scan", ev
        warn = [e["message"] for e in agent.of_type("warning")
                if "discovery reports lost" in e.get("message", "")]
        assert warn, agent.of_type("warning")
    finally:
        if ex:
            ex.kill()
            ex.wait()
        agent.stop()


@test
def all_probes_the_libc_of_executors_the_scan_finds():
    """An executor on another copy of libc (as in a container image) is
    not reported by the uprobe on the agent's libc: the scan finds it, the
    agent warns, naming that libc, and probes it, so the next executor on
    the same copy is reported by the uprobe, not left for the next scan."""
    require_agent()
    with scratch_dir("libc") as d:
        lib = os.path.join(d, "lib")
        os.mkdir(lib)
        shutil.copy(own_libc(), os.path.join(lib, "libc.so.6"))
        env = dict(os.environ, LD_LIBRARY_PATH=lib)
        # one there before the agent: once it is attached, the first scan
        # is over and the next is 30 s away
        marker = docexec(hold=60)
        first = second = agent = None
        try:
            assert wait_page(marker.pid), "docexec made no page"
            agent = Agent("--all", "--no-evict", "--interval", "10s")
            assert agent.wait_type("start", timeout=60), agent.stderr
            ev = agent.wait_target(marker.pid)
            assert ev and ev["discovery"] == "scan", (ev, agent.stderr)
            first = docexec(env, hold=60)
            # the scan comes every 30 s
            ev = agent.wait_target(first.pid, timeout=45)
            assert ev and ev["discovery"] == "scan", (ev, agent.stderr)
            warn = agent.wait_for(
                lambda e: e.get("type") == "warning"
                and f"executor {first.pid} " in e.get("message", ""), 5)
            assert warn and lib in warn["message"], (warn, agent.stderr)
            second = docexec(env, hold=60)
            ev = agent.wait_target(second.pid, timeout=10)
            assert ev and ev["discovery"] == "uprobe", (ev, agent.stderr)
            probes = {p.get("filename") for p in
                      agent_probes(agent.proc.pid)}
            assert len(probes) == 2, probes
        finally:
            for p in (marker, first, second):
                if p:
                    p.kill()
                    p.wait()
            if agent:
                agent.stop()


# docexec making its page with a raw memfd_create system call, which no
# uprobe on a C library sees (as a static binary or a Go program would)
RAW_MEMFD = r"""
import ctypes, os, runpy, sys
NR = {"x86_64": 319, "aarch64": 279}[os.uname().machine]
libc = ctypes.CDLL(None, use_errno=True)

def memfd_create(name, flags=0):
    fd = libc.syscall(ctypes.c_long(NR), name.encode(), ctypes.c_uint(flags))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "memfd_create")
    return fd

os.memfd_create = memfd_create
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@test
def only_an_executor_the_uprobe_missed_is_warned_about():
    """At the scan after an executor was reported by the uprobe on the
    agent's own libc (probe 0), no warning names it (one did: "found by the
    scan of /proc, not by the uprobe, though its libc ... is probed (a raw
    memfd_create syscall?)"); an executor that makes its page with the raw
    system call is found by that scan, and named in that warning."""
    require_agent()
    with Memcg(1 << 30) as cg:
        rel = "/" + os.path.basename(cg.path)
        agent = Agent("--all", "--no-evict", "--cgroup", rel,
                      "--interval", "1s")
        execs = []
        try:
            assert agent.wait_type("start", timeout=60), agent.stderr
            # past the first scan: what is not reported now waits for the
            # next, 30 s later
            assert agent.wait_type("summary", timeout=10), agent.stderr
            execs.append(docexec(hold=60, preexec=cg.preexec()))
            ev = agent.wait_target(execs[0].pid)
            assert ev and ev["discovery"] == "uprobe", (ev, agent.stderr)
            execs.append(subprocess.Popen(
                [sys.executable, "-c", RAW_MEMFD, DOCEXEC, "--entries", "2",
                 "--size", "1", "--hold-s", "60"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                preexec_fn=cg.preexec()))
            ev = agent.wait_target(execs[1].pid, timeout=45)
            assert ev and ev["discovery"] == "scan", (ev, agent.stderr)
            time.sleep(1)
            said = [e["message"] for e in agent.of_type("warning")
                    if "not by the uprobe" in e.get("message", "")]
            named = [m for m in said if f"executor {execs[0].pid} " in m]
            assert not named, named
            raw = [m for m in said if f"executor {execs[1].pid} " in m]
            assert len(raw) == 1 and "raw memfd_create" in raw[0], said
        finally:
            for x in execs:
                x.kill()
                x.wait()
            agent.stop()


def watched_memcgs(pid):
    """The keys of the memcgs map of the agent @pid (bpftool)."""
    mine = set()
    fdinfo = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fdinfo):
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                for line in f:
                    if line.startswith("map_id:"):
                        mine.add(int(line.split()[1]))
        except OSError:
            pass
    out = subprocess.run(["bpftool", "map", "show", "--json"],
                         capture_output=True, text=True, check=True).stdout
    ids = [m["id"] for m in json.loads(out)
           if m.get("name") == "memcgs" and m["id"] in mine]
    assert len(ids) == 1, ids
    out = subprocess.run(["bpftool", "map", "dump", "id", str(ids[0]),
                          "--json"],
                         capture_output=True, text=True, check=True).stdout
    keys = set()
    for e in json.loads(out):
        k = e.get("key")
        if isinstance(k, list):  # without BTF: bytes as hex strings
            k = int.from_bytes(bytes(int(b, 16) for b in k), "little")
        keys.add(int(k))
    return keys


@test
def a_memcg_stays_watched_while_one_of_its_executors_is_followed():
    """Two executors in one memory cgroup: when one exits, the cgroup's
    memcg reclaim is still reported for the other (review R4: the watch
    was dropped with the first); when the last goes, it is dropped."""
    require_agent()
    with Memcg(1 << 30) as cg:
        rel = "/" + os.path.basename(cg.path)
        ino = os.stat(cg.path).st_ino
        agent = Agent("--all", "--no-evict", "--cgroup", rel,
                      "--interval", "10s")
        execs = []
        try:
            assert agent.wait_type("start", timeout=60), agent.stderr
            execs = [docexec(hold=60, preexec=cg.preexec()) for _ in (0, 1)]
            for x in execs:
                assert agent.wait_target(x.pid), agent.stderr
            assert ino in watched_memcgs(agent.proc.pid)
            execs[0].kill()
            execs[0].wait()
            assert agent.wait_for(lambda e: e.get("type") == "target"
                                  and e.get("pid") == execs[0].pid
                                  and e.get("state") == "exited", 10)
            assert ino in watched_memcgs(agent.proc.pid), \
                "unwatched while an executor is still followed in it"
            execs[1].kill()
            execs[1].wait()
            assert agent.wait_for(lambda e: e.get("type") == "target"
                                  and e.get("pid") == execs[1].pid
                                  and e.get("state") == "exited", 10)
            assert ino not in watched_memcgs(agent.proc.pid)
        finally:
            for x in execs:
                x.kill()
                x.wait()
            agent.stop()


if __name__ == "__main__":
    main()
