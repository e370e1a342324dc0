#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# `sudo make demo`: the same ComfyUI-like workload twice in a scratch memory
# cgroup smaller than what it caches, no swap:
#   1. the classic cache (ramcache-demo --policy none), which gets OOM-killed
#      (or stalls, then the timeout kills it);
#   2. ramcache-demo --policy agent under ramcache-bpf, whose live output is
#      shown, which should finish.
# Ends with one side-by-side line. Cleans up whatever happens: children,
# the cgroup, the generated model files.
#
# Environment: OUTPUT (build dir), RAMCACHE_DEMO_LIMIT (cgroup limit, 384M),
# RAMCACHE_DEMO_TIMEOUT (seconds per run, 120), RAMCACHE_DEMO_AGENT_FLAGS
# (agent thresholds, "--headroom 64M --inactive 128M").
# Exit status: 0 when the agent run finished with no OOM kill, 1 otherwise.
set -euo pipefail

OUTPUT=${OUTPUT:-build}
DEMO="$OUTPUT/ramcache-demo"
AGENT="$OUTPUT/ramcache-bpf"
LIMIT=${RAMCACHE_DEMO_LIMIT:-384M}
TIMEOUT=${RAMCACHE_DEMO_TIMEOUT:-120}
read -r -a AGENT_FLAGS <<<"${RAMCACHE_DEMO_AGENT_FLAGS:---headroom 64M --inactive 128M}"
# ~670 MiB cached by the classic cache: 2 x 96 MiB models + ~30 x 16 MiB
WORKLOAD=(--prompts 8 --nodes 6 --models 2 --model-size 96M
	--output-size 16M --steps 10 --step-ms 40)

die() {
	echo "ramcache-demo: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || die "needs root for the memory cgroup and the BPF agent: run 'sudo make demo'"
[ -x "$DEMO" ] || die "$DEMO is not built: run 'make'"
[ -x "$AGENT" ] || die "$AGENT is not built: run 'make'"
LIMIT_BYTES=$(numfmt --from=iec "$LIMIT") || die "bad RAMCACHE_DEMO_LIMIT '$LIMIT'"

# A new cgroup under the root of the memory hierarchy; the shell's own
# cgroup is never touched.
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	CGV=2
	CG_BASE=/sys/fs/cgroup
	grep -qw memory "$CG_BASE/cgroup.subtree_control" ||
		die "the memory controller is not enabled for children of $CG_BASE (echo +memory > $CG_BASE/cgroup.subtree_control)"
elif [ -d /sys/fs/cgroup/memory ]; then
	CGV=1
	CG_BASE=/sys/fs/cgroup/memory
else
	die "no memory cgroup controller is mounted"
fi
CG="$CG_BASE/ramcache-demo-$$"

WORK=""
PIDS=()

cleanup() {
	set +e
	local p
	for p in "${PIDS[@]}"; do
		kill -INT "$p" 2>/dev/null
	done
	for _ in $(seq 50); do
		local alive=0
		for p in "${PIDS[@]}"; do
			kill -0 "$p" 2>/dev/null && alive=1
		done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for p in "${PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	if [ -d "$CG" ]; then
		for _ in $(seq 100); do
			while read -r p; do
				kill -KILL "$p" 2>/dev/null
			done <"$CG/cgroup.procs"
			rmdir "$CG" 2>/dev/null && break
			sleep 0.1
		done
		[ -d "$CG" ] && echo "ramcache-demo: could not remove $CG" >&2
	fi
	[ -n "$WORK" ] && rm -rf "$WORK"
	wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir "$CG"
if [ $CGV = 2 ]; then
	echo "$LIMIT_BYTES" >"$CG/memory.max"
	echo 0 >"$CG/memory.swap.max" 2>/dev/null || true
else
	echo "$LIMIT_BYTES" >"$CG/memory.limit_in_bytes"
	echo "$LIMIT_BYTES" >"$CG/memory.memsw.limit_in_bytes" 2>/dev/null || true
fi

oom_kills() {
	if [ $CGV = 2 ]; then
		awk '$1 == "oom_kill" { print $2 }' "$CG/memory.events"
	else
		awk '$1 == "oom_kill" { print $2 }' "$CG/memory.oom_control"
	fi
}

# The executor needs no privilege: run it as the user who ran sudo.
WORK=$(mktemp -d /var/tmp/ramcache-demo.XXXXXX)
chmod 755 "$WORK"
RUNAS=()
if [ -n "${SUDO_UID:-}" ] && [ "${SUDO_UID}" != 0 ] && command -v setpriv >/dev/null; then
	RUNAS=(setpriv --reuid="$SUDO_UID" --regid="${SUDO_GID:-$SUDO_UID}" --clear-groups --)
	chown "$SUDO_UID" "$WORK"
fi

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# start_demo TAG ARGS...: the demo inside the cgroup, its lines prefixed.
# Sets DEMO_PID, and JOB_PID: a subshell around it, so that bash has no
# "Killed" to report when the OOM killer strikes.
start_demo() {
	local tag=$1 prefix pidfile="$WORK/$1.pid"
	shift
	prefix=$(printf '  %-8s | ' "$tag")
	(
		sh -c 'echo $$ >"$0" && echo $$ >"$1/cgroup.procs" && shift &&
			exec "$@"' "$pidfile" "$CG" \
			"${RUNAS[@]}" "$DEMO" "${WORKLOAD[@]}" "$@" 2>&1
		exit $?
	) 2>/dev/null > >(tee -a "$WORK/$tag.log" | sed -u "s/^/$prefix/") &
	JOB_PID=$!
	for _ in $(seq 200); do
		[ -s "$pidfile" ] && break
		sleep 0.01
	done
	DEMO_PID=$(cat "$pidfile")
	PIDS+=("$DEMO_PID")
}

# wait_demo: wait for it, killing it after $TIMEOUT s; sets RC and STALLED.
wait_demo() {
	local end=$(($(date +%s) + TIMEOUT))
	STALLED=0
	while kill -0 "$DEMO_PID" 2>/dev/null; do
		if [ "$(date +%s)" -ge $end ]; then
			STALLED=1
			kill -KILL "$DEMO_PID" 2>/dev/null
			break
		fi
		sleep 0.2
	done
	RC=0
	wait "$JOB_PID" || RC=$?
}

echo "ramcache demo: a $LIMIT memory cgroup ($CG, cgroup v$CGV), no swap;"
echo "the workload caches ~670 MiB: 2 models of 96 MiB, 16 MiB node outputs, 8 prompts"
echo
echo "== 1/2: the classic cache (ramcache-demo --policy none), no agent"
oom0=$(oom_kills)
t0=$(now_ms)
start_demo classic --policy none --model-dir "$WORK/classic"
wait_demo
classic_s=$(awk -v ms=$(($(now_ms) - t0)) 'BEGIN { printf "%.1f", ms / 1000 }')
classic_ooms=$(($(oom_kills) - oom0))
if [ $STALLED = 1 ]; then
	classic="stalled, killed after ${classic_s} s"
elif [ $classic_ooms -gt 0 ] && [ $RC = 137 ]; then
	classic="OOM-killed after ${classic_s} s"
elif [ $RC = 0 ]; then
	classic="finished in ${classic_s} s (the cgroup was big enough)"
else
	classic="failed (exit $RC) after ${classic_s} s"
fi
echo "   -> classic cache: $classic"
rm -rf "$WORK/classic"

echo
echo "== 2/2: ramcache-demo --policy agent under ramcache-bpf ${AGENT_FLAGS[*]}"
oom0=$(oom_kills)
t0=$(now_ms)
start_demo demo --policy agent --wait-agent 30 --model-dir "$WORK/agent"
# the page is a memfd in the demo's fd table: nothing to find in /dev/shm
has_page() {
	local l
	for l in /proc/"$DEMO_PID"/fd/*; do
		case "$(readlink "$l" 2>/dev/null)" in
		/memfd:ramcache*) return 0 ;;
		esac
	done
	return 1
}
for _ in $(seq 100); do
	has_page && break
	kill -0 "$DEMO_PID" 2>/dev/null || break
	sleep 0.05
done
has_page || die "the demo did not create its control page (pid $DEMO_PID)"
"$AGENT" --pid "$DEMO_PID" "${AGENT_FLAGS[@]}" \
	> >(sed -u 's/^/  agent    | /') 2>&1 &
AGENT_PID=$!
PIDS+=("$AGENT_PID")
wait_demo
demo_rc=$RC
demo_stalled=$STALLED
agent_s=$(awk -v ms=$(($(now_ms) - t0)) 'BEGIN { printf "%.1f", ms / 1000 }')
kill -INT "$AGENT_PID" 2>/dev/null || true
wait "$AGENT_PID" 2>/dev/null || true
agent_ooms=$(($(oom_kills) - oom0))

done_line=$(grep -m1 'demo: done:' "$WORK/demo.log" || true)
prompts=$(sed -n 's/.*done: \([0-9]*\)\/.*/\1/p' <<<"$done_line")
secs=$(sed -n 's/.* prompts in \([0-9.]*\) s,.*/\1/p' <<<"$done_line")
evictions=$(sed -n 's/.* s, \([0-9]*\) evictions.*/\1/p' <<<"$done_line")
if [ $demo_rc = 0 ] && [ $demo_stalled = 0 ] && [ -n "$prompts" ]; then
	ramcache="finished $prompts prompts in $secs s, $evictions evictions, $agent_ooms OOM kills"
elif [ $demo_stalled = 1 ]; then
	ramcache="stalled, killed after $agent_s s, $agent_ooms OOM kills"
else
	ramcache="failed (exit $demo_rc) after $agent_s s, $agent_ooms OOM kills"
fi

echo
echo "classic cache: $classic | ramcache-bpf: $ramcache"
[ $demo_rc = 0 ] && [ $agent_ooms = 0 ]
