#!/usr/bin/env python3
"""The shipped systemd unit: its exposure by systemd-analyze, and the agent
really working under a model of the limits it sets (unitsandbox.py: the
capability bounding set, ambient capabilities, secure bits,
NoNewPrivileges, system-call filter, read-only system, no /home, private
/tmp) against an executor of another user: pages found, commands posted,
evictions acknowledged; and the model failing the agent where systemd
would (the noroot secure bit without ambient capabilities). That systemd
gives the same credentials is test_systemd_boot.py's part."""
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time

from rctest import AGENT, HELPERS, ROOT, Skip, main, require_root, test

import unitsandbox  # noqa: E402

UNIT = os.path.join(ROOT, "contrib", "systemd", "ramcache-bpf.service")
EXECUTOR = os.path.join(HELPERS, "executor")
MAX_EXPOSURE = 3.0
NOBODY = 65534


def exposure(unit):
    r = subprocess.run(["systemd-analyze", "security", "--offline=true",
                        "--no-pager", unit], capture_output=True, text=True,
                       timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([\d.]+)", r.stdout)
    assert m, (r.returncode, r.stdout[-500:], r.stderr[-500:])
    return float(m.group(1)), r.stdout


@test
def unit_exposure_is_at_most_3():
    if not os.access("/usr/bin/systemd-analyze", os.X_OK):
        raise RuntimeError("systemd-analyze missing: run 'make deps'")
    score, out = exposure(UNIT)
    print(f"# systemd-analyze security --offline=true: {score}")
    bad = [ln for ln in out.splitlines() if ln.startswith("✗")]
    for ln in bad:
        print(f"#   {ln[:110]}")
    assert score <= MAX_EXPOSURE, f"exposure {score} > {MAX_EXPOSURE}"


@test
def unit_sets_user_and_cgroup_for_match():
    s = unitsandbox.unit_service(UNIT)
    start = " ".join(s["ExecStart"])
    assert "--match" in start, start
    assert "--user" in start and "--cgroup" in start, start


def capbnd(pid):
    with open(f"/proc/{pid}/status") as f:
        st = dict(ln.split(":", 1) for ln in f.read().splitlines() if ":" in ln)
    return (int(st["CapBnd"].strip(), 16), int(st["CapEff"].strip(), 16),
            st["NoNewPrivs"].strip(), st["Seccomp"].strip())


@contextlib.contextmanager
def nobody_executor(tag):
    """An executor of uid nobody whose command line holds tag."""
    link = os.path.join("/dev/shm", tag)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(link)
    os.symlink(EXECUTOR, link)
    p = subprocess.Popen(["setpriv", f"--reuid={NOBODY}",
                          f"--regid={NOBODY}", "--clear-groups", link,
                          "--entries", "16"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert '"ready"' in line, (line, p.stderr.read())
        yield p
    finally:
        p.kill()
        p.wait()
        os.unlink(link)


@test
def agent_evicts_under_the_units_limits():
    """--match/--user as the unit runs it, under the unit's sandbox."""
    require_root()
    if not os.path.exists(unitsandbox.UNISTD):
        raise Skip(f"{unitsandbox.UNISTD} missing (linux-libc-dev)")
    tag = f"ramcache-test-unit-{os.getpid()}"
    s = unitsandbox.unit_service(UNIT)
    want = unitsandbox.cap_set(s.get("CapabilityBoundingSet", []), True)
    mask = sum(1 << unitsandbox.CAP_NAMES.index(c) for c in want)
    # The unit hides /tmp, /var/tmp and /home: run copies of the agent and
    # of the sandbox helper from /run, where a checkout anywhere still works.
    stage = tempfile.mkdtemp(prefix="ramcache-unit-", dir="/run")
    try:
        agent = shutil.copy2(AGENT, stage)
        here = shutil.copy2(unitsandbox.__file__, stage)
        with nobody_executor(tag):
            out, err, rc, seen = run_sandboxed(tag, agent, here)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    check_sandboxed(out, err, rc, seen, mask)


def run_sandboxed(tag, agent, here):
    """The agent as the unit runs it; its output and its CapBnd/NNP/seccomp."""
    argv = unitsandbox.wrap(UNIT, [
        agent, "--json", "--match", tag, "--user", "nobody",
        "--cgroup", "/", "--headroom", "100T", "--ack-timeout", "1s",
        "--interval", "1s", "--metrics", "127.0.0.1:0",
        "--duration", "4s"], here=here)
    a = subprocess.Popen(argv, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    seen = None
    for _ in range(40):  # the agent itself, once exec'd
        time.sleep(0.05)
        with contextlib.suppress(FileNotFoundError, subprocess.SubprocessError):
            out = subprocess.run(["pgrep", "-P", str(a.pid), "-f",
                                  "ramcache-bpf"], capture_output=True,
                                 text=True).stdout.split()
            kids = out or [str(a.pid)]
            for k in kids:
                with open(f"/proc/{k}/cmdline", "rb") as f:
                    if f.read().startswith(agent.encode()):
                        seen = capbnd(k)
            if seen:
                break
    try:
        out, err = a.communicate(timeout=30)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    return out, err, a.returncode, seen


def check_sandboxed(out, err, rc, seen, mask):
    print(f"# agent exit {rc}; stderr: {err.strip()[-300:]}")
    assert rc == 0, (rc, err)
    assert seen, "never saw the agent's process"
    bnd, eff, nnp, sec = seen
    assert bnd == mask, f"CapBnd {bnd:#x}, unit says {mask:#x}"
    assert eff and not eff & ~mask, f"CapEff {eff:#x}, unit allows {mask:#x}"
    assert nnp == "1" and sec == "2", (nnp, sec)
    evs = [__import__("json").loads(ln) for ln in out.splitlines() if ln]
    warn = [e for e in evs if e["type"] == "warning"]
    tgt = [e for e in evs if e["type"] == "target"]
    ctl = [e for e in evs if e["type"] == "control"]
    done = [e for e in evs if e["type"] == "evict_done"]
    evicted = [e for e in done if e["status"] == "evicted"]
    print(f"# under the unit's limits: {len(done)} commands answered, "
          f"{len(evicted)} evicted; warnings {[w['message'] for w in warn]}")
    assert tgt and tgt[0]["uid"] == NOBODY, tgt
    assert ctl and ctl[0]["state"] == "attached", ctl
    assert len(evicted) >= 5, done[-3:]
    assert not warn, warn


@test
def the_model_leaves_noroot_without_ambient_capabilities_nothing():
    """The unit's secure bits with no ambient capabilities: root's exec
    gains nothing and the agent exits 3, as under systemd (the model once
    left SecureBits= out and let such a unit pass)."""
    require_root()
    with open(UNIT) as f:
        text = f.read()
    text += "\n[Service]\nAmbientCapabilities=\nSecureBits=noroot noroot-locked\n"
    stage = tempfile.mkdtemp(prefix="ramcache-unit-", dir="/run")
    try:
        unit = os.path.join(stage, "noroot.service")
        with open(unit, "w") as f:
            f.write(text)
        agent = shutil.copy2(AGENT, stage)
        here = shutil.copy2(unitsandbox.__file__, stage)
        r = subprocess.run(unitsandbox.wrap(unit, [agent, "--quiet",
                                                   "--duration", "1s"],
                                            here=here),
                           capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    print(f"# exit {r.returncode}: {r.stderr.strip()[-200:]}")
    assert r.returncode == 3, (r.returncode, r.stderr)


main()
