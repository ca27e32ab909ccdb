#!/usr/bin/python3
"""Join validation and per-job quotas of inca-am (python3-grpcio client; an inca-switch over
NETCONF when lib/ctl is built). Checks: every bad JoinRequest field is INVALID_ARGUMENT naming
the field (job_id, group_name, host_name, attach_hint, job_credential, size incl. 5000 > 4096,
rank, data_addr, qpn, slots_wanted > 65535 or below slots_min, unknown caps.dtype_mask /
caps.op_mask bits, caps.max_mtu below 256); a rank joining a forming group with another size
is FAILED_PRECONDITION naming size and leaves the group alone; quotas max_size, max_forming,
max_trees (also the default: the 17th tree of one job is refused) and max_slots give
RESOURCE_EXHAUSTED naming the quota; with a switch, caps.max_mtu sets the tree's MTU and
slots_wanted = 65535 gets the AM's per-tree `slots`, not the whole switch.
Usage: am_join_test.py INCA-AM INCA-SWITCH|none PATH-TO-inca_am.proto"""
import os
import sys
import time

import amtest
from amtest import ADMIN, ADMIN_TOKEN, free_port

AM, SW, PROTO = sys.argv[1], sys.argv[2], sys.argv[3]
grpc, pb, pbg, tmp = amtest.grpc_stubs(PROTO, "inca-am-join-")
check = amtest.Checker()


procs = {}
am = None
try:
    sock = None
    if SW != "none":
        amtest.start_switches(SW, tmp, {"sw0": "listen = 127.0.10.10:4791\nrole = leaf\n"
                                               "max_slots = 16384\nmax_trees = 64\n"}, procs)
        sock = os.path.join(tmp, "sw0.sock")
    port = free_port()
    log = os.path.join(tmp, "am.log")
    am = amtest.start_am(
        AM, tmp, "listen = 127.0.0.1:%d\nheartbeat_ms = 1000\nheartbeat_misses = 100\n"
        "poll_ms = 200\nslots = 256\nslots_min = 16\n"
        "job jobV credential v\n"
        "job jobD credential d\n"
        "job jobQ credential q max_size=8 max_forming=2\n"
        "job jobT credential t max_trees=2 max_forming=10\n"
        "job jobS credential s max_slots=600\n"
        # join validation is tested here, TLS in am_tls_python / am-tls
        "tls = off\nadmin_token = %s\n" % (port, ADMIN_TOKEN)
        + ("switch sw0 unix:%s role=leaf\n" % sock if sock else ""), log)
    stub = pbg.AmStub(grpc.insecure_channel("127.0.0.1:%d" % port))
    naddr = [0]

    def join(job="jobV", cred=None, name="g", rank=0, size=2, caps=None, **kw):
        naddr[0] += 1
        args = dict(job_id=job, job_credential=cred if cred is not None else job[-1].lower(),
                    group_name=name, rank=rank, size=size,
                    data_addr="127.0.10.%d:%d" % (20 + rank % 200, 5000 + naddr[0]),
                    host_name="h%d" % rank, attach_hint="sw0" if sock else "",
                    caps=caps if caps is not None else pb.Capabilities(inc=True))
        args.update(kw)
        return stub.Join(pb.JoinRequest(**args), timeout=5)

    def refused(what, code, words, **kw):
        try:
            join(**kw)
            check(False, "%s: refused" % what)
        except grpc.RpcError as e:
            check(e.code() == code and all(w in e.details() for w in words),
                  "%s: %s '%s'" % (what, e.code(), e.details()))

    INV = grpc.StatusCode.INVALID_ARGUMENT
    # ---- every field, each error naming it
    refused("empty job_id", INV, ["job_id"], job="", cred="v")
    refused("job_id with a space", INV, ["job_id"], job="a b", cred="v")
    refused("group_name of 64 bytes", INV, ["group_name"], name="x" * 64)
    refused("host_name with a newline", INV, ["host_name"], host_name="h\n")
    refused("attach_hint with ':'", INV, ["attach_hint"], attach_hint="a:b")
    refused("credential with a control character", INV, ["job_credential"], cred="v\x01")
    refused("credential with a newline", INV, ["job_credential"], cred="v\nG 1")
    refused("empty credential: denied like a wrong one", grpc.StatusCode.PERMISSION_DENIED,
            [], cred="")
    refused("credential of 128 bytes", INV, ["job_credential"], cred="v" * 128)
    refused("size 0", INV, ["size"], size=0)
    refused("size 5000 (above 4096)", INV, ["size", "4096"], size=5000)
    refused("rank not below size", INV, ["rank"], rank=4, size=4)
    refused("data_addr without a port", INV, ["data_addr"], data_addr="127.0.0.1")
    refused("data_addr 0.0.0.0", INV, ["data_addr"], data_addr="0.0.0.0:5000")
    refused("qpn wider than 24 bits", INV, ["qpn"], qpn=1 << 24)
    refused("slots_wanted 70000", INV, ["slots_wanted", "65535"], slots_wanted=70000)
    refused("slots_wanted below slots_min", INV, ["slots_wanted", "slots_min"], slots_wanted=4)
    refused("unknown dtype bits", INV, ["caps.dtype_mask"],
            caps=pb.Capabilities(inc=True, dtype_mask=1 << 12))
    refused("unknown op bits", INV, ["caps.op_mask"],
            caps=pb.Capabilities(inc=True, op_mask=1 << 7))
    refused("max_mtu 1", INV, ["caps.max_mtu", "256"], caps=pb.Capabilities(inc=True, max_mtu=1))
    refused("bad field and a wrong credential: the field first", INV, ["size"], cred="x",
            size=0)
    st = stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
    check(st.groups_created == 0 and st.joins == 0 and st.joins_denied == 1,
          "no refused join created a group; only the empty credential counts as a denial")

    # ---- a forming group is not replaced by a join with another size
    a = join(name="sz", size=3)
    refused("another size for a forming group", grpc.StatusCode.FAILED_PRECONDITION,
            ["size", "3"], name="sz", rank=1, size=4)
    b = join(name="sz", rank=1, size=3)
    check(b.group_id == a.group_id and b.joined == 2,
          "the forming group kept its ranks (%d of 3)" % b.joined)

    RES = grpc.StatusCode.RESOURCE_EXHAUSTED
    # ---- quotas that need no switch
    refused("max_size", RES, ["max_size", "jobQ"], job="jobQ", size=9)
    join(job="jobQ", name="f1", size=2)
    join(job="jobQ", name="f2", size=2)
    refused("max_forming", RES, ["max_forming", "jobQ"], job="jobQ", name="f3", size=2)
    join(job="jobQ", name="f1", rank=1, size=2)  # f1 forms: one forming group left
    try:
        join(job="jobQ", name="f3", size=2)
        check(True, "a formed group frees its max_forming share")
    except grpc.RpcError as e:
        check(False, "a formed group frees its max_forming share (%s)" % e.details())
    join(job="jobT", name="t1", size=2)
    join(job="jobT", name="t2", size=2)
    refused("max_trees counts forming groups", RES, ["max_trees", "jobT"], job="jobT",
            name="t3", size=2)
    err = open(log).read()
    check("max_trees of job jobT" in err, "the refusal is logged")

    if sock:
        def group(gid):
            """The group once its tree push answered (a complete group is pushed
            asynchronously: it stays forming until every switch took its tree)."""
            deadline = time.time() + 10
            while True:
                for g in stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN).groups:
                    if g.group_id == gid and (g.state != "forming" or time.time() > deadline):
                        return g
                time.sleep(0.02)

        r = join(name="mtu", size=1, caps=pb.Capabilities(inc=True, max_mtu=512))
        g = group(r.group_id)
        check(g.state == "ready" and g.mtu == 512,
              "max_mtu 512 honoured: tree MTU %d (%s)" % (g.mtu, g.state))
        r = join(name="big", size=1, slots_wanted=65535)
        g = group(r.group_id)
        check(g.state == "ready" and g.slots == 256,
              "slots_wanted 65535 gets the per-tree maximum: %d slots" % g.slots)
        # default quota: one job gets 16 trees, not the switch's 64
        ok = 0
        for i in range(16):
            ok += group(join(job="jobD", name="d%d" % i, size=1).group_id).state == "ready"
        check(ok == 16, "16 trees for one job (%d ready)" % ok)
        refused("default max_trees", RES, ["max_trees", "jobD"], job="jobD", name="d16",
                size=1)
        # max_slots = 600: 256 + 256, then the remaining 88, then nothing
        s1 = group(join(job="jobS", name="s1", size=1).group_id)
        s2 = group(join(job="jobS", name="s2", size=1).group_id)
        s3 = group(join(job="jobS", name="s3", size=1).group_id)
        check((s1.slots, s2.slots, s3.slots) == (256, 256, 88) and s3.state == "ready",
              "max_slots 600: trees of %d, %d, %d slots" % (s1.slots, s2.slots, s3.slots))
        refused("max_slots", RES, ["max_slots", "jobS"], job="jobS", name="s4", size=1)
finally:
    amtest.stop(am, procs.values())

print("%d failure(s)" % check.failures)
sys.exit(1 if check.failures else 0)
