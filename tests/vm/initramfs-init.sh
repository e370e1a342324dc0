#!/bin/busybox sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# /init of the VM's initramfs (tests/vm/run.sh builds it): load the modules
# that reach the host's root over 9p, lay an overlay on it whose writable
# layer is the scratch ext4 disk (/dev/vda), and hand over
# to tests/vm/guest.sh there. With ramcache.root=disk the disk is the whole
# root instead, and its own init (ramcache.init) runs.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev

fail() {
	echo "ramcache-vm: $*" >&2
	echo "ramcache-vm-exit: 2" >/dev/ttyS1
	reboot -f
}

for m in $(cat /mod/order); do
	insmod "/mod/$m" || fail "insmod $m"
done
for a in $(cat /proc/cmdline); do
	case $a in
	ramcache.guest=*) guest=${a#*=} ;;
	ramcache.root=*) root=${a#*=} ;;
	ramcache.init=*) init=${a#*=} ;;
	esac
done
if [ "$root" = disk ]; then
	mount -t ext4 /dev/vda /newroot || fail "mount the root image"
	umount /proc /sys
	mount --move /dev /newroot/dev
	exec switch_root /newroot "$init"
fi
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot /lower ||
	fail "mount the host's root over 9p"
mount -t ext4 /dev/vda /rw || fail "mount the scratch disk"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	fail "mount the overlay"
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh "$guest"
