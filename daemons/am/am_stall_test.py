#!/usr/bin/python3
"""A stalled switch delays nothing but itself. The real inca-am with two inca-switch processes
(NETCONF over UNIX sockets): swA hosts a group's tree, swB is in no tree. python3-grpcio members
hold Session streams with heartbeats. Checks:
- swB is stopped (SIGSTOP) for more than 3 heartbeat timeouts: GetStats and ListGroups each
  answer in well under a second all along (an AM that polls switches on its RPC loop waits
  for the stopped switch's NETCONF timeouts), the group stays ready with no heartbeat loss,
  a second group forms and gets its tree on swA meanwhile, and swB is shown down within a
  few poll intervals; SIGCONT brings it back up.
- swA, which runs the trees, is stopped: both groups lose their tree (DISMANTLED, 'switch swA
  failed') while the RPCs stay fast; SIGCONT: swA comes back and the groups are rebuilt
  (REBUILT, generation 2).
Usage: am_stall_test.py INCA-AM INCA-SWITCH PATH-TO-inca_am.proto"""
import os
import queue
import signal
import sys
import threading
import time

import amtest
from amtest import ADMIN, ADMIN_TOKEN, free_port

AM, SW, PROTO = sys.argv[1], sys.argv[2], sys.argv[3]
grpc, pb, pbg, tmp = amtest.grpc_stubs(PROTO, "inca-am-stall-")
check = amtest.Checker()
HB_MS, HB_MISSES, POLL_MS, SW_TIMEOUT_MS = 200, 5, 300, 1000
HB_TIMEOUT = HB_MS * HB_MISSES / 1000.0
RPC_BOUND = 1.0  # seconds; an AM waiting on the stopped switch takes its NETCONF timeout


# Loopback addresses of their own (127.0.8.x).
SWITCHES = {
    "swA": "listen = 127.0.8.10:4791\nrole = leaf\n"
           "link = d1 peer sh0 peer_addr 127.0.8.21\nlink = d2 peer sh1 peer_addr 127.0.8.22\n"
           "link = d3 peer sh2 peer_addr 127.0.8.23\nlink = d4 peer sh3 peer_addr 127.0.8.24\n",
    "swB": "listen = 127.0.8.11:4791\nrole = leaf\n"
           "link = d1 peer other peer_addr 127.0.8.30\n",
}
procs = {}
am = None
stopped = set()
log_path = os.path.join(tmp, "am.log")
stop = threading.Event()


def cont_all():
    for name in list(stopped):
        procs[name].send_signal(signal.SIGCONT)
        stopped.discard(name)


try:
    amtest.start_switches(SW, tmp, SWITCHES, procs)
    port = free_port()
    am = amtest.start_am(
        AM, tmp, "listen = 127.0.0.1:%d\nheartbeat_ms = %d\nheartbeat_misses = %d\n"
        "poll_ms = %d\nswitch_timeout_ms = %d\njob jobS credential scred\n"
        # stalled switches are tested here, TLS in am_tls_python / am-tls
        "tls = off\nadmin_token = %s\n"
        % (port, HB_MS, HB_MISSES, POLL_MS, SW_TIMEOUT_MS, ADMIN_TOKEN)
        + amtest.switch_lines(tmp, SWITCHES), log_path)
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    stub = pbg.AmStub(ch)

    class Member:
        def __init__(self, group, rank, size, host, addr):
            self.events = queue.Queue()
            self.j = stub.Join(pb.JoinRequest(job_id="jobS", job_credential="scred",
                                              group_name=group, rank=rank, size=size,
                                              data_addr=addr, host_name=host,
                                              caps=pb.Capabilities(inc=True)), timeout=5)
            self.rank = rank
            amtest.open_session(grpc, pb, stub, self.j.group_id, rank, self.j.member_token,
                                stop, self.events, period_s=HB_MS / 1000.0 / 2)

        def next_event(self, kinds, timeout):
            return amtest.next_event(self.events, kinds, timeout, poll_s=0.1)

        def seen(self, kind):
            """Drain the queue: was an event of this kind among them?"""
            found = False
            while True:
                try:
                    ev = self.events.get_nowait()
                except queue.Empty:
                    return found
                found = found or ev.kind == kind

    def switches():
        return {s.name: s for s in
                stub.ListSwitches(pb.Empty(), timeout=20, metadata=ADMIN).switches}

    def groups():
        return {g.group_name: g for g in
                stub.ListGroups(pb.Empty(), timeout=20, metadata=ADMIN).groups}

    def timed(fn):
        t0 = time.time()
        try:
            r = fn()
        except grpc.RpcError as e:  # a deadline: counts as slow
            print("  %s" % e.code())
            r = None
        return r, time.time() - t0

    g1 = [Member("g1", r, 2, "sh%d" % r, "127.0.8.%d:5000" % (21 + r)) for r in range(2)]
    evs = [m.next_event([pb.GroupEvent.TREE_READY, pb.GroupEvent.HOST_FALLBACK], 10)
           for m in g1]
    if not check(all(e is not None and e.kind == pb.GroupEvent.TREE_READY for e in evs),
                 "group g1 got its tree"):
        raise SystemExit
    check(evs[0].tree.root_switch == "swA", "g1's tree is on swA")
    sw = switches()
    check(sw["swA"].up and sw["swB"].up, "both switches up")

    def watch(seconds, what, during=None):
        """Query the AM for `seconds`; return the worst GetStats/ListGroups latencies."""
        worst_stats = worst_list = 0.0
        n = 0
        end = time.time() + seconds
        while time.time() < end:
            st, d1 = timed(lambda: stub.GetStats(pb.Empty(), timeout=20, metadata=ADMIN))
            gs, d2 = timed(groups)
            worst_stats, worst_list = max(worst_stats, d1), max(worst_list, d2)
            n += 1
            if during and st and gs:
                during(st, gs)
            time.sleep(0.05)
        check(worst_stats < RPC_BOUND and worst_list < RPC_BOUND,
              "%s: %d GetStats/ListGroups, slowest %.0f / %.0f ms" %
              (what, n, worst_stats * 1000, worst_list * 1000))

    # ---- an unrelated switch stops: nothing else may notice
    st0 = stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
    procs["swB"].send_signal(signal.SIGSTOP)
    stopped.add("swB")
    t_stop = time.time()
    down_after = []
    states = set()

    def note(st, gs):
        if "g1" in gs:
            states.add(gs["g1"].state)
        sw, _ = timed(switches)
        if not down_after and sw and not sw["swB"].up:
            down_after.append(time.time() - t_stop)

    watch(1.0, "swB stopped, first second", note)
    # a new group forms meanwhile: its push must not wait for swB
    t0 = time.time()
    g2 = [Member("g2", r, 2, "sh%d" % (2 + r), "127.0.8.%d:5000" % (23 + r)) for r in range(2)]
    evs = [m.next_event([pb.GroupEvent.TREE_READY, pb.GroupEvent.HOST_FALLBACK], 10)
           for m in g2]
    dt = time.time() - t0
    check(all(e is not None and e.kind == pb.GroupEvent.TREE_READY for e in evs) and
          dt < RPC_BOUND, "group g2 formed on swA while swB is stopped (%.0f ms)" % (dt * 1000))
    watch(max(3 * HB_TIMEOUT + 0.5, 2.0), "swB stopped, %.1f s more" % (3 * HB_TIMEOUT + 0.5),
          note)
    check(states == {"ready"}, "g1 stayed ready all along (%s)" % sorted(states))
    check(not any(m.seen(pb.GroupEvent.DISMANTLED) for m in g1 + g2),
          "no member was told DISMANTLED")
    st = stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
    check(st.heartbeat_timeouts == st0.heartbeat_timeouts and st.dismantles == st0.dismantles,
          "no heartbeat timeout, no dismantle (%d, %d)" % (st.heartbeat_timeouts, st.dismantles))
    bound = (2 * POLL_MS + 2 * SW_TIMEOUT_MS) / 1000.0 + 0.5
    check(down_after and down_after[0] < bound,
          "stopped swB shown down after %.1f s (bound %.1f s)" %
          (down_after[0] if down_after else -1, bound))
    sw = switches()
    check(not sw["swB"].up and sw["swB"].last_error != "" and sw["swA"].up,
          "swB down (%s), swA up" % sw["swB"].last_error)

    procs["swB"].send_signal(signal.SIGCONT)
    stopped.discard("swB")
    end = time.time() + 5
    while time.time() < end and not switches()["swB"].up:
        time.sleep(0.1)
    check(switches()["swB"].up, "swB up again after SIGCONT")

    # ---- the switch that runs both trees stops: the groups lose them, the AM stays quick
    procs["swA"].send_signal(signal.SIGSTOP)
    stopped.add("swA")
    watch(max(3 * HB_TIMEOUT + 0.5, 2.0), "swA stopped")
    gs = groups()
    check(gs["g1"].state == "fallback" and gs["g2"].state == "fallback",
          "both groups lost their tree (%s, %s: %s)" %
          (gs["g1"].state, gs["g2"].state, gs["g1"].reason))
    ok = True
    for m in g1 + g2:
        ev = m.next_event([pb.GroupEvent.DISMANTLED], 1)
        ok = ok and ev is not None and "swA" in ev.reason
    check(ok, "every member told DISMANTLED (switch swA)")
    st = stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
    check(st.heartbeat_timeouts == st0.heartbeat_timeouts, "still no heartbeat timeout")
    check(not switches()["swA"].up, "swA shown down")

    procs["swA"].send_signal(signal.SIGCONT)
    stopped.discard("swA")
    ok = True
    for m in g1 + g2:
        ev = m.next_event([pb.GroupEvent.REBUILT], 10)
        ok = ok and ev is not None and ev.tree.generation == 2 and ev.tree.root_switch == "swA"
    check(ok, "after SIGCONT both groups rebuilt on swA (generation 2)")
    gs = groups()
    check(gs["g1"].state == "ready" and gs["g2"].state == "ready", "both groups ready again")

    for m in g1 + g2:
        stub.Leave(pb.LeaveRequest(group_id=m.j.group_id, rank=m.rank,
                                   member_token=m.j.member_token), timeout=5)
    stop.set()
    ch.close()
except grpc.RpcError as e:
    check(False, "an RPC failed: %s %s" % (e.code(), e.details()))
finally:
    cont_all()
    stop.set()
    amtest.stop(am, procs.values())
    if check.failures:
        log = open(log_path).read() if os.path.exists(log_path) else ""
        sys.stderr.write(log)
print("%d failure(s)" % check.failures)
sys.exit(1 if check.failures else 0)
