#!/usr/bin/env python3
"""Executors and the agent under Debian's docker.io (20.10), a dockerd of
this suite's own (engine.py), with the images test_podman.py uses (built
from debootstrap'd roots, never pulled):

* the demo in a container with --memory 512m, as uid 65534, served by the
  host agent given its host pid, no OOM kill;
* the agent in the image of contrib/kubernetes/Dockerfile (built from
  the agent's package, `make deb`) with the DaemonSet's settings, serving the demo in another container. Docker
  20.10 knows no CAP_BPF or CAP_PERFMON ("invalid CapAdd: unknown
  capability"): there CAP_SYS_ADMIN stands in for the two, as
  docs/containers.md says.

The rest (OOM kill without the agent, --all, kube play) is test_podman.py's.
"""

from engine import (Docker, agent_beside, agent_image, cap_mask,  # noqa: E402
                    check_demo_served, daemonset_container, demo_container,
                    executor_image, grantable, oom_killed)
from rctest import Agent, main, require_root, test  # noqa: E402

# what Docker 20.10 grants in place of capabilities it does not know
OLD_DOCKER = {"BPF": "SYS_ADMIN", "PERFMON": "SYS_ADMIN"}

DK = None


def docker():
    """The suite's dockerd with both images (built on first use)."""
    global DK
    if DK is None:
        require_root()
        DK = Docker("t")
        executor_image(DK)
        agent_image(DK)
    return DK


@test
def host_agent_serves_a_container_given_its_host_pid():
    dk = docker()
    pid = demo_container(dk, "demo-pid")
    with Agent("--pid", pid, "--interval", "1s") as ag:
        done = check_demo_served(dk, "demo-pid")
    assert not oom_killed(ag, pid)
    att = [e for e in ag.of_type("control") if e["state"] == "attached"]
    assert att and att[0]["pid"] == pid and att[0]["ns_pid"] == 1, att
    print(f"# host pid {pid} (pid 1 inside): {done['acks_evicted']} "
          f"evictions acked")


@test
def agent_container_with_the_daemonsets_grants_serves_another():
    dk = docker()
    caps = set(daemonset_container()["securityContext"]["capabilities"]["add"])
    r = dk.run("run", "--rm", "--network", "none", "--cap-drop", "ALL",
               "--cap-add", "BPF", "--entrypoint", "true",
               "localhost/ramcache-bpf:latest", check=False)
    if "unknown capability" in r.stderr:
        caps = {OLD_DOCKER.get(c, c) for c in caps}
        print(f"# docker {dk.run('version', '-f', '{{.Server.Version}}').stdout.strip()}"
              f" knows no CAP_BPF: {sorted(caps)}")
    # runc under docker fails on a capability this machine lacks (podman
    # leaves it out): ask only for what there is
    lack = caps - grantable(caps)
    if lack:
        print(f"# this machine cannot grant {sorted(lack)}: left out")
    got, done, pid = agent_beside(dk, caps - lack)
    want = cap_mask(caps - lack)
    print(f"# agent container: {got}; served pid {pid}: "
          f"{done['acks_evicted']} evictions acked")
    # granted: what was asked; kept after set-up: a part of it, enough to
    # have served the demo (no uprobes without --all: no CAP_PERFMON)
    granted, eff = int(got["CapBnd"], 16), int(got["CapEff"], 16)
    assert granted == want, (got, hex(want))
    assert eff & ~granted == 0 and eff, got
    assert not eff & cap_mask({"PERFMON"}), got


try:
    main()
finally:
    if DK is not None:
        DK.close()
