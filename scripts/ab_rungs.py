#!/usr/bin/env python3
"""A/B of rungs in one process: each arm is a rung of a build (libflash_ladder.so), timed on the
same tensors in balanced alternating rounds, with cuDNN as the common yardstick.

  python3 scripts/ab_rungs.py --arm new=build/libflash_ladder.so:26 \\
      --arm old=/tmp/old/libflash_ladder.so:26 --d 128 --causal --rounds 8 --out ab.json

Each round times every arm once (and cuDNN, unless --no-peer); the arms' order rotates from
round to round and reverses every other round, so each arm follows each other arm as often as
it precedes it (listed second, a byte copy of an arm can read a few percent slow at long N).
For each shape it prints the median over rounds of each arm's time ratio to the FIRST arm
(> 1: faster than the first arm) and to cuDNN, and checks every arm's output: fp16/bf16 against
fp32 attention by FlashAttention-2's rule (at most twice the error of SDPA's flash backend plus
1e-4; N <= 2048), e4m3 (--dtype e4m3) by reporting each arm's error against fp32 attention on
the dequantised inputs, for the arms to be compared.
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_sdpa as cs  # noqa: E402
import fp8_bench  # noqa: E402


def arms_of(specs):
    arms, libs = [], {}
    for spec in specs:
        name, rest = spec.split("=", 1)
        path, number = rest.rsplit(":", 1)
        if path not in libs:
            libs[path] = cs.Ladder(path)
        arms.append((name, libs[path], int(number)))
    return arms


def round_orders(names, rounds):
    """Balanced order: rotate by one every two rounds, reverse every other round."""
    orders = []
    for r in range(rounds):
        k = (r // 2) % len(names)
        order = names[k:] + names[:k]
        orders.append(order[::-1] if r % 2 else order)
    return orders


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", action="append", required=True, help="NAME=LIB:KERNEL (first: base)")
    ap.add_argument("--dtype", choices=["fp16", "bf16", "e4m3"], default="fp16")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--n", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--no-peer", action="store_true", help="leave cuDNN out of the rounds")
    ap.add_argument("--out", default="", help="JSON file; rows are appended to it")
    args = ap.parse_args()

    arms = arms_of(args.arm)
    timer = cs.Timer(3, args.repeats, 1.0)
    half = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    rows, failed = [], 0
    for n in (int(x) for x in args.n.split(",")):
        b, h, d = cs.batch_for(n, args.heads), args.heads, args.d
        scale = d ** -0.5
        g = torch.Generator(device="cuda").manual_seed(1234 + n)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=half, generator=g)
                   for _ in range(3))
        keep = []
        if args.dtype == "e4m3":  # the arms read e4m3; the reference and cuDNN its dequantised
            (q8, dq), (k8, dk), (v8, dv) = (fp8_bench.quantize(x) for x in (q, k, v))
            q, k, v = ((x8.float() * s).half() for x8, s in ((q8, dq), (k8, dk), (v8, dv)))
        fns, outs = {}, {}
        for name, lib, number in arms:
            o = torch.full_like(q, float("nan"))
            if args.dtype == "e4m3":
                p, arrays = fp8_bench.fp8_params(q8, k8, v8, (dq, dk, dv), (q, k, v), o,
                                                 args.causal, scale)
                keep.append(arrays)
            else:
                p = cs.make_params(q, k, v, o, args.causal, scale)
            ok, why = lib.supports(number, p)
            if not ok:
                sys.exit(f"ab_rungs: {name} (rung {number}) refuses N = {n}: {why}")
            fns[name] = (lambda lib=lib, number=number, p=p: lib.run(number, p))
            outs[name] = o
            keep.append(p)
        if not args.no_peer:
            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    F.scaled_dot_product_attention(q, k, v, is_causal=args.causal, scale=scale)
            fns["cudnn"] = cudnn
        # Correctness of every arm on this shape (after a first run of each).
        errors, ok = {}, {}
        for name, fn in fns.items():
            if name != "cudnn":
                fn()
        torch.cuda.synchronize()
        ref = cs.reference_fp32(q, k, v, args.causal, scale) if n <= 2048 else None
        tol = None
        if ref is not None and args.dtype != "e4m3":
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                flash = F.scaled_dot_product_attention(q, k, v, is_causal=args.causal,
                                                       scale=scale)
            tol = 2 * cs.max_err(flash, ref) + 1e-4
        for name in outs:
            o = outs[name]
            finite = bool(torch.isfinite(o).all())
            errors[name] = cs.max_err(o, ref) if ref is not None else math.nan
            ok[name] = finite and (tol is None or errors[name] <= tol)
            failed += not ok[name]
        del ref
        # The rounds.
        tflops = {name: [] for name in fns}
        fl = cs.flops(b, h, n, d, args.causal)
        for order in round_orders(list(fns), args.rounds):
            for name in order:
                ms, _ = timer.time(fns[name])
                tflops[name].append(fl / (ms * 1e-3) / 1e12)
        base = arms[0][0]
        ratio = {name: statistics.median(x / y for x, y in zip(t, tflops[base]))
                 for name, t in tflops.items()}
        vs_cudnn = ({name: statistics.median(x / y for x, y in zip(t, tflops["cudnn"]))
                     for name, t in tflops.items()} if "cudnn" in tflops else {})
        med = {name: statistics.median(t) for name, t in tflops.items()}
        line = f"d={d} N={n:5d} B={b:2d}{' causal' if args.causal else ''} {args.dtype}:"
        for name in fns:
            line += f" | {name} {med[name]:6.1f}"
            if name != base:
                line += f" ({ratio[name]:.3f}x {base})"
            if name in vs_cudnn and name != "cudnn":
                line += f" [{vs_cudnn[name]:.3f}x cuDNN]"
            if name in errors:
                line += f" err {errors[name]:.2e}{'' if ok[name] else ' FAIL'}"
        print(line, flush=True)
        rows.append(dict(dtype=args.dtype, d=d, N=n, B=b, H=h, causal=args.causal,
                         arms={name: f"{lib.path if hasattr(lib, 'path') else ''}:{number}"
                               for name, lib, number in arms},
                         tflops=med, rounds=tflops, ratio_to_first=ratio, ratio_to_cudnn=vs_cudnn,
                         errors={k_: (None if math.isnan(e) else e) for k_, e in errors.items()},
                         ok=ok, tol=tol, gpu=torch.cuda.get_device_name()))
        del q, k, v, outs, fns, keep
        torch.cuda.empty_cache()
    if args.out:
        old = []
        if os.path.exists(args.out):
            with open(args.out) as f:
                old = json.load(f)
        with open(args.out, "w") as f:
            json.dump(old + rows, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
