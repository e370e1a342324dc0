"""Real container engines as the container suites run them (test_podman.py,
test_docker.py), and what those suites share: the images, built from
tests/roots/build.sh's roots and never pulled; the demo in a container
with a memory limit; the DaemonSet's settings read from its manifest.

Each engine gets its own storage, settings and cgroup (containers sit
below /ramcache-test-ENGINE-PID, the agent's --cgroup scope), all removed
at the end, and by the next suite when a run was killed.

Podman's settings (containers.conf) are what this machine needs and
docs/containers.md tells users: runc (crun refuses a hybrid cgroup
hierarchy), the cgroupfs manager (no systemd), events in a file, and
default ulimits no higher than this process's own: podman asks for
nofile and nproc limits of 1048576 and more, and without CAP_SYS_RESOURCE
(a sandbox, a container) runc cannot set them (EPERM); podman lowers its
own nproc limit to kernel.pid_max, so nproc goes no higher. Docker's
daemon is started for the suite alone, on a socket of its own, without
iptables or a bridge.
"""
import contextlib
import ctypes
import glob
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time

import debpkg
from rctest import DEMO, NOBODY, OUTPUT, ROOT
from sysroot import SCRATCH, Sysroot, cached_root, kill_rooted_under, \
    unmount_under
import unitsandbox

MANIFEST = os.path.join(ROOT, "contrib", "kubernetes", "ramcache-bpf.yaml")
DOCKERFILE = os.path.join(ROOT, "contrib", "kubernetes", "Dockerfile")
SECCOMP_DIR = os.path.join(ROOT, "contrib", "kubernetes", "seccomp")
MEMORY = "512m"
# needs about twice MEMORY without eviction (test_containers.py's workload)
WORKLOAD = ["--prompts", "8", "--nodes", "6", "--models", "2",
            "--model-size", "96M", "--output-size", "16M", "--steps", "10",
            "--step-ms", "20"]
BASE_IMAGE = "docker.io/library/debian:bookworm-slim"
EXEC_IMAGE = f"localhost/ramcache-test-executor:{os.getpid()}"
AGENT_IMAGE = "localhost/ramcache-bpf:latest"


def ulimits():
    """nofile and nproc no higher than this process may set."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    if nproc == resource.RLIM_INFINITY or nproc > pid_max:
        nproc = pid_max
    if nofile == resource.RLIM_INFINITY:
        nofile = 1048576
    return nofile, nproc


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _remove_cgroup(name):
    """Cgroup @name (top level) in every hierarchy, and what runs in it."""
    tops = [d for d in glob.glob(f"/sys/fs/cgroup/*/{name}") +
            glob.glob(f"/sys/fs/cgroup/{name}") if os.path.isdir(d)]
    for top in tops:
        for d, _, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
            with contextlib.suppress(OSError):
                with open(os.path.join(d, "cgroup.procs")) as f:
                    for pid in f.read().split():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(pid), signal.SIGKILL)
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


class Engine:
    """One engine's command line, with this suite's own everything. Its
    commands run in the scratch directory: conmon leaves a file named
    "oom" in its working directory when a container is OOM-killed."""
    name = None
    quiet_import = ()

    def __init__(self, tag):
        self.remove_stale()
        self.dir = os.path.join(SCRATCH, f"ramcache-{self.name}-{tag}-"
                                f"{os.getpid()}-{time.monotonic_ns()}")
        self.runroot = self.dir.replace(SCRATCH, "/run", 1)
        self.cgroup = f"/ramcache-test-{self.name}-{os.getpid()}"
        os.makedirs(self.dir)
        os.makedirs(self.runroot)

    def argv(self, *args):
        raise NotImplementedError

    def run(self, *args, check=True, timeout=300, input=None):
        r = subprocess.run(self.argv(*args), env=self.env, input=input,
                           cwd=self.dir,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{self.name} {' '.join(args[:3])}...: exit "
                                 f"{r.returncode}: {r.stderr.strip()[-1500:]}")
        return r

    def popen(self, *args, **kw):
        return subprocess.Popen(self.argv(*args), env=self.env, cwd=self.dir,
                                **kw)

    @property
    def env(self):
        return dict(os.environ)

    def import_root(self, root, tag, changes=()):
        """An image of the directory @root (import of its tar)."""
        tar = subprocess.Popen(["tar", "-C", root, "--exclude=./.done",
                                "-c", "."], stdout=subprocess.PIPE)
        try:
            r = subprocess.run(self.argv("import", *self.quiet_import,
                                         *[f"--change={c}" for c in changes],
                                         "-", tag),
                               env=self.env, stdin=tar.stdout, cwd=self.dir,
                               capture_output=True, text=True, timeout=600)
        finally:
            tar.stdout.close()
            tar.wait()
        assert r.returncode == 0, f"{self.name} import {tag}: {r.stderr[-1000:]}"

    def build(self, ctx, tag):
        raise NotImplementedError

    def state(self, name):
        """(exit code, OOMKilled) of a container that ended."""
        r = self.run("inspect", "-f", "{{.State.ExitCode}} {{.State.OOMKilled}}",
                     name)
        code, oom = r.stdout.split()
        return int(code), oom == "true"

    def host_pid(self, name):
        return int(self.run("inspect", "-f", "{{.State.Pid}}",
                            name).stdout.strip())

    def clean(self):
        """Remove this suite's containers and images (engine still up)."""
        for args in (("rm", "-f", *self.names("ps", "-aq")),
                     ("rmi", "-f", *self.names("images", "-q"))):
            if len(args) > 2:
                with contextlib.suppress(Exception):
                    self.run(*args, check=False, timeout=120)

    def names(self, *args):
        with contextlib.suppress(Exception):
            return self.run(*args, check=False, timeout=60).stdout.split()
        return []

    def stop(self):
        pass

    def close(self):
        self.clean()
        self.stop()
        self.teardown(self.dir, self.runroot, self.cgroup)

    @staticmethod
    def teardown(path, runroot, cgroup):
        kill_rooted_under(path)
        _remove_cgroup(cgroup[1:])
        for d in (path, runroot):
            unmount_under(d)
            shutil.rmtree(d, ignore_errors=True)

    @classmethod
    def remove_stale(cls):
        """What a killed suite left: its daemon, containers, mounts, cgroup,
        storage."""
        for d in glob.glob(os.path.join(SCRATCH, f"ramcache-{cls.name}-*")):
            try:
                owner = int(d.rsplit("-", 2)[-2])
            except ValueError:
                continue
            if owner == os.getpid() or _alive(owner):
                continue
            runroot = d.replace(SCRATCH, "/run", 1)
            cls.kill_daemon(runroot)
            cls.teardown(d, runroot, f"/ramcache-test-{cls.name}-{owner}")

    @staticmethod
    def kill_daemon(runroot):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


class Podman(Engine):
    name = "podman"
    quiet_import = ("-q",)

    def __init__(self, tag):
        if not shutil.which("podman") or not shutil.which("runc"):
            raise RuntimeError("podman or runc missing: run 'sudo make deps'")
        super().__init__(tag)
        nofile, nproc = ulimits()
        with open(self.conf, "w") as f:
            f.write(f"""[containers]
default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{self.dir}/events.log"
[network]
network_config_dir = "{self.dir}/networks"
""")
        with open(self.storage_conf, "w") as f:
            f.write(f"""[storage]
driver = "overlay"
graphroot = "{self.dir}/storage"
runroot = "{self.runroot}/storage"
""")

    @property
    def conf(self):
        return os.path.join(self.dir, "containers.conf")

    @property
    def storage_conf(self):
        return os.path.join(self.dir, "storage.conf")

    @property
    def env(self):
        return dict(os.environ, CONTAINERS_CONF=self.conf,
                    CONTAINERS_STORAGE_CONF=self.storage_conf)

    def argv(self, *args):
        return ["podman", *args]

    def build(self, ctx, tag):
        self.run("build", "-q", "--pull=never", "--network", "host", "-t",
                 tag, ctx, timeout=900)

    def clean(self):
        with contextlib.suppress(Exception):
            self.run("pod", "rm", "-af", "-t", "0", check=False, timeout=120)
        super().clean()


def _die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Docker(Engine):
    """Debian's docker.io: a dockerd of this suite's own (own socket, data
    and exec roots, cgroup parent; no iptables, no bridge)."""
    name = "docker"
    DOCKER = "/usr/bin/docker"  # Debian's client, not another on PATH

    def __init__(self, tag):
        if not os.access(self.DOCKER, os.X_OK) or not shutil.which("dockerd"):
            raise RuntimeError("docker.io missing: run 'sudo make deps'")
        super().__init__(tag)
        self.sock = os.path.join(self.runroot, "docker.sock")
        self.log = open(os.path.join(self.dir, "dockerd.log"), "w")
        self.daemon = subprocess.Popen(
            ["dockerd", "--data-root", f"{self.dir}/data",
             "--exec-root", f"{self.runroot}/exec",
             "--pidfile", f"{self.runroot}/dockerd.pid",
             "-H", f"unix://{self.sock}", "--iptables=false",
             "--ip-masq=false", "--bridge=none",
             "--exec-opt", "native.cgroupdriver=cgroupfs",
             "--cgroup-parent", self.cgroup],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            cwd=self.dir, preexec_fn=_die_with_parent)
        end = time.monotonic() + 120
        while self.run("version", check=False, timeout=30).returncode:
            if self.daemon.poll() is not None or time.monotonic() > end:
                with open(self.log.name) as f:
                    raise RuntimeError(f"dockerd did not start: {f.read()[-1500:]}")
            time.sleep(0.5)

    def argv(self, *args):
        return [self.DOCKER, "-H", f"unix://{self.sock}", *args]

    def build(self, ctx, tag):
        self.run("build", "-q", "--network", "host", "-t", tag, ctx,
                 timeout=900)

    def stop(self):
        if self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        self.log.close()

    @staticmethod
    def kill_daemon(runroot):
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(runroot, "dockerd.pid")) as f:
                os.kill(int(f.read()), signal.SIGKILL)


# ------------------------------------------------------------------ images

def executor_image(eng):
    """The systemd root with the demo, the package and its stand-in."""
    with Sysroot("systemd", f"{eng.name}-exec") as r:
        r.copy_in(DEMO, "/usr/local/bin/ramcache-demo")
        for sub in ("comfyui", "python"):
            src = os.path.join(ROOT, sub)
            if os.path.isdir(src):
                shutil.copytree(src, f"{r.root}/opt/ramcache/{sub}",
                                symlinks=True, ignore=shutil.ignore_patterns(
                                    "__pycache__", "node_modules", "web"))
        lib = os.path.join(OUTPUT, "libramcache.so")
        if os.path.exists(lib):
            r.copy_in(lib, "/opt/ramcache/build/libramcache.so")
        eng.import_root(r.root, EXEC_IMAGE, ["WORKDIR /tmp"])


def agent_image(eng):
    """contrib/kubernetes/Dockerfile as a user builds it, from the agent's
    package (`make deb`; the packages' folder is the context), on the
    minbase root standing in for debian:bookworm-slim (no pull)."""
    eng.import_root(cached_root("minbase"), BASE_IMAGE)
    ctx = tempfile.mkdtemp(prefix=f"ramcache-{eng.name}-ctx-", dir="/var/tmp")
    try:
        shutil.copy(debpkg.build()["ramcache-bpf"], ctx)
        shutil.copy(DOCKERFILE, os.path.join(ctx, "Dockerfile"))
        eng.build(ctx, AGENT_IMAGE)
    finally:
        shutil.rmtree(ctx, ignore_errors=True)


# ------------------------------------------------------------------ the demo

def demo_container(eng, name, policy="agent"):
    """The demo detached in a container of MEMORY, as uid 65534; its host
    pid."""
    eng.run("run", "-d", "--name", name, "--memory", MEMORY,
            "--memory-swap", MEMORY, "--user", str(NOBODY),
            "--cgroup-parent", eng.cgroup, EXEC_IMAGE,
            "ramcache-demo", "--json", "--policy", policy, "--wait-agent", "60",
            "--model-dir", "/tmp", *WORKLOAD)
    return eng.host_pid(name)


def wait_exit(eng, name, timeout=300):
    eng.run("wait", name, timeout=timeout)
    return eng.state(name)


def events(eng, name, typ=None):
    out = eng.run("logs", name).stdout
    evs = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    return [e for e in evs if typ is None or e.get("type") == typ]


def check_demo_served(eng, name):
    code, oom = wait_exit(eng, name)
    logs = eng.run("logs", name).stderr[-1500:]
    assert (code, oom) == (0, False), f"exit {code}, OOM killed {oom}: {logs}"
    done = events(eng, name, "demo_done")
    assert done and done[0]["prompts"] == 8, logs
    assert done[0]["acks_evicted"] >= 1, done[0]
    return done[0]


def oom_killed(agent, pid):
    """OOM kills of @pid the agent saw (its BPF program on mark_victim):
    podman 4.3 on cgroup v1 reports none in State.OOMKilled."""
    return [e for e in agent.of_type("oom_kill") if e["victim_pid"] == pid]


# ------------------------------------------------------------------ the DaemonSet

def manifest():
    import yaml
    with open(MANIFEST) as f:
        return {d["kind"]: d for d in yaml.safe_load_all(f)}


def pod_template():
    return manifest()["DaemonSet"]["spec"]["template"]


def daemonset_container():
    return pod_template()["spec"]["containers"][0]


def seccomp_profile():
    """The file the DaemonSet's Localhost seccomp profile names."""
    sc = daemonset_container()["securityContext"]["seccompProfile"]
    assert sc["type"] == "Localhost", sc
    return os.path.join(SECCOMP_DIR, sc["localhostProfile"])


def creds(pid):
    with open(f"/proc/{pid}/status") as f:
        st = dict(ln.split(":", 1) for ln in f if ":" in ln)
    return {k: st[k].strip() for k in ("CapEff", "CapBnd", "NoNewPrivs",
                                       "Seccomp")}


def grantable(caps):
    """@caps (names without CAP_) less those this machine itself lacks (a
    sandbox may hold no CAP_SYS_RESOURCE: no engine here can grant it)."""
    with open("/proc/self/status") as f:
        bnd = int(re.search(r"^CapBnd:\s*(\w+)", f.read(), re.M).group(1), 16)
    return {c for c in caps
            if bnd >> unitsandbox.CAP_NAMES.index(c.lower()) & 1}


def cap_mask(caps):
    return sum(1 << unitsandbox.CAP_NAMES.index(c.lower()) for c in caps)


def agent_beside(eng, caps):
    """The agent in its image with the DaemonSet's settings (capabilities
    @caps), aimed at a demo in another container of this suite; the agent's
    credentials, its events and the demo's demo_done."""
    c = daemonset_container()
    sec = c["securityContext"]
    assert sec["capabilities"]["drop"] == ["ALL"], sec
    assert pod_template()["spec"]["hostPID"] is True
    pid = demo_container(eng, "demo-beside")
    args = list(c["args"])
    args[args.index("--match") + 1] = "ramcache-demo"
    args[args.index("--user") + 1] = str(NOBODY)
    args[args.index("--metrics") + 1] = "127.0.0.1:0"
    args += ["--cgroup", eng.cgroup, "--interval", "1s"]
    mounts = [f"{m['mountPath']}:{m['mountPath']}:ro"
              for m in c["volumeMounts"] if m.get("readOnly")]
    run = ["run", "-d", "--name", "agent", "--pid", "host",
           "--cgroupns", "host", "--network", "none", "--cap-drop", "ALL",
           *[f"--cap-add={x}" for x in sorted(caps)],
           f"--security-opt=seccomp={seccomp_profile()}",
           "--user", str(sec["runAsUser"]),
           *["--volume=" + m for m in mounts]]
    if sec.get("allowPrivilegeEscalation") is False:
        run.append("--security-opt=no-new-privileges")
    if sec.get("readOnlyRootFilesystem"):
        run.append("--read-only")
    eng.run(*run, AGENT_IMAGE, *args)
    try:
        # its start event comes once set-up is done and it dropped what
        # its loop does not use
        end = time.monotonic() + 60
        while time.monotonic() < end and not events(eng, "agent", "start"):
            time.sleep(0.2)
        got = creds(eng.host_pid("agent"))
        done = check_demo_served(eng, "demo-beside")
    finally:
        eng.run("stop", "-t", "5", "agent", check=False)
    evs = events(eng, "agent")
    att = [e for e in evs if e["type"] == "control"
           and e["state"] == "attached"]
    assert att and att[0]["pid"] == pid, (evs[-5:],
                                          eng.run("logs", "agent").stderr[-800:])
    assert got["Seccomp"] == "2" and got["NoNewPrivs"] == "1", got
    return got, done, pid
