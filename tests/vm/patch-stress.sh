#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# Switch the rss_stat tracepoint on and off (the kernel patches its own code
# each time, as when the agent attaches and detaches) while a process faults
# pages in, for SECONDS (default 60); print how many switches the kernel
# survived. Run inside a VM to check an emulator runs patched code right:
#
#   RAMCACHE_VM_KERNEL=6.12 RAMCACHE_VM_TCG_THREAD=multi tests/vm/run.sh tests/vm/patch-stress.sh 60
#
# (QEMU 7.2 with thread=multi: the 6.12 guest panics within seconds.)
set -eu
secs=${1:-60}
tr=/sys/kernel/tracing
mountpoint -q $tr || mount -t tracefs nodev $tr
enable=$tr/events/kmem/rss_stat/enable
python3 -c '
import mmap
while True:
    m = mmap.mmap(-1, 64 << 20)
    for o in range(0, 64 << 20, 4096):
        m[o] = 1
    m.close()
' &
hog=$!
trap 'kill $hog 2>/dev/null' EXIT
n=0
end=$(($(date +%s) + secs))
while [ "$(date +%s)" -lt $end ]; do
	echo 1 >$enable
	echo 0 >$enable
	n=$((n + 1))
done
echo "patch-stress: the kernel survived $n switches of rss_stat in ${secs}s"
