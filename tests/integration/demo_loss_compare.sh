#!/bin/sh
# Integration: inca-demo --loss-compare P alternates INC-only runs without loss and with
# --drop-rate P (--loss-pairs K of each) and prints, per row, the median time both ways and the
# median lossy/lossless ratio of the pairs. A run that fails fails the whole command (exit 1,
# which run); options that would fight its own passes are refused with exit 2.
# usage: demo_loss_compare.sh <inca-demo> <inca-switch> [addr-index]
set -u
demo=$1
switch=$2
idx=${3:-119}
out=$(mktemp "${TMPDIR:-/tmp}/inca-losscmp.XXXXXX")
trap 'rm -f "$out"' EXIT

. "$(dirname "$0")/expect.sh"
demo() { "$demo" --switch "$switch" --addr-index "$idx" "$@"; }

expect 2 "needs a drop rate above 0" "--loss-compare 0 accepted" demo --loss-compare 0
expect 2 "not with --json" "--loss-compare with --json accepted" \
	demo --loss-compare 0.05 --json "$out.json"
expect 2 "not with --drop-rate" "--loss-compare with --drop-rate accepted" \
	demo --loss-compare 0.05 --drop-rate 0.1
expect 2 "counts the runs of --loss-compare" "--loss-pairs alone accepted" demo --loss-pairs 2
expect 2 "out of range" "--loss-pairs 0 accepted" demo --loss-compare 0.05 --loss-pairs 0
expect 1 "run 1 (lossless) failed" "a failing run not reported" \
	"$demo" --switch /nonexistent/inca-switch --addr-index "$idx" --loss-compare 0.05 -b 4 -e 4

# Two pairs at 5 % loss: four runs, then one summary row per size, each with both medians and
# a ratio whose lowest <= median <= highest.
expect 0 "run 4 of 4: lossy" "four runs not reported" \
	demo --loss-compare 0.05 --loss-pairs 2 -t fp32:sum -b 64K -e 256K -f 4 -n 3 -w 1 \
		--budget 0.5
rows=$(awk '$1 == 65536 || $1 == 262144 {
	split($7, r, /[()-]/); m = $6; sub(/x$/, "", m)
	if ($4 > 0 && $5 > 0 && r[2] + 0 <= m + 0 && m + 0 <= r[3] + 0) n++
} END { print n + 0 }' "$out")
if [ "$rows" -ne 2 ]; then
	cat "$out"
	echo "FAIL: expected 2 summary rows with both medians and a consistent ratio, got $rows"
	exit 1
fi
echo "ok: --loss-compare (4 runs, 2 rows), refusals and a failing run"
