"""Run a command under the limits a systemd unit file sets, without systemd:
its capability bounding set and NoNewPrivileges (setpriv), its
SystemCallFilter= and SystemCallErrorNumber= (a seccomp filter built here
from systemd-analyze's own syscall groups), ProtectSystem=strict,
ProtectHome= and PrivateTmp= (a private mount namespace: / read-only, empty
/home and /tmp). PID 1 here is not systemd, so this is how the tests check
that the shipped unit leaves the agent what it needs.

    python3 unitsandbox.py UNIT -- COMMAND...       run COMMAND so limited
    python3 unitsandbox.py --seccomp NAMES -- CMD   (internal) install filter
"""
import ctypes
import errno
import os
import re
import struct
import subprocess
import sys

UNISTD = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
AUDIT_ARCH_X86_64 = 0xC000003E
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


def unit_service(path):
    """[Service] settings: {key: [value, ...]} in file order."""
    out, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            if section != "Service" or "=" not in line:
                continue
            k, v = line.split("=", 1)
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def _group(name, cache={}):
    if name not in cache:
        r = subprocess.run(["systemd-analyze", "syscall-filter", "--no-pager",
                            name], capture_output=True, text=True, check=True)
        items = set()
        for line in r.stdout.splitlines()[1:]:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            items |= _group(line) if line.startswith("@") else {line}
        cache[name] = items
    return cache[name]


def expand(word):
    return _group(word) if word.startswith("@") else {word}


def syscall_set(filters):
    """SystemCallFilter= lines as systemd combines them: the first sets an
    allow list (or a deny list with ~), later ones add to or take from it."""
    allow, deny = None, set()
    for line in filters:
        neg = line.startswith("~")
        words = line.lstrip("~").split()
        names = set().union(*(expand(w) for w in words)) if words else set()
        if allow is None and not neg:
            allow = names
        elif allow is None:
            deny |= names
        elif neg:
            allow -= names
        else:
            allow |= names
    return allow, deny


def syscall_numbers():
    nrs = {}
    with open(UNISTD) as f:
        for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)", f.read()):
            nrs[m.group(1)] = int(m.group(2))
    return nrs


def install_seccomp(allowed, err):
    """Allow-list filter: native arch only, everything else fails with err."""
    nrs = syscall_numbers()
    ins = []

    def op(code, k, jt=0, jf=0):
        ins.append(struct.pack("HBBI", code, jt, jf, k))

    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    fail = SECCOMP_RET_ERRNO | err
    op(ld_abs, 4)                       # arch
    op(jeq, AUDIT_ARCH_X86_64, 1, 0)
    op(ret, fail)
    op(ld_abs, 0)                       # nr
    op(jge, 0x40000000, 0, 1)           # x32
    op(ret, fail)
    for nr in sorted({nrs[n] for n in allowed if n in nrs}):
        op(jeq, nr, 0, 1)
        op(ret, SECCOMP_RET_ALLOW)
    op(ret, fail)
    buf = ctypes.create_string_buffer(b"".join(ins))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(ins), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog),
                  0, 0):
        raise OSError(ctypes.get_errno(), "seccomp filter")


def caps_arg(bounding):
    caps = [c.lower().removeprefix("cap_") for w in bounding
            for c in w.split()]
    return "-all" + "".join(f",+{c}" for c in caps)


def wrap(unit, argv, here=None):
    """argv run under the unit's limits (to hand to subprocess).

    here: a copy of this file where the sandbox can see it (a checkout
    under /tmp, /var/tmp or /home is hidden by PrivateTmp/ProtectHome)."""
    s = unit_service(unit)
    here = here or os.path.abspath(__file__)
    cmd = []
    allow, deny = syscall_set(s.get("SystemCallFilter", []))
    if allow is not None:
        err = s.get("SystemCallErrorNumber", ["EPERM"])[-1]
        cmd = [sys.executable, here, "--seccomp", ",".join(sorted(allow)),
               "--errno", str(getattr(errno, err)), "--"]
    setpriv = ["setpriv", "--inh-caps=-all"]
    if "CapabilityBoundingSet" in s:
        setpriv.append("--bounding-set=" + caps_arg(s["CapabilityBoundingSet"]))
    if s.get("NoNewPrivileges", ["no"])[-1] == "yes":
        setpriv.append("--no-new-privs")
    mounts = ["mount --make-rprivate /"]
    if s.get("PrivateTmp", ["no"])[-1] == "yes":
        mounts += ["mount -t tmpfs -o mode=1777 tmpfs /tmp",
                   "mount -t tmpfs -o mode=1777 tmpfs /var/tmp"]
    if s.get("ProtectHome", ["no"])[-1] in ("yes", "read-only", "tmpfs"):
        mounts.append("mount -t tmpfs -o ro,mode=0755 tmpfs /home")
    if s.get("ProtectSystem", ["no"])[-1] == "strict":
        mounts.append("mount -o remount,bind,ro /")
    umask = s.get("UMask", ["0022"])[-1]
    script = " && ".join(mounts + [f"umask {umask}", 'exec "$@"'])
    return ["unshare", "--mount", "--", "sh", "-c", script, "sh",
            *setpriv, *cmd, *argv]


def main():
    args = sys.argv[1:]
    if args[:1] == ["--seccomp"]:
        names = args[1].split(",")
        err = int(args[3])
        argv = args[args.index("--") + 1:]
        install_seccomp(names, err)
        os.execvp(argv[0], argv)
    unit, argv = args[0], args[args.index("--") + 1:]
    os.execvp("unshare", wrap(unit, argv))


if __name__ == "__main__":
    main()
