"""Helpers shared by the inca-am Python tests (imported from the tests' own directory): free
ports, the ok/FAIL counter, stubs generated from inca_am.proto, waiting for ready files, test
certificates, inca-switch processes for the AM to drive, and members' Session streams."""
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

# the admin credential (queries need one; docs/am.md "Who sees what")
ADMIN_TOKEN = "test-admin"
ADMIN = (("inca-admin-token", ADMIN_TOKEN),)


def free_port():
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Checker:
    """check(cond, what) prints `ok: what` or `FAIL: what`, counts the failures and returns
    cond; a test ends with sys.exit(1 if check.failures else 0)."""

    def __init__(self):
        self.failures = 0

    def __call__(self, cond, what):
        if not cond:
            self.failures += 1
        print(("ok: " if cond else "FAIL: ") + what, flush=True)
        return cond


def grpc_stubs(proto, prefix, need_openssl=False, extra_protos=None):
    """Imports grpc and generates inca_am_pb2 / inca_am_pb2_grpc from PROTO into a new
    temporary directory (named with PREFIX) put first on sys.path, plus the message modules of
    EXTRA_PROTOS ({file name: proto text}). Exits 77 (SKIP) without python3-grpcio /
    python3-grpc-tools or, with NEED_OPENSSL, without openssl; exits 1 if protoc fails.
    Returns (grpc module, inca_am_pb2, inca_am_pb2_grpc, temporary directory)."""
    try:
        import grpc
        from grpc_tools import protoc
    except ImportError:
        print("SKIP: python3-grpcio / python3-grpc-tools not installed")
        sys.exit(77)
    if need_openssl and not shutil.which("openssl"):
        print("SKIP: openssl missing")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix=prefix)
    ok = protoc.main(["protoc", "-I" + os.path.dirname(proto), "--python_out=" + tmp,
                      "--grpc_python_out=" + tmp, proto]) == 0
    if ok and extra_protos:
        for name, text in extra_protos.items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        ok = protoc.main(["protoc", "-I" + tmp, "--python_out=" + tmp]
                         + list(extra_protos)) == 0
    if not ok:
        print("FAIL: grpc_tools.protoc failed")
        sys.exit(1)
    sys.path.insert(0, tmp)
    import inca_am_pb2
    import inca_am_pb2_grpc
    return grpc, inca_am_pb2, inca_am_pb2_grpc, tmp


def wait_file(path, proc, what=None, timeout=10):
    """Waits (at most TIMEOUT s, while PROC runs) for PATH to exist; returns whether it does.
    With WHAT, a missing file prints `FAIL: WHAT did not start` and exits 1."""
    t0 = time.time()
    while not os.path.exists(path) and time.time() - t0 < timeout and proc.poll() is None:
        time.sleep(0.05)
    if what is not None and not os.path.exists(path):
        print("FAIL: %s did not start" % what)
        sys.exit(1)
    return os.path.exists(path)


def openssl(cwd, *args):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def make_certs(tmp, san, other_ca=False):
    """In TMP: a test CA (ca.pem, ca.key) and the AM's certificate am.crt / am.key for CN
    127.0.0.1 with subjectAltName SAN, signed by it; with OTHER_CA also an unrelated CA
    (other.pem, other.key)."""
    openssl(tmp, "req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=INCA test CA")
    if other_ca:
        openssl(tmp, "req", "-x509", *EC, "-keyout", "other.key", "-out", "other.pem",
                "-days", "2", "-subj", "/CN=Unrelated CA")
    openssl(tmp, "req", *EC, "-keyout", "am.key", "-out", "am.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(tmp, "ext.cnf"), "w") as f:
        f.write("subjectAltName = %s\n" % san)
    openssl(tmp, "x509", "-req", "-in", "am.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "am.crt")


def start_switches(sw, tmp, switches, procs):
    """Starts one inca-switch (binary SW) per entry of SWITCHES ({name: config text}) with its
    NETCONF server on the UNIX socket TMP/NAME.sock, records each in PROCS (so that the caller
    can stop them even if a later one fails) and waits until each is ready."""
    for name, text in switches.items():
        conf = os.path.join(tmp, name + ".conf")
        with open(conf, "w") as f:
            f.write("name = %s\n%s" % (name, text))
        ready = os.path.join(tmp, name + ".ready")
        procs[name] = subprocess.Popen([sw, "-c", conf, "--netconf-unix",
                                        os.path.join(tmp, name + ".sock"), "--ready-file", ready],
                                       stderr=subprocess.DEVNULL)
        wait_file(ready, procs[name], name)


def switch_lines(tmp, switches):
    """The AM configuration's `switch NAME unix:SOCKET` lines for start_switches' switches."""
    return "".join("switch %s unix:%s\n" % (name, os.path.join(tmp, name + ".sock"))
                   for name in switches)


def open_session(grpc, pb, stub, gid, rank, token, stop, events, period_s=0.1, pongs=False):
    """A member's Session stream on a daemon thread: heartbeats every PERIOD_S until STOP is
    set; the AM's events go into the queue EVENTS (PONGs only with PONGS)."""
    def pings():
        seq = 0
        while not stop.is_set():
            yield pb.SessionMsg(group_id=gid, rank=rank, member_token=token, seq=seq)
            seq += 1
            stop.wait(period_s)

    def reader():
        try:
            for ev in stub.Session(pings()):
                if pongs or ev.kind != pb.GroupEvent.PONG:
                    events.put(ev)
        except grpc.RpcError:
            pass

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    return th


def next_event(events, kinds, timeout=5, poll_s=0.2):
    """The next event of the queue EVENTS whose kind is in KINDS (others are dropped), or None
    after TIMEOUT seconds."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            ev = events.get(timeout=poll_s)
        except queue.Empty:
            continue
        if ev.kind in kinds:
            return ev
    return None


def stop(am, procs=()):
    """Ends the AM (SIGTERM, SIGKILL after 10 s) and kills the switches of PROCS still
    running."""
    if am is not None and am.poll() is None:
        am.terminate()
        try:
            am.wait(timeout=10)
        except subprocess.TimeoutExpired:
            am.kill()
            am.wait()
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def start_am(am, tmp, conf_text, log_path, args=()):
    """Writes TMP/am.conf from CONF_TEXT, starts inca-am (binary AM) with -v and its stderr in
    LOG_PATH and waits until it is ready (FAIL and exit 1 if it does not get there)."""
    conf = os.path.join(tmp, "am.conf")
    with open(conf, "w") as f:
        f.write(conf_text)
    ready = os.path.join(tmp, "am.ready")
    p = subprocess.Popen([am, "-c", conf, "--ready-file", ready, "-v"] + list(args),
                         stderr=open(log_path, "w"))
    wait_file(ready, p, "inca-am")
    return p


def stop_log(am):
    """Ends an inca-am started with stderr=PIPE, text=True (SIGTERM, SIGKILL after 10 s);
    returns what it wrote to stderr."""
    am.terminate()
    try:
        _, err = am.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        am.kill()
        _, err = am.communicate()
    return err
