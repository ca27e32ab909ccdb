#!/usr/bin/env bash
# bench_switch_xdp.sh: inca-switch's AF_XDP data path against its UDP-socket data path in one
# run, same topology and load. Two namespaces of its own (incaxdpb-s-PID: the switch's end of a
# veth pair, 198.18.0.1/24, MTU 9000; incaxdpb-m-PID: the members' end, 198.18.0.10..), the
# members are libinca ranks (tests/netns/xdp_member ... bench) running back-to-back INC fp32
# AllReduces of COUNT elements (4068 B of data per packet at libinca's default RoCE MTU 4096).
# Modes alternate (sockets, xdp = native XDP, xdp-skb = generic XDP; AF_XDP copy mode, as veth
# has no zero-copy) TRIALS times. Per run it prints the packets the
# daemon received per second of the ranks' timed loop, the daemon's CPU seconds (user+system of
# the process, from /proc/PID/stat) and packets per daemon CPU-second, and the whole machine's
# busy CPU-seconds over the run (/proc/stat: the kernel's veth, XDP and socket work is not
# always charged to the daemon). Root only; prints figures, asserts only that results are exact.
# usage: bench_switch_xdp.sh BUILD_DIR [MEMBERS=2] [COUNT=1048576] [ITERS=100] [TRIALS=3]
set -u
BUILD=${1:?build dir}
NM=${2:-2}
COUNT=${3:-1048576}
ITERS=${4:-100}
TRIALS=${5:-3}
SW=$BUILD/daemons/switch/inca-switch
MEMBER=$BUILD/tests/netns/xdp_member
PY=/usr/bin/python3
NS_S=incaxdpb-s-$$
NS_M=incaxdpb-m-$$
TMP=$(mktemp -d /tmp/incaxdpb.XXXXXX)
SWPID=

cleanup() {
	[ -n "$SWPID" ] && kill "$SWPID" 2>/dev/null && wait "$SWPID" 2>/dev/null
	ip netns del "$NS_S" 2>/dev/null
	ip netns del "$NS_M" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] || { echo "bench_switch_xdp: needs root"; exit 77; }
ip netns add "$NS_S" && ip netns add "$NS_M" || exit 77
ip link add xsw0 netns "$NS_S" type veth peer name xmb0 netns "$NS_M" || exit 77
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
KEY=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n') # a fresh group key (switch + ranks)
export INCA_AUTH_KEY=$KEY INCA_AUTH_KEY_ID=1
TREE="id=1,key=0x5eed0001,slots=256,auth_key=$KEY,auth_key_id=1,members=$MEMBERS"

busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
proc_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

echo "# bench_switch_xdp: $NM members, INC fp32 AllReduce of $COUNT elements x $ITERS, veth MTU 9000,"
echo "# $(nproc) CPUs, switch 1 worker, ICRC checked; pps = daemon rx_pkts / ranks' timed loop"
printf "#%8s %10s %9s %12s %9s %15s %10s\n" mode rx_pkts secs pps cpu_s pkts/cpu-s host_cpu_s
for ((t = 0; t < TRIALS; t++)); do
	for mode in sockets xdp xdp-skb; do
		extra=()
		[ $mode = xdp ] && extra=(--xdp xsw0 --xdp-required)
		[ $mode = xdp-skb ] && extra=(--xdp xsw0 --xdp-required --xdp-mode skb)
		rm -f "$TMP/ready"
		ip netns exec "$NS_S" "$SW" --listen 198.18.0.1:4791 --tree "$TREE" \
			--stats-file "$TMP/$mode.json" --stats-interval-ms 0 \
			--ready-file "$TMP/ready" "${extra[@]}" 2>"$TMP/$mode.log" &
		SWPID=$!
		for ((i = 0; i < 100; i++)); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
		if [ ! -e "$TMP/ready" ]; then
			cat "$TMP/$mode.log"
			exit 1
		fi
		c0=$(proc_ticks $SWPID)
		h0=$(busy_ticks)
		pids=()
		for ((r = 0; r < NM; r++)); do
			ip netns exec "$NS_M" "$MEMBER" "$r" "$NM" 198.18.0.10:29500 \
				198.18.0.1:4791 198.18.0.$((10 + r)):4791 "$COUNT" "$ITERS" bench \
				>"$TMP/rank$r" 2>&1 &
			pids+=($!)
		done
		ok=1
		for p in "${pids[@]}"; do wait "$p" || ok=0; done
		c1=$(proc_ticks $SWPID)
		h1=$(busy_ticks)
		kill -TERM $SWPID
		wait $SWPID
		SWPID=
		if [ $ok = 0 ]; then
			cat "$TMP"/rank*
			echo "bench_switch_xdp: a rank failed ($mode)"
			exit 1
		fi
		secs=$(awk '{for (i = 1; i < NF; i++) if ($i == "seconds") print $(i + 1)}' \
			"$TMP"/rank* | sort -n | tail -1)
		$PY - "$TMP/$mode.json" "$mode" "$secs" "$(((c1 - c0)))" "$(((h1 - h0)))" "$HZ" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
mode, secs, ct, ht, hz = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
assert s["io"] == mode.split("-")[0], (s["io"], mode)
assert mode == "sockets" or s["xdp"]["attach"] == ("skb" if mode == "xdp-skb" else "native")
rx = s["rx_pkts"]
cpu = ct / hz
print(" %8s %10d %9.3f %12.0f %9.2f %15.0f %10.2f" % (mode, rx, secs, rx / secs, cpu,
      rx / cpu if cpu else float("nan"), ht / hz))
if s["drops_total"]:
    print("#   note: %d drops" % s["drops_total"])
EOF
	done
done
