#!/usr/bin/python3
"""tests/netns/test_fabric.py: suite 'netns'. Real inca-switch daemons in leaf and spine
namespaces of a small fabric (tests/netns/fabric.py), ranks in host namespaces.

  multilevel  2 leaves x 2 hosts + spine, 500 Mbit/s: multi-level AllReduce exact for several
              types and ops, every switch aggregates each chunk round once, DF respected
  lossy       the same with nftables 3% random loss on leaf1's uplink (both directions):
              still exact, the loss rules dropped packets, retransmissions show in switch stats
  teardown    a failing run, a SIGTERMed run and a SIGKILLed builder leave no namespace and no
              switch process behind (the killed one is removed as stale)

usage: test_fabric.py CASE --build BUILD_DIR. Exits 77 (skip) without root or netns."""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric  # noqa: E402

SKIP = 77
fails = 0


def check(cond, what):
    global fails
    if cond:
        print("ok: " + what, flush=True)
    else:
        fails += 1
        print("FAIL: " + what, flush=True)


def small_spec(**fab):
    s = fabric.Spec()
    base = {"leaves": "2", "hosts_per_leaf": "2", "spines": "1", "rate": "500mbit"}
    base.update(fab)
    return s.apply(base, {})


TYPES = ("fp32:sum@4M-4M/2,int32:sum@4-1M/16,fp32:sum@4-1M/16,fp16:sum@4-256K/16,bf16:max@4-64K/16,"
         "int64:bxor@4-256K/16,uint8:min@4-64K/16,fp64:sum@4-256K/16")


def run_demo(fab, demo_bin, types, timeout_s=150):
    plan = fab.start_switches()
    t0 = time.time()
    r = subprocess.run([demo_bin, "--fabric", plan, "-t", types, "-n", "2", "-w", "1",
                        "--budget", "0.5"], capture_output=True, text=True, timeout=timeout_s)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr[-4000:])
    print("# demo took %.1f s" % (time.time() - t0))
    res = fab.stop_switches()
    for line in fabric.switch_report(res):
        print("# final " + line)
    return r, res


def chunks_of(out):
    for line in out.splitlines():
        if line.startswith("# chunk rounds issued:"):
            return int(line.split(":")[1].split()[0])
    return -1


def tree(st):
    return st["trees"][0] if st and st.get("trees") else {}


def case_multilevel(build):
    demo = fabric.find_binary("inca-fabric-demo", build)
    sw = fabric.find_binary("inca-switch", build)
    with fabric.Fabric(small_spec(), switch_bin=sw) as fab:
        err = fab.df_probe()
        check(err is None, "DF: a 9000-byte datagram crosses leaf-spine-leaf whole, 9001 is "
              "refused (%s)" % err)
        r, res = run_demo(fab, demo, TYPES)
        check(r.returncode == 0 and "# OK:" in r.stdout, "AllReduce exact for every type "
              "(inca-fabric-demo exit %d)" % r.returncode)
        n = chunks_of(r.stdout)
        check(n > 0, "chunk rounds counted (%d)" % n)
        for name, (rc, st) in res.items():
            t = tree(st)
            check(rc == 0 and st is not None, "%s exited 0 with final statistics" % name)
            check(t.get("aggregations") == n, "%s aggregated each of %d chunk rounds once (%s)"
                  % (name, n, t.get("aggregations")))
            check(st and st.get("drops_total") == 0, "%s dropped nothing" % name)
            if name.startswith("leaf"):
                check(t.get("role") == "leaf" and t.get("members") == 2,
                      "%s is a leaf with 2 members" % name)
                check(t.get("results_down", 0) >= n, "%s got every result from the spine" % name)
                # one aggregate up per chunk round, plus at most one re-send per duplicate a
                # member sent after the aggregate went up (a spurious client timeout is legal)
                up = [q for q in t.get("qps", []) if q.get("kind") == "parent"]
                resent = t.get("results_resent", 0)
                check(len(up) == 1 and n <= up[0].get("tx_pkts", -1) <= n + resent,
                      "%s sent one aggregate up per chunk round (+%d re-sent)" % (name, resent))
            else:
                check(t.get("role") == "root" and t.get("children") == 2,
                      "%s is the root with 2 children" % name)
                check(t.get("contributions") == 2 * n, "%s absorbed 2 contributions (one per "
                      "leaf) per round" % name)
        frag = fab.fragment_counters()
        check(not frag, "no IP fragmentation in any namespace (%s)" % frag)


def case_lossy(build):
    if not fabric.shutil.which("nft"):
        print("SKIP: nft (nftables) not installed")
        return SKIP
    demo = fabric.find_binary("inca-fabric-demo", build)
    sw = fabric.find_binary("inca-switch", build)
    spec = small_spec(loss="leaf1:30")
    with fabric.Fabric(spec, switch_bin=sw) as fab:
        r, res = run_demo(fab, demo, "int32:sum@4-1M/16,fp32:sum@4-4M/4,fp16:sum@4-64K/16,"
                          "int64:bxor@4-64K/16", timeout_s=200)
        check(r.returncode == 0 and "# OK:" in r.stdout,
              "AllReduce exact with 3%% loss on leaf1's uplink (exit %d)" % r.returncode)
        dropped = fab.loss_counters()
        check(dropped > 0, "nftables dropped %d packets" % dropped)
        n = chunks_of(r.stdout)
        resent = sum(tree(st).get("results_resent", 0) for _, st in res.values())
        dups = sum(tree(st).get("duplicates", 0) for _, st in res.values())
        check(resent > 0 and dups > 0, "retransmissions visible in switch stats: %d duplicates, "
              "%d re-sent results/aggregates" % (dups, resent))
        for name, (rc, st) in res.items():
            check(rc == 0 and tree(st).get("aggregations") == n,
                  "%s aggregated each of %d rounds exactly once despite loss" % (name, n))
        client = [ln for ln in r.stdout.splitlines() if ln.startswith("# client stats")]
        check(client and "retransmits 0," not in client[0], "clients retransmitted: %s" %
              (client[0] if client else "?"))


def ours(prefix):
    return [ns for ns in fabric.list_netns() if ns.startswith(prefix)]


def switch_pids_in(prefixes):
    out = []
    for ns in fabric.list_netns():
        if any(ns.startswith(p) for p in prefixes):
            r = fabric.sh(["ip", "netns", "pids", ns], check=False)
            out += r.stdout.split()
    return out


def alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def case_teardown(build):
    sw = fabric.find_binary("inca-switch", build)
    here = os.path.dirname(os.path.abspath(__file__))
    spec = small_spec(leaves="1", hosts_per_leaf="2", spines="0")

    # 1. an exception inside the context: everything goes
    fab = fabric.Fabric(spec, switch_bin=sw)
    try:
        with fab:
            fab.start_switches()
            check(len(ours(fab.prefix)) == 3, "fabric up: 3 namespaces")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    check(not ours(fab.prefix), "no namespace left after an exception")

    # 2. SIGTERM to a builder process: its handler tears down
    code = ("import sys,time; sys.path.insert(0,%r); import fabric\n"
            "s=fabric.Spec().apply({'leaves':'1','hosts_per_leaf':'2','spines':'0'},{})\n"
            "f=fabric.Fabric(s,switch_bin=%r); f.up(); f.start_switches()\n"
            "print(f.prefix,flush=True); time.sleep(60)\n" % (here, sw))
    for sig, stale in ((signal.SIGTERM, False), (signal.SIGKILL, True)):
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        prefix = p.stdout.readline().strip()
        check(prefix.startswith(fabric.PREFIX_BASE) and len(ours(prefix)) == 3,
              "builder %d is up with prefix %s" % (p.pid, prefix))
        pids = switch_pids_in([prefix])
        check(len(pids) >= 1, "its switch runs in the leaf namespace (pids %s)" % pids)
        p.send_signal(sig)
        p.wait(timeout=30)
        if stale:
            check(len(ours(prefix)) == 3, "SIGKILL: namespaces are left behind (stale)")
            gone = fabric.cleanup_stale()
            check(len([g for g in gone if g.startswith(prefix)]) == 3,
                  "stale cleanup removed the 3 namespaces of the dead builder")
        name = signal.Signals(sig).name
        check(not ours(prefix), "%s: no namespace left" % name)
        deadline = time.time() + 5
        while [x for x in pids if alive(x)] and time.time() < deadline:
            time.sleep(0.05)
        check(not [x for x in pids if alive(x)], "%s: switch processes %s are gone" % (name, pids))

    # 3. the CLI 'run' path with a workload that fails: still torn down
    r = subprocess.run([sys.executable, os.path.join(here, "fabric.py"), "run",
                        os.path.join(here, "small.ini"), "--build", build, "--set", "leaves=1",
                        "--set", "spines=0", "--", "--bogus-option"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode != 0, "a failing workload fails the run (exit %d)" % r.returncode)
    check("namespaces left behind" not in r.stdout, "run tore its fabric down")
    left = [ns for ns in fabric.list_netns() if fabric.PREFIX_RE.match(ns) and
            not os.path.exists("/proc/%s" % fabric.PREFIX_RE.match(ns).group(1))]
    check(not left, "no stale namespaces anywhere (%s)" % left)


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("multilevel", "lossy", "teardown"):
        print(__doc__)
        return 2
    build = None
    if "--build" in sys.argv:
        build = sys.argv[sys.argv.index("--build") + 1]
    if not fabric.as_root():
        print("SKIP: needs root (network namespaces)")
        return SKIP
    if not fabric.netns_available() or not fabric.shutil.which("tc"):
        print("SKIP: network namespaces / tc not available")
        return SKIP
    t0 = time.time()
    rc = {"multilevel": case_multilevel, "lossy": case_lossy,
          "teardown": case_teardown}[sys.argv[1]](build)
    if rc == SKIP:
        return SKIP
    print("%s: %s in %.1f s" % (sys.argv[1], "FAILED (%d)" % fails if fails else "OK",
                                time.time() - t0))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
