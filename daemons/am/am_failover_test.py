#!/usr/bin/python3
"""ReportFailure against the real inca-am and four inca-switch processes (two spines,
two leaves, NETCONF over UNIX sockets), with python3-grpcio members holding Session streams.
Polling is slowed to a minute so that only the reports can make the AM act. Checks: a report
with a bad member token (or an unknown rank) is refused, logged and counted; after the root
spine is killed, a report dismantles the tree (DISMANTLED with the reason on every session),
the AM re-checks the tree's switches (the dead spine is marked down and excluded) and rebuilds
on the other spine (REBUILT, generation 2); duplicate reports of generation 1 change nothing;
a report of generation 2 frees the slots on the switches and allocates them again (gen 3).
Usage: am_failover_test.py INCA-AM INCA-SWITCH PATH-TO-inca_am.proto"""
import os
import queue
import signal
import sys
import threading
import time

import amtest
from amtest import ADMIN, ADMIN_TOKEN, free_port, next_event

AM, SW, PROTO = sys.argv[1], sys.argv[2], sys.argv[3]
grpc, pb, pbg, tmp = amtest.grpc_stubs(PROTO, "inca-am-fo-")
check = amtest.Checker()


# Loopback addresses of their own (127.0.5.x): other tests use 127.0.0.x.
SWITCHES = {
    "spine0": "listen = 127.0.5.10:4791\nrole = spine\nmax_slots = 2048\n"
              "link = p1 peer leaf0\nlink = p2 peer leaf1\n",
    "spine1": "listen = 127.0.5.13:4791\nrole = spine\nmax_slots = 1024\n"
              "link = p1 peer leaf0\nlink = p2 peer leaf1\n",
    "leaf0": "listen = 127.0.5.11:4791\nrole = leaf\n"
             "link = up0 peer spine0\nlink = up1 peer spine1\n"
             "link = d1 peer fh0 peer_addr 127.0.5.21\nlink = d2 peer fh1 peer_addr 127.0.5.22\n",
    "leaf1": "listen = 127.0.5.12:4791\nrole = leaf\n"
             "link = up0 peer spine0\nlink = up1 peer spine1\n"
             "link = d1 peer fh2 peer_addr 127.0.5.23\nlink = d2 peer fh3 peer_addr 127.0.5.24\n",
}
procs = {}
am = None
log_path = os.path.join(tmp, "am.log")
try:
    amtest.start_switches(SW, tmp, SWITCHES, procs)
    port = free_port()
    am = amtest.start_am(
        AM, tmp, "listen = 127.0.0.1:%d\nheartbeat_ms = 200\nheartbeat_misses = 10\n"
        "poll_ms = 60000\njob jobF credential fcred\n"
        # ReportFailure semantics are tested here, TLS in am_tls_python / am-tls
        "tls = off\nadmin_token = %s\n" % (port, ADMIN_TOKEN)
        + amtest.switch_lines(tmp, SWITCHES), log_path)
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    stub = pbg.AmStub(ch)

    N = 4
    joins = [stub.Join(pb.JoinRequest(job_id="jobF", job_credential="fcred", rank=r, size=N,
                                      data_addr="127.0.5.%d:5000" % (21 + r),
                                      host_name="fh%d" % r, caps=pb.Capabilities(inc=True)),
                       timeout=5) for r in range(N)]
    gid = joins[0].group_id
    check(all(j.group_id == gid for j in joins), "4 ranks joined one group")

    stop = threading.Event()
    events = [queue.Queue() for _ in range(N)]

    for r in range(N):
        amtest.open_session(grpc, pb, stub, gid, r, joins[r].member_token, stop, events[r])

    evs = [next_event(events[r], [pb.GroupEvent.TREE_READY, pb.GroupEvent.HOST_FALLBACK])
           for r in range(N)]
    if not check(all(e is not None and e.kind == pb.GroupEvent.TREE_READY and
                     e.tree.generation == 1 for e in evs), "TREE_READY generation 1 everywhere"):
        raise SystemExit
    root = evs[0].tree.root_switch
    other = "spine1" if root == "spine0" else "spine0"
    check(root in ("spine0", "spine1") and evs[0].tree.multi_level, "2-level tree rooted at "
          "a spine (%s)" % root)

    def switches():
        return {s.name: s for s in stub.ListSwitches(pb.Empty(), timeout=5,
                                                     metadata=ADMIN).switches}

    def stats():
        return stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)

    sw = switches()
    slots = sw[root].am_slots
    check(slots > 0 and sw["leaf0"].am_slots == slots and sw["leaf1"].am_slots == slots and
          sw[other].am_slots == 0, "slots held on %s, leaf0, leaf1 (%d each)" % (root, slots))

    def report(r, gen, token=None, reason="retransmission limit reached"):
        return stub.ReportFailure(pb.FailureReport(
            group_id=gid, rank=r, member_token=joins[r].member_token if token is None else token,
            generation=gen, reason=reason), timeout=10)

    # ---- unauthenticated reports are refused and counted, and change nothing
    for what, args in (("bad member token", (0, 1, joins[0].member_token ^ 0x5a5a)),
                       ("another rank's token", (1, 1, joins[0].member_token))):
        try:
            report(*args)
            check(False, "report with %s refused" % what)
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.PERMISSION_DENIED, "report with %s refused" % what)
    try:
        stub.ReportFailure(pb.FailureReport(group_id=gid, rank=9, member_token=1,
                                            generation=1), timeout=5)
        check(False, "report of an unknown rank refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, "report of an unknown rank refused")
    st = stats()
    check(st.failure_reports_denied == 3 and st.failure_reports == 0 and st.dismantles == 0,
          "denied reports counted (%d), nothing dismantled" % st.failure_reports_denied)
    g = stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN).groups[0]
    check(g.state == "ready" and g.generation == 1, "group still ready on generation 1")

    # ---- the root spine dies; a member reports: dismantle, re-check, rebuild elsewhere
    procs[root].send_signal(signal.SIGKILL)
    procs[root].wait()
    t0 = time.time()
    rp = report(1, 1)
    dt = time.time() - t0
    check(rp.acted and rp.generation == 2 and rp.state == "ready",
          "report acted on: rebuilt, generation 2 (%s, %.0f ms)" % (rp, dt * 1000))
    for r in range(N):
        ev = next_event(events[r], [pb.GroupEvent.DISMANTLED])
        check(ev is not None and "rank 1 reported an INC failure" in ev.reason and
              "retransmission limit" in ev.reason, "rank %d told DISMANTLED with the reason" % r)
        ev = next_event(events[r], [pb.GroupEvent.REBUILT])
        check(ev is not None and ev.tree.generation == 2 and ev.tree.root_switch == other,
              "rank %d got REBUILT generation 2 rooted at %s" % (r, other))
    sw = switches()
    check(not sw[root].up and sw[root].last_error != "", "dead %s marked down (%s)" %
          (root, sw[root].last_error))
    check(sw[root].am_slots == 0 and sw[other].am_slots == slots and
          sw["leaf0"].am_slots == slots and sw["leaf1"].am_slots == slots,
          "slots moved from %s to %s" % (root, other))
    # The AM re-read the leaves between removing the old tree and pushing the new one.
    check(sw["leaf0"].used_slots == 0 and sw["leaf1"].used_slots == 0,
          "the leaves had freed the old tree's slots before the rebuild")
    st = stats()
    check(st.failure_reports == 1 and st.rebuilds == 1 and st.dismantles == 1 and
          st.switch_failures == 1, "stats: 1 report, 1 dismantle, 1 rebuild, 1 switch failure")

    # ---- the other ranks report the same failure: idempotent
    for r in (0, 2, 3):
        rp = report(r, 1)
        check(not rp.acted and rp.generation == 2 and rp.state == "ready",
              "duplicate report of generation 1 from rank %d ignored" % r)
    st = stats()
    check(st.failure_reports == 1 and st.failure_reports_stale == 3 and st.rebuilds == 1,
          "duplicates counted as stale, no new rebuild")
    time.sleep(0.3)
    check(all(events[r].empty() for r in range(N)), "duplicates sent no events")

    # ---- a report of the new generation: slots freed on every switch, allocated again
    rp = report(2, 2, reason="tree gone")
    check(rp.acted and rp.generation == 3, "report of generation 2 -> generation 3")
    for r in range(N):
        ev = next_event(events[r], [pb.GroupEvent.REBUILT])
        check(ev is not None and ev.tree.generation == 3, "rank %d got generation 3" % r)
    sw = switches()
    check(all(sw[n].used_slots == 0 for n in (other, "leaf0", "leaf1")) and
          all(sw[n].am_slots == slots for n in (other, "leaf0", "leaf1")),
          "slots freed on the switches and reallocated (not leaked)")
    g = stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN).groups[0]
    check(g.state == "ready" and g.generation == 3 and g.root_switch == other,
          "ListGroups: ready, generation 3, root %s" % other)

    for r in range(N):
        stub.Leave(pb.LeaveRequest(group_id=gid, rank=r, member_token=joins[r].member_token),
                   timeout=5)
    stop.set()
    check(stats().active_groups == 0, "group removed after leave")
    ch.close()
finally:
    amtest.stop(am, procs.values())
    log = open(log_path).read() if os.path.exists(log_path) else ""
    check("DENIED failure report" in log, "denied reports are logged")
    if check.failures:
        sys.stderr.write(log)
print("%d failure(s)" % check.failures)
sys.exit(1 if check.failures else 0)
