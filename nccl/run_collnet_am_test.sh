#!/bin/bash
# nccl/run_collnet_am_test.sh: meson test (suite 'nccl') for the plugin with the Aggregation
# Manager: starts inca-switch (NETCONF-managed, no tree) and inca-am on a private loopback
# address, then runs collnet_harness --am with INCA_AM_ADDR / INCA_JOB_ID / INCA_JOB_CREDENTIAL,
# so every CollNet comm joins an AM group and its calls must go in-network.
#   usage: run_collnet_am_test.sh BUILD_DIR HARNESS PLUGIN [HARNESS_ARGS...]
set -u
build=$1 harness=$2 plugin=$3
shift 3
sw_bin=$build/daemons/switch/inca-switch
am_bin=$build/daemons/am/inca-am
for b in "$sw_bin" "$am_bin" "$harness"; do
	if [ ! -x "$b" ]; then
		echo "SKIP: $b not built (gRPC / libnetconf2 missing?)"
		exit 77
	fi
done
tmp=$(mktemp -d /tmp/inca-nccl-am.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
wait_ready() { # file pid name
	for _ in $(seq 1 200); do
		[ -e "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || { echo "FAIL: $3 exited at start:"; cat "$tmp/$3.log"; exit 1; }
		sleep 0.05
	done
	echo "FAIL: $3 not ready after 10 s"
	cat "$tmp/$3.log"
	exit 1
}
# A private loopback address per run: no clash with other tests or runs.
ip=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
job=nccl-$$-$RANDOM
cred=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
cat >"$tmp/sw.conf" <<CONF
name = leaf0
role = leaf
listen = $ip:4791
max_trees = 64
max_slots = 16384
CONF
cat >"$tmp/am.conf" <<CONF
heartbeat_ms = 500
heartbeat_misses = 6
poll_ms = 500
slots = 256
job $job credential $cred
switch leaf0 unix:$tmp/sw.sock
attach $(hostname) leaf0
attach 127.0.0.1 leaf0
CONF
"$sw_bin" -c "$tmp/sw.conf" --netconf-unix "$tmp/sw.sock" --ready-file "$tmp/sw.ready" \
	>"$tmp/switch.log" 2>&1 &
pids+=($!)
wait_ready "$tmp/sw.ready" $! switch
"$am_bin" -c "$tmp/am.conf" -j "$tmp/am.journal" -l "$ip:50051" --ready-file "$tmp/am.ready" \
	>"$tmp/am.log" 2>&1 &
pids+=($!)
wait_ready "$tmp/am.ready" $! am
INCA_AM_ADDR=$ip:50051 INCA_JOB_ID=$job INCA_JOB_CREDENTIAL=$cred \
	timeout 200 "$harness" --plugin "$plugin" --am "$@"
rc=$?
[ $rc = 0 ] || { echo "--- switch log"; tail -20 "$tmp/switch.log"; echo "--- am log"; tail -20 "$tmp/am.log"; }
exit $rc
