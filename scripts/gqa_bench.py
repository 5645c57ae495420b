#!/usr/bin/env python3
"""Grouped-query attention in the [B, N, H, d] layout against cuDNN and FlashAttention-2.

The project's GQA target (docs/targets.md): 32 query heads over 8 KV heads, causal, BNHD,
d = 128, N = 4096 and 16384, the final Hopper rung at least as fast as cuDNN (PyTorch SDPA's cudnn
backend); and the same rung's BNHD and GQA runs within 3% of BHND. For each N this times, in one
process with compare_sdpa's Timer (L2 flushed before every run, median of the repeats):

  * the ladder's kernels (--kernels) on the BNHD GQA call, and on the same call in BHND;
  * SDPA's FLASH_ATTENTION and CUDNN_ATTENTION backends on the BNHD tensors (viewed as
    [B, H, N, d]), with enable_gqa=True; a backend that refuses GQA is timed on K/V expanded to
    H_q heads beforehand (the row says kv_expanded: the same FLOPs, more K/V bytes).

Each kernel's output is checked against the FlashAttention-2 output (max |diff| printed, a
non-finite output fails). Writes --out (JSON rows in compare_sdpa's format plus "layout",
"H_kv") and prints a table.

  python3 scripts/gqa_bench.py --kernels 16,27 --out docs/results/h100_gqa.json
"""
import argparse
import datetime
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_sdpa as cs  # noqa: E402  (Timer, Ladder, select_kernels, max_err)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(cs.REPO, "build", "libflash_ladder.so"))
    ap.add_argument("--kernels", default="16,27")
    ap.add_argument("--n", default="4096,16384")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=16384, help="B = max(1, tokens / N)")
    ap.add_argument("--no-causal", action="store_true")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    causal = not args.no_causal
    ladder = cs.Ladder(args.lib)
    kernels = cs.select_kernels(ladder, args.kernels)
    timer = cs.Timer(3, args.repeats, 1.0)
    h, hkv, d = args.heads, args.heads_kv, args.d
    rows = []
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for n in [int(x) for x in args.n.split(",")]:
        b = max(1, args.tokens // n)
        f = cs.flops(b, h, n, d, causal)
        scale = 1.0 / math.sqrt(d)
        gen = torch.Generator(device="cuda").manual_seed(7 + n)
        # BNHD storage; SDPA sees the [B, H, N, d] views.
        q = torch.randn(b, n, h, d, device="cuda", dtype=torch.float16, generator=gen)
        k = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16, generator=gen)
        v = torch.randn(b, n, hkv, d, device="cuda", dtype=torch.float16, generator=gen)
        qv, kv_, vv = (t.transpose(1, 2) for t in (q, k, v))
        common = dict(dtype="fp16", d=d, causal=causal, B=b, H=h, H_kv=hkv, N=n)
        print(f"\n== B={b} H={h}/{hkv} N={n} d={d}{' causal' if causal else ''}")

        def add(impl, layout, ms, err, **extra):
            row = dict(impl=impl, layout=layout, **common, ms=ms,
                       tflops=f / (ms * 1e-3) / 1e12, max_err=err, **extra)
            rows.append(row)
            print(f"  {impl:<20} {layout:<5} {ms:8.3f} ms {row['tflops']:7.1f} TFLOP/s  "
                  f"err vs FA2 {err:.3g}{' (K/V expanded)' if extra.get('kv_expanded') else ''}")

        flash_out = None
        for impl, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                              ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
            expanded = False

            def call(kk=kv_, vvv=vv, gqa=True):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(qv, kk, vvv, is_causal=causal, scale=scale,
                                                          enable_gqa=gqa)
            try:
                out = call()
                torch.cuda.synchronize()
                fn = call
            except RuntimeError:
                ke = kv_.repeat_interleave(h // hkv, dim=1)
                ve = vv.repeat_interleave(h // hkv, dim=1)
                expanded = True
                fn = lambda: call(ke, ve, False)  # noqa: E731
                out = fn()
                torch.cuda.synchronize()
            ms, _ = timer.time(fn)
            if flash_out is None:
                flash_out = out
            add(impl, "bnhd", ms, cs.max_err(out, flash_out), kv_expanded=expanded)
        for number, name, _ in kernels:
            for layout in ("bnhd", "bhnd"):
                if layout == "bnhd":
                    qq, kk, vvv = q, k, v
                else:
                    qq, kk, vvv = (t.transpose(1, 2).contiguous() for t in (q, k, v))
                o = torch.full_like(qq, float("nan"))
                params = cs.flash_ladder.make_params(qq, kk, vvv, o, causal=causal, scale=scale,
                                                     layout=layout)
                ok, why = ladder.supports(number, params)
                if not ok:
                    print(f"  {name:<20} {layout:<5} unsupported: {why}")
                    continue
                ms, _ = timer.time(lambda: ladder.run(number, params))
                torch.cuda.synchronize()
                got = o.transpose(1, 2) if layout == "bnhd" else o
                err = cs.max_err(got, flash_out)
                add(name, layout, ms, err, ok=math.isfinite(err) and err < 1e-2)
        del q, k, v, flash_out
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                           timespec="seconds"),
                       "rows": cs.json_safe(rows)}, fh, indent=1)
            fh.write("\n")
    failed = [r for r in rows if r.get("ok") is False]
    if failed:
        print(f"{len(failed)} rows FAILED the output check")
        sys.exit(1)


if __name__ == "__main__":
    main()
