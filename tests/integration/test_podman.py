#!/usr/bin/env python3
"""Executors and the agent under a real container engine: Debian's podman
with runc (engine.py: its own storage, settings and cgroup, removed at the
end). No image is pulled: the executors' image is tests/roots/build.sh's
`systemd` root (python3, aiohttp) imported with the demo, the ComfyUI
package and its stand-in; the agent's is contrib/kubernetes/Dockerfile,
built from the agent's package (`make deb`) on the `minbase` root
imported as debian:bookworm-slim.

* The demo in a container with --memory 512m, as uid 65534: OOM-killed
  without the agent (the workload needs about twice the limit); with the
  host agent given its host pid (--pid), served through /proc, evictions
  acked, all prompts run, no OOM kill.
* The ComfyUI package on its stand-in in such a container, found by the
  host agent with --all (scoped with --cgroup to this suite's containers),
  evicts, no OOM kill.
* The agent in a container of its image with only what the DaemonSet
  grants (contrib/kubernetes/ramcache-bpf.yaml: the host's pid namespace,
  its capabilities and no others, its seccomp profile, no new privileges,
  a read-only root), serving the demo in another container.
* `podman kube play` of the DaemonSet's pod template: what podman 4.3
  plays of it (docs/containers.md lists what it does not play): without
  hostPID the agent stops with exit 5 and the line that says why; where
  hostPID is played (podman 4.5 on), it runs with the pod's grants.
"""
import errno
import json
import os
import subprocess
import tempfile
import time

from engine import (AGENT_IMAGE, EXEC_IMAGE, MANIFEST, MEMORY,  # noqa: E402
                    SECCOMP_DIR, Podman, agent_beside, agent_image, cap_mask,
                    check_demo_served, creds, daemonset_container,
                    demo_container, executor_image, grantable, manifest,
                    oom_killed, pod_template, seccomp_profile, wait_exit)
from rctest import NOBODY, ROOT, Agent, main, require_root, test, free_port  # noqa: E402

PM = None


def podman():
    """The suite's engine with both images (built on first use)."""
    global PM
    if PM is None:
        require_root()
        PM = Podman("t")
        executor_image(PM)
        agent_image(PM)
    return PM


# ------------------------------------------------------------------ tests

@test
def demo_is_oom_killed_without_the_agent():
    """That the limit bites: the checks below can fail."""
    pm = podman()
    with Agent("--interval", "5s") as watch:  # the whole machine, no target
        watch.wait_type("start", timeout=30)
        pid = demo_container(pm, "demo-alone", policy="none")
        code, oom = wait_exit(pm, "demo-alone")
        time.sleep(1)
    kills = oom_killed(watch, pid)
    print(f"# without the agent: exit {code}, OOM kills of it {len(kills)}")
    assert code == 137 and kills, (code, kills)


@test
def host_agent_serves_a_container_given_its_host_pid():
    pm = podman()
    pid = demo_container(pm, "demo-pid")
    with Agent("--pid", pid, "--interval", "1s") as ag:
        done = check_demo_served(pm, "demo-pid")
    assert not oom_killed(ag, pid)
    att = [e for e in ag.of_type("control") if e["state"] == "attached"]
    assert att and att[0]["pid"] == pid and att[0]["ns_pid"] == 1, att
    assert att[0]["discovery"] == "memfd", att[0]
    start = ag.of_type("start")[0]
    assert start.get("memcg", "").endswith(
        pm.run("inspect", "-f", "{{.Id}}", "demo-pid").stdout.strip()), start
    print(f"# host pid {pid} (pid 1 inside): {done['acks_evicted']} "
          f"evictions acked")


@test
def host_agent_all_serves_the_comfyui_package_in_a_container():
    pm = podman()
    p = pm.popen("run", "-i", "--name", "comfy", "--memory", MEMORY,
                 "--memory-swap", MEMORY, "--user", str(NOBODY),
                 "--cgroup-parent", pm.cgroup, EXEC_IMAGE, "python3",
                 "/opt/ramcache/comfyui/tests/e2e_comfy.py", "--control",
                 "memfd", "--prompts", "12", "--mib", "64", "--steps", "8",
                 "--step-s", "0.05", stdin=subprocess.PIPE,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        first = json.loads(p.stdout.readline() or "{}")
        assert first.get("ready") and first.get("page"), (first, p.poll())
        with Agent("--all", "--cgroup", pm.cgroup, "--headroom", "96M",
                   "--inactive", "192M", "--interval", "1s") as ag:
            ag.wait_for(lambda e: e.get("type") == "control"
                        and e.get("state") == "attached", timeout=60)
            p.stdin.write("go\n")
            p.stdin.flush()
            for line in p.stdout:
                lines.append(json.loads(line))
                if lines[-1].get("done"):
                    break
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    code, oom = pm.state("comfy")
    done = lines[-1] if lines else {}
    att = [e for e in ag.of_type("control") if e["state"] == "attached"]
    print(f"# --all: attached {[(a['pid'], a['ns_pid']) for a in att]}; "
          f"evicted {done.get('evicted')}, exit {code}, OOM killed {oom}")
    assert (code, oom) == (0, False), (code, oom, p.stderr.read()[-1500:])
    assert att and not oom_killed(ag, att[0]["pid"])
    assert done.get("done") and done["evicted"] > 0, lines[-3:]
    assert all(ln.get("ok", True) for ln in lines), lines
    assert att and att[0]["ns_pid"] != att[0]["pid"], att


@test
def agent_image_is_built_from_the_agents_package():
    """contrib/kubernetes/Dockerfile installs the .deb of `make deb`: the
    agent in the image is the package's, of this tree's version."""
    pm = podman()
    r = pm.run("run", "--rm", "--network", "none", "--entrypoint",
               "dpkg-query", AGENT_IMAGE, "-S", "/usr/bin/ramcache-bpf")
    assert r.stdout.startswith("ramcache-bpf:"), r.stdout
    r = pm.run("run", "--rm", "--network", "none", AGENT_IMAGE, "--version")
    with open(os.path.join(ROOT, "VERSION")) as f:
        assert r.stdout.strip() == f"ramcache-bpf {f.read().strip()}", r.stdout


@test
def agent_container_with_the_daemonsets_grants_serves_another():
    pm = podman()
    caps = set(daemonset_container()["securityContext"]["capabilities"]["add"])
    assert "SYS_ADMIN" not in caps, caps
    got, done, pid = agent_beside(pm, caps)
    want = cap_mask(grantable(caps))
    print(f"# agent container: {got}; served pid {pid}: "
          f"{done['acks_evicted']} evictions acked")
    # granted: the DaemonSet's set; kept after set-up: what its loop uses
    # (no uprobes without --all: no CAP_PERFMON), and that served the demo
    granted, eff = int(got["CapBnd"], 16), int(got["CapEff"], 16)
    assert granted == want, (got, hex(want))
    used = cap_mask(grantable({"BPF", "SYS_PTRACE", "DAC_READ_SEARCH"}))
    assert eff & ~granted == 0 and eff & used == used, (got, hex(used))
    assert not eff & cap_mask({"PERFMON"}), got


@test
def kube_play_of_the_daemonsets_pod():
    """The pod template as a Pod (podman 4.3 plays no DaemonSet), with the
    one change podman needs for Localhost seccomp profiles (its annotation),
    the image's local name, the port moved to a free one (podman
    publishes a containerPort on the host; Kubernetes does not) and no
    restarts."""
    import yaml
    pm = podman()
    shipped = pm.run("kube", "play", MANIFEST, check=False)
    print(f"# the manifest as shipped: exit {shipped.returncode}: "
          f"{shipped.stderr.strip()[-200:]}")
    t = pod_template()
    c = t["spec"]["containers"][0]
    port = free_port()
    c["image"] = AGENT_IMAGE
    c["ports"][0]["containerPort"] = port
    c["args"][c["args"].index("--metrics") + 1] = f":{port}"
    prof = c["securityContext"]["seccompProfile"]["localhostProfile"]
    meta = dict(t["metadata"], name=f"ramcache-bpf-{os.getpid()}")
    meta["annotations"] = {
        f"container.seccomp.security.alpha.kubernetes.io/{c['name']}":
        f"localhost/{prof}"}
    # played once: an agent that stops is not started again (its exit
    # status is what is checked)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
           "spec": dict(t["spec"], restartPolicy="Never")}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(pod, f)
        f.flush()
        pm.run("kube", "play", "--seccomp-profile-root", SECCOMP_DIR, f.name)
    name = f"{meta['name']}-{c['name']}"
    end = time.monotonic() + 60
    evs, running = [], True
    while time.monotonic() < end and not evs and running:
        out = pm.run("logs", name, check=False).stdout
        evs = [json.loads(ln) for ln in out.splitlines()
               if ln.startswith('{"type":"start"')]
        running = pm.run("inspect", "-f", "{{.State.Running}}", name,
                         check=False).stdout.strip() == "true"
        time.sleep(0.5)
    pid = pm.host_pid(name) if running else 0
    hostpid = bool(pid) and os.readlink(f"/proc/{pid}/ns/pid") == \
        os.readlink("/proc/self/ns/pid")
    ro = pm.run("inspect", "-f", "{{.HostConfig.ReadonlyRootfs}}",
                name).stdout.strip()
    assert ro == "true"
    caps = set(c["securityContext"]["capabilities"]["add"])
    if not hostpid:
        # podman before 4.5 plays no hostPID: in a pid namespace of its
        # own the agent could follow nobody, and says so (exit 5)
        code, _ = wait_exit(pm, name, timeout=60)
        said = pm.run("logs", name, check=False).stderr.strip().splitlines()
        print(f"# hostPID not played: exit {code}: {said[-1:]}")
        assert code == 5 and said and "--pid=host" in said[-1], (code, said)
        return
    got = creds(pid)
    print(f"# played: {got}; read-only root {ro}; hostPID played")
    assert evs, f"the agent never started: {pm.run('logs', name).stderr[-800:]}"
    # the pod's grants are what the container has; the agent keeps of
    # them only what its loop uses (without --all: no CAP_PERFMON)
    granted, eff = int(got["CapBnd"], 16), int(got["CapEff"], 16)
    assert granted == cap_mask(grantable(caps)), got
    assert eff & ~granted == 0 and eff & cap_mask({"BPF"}), got
    assert got["Seccomp"] == "2" and got["NoNewPrivs"] == "1", got


@test
def daemonset_is_scoped_and_its_metrics_fenced():
    """What a reader of the manifest should find: a user scope on the
    match, no CAP_SYS_ADMIN, a seccomp profile, and the metrics port open
    to Prometheus only, under the name the pod monitor scrapes."""
    import yaml
    m = manifest()
    c = daemonset_container()
    args = c["args"]
    assert "--match" in args and ("--user" in args or "--cgroup" in args), args
    caps = c["securityContext"]["capabilities"]
    assert caps["drop"] == ["ALL"] and "SYS_ADMIN" not in caps["add"], caps
    assert os.path.exists(seccomp_profile())
    port = c["ports"][0]
    assert args[args.index("--metrics") + 1].endswith(f":{port['containerPort']}")
    np = m["NetworkPolicy"]["spec"]
    assert np["podSelector"]["matchLabels"] == \
        pod_template()["metadata"]["labels"], np
    assert np["policyTypes"] == ["Ingress"], np
    for rule in np["ingress"]:
        assert rule["from"] and all(f.get("podSelector") for f in rule["from"])
        assert [p["port"] for p in rule["ports"]] == [port["name"]], rule
    with open(os.path.join(ROOT, "contrib", "kubernetes",
                           "podmonitor.yaml")) as f:
        pmon = yaml.safe_load(f)["spec"]
    assert [e["port"] for e in pmon["podMetricsEndpoints"]] == [port["name"]]
    assert pmon["selector"]["matchLabels"] == pod_template()["metadata"]["labels"]


# What the agent never calls, and what someone running code in it would
# want: another process's memory (process_vm_*), a page-fault race
# (userfaultfd), a second way into the kernel (io_uring_*), the keyring
# (keyctl, add_key, request_key), namespaces (unshare, setns), ptrace,
# mounts, modules, another program's BPF filter (seccomp).
NEVER = {"process_vm_readv", "process_vm_writev", "userfaultfd",
         "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl",
         "add_key", "request_key", "unshare", "setns", "ptrace", "mount",
         "umount2", "pivot_root", "init_module", "finit_module",
         "kexec_load", "seccomp", "personality", "open_by_handle_at"}


@test
def seccomp_profile_allows_only_what_the_agent_calls():
    """The profile allows none of NEVER (as the unit's whole filter, 349
    calls, it allowed process_vm_readv, process_vm_writev, userfaultfd,
    io_uring_setup, keyctl, unshare and setns), refuses anything else with
    EPERM, and each group of calls it allows says whose they are
    (docs/hardening.md: how they were found); the agent's life under it
    is test_containers.py agent_lives_under_the_daemonsets_seccomp_profile,
    under runc agent_container_with_the_daemonsets_grants_serves_another."""
    with open(seccomp_profile()) as f:
        prof = json.load(f)
    allowed = {n for e in prof["syscalls"] for n in e["names"]}
    assert not allowed & NEVER, sorted(allowed & NEVER)
    assert prof["defaultAction"] == "SCMP_ACT_ERRNO", prof["defaultAction"]
    assert prof["defaultErrnoRet"] == errno.EPERM, prof["defaultErrnoRet"]
    for e in prof["syscalls"]:
        assert e["action"] == "SCMP_ACT_ALLOW" and not e.get("args"), e
        assert e.get("comment"), e["names"]
    assert 60 <= len(allowed) <= 100, len(allowed)


@test
def daemonset_is_confined_by_the_runtimes_apparmor_profile():
    """AppArmor is the runtime's default profile (it was Unconfined); the
    scope is --user, with no --cgroup, which would follow nobody on cgroup
    v2 nodes (test_containers.py:
    a_cgroup_scope_follows_nobody_from_a_pods_cgroup_namespace)."""
    t = pod_template()
    c = daemonset_container()
    for sc in (c.get("securityContext", {}),
               t["spec"].get("securityContext", {})):
        prof = sc.get("appArmorProfile", {})
        assert prof.get("type") != "Unconfined", prof
    assert c["securityContext"]["appArmorProfile"] == {
        "type": "RuntimeDefault"}, c["securityContext"]
    notes = t["metadata"].get("annotations", {})
    assert not [k for k, v in notes.items() if "apparmor" in k and
                v.endswith("unconfined")], notes
    args = c["args"]
    assert args[args.index("--user") + 1].isdigit(), args
    assert "--cgroup" not in args, args


try:
    main()
finally:
    if PM is not None:
        PM.close()
