#!/usr/bin/env python3
"""--all: the limits one user (or one container) is held to, held.

Each case is an attack of the review of issue 25 on the per-user place
limit (16 of the 64 places). Executors here hold a page from the doc
(tests/helpers/docexec.py's Page) and run as other users or in another
pid namespace, all inside one scratch cgroup the agent is scoped to
(--cgroup).
"""
import contextlib
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time

from rctest import (AGENT, NOBODY, SYS_PYTHON, MiB, Agent,  # noqa: E402
                    ParentMemcg, Skip, as_user, helpers_any_uid_reads, main,
                    own_libc, py_env, require_root, scratch_dir, test)

PER_USER = 16  # places one user's executors may take
SRC = None

# A process with a page from the doc (docexec, from the helpers dir on its
# PYTHONPATH); it exits when its stdin closes. argv: words: "toggle" flips PR_SET_DUMPABLE as
# fast as it can (/proc/PID is then root's half of the time) and makes its
# page anew every 0.1 s (each a report, a new look), "fork N"
# makes it N processes with a page each, "map FILE..." (last) maps each
# FILE first (a libc to be probed).
HOLDER = r"""
import ctypes, mmap, os, sys, threading, time
from docexec import Page
args, maps = sys.argv[1:], []
for path in args[args.index("map") + 1:] if "map" in args else []:
    with open(path, "rb") as f:
        maps.append(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ))
kids = []
for _ in range(int(args[args.index("fork") + 1]) - 1 if "fork" in args
               else 0):
    pid = os.fork()
    if pid == 0:
        kids = None
        break
    kids.append(pid)
if "toggle" in args:
    prctl = ctypes.CDLL(None).prctl
    def flip():
        while True:
            prctl(4, 0, 0, 0, 0)
            prctl(4, 1, 0, 0, 0)
    threading.Thread(target=flip, daemon=True).start()
page = Page(max_entries=16, ring=8)
def end():
    sys.stdin.readline()
    for k in kids:
        os.kill(k, 9)
    os._exit(0)
if kids is not None:
    print("page", flush=True)
    threading.Thread(target=end, daemon=True).start()
while True:
    time.sleep(0.1 if "toggle" in args else 1000)
    if "toggle" in args:
        page.close()
        page = Page(max_entries=16, ring=8)
"""


def holder(dom, i, *words, uid=None, wrap=()):
    """A HOLDER in child cgroup @i of @dom, as @uid; returns once its page
    is made (the parent's, for fork)."""
    pre = dom.preexec(i)
    p = subprocess.Popen(
        [*wrap, SYS_PYTHON, "-c", HOLDER, *map(str, words)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=py_env(SRC),
        preexec_fn=pre if uid is None else as_user(uid, pre))
    assert p.stdout.readline().strip() == "page"
    return p


def attached(agent):
    """Pids followed now, from the target events so far."""
    on = set()
    for e in agent.of_type("target"):
        if e.get("state") == "attached":
            on.add(e["pid"])
        else:
            on.discard(e.get("pid"))
    return on


@contextlib.contextmanager
def scoped_agent(dom, prefix=(), procs=None, interval="10s"):
    """An --all agent scoped to @dom, started; then a list for the
    processes of the test (@procs, those started before it), killed before
    the agent is stopped."""
    agent = Agent("--all", "--no-evict", "--cgroup", dom.rel, "--interval",
                  interval, prefix=prefix)
    procs = [] if procs is None else procs
    try:
        assert agent.wait_type("start", timeout=60), agent.stderr
        yield agent, procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        agent.stop()


def require_agent():
    require_root()
    if not os.access(AGENT, os.X_OK):
        raise Skip(f"{AGENT} is not built")
    global SRC
    if SRC is None:
        SRC = helpers_any_uid_reads()


@test
def dumpable_toggling_does_not_make_a_user_root():
    """A user has 16 executors followed, the most for one user; 8 more
    flip PR_SET_DUMPABLE so that /proc/PID is root's half of the time
    (root is not limited) and make their page anew 10 times a second:
    they are counted as their real owner all the same."""
    require_agent()
    with ParentMemcg(4096 * MiB, 1, "limits") as dom, \
            scoped_agent(dom) as (agent, procs):
        procs += [holder(dom, 0, "fork", PER_USER, uid=NOBODY),
                  holder(dom, 0, "toggle", "fork", 8, uid=NOBODY)]
        most = 0
        for _ in range(50):  # 5 s of 400 new pages
            most = max(most, len(attached(agent)))
            time.sleep(0.1)
        print(f"# at most {most} of 24 executors of uid {NOBODY} followed "
              "at once", flush=True)
        assert most <= PER_USER, most



@test
def a_rootful_container_is_one_principal():
    """Root in a container (host uid 0 in its own pid namespace, as with
    rootful podman or docker) is limited like a user: of its 24
    executors 16 are followed; root's own executor on the host, started
    after them, is followed too."""
    require_agent()
    with ParentMemcg(4096 * MiB, 2, "limits") as dom, \
            scoped_agent(dom) as (agent, procs):
        procs.append(holder(dom, 0, "fork", 24, wrap=(
            "unshare", "--pid", "--fork", "--kill-child")))
        time.sleep(3)  # every report looked at (2 s)
        host = holder(dom, 1)
        procs.append(host)
        assert agent.wait_for(
            lambda e: e.get("type") == "target" and e.get("pid") ==
            host.pid and e.get("state") == "attached", 10), \
            agent.stderr[-5:]
        boxed = attached(agent) - {host.pid}
        print(f"# {len(boxed)} of the container's 24 followed", flush=True)
        assert len(boxed) == PER_USER, len(boxed)


def etc_with_subuid(d, line):
    """A copy of /etc with @line in subuid, and the command that runs a
    program with it as /etc (a mount namespace of its own)."""
    etc = os.path.join(d, "etc")
    subprocess.run(["cp", "-a", "/etc", etc], check=True)
    with open(os.path.join(etc, "subuid"), "a") as f:
        f.write(line + "\n")
    return ("unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'mount --bind "{etc}" /etc && exec "$@"', "sh")


@test
def subuids_count_as_the_user_they_belong_to():
    """/etc/subuid gives uid 64103 the range 200000-265535 (a rootless
    podman user): 20 executors of 20 of those uids and 8 of 64103 itself
    are one user's, 16 places in all."""
    require_agent()
    owner, base = 64103, 200000
    with ParentMemcg(4096 * MiB, 1, "limits") as dom, \
            scratch_dir("subuid") as d, scoped_agent(dom, etc_with_subuid(
                d, f"{owner}:{base}:65536")) as (agent, procs):
        procs += [holder(dom, 0, uid=base + i) for i in range(20)]
        procs.append(holder(dom, 0, "fork", 8, uid=owner))
        time.sleep(3)
        got = attached(agent)
        print(f"# {len(got)} of 28 executors of uid {owner} and its "
              "subuids followed", flush=True)
        assert len(got) == PER_USER, len(got)


def probes_of(pid):
    """Files the agent @pid has uprobes on (bpftool)."""
    out = subprocess.run(["bpftool", "perf", "show", "--json"],
                         capture_output=True, text=True, check=True).stdout
    return [e.get("filename") for e in json.loads(out)
            if e.get("pid") == pid and "probe" in e.get("fd_type", "")]


def libc_copies(d, n, uid=0):
    """@n copies of this machine's libc, each in a new directory of its
    own under @d, owned by @uid."""
    libc = own_libc()
    dirs = []
    for _ in range(n):
        lib = tempfile.mkdtemp(prefix="lib", dir=d)
        os.chmod(lib, 0o755)
        dst = shutil.copy(libc, os.path.join(lib, "libc.so.6"))
        os.chown(dst, uid, uid)
        dirs.append(lib)
    return dirs


def on_libc(dom, lib):
    """A HOLDER (root) running on the libc in @lib."""
    env = py_env(SRC, base=dict(os.environ, LD_LIBRARY_PATH=lib))
    p = subprocess.Popen([SYS_PYTHON, "-c", HOLDER],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=env, preexec_fn=dom.preexec(0))
    assert p.stdout.readline().strip() == "page"
    return p


@test
def failed_libc_probes_take_no_slot_and_slots_free_with_their_executor():
    """31 executors run on libc copies the agent refuses to probe (not
    root's), then one on a copy it may probe, all before the agent: the
    refused ones take none of the 32 places of the probe table, so the
    good copy is probed; when its executor exits the probe goes."""
    require_agent()
    with ParentMemcg(4096 * MiB, 1, "limits") as dom, \
            scratch_dir("libcs") as d:
        os.chmod(d, 0o755)
        decoys = libc_copies(d, 31, uid=NOBODY)
        good = libc_copies(d, 1)[0]
        procs = [on_libc(dom, lib) for lib in decoys]
        real = on_libc(dom, good)
        procs.append(real)
        with scoped_agent(dom, procs=procs) as (agent, _):
            assert agent.wait_for(
                lambda e: e.get("type") == "target" and e.get("pid") ==
                real.pid and e.get("state") == "attached", 20)
            time.sleep(1)
            probed = probes_of(agent.proc.pid)
            real.kill()
            real.wait()
            time.sleep(1.5)
            after = probes_of(agent.proc.pid)
        print(f"# probes: {len(probed)} with the good copy's executor, "
              f"{len(after)} after it exited", flush=True)
        assert len(probed) == 2, probed  # its own libc and the good copy
        assert len(after) == 1, after



def crafted_libc(path, dynsym_bytes):
    """An ELF shared object named like a libc whose .dynsym is
    @dynsym_bytes of zeros (a sparse file: it costs no disk, only the
    reader's time and memory)."""
    shstr = b"\0.dynsym\0.dynstr\0.shstrtab\0"
    dynstr = b"\0memfd_create\0"
    shoff, dynstr_off, shstr_off, data_off = 64, 512, 576, 4096
    ehdr = struct.pack("<16sHHIQQQIHHHHHH",
                       b"\x7fELF\x02\x01\x01" + bytes(9), 3, 62, 1, 0, 0,
                       shoff, 0, 64, 56, 0, 64, 4, 3)

    def shdr(name, typ, off, size, link=0, entsize=0):
        return struct.pack("<IIQQQQIIQQ", name, typ, 2, 0, off, size, link,
                           0, 8, entsize)
    shdrs = (bytes(64) + shdr(1, 11, data_off, dynsym_bytes, 2, 24)
             + shdr(9, 3, dynstr_off, len(dynstr))
             + shdr(17, 3, shstr_off, len(shstr)))
    with open(path, "wb") as f:
        f.write(ehdr)
        f.seek(shoff)
        f.write(shdrs)
        f.seek(dynstr_off)
        f.write(dynstr)
        f.seek(shstr_off)
        f.write(shstr)
        f.truncate(data_off + dynsym_bytes)
    os.chmod(path, 0o644)


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


@test
def a_crafted_libc_is_parsed_within_a_budget():
    """A root-owned "libc" (a container root's) that is an ELF file with a
    .dynsym of 512 MiB: the agent reads no more of it than a libc needs,
    and its loop is not held up by it (summaries on time)."""
    require_agent()
    with ParentMemcg(4096 * MiB, 1, "limits") as dom, \
            scratch_dir("elf") as d:
        os.chmod(d, 0o755)
        lib = os.path.join(d, "lib")
        os.mkdir(lib, 0o755)
        fake = os.path.join(lib, "libc.so.6")
        crafted_libc(fake, (512 * MiB // 24) * 24)
        witness = holder(dom, 0)
        bait = holder(dom, 0, "map", fake)
        procs = [witness, bait]
        with open(f"/proc/{bait.pid}/maps") as f:
            first = next(x.split()[-1] for x in f if "libc" in x)
        assert first == fake, first
        with scoped_agent(dom, procs=procs, interval="1s") as (agent, _):
            base = status_kib(agent.proc.pid, "VmHWM")
            assert agent.wait_for(
                lambda e: e.get("type") == "target" and e.get("pid") ==
                bait.pid and e.get("state") == "attached", 20)
            time.sleep(4)
            grew = status_kib(agent.proc.pid, "VmHWM") - base
            t_end = time.monotonic()
        # from the start to the end, summaries at least every 2 s (the
        # agent's clock is CLOCK_MONOTONIC too)
        ts = [agent.of_type("start")[0]["ts_ns"] / 1e9] + [
            e["ts_ns"] / 1e9 for e in agent.of_type("summary")
            if e.get("pid") == witness.pid and e["ts_ns"] / 1e9 < t_end] + [
            t_end]
        worst = max((b - a for a, b in zip(ts, ts[1:])), default=0)
        print(f"# the agent's peak RSS grew {grew // 1024} MiB; "
              f"{len(ts) - 2} summaries, worst gap {worst:.2f} s",
              flush=True)
        assert grew < 64 * 1024, grew
        assert worst <= 2.0, ts


# An executor that holds 192 MiB, lists entries claiming 64 MiB each and
# answers no command: each one it takes is replaced by a fresh entry, so
# the agent always has a new id of it to command.
SOAKER = r"""
import mmap, sys, time
from docexec import Page
hold = mmap.mmap(-1, 192 << 20)
for off in range(0, 192 << 20, 4096):
    hold[off] = 1
page = Page(max_entries=256, ring=64)
page.set_generation(1000)
nxt = 1_000_000
for _ in range(64):
    page.publish(nxt, 64 << 20, 0, 0, f"soak {nxt}")
    nxt += 1
print("ready", flush=True)
while True:
    page.heartbeat()
    while True:
        c = page.take()
        if c is None:
            break
        if c[1] in page.ids:
            page.remove(c[1])
        page.publish(nxt, 64 << 20, 0, 0, f"soak {nxt}")
        nxt += 1
    time.sleep(0.05)
"""


@test
def an_executor_that_never_acks_holds_no_more_than_its_share():
    """In a domain of two, one executor (192 MiB) takes every command and
    answers none, always listing fresh entries: its unanswered commands
    count as pending for no more than its share of the domain's deficit,
    so the other executor is still asked, evicts and is not OOM-killed."""
    require_agent()
    with ParentMemcg(512 * MiB, 2, "limits") as dom:
        agent = Agent("--all", "--cgroup", dom.rel, "--headroom", "64M",
                      "--inactive", "128M", "--interval", "1s")
        soaker = victim = None
        try:
            assert agent.wait_type("start", timeout=60), agent.stderr
            soaker = subprocess.Popen(
                [SYS_PYTHON, "-c", SOAKER], stdout=subprocess.PIPE, env=py_env(SRC),
                text=True, preexec_fn=as_user(NOBODY, dom.preexec(1)))
            assert soaker.stdout.readline().strip() == "ready", "soaker"
            assert agent.wait_for(
                lambda e: e.get("type") == "target" and e.get("pid") ==
                soaker.pid and e.get("state") == "attached", 30), \
                ("the soaker was not followed", agent.stderr[-5:])
            victim = subprocess.Popen(
                [SYS_PYTHON, os.path.join(SRC, "docexec.py"),
                 *map(str, ["--entries", 32, "--size", 16, "--every-ms",
                            100, "--hold-s", 2, "--wait-agent", 30])],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                preexec_fn=dom.preexec(0))
            out, _ = victim.communicate(timeout=120)
            rc = victim.returncode
        finally:
            for p in (soaker, victim):
                if p and p.poll() is None:
                    p.kill()
                    p.wait()
            agent.stop()
        asked = [e for e in agent.of_type("evict")
                 if e["pid"] == soaker.pid]
        got = [e for e in agent.of_type("evict") if e["pid"] == victim.pid]
        print(f"# {len(asked)} commands to the executor that never acks, "
              f"{len(got)} to the other; its exit {rc}, "
              f"{dom.oom_kills()} OOM kills", flush=True)
        assert got, "the other executor was never asked"
        assert rc == 0 and dom.oom_kills() == 0, (rc, dom.oom_kills())


main()
