#!/bin/sh
# bench/run_all.sh: run every INCA benchmark on this host and keep their tables and JSON lines.
#   bench/run_all.sh [BUILD_DIR] [OUT_DIR]      (defaults: build, BUILD_DIR/bench-results)
# bench-kernels (reduce kernels vs memcpy), bench-switch (switch data path vs --reflect),
# bench-allreduce (INC vs host ring, 4 ranks, plot), and what 5 % loss costs INC (bench-allreduce
# --loss-compare, 1-16 MiB). Bounded: about 3 minutes in total.
# INCA_BENCH_LARGE=1 adds the opt-in 1 GiB AllReduce (4 ranks x 2 buffers x 1 GiB = 8 GiB RAM).
set -u
BUILD=${1:-build}
OUT=${2:-$BUILD/bench-results}
B=$BUILD/bench
mkdir -p "$OUT" || exit 1
status=0

run() { # name, command...
	name=$1
	shift
	echo "=== $name: $*"
	if "$@" >"$OUT/$name.txt" 2>"$OUT/$name.err"; then
		cat "$OUT/$name.txt"
	else
		rc=$?
		cat "$OUT/$name.txt" "$OUT/$name.err"
		echo "=== $name FAILED (exit $rc)"
		status=1
	fi
	echo
}

if [ -x "$B/bench-kernels" ]; then
	run kernels "$B/bench-kernels"
	grep '^{' "$OUT/kernels.txt" >"$OUT/kernels.jsonl" || true
else
	echo "=== kernels: $B/bench-kernels not built, skipped"
fi

rm -f "$OUT/switch.jsonl" "$OUT/allreduce.jsonl"
run switch "$B/bench-switch" --json "$OUT/switch.jsonl"
run allreduce "$B/bench-allreduce" --json "$OUT/allreduce.jsonl" --plot "$OUT/allreduce.png"
run allreduce-loss "$B/bench-allreduce" -t fp32:sum -b 1M -e 16M -f 4 -n 10 --loss-compare 0.05 \
	--loss-pairs 5 --addr-index 42

if [ "${INCA_BENCH_LARGE:-0}" = 1 ]; then
	run allreduce-1g "$B/bench-allreduce" -b 1G -e 1G -n 3 -w 1 --budget 0 \
		--addr-index 42 --json "$OUT/allreduce-1g.jsonl"
fi

echo "results in $OUT/ (*.txt tables, *.jsonl one JSON object per row, allreduce.png)"
exit $status
