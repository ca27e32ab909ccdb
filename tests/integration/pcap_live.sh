#!/bin/sh
# Integration: capture a live inca-demo run on lo with tshark and check every INCA packet with
# tests/pcap/check_pcap.py (scapy ICRC, tshark InfiniBand decode, tools/inca.lua dissector).
# usage: pcap_live.sh <inca-demo> <check_pcap.py> <inca.lua> [addr-index]
# Exit 77 (skip) without root, tshark, scapy or the checker script.
set -u
demo=$1
checker=$2
lua=$3
idx=${4:-107}
PY=/usr/bin/python3
[ "$(id -u)" = 0 ] || { echo "SKIP: capturing needs root"; exit 77; }
command -v tshark >/dev/null 2>&1 || { echo "SKIP: tshark not installed"; exit 77; }
[ -f "$checker" ] || { echo "SKIP: $checker not present"; exit 77; }
[ -x "$PY" ] && "$PY" -c 'import scapy.contrib.roce' 2>/dev/null ||
	{ echo "SKIP: python3-scapy not installed"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/inca-live.XXXXXX")
tpid=
cleanup() {
	[ -n "$tpid" ] && kill "$tpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
# Only this test's address blocks (127.B.idx.0/24, B chosen by the launcher): other suites
# may run at the same time. ip[14] / ip[18] are the third bytes of the source / destination.
tshark -i lo -f "udp port 4791 and ip[14] = $idx and ip[18] = $idx and not net 127.0.0.0/16" \
	-w "$dir/live.pcap" >"$dir/tshark.log" 2>&1 &
tpid=$!
i=0
until grep -q "Capturing on" "$dir/tshark.log" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 200 ] || ! kill -0 "$tpid" 2>/dev/null; then
		cat "$dir/tshark.log"
		echo "FAIL: tshark did not start"
		exit 1
	fi
	sleep 0.05
done
sleep 0.3
"$demo" --addr-index "$idx" -b 4 -e 16K -f 4 -n 2 -w 1 --no-ring \
	--types fp32:sum,int32:max,fp16:sum,bf16:sum,int64:bxor,fp64:min,uint8:prod,int8:band
demo_rc=$?
sleep 0.5
kill -INT "$tpid"
wait "$tpid"
tpid=
[ $demo_rc = 0 ] || { echo "FAIL: inca-demo exit $demo_rc"; exit 1; }
# tshark's HOME-based config must not leak into the test
HOME=$dir "$PY" "$checker" "$dir/live.pcap" 100 --lua "$lua"
rc=$?
[ $rc = 0 ] && echo "PASSED: live capture conforms" || echo "FAILED: check_pcap.py exit $rc"
exit $rc
