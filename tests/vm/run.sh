#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# Run one command inside one of Debian 12's packaged kernels under QEMU (6.1,
# or 6.12 with RAMCACHE_VM_KERNEL=6.12), with cgroup v2 and the memory
# controller on, and exit with the command's exit code.
#
#   tests/vm/run.sh [CMD ARG...]      (default: an interactive-less `uname -a`)
#
# The guest sees this machine's root file system read-only over 9p under a
# writable overlay on a scratch ext4 disk (so files it writes have a real
# page cache, as on a booted machine), and runs the command on the same paths
# with the same binaries; nothing it writes comes back. The command's output (stdout and
# stderr together) streams to our stdout; kernel messages go to a log that is
# printed when the guest does not report an exit code.
#
# With RAMCACHE_VM_IMAGE=FILE (an ext4 image of a whole root, which the
# guest writes to) the guest boots that image with its own init instead
# (RAMCACHE_VM_INIT, default /sbin/init: systemd as PID 1), and the host's
# root is not shared; no command is given, and what the image's init writes
# to /dev/ttyS1 streams to our stdout: it ends with a line
# "ramcache-vm-exit: N" and powers off.
#
# Settings (environment): RAMCACHE_VM_KERNEL (6.1 or 6.12, default 6.1;
# tests/vm/kernel.sh), RAMCACHE_VM_MEM (MiB, default 4096),
# RAMCACHE_VM_CPUS (2), RAMCACHE_VM_DISK (scratch disk, 8G),
# RAMCACHE_VM_TIMEOUT (seconds, 1500),
# RAMCACHE_VM_ACCEL (kvm|tcg; default: kvm only where it can run a stock
# kernel), RAMCACHE_VM_TCG_THREAD (single|multi, default single),
# RAMCACHE_VM_ENV (names of variables to pass in, besides
# OUTPUT PYTHON RAMCACHE_* ).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
MEM=${RAMCACHE_VM_MEM:-4096}
CPUS=${RAMCACHE_VM_CPUS:-2}
TIMEOUT=${RAMCACHE_VM_TIMEOUT:-1500}

die() { echo "ramcache-bpf: failed to $*" >&2; exit 2; }

IMAGE=${RAMCACHE_VM_IMAGE:-}
[ -z "$IMAGE" ] || [ -f "$IMAGE" ] || die "boot $IMAGE: no such image"
[ -n "$IMAGE" ] || [ $# -gt 0 ] || set -- uname -a
[ "$(id -u)" = 0 ] || die "start the VM: not root (run as root)"
for t in qemu-system-x86_64 busybox cpio modprobe mkfs.ext4; do
	command -v $t >/dev/null || die "find $t (run 'sudo make deps')"
done
BUSYBOX=$(command -v busybox)
file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
	ldd "$BUSYBOX" 2>&1 | grep -q 'not a dynamic' ||
	die "use $BUSYBOX: it is not the static busybox (install busybox-static)"

kdir=$("$HERE/kernel.sh" "${RAMCACHE_VM_KERNEL:-6.1}") || exit 2
kver=$(basename "$kdir")

# A stock kernel runs under KVM only on a real KVM host: the nested PVM
# device some clouds offer (kvm_pvm) hangs or fails with it.
accel=${RAMCACHE_VM_ACCEL:-}
if [ -z "$accel" ]; then
	accel=tcg
	if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] &&
		{ [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then
		accel=kvm
	fi
fi
# Under TCG both vCPUs run on one host thread: with a thread each (QEMU
# 7.2's thread=multi) a vCPU runs code the other has just patched as it was
# before: 6.12 dies within seconds of a tracepoint switched on and off under
# page faults ("Oops: int3" at trace_rss_stat+0x1: text_poke's int3 run
# after the patch was done), with no agent at all (tests/vm/patch-stress.sh);
# 6.1 survived 2,297 switches. One thread ran the VM suites no slower here
# (6.1's six suites: 463 s, against 521 s with thread=multi in a CI run).
tcg_thread=${RAMCACHE_VM_TCG_THREAD:-single}
case $tcg_thread in
single | multi) ;;
*) die "use RAMCACHE_VM_TCG_THREAD=$tcg_thread: expected single or multi" ;;
esac
case $accel in
kvm) accel_args=(-accel kvm -cpu host) ;;
tcg) accel_args=(-accel "tcg,thread=$tcg_thread" -cpu max) ;;
*) die "use RAMCACHE_VM_ACCEL=$accel: expected kvm or tcg" ;;
esac

tmp=$(mktemp -d /tmp/ramcache-vm.XXXXXX)
qpid=
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- initramfs: static busybox and the modules that reach the root --------
ird=$tmp/initramfs
mkdir -p "$ird"/{bin,mod,proc,sys,dev,lower,rw,newroot}
cp "$BUSYBOX" "$ird/bin/busybox"
: >"$ird/mod/order"
for m in virtio_pci 9pnet_virtio 9p overlay virtio_blk ext4; do
	modprobe -d "$kdir" -S "$kver" --show-depends "$m" | while read -r op path _; do
		[ "$op" = insmod ] || continue
		b=$(basename "$path")
		grep -qx "$b" "$ird/mod/order" && continue
		cp "$path" "$ird/mod/$b"
		echo "$b" >>"$ird/mod/order"
	done
done
cp "$HERE/initramfs-init.sh" "$ird/init"
chmod +x "$ird/init"
(cd "$ird" && find . | cpio -o -H newc --quiet) >"$tmp/initrd"

# --- the command, run by tests/vm/guest.sh on the guest's root ------------
{
	echo "cd $(printf %q "$PWD")"
	for v in PATH HOME OUTPUT PYTHON ${RAMCACHE_VM_ENV:-} $(compgen -e | grep '^RAMCACHE_' || true); do
		[ -n "${!v+x}" ] && echo "export $v=$(printf %q "${!v}")"
	done
	echo "export RAMCACHE_IN_VM=1 TERM=dumb"
	printf 'exec'
	printf ' %q' "$@"
	echo
} >"$tmp/cmd"

: >"$tmp/out"
if [ -n "$IMAGE" ]; then
	# the image is the root, its init runs; nothing of this machine's
	disk=$IMAGE
	boot_args="ramcache.root=disk ramcache.init=${RAMCACHE_VM_INIT:-/sbin/init}"
	share=()
else
	# the writable layer: sparse, discarded with $tmp
	disk=$tmp/rw.img
	truncate -s "${RAMCACHE_VM_DISK:-8G}" "$disk"
	mkfs.ext4 -q -F "$disk" || die "make the VM's scratch disk (mkfs.ext4)"
	boot_args="ramcache.guest=$HERE/guest.sh ramcache.cmd=$tmp/cmd ramcache.kdir=$kdir"
	share=(-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap)
fi
timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 \
	"${accel_args[@]}" -smp "$CPUS" -m "$MEM" -nodefaults -no-reboot \
	-display none -monitor none \
	-kernel "$kdir/vmlinuz" -initrd "$tmp/initrd" \
	-append "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init $boot_args" \
	-serial "file:$tmp/klog" -serial "file:$tmp/out" \
	"${share[@]}" \
	-drive "file=$disk,if=virtio,format=raw,cache=unsafe" \
	-device virtio-rng-pci </dev/null &
qpid=$!
tail -n +1 -s 0.2 -f --pid="$qpid" "$tmp/out" 2>/dev/null |
	sed -u -e 's/\r$//' -e '/^ramcache-vm-exit: /d' || true
rc=0
wait "$qpid" || rc=$?
qpid=
code=$(tr -d '\r' <"$tmp/out" | sed -n 's/^ramcache-vm-exit: \([0-9]*\)$/\1/p' | tail -n 1)
if [ -z "$code" ]; then
	echo "ramcache-bpf: the VM ($kver, $accel) ended without the command's exit code (qemu: $rc); kernel log:" >&2
	# from the first oops line, if any: its header says what trapped
	first=$(grep -n -m 1 -E 'cut here|BUG:|Oops:|Kernel panic' "$tmp/klog" | cut -d: -f1)
	if [ -n "$first" ]; then
		tail -n +"$first" "$tmp/klog" | head -n 80
	else
		tail -n 40 "$tmp/klog"
	fi | tr -d '\r' >&2
	exit 2
fi
exit "$code"
