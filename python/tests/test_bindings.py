#!/usr/bin/python3
# test_bindings: the ctypes bindings (python/inca) against the real libinca and inca-switch on
# loopback: struct layouts vs the C compiler's (abi_dump), in-place AllReduce of numpy arrays
# and torch tensors of several dtypes and ops vs a reference, nonblocking requests, errors.
import ctypes
import errno
import json
import os
import socket
import subprocess
import sys
import threading
import traceback

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy missing")
    sys.exit(77)
try:
    import torch
except ImportError:
    torch = None

import inca
from inca import _lib
from inca.launch import Switch, free_port

N = 4
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, flush=True)


def run_ranks(fn, switch=None, n=N, timeout_s=60, **kw):
    """Run fn(comm, rank) on n communicators, one thread each; returns the results."""
    boot = f"127.0.0.1:{free_port(socket.SOCK_STREAM)}"
    res, errs = [None] * n, [None] * n

    def body(r):
        try:
            extra = switch.comm_kwargs(r) if switch else {}
            with inca.Comm(r, n, boot, timeout_ms=20000, **extra, **kw) as c:
                res[r] = fn(c, r)
        except BaseException as e:  # reported below
            errs[r] = e
            traceback.print_exc()

    ts = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout_s)
        if t.is_alive():
            raise TimeoutError("a rank hung")
    for e in errs:
        if e is not None:
            raise e
    return res


def test_abi():
    dump = os.environ.get("INCA_ABI_DUMP")
    if not dump:
        print("note: INCA_ABI_DUMP not set, layout check skipped")
        return
    c = json.loads(subprocess.run([dump], check=True, capture_output=True, text=True).stdout)
    for sname, cls in _lib.STRUCTS.items():
        layout = c[sname]
        check(ctypes.sizeof(cls) == layout["__size__"][1],
              f"sizeof {sname}: ctypes {ctypes.sizeof(cls)} != C {layout['__size__'][1]}")
        cfields = [k for k in layout if k != "__size__"]
        pyfields = [f[0] for f in cls._fields_]
        check(cfields == pyfields, f"{sname} fields differ: {pyfields} vs {cfields}")
        for f in pyfields:
            if f in layout:
                d = getattr(cls, f)
                check([d.offset, d.size] == layout[f],
                      f"{sname}.{f}: ctypes offset/size {[d.offset, d.size]} != C {layout[f]}")
    e = c["enums"]
    check(e["INCA_BF16"] == _lib.DTYPES["bf16"] and e["INCA_FP64"] == _lib.DTYPES["fp64"], "dtype enum")
    check(e["INCA_BXOR"] == _lib.OPS["bxor"] and e["INCA_OP_COUNT"] == len(_lib.OPS), "op enum")
    check(e["INCA_ALGO_LINEAR"] == _lib.ALGOS["linear"] and e["INCA_ALGO_COUNT"] == len(_lib.ALGOS),
          "algo enum")
    check(e["INCA_COLL_BARRIER"] == _lib.COLLS["barrier"] and e["INCA_COLL_COUNT"] == len(_lib.COLLS),
          "coll enum")
    check(e["INCA_DTYPE_COUNT"] == len(_lib.DTYPES), "dtype count")
    check(c["INCA_PEER_HANDLE_BYTES"] == _lib.PEER_HANDLE_BYTES, "peer handle size")
    check(c["INCA_COLL_MAX"] == _lib.INCA_COLL_MAX and c["INCA_ALGO_MAX"] == _lib.INCA_ALGO_MAX,
          "coll_counts array bounds")
    check(_lib.CommOpts._fields_[0][0] == "struct_size", "struct_size is the first option")
    check(_lib.CommOpts.log_level.offset + _lib.CommOpts.log_level.size ==
          c["INCA_COMM_OPTS_SIZE_MIN"], "INCA_COMM_OPTS_SIZE_MIN")


def test_names():
    lib = inca.load()
    for name, v in _lib.DTYPES.items():
        check(lib.inca_dtype_parse(name.encode()) == v, f"inca_dtype_parse({name})")
        check(lib.inca_dtype_size(v) == _lib.DTYPE_SIZES[v], f"inca_dtype_size({name})")
    for name, v in _lib.OPS.items():
        check(lib.inca_op_parse(name.encode()) == v, f"inca_op_parse({name})")
    check("timed out" in inca.strerror(-errno.ETIMEDOUT).lower(), "strerror(-ETIMEDOUT)")
    # struct_size: 0 is refused, the fields through log_level (an older caller) are enough
    o, h = _lib.CommOpts(), ctypes.c_void_p()
    o.size = 1
    check(lib.inca_comm_create(ctypes.byref(o), ctypes.byref(h)) == -errno.EINVAL,
          "inca_comm_create with struct_size 0")
    check("struct size" in inca.strerror(-errno.EINVAL), "strerror(-EINVAL) names the size")
    o.struct_size = _lib.CommOpts.log_level.offset + _lib.CommOpts.log_level.size
    o.am_addr = b"127.0.0.1:1"  # beyond struct_size: must not be read (would fail: no job_id)
    check(lib.inca_comm_create(ctypes.byref(o), ctypes.byref(h)) == 0 and h.value,
          "inca_comm_create with the smallest struct_size")
    lib.inca_comm_destroy(h)


NP_TYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
            "float16", "float32", "float64"]


def contribution(dtype, r, n_elems, kind):
    """Rank r's data: small integers (sums exact in every dtype) or random floats."""
    if kind == "rand":
        return np.random.default_rng(100 + r).standard_normal(n_elems).astype(dtype)
    i = np.arange(n_elems)
    return (((i * 7 + r * 3) % 11) + (1 if r == 2 else 0)).astype(dtype)


def reference(arrs, op):
    a = np.stack([x.astype(np.float64) if x.dtype.kind == "f" else x for x in arrs])
    return {"sum": a.sum(0), "max": a.max(0), "min": a.min(0),
            "band": np.bitwise_and.reduce(a, 0) if a.dtype.kind in "iu" else None,
            "bxor": np.bitwise_xor.reduce(a, 0) if a.dtype.kind in "iu" else None}[op]


def test_numpy(sw):
    n_elems = 3000  # several INC packets per call
    cases = []
    for dt in NP_TYPES:
        ops = ["sum", "max", "min"] + (["band", "bxor"] if np.dtype(dt).kind in "iu" else [])
        for op in ops:
            cases.append((dt, op, "int"))
    cases += [("float32", "sum", "rand"), ("float64", "sum", "rand")]

    def fn(c, r):
        out = []
        for algo in ("inc", "ring", "auto"):
            for dt, op, kind in cases:
                a = contribution(dt, r, n_elems, kind)
                ret = c.allreduce(a, op, algo=algo)
                out.append((algo, dt, op, kind, a.copy(), ret is a))
        au = c.auth_stats()
        check(au["enabled"] == 1 and au["tx_signed"] > 0 and au["rx_verified"] > 0
              and au["rx_bad_mac"] == 0, f"rank {r}: authenticated INC traffic {au}")
        return out, c.stats()

    res = run_ranks(fn, sw)
    k = 0
    for algo in ("inc", "ring", "auto"):
        for dt, op, kind in cases:
            ref = reference([contribution(dt, r, n_elems, kind) for r in range(N)], op)
            for r in range(N):
                _, _, _, _, got, same = res[r][0][k]
                check(same, "allreduce returns its argument")
                if kind == "rand":
                    ok = np.allclose(got.astype(np.float64), ref, rtol=1e-5, atol=1e-5)
                else:
                    ok = np.array_equal(got.astype(np.float64) if got.dtype.kind == "f" else got,
                                        ref.astype(got.dtype) if got.dtype.kind != "f" else ref)
                check(ok, f"numpy {algo} {dt} {op} {kind} rank {r}")
            # every rank holds the same bytes
            check(all(np.array_equal(res[0][0][k][4], res[r][0][k][4]) for r in range(N)),
                  f"ranks agree {algo} {dt} {op}")
            k += 1
    st = res[0][1]
    check(st["inc_calls"] >= len(cases), f"inc_calls {st['inc_calls']} >= {len(cases)}")
    check(st["ring_calls"] >= len(cases), f"ring_calls {st['ring_calls']}")
    check(st["rx_bad"] == 0, "no bad packets")
    print(f"numpy: {len(cases)} cases x 3 algos ok; rank 0 stats {st}", flush=True)


def test_torch(sw):
    if torch is None:
        print("note: torch missing, torch tensor cases skipped")
        return
    tdts = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16,
            torch.bfloat16, torch.float32, torch.float64]
    n_elems = 2500

    def data(dt, r):
        i = torch.arange(n_elems)
        return (((i * 5 + r) % 13) - (6 if dt.is_signed else 0)).to(dt)

    def fn(c, r):
        out = []
        for dt in tdts:
            for op in ("sum", "max"):
                t = data(dt, r)
                c.allreduce(t, op, algo="inc")
                out.append(t)
        # a view into a larger tensor (contiguous, offset storage) works in place
        big = torch.zeros(3, 100, dtype=torch.float32)
        big[1].fill_(r + 1)
        c.allreduce(big[1])
        out.append(big)
        # nonblocking: libinca requests (auto) and the Python progress thread (explicit algo)
        x = [torch.full((4000,), float(r + k), dtype=torch.float32) for k in range(3)]
        reqs = [c.iallreduce(t) for t in x]
        done = reqs[0].test() in (True, False)
        for q in reqs:
            q.wait()
        y = [torch.full((1000,), r * 10 + k, dtype=torch.int64) for k in range(3)]
        reqs = [c.iallreduce(t, "max", algo=a) for t, a in zip(y, ("ring", "inc", "auto"))]
        for q in reqs:
            q.wait()
        c.barrier()
        b = torch.full((300,), float(r), dtype=torch.float64)
        c.bcast(b, root=2)
        return out, x, y, done, b

    res = run_ranks(fn, sw)
    k = 0
    for dt in tdts:
        for op in ("sum", "max"):
            stack = torch.stack([data(dt, r).double() for r in range(N)])
            ref = stack.sum(0) if op == "sum" else stack.max(0).values
            for r in range(N):
                got = res[r][0][k]
                check(got.dtype == dt and torch.equal(got.double(), ref),
                      f"torch {dt} {op} rank {r}")
            k += 1
    for r in range(N):
        big = res[r][0][k]
        check(torch.all(big[1] == 10) and torch.all(big[0] == 0) and torch.all(big[2] == 0),
              f"torch view rank {r}")
        for kk in range(3):
            check(torch.all(res[r][1][kk] == float(sum(range(N)) + N * kk)),
                  f"iallreduce auto #{kk} rank {r}")
            check(torch.all(res[r][2][kk] == (N - 1) * 10 + kk), f"iallreduce max #{kk} rank {r}")
        check(res[r][3], "Request.test() answers")
        check(torch.all(res[r][4] == 2.0), f"bcast from rank 2 at rank {r}")
    print(f"torch: {len(tdts)} dtypes, views and nonblocking requests ok", flush=True)


def test_errors(sw):
    def expect(exc, fn, what, err=None):
        try:
            fn()
        except exc as e:
            if err is not None:
                check(getattr(e, "errno", None) in err, f"{what}: errno {getattr(e, 'errno', None)}")
            return
        except Exception as e:
            check(False, f"{what}: raised {type(e).__name__}: {e}, expected {exc.__name__}")
            return
        check(False, f"{what}: no exception, expected {exc.__name__}")

    # Option errors are local: one process, no peers needed.
    expect(inca.IncaError, lambda: inca.Comm(5, 4, "127.0.0.1:1"), "rank >= size",
           (errno.EINVAL,))
    expect(inca.IncaError, lambda: inca.Comm(0, 0, "127.0.0.1:1"), "size 0", (errno.EINVAL,))
    expect(TypeError, lambda: inca.Comm(0, 1, None, bogus_option=1), "unknown option")
    expect(TypeError, lambda: inca.Comm("0", 1, None), "rank not int")
    with inca.Comm(0, 1, None) as c:  # size 1: no peers, no switch
        a = np.arange(10, dtype=np.float32)
        check(np.array_equal(c.allreduce(a), np.arange(10, dtype=np.float32)), "size 1 identity")
        expect(TypeError, lambda: c.allreduce([1, 2, 3]), "list")
        expect(TypeError, lambda: c.allreduce(np.zeros(4, np.complex64)), "complex dtype")
        expect(TypeError, lambda: c.allreduce(np.zeros(4, bool)), "bool dtype")
        expect(ValueError, lambda: c.allreduce(np.zeros((4, 4), np.float32)[:, 1]),
               "non-contiguous numpy")
        ro = np.zeros(4, np.float32)
        ro.flags.writeable = False
        expect(ValueError, lambda: c.allreduce(ro), "read-only numpy")
        expect(ValueError, lambda: c.allreduce(a, "avg"), "unknown op")
        expect(ValueError, lambda: c.allreduce(a, algo="fastest"), "unknown algo")
        expect(inca.IncaError, lambda: c.allreduce(a, "band"), "band on fp32",
               (errno.EINVAL, errno.ENOTSUP))
        expect(inca.IncaError, lambda: c.allreduce(a, algo="inc"), "inc without a switch",
               (errno.ENOTSUP, errno.EINVAL))
        if torch is not None:
            expect(ValueError, lambda: c.allreduce(torch.zeros(4, 4).t()), "non-contiguous torch")
            expect(TypeError, lambda: c.allreduce(torch.zeros(4, dtype=torch.bool)), "torch bool")
            expect(TypeError, lambda: c.allreduce(torch.zeros(4, dtype=torch.complex64)),
                   "torch complex")
        check(c.am_info() is None, "am_info without an AM is None")
        check(c.stats()["inc_calls"] == 0, "no INC calls without a switch")
        io = c.io_stats()
        check(io["gso"] == 0 and io["gro"] == 0 and io["tx_syscalls"] == 0,
              "no INC socket I/O without a switch")
    expect(ValueError, lambda: c.allreduce(a), "closed communicator")
    # A peer that never comes: -ETIMEDOUT from the bootstrap, bounded by timeout_ms.
    boot = f"127.0.0.1:{free_port(socket.SOCK_STREAM)}"
    expect(inca.IncaError, lambda: inca.Comm(1, 2, boot, timeout_ms=300), "missing rank 0",
           (errno.ETIMEDOUT, errno.ECONNREFUSED))
    # The log callback sees library messages (and exceptions in it do not escape into C).
    msgs = []

    def bad_logger(level, msg):
        msgs.append((level, msg))
        raise RuntimeError("ignored")
    run_ranks(lambda c, r: c.allreduce(np.ones(100, np.float32), algo="inc"), sw, n=N,
              log=bad_logger, log_level=3)
    check(len(msgs) > 0 and all(isinstance(m, str) for _, m in msgs), "log callback called")
    print(f"errors ok ({len(msgs)} log messages)", flush=True)


def test_peer_bootstrap():
    """External bootstrap (PeerListener + peer_table) and the collectives beyond AllReduce,
    host path, 4 ranks in threads."""
    listeners = [inca.PeerListener("127.0.0.1") for _ in range(N)]
    table = b"".join(l.handle for l in listeners)
    check(all(len(l.handle) == _lib.PEER_HANDLE_BYTES for l in listeners), "handle size")
    res, errs = [None] * N, [None] * N

    def body(r):
        try:
            with inca.Comm(r, N, peer_table=table, peer_listener=listeners[r],
                           timeout_ms=20000) as c:
                x = np.arange(8, dtype=np.int32) + r
                red = x.copy()
                c.reduce(red, op="sum", root=1)
                ag = np.zeros(N * 8, dtype=np.int32)
                c.allgather(x, ag)
                rs = np.zeros(8, dtype=np.int32)
                c.reduce_scatter(ag, rs, op="max")
                a2a = np.zeros(N * 8, dtype=np.int32)
                c.alltoall(ag + 100 * r, a2a)
                g = np.zeros(N * 8, dtype=np.int32) if r == 2 else None
                c.gather(x, g, root=2)
                sc = np.zeros(8, dtype=np.int32)
                c.scatter(ag if r == 3 else None, sc, root=3)
                res[r] = (red, ag, rs, a2a, g, sc)
                # a rank that destroys its communicator while a peer still reads from it can
                # break that peer's last call: finish together
                c.barrier()
        except BaseException as e:
            errs[r] = e
            traceback.print_exc()

    ts = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(N)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    check(not any(t.is_alive() for t in ts) and not any(errs), f"peer bootstrap: {errs}")
    if any(x is None for x in res):
        return
    xs = [np.arange(8, dtype=np.int32) + r for r in range(N)]
    cat = np.concatenate(xs)
    for r, (red, ag, rs, a2a, g, sc) in enumerate(res):
        check(np.array_equal(red, sum(xs) if r == 1 else xs[r]), f"reduce rank {r}")
        check(np.array_equal(ag, cat), f"allgather rank {r}")
        check(np.array_equal(rs, cat[8 * r:8 * r + 8]), f"reduce_scatter rank {r}")
        want = np.concatenate([cat[8 * r:8 * r + 8] + 100 * s for s in range(N)])
        check(np.array_equal(a2a, want), f"alltoall rank {r}")
        if r == 2:
            check(np.array_equal(g, cat), "gather")
        check(np.array_equal(sc, cat[8 * r:8 * r + 8]), f"scatter rank {r}")
    try:
        inca.Comm(0, 2, peer_table=table[:32], peer_listener=inca.PeerListener())
        check(False, "short peer_table accepted")
    except ValueError:
        pass
    check(inca.op_valid("int32", "band") and not inca.op_valid("fp32", "band"), "op_valid")


def main():
    print("libinca:", inca.library_path(), flush=True)
    test_peer_bootstrap()
    test_abi()
    test_names()
    for name, fn in (("numpy", test_numpy), ("torch", test_torch), ("errors", test_errors)):
        # a fresh switch per group: a tree must be fresh for new communicators
        with Switch(N) as sw:
            fn(sw)
            st = sw.read_stats()
            check(st["drops_total"] == 0, f"{name}: switch drops {st['drops_total']}")
            check(st["trees"][0]["auth"] == "on", f"{name}: the tree runs with packet authentication")
    if FAILS:
        print(f"{len(FAILS)} failures", flush=True)
        return 1
    print("all binding tests passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
