#!/usr/bin/env python3
"""--match follows only the user and cgroup it is told (--user, --cgroup):
an impostor of another user, started first with the right command line,
is refused and named in a warning; the pick says why it was chosen; a
process that leaves the --cgroup is not followed."""
import contextlib
import os
import subprocess
import time

from rctest import Agent, Memcg, main, require_root, test

NOBODY = 65534


@contextlib.contextmanager
def proc(argv0, *, user=None, cgroup=None, tag):
    """sleep with a command line holding tag, as user, in cgroup."""
    cmd = ["bash", "-c", f'exec -a "{argv0} {tag}" sleep 600']
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}",
               "--clear-groups", *cmd]
    p = subprocess.Popen(cmd, preexec_fn=cgroup.preexec() if cgroup
                         else None)
    try:
        # wait for the exec: the command line shows the tag
        for _ in range(100):
            with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                if tag.encode() in f.read():
                    break
            time.sleep(0.02)
        yield p
    finally:
        p.kill()
        p.wait()


def attached(a, timeout=5):
    return a.wait_for(lambda e: e.get("type") == "target" and
                      e.get("state") == "attached", timeout=timeout)


@test
def impostor_of_another_user_is_not_followed():
    require_root()
    tag = f"ramcache-test-match-{os.getpid()}.py"
    with proc("python3", user=NOBODY, tag=tag) as imp:
        time.sleep(0.05)  # strictly older than the real one
        with proc("python3", tag=tag) as real:
            with Agent("--match", tag, "--user", "root",
                       "--interval", "10s", "--no-evict") as a:
                ev = attached(a)
                assert ev, (a.events[-5:], a.stderr)
                print(f"# {ev}")
                assert ev["pid"] == real.pid, (ev, real.pid, imp.pid)
                assert ev["uid"] == 0 and ev["refused_user"] == 1, ev
                assert "--user" in ev["why"], ev
                w = [e for e in a.of_type("warning")
                     if f"pid {imp.pid}" in e.get("message", "")]
                assert w, a.of_type("warning")


@test
def without_user_the_oldest_of_anyone_is_followed_and_warned_about():
    require_root()
    tag = f"ramcache-test-match-any-{os.getpid()}.py"
    with proc("python3", user=NOBODY, tag=tag) as imp:
        with Agent("--match", tag, "--interval", "10s", "--no-evict") as a:
            ev = attached(a)
            assert ev and ev["pid"] == imp.pid, ev
            assert [e for e in a.of_type("warning")
                    if "without --user or --cgroup" in e["message"]]


@test
def cgroup_filter_picks_the_process_in_the_service_cgroup():
    require_root()
    tag = f"ramcache-test-match-cg-{os.getpid()}.py"
    with Memcg(1 << 30) as cg:
        rel = cg.path.split("/sys/fs/cgroup", 1)[1]
        if cg.version == 1:
            rel = rel.split("/memory", 1)[1]
        with proc("python3", tag=tag) as outside:
            time.sleep(0.05)
            with proc("python3", tag=tag, cgroup=cg) as inside:
                with Agent("--match", tag, "--cgroup", cg.path,
                           "--interval", "10s", "--no-evict") as a:
                    ev = attached(a)
                    assert ev and ev["pid"] == inside.pid, \
                        (ev, inside.pid, outside.pid)
                    assert ev["refused_cgroup"] == 1, ev
                    assert ev["cgroup"].endswith(rel), (ev, rel)


@test
def moved_target_is_followed_into_its_new_cgroup():
    require_root()
    with Memcg(1 << 30) as a_cg, Memcg(
            256 << 20, name=f"ramcache-test-{os.getpid()}-moved") as b_cg:
        p = subprocess.Popen(["sleep", "600"], preexec_fn=a_cg.preexec())
        try:
            with Agent("--pid", p.pid, "--interval", "0.3s",
                       "--no-evict") as a:
                st = a.wait_type("start")
                assert st and st["memcg"] == a_cg.path, st
                b_cg.add(p.pid)
                ev = a.wait_for(lambda e: e.get("type") == "target" and
                                e.get("state") == "cgroup_changed",
                                timeout=5)
                assert ev, a.events[-5:]
                assert ev["memcg"] == b_cg.path, (ev, b_cg.path)
                s = a.wait_for(lambda e: e.get("type") == "summary" and
                               e.get("memcg_limit") == 256 << 20, timeout=5)
                assert s, [e for e in a.of_type("summary")][-2:]
        finally:
            p.kill()
            p.wait()


@test
def user_and_cgroup_need_match():
    r = subprocess.run([Agent.__init__.__globals__["AGENT"], "--user",
                        "root"], capture_output=True, text=True)
    assert r.returncode == 2, r
    assert "--match" in r.stderr, r.stderr
    r = subprocess.run([Agent.__init__.__globals__["AGENT"], "--match", "x",
                        "--user", "no-such-user-ramcache"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown user" in r.stderr, r


main()
