#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# make test-fresh: run the README's `make test` in a clean clone of HEAD on a
# freshly debootstrap'd Debian 12 (bookworm, minbase) root, chrooted, so a
# missing install step fails here instead of on a user's first run. The host
# kernel runs the BPF programs; /proc, /sys (with the cgroup mounts and the
# BTF), /dev and resolv.conf are lent to the chroot.
#
# The real ComfyUI trees (../shared/comfyui), when this repository has
# them, are lent read-only beside the clone, so that installing what real
# ComfyUI needs is proven here too.
#
# Only the bare debootstrap result is cached (tests/roots/build.sh minbase,
# in $RAMCACHE_CACHE): every package the Makefile needs
# is installed by `make test` itself on each run. The .deb files apt
# downloads are kept for the next run (apt-archives in $RAMCACHE_CACHE,
# some 1 GB): apt still installs each into the fresh root, and downloads
# whatever the mirror has newer; only the download is saved (2-3 min here). The VM suites do not run in
# the chroot (RAMCACHE_NO_VM=1): they boot their own root; nor do the suites
# that boot or package a root of their own, or count a rate on this kernel
# (RAMCACHE_FRESH=1, tests/run.py).
#
# Usage: tests/fresh/run.sh [TARGET...]     (root; default target: test)
set -euo pipefail

SCRATCH_DIR=${RAMCACHE_SCRATCH:-/var/tmp}

die() { echo "ramcache-bpf: failed to $*" >&2; exit 1; }
say() { printf '  %-8s %s\n' "$1" "$2"; }

[ "$(id -u)" = 0 ] || die "build a fresh root: not root (run 'sudo make test-fresh')"
src=$(git -C "$(dirname "$0")/../.." rev-parse --show-toplevel) ||
	die "find the repository to clone"
[ $# -gt 0 ] || set -- test

# --- the bare base, built once (tests/roots/build.sh) ------------------
ROOTS=$(dirname "$0")/../roots/build.sh
BASE=$("$ROOTS" minbase) || exit 1
MIRROR=$("$ROOTS" --mirror)

# --- a scratch copy of it, with a clean clone of HEAD ---------------------
scratch=$(mktemp -d "$SCRATCH_DIR/ramcache-fresh.XXXXXX")
root=$scratch/root
mounted=()

# Processes whose root is the fresh root: none may outlive `make test`
# (a package's service that `make deps` left running shows up here).
left() {
	local link pid
	for link in /proc/[0-9]*/root; do
		[ "$(readlink "$link" 2>/dev/null)" = "$root" ] || continue
		pid=${link#/proc/}
		echo "${pid%/root}"
	done
}

cleanup() {
	local rc=$? pid i
	for pid in $(left); do
		kill -9 "$pid" 2>/dev/null || true
	done
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" 2>/dev/null || true
	done
	if findmnt -rn -o TARGET | grep -q "^$scratch"; then
		echo "ramcache-bpf: mounts remain under $scratch; not removing it" >&2
		rc=1
	else
		rm -rf --one-file-system "$scratch"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say COPY "$BASE -> $root"
cp -a "$BASE" "$root"
rm -f "$root/.done"
branch=$(git -C "$src" symbolic-ref -q --short HEAD || true)
head=$(git -C "$src" rev-parse HEAD)
say CLONE "$src ($head)"
git clone -q ${branch:+--branch "$branch"} "$src" "$root/root/ramcache-bpf"
git -C "$root/root/ramcache-bpf" checkout -q --detach "$head"

cat >"$root/etc/apt/sources.list" <<SRC
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
SRC
# This machine's network set-up, as any machine of its kind has it: the
# resolver, local certificate authorities (ca-certificates, once `make deps`
# installs it, adds them to the bundle) and npm's system-wide settings.
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/usr/local/share/ca-certificates"
cp -L /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
[ -e /etc/npmrc ] && cp -L /etc/npmrc "$root/etc/npmrc"

bind() { # bind DIR: the host's DIR and everything under it, not propagated back
	mount --rbind "$1" "$root$1"
	mount --make-rslave "$root$1"
	mounted+=("$root$1")
}
# The fresh root is a mount point of its own, as / is on a booted system
# (unshare --mount and friends change its propagation).
mount --bind "$root" "$root"
mount --make-private "$root"
mounted+=("$root")
mount -t proc proc "$root/proc"
mounted+=("$root/proc")
bind /sys
bind /dev
ARCHIVES=${RAMCACHE_CACHE:-/var/cache/ramcache-bpf}/apt-archives
mkdir -p "$ARCHIVES/partial"
mount --bind "$ARCHIVES" "$root/var/cache/apt/archives"
mounted+=("$root/var/cache/apt/archives")
# The real ComfyUI trees, lent read-only beside the clone as ../shared/comfyui
# is beside this repository (or its main worktree, or its origin): `make
# test` then installs what ComfyUI needs and runs the package in each.
trees=${RAMCACHE_COMFYUI_TREES:-}
if [ -z "$trees" ]; then
	for r in "$src" "$(git -C "$src" rev-parse --path-format=absolute --git-common-dir)/.." \
		"$(git -C "$src" remote get-url origin 2>/dev/null || true)"; do
		if [ -d "$r/../shared/comfyui" ]; then trees=$r/../shared/comfyui; break; fi
	done
fi
if [ -n "$trees" ]; then
	say LEND "$trees -> /root/shared/comfyui (read-only)"
	mkdir -p "$root/root/shared/comfyui"
	mount --bind "$trees" "$root/root/shared/comfyui"
	mounted+=("$root/root/shared/comfyui")
	mount -o remount,bind,ro "$root/root/shared/comfyui"
fi

# A clean environment, less what points tools at the certificates and
# proxies of this machine.
passenv=()
for v in $(compgen -e); do
	case $v in
	*_CA_CERTS | *_CA_BUNDLE | *_CAINFO | SSL_CERT_* | PIP_CERT | \
		http_proxy | https_proxy | no_proxy | HTTP_PROXY | HTTPS_PROXY | NO_PROXY)
		passenv+=("$v=${!v}") ;;
	esac
done
in_root() {
	chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		DEBIAN_FRONTEND=noninteractive RAMCACHE_NO_VM=1 RAMCACHE_FRESH=1 CI="${CI:-}" \
		"${passenv[@]}" "$@"
}
# The README's prerequisites on a bare system: make (the clone came in from
# outside, as a user's `git clone` would).
say APT "make (the README's only prerequisite)"
in_root sh -c 'chown _apt:root /var/cache/apt/archives/partial; apt-get update -qq && apt-get install -y -qq --no-install-recommends make >/dev/null' ||
	die "install make in the fresh root"
say CHROOT "make $* in a fresh bookworm root"
rc=0
in_root sh -c 'cd /root/ramcache-bpf && exec make "$@"' make "$@" </dev/null || rc=$?
sleep 1
for pid in $(left); do
	echo "ramcache-bpf: left running in the fresh root: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) (pid $pid)" >&2
	rc=1
done
exit $rc
