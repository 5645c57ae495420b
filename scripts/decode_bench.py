#!/usr/bin/env python3
"""Decode: a few query rows against a long K/V cache, measured in GB/s of K and V read.

A decode step (Nq = 1 .. 16 query rows a sequence, Nk keys) does 4·Nq·Nk·d FLOPs a head but reads
all of K and V once: it is bound by HBM bandwidth, not by the tensor cores. So this script counts
bytes, not FLOPs: bytes = 2 (K and V) x B x H_kv x Nk x d x element size. Q and O are left out
(2 x B x H_q x Nq x d elements: H_q Nq / (H_kv Nk) of K + V, 6.25% at the sweep's worst, GQA
32/8 with Nq = 16 and Nk = 1024, 0.4% or less with Nq = 1; each row says, qo_pct_of_kv). The
layout is the serving engines' K/V cache: K and V [B, Nk, H_kv, d], Q and O [B, Nq, H_q, d] (the
ladder's layout="bnhd"; SDPA sees the [B, H, N, d] views). For every shape of the sweep
(defaults: d = 128, fp16; B in 1, 8, 64; Nk in 1024 .. 131072; heads 32/8 (GQA) and 32/32 (MHA);
Nq in 1, 16) this times, in one process:

  * the ladder's kernels of --kernels (default "best,27": "best" is the library's choice for the
    shape, fl_best_kernel, the highest-numbered rung that takes it here; a rung named twice runs
    once), through the C API;
  * PyTorch SDPA with the FLASH_ATTENTION and CUDNN_ATTENTION backends forced, enable_gqa=True;
    a backend that refuses the call gets a row that says so (no time);
  * the ceiling: torch.ops.aten.sum over the flat K and V (fp32 accumulation), the time to read
    the same bytes from HBM with nothing else to do. Each implementation's row gives its GB/s as
    % of this (pct_of_ceiling): a fraction of what a plain read achieves on this GPU in this run,
    not of the data sheet's figure. At the smallest shapes (a few MB) the two reductions are
    bound by their launches, and a kernel can post more than 100%.

Timing is compare_sdpa's: CUDA events around one call, the L2 flushed before every timed run (so
even a K/V that would fit in the L2 is read from HBM; by default by reading a buffer twice its
size, which leaves the L2 clean as a decode step finds it, where --flush zeros writes the buffer
and charges each call for writing the dirty lines back: see docs/methodology.md, "The L2 flush"),
warm-up, median of --repeats; with --rounds
R (default 3) every implementation of a shape is timed R times, the order reversed in every other
round, and each keeps the median of its R medians. With --graphs every timed call (SDPA's, the
ceiling's, the ladder's) is captured once in a CUDA graph and timed by replaying it, as a decode
loop runs: what is left is the GPU's time and one launch, not the Python and the host-side checks
in front of each call, which at a 10-50 us call are most of an eager timing (a call that cannot be
captured is timed eagerly and its row says graph: false).

Masks: with Nq = 1 causal and non-causal are the same call, timed non-causal. With Nq > 1 the
rows are causal (unless --no-causal) as the ladder defines it, bottom-right aligned: query i sees
key j iff j <= i + Nk - Nq. SDPA's is_causal is top-left, so SDPA gets the mask
torch.nn.attention.bias.causal_lower_right(Nq, Nk); when a backend takes the shape without a mask
but refuses that one, the whole shape is timed non-causal for every implementation and its rows
say so (mask_note).

Checks: each ladder output against SDPA flash's (max |diff|, err_vs "sdpa_flash"): non-finite or
above 1e-2 fails the row, and the script exits 1 at the end. Every output is also compared on
batch element 0 with an fp32 reference computed here with the bottom-right mask (err_b0_fp32),
which catches an SDPA mask that is not the one asked for; where flash refuses the shape, that
comparison is the ladder's check (err_vs "fp32_b0").

A shape whose K + V exceed --max-gib (default 40) is skipped and listed. Rows are compare_sdpa's
(impl, dtype, d, causal, B, H, N = Nk, ms, tflops, max_err, repeats, ok) plus Nq, Nk, H_kv,
layout, kv_bytes, gbps, pct_of_ceiling; --out writes them as JSON with gpu, torch and date. The
last thing printed is a table: a line a shape, each implementation's GB/s, the ceiling, and the
best ladder kernel's GB/s over the best SDPA backend's. Run from the repository root on the GPU
machine:

  python3 scripts/decode_bench.py --out docs/results/h100_decode.json
  python3 scripts/decode_bench.py --b 8 --nk 32768 --heads 32/8 --nq 1 --kernels best,16,27
"""
import argparse
import datetime
import functools
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_sdpa as cs  # noqa: E402  (Timer, Ladder, select_kernels, max_err, json_safe)

print = functools.partial(print, flush=True)  # noqa: A001 - unbuffered progress output

SWEEP_B = (1, 8, 64)
SWEEP_NK = (1024, 4096, 8192, 32768, 131072)
SWEEP_HEADS = ((32, 8), (32, 32))
SWEEP_NQ = (1, 16)
ELEMENT_SIZE = {"fp16": 2, "bf16": 2}
GIB = 1 << 30
ERR_LIMIT = 1e-2  # a ladder output further than this from SDPA flash's fails
CEILING = "hbm_read_ceiling"
SDPA_BACKENDS = (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                 ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION))


# ------------------------------------------------------------------------------------------------
# Bytes, FLOPs, the sweep (pure: python/tests/test_scripts.py runs these without a GPU)
# ------------------------------------------------------------------------------------------------
def kv_bytes(b, h_kv, nk, d, elem=2):
    """Bytes of K and V: 2 tensors of B x H_kv x Nk x d elements."""
    return 2 * b * h_kv * nk * d * elem


def qo_bytes(b, h, nq, d, elem=2):
    """Bytes of Q read and O written, left out of the GB/s (2 x B x H_q x Nq x d elements)."""
    return 2 * b * h * nq * d * elem


def gbps(nbytes, ms):
    """nbytes moved in ms milliseconds, in GB/s (10^9 bytes a second)."""
    return nbytes / (ms * 1e-3) / 1e9


def visible_pairs(nq, nk, causal):
    """(query, key) pairs a head computes: all Nq x Nk, or with the bottom-right causal mask those
    with j <= i + Nk - Nq."""
    if not causal:
        return nq * nk
    return sum(max(0, min(nk, i + nk - nq + 1)) for i in range(nq))


def decode_flops(b, h, nq, nk, d, causal):
    """4 d FLOPs a visible pair (Q·Kᵀ and P·V), every head of every sequence."""
    return 4.0 * b * h * d * visible_pairs(nq, nk, causal)


def parse_ints(text, option):
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{option} takes comma-separated integers, got {text!r}")
    if not values or any(x < 1 for x in values):
        raise argparse.ArgumentTypeError(f"{option} takes integers >= 1, got {text!r}")
    return values


def parse_heads(text):
    """"32/8,32/32" -> [(32, 8), (32, 32)]: H_q/H_kv pairs, H_q a multiple of H_kv."""
    pairs = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        try:
            hq, hkv = (int(x) for x in item.split("/"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"--heads takes H_q/H_kv pairs, got {item!r}")
        if hq < 1 or hkv < 1 or hq % hkv:
            raise argparse.ArgumentTypeError(
                f"--heads: H_q must be a multiple of H_kv, both >= 1, got {item!r}")
        pairs.append((hq, hkv))
    if not pairs:
        raise argparse.ArgumentTypeError("--heads is empty")
    return pairs


def sweep(args):
    """The shapes in the order they run: heads, B, Nk, Nq innermost (one K/V serves every Nq).
    Each a dict B, H, H_kv, Nk, Nq, causal, kv_bytes, skip (None, or why not run)."""
    elem = ELEMENT_SIZE[args.dtype]
    shapes = []
    for hq, hkv in args.heads:
        for b in args.b:
            for nk in args.nk:
                nbytes = kv_bytes(b, hkv, nk, args.d, elem)
                skip = None
                if nbytes > args.max_gib * GIB:
                    skip = f"K+V {nbytes / GIB:.3g} GiB > --max-gib {args.max_gib:g}"
                for nq in args.nq:
                    shapes.append(dict(B=b, H=hq, H_kv=hkv, Nk=nk, Nq=nq,
                                       causal=nq > 1 and not args.no_causal, kv_bytes=nbytes,
                                       skip=skip))
    return shapes


def shape_label(s):
    return f"H={s['H']}/{s['H_kv']} B={s['B']} Nk={s['Nk']} Nq={s['Nq']}"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(cs.REPO, "build", "libflash_ladder.so"))
    ap.add_argument("--kernels", default="best,27",
                    help="comma-separated kernel numbers or names, and best: the library's "
                         "choice for each shape (default best,27)")
    ints = lambda option: (lambda text: parse_ints(text, option))  # noqa: E731
    ap.add_argument("--b", type=ints("--b"), default=list(SWEEP_B),
                    help="batch sizes (default 1,8,64)")
    ap.add_argument("--nk", type=ints("--nk"), default=list(SWEEP_NK),
                    help="K/V lengths (default 1024,4096,8192,32768,131072)")
    ap.add_argument("--nq", type=ints("--nq"), default=list(SWEEP_NQ),
                    help="query rows a sequence (default 1,16)")
    ap.add_argument("--heads", type=parse_heads, default=[tuple(h) for h in SWEEP_HEADS],
                    help="H_q/H_kv pairs (default 32/8,32/32)")
    ap.add_argument("--d", type=int, default=128, help="head dimension (default 128)")
    ap.add_argument("--dtype", choices=sorted(ELEMENT_SIZE), default="fp16")
    ap.add_argument("--no-causal", action="store_true",
                    help="Nq > 1 rows non-causal (default: causal, bottom-right)")
    ap.add_argument("--max-gib", type=float, default=40.0,
                    help="skip a shape whose K + V exceed this many GiB (default 40)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="balanced rounds a shape, the order reversed in every other one; each "
                         "implementation keeps the median of its rounds (default 3)")
    ap.add_argument("--repeats", type=int, default=30, help="timed runs a round (default 30)")
    ap.add_argument("--warmup-ms", type=float, default=100.0,
                    help="GPU time of untimed runs before each timing (default 100)")
    ap.add_argument("--flush", choices=cs.FLUSHES, default="reads",
                    help="how the L2 is emptied before a timed run (default reads; see above)")
    ap.add_argument("--graphs", action="store_true",
                    help="time every call by replaying a CUDA graph of it (see above)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default="", help="write the rows here as JSON")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    if args.max_gib <= 0:
        ap.error("--max-gib must be > 0")
    if args.d < 1:
        ap.error("--d must be >= 1")
    if not [k for k in args.kernels.split(",") if k.strip()]:
        ap.error("--kernels is empty")
    return args


# ------------------------------------------------------------------------------------------------
# One shape
# ------------------------------------------------------------------------------------------------
@torch.no_grad()
def reference_b0(q, k, v, causal, scale):
    """O of batch element 0 in fp32, [Nq, H_q, d], one KV head (and its group of query heads) at a
    time; the bottom-right mask when causal."""
    nq, hq, d = q.shape[1:]
    nk, hkv = k.shape[1], k.shape[2]
    group = hq // hkv
    out = torch.empty(nq, hq, d, dtype=torch.float32, device=q.device)
    i = torch.arange(nq, device=q.device)[:, None]
    j = torch.arange(nk, device=q.device)[None, :]
    hidden = j > i + nk - nq
    for h in range(hkv):
        kh, vh = k[0, :, h].float(), v[0, :, h].float()                        # [Nk, d]
        qh = q[0, :, h * group:(h + 1) * group].float().transpose(0, 1)       # [group, Nq, d]
        s = torch.matmul(qh, kh.t()) * scale                                  # [group, Nq, Nk]
        if causal:
            s = s.masked_fill(hidden, float("-inf"))
        out[:, h * group:(h + 1) * group] = torch.matmul(torch.softmax(s, -1), vh).transpose(0, 1)
    return out


def sdpa_call(backend, qv, kv, vv, causal, scale):
    """SDPA on the [B, H, N, d] views with `backend` forced; causal: the bottom-right mask."""
    if causal:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(qv.shape[2], kv.shape[2])
    else:
        mask = None

    def call():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qv, kv, vv, attn_mask=mask, scale=scale,
                                                  enable_gqa=True)
    return call


def ladder_name(ladder, number):
    return next(kn.name for kn in ladder.kernels if kn.number == number)


def first_line(e):
    return (str(e).splitlines() or [type(e).__name__])[0][:160]


def run_shape(args, ladder, wanted, timer, s, k, v):
    """The rows of one shape: SDPA's backends, the ceiling, the ladder's kernels, then the
    balanced rounds."""
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    b, hq, hkv, nq, nk, d = s["B"], s["H"], s["H_kv"], s["Nq"], s["Nk"], args.d
    scale = 1.0 / math.sqrt(d)
    gen = torch.Generator(device="cuda").manual_seed(args.seed + 7 * nq + nk)
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=dtype, generator=gen)
    qv, kv, vv = (t.transpose(1, 2) for t in (q, k, v))  # SDPA's [B, H, N, d] views
    elem = ELEMENT_SIZE[args.dtype]
    nbytes = s["kv_bytes"]
    causal, mask_note = s["causal"], None
    print(f"\n== {args.dtype} {shape_label(s)} d={d}{' causal' if causal else ''}: K+V "
          f"{nbytes / GIB:.3g} GiB (Q+O {100 * qo_bytes(b, hq, nq, d, elem) / nbytes:.2f}% more, "
          f"not counted)")

    # Which SDPA backends take the shape, and the mask: a backend that takes the call without a
    # mask but refuses the bottom-right one makes the whole shape non-causal.
    accepted, refused = [], {}
    for impl, backend in SDPA_BACKENDS:
        try:
            sdpa_call(backend, qv, kv, vv, False, scale)()
            torch.cuda.synchronize()
            accepted.append((impl, backend))
        except (RuntimeError, TypeError, ValueError) as e:
            refused[impl] = first_line(e)
    if causal:
        for impl, backend in accepted:
            try:
                sdpa_call(backend, qv, kv, vv, True, scale)()
                torch.cuda.synchronize()
            except (RuntimeError, TypeError, ValueError) as e:
                causal = False
                mask_note = (f"timed non-causal: {impl} refused causal_lower_right "
                             f"({first_line(e)})")
                print(f"  {mask_note}")
                break
    f = decode_flops(b, hq, nq, nk, d, causal)
    ref = reference_b0(q, k, v, causal, scale)
    common = dict(dtype=args.dtype, d=d, causal=causal, B=b, H=hq, H_kv=hkv, N=nk, Nq=nq, Nk=nk,
                  layout="bnhd", kv_bytes=nbytes, flush=args.flush,
                  qo_pct_of_kv=100.0 * qo_bytes(b, hq, nq, d, elem) / nbytes)
    if mask_note:
        common["mask_note"] = mask_note
    rows, timed = [], []

    def add_row(impl, ms, repeats, **extra):
        row = dict(impl=impl, **common, ms=ms, repeats=repeats, **extra)
        row["gbps"] = gbps(nbytes, ms) if ms else None
        row["tflops"] = f / (ms * 1e-3) / 1e12 if ms and impl != CEILING else None
        rows.append(row)
        return row

    flash_out = None
    for impl, backend in SDPA_BACKENDS:
        if impl in refused:
            print(f"  {impl:<22} refused: {refused[impl]}")
            add_row(impl, None, 0, refused=refused[impl])
            continue
        call = sdpa_call(backend, qv, kv, vv, causal, scale)
        out = call()
        graph_note = {}
        if args.graphs:
            call, graph_note["graph"] = cs.captured(call)
        ms, reps = timer.time(call)
        err_b0 = cs.max_err(out[0].transpose(0, 1), ref)
        if flash_out is None and impl == "sdpa_flash":
            flash_out = out
        if flash_out is not None:
            err, err_vs = cs.max_err(out, flash_out), "sdpa_flash"
        else:
            err, err_vs = err_b0, "fp32_b0"
        row = add_row(impl, ms, reps, max_err=err, err_vs=err_vs, err_b0_fp32=err_b0,
                      **graph_note)
        timed.append((row, call))

    kflat, vflat = k.view(-1), v.view(-1)

    def ceiling():
        torch.ops.aten.sum.default(kflat, dtype=torch.float32)
        torch.ops.aten.sum.default(vflat, dtype=torch.float32)
    ceiling_note = {}
    if args.graphs:
        ceiling, ceiling_note["graph"] = cs.captured(ceiling)
    ms, reps = timer.time(ceiling)
    timed.append((add_row(CEILING, ms, reps, **ceiling_note), ceiling))

    o = torch.empty_like(q)
    params = cs.flash_ladder.make_params(q, k, v, o, causal=causal, scale=scale, layout="bnhd")
    numbers, best = [], None
    for key in wanted:
        if key == "best":
            try:
                best = ladder.best(params)
            except cs.flash_ladder.UnsupportedError as e:
                print(f"  {'best':<22} no kernel takes the shape: {first_line(e)}")
                continue
            print(f"  best: {ladder_name(ladder, best)}")
            key = best
        if key not in numbers:
            numbers.append(key)
    for number in numbers:
        name = ladder_name(ladder, number)
        ok, why = ladder.supports(number, params)
        if not ok:
            print(f"  {name:<22} unsupported: {why}")
            continue
        o.fill_(float("nan"))  # poison: an output the kernel does not write fails the check
        run = functools.partial(ladder.run, number, params)
        run_note = {}
        if args.graphs:
            run, run_note["graph"] = cs.captured(run)
        ms, reps = timer.time(run)
        torch.cuda.synchronize()
        # The output of the last timed run is the one checked: against SDPA flash's, or where
        # flash refused the shape, batch element 0 against the fp32 reference.
        err_b0 = cs.max_err(o[0], ref)
        if flash_out is not None:
            err, err_vs = cs.max_err(o.transpose(1, 2), flash_out), "sdpa_flash"
        else:
            err, err_vs = err_b0, "fp32_b0"
        row = add_row(name, ms, reps, max_err=err, err_vs=err_vs, err_b0_fp32=err_b0,
                      tolerance=ERR_LIMIT, ok=math.isfinite(err) and err <= ERR_LIMIT,
                      best=number == best, **run_note)
        timed.append((row, run))

    cs.balanced_rounds(args.rounds, timer, timed)
    for r in rows:
        if r["ms"]:
            r["gbps"] = gbps(nbytes, r["ms"])
            r["tflops"] = f / (r["ms"] * 1e-3) / 1e12 if r["impl"] != CEILING else None
    ceiling_gbps = next(r["gbps"] for r in rows if r["impl"] == CEILING)
    for r in rows:
        if r["ms"]:
            r["pct_of_ceiling"] = 100.0 * r["gbps"] / ceiling_gbps
            spread = " ".join(f"{m:.4f}" for m in r.get("round_ms", []))
            err = "" if r.get("max_err") is None else (
                f"  err {r['max_err']:.3g} (b0 vs fp32 {r['err_b0_fp32']:.3g})")
            note = "  FAIL" if r.get("ok") is False else ""
            print(f"  {r['impl']:<22} {r['ms']:9.4f} ms {r['gbps']:8.1f} GB/s "
                  f"{r['pct_of_ceiling']:6.1f}% of ceiling{err}{note}  (rounds: {spread})")
    if flash_out is not None:
        flash_b0 = next(r["err_b0_fp32"] for r in rows if r["impl"] == "sdpa_flash")
        if not flash_b0 <= ERR_LIMIT:
            print(f"  warning: sdpa_flash is {flash_b0:.3g} from the fp32 reference on batch 0: "
                  f"its mask or GQA is not the one asked for, and the ladder's check against it "
                  f"means little")
    del q, o, ref, flash_out
    return rows


# ------------------------------------------------------------------------------------------------
# The table
# ------------------------------------------------------------------------------------------------
def peer_ratio(cell):
    """The best ladder row's GB/s over the best SDPA backend's, or None when either is missing (a
    ladder row that failed its check does not count)."""
    ladder = [r["gbps"] for r in cell if r.get("gbps") and not r["impl"].startswith("sdpa")
              and r["impl"] != CEILING and r.get("ok") is not False]
    peers = [r["gbps"] for r in cell if r.get("gbps") and r["impl"].startswith("sdpa")]
    return max(ladder) / max(peers) if ladder and peers else None


def print_table(rows):
    impls = sorted({r["impl"] for r in rows if r["impl"] != CEILING},
                   key=lambda s: (s.startswith("sdpa"), s))
    shapes = []
    for r in rows:
        key = (r["H"], r["H_kv"], r["B"], r["Nk"], r["Nq"], r["causal"])
        if key not in shapes:
            shapes.append(key)
    width = max([14] + [len(i) + 2 for i in impls])
    print("\nGB/s of K + V read (ladder/peer: the best ladder kernel over the best SDPA backend)")
    print(f"{'shape':<34}" + "".join(f"{i:>{width}}" for i in impls)
          + f"{'ceiling':>10}{'ladder/peer':>13}")
    for key in shapes:
        cell = [r for r in rows if (r["H"], r["H_kv"], r["B"], r["Nk"], r["Nq"], r["causal"])
                == key]
        by = {r["impl"]: r for r in cell}
        h, hkv, b, nk, nq, causal = key
        label = f"H={h}/{hkv} B={b} Nk={nk} Nq={nq}" + (" causal" if causal else "")
        if any(r.get("mask_note") for r in cell):
            label += " *"
        line = f"{label:<34}"
        for impl in impls:
            r = by.get(impl)
            t = "-" if r is None or not r.get("gbps") else f"{r['gbps']:.0f}"
            if r is not None and r.get("ok") is False:
                t += "!"
            line += f"{t:>{width}}"
        c = by.get(CEILING)
        ratio = peer_ratio(cell)
        line += f"{'-' if c is None else format(c['gbps'], '.0f'):>10}"
        line += f"{'-' if ratio is None else format(ratio, '.2f'):>13}"
        print(line)
    if any(r.get("mask_note") for r in rows):
        print("(* = timed non-causal: an SDPA backend refused the bottom-right mask; mask_note)")
    if any(r.get("ok") is False for r in rows):
        print("(! = output check failed)")


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
    ladder = cs.Ladder(args.lib)
    wanted = []
    for key in (x.strip() for x in args.kernels.split(",") if x.strip()):
        wanted += ["best"] if key == "best" else [kn[0] for kn in cs.select_kernels(ladder, key)]
    gpu = torch.cuda.get_device_name()
    print(f"GPU {gpu}, torch {torch.__version__}, kernels: {args.kernels}, L2 flush: {args.flush}")
    # compare_sdpa's Timer with a lower warm-up floor: its 200 ms, paid by every implementation
    # in every round, would take most of the sweep's time where a run is microseconds.
    timer = cs.Timer(3, args.repeats, 1.0, warmup_ms=args.warmup_ms, flush=args.flush)
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    rows, skipped = [], []
    kv_key, k, v = None, None, None
    for s in sweep(args):
        if s["skip"]:
            print(f"\n== {shape_label(s)}: skipped, {s['skip']}")
            skipped.append({key: s[key] for key in ("B", "H", "H_kv", "Nk", "Nq", "skip")})
            continue
        key = (s["B"], s["H_kv"], s["Nk"])
        if key != kv_key:  # one K/V cache for every Nq (and every H_q) of it
            k = v = None
            torch.cuda.empty_cache()
            gen = torch.Generator(device="cuda").manual_seed(args.seed + s["Nk"] + s["B"])
            k, v = (torch.randn(s["B"], s["Nk"], s["H_kv"], args.d, device="cuda", dtype=dtype,
                                generator=gen) for _ in range(2))
            kv_key = key
        rows += run_shape(args, ladder, wanted, timer, s, k, v)
    k = v = None

    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump({"gpu": gpu, "torch": torch.__version__, "flush": args.flush,
                       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                           timespec="seconds"),
                       "rows": cs.json_safe(rows), "skipped": skipped}, fh, indent=1)
            fh.write("\n")
        print(f"\nwrote {len(rows)} rows to {args.out}")
    print_table(rows)
    failed = [r for r in rows if r.get("ok") is False]
    if failed:
        print(f"{len(failed)} rows FAILED the output check: "
              + ", ".join(f"{r['impl']}@{shape_label(r)}" for r in failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
