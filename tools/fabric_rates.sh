#!/bin/sh
# tools/fabric_rates.sh: what `make fabric-rates` runs. The example fabric (tools/fabric_demo.sh,
# tools/fabric-example.ini) at several host-link rates, uplinks non-blocking (4 x the host rate),
# switch slots (the clients' window) scaled with the rate,
# one AllReduce size per rate (fp32 sum, INC next to the host ring): how much of the link INC
# reaches and how it compares with the ring as the links get faster and the 11 processes of the
# fabric compete for the machine's cores. Each run times 10 calls per algorithm. Prints one line
# per run, a verdict (the highest rate with INC >= 0.9 x link rate and >= 1.6 x the ring in
# every run of it) and, with matplotlib, a PNG (every run a point, a line through the medians).
# Needs root.
#   usage: tools/fabric_rates.sh [BUILD_DIR] [RATES] [SIZE]
#          RATES: Mbit/s, comma-separated, a rate may repeat (default 100,250,500,1000);
#          SIZE default 16M
#   output: BUILD_DIR/fabric-rates/run-N-RATE.txt (each run's log), rates.jsonl, rates.png
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=${1:-build}
rates=${2:-100,250,500,1000}
size=${3:-16M}
out=$build/fabric-rates
mkdir -p "$out"
: >"$out/rates.jsonl"
echo "# fabric-rates: $(nproc) cores; example fabric, host links R, uplinks 4R, AllReduce fp32 sum $size"
printf '# %8s %12s %12s %9s %9s\n' "host_Mb/s" "INC_GB/s" "ring_GB/s" "INC/link" "INC/ring"
best=0
passed=
failed=
run=0
rm -f "$out"/run-*.txt "$out"/rate-*.txt
for r in $(echo "$rates" | tr ',' ' '); do
	run=$((run + 1))
	log=$out/run-$run-$r.txt
	echo "# rate $r Mbit/s: running (up to a minute) ..." >&2
	# the window (slots x 4 KiB per rank) grows with the bandwidth-delay product: the example's
	# 32 slots at 100 Mbit/s, up to 256
	slots=$((32 * r / 100))
	[ "$slots" -lt 32 ] && slots=32
	[ "$slots" -gt 256 ] && slots=256
	if ! FABRIC_RATE=${r}mbit FABRIC_ARGS="--set uplink_rate=$((4 * r))mbit --set slots=$slots" \
		"$here/fabric_demo.sh" "$build" -- -b "$size" -e "$size" -t fp32:sum -n 10 -w 1 \
		--budget 0 >"$log" 2>&1; then
		echo "# rate $r Mbit/s: the fabric run failed, see $log"
		failed="$failed $r"
		continue
	fi
	# The row of the size: INC time/algbw ... ring time/algbw ... INC/ring INC/link
	row=$(awk -v s="$size" '$3 == "fp32" && $4 == "sum" && $1 ~ /^[0-9]+$/ { last = $0 } END { print last }' "$log")
	set -- $row
	inc=$6
	ring=${10}
	ratio=$(echo "${13}" | tr -d x)
	link=$(echo "${14}" | tr -d x)
	printf '  %9s %12s %12s %9s %9s\n' "$r" "$inc" "$ring" "$link" "$ratio"
	echo "{\"host_mbit\": $r, \"size\": \"$size\", \"inc_gbps\": $inc, \"ring_gbps\": $ring, \"inc_link\": $link, \"inc_ring\": $ratio}" >>"$out/rates.jsonl"
	if awk -v l="$link" -v q="$ratio" 'BEGIN { exit !(l >= 0.9 && q >= 1.6) }'; then
		passed="$passed $r"
	else
		failed="$failed $r"
	fi
done
# A rate counts if every run of it passed (a rate may be given several times).
for r in $passed; do
	case " $failed " in *" $r "*) continue ;; esac
	[ "$r" -gt "$best" ] && best=$r
done
if [ "$best" = 0 ]; then
	echo "# verdict: no rate reached INC >= 0.9 x link and >= 1.6 x ring in every run"
else
	echo "# verdict: highest host-link rate with INC >= 0.9 x link and >= 1.6 x ring in every run: $best Mbit/s"
fi
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
	/usr/bin/python3 - "$out/rates.jsonl" "$out/rates.png" <<'PY'
import json, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
if rows:
    rates = sorted({r["host_mbit"] for r in rows})
    def med(key):
        return [statistics.median(r[key] for r in rows if r["host_mbit"] == x) for x in rates]
    x = [r["host_mbit"] for r in rows]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for key, mk, lab, a in (("inc_gbps", "o", "INC", 0), ("ring_gbps", "s", "host ring", 0),
                            ("inc_link", "o", "INC / link", 1), ("inc_ring", "s", "INC / ring", 1)):
        line, = ax[a].plot(rates, med(key), mk + "-", label=lab)
        ax[a].plot(x, [r[key] for r in rows], mk, color=line.get_color(), alpha=0.35)
    ax[0].plot(rates, [m / 8000 for m in rates], "k--", label="link rate")
    ax[0].set_xlabel("host link (Mbit/s)"); ax[0].set_ylabel("algbw (GB/s)"); ax[0].legend()
    ax[1].axhline(0.9, color="gray", ls=":"); ax[1].axhline(1.6, color="gray", ls=":")
    ax[1].set_xlabel("host link (Mbit/s)"); ax[1].legend()
    fig.suptitle("AllReduce %s on the example fabric (8 ranks, 3 switches)" % rows[0]["size"])
    fig.tight_layout(); fig.savefig(sys.argv[2], dpi=100)
    print("# plot: " + sys.argv[2])
PY
fi
