#!/usr/bin/python3
"""The AM's journal against damage (python3-grpcio client, real inca-am, and an inca-switch
over NETCONF when lib/ctl is built). Checks: a credential with a newline is refused at Join,
naming the field; a first joiner's credential with spaces, '%', ':' and UTF-8 survives a
restart (escaped in the journal); every journal line carries a valid CRC-32 after a versioned
header; a journal with a flipped byte, a torn last line, random bytes, an unknown record type
(valid checksum) or the old unversioned format makes the AM refuse to start, naming the file,
line and record, and leaves the file as it was; --recover keeps the valid records, moves the
damaged file aside (byte for byte) and counts the dropped records; with a switch, --recover
removes the tree of a group whose records were damaged (log + GetStats) and keeps the group
whose records were intact running on its tree.
Usage: am_journal_test.py INCA-AM INCA-SWITCH|none PATH-TO-inca_am.proto"""
import glob
import os
import random
import subprocess
import sys
import time
import zlib

import amtest
from amtest import ADMIN, ADMIN_TOKEN, free_port, wait_file

AM, SW, PROTO = sys.argv[1], sys.argv[2], sys.argv[3]
grpc, pb, pbg, tmp = amtest.grpc_stubs(PROTO, "inca-am-jr-")
check = amtest.Checker()


journal = os.path.join(tmp, "am.journal")
port = free_port()
conf = os.path.join(tmp, "am.conf")
log_n = [0]


def write_conf(switch_sock=None):
    with open(conf, "w") as f:
        # no sessions in this test: members stay alive for heartbeat_ms x misses = 100 s
        f.write("listen = 127.0.0.1:%d\nheartbeat_ms = 1000\nheartbeat_misses = 100\n"
                "poll_ms = 200\nallow_first_joiner = yes\njob jobA credential acred\n"
                # the journal is tested here, TLS in am_tls_python / am-tls
                "tls = off\nadmin_token = %s\n" % (port, ADMIN_TOKEN))
        if switch_sock:
            f.write("switch sw0 unix:%s role=leaf\n" % switch_sock)


def start_am(*extra):
    """Returns (proc, log path, ready)."""
    log_n[0] += 1
    log = os.path.join(tmp, "am%d.log" % log_n[0])
    ready = os.path.join(tmp, "am.ready")
    if os.path.exists(ready):
        os.unlink(ready)
    global stub
    p = subprocess.Popen([AM, "-c", conf, "-j", journal, "--ready-file", ready, "-v"]
                         + list(extra), stderr=open(log, "w"))
    ok = wait_file(ready, p)
    # a channel per AM process: the old one may still hold the dead connection
    stub = pbg.AmStub(grpc.insecure_channel("127.0.0.1:%d" % port))
    return p, log, ok


def lines_ok(text):
    """Every line: record, space, CRC-32 of the record in 8 hex digits."""
    for ln in text.split("\n")[:-1]:
        rec, _, crc = ln.rpartition(" ")
        if len(crc) != 8 or int(crc, 16) != zlib.crc32(rec.encode("latin-1")):
            return False
    return text.endswith("\n")


def line_of(text, prefix):
    for i, ln in enumerate(text.split("\n")):
        if ln.startswith(prefix):
            return i
    return -1


def with_crc(rec):
    return "%s %08x" % (rec, zlib.crc32(rec.encode("latin-1")))


stub = None
procs = {}
am = None
try:
    write_conf()
    am, log, ok = start_am()
    if not check(ok, "inca-am started with a fresh journal"):
        sys.exit(1)

    def join(job, cred, rank=0, size=2, name="g", addr="127.0.9.21:5000", **kw):
        return stub.Join(pb.JoinRequest(job_id=job, job_credential=cred, group_name=name,
                                        rank=rank, size=size, data_addr=addr,
                                        host_name="jh%d" % rank,
                                        caps=pb.Capabilities(inc=True), **kw), timeout=5)

    # ---- a credential that would split a journal line is refused at Join
    try:
        join("jobN", "evil\nD 1")
        check(False, "a credential with a newline is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and
              "job_credential" in e.details(),
              "a credential with a newline is refused, naming the field (%s: %s)" %
              (e.code(), e.details()))
    # ---- a first joiner's credential with every character that needs escaping
    odd = "a b%c:d-\u00e9 %2d -"
    r0 = join("jobE", odd)
    check(r0.group_id > 0, "first joiner with an odd credential joined")
    amtest.stop(am)
    text = open(journal, encoding="latin-1").read()
    check(text.startswith("H inca-am-journal 2 "), "the journal starts with a versioned header")
    check(lines_ok(text), "every journal line carries a valid CRC-32")
    good = open(journal, "rb").read()

    am, log, ok = start_am()
    check(ok, "the AM restarts from its own journal")
    try:
        r1 = join("jobE", odd, rank=1, addr="127.0.9.22:5000")
        check(r1.group_id == r0.group_id and r1.joined == 2,
              "the escaped credential survives the restart; the group was recovered")
    except grpc.RpcError as e:
        check(False, "the escaped credential survives the restart (%s)" % e.details())
    try:
        join("jobE", odd + "x", name="other")
        check(False, "a wrong credential is still refused after the restart")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED,
              "a wrong credential is still refused after the restart")
    amtest.stop(am)
    good = open(journal, "rb").read()
    gtext = good.decode("latin-1")

    # ---- damaged journals: refused with file, line and record; the file is left alone
    gline = line_of(gtext, "G ")
    glines = gtext.split("\n")
    flipped = glines[:]
    flipped[gline] = flipped[gline].replace("jobE", "jobF", 1)
    rnd = random.Random(7)
    cases = [
        ("a flipped byte", "\n".join(flipped).encode("latin-1"), gline + 1),
        ("a torn last line", good[:-7], len(glines) - 1),
        ("random bytes", bytes(rnd.randrange(256) for _ in range(3000)), 1),
        ("an unknown record type with a valid checksum",
         good + (with_crc("X 1 2") + "\n").encode(), len(glines)),
        ("the old unversioned format",
         b"# inca-am journal\nJ jobE s3cret\nG 5 forming jobE g 2 0 0 0 0 0 0 0 0 0 0\n", 1),
    ]
    for what, data, line in cases:
        with open(journal, "wb") as f:
            f.write(data)
        t0 = time.time()
        am, log, ok = start_am()
        try:
            am.wait(15)
        except subprocess.TimeoutExpired:
            pass
        err = open(log).read()
        check(not ok and am.poll() not in (None, 0),
              "%s: the AM refuses to start (exit %s, %.2f s)" % (what, am.poll(),
                                                                   time.time() - t0))
        check(journal in err and ("line %d " % line) in err and "record '" in err and
              "--recover" in err,
              "%s: the error names the file, line %d and the record" % (what, line))
        check(open(journal, "rb").read() == data, "%s: the journal is left as it was" % what)
        check(not glob.glob(journal + ".damaged-*"), "%s: nothing moved aside" % what)
        check(odd not in err, "%s: no secret in the log" % what)
        amtest.stop(am)

    # ---- --recover: valid records kept, the file moved aside byte for byte
    damaged = good + (with_crc("X 1 2") + "\n").encode() + b"garbage\n"
    with open(journal, "wb") as f:
        f.write(damaged)
    am, log, ok = start_am("--recover")
    check(ok, "--recover starts from a damaged journal")
    aside = glob.glob(journal + ".damaged-*")
    check(len(aside) == 1 and open(aside[0], "rb").read() == damaged,
          "--recover keeps the damaged journal aside, byte for byte")
    st = stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
    check(st.journal_damaged_records == 2 and st.recovered_groups == 1,
          "--recover: 2 damaged records dropped, 1 group recovered (stats %d/%d)" %
          (st.journal_damaged_records, st.recovered_groups))
    gs = stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN).groups
    check(len(gs) == 1 and gs[0].job_id == "jobE" and gs[0].joined == 2,
          "--recover: the group of the valid records is back")
    err = open(log).read()
    check("line %d " % (len(glines)) in err and "unknown record type" in err,
          "--recover logs each dropped record with its line")
    amtest.stop(am)
    text = open(journal, encoding="latin-1").read()
    check(text.startswith("H inca-am-journal 2 ") and lines_ok(text) and "garbage" not in text,
          "--recover wrote a clean journal")
    for p in aside:
        os.unlink(p)

    # ---- with a switch: --recover removes the tree of a group whose records were damaged
    if SW == "none":
        print("(no lib/ctl: the switch part is skipped)")
    else:
        os.unlink(journal)
        amtest.start_switches(SW, tmp, {"sw0": "listen = 127.0.9.10:4791\nrole = leaf\n"
                                               "max_slots = 2048\n"}, procs)
        sock = os.path.join(tmp, "sw0.sock")
        write_conf(sock)
        am, log, ok = start_am()
        check(ok, "AM with a switch started")
        ga = join("jobA", "acred", size=1, name="keep", addr="127.0.9.31:5000",
                  attach_hint="sw0")
        gb = join("jobA", "acred", size=1, name="lose", addr="127.0.9.32:5000",
                  attach_hint="sw0")
        # complete groups get their trees asynchronously: wait for both pushes
        deadline = time.time() + 10
        while True:
            gs = {g.group_id: g for g in
                  stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN).groups}
            if all(gs[x.group_id].state != "forming" for x in (ga, gb)) or \
                    time.time() > deadline:
                break
            time.sleep(0.02)
        check(gs[ga.group_id].state == "ready" and gs[gb.group_id].state == "ready",
              "two groups run on trees %d and %d" % (gs[ga.group_id].tree_id,
                                                     gs[gb.group_id].tree_id))
        tree_b = gs[gb.group_id].tree_id
        amtest.stop(am)
        text = open(journal, encoding="latin-1").read()
        lines = text.split("\n")
        for i, ln in enumerate(lines):  # damage every record of group b
            if ln.startswith("G %d " % gb.group_id):
                lines[i] = ln.replace(" lose ", " l0se ", 1)
        with open(journal, "w", encoding="latin-1") as f:
            f.write("\n".join(lines))
        am, log, ok = start_am()
        am.wait(15)
        check(not ok, "damaged records of a running group: the AM refuses to start")
        am, log, ok = start_am("--recover")
        check(ok, "--recover with a switch")
        time.sleep(0.6)  # a poll or two: the switch's tree count after the sweep
        st = stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)
        check(st.orphan_trees_removed == 1, "--recover removed 1 tree no recovered group owns "
              "(stats: %d)" % st.orphan_trees_removed)
        gs = stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN).groups
        check(len(gs) == 1 and gs[0].group_id == ga.group_id and gs[0].state == "ready" and
              all(t.running for t in gs[0].tree),
              "the intact group still runs on its tree")
        sws = stub.ListSwitches(pb.Empty(), timeout=5, metadata=ADMIN).switches
        check(sws[0].used_trees == 1, "the switch runs one tree (%d)" % sws[0].used_trees)
        err = open(log).read()
        check("removing tree %d that no recovered group owns" % tree_b in err,
              "the removal is logged")
        out = subprocess.run([os.path.join(os.path.dirname(AM), "inca"), "--am",
                              "127.0.0.1:%d" % port, "--insecure", "--admin-token", ADMIN_TOKEN,
                              "stats"], capture_output=True, text=True)
        check(out.returncode != 0 or "1 trees no recovered group owned removed" in out.stdout,
              "inca stats shows the recovery")
        amtest.stop(am)
        am, log, ok = start_am()
        check(ok, "after --recover the AM starts normally")
        amtest.stop(am)
finally:
    amtest.stop(am, procs.values())

print("%d failure(s)" % check.failures)
sys.exit(1 if check.failures else 0)
