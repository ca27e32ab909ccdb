#!/usr/bin/python3
"""Plot algbw vs size per collective from inca-bench's JSON lines (--json).

usage: plot_coll.py ROWS.jsonl OUT.png [--title TEXT]

One panel per collective found in the file (Barrier: time per call as bars), one line per
algorithm (INC, each host algorithm, auto, Open MPI) and type:op. Rows that failed (errors or
wrong results) are left out and listed on stderr. Needs matplotlib (Debian
python3-matplotlib); exits 3 if it is missing.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_bench import load, parse_args  # noqa: E402  (shared with plot_bench.py)

ORDER = ["allreduce", "reduce", "bcast", "allgather", "reducescatter", "alltoall", "gather",
         "scatter", "barrier"]
STYLE = {"inc": ("INC (in-network)", "-", "o"), "auto": ("auto", ":", "x"),
         "ompi": ("Open MPI (TCP)", "--", "s")}
# one colour per algorithm in every panel
COLOR = {"inc": "tab:green", "ring": "tab:blue", "recdbl": "tab:purple",
         "rabenseifner": "tab:brown", "binomial": "tab:orange", "bruck": "tab:pink",
         "pairwise": "tab:olive", "linear": "tab:cyan", "auto": "black", "ompi": "tab:red"}


def main(argv):
    args = parse_args(argv, __doc__)
    if isinstance(args, int):
        return args
    src, out, title, plt = args
    rows = [r for r in load(src) if "coll" in r and "size_bytes" in r]
    good = []
    for r in rows:
        if r.get("errors", 0) or r.get("wrong", 0) or not r.get("iters", 0):
            print(f"skipping {r['coll']} {r.get('algo')} at {r['size_bytes']} B: failed",
                  file=sys.stderr)
            continue
        good.append(r)
    if not good:
        print(f"{src}: no usable rows", file=sys.stderr)
        return 1
    colls = [c for c in ORDER if any(r["coll"] == c for r in good)]
    ncols = min(3, len(colls))
    nrows = math.ceil(len(colls) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 4 * nrows), squeeze=False)
    ranks = good[0].get("ranks", "?")
    for idx, coll in enumerate(colls):
        ax = axes[idx // ncols][idx % ncols]
        sel = [r for r in good if r["coll"] == coll]
        if coll == "barrier":
            labels = [STYLE.get(r["algo"], (r["algo"],))[0] for r in sel]
            ax.bar(range(len(sel)), [r["time_us"] for r in sel],
                   color=[COLOR.get(r["algo"], "gray") for r in sel])
            ax.set_xticks(range(len(sel)))
            ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel("time per call (us)")
            ax.set_title(f"barrier, {ranks} ranks")
            continue
        series = {}
        for r in sel:
            key = (r["algo"], f"{r.get('type', '?')}:{r.get('op', '?')}".replace(":none", ""))
            series.setdefault(key, []).append((r["size_bytes"], r["algbw_gbps"]))
        multi = len({k[1] for k in series}) > 1
        for (algo, pair), pts in sorted(series.items()):
            pts.sort()
            label, ls, mk = STYLE.get(algo, (algo, "-", "."))
            if multi:
                label += " " + pair
            ax.plot([p[0] for p in pts], [max(p[1], 1e-6) for p in pts], linestyle=ls,
                    marker=mk, label=label, color=COLOR.get(algo))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes, nccl-tests convention)")
        ax.set_ylabel("algbw (GB/s)")
        ax.set_title(f"{coll}, {ranks} ranks")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for idx in range(len(colls), nrows * ncols):
        axes[idx // ncols][idx % ncols].axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
