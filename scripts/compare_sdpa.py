#!/usr/bin/env python3
"""Every kernel of the ladder against PyTorch's scaled_dot_product_attention, timed in one process.

Loads build/libflash_ladder.so (tools/fl_api.h) through the package flash_ladder (python/) and,
for each shape of the project's sweep (d = 128, H = 16, N in 512..16384, B = 16 up to N = 4096,
8 at 8192, 4 at 16384):

  * times every registered kernel that supports the shape (fl_supports) and SDPA with each backend
    forced (FLASH_ATTENTION = FlashAttention-2, CUDNN_ATTENTION, EFFICIENT_ATTENTION; a backend
    that raises is skipped), with CUDA events: warm-up, then the median of repeats, the L2 cache
    flushed before every repeat by writing a buffer twice its size;
  * checks each output: for N <= 2048 against fp32 SDPA (math backend, inputs upcast), failing the
    row when max|out - ref32| > 2 * max|sdpa_flash - ref32| + 1e-4 (FlashAttention-2's rule); for
    larger N the error against SDPA's flash output is recorded, not judged;
  * with --rounds R > 1, times every implementation of a shape R times, the order reversed in
    every other round (round 0 as listed here, SDPA first; round 1 the ladder's last kernel first),
    and reports the median of the R medians: timed once, the implementations early in a shape
    come out faster than the late ones (docs/methodology.md, "Timing order");
  * skips what is too slow to matter: a kernel whose first run takes longer than --max-seconds is
    not repeated, and one whose predicted run time (scaled by FLOPs from its last shape) exceeds
    --max-seconds is not run at bigger shapes.

Writes docs/results/<gpu-slug>.json (see --out, --merge); scripts/results_table.py turns it into
the README table and the plot.

With --op backward (or both), the backward of the same shapes, in the same process: SDPA's flash
(FlashAttention-2) and cuDNN backends and the ladder's backward rungs (29 and up, through the C
API). Each is handed a forward run once outside the timed region (SDPA's autograd graph, kept; the
ladder's O and LSE from its best forward rung) and only the backward is timed:
torch.autograd.grad(out, (q, k, v), dout, retain_graph=True) for SDPA, fl_run_backward with its
workspace allocated beforehand for a rung. TFLOP/s count backward_flops, 2.5 times the forward's
(halved when causal). dQ, dK and dV are each held to FlashAttention-2's rule against fp32 (N <=
2048; SDPA flash's own error the yardstick), and each row carries its ratio to FA2 (SDPA flash)
and cuDNN timed in the same round. Balanced alternating rounds as the forward's (--rounds).
Rows go to docs/results/<gpu-slug>_backward.json (--out-backward), with the forward's
provenance fields (gpu, torch, date). Run from the repository root on the GPU machine:

  python3 scripts/compare_sdpa.py                          # fp16, d = 128, non-causal sweep
  python3 scripts/compare_sdpa.py --causal --merge
  python3 scripts/compare_sdpa.py --d 64 --merge --n 1024,4096 --kernels 3,8
  python3 scripts/compare_sdpa.py --op backward --rounds 3 --n 1024,4096,16384
"""
import argparse
import datetime
import functools
import json
import math
import os
import re
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

print = functools.partial(print, flush=True)  # noqa: A001 - unbuffered progress output

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))  # this checkout's package, installed or not
import flash_ladder  # noqa: E402
SWEEP_N = [512, 1024, 2048, 4096, 8192, 16384]
SDPA_BACKENDS = [
    ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
    ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
    ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION),
]
REF_MAX_N = 2048  # above this, no fp32 reference: errors are measured against sdpa_flash
KEY_FIELDS = ("impl", "dtype", "d", "causal", "B", "H", "N")
# The backward: SDPA's two fast backends, the yardsticks of the ratio columns.
SDPA_BACKWARD_BACKENDS = [
    ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
    ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
]
GRADS = ("dq", "dk", "dv")


# ------------------------------------------------------------------------------------------------
# The C API (tools/fl_api.h), through the package flash_ladder (python/): its Params is the one
# ctypes mirror of fl_attention_params in the repository
# ------------------------------------------------------------------------------------------------
class Ladder(flash_ladder.Library):
    """libflash_ladder (flash_ladder.Library: .kernels, .supports), run on torch's current
    stream."""

    def __init__(self, path):
        try:
            super().__init__(path)
        except (flash_ladder.FlashLadderError, flash_ladder.LibraryNotFoundError) as e:
            sys.exit(str(e))
        self._sizes, self._workspaces = {}, {}  # run()'s workspace sizes and buffers

    def with_workspace(self, number, params):
        """params with the workspace kernel `number` needs for their sizes (the split-key
        decode's): allocated at the first call of a (kernel, size) and kept, so that timed calls
        allocate nothing. A kernel that refuses the sizes gets none (its refusal comes later)."""
        key = (number, params.dtype, params.batch, params.heads_q, params.heads_kv,
               params.seqlen_q, params.seqlen_k, params.head_dim, params.causal)
        if key not in self._sizes:
            try:
                self._sizes[key] = self.workspace_size(number, params)
            except flash_ladder.FlashLadderError:
                self._sizes[key] = 0
        size = self._sizes[key]
        if size > params.workspace_bytes:
            if size not in self._workspaces:
                self._workspaces[size] = torch.empty(size, dtype=torch.uint8, device="cuda")
            params.workspace, params.workspace_bytes = self._workspaces[size].data_ptr(), size
        return params

    def supports(self, number, params):
        """Library.supports, the workspace included (with_workspace)."""
        return super().supports(number, self.with_workspace(number, params))

    def run(self, number, params):
        """fl_run on torch's current stream, with the workspace (with_workspace)."""
        super().run(number, self.with_workspace(number, params),
                    torch.cuda.current_stream().cuda_stream)

    def run_backward(self, number, bparams):
        super().run_backward(number, bparams, torch.cuda.current_stream().cuda_stream)


def make_params(q, k, v, o, causal, scale):
    """Params for torch tensors [B, H, N, d], strides as they are (flash_ladder.make_params: a
    head dimension that is not contiguous is refused with the rule)."""
    return flash_ladder.make_params(q, k, v, o, causal=causal, scale=scale)


# ------------------------------------------------------------------------------------------------
# Timing
# ------------------------------------------------------------------------------------------------
# How a Timer empties the L2 before a timed run: both move twice its size through it.
#  zeros: write the buffer. The L2 is left full of dirty lines, and the timed call pays for
#         writing them back to HBM as its own reads evict them (up to the L2's size: a few
#         microseconds where the call is bound by memory). A prefill or a training step finds
#         an L2 like that (the kernel before it wrote its activations).
#  reads: read the buffer (a sum). The L2 is left clean, as a decode step finds it (the kernels
#         before it read weights and write a few rows).
FLUSHES = ("zeros", "reads")


class Timer:
    def __init__(self, warmup, repeats, max_seconds, warmup_ms=200.0, flush="zeros"):
        if flush not in FLUSHES:
            raise ValueError(f"Timer: flush must be one of {FLUSHES}, not {flush!r}")
        self.warmup, self.repeats, self.max_seconds = warmup, repeats, max_seconds
        self.warmup_ms = warmup_ms  # the warm-up's floor of GPU time
        self.flush_mode = flush
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.flush_buf = torch.zeros(max(2 * l2, 1 << 20), dtype=torch.uint8, device="cuda")
        self._flush_half = self.flush_buf.view(torch.float16)  # read as fp16: a fast sum

    def flush(self):
        if self.flush_mode == "zeros":
            self.flush_buf.zero_()
        else:
            torch.ops.aten.sum.default(self._flush_half, dtype=torch.float32)

    def one(self, fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.flush()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def time(self, fn):
        """Median milliseconds of fn() and the number of timed runs.

        The first run (cold: module load, handles, autotuning) estimates the cost. Above
        max_seconds it is the measurement; otherwise the remaining warm-up runs follow, then at
        most `repeats` timed runs, fewer when they would take more than 5 * max_seconds.
        """
        first = self.one(fn)
        if first > 1e3 * self.max_seconds:
            return first, 1
        # Warm-up: at least `warmup` runs and at least warmup_ms of GPU work (0.2 s by default),
        # so that the clocks have ramped up after the host-side work between measurements.
        spent, runs = 0.0, 0
        while (runs < self.warmup - 1 or spent < self.warmup_ms) and runs < 2000:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            spent += start.elapsed_time(end)
            runs += 1
        repeats = max(1, min(self.repeats, int(5e3 * self.max_seconds / max(first, 1e-3))))
        return statistics.median(flushed_runs(fn, self.flush, repeats)), repeats


def flushed_runs(fn, flush, n):
    """The milliseconds of n runs of fn(), each after flush(), events around each run, all
    queued before one synchronisation (Timer.time's timed loop)."""
    pairs = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush()
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in pairs]


# ------------------------------------------------------------------------------------------------
# The sweep
# ------------------------------------------------------------------------------------------------
def batch_for(n, heads=16):
    """B = 16 up to N = 4096, then halved with every doubling of N (the seed blog's shapes)."""
    return 16 if n <= 4096 else max(1, 16 * 4096 // n)


def flops(b, h, n, d, causal):
    f = 4.0 * b * h * n * n * d
    return f / 2 if causal else f


def gpu_slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@torch.no_grad()
def reference_fp32(q, k, v, causal, scale):
    """fp32 attention (SDPA math backend on upcast inputs), one batch element at a time."""
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    with sdpa_kernel(SDPBackend.MATH):
        for b in range(q.shape[0]):
            out[b:b + 1] = F.scaled_dot_product_attention(
                q[b:b + 1].float(), k[b:b + 1].float(), v[b:b + 1].float(), is_causal=causal,
                scale=scale)
    return out


@torch.no_grad()
def reference_rounded_scores(q, k, v, causal, scale):
    """Attention with S = scale·Q·Kᵀ and P rounded to the input dtype (fp32 arithmetic otherwise),
    O rounded to it: the precision of an unfused fp16/bf16 implementation. One batch element at a
    time."""
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    nq, nk = q.shape[2], k.shape[2]
    for b in range(q.shape[0]):
        s = (torch.matmul(q[b].float(), k[b].float().transpose(-1, -2)) * scale).to(q.dtype).float()
        if causal:  # bottom-right aligned: key j visible to query i when j <= i + nk - nq
            i = torch.arange(nq, device=q.device)[:, None]
            j = torch.arange(nk, device=q.device)[None, :]
            s = s.masked_fill(j > i + nk - nq, float("-inf"))
        p = torch.softmax(s, dim=-1).to(q.dtype).float()
        out[b] = torch.matmul(p, v[b].float()).to(q.dtype)
    return out


def max_err(out, ref):
    """max |out - ref| in fp32, or inf when out has a non-finite element."""
    if not bool(torch.isfinite(out).all()):
        return math.inf
    return float((out.float() - ref.float()).abs().max())


def select_kernels(ladder, wanted, pool=None, option="--kernels"):
    """The kernels of `pool` (default: the forward rungs) that `wanted` names ("3,16_final");
    all of them when it is empty."""
    pool = ladder.kernels if pool is None else pool
    if not wanted:
        return pool
    chosen = []
    for key in wanted.split(","):
        key = key.strip()
        match = [kn for kn in pool
                 if key == kn[1] or (key.isdigit() and int(key) == kn[0])]
        if not match:
            sys.exit(f"{option}: no kernel {key!r} in {[kn[1] for kn in pool]}")
        chosen += match
    return chosen


def captured(fn):
    """fn as the replay of a CUDA graph of one call of it (warmed up on a side stream first, as
    torch asks), and True; fn itself and False where the capture fails. A decode loop runs its
    step in a graph: timing the replay leaves the host's work in front of a call out."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    except RuntimeError as e:
        why = (str(e).splitlines() or [type(e).__name__])[0][:160]
        print(f"  not captured, timed eagerly: {why}")
        torch.cuda.synchronize()
        return fn, False
    return graph.replay, True


def balanced_rounds(rounds, timer, timed):
    """Rounds 1 .. R - 1 after round 0 (which checked the outputs): `timed` is [(row, the timed
    call)] in round 0's order, reversed in every other round; each row's ms becomes the median of
    its rounds' medians, those in round_ms."""
    for row, _ in timed:
        row["round_ms"] = [row["ms"]]
    for r in range(1, rounds):
        for row, fn in (reversed(timed) if r % 2 else timed):
            row["round_ms"].append(timer.time(fn)[0])
    torch.cuda.synchronize()
    for row, _ in timed:
        row["ms"] = statistics.median(row["round_ms"])


def retime_rounds(args, timer, timed, f):
    """balanced_rounds over --rounds (nothing for one round), then each row's TFLOP/s and rounds
    printed."""
    if args.rounds <= 1:
        return
    balanced_rounds(args.rounds, timer, timed)
    print(f"  median of {args.rounds} rounds (order reversed in every other round):")
    for row, _ in timed:
        row["tflops"] = f / (row["ms"] * 1e-3) / 1e12
        spread = " ".join(f"{m:.3f}" for m in row["round_ms"])
        print(f"  {row['impl']:<24} {row['ms']:9.3f} ms {row['tflops']:7.1f} TFLOP/s"
              f"  (rounds: {spread} ms)")


def run_shape(args, ladder, kernels, timer, n, predicted_too_slow, last_time):
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    b = args.batch or batch_for(n, args.heads)
    h, d, causal = args.heads, args.d, args.causal
    scale = 1.0 / math.sqrt(d)
    f = flops(b, h, n, d, causal)
    common = {"dtype": args.dtype, "d": d, "causal": causal, "B": b, "H": h, "N": n}
    print(f"\n== {args.dtype} B={b} H={h} N={n} d={d}{' causal' if causal else ''} "
          f"({f / 1e12:.2f} TFLOP)")

    gen = torch.Generator(device="cuda").manual_seed(args.seed + n)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype, generator=gen)
               for _ in range(3))
    ref32 = reference_fp32(q, k, v, causal, scale) if n <= REF_MAX_N else None

    rows = []
    timed = []  # (row, the timed call), in round 0's order, for the rounds after it

    def add_row(impl, ms, repeats, err, **extra):
        row = dict(impl=impl, **common, ms=ms, tflops=f / (ms * 1e-3) / 1e12 if ms else None,
                   max_err=err, repeats=repeats, **extra)
        rows.append(row)
        ms_s = f"{ms:9.3f} ms {row['tflops']:7.1f} TFLOP/s" if ms else f"{'-':>29}"
        note = "" if extra.get("ok", True) else "  FAIL"
        print(f"  {impl:<24} {ms_s}  err {err:.3g} ({extra.get('err_vs', '')}){note}")
        return row

    # SDPA backends first: the flash output is the yardstick for large N.
    flash_out, flash_err32 = None, None
    for impl, backend in SDPA_BACKENDS:
        def sdpa(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        try:
            out = sdpa()
            torch.cuda.synchronize()
        except RuntimeError as e:  # backend not available for this shape/dtype/GPU
            print(f"  {impl:<24} skipped: {str(e).splitlines()[0][:120]}")
            continue
        ms, reps = timer.time(sdpa)
        if impl == "sdpa_flash":
            flash_out = out
        if ref32 is not None:
            err = max_err(out, ref32)
            if impl == "sdpa_flash":
                flash_err32 = err
            row = add_row(impl, ms, reps, err, err_vs="fp32")
        elif flash_out is not None:
            row = add_row(impl, ms, reps, max_err(out, flash_out), err_vs="sdpa_flash")
        else:
            row = add_row(impl, ms, reps, float("nan"), err_vs="none")
        timed.append((row, sdpa))
        del out

    tolerance = 2 * flash_err32 + 1e-4 if flash_err32 is not None else None
    # The unfused baseline (00) stores the scaled scores S, and P, in the input dtype: it is held
    # to the error of a reference that rounds both (as the C++ harness does, RefPrecision::
    # kLowpScores; docs/methodology.md), not to flash's.
    unfused_tolerance = None
    if ref32 is not None:
        unfused_tolerance = 2 * max_err(reference_rounded_scores(q, k, v, causal, scale), ref32) + 1e-4
    o = torch.empty_like(q)
    params = make_params(q, k, v, o, causal, scale)
    for number, name, _title in kernels:
        ok, why = ladder.supports(number, params)
        if not ok:
            print(f"  {name:<24} unsupported: {why}")
            continue
        if name in predicted_too_slow:
            print(f"  {name:<24} skipped: predicted {predicted_too_slow[name]:.1f} s per run "
                  f"> --max-seconds {args.max_seconds}")
            continue
        if name in last_time:  # predict from the last shape, scaled by FLOPs
            ms0, f0 = last_time[name]
            predicted = ms0 * 1e-3 * f / f0
            if predicted > args.max_seconds:
                predicted_too_slow[name] = predicted
                print(f"  {name:<24} skipped: predicted {predicted:.1f} s per run "
                      f"> --max-seconds {args.max_seconds}")
                continue
        o.fill_(float("nan"))  # poison: an output the kernel does not write fails the check
        run = functools.partial(ladder.run, number, params)
        ms, reps = timer.time(run)
        torch.cuda.synchronize()
        last_time[name] = (ms, f)
        # The output of the last timed run is the one checked.
        if ref32 is not None:
            err = max_err(o, ref32)
            tol = unfused_tolerance if number == 0 else tolerance
            passed = err <= tol if tol is not None else math.isfinite(err)
            row = add_row(name, ms, reps, err, err_vs="fp32", tolerance=tol, ok=passed)
        elif flash_out is not None:
            err = max_err(o, flash_out)
            row = add_row(name, ms, reps, err, err_vs="sdpa_flash", ok=math.isfinite(err))
        else:
            err = math.inf if not bool(torch.isfinite(o).all()) else float("nan")
            row = add_row(name, ms, reps, err, err_vs="none",
                          ok=math.isfinite(err) or math.isnan(err))
        timed.append((row, run))
    retime_rounds(args, timer, timed, f)
    del q, k, v, o, ref32, flash_out
    torch.cuda.empty_cache()
    return rows


# ------------------------------------------------------------------------------------------------
# The backward
# ------------------------------------------------------------------------------------------------
def backward_flops(b, h, n, d, causal):
    """backward_flops (common/attention.h): 2.5 times the forward's FLOPs (five GEMMs against
    two), halved when causal as those are."""
    return 2.5 * flops(b, h, n, d, causal)


def reference_grads_fp32(q, k, v, dout, causal, scale):
    """(dQ, dK, dV) in fp32: SDPA's math backend on upcast inputs, one batch element at a time."""
    out = tuple(torch.empty(t.shape, dtype=torch.float32, device=t.device) for t in (q, k, v))
    with torch.enable_grad(), sdpa_kernel(SDPBackend.MATH):
        for b in range(q.shape[0]):
            qb, kb, vb = (t[b:b + 1].detach().float().requires_grad_() for t in (q, k, v))
            o = F.scaled_dot_product_attention(qb, kb, vb, is_causal=causal, scale=scale)
            grads = torch.autograd.grad(o, (qb, kb, vb), dout[b:b + 1].float())
            for dst, g in zip(out, grads):
                dst[b:b + 1] = g
    return out


def run_shape_backward(args, ladder, kernels, timer, n):
    """The backward of one shape: SDPA flash and cuDNN, then every backward rung in `kernels`
    that takes it; rows with the ratios to FA2 (sdpa_flash) and cuDNN (sdpa_cudnn)."""
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    b = args.batch or batch_for(n, args.heads)
    h, d, causal = args.heads, args.d, args.causal
    scale = 1.0 / math.sqrt(d)
    f = backward_flops(b, h, n, d, causal)
    common = {"op": "backward", "dtype": args.dtype, "d": d, "causal": causal, "B": b, "H": h,
              "N": n}
    print(f"\n== backward {args.dtype} B={b} H={h} N={n} d={d}{' causal' if causal else ''} "
          f"({f / 1e12:.2f} TFLOP)")

    gen = torch.Generator(device="cuda").manual_seed(args.seed + n)
    q, k, v, dout = (torch.randn(b, h, n, d, device="cuda", dtype=dtype, generator=gen)
                     for _ in range(4))
    ref32 = reference_grads_fp32(q, k, v, dout, causal, scale) if n <= REF_MAX_N else None

    rows = []
    timed = []  # (row, the timed call), in round 0's order, for the rounds after it
    keep = []   # what the timed calls use by pointer (the ladder's workspaces), alive to the end
    flash_grads, tolerance = None, None

    def add_row(impl, ms, repeats, grads):
        """The row of one implementation; its gradients judged against fp32 (N <= REF_MAX_N,
        FlashAttention-2's rule with sdpa_flash's error as the yardstick, per gradient) or
        recorded against sdpa_flash's."""
        row = dict(impl=impl, **common, ms=ms, tflops=f / (ms * 1e-3) / 1e12, repeats=repeats)
        if ref32 is not None:
            errs = {g: max_err(x, r) for g, x, r in zip(GRADS, grads, ref32)}
            row["err_vs"] = "fp32"
            if tolerance is not None:
                row.update({f"tolerance_{g}": tolerance[g] for g in GRADS})
                row["ok"] = all(errs[g] <= tolerance[g] for g in GRADS)
            else:
                row["ok"] = all(math.isfinite(e) for e in errs.values())
        elif flash_grads is not None:
            errs = {g: max_err(x, r) for g, x, r in zip(GRADS, grads, flash_grads)}
            row.update(err_vs="sdpa_flash", ok=all(math.isfinite(e) for e in errs.values()))
        else:
            errs = {g: (math.inf if not bool(torch.isfinite(x).all()) else float("nan"))
                    for g, x in zip(GRADS, grads)}
            row.update(err_vs="none", ok=not any(math.isinf(e) for e in errs.values()))
        row.update({f"err_{g}": errs[g] for g in GRADS})
        row["max_err"] = max(errs.values())
        rows.append(row)
        note = "" if row["ok"] else "  FAIL"
        print(f"  {impl:<24} {ms:9.3f} ms {row['tflops']:7.1f} TFLOP/s  err dq {errs['dq']:.3g} "
              f"dk {errs['dk']:.3g} dv {errs['dv']:.3g} ({row['err_vs']}){note}")
        return row

    # SDPA: the forward once, outside the timed region (its autograd graph kept), then the
    # backward alone, timed.
    for impl, backend in SDPA_BACKWARD_BACKENDS:
        qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
        try:
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=scale)
            grads = torch.autograd.grad(out, (qs, ks, vs), dout, retain_graph=True)
            torch.cuda.synchronize()
        except RuntimeError as e:  # backend not available for this shape/dtype/GPU
            print(f"  {impl:<24} skipped: {str(e).splitlines()[0][:120]}")
            continue

        def backward(out=out, inputs=(qs, ks, vs)):
            return torch.autograd.grad(out, inputs, dout, retain_graph=True)

        ms, reps = timer.time(backward)
        if impl == "sdpa_flash":
            if ref32 is not None:
                tolerance = {g: 2 * max_err(x, r) + 1e-4 for g, x, r in zip(GRADS, grads, ref32)}
            row = add_row(impl, ms, reps, grads)
            flash_grads = grads
        else:
            row = add_row(impl, ms, reps, grads)
        timed.append((row, backward))
        keep.append(out)

    # The ladder: O and the LSE from its best forward rung (once, untimed), the workspace of
    # each rung allocated before its timing, then fl_run_backward alone, timed.
    o = torch.empty_like(q)
    lse = torch.empty(b, h, n, dtype=torch.float32, device="cuda")
    fparams = flash_ladder.make_params(q, k, v, o, causal=causal, scale=scale, lse=lse)
    try:
        forward = ladder.best(fparams)
    except flash_ladder.UnsupportedError as e:
        print(f"  no forward rung takes the shape, no backward rung is timed: {e}")
        kernels = []
    else:
        ladder.run(forward, fparams)
        torch.cuda.synchronize()
        # The gradients are judged with this O and LSE: a build without the fused forward rungs
        # gives the unfused baseline's (scores rounded to the input type), and looser gradients.
        print(f"  O and LSE from forward rung {forward}")
    dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
    for number, name, _title in kernels:
        bparams = flash_ladder.make_backward_params(q, k, v, o, lse, dout, dq, dk, dv,
                                                    causal=causal, scale=scale)
        try:
            size = ladder.backward_workspace_size(number, bparams.fwd)
        except flash_ladder.FlashLadderError as e:
            print(f"  {name:<24} unsupported: {e}")
            continue
        if size > 0:
            workspace = torch.empty(size, dtype=torch.uint8, device="cuda")
            keep.append(workspace)
            bparams.workspace, bparams.workspace_bytes = workspace.data_ptr(), size
        ok, why = ladder.supports_backward(number, bparams)
        if not ok:
            print(f"  {name:<24} unsupported: {why}")
            continue
        for g in (dq, dk, dv):
            g.fill_(float("nan"))  # poison: a gradient the rung does not write fails the check
        run = functools.partial(ladder.run_backward, number, bparams)
        ms, reps = timer.time(run)
        torch.cuda.synchronize()
        # The gradients of the last timed run are the ones checked.
        row = add_row(name, ms, reps, (dq, dk, dv))
        row["forward_rung"] = forward
        timed.append((row, run))

    retime_rounds(args, timer, timed, f)
    # Ratios to FA2 and cuDNN of the same shape and round: theirs ms / ours ms (> 1: faster).
    by_impl = {r["impl"]: r for r in rows}
    for r in rows:
        for col, yardstick in (("ratio_fa2", "sdpa_flash"), ("ratio_cudnn", "sdpa_cudnn")):
            if yardstick in by_impl:
                r[col] = by_impl[yardstick]["ms"] / r["ms"]
    del q, k, v, dout, o, lse, dq, dk, dv, ref32, flash_grads, keep
    torch.cuda.empty_cache()
    return rows


def print_backward_table(rows):
    ns = sorted({r["N"] for r in rows})
    impls = sorted({r["impl"] for r in rows}, key=lambda s: (s.startswith("sdpa"), s))
    cell = {(r["impl"], r["N"]): r for r in rows}
    print("\nbackward TFLOP/s (x FA2, x cuDNN)")
    print(f"{'':<24}" + "".join(f"{n:>24}" for n in ns))
    for impl in impls:
        line = f"{impl:<24}"
        for n in ns:
            r = cell.get((impl, n))
            if r is None:
                t = "-"
            else:
                ratios = ", ".join(f"{r[c]:.2f}" if c in r else "-"
                                   for c in ("ratio_fa2", "ratio_cudnn"))
                t = f"{r['tflops']:.1f} ({ratios})" + ("!" if r.get("ok") is False else "")
            line += f"{t:>24}"
        print(line)
    if any(r.get("ok") is False for r in rows):
        print("(! = gradient check failed)")


def row_key(row):
    return tuple(row.get(k) for k in KEY_FIELDS)


def write_results(path, rows, gpu, merge):
    """rows into the JSON at path ({gpu, torch, date, rows}); with merge, into what is there,
    replacing the rows of the same (impl, dtype, d, causal, B, H, N)."""
    doc = {"gpu": gpu, "torch": torch.__version__, "rows": []}
    if merge and os.path.exists(path):
        with open(path) as fh:
            doc = json.load(fh)
        if doc.get("gpu") not in (None, gpu):
            print(f"warning: merging {gpu} results into {path}, written on {doc['gpu']}")
    new_keys = {row_key(r) for r in rows}
    from results_table import expand_rows  # the rows as written, or as stored compactly
    old = expand_rows(doc.get("rows", []))
    doc["rows"] = [r for r in old if row_key(r) not in new_keys] + json_safe(rows)
    doc["rows"].sort(key=lambda r: (r["dtype"], r["d"], r["causal"], r["N"],
                                    r["impl"].startswith("sdpa"), r["impl"]))
    doc.update(gpu=gpu, torch=torch.__version__,
               date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")


def json_safe(rows):
    """inf/nan are not JSON: write them as null."""
    clean = []
    for r in rows:
        clean.append({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                      for k, v in r.items()})
    return clean


def print_table(rows):
    ns = sorted({r["N"] for r in rows})
    impls = sorted({r["impl"] for r in rows}, key=lambda s: (s.startswith("sdpa"), s))
    cell = {(r["impl"], r["N"]): r for r in rows}
    print("\nTFLOP/s" + "".join(f"{n:>9}" for n in ns))
    for impl in impls:
        line = f"{impl:<24}"
        for n in ns:
            r = cell.get((impl, n))
            t = "-" if r is None or not r.get("tflops") else f"{r['tflops']:.1f}"
            if r is not None and r.get("ok") is False:
                t += "!"
            line += f"{t:>9}"
        print(line)
    if any(r.get("ok") is False for r in rows):
        print("(! = output check failed)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(REPO, "build", "libflash_ladder.so"))
    ap.add_argument("--d", type=int, default=128, help="head dimension (default 128)")
    ap.add_argument("--heads", type=int, default=16, help="H (default 16)")
    ap.add_argument("--batch", type=int, default=0, help="B for every N (default: the sweep's)")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--n", default=",".join(map(str, SWEEP_N)), help="comma-separated N list")
    ap.add_argument("--kernels", default="",
                    help="comma-separated kernel numbers or names (default: every kernel built)")
    ap.add_argument("--no-sdpa", action="store_true", help="time the ladder only")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--max-seconds", type=float, default=1.0,
                    help="a run slower than this is not repeated, and a kernel predicted to be "
                         "slower is not run at bigger N (default 1.0)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every implementation of a shape this many times, the order "
                         "reversed in every other round, and report the median (default 1)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default="", help="default docs/results/<gpu-slug>.json")
    ap.add_argument("--merge", action="store_true",
                    help="merge into an existing --out, replacing rows with the same "
                         "(impl, dtype, d, causal, B, H, N)")
    ap.add_argument("--op", choices=["forward", "backward", "both"], default="forward",
                    help="time the forward (default), the backward, or both")
    ap.add_argument("--backward-kernels", default="",
                    help="comma-separated backward rung numbers or names (default: every "
                         "backward rung built)")
    ap.add_argument("--out-backward", default="",
                    help="the backward's rows (default docs/results/<gpu-slug>_backward.json)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")

    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
    torch.backends.cudnn.allow_tf32 = False
    global SDPA_BACKENDS
    if args.no_sdpa:
        SDPA_BACKENDS = [b for b in SDPA_BACKENDS if b[0] == "sdpa_flash"]  # still the yardstick

    ladder = Ladder(args.lib)
    kernels = select_kernels(ladder, args.kernels)
    backward_kernels = select_kernels(ladder, args.backward_kernels, ladder.backward_kernels,
                                      "--backward-kernels")
    gpu = torch.cuda.get_device_name()
    out_path = args.out or os.path.join(REPO, "docs", "results", gpu_slug(gpu) + ".json")
    out_backward = args.out_backward or os.path.join(REPO, "docs", "results",
                                                     gpu_slug(gpu) + "_backward.json")
    print(f"GPU {gpu}, torch {torch.__version__}, kernels: {', '.join(k[1] for k in kernels)}"
          f"; backward rungs: {', '.join(k[1] for k in backward_kernels) or 'none'}")

    timer = Timer(args.warmup, args.repeats, args.max_seconds)
    rows, backward_rows, too_slow, last_time = [], [], {}, {}
    for n in [int(x) for x in args.n.split(",") if x.strip()]:
        if args.op in ("forward", "both"):
            rows += run_shape(args, ladder, kernels, timer, n, too_slow, last_time)
        if args.op in ("backward", "both"):
            backward_rows += run_shape_backward(args, ladder, backward_kernels, timer, n)

    if rows:
        write_results(out_path, rows, gpu, args.merge)
        print_table(rows)
        print(f"\nwrote {len(rows)} rows to {out_path}")
    if backward_rows:
        write_results(out_backward, backward_rows, gpu, args.merge)
        print_backward_table(backward_rows)
        print(f"\nwrote {len(backward_rows)} backward rows to {out_backward}")
    rows += backward_rows
    failed = [r for r in rows if r.get("ok") is False]
    if failed:
        print(f"{len(failed)} rows FAILED the output check: "
              + ", ".join(f"{r['impl']}@N={r['N']}" for r in failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
