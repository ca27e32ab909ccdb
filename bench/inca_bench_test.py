#!/usr/bin/python3
"""Test of inca-bench (suite 'bench'): a short run on loopback with 3 ranks, a few
collectives and algorithms, tiny sizes. Checks: exit 0, every INCA and Open MPI row has
#wrong 0 and no errors, the JSON lines parse, every requested collective has rows, the auto
rows name an algorithm, and Open MPI rows are present when mpirun.openmpi and ompi-coll-bench
exist (otherwise that part is skipped; exit 77 only if nothing could run).

usage: inca_bench_test.py INCA_BENCH [OMPI_COLL_BENCH]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def fail(msg, out=""):
    print("FAIL: " + msg)
    if out:
        print(out[-6000:])
    sys.exit(1)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    bench = sys.argv[1]
    ompi_bench = sys.argv[2] if len(sys.argv) > 2 else ""
    have_ompi = bool(ompi_bench) and os.access(ompi_bench, os.X_OK) and \
        shutil.which("mpirun.openmpi") is not None
    colls = ["allreduce", "bcast", "allgather", "reducescatter", "alltoall", "barrier"]
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "rows.jsonl")
        argv = [bench, "-r", "3", "-b", "64", "-e", "4K", "-f", "8", "-C", ",".join(colls),
                "-a", "inc,host,auto" + (",ompi" if have_ompi else ""), "-t", "int32:sum",
                "-w", "1", "-n", "3", "--budget", "0.2", "--addr-index", "44", "--json", js]
        env = dict(os.environ)
        if have_ompi:
            argv += ["--ompi-bench", ompi_bench]
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=100, env=env)
        out = r.stdout
        if "runtime error" in out or "AddressSanitizer" in out:
            fail("sanitizer report", out)
        if r.returncode != 0:
            fail("inca-bench exit %d" % r.returncode, out)
        rows = []
        with open(js) as f:
            for n, line in enumerate(f, 1):
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    fail("%s:%d: %s" % (js, n, e), out)
    if not rows:
        fail("no JSON rows", out)
    for r in rows:
        if r["wrong"] != 0 or r["errors"] != 0 or r["iters"] < 1:
            fail("bad row %s" % r, out)
    inca = [r for r in rows if r["tool"] == "inca-bench"]
    for c in colls:
        if not any(r["coll"] == c and r["algo"] not in ("inc", "auto") for r in inca):
            fail("no host-algorithm row for %s" % c, out)
        if not any(r["coll"] == c and r["algo"] == "auto" for r in inca):
            fail("no auto row for %s" % c, out)
    if not any(r["algo"] == "inc" and r["coll"] == "allreduce" for r in inca):
        fail("no INC allreduce row", out)
    autos = [r for r in inca if r["algo"] == "auto"]
    if not autos or any(r["auto_served"] in ("auto", "?") for r in autos):
        fail("auto rows missing or without the algorithm that served them", out)
    # busbw as nccl-tests: allreduce 2(n-1)/n, allgather (n-1)/n, bcast 1
    for r in inca:
        f = {"allreduce": 4 / 3, "allgather": 2 / 3, "bcast": 1.0}.get(r["coll"])
        if f and abs(r["busbw_gbps"] - f * r["algbw_gbps"]) > 1e-5 * max(1, r["algbw_gbps"]):
            fail("busbw factor of %s" % r, out)
    # the table itself: a #wrong column and the summary line
    if "#wrong" not in out or "# OK:" not in out:
        fail("table or summary missing", out)
    ompi = [r for r in rows if r["tool"] == "ompi-coll-bench"]
    if have_ompi:
        for c in colls:
            if not any(r["coll"] == c for r in ompi):
                fail("no Open MPI row for %s" % c, out)
        if "ompi (TCP)" not in out:
            fail("Open MPI rows not in the table", out)
        print("inca-bench: %d INCA rows, %d Open MPI rows, all exact" % (len(inca), len(ompi)))
    else:
        print("inca-bench: %d INCA rows, all exact; Open MPI part SKIPPED (mpirun.openmpi or "
              "ompi-coll-bench missing)" % len(inca))
    return 0


if __name__ == "__main__":
    sys.exit(main())
