#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# Fetch one of Debian 12's packaged kernels from the archive apt already
# uses, unpack it and index its modules: 6.1 (linux-image-6.1.0-N-amd64-
# unsigned, Debian 12's own) or 6.12 (linux-image-6.12.N+deb12-amd64-unsigned,
# Debian 13's kernel as bookworm carries it). Prints the unpacked directory
# (vmlinuz, config, lib/modules/VERSION); a kernel unpacked before is reused.
#
# Usage: tests/vm/kernel.sh [6.1|6.12]   (root; cache in $RAMCACHE_CACHE)
set -euo pipefail

CACHE=${RAMCACHE_CACHE:-/var/cache/ramcache-bpf}
KDIR=$CACHE/kernel
SERIES=${1:-6.1}

die() { echo "ramcache-bpf: failed to $*" >&2; exit 1; }

# The package names of a series, and the release names they unpack to.
case $SERIES in
6.1) PKG_RE='^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' REL_GLOB='6.1.0-*-amd64' ;;
6.12) PKG_RE='^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' REL_GLOB='6.12.*+deb12-amd64' ;;
*) die "pick a kernel: '$SERIES' is not 6.1 or 6.12" ;;
esac

cached() {
	local d
	for d in $(ls -d "$KDIR"/$REL_GLOB 2>/dev/null | sort -V -r); do
		[ -e "$d/.done" ] && { echo "$d"; return 0; }
	done
	return 1
}

if cached; then exit 0; fi
[ "$(id -u)" = 0 ] || die "fetch the $SERIES kernel: not root (run 'sudo make vmtest' once)"

newest() {
	apt-cache search --names-only "$PKG_RE" 2>/dev/null |
		awk '{print $1}' | sort -V | tail -n 1
}
mkdir -p "$KDIR"
tmp=$(mktemp -d "$KDIR/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# apt-get download drops privileges to _apt where it can write
chown _apt "$tmp" 2>/dev/null || true

# With stale package lists the newest name may be gone from the archive:
# update them and try again once.
for try in 1 2; do
	pkg=$(newest)
	if [ -n "$pkg" ] && (cd "$tmp" && apt-get download -qq "$pkg" >&2); then
		break
	fi
	[ $try = 1 ] || die "download the $SERIES kernel ($PKG_RE) (apt-get download${pkg:+ $pkg}): is bookworm in the apt sources?"
	apt-get update -qq >&2 || die "update the package lists (apt-get update)"
done
ver=${pkg#linux-image-}
ver=${ver%-unsigned}
dpkg-deb -x "$tmp"/*.deb "$tmp/root" || die "unpack $pkg"
[ -e "$tmp/root/boot/vmlinuz-$ver" ] || die "find /boot/vmlinuz-$ver in $pkg"
# Debian generates modules.dep in the package's postinst; do it here.
depmod -b "$tmp/root" "$ver" || die "index the modules of $ver (depmod)"
rm -rf "${KDIR:?}/$ver"
mkdir -p "$KDIR/$ver"
mv "$tmp/root/boot/vmlinuz-$ver" "$KDIR/$ver/vmlinuz"
cp "$tmp/root/boot/config-$ver" "$KDIR/$ver/config"
mkdir -p "$KDIR/$ver/lib/modules"
mv "$tmp/root/lib/modules/$ver" "$KDIR/$ver/lib/modules/$ver"
touch "$KDIR/$ver/.done"
echo "$KDIR/$ver"
