"""Run a command under the limits a systemd unit file sets, without systemd:
its credentials (CapabilityBoundingSet=, AmbientCapabilities=, SecureBits=
and NoNewPrivileges=, applied with setpriv as systemd applies them to a
service that runs as root), its SystemCallFilter= and
SystemCallErrorNumber= (a seccomp filter built here from systemd-analyze's
own syscall groups), ProtectSystem=strict, ProtectHome= and PrivateTmp= (a
private mount namespace: / read-only, empty /home and /tmp). PID 1 here is
not systemd, so this is how the quick tests check that the shipped unit
leaves the agent what it needs; test_systemd_boot.py checks that a process
gets the same credentials from real systemd.

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
# capability numbers (linux/capability.h), by name less "cap_"
CAP_NAMES = ["chown", "dac_override", "dac_read_search", "fowner", "fsetid",
             "kill", "setgid", "setuid", "setpcap", "linux_immutable",
             "net_bind_service", "net_broadcast", "net_admin", "net_raw",
             "ipc_lock", "ipc_owner", "sys_module", "sys_rawio",
             "sys_chroot", "sys_ptrace", "sys_pacct", "sys_admin",
             "sys_boot", "sys_nice", "sys_resource", "sys_time",
             "sys_tty_config", "mknod", "lease", "audit_write",
             "audit_control", "setfcap", "mac_override", "mac_admin",
             "syslog", "wake_alarm", "block_suspend", "audit_read",
             "perfmon", "bpf", "checkpoint_restore"]
# SecureBits= words and setpriv's names of the same bits
SECURE_BITS = {"keep-caps": "keep_caps", "keep-caps-locked": "keep_caps_locked",
               "no-setuid-fixup": "no_setuid_fixup",
               "no-setuid-fixup-locked": "no_setuid_fixup_locked",
               "noroot": "noroot", "noroot-locked": "noroot_locked"}


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


def cap_set(lines, everything):
    """Capability names a list setting (CapabilityBoundingSet=,
    AmbientCapabilities=) leaves, as systemd combines its lines: each adds
    (or, after ~, takes away), an empty one resets to nothing. @everything:
    what an absent setting means."""
    if not lines:
        return set(CAP_NAMES) if everything else set()
    caps = set()
    for line in lines:
        if not line:
            caps = set()
            continue
        neg = line.startswith("~")
        names = {c.lower().removeprefix("cap_")
                 for c in line.lstrip("~").split()}
        unknown = names - set(CAP_NAMES)
        if unknown:
            raise ValueError(f"unknown capabilities {sorted(unknown)}")
        caps = (set(CAP_NAMES) - names) if neg else (caps | names)
    return caps


def secure_bits(lines):
    """SecureBits= words after systemd's merging (an empty line resets)."""
    words = []
    for line in lines:
        words = [] if not line else words + line.split()
    bad = [w for w in words if w not in SECURE_BITS]
    if bad:
        raise ValueError(f"unknown SecureBits= {bad}")
    return words


def creds_args(s):
    """setpriv options for the credentials systemd gives a root service:
    bounding set cut, ambient capabilities raised (also inheritable, as
    systemd does), the secure bits, no new privileges."""
    bounding = cap_set(s.get("CapabilityBoundingSet", []), True)
    ambient = cap_set(s.get("AmbientCapabilities", []), False) & bounding
    plus = "".join(f",+{c}" for c in sorted(ambient))
    args = ["--inh-caps=-all" + plus]
    if ambient:
        args.append("--ambient-caps=" + plus[1:])
    args.append("--bounding-set=-all" + "".join(f",+{c}"
                                                for c in sorted(bounding)))
    bits = secure_bits(s.get("SecureBits", []))
    if bits:
        args.append("--securebits=" + ",".join("+" + SECURE_BITS[b]
                                               for b in bits))
    if s.get("NoNewPrivileges", ["no"])[-1] == "yes":
        args.append("--no-new-privs")
    return args


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
    setpriv = ["setpriv", *creds_args(s)]
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
