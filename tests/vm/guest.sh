#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# PID 1 of the VM on the host's root (overlay): mount what a booted system
# has, cgroup v2 with the memory controller, the kernel's modules; run the
# command tests/vm/run.sh wrote; report its exit code on ttyS1; power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
out=/dev/ttyS1
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs -o mode=0755 run /run
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo +memory >/sys/fs/cgroup/cgroup.subtree_control
mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
for a in $(cat /proc/cmdline); do
	case $a in
	ramcache.cmd=*) cmd=${a#*=} ;;
	ramcache.kdir=*) kdir=${a#*=} ;;
	esac
done
kver=$(uname -r)
mkdir -p "/lib/modules/$kver"
mount --bind "$kdir/lib/modules/$kver" "/lib/modules/$kver"
# as on the host: a zram0 for the tests that build a swap storm
modprobe zram num_devices=1
busybox ip link set lo up
busybox hostname ramcache-vm
stty -F $out raw -echo 2>/dev/null
echo "# vm: kernel $kver, cgroup v2 (memory controller), $(nproc) CPUs, $(($(sed -n 's/MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024)) MiB" >$out
sh "$cmd" >$out 2>&1 </dev/null
echo "ramcache-vm-exit: $?" >$out
sync
echo o >/proc/sysrq-trigger
sleep 10
