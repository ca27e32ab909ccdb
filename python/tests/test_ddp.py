#!/usr/bin/python3
# test_ddp: 4-process PyTorch DDP training (examples/torch/ddp_train.py) with the INCA comm hook
# through a real inca-switch on loopback, against the same run with gloo's allreduce. Every
# rank must end bitwise identical, INCA must match gloo within float tolerance, and the INCA
# counters must show that the hook really sent every bucket through the switch. A fourth run
# kills the switch mid-training (algo "inc"): training must finish on the host path (failover),
# still bitwise identical on every rank and within tolerance of gloo.
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    import torch
except ImportError:
    print("SKIP: torch missing")
    sys.exit(77)

STEPS = 8
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, flush=True)


def run(script, tmp, tag, *extra):
    out = os.path.join(tmp, tag + ".json")
    save = os.path.join(tmp, tag)
    os.mkdir(save)
    cmd = [sys.executable, script, "--nprocs", "4", "--steps", str(STEPS), "--save-dir", save,
           "--json", out, "--bucket-cap-mb", "0.1", "--hidden", "384", "--layers", "3", "--batch", "16", *extra]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    dt = time.monotonic() - t0
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        sys.stdout.write(p.stderr[-4000:])
    check(p.returncode == 0, f"{tag}: exit status {p.returncode}")
    if p.returncode != 0:
        return None, None
    with open(out) as f:
        res = json.load(f)
    backend = "inca" if "inca" in extra else "gloo"
    params = [torch.load(os.path.join(save, f"params_{backend}_{r}.pt")) for r in range(4)]
    print(f"{tag}: {dt:.1f} s, median step {[round(r['step_ms'], 2) for r in res]} ms",
          flush=True)
    return res, params


def main():
    script = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch", "ddp_train.py")
    with tempfile.TemporaryDirectory(prefix="inca-ddp-test-") as tmp:
        # DDP's first bucket is always 1 MiB (torch 1.13); the 3-layer MLP of width 384 has
        # 1.3 MB of gradients, so with --bucket-cap-mb 0.1 each step has at least 2 buckets.
        runs = {
            "gloo": run(script, tmp, "gloo", "--backend", "gloo"),
            # "inc": every bucket through the switch (tuner off, libinca's inca_iallreduce)
            "inca-inc": run(script, tmp, "inca-inc", "--backend", "inca", "--switch", "auto",
                            "--algo", "inc"),
            # "inc", and the switch is SIGKILLed before step 3
            "inca-kill": run(script, tmp, "inca-kill", "--backend", "inca", "--switch", "auto",
                             "--algo", "inc", "--kill-switch-step", "3"),
            # AUTO: libinca's own nonblocking inca_iallreduce and its tuner
            "inca-auto": run(script, tmp, "inca-auto", "--backend", "inca", "--switch", "auto",
                             "--algo", "auto"),
        }
    if FAILS:
        print(f"{len(FAILS)} failures")
        return 1
    gres, gparams = runs["gloo"]
    for tag in ("inca-inc", "inca-auto", "inca-kill"):
        res, params = runs[tag]
        for r in range(4):
            check(torch.equal(params[r], params[0]), f"{tag}: rank {r} parameters differ from rank 0")
            check(res[r]["sha256_16"] == res[0]["sha256_16"], f"{tag}: rank {r} checksum")
            hc = res[r].get("hook_calls", 0)
            st = res[r].get("inca_stats", {})
            # 2+ buckets per step after the first (DDP rebuilds its buckets after step 1)
            check(hc >= 2 * STEPS - 1, f"{tag}: rank {r} hook calls {hc} < {2 * STEPS - 1}")
            check(st.get("inc_calls", 0) > 0, f"{tag}: rank {r} no INC call")
            check(st.get("rx_bad", 1) == 0, f"{tag}: rank {r} bad packets {st.get('rx_bad')}")
            if tag == "inca-kill":
                # steps 0-2 on the switch; the call that found it dead failed over, the rest
                # ran on the host path (no AM to rebuild a tree)
                fo = res[r].get("coll_counts", {}).get("failovers", 0)
                check(fo == 1, f"{tag}: rank {r} failovers {fo} != 1")
                check(3 <= st["inc_calls"] < hc and st["ring_calls"] >= hc - st["inc_calls"],
                      f"{tag}: rank {r} inc_calls {st['inc_calls']} ring_calls "
                      f"{st['ring_calls']} for {hc} hook calls")
            elif tag == "inca-inc":
                check(st["inc_calls"] == hc and st["ring_calls"] == 0,
                      f"{tag}: rank {r} inc_calls {st['inc_calls']} ring_calls "
                      f"{st['ring_calls']} != hook calls {hc}")
            else:
                # per-path calls of the library: every bucket was one AllReduce
                cc = res[r].get("coll_counts", {}).get("allreduce", {})
                check(sum(cc.values()) == hc, f"{tag}: rank {r} AllReduces {cc} for {hc} buckets")
        diff = (params[0].double() - gparams[0].double()).abs()
        scale = gparams[0].double().abs().max()
        print(f"{tag} vs gloo: max |diff| {float(diff.max()):.3g} (params up to {float(scale):.3g})",
              flush=True)
        check(torch.allclose(params[0], gparams[0], rtol=1e-4, atol=1e-5),
              f"{tag}: parameters differ from gloo beyond tolerance")
        check(abs(res[0]["final_loss"] - gres[0]["final_loss"]) < 1e-3, f"{tag}: final loss")
    for r in range(4):
        check(torch.equal(gparams[r], gparams[0]), f"gloo: rank {r} differs")
    # Training happened: the parameters left their initial values (same seed in every run).
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    check(not torch.allclose(gparams[0], torch.cat(
        [p.detach().reshape(-1) for p in _initial_model().parameters()]), atol=1e-4),
        "parameters did not change during training")
    if FAILS:
        print(f"{len(FAILS)} failures")
        return 1
    print("DDP with the INCA hook matches gloo; all ranks bitwise identical")
    return 0


def _initial_model():
    import argparse
    import ddp_train
    ns = argparse.Namespace(seed=0, inputs=64, hidden=384, layers=3, classes=10)
    return ddp_train.make_model(ns)


if __name__ == "__main__":
    sys.exit(main())
