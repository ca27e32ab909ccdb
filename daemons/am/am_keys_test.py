#!/usr/bin/python3
"""Data-plane group keys against the real inca-am and three inca-switch processes (one spine,
two leaves, NETCONF over UNIX sockets), with python3-grpcio members holding Session streams.
Checks: every member gets the same 32-byte key and nonzero key id in TreeInfo; every switch of
the tree runs the tree with auth enabled and that key id (read over NETCONF), and neither
get-config nor get ever carries the key bytes; ListGroups shows the key id, and no listing
(ListGroups, ListTrees, ListSwitches, ListLinks, GetStats) nor `inca status` contains the key;
the journal is mode 0600 and holds the key; a restarted AM hands the running group the same
key and id; a rebuild (ReportFailure) brings a new key and a new key id, on the switches too;
without TLS the AM warns that keys cross the network in clear.
Usage: am_keys_test.py INCA-AM INCA-SWITCH INCA-CLI PATH-TO-inca_am.proto"""
import os
import queue
import re
import signal
import stat
import subprocess
import sys
import threading

import amtest
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'switch'))
import ncraw  # noqa: E402  (inca-switch's raw NETCONF helper)
from amtest import ADMIN, ADMIN_TOKEN, free_port, next_event, wait_file

AM, SW, CLI, PROTO = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
grpc, pb, pbg, tmp = amtest.grpc_stubs(PROTO, "inca-am-keys-")
check = amtest.Checker()


def netconf(sock_path, op):
    """One raw NETCONF 1.0 session over the switch's UNIX socket: the reply text of op."""
    return ncraw.rpc(sock_path, op, timeout=5)


GET_CONFIG = "<get-config><source><running/></source></get-config>"
GET = "<get/>"


def tree_leaf(xml, tree_id, leaf):
    """Text of leaf `leaf` of tree `tree_id` in a get/get-config reply ('' if absent)."""
    for m in re.finditer(r"<tree>(.*?)</tree>", xml, re.S):
        body = m.group(1)
        if re.search(r"^\s*<id>%d</id>" % tree_id, body):
            v = re.search(r"<%s>([^<]*)</%s>" % (leaf, leaf), body)
            return v.group(1) if v else ""
    return None


SWITCHES = {
    "spine0": "listen = 127.0.6.10:4791\nrole = spine\nlink = p1 peer leaf0\nlink = p2 peer leaf1\n",
    "leaf0": "listen = 127.0.6.11:4791\nrole = leaf\nlink = up0 peer spine0\n"
             "link = d1 peer kh0 peer_addr 127.0.6.21\nlink = d2 peer kh1 peer_addr 127.0.6.22\n",
    "leaf1": "listen = 127.0.6.12:4791\nrole = leaf\nlink = up0 peer spine0\n"
             "link = d1 peer kh2 peer_addr 127.0.6.23\nlink = d2 peer kh3 peer_addr 127.0.6.24\n",
}
procs = {}
am = None
log_path = os.path.join(tmp, "am.log")
journal = os.path.join(tmp, "am.journal")
N = 4
try:
    amtest.start_switches(SW, tmp, SWITCHES, procs)
    port = free_port()
    am_conf = os.path.join(tmp, "am.conf")
    with open(am_conf, "w") as f:
        f.write("listen = 127.0.0.1:%d\nheartbeat_ms = 200\nheartbeat_misses = 10\n"
                "poll_ms = 60000\ngrace_ms = 20000\njob jobK credential kcred\n"
                # plaintext on purpose: the warning about keys in clear is checked
                "tls = off\nadmin_token = %s\n" % (port, ADMIN_TOKEN))
        f.write(amtest.switch_lines(tmp, SWITCHES))
    am_ready = os.path.join(tmp, "am.ready")

    def start_am():
        p = subprocess.Popen([AM, "-c", am_conf, "-j", journal, "--ready-file", am_ready, "-v"],
                             stderr=open(log_path, "a"))
        wait_file(am_ready, p, "inca-am")
        return p

    am = start_am()
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    stub = pbg.AmStub(ch)

    joins = [stub.Join(pb.JoinRequest(job_id="jobK", job_credential="kcred", rank=r, size=N,
                                      data_addr="127.0.6.%d:5000" % (21 + r),
                                      host_name="kh%d" % r, caps=pb.Capabilities(inc=True)),
                       timeout=5) for r in range(N)]
    gid = joins[0].group_id
    events = [queue.Queue() for _ in range(N)]

    def open_sessions():
        stop = threading.Event()

        for r in range(N):
            amtest.open_session(grpc, pb, stub, gid, r, joins[r].member_token, stop, events[r])
        return stop

    def tree_switches(g):
        return [t.switch_name for t in g.tree]

    def check_switches(names, tree_id, key, key_id, what):
        """Every named switch runs tree_id with auth enabled and key_id; no reply has the key."""
        hexkey = key.hex()
        for n in names:
            sock = os.path.join(tmp, n + ".sock")
            cfg = netconf(sock, GET_CONFIG)
            full = netconf(sock, GET)
            filt = netconf(sock, '<get-config><source><running/></source><filter type="subtree">'
                           '<inca-switch xmlns="urn:inca:yang:inca-switch"><trees><tree>'
                           '<id>%d</id><auth-key/></tree></trees></inca-switch></filter>'
                           '</get-config>' % tree_id)
            check(tree_leaf(cfg, tree_id, "auth") == "enabled" and
                  tree_leaf(cfg, tree_id, "auth-key-id") == str(key_id),
                  "%s: %s runs tree %d with auth enabled, key id %d" % (what, n, tree_id, key_id))
            check(all(hexkey not in x.lower() and hexkey.upper() not in x and
                      "auth-key>" not in x for x in (cfg, full, filt)),
                  "%s: %s never returns the key (get-config, get, filtered get-config)" % (what, n))

    def check_listings(key, what):
        raw = b"".join(m.SerializeToString() for m in (
            stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN),
            stub.ListTrees(pb.Empty(), timeout=5, metadata=ADMIN),
            stub.ListSwitches(pb.Empty(), timeout=5, metadata=ADMIN),
            stub.ListLinks(pb.Empty(), timeout=5, metadata=ADMIN),
            stub.GetStats(pb.Empty(), timeout=5, metadata=ADMIN)))
        check(key not in raw and key.hex().encode() not in raw,
              "%s: no listing carries the key" % what)
        out = ""
        for sub in ("status", "groups", "switches", "stats"):
            r = subprocess.run([CLI, "--am", "127.0.0.1:%d" % port, "--insecure",
                                "--admin-token", ADMIN_TOKEN, sub], capture_output=True,
                               text=True, timeout=10)
            out += r.stdout + r.stderr
        check(key.hex() not in out.lower(), "%s: `inca status` does not show the key" % what)
        return out

    # ---- establishment: members and switches hold the same key and id
    stop = open_sessions()
    evs = [next_event(events[r], [pb.GroupEvent.TREE_READY, pb.GroupEvent.HOST_FALLBACK])
           for r in range(N)]
    if not check(all(e is not None and e.kind == pb.GroupEvent.TREE_READY for e in evs),
                 "TREE_READY everywhere"):
        raise SystemExit
    key1, id1 = evs[0].tree.auth_key, evs[0].tree.auth_key_id
    check(len(key1) == 32 and id1 != 0 and key1 != bytes(32),
          "TreeInfo: a 32-byte key and a nonzero key id (%d)" % id1)
    check(all(e.tree.auth_key == key1 and e.tree.auth_key_id == id1 for e in evs),
          "every member got the same key and id")
    g = stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN).groups[0]
    tid1 = g.tree_id
    check(g.auth_key_id == id1, "ListGroups shows the key id")
    check(sorted(tree_switches(g)) == ["leaf0", "leaf1", "spine0"], "tree on spine0, leaf0, leaf1")
    check_switches(tree_switches(g), tid1, key1, id1, "generation 1")
    out = check_listings(key1, "generation 1")
    check("auth key id %d" % id1 in out, "`inca status` shows the key id")

    # ---- the journal: 0600, holds the key for a restart
    mode = stat.S_IMODE(os.stat(journal).st_mode)
    check(mode == 0o600, "journal mode %o" % mode)
    check(key1.hex() in open(journal).read(), "the journal keeps the key")

    # ---- AM restart: the running group keeps its key
    stop.set()
    am.send_signal(signal.SIGTERM)
    am.wait(timeout=10)
    if os.path.exists(am_ready):
        os.unlink(am_ready)
    am = start_am()
    # A channel per AM process: the old one may still hold the dead connection, and its first
    # call would fail on it (broken pipe) instead of reconnecting.
    ch.close()
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    stub = pbg.AmStub(ch)
    check(stub.GetStats(pb.Empty(), timeout=5, wait_for_ready=True,
                        metadata=ADMIN).recovered_groups == 1,
          "group recovered")
    for q in events:
        while not q.empty():
            q.get()
    stop = open_sessions()
    evs = [next_event(events[r], [pb.GroupEvent.TREE_READY, pb.GroupEvent.REBUILT,
                          pb.GroupEvent.DISMANTLED, pb.GroupEvent.HOST_FALLBACK])
           for r in range(N)]
    check(all(e is not None and e.kind in (pb.GroupEvent.TREE_READY, pb.GroupEvent.REBUILT) and
              e.tree.tree_id == tid1 and e.tree.generation == 1 and
              e.tree.auth_key == key1 and e.tree.auth_key_id == id1 for e in evs),
          "after the restart every member gets the same tree, key and id")
    check_switches(tree_switches(g), tid1, key1, id1, "after the restart")
    mode = stat.S_IMODE(os.stat(journal).st_mode)
    check(mode == 0o600, "journal mode after the restart's compaction %o" % mode)

    # ---- rebuild: a new key and a new id, everywhere
    rp = stub.ReportFailure(pb.FailureReport(group_id=gid, rank=0,
                                             member_token=joins[0].member_token, generation=1,
                                             reason="test rebuild"), timeout=10)
    check(rp.acted and rp.generation == 2, "report -> generation 2")
    evs = [next_event(events[r], [pb.GroupEvent.REBUILT]) for r in range(N)]
    if check(all(e is not None for e in evs), "REBUILT everywhere"):
        key2, id2 = evs[0].tree.auth_key, evs[0].tree.auth_key_id
        check(len(key2) == 32 and id2 != 0 and key2 != key1 and id2 != id1,
              "the rebuilt tree has a new key and a new id (%d -> %d)" % (id1, id2))
        check(all(e.tree.auth_key == key2 and e.tree.auth_key_id == id2 for e in evs),
              "every member got the new key and id")
        g = stub.ListGroups(pb.Empty(), timeout=5, metadata=ADMIN).groups[0]
        check(g.auth_key_id == id2 and g.generation == 2, "ListGroups shows the new key id")
        check_switches(tree_switches(g), g.tree_id, key2, id2, "generation 2")
        check_listings(key2, "generation 2")
        krec = [ln.split() for ln in open(journal).read().splitlines()
                if ln.startswith("K %d " % gid)]
        # K GROUP KEY-ID KEY CRC
        check(krec and krec[-1][2:4] == [str(id2), key2.hex()],
              "the journal's latest K record holds the new key and id")

    for r in range(N):
        stub.Leave(pb.LeaveRequest(group_id=gid, rank=r, member_token=joins[r].member_token),
                   timeout=5)
    stop.set()
    ch.close()
finally:
    amtest.stop(am, procs.values())
    log = open(log_path).read() if os.path.exists(log_path) else ""
    check("group keys of data-plane authentication cross the network in clear" in log,
          "the AM warns that keys cross the network in clear without TLS")
    check(not re.search(r"[0-9a-f]{64}", log), "no key in the AM's log")
    if check.failures:
        sys.stderr.write(log)
print("%d failure(s)" % check.failures)
sys.exit(1 if check.failures else 0)
