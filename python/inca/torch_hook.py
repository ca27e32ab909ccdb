# inca.torch_hook: a PyTorch DDP communication hook that AllReduces every gradient bucket
# through INCA (in-network aggregation via the switch, or the host ring) instead of the
# process group: sum, then divide by the world size, as DDP's default allreduce hook does.
import queue
import threading

import torch

from . import IncaError  # noqa: F401  (re-exported: the hook's futures fail with it)

__all__ = ["IncaHookState", "allreduce_hook", "register"]

_COMPRESS = {None: None, "none": None, "fp16": torch.float16, "bf16": torch.bfloat16}


class IncaHookState:
    """State passed to allreduce_hook: the communicator plus a completion thread.

    Buckets start as nonblocking AllReduces (Comm.iallreduce: libinca's inca_iallreduce for
    algo "auto", else the communicator's Python progress thread) so the reduction of bucket k
    overlaps the backward pass computing bucket k+1; requests complete in issue order, so one
    thread waiting on them in order completes the DDP futures. algo: "auto" (the library's
    tuner picks INC or a host algorithm per size), "inc" (the switch for every bucket while
    its tree is usable: turns the communicator's tuner off and calls "auto", so a switch that
    dies mid-training fails over to the host path instead of failing the backward pass),
    "ring", ... (exactly that algorithm).
    compress: None, "fp16" or "bf16": send the bucket in that type (half the bytes) and cast
    the mean back. calls / elements / bytes count what went through INCA."""

    def __init__(self, comm, compress=None, nonblocking=True, algo="auto"):
        if compress not in _COMPRESS:
            raise ValueError(f"compress must be one of {list(_COMPRESS)}")
        self.comm = comm
        self.world_size = comm.size
        self.compress = _COMPRESS[compress]
        if algo == "inc":
            comm.set_tuning(False)  # collective: register() runs on every rank
            algo = "auto"
        self.algo = algo
        self.nonblocking = nonblocking
        self.calls = 0
        self.elements = 0
        self.bytes = 0
        self._q = None
        self._thread = None

    def _ensure_thread(self):
        if self._thread is None:
            self._q = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._complete_loop, name="inca-ddp-hook",
                                            daemon=True)
            self._thread.start()

    def _complete_loop(self):
        while True:
            item = self._q.get()
            if item is None:
                return
            req, finish, fut = item
            try:
                req.wait()  # ctypes drops the GIL while libinca blocks
                fut.set_result(finish())
            except Exception as e:  # surfaces in DDP's backward as the hook's error
                fut.set_exception(e)

    def close(self):
        """Stop the completion thread (after the last backward pass)."""
        if self._thread is not None:
            self._q.put(None)
            self._thread.join()
            self._thread = None


def allreduce_hook(state, bucket):
    """DDP comm hook: mean of the bucket over all ranks through INCA. Returns a
    torch.futures.Future[Tensor] that holds the averaged flat bucket buffer."""
    buf = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
    n = state.world_size
    if state.compress is not None and buf.dtype != state.compress:
        work = buf.to(state.compress)

        def finish():
            buf.copy_(work)
            return buf.div_(n)
    else:
        work = buf

        def finish():
            return buf.div_(n)
    if not work.is_contiguous():
        work = work.contiguous()  # a bucket buffer is flat; this is only a safety net
    state.calls += 1
    state.elements += work.numel()
    state.bytes += work.numel() * work.element_size()
    fut = torch.futures.Future()
    if state.nonblocking:
        state._ensure_thread()
        req = state.comm.iallreduce(work, "sum", state.algo)
        state._q.put((req, finish, fut))
    else:
        try:
            state.comm.allreduce(work, "sum", state.algo)
            fut.set_result(finish())
        except Exception as e:
            fut.set_exception(e)
    return fut


def register(ddp_model, comm, compress=None, nonblocking=True, algo="auto"):
    """Register allreduce_hook on a DistributedDataParallel model; returns the state
    (state.calls counts buckets reduced through INCA; call state.close() when done)."""
    if comm.size != torch.distributed.get_world_size():
        raise ValueError(f"INCA communicator size {comm.size} != process group size "
                         f"{torch.distributed.get_world_size()}")
    state = IncaHookState(comm, compress=compress, nonblocking=nonblocking, algo=algo)
    ddp_model.register_comm_hook(state, allreduce_hook)
    return state
