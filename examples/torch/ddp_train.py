#!/usr/bin/python3
# ddp_train.py: train a small MLP on synthetic data with PyTorch DistributedDataParallel over N
# local processes, gradients averaged either by gloo (DDP's default) or by INCA through the
# DDP communication hook in python/inca/torch_hook.py. Prints a parameter checksum per rank.
#
#   /usr/bin/python3 examples/torch/ddp_train.py --backend inca --switch auto   # starts a switch
#   /usr/bin/python3 examples/torch/ddp_train.py --backend gloo
import argparse
import hashlib
import json
import os
import re
import signal
import socket
import sys
import tempfile
import time

try:
    import inca  # noqa: F401
except ImportError:  # run from the source tree: python/ is two levels up
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def project_version():
    """INCA's version: meson's project() in the source tree, else the bindings' own."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "..", "..", "meson.build")) as f:
            m = re.search(r"version\s*:\s*'([^']+)'", f.read())
            if m:
                return m.group(1)
    except OSError:
        pass
    return getattr(sys.modules.get("inca"), "__version__", "unknown")


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_model(args):
    torch.manual_seed(args.seed)
    layers, width = [], args.inputs
    for _ in range(args.layers):
        layers += [nn.Linear(width, args.hidden), nn.ReLU()]
        width = args.hidden
    layers.append(nn.Linear(width, args.classes))
    return nn.Sequential(*layers)


def make_data(args, rank):
    """Per-rank synthetic classification data labelled by a fixed random teacher."""
    g = torch.Generator().manual_seed(1000 + args.seed)
    teacher = torch.randn(args.inputs, args.classes, generator=g)
    g.manual_seed(2000 + 97 * args.seed + rank)
    x = torch.randn(args.steps, args.batch, args.inputs, generator=g)
    y = (x @ teacher).argmax(dim=-1)
    return x, y


def checksum(model):
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return flat, hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16], float(flat.double().sum())


def worker(rank, args, comm_kwargs, boot_addr, pg_addr, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{pg_addr}", rank=rank,
                            world_size=args.nprocs)
    model = make_model(args)
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    comm = state = None
    if args.backend == "inca":
        import inca
        from inca import torch_hook
        kw = dict(comm_kwargs[rank]) if comm_kwargs else {}
        comm = inca.Comm(rank, args.nprocs, boot_addr, **kw)
        state = torch_hook.register(ddp, comm, compress=args.compress,
                                    nonblocking=not args.blocking, algo=args.algo)
    x, y = make_data(args, rank)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    dist.barrier()
    step_times, loss = [], None
    for step in range(args.steps):
        if rank == 0 and args.switch_pid and step == args.kill_switch_step:
            os.kill(args.switch_pid, signal.SIGKILL)  # fault injection: the switch dies
            print(f"rank 0: killed inca-switch (pid {args.switch_pid}) before step {step}",
                  flush=True)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x[step]), y[step])
        loss.backward()
        opt.step()
        step_times.append(time.perf_counter() - t0)
    flat, digest, total = checksum(model)
    res = {"rank": rank, "backend": args.backend, "sha256_16": digest, "param_sum": total,
           "final_loss": float(loss), "params": flat.numel(),
           # median over steps after the first (bucket rebuild, lazy init)
           "step_ms": 1e3 * sorted(step_times[1:] or step_times)[len(step_times[1:] or
                                                                     step_times) // 2],
           "max_step_ms": 1e3 * max(step_times), "total_s": sum(step_times)}
    if state is not None:
        state.close()
        res["hook_calls"] = state.calls
        res["hook_bytes"] = state.bytes
        res["nonblocking"] = state.nonblocking
        res["inca_stats"] = comm.stats()
        try:
            res["coll_counts"] = comm.coll_counts()
        except NotImplementedError:
            pass
        comm.close()
    print(f"rank {rank}: backend={args.backend} params={res['params']} "
          f"checksum={digest} sum={total:.9g} loss={res['final_loss']:.5f} "
          f"step={res['step_ms']:.2f} ms (max {res['max_step_ms']:.1f}, total {res['total_s']:.2f} s)"
          + (f" hook_calls={res['hook_calls']} inc_calls={res['inca_stats']['inc_calls']}"
             f" ring_calls={res['inca_stats']['ring_calls']}"
             f" retransmits={res['inca_stats']['retransmits']}"
             f" timeouts={res['inca_stats']['timeouts']}" if state is not None else ""),
          flush=True)
    if args.save_dir:
        torch.save(flat, os.path.join(args.save_dir, f"params_{args.backend}_{rank}.pt"))
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", choices=["inca", "gloo"], default="inca",
                    help="who averages the gradients (default inca)")
    ap.add_argument("--nprocs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--inputs", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--switch", default="auto",
                    help="inca: 'auto' starts an inca-switch on loopback, 'none' uses the "
                         "host ring, or IP:PORT of a running switch (with --data-addrs)")
    ap.add_argument("--data-addrs",
                    help="per-rank data addresses, a comma list or a template with {r} "
                         "(rank) / {r10} (rank+10). With --switch IP:PORT the default "
                         "127.0.0.{r10}:4791 matches examples/switch-loopback.conf; with --am "
                         "the default 127.0.0.1:0 gives every rank its own free port (several "
                         "ranks on one host must not share an address and port)")
    ap.add_argument("--tree-id", type=int, default=1)
    ap.add_argument("--key", type=lambda s: int(s, 0), default=0x5EED0001)
    ap.add_argument("--am", help="inca-am address: join a group through the AM instead")
    ap.add_argument("--job-id", default="ddp-example")
    ap.add_argument("--job-credential", default="")
    ap.add_argument("--am-ca", help="CA of the AM's TLS certificate (default: $INCA_AM_CA)")
    ap.add_argument("--compress", choices=["fp16", "bf16"], help="send buckets in this type")
    ap.add_argument("--algo", default="auto",
                    help="inca: auto (library tuner: INC or host per size), inc, ring, ...")
    ap.add_argument("--blocking", action="store_true", help="blocking inca_allreduce per bucket")
    ap.add_argument("--switch-verbose", action="store_true")
    ap.add_argument("--kill-switch-step", type=int, default=-1,
                    help="with --switch auto: SIGKILL the switch before this step (failover "
                         "test; the ranks detect it within ~0.2 s: retx_limit 5, rto_max 20 ms)")
    ap.add_argument("--save-dir", help="save each rank's final flat parameters here (.pt); "
                                       "created if missing")
    ap.add_argument("--json", help="write all ranks' results (list) to this file")
    ap.add_argument("--version", action="version",
                    version=f"%(prog)s (INCA) {project_version()}")
    args = ap.parse_args()
    args.switch_pid = 0
    if args.nprocs < 1:
        ap.error(f"--nprocs {args.nprocs}: at least 1 process")
    if args.steps < 1:
        ap.error(f"--steps {args.steps}: at least 1 step")
    if args.save_dir:
        # Up front: a directory that cannot be made must not cost a whole training run.
        try:
            os.makedirs(args.save_dir, exist_ok=True)
        except OSError as e:
            ap.error(f"--save-dir {args.save_dir}: {e.strerror}")
        if not os.access(args.save_dir, os.W_OK | os.X_OK):
            ap.error(f"--save-dir {args.save_dir}: not writable")

    def data_addrs(default):
        spec = args.data_addrs or default
        if "{" in spec:
            addrs = [spec.format(r=r, r10=r + 10) for r in range(args.nprocs)]
        else:
            addrs = spec.split(",")
            if len(addrs) == 1 and addrs[0].endswith(":0"):  # a free port each
                addrs = addrs * args.nprocs
        if len(addrs) != args.nprocs:
            ap.error("--data-addrs needs one address per rank (or one IP:0 for all)")
        return addrs

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    sw = None
    comm_kwargs = None
    if args.backend == "inca":
        if args.am:
            addrs = data_addrs("127.0.0.1:0")
            if len(set(addrs)) < len(addrs) and not all(a.endswith(":0") for a in addrs):
                ap.error("--data-addrs: every rank needs its own address or port (port 0 "
                         "picks a free one)")
            comm_kwargs = [{"am_addr": args.am, "job_id": args.job_id,
                            "job_credential": args.job_credential, "data_addr": addrs[r],
                            "am_tls_ca": args.am_ca}
                           for r in range(args.nprocs)]
        elif args.switch == "auto":
            from inca.launch import Switch
            sw = Switch(args.nprocs, tree_id=args.tree_id, key=args.key,
                        verbose=args.switch_verbose)
            comm_kwargs = [sw.comm_kwargs(r) for r in range(args.nprocs)]
            if args.kill_switch_step >= 0:
                args.switch_pid = sw.proc.pid
                for kw in comm_kwargs:
                    kw.update(retx_limit=5, rto_max_us=20000)
            print(f"started inca-switch pid {sw.proc.pid} on {sw.addr} "
                  f"(members {', '.join(sw.member_addrs)})", flush=True)
        elif args.switch != "none":
            addrs = data_addrs("127.0.0.{r10}:4791")
            comm_kwargs = [{"switch_addr": args.switch, "data_addr": addrs[r],
                            "tree_id": args.tree_id, "key": args.key}
                           for r in range(args.nprocs)]
    boot_addr = f"127.0.0.1:{free_tcp_port()}"
    pg_addr = f"127.0.0.1:{free_tcp_port()}"
    out_dir = tempfile.mkdtemp(prefix="inca-ddp-")
    t0 = time.monotonic()
    try:
        mp.spawn(worker, args=(args, comm_kwargs, boot_addr, pg_addr, out_dir),
                 nprocs=args.nprocs, join=True)
    finally:
        if sw is not None and not args.switch_pid:
            st = sw.read_stats()
            tree = st["trees"][0] if st.get("trees") else {}
            print(f"inca-switch: contributions={tree.get('contributions')} "
                  f"aggregations={tree.get('aggregations')} drops={st.get('drops_total')}",
                  flush=True)
        if sw is not None:
            sw.cleanup()
    results = []
    for r in range(args.nprocs):
        with open(os.path.join(out_dir, f"rank{r}.json")) as f:
            results.append(json.load(f))
        os.unlink(os.path.join(out_dir, f"rank{r}.json"))
    os.rmdir(out_dir)
    same = len({r["sha256_16"] for r in results}) == 1
    print(f"{args.backend}: {args.nprocs} ranks, {args.steps} steps in "
          f"{time.monotonic() - t0:.1f} s; parameters identical on every rank: "
          f"{'yes' if same else 'NO'}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
