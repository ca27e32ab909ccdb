#!/usr/bin/python3
"""A client nobody here wrote: python3-grpcio with stubs generated from proto/inca_am.proto at
test time joins and queries inca-am. Checks: a wrong job credential is denied (and counted), a
group forms, the Session stream carries WAITING then the group's verdict, the query RPCs answer,
an unknown method gets UNIMPLEMENTED at once, Leave ends the group.
Usage: am_grpc_test.py PATH-TO-inca-am PATH-TO-inca_am.proto"""
import os
import queue
import subprocess
import sys
import threading
import time

import amtest
from amtest import ADMIN, ADMIN_TOKEN, free_port, next_event, wait_file

AM, PROTO = sys.argv[1], sys.argv[2]
grpc, pb, pbg, tmp = amtest.grpc_stubs(PROTO, "inca-am-py-")
check = amtest.Checker()

port = free_port()
conf = os.path.join(tmp, "am.conf")
with open(conf, "w") as f:
    f.write("listen = 127.0.0.1:%d\nheartbeat_ms = 200\npoll_ms = 200\n"
            "job jobA credential s3cret\n"
            # gRPC semantics are tested here, TLS in am_tls_python / am-tls
            "tls = off\nadmin_token = %s\n" % (port, ADMIN_TOKEN))
ready = os.path.join(tmp, "ready")
am = subprocess.Popen([AM, "-c", conf, "--ready-file", ready, "-v"], stderr=subprocess.PIPE,
                      text=True)
try:
    check(wait_file(ready, am), "inca-am started")
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    stub = pbg.AmStub(ch)

    def join(rank, cred="s3cret", job="jobA"):
        return stub.Join(pb.JoinRequest(job_id=job, job_credential=cred, rank=rank, size=2,
                                        data_addr="127.0.0.%d:5000" % (20 + rank),
                                        host_name="pyhost%d" % rank,
                                        caps=pb.Capabilities(inc=True)), timeout=5)

    # wrong credential
    try:
        join(0, cred="wrong")
        check(False, "wrong credential denied")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, "wrong credential denied (%s)" %
              e.code())
    # a job the AM does not know (allow_first_joiner is off)
    try:
        join(0, job="other")
        check(False, "unknown job denied")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, "unknown job denied")

    r0 = join(0)
    check(r0.group_id > 0 and r0.bfr_id == 1 and r0.joined == 1, "rank 0 joined")
    check(r0.heartbeat_ms == 200, "heartbeat interval advertised")

    # session of rank 0: heartbeats from a generator, events into a queue
    events = queue.Queue()
    stop = threading.Event()

    amtest.open_session(grpc, pb, stub, r0.group_id, 0, r0.member_token, stop, events,
                        pongs=True)

    ev = next_event(events, [pb.GroupEvent.WAITING])
    check(ev is not None and ev.joined == 1 and ev.size == 2, "WAITING on the session")
    ev = next_event(events, [pb.GroupEvent.PONG])
    check(ev is not None, "heartbeats answered")

    # a session with a bad token is refused
    try:
        for _ in stub.Session(iter([pb.SessionMsg(group_id=r0.group_id, rank=0,
                                                  member_token=r0.member_token ^ 1)]),
                              timeout=5):
            pass
        check(False, "bad session token refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, "bad session token refused")

    r1 = join(1)
    check(r1.group_id == r0.group_id and r1.joined == 2, "rank 1 joined the same group")
    # no switch reaches these clients: the group runs on the host path, with a reason
    ev = next_event(events, [pb.GroupEvent.HOST_FALLBACK, pb.GroupEvent.TREE_READY])
    check(ev is not None and ev.kind == pb.GroupEvent.HOST_FALLBACK and
          "not attached" in ev.reason, "HOST_FALLBACK with a reason (%s)" %
          (ev.reason if ev else None))

    groups = stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN).groups
    check(len(groups) == 1 and groups[0].state == "fallback" and len(groups[0].members) == 2,
          "ListGroups shows the group and its members")
    check(groups[0].members[0].session_up, "rank 0's session is up")
    check(groups[0].auth_key_id == 0 and not ev.tree.auth_key and ev.tree.auth_key_id == 0,
          "a group on the host path has no data-plane key")
    check(len(stub.ListSwitches(pb.Empty(), timeout=5,
                                metadata=ADMIN).switches) == 0, "ListSwitches")
    check(len(stub.ListLinks(pb.Empty(), timeout=5, metadata=ADMIN).links) == 0, "ListLinks")
    check(len(stub.ListTrees(pb.Empty(), timeout=5, metadata=ADMIN).trees) == 0, "ListTrees")
    st = stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
    check(st.joins_denied == 2 and st.joins == 2 and st.sessions_denied == 1 and
          st.groups_fallback == 1, "GetStats counts joins and denials")

    t1 = time.time()
    try:
        ch.unary_unary("/inca.am.v1.Am/NoSuchMethod")(b"", timeout=5)
        check(False, "unknown method")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNIMPLEMENTED and time.time() - t1 < 2,
              "unknown method answered UNIMPLEMENTED at once")

    # rank 1 never opens a session: its heartbeat times out and the group goes away
    stub.Leave(pb.LeaveRequest(group_id=r0.group_id, rank=0, member_token=r0.member_token),
               timeout=5)
    stop.set()
    t1 = time.time()
    while time.time() - t1 < 5 and stub.GetStats(pb.Empty(), timeout=5,
                                                 metadata=ADMIN).active_groups:
        time.sleep(0.1)
    check(stub.GetStats(pb.Empty(), timeout=5,
                        metadata=ADMIN).active_groups == 0, "group removed after leave "
          "and heartbeat loss")
    ch.close()
finally:
    err = amtest.stop_log(am)
    check("DENIED join" in err, "denials are logged")
    if check.failures:
        sys.stderr.write(err)
print("%d failure(s)" % check.failures)
sys.exit(1 if check.failures else 0)
