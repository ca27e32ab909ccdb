#!/usr/bin/python3
"""tools/sim_plot.py: turn an inca-sim output directory into PNG figures.

usage: /usr/bin/python3 tools/sim_plot.py OUTDIR [--top N]

Reads OUTDIR/fct.csv (FCT CDF, slowdown CDF, FCT vs size) and, if present,
OUTDIR/timeseries.csv (utilisation and queue occupancy of the N busiest ports) and
OUTDIR/timeseries_tc.csv (traffic classes: queue of the N largest port queues per class),
writes OUTDIR/fct_cdf.png, slowdown_cdf.png, util.png / queues.png and tc_queues.png.
Needs Debian's python3-matplotlib (use /usr/bin/python3).
"""
import csv
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def cdf(ax, values, label):
    v = sorted(values)
    if not v:
        return
    n = len(v)
    ax.step(v, [(i + 1) / n for i in range(n)], where="post", label=label)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2
    out = argv[1]
    top = 8
    if "--top" in argv:
        top = int(argv[argv.index("--top") + 1])
    written = []
    fct, slow = [], []
    with open(os.path.join(out, "fct.csv")) as f:
        for row in csv.DictReader(f):
            if row["fct_us"]:
                fct.append(float(row["fct_us"]))
                slow.append(float(row["slowdown"]))
    for name, vals, xl in (("fct_cdf.png", fct, "flow completion time (us)"),
                           ("slowdown_cdf.png", slow, "FCT / ideal FCT")):
        fig, ax = plt.subplots(figsize=(6, 4))
        cdf(ax, vals, "flows")
        ax.set_xlabel(xl)
        ax.set_ylabel("fraction of flows")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=120)
        plt.close(fig)
        written.append(name)

    ts = os.path.join(out, "timeseries.csv")
    if os.path.exists(ts):
        series = {}
        with open(ts) as f:
            for row in csv.DictReader(f):
                key = "%s->%s" % (row["node"], row["peer"])
                s = series.setdefault(key, ([], [], [], 0.0))
                s[0].append(float(row["time_us"]))
                s[1].append(float(row["util"]))
                s[2].append(int(row["queue_bytes"]))
                series[key] = (s[0], s[1], s[2], max(s[3], float(row["queue_bytes"])))
        busiest = sorted(series.items(), key=lambda kv: (-kv[1][3], -sum(kv[1][1])))[:top]
        for name, idx, yl in (("util.png", 1, "utilisation"), ("queues.png", 2, "queue (bytes)")):
            fig, ax = plt.subplots(figsize=(7, 4))
            for key, s in busiest:
                ax.plot(s[0], s[idx], label=key, linewidth=1)
            ax.set_xlabel("time (us)")
            ax.set_ylabel(yl)
            ax.grid(True, alpha=0.3)
            if busiest:
                ax.legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(os.path.join(out, name), dpi=120)
            plt.close(fig)
            written.append(name)
    tsc = os.path.join(out, "timeseries_tc.csv")
    if os.path.exists(tsc):
        series = {}
        with open(tsc) as f:
            for row in csv.DictReader(f):
                key = "%s->%s class %s" % (row["node"], row["peer"], row["class"])
                t, q = series.setdefault(key, ([], []))
                t.append(float(row["time_us"]))
                q.append(int(row["queue_bytes"]))
        largest = sorted(series.items(), key=lambda kv: -max(kv[1][1]))[:top]
        fig, ax = plt.subplots(figsize=(7, 4))
        for key, (t, q) in largest:
            ax.plot(t, q, label=key, linewidth=1)
        ax.set_xlabel("time (us)")
        ax.set_ylabel("class queue (bytes)")
        ax.grid(True, alpha=0.3)
        if largest:
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "tc_queues.png"), dpi=120)
        plt.close(fig)
        written.append("tc_queues.png")
    print("sim_plot: wrote " + ", ".join(os.path.join(out, w) for w in written))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
