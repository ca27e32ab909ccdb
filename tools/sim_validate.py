#!/usr/bin/python3
"""tools/sim_validate.py: inca-sim against reference figures (the one command behind
`make sim-validate`).

usage: /usr/bin/python3 tools/sim_validate.py [--build DIR] [--quick] [--only NAME]
                                              [--keep DIR] [--write-matrices]

Reads sim/validate/reference.json: each case names an inca-sim run (scenario file and/or
connection matrix plus overrides), the figure taken from its outputs, the reference figure,
a tolerance and the reference's source: an analytic result (recomputed here from the
parameters the case states, and checked against the recorded figure) or an htsim measurement
(with the htsim command line). Prints one row per case (ours, reference, tolerance,
PASS/FAIL) and exits 1 if any case fails, 2 on bad usage or a run that could not be made.
--quick runs the cases marked quick (a few seconds; the sim test suite runs them).
--write-matrices regenerates the connection matrices in sim/validate/ (deterministic).
"""
import csv
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VDIR = os.path.join(ROOT, "sim", "validate")
PS_PER_US = 1e6


# ---- analytic references ------------------------------------------------------------------
def ser_ps(nbytes, rate_bps):
    """Serialisation time, rounded up to the picosecond (as sim/sim_time.h)."""
    return (nbytes * 8_000_000_000_000 + rate_bps - 1) // rate_bps


def flow_fct_ps(size, mtu, hdr, hops):
    """FCT of a flow alone on its path: packets of mtu payload + hdr leave the sender back to
    back; every hop (rate_bps, latency_ps) stores and forwards. Returns the arrival of the
    last bit of the last packet at the receiver."""
    npkt = -(-size // mtu)
    free = [0] * len(hops)
    t = 0
    for i in range(npkt):
        wire = (mtu if i + 1 < npkt else size - (npkt - 1) * mtu) + hdr
        t = 0
        for h, (rate, lat) in enumerate(hops):
            start = max(t, free[h])
            end = start + ser_ps(wire, rate)
            free[h] = end
            t = end + lat
    return t


def fattree_links(k, a, b):
    """Links between hosts a and b of a k-ary fat tree (k/2 hosts per ToR, k/2 ToRs per pod)."""
    half = k // 2
    if a // half == b // half:
        return 2
    if a // (half * half) == b // (half * half):
        return 4
    return 6


def wire_bytes(size, mtu, hdr):
    return size + -(-size // mtu) * hdr


def analytic(a):
    """The reference figure of an analytic case, in us (or a ratio), from its parameters."""
    kind = a["kind"]
    mtu, hdr = a.get("mtu", 4096), a.get("header", 64)
    rate = int(a.get("gbps", 100) * 1e9)
    lat = int(a.get("latency_ns", 500) * 1000)
    if kind == "flow_fct":
        return flow_fct_ps(a["size"], mtu, hdr, [(rate, lat)] * a["links"]) / PS_PER_US
    if kind == "bottleneck":  # n flows of size through one link of rate: n * wire / B
        return a["n"] * wire_bytes(a["size"], mtu, hdr) * 8e6 / rate
    if kind == "ring_bw":  # 2(n-1) steps of S/n bytes through each host link
        n, chunk = a["n"], -(-a["size"] // a["n"])
        return 2 * (n - 1) * wire_bytes(chunk, mtu, hdr) * 8e6 / rate
    if kind == "ring_path":
        # Step k of rank i starts when rank i has received step k-1 from rank i-1, so rank i's
        # last chunk arrives after the FCTs of 2(n-1) consecutive ring edges ending at it.
        n, k, chunk = a["n"], a["k"], -(-a["size"] // a["n"])
        d = [flow_fct_ps(chunk, mtu, hdr, [(rate, lat)] * fattree_links(k, i, (i + 1) % n))
             for i in range(n)]
        steps = 2 * (n - 1)
        return max(sum(d[(i - j) % n] for j in range(steps)) for i in range(n)) / PS_PER_US
    raise ValueError("unknown analytic kind " + kind)


# ---- connection matrices ------------------------------------------------------------------
def write_matrices():
    """The connection matrices of sim/validate/ (both simulators read them)."""
    def cm(name, nodes, lines, triggers=()):
        with open(os.path.join(VDIR, name), "w") as f:
            f.write("Nodes %d\nConnections %d\n" % (nodes, len(lines)))
            if triggers:
                f.write("Triggers %d\n" % len(triggers))
            f.write("".join(l + "\n" for l in lines))
            f.write("".join(t + "\n" for t in triggers))
        print("wrote", os.path.join("sim/validate", name))
    cm("single_flow_k4.cm", 16, ["0->15 id 1 start 0 size 2000000"])
    cm("single_flow_leafspine.cm", 4, ["0->3 id 1 start 0 size 1000001"])
    rng = random.Random(1)
    cm("incast_pfc_k8.cm", 128, ["%d->0 id %d start 0 size 2000000" % (s, i + 1)
                                 for i, s in enumerate(sorted(rng.sample(range(1, 128), 16)))])
    # Ring AllReduce as htsim's generators write it: rank s runs a chain of 2n-1 flows of
    # one chunk, each to the next rank, started by the previous one's send_done trigger.
    n, lines, trig, fid = 16, [], [], 0
    for s in range(n):
        for d in range(1, 2 * n):
            fid += 1
            src, dst = (s + d - 1) % n, (s + d) % n
            start = "start 0" if d == 1 else "trigger %d" % (len(trig))
            done = " send_done_trigger %d" % (len(trig) + 1) if d != 2 * n - 1 else ""
            if d != 2 * n - 1:
                trig.append("trigger id %d oneshot" % (len(trig) + 1))
            lines.append("%d->%d id %d %s size 1000000%s" % (src, dst, fid, start, done))
    cm("ring16_triggers.cm", n, lines, trig)
    rng = random.Random(1)
    while True:
        perm = list(range(1024))
        rng.shuffle(perm)
        if all(perm[i] != i for i in range(1024)):
            break
    cm("perm_k16_2MB.cm", 1024, ["%d->%d id %d start 0 size 2000000" % (i, perm[i], i + 1)
                                 for i in range(1024)])


# ---- runs and figures ---------------------------------------------------------------------
def run_sim(sim, case, outdir):
    r = case["run"]
    args = [sim, "-q"]
    if "ini" in r:
        args.append(os.path.join(ROOT, r["ini"]))
    if "cm" in r:
        args += ["--cm", os.path.join(ROOT, r["cm"])]
    args += ["-o", outdir]
    if r.get("set"):
        args += ["-s"] + r["set"]
    p = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError("inca-sim exited %d: %s\n  %s" % (p.returncode, p.stderr.strip(),
                                                            " ".join(args)))


def figure(outdir, metric):
    """ours: a figure of a run, from its fct.csv / summary.json."""
    with open(os.path.join(outdir, "fct.csv")) as f:
        rows = list(csv.DictReader(f))
    fct = [float(r["fct_us"]) for r in rows if r["fct_us"]]
    if len(fct) != len(rows):
        raise RuntimeError("%d of %d flows did not finish" % (len(rows) - len(fct), len(rows)))
    name, _, arg = metric.partition(":")
    if name == "fct_us":  # one flow by id
        return float(next(r["fct_us"] for r in rows if r["flow_id"] == arg))
    if name == "last_finish_us":
        return max(float(r["finish_us"]) for r in rows)
    if name == "max_fct_us":
        return max(fct)
    if name == "min_fct_us":
        return min(fct)
    if name == "max_slowdown":
        return max(float(r["slowdown"]) for r in rows)
    if name == "min_slowdown":  # FCT over the run's own ideal: below 1 = faster than alone
        return min(float(r["slowdown"]) for r in rows)
    if name in ("min_fct_ratio_fattree", "max_fct_ratio_fattree"):
        # FCT over the analytic FCT alone on the path (k-ary fat tree, 100G, 500 ns links)
        k = int(arg)
        with open(os.path.join(outdir, "params.ini")) as f:
            lat = next(int(float(l.split("=")[1])) for l in f if l.startswith("host_latency_ns"))
        ratios = [float(r["fct_us"]) * PS_PER_US /
                  flow_fct_ps(int(r["size_bytes"]), 4096, 64,
                              [(100 * 10**9, lat * 1000)] * fattree_links(k, int(r["src"]), int(r["dst"])))
                  for r in rows]
        return min(ratios) if name.startswith("min") else max(ratios)
    if name == "drops":
        with open(os.path.join(outdir, "summary.json")) as f:
            return json.load(f)["drops"]["total"]
    raise ValueError("unknown metric " + metric)


def verdict(ours, ref, check, tol):
    """PASS/FAIL and the tolerance as printed."""
    rel, absu = tol.get("rel", 0.0), tol.get("abs", 0.0)
    if check == "within":
        lim = abs(ref) * rel + absu
        return abs(ours - ref) <= lim, "+-%s" % fmt_tol(rel, absu)
    if check == "at_least":  # ref is a lower bound; ours at most rel above it
        hi = ref * (1 + rel) + absu
        return ref - 1e-6 <= ours <= hi, "[ref, +%s]" % fmt_tol(rel, absu)
    if check == "at_most":
        return ours <= ref * (1 + rel) + absu, "<= ref+%s" % fmt_tol(rel, absu)
    if check == "between":  # ref = [lo, hi]; every figure of ours inside
        vals = ours if isinstance(ours, (list, tuple)) else [ours]
        return all(ref[0] - 1e-6 <= v <= ref[1] + 1e-6 for v in vals), "all in [lo, hi]"
    if check == "brackets":  # ours = [lo, hi] must enclose ref
        return ours[0] <= ref <= ours[1], "lo <= ref <= hi"
    raise ValueError("unknown check " + check)


def fmt_tol(rel, absu):
    parts = []
    if rel:
        parts.append("%g%%" % (rel * 100))
    if absu:
        parts.append("%g us" % absu)
    return " + ".join(parts) if parts else "0"


def fmt(v):
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    if isinstance(v, int):
        return "%d" % v
    return ("%.6f" % v).rstrip("0").rstrip(".") if v != int(v) else "%d" % v


def diff(ours, ref):
    """ours relative to the reference, for a scalar against a scalar."""
    if isinstance(ours, (list, tuple)) or isinstance(ref, (list, tuple)) or not ref:
        return ""
    return "%+.2f%%" % ((ours - ref) / ref * 100)


def main(argv):
    args = argv[1:]
    build, quick, only, keep = os.path.join(ROOT, "build"), False, None, None
    while args:
        a = args.pop(0)
        if a == "--build" and args:
            build = args.pop(0)
        elif a == "--quick":
            quick = True
        elif a == "--only" and args:
            only = args.pop(0)
        elif a == "--keep" and args:
            keep = args.pop(0)
        elif a == "--write-matrices":
            write_matrices()
            return 0
        else:
            print(__doc__, file=sys.stderr)
            return 2
    sim = os.environ.get("INCA_SIM") or os.path.join(build, "sim", "inca-sim")
    if not os.access(sim, os.X_OK):
        print("sim_validate: %s not built (meson compile -C %s inca-sim)" % (sim, build),
              file=sys.stderr)
        return 2
    with open(os.path.join(VDIR, "reference.json")) as f:
        ref = json.load(f)
    cases = [c for c in ref["cases"] if (not quick or c.get("quick")) and
             (only is None or c["name"] == only)]
    if not cases:
        print("sim_validate: no case selected", file=sys.stderr)
        return 2
    tmp = keep or tempfile.mkdtemp(prefix="sim-validate-")
    rows, fails, errors, runs = [], 0, 0, {}
    try:
        for c in cases:
            src = c["source"]
            try:
                figs = []
                for i, r in enumerate(c["runs"] if "runs" in c else [c]):
                    key = json.dumps(r["run"], sort_keys=True)
                    if key not in runs:  # cases may share a run
                        d = os.path.join(tmp, "%s.%d" % (c["name"], i))
                        run_sim(sim, r, d)
                        runs[key] = d
                    figs.append(figure(runs[key], r["metric"]))
                ours = figs[0] if len(figs) == 1 else figs
                refv = c["reference"]
                if src["kind"] == "analytic" and "params" in src:
                    calc = analytic(src["params"])
                    if abs(calc - refv) > 5e-7 + 1e-12 * abs(refv):
                        raise RuntimeError("recorded reference %r differs from its formula (%r)"
                                           % (refv, calc))
                ok, tol = verdict(ours, refv, c["check"], c.get("tolerance", {}))
            except (RuntimeError, OSError, StopIteration, KeyError, ValueError) as e:
                rows.append((c["name"], "error", "", "", "", "ERROR", src["kind"]))
                print("sim_validate: %s: %s" % (c["name"], e), file=sys.stderr)
                errors += 1
                continue
            info = c.get("informational", False)
            fails += not ok and not info
            res = ("INFO (%s)" % ("in" if ok else "out")) if info else "PASS" if ok else "FAIL"
            rows.append((c["name"], fmt(ours), fmt(refv), diff(ours, refv), tol, res,
                         src["kind"] + (" (" + src["binary"] + ")" if "binary" in src else "")))
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    head = ("scenario", "ours", "reference", "diff", "tolerance", "result", "source")
    w = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(str(x).ljust(w[i]) for i, x in enumerate(r)).rstrip())
    ninfo = sum(1 for c in cases if c.get("informational"))
    print("sim_validate: %d cases: %d passed, %d failed, %d errors, %d informational (figures in "
          "us unless the metric is a ratio; sources and htsim commands: "
          "sim/validate/reference.json)" % (len(rows), len(rows) - fails - errors - ninfo, fails,
                                            errors, ninfo))
    return 2 if errors else 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
