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
# gRPC over TLS (the AM's default): a CA of this run and a certificate for the AM's address;
# the ranks trust it through INCA_AM_CA.
(
	cd "$tmp" && ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes" &&
	echo "subjectAltName = IP:$ip" >ext.cnf &&
	openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj "/CN=collnet test CA" &&
	openssl req $ec -keyout am.key -out am.csr -subj "/CN=$ip" &&
	openssl x509 -req -in am.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
		-extfile ext.cnf -out am.crt
) >/dev/null 2>&1 || { echo "SKIP: openssl could not make the AM's certificate"; exit 77; }
"$am_bin" -c "$tmp/am.conf" -j "$tmp/am.journal" -l "$ip:50051" --tls-cert "$tmp/am.crt" \
	--tls-key "$tmp/am.key" --ready-file "$tmp/am.ready" >"$tmp/am.log" 2>&1 &
pids+=($!)
wait_ready "$tmp/am.ready" $! am
INCA_AM_ADDR=$ip:50051 INCA_AM_CA=$tmp/ca.pem INCA_JOB_ID=$job INCA_JOB_CREDENTIAL=$cred \
	timeout 200 "$harness" --plugin "$plugin" --am "$@"
rc=$?
[ $rc = 0 ] || { echo "--- switch log"; tail -20 "$tmp/switch.log"; echo "--- am log"; tail -20 "$tmp/am.log"; }
exit $rc
