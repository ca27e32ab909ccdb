#!/bin/sh
# pcap suite: write a capture with the real encoder (gen_pcap), then check it independently
# with scapy (ICRC), tshark (InfiniBand) and tools/inca.lua. Exit 77 (skip) without tshark/scapy.
# usage: run_pcap_test.sh <gen_pcap binary> <tests/pcap source dir>
set -eu
gen=$1
src=$2
PY=/usr/bin/python3
command -v tshark >/dev/null 2>&1 || { echo "SKIP: tshark not installed"; exit 77; }
[ -x "$PY" ] && "$PY" -c 'import scapy.contrib.roce' 2>/dev/null ||
	{ echo "SKIP: python3-scapy not installed"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/inca-pcap.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$gen" "$dir/inca.pcap" "$dir/inca.tsv"
# tshark's HOME-based config must not leak into the test
HOME=$dir "$PY" "$src/check_pcap.py" "$dir/inca.pcap" 190 --expect "$dir/inca.tsv" \
	--lua "$src/../../tools/inca.lua" -v \
	--auth-key 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
