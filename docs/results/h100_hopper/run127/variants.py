#!/usr/bin/env python3
"""Scratch (not committed): rung 23 built several ways, timed in one process with cuDNN and FA2,
alternating rounds. python3 variants.py --libs a=build-a/lib...,b=... --d 128 [--causal]"""
import argparse, json, math, os, statistics, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import compare_sdpa as cs
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
print = cs.print
ap = argparse.ArgumentParser()
ap.add_argument("--libs", required=True)
ap.add_argument("--d", type=int, default=128)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--n", default="1024,2048,4096,8192,16384")
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--repeats", type=int, default=15)
ap.add_argument("--kernel", type=int, default=23)
ap.add_argument("--out", default="")
ap.add_argument("--b", type=int, default=0)
ap.add_argument("--h", type=int, default=16)
ap.add_argument("--order", choices=["alternate", "balanced"], default="alternate")
args = ap.parse_args()
libs = [(x.split("=")[0], cs.Ladder(x.split("=")[1])) for x in args.libs.split(",")]
timer = cs.Timer(3, args.repeats, 1.0)
rows = []
for n in [int(x) for x in args.n.split(",")]:
    b = args.b or cs.batch_for(n); h = args.h; d = args.d
    g = torch.Generator(device="cuda").manual_seed(1234 + n)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    scale = 1 / math.sqrt(d)
    fl = cs.flops(b, h, n, d, args.causal)
    def sdpa(be):
        def f():
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(q, k, v, is_causal=args.causal, scale=scale)
        return f
    impls = {"cudnn": sdpa(SDPBackend.CUDNN_ATTENTION), "fa2": sdpa(SDPBackend.FLASH_ATTENTION)}
    flash = impls["fa2"]()
    ref = cs.reference_fp32(q, k, v, args.causal, scale) if n <= 2048 else None
    tol = 2 * cs.max_err(flash, ref) + 1e-4 if ref is not None else None
    errs = {}
    for name, lad in libs:
        o = torch.full_like(q, float("nan"))
        p = cs.make_params(q, k, v, o, args.causal, scale)
        ok, why = lad.supports(args.kernel, p)
        if not ok: print(name, "unsupported", why); continue
        lad.run(args.kernel, p); torch.cuda.synchronize()
        e = cs.max_err(o, ref if ref is not None else flash)
        errs[name] = (e, tol is None or e <= tol)
        impls[name] = (lambda lad=lad, p=p: lad.run(args.kernel, p))
        impls[name].keep = (o, p)
    del ref
    t = {k_: [] for k_ in impls}
    for r in range(args.rounds):
        order = list(impls.items())
        if args.order == "balanced":  # the builds rotated every two rounds: each follows each
            peers, mine = order[:2], order[2:]  # impl as often as the others do (run 126: with
            k_ = (r // 2) % max(1, len(mine))   # "alternate", a byte copy of A measured 2-4% slower
            order = peers + mine[k_:] + mine[:k_]  # at long N, listed second)
        if r % 2: order.reverse()
        for name, fn in order:
            ms, _ = timer.time(fn)
            t[name].append(fl / (ms * 1e-3) / 1e12)
    med = {k_: statistics.median(v_) for k_, v_ in t.items()}
    line = f"d={d} N={n:5d} B={b:2d}{' causal' if args.causal else ''}: cudnn {med['cudnn']:6.1f} fa2 {med['fa2']:6.1f}"
    for name, _ in libs:
        if name in med:
            line += f" | {name} {med[name]:6.1f} ({med[name]/med['cudnn']:.3f}x) err {errs[name][0]:.2e}{'' if errs[name][1] else ' FAIL'}"
    print(line)
    rows.append(dict(d=d, N=n, B=b, causal=args.causal, tflops=med, runs=t,
                     errors={k_: e[0] for k_, e in errs.items()}, ok={k_: e[1] for k_, e in errs.items()}, tol=tol))
    del q, k, v, flash; torch.cuda.empty_cache()
if args.out:
    old = json.load(open(args.out)) if os.path.exists(args.out) else []
    json.dump(old + rows, open(args.out, "w"), indent=1)
