#!/usr/bin/env python3
"""Rung 28 (FP8 e4m3 inputs) against rung 27 (fp16), cuDNN and FlashAttention-2 (PyTorch SDPA,
fp16), timed in one process; and rung 28's error beside rung 27's on the same dequantised inputs.

For each shape (H = 16, the sweep's B: 16 up to N = 4096, then halved as N doubles):
  * Q, K, V = randn in fp16; their e4m3 versions with one descale factor per tensor, made as
    common/fp8.h says (scale = 448 / amax, e4m3 = round(x scale), descale = 1 / scale), with torch;
  * rung 28 runs on the e4m3 tensors (its V^T pre-pass and the upload of its factor table are in
    its time), O in fp16; rung 27 and SDPA's cudnn and flash backends on the fp16 tensors;
  * timing as scripts/compare_sdpa.py: CUDA events, warm-up, the median of --repeats, the L2
    flushed before each repeat; TFLOP/s count 4 B H N^2 d (halved causal) for every row;
  * for N <= --check-max-n: the error of rung 28 and of rung 27 against fp32 attention on the
    dequantised inputs (e4m3 x descale, the values both rungs are asked about: rung 27 gets them
    rounded to fp16, exact for these magnitudes but for the fp16 rounding of the product).

Writes a Google Benchmark-shaped JSON (--out): one entry per implementation and shape with
real_time in ms and the counters TFLOPs and err_vs_fp32 (the page quotes its printed table).
Run from the repository root on the GPU machine:

  python3 scripts/fp8_bench.py --d 128 --out docs/results/h100_fp8.json
  python3 scripts/fp8_bench.py --d 128 --causal --merge --out docs/results/h100_fp8.json
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import compare_sdpa as cs  # noqa: E402  (the Ladder wrapper, the Timer, the fp32 reference)
from flash_ladder import _capi  # noqa: E402

E4M3_MAX = 448.0


def quantize(x):
    """(e4m3 tensor, descale) with one factor for the whole tensor: common/fp8.h's recipe."""
    amax = float(x.float().abs().max())
    scale = E4M3_MAX / amax if amax > 0 else 1.0
    x8 = (x.float() * scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return x8, 1.0 / scale


def fp8_params(q8, k8, v8, descales, like, o, causal, scale):
    """Params of rung 28's call: the strides of `like` (fp16 tensors of the same shapes and
    layout, in elements), e4m3 inputs, fp16 O, host descale factors (kept alive by the caller
    through the returned arrays)."""
    p = cs.make_params(like[0], like[1], like[2], o, causal, scale)
    p.dtype = _capi.FL_E4M3
    p.q, p.k, p.v = q8.data_ptr(), k8.data_ptr(), v8.data_ptr()
    p.out_dtype = 0
    arrays = [(ctypes.c_float * 1)(d) for d in descales]
    p.q_descale, p.k_descale, p.v_descale = (ctypes.cast(a, ctypes.POINTER(ctypes.c_float))
                                             for a in arrays)
    p.descale_per_head = 0
    return p, arrays


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", default=os.path.join(REPO, "build", "libflash_ladder.so"))
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--n", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--max-seconds", type=float, default=2.0)
    ap.add_argument("--check-max-n", type=int, default=2048)
    ap.add_argument("--out", default="")
    ap.add_argument("--merge", action="store_true", help="add to --out's entries (same keys replaced)")
    args = ap.parse_args()

    torch.manual_seed(0)
    ladder = cs.Ladder(args.lib)
    numbers = {kn[0] for kn in ladder.kernels}
    for need in (27, 28):
        if need not in numbers:
            sys.exit(f"fp8_bench: rung {need} is not in {args.lib}")
    timer = cs.Timer(args.warmup, args.repeats, args.max_seconds)
    dev = torch.cuda.get_device_name()
    entries = []
    h, d, causal = args.heads, args.d, args.causal
    for n in (int(x) for x in args.n.split(",")):
        b = cs.batch_for(n, h)
        scale = d ** -0.5
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.half) for _ in range(3))
        (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
        deq = [(x8.float() * s).half() for x8, s in ((q8, dq), (k8, dk), (v8, dv))]
        o_fp8 = torch.empty_like(q)
        o_fp16 = torch.empty_like(q)
        p_fp8, keep = fp8_params(q8, k8, v8, (dq, dk, dv), deq, o_fp8, causal, scale)
        p_fp16 = cs.make_params(deq[0], deq[1], deq[2], o_fp16, causal, scale)
        fl = cs.flops(b, h, n, d, causal)
        impls = {
            "28_fp8 (e4m3)": lambda: ladder.run(28, p_fp8),
            "27_final_hopper (fp16)": lambda: ladder.run(27, p_fp16),
        }
        for name, backend in (("cuDNN (SDPA cudnn, fp16)", SDPBackend.CUDNN_ATTENTION),
                              ("FlashAttention-2 (SDPA flash, fp16)", SDPBackend.FLASH_ATTENTION)):
            def sdpa(backend=backend):
                with sdpa_kernel(backend):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
            impls[name] = sdpa
        ms = {}
        for name, fn in impls.items():
            try:
                ms[name], reps = timer.time(fn)
            except Exception as e:  # a backend that refuses the shape is skipped, with the reason
                print(f"  {name}: skipped ({str(e).splitlines()[0][:100]})")
                continue
            err = math.nan
            if n <= args.check_max_n and name[:2] in ("28", "27"):
                ref = cs.reference_fp32(deq[0], deq[1], deq[2], causal, scale)
                out = o_fp8 if name.startswith("28") else o_fp16
                fn()
                torch.cuda.synchronize()
                err = cs.max_err(out, ref)
            entries.append({
                "name": f"{name}/d:{d}/causal:{int(causal)}/B:{b}/H:{h}/N:{n}",
                "run_type": "iteration", "iterations": reps, "real_time": ms[name],
                "cpu_time": ms[name], "time_unit": "ms", "TFLOPs": fl / ms[name] / 1e9,
                "err_vs_fp32": err, "impl": name, "d": d, "causal": causal, "B": b, "H": h,
                "N": n})
        del keep
        row = {"N": n, "B": b}
        for name in impls:
            if name in ms:
                row[name] = fl / ms[name] / 1e9
        e_fp8 = next((e["err_vs_fp32"] for e in entries if e["N"] == n and e["impl"].startswith("28")), math.nan)
        e_fp16 = next((e["err_vs_fp32"] for e in entries if e["N"] == n and e["impl"].startswith("27")), math.nan)
        print(f"N={n:6d} B={b:2d} " + "  ".join(f"{k.split(' ')[0]} {row.get(k, math.nan):7.1f}" for k in impls)
              + f"  | 28/27 {row.get('28_fp8 (e4m3)', math.nan) / row.get('27_final_hopper (fp16)', math.nan):.2f}"
              + f"  28/cuDNN {row.get('28_fp8 (e4m3)', math.nan) / row.get('cuDNN (SDPA cudnn, fp16)', math.nan):.2f}"
              + f"  err28 {e_fp8:.2e} err27 {e_fp16:.2e}", flush=True)

    if args.out:
        doc = {"context": {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                           "gpu": dev, "torch": torch.__version__,
                           "executable": "scripts/fp8_bench.py", "library": "flash_ladder"},
               "benchmarks": []}
        if args.merge and os.path.exists(args.out):
            with open(args.out) as f:
                doc["benchmarks"] = [e for e in json.load(f)["benchmarks"]
                                     if e["name"] not in {x["name"] for x in entries}]
        doc["benchmarks"] += [{k: (None if isinstance(v, float) and math.isnan(v) else v)
                               for k, v in e.items()} for e in entries]
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
