#!/usr/bin/python3
"""docs/cli.md holds for every program: --version prints "PROG (INCA) VERSION", the same
version everywhere; a short option means one thing in every program (-n iterations, -r ranks,
-t types, -c config; inca-switch has no -t); a bad value is reported with the option, the value
and the reason, and nothing has started yet. Usage: cli_conventions_test.py BUILD_DIR SRC_DIR"""
import os
import re
import subprocess
import sys
import tempfile

BUILD, SRC = sys.argv[1], sys.argv[2]
fails = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        fails.append(what)


def run(argv, timeout=20):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


PROGS = {
    "inca-switch": "daemons/switch/inca-switch", "inca-am": "daemons/am/inca-am",
    "inca": "daemons/am/inca", "inca-demo": "tools/inca-demo",
    "inca-fabric-demo": "tools/inca-fabric-demo", "inca-bench": "tools/inca-bench",
    "bench-allreduce": "bench/bench-allreduce", "bench-switch": "bench/bench-switch",
    "bench-kernels": "bench/bench-kernels", "bench-icrc": "bench/bench-icrc",
    "bench-mac": "bench/bench-mac", "bench-flood": "bench/bench-flood",
    "inca-sim": "sim/inca-sim",
}
with open(os.path.join(SRC, "meson.build")) as f:
    version = re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)
for name, rel in PROGS.items():
    exe = os.path.join(BUILD, rel)
    if not os.access(exe, os.X_OK):
        print("note: %s not built" % name)
        continue
    r = run([exe, "--version"])
    check(r.returncode == 0 and r.stdout == "%s (INCA) %s\n" % (name, version),
          "%s --version (%r)" % (name, r.stdout))
r = run([os.path.join(SRC, "tools", "inca-mpirun"), "--version"])
check(r.stdout == "inca-mpirun (INCA) %s\n" % version, "inca-mpirun --version (%r)" % r.stdout)
r = run(["/usr/bin/python3", os.path.join(SRC, "examples", "torch", "ddp_train.py"),
         "--version"])
check(r.returncode != 0 and "No module named 'torch'" in r.stderr or
      r.stdout == "ddp_train.py (INCA) %s\n" % version, "ddp_train.py --version (%r)" % r.stdout)


def bad_value(prog, argv, *want):
    """Exit 2 at once, one message naming every string in want, no usage dump, no start."""
    exe = os.path.join(BUILD, PROGS[prog])
    if not os.access(exe, os.X_OK):
        return
    r = run([exe] + argv)
    msg = r.stderr.strip()
    check(r.returncode == 2 and all(w in msg for w in want) and "usage:" not in msg and
          not r.stdout, "%s %s: exit 2, says %s (%d: %s)"
          % (prog, " ".join(argv), " / ".join(want), r.returncode, msg[:300]))


# The same short option, the same meaning, in every program that has it.
for prog in ("inca-demo", "inca-bench", "bench-allreduce"):
    bad_value(prog, ["-n", "x"], "--iters", "'x'", "not an integer")
    bad_value(prog, ["-r", "0"], "--ranks", "'0'", "out of range (1..64)")
    bad_value(prog, ["-t", "fp99:sum"], "--types", "fp99:sum")
    bad_value(prog, ["-b", "abc"], "--minbytes", "'abc'", "not a size")
    bad_value(prog, ["-b", "8", "-e", "4"], "--minbytes 8", "--maxbytes 4")
    bad_value(prog, ["-f", "1"], "--stepfactor", "'1'", "out of range")
    bad_value(prog, ["stray"], "unexpected argument 'stray'")
bad_value("inca-bench", ["-n", "0"], "--iters", "'0'", "out of range")
bad_value("inca-bench", ["-C", "allfoo"], "--colls", "allfoo")
bad_value("inca-bench", ["--root", "4", "-r", "4"], "--root 4", "not a rank")
bad_value("inca-demo", ["--mtu", "100"], "--mtu", "'100'", "out of range (256..4096)")
bad_value("inca-demo", ["--drop-rate", "5"], "--drop-rate", "'5'", "out of range")
bad_value("inca-demo", ["--switch-drop-rate", "-0.1"], "--switch-drop-rate", "out of range")
bad_value("inca-demo", ["--slots", "0"], "--slots", "'0'")
bad_value("inca-demo", ["--seed", "-3"], "--seed", "'-3'")
bad_value("inca-demo", ["--no-inc", "--no-ring"], "--no-inc", "--no-ring")
bad_value("inca-switch", ["--drop-rate", "5"], "--drop-rate", "'5'", "out of range")
bad_value("inca-switch", ["--busy-poll-us", "x"], "--busy-poll-us", "'x'")
bad_value("inca-switch", ["-t", "2"], "invalid option")
bad_value("bench-switch", ["--members", "0"], "--members", "'0'", "out of range")
bad_value("bench-switch", ["--member-wait", "nap"], "--member-wait", "'nap'", "spin, sleep")
bad_value("bench-kernels", ["--isa", "mmx"], "--isa", "'mmx'")

# inca-switch --check-config judges the file alone: no trees, no --netconf-* flag needed.
sw = os.path.join(BUILD, PROGS["inca-switch"])
if os.access(sw, os.X_OK):
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write("name = leaf9\nrole = leaf\nlisten = 127.0.0.1:4791\n")
    r = run([sw, "-c", f.name, "--check-config"])
    os.unlink(f.name)
    check(r.returncode == 0 and "name = leaf9" in r.stdout,
          "inca-switch --check-config on a config without trees (%d: %s)"
          % (r.returncode, r.stderr.strip()))
    r = run([sw, "-c", os.path.join(SRC, "examples", "switch-loopback.conf"), "--check-config"])
    check(r.returncode == 0 and "tree" in r.stdout, "--check-config with trees still prints them")

print("%d failures" % len(fails) if fails else "CLI conventions: all checks passed")
sys.exit(1 if fails else 0)
