#!/usr/bin/env python3
"""Scratch (not committed as is): one rung 23 build and cuDNN timed over a group of shapes in one
process, every shape in every round (the shapes' order reversed every other round, the impls'
too), so that a shape's time can be divided by another's round by round.
python3 shapes.py --lib /path/libflash_ladder.so --d 128 --shapes 16x2048x2048,16x2049x2048 --rounds 12
A shape is BxNqxNk (H = --h) or BxHxNqxNk."""
import argparse, json, math, statistics, sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import compare_sdpa as cs
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
print = cs.print
ap = argparse.ArgumentParser()
ap.add_argument("--lib", required=True)
ap.add_argument("--d", type=int, default=128)
ap.add_argument("--h", type=int, default=16)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--shapes", required=True)
ap.add_argument("--rounds", type=int, default=12)
ap.add_argument("--repeats", type=int, default=15)
ap.add_argument("--out", default="")
args = ap.parse_args()
lad = cs.Ladder(args.lib)
timer = cs.Timer(3, args.repeats, 1.0)
d = args.d
def parse(s):
    f = [int(x) for x in s.split("x")]
    return (f[0], args.h, f[1], f[2]) if len(f) == 3 else tuple(f)
shapes = [parse(s) for s in args.shapes.split(",")]
cases = []
for (b, h, nq, nk) in shapes:
    g = torch.Generator(device="cuda").manual_seed(1234 + nq + 7 * nk)
    q = torch.randn(b, h, nq, d, device="cuda", dtype=torch.float16, generator=g)
    k = torch.randn(b, h, nk, d, device="cuda", dtype=torch.float16, generator=g)
    v = torch.randn(b, h, nk, d, device="cuda", dtype=torch.float16, generator=g)
    scale = 1 / math.sqrt(d)
    def cudnn(q=q, k=k, v=v, scale=scale):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=args.causal, scale=scale)
    ref = cudnn()
    o = torch.full_like(q, float("nan"))
    p = cs.make_params(q, k, v, o, args.causal, scale)
    ok, why = lad.supports(23, p)
    assert ok, why
    lad.run(23, p); torch.cuda.synchronize()
    err = cs.max_err(o, ref)
    del ref
    cases.append(dict(shape=(b, h, nq, nk), impls={"cudnn": cudnn, "k23": (lambda p=p: lad.run(23, p))},
                      keep=(q, k, v, o, p), err=err))
    print(f"B={b} H={h} Nq={nq} Nk={nk}: k23 vs cudnn max err {err:.2e}")
t = {c["shape"]: {"cudnn": [], "k23": []} for c in cases}
for r in range(args.rounds):
    order = cases if r % 2 == 0 else cases[::-1]
    for c in order:
        impls = list(c["impls"].items())
        if (r // 2) % 2: impls.reverse()
        for name, fn in impls:
            ms, _ = timer.time(fn)
            t[c["shape"]][name].append(ms)
base = shapes[0]
med = lambda a, b: statistics.median([x / y for x, y in zip(a, b)])
rows = []
for s in shapes:
    b, h, nq, nk = s
    fl = 4.0 * b * h * nq * nk * d / (2 if args.causal else 1)
    line = f"d={d} B={b:2d} H={h:2d} Nq={nq:5d} Nk={nk:5d}{' causal' if args.causal else ''}:"
    for name in ("k23", "cudnn"):
        ms = statistics.median(t[s][name])
        line += f" {name} {ms * 1e3:8.1f} us {fl / (ms * 1e-3) / 1e12:6.1f} TF/s, x{med(t[s][name], t[base][name]):.3f} of base |"
    line += f" k23/cudnn time {med(t[s]['k23'], t[s]['cudnn']):.3f}"
    print(line)
    rows.append(dict(d=d, B=b, H=h, Nq=nq, Nk=nk, causal=args.causal, ms=t[s], flops=fl,
                     err=[c["err"] for c in cases if c["shape"] == s][0]))
if args.out:
    old = json.load(open(args.out)) if os.path.exists(args.out) else []
    json.dump(old + rows, open(args.out, "w"), indent=1)
