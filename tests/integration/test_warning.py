#!/usr/bin/env python3
"""Early warning and production tracing on real kernel events: a swap storm
in a scratch memcg on zram, whole-system mode with --on-level, the metrics
endpoint, --match across a restart, and the executor library's USDT probes.

Orders are checked on the agent's JSON stream, never on wall-clock times."""
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

import promtext
from rctest import (free_port, AGENT, HELPERS, OUTPUT, ROOT, MiB, Agent, Memcg, Skip,
                    ZramSwap, go, hog, main, memcg_version, memhog, ready,
                    reap, require_root, test)

MEMHOG = os.path.join(HELPERS, "memhog")
LIBSO = os.path.join(OUTPUT, "libramcache.so")
LEVELS = ("ok", "warn", "high", "critical")
SWAP_REASONS = {"swap_in", "swap_out", "refault_anon", "refault_file"}
# what the child's storm can fire; system PSI and kswapd may be anyone's
STORM_REASONS = SWAP_REASONS | {"headroom", "eta", "memcg_reclaim",
                                "major_faults"}
SWAP_WARN = 256  # pages/s, RC_SWAP_WARN in user/core/policy.h


def at_least(level, least="warn"):
    return LEVELS.index(level) >= LEVELS.index(least)


def zram_swap(size):
    """ZramSwap, after waiting a bounded time (RAMCACHE_ZRAM_WAIT seconds,
    default 120) for another user of zram0 to let go."""
    end = time.monotonic() + float(os.environ.get("RAMCACHE_ZRAM_WAIT", 120))
    while True:
        with open("/proc/swaps") as f:
            busy = "zram0" in f.read()
        if not busy or time.monotonic() >= end:
            return ZramSwap(size)  # raises Skip if still busy
        time.sleep(2)


@test
def swap_storm_warns_before_swap_in_peaks():
    require_root()
    with zram_swap(1 << 30), Memcg(160 * MiB, swap_limit=1 << 30) as cg:
        # twice the limit, then every page again and again: a swap storm
        with memhog("--grow", "320M", "--rate", "200", "--thrash", "8",
                    preexec=cg.preexec()) as p:
            pid = ready(p)
            with Agent("--pid", pid, "--interval", "0.5s") as a:
                assert a.wait_type("start"), a.stderr
                assert a.wait_type("summary"), a.stderr  # a calm baseline
                go(p)
                assert a.wait(timeout=90) == 0, a.stderr
            ev = a.events
            sums = [i for i, e in enumerate(ev) if e["type"] == "summary"]
            peak = max(sums, key=lambda i: ev[i]["swap_in_per_s"])
            assert ev[peak]["swap_in_per_s"] >= SWAP_WARN, (
                "no swap storm happened", ev[peak])
            warn = next((i for i, e in enumerate(ev)
                         if e["type"] == "pressure" and at_least(e["level"])
                         and STORM_REASONS & set(e["reasons"])), None)
            assert warn is not None, (
                "no pressure event at warn or above for the child's storm",
                [e for e in ev if e["type"] == "pressure"])
            assert warn < peak, (ev[warn], ev[peak])
            ooms = [i for i, e in enumerate(ev) if e["type"] == "oom_kill"
                    and e["victim_pid"] == pid]
            assert all(warn < i for i in ooms), (ev[warn], ooms)
            named = set()
            for e in ev[warn:peak]:
                if e["type"] == "pressure":
                    named |= set(e["reasons"])
            assert named & SWAP_REASONS, (
                "no pressure event before the peak names swap or refaults",
                [e for e in ev[warn:peak] if e["type"] == "pressure"])
            assert at_least(ev[peak]["level"]), ev[peak]
            seq = [f'{i}:{e["type"]}:{e.get("level")}:'
                   f'{",".join(e.get("reasons", []))}'
                   for i, e in enumerate(ev) if e["type"] == "pressure"]
            print(f"# pressure events {seq}; swap-in peak at event {peak} "
                  f"({ev[peak]['swap_in_per_s']:.0f} pages/s); "
                  f"oom kills of the child at {ooms}")
            assert ev[peak]["major_faults_per_s"] > 0, ev[peak]


@test
def mapped_weights_thrash_is_shown():
    """Refaults of a mapped file (model weights in safetensors files) are
    invisible to "available memory": the summary and the level show them."""
    require_root()
    # on disk, not tmpfs (that would be shmem, swapped, not refaulted)
    fd, path = tempfile.mkstemp(prefix="ramcache-test-weights-",
                                dir="/var/tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for _ in range(192):
                f.write(os.urandom(MiB))
            f.flush()
            os.fsync(f.fileno())
            # out of the page cache, so the child's reads are charged to it
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        with Memcg(64 * MiB, swap_limit=0) as cg:
            with memhog("--map", path, "--thrash", "4", preexec=cg.preexec()) as p:
                pid = ready(p)
                with Agent("--pid", pid, "--interval", "0.5s") as a:
                    assert a.wait_type("summary"), a.stderr
                    go(p)
                    assert a.wait(timeout=60) == 0, a.stderr
        sums = a.of_type("summary")
        assert max(e.get("rss_file", 0) for e in sums) >= 16 * MiB, sums[-1]
        assert max(e["refault_file_per_s"] for e in sums) >= 2560, sums
        assert max(e["major_faults_per_s"] for e in sums) > 0, sums
        named = set()
        for e in a.of_type("pressure"):
            named |= set(e["reasons"])
        assert "refault_file" in named, a.of_type("pressure")
    finally:
        os.unlink(path)


@test
def whole_system_on_level_runs_the_command():
    require_root()
    with tempfile.TemporaryDirectory(prefix="ramcache-test-") as d:
        mark = os.path.join(d, "entered")
        cmd = f'echo "$RAMCACHE_LEVEL $RAMCACHE_REASONS" >> {mark}'
        with Memcg(48 * MiB, swap_limit=0) as cg:
            with Agent("--interval", "0.5s", "--on-level", f"warn:{cmd}") as a:
                start = a.wait_type("start")
                assert start and start["pid"] == 0, (start, a.stderr)
                # memcg reclaim, then an OOM kill, seen system-wide
                with memhog("--grow", "256M", "--rate", "64",
                            preexec=cg.preexec()) as p:
                    ready(p)
                    go(p)
                    p.wait(timeout=60)
                warn = a.wait_for(lambda e: e["type"] == "pressure"
                                  and at_least(e["level"]), timeout=10)
                assert warn, "no pressure event at warn or above"
                end = time.monotonic() + 5
                while not os.path.exists(mark) and time.monotonic() < end:
                    time.sleep(0.1)
                assert a.stop() == 0, a.stderr
            assert os.path.exists(mark), (
                "--on-level warn command did not run",
                [e for e in a.events if e["type"] == "pressure"])
            with open(mark) as f:
                first = f.readline().split()
            assert first and at_least(first[0]), first
            assert a.of_type("exit")[-1]["reason"] == "interrupted"


def stall_count(m):
    return sum(v for k, v in m.items()
               if k.startswith("ramcache_reclaim_stall_seconds_count"))


@test
def metrics_move_with_events_and_parse():
    require_root()
    port = free_port()
    addr = f"127.0.0.1:{port}"
    token = f"ramcache-metrics-{os.getpid()}"
    with Memcg(48 * MiB, swap_limit=0) as cg:
        with memhog("--tag", token, "--grow", "256M", "--rate", "64",
                    preexec=cg.preexec()) as p:
            pid = ready(p)
            # --match keeps the agent (and its endpoint) up after the OOM
            with Agent("--match", token, "--interval", "0.5s", "--metrics",
                       addr) as a:
                att = a.wait_for(lambda e: e["type"] == "target", 10)
                assert att and att["pid"] == pid, (att, a.stderr)
                before = promtext.scrape(addr)
                assert before["ramcache_oom_kills_total"] >= 0
                go(p)
                assert a.wait_for(lambda e: e["type"] == "rss"
                                  and e["rss"] >= 24 * MiB, 20), a.stderr
                during = promtext.scrape(addr)
                assert during["ramcache_rss_bytes"] >= 16 * MiB, during
                assert a.wait_for(lambda e: e["type"] == "oom_kill"
                                  and e["victim_pid"] == pid, 30), a.stderr
                assert a.wait_for(lambda e: e["type"] == "target"
                                  and e["state"] == "exited", 10)
                after = promtext.scrape(addr)
                assert (after["ramcache_oom_kills_total"]
                        > before["ramcache_oom_kills_total"]), (before, after)
                assert stall_count(after) > stall_count(before), after
                assert after['ramcache_reclaim_stall_seconds_sum'
                             '{kind="memcg"}'] > 0, after
                assert after["ramcache_level"] >= 1, after
                promtool(raw_metrics(addr))
                assert a.stop() == 0, a.stderr


@test
def cgroup_counters_are_the_targets_own():
    """The level reads the target's cgroup where the kernel counts it there:
    refaults always; PSI and swap on v2 (memory.pressure, pswpin or
    memory.swap.current), the system's on v1. On v2 the cgroup's hits of
    memory.max (memory.events) are counted."""
    require_root()
    v2 = memcg_version() == 2
    with Memcg(48 * MiB, swap_limit=0) as cg:
        with memhog("--grow", "128M", "--rate", "64",
                    preexec=cg.preexec()) as p:
            pid = ready(p)
            with Agent("--pid", pid, "--interval", "0.5s") as a:
                assert a.wait_type("start"), a.stderr
                go(p)
                assert a.wait_for(lambda e: e["type"] == "oom_kill"
                                  and e["victim_pid"] == pid, 60), a.stderr
                assert a.wait(timeout=30) == 0, a.stderr
    sums = [e for e in a.of_type("summary") if "refaults_from" in e]
    assert sums, a.events[-5:]
    last = sums[-1]
    want = "memcg" if v2 else "system"
    assert last["refaults_from"] == "memcg", last
    assert last["psi_from"] == want, last
    assert last["swap_from"] == want, last
    # v2 counts every hit of memory.max; v1's failcnt stays 0 on some
    # kernels (6.18 with a memsw limit), so there it is only reported
    assert "memcg_max_events" in last, last
    if v2:
        assert max(e["memcg_max_events"] for e in sums) > 0, last
    assert ("memcg_swap_fail_events" in last) == v2, last
    print(f"# cgroup v{2 if v2 else 1}: refaults, PSI, swap from "
          f"{last['refaults_from']}, {last['psi_from']}, {last['swap_from']};"
          f" {last['memcg_max_events']} hits of the limit")


def raw_metrics(addr):
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        return r.read().decode()


def promtool(text):
    """`promtool check metrics` (Debian: prometheus, from `make deps`)."""
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: run 'sudo make deps'"
    r = subprocess.run([tool, "check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr


@test
def match_follows_a_restarted_target():
    require_root()
    token = f"ramcache-match-{os.getpid()}"
    first = hog("--tag", token)
    second = None
    try:
        pid1 = ready(first)
        with Agent("--match", token, "--interval", "0.5s") as a:
            att = a.wait_for(lambda e: e["type"] == "target"
                             and e["state"] == "attached", 10)
            assert att and att["pid"] == pid1, (att, a.stderr)
            reap(first)
            gone = a.wait_for(lambda e: e["type"] == "target"
                              and e["state"] == "exited", 10)
            assert gone and gone["pid"] == pid1, gone
            second = hog("--tag", token)
            pid2 = ready(second)
            assert pid2 != pid1
            att = a.wait_for(lambda e: e["type"] == "target"
                             and e["state"] == "attached"
                             and e["pid"] == pid2, 10)
            assert att, [e for e in a.events if e["type"] == "target"]
            assert a.proc.poll() is None, "agent stopped with its target"
            # mlockall: the watcher is not paged out in the storm it reports
            with open(f"/proc/{a.proc.pid}/status") as f:
                locked = re.search(r"^VmLck:\s+(\d+) kB", f.read(), re.M)
            assert locked and int(locked.group(1)) > 0, "agent memory unlocked"
            assert a.stop() == 0, a.stderr
            assert a.of_type("exit")[-1]["reason"] == "interrupted"
            states = [(e["state"], e["pid"]) for e in a.of_type("target")]
            assert states == [("attached", pid1), ("exited", pid1),
                              ("attached", pid2)], states
    finally:
        reap(first)
        if second:
            reap(second)


@test
def systemd_unit_follows_the_executor_by_match():
    unit = os.path.join(ROOT, "contrib", "systemd", "ramcache-bpf.service")
    with open(unit) as f:
        text = f.read()
    exec_start = re.search(r"^ExecStart=(.*)$", text, re.M).group(1).split()
    assert exec_start[1:3] == ["--match", "${RAMCACHE_MATCH}"], exec_start
    assert re.search(r"^Restart=on-failure$", text, re.M), text
    tool = shutil.which("systemd-analyze")
    if not tool:
        raise Skip("systemd-analyze not installed")
    with tempfile.TemporaryDirectory(prefix="ramcache-test-") as d:
        path = os.path.join(d, "ramcache-bpf.service")
        with open(path, "w") as f:
            f.write(text.replace("/usr/local/bin/ramcache-bpf", AGENT))
        # its Documentation= pages as installed: verify runs man on each
        env = dict(os.environ, MANPATH=man_tree(d))
        r = subprocess.run([tool, "verify", path], capture_output=True,
                           text=True, timeout=60, env=env)
        assert r.returncode == 0 and not r.stderr.strip(), r.stderr


def man_tree(d):
    """A MANPATH folder under @d holding the pages `make man` builds (built
    now if they are not yet), in their sections, as make install puts
    them."""
    if not os.path.exists(os.path.join(OUTPUT, "man", "ramcache-bpf.8")):
        r = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT,
                            f"OUTPUT={OUTPUT}", "man"], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    tree = os.path.join(d, "man")
    for name in os.listdir(os.path.join(OUTPUT, "man")):
        section = os.path.join(tree, "man" + name.rsplit(".", 1)[1])
        os.makedirs(section, exist_ok=True)
        shutil.copy(os.path.join(OUTPUT, "man", name), section)
    return tree


@test
def executor_library_has_usdt_probes():
    if not os.path.exists(LIBSO):
        raise AssertionError(f"{LIBSO} is not built")
    r = subprocess.run(["readelf", "-n", LIBSO], capture_output=True,
                       text=True, check=True)
    probes = set(re.findall(r"Provider: (\S+)\s+Name: (\S+)", r.stdout))
    want = {("ramcache", n) for n in ("publish", "command", "ack")}
    assert want <= probes, probes


main()
