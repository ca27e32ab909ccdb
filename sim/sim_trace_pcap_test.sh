#!/bin/sh
# sim/sim_trace_pcap_test.sh: trace.pcap as other tools see it. tshark must read one frame per
# packet the traced port sent (the dequeue rows of trace_packets.csv for that port), decode
# them as RoCEv2 with the opcode, QP and PSN of each row, also when frames are cut to
# pcap_snap_bytes; scapy (if installed) must find every ICRC right. SKIP (77) without tshark.
# Usage: sim_trace_pcap_test.sh path/to/inca-sim path/to/golden.ini
set -u
SIM=${1:?usage: $0 inca-sim scenario.ini}
INI=${2:?usage: $0 inca-sim scenario.ini}
command -v tshark >/dev/null 2>&1 || { echo "SKIP: tshark not installed"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# run NAME PCAP_PORT [more settings]: inca-sim with the port and its reverse traced
run() {
	name=$1 port=$2
	shift 2
	"$SIM" -q "$INI" trace.links="$port" trace.pcap_link="$port" "$@" -o "$T/$name" ||
		{ fail "inca-sim $name exited $?"; return 1; }
}

# rows NAME NODE PEER: "type flow psn" of each packet the port NODE->PEER sent, in order
rows() {
	awk -F, -v n="$2" -v p="$3" 'NR > 1 && $2 == "dequeue" && $4 == n && $5 == p { print $6, $7, $8 }' \
		"$T/$1/trace_packets.csv"
}

# fields NAME: "opcode destqp psn syndrome" of each frame as tshark decodes it
fields() {
	tshark -r "$T/$1/trace.pcap" -T fields -E separator=' ' -e infiniband.bth.opcode \
		-e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.aeth.syndrome 2>/dev/null
}

# expect NAME: what each CSV row should decode to (opcode, QP from the flow id, PSN)
expect() {
	awk '
	{ t = $1; f = $2; psn = $3 }
	t == "data" { printf "data 0x%06x %d\n", 2 * f, psn; next }
	t == "ack"  { printf "17 0x%06x %d 31\n", 2 * f + 1, (psn + 16777215) % 16777216; next }
	t == "nack" { printf "17 0x%06x %d 96\n", 2 * f + 1, psn; next }
	t == "cnp"  { printf "129 0x%06x %d\n", 2 * f + 1, psn; next }
	{ print "unexpected", t }'
}

# compare NAME NODE PEER: frames = rows, each decoded as its row says
compare() {
	rows "$1" "$2" "$3" >"$T/$1.rows"
	fields "$1" >"$T/$1.fields"
	nr=$(wc -l <"$T/$1.rows")
	nf=$(tshark -r "$T/$1/trace.pcap" 2>/dev/null | wc -l)
	[ "$nr" -gt 0 ] || fail "$1: no packets left $2->$3"
	[ "$nr" = "$nf" ] || fail "$1: tshark reads $nf frames, trace_packets.csv has $nr dequeue rows"
	# data opcodes depend on the position in the message: SEND First/Middle/Last/Only (0 1 2 4)
	expect <"$T/$1.rows" >"$T/$1.want"
	awk '{ if ($1 == 0 || $1 == 1 || $1 == 2 || $1 == 4) { $1 = "data"; NF = 3 }; $1 = $1; print }' \
		"$T/$1.fields" >"$T/$1.got"
	if cmp -s "$T/$1.want" "$T/$1.got"; then
		echo "ok: $1: $nf frames of $2->$3 decoded as RoCEv2 with the CSV's opcodes, QPs and PSNs"
	else
		fail "$1: decoded frames differ from trace_packets.csv:"
		diff "$T/$1.want" "$T/$1.got" | head -5
	fi
}

run data 'leaf0->h1' && compare data leaf0 h1
run ctl h1 && compare ctl h1 leaf0
grep -q ' 129 \|^129 ' "$T/ctl.fields" || fail "ctl: no CNP in the capture (the scenario should have some)"
grep -q ' 96$' "$T/ctl.fields" || fail "ctl: no NAK in the capture (the scenario should have some)"
run snap 'leaf0->h1' trace.pcap_snap_bytes=64 && compare snap leaf0 h1
caplen=$(tshark -r "$T/snap/trace.pcap" -T fields -e frame.cap_len 2>/dev/null | sort -u)
[ "$caplen" = 64 ] || fail "snap: captured lengths '$caplen', want 64"

if /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null; then
	for name in data ctl; do
		out=$(/usr/bin/python3 - "$T/$name/trace.pcap" <<'EOF'
import sys
from scapy.all import rdpcap, Ether
from scapy.contrib.roce import BTH
n = bad = 0
for pk in rdpcap(sys.argv[1]):
    raw = bytes(pk)
    p = Ether(raw)
    n += 1
    if BTH not in p:
        bad += 1
        continue
    p[BTH].icrc = None  # scapy recomputes it on build
    bad += bytes(p)[-4:] != raw[-4:]
print(n, bad)
EOF
)
		set -- $out
		if [ "${2:-1}" = 0 ] && [ "${1:-0}" -gt 0 ]; then
			echo "ok: $name: scapy finds the ICRC of all $1 frames right"
		else
			fail "$name: scapy: $out (frames, bad ICRCs)"
		fi
	done
else
	echo "note: scapy not installed, ICRCs not checked"
fi

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "sim_trace_pcap_test: ok"
