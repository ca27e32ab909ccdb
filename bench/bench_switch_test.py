#!/usr/bin/python3
"""Test of bench-switch (suite 'bench'): short runs on loopback (block 127.1.45.x), 64 B and
max-size packets, 1 and 2 switch worker threads, once with the generator's UDP GSO/GRO I/O and
once with --no-gso. Checks: exit 0; the JSON lines parse; every (io, size, threads) has a switch
and a reflect row, a ratio row, a scaling row and a scaling verdict; no response carried wrong
data; responses came back; the daemon dropped nothing (with GSO this means the switch accepted
the ICRC of every segment's IPv4 ID); GSO runs sent more than one datagram per message and
--no-gso runs exactly one. Asserts no timings.

usage: bench_switch_test.py BENCH_SWITCH [INCA_SWITCH]
"""
import json
import os
import subprocess
import sys
import tempfile


def fail(msg, out=""):
    print("FAIL: " + msg)
    if out:
        print(out[-6000:])
    sys.exit(1)


def run(bench, switch, io, js):
    cmd = [bench, "--bytes", "64,max", "--threads", "1,2", "--time", "0.3", "--trials", "1",
           "--addr-index", "45", "--json", js]
    if switch:
        cmd += ["--switch", switch]
    if io == "plain":
        cmd.append("--no-gso")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=100)
    print(p.stdout)
    if p.returncode != 0:
        fail("%s exited %d" % (" ".join(cmd), p.returncode), p.stdout)
    return p.stdout


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    bench = sys.argv[1]
    switch = sys.argv[2] if len(sys.argv) > 2 else ""
    with tempfile.TemporaryDirectory() as d:
        for io in ("gso", "plain"):
            js = os.path.join(d, io + ".jsonl")
            out = run(bench, switch, io, js)
            try:
                rows = [json.loads(l) for l in open(js) if l.strip()]
            except ValueError as e:
                fail("bad JSON line: %s" % e, out)
            seen = set()
            per_msg = []
            for r in rows:
                if r.get("tool") != "bench-switch" or r.get("io") != io:
                    fail("row of another tool or mode: %r" % r, out)
                key = (r["mode"], r["data_bytes"], r.get("threads", r.get("stops_at_threads")))
                seen.add((r["mode"], r["data_bytes"], r.get("threads")))
                if r["mode"] in ("switch", "reflect"):
                    if r["wrong"] != 0:
                        fail("%r: %d responses with wrong data" % (key, r["wrong"]), out)
                    if r["out_pps"] <= 0 or r["in_pps"] <= 0:
                        fail("%r: no traffic" % (key,), out)
                    if r["daemon_drops"] != 0:
                        fail("%r: the daemon dropped %d packets" % (key, r["daemon_drops"]),
                             out)
                    if r["send_errors"] != 0:
                        fail("%r: %d send errors" % (key, r["send_errors"]), out)
                    per_msg.append(r["tx_dgrams_per_msg"])
                    if io == "plain" and abs(r["tx_dgrams_per_msg"] - 1.0) > 1e-9:
                        fail("%r: --no-gso sent %.2f datagrams per message"
                             % (key, r["tx_dgrams_per_msg"]), out)
                if r["mode"] == "scaling_verdict" and not r["why"]:
                    fail("empty scaling verdict", out)
            for size in sorted({r["data_bytes"] for r in rows}):
                for t in (1, 2):
                    for mode in ("switch", "reflect", "ratio", "scaling"):
                        if (mode, size, t) not in seen:
                            fail("no %s row for %d B, %d threads (%s)" % (mode, size, t, io),
                                 out)
                if ("scaling_verdict", size, None) not in seen:
                    fail("no scaling verdict for %d B (%s)" % (size, io), out)
            if len({r["data_bytes"] for r in rows}) != 2:
                fail("expected rows for 2 sizes (%s)" % io, out)
            if io == "gso" and max(per_msg) <= 1.0:
                fail("GSO runs never sent more than one datagram per message", out)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
