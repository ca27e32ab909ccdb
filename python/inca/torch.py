# inca.torch: a torch.distributed backend named "inca" over libinca. Importing this module
# registers it; init_process_group("inca") then runs the collectives of CPU tensors through an
# INCA communicator (the switch when one is configured, INCA's host algorithms otherwise).
# Pure Python: a subclass of c10d's ProcessGroup (torch >= 1.13 dispatches its virtual methods
# to Python). Configuration: pg_options (a dict) or the INCA_* environment, see docs/python.md.
import atexit
import datetime
import os
import queue
import secrets
import socket
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, ReduceOp, _create_work_from_future

import inca

__all__ = ["BACKEND", "ProcessGroupInca", "comm_of", "options_from_env"]

BACKEND = "inca"

# ReduceOp -> libinca op name; AVG is a SUM followed by a division.
_OPS = {
    ReduceOp.RedOpType.SUM: "sum",
    ReduceOp.RedOpType.PRODUCT: "prod",
    ReduceOp.RedOpType.MIN: "min",
    ReduceOp.RedOpType.MAX: "max",
    ReduceOp.RedOpType.BAND: "band",
    ReduceOp.RedOpType.BOR: "bor",
    ReduceOp.RedOpType.BXOR: "bxor",
    ReduceOp.RedOpType.AVG: "sum",
}
# bool tensors reduce as bytes holding 0 or 1: logical or / and / xor.
_BOOL_OPS = {"sum": "bor", "max": "bor", "bor": "bor", "prod": "band", "min": "band",
             "band": "band", "bxor": "bxor"}

# The first process group of a process may use the standalone switch of INCA_SWITCH_ADDR: a
# standalone tree serves one communicator (lib/client/README.md). Later groups run on the host.
_switch_taken = False
_switch_lock = threading.Lock()


def _env_int(name, default):
    v = os.environ.get(name)
    return int(v, 0) if v else default


def _route_ip():
    """The local IPv4 that reaches MASTER_ADDR (127.0.0.1 without one): the address the other
    ranks can connect to for the host path."""
    master = os.environ.get("MASTER_ADDR")
    if not master:
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(master), 9))  # no packet is sent
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def options_from_env(rank, env=None):
    """inca.Comm keyword arguments from the INCA_* environment (docs/python.md):
    INCA_AM_ADDR (+ INCA_JOB_ID, INCA_JOB_CREDENTIAL), or INCA_SWITCH_ADDR (+ INCA_TREE_ID,
    INCA_TREE_KEY, INCA_DATA_ADDR or INCA_DATA_PORT_BASE), INCA_HOST_IP, INCA_TIMEOUT_MS.
    The packet authentication key (INCA_AUTH_KEY, INCA_AUTH_KEY_ID) and the tuner switch
    (INCA_TUNE) are read by libinca itself."""
    env = os.environ if env is None else env
    o = {}
    host_ip = env.get("INCA_HOST_IP")
    if host_ip:
        o["host_ip"] = host_ip
    if env.get("INCA_TIMEOUT_MS"):
        o["timeout_ms"] = int(env["INCA_TIMEOUT_MS"], 0)
    if env.get("INCA_AM_ADDR"):
        o["am_addr"] = env["INCA_AM_ADDR"]
        for k in ("job_id", "job_credential"):
            if env.get("INCA_" + k.upper()):
                o[k] = env["INCA_" + k.upper()]
    elif env.get("INCA_SWITCH_ADDR"):
        o["switch_addr"] = env["INCA_SWITCH_ADDR"]
        o["tree_id"] = int(env.get("INCA_TREE_ID") or "1", 0)
        o["key"] = int(env.get("INCA_TREE_KEY") or "0", 0)
        if env.get("INCA_DATA_ADDR"):
            o["data_addr"] = env["INCA_DATA_ADDR"].replace("{rank}", str(rank))
        elif env.get("INCA_DATA_PORT_BASE"):
            base = int(env["INCA_DATA_PORT_BASE"], 0)
            o["data_addr"] = f"{host_ip or _route_ip()}:{base + rank}"
        else:
            raise ValueError("INCA_SWITCH_ADDR needs INCA_DATA_ADDR or INCA_DATA_PORT_BASE "
                             "(this rank's member address in the switch's tree)")
    return o


# Live worker threads -> their queues. At exit every worker is stopped and joined before the
# interpreter finalizes: a daemon thread still inside torch's C++ code then (completing a
# future) would be unwound through it and abort the process.
_workers = {}
_workers_lock = threading.Lock()


@atexit.register
def _stop_workers():
    with _workers_lock:
        items = list(_workers.items())
        _workers.clear()
    for thread, q in items:
        q.put(None)
    for thread, q in items:
        thread.join(timeout=30)


def _worker(q, comm):
    """Runs the queued collectives of one process group in issue order (the same order on
    every rank) and completes their futures. Holds no reference to the process group, so
    dropping the group ends the thread and closes the communicator."""
    while True:
        item = q.get()
        if item is None:
            comm.close()
            return
        fn, result, fut = item
        try:
            fn()
        except BaseException as e:  # surfaces in Work.wait() / the future
            fut.set_exception(e)
            continue
        fut.set_result(result)


def _flat(t):
    """t as a flat contiguous tensor sharing its storage (t must be contiguous)."""
    return t.reshape(-1)


def _bytes(t):
    """A contiguous tensor's storage as a flat uint8 tensor (data movement of any dtype)."""
    if t.dim() == 0:
        t = t.reshape(1)
    return _flat(t).view(torch.uint8)


def _need_cpu(t, what="tensor"):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{what} is on {t.device}: the inca backend handles CPU tensors")
    if t.layout != torch.strided:
        raise ValueError(f"{what}: {t.layout} tensors are not supported")
    if t.is_complex() and t.is_conj():
        t = t.resolve_conj()
    return t


def _one(tensors, what):
    if len(tensors) != 1:
        raise ValueError(f"{what}: the inca backend takes one tensor per rank, got "
                         f"{len(tensors)}")
    return _need_cpu(tensors[0])


class _Reduction:
    """How one tensor is reduced: the contiguous buffer handed to libinca (a view of the
    tensor, or a copy written back by finish()), the libinca op, and the AVG division."""

    def __init__(self, t, redop, size):
        op = getattr(redop, "op", redop)
        if op not in _OPS:
            raise ValueError(f"the inca backend does not support {op}")
        self.tensor = t
        self.avg = op == ReduceOp.RedOpType.AVG
        self.size = size
        self.contig = t.contiguous()  # t itself when it is contiguous
        work = self.contig
        name = _OPS[op]
        if work.dtype == torch.bool:
            if self.avg:
                raise ValueError("AVG of bool tensors is not defined")
            name = _BOOL_OPS[name]
            work = _bytes(work)
        elif work.is_complex():
            if name != "sum":
                raise ValueError(f"{op} of complex tensors is not defined (SUM and AVG are)")
            work = torch.view_as_real(work)
        self.work = _flat(work) if work.dim() else work.reshape(1)
        dt = inca.dtype_of(self.work)
        if not inca.op_valid(dt, name):
            raise ValueError(f"the inca backend cannot reduce {t.dtype} with {op}")
        self.op = name

    def finish(self, reduced=True):
        """After the collective: AVG division and write-back, where this rank got a result."""
        if not reduced:
            return
        if self.contig is not self.tensor:
            self.tensor.copy_(self.contig)
        if self.avg:
            if self.tensor.is_floating_point() or self.tensor.is_complex():
                self.tensor.div_(self.size)
            else:
                self.tensor.copy_(torch.div(self.tensor, self.size, rounding_mode="trunc"))


class ProcessGroupInca(ProcessGroup):
    """A c10d process group whose collectives run through one INCA communicator.

    Every collective is checked in the calling thread (bad arguments raise there, before any
    communication) and then runs on the group's worker thread, in issue order; the returned
    Work completes when it is done, so async_op=True and DDP's gradient buckets overlap with
    the caller. Results of reductions are the same bytes on every rank.

    Created by init_process_group("inca") / new_group(backend="inca") through the creator
    registered on import; options: see _create. .comm is the inca.Comm (stats(),
    coll_counts())."""

    def __init__(self, store, rank, size, timeout, comm_kwargs, tuning=None):
        super().__init__(rank, size)
        kw = dict(comm_kwargs)
        host_ip = kw.pop("host_ip", None) or _route_ip()
        kw.setdefault("timeout_ms", min(int(timeout.total_seconds() * 1000), 2**32 - 1))
        if kw.get("am_addr"):
            kw.setdefault("data_addr", f"{host_ip}:0")
        listener = inca.PeerListener(host_ip)
        store.set(f"inca/peer/{rank}", listener.handle)
        table = b"".join(bytes(store.get(f"inca/peer/{r}")) for r in range(size))
        self.comm = inca.Comm(rank, size, host_ip=host_ip, peer_table=table,
                              peer_listener=listener, **kw)
        if tuning is not None:
            self.comm.set_tuning(bool(tuning))
        self._rank, self._size = rank, size
        self._q = queue.SimpleQueue()
        self._thread = threading.Thread(target=_worker, args=(self._q, self.comm),
                                        name="inca-pg", daemon=True)
        with _workers_lock:
            _workers[self._thread] = self._q
        self._thread.start()

    def getBackendName(self):
        return BACKEND

    def close(self):
        """Finish the queued collectives and destroy the communicator (also on garbage
        collection of the group)."""
        if self._thread is not None:
            with _workers_lock:
                _workers.pop(self._thread, None)
            self._q.put(None)
            self._thread.join()
            self._thread = None

    def __del__(self):
        try:
            if self._thread is not None:
                self._q.put(None)  # the worker closes the communicator; joined at exit
                self._thread = None
        except Exception:
            pass

    def _submit(self, fn, result):
        if self._thread is None:
            raise RuntimeError("the inca process group is closed")
        fut = torch.futures.Future()
        self._q.put((fn, result, fut))
        return _create_work_from_future(fut)

    # -- reductions
    def allreduce(self, tensors, opts=None):
        t = _one(tensors, "allreduce")
        r = _Reduction(t, (opts.reduceOp if opts is not None else ReduceOp.SUM), self._size)
        comm = self.comm

        def run():
            comm.allreduce(r.work, r.op)
            r.finish()
        return self._submit(run, tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        rs = [_Reduction(_need_cpu(t), op, self._size) for t in tensors]
        comm = self.comm

        def run():
            for r in rs:
                comm.allreduce(r.work, r.op)
                r.finish()
        return self._submit(run, tensors)

    def reduce(self, tensors, opts=None):
        t = _one(tensors, "reduce")
        root = opts.rootRank if opts is not None else 0
        self._check_root(root)
        r = _Reduction(t, (opts.reduceOp if opts is not None else ReduceOp.SUM), self._size)
        comm, me = self.comm, self._rank

        def run():
            comm.reduce(r.work, op=r.op, root=root)
            r.finish(me == root)
        return self._submit(run, tensors)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        out = _one(outputs, "reduce_scatter")
        if len(input_lists) != 1 or len(input_lists[0]) != self._size:
            raise ValueError(f"reduce_scatter: needs one list of {self._size} input tensors")
        ins = [_need_cpu(x, "input") for x in input_lists[0]]
        for x in ins:
            if x.dtype != out.dtype or x.numel() != out.numel():
                raise ValueError("reduce_scatter: every input must match the output's dtype "
                                 "and size")
        flat = torch.cat([x.reshape(-1) for x in ins]) if out.numel() else out.new_empty(0)
        return self._reduce_scatter(out, flat, opts, outputs)

    def _reduce_scatter_base(self, output, input, opts=None):
        out, inp = _need_cpu(output, "output"), _need_cpu(input, "input")
        if inp.dtype != out.dtype or inp.numel() != out.numel() * self._size:
            raise ValueError(f"reduce_scatter_tensor: the input must hold {self._size} x "
                             "the output's elements, of the same dtype")
        return self._reduce_scatter(out, inp.contiguous(), opts, [output])

    def _reduce_scatter(self, out, flat, opts, result):
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        r = _Reduction(out, op, self._size)
        src = _Reduction(flat, op, self._size).work  # the same dtype and op mapping
        comm = self.comm

        def run():
            comm.reduce_scatter(src, r.work, r.op)
            r.finish()
        return self._submit(run, result)

    # -- data movement (as bytes: every dtype)
    def broadcast(self, tensors, opts=None):
        t = _one(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        self._check_root(root)
        work = t if t.is_contiguous() else t.contiguous()
        buf, comm = _bytes(work), self.comm

        def run():
            comm.bcast(buf, root)
            if work is not t:
                t.copy_(work)
        return self._submit(run, tensors)

    def allgather(self, output_lists, input_tensors, opts=None):
        t = _one(input_tensors, "allgather")
        if len(output_lists) != 1 or len(output_lists[0]) != self._size:
            raise ValueError(f"allgather: needs one list of {self._size} output tensors")
        outs = [_need_cpu(x, "output") for x in output_lists[0]]
        self._same(t, outs, "allgather")
        src = _bytes(t.contiguous())
        flat = torch.empty(self._size * src.numel(), dtype=torch.uint8)
        comm = self.comm

        def run():
            comm.allgather(src, flat)
            for i, o in enumerate(outs):
                _copy_bytes(o, flat[i * src.numel():(i + 1) * src.numel()])
        return self._submit(run, output_lists)

    def _allgather_base(self, output, input, opts=None):
        out, t = _need_cpu(output, "output"), _need_cpu(input, "input")
        if out.dtype != t.dtype or out.numel() != t.numel() * self._size:
            raise ValueError(f"all_gather_into_tensor: the output must hold {self._size} x "
                             "the input's elements, of the same dtype")
        src = _bytes(t.contiguous())
        work = out if out.is_contiguous() else out.contiguous()
        dst, comm = _bytes(work), self.comm

        def run():
            comm.allgather(src, dst)
            if work is not out:
                out.copy_(work)
        return self._submit(run, [output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        out, t = _need_cpu(output, "output"), _need_cpu(input, "input")
        if out.dtype != t.dtype:
            raise ValueError("all_to_all_single: input and output must have the same dtype")
        blocks = []
        for name, splits, x in (("input", input_split_sizes, t), ("output", output_split_sizes,
                                                                  out)):
            rows = x.shape[0] if x.dim() else 1
            row_bytes = x.numel() * x.element_size() // rows if rows else 0
            if not splits:
                if rows % self._size:
                    raise ValueError(f"all_to_all_single: {name} dim 0 ({rows}) is not "
                                     "divisible by the world size; give split sizes")
                splits = [rows // self._size] * self._size
            if len(splits) != self._size or sum(splits) != rows or min(splits) < 0:
                raise ValueError(f"all_to_all_single: {name}_split_sizes must be {self._size} "
                                 f"sizes adding up to dim 0 ({rows})")
            blocks.append([sz * row_bytes for sz in splits])
        src = _bytes(t.contiguous())
        work = out if out.is_contiguous() else out.contiguous()
        dst, comm = _bytes(work), self.comm

        def run():
            _alltoall_blocks(comm, self._size, src, blocks[0], dst, blocks[1])
            if work is not out:
                out.copy_(work)
        return self._submit(run, [output])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if len(output_tensors) != self._size or len(input_tensors) != self._size:
            raise ValueError(f"all_to_all: needs {self._size} input and output tensors")
        outs = [_need_cpu(x, "output") for x in output_tensors]
        ins = [_need_cpu(x, "input") for x in input_tensors]
        if any(x.dtype != ins[0].dtype for x in ins + outs):
            raise ValueError("all_to_all: every tensor must have the same dtype")
        src = torch.cat([_bytes(x.contiguous()) for x in ins])
        send = [x.numel() * x.element_size() for x in ins]
        recv = [x.numel() * x.element_size() for x in outs]
        dst = torch.empty(sum(recv), dtype=torch.uint8)
        comm = self.comm

        def run():
            _alltoall_blocks(comm, self._size, src, send, dst, recv)
            off = 0
            for o, n in zip(outs, recv):
                _copy_bytes(o, dst[off:off + n])
                off += n
        return self._submit(run, output_tensors)

    def gather(self, output_lists, input_tensors, opts=None):
        t = _one(input_tensors, "gather")
        root = opts.rootRank if opts is not None else 0
        self._check_root(root)
        src = _bytes(t.contiguous())
        outs, flat = [], None
        if self._rank == root:
            if len(output_lists) != 1 or len(output_lists[0]) != self._size:
                raise ValueError(f"gather: the root needs one list of {self._size} outputs")
            outs = [_need_cpu(x, "output") for x in output_lists[0]]
            self._same(t, outs, "gather")
            flat = torch.empty(self._size * src.numel(), dtype=torch.uint8)
        comm, n = self.comm, src.numel()

        def run():
            comm.gather(src, flat, root)
            for i, o in enumerate(outs):
                _copy_bytes(o, flat[i * n:(i + 1) * n])
        return self._submit(run, output_lists)

    def scatter(self, output_tensors, input_lists, opts=None):
        out = _one(output_tensors, "scatter")
        root = opts.rootRank if opts is not None else 0
        self._check_root(root)
        work = out if out.is_contiguous() else out.contiguous()
        dst, src = _bytes(work), None
        if self._rank == root:
            if len(input_lists) != 1 or len(input_lists[0]) != self._size:
                raise ValueError(f"scatter: the root needs one list of {self._size} inputs")
            ins = [_need_cpu(x, "input") for x in input_lists[0]]
            self._same(out, ins, "scatter")
            src = torch.cat([_bytes(x.contiguous()) for x in ins])
        comm = self.comm

        def run():
            comm.scatter(src, dst, root)
            if work is not out:
                out.copy_(work)
        return self._submit(run, output_tensors)

    def barrier(self, opts=None):
        comm = self.comm
        return self._submit(comm.barrier, [])

    # -- argument checks
    def _check_root(self, root):
        if not 0 <= root < self._size:
            raise ValueError(f"root {root} is not a rank of this group (size {self._size})")

    @staticmethod
    def _same(t, others, what):
        for o in others:
            if o.dtype != t.dtype or o.numel() != t.numel():
                raise ValueError(f"{what}: every tensor must have the dtype and size of the "
                                 f"input ({t.dtype}, {t.numel()} elements)")



def _alltoall_blocks(comm, size, src, send, dst, recv):
    """All-to-all of byte blocks of any sizes: src holds the blocks for ranks 0..size-1
    back to back (send[j] bytes for rank j), dst receives recv[i] bytes from rank i back to
    back. Equal blocks go straight through libinca's AllToAll; otherwise every block is padded
    to the largest one of the whole call (agreed by a MAX AllReduce) and cut back after."""
    biggest = torch.tensor([max(send + recv)], dtype=torch.int64)
    comm.allreduce(biggest, "max")
    b = int(biggest.item())
    if all(n == b for n in send + recv):
        comm.alltoall(src, dst)
        return
    pad_src = torch.zeros(size * b, dtype=torch.uint8)
    off = 0
    for j, n in enumerate(send):
        pad_src[j * b:j * b + n] = src[off:off + n]
        off += n
    pad_dst = torch.empty(size * b, dtype=torch.uint8)
    comm.alltoall(pad_src, pad_dst)
    off = 0
    for i, n in enumerate(recv):
        dst[off:off + n] = pad_dst[i * b:i * b + n]
        off += n

def _copy_bytes(dst, flat_bytes):
    """Copy a flat uint8 tensor into dst (any dtype and layout, same byte size)."""
    if dst.is_contiguous():
        _bytes(dst).copy_(flat_bytes)
    else:
        dst.copy_(flat_bytes.view(dst.dtype).view(dst.shape))


def _job_defaults(store, rank, kw):
    """With an AM but without INCA_JOB_ID / INCA_JOB_CREDENTIAL, rank 0 makes them up and
    shares them through the store (the AM then needs allow_first_joiner)."""
    if not kw.get("am_addr") or (kw.get("job_id") and kw.get("job_credential")):
        return
    if rank == 0:
        store.set("inca/job_id", kw.get("job_id") or
                  f"torch-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}")
        store.set("inca/job_credential", kw.get("job_credential") or secrets.token_hex(16))
    kw["job_id"] = bytes(store.get("inca/job_id")).decode()
    kw["job_credential"] = bytes(store.get("inca/job_credential")).decode()


def _create(backend_opts, pg_options):
    """The creator torch.distributed calls (extended API). pg_options: None (configuration
    from the environment) or a dict of inca.Comm keyword arguments (switch_addr, data_addr,
    tree_id, key, auth_key, am_addr, job_id, ...) plus "tuning" (False: libinca's tuner off,
    every offloadable collective on the switch while its tree is usable)."""
    global _switch_taken
    store, rank, size = backend_opts.store, backend_opts.group_rank, backend_opts.group_size
    timeout = backend_opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=1800)
    if pg_options is None:
        kw = options_from_env(rank)
    elif isinstance(pg_options, dict):
        kw = dict(pg_options)
    else:
        raise TypeError("pg_options for the inca backend must be a dict of inca.Comm options")
    tuning = kw.pop("tuning", None)
    with _switch_lock:
        if kw.get("switch_addr") and _switch_taken and pg_options is None:
            for k in ("switch_addr", "data_addr", "tree_id", "key"):
                kw.pop(k, None)
        elif kw.get("switch_addr"):
            _switch_taken = True
    if kw.get("am_addr"):
        group = backend_opts.group_id or "default"
        kw.setdefault("group_name", f"torch-{group}")
        _job_defaults(store, rank, kw)
    return ProcessGroupInca(store, rank, size, timeout, kw, tuning)


def comm_of(group=None):
    """The inca.Comm behind a process group of this backend (None: the default group)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupInca):
        raise ValueError("not an inca process group")
    return pg.comm


if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, _create, extended_api=True)
