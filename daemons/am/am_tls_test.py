#!/usr/bin/python3
"""gRPC over TLS with a client nobody here wrote: openssl makes a CA, a server certificate for
127.0.0.1 and an unrelated CA at test time; inca-am serves TLS (--tls-cert/--tls-key);
python3-grpcio joins with grpc.ssl_channel_credentials. Checks: Join + Session + queries over
TLS; a channel trusting another CA and a plaintext channel fail fast with UNAVAILABLE (no
hang); a client of another job cannot join this job's group (its own job's credential is
rejected), and every denial is logged and counted.
Usage: am_tls_test.py PATH-TO-inca-am PATH-TO-inca_am.proto"""
import os
import socket
import subprocess
import sys
import time

import amtest
from amtest import ADMIN, ADMIN_TOKEN, wait_file

AM, PROTO = sys.argv[1], sys.argv[2]
grpc, pb, pbg, tmp = amtest.grpc_stubs(PROTO, "inca-am-tls-", need_openssl=True)
check = amtest.Checker()
amtest.make_certs(tmp, "IP:127.0.0.1, DNS:localhost", other_ca=True)


def read(name):
    with open(os.path.join(tmp, name), "rb") as f:
        return f.read()


s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
target = "127.0.0.1:%d" % port
conf = os.path.join(tmp, "am.conf")
with open(conf, "w") as f:
    f.write("listen = %s\nheartbeat_ms = 200\npoll_ms = 200\n"
            "job jobT credential tee-secret\njob jobU credential you-secret\n"
            "admin_token = %s\n" % (target, ADMIN_TOKEN))
ready = os.path.join(tmp, "ready")
am = subprocess.Popen([AM, "-c", conf, "--tls-cert", os.path.join(tmp, "am.crt"), "--tls-key",
                       os.path.join(tmp, "am.key"), "--ready-file", ready, "-v"],
                      stderr=subprocess.PIPE, text=True)
try:
    check(wait_file(ready, am), "inca-am started with TLS")

    ch = grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=read("ca.pem")))
    stub = pbg.AmStub(ch)

    def join(stub_, rank, job="jobT", cred="tee-secret", timeout=5):
        return stub_.Join(pb.JoinRequest(job_id=job, job_credential=cred, rank=rank, size=2,
                                         data_addr="127.0.0.%d:5000" % (30 + rank),
                                         host_name="tls%d" % rank,
                                         caps=pb.Capabilities(inc=True)), timeout=timeout)

    r0 = join(stub, 0)
    check(r0.group_id > 0 and r0.joined == 1, "Join over TLS (ssl_channel_credentials)")
    evs = stub.Session(iter([pb.SessionMsg(group_id=r0.group_id, rank=0,
                                           member_token=r0.member_token)]), timeout=5)
    ev = next(evs)
    check(ev.kind == pb.GroupEvent.WAITING, "Session over TLS: WAITING")
    evs.cancel()

    # another job's member: its own (valid) credential does not open this job's group
    try:
        join(stub, 1, job="jobT", cred="you-secret")
        check(False, "jobU's credential cannot join jobT")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, "jobU's credential cannot join jobT")
    try:
        join(stub, 1, job="jobT", cred="")
        check(False, "an empty credential cannot join jobT")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, "an empty credential cannot join")
    # nor can it act as a member of jobT's group
    try:
        stub.Leave(pb.LeaveRequest(group_id=r0.group_id, rank=0, member_token=1), timeout=5)
        check(False, "Leave with a guessed token refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, "Leave with a guessed token refused")
    try:
        stub.ReportFailure(pb.FailureReport(group_id=r0.group_id, rank=0, member_token=1,
                                            generation=1), timeout=5)
        check(False, "ReportFailure with a guessed token refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED,
              "ReportFailure with a guessed token refused")
    st = stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
    check(st.joins_denied == 2 and st.sessions_denied == 1 and st.failure_reports_denied == 1,
          "GetStats over TLS counts every denial (joins %d, sessions %d, reports %d)" %
          (st.joins_denied, st.sessions_denied, st.failure_reports_denied))

    # a client that trusts another CA: fails fast, does not hang
    bad = grpc.secure_channel(target,
                              grpc.ssl_channel_credentials(root_certificates=read("other.pem")))
    t1 = time.time()
    try:
        pbg.AmStub(bad).GetStats(pb.Empty(), timeout=10, metadata=ADMIN)
        check(False, "wrong CA refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNAVAILABLE and time.time() - t1 < 5,
              "wrong CA refused with UNAVAILABLE after %.2f s" % (time.time() - t1))
    bad.close()
    plain = grpc.insecure_channel(target)
    t1 = time.time()
    try:
        pbg.AmStub(plain).GetStats(pb.Empty(), timeout=10, metadata=ADMIN)
        check(False, "plaintext client refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNAVAILABLE and time.time() - t1 < 5,
              "plaintext client refused with UNAVAILABLE after %.2f s" % (time.time() - t1))
    plain.close()
    # the AM still serves the good channel
    check(stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN).joins == 1,
          "AM unaffected by the bad clients")
    ch.close()
finally:
    err = amtest.stop_log(am)
    check("DENIED join" in err and "DENIED leave" in err and "DENIED failure report" in err,
          "denials are logged")
    check("(TLS)" in err or "tls" in err.lower(), "the AM says it serves TLS")
    if check.failures:
        sys.stderr.write(err)
print("%d failure(s)" % check.failures)
sys.exit(1 if check.failures else 0)
