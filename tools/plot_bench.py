#!/usr/bin/python3
"""Plot AllReduce algbw vs size from the JSON lines of bench-allreduce / inca-demo (--json).

usage: plot_bench.py ROWS.jsonl OUT.png [--title TEXT]

One line per algorithm (INC, host ring) and per type:op found in the file. Rows whose
algorithm failed (errors or wrong results) are left out and listed on stderr. Needs matplotlib
(Debian python3-matplotlib); exits 3 if it is missing.
"""
import json
import sys


def load(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                print(f"{path}:{n}: {e}", file=sys.stderr)
    return rows


def parse_args(argv, doc):
    """ROWS.jsonl OUT.png [--title TEXT] -> (src, out, title, pyplot), or the exit status
    (2 usage, 3 matplotlib missing)."""
    if len(argv) < 3 or argv[-1] == "--title":
        print(doc, file=sys.stderr)
        return 2
    title = None
    if "--title" in argv:
        i = argv.index("--title")
        title = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if len(argv) < 3:
        print(doc, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available", file=sys.stderr)
        return 3
    return argv[1], argv[2], title, plt


def main(argv):
    args = parse_args(argv, __doc__)
    if isinstance(args, int):
        return args
    src, out, title, plt = args
    rows = [r for r in load(src) if "size_bytes" in r]
    if not rows:
        print(f"{src}: no rows", file=sys.stderr)
        return 1
    series = {}
    for r in rows:
        for algo, label in (("inc", "INC (in-network)"), ("ring", "host ring")):
            if f"{algo}_algbw_gbps" not in r:
                continue
            key = (f"{r.get('type', '?')}:{r.get('op', '?')}", label)
            if r.get(f"{algo}_errors", 0) or r.get(f"{algo}_wrong", 0):
                print(f"skipping {key} at {r['size_bytes']} B: failed", file=sys.stderr)
                continue
            series.setdefault(key, []).append((r["size_bytes"], r[f"{algo}_algbw_gbps"]))
    # Left: time per call (latency for small sizes); right: algbw. Both log-log, since the
    # sizes span 4 B .. 64 MiB and the figures several orders of magnitude.
    times = {}
    for r in rows:
        for algo, label in (("inc", "INC (in-network)"), ("ring", "host ring")):
            key = (f"{r.get('type', '?')}:{r.get('op', '?')}", label)
            if key in series and f"{algo}_time_us" in r and not r.get(f"{algo}_errors", 0):
                times.setdefault(key, []).append((r["size_bytes"], r[f"{algo}_time_us"]))
    fig, (ax_t, ax) = plt.subplots(1, 2, figsize=(12, 5))
    multi = len({k[0] for k in series}) > 1
    for (pair, label), pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                label=f"{label} {pair}" if multi else label)
    for (pair, label), pts in sorted(times.items()):
        pts.sort()
        ax_t.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                  label=f"{label} {pair}" if multi else label)
    ranks = rows[0].get("ranks", "?")
    for a in (ax_t, ax):
        a.set_xscale("log", base=2)
        a.set_yscale("log")
        a.set_xlabel("message size (bytes)")
        a.grid(True, which="both", alpha=0.3)
        a.legend()
    ax_t.set_ylabel("time per call (us)")
    ax_t.set_title(f"AllReduce time, {ranks} ranks on loopback")
    ax.set_ylabel("algbw (GB/s)")
    ax.set_title(title or f"AllReduce algbw, {ranks} ranks on loopback")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
