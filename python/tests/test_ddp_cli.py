#!/usr/bin/python3
# test_ddp_cli: examples/torch/ddp_train.py as documented in docs/python.md. (1) --backend inca
# --am: several ranks on one host join one group through a real inca-am and inca-switch
# (NETCONF) on loopback; each rank needs its own data address and port, and the buckets must go
# through the switch. (2) --save-dir DIR that does not exist yet is created and filled; one
# that cannot be created is refused before any training starts.
# usage: test_ddp_cli.py ddp_train.py   (env: INCA_SWITCH, INCA_AM; SKIP without torch / daemons)
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

try:
    import torch  # noqa: F401
except ImportError:
    print("SKIP: torch missing")
    sys.exit(77)

SCRIPT = sys.argv[1]
SW, AM = os.environ.get("INCA_SWITCH", ""), os.environ.get("INCA_AM", "")
FAILS = []
SMALL = ["--steps", "3", "--hidden", "64", "--layers", "1", "--batch", "8"]


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def free_port(kind):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_file(path, proc, what, timeout_s=15):
    t0 = time.monotonic()
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() - t0 > timeout_s:
            return False
        time.sleep(0.05)
    return True


def run(argv, timeout=150):
    p = subprocess.run([sys.executable, SCRIPT] + argv, capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode:
        sys.stdout.write(p.stdout[-3000:] + p.stderr[-3000:])
    return p


def test_save_dir(tmp):
    missing = os.path.join(tmp, "not", "yet", "there")
    js = os.path.join(tmp, "gloo.json")
    p = run(["--backend", "gloo", "--nprocs", "2", "--save-dir", missing, "--json", js] + SMALL)
    check(p.returncode == 0, "--save-dir to a missing directory: exit 0 (%d)" % p.returncode)
    check(all(os.path.exists(os.path.join(missing, f"params_gloo_{r}.pt")) for r in range(2)),
          "--save-dir created and holds every rank's parameters")
    blocker = os.path.join(tmp, "a-file")
    open(blocker, "w").close()
    t0 = time.monotonic()
    p = run(["--backend", "gloo", "--nprocs", "2", "--save-dir",
             os.path.join(blocker, "sub")] + SMALL)
    check(p.returncode == 2 and "--save-dir" in p.stderr and "rank 0:" not in p.stdout,
          "--save-dir that cannot be created: refused before training (%d, %.1f s: %s)"
          % (p.returncode, time.monotonic() - t0, p.stderr.strip()[-200:]))


def test_am(tmp):
    if not (os.access(SW, os.X_OK) and os.access(AM, os.X_OK)):
        print("note: inca-switch / inca-am not built: --am part skipped")
        return False
    if not shutil.which("openssl"):
        print("note: openssl missing (the AM serves TLS only): --am part skipped")
        return False
    # the AM's CA and certificate for 127.0.0.1; the ranks trust the CA through --am-ca
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    with open(os.path.join(tmp, "ext.cnf"), "w") as f:
        f.write("subjectAltName = IP:127.0.0.1\n")
    for argv in (["req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                                          "-subj", "/CN=ddp test CA"],
                 ["req"] + ec + ["-keyout", "am.key", "-out", "am.csr", "-subj", "/CN=127.0.0.1"],
                 ["x509", "-req", "-in", "am.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                  "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "am.crt"]):
        subprocess.run(["openssl"] + argv, cwd=tmp, check=True, capture_output=True)
    sock, sw_ready = os.path.join(tmp, "sw.sock"), os.path.join(tmp, "sw.ready")
    am_ready, am_addr = os.path.join(tmp, "am.ready"), "127.0.0.1:%d" % free_port(
        socket.SOCK_STREAM)
    with open(os.path.join(tmp, "sw.conf"), "w") as f:
        f.write("name = leaf0\nrole = leaf\nlisten = 127.0.0.1:%d\nmax_trees = 16\n"
                % free_port(socket.SOCK_DGRAM))
    with open(os.path.join(tmp, "am.conf"), "w") as f:
        f.write("listen = %s\nheartbeat_ms = 500\npoll_ms = 300\nslots = 64\n"
                "job ddpjob credential c0ffee\nswitch leaf0 unix:%s\nattach 127.0.0.1 leaf0\n"
                "attach %s leaf0\n" % (am_addr, sock, socket.gethostname()))
    procs = []
    try:
        sw = subprocess.Popen([SW, "-c", os.path.join(tmp, "sw.conf"), "--netconf-unix", sock,
                               "--ready-file", sw_ready], stderr=subprocess.PIPE, text=True)
        procs.append(sw)
        if not wait_file(sw_ready, sw, "switch"):
            err = sw.stderr.read() if sw.poll() is not None else ""
            if "NETCONF" in err:
                print("note: inca-switch built without NETCONF: --am part skipped")
                return False
            check(False, "inca-switch with NETCONF started (%s)" % err.strip())
            return True
        am = subprocess.Popen([AM, "-c", os.path.join(tmp, "am.conf"), "--ready-file",
                               am_ready, "--tls-cert", os.path.join(tmp, "am.crt"),
                               "--tls-key", os.path.join(tmp, "am.key")],
                              stderr=subprocess.DEVNULL)
        procs.append(am)
        if not wait_file(am_ready, am, "am"):
            check(False, "inca-am started")
            return True
        js = os.path.join(tmp, "am.json")
        p = run(["--backend", "inca", "--am", am_addr, "--am-ca", os.path.join(tmp, "ca.pem"),
                 "--job-id", "ddpjob", "--job-credential", "c0ffee", "--nprocs", "3",
                 "--algo", "inc",
                 "--json", js] + SMALL)
        check(p.returncode == 0, "--backend inca --am, 3 ranks on one host: exit 0 (%d)"
              % p.returncode)
        if p.returncode == 0:
            res = json.load(open(js))
            inc = [r.get("inca_stats", {}).get("inc_calls", 0) for r in res]
            check(len(res) == 3 and all(n > 0 for n in inc),
                  "every rank's buckets went through the switch (inc_calls %s)" % inc)
            check(len({r["sha256_16"] for r in res}) == 1, "parameters identical on every rank")
    finally:
        for pr in reversed(procs):
            pr.terminate()
            try:
                pr.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pr.kill()
    return True


def main():
    tmp = tempfile.mkdtemp(prefix="inca-ddp-cli-")
    try:
        test_save_dir(tmp)
        am_ran = test_am(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("%d failures" % len(FAILS))
        return 1
    print("ddp_train command line: all checks passed" + ("" if am_ran else " (--am skipped)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
