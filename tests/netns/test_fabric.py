#!/usr/bin/python3
"""tests/netns/test_fabric.py: suite 'netns'. Real inca-switch daemons in leaf and spine
namespaces of a small fabric (tests/netns/fabric.py), ranks in host namespaces.

Standalone switches (generated trees, no AM):
  multilevel  2 leaves x 2 hosts + spine, 500 Mbit/s: multi-level AllReduce exact for several
              types and ops, every switch aggregates each chunk round once, DF respected
  lossy       the same with nftables 3% random loss on leaf1's uplink (both directions):
              still exact, the loss rules dropped packets, retransmissions show in switch stats
With the Aggregation Manager (switches with NETCONF and no tree, inca-am in the spine namespace,
ranks join through it):
  am          2 leaves x 4 hosts + spine: the 8 ranks join, the AM builds a 2-level tree (root
              spine, leaves with 4 members each), every AllReduce exact, every switch of the
              tree aggregated each round once, `inca status` shows the tree, after the job every
              switch is free again
  am-lossy    2% random loss on every link (host and uplinks, both directions): still exact
  am-jobs     four concurrent 2-rank jobs on the shared switches: four groups, four trees,
              every result exact, all switches free afterwards
  am-kill     SIGKILL one rank of a running job: the AM dismantles its group within a few
              heartbeat intervals and every switch frees its tree and slots
  am-restart  SIGKILL the AM while the job runs and restart it: no AllReduce is interrupted,
              the restarted AM shows the same group and tree
  teardown    a failing run, a SIGTERMed run and a SIGKILLed builder leave no namespace and no
              switch process behind (the killed one is removed as stale)
  bench       inca-bench in the AM fabric (2 leaves x 4 hosts): INC, host algorithms and Open
              MPI's own collectives (tools/ompi-fabric-run, ranks in the host namespaces) in one
              run, every row exact; Open MPI's traffic really crossed the fabric's links

usage: test_fabric.py CASE --build BUILD_DIR. Exits 77 (skip) without root or netns."""

import os
import re
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


def small_spec(am=None, **fab):
    """The 2x2 fabric; standalone switches unless am (a dict of [am] keys) is given."""
    s = fabric.Spec()
    base = {"leaves": "2", "hosts_per_leaf": "2", "spines": "1", "rate": "500mbit"}
    base.update(fab)
    return s.apply(base, {}, am if am is not None else {"mode": "standalone"})


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
            "s=fabric.Spec().apply({'leaves':'1','hosts_per_leaf':'2','spines':'0'},{},"
            "{'mode':'standalone'})\n"
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


# ---- with the Aggregation Manager ------------------------------------------------------------

def am_fabric(build, spec):
    if not os.access(os.path.join(build, "daemons/am/inca-am"), os.X_OK):
        return None
    return fabric.Fabric(spec, switch_bin=fabric.find_binary("inca-switch", build),
                         am_bin=fabric.find_binary("inca-am", build),
                         cli_bin=fabric.find_binary("inca", build))


def am_spec(hosts_per_leaf="4", loss=None, **am):
    fab = {"leaves": "2", "hosts_per_leaf": hosts_per_leaf, "spines": "1", "rate": "500mbit"}
    if loss:
        fab["loss"] = loss
    # A generous heartbeat by default: on a loaded 2-core CI machine (sanitizer builds, 8 ranks)
    # 200 ms x 3 declares live ranks dead. am-kill asks for the fast one it measures.
    a = {"mode": "am", "heartbeat_ms": "500", "heartbeat_misses": "8", "poll_ms": "200"}
    a.update(am)
    return fabric.Spec().apply(fab, {}, a)


def status_block(out):
    """The `inca status` text the demo printed while the job held its group."""
    i = out.find("status (while the job holds its group)")
    j = out.find("# chunk rounds issued", i)
    return out[i:j] if i >= 0 else ""


def check_job_output(name, r, nranks, leaves=2):
    out = r.stdout
    check(r.returncode == 0 and "# OK:" in out, "%s: every AllReduce exact (exit %d)" %
          (name, r.returncode))
    if r.returncode:
        sys.stderr.write((r.stderr or "")[-3000:])
    check("tree ready" in out, "%s: the AM gave the job a tree" % name)
    st = status_block(out)
    check("2-level" in st and "[root]" in st and st.count("[leaf]") >= leaves and
          "%d/%d ranks  ready" % (nranks, nranks) in st,
          "%s: `inca status` shows a 2-level tree: spine root, %d leaves, %d/%d ranks ready" %
          (name, leaves, nranks, nranks))
    trees = [ln for ln in out.splitlines() if ln.startswith("# switch ") and " tree " in ln]
    check(len(trees) == 1 + leaves and not [ln for ln in out.splitlines()
                                            if ln.startswith("# ERROR")],
          "%s: %d switches hold the tree and aggregated each chunk round once" %
          (name, len(trees)))
    return st


def after_jobs(fab):
    ok, v = fab.wait_trees_gone(timeout_s=10)
    check(ok, "after the job(s) no switch holds a tree (%s)" % (
        "%.2f s" % v if ok else v))
    # the AM's switch view refreshes at its next poll
    def free():
        st = fab.inca_cli("status")
        u = re.findall(r"^  \S+\s+up\s+\S+\s+\S+\s+(\d+)/\d+\s+(\d+)/\d+", st.stdout, re.M)
        return (st, u) if u and all(a == "0" and b == "0" for a, b in u) else None
    got = wait_for(free, 5 + 2 * fab.spec.poll_ms / 1000.0, 0.2)
    st, used = got if got else (fab.inca_cli("status"), None)
    check(st.returncode == 0 and "GROUPS (0)" in st.stdout and " 0 active" in st.stdout,
          "the AM shows no group left")
    check(used and len(used) == 3, "every switch reports 0 used slots and trees to the AM "
          "(%s)" % used)
    check("(TLS)" in fab.switch_log("am"), "the AM served gRPC over TLS (the ranks trusted "
          "the fabric's CA)")


AM_TYPES = "fp32:sum@4-4M/4,int32:sum@4-1M/16,fp16:sum@4-64K/16,int64:bxor@4-64K/16"


def case_am(build):
    fab = am_fabric(build, am_spec())
    if fab is None:
        print("SKIP: inca-am not built (no gRPC)")
        return SKIP
    demo = fabric.find_binary("inca-fabric-demo", build)
    with fab:
        fab.start_switches()
        runs = fabric.run_jobs(fab, demo, ["-t", AM_TYPES, "-n", "2", "-w", "1", "--budget",
                                           "0.5"], 240, stream=False)
        _, r = runs[0]
        sys.stdout.write(r.stdout)
        st = check_job_output("8 ranks", r, 8)
        check("A-BM 1-4" in st and "A-BM 5-8" in st and "members 1-4" in st,
              "the leaves aggregate ranks 1-4 and 5-8 (A-BMs)")
        check("NOT RUNNING" not in st, "every switch of the tree reports it running")
        after_jobs(fab)
        res = fab.stop_switches()
        check(fab.am_exit == 0 and all(rc == 0 for rc, _ in res.values()),
              "inca-am and the switches exit 0")
        check(not fab.fragment_counters(), "no IP fragmentation")


def case_am_lossy(build):
    if not fabric.shutil.which("nft"):
        print("SKIP: nft (nftables) not installed")
        return SKIP
    fab = am_fabric(build, am_spec(hosts_per_leaf="2", loss="all:20", heartbeat_ms="500",
                                      heartbeat_misses="12"))
    if fab is None:
        print("SKIP: inca-am not built (no gRPC)")
        return SKIP
    demo = fabric.find_binary("inca-fabric-demo", build)
    with fab:
        n_links = len({dev for _, dev, _ in fab.loss_links})
        check(len(fab.loss_links) == 2 * (4 + 2), "loss rules on both ends of all 6 links "
              "(%d ends)" % len(fab.loss_links))
        fab.start_switches()
        runs = fabric.run_jobs(fab, demo, ["-t", "int32:sum@4-1M/16,fp32:sum@4-4M/4,"
                                           "fp16:sum@4-64K/16", "-n", "2", "-w", "1",
                                           "--budget", "0.5"], 280, stream=False)
        _, r = runs[0]
        sys.stdout.write(r.stdout)
        check_job_output("2% loss on every link", r, 4)
        dropped = fab.loss_counters()
        check(dropped > 0, "nftables dropped %d packets on %d link ends" % (dropped, n_links))
        client = [ln for ln in r.stdout.splitlines() if ln.startswith("# client stats")]
        check(client and "retransmits 0," not in client[0], "clients retransmitted: %s" %
              (client[0] if client else "?"))
        after_jobs(fab)


def case_am_jobs(build):
    fab = am_fabric(build, am_spec(jobs="4", heartbeat_ms="500", heartbeat_misses="4",
                                   poll_ms="500"))
    if fab is None:
        print("SKIP: inca-am not built (no gRPC)")
        return SKIP
    demo = fabric.find_binary("inca-fabric-demo", build)
    with fab:
        fab.start_switches()
        runs = fabric.run_jobs(fab, demo, ["-t", "fp32:sum@4-1M/4,int32:max@4-256K/16", "-n",
                                           "3", "-w", "1", "--budget", "0.5"], 280,
                               stream=False)
        check(len(runs) == 4, "four jobs ran at once")
        trees = set()
        for pl, r in runs:
            print("# ===== %s" % os.path.basename(pl))
            sys.stdout.write(r.stdout)
            check_job_output(os.path.basename(pl), r, 2)
            m = re.search(r"# AM group \d+: tree ready, tree (\d+)", r.stdout)
            if m:
                trees.add(m.group(1))
        check(len(trees) == 4, "four groups with four distinct trees (%s)" % sorted(trees))
        after_jobs(fab)


def wait_for(fn, timeout_s, step_s=0.05):
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        v = fn()
        if v:
            return v
        time.sleep(step_s)
    return None


def group_view(fab):
    """(group id, tree id, state) of the one group the AM shows, or None."""
    r = fab.inca_cli("groups")
    m = re.search(r"group (\d+)\s+job \S+\s+(\d+)/(\d+) ranks\s+(\S+)", r.stdout)
    t = re.search(r"tree (\d+)\s+gen (\d+)", r.stdout)
    if not m:
        return None
    return (m.group(1), t.group(1) if t else None, m.group(4), r.stdout)


def long_demo(fab, demo, args, out=None):
    return subprocess.Popen([demo, "--fabric", fab.plan_paths()[0]] + args,
                            stdout=out or subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def file_has(path, text):
    try:
        with open(path) as f:
            return text in f.read()
    except OSError:
        return False


def case_am_kill(build):
    # 10 misses x 200 ms: on a loaded CI machine idle survivors can miss a second of heartbeats
    fab = am_fabric(build, am_spec(hosts_per_leaf="2", heartbeat_ms="200", heartbeat_misses="10"))
    if fab is None:
        print("SKIP: inca-am not built (no gRPC)")
        return SKIP
    demo = fabric.find_binary("inca-fabric-demo", build)
    hb_ms, misses = fab.spec.heartbeat_ms, fab.spec.heartbeat_misses
    with fab:
        fab.start_switches()
        # a short sweep, then the ranks hold their group, idle: killing one of them is only
        # seen by the AM (no ring or data-plane traffic that would make its peers notice)
        log_path = os.path.join(fab.workdir, "demo.out")
        logf = open(log_path, "w")
        p = long_demo(fab, demo, ["-b", "64K", "-e", "256K", "-n", "5", "-w", "1", "-t",
                                  "fp32:sum", "--no-ring", "--hold", "60"], out=logf)
        logf.close()
        try:
            g = wait_for(lambda: (lambda v: v if v and v[2] == "ready" else None)(
                group_view(fab)), 30, 0.2)
            check(g is not None, "the group is ready (%s)" % str(g[:3] if g else None))
            idle = wait_for(lambda: file_has(log_path, "holding the group"), 60, 0.1)
            check(idle, "the sweep is done (exact) and the ranks hold the group, idle")
            busy = wait_for(lambda: (lambda t: t if t and all(t.values()) else None)(
                fab.switch_trees()), 10)
            check(busy is not None, "every switch runs the tree: %s" % busy)
            victim = fab.hosts[1]
            pids = fabric.sh(["ip", "netns", "pids", victim["ns"]], check=False).stdout.split()
            check(len(pids) == 1, "rank 1 is the only process in %s (%s)" % (victim["ns"], pids))
            t0 = time.time()
            for pid in pids:
                os.kill(int(pid), signal.SIGKILL)
            ok, v = fab.wait_trees_gone(timeout_s=15)
            dt = time.time() - t0
            bound = (misses + 4) * hb_ms / 1000.0 + 2 * fab.spec.poll_ms / 1000.0 + 0.5
            check(ok, "after SIGKILL of rank 1 every switch freed its tree (%.2f s)" % dt)
            check(ok and dt <= bound, "within a few heartbeat intervals: %.2f s <= %.2f s "
                  "(heartbeat %d ms x %d misses)" % (dt, bound, hb_ms, misses))
            st = fab.inca_cli("status").stdout
            print(st)
            hb = re.search(r"(\d+) heartbeat timeouts", st)
            check(hb and int(hb.group(1)) >= 1, "the AM counted the lost heartbeat (%s)" %
                  (hb.group(0) if hb else "?"))
            check("rank 1: heartbeat lost" in fab.switch_log("am"),
                  "the AM log says why: group %s rank 1: heartbeat lost" % (g[0] if g else "?"))
            used = re.findall(r"^  \S+\s+up\s+\S+\s+\S+\s+(\d+)/\d+\s+(\d+)/\d+", st,
                              re.M)
            check(len(used) == 3 and all(a == "0" and b == "0" for a, b in used),
                  "the AM sees 0 used slots and trees on every switch (%s)" % used)
            check(p.poll() is None, "the other ranks are still idle in their group")
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            with open(log_path) as f:
                out = f.read()
            sys.stdout.write(out)


def case_am_restart(build):
    fab = am_fabric(build, am_spec(hosts_per_leaf="2"))
    if fab is None:
        print("SKIP: inca-am not built (no gRPC)")
        return SKIP
    demo = fabric.find_binary("inca-fabric-demo", build)
    with fab:
        fab.start_switches()
        p = long_demo(fab, demo, ["-b", "64K", "-e", "1M", "-f", "2", "-n", "40", "-w", "1",
                                  "--budget", "1.5", "-t", "fp32:sum,int32:sum"])
        try:
            g = wait_for(lambda: (lambda v: v if v and v[2] == "ready" else None)(
                group_view(fab)), 30, 0.2)
            check(g is not None, "the group is ready: group %s tree %s" % (
                g[0] if g else "?", g[1] if g else "?"))
            time.sleep(1.0)
            fab.stop_am(sig=signal.SIGKILL)
            check(p.poll() is None, "the AM is killed while the job runs")
            time.sleep(1.5)
            trees = fab.switch_trees()
            check(all(trees.values()), "the switches keep the tree without the AM: %s" % trees)
            fab.start_am()
            g2 = wait_for(lambda: (lambda v: v if v and v[2] == "ready" else None)(
                group_view(fab)), 15, 0.2)
            check(g and g2 and g2[:2] == g[:2], "the restarted AM shows the same group and "
                  "tree (%s -> %s)" % (g[:2] if g else None, g2[:2] if g2 else None))
            if g2:
                print(g2[3])
            out, err = p.communicate(timeout=240)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        sys.stdout.write(out)
        r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        check(r.returncode == 0 and "# OK:" in out, "every AllReduce exact across the AM "
              "restart (exit %d)" % r.returncode)
        check(", 0 failed calls" in out, "no AllReduce failed or left INC")
        m = re.search(r"generation (\d+), (\d+) session reconnects", out)
        check(m and m.group(1) == "1" and int(m.group(2)) >= 1,
              "the clients reconnected their sessions, the tree was never rebuilt (%s)" %
              (m.group(0) if m else "?"))
        st = fab.inca_cli("stats")
        check(" 1 recovered" in st.stdout, "the AM recovered the group from journal + switches")
        after_jobs(fab)


def tx_bytes(fab, ns, dev):
    r = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev],
                       capture_output=True, text=True)
    try:
        import json
        return json.loads(r.stdout)[0]["stats64"]["tx"]["bytes"]
    except (ValueError, LookupError):
        return -1


def case_bench(build):
    here = os.path.dirname(os.path.abspath(__file__))
    runner = os.path.join(here, "..", "..", "tools", "ompi-fabric-run")
    if not fabric.shutil.which("mpirun.openmpi") or not os.access(runner, os.X_OK):
        print("SKIP: Open MPI (mpirun.openmpi) or tools/ompi-fabric-run missing")
        return SKIP
    if not os.access(os.path.join(build, "bench", "ompi-coll-bench"), os.X_OK):
        print("SKIP: bench/ompi-coll-bench not built (Open MPI development files)")
        return SKIP
    spec = am_spec()
    spec.busy_poll_us = 0  # as tools/fabric-example.ini: 3 daemons + 8 ranks share 2 cores
    fab = am_fabric(build, spec)
    if fab is None:
        print("SKIP: inca-am not built (no gRPC)")
        return SKIP
    bench = os.path.join(build, "tools", "inca-bench")
    with fab:
        fab.start_switches()
        sw_argv = [a for a in fab.argv.values() if "inca-switch" in " ".join(a)]
        check(len(sw_argv) == 3 and all("--busy-poll-us" in a and
                                        a[a.index("--busy-poll-us") + 1] == "0"
                                        for a in sw_argv),
              "every switch runs with --busy-poll-us 0 (the [switch] busy_poll_us key)")
        host0 = fab.prefix + "h0"
        args = ["-r", "8", "-b", "8", "-e", "256K", "-f", "32768", "-C", "allreduce,bcast",
                "-w", "1", "-n", "3", "--budget", "1"]
        # Open MPI alone first: its bytes on rank 0's host link prove it used the fabric
        before = tx_bytes(fab, host0, "eth0")
        _, r = fabric.run_jobs(fab, bench, args + ["-a", "ompi"], 240, stream=False)[0]
        after = tx_bytes(fab, host0, "eth0")
        sys.stdout.write(r.stdout)
        check(r.returncode == 0 and "in the fabric" in r.stdout,
              "Open MPI alone: exit 0, ran across the fabric (%d)" % r.returncode)
        # AllReduce and Bcast of 256 KiB, 4 calls each, leave rank 0 (the Bcast root)
        check(before >= 0 and after - before > 4 * 256 * 1024,
              "Open MPI's traffic crossed rank 0's host link (%d bytes)" % (after - before))
        # then everything in one run, with the link columns (500 Mbit/s host links)
        _, r = fabric.run_jobs(fab, bench, args + ["-a", "inc,recdbl,ring,ompi",
                                                   "--link-rate", "500000000"], 240,
                               stream=False)[0]
        sys.stdout.write(r.stdout)
        if r.returncode:
            sys.stderr.write((r.stderr or "")[-3000:])
        out = r.stdout
        check(r.returncode == 0 and "# OK:" in out, "inca-bench exits 0: every row exact (%d)"
              % r.returncode)
        m = re.search(r"# OK: (\d+) INCA rows .* (\d+) Open MPI rows \((\d+) wrong", out)
        # 2 sizes x (AllReduce: INC, recdbl, ring; Bcast: INC, ring (chain)) and Open MPI's 2 x 2
        check(m and int(m.group(1)) == 10 and int(m.group(2)) == 4 and m.group(3) == "0",
              "10 INCA rows and 4 Open MPI rows, none wrong (%s)" % (m.group(0) if m else "?"))
        rows = [ln for ln in out.splitlines() if re.match(r"^\s+\d+\s+\d+\s", ln)]
        for algo in ("INC", "recdbl", "ring", "ompi (TCP)"):
            check(any((" %s " % algo) in ln for ln in rows), "a %s row" % algo)
        # link%: the row's link floor over its time, and the floors in us after each size
        # (256 KiB AllReduce at 500 Mbit/s: host 2*7/8*S/B = 7340.0 us, INC S/B = 4194.3 us)
        check(all(re.search(r"\d%$", ln) for ln in rows if " 262144 " in ln),
              "every 256 KiB row has a link%")
        check("#   link floor at 500 Mbit/s: host algorithms and Open MPI >= 7340.0 us, "
              "INC >= 4194.3 us" in out, "the AllReduce link floors at 256 KiB")
        after_jobs(fab)


CASES = {"multilevel": None, "lossy": None, "teardown": None, "am": case_am,
         "am-lossy": case_am_lossy, "am-jobs": case_am_jobs, "am-kill": case_am_kill,
         "am-restart": case_am_restart, "bench": case_bench}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in CASES:
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
    CASES.update({"multilevel": case_multilevel, "lossy": case_lossy,
                  "teardown": case_teardown})
    rc = CASES[sys.argv[1]](build)
    if rc == SKIP:
        return SKIP
    print("%s: %s in %.1f s" % (sys.argv[1], "FAILED (%d)" % fails if fails else "OK",
                                time.time() - t0))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
