#!/usr/bin/python3
# test_torch_backend: the torch.distributed backend "inca" (python/inca/torch.py) with 4
# processes on loopback and the standard env:// rendezvous.
#   collectives: every collective of torch.distributed it serves, several dtypes and every
#     ReduceOp, against references computed locally (exact: the values are small integers);
#     once through a standalone inca-switch configured by the INCA_* environment (packet
#     authentication on, tuner off: the offloadable collectives must all run on INC), once
#     with INCA's host algorithms only (no INC call may appear).
#   ddp: DistributedDataParallel on backend "inca" alone (no gloo) through the switch, a few
#     SGD steps; every rank must end bitwise identical and match one process training on the
#     union of the ranks' batches.
import functools
import json
import os
import socket
import sys
import tempfile
import time
import traceback
from datetime import timedelta

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print("SKIP: torch missing")
    sys.exit(77)

N = 4
STEPS = 4
R = dist.ReduceOp
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int32, torch.int64, torch.int8, torch.uint8, torch.int16]
OFFLOADED = ("allreduce", "reduce", "bcast", "allgather", "reduce_scatter", "barrier")


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- reference data -------------------------------------------------------------------------
def value(rank, numel, dtype, salt=0):
    """Rank's contribution: small integers (-2..2, 0..4 unsigned), exact in every dtype, and
    every sum, product and mean of N of them too."""
    v = (torch.arange(numel, dtype=torch.int64) * 7 + rank * 3 + salt) % 5
    if dtype != torch.uint8:
        v = v - 2
    return v.to(dtype)


_REF = {
    R.SUM: lambda a, b: a + b, R.PRODUCT: lambda a, b: a * b, R.MIN: torch.minimum,
    R.MAX: torch.maximum, R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or,
    R.BXOR: torch.bitwise_xor,
}


def reference(op, numel, dtype, salt=0):
    xs = [value(r, numel, dtype, salt).to(torch.int64) for r in range(N)]
    if op == R.AVG:
        s = functools.reduce(_REF[R.SUM], xs)
        if dtype.is_floating_point:
            return (s.to(torch.float64) / N).to(dtype)
        return torch.div(s, N, rounding_mode="trunc").to(dtype)
    return functools.reduce(_REF[op], xs).to(dtype)


def op_name(op):
    for n in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG"):
        if op == getattr(R, n):
            return n
    return str(op)


# ---- collectives, run on every rank ---------------------------------------------------------
class Checker:
    def __init__(self, rank):
        self.rank, self.fails, self.n = rank, [], 0

    def eq(self, got, want, what):
        self.n += 1
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            self.fails.append(f"rank {self.rank}: {what}: got {got.flatten()[:8].tolist()} "
                              f"want {want.flatten()[:8].tolist()}")

    def true(self, cond, what):
        self.n += 1
        if not cond:
            self.fails.append(f"rank {self.rank}: {what}")


def run_collectives(rank, ck):
    me = rank
    for dtype in FLOATS + INTS:
        ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG]
        if not dtype.is_floating_point:
            ops += [R.BAND, R.BOR, R.BXOR]
        dn = str(dtype).replace("torch.", "")
        for numel in (5, 2500):
            for op in ops:
                t = value(me, numel, dtype)
                dist.all_reduce(t, op=op)
                ck.eq(t, reference(op, numel, dtype), f"all_reduce {dn} {op_name(op)} n={numel}")
            # reduce to rank 1: the root gets the result, the others keep their input
            for op in (R.SUM, R.MAX):
                t = value(me, numel, dtype, 1)
                dist.reduce(t, dst=1, op=op)
                want = reference(op, numel, dtype, 1) if me == 1 else value(me, numel, dtype, 1)
                ck.eq(t, want, f"reduce {dn} {op_name(op)} n={numel}")
            # broadcast from rank 2
            t = value(me, numel, dtype, 2)
            dist.broadcast(t, src=2)
            ck.eq(t, value(2, numel, dtype, 2), f"broadcast {dn} n={numel}")
            # all_gather (list) and all_gather_into_tensor
            outs = [torch.full((numel,), 9).to(dtype) for _ in range(N)]
            dist.all_gather(outs, value(me, numel, dtype, 3))
            for r in range(N):
                ck.eq(outs[r], value(r, numel, dtype, 3), f"all_gather {dn} n={numel} [{r}]")
            flat = torch.empty(N * numel, dtype=dtype)
            dist.all_gather_into_tensor(flat, value(me, numel, dtype, 4))
            ck.eq(flat, torch.cat([value(r, numel, dtype, 4) for r in range(N)]),
                  f"all_gather_into_tensor {dn} n={numel}")
            # reduce_scatter (list, SUM) and reduce_scatter_tensor (MAX, and AVG)
            full = value(me, N * numel, dtype, 5)
            out = torch.empty(numel, dtype=dtype)
            dist.reduce_scatter(out, list(full.chunk(N)))
            ck.eq(out, reference(R.SUM, N * numel, dtype, 5).chunk(N)[me],
                  f"reduce_scatter {dn} n={numel}")
            for op in (R.MAX, R.AVG):
                out = torch.empty(numel, dtype=dtype)
                dist.reduce_scatter_tensor(out, full, op=op)
                ck.eq(out, reference(op, N * numel, dtype, 5).chunk(N)[me],
                      f"reduce_scatter_tensor {dn} {op_name(op)} n={numel}")
            # all_to_all_single (equal splits, given and implied) and all_to_all (lists)
            src = value(me, N * numel, dtype, 6)
            want = torch.cat([value(r, N * numel, dtype, 6).chunk(N)[me] for r in range(N)])
            out = torch.empty(N * numel, dtype=dtype)
            dist.all_to_all_single(out, src)
            ck.eq(out, want, f"all_to_all_single {dn} n={numel}")
            out = torch.empty(N * numel, dtype=dtype)
            dist.all_to_all_single(out, src, [numel] * N, [numel] * N)
            ck.eq(out, want, f"all_to_all_single splits {dn} n={numel}")
            outs = [torch.empty(numel, dtype=dtype) for _ in range(N)]
            dist.all_to_all(outs, list(src.chunk(N)))
            ck.eq(torch.cat(outs), want, f"all_to_all {dn} n={numel}")
        # gather / scatter at rank 3
        g = [torch.empty(7, dtype=dtype) for _ in range(N)] if me == 3 else None
        dist.gather(value(me, 7, dtype, 7), g, dst=3)
        if me == 3:
            ck.eq(torch.stack(g), torch.stack([value(r, 7, dtype, 7) for r in range(N)]),
                  f"gather {dn}")
        out = torch.empty(7, dtype=dtype)
        dist.scatter(out, [value(r, 7, dtype, 8) for r in range(N)] if me == 3 else None, src=3)
        ck.eq(out, value(me, 7, dtype, 8), f"scatter {dn}")
        dist.barrier()

    # shapes and layouts: a 2-D tensor, a non-contiguous (transposed) one, a 0-dim one
    t = value(me, 60, torch.float32).view(6, 10)
    dist.all_reduce(t)
    ck.eq(t, reference(R.SUM, 60, torch.float32).view(6, 10), "all_reduce 2-D")
    base = value(me, 60, torch.int32).view(6, 10)
    t = base.t()
    dist.all_reduce(t, op=R.MAX)
    ck.eq(t, reference(R.MAX, 60, torch.int32).view(6, 10).t(), "all_reduce transposed")
    ck.eq(base, reference(R.MAX, 60, torch.int32).view(6, 10), "transposed result in place")
    t = torch.tensor(float(me + 1), dtype=torch.float64)
    dist.all_reduce(t, op=R.PRODUCT)
    ck.eq(t, torch.tensor(24.0, dtype=torch.float64), "all_reduce 0-dim")
    t = value(me, 12, torch.float32).view(3, 4).t()
    dist.broadcast(t, src=1)
    ck.eq(t, value(1, 12, torch.float32).view(3, 4).t(), "broadcast transposed")
    # complex SUM / AVG (as pairs of floats) and bool (logical or / and)
    c = torch.complex(value(me, 9, torch.float32), value(me, 9, torch.float32, 1))
    dist.all_reduce(c)
    ck.eq(c, torch.complex(reference(R.SUM, 9, torch.float32),
                           reference(R.SUM, 9, torch.float32, 1)), "all_reduce complex64")
    b = value(me, 9, torch.uint8) == 0
    refs = [value(r, 9, torch.uint8) == 0 for r in range(N)]
    t = b.clone()
    dist.all_reduce(t, op=R.MAX)
    ck.eq(t, functools.reduce(torch.logical_or, refs), "all_reduce bool MAX")
    t = b.clone()
    dist.all_reduce(t, op=R.MIN)
    ck.eq(t, functools.reduce(torch.logical_and, refs), "all_reduce bool MIN")
    # several requests in flight, completed in issue order
    ts = [value(me, 1000, torch.float32, s) for s in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    for s, (x, w) in enumerate(zip(ts, works)):
        w.wait()
        ck.eq(x, reference(R.SUM, 1000, torch.float32, s), f"async all_reduce {s}")
    fut = dist.all_reduce(value(me, 10, torch.int64), op=R.BXOR, async_op=True).get_future()
    ck.eq(fut.wait()[0], reference(R.BXOR, 10, torch.int64), "async all_reduce future value")
    # broadcast_object_list goes through broadcast (sizes, then pickled bytes)
    objs = [{"from": me, "x": [1, 2, 3]}, None]
    dist.broadcast_object_list(objs, src=2)
    ck.true(objs[0] == {"from": 2, "x": [1, 2, 3]}, f"broadcast_object_list: {objs[0]}")
    # all_to_all with unequal blocks: rank i sends f(i, j) elements to rank j (some none)
    def f(i, j):
        return (i + 2 * j) % 3
    ins = [f(me, j) for j in range(N)]
    outs_s = [f(i, me) for i in range(N)]
    src = torch.cat([torch.arange(f(me, j), dtype=torch.int32) + 1000 * me + 100 * j
                     for j in range(N)])
    want = torch.cat([torch.arange(f(i, me), dtype=torch.int32) + 1000 * i + 100 * me
                      for i in range(N)])
    out = torch.empty(sum(outs_s), dtype=torch.int32)
    dist.all_to_all_single(out, src, outs_s, ins)
    ck.eq(out, want, "all_to_all_single with unequal splits")
    outs = [torch.empty(f(i, me), dtype=torch.int32) for i in range(N)]
    dist.all_to_all(outs, list(src.split(ins)))
    ck.eq(torch.cat(outs), want, "all_to_all with unequal sizes")
    # refused before any communication (same decision on every rank, so no rank hangs)
    for what, fn in [
        ("BAND of floats", lambda: dist.all_reduce(torch.ones(3), op=R.BAND)),
        ("split sizes that do not add up to dim 0", lambda: dist.all_to_all_single(
            torch.empty(N), torch.ones(N), [2] * N, [2] * N)),
        ("PRODUCT of complex", lambda: dist.all_reduce(torch.ones(2, dtype=torch.cfloat),
                                                       op=R.PRODUCT)),
    ]:
        try:
            fn()
            ck.true(False, f"{what}: no error")
        except (RuntimeError, ValueError, NotImplementedError):
            ck.true(True, what)
    t = value(me, 5, torch.int16)
    dist.all_reduce(t)  # still in step after the refusals
    ck.eq(t, reference(R.SUM, 5, torch.int16), "all_reduce after refused calls")
    dist.barrier()


def collectives_worker(rank, port, per_rank_env, outdir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(N))
    os.environ.update(per_rank_env[rank])
    import inca.torch
    ck = Checker(rank)
    res = {"rank": rank}
    try:
        dist.init_process_group("inca", timeout=timedelta(seconds=60))
        ck.true(dist.get_backend() == "inca", f"backend {dist.get_backend()}")
        t0 = time.monotonic()
        run_collectives(rank, ck)
        res["seconds"] = time.monotonic() - t0
        comm = inca.torch.comm_of()
        res["counts"] = comm.coll_counts()
        res["stats"] = comm.stats()
        res["auth"] = comm.auth_stats()
        dist.destroy_process_group()
    except Exception:
        ck.fails.append(f"rank {rank}: " + traceback.format_exc())
    res["fails"], res["checks"] = ck.fails, ck.n
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)


def spawn(fn, args, timeout_s):
    ctx = mp.start_processes(fn, args=args, nprocs=N, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout_s
    try:
        while not ctx.join(timeout=max(1.0, deadline - time.monotonic())):
            if time.monotonic() > deadline:
                raise TimeoutError(f"ranks still running after {timeout_s} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()


def results(outdir):
    out = []
    for r in range(N):
        path = os.path.join(outdir, f"rank{r}.json")
        if not os.path.exists(path):
            out.append({"rank": r, "fails": [f"rank {r}: no result"], "checks": 0})
            continue
        with open(path) as f:
            out.append(json.load(f))
    return out


def test_collectives(fails):
    from inca.launch import Switch

    for mode in ("switch", "host"):
        sw = Switch(N) if mode == "switch" else None
        per_rank = [{} for _ in range(N)]
        if sw is not None:
            # the switch's tree expects rank r (member r + 1) at member_addrs[r]
            per_rank = [{"INCA_SWITCH_ADDR": sw.addr, "INCA_TREE_ID": str(sw.tree_id),
                         "INCA_TREE_KEY": hex(sw.key), "INCA_AUTH_KEY": sw.auth_key.hex(),
                         "INCA_AUTH_KEY_ID": str(sw.auth_key_id), "INCA_TUNE": "off",
                         "INCA_DATA_ADDR": sw.member_addrs[r]} for r in range(N)]
        with tempfile.TemporaryDirectory(prefix="inca-torch-test-") as tmp:
            t0 = time.monotonic()
            try:
                spawn(collectives_worker, (free_tcp_port(), per_rank, tmp), 300)
            except Exception as e:
                fails.append(f"{mode}: {e}")
            res = results(tmp)
            swstats = sw.read_stats() if sw is not None else None
            if sw is not None:
                sw.cleanup()
        for r in res:
            fails.extend(f"{mode}: {f}" for f in r["fails"])
        ok = [r for r in res if "counts" in r]
        print(f"{mode}: {sum(r['checks'] for r in res)} checks in "
              f"{time.monotonic() - t0:.1f} s, "
              f"{sum(len(r['fails']) for r in res)} failed", flush=True)
        if ok:
            print(f"{mode}: rank 0 calls by path: {ok[0]['counts']}", flush=True)
        for r in ok:
            c = r["counts"]
            if mode == "switch":
                for coll in OFFLOADED:
                    paths = c.get(coll, {})
                    if not paths.get("inc") or set(paths) != {"inc"}:
                        fails.append(f"switch: rank {r['rank']}: {coll} not all on INC: {paths}")
                if c["failovers"]:
                    fails.append(f"switch: rank {r['rank']}: {c['failovers']} failovers")
                if not r["auth"]["enabled"] or not r["auth"]["rx_verified"]:
                    fails.append(f"switch: rank {r['rank']}: authentication off: {r['auth']}")
                au = r["auth"]
                if au["rx_missing"] or au["rx_bad_key_id"] or au["rx_bad_ctx"] or au["rx_bad_mac"]:
                    fails.append(f"switch: rank {r['rank']}: packets rejected: {au}")
                print(f"switch: rank {r['rank']}: {r['stats']}", flush=True)
            else:
                on_inc = {k: v for k, v in c.items() if isinstance(v, dict) and "inc" in v}
                if on_inc or r["stats"]["inc_calls"]:
                    fails.append(f"host: rank {r['rank']}: INC calls without a switch: {on_inc}")
        if swstats is not None:
            tree = swstats["trees"][0] if swstats.get("trees") else {}
            print(f"switch: contributions={tree.get('contributions')} "
                  f"aggregations={tree.get('aggregations')} drops={swstats.get('drops_total')}",
                  flush=True)
            if not tree.get("aggregations"):
                fails.append(f"switch: no aggregation counted: {tree}")


# ---- DDP ------------------------------------------------------------------------------------
def make_model():
    torch.manual_seed(1234)
    m = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    m.register_buffer("seen", torch.zeros(1))  # DDP broadcasts buffers before each forward
    return m


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 + step * N + rank)
    return torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)


def ddp_worker(rank, port, opts, outdir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(N))
    import inca.torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    res = {"rank": rank, "fails": [], "checks": 0}
    try:
        dist.init_process_group("inca", timeout=timedelta(seconds=60),
                                pg_options=dict(opts[rank], tuning=False))
        model = make_model()
        if rank != 0:
            with torch.no_grad():  # DDP's construction must broadcast rank 0's parameters
                for p in model.parameters():
                    p.add_(float(rank))
        ddp = DDP(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        for step in range(STEPS):
            x, y = batch(rank, step)
            opt.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
        torch.save([p.detach().clone() for p in model.parameters()],
                   os.path.join(outdir, f"params{rank}.pt"))
        res["counts"] = inca.torch.comm_of().coll_counts()
        dist.destroy_process_group()
    except Exception:
        res["fails"].append(f"rank {rank}: " + traceback.format_exc())
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)


def test_ddp(fails):
    from inca.launch import Switch

    with Switch(N) as sw, tempfile.TemporaryDirectory(prefix="inca-torch-ddp-") as tmp:
        t0 = time.monotonic()
        try:
            spawn(ddp_worker, (free_tcp_port(), [sw.comm_kwargs(r) for r in range(N)], tmp), 240)
        except Exception as e:
            fails.append(f"ddp: {e}")
        res = results(tmp)
        for r in res:
            fails.extend(f"ddp: {f}" for f in r["fails"])
        if any(r["fails"] for r in res):
            return
        params = [torch.load(os.path.join(tmp, f"params{r}.pt")) for r in range(N)]
    print(f"ddp: {N} ranks, {STEPS} steps in {time.monotonic() - t0:.1f} s; rank 0 calls by "
          f"path: {res[0]['counts']}", flush=True)
    for r in range(1, N):
        if not all(torch.equal(a, b) for a, b in zip(params[0], params[r])):
            fails.append(f"ddp: rank {r}'s parameters differ from rank 0's")
    for r in res:
        ar = r["counts"].get("allreduce", {})
        if ar.get("inc", 0) < STEPS or set(ar) != {"inc"}:
            fails.append(f"ddp: rank {r['rank']}: gradient allreduces not all on INC: {ar}")
    # One process on the union of the batches: DDP's mean of the per-rank mean gradients is
    # the gradient of the mean loss over all N * 16 samples (equal batch sizes).
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        xs, ys = zip(*(batch(r, step) for r in range(N)))
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    init = list(make_model().parameters())
    for i, (p, q, p0) in enumerate(zip(params[0], model.parameters(), init)):
        if not torch.allclose(p, q.detach(), rtol=1e-5, atol=1e-6):
            fails.append(f"ddp: parameter {i} differs from the single-process reference by "
                         f"{(p - q.detach()).abs().max().item():.3g}")
        if torch.equal(p, p0.detach()):
            fails.append(f"ddp: parameter {i} did not move")


def main():
    which = sys.argv[1:] or ["collectives", "ddp"]
    fails = []
    for name in which:
        {"collectives": test_collectives, "ddp": test_ddp}[name](fails)
    for f in fails:
        print("FAIL:", f, flush=True)
    print("PASS" if not fails else f"{len(fails)} failures", flush=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
