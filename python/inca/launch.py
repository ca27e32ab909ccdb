# inca.launch: start a standalone inca-switch on loopback for N ranks (one tree, one member per
# rank on its own free UDP port) and hand out the per-rank Comm arguments. For examples and
# tests; a real deployment configures the switch (docs/switch.md) or uses the AM (docs/am.md).
import os
import shutil
import socket
import subprocess
import tempfile
import time


def free_ports(n, kind=socket.SOCK_DGRAM, host="127.0.0.1"):
    """n distinct ports the kernel just handed out on host (free now; small race until they
    are used). The sockets stay bound until all n are chosen: one port at a time, a port freed
    by the previous choice can come back."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, kind)
            socks.append(s)
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(kind=socket.SOCK_DGRAM, host="127.0.0.1"):
    """One port as free_ports gives it."""
    return free_ports(1, kind, host)[0]


def find_switch():
    """Path of inca-switch: INCA_SWITCH, the build dir of the loaded libinca, then PATH."""
    env = os.environ.get("INCA_SWITCH")
    if env:
        return env
    try:
        from . import library_path
        libdir = os.path.dirname(os.path.realpath(library_path()))
        # <build>/lib/client/libinca.so -> <build>/daemons/switch/inca-switch
        cand = os.path.join(libdir, "..", "..", "daemons", "switch", "inca-switch")
        if os.path.exists(cand):
            return os.path.normpath(cand)
    except OSError:
        pass
    found = shutil.which("inca-switch")
    if found:
        return found
    raise FileNotFoundError("inca-switch not found; set INCA_SWITCH")


class Switch:
    """A running inca-switch with one tree for `size` ranks on host (loopback).

    comm_kwargs(rank) gives the keyword arguments for inca.Comm (switch_addr, data_addr,
    tree_id, key, and the group key auth_key / auth_key_id). auth=False runs the tree without
    packet authentication (the default is a random group key per Switch). deterministic=True reduces in BFR-id order, so a float result does not
    depend on packet arrival order (reproducible runs)."""

    def __init__(self, size, host="127.0.0.1", tree_id=1, key=0x5EED0001, slots=256,
                 deterministic=True, threads=1, binary=None, stats_file=None, verbose=False,
                 timeout_s=10.0, auth=True):
        self.size, self.host, self.tree_id, self.key = size, host, tree_id, key
        self.auth_key = os.urandom(32) if auth else None
        self.auth_key_id = 1
        ports = free_ports(1 + size, host=host)
        self.port = ports[0]
        self.addr = f"{host}:{self.port}"
        self.member_addrs = [f"{host}:{p}" for p in ports[1:]]
        self._dir = tempfile.mkdtemp(prefix="inca-switch-")
        self.ready_file = os.path.join(self._dir, "ready")
        self.stats_file = stats_file or os.path.join(self._dir, "stats.json")
        members = "+".join(f"{r + 1}@{a}" for r, a in enumerate(self.member_addrs))
        tree = (f"id={tree_id},key={key:#x},slots={slots},"
                f"deterministic={'yes' if deterministic else 'no'},members={members}")
        if self.auth_key:
            tree += f",auth_key={self.auth_key.hex()},auth_key_id={self.auth_key_id}"
        else:
            tree += ",auth=off"  # the explicit opt-out the switch requires
        self.argv = [binary or find_switch(), "--listen", self.addr, "--threads", str(threads),
                     "--tree", tree, "--ready-file", self.ready_file,
                     "--stats-file", self.stats_file, "--stats-interval-ms", "0"]
        if verbose:
            self.argv.append("-v")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stderr=None if verbose else subprocess.PIPE)
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(self.ready_file):
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"inca-switch exited with {self.proc.returncode}: {err}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("inca-switch did not become ready")
            time.sleep(0.02)

    def comm_kwargs(self, rank):
        kw = {"switch_addr": self.addr, "data_addr": self.member_addrs[rank],
              "tree_id": self.tree_id, "key": self.key}
        if self.auth_key:
            kw.update(auth_key=self.auth_key, auth_key_id=self.auth_key_id)
        else:
            kw["no_auth"] = 1
        return kw

    def read_stats(self):
        """The switch's statistics JSON (asks for a fresh write with SIGUSR1 while running)."""
        import json
        import signal
        if self.proc.poll() is None:
            before = os.path.getmtime(self.stats_file) if os.path.exists(self.stats_file) else 0
            self.proc.send_signal(signal.SIGUSR1)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                if os.path.exists(self.stats_file) and os.path.getmtime(self.stats_file) != before:
                    break
                time.sleep(0.02)
        with open(self.stats_file) as f:
            return json.load(f)

    def stop(self):
        """SIGTERM, wait (then SIGKILL), return the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()
        return self.proc.returncode

    def cleanup(self):
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
