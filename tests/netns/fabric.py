#!/usr/bin/python3
"""tests/netns/fabric.py: a leaf-spine fabric built from Linux network namespaces.

A fabric description (INI, see docs/fabric.md) becomes host, leaf and
spine namespaces joined by veth links (MTU 9000, tbf rate limit on both ends, optional
nftables random loss), IPv4 routing from 198.18.0.0/15 only, and the real daemons inside the
switch namespaces. Two modes:
  am          (default) inca-switch with a NETCONF server on a UNIX socket and no tree, its
              name, role and links in its config; inca-am in the spine namespace, listening on
              the spine's address; the ranks join through the AM, which builds the tree
  standalone  inca-switch with generated multi-level trees (leaves: role leaf, parent =
              spine; spine: role root, one child line per leaf); no AM
A plan file per job then tells `inca-demo --fabric PLAN` where each rank lives. Everything is
torn down at exit; namespaces left behind by a killed run are found by their prefix and removed.

Used as a library by tests/netns/test_fabric.py and tools/fabric_demo.sh, and as a command:
  fabric.py show SPEC                 address plan and switch configs (no root needed)
  fabric.py run SPEC [opts] -- ARGS   build, start switches, inca-demo --fabric PLAN ARGS, tear down
  fabric.py up SPEC [opts]            build and leave it running (prints the plan path)
  fabric.py status WORKDIR [ARGS]     `inca status` (or ARGS) against the fabric's AM
  fabric.py restart WORKDIR           fresh switches for the next job on an 'up' fabric
  fabric.py down PREFIX | --all       tear a fabric down
  fabric.py clean                     remove namespaces of runs whose process is gone
"""

import argparse
import atexit
import configparser
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

PREFIX_BASE = "incaf"  # every namespace of every run starts with this
PREFIX_RE = re.compile(r"^%s(\d+)x[0-9a-f]+-" % PREFIX_BASE)
SPINE_SVC = "198.19.255.%d"  # spine service address (on lo)
NFT_TABLE = "incaloss"
AM_PORT = 50051


class FabricError(Exception):
    pass


def log(msg):
    print("# fabric: " + msg, file=sys.stderr, flush=True)


def parse_rate(s):
    """'1gbit', '500mbit', '100m', '2.5g', '800kbit' -> bits per second."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmg]?)(bit|bps|b)?\s*", s.lower())
    if not m:
        raise FabricError("bad rate '%s' (e.g. 1gbit, 500mbit)" % s)
    mult = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    v = float(m.group(1)) * mult
    if v < 1e5:
        raise FabricError("rate '%s' below 100 kbit/s" % s)
    return int(v)


def fmt_rate(bps):
    for unit, div in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bps >= div and bps % div == 0:
            return "%d%s" % (bps // div, unit)
    return "%dbit" % bps


def as_root():
    return os.geteuid() == 0


def netns_available():
    """True if we can create and delete a network namespace (root, iproute2, kernel)."""
    if not as_root() or shutil.which("ip") is None:
        return False
    name = "%s%dx%s-probe" % (PREFIX_BASE, os.getpid(), secrets.token_hex(2))
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True)
    if r.returncode != 0:
        return False
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return True


def sh(argv, check=True, input_text=None, capture=True):
    r = subprocess.run(argv, input=input_text, text=True,
                       capture_output=capture)
    if check and r.returncode != 0:
        raise FabricError("%s: exit %d: %s" % (" ".join(argv), r.returncode,
                                               (r.stderr or "").strip()))
    return r


def list_netns():
    r = sh(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def kill_netns_procs(ns, grace_s=3.0):
    """SIGTERM every process in ns, then SIGKILL what is left after grace_s."""
    def pids():
        r = sh(["ip", "netns", "pids", ns], check=False)
        return [int(p) for p in r.stdout.split() if p.isdigit()]
    ps = pids()
    for p in ps:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.time() + grace_s
    while ps and time.time() < deadline:
        time.sleep(0.05)
        ps = pids()
    for p in ps:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def delete_prefix(prefix):
    """Remove every namespace whose name starts with prefix (and its processes)."""
    gone = []
    for ns in list_netns():
        if ns.startswith(prefix):
            kill_netns_procs(ns, grace_s=1.0)
            sh(["ip", "netns", "del", ns], check=False)
            gone.append(ns)
    return gone


def cleanup_stale():
    """Delete namespaces of earlier runs whose owning process no longer exists."""
    gone = []
    for ns in list_netns():
        m = PREFIX_RE.match(ns)
        if m and not os.path.exists("/proc/%s" % m.group(1)):
            kill_netns_procs(ns, grace_s=1.0)
            sh(["ip", "netns", "del", ns], check=False)
            gone.append(ns)
    if gone:
        log("removed %d stale namespaces: %s" % (len(gone), " ".join(gone)))
    return gone


class Spec:
    """The fabric description. Keys of [fabric] and [switch]; see docs/fabric.md."""

    def __init__(self):
        self.name = "fabric"
        self.leaves = 2
        self.hosts_per_leaf = 2
        self.spines = 1
        self.rate = parse_rate("1gbit")
        self.host_rate = None
        self.uplink_rate = None
        self.mtu = 9000
        self.queue_ms = 20.0
        self.burst_bytes = 0  # 0: max(2 MTU, 1 ms at the link rate)
        self.loss = {}  # link name ('h3', 'leaf1', 'all') -> per-mille
        self.sw_threads = 1
        self.tree_id = 1
        self.key = 0x5EED0001
        self.slots = 32  # window per client: see docs/fabric.md ("slots")
        self.bsl = 64
        self.check_icrc = True
        self.deterministic = False
        self.drop_rate = 0.0  # inca-switch --drop-rate (all switches)
        self.busy_poll_us = None  # inca-switch --busy-poll-us (None: the switch's default)
        # control plane: "am" (inca-am builds the trees) or "standalone" (generated trees)
        self.mode = "am"
        self.jobs = 1  # concurrent jobs for 'run' (AM mode): job k = hosts k, k+jobs, ...
        self.heartbeat_ms = 500
        self.heartbeat_misses = 4
        self.poll_ms = 500

    @staticmethod
    def parse_loss(text):
        out = {}
        for item in re.split(r"[,\s]+", text.strip()):
            if not item:
                continue
            m = re.fullmatch(r"([a-z0-9]+):(\d+)", item)
            if not m or int(m.group(2)) > 1000:
                raise FabricError("bad loss item '%s' (LINK:PERMILLE, e.g. leaf1:30)" % item)
            out[m.group(1)] = int(m.group(2))
        return out

    @classmethod
    def load(cls, path):
        cp = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
        if not cp.read(path):
            raise FabricError("cannot read %s" % path)
        s = cls()
        s.name = os.path.splitext(os.path.basename(path))[0]
        s.apply(dict(cp["fabric"]) if cp.has_section("fabric") else {},
                dict(cp["switch"]) if cp.has_section("switch") else {},
                dict(cp["am"]) if cp.has_section("am") else {})
        for sec in cp.sections():
            if sec not in ("fabric", "switch", "am"):
                raise FabricError("%s: unknown section [%s]" % (path, sec))
        return s

    def apply(self, fab, sw, am=None):
        fab = dict(fab)
        sw = dict(sw)
        am = dict(am or {})

        def take(d, k, conv, cur):
            return conv(d.pop(k)) if k in d else cur
        self.name = take(fab, "name", str, self.name)
        self.leaves = take(fab, "leaves", int, self.leaves)
        self.hosts_per_leaf = take(fab, "hosts_per_leaf", int, self.hosts_per_leaf)
        self.spines = take(fab, "spines", int, self.spines)
        self.rate = take(fab, "rate", parse_rate, self.rate)
        self.host_rate = take(fab, "host_rate", parse_rate, self.host_rate)
        self.uplink_rate = take(fab, "uplink_rate", parse_rate, self.uplink_rate)
        self.mtu = take(fab, "mtu", int, self.mtu)
        self.queue_ms = take(fab, "queue_ms", float, self.queue_ms)
        self.burst_bytes = take(fab, "burst_bytes", int, self.burst_bytes)
        if "loss" in fab:
            self.loss = self.parse_loss(fab.pop("loss"))
        yn = {"yes": True, "no": False, "true": True, "false": False, "1": True, "0": False}
        self.sw_threads = take(sw, "threads", int, self.sw_threads)
        self.tree_id = take(sw, "tree", lambda v: int(v, 0), self.tree_id)
        self.key = take(sw, "key", lambda v: int(v, 0), self.key)
        self.slots = take(sw, "slots", int, self.slots)
        self.bsl = take(sw, "bsl", int, self.bsl)
        self.check_icrc = take(sw, "check_icrc", lambda v: yn[v.lower()], self.check_icrc)
        self.deterministic = take(sw, "deterministic", lambda v: yn[v.lower()],
                                  self.deterministic)
        self.drop_rate = take(sw, "drop_rate", float, self.drop_rate)
        self.busy_poll_us = take(sw, "busy_poll_us", int, self.busy_poll_us)
        self.mode = take(am, "mode", lambda v: v.strip().lower(), self.mode)
        self.jobs = take(am, "jobs", int, self.jobs)
        self.heartbeat_ms = take(am, "heartbeat_ms", int, self.heartbeat_ms)
        self.heartbeat_misses = take(am, "heartbeat_misses", int, self.heartbeat_misses)
        self.poll_ms = take(am, "poll_ms", int, self.poll_ms)
        if fab or sw or am:
            raise FabricError("unknown keys: %s" % ", ".join(list(fab) + list(sw) + list(am)))
        self.validate()
        return self

    def validate(self):
        if not 1 <= self.leaves <= 100:
            raise FabricError("leaves must be 1..100")
        if not 1 <= self.hosts_per_leaf <= 200:
            raise FabricError("hosts_per_leaf must be 1..200")
        if self.spines not in (0, 1):
            raise FabricError("spines must be 0 or 1 (the spine is the tree's root)")
        if self.spines == 0 and self.leaves != 1:
            raise FabricError("without a spine there must be exactly one leaf")
        n = self.leaves * self.hosts_per_leaf
        if n > 64 or n > self.bsl:
            raise FabricError("at most 64 hosts (and no more than bsl) in one fabric")
        if self.mode not in ("am", "standalone"):
            raise FabricError("[am] mode must be am or standalone")
        if not 1 <= self.jobs <= n:
            raise FabricError("[am] jobs must be 1..%d (one host per rank)" % n)
        if self.jobs > 1 and self.mode != "am":
            raise FabricError("concurrent jobs need mode = am (a standalone tree serves one job)")
        if not 1280 <= self.mtu <= 65535:
            raise FabricError("mtu must be 1280..65535")
        names = {"all"} | {"h%d" % r for r in range(n)} | \
                {"leaf%d" % (i + 1) for i in range(self.leaves)}
        for k in self.loss:
            if k not in names:
                raise FabricError("loss: unknown link '%s' (hN, leafN or all)" % k)

    def describe(self):
        hr = fmt_rate(self.host_rate or self.rate)
        ur = fmt_rate(self.uplink_rate or self.rate)
        d = "%d leaves x %d hosts + %d spine, host links %s, uplinks %s, mtu %d" % (
            self.leaves, self.hosts_per_leaf, self.spines, hr, ur, self.mtu)
        if self.loss:
            d += ", loss " + ",".join("%s:%d/1000" % kv for kv in sorted(self.loss.items()))
        d += ", trees from inca-am" if self.mode == "am" else ", standalone switches"
        if self.jobs > 1:
            d += ", %d jobs" % self.jobs
        return d


class Fabric:
    """Namespaces, links, routes and switch daemons for one Spec. Use as a context manager
    (or call up()/down()); down() runs at interpreter exit and on SIGTERM/SIGINT/SIGHUP."""

    def __init__(self, spec, switch_bin=None, workdir=None, prefix=None, am_bin=None,
                 cli_bin=None):
        self.spec = spec
        self.prefix = prefix or "%s%dx%s-" % (PREFIX_BASE, os.getpid(), secrets.token_hex(2))
        self.switch_bin = switch_bin
        self.am_bin = am_bin  # inca-am (AM mode)
        self.cli_bin = cli_bin  # the `inca` CLI (AM mode status view)
        self.am_proc = None
        self.am_argv = None
        self.own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="inca-fabric-")
        self.procs = {}  # switch name -> Popen
        self.argv = {}  # switch name -> command line
        self.is_up = False
        self.plan_path = os.path.join(self.workdir, "plan.txt")
        self._build_plan()

    # ---- address plan (pure) ----------------------------------------------------------------
    def _build_plan(self):
        s = self.spec
        p = self.prefix
        self.hosts, self.leaves, self.spines = [], [], []
        for li in range(1, s.leaves + 1):
            leaf = {"name": "leaf%d" % li, "ns": p + "leaf%d" % li, "index": li,
                    "svc": "198.18.%d.1" % li, "hosts": [], "role": "leaf"}
            if s.spines == 0:
                leaf["role"] = "root"
            self.leaves.append(leaf)
            for h in range(s.hosts_per_leaf):
                r = (li - 1) * s.hosts_per_leaf + h
                host = {"rank": r, "name": "h%d" % r, "ns": p + "h%d" % r, "leaf": leaf,
                        "ip": "198.18.%d.%d" % (li, 10 + h), "bfr": r + 1,
                        "port": "h%d" % h}
                leaf["hosts"].append(host)
                self.hosts.append(host)
            if s.spines:
                # the leaf-spine link is a /31 out of 198.19.0.0/24
                leaf["up_ip"] = "198.19.0.%d" % (2 * li - 1)
                leaf["spine_ip"] = "198.19.0.%d" % (2 * li - 2)
        for si in range(1, s.spines + 1):
            self.spines.append({"name": "spine%d" % si, "ns": p + "spine%d" % si,
                                "svc": SPINE_SVC % si, "role": "root"})
        self.switches = self.leaves + self.spines
        # AM mode: inca-am runs in the spine namespace (the leaf's without a spine) and listens
        # on that switch's service address, which every host reaches through the fabric.
        am_sw = self.spines[0] if self.spines else self.leaves[0]
        self.am_ns = am_sw["ns"]
        self.am_addr = "%s:%d" % (am_sw["svc"], AM_PORT)
        self.am_conf = os.path.join(self.workdir, "am.conf")
        self.am_journal = os.path.join(self.workdir, "am.journal")
        # gRPC over TLS (a CA of this fabric, a certificate for the AM's address) and an admin
        # token for the operator's `inca status`; the ranks get the CA through their plan.
        self.am_ca = os.path.join(self.workdir, "am-ca.pem")
        self.am_cert = os.path.join(self.workdir, "am.crt")
        self.am_key = os.path.join(self.workdir, "am.key")
        self.am_admin = secrets.token_hex(16)
        # jobs: job k holds hosts k, k + jobs, k + 2 jobs, ... (every job spans the leaves)
        self.jobs = []
        for k in range(s.jobs):
            hosts = self.hosts[k::s.jobs]
            self.jobs.append({"id": "fabric" if s.jobs == 1 else "fabric-j%d" % (k + 1),
                              "cred": secrets.token_hex(16), "hosts": hosts,
                              "plan": os.path.join(self.workdir, "plan.txt" if k == 0 else
                                                   "plan-j%d.txt" % (k + 1))})

    def namespaces(self):
        return [h["ns"] for h in self.hosts] + [x["ns"] for x in self.switches]

    def link_loss(self, link):
        return self.spec.loss.get(link, self.spec.loss.get("all", 0))

    def netconf_sock(self, sw):
        return os.path.join(self.workdir, sw["name"] + ".sock")

    def am_switch_config(self, sw):
        """AM mode: no tree; name, role and links so that the AM learns the topology (which
        leaf every host is attached to, which spine reaches every leaf) over NETCONF."""
        s = self.spec
        lines = ["# generated by tests/netns/fabric.py for %s (%s): trees come from inca-am"
                 % (self.prefix, s.name),
                 "name = %s" % sw["name"],
                 "role = %s" % ("spine" if sw in self.spines else "leaf"),
                 "listen = %s:4791" % sw["svc"],
                 "threads = %d" % s.sw_threads,
                 "check_icrc = %s" % ("yes" if s.check_icrc else "no"),
                 "stats_file = %s" % self.stats_path(sw),
                 "stats_interval_ms = 1000",
                 "mgmt_addr = unix:%s" % self.netconf_sock(sw)]
        hrate = s.host_rate or s.rate
        urate = s.uplink_rate or s.rate
        if sw in self.leaves:
            for h in sw["hosts"]:
                lines.append("link = %s peer %s peer_addr %s speed %d" % (
                    h["port"], h["name"], h["ip"], hrate))
            if self.spines:
                sp = self.spines[0]
                lines.append("link = up0 peer %s peer_addr %s:4791 speed %d" % (
                    sp["name"], sp["svc"], urate))
        else:
            for leaf in self.leaves:
                lines.append("link = l%d peer %s peer_addr %s:4791 speed %d" % (
                    leaf["index"], leaf["name"], leaf["svc"], urate))
        return "\n".join(lines) + "\n"

    def am_config(self):
        s = self.spec
        lines = ["# generated by tests/netns/fabric.py for %s (%s)" % (self.prefix, s.name),
                 "listen = %s" % self.am_addr,
                 "heartbeat_ms = %d" % s.heartbeat_ms,
                 "heartbeat_misses = %d" % s.heartbeat_misses,
                 "poll_ms = %d" % s.poll_ms,
                 "grace_ms = 10000",
                 "slots = %d" % s.slots,
                 "slots_min = %d" % min(16, s.slots),
                 "tls_cert = %s" % self.am_cert,
                 "tls_key = %s" % self.am_key,
                 "admin_token = %s" % self.am_admin]
        for sw in self.switches:
            lines.append("switch %s unix:%s role=%s" % (
                sw["name"], self.netconf_sock(sw), "spine" if sw in self.spines else "leaf"))
        for j in self.jobs:
            lines.append("job %s credential %s" % (j["id"], j["cred"]))
        return "\n".join(lines) + "\n"

    def switch_config(self, sw):
        s = self.spec
        if s.mode == "am":
            return self.am_switch_config(sw)
        lines = ["# generated by tests/netns/fabric.py for %s (%s)" % (self.prefix, s.name),
                 "listen = %s:4791" % sw["svc"],
                 "threads = %d" % s.sw_threads,
                 "check_icrc = %s" % ("yes" if s.check_icrc else "no"),
                 "stats_file = %s" % self.stats_path(sw),
                 "stats_interval_ms = 1000",
                 "",
                 "tree %d {" % s.tree_id,
                 "  key = 0x%x" % s.key,
                 "  slots = %d" % s.slots,
                 "  bsl = %d" % s.bsl,
                 "  deterministic = %s" % ("yes" if s.deterministic else "no")]
        if sw in self.leaves:
            if sw["role"] == "leaf":
                lines += ["  role = leaf", "  bfr_id = 0",
                          "  parent = %s:4791" % self.spines[0]["svc"]]
            else:
                lines += ["  role = root"]
            for h in sw["hosts"]:
                lines.append("  member = %d %s:4791" % (h["bfr"], h["ip"]))
        else:
            lines.append("  role = root")
            for leaf in self.leaves:
                b = [h["bfr"] for h in leaf["hosts"]]
                lines.append("  child = %s:4791 bfr %d-%d" % (leaf["svc"], b[0], b[-1]))
        lines.append("}")
        return "\n".join(lines) + "\n"

    def conf_path(self, sw):
        return os.path.join(self.workdir, sw["name"] + ".conf")

    def stats_path(self, sw):
        return os.path.join(self.workdir, sw["name"] + ".stats.json")

    def plan_text(self, job=None):
        s = self.spec
        if s.mode == "am":
            job = job or self.jobs[0]
            hosts = job["hosts"]
        else:
            hosts = self.hosts
        out = ["# inca fabric plan written by tests/netns/fabric.py",
               "name %s" % self.prefix.rstrip("-"),
               "desc %s: %s" % (s.name, s.describe()),
               "bootstrap %s" % hosts[0]["ip"],
               "tree %d key 0x%x slots %d bsl %d" % (s.tree_id, s.key, s.slots, s.bsl)]
        if s.mode == "am":
            out.append("am %s job %s credential %s ca %s%s" % (
                self.am_addr, job["id"], job["cred"], self.am_ca,
                " cli %s" % self.cli_bin if self.cli_bin else ""))
            for r, h in enumerate(hosts):
                out.append("rank %d netns %s ip %s host %s" % (r, h["ns"], h["ip"], h["name"]))
        else:
            for h in hosts:
                out.append("rank %d netns %s ip %s switch %s:4791 bfr %d" % (
                    h["rank"], h["ns"], h["ip"], h["leaf"]["svc"], h["bfr"]))
        for sw in self.switches:
            pr = self.procs.get(sw["name"])
            role = sw["role"] if s.mode != "am" else ("spine" if sw in self.spines else "leaf")
            out.append("switch %s role %s netns %s listen %s:4791 pid %d stats %s" % (
                sw["name"], role, sw["ns"], sw["svc"], pr.pid if pr else 0,
                self.stats_path(sw)))
        return "\n".join(out) + "\n"

    def plan_paths(self):
        return [j["plan"] for j in self.jobs] if self.spec.mode == "am" else [self.plan_path]

    def show(self):
        s = self.spec
        print("fabric %s: %s" % (s.name, s.describe()))
        print("namespace prefix %s" % self.prefix)
        for sw in self.switches:
            extra = ""
            if "up_ip" in sw:
                extra = ", uplink %s/31 <-> spine %s" % (sw["up_ip"], sw["spine_ip"])
            print("  %-7s %-5s ns %-22s service %s:4791%s" % (sw["name"], sw["role"], sw["ns"],
                                                               sw["svc"], extra))
        for h in self.hosts:
            print("  %-7s rank %-2d ns %-22s ip %-14s -> %s port %s, BFR-id %d" % (
                h["name"], h["rank"], h["ns"], h["ip"], h["leaf"]["name"], h["port"], h["bfr"]))
        for sw in self.switches:
            print("\n--- %s ---" % self.conf_path(sw))
            sys.stdout.write(self.switch_config(sw))
        if s.mode == "am":
            print("\n--- %s (inca-am in %s) ---" % (self.am_conf, self.am_ns))
            sys.stdout.write(self.am_config())
            for j in self.jobs:
                print("\n--- %s ---" % j["plan"])
                sys.stdout.write(self.plan_text(j))

    # ---- building ---------------------------------------------------------------------------
    def _ip(self, ns, *args):
        sh(["ip", "-n", ns] + list(args))

    def _sysctl(self, ns, key, val):
        sh(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "%s=%s" % (key, val)])

    def _tbf(self, ns, dev, rate):
        s = self.spec
        rate_Bps = rate / 8.0
        burst = s.burst_bytes or max(2 * (s.mtu + 64), int(rate_Bps * 0.001))
        limit = max(int(rate_Bps * s.queue_ms / 1000.0), 4 * burst)
        sh(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
            "%dbit" % rate, "burst", str(burst), "limit", str(limit)])

    def _veth(self, ns_a, dev_a, ns_b, dev_b, rate, link):
        s = self.spec
        sh(["ip", "link", "add", dev_a, "netns", ns_a, "mtu", str(s.mtu), "type", "veth",
            "peer", "name", dev_b, "netns", ns_b, "mtu", str(s.mtu)])
        for ns, dev in ((ns_a, dev_a), (ns_b, dev_b)):
            self._ip(ns, "link", "set", dev, "up")
            self._tbf(ns, dev, rate)
        permille = self.link_loss(link)
        if permille:
            self.loss_links.append((ns_a, dev_a, permille))
            self.loss_links.append((ns_b, dev_b, permille))

    def _nft_loss(self):
        by_ns = {}
        for ns, dev, permille in self.loss_links:
            by_ns.setdefault(ns, []).append((dev, permille))
        for ns, items in by_ns.items():
            # Drop on the receiving end of the link (prerouting, by ingress interface): a loss
            # on the wire, which the sender cannot see. Dropping in the sender's output path
            # instead would make its sendmsg() fail with EPERM.
            rules = "\n".join('    iifname "%s" numgen random mod 1000 < %d counter drop' % it
                              for it in items)
            text = ("table inet %s {\n  chain lossy_links {\n"
                    "    type filter hook prerouting priority -300; policy accept;\n%s\n"
                    "  }\n}\n" % (NFT_TABLE, rules))
            sh(["ip", "netns", "exec", ns, "nft", "-f", "-"], input_text=text)

    def up(self):
        if not as_root():
            raise FabricError("building a fabric needs root")
        cleanup_stale()
        self._install_cleanup()
        self.is_up = True
        s = self.spec
        self.loss_links = []
        for ns in self.namespaces():
            sh(["ip", "netns", "add", ns])
            self._ip(ns, "link", "set", "lo", "up")
            self._sysctl(ns, "net.ipv4.conf.all.rp_filter", 0)
            self._sysctl(ns, "net.ipv4.conf.default.rp_filter", 0)
        for sw in self.switches:
            self._sysctl(sw["ns"], "net.ipv4.ip_forward", 1)
            self._ip(sw["ns"], "addr", "add", sw["svc"] + "/32", "dev", "lo")
            # inca-switch asks for 32 MiB socket buffers; let it have them
            self._sysctl(sw["ns"], "net.core.rmem_max", 33554432)
            self._sysctl(sw["ns"], "net.core.wmem_max", 33554432)
        hrate = s.host_rate or s.rate
        urate = s.uplink_rate or s.rate
        for h in self.hosts:
            leaf = h["leaf"]
            self._veth(h["ns"], "eth0", leaf["ns"], h["port"], hrate, h["name"])
            self._ip(h["ns"], "addr", "add", h["ip"] + "/32", "dev", "eth0")
            # routed access port: the leaf's service address is the gateway (the leaf answers
            # ARP for it on every port); no shared subnet, no bridge
            self._ip(h["ns"], "route", "add", leaf["svc"] + "/32", "dev", "eth0", "scope", "link")
            self._ip(h["ns"], "route", "add", "default", "via", leaf["svc"], "dev", "eth0",
                     "src", h["ip"])
            self._ip(leaf["ns"], "route", "add", h["ip"] + "/32", "dev", h["port"], "src",
                     leaf["svc"])
        for leaf in self.leaves:
            if not s.spines:
                continue
            spine = self.spines[0]
            sdev = "l%d" % leaf["index"]
            self._veth(leaf["ns"], "up0", spine["ns"], sdev, urate, leaf["name"])
            self._ip(leaf["ns"], "addr", "add", leaf["up_ip"] + "/31", "dev", "up0")
            self._ip(spine["ns"], "addr", "add", leaf["spine_ip"] + "/31", "dev", sdev)
            self._ip(leaf["ns"], "route", "add", "default", "via", leaf["spine_ip"], "dev", "up0",
                     "src", leaf["svc"])
            self._ip(spine["ns"], "route", "add", "198.18.%d.0/24" % leaf["index"], "via",
                     leaf["up_ip"], "dev", sdev, "src", spine["svc"])
        if self.loss_links:
            self._nft_loss()
        return self

    # ---- daemons ------------------------------------------------------------------------------
    def start_switches(self, extra_args=None, timeout_s=10.0):
        if not self.switch_bin:
            raise FabricError("no inca-switch binary given")
        s = self.spec
        for sw in self.switches:
            with open(self.conf_path(sw), "w") as f:
                f.write(self.switch_config(sw))
            ready = os.path.join(self.workdir, sw["name"] + ".ready")
            if os.path.exists(self.stats_path(sw)):
                os.unlink(self.stats_path(sw))
            argv = ["ip", "netns", "exec", sw["ns"], self.switch_bin, "-c", self.conf_path(sw),
                    "--ready-file", ready]
            if s.mode == "am":
                argv += ["--netconf-unix", self.netconf_sock(sw)]
            if s.drop_rate > 0:
                argv += ["--drop-rate", str(s.drop_rate), "--seed", str(len(self.procs) + 7)]
            if s.busy_poll_us is not None:
                argv += ["--busy-poll-us", str(s.busy_poll_us)]
            argv += list(extra_args or [])
            self.argv[sw["name"]] = argv
            logf = open(os.path.join(self.workdir, sw["name"] + ".log"), "w")
            # `ip netns exec` execs the daemon: the Popen pid is the switch's pid
            self.procs[sw["name"]] = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                                                      start_new_session=True)
            logf.close()
            deadline = time.time() + timeout_s
            while not os.path.exists(ready):
                if self.procs[sw["name"]].poll() is not None or time.time() > deadline:
                    raise FabricError("%s did not start:\n%s" % (sw["name"],
                                                                 self.switch_log(sw["name"])))
                time.sleep(0.01)
        if s.mode == "am":
            self.start_am()
            for j in self.jobs:
                with open(j["plan"], "w") as f:
                    f.write(self.plan_text(j))
        else:
            with open(self.plan_path, "w") as f:
                f.write(self.plan_text())
        with open(os.path.join(self.workdir, "fabric.json"), "w") as f:
            json.dump({"prefix": self.prefix, "plan": self.plan_text(), "argv": self.argv,
                       "pids": {n: p.pid for n, p in self.procs.items()},
                       "mode": s.mode, "am_addr": self.am_addr, "am_ns": self.am_ns,
                       "cli": self.cli_bin, "host_ns": self.hosts[0]["ns"],
                       "am_ca": self.am_ca, "am_admin": self.am_admin,
                       "plans": self.plan_paths()}, f, indent=1)
        return self.plan_path

    # ---- the Aggregation Manager (AM mode) ----------------------------------------------------
    def start_am(self, timeout_s=10.0):
        """Start inca-am in its namespace (config and journal in the workdir). A restart (after
        stop_am or kill_am) replays the journal and adopts the running groups."""
        if not self.am_bin:
            raise FabricError("no inca-am binary given")
        self.make_am_certs()
        with open(self.am_conf, "w") as f:
            f.write(self.am_config())
        ready = os.path.join(self.workdir, "am.ready")
        if os.path.exists(ready):
            os.unlink(ready)
        self.am_argv = ["ip", "netns", "exec", self.am_ns, self.am_bin, "-c", self.am_conf,
                        "-j", self.am_journal, "--ready-file", ready, "-v"]
        logf = open(os.path.join(self.workdir, "am.log"), "a")
        self.am_proc = subprocess.Popen(self.am_argv, stdout=logf, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        logf.close()
        deadline = time.time() + timeout_s
        while not os.path.exists(ready):
            if self.am_proc.poll() is not None or time.time() > deadline:
                raise FabricError("inca-am did not start:\n%s" % self.switch_log("am"))
            time.sleep(0.01)

    def make_am_certs(self):
        """A CA and a certificate for the AM's service address (IP SAN), made once by openssl."""
        if os.path.exists(self.am_cert):
            return
        ip = self.am_addr.rsplit(":", 1)[0]
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        ext = os.path.join(self.workdir, "am-ext.cnf")
        with open(ext, "w") as f:
            f.write("subjectAltName = IP:%s\n" % ip)
        ca_key = os.path.join(self.workdir, "am-ca.key")
        csr = os.path.join(self.workdir, "am.csr")
        try:
            for argv in (["req", "-x509"] + ec + ["-keyout", ca_key, "-out", self.am_ca,
                                                 "-days", "7", "-subj", "/CN=INCA fabric CA"],
                         ["req"] + ec + ["-keyout", self.am_key, "-out", csr,
                                         "-subj", "/CN=%s" % ip],
                         ["x509", "-req", "-in", csr, "-CA", self.am_ca, "-CAkey", ca_key,
                          "-CAcreateserial", "-days", "7", "-extfile", ext,
                          "-out", self.am_cert]):
                sh(["openssl"] + argv)
        except (OSError, FabricError) as e:
            raise FabricError("openssl could not make the AM's certificate (the AM serves TLS "
                              "only): %s" % e)

    def stop_am(self, sig=signal.SIGTERM, timeout_s=10.0):
        """Stop inca-am (SIGTERM leaves every tree on the switches; SIGKILL is a crash).
        Returns its exit status or None if it was not running."""
        p, self.am_proc = self.am_proc, None
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(sig)
        try:
            return p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            return p.wait()

    def inca_cli(self, *args, ns=None, timeout_s=30):
        """Run the `inca` CLI against the AM from a host namespace (it reaches the AM through
        the fabric like the ranks do). Returns the CompletedProcess."""
        if not self.cli_bin:
            raise FabricError("no inca CLI binary given")
        return sh(["ip", "netns", "exec", ns or self.hosts[0]["ns"], self.cli_bin, "--am",
                   self.am_addr, "--ca", self.am_ca, "--admin-token", self.am_admin] +
                  list(args), check=False)

    def switch_stats_now(self, timeout_s=3.0):
        """Fresh statistics of every running switch (SIGUSR1, then a stats file written after
        the signal): {name: stats dict or None}."""
        t_sig = time.time() * 1000.0
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGUSR1)
        out = {}
        deadline = time.time() + timeout_s
        while True:
            for sw in self.switches:
                if out.get(sw["name"]):
                    continue
                try:
                    with open(self.stats_path(sw)) as f:
                        st = json.load(f)
                    out[sw["name"]] = st if st.get("time_unix_ms", 0) + 1 >= t_sig else None
                except (OSError, ValueError):
                    out[sw["name"]] = None
            if all(out.values()) or time.time() > deadline:
                return out
            time.sleep(0.02)

    def switch_trees(self):
        """{switch name: [tree ids it runs now]} (None for a switch without fresh stats)."""
        return {n: (None if st is None else [t["id"] for t in st.get("trees", [])])
                for n, st in self.switch_stats_now().items()}

    def wait_trees_gone(self, timeout_s=10.0):
        """Wait until no switch runs any tree. Returns (True, seconds) or (False, last view)."""
        t0 = time.time()
        while True:
            trees = self.switch_trees()
            if all(v == [] for v in trees.values()):
                return True, time.time() - t0
            if time.time() - t0 > timeout_s:
                return False, trees
            time.sleep(0.05)

    def switch_log(self, name):
        try:
            with open(os.path.join(self.workdir, name + ".log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop_switches(self, timeout_s=10.0):
        """SIGTERM the AM (if any) and every switch; returns {name: (exit status, final stats
        dict or None)}. The AM's exit status is kept in self.am_exit."""
        self.am_exit = self.stop_am(timeout_s=timeout_s)
        out = {}
        for name, p in list(self.procs.items()):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in list(self.procs.items()):
            try:
                rc = p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
            sw = next(x for x in self.switches if x["name"] == name)
            st = None
            try:
                with open(self.stats_path(sw)) as f:
                    st = json.load(f)
            except (OSError, ValueError):
                pass
            out[name] = (rc, st)
        self.procs = {}
        return out

    def loss_counters(self):
        """Packets dropped by the nftables loss rules, summed over every namespace."""
        total = 0
        for ns in {ns for ns, _, _ in getattr(self, "loss_links", [])}:
            r = sh(["ip", "netns", "exec", ns, "nft", "list", "table", "inet", NFT_TABLE],
                   check=False)
            total += sum(int(x) for x in re.findall(r"counter packets (\d+)", r.stdout))
        return total

    def snmp(self, ns):
        """The Ip: counters of /proc/net/snmp inside ns as a dict."""
        r = sh(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"])
        lines = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("Ip:")]
        return dict(zip(lines[0][1:], (int(x) for x in lines[1][1:])))

    def fragment_counters(self):
        """{ns: (FragCreates, ReasmReqds, FragFails)} for every namespace with any non-zero."""
        out = {}
        for ns in self.namespaces():
            c = self.snmp(ns)
            v = (c.get("FragCreates", 0), c.get("ReasmReqds", 0), c.get("FragFails", 0))
            if any(v):
                out[ns] = v
        return out

    def df_probe(self):
        """Send one UDP datagram of exactly MTU bytes (IP) with DF from the first host to the
        last one (crossing leaf, spine, leaf) and check it arrives whole; one byte more must
        be refused at the sender (EMSGSIZE), not fragmented. Returns an error string or None."""
        src, dst = self.hosts[0], self.hosts[-1]
        payload = self.spec.mtu - 28
        rx = subprocess.Popen(
            ["ip", "netns", "exec", dst["ns"], sys.executable, "-c",
             "import socket,sys\n"
             "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
             "s.bind(('%s',9999));s.settimeout(5)\n"
             "print('ready',flush=True)\n"
             "d=s.recv(70000);print(len(d),flush=True)\n" % dst["ip"]],
            stdout=subprocess.PIPE, text=True)
        try:
            if rx.stdout.readline().strip() != "ready":
                return "DF probe receiver did not start"
            tx = sh(["ip", "netns", "exec", src["ns"], sys.executable, "-c",
                     "import socket,errno\n"
                     "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                     "s.setsockopt(socket.IPPROTO_IP,10,2)\n"  # IP_MTU_DISCOVER = IP_PMTUDISC_DO
                     "s.bind(('%s',0))\n"
                     "try:\n s.sendto(b'x'*%d,('%s',9999));print('big-sent')\n"
                     "except OSError as e:\n print('big-refused' if e.errno==errno.EMSGSIZE "
                     "else 'big-error')\n"
                     "s.sendto(b'x'*%d,('%s',9999));print('sent')\n"
                     % (src["ip"], payload + 1, dst["ip"], payload, dst["ip"])])
            got = rx.stdout.readline().strip()
            rx.wait(timeout=6)
        finally:
            if rx.poll() is None:
                rx.kill()
                rx.wait()
        if "big-refused" not in tx.stdout:
            return "a %d-byte DF datagram was not refused: %s" % (payload + 1 + 28,
                                                                 tx.stdout.strip())
        if got != str(payload):
            return "the %d-byte DF datagram arrived as %r" % (payload + 28, got)
        return None

    # ---- teardown -------------------------------------------------------------------------
    def _install_cleanup(self):
        atexit.register(self.down)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            try:
                signal.signal(sig, _exit_on_signal)
            except ValueError:
                pass  # not the main thread

    def down(self):
        if not self.is_up:
            return
        self.is_up = False
        self.stop_am(timeout_s=5)
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = {}
        delete_prefix(self.prefix)
        if self.own_workdir and not os.environ.get("INCA_KEEP_TMP"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False


def _exit_on_signal(signum, frame):
    # turn the signal into SystemExit so finally blocks and atexit run the teardown
    raise SystemExit(128 + signum)


def find_binary(name, build_dir):
    cands = []
    if build_dir:
        cands.append(os.path.join(build_dir, {"inca-switch": "daemons/switch",
                                              "inca-am": "daemons/am",
                                              "inca": "daemons/am",
                                              "inca-demo": "tools",
                                              "inca-fabric-demo": "tools"}[name], name))
    cands.append(shutil.which(name) or "")
    for c in cands:
        if c and os.access(c, os.X_OK):
            return os.path.abspath(c)
    raise FabricError("%s not found (build it, or pass --build DIR)" % name)


def switch_report(results):
    """Lines describing the switches' final statistics."""
    lines = []
    for name, (rc, st) in results.items():
        if not st:
            lines.append("%s: exit %s, no statistics" % (name, rc))
            continue
        t = st["trees"][0] if st.get("trees") else {}
        if not st.get("trees"):
            lines.append("%-7s exit %s: rx %d tx %d pkts, no tree left, drops %d" % (
                name, rc, st.get("rx_pkts", 0), st.get("tx_pkts", 0), st.get("drops_total", 0)))
        else:
            lines.append("%-7s exit %s: rx %d tx %d pkts, aggregations %d, results down %d, "
                     "duplicates %d, re-sent %d, drops %d" % (
                         name, rc, st.get("rx_pkts", 0), st.get("tx_pkts", 0),
                         t.get("aggregations", 0), t.get("results_down", 0),
                         t.get("duplicates", 0), t.get("results_resent", 0),
                         st.get("drops_total", 0)))
        why = ", ".join("%s %d" % kv for kv in sorted(st.get("drops", {}).items()) if kv[1])
        if why:
            lines[-1] += " (%s)" % why
    return lines


def run_jobs(fab, demo_bin, demo_args, timeout_s, stream=True):
    """Run inca-fabric-demo once per job plan, all at once. With one job and stream=True its
    output goes straight to ours; otherwise each job's output is printed after it finished.
    Returns [(plan, CompletedProcess-like with returncode, stdout, stderr)]."""
    plans = fab.plan_paths()
    if len(plans) == 1 and stream:
        r = subprocess.run([demo_bin, "--fabric", plans[0]] + demo_args, timeout=timeout_s)
        return [(plans[0], r)]
    procs = [(pl, subprocess.Popen([demo_bin, "--fabric", pl] + demo_args, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True))
             for pl in plans]
    out = []
    deadline = time.time() + timeout_s
    try:
        for pl, p in procs:
            o, e = p.communicate(timeout=max(1, deadline - time.time()))
            out.append((pl, subprocess.CompletedProcess(p.args, p.returncode, o, e)))
    finally:
        for _, p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return out


def cmd_run(args, spec):
    build = args.build
    switch_bin = args.switch or find_binary("inca-switch", build)
    demo_bin = args.demo or find_binary("inca-fabric-demo", build)
    am_bin = cli_bin = None
    if spec.mode == "am":
        am_bin = find_binary("inca-am", build)
        cli_bin = find_binary("inca", build)
    fab = Fabric(spec, switch_bin=switch_bin, am_bin=am_bin, cli_bin=cli_bin)
    rc = 1
    try:
        fab.up()
        log("%s: %d namespaces up (prefix %s)" % (spec.describe(), len(fab.namespaces()),
                                                 fab.prefix))
        err = fab.df_probe()
        if err:
            raise FabricError("DF check failed: " + err)
        log("DF check: %d-byte datagram crossed leaf-spine-leaf whole; %d bytes refused "
            "(EMSGSIZE), not fragmented" % (spec.mtu, spec.mtu + 1))
        fab.start_switches()
        if spec.mode == "am":
            log("inca-am on %s (namespace %s), switches over NETCONF (UNIX sockets), %d job(s)"
                % (fab.am_addr, fab.am_ns, len(fab.jobs)))
        t0 = time.time()
        # The hosts' link rate, for the demo's "INC/link" column (payload algbw / link rate).
        link = ["--link-rate", str(int(spec.host_rate or spec.rate))]
        runs = run_jobs(fab, demo_bin, link + args.demo_args, args.timeout)
        rc = 0
        for pl, r in runs:
            if len(runs) > 1:
                print("#\n# ===== job %s (%s) =====" % (os.path.basename(pl), "exit %d" %
                                                      r.returncode))
                sys.stdout.write(r.stdout)
                sys.stderr.write((r.stderr or "")[-4000:])
            rc = rc or r.returncode
        if spec.mode == "am":
            # every job left: the AM dismantles the groups and the switches free their slots
            ok, v = fab.wait_trees_gone(timeout_s=10)
            if ok:
                print("# after the job(s): every group dismantled, no switch holds a tree or "
                      "a slot (%.2f s)" % v)
            else:
                print("# ERROR: switches still hold trees after the job(s): %s" % v)
                rc = rc or 1
            st = fab.inca_cli("status")
            print("# inca --am %s status (after the job(s)):" % fab.am_addr)
            sys.stdout.write(st.stdout)
            if st.returncode:
                print("# ERROR: inca status exit %d: %s" % (st.returncode, st.stderr.strip()))
                rc = rc or 1
        results = fab.stop_switches()
        print("#")
        if spec.mode == "am":
            print("# final inca-am exit %s" % fab.am_exit)
            if fab.am_exit != 0:
                print("# ERROR: inca-am exited %s (see its log)" % fab.am_exit)
                rc = rc or 1
        for line in switch_report(results):
            print("# final " + line)
        bad_exit = [n for n, (c, _) in results.items() if c != 0]
        if bad_exit:
            print("# ERROR: switches exited non-zero: %s" % " ".join(bad_exit))
            rc = rc or 1
        frag = fab.fragment_counters()
        if frag:
            print("# ERROR: IP fragmentation seen (FragCreates, ReasmReqds, FragFails): %s" %
                  frag)
            rc = rc or 1
        else:
            print("# no IP fragments created or reassembled in any namespace (DF respected)")
        if spec.loss:
            print("# nftables loss rules dropped %d packets" % fab.loss_counters())
        print("# fabric run %s in %.1f s" % ("OK" if rc == 0 else "FAILED", time.time() - t0))
    except subprocess.TimeoutExpired:
        print("# ERROR: inca-demo exceeded %d s" % args.timeout)
        rc = 124
    except FabricError as e:
        print("fabric.py: %s" % e, file=sys.stderr)
        rc = 2
    finally:
        if rc and spec.mode == "am":
            sys.stderr.write("# inca-am log (tail):\n" + fab.switch_log("am")[-3000:])
        fab.down()
    left = [ns for ns in list_netns() if ns.startswith(fab.prefix)]
    if left:
        print("# ERROR: namespaces left behind: %s" % " ".join(left))
        rc = rc or 1
    return rc


def restart_switches(workdir, timeout_s=10.0):
    """Restart the switches of a fabric left up by 'fabric.py up' (a standalone tree serves one
    communicator: every new job needs fresh switches) and rewrite its plan's pids."""
    st_path = os.path.join(workdir, "fabric.json")
    with open(st_path) as f:
        st = json.load(f)
    plan = st["plan"]
    for name, pid in st["pids"].items():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.time() + timeout_s
        while os.path.exists("/proc/%d" % pid) and time.time() < deadline:
            time.sleep(0.02)
    for name, argv in st["argv"].items():
        ready = argv[argv.index("--ready-file") + 1]
        if os.path.exists(ready):
            os.unlink(ready)
        logf = open(os.path.join(workdir, name + ".log"), "a")
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        logf.close()
        deadline = time.time() + timeout_s
        while not os.path.exists(ready):
            if p.poll() is not None or time.time() > deadline:
                raise FabricError("%s did not restart (see %s.log)" % (name, name))
            time.sleep(0.01)
        plan = re.sub(r"^(switch %s .* pid )\d+" % re.escape(name), r"\g<1>%d" % p.pid, plan,
                      flags=re.M)
        st["pids"][name] = p.pid
    st["plan"] = plan
    with open(os.path.join(workdir, "plan.txt"), "w") as f:
        f.write(plan)
    with open(st_path, "w") as f:
        json.dump(st, f, indent=1)
    return os.path.join(workdir, "plan.txt")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("cmd", choices=["show", "run", "up", "down", "clean", "restart", "status"])
    ap.add_argument("spec", nargs="?", help="fabric description (INI), or PREFIX for 'down'")
    ap.add_argument("--build", default=None, help="meson build dir holding the binaries")
    ap.add_argument("--switch", default=None, help="inca-switch binary")
    ap.add_argument("--demo", default=None, help="inca-demo binary")
    ap.add_argument("--standalone", action="store_true",
                    help="no AM: switches with generated trees (same as --set mode=standalone)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a [fabric] or [switch] key, e.g. --set rate=500mbit "
                         "--set loss=leaf1:30 --set threads=2")
    ap.add_argument("--timeout", type=int, default=900, help="bound on the workload (s)")
    ap.add_argument("--all", action="store_true", help="down: every INCA fabric")
    argv = list(sys.argv[1:] if argv is None else argv)
    demo_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, demo_args = argv[:i], argv[i + 1:]
    args = ap.parse_args(argv)
    args.demo_args = demo_args

    try:
        if args.cmd == "clean":
            if not as_root():
                raise FabricError("needs root")
            gone = cleanup_stale()
            print("removed %d stale namespaces" % len(gone))
            return 0
        if args.cmd == "down":
            if not as_root():
                raise FabricError("needs root")
            prefix = PREFIX_BASE if args.all else args.spec
            if not prefix or not prefix.startswith(PREFIX_BASE):
                raise FabricError("down: give a prefix starting with %s, or --all" % PREFIX_BASE)
            gone = delete_prefix(prefix)
            # workdirs of fabrics left up by 'up' (they record their prefix)
            tmp = tempfile.gettempdir()
            for d in os.listdir(tmp):
                st = os.path.join(tmp, d, "fabric.json")
                if d.startswith("inca-fabric-") and os.path.exists(st):
                    try:
                        with open(st) as f:
                            if json.load(f).get("prefix", "").startswith(prefix):
                                shutil.rmtree(os.path.join(tmp, d), ignore_errors=True)
                    except (OSError, ValueError):
                        pass
            print("removed %d namespaces" % len(gone))
            return 0
        if args.cmd == "status":
            if not as_root() or not args.spec:
                raise FabricError("status WORKDIR [-- inca ARGS] (as root)")
            with open(os.path.join(args.spec, "fabric.json")) as f:
                st = json.load(f)
            if st.get("mode") != "am":
                raise FabricError("this fabric has no AM (standalone switches)")
            r = sh(["ip", "netns", "exec", st["host_ns"], st["cli"], "--am", st["am_addr"],
                    "--ca", st["am_ca"], "--admin-token", st["am_admin"]] +
                   (demo_args or ["status"]), check=False)
            sys.stdout.write(r.stdout)
            sys.stderr.write(r.stderr)
            return r.returncode
        if args.cmd == "restart":
            if not as_root() or not args.spec:
                raise FabricError("restart WORKDIR (as root)")
            print("plan %s" % restart_switches(args.spec))
            return 0
        if not args.spec:
            raise FabricError("%s needs a fabric description" % args.cmd)
        spec = Spec.load(args.spec)
        fab_keys = {"name", "leaves", "hosts_per_leaf", "spines", "rate", "host_rate",
                    "uplink_rate", "mtu", "queue_ms", "burst_bytes", "loss"}
        am_keys = {"mode", "jobs", "heartbeat_ms", "heartbeat_misses", "poll_ms"}
        fab_over, sw_over, am_over = {}, {}, {}
        for kv in args.set:
            k, _, v = kv.partition("=")
            k = k.strip()
            (fab_over if k in fab_keys else am_over if k in am_keys else sw_over)[k] = v.strip()
        if args.standalone:
            am_over["mode"] = "standalone"
        spec.apply(fab_over, sw_over, am_over)
        if args.cmd == "show":
            Fabric(spec, prefix=PREFIX_BASE + "0x0-", workdir="WORKDIR",
                   cli_bin="inca").show()
            return 0
        if not as_root():
            raise FabricError("building network namespaces needs root (run with sudo)")
        if args.cmd == "run":
            return cmd_run(args, spec)
        # up: leave it running for manual use
        switch_bin = args.switch or find_binary("inca-switch", args.build)
        am_bin = cli_bin = None
        if spec.mode == "am":
            am_bin = find_binary("inca-am", args.build)
            cli_bin = find_binary("inca", args.build)
        fab = Fabric(spec, switch_bin=switch_bin, workdir=tempfile.mkdtemp(prefix="inca-fabric-"),
                     prefix="%s%dx%s-" % (PREFIX_BASE, os.getppid(), secrets.token_hex(2)),
                     am_bin=am_bin, cli_bin=cli_bin)
        fab.up()
        fab.start_switches()
        fab.is_up = False  # keep it: 'fabric.py down PREFIX' removes it
        atexit.unregister(fab.down)
        # the switches (and the AM) must survive this process
        print("prefix %s\nplan %s\nworkdir %s" % (fab.prefix, " ".join(fab.plan_paths()),
                                                   fab.workdir))
        return 0
    except FabricError as e:
        print("fabric.py: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
