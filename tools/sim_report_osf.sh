#!/bin/bash
# tools/sim_report_osf.sh OUTDIR: runs every OSF / failure scenario (examples/sim/osf_*.ini)
# against its baselines with inca-sim and writes OUTDIR/osf.md (tables) and PNG plots (queue
# depth over time, FCT CDFs, throughput around the failure). Deterministic per seed.
# The simulator is $INCA_SIM, else the first of build*/sim/inca-sim found (build-osf, build).
set -euo pipefail
OUT=${1:?usage: sim_report_osf.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIM=${INCA_SIM:-}
if [ -z "$SIM" ]; then
	for b in build build-osf build-sim; do
		[ -x "$ROOT/$b/sim/inca-sim" ] && { SIM="$ROOT/$b/sim/inca-sim"; break; }
	done
fi
[ -x "$SIM" ] || { echo "inca-sim not found (set INCA_SIM)" >&2; exit 1; }
EX="$ROOT/examples/sim"
mkdir -p "$OUT/runs"

# name | scenario | overrides (one per line in $3, so values may hold spaces)
run() {
	local name=$1 ini=$2; shift 2
	local t0=$(date +%s.%N)
	"$SIM" "$EX/$ini" sim.progress_s=0 "$@" -o "$OUT/runs/$name" >"$OUT/runs/$name.log" 2>&1 || true
	printf '%-34s %6.1f s\n' "$name" "$(echo "$(date +%s.%N) - $t0" | bc)"
}

ECMP=(osf.mode=off switch.routing=ecmp host.cc=dcqcn)
ECMP_PFC=(osf.mode=off switch.routing=ecmp host.cc=dcqcn host.transport=sr switch.pfc=true)
SPRAY_PFC=(osf.mode=off switch.routing=spray_ideal host.cc=dcqcn host.transport=sr switch.pfc=true)

for sc in incast permutation; do
	run "${sc}_osf_credit" "osf_$sc.ini"
	run "${sc}_osf_spray_nocredit" "osf_$sc.ini" osf.mode=spray
	run "${sc}_ecmp_dcqcn" "osf_$sc.ini" "${ECMP[@]}"
	run "${sc}_ecmp_dcqcn_pfc" "osf_$sc.ini" "${ECMP_PFC[@]}"
done

run failover_osf_credit_distributed osf_failover.ini osf.tm=distributed
run failover_osf_credit_hybrid osf_failover.ini osf.tm=hybrid
run failover_osf_credit_centralised osf_failover.ini osf.tm=centralised
run failover_osf_credit_nofailure osf_failover.ini "failure.event1="
run failover_osf_spray_nocredit osf_failover.ini osf.mode=spray
run failover_ecmp_dcqcn_pfc_slowreconv osf_failover.ini "${ECMP_PFC[@]}"
run failover_ecmp_dcqcn_pfc_nofailure osf_failover.ini "${ECMP_PFC[@]}" "failure.event1="
run failover_spray_pfc_slowreconv osf_failover.ini "${SPRAY_PFC[@]}"
run failover_spray_pfc_nofailure osf_failover.ini "${SPRAY_PFC[@]}" "failure.event1="

LOSS="failure.event1=50 leaf0-spine1 degrade loss=0.01"
run degraded_rate_osf_credit osf_degraded.ini
run degraded_rate_ecmp_dcqcn_pfc osf_degraded.ini "${ECMP_PFC[@]}"
run degraded_rate_spray_pfc osf_degraded.ini "${SPRAY_PFC[@]}"
run degraded_loss_osf_credit osf_degraded.ini "$LOSS"
run degraded_loss_ecmp_dcqcn_pfc osf_degraded.ini "${ECMP_PFC[@]}" "$LOSS"
run degraded_loss_spray_pfc osf_degraded.ini "${SPRAY_PFC[@]}" "$LOSS"
run degraded_none_osf_credit osf_degraded.ini "failure.event1="

# Cells (aggregation / fragmentation). Small packets: chunk_pkts keeps ~16.9 KB per credit
# request where noted (64 packets of 264 B = 16 cells of 1056 B).
run cells_small_1_perpkt_chunk4 osf_cells_small.ini osf.cell_bytes=0 osf.chunk_pkts=4
run cells_small_2_perpkt_chunk64 osf_cells_small.ini osf.cell_bytes=0 osf.chunk_pkts=64
run cells_small_3_cell1024_onepkt_padded osf_cells_small.ini osf.cell_aggregate=false osf.cell_pad=true
run cells_small_4_cell1024_onepkt osf_cells_small.ini osf.cell_aggregate=false
run cells_small_5_cell1024_agg osf_cells_small.ini
run cells_small_6_cell1024_agg_padded osf_cells_small.ini osf.cell_pad=true
run cells_small_7_cell4096_agg osf_cells_small.ini osf.cell_bytes=4096 osf.chunk_pkts=4
run cells_small_8_spray_perpkt osf_cells_small.ini osf.mode=spray osf.cell_bytes=0
run cells_small_9_spray_cell1024_onepkt_padded osf_cells_small.ini osf.mode=spray osf.cell_aggregate=false osf.cell_pad=true
run cells_small_a_spray_cell1024_agg osf_cells_small.ini osf.mode=spray
# Jumbo packets cut into cells; ~36 KB per credit request in every row.
for sc in perm incast; do
	ini=osf_cells_jumbo.ini; extra=()
	[ $sc = incast ] && { ini=osf_incast.ini; extra=(host.mtu_bytes=9000 osf.cell_header_bytes=32); }
	run cells_jumbo_${sc}_1_perpkt $ini "${extra[@]}" osf.cell_bytes=0 osf.chunk_pkts=4
	run cells_jumbo_${sc}_2_cell4096 $ini "${extra[@]}" osf.cell_bytes=4096 osf.chunk_pkts=9
	run cells_jumbo_${sc}_3_cell1024 $ini "${extra[@]}" osf.cell_bytes=1024 osf.chunk_pkts=35
	run cells_jumbo_${sc}_4_cell256 $ini "${extra[@]}" osf.cell_bytes=256 osf.chunk_pkts=126
done
run failover_osf_credit_distributed_cells1024 osf_failover.ini osf.cell_bytes=1024 osf.chunk_pkts=16
run degraded_loss_osf_credit_cells1024 osf_degraded.ini "$LOSS" osf.cell_bytes=1024 osf.chunk_pkts=16
run degraded_rate_osf_credit_cells1024 osf_degraded.ini osf.cell_bytes=1024 osf.chunk_pkts=16

/usr/bin/python3 - "$OUT" <<'PYEOF'
import csv, json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

out = sys.argv[1]
runs = os.path.join(out, "runs")

def load(name):
    d = os.path.join(runs, name)
    r = {"name": name}
    r["sum"] = json.load(open(os.path.join(d, "summary.json")))
    for k in ("osf", "fail"):
        p = os.path.join(d, k + ".json")
        r[k] = json.load(open(p)) if os.path.exists(p) else None
    r["fct"] = [float(x["fct_us"]) for x in csv.DictReader(open(os.path.join(d, "fct.csv"))) if x["fct_us"]]
    ts = os.path.join(d, "timeseries.csv")
    r["ts"] = list(csv.DictReader(open(ts))) if os.path.exists(ts) else []
    return r

def names(prefix):
    return sorted(n for n in os.listdir(runs) if n.startswith(prefix) and os.path.isdir(os.path.join(runs, n)))

def row(r):
    s, o, f = r["sum"], r["osf"] or {}, r["fail"] or {}
    fct = s["fct_us"]
    drops = s["drops"]["total"] + f.get("drops_link_down", 0) + f.get("drops_loss", 0)
    return "| %s | %d/%d | %.1f | %.1f | %.1f | %d | %d | %d | %s | %s | %s |" % (
        r["name"], s["flows"]["completed"], s["flows"]["total"], fct["mean"], fct["p99"], fct["max"],
        drops, s["counters"]["retx_pkts"], s["counters"]["max_queue_bytes"],
        o.get("credit_rejs", "-"), o.get("reorder_max_pkts", "-"), o.get("inorder_violations", "-"))

HDR = ("| run | flows done | FCT mean us | FCT p99 us | FCT max us | drops (queue+link) | retx pkts | "
       "max queue B | credit rejections | max reorder buf (pkts) | in-order violations |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|")

def cdf(prefix, title, fname):
    plt.figure(figsize=(7, 4.5))
    for n in names(prefix):
        v = sorted(load(n)["fct"])
        if v:
            plt.step(v, [(i + 1) / len(v) for i in range(len(v))], where="post", label=n[len(prefix):])
    plt.xlabel("FCT (us)"); plt.ylabel("CDF"); plt.title(title); plt.grid(alpha=.3); plt.legend(fontsize=7)
    plt.tight_layout(); plt.savefig(os.path.join(out, fname), dpi=110); plt.close()

def series(r, key):
    """per sample time: max queue over switch ports, or delivered Gbit/s into hosts."""
    acc = {}
    for x in r["ts"]:
        t = float(x["time_us"])
        if key == "queue":
            if not x["node"].startswith("h"):
                acc[t] = max(acc.get(t, 0), int(x["queue_bytes"]))
        elif x["peer"].startswith("h") and not x["node"].startswith("h"):
            acc[t] = acc.get(t, 0) + float(x["util"]) * 100.0  # host links are 100G here
    ts = sorted(acc)
    return ts, [acc[t] for t in ts]

def tsplot(prefix, key, title, fname, ylabel, vline=None, xmax=None):
    plt.figure(figsize=(7, 4.5))
    for n in names(prefix):
        t, v = series(load(n), key)
        if t:
            plt.plot(t, v, label=n[len(prefix):], lw=1)
    if vline is not None:
        plt.axvline(vline, color="k", ls="--", lw=.8)
    if xmax:
        plt.xlim(0, xmax)
    plt.xlabel("time (us)"); plt.ylabel(ylabel); plt.title(title); plt.grid(alpha=.3); plt.legend(fontsize=7)
    plt.tight_layout(); plt.savefig(os.path.join(out, fname), dpi=110); plt.close()

md = ["# OSF (draft-hcl) and failures: inca-sim report", "",
      "Generated by `tools/sim_report_osf.sh`; scenarios `examples/sim/osf_*.ini`, seed 1. "
      "FCT = receiver got the last byte. Drops include packets lost on a dead or lossy link. "
      "Max queue = largest data queue of any port during the run.", ""]
for sc, title in (("incast_", "Incast 15 -> 1, k=4 fat tree, 1 MB each"),
                  ("permutation_", "Permutation, k=4 fat tree, 2 MB flows")):
    md += ["## " + title, "", HDR] + [row(load(n)) for n in names(sc)] + [""]
    cdf(sc, title, sc + "fct_cdf.png")
    tsplot(sc, "queue", title + ": max switch queue", sc + "queue.png", "bytes")
    md += ["![](%sfct_cdf.png) ![](%squeue.png)" % (sc, sc), ""]

md += ["## Mid-run link failure (leaf0-spine1 down at 100 us), leaf-spine 4x4, 4 MB permutation", "", HDR]
md += [row(load(n)) for n in names("failover_")] + [""]
md += ["| run | failure at us | every ingress notified after us | last send over dead link after us | "
       "sends after notification | lost at dead link | reroute at us |", "|---|---|---|---|---|---|---|"]
for n in names("failover_"):
    r = load(n); o, f = r["osf"], r["fail"]
    if not f:
        continue
    fail = f["first_down_us"]
    if o:
        md.append("| %s | %.1f | %.2f | %.2f | %d | %d | - |" % (n, fail, o["notify_max_us"] - fail,
                  max(o["last_stale_us"] - fail, 0) if o["last_stale_us"] >= 0 else 0,
                  o["late_stale_sends"], f["drops_link_down"]))
    else:
        md.append("| %s | %.1f | - | - | - | %d | %.1f |" % (n, fail, f["drops_link_down"], f["last_reroute_us"]))
md.append("")
cdf("failover_", "Link failure at 100 us", "failover_fct_cdf.png")
tsplot("failover_", "tput", "Delivered throughput around the failure", "failover_throughput.png",
       "Gbit/s into hosts", vline=100, xmax=1200)
md += ["![](failover_fct_cdf.png) ![](failover_throughput.png)", ""]

md += ["## Degraded link (leaf0-spine1 at 50 us: rate x0.25, or 1% loss)", "", HDR]
md += [row(load(n)) for n in names("degraded_")] + [""]
cdf("degraded_", "Degraded link", "degraded_fct_cdf.png")
md += ["![](degraded_fct_cdf.png)", ""]

def cellrow(r):
    s, o = r["sum"], r["osf"] or {}
    fct = s["fct_us"]
    done = s["flows"]["completed"]
    size = r["size"]
    good = size * 8 / (fct["max"] * 1e3) if fct["max"] else 0  # Gbit/s, all flows / last end
    cb = o.get("cell_bytes", 0)
    cells = o.get("cells_sent", 0)
    ppc = "%.2f" % (o["orig_pkts_sent"] / cells) if cb and cells else "1"
    hdr = "%.1f" % (100.0 * (o["cell_wire_bytes"] - o["cell_payload_bytes"]) / o["cell_payload_bytes"]) \
        if cb and o.get("cell_payload_bytes") else "-"
    return "| %s | %s | %d/%d | %.1f | %.1f | %.1f | %d | %s | %s | %s | %s | %d | %d | %d | %d |" % (
        r["name"], cb or "-", done, s["flows"]["total"], fct["mean"], fct["max"], good, cells, ppc,
        o.get("frag_pkts", 0) if cb else "-", o.get("agg_cells", 0) if cb else "-", hdr,
        o.get("credit_reqs", 0), o.get("reorder_max_pkts", 0), s["counters"]["max_queue_bytes"],
        s["drops"]["total"])

CHDR = ("| run | cell B | flows done | FCT mean us | FCT max us | goodput Gbit/s (all flows) | units on "
        "the wire (cells or pkts) | pkts per cell | fragmented pkts | cells with >1 pkt | cell header + padding "
        "% of payload | credit requests | max reorder buf (units) | max queue B | drops |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

def flowbytes(n):
    return sum(int(x["size_bytes"]) for x in csv.DictReader(open(os.path.join(runs, n, "fct.csv"))))

md += ["## Cells: aggregation of small packets (200 B payload), leaf-spine 4x4, 16 x 2 MB", "",
       "`osf_cells_small.ini`; onepkt = `cell_aggregate=false` (one packet per cell), padded = "
       "`cell_pad=true` (fixed-size cells on the wire), perpkt = no cells (`cell_bytes=0`), chunkN = "
       "credit units per request. Goodput = bytes of all flows / time the last one ended.", "", CHDR]
for n in names("cells_small_"):
    r = load(n); r["size"] = flowbytes(n); md.append(cellrow(r))
md.append("")
for sc, title in (("perm", "permutation 16 x 2 MB, leaf-spine 4x4 (`osf_cells_jumbo.ini`)"),
                  ("incast", "incast 15 -> 1 x 1 MB, k=4 fat tree (`osf_incast.ini`)")):
    pre = "cells_jumbo_%s_" % sc
    md += ["## Cells: fragmentation of 9000-byte packets, " + title, "", CHDR]
    for n in names(pre):
        r = load(n); r["size"] = flowbytes(n); md.append(cellrow(r))
    md.append("")
    cdf(pre, "9000 B packets in cells: " + sc, pre + "fct_cdf.png")
    tsplot(pre, "queue", "9000 B packets in cells: max switch queue, " + sc, pre + "queue.png", "bytes")
    md += ["![](%sfct_cdf.png) ![](%squeue.png)" % (pre, pre), ""]
open(os.path.join(out, "osf.md"), "w").write("\n".join(md) + "\n")
print("wrote", os.path.join(out, "osf.md"))
PYEOF
