#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# Debian 12 (bookworm) roots for the suites that need a system of their own,
# debootstrap'd once from the archive apt already uses and cached:
#
#   minbase  `debootstrap --variant=minbase`: the root `make test-fresh`
#            copies, and the stand-in for debian:bookworm-slim that
#            contrib/kubernetes/Dockerfile builds on (test_podman.py)
#   systemd  minbase with systemd as init, dbus, the agent's run-time
#            libraries and python3: booted by systemd-nspawn
#            (test_systemd_boot.py) and the executors' image
#            (test_podman.py)
#
# Prints the root's path. Nothing downloaded stays in it. A root is rebuilt
# when its package list changes (the list's hash is in its name). Callers
# copy or overlay it; they never write into it.
#
# Usage: tests/roots/build.sh minbase|systemd     (root; cache in $RAMCACHE_CACHE)
#        tests/roots/build.sh --mirror             the archive it uses
set -euo pipefail

CACHE=${RAMCACHE_CACHE:-/var/cache/ramcache-bpf}
NAME=${1:-}

die() { echo "ramcache-bpf: failed to $*" >&2; exit 1; }
say() { printf '  %-8s %s\n' "$1" "$2" >&2; }

# The Debian archive the host's apt uses (deb822 or one-line sources).
mirror() {
	local f u
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		/etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		u=$(sed -n -e 's/^URIs: *\([^ ]*\).*/\1/p' \
			-e 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) .*/\2/p' "$f" |
			grep -v -e security -e '^cdrom:' | grep '/debian/\{0,1\}$' | head -n 1)
		[ -n "$u" ] && { echo "${u%/}"; return; }
	done
	echo http://deb.debian.org/debian
}

case $NAME in
--mirror) ;;
minbase) PKGS= ;;
systemd) PKGS=systemd,systemd-sysv,dbus,libbpf1,libelf1,zlib1g,libmicrohttpd12,python3,python3-aiohttp,procps ;;
*) die "build a root: '$NAME' is not minbase or systemd" ;;
esac
[ "$NAME" = --mirror ] && { mirror; exit 0; }
[ "$(id -u)" = 0 ] || die "build the $NAME root: not root (run as root)"
command -v debootstrap >/dev/null || die "find debootstrap (run 'sudo make deps')"

if [ -z "$PKGS" ]; then
	BASE=$CACHE/bookworm-minbase
else
	BASE=$CACHE/bookworm-$NAME-$(echo "$PKGS" | sha256sum | cut -c1-8)
fi
mkdir -p "$CACHE"
exec 9>"$CACHE/.bookworm-$NAME.lock"
flock 9
if [ ! -e "$BASE/.done" ]; then
	MIRROR=$(mirror)
	say DEBOOT "bookworm $NAME from $MIRROR (once, into $BASE)"
	log=$CACHE/debootstrap-$NAME.log
	rm -rf --one-file-system "$BASE.tmp"
	debootstrap --variant=minbase ${PKGS:+--include="$PKGS"} bookworm \
		"$BASE.tmp" "$MIRROR" >"$log" 2>&1 ||
		die "debootstrap bookworm $NAME (log: $log)"
	rm -rf "$BASE.tmp"/var/cache/apt/archives/*.deb "$BASE.tmp"/var/lib/apt/lists/*
	touch "$BASE.tmp/.done"
	# a root of an older package list goes when the new one arrives
	for old in "$CACHE/bookworm-$NAME-"*; do
		case $old in "$BASE.tmp" | *"*") ;; *) rm -rf --one-file-system "$old" ;; esac
	done
	rm -rf --one-file-system "$BASE"
	mv "$BASE.tmp" "$BASE"
fi
echo "$BASE"
