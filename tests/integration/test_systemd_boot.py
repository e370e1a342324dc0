#!/usr/bin/env python3
"""The shipped systemd unit under real systemd as PID 1.

A Debian 12 root (tests/roots/build.sh systemd) gets this tree's agent
package (`make deb`, installed with dpkg: the unit comes disabled, from
dh_installsystemd), a user `comfy` with an executor service (the demo, in
comfyui.service) and a root process that matches it too (decoy.service),
and boots in QEMU on Debian 12's 6.1 kernel (tests/vm/run.sh with
RAMCACHE_VM_IMAGE; RAMCACHE_BOOT_KERNEL picks another) with systemd as PID
1. There this file runs again (--guest), from a service started at boot: it
enables and starts the unit as its header says, and checks, on that one
boot, that a process systemd starts under the unit holds exactly the
credentials the sandbox model (unitsandbox.py, computed here beforehand)
gives, and the agent those the unit grants (less what it drops after
set-up); that it follows the configured user's executor in the configured
cgroup and not the root one, and evicts; serves metrics on 127.0.0.1:9101;
comes back after a SIGKILL; that systemd-analyze security rates the running
unit at most 3.0; and that a unit setting the noroot secure bit without
ambient capabilities leaves the agent none (exit 3).

systemd-nspawn is no substitute: the agent loads its programs in an nspawn
machine given CAP_BPF, CAP_PERFMON and the bpf and perf_event_open calls,
but follows no executor there, as in any container without the host's pid
namespace (docs/containers.md).
"""
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from rctest import DEMO, ROOT, main, require_root, test  # noqa: E402
import unitsandbox  # noqa: E402

GUEST = "--guest" in sys.argv
if GUEST:
    sys.argv.remove("--guest")  # rctest.main reads a name filter there
UNIT = os.path.join(ROOT, "contrib", "systemd", "ramcache-bpf.service")
INSTALLED_UNIT = "/lib/systemd/system/ramcache-bpf.service"
SERVICE = "ramcache-bpf.service"
CREDS_SERVICE = "ramcache-creds.service"
CREDS_OUT = "/run/ramcache-creds.status"
TEST_DIR = "/opt/ramcache-test"
MODEL = TEST_DIR + "/model-creds.json"
VM_RUN = os.path.join(ROOT, "tests", "vm", "run.sh")
MAX_EXPOSURE = 3.0
CRED_FIELDS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
               "NoNewPrivs", "Seccomp")
# The executor: the demo as user comfy in its own service, long enough to
# outlast the checks; the agent is told to want memory all the time.
EXECUTOR_UNIT = """[Unit]
Description=an executor of user comfy
[Service]
User=comfy
ExecStart=/usr/local/bin/ramcache-demo --json --prompts 100000 --nodes 4 \
--models 2 --model-size 8M --output-size 2M --steps 4 --step-ms 50 \
--wait-agent 120
[Install]
WantedBy=multi-user.target
"""
# The same program as root, outside that cgroup: matches, never followed.
DECOY_UNIT = EXECUTOR_UNIT.replace("User=comfy\n", "").replace(
    "an executor of user comfy", "a root process that matches too")
# Run at boot: this file's checks, their output on the second serial port
# (tests/vm/run.sh streams it), then the exit code, then power off.
CHECK_UNIT = f"""[Unit]
Description=the checks of test_systemd_boot.py
After=multi-user.target
[Service]
ExecStart=/bin/sh {TEST_DIR}/check.sh
[Install]
WantedBy=multi-user.target
"""
CHECK_SH = f"""out=/dev/ttyS1
stty -F $out raw -echo 2>/dev/null
echo "# vm: kernel $(uname -r), cgroup v2, systemd $(systemctl --version |
    sed -n '1s/^systemd \\([0-9]*\\).*/\\1/p') as PID 1" >$out
python3 {TEST_DIR}/test_systemd_boot.py --guest >$out 2>&1
echo "ramcache-vm-exit: $?" >$out
systemctl poweroff
"""
# A command for --on-level: what it holds goes to the journal.
CAPDUMP = "/usr/local/bin/ramcache-capdump"
CAPDUMP_SH = """#!/bin/sh
sed -n 's/^\\(Cap[A-Za-z]*\\):/on-level \\1:/p' /proc/self/status
"""
SETTINGS = {
    "RAMCACHE_MATCH": "ramcache-demo",
    "RAMCACHE_USER": "comfy",
    "RAMCACHE_CGROUP": "/system.slice/comfyui.service",
    "RAMCACHE_FLAGS": "--json --metrics 127.0.0.1:9101 --interval 1s "
                      f"--headroom 100T --ack-timeout 1s --on-level warn:{CAPDUMP}",
}


# ------------------------------------------------------------------ host

def model_creds(unit):
    """The credentials unitsandbox.py gives a process under @unit."""
    stage = tempfile.mkdtemp(prefix="ramcache-unit-", dir="/run")
    try:
        here = shutil.copy2(unitsandbox.__file__, stage)
        r = subprocess.run(unitsandbox.wrap(unit, ["cat", "/proc/self/status"],
                                            here=here),
                           capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    assert r.returncode == 0, r.stderr
    return parse_creds(r.stdout)


def parse_creds(status):
    st = dict(ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
    return {k: st[k].strip() for k in CRED_FIELDS}


def prepare(r):
    """The root as its user would set it up, plus these checks."""
    import debpkg
    deb = debpkg.build()["ramcache-bpf"]
    r.copy_in(deb, "/tmp/ramcache-bpf.deb", 0o644)
    r.chroot("dpkg", "-i", "/tmp/ramcache-bpf.deb")
    os.unlink(r.root + "/tmp/ramcache-bpf.deb")
    r.chroot("useradd", "--system", "--no-create-home", "--shell",
             "/usr/sbin/nologin", "comfy")
    r.copy_in(DEMO, "/usr/local/bin/ramcache-demo")
    r.write(CAPDUMP, CAPDUMP_SH, 0o755)
    r.write("/etc/systemd/system/comfyui.service", EXECUTOR_UNIT)
    r.write("/etc/systemd/system/decoy.service", DECOY_UNIT)
    path = "/etc/default/ramcache-bpf"
    text = r.read(path)
    for k, v in SETTINGS.items():
        text, n = re.subn(rf"^{k}=.*$", f"{k}={v}", text, flags=re.M)
        assert n == 1, f"{path} from the package has no {k}= line"
    r.write(path, text)
    here = os.path.dirname(os.path.abspath(__file__))
    for f in ("test_systemd_boot.py", "unitsandbox.py",
              "rctest/__init__.py"):
        r.copy_in(os.path.join(here, f), f"{TEST_DIR}/{f}", 0o644)
    r.write(MODEL, json.dumps(model_creds(UNIT)))
    r.write(f"{TEST_DIR}/check.sh", CHECK_SH)
    r.write("/etc/systemd/system/ramcache-check.service", CHECK_UNIT)
    r.chroot("systemctl", "enable", "comfyui.service", "decoy.service",
             "ramcache-check.service")
    # no udev in this root: the serial console's device never shows up,
    # and its getty would hold the boot up for 90 s
    r.chroot("systemctl", "mask", "serial-getty@ttyS0.service")
    r.write("/etc/hostname", "ramcache-unit\n")


def host():
    """Build the root, boot it, pass on what its checks print."""
    from sysroot import Sysroot
    require_root()
    for tool in ("qemu-system-x86_64", "mkfs.ext4", "debootstrap"):
        if not shutil.which(tool):
            print(f"not ok 1 - boot # {tool} missing: run 'sudo make deps'")
            return 1
    with Sysroot("systemd", "unit") as r:
        prepare(r)
        img = r.image()
        env = dict(os.environ, RAMCACHE_VM_IMAGE=img,
                   RAMCACHE_VM_KERNEL=os.environ.get("RAMCACHE_BOOT_KERNEL",
                                                     "6.1"),
                   RAMCACHE_VM_TIMEOUT="1200")
        p = subprocess.Popen([VM_RUN], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             errors="replace")
        for line in p.stdout:
            print(line, end="", flush=True)
        return p.wait()


# ------------------------------------------------------------------ guest

def run(*argv, check=True, timeout=240):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: exit {r.returncode}: "
                             f"{r.stderr.strip()[-1000:]}")
    return r


def show(unit, *props):
    r = run("systemctl", "show", unit, *[f"-p{p}" for p in props])
    return dict(ln.split("=", 1) for ln in r.stdout.splitlines() if "=" in ln)


STARTED = []


def started():
    """The unit, enabled and started as its header says (once)."""
    if not STARTED:
        run("systemctl", "daemon-reload")
        run("systemctl", "enable", "--now", SERVICE)
        STARTED.append(True)


def events(since=""):
    """The agent's JSON events in the journal (this boot)."""
    argv = ["journalctl", "-b", "-u", SERVICE, "-o", "cat", "--no-pager"]
    if since:
        argv += ["--after-cursor", since]
    out = run(*argv).stdout
    return [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]


def cursor():
    r = run("journalctl", "-b", "-u", SERVICE, "-n", "0", "--show-cursor",
            "--no-pager")
    found = re.search(r"-- cursor: (\S+)", r.stdout)
    return found.group(1) if found else ""


def wait_events(pred, timeout=30.0, since=""):
    end = time.monotonic() + timeout
    while True:
        evs = events(since)
        if pred(evs):
            return evs
        if time.monotonic() > end:
            raise AssertionError(f"not seen in {timeout} s; last events: "
                                 f"{[e.get('type') for e in evs[-15:]]} "
                                 f"{[e for e in evs if e['type'] != 'summary'][-4:]}")
        time.sleep(0.5)


def main_pid(unit=SERVICE):
    return int(show(unit, "MainPID")["MainPID"])


def creds(pid):
    with open(f"/proc/{pid}/status") as f:
        return parse_creds(f.read())


def metrics():
    import urllib.request
    with urllib.request.urlopen("http://127.0.0.1:9101/metrics",
                                timeout=5) as r:
        return r.read().decode()


def listening(port):
    """Addresses (hex, as /proc/net/tcp says) listening on TCP @port."""
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                addr, p = fields[1].rsplit(":", 1)
                if fields[3] == "0A" and int(p, 16) == port:
                    found.append(addr)
    return found


# ------------------------------------------------------------------ checks

@test
def unit_starts_and_loads_the_bpf_programs():
    started()
    evs = wait_events(lambda e: any(x["type"] in ("start", "error")
                                    for x in e))
    errors = [e for e in evs if e["type"] == "error"]
    state = show(SERVICE, "ActiveState", "SubState", "ExecMainStatus")
    print(f"# {SERVICE}: {state}")
    assert not errors, errors
    assert state["ActiveState"] == "active", state


def exec_creds():
    """The credentials systemd gives a process it starts under the
    installed unit: the unit's text with cat of its status for a command,
    as a oneshot service of its own (the agent itself drops some after
    set-up)."""
    with open(INSTALLED_UNIT) as f:
        text = f.read()
    text, n = re.subn(r"^ExecStart=.*$", "ExecStart=/bin/cat /proc/self/status",
                      text, flags=re.M)
    assert n == 1, "the unit has no one ExecStart= line"
    text = re.sub(r"^Type=.*$", "Type=oneshot", text, flags=re.M)
    text = re.sub(r"^Restart=.*$", "Restart=no", text, flags=re.M)
    text = text.replace("[Service]\n", "[Service]\nStandardOutput="
                        f"truncate:{CREDS_OUT}\n", 1)
    with open(f"/run/systemd/system/{CREDS_SERVICE}", "w") as f:
        f.write(text)
    run("systemctl", "daemon-reload")
    run("systemctl", "start", CREDS_SERVICE)
    with open(CREDS_OUT) as f:
        return parse_creds(f.read())


@test
def agent_holds_what_the_unit_grants_and_the_model_agrees():
    started()
    s = unitsandbox.unit_service(INSTALLED_UNIT)
    caps = unitsandbox.cap_set(s.get("CapabilityBoundingSet", []), True)
    mask = sum(1 << unitsandbox.CAP_NAMES.index(c) for c in caps)
    bpf = 1 << unitsandbox.CAP_NAMES.index("bpf")
    at_exec = exec_creds()
    agent = creds(main_pid())
    with open(MODEL) as f:
        model = json.load(f)
    print(f"# under systemd, at exec: {at_exec}")
    print(f"# under the model:        {model}")
    print(f"# the agent, running:     {agent}")
    for got in (at_exec, agent):
        assert int(got["CapBnd"], 16) == mask, (got, hex(mask))
        assert got["NoNewPrivs"] == "1" and got["Seccomp"] == "2", got
    assert int(at_exec["CapEff"], 16) == mask, (at_exec, hex(mask))
    assert model == at_exec, "the model and systemd differ"
    # after set-up the agent keeps of the grant what its loop uses
    eff = int(agent["CapEff"], 16)
    assert eff & ~mask == 0 and eff & bpf, agent


@test
def an_on_level_command_holds_no_more_than_the_agent():
    """The noroot secure bit: a command the agent runs gets no capability
    back from root's uid (none the agent has dropped, once it drops)."""
    started()
    wait_journal = time.monotonic() + 60
    while True:
        out = run("journalctl", "-b", "-u", SERVICE, "-o", "cat",
                  "--no-pager").stdout
        got = dict(re.findall(r"^on-level (Cap\w+):\s*(\w+)$", out, re.M))
        if "CapEff" in got or time.monotonic() > wait_journal:
            break
        time.sleep(0.5)
    agent = creds(main_pid())
    print(f"# --on-level command: {got}; the agent: {agent}")
    assert "CapEff" in got, "the --on-level command never ran"
    for k in ("CapEff", "CapPrm", "CapAmb"):
        assert not int(got[k], 16) & ~int(agent["CapPrm"], 16), (k, got, agent)


@test
def follows_the_configured_users_executor_and_evicts():
    started()
    exec_pid = main_pid("comfyui.service")
    decoy_pid = main_pid("decoy.service")
    uid = int(run("id", "-u", "comfy").stdout)

    def served(evs):
        return len([e for e in evs if e["type"] == "evict_done"
                    and e.get("status") == "evicted"]) >= 3
    evs = wait_events(served, timeout=90)
    targets = [e for e in evs if e["type"] == "target"]
    attached = [e for e in evs if e["type"] == "control"
                and e["state"] == "attached"]
    print(f"# executor pid {exec_pid} (uid {uid}), decoy pid {decoy_pid}: "
          f"targets {[(t['pid'], t.get('uid')) for t in targets]}")
    assert targets and all(t["pid"] == exec_pid for t in targets), targets
    assert targets[0]["uid"] == uid, targets
    assert attached and attached[0]["pid"] == exec_pid, attached


@test
def serves_metrics_on_loopback_9101():
    started()
    exec_pid = main_pid("comfyui.service")
    text = metrics()
    assert re.search(rf'^ramcache_executor_info\{{.*pid="{exec_pid}"',
                     text, re.M), text[-1500:]
    assert re.search(r"^ramcache_executor_up\{.*\} 1$", text, re.M)
    addrs = listening(9101)
    assert addrs == ["0100007F"], f"9101 bound on {addrs}, not 127.0.0.1 only"


@test
def restarts_after_a_kill():
    started()
    old = main_pid()
    assert old > 0, "the agent is not running"  # kill(0) would end the checks
    mark = cursor()
    restarts = int(show(SERVICE, "NRestarts")["NRestarts"])
    os.kill(old, 9)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        st = show(SERVICE, "MainPID", "ActiveState", "NRestarts")
        if int(st["MainPID"]) not in (0, old) and st["ActiveState"] == "active":
            break
        time.sleep(0.5)
    print(f"# after SIGKILL of {old}: {st}")
    assert int(st["NRestarts"]) == restarts + 1, st
    wait_events(lambda e: any(x["type"] == "control" and
                              x["state"] == "attached" for x in e),
                timeout=60, since=mark)
    assert "ramcache_executor_up" in metrics()


@test
def running_unit_exposure_is_at_most_3():
    started()
    r = run("systemd-analyze", "security", "--no-pager", SERVICE)
    found = re.search(r"Overall exposure level for \S+: ([\d.]+)", r.stdout)
    assert found, r.stdout[-800:]
    score = float(found.group(1))
    print(f"# systemd-analyze security (the running unit): {score}")
    assert score <= MAX_EXPOSURE, score


@test
def noroot_without_ambient_capabilities_leaves_none():
    """That the check can fail: root with the noroot secure bit and no
    ambient capabilities gets none, and the agent ends with exit 3 (kept
    down by RestartPreventExitStatus=)."""
    started()
    dropin = "/etc/systemd/system/ramcache-bpf.service.d/noroot.conf"
    os.makedirs(os.path.dirname(dropin), exist_ok=True)
    with open(dropin, "w") as f:
        f.write("[Service]\nSecureBits=noroot noroot-locked\n"
                "AmbientCapabilities=\n")
    try:
        run("systemctl", "daemon-reload")
        run("systemctl", "restart", SERVICE, check=False)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            st = show(SERVICE, "ActiveState", "ExecMainStatus", "Result")
            if st["ActiveState"] in ("failed", "inactive"):
                break
            time.sleep(0.3)
        print(f"# with SecureBits=noroot noroot-locked, no ambient: {st}")
        assert st["ExecMainStatus"] == "3", st
    finally:
        with contextlib.suppress(OSError):
            os.unlink(dropin)
        run("systemctl", "daemon-reload")
        run("systemctl", "restart", SERVICE, check=False)


if GUEST:
    main()
else:
    sys.exit(host())
