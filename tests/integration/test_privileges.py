#!/usr/bin/env python3
"""What the agent holds once it runs: a root agent keeps, after set-up,
only the capabilities its loop uses (docs/hardening.md says which and
why), in every thread (the metrics server's too), with no way back
(bounding set, no_new_privs), and still does its work with them.
"""
import os
import shutil
import socket
import subprocess
import time

from rctest import (free_port, AGENT, HELPERS, NOBODY, SYS_PYTHON, Agent,  # noqa: E402
                    Skip,
                    as_user, helpers_any_uid_reads, main, require_root,
                    test, wait_page)

CAP = {"dac_override": 1, "dac_read_search": 2, "sys_ptrace": 19,
       "ipc_lock": 14, "sys_admin": 21, "perfmon": 38, "bpf": 39,
       "checkpoint_restore": 40}
LOOP = {"bpf", "sys_ptrace", "dac_read_search"}
# --all: uprobes on libcs found later, opened through /proc/PID/map_files
ALL = {"perfmon", "checkpoint_restore"}


def caps(*names):
    return sum(1 << CAP[n] for n in names)


def expected(pid, *names):
    """@names, and CAP_IPC_LOCK when the agent @pid, its memory locked,
    may lock no more than RLIMIT_MEMLOCK without it."""
    with open(f"/proc/{pid}/limits") as f:
        memlock = next(x for x in f if x.startswith("Max locked memory"))
    if memlock.split()[3] != "unlimited":
        names += ("ipc_lock",)
    return caps(*names)


def threads_status(pid):
    """{tid: {field: value}} of every thread of @pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            out[int(tid)] = dict(line.rstrip("\n").split(":\t", 1)
                                 for line in f if ":\t" in line)
    return out


def held(pid, want):
    """Every thread of @pid holds exactly @want (effective, permitted,
    bounding), nothing inheritable or ambient, no_new_privs set."""
    st = threads_status(pid)
    for tid, s in st.items():
        got = {k: int(s[k], 16) for k in ("CapEff", "CapPrm", "CapBnd",
                                          "CapInh", "CapAmb")}
        assert got == {"CapEff": want, "CapPrm": want, "CapBnd": want,
                       "CapInh": 0, "CapAmb": 0}, (tid, s.get("Name"),
                                                   {k: hex(v) for k, v
                                                    in got.items()})
        assert s["NoNewPrivs"].strip() == "1", (tid, s["NoNewPrivs"])
    return len(st)


def scrape(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data.decode(errors="replace")


@test
def all_keeps_only_what_its_loop_uses_in_every_thread():
    """--all with --metrics: BPF, SYS_PTRACE and DAC_READ_SEARCH, PERFMON
    and CHECKPOINT_RESTORE (uprobes on libcs found later), in the main
    thread and the metrics thread; an executor of another user started
    afterwards is found and served, and the metrics page still answers."""
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")
    src = helpers_any_uid_reads()
    port = free_port()
    agent = Agent("--all", "--metrics", f"127.0.0.1:{port}", "--interval",
                  "1s")
    ex = None
    try:
        assert agent.wait_type("start", timeout=60), agent.stderr
        # a kernel that creates uprobes for CAP_SYS_ADMIN only (this
        # machine's 6.18): the agent says so and keeps it
        end = time.monotonic() + 2
        while True:
            admin = any("uprobes for CAP_SYS_ADMIN only" in ln
                        for ln in agent.stderr)
            if admin or time.monotonic() > end:
                break
            time.sleep(0.1)
        want = expected(agent.proc.pid, *LOOP, *ALL,
                        *(("sys_admin",) if admin else ()))
        n = held(agent.proc.pid, want)
        assert n >= 2, f"{n} threads: no metrics thread?"
        ex = subprocess.Popen(
            [SYS_PYTHON, os.path.join(src, "docexec.py"), "--entries", "2",
             "--size", "1", "--hold-s", "30"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=as_user(NOBODY))
        assert agent.wait_for(
            lambda e: e.get("type") == "target" and e.get("pid") == ex.pid
            and e.get("state") == "attached", 15), agent.stderr[-5:]
        assert agent.wait_for(
            lambda e: e.get("type") == "control" and e.get("pid") == ex.pid
            and e.get("state") == "attached", 10), agent.of_type("control")
        assert "ramcache_" in scrape(port)
        held(agent.proc.pid, want)
    finally:
        if ex:
            ex.kill()
            ex.wait()
        agent.stop()
    assert not [w for w in agent.of_type("warning")
                if "capabilit" in w.get("message", "")], agent.stderr


def executor_any_uid_runs():
    """tests/helpers/executor (built) copied where every uid may run it."""
    d = helpers_any_uid_reads()
    dst = os.path.join(d, "executor")
    if not os.path.exists(dst):
        shutil.copy(os.path.join(HELPERS, "executor"), dst)
        os.chmod(dst, 0o755)
    return dst


def attached_page(agent):
    return agent.wait_for(lambda e: e.get("type") == "control"
                          and e.get("state") == "attached", 10)


@test
def pid_mode_keeps_less_and_control_path_adds_dac_override():
    """--pid: no PERFMON (nothing is probed later); --control PATH also
    keeps DAC_OVERRIDE (it opens the executor's mode-0600 page, again
    when it is made anew); either way the page of the executor (another
    user's) is attached."""
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")
    src = helpers_any_uid_reads()
    path = f"/dev/shm/ramcache-test-priv-{os.getpid()}"
    memfd = subprocess.Popen(
        [SYS_PYTHON, os.path.join(src, "docexec.py"), "--entries", "2",
         "--size", "1", "--hold-s", "30"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=as_user(NOBODY))
    filed = subprocess.Popen(
        [executor_any_uid_runs(), "--path", path, "--entries", "2"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        preexec_fn=as_user(NOBODY))
    try:
        assert wait_page(memfd.pid), "no page"
        assert '"ready"' in filed.stdout.readline()
        for args, want in (((memfd.pid,), LOOP),
                           ((filed.pid, "--control", path),
                            LOOP | {"dac_override"})):
            agent = Agent("--pid", *args, "--interval", "1s")
            try:
                assert agent.wait_type("start", timeout=60), agent.stderr
                assert attached_page(agent), agent.stderr[-5:]
                held(agent.proc.pid, expected(agent.proc.pid, *want))
            finally:
                agent.stop()
    finally:
        for p in (memfd, filed):
            p.kill()
            p.wait()
        if os.path.exists(path):
            os.unlink(path)


main()
