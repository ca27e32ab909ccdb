#!/bin/sh
# bench/sim_bench.sh: inca-sim speed benchmark. Prints figures (wall and user time, peak RSS,
# events/s, the load average around each run), then PASS/FAIL lines against the targets.
# Exit status 0 whatever the result (timings depend on the machine's load).
#   1. 1024-host fat tree (k=16), 100G, permutation of 2 MB flows, idealised spraying (spray_ideal)
#      (htsim on this machine: ~14.6 s, 144 MB; target <= 5 s, <= 150 MB, every flow within 5%
#      of ideal)
#   2. 8192-host leaf-spine (128 x 64), 400G, permutation of 2 MB flows, idealised spraying
#      (htsim: 120-158 s, 0.9-1.1 GB; target: 10x htsim's speed, <= 12 s, and <= 600 MB)
#   3. 65,536-host fat tree (k=64), 100G, permutation of 2 MB flows, idealised spraying
#      (target <= 600 s and <= 2 GB; minutes: only when asked, progress every 10 s on stderr)
# usage: bench/sim_bench.sh [build-dir] [1|2|3|all]   (all = 1 and 2)
set -eu
BUILD=${1:-build}
WHICH=${2:-all}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIM="$BUILD/sim/inca-sim"
[ -x "$SIM" ] || { echo "sim_bench: $SIM not built (meson compile -C $BUILD inca-sim)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

check() { # label, ok (1/0)
	if [ "$2" = 1 ]; then echo "PASS $1"; else echo "FAIL $1"; fi
}

# run NAME INI MAX_WALL_S MAX_RSS_MB [quiet]: a quiet run keeps inca-sim's stderr (progress,
# final report) out of the way; otherwise it goes to the terminal.
run() {
	name=$1; ini=$2; max_wall=$3; max_rss_mb=$4; quiet=${5:-}
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
	if [ -n "$quiet" ]; then
		/usr/bin/time -v -o "$TMP/$name.time" "$SIM" -q "$ROOT/examples/sim/$ini" -o "$TMP/$name" \
			>"$TMP/$name.out" 2>"$TMP/$name.err" || true
	else
		/usr/bin/time -v -o "$TMP/$name.time" "$SIM" "$ROOT/examples/sim/$ini" -o "$TMP/$name" \
			>"$TMP/$name.out" || true
	fi
	load1=$(cut -d' ' -f1-3 /proc/loadavg)
	# events and simulated time come from the run's own summary (deterministic)
	events=$(sed -n 's/^  "events": \([0-9]*\),/\1/p' "$TMP/$name/summary.json")
	done_flows=$(sed -n 's/.*"completed": \([0-9]*\).*/\1/p' "$TMP/$name/summary.json")
	wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$TMP/$name.time")
	user=$(sed -n 's/.*User time (seconds): //p' "$TMP/$name.time")
	rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$TMP/$name.time")
	secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
	awk -v n="$name" -v w="$secs" -v u="$user" -v r="$rss" -v e="$events" -v f="$done_flows" \
	    -v l0="$load0" -v l1="$load1" 'BEGIN {
		printf "%-28s wall %7.2f s  user %7.2f s  peak RSS %7.1f MB  events %10d  %6.2f M events/s  flows done %d  load %s -> %s\n",
			n, w, u, r / 1024, e, (w > 0 ? e / w / 1e6 : 0), f, l0, l1
		printf "{\"bench\":\"sim\",\"case\":\"%s\",\"wall_s\":%.3f,\"user_s\":%.3f,\"rss_mb\":%.1f,\"events\":%d,\"mevents_per_s\":%.3f,\"load\":\"%s\"}\n",
			n, w, u, r / 1024, e, (w > 0 ? e / w / 1e6 : 0), l0 }'
	check "$name: wall $secs s <= $max_wall s" "$(awk -v w="$secs" -v m="$max_wall" 'BEGIN { print (w <= m) }')"
	check "$name: peak RSS <= $max_rss_mb MB" "$(awk -v r="$rss" -v m="$max_rss_mb" 'BEGIN { print (r / 1024 <= m) }')"
	flows=$(sed -n 's/.*"total": \([0-9]*\), "completed".*/\1/p' "$TMP/$name/summary.json")
	check "$name: all $flows flows completed" "$([ "$done_flows" = "$flows" ] && echo 1 || echo 0)"
	slow=$(sed -n 's/.*"slowdown": {.*"max": \([0-9.]*\)}.*/\1/p' "$TMP/$name/summary.json")
	echo "$name: max slowdown (FCT / ideal FCT) $slow"
}

case "$WHICH" in 1|all)
	run fattree_k16_100g_perm2MB fattree_k16_spray.ini 5 150 quiet
	check "fattree_k16_100g_perm2MB: every flow within 5% of ideal (spray_ideal)" \
		"$(awk -v s="$slow" 'BEGIN { print (s != "" && s <= 1.05) }')" ;;
esac
case "$WHICH" in 2|all)
	run leafspine_8192_400g_perm2MB leafspine_8192_400g.ini 12 600 quiet
	echo "leafspine_8192_400g_perm2MB: htsim took 120-158 s here: $(awk -v w="$secs" \
		'BEGIN { printf "%.1f-%.1fx", 120 / w, 158 / w }') its speed" ;;
esac
case "$WHICH" in 3)
	run fattree_k64_100g_perm2MB fattree_k64_spray.ini 600 2048 ;;
esac
