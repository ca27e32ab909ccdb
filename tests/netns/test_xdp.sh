#!/usr/bin/env bash
# inca-switch --xdp on a veth pair (docs/switch.md, "AF_XDP data path"). Two namespaces of its
# own: incaxdp-s-PID holds the switch's end (198.18.0.1/24, native XDP + AF_XDP), incaxdp-m-PID
# the members' end (198.18.0.10.. on one veth). The members are libinca ranks (xdp_member):
# every AllReduce result is checked element by element. Then the switch's statistics must show
# that the packets went through the XDP program and the AF_XDP socket, and that the kernel
# still got the rest (ARP, and TCP through the same interface). Second part: the same switch as
# a leaf under a root switch (sockets) on the members' side: the parent's MAC is resolved through
# the kernel. Third part: --xdp on an interface that does not exist falls back to UDP sockets (and
# says why), with the same exact results; --xdp-required makes that an error instead.
# The frames the AF_XDP path builds are captured on the members' side and checked by
# tests/pcap/check_pcap.py (IPv4 shape and header checksum, ICRC recomputed by scapy, strict
# decode, tshark dissection) when tshark and scapy are installed.
# usage: test_xdp.sh BUILD_DIR [MEMBERS] [COUNT] [ITERS]
# Exit 77 (skip) without root, without netns/veth, or when XDP cannot be used here.
set -u
BUILD=${1:?build dir}
NM=${2:-3}
COUNT=${3:-50000}
ITERS=${4:-4}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SW=$BUILD/daemons/switch/inca-switch
MEMBER=$BUILD/tests/netns/xdp_member
PY=/usr/bin/python3
NS_S=incaxdp-s-$$
NS_M=incaxdp-m-$$
TMP=$(mktemp -d /tmp/incaxdp.XXXXXX)
SWPID=
CAPPID=

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

cleanup() {
	[ -n "$CAPPID" ] && kill "$CAPPID" 2>/dev/null
	[ -n "$SWPID" ] && kill "$SWPID" 2>/dev/null && wait "$SWPID" 2>/dev/null
	ip netns del "$NS_S" 2>/dev/null
	ip netns del "$NS_M" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, XDP)"
[ -x "$SW" ] && [ -x "$MEMBER" ] || fail "build first: $SW, $MEMBER"
ip netns add "$NS_S" 2>/dev/null || skip "cannot create network namespaces"
ip netns add "$NS_M" || skip "cannot create network namespaces"
ip link add xsw0 netns "$NS_S" type veth peer name xmb0 netns "$NS_M" ||
	skip "cannot create a veth pair"
# 9000: a 4 KiB INCA packet is a 4.2 KB frame (two AF_XDP chunks, multi-buffer).
ip -n "$NS_S" link set xsw0 mtu 9000 up
ip -n "$NS_M" link set xmb0 mtu 9000 up
ip -n "$NS_S" link set lo up
ip -n "$NS_M" link set lo up
ip -n "$NS_S" addr add 198.18.0.1/24 dev xsw0
MEMBERS=""
for ((r = 0; r < NM; r++)); do
	ip -n "$NS_M" addr add 198.18.0.$((10 + r))/24 dev xmb0
	MEMBERS="$MEMBERS${MEMBERS:++}$((r + 1))@198.18.0.$((10 + r)):4791"
done
# A fresh data-plane group key for this run: the switches' trees and the ranks (through
# INCA_AUTH_KEY, which libinca reads) share it.
KEY=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
AUTH="auth_key=$KEY,auth_key_id=1"
export INCA_AUTH_KEY=$KEY INCA_AUTH_KEY_ID=1
TREE="id=1,key=0x5eed0001,slots=256,$AUTH,members=$MEMBERS"

# start_switch NAME ARGS...: runs inca-switch in the switch namespace, waits for its ready file.
start_switch() {
	local name=$1
	shift
	rm -f "$TMP/$name.ready"
	ip netns exec "$NS_S" "$SW" --listen 198.18.0.1:4791 --tree "$TREE" \
		--stats-file "$TMP/$name.json" --stats-interval-ms 0 \
		--ready-file "$TMP/$name.ready" -v "$@" 2>"$TMP/$name.log" &
	SWPID=$!
	for ((i = 0; i < 100; i++)); do
		[ -e "$TMP/$name.ready" ] && return 0
		kill -0 "$SWPID" 2>/dev/null || break
		sleep 0.05
	done
	wait "$SWPID"
	local rc=$?
	SWPID=
	return $((rc ? rc : 1))
}

stop_switch() {
	kill -TERM "$SWPID"
	wait "$SWPID" || fail "switch exited with status $?"
	SWPID=
}

# run_members TAG: every rank in the members' namespace; all must exit 0.
run_members() {
	local pids=() rc=0
	for ((r = 0; r < NM; r++)); do
		ip netns exec "$NS_M" "$MEMBER" "$r" "$NM" 198.18.0.10:29500 198.18.0.1:4791 \
			198.18.0.$((10 + r)):4791 "$COUNT" "$ITERS" >"$TMP/$1.rank$r" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	cat "$TMP/$1".rank*
	return $rc
}

# ---- 1. AF_XDP
if ! start_switch xdp --xdp xsw0 --xdp-required; then
	cat "$TMP/xdp.log"
	if grep -qE "not built in|attach XDP|AF_XDP socket|XDP program: load" "$TMP/xdp.log"; then
		skip "XDP unavailable here: $(grep -m1 -E 'inca-switch: ' "$TMP/xdp.log")"
	fi
	fail "switch with --xdp did not start"
fi
grep "xdp:" "$TMP/xdp.log"
# TCP to a closed port of the switch's address: the kernel must answer (RST = refused), so the
# program passed the segment to it; a dropped or redirected one would time out.
ip netns exec "$NS_M" $PY -c '
import socket, sys
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("198.18.0.1", 9))
except ConnectionRefusedError:
    sys.exit(0)
except OSError as e:
    print("tcp:", e); sys.exit(1)
sys.exit(1)' || fail "TCP through the XDP interface did not reach the kernel"
# Capture the first frames the switch sends (results built by the AF_XDP path).
NCAP=60
if command -v tshark >/dev/null && $PY -c 'import scapy.contrib.roce' 2>/dev/null; then
	HOME=$TMP ip netns exec "$NS_M" tshark -i xmb0 -f "udp and src host 198.18.0.1" \
		-c $NCAP -a duration:60 -w "$TMP/xdp.pcap" >"$TMP/tshark.log" 2>&1 &
	CAPPID=$!
	for ((i = 0; i < 100; i++)); do
		grep -q "Capturing on" "$TMP/tshark.log" 2>/dev/null && break
		sleep 0.1
	done
	grep -q "Capturing on" "$TMP/tshark.log" || { cat "$TMP/tshark.log"; fail "tshark"; }
	sleep 0.3
fi
run_members xdp || { cat "$TMP/xdp.log"; fail "AllReduce through the AF_XDP switch"; }
stop_switch
if [ -n "$CAPPID" ]; then
	wait "$CAPPID"
	CAPPID=
	HOME=$TMP $PY "$SRC/tests/pcap/check_pcap.py" "$TMP/xdp.pcap" $NCAP \
		--lua "$SRC/tools/inca.lua" --auth-key "$KEY" || fail "frames sent by the AF_XDP path are not conformant"
else
	echo "note: tshark or python3-scapy missing: frames not checked by check_pcap.py"
fi
$PY - "$TMP/xdp.json" "$NM" <<'EOF' || fail "statistics of the AF_XDP run"
import json, sys
s = json.load(open(sys.argv[1]))
nm = int(sys.argv[2])
x = s.get("xdp")
print("stats: io %s, rx_pkts %d, tx_pkts %d, drops_total %d" %
      (s["io"], s["rx_pkts"], s["tx_pkts"], s["drops_total"]))
print("xdp:", json.dumps(x))
assert s["io"] == "xdp", s["io"]
assert x is not None
# Every packet the workers handled came from the AF_XDP socket, redirected by the program.
assert x["rx_frames"] > 0 and x["rx_frames"] == s["rx_pkts"], (x["rx_frames"], s["rx_pkts"])
assert x["prog_redirected"] >= x["rx_frames"], x
assert x["tx_frames"] > 0 and x["tx_frames"] == s["tx_pkts"], (x["tx_frames"], s["tx_pkts"])
# ARP and ICMP went to the kernel.
assert x["prog_passed"] > 0, x
# 4 KiB packets are two-chunk frames both ways.
assert x["multi_buffer"] and x["rx_multibuf"] > 0 and x["tx_multibuf"] > 0, x
# Each member's MAC was learned from its own packets.
assert x["mac_learned"] >= nm and x["no_mac"] == 0, x
assert s["drops"]["icrc"] == 0 and s["drops"]["ip_csum"] == 0, s["drops"]
t = s["trees"][0]
assert t["aggregations"] > 0 and all(q["rx_pkts"] > 0 and q["tx_pkts"] > 0 for q in t["qps"]), t
EOF

# ---- 2. a leaf on AF_XDP under a root on sockets (198.18.0.2 in the members' namespace): the
# parent only answers, so its MAC comes from the kernel (resolved on request), not from learning.
ip -n "$NS_M" addr add 198.18.0.2/24 dev xmb0
ip netns exec "$NS_M" "$SW" --listen 198.18.0.2:4791 \
	--tree "id=1,key=0x5eed0001,slots=256,$AUTH,child=198.18.0.1:4791/0x101/1-$NM" \
	--stats-file "$TMP/root.json" --stats-interval-ms 0 --ready-file "$TMP/root.ready" \
	2>"$TMP/root.log" &
ROOTPID=$!
for ((i = 0; i < 100; i++)); do [ -e "$TMP/root.ready" ] && break; sleep 0.05; done
TREE_ROOT=$TREE
TREE="id=1,key=0x5eed0001,slots=256,$AUTH,role=leaf,bfr_id=$((NM + 1)),parent=198.18.0.2:4791,members=$MEMBERS"
start_switch leaf --xdp xsw0 --xdp-required || { cat "$TMP/leaf.log"; fail "leaf switch"; }
run_members leaf ||
	{ cat "$TMP/leaf.log" "$TMP/root.log"; fail "AllReduce through leaf (AF_XDP) and root"; }
stop_switch
kill -TERM $ROOTPID
wait $ROOTPID || fail "root switch exited with status $?"
TREE=$TREE_ROOT
$PY - "$TMP/leaf.json" "$TMP/root.json" <<'EOF2' || fail "statistics of the two-level run"
import json, sys
s = json.load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
x = s["xdp"]
print("leaf: io %s, rx_pkts %d, tx_pkts %d; root rx_pkts %d; xdp %s" %
      (s["io"], s["rx_pkts"], s["tx_pkts"], r["rx_pkts"], json.dumps(x)))
assert s["io"] == "xdp" and x["rx_frames"] == s["rx_pkts"] > 0
# the parent's MAC came from the kernel's neighbour table, after a resolution request
assert x["mac_from_kernel"] >= 1 and x["resolve_requests"] >= 1, x
parent = [q for q in s["trees"][0]["qps"] if q["kind"] == "parent"][0]
assert parent["tx_pkts"] > 0 and parent["rx_pkts"] > 0, parent
assert r["rx_pkts"] > 0 and r["trees"][0]["aggregations"] > 0
EOF2

# ---- 3. no such interface: falls back to sockets and says why; --xdp-required refuses
start_switch fb --xdp incaxdp-none0 || { cat "$TMP/fb.log"; fail "fallback switch did not start"; }
grep -q "using UDP sockets" "$TMP/fb.log" || { cat "$TMP/fb.log"; fail "no fallback message"; }
run_members fb || { cat "$TMP/fb.log"; fail "AllReduce through the fallback switch"; }
stop_switch
$PY - "$TMP/fb.json" <<'EOF' || fail "statistics of the fallback run"
import json, sys
s = json.load(open(sys.argv[1]))
print("fallback: io %s, reason %r, rx_pkts %d" % (s["io"], s.get("xdp_fallback"), s["rx_pkts"]))
assert s["io"] == "sockets" and "incaxdp-none0" in s["xdp_fallback"] and s["rx_pkts"] > 0
EOF
if start_switch req --xdp incaxdp-none0 --xdp-required; then
	stop_switch
	fail "--xdp-required started without XDP"
fi
grep -q "no interface incaxdp-none0" "$TMP/req.log" ||
	{ cat "$TMP/req.log"; fail "no reason given"; }
echo "PASS"
