#!/bin/sh
# pcap suite, live GSO: UDP GSO sends (lib/util/udpio, as libinca and inca-switch send) on a veth
# pair between two network namespaces this script creates (incagso-*, 198.18.77.0/30), captured
# on the sender's veth and checked by check_pcap.py (scapy ICRC, tshark, inca.lua):
#   1. tx-udp-segmentation off on the sender's veth: the kernel cuts every GSO send into real
#      per-segment packets (IPv4 IDs 0, 1, 2 ...) before the capture: each ICRC must hold for
#      the ID the kernel wrote, and some IDs must be non-zero (GSO really ran);
#   2. the sender's socket with SO_NO_CHECK: the kernel refuses GSO sends (they need the UDP
#      checksum); the queue sends the packets one by one, re-encoded for ID 0: the capture must
#      still verify, every ID 0.
# Exit 77 (skip) without root, ip, ethtool, tshark or scapy. Namespaces removed on exit.
# usage: run_gso_veth_test.sh <send_inca_gso binary> <tests/pcap source dir>
set -eu
send=$1
src=$2
PY=/usr/bin/python3
N=200
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
for t in ip ethtool tshark; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
"$PY" -c 'import scapy.contrib.roce' 2>/dev/null || { echo "SKIP: python3-scapy missing"; exit 77; }
NS_S=incagso-s-$$
NS_R=incagso-r-$$
S_IP=198.18.77.1
R_IP=198.18.77.2
dir=$(mktemp -d "${TMPDIR:-/tmp}/inca-gso.XXXXXX")
cap_pid=""
cleanup() {
	[ -n "$cap_pid" ] && kill "$cap_pid" 2>/dev/null || true
	ip netns del $NS_S 2>/dev/null || true
	ip netns del $NS_R 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM
ip netns add $NS_S || { echo "SKIP: cannot create a network namespace"; exit 77; }
ip netns add $NS_R
ip link add incagso0 netns $NS_S type veth peer name incagso1 netns $NS_R
ip -n $NS_S addr add $S_IP/30 dev incagso0
ip -n $NS_R addr add $R_IP/30 dev incagso1
ip -n $NS_S link set lo up
ip -n $NS_R link set lo up
# 4 KiB RoCE packets with DF need a jumbo MTU (as on a RoCE fabric)
ip -n $NS_S link set incagso0 mtu 9000 up
ip -n $NS_R link set incagso1 mtu 9000 up
ip netns exec $NS_S ping -c 1 -W 2 $R_IP >/dev/null 2>&1 || true # resolve the neighbour first

# capture PHASE EXPECT SENDER_FLAG: send N packets while capturing on the sender's veth, check.
capture() {
	phase=$1
	: >"$dir/tshark.log"
	HOME=$dir ip netns exec $NS_S tshark -i incagso0 -f "udp dst port 4791" -a duration:30 -c $N \
		-w "$dir/$phase.pcap" >"$dir/tshark.log" 2>&1 &
	cap_pid=$!
	i=0
	until grep -q "Capturing on" "$dir/tshark.log" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$cap_pid" 2>/dev/null; then
			echo "SKIP: tshark cannot capture in a namespace:"; cat "$dir/tshark.log"; exit 77
		fi
		sleep 0.1
	done
	sleep 0.3
	rc=0
	out=$(ip netns exec $NS_S "$send" $S_IP $R_IP $N $3) || rc=$?
	[ $rc -eq 77 ] && { echo "SKIP: sender cannot run here ($phase)"; exit 77; }
	[ $rc -eq 0 ] || { echo "FAIL: sender ($phase)"; exit 1; }
	echo "$phase: $out"
	wait "$cap_pid" || true
	cap_pid=""
	HOME=$dir "$PY" "$src/check_pcap.py" "$dir/$phase.pcap" $N --lua "$src/../../tools/inca.lua" \
		>"$dir/$phase.check" 2>&1 || { cat "$dir/$phase.check"; echo "FAIL: $phase capture"; exit 1; }
	cat "$dir/$phase.check"
	# Per-segment packets only: check_pcap found no whole GSO send to cut.
	if grep -q "GSO send" "$dir/$phase.check"; then
		echo "FAIL: $phase: the capture holds whole GSO sends, not the kernel's segments"; exit 1
	fi
	ids=$(HOME=$dir tshark -n -r "$dir/$phase.pcap" -Y "udp.dstport == 4791" -T fields -e ip.id |
		sort -u | tr '\n' ' ')
	echo "$phase: IPv4 IDs seen: $ids"
	nonzero=$(echo "$ids" | tr ' ' '\n' | grep -c -v -e '^0x0000$' -e '^0$' -e '^$' || true)
	refused=$(echo "$out" | sed -n 's/.* \([0-9]*\) refused$/\1/p')
	gsos=$(echo "$out" | sed -n 's/.* \([0-9]*\) GSO sends.*/\1/p')
	if [ "$2" = refused ]; then
		[ "$refused" -ge 1 ] || { echo "FAIL: $phase: the kernel did not refuse GSO"; exit 1; }
		[ "$nonzero" -eq 0 ] || { echo "FAIL: $phase: packets sent alone must carry ID 0"; exit 1; }
	else
		[ "$refused" -eq 0 ] && [ "$gsos" -gt 0 ] || { echo "FAIL: $phase: no GSO sends"; exit 1; }
		[ "$nonzero" -gt 0 ] || { echo "FAIL: $phase: no segment with a non-zero ID"; exit 1; }
	fi
}

ip netns exec $NS_S ethtool -K incagso0 tx-udp-segmentation off >/dev/null 2>&1 ||
	{ echo "SKIP: cannot turn UDP segmentation offload off"; exit 77; }
capture segmented gso ""
capture refused refused refuse
echo "run_gso_veth_test: OK"
