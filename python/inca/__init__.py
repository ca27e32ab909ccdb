# inca: Python bindings (ctypes) to libinca, the INCA client library (include/inca/inca.h).
# Comm wraps one communicator; collectives work in place on contiguous CPU numpy arrays and
# torch tensors. Errors from the library (negative errno) raise IncaError.
import ctypes
import errno as _errno
import queue
import threading

from . import _lib
from ._lib import ALGOS, COLLS, DTYPES, OPS, load

__all__ = ["Comm", "IncaError", "Request", "PeerListener", "DTYPES", "OPS", "ALGOS", "COLLS",
           "load", "library_path", "strerror", "dtype_of", "op_valid"]


class IncaError(OSError):
    """A libinca call failed. .errno is the positive errno, .func the C function."""

    def __init__(self, rc, func):
        err = -rc if rc < 0 else rc
        msg = strerror(-err)
        super().__init__(err, f"{func}: {msg}")
        self.func = func


def strerror(rc):
    """Message for a (negative) errno returned by libinca."""
    s = load().inca_strerror(int(rc))
    return s.decode() if s else f"error {rc}"


def library_path():
    return load().path


def op_valid(dtype, op):
    """True if libinca (switch and host kernels) can reduce this dtype with this op
    (names or enum values, as for Comm.allreduce)."""
    return bool(load().inca_op_valid(_enum(DTYPES, dtype, "dtype"), _enum(OPS, op, "op")))


def _check(rc, func):
    if rc < 0:
        raise IncaError(rc, func)
    return rc


# ---- buffers --------------------------------------------------------------------------------
_NUMPY_DT = {
    "int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16", "int32": "int32",
    "uint32": "uint32", "int64": "int64", "uint64": "uint64", "float16": "fp16",
    "float32": "fp32", "float64": "fp64",
}
_TORCH_DT = {
    "torch.int8": "int8", "torch.uint8": "uint8", "torch.int16": "int16",
    "torch.int32": "int32", "torch.int64": "int64", "torch.float16": "fp16",
    "torch.bfloat16": "bf16", "torch.float32": "fp32", "torch.float64": "fp64",
    # newer torch releases have unsigned 16/32/64-bit types
    "torch.uint16": "uint16", "torch.uint32": "uint32", "torch.uint64": "uint64",
}


def _is_torch(x):
    t = type(x)
    return t.__module__.startswith("torch") and hasattr(x, "data_ptr")


def dtype_of(buf):
    """The INCA dtype name ("fp32", ...) of a numpy array or torch tensor; TypeError if none."""
    if _is_torch(buf):
        name = _TORCH_DT.get(str(buf.dtype))
    elif hasattr(buf, "dtype") and hasattr(buf, "ctypes"):
        name = _NUMPY_DT.get(str(buf.dtype))
    else:
        raise TypeError(f"expected a numpy array or torch tensor, got {type(buf).__name__}")
    if name is None:
        raise TypeError(f"dtype {buf.dtype} has no INCA equivalent")
    return name


def _torch_strided(buf):
    import torch
    return torch.strided


def _buffer(buf, writable=True):
    """(address, element count, INCA dtype value) of a contiguous CPU buffer."""
    name = dtype_of(buf)
    if _is_torch(buf):
        if buf.device.type != "cpu":
            raise ValueError(f"tensor on {buf.device}: only CPU tensors are supported")
        if not buf.is_contiguous():
            raise ValueError("tensor is not contiguous")
        if buf.layout is not _torch_strided(buf):
            raise ValueError(f"{buf.layout} tensors are not supported")
        return buf.data_ptr(), buf.numel(), DTYPES[name]
    if not buf.flags["C_CONTIGUOUS"]:
        raise ValueError("array is not C-contiguous")
    if writable and not buf.flags["WRITEABLE"]:
        raise ValueError("array is read-only")
    return buf.ctypes.data, buf.size, DTYPES[name]


def _enum(table, value, what):
    if isinstance(value, int) and not isinstance(value, bool):
        if value in table.values():
            return value
    elif isinstance(value, str) and value.lower() in table:
        return table[value.lower()]
    raise ValueError(f"unknown {what} {value!r} (one of {', '.join(table)})")


def _b(s):
    return None if s is None else str(s).encode()


# ---- requests -------------------------------------------------------------------------------
class Request:
    """A nonblocking AllReduce in flight. Keeps the buffer alive until it completes.
    Backed by a libinca request (inca_iallreduce) or, for explicit algorithms and libraries
    without it, by the communicator's Python progress thread (an Event)."""

    def __init__(self, comm, handle, buf, event=None):
        self._comm = comm
        self._h = handle
        self._event = event
        self._rc = 0
        self.buf = buf
        self._done = handle is None and event is None  # completed synchronously
        self._lock = threading.Lock()

    def test(self):
        """True once complete (raises IncaError if the operation failed)."""
        with self._lock:
            if self._done:
                return True
            if self._event is not None:
                if not self._event.is_set():
                    return False
                self._done = True
                _check(self._rc, "inca_allreduce")
                return True
            done = ctypes.c_int(0)
            rc = self._comm._lib.inca_test(ctypes.byref(self._h), ctypes.byref(done))
            if done.value:
                self._done = True
                _check(rc, "inca_iallreduce")
                return True
            _check(rc, "inca_test")
            return False

    def wait(self):
        """Block until complete (the GIL is released meanwhile); returns the buffer."""
        with self._lock:
            if not self._done:
                if self._event is not None:
                    self._event.wait()
                    self._done = True
                    _check(self._rc, "inca_allreduce")
                else:
                    rc = self._comm._lib.inca_wait(ctypes.byref(self._h))
                    self._done = True
                    _check(rc, "inca_iallreduce")
        return self.buf


# ---- external bootstrap ---------------------------------------------------------------------
class PeerListener:
    """This rank's host-path listener for libinca's external bootstrap (inca_peer_listen).
    .handle (bytes, _lib.PEER_HANDLE_BYTES) is what the other ranks need: gather every rank's
    handle in rank order through your own channel (an MPI allgather, a torch.distributed
    store, ...) and pass the concatenation as Comm(..., peer_table=table, peer_listener=l).
    The Comm takes the listener over (also when its creation fails); close() frees one that
    is not used."""

    def __init__(self, host_ip=None, lib=None):
        self._lib = load(lib) if lib else load()
        if not self._lib.has("inca_peer_listen"):
            raise NotImplementedError("this libinca has no inca_peer_listen")
        h = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(_lib.PEER_HANDLE_BYTES)
        _check(self._lib.inca_peer_listen(_b(host_ip), ctypes.byref(h), buf), "inca_peer_listen")
        self._h = h
        self.handle = buf.raw

    def _take(self):
        if self._h is None:
            raise ValueError("peer listener already used or closed")
        h, self._h = self._h, None
        return h

    def close(self):
        if self._h is not None:
            self._lib.inca_peer_listener_close(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# ---- communicator ---------------------------------------------------------------------------
class Comm:
    """One INCA communicator (inca_comm_create). Every rank constructs it with the same size
    and bootstrap_addr; rank 0 listens there. switch_addr (+ tree_id, key, data_addr) selects
    the in-network path through an inca-switch, am_addr + job_id + job_credential a group set
    up by the Aggregation Manager; with neither, collectives run on the host ring.

    Extra keyword arguments set the remaining inca_comm_opts fields by name (host_ip, qpn,
    switch_qpn, bfr_id, bsl_bits, nslots, mtu, rto_us, rto_max_us, retx_limit, timeout_ms,
    drop_rate, seed, group_name, host_name, am_attach_hint, am_tls_ca, am_timeout_ms, window,
    deterministic, auth_key (32 bytes), auth_key_id, no_auth, am_insecure).
    External bootstrap instead of bootstrap_addr: peer_table (bytes: every rank's
    PeerListener.handle in rank order) and peer_listener (this rank's PeerListener, which the
    communicator takes over).
    log: callable(level, message) receiving library messages up to log_level."""

    def __init__(self, rank, size, bootstrap_addr=None, switch_addr=None, am_addr=None,
                 job_id=None, job_credential=None, *, data_addr=None, tree_id=0, key=0,
                 log=None, log_level=1, lib=None, **opts):
        self._lib = load(lib) if lib else load()
        self._comm = None
        self._pq = None
        self._pthread = None
        o = _lib.CommOpts()
        o.struct_size = ctypes.sizeof(o)  # inca_comm_opts_init
        self._keep = []  # encoded strings and the log trampoline must outlive the call

        def s(v):
            e = _b(v)
            self._keep.append(e)
            return e

        if not isinstance(rank, int) or not isinstance(size, int):
            raise TypeError("rank and size must be int")
        o.rank, o.size = rank, size
        o.bootstrap_addr = s(bootstrap_addr)
        o.switch_addr = s(switch_addr)
        o.data_addr = s(data_addr)
        o.tree_id = tree_id
        o.key = key
        o.am_addr = s(am_addr)
        o.job_id = s(job_id)
        o.job_credential = s(job_credential)
        listener = opts.pop("peer_listener", None)
        table = opts.pop("peer_table", None)
        if (listener is None) != (table is None):
            if listener is not None:
                listener.close()
            raise TypeError("peer_table and peer_listener go together")
        if listener is not None:
            if not isinstance(listener, PeerListener):
                raise TypeError("peer_listener must be an inca.PeerListener")
            table = bytes(table)
            if len(table) != size * _lib.PEER_HANDLE_BYTES:
                listener.close()
                raise ValueError(f"peer_table must hold {size} handles of "
                                 f"{_lib.PEER_HANDLE_BYTES} bytes")
            self._keep.append(table)
            o.peer_table = table
            o.peer_listener = listener._take()  # inca_comm_create consumes it in every case
        names = {f[0]: f[1] for f in _lib.CommOpts._fields_}
        for k, v in opts.items():
            if k not in names or k in ("log_fn", "log_ctx", "struct_size"):
                raise TypeError(f"unknown option {k!r}")
            if v is None:
                continue
            if k == "auth_key" and (not isinstance(v, (bytes, bytearray)) or len(v) != 32):
                raise ValueError("auth_key must be 32 bytes (the group key)")
            if k == "auth_key":
                v = bytes(v)
                self._keep.append(v)
                o.auth_key = v
                continue
            setattr(o, k, s(v) if names[k] is ctypes.c_char_p else v)
        if log is not None:
            def tramp(ctx, level, msg, _log=log):
                try:
                    _log(level, msg.decode(errors="replace") if msg else "")
                except Exception:  # a callback must never unwind into C
                    pass
            self._log_fn = _lib.LOG_FN(tramp)
            o.log_fn = self._log_fn
            o.log_level = log_level
        h = ctypes.c_void_p()
        _check(self._lib.inca_comm_create(ctypes.byref(o), ctypes.byref(h)), "inca_comm_create")
        self._comm = h
        self.rank = rank
        self.size = size
        self.has_switch = switch_addr is not None or am_addr is not None

    # -- lifecycle
    def close(self):
        """Destroy the communicator (waits for outstanding nonblocking requests)."""
        if self._pthread is not None:
            self._pq.put(None)  # queued requests run first
            self._pthread.join()
            self._pthread = None
        if self._comm is not None:
            self._lib.inca_comm_destroy(self._comm)
            self._comm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _h(self):
        if self._comm is None:
            raise ValueError("communicator is closed")
        return self._comm

    # -- collectives
    def allreduce(self, buf, op="sum", algo="auto"):
        """In-place AllReduce of a contiguous CPU numpy array / torch tensor. Returns buf."""
        h = self._h()
        addr, count, dt = _buffer(buf)
        o = _enum(OPS, op, "op")
        a = _enum(ALGOS, algo, "algo")
        if count == 0:
            return buf
        if self._pq is not None:  # the progress thread owns the communicator now
            return self.iallreduce(buf, op, algo).wait()
        if a == 0:
            rc = self._lib.inca_allreduce(h, addr, addr, count, dt, o)
        else:
            rc = self._lib.inca_allreduce_algo(h, addr, addr, count, dt, o, a)
        _check(rc, "inca_allreduce")
        return buf

    @property
    def has_iallreduce(self):
        return self._lib.has("inca_iallreduce")

    def iallreduce(self, buf, op="sum", algo="auto"):
        """Start an in-place nonblocking AllReduce; returns a Request (test()/wait()).
        algo "auto" uses libinca's inca_iallreduce (its progress thread, library tuner);
        other algorithms, or a library without inca_iallreduce, run the blocking call on a
        Python progress thread of this communicator. Requests complete in issue order; once
        the Python thread exists every later request goes through it, keeping that order."""
        h = self._h()
        addr, count, dt = _buffer(buf)
        o = _enum(OPS, op, "op")
        a = _enum(ALGOS, algo, "algo")
        if count == 0:
            return Request(self, None, buf)
        if a == 0 and self.has_iallreduce and self._pq is None:
            req = ctypes.c_void_p()
            _check(self._lib.inca_iallreduce(h, addr, addr, count, dt, o, ctypes.byref(req)),
                   "inca_iallreduce")
            return Request(self, req, buf)
        if self._pq is None:
            self._pq = queue.SimpleQueue()
            self._pthread = threading.Thread(target=self._progress, name="inca-progress",
                                             daemon=True)
            self._pthread.start()
        r = Request(self, None, buf, event=threading.Event())
        self._pq.put((r, addr, count, dt, o, a))
        return r

    def _progress(self):
        while True:
            item = self._pq.get()
            if item is None:
                return
            r, addr, count, dt, o, a = item
            h = self._comm
            if addr is None:  # a drain marker
                r._rc = 0
            elif h is None:
                r._rc = -_errno.EBADF
            elif a == 0:
                r._rc = self._lib.inca_allreduce(h, addr, addr, count, dt, o)
            else:
                r._rc = self._lib.inca_allreduce_algo(h, addr, addr, count, dt, o, a)
            r._event.set()

    def _drain(self):
        """Wait until the Python progress thread has finished every queued request."""
        if self._pq is not None:
            r = Request(self, None, None, event=threading.Event())
            self._pq.put((r, None, 0, 0, 0, 0))
            r._event.wait()

    def bcast(self, buf, root=0):
        """In-place Broadcast from root."""
        h = self._h()
        self._drain()
        if not self._lib.has("inca_bcast"):
            raise NotImplementedError("this libinca has no inca_bcast")
        addr, count, dt = _buffer(buf)
        if count:
            _check(self._lib.inca_bcast(h, addr, count, dt, int(root)), "inca_bcast")
        return buf

    def _coll(self, coll, send, recv, count, dt, op=0, root=0, algo="auto"):
        """One inca_coll call on raw addresses (count in elements of dt, see inca.h)."""
        h = self._h()
        self._drain()
        if not self._lib.has("inca_coll"):
            raise NotImplementedError("this libinca has no inca_coll")
        a = _lib.CollArgs(coll=COLLS[coll], sendbuf=send, recvbuf=recv, count=count, dt=dt,
                          op=_enum(OPS, op, "op"), root=int(root),
                          algo=_enum(ALGOS, algo, "algo"))
        _check(self._lib.inca_coll(h, ctypes.byref(a)), f"inca_coll({coll})")

    def _pair(self, sendbuf, recvbuf, send_blocks, recv_blocks):
        """Addresses, per-block count and dtype of two buffers of one dtype whose sizes are
        send_blocks and recv_blocks equal blocks."""
        sa, sn, sdt = _buffer(sendbuf, writable=False)
        ra, rn, rdt = _buffer(recvbuf)
        if sdt != rdt:
            raise TypeError("send and receive buffers have different dtypes")
        if sn % send_blocks or rn % recv_blocks or sn // send_blocks != rn // recv_blocks:
            raise ValueError(f"buffer sizes {sn} / {rn} do not make {send_blocks} / "
                             f"{recv_blocks} equal blocks")
        return sa, ra, sn // send_blocks, sdt

    def reduce(self, sendbuf, recvbuf=None, op="sum", root=0, algo="auto"):
        """Reduce to root. recvbuf None: in place in sendbuf at the root (the other ranks'
        buffers are left alone); else recvbuf (same size and dtype) receives the result at
        the root and is ignored elsewhere."""
        addr, count, dt = _buffer(sendbuf, writable=recvbuf is None)
        raddr = addr
        if recvbuf is not None:
            raddr, rcount, rdt = _buffer(recvbuf)
            if (rcount, rdt) != (count, dt):
                raise ValueError("recvbuf must match sendbuf in size and dtype")
        if count:
            self._coll("reduce", addr, raddr if self.rank == root else None, count, dt, op,
                       root, algo)
        return recvbuf if recvbuf is not None else sendbuf

    def allgather(self, sendbuf, recvbuf, algo="auto"):
        """recvbuf (size x len(sendbuf) elements) receives every rank's sendbuf in rank order."""
        sa, ra, count, dt = self._pair(sendbuf, recvbuf, 1, self.size)
        if count:
            self._coll("allgather", sa, ra, count, dt, algo=algo)
        return recvbuf

    def reduce_scatter(self, sendbuf, recvbuf, op="sum", algo="auto"):
        """Reduce sendbuf (size blocks) over all ranks; block r lands in rank r's recvbuf."""
        sa, ra, count, dt = self._pair(sendbuf, recvbuf, self.size, 1)
        if count:
            self._coll("reduce_scatter", sa, ra, count, dt, op, algo=algo)
        return recvbuf

    def alltoall(self, sendbuf, recvbuf, algo="auto"):
        """Block j of sendbuf goes to rank j, into block <this rank> of its recvbuf."""
        sa, ra, count, dt = self._pair(sendbuf, recvbuf, self.size, self.size)
        if count:
            self._coll("alltoall", sa, ra, count, dt, algo=algo)
        return recvbuf

    def gather(self, sendbuf, recvbuf=None, root=0, algo="auto"):
        """The root's recvbuf (size blocks) receives every rank's sendbuf; recvbuf is only
        needed at the root."""
        if self.rank == root:
            sa, ra, count, dt = self._pair(sendbuf, recvbuf, 1, self.size)
        else:
            sa, count, dt = _buffer(sendbuf, writable=False)
            ra = None
        if count:
            self._coll("gather", sa, ra, count, dt, root=root, algo=algo)
        return recvbuf

    def scatter(self, sendbuf, recvbuf, root=0, algo="auto"):
        """Block r of the root's sendbuf (size blocks) lands in rank r's recvbuf; sendbuf is
        only needed at the root."""
        if self.rank == root:
            sa, ra, count, dt = self._pair(sendbuf, recvbuf, self.size, 1)
        else:
            ra, count, dt = _buffer(recvbuf)
            sa = None
        if count:
            self._coll("scatter", sa, ra, count, dt, root=root, algo=algo)
        return recvbuf

    def barrier(self):
        self._drain()
        _check(self._lib.inca_barrier(self._h()), "inca_barrier")

    # -- introspection
    def stats(self):
        """The communicator's counters (struct inca_comm_stats) as a dict."""
        st = _lib.CommStats()
        _check(self._lib.inca_comm_get_stats(self._h(), ctypes.byref(st), ctypes.sizeof(st)),
               "inca_comm_get_stats")
        return {name: getattr(st, name) for name, _ in _lib.CommStats._fields_}

    def auth_stats(self):
        """Packet authentication of the INC path (struct inca_auth_stats) as a dict: enabled,
        key_id, packets signed / verified, and rejections by reason."""
        if not self._lib.has("inca_comm_get_auth_stats"):
            raise NotImplementedError("this libinca has no inca_comm_get_auth_stats")
        st = _lib.AuthStats()
        _check(self._lib.inca_comm_get_auth_stats(self._h(), ctypes.byref(st), ctypes.sizeof(st)),
               "inca_comm_get_auth_stats")
        return {name: getattr(st, name) for name, _ in _lib.AuthStats._fields_}

    def io_stats(self):
        """How the INC path uses the kernel (struct inca_io_stats) as a dict: gso / gro (1: on),
        syscalls, messages, GSO sends, GRO buffers."""
        if not self._lib.has("inca_comm_get_io_stats"):
            raise NotImplementedError("this libinca has no inca_comm_get_io_stats")
        st = _lib.IoStats()
        _check(self._lib.inca_comm_get_io_stats(self._h(), ctypes.byref(st), ctypes.sizeof(st)),
               "inca_comm_get_io_stats")
        return {name: getattr(st, name) for name, _ in _lib.IoStats._fields_}

    def set_tuning(self, on):
        """AUTO tuner on/off for this communicator (inca_comm_set_tuning). Off: "auto" calls run
        on the switch whenever its tree is usable, with failover to the host path. Every rank
        must call it at the same point."""
        if not self._lib.has("inca_comm_set_tuning"):
            raise NotImplementedError("this libinca has no inca_comm_set_tuning")
        _check(self._lib.inca_comm_set_tuning(self._h(), 1 if on else 0), "inca_comm_set_tuning")

    def coll_counts(self):
        """{coll: {algo: calls}} for the non-zero entries (inca_comm_get_coll_counts)."""
        if not self._lib.has("inca_comm_get_coll_counts"):
            raise NotImplementedError("this libinca has no inca_comm_get_coll_counts")
        cc = _lib.CollCounts()
        _check(self._lib.inca_comm_get_coll_counts(self._h(), ctypes.byref(cc), ctypes.sizeof(cc)),
               "inca_comm_get_coll_counts")
        out = {"failovers": cc.failovers}
        for cname, ci in COLLS.items():
            row = {an: cc.calls[ci][ai] for an, ai in ALGOS.items() if cc.calls[ci][ai]}
            if row:
                out[cname] = row
        return out

    def am_info(self):
        """The AM group state (dict) or None when the communicator has no AM."""
        info = _lib.AmInfo()
        rc = self._lib.inca_comm_am_info(self._h(), ctypes.byref(info), ctypes.sizeof(info))
        if rc == -_errno.ENOTSUP:
            return None
        _check(rc, "inca_comm_am_info")
        d = {name: getattr(info, name) for name, _ in _lib.AmInfo._fields_}
        d["reason"] = info.reason.decode(errors="replace")
        return d
