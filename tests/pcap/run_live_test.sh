#!/bin/sh
# pcap suite, live: capture on loopback while send_inca sends INCA packets through a real kernel
# UDP socket, then run check_pcap.py on the capture. Proves the ICRC's IP ID 0 assumption and
# loopback-capture handling. Exit 77 (skip) without root, tshark capture rights or scapy.
# usage: run_live_test.sh <send_inca binary> <tests/pcap source dir>
set -eu
send=$1
src=$2
PY=/usr/bin/python3
SRC_IP=127.0.0.250 # addresses no other test uses
DST_IP=127.0.0.251
N=40
command -v tshark >/dev/null 2>&1 || { echo "SKIP: tshark not installed"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: live capture needs root"; exit 77; }
"$PY" -c 'import scapy.contrib.roce' 2>/dev/null || { echo "SKIP: python3-scapy missing"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/inca-live.XXXXXX")
cap_pid=""
cleanup() {
	[ -n "$cap_pid" ] && kill "$cap_pid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
HOME=$dir tshark -i lo -f "udp port 4791 and src host $SRC_IP" -a duration:30 -c $N \
	-w "$dir/live.pcap" >"$dir/tshark.log" 2>&1 &
cap_pid=$!
# wait (bounded) until tshark says it is capturing
i=0
until grep -q "Capturing on" "$dir/tshark.log" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 "$cap_pid" 2>/dev/null; then
		echo "SKIP: tshark cannot capture on lo:"; cat "$dir/tshark.log"; exit 77
	fi
	sleep 0.1
done
sleep 0.3
rc=0
"$send" $SRC_IP $DST_IP $N || rc=$?
[ $rc -eq 77 ] && { echo "SKIP: cannot bind $SRC_IP:4791"; exit 77; }
[ $rc -eq 0 ] || exit 1
wait "$cap_pid" || true
cap_pid=""
HOME=$dir "$PY" "$src/check_pcap.py" "$dir/live.pcap" $N --lua "$src/../../tools/inca.lua" -v
