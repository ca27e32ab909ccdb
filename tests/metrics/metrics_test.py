#!/usr/bin/python3
"""The /metrics endpoints of inca-switch and inca-am (--metrics-listen), against the real
daemons on loopback.

  switch       2 libinca ranks (python bindings) run INC AllReduces through a 2-thread switch,
               junk datagrams are dropped; the exposition passes the strict reader
               (prom_check.py) and python3-prometheus-client's parser, and every counter of the
               JSON statistics (and of the NETCONF state, when built) has a metric of the same
               value; HTTP: 404 for other paths and methods, 431 for an oversized request.
  switch-idle  clients that connect and send nothing, or half a request, or more connections
               than the server keeps, delay neither another client's scrape nor the data plane;
               the idle connection is closed after the request timeout.
  am           inca-am with one switch up (NETCONF, when built) and one down: joins, a denied
               join, an unknown method; every GetStats field has a metric of the same value,
               groups by state, switches up/down, RPCs by method and status code.
  am-idle      as switch-idle against inca-am: scrapes and gRPC calls stay prompt.

Usage: metrics_test.py CASE INCA-SWITCH INCA-AM|none INCA_AM.PROTO|none NETCONF(yes|no)"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'daemons', 'switch'))
import ncraw  # noqa: E402  (inca-switch's raw NETCONF helper)
import time
import traceback
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prom_check  # noqa: E402
from inca.launch import free_port, free_ports  # noqa: E402  (PYTHONPATH: python/)

CASE, SW, AM, PROTO, NETCONF = sys.argv[1:6]
FAILS = []
TMP = tempfile.mkdtemp(prefix="inca-metrics-")
PROCS = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILS.append(what)
    return cond


def skip(why):
    print("SKIP:", why)
    cleanup()
    sys.exit(77)


def cleanup():
    for p in PROCS:
        if p.poll() is None:
            p.kill()
            p.wait()
    shutil.rmtree(TMP, ignore_errors=True)


def start(argv, ready, what, log):
    """Start a daemon with its stderr in log; wait for the ready file."""
    err = open(log, "w")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    PROCS.append(p)
    t0 = time.monotonic()
    while not os.path.exists(ready):
        if p.poll() is not None or time.monotonic() - t0 > 20:
            print(open(log).read())
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.02)
    return p


def metrics_addr(log, prog):
    """The address the daemon logged for port 0."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10:
        m = re.search(prog + r": metrics on http://([0-9.]+:[0-9]+)/metrics", open(log).read())
        if m:
            return m.group(1)
        time.sleep(0.02)
    raise RuntimeError(f"{prog} did not log its metrics address")


def http(addr, path="/metrics", method="GET", timeout=10):
    """(status, content type, body) of one request."""
    req = urllib.request.Request(f"http://{addr}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def raw(addr, data, timeout=5):
    """Send raw bytes, read the whole answer (the server closes)."""
    host, port = addr.split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                return out
            out += d


def scrape(addr):
    """Fetch and check one exposition: both parsers; returns the strict reader's samples."""
    st, ctype, text = http(addr)
    check(st == 200, f"GET /metrics: 200 (got {st})")
    check(ctype == "text/plain; version=0.0.4; charset=utf-8", f"content type {ctype}")
    try:
        fams, samples = prom_check.parse(text)
    except prom_check.PromError as e:
        check(False, f"strict exposition reader: {e}")
        return {}, text
    check(True, f"strict exposition reader: {len(fams)} families, {len(samples)} series")
    for name, f in fams.items():
        if not f["help"]:
            check(False, f"{name} has a HELP text")
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        print("note: python3-prometheus-client missing, its parser not run")
        return samples, text
    n, theirs = 0, {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            n += 1
            theirs[(s.name, frozenset(s.labels.items()))] = s.value
    check(n == len(samples) and theirs == samples,
          f"prometheus_client parser reads the same {n} series")
    return samples, text


def metric(samples, base, **labels):
    """A counter (base_total) or gauge (base) series; None if neither exists."""
    v = prom_check.get(samples, base + "_total", **labels)
    return v if v is not None else prom_check.get(samples, base, **labels)


def compare(what, want, got):
    if got != want:
        check(False, f"{what}: metric {got} == JSON {want}")
        return 1
    return 0


# ---------------------------------------------------------------- the switch

class Switch:
    def __init__(self, threads=2, netconf=False):
        ports = free_ports(3)
        self.port = ports[0]
        self.addr = f"127.0.0.1:{self.port}"
        self.members = [f"127.0.0.1:{p}" for p in ports[1:]]
        self.key = os.urandom(32)
        self.stats = os.path.join(TMP, "sw.json")
        self.log = os.path.join(TMP, "sw.log")
        self.nc = os.path.join(TMP, "sw.sock") if netconf else None
        ready = os.path.join(TMP, "sw.ready")
        tree = (f"id=7,key=0x5eed0001,slots=64,members=1@{self.members[0]}+2@{self.members[1]},"
                f"auth_key={self.key.hex()},auth_key_id=3")
        argv = [SW, "--listen", self.addr, "--threads", str(threads), "--tree", tree,
                "--stats-file", self.stats, "--stats-interval-ms", "0", "--ready-file", ready,
                "--metrics-listen", "127.0.0.1:0"]
        if self.nc:
            argv += ["--netconf-unix", self.nc]
        self.proc = start(argv, ready, "inca-switch", self.log)
        self.maddr = metrics_addr(self.log, "inca-switch")

    def json(self):
        before = os.path.getmtime(self.stats) if os.path.exists(self.stats) else 0
        self.proc.send_signal(signal.SIGUSR1)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5:
            if os.path.exists(self.stats) and os.path.getmtime(self.stats) != before:
                break
            time.sleep(0.02)
        with open(self.stats) as f:
            return json.load(f)


def traffic(sw, calls=20, n_elems=3000):
    """Two libinca ranks (threads of this process) doing INC AllReduces; True if all exact."""
    import numpy as np
    import inca
    boot = f"127.0.0.1:{free_port(socket.SOCK_STREAM)}"
    ok = [False, False]

    def rank(r):
        try:
            with inca.Comm(r, 2, boot, switch_addr=sw.addr, data_addr=sw.members[r], tree_id=7,
                           key=0x5EED0001, auth_key=sw.key, auth_key_id=3,
                           timeout_ms=20000) as c:
                good = True
                for i in range(calls):
                    a = np.arange(n_elems, dtype=np.int32) * (r + 1) + i
                    c.allreduce(a, "sum", algo="inc")
                    good &= bool(np.array_equal(a, np.arange(n_elems, dtype=np.int32) * 3 + 2 * i))
                ok[r] = good
        except BaseException:
            traceback.print_exc()

    ts = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return all(ok)


def junk(sw, n=3):
    """Datagrams too short to decode, from a non-member address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        for i in range(n):
            s.sendto(b"\x2b" * (5 + i), ("127.0.0.1", sw.port))
    time.sleep(0.3)


def switch_json_vs_metrics(j, samples):
    """Every number of the statistics JSON against its metric; returns the mismatches."""
    bad = 0
    skip_keys = {"version", "time_unix_ms", "uptime_ms", "pid", "drops_total"}
    for k, v in j.items():
        if k in skip_keys or isinstance(v, bool) or not isinstance(v, int):
            continue
        got = metric(samples, "inca_switch_" + k)
        bad += compare(k, v, got)
    bad += compare("drops_total (sum of reasons)", j["drops_total"],
                   sum(v for (n, _), v in samples.items() if n == "inca_switch_drops_total"))
    for reason, v in j["drops"].items():
        bad += compare(f"drops {reason}", v,
                       prom_check.get(samples, "inca_switch_drops_total", reason=reason))
    for verdict, v in j["verdicts"].items():
        bad += compare(f"verdict {verdict}", v,
                       prom_check.get(samples, "inca_switch_verdicts_total", verdict=verdict))
    for t in j["per_thread"]:
        for k, v in t.items():
            if k != "thread":
                bad += compare(f"thread {t['thread']} {k}", v,
                               metric(samples, "inca_switch_thread_" + k, thread=t["thread"]))
    for t in j["trees"]:
        tid = t["id"]
        info = prom_check.get(samples, "inca_switch_tree_info", tree=tid, role=t["role"],
                              qpn=t["qpn"], pkey=t["pkey"],
                              auth="true" if t["auth"] else "false",
                              auth_key_id=t["auth_key_id"])
        bad += compare(f"tree {tid} info", 1, info)
        for k, v in t.items():
            if k in ("id", "qpn", "role", "auth", "auth_key_id", "pkey", "drops", "qps"):
                continue
            bad += compare(f"tree {tid} {k}", v, metric(samples, "inca_switch_tree_" + k,
                                                         tree=tid))
        for reason, v in t["drops"].items():
            bad += compare(f"tree {tid} drop {reason}", v,
                           prom_check.get(samples, "inca_switch_tree_drops_total", tree=tid,
                                          reason=reason))
        for q in t["qps"]:
            lab = dict(tree=tid, kind=q["kind"], bfr_id=q["bfr_id"], addr=q["addr"],
                       qpn=q["qpn"])
            for k, v in q.items():
                if k in lab:
                    continue
                bad += compare(f"tree {tid} qp {q['addr']} {k}", v,
                               metric(samples, "inca_switch_qp_" + k, **lab))
    return bad


def netconf_get(path):
    """The reply to <get/> over the switch's NETCONF UNIX socket (NETCONF 1.0 framing)."""
    return ncraw.rpc(path, "<get/>")


def netconf_vs_metrics(xml, samples):
    """The NETCONF statistics leaves against the metrics."""
    bad = 0
    sw_part = xml.split("<inca-switch", 1)[-1]
    st = re.search(r"<statistics>(.*)</statistics>", sw_part, re.S)
    if not check(st is not None, "NETCONF get has the switch statistics"):
        return 1
    body = st.group(1)
    top = body.split("<tree>")[0]
    drop_re = r"<drop><reason>([^<]+)</reason><count>(\d+)</count></drop>"
    leaves = {k: int(v) for k, v in re.findall(r"<([a-z-]+)>(\d+)</\1>", top.split("<drop>")[0])}
    for k in ("rx-pkts", "rx-bytes", "tx-pkts", "tx-bytes"):
        bad += compare(f"NETCONF {k}", leaves.get(k), metric(samples,
                                                             "inca_switch_" + k.replace("-", "_")))
    drops = re.findall(drop_re, top)
    check(len(drops) == sum(1 for n, _ in samples if n == "inca_switch_drops_total"),
          f"NETCONF lists every drop reason ({len(drops)})")
    for reason, cnt in drops:
        bad += compare(f"NETCONF drop {reason}", int(cnt),
                       prom_check.get(samples, "inca_switch_drops_total", reason=reason))
    trees = re.findall(r"<tree>(.*?)</tree>", body, re.S)
    check(len(trees) == 1, "NETCONF statistics: one tree")
    for tb in trees:
        tid = re.search(r"<id>(\d+)</id>", tb).group(1)
        own = tb.split("<qp>")[0]
        for k, v in re.findall(r"<([a-z-]+)>(\d+)</\1>", own.split("<drop>")[0]):
            if k == "id":
                continue
            if k == "drops":
                got = sum(v2 for (n, lab), v2 in samples.items()
                          if n == "inca_switch_tree_drops_total" and ("tree", tid) in lab)
            else:
                got = metric(samples, "inca_switch_tree_" + k.replace("-", "_"), tree=tid)
            bad += compare(f"NETCONF tree {tid} {k}", int(v), got)
        for reason, cnt in re.findall(drop_re, own):
            bad += compare(f"NETCONF tree {tid} drop {reason}", int(cnt),
                           prom_check.get(samples, "inca_switch_tree_drops_total", tree=tid,
                                          reason=reason))
        for qb in re.findall(r"<qp>(.*?)</qp>", tb, re.S):
            addr = re.search(r"<address>([^<]+)</address>", qb).group(1)
            for k, v in re.findall(r"<([a-z-]+)>(\d+)</\1>", qb):
                if k in ("bfr-id", "qpn"):
                    continue
                got = [val for (n, lab), val in samples.items()
                       if n == "inca_switch_qp_" + k.replace("-", "_") + "_total"
                       and ("addr", addr) in lab and ("tree", tid) in lab]
                bad += compare(f"NETCONF tree {tid} qp {addr} {k}", int(v),
                               got[0] if len(got) == 1 else None)
    return bad


def http_rules(addr, prefix):
    st, _, _ = http(addr, "/")
    check(st == 404, f"GET / answered 404 (got {st})")
    st, _, _ = http(addr, "/metrics/x")
    check(st == 404, f"GET /metrics/x answered 404 (got {st})")
    st, _, _ = http(addr, "/metrics", method="POST")
    check(st == 404, f"POST /metrics answered 404 (got {st})")
    st, _, body = http(addr, "/metrics?name[]=x")
    check(st == 200 and prefix in body, "GET /metrics?query served")
    r = raw(addr, b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 6000 + b"\r\n\r\n")
    check(r.startswith(b"HTTP/1.1 431 "), f"oversized request answered 431 ({r[:40]!r})")
    r = raw(addr, b"nonsense\r\n\r\n")
    check(r.startswith(b"HTTP/1.1 400 "), f"malformed request answered 400 ({r[:40]!r})")


def case_switch():
    try:
        import numpy  # noqa: F401
        import inca  # noqa: F401
    except ImportError as e:
        skip(f"python bindings need numpy: {e}")
    sw = Switch(netconf=NETCONF == "yes")
    check(traffic(sw), "2 ranks: 20 INC AllReduces through the switch, exact")
    junk(sw)
    samples, text = scrape(sw.maddr)
    j = sw.json()
    samples2, _ = scrape(sw.maddr)  # the JSON snapshot lies between two equal scrapes
    for k in list(samples2):
        if k[0] in ("inca_switch_uptime_seconds", "inca_switch_metrics_requests_total"):
            samples2.pop(k)
            samples.pop(k, None)
    check(samples == samples2, "no traffic: two scrapes agree")
    check(metric(samples, "inca_switch_tree_aggregations", tree=7) > 0, "aggregations counted")
    check(metric(samples, "inca_switch_drops", reason="truncated") == 3,
          "3 junk datagrams under reason=\"truncated\"")
    for r in ("auth", "auth_missing", "auth_key_id", "auth_ctx", "unknown_sender"):
        check(metric(samples, "inca_switch_drops", reason=r) == 0, f"reason {r} present (0)")
    check(metric(samples, "inca_switch_gso_workers") is not None and
          metric(samples, "inca_switch_tx_gso_sends") is not None and
          metric(samples, "inca_switch_rx_coalesced") is not None, "GSO/GRO metrics present")
    check(prom_check.get(samples, "inca_switch_tree_slots", tree=7) == 64, "tree slots gauge")
    bad = switch_json_vs_metrics(j, samples)
    check(bad == 0, "every number of the statistics JSON equals its metric")
    if sw.nc:
        bad = netconf_vs_metrics(netconf_get(sw.nc), samples)
        check(bad == 0, "every NETCONF statistics leaf equals its metric")
    http_rules(sw.maddr, "inca_switch_")
    sw.proc.terminate()
    check(sw.proc.wait(10) == 0, "SIGTERM: exit 0")


# ---------------------------------------------------------------- idle clients

def idle_checks(maddr, prefix, busy_work, busy_what):
    """Idle and slow clients must not delay a scrape or the daemon's own work."""
    host, port = maddr.split(":")
    idle = socket.create_connection((host, int(port)))
    half = socket.create_connection((host, int(port)))
    half.sendall(b"GET /metr")
    time.sleep(0.2)
    t0 = time.monotonic()
    st, _, body = http(maddr, timeout=10)
    dt = time.monotonic() - t0
    check(st == 200 and prefix in body and dt < 2.0,
          f"scrape with an idle and a half-sent client open: {dt:.3f} s")
    t0 = time.monotonic()
    ok = busy_work()
    check(ok, f"{busy_what} while they stay open ({time.monotonic() - t0:.2f} s)")
    # more connections than the server keeps: the oldest are closed, a new scrape is served
    many = [socket.create_connection((host, int(port))) for _ in range(40)]
    time.sleep(0.3)
    t0 = time.monotonic()
    st, _, text = http(maddr, timeout=10)
    dt = time.monotonic() - t0
    check(st == 200 and dt < 2.0, f"scrape with 40 more idle connections open: {dt:.3f} s")
    _, samples = prom_check.parse(text)
    ev = prom_check.get(samples, prefix + "metrics_requests_total", result="evicted")
    check(ev is not None and ev >= 24, f"idle connections evicted to make room ({ev})")
    for s in many:
        s.close()
    # a fresh idle client is closed by the server after the request timeout (5 s)
    late = socket.create_connection((host, int(port)))
    late.settimeout(9)
    t0 = time.monotonic()
    try:
        d = late.recv(100)
    except (socket.timeout, ConnectionResetError):
        d = None
    dt = time.monotonic() - t0
    check(d == b"" and 4 <= dt < 8, f"idle client closed by the server after {dt:.1f} s")
    st, _, text = http(maddr)
    _, samples = prom_check.parse(text)
    to = prom_check.get(samples, prefix + "metrics_requests_total", result="timeout")
    check(to is not None and to >= 1, f"request timeouts counted ({to})")
    for s in (idle, half, late):
        s.close()


def case_switch_idle():
    try:
        import numpy  # noqa: F401
        import inca  # noqa: F401
    except ImportError as e:
        skip(f"python bindings need numpy: {e}")
    sw = Switch(threads=1)
    idle_checks(sw.maddr, "inca_switch_", lambda: traffic(sw, calls=10),
                "10 INC AllReduces through the switch")
    sw.proc.terminate()
    check(sw.proc.wait(10) == 0, "SIGTERM: exit 0")


# ---------------------------------------------------------------- the AM

def grpc_stubs():
    try:
        import grpc
        from grpc_tools import protoc
    except ImportError:
        skip("python3-grpcio / python3-grpc-tools not installed")
    if AM == "none" or PROTO == "none":
        skip("inca-am not built (no gRPC)")
    if protoc.main(["protoc", "-I" + os.path.dirname(PROTO), "--python_out=" + TMP,
                    "--grpc_python_out=" + TMP, PROTO]) != 0:
        raise RuntimeError("grpc_tools.protoc failed")
    sys.path.insert(0, TMP)
    import inca_am_pb2 as pb
    import inca_am_pb2_grpc as pbg
    return grpc, pb, pbg


class Am:
    def __init__(self, with_switch):
        self.grpc, self.pb, pbg = grpc_stubs()
        self.port = free_port(socket.SOCK_STREAM)
        conf = os.path.join(TMP, "am.conf")
        # gRPC in clear (TLS is not the subject here); queries need the admin token
        lines = [f"listen = 127.0.0.1:{self.port}", "heartbeat_ms = 5000", "poll_ms = 200",
                 "tls = off", "admin_token = metrics-admin", "job jobA credential s3cret"]
        self.md = (("inca-admin-token", "metrics-admin"),)
        self.sw = None
        if with_switch:
            ncsock = os.path.join(TMP, "amsw.sock")
            ready = os.path.join(TMP, "amsw.ready")
            start([SW, "--listen", f"127.0.0.1:{free_port()}", "--netconf-unix", ncsock,
                   "--ready-file", ready], ready, "inca-switch", os.path.join(TMP, "amsw.log"))
            lines += [f"switch sw0 unix:{ncsock}", "attach h0 sw0", "attach h1 sw0"]
            self.sw = "sw0"
        lines.append(f"switch gone unix:{os.path.join(TMP, 'nothing-here.sock')}")
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        ready = os.path.join(TMP, "am.ready")
        self.log = os.path.join(TMP, "am.log")
        self.proc = start([AM, "-c", conf, "--ready-file", ready,
                           "--metrics-listen", "127.0.0.1:0"], ready, "inca-am", self.log)
        self.maddr = metrics_addr(self.log, "inca-am")
        self.ch = self.grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = pbg.AmStub(self.ch)

    def join(self, rank, cred="s3cret"):
        pb = self.pb
        return self.stub.Join(pb.JoinRequest(
            job_id="jobA", job_credential=cred, rank=rank, size=2,
            data_addr=f"127.0.0.1:{free_port()}", host_name=f"h{rank}",
            caps=pb.Capabilities(inc=True)), timeout=10)


def case_am():
    am = Am(with_switch=NETCONF == "yes")
    grpc, pb = am.grpc, am.pb
    try:
        am.join(0, cred="wrong")
        check(False, "wrong credential denied")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.PERMISSION_DENIED, "wrong credential denied")
    r0 = am.join(0)
    am.join(1)
    try:
        am.ch.unary_unary("/inca.am.v1.Am/NoSuchMethod")(b"", timeout=5)
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNIMPLEMENTED, "unknown method: UNIMPLEMENTED")
    # wait for the group's verdict (a tree on sw0, or the host path without NETCONF)
    t0 = time.monotonic()
    state = ""
    while time.monotonic() - t0 < 15:
        gs = am.stub.ListGroups(pb.Empty(), timeout=5, metadata=am.md).groups
        state = gs[0].state if gs else ""
        if state in ("ready", "fallback"):
            break
        time.sleep(0.1)
    check(state == ("ready" if am.sw else "fallback"),
          f"group state {state} ({gs[0].reason if gs else 'no group'})")
    time.sleep(0.5)  # a switch poll after the push
    samples, _ = scrape(am.maddr)
    stats = am.stub.GetStats(pb.Empty(), timeout=5, metadata=am.md)
    bad = 0
    for f in pb.StatsReply.DESCRIPTOR.fields:
        want = getattr(stats, f.name)
        if f.name == "uptime_ms":
            got = prom_check.get(samples, "inca_am_uptime_seconds")
            check(got is not None and abs(got * 1000 - want) < 5000,
                  f"uptime_seconds {got} ~ uptime_ms {want}")
            continue
        bad += compare(f"GetStats {f.name}", want, metric(samples, "inca_am_" + f.name))
    check(bad == 0, f"every GetStats field ({len(pb.StatsReply.DESCRIPTOR.fields)}) equals "
                    "its metric")
    check(stats.joins == 2 and stats.joins_denied == 1 and stats.rpc_unimplemented == 1,
          "joins 2, denied 1, unimplemented 1")
    by_state = {s: prom_check.get(samples, "inca_am_groups", state=s)
                for s in ("forming", "ready", "fallback", "dismantled")}
    check(sum(by_state.values()) == stats.active_groups == 1 and by_state[state] == 1,
          f"groups by state {by_state}")
    up = prom_check.get(samples, "inca_am_switches", state="up")
    down = prom_check.get(samples, "inca_am_switches", state="down")
    check((up, down) == ((1, 1) if am.sw else (0, 1)), f"switches up {up} down {down}")
    check(prom_check.get(samples, "inca_am_switch_up", switch="gone") == 0, "switch gone: down")
    if am.sw:
        check(prom_check.get(samples, "inca_am_switch_up", switch="sw0") == 1, "sw0 up")
        check(prom_check.get(samples, "inca_am_switch_am_trees", switch="sw0") == 1,
              "sw0 holds the group's tree")
    rp = lambda m, c: prom_check.get(samples, "inca_am_rpcs_total", method=m, code=c)  # noqa
    check(rp("Join", "OK") == 2 and rp("Join", "PERMISSION_DENIED") == 1,
          f"rpcs_total Join OK {rp('Join', 'OK')}, PERMISSION_DENIED "
          f"{rp('Join', 'PERMISSION_DENIED')}")
    check(rp("other", "UNIMPLEMENTED") == 1, "rpcs_total unknown method counted as other")
    check(rp("ListGroups", "OK") >= 1, "rpcs_total ListGroups")
    check(r0.group_id > 0, "group id")
    http_rules(am.maddr, "inca_am_")
    am.proc.terminate()
    check(am.proc.wait(15) == 0, "SIGTERM: exit 0")


def case_am_idle():
    am = Am(with_switch=False)

    def grpc_calls():
        t0 = time.monotonic()
        for _ in range(20):
            am.stub.GetStats(am.pb.Empty(), timeout=5, metadata=am.md)
        return time.monotonic() - t0 < 3.0

    idle_checks(am.maddr, "inca_am_", grpc_calls, "20 GetStats calls within 3 s")
    am.proc.terminate()
    check(am.proc.wait(15) == 0, "SIGTERM: exit 0")


def main():
    prom_check.self_test()
    cases = {"switch": case_switch, "switch-idle": case_switch_idle, "am": case_am,
             "am-idle": case_am_idle}
    try:
        cases[CASE]()
    except Exception:
        traceback.print_exc()
        FAILS.append("exception")
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.terminate()
        for log in ("sw.log", "am.log"):
            path = os.path.join(TMP, log)
            if FAILS and os.path.exists(path):
                print(f"--- {log}\n" + open(path).read()[-3000:])
        cleanup()
    print("FAILED:" if FAILS else "PASS", len(FAILS) or "")
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
