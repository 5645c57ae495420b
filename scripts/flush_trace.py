#!/usr/bin/env python3
"""What the L2 flush before a timed decode call costs the call: CUDA events and the kernels' own
times under each way of flushing.

decode_bench.py and paged_bench.py flush the L2 before every timed run (compare_sdpa.Timer). The
two flushes, zeros (write a buffer twice the L2's size) and reads (sum it), leave the GPU in two
different states: after zeros the L2 is full of dirty lines, which the call writes back to HBM as
its reads evict them; after reads the L2 is clean, and a larger kernel (the sum) has just run on
every SM. This script times the same calls after each flush and after the two in either order
(zeros+reads: the L2 clean, the sum last; reads+zeros: the L2 dirty, the sum before the fill), so
that the two effects show apart:

  * CUDA events around each call, as decode_bench times them (one flush, the start event, the
    call, the end event; --repeats calls a round, the median), eagerly and replaying a CUDA graph
    of the call; --rounds balanced rounds over every (kernel, mode, flush), the order reversed in
    every other round;
  * with --profile, the same loop once more under torch.profiler (CUPTI): each kernel's duration
    and start within the call, and the gap from the flush's end to the call's first kernel.

Kernels: ladder rung numbers, and cudnn / flash for SDPA with that backend forced
(enable_gqa=True; the causal rows through causal_lower_right). Shapes: d:B:Nq:Nk:H_q:H_kv,
fp16, K/V [B, Nk, H_kv, d], causal where Nq > 1. Run from the repository root on the GPU machine:

  python3 scripts/flush_trace.py --kernels 67,68 --shapes 96:1:1:8192:32:8 --out flush.json
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_sdpa as cs  # noqa: E402  (Ladder, Timer's flushes, captured, the package)

FLUSHES = ("zeros", "reads", "zeros+reads", "reads+zeros")
PEERS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(cs.REPO, "build", "libflash_ladder.so"))
    ap.add_argument("--kernels", default="67,68", help="rung numbers, cudnn, flash")
    ap.add_argument("--shapes", default="96:1:1:8192:32:8", help="d:B:Nq:Nk:H_q:H_kv, ...")
    ap.add_argument("--flushes", default="zeros,reads", help=f"some of {', '.join(FLUSHES)}")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--profile", action="store_true", help="also the kernels' times (CUPTI)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    args.kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    for k in args.kernels:
        if k not in PEERS and not k.isdigit():
            ap.error(f"--kernels: {k!r} is neither a rung number nor one of {sorted(PEERS)}")
    args.shapes = [tuple(int(x) for x in s.split(":")) for s in args.shapes.split(",")]
    if any(len(s) != 6 for s in args.shapes):
        ap.error("--shapes: each is d:B:Nq:Nk:H_q:H_kv")
    args.flushes = [f.strip() for f in args.flushes.split(",") if f.strip()]
    for f in args.flushes:
        if f not in FLUSHES:
            ap.error(f"--flushes: {f!r} is not one of {', '.join(FLUSHES)}")
    return args


def flush_calls():
    """The four flushes, built from compare_sdpa.Timer's two."""
    zeros = cs.Timer(1, 1, 1.0, flush="zeros")
    reads = cs.Timer(1, 1, 1.0, flush="reads")
    return {"zeros": zeros.flush, "reads": reads.flush,
            "zeros+reads": lambda: (zeros.flush(), reads.flush()),
            "reads+zeros": lambda: (reads.flush(), zeros.flush())}


def timed(fn, flush, n):
    """decode_bench's timed loop (compare_sdpa.flushed_runs): the median of n runs in us."""
    return statistics.median(cs.flushed_runs(fn, flush, n)) * 1e3


def is_flush(name):
    # The fill kernel of zero_ and the reduction of the sum.
    name = name.lower()
    return "fill" in name or "reduce_kernel" in name


def kernel_times(fn, flush, n):
    """The loop under torch.profiler: per kernel of a call (by position and name) the median
    duration and start (us from the call's first kernel), the call's span and the gap after the
    flush."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        timed(fn, flush, n)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as fh:
            events = [e for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel"]
    events.sort(key=lambda e: e["ts"])
    calls, cur = [], None
    for e in events:
        if is_flush(e["name"]):
            if cur is not None and cur["kernels"]:
                calls.append(cur)
            cur = {"flush_end": e["ts"] + e["dur"], "kernels": []}
        elif cur is not None:
            cur["kernels"].append(e)
    if cur is not None and cur["kernels"]:
        calls.append(cur)
    per, spans, gaps = {}, [], []
    for c in calls:
        start = min(e["ts"] for e in c["kernels"])
        spans.append(max(e["ts"] + e["dur"] for e in c["kernels"]) - start)
        gaps.append(start - c["flush_end"])
        for i, e in enumerate(c["kernels"]):
            key = f"{i}:{e['name'].split('(')[0].split('<')[0][-48:]}"
            per.setdefault(key, ([], []))
            per[key][0].append(e["dur"])
            per[key][1].append(e["ts"] - start)
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    return {"calls": len(calls), "span_us": med(spans), "gap_after_flush_us": med(gaps),
            "kernels": {k: {"dur_us": med(d), "start_us": med(s), "n": len(d)}
                        for k, (d, s) in per.items()}}


def shape_calls(ladder, kernels, shape):
    d, b, nq, nk, hq, hkv = shape
    gen = torch.Generator(device="cuda").manual_seed(nk + d)
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16, generator=gen)
    k, v = (torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16, generator=gen)
            for _ in range(2))
    o = torch.empty_like(q)
    params = cs.flash_ladder.make_params(q, k, v, o, causal=nq > 1, scale=1 / math.sqrt(d),
                                         layout="bnhd")
    qv, kv, vv = (t.transpose(1, 2) for t in (q, k, v))
    mask = causal_lower_right(nq, nk) if nq > 1 else None
    calls = {}
    for name in kernels:
        if name in PEERS:
            def run(backend=PEERS[name]):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(qv, kv, vv, attn_mask=mask,
                                                          enable_gqa=True)
        else:
            def run(number=int(name)):
                ladder.run(number, params)
        try:
            run()
            torch.cuda.synchronize()
        except Exception as e:  # a peer that refuses the shape, a rung that refuses it
            print(f"  {name}: not timed ({str(e).splitlines()[0][:100]})")
            continue
        calls[(name, "eager")] = run
        calls[(name, "graph")] = cs.captured(run)[0]
    return calls, (q, k, v, o)


@torch.no_grad()
def main():
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    ladder = cs.Ladder(args.lib)
    flushes = flush_calls()
    gpu = torch.cuda.get_device_name()
    print(f"GPU {gpu}, torch {torch.__version__}")
    rows = []
    for shape in args.shapes:
        d, b, nq, nk, hq, hkv = shape
        label = f"d={d} B={b} Nq={nq} Nk={nk} {hq}/{hkv}"
        calls, keep = shape_calls(ladder, args.kernels, shape)
        for fn in calls.values():
            timed(fn, flushes["zeros"], 20)  # warm-up
        order = [(key, f) for key in calls for f in args.flushes]
        ev = {cell: [] for cell in order}
        for r in range(args.rounds):
            for key, f in (reversed(order) if r % 2 else order):
                ev[(key, f)].append(timed(calls[key], flushes[f], args.repeats))
        for key, f in order:
            row = dict(shape=label, d=d, B=b, Nq=nq, Nk=nk, H=hq, H_kv=hkv, kernel=key[0],
                       mode=key[1], flush=f, event_us=statistics.median(ev[(key, f)]),
                       event_rounds=ev[(key, f)])
            if args.profile:
                row.update(kernel_times(calls[key], flushes[f], args.repeats))
            rows.append(row)
            brief = "; ".join(f"{n} {t['dur_us']:.2f}@{t['start_us']:.2f}"
                              for n, t in row.get("kernels", {}).items())
            print(f"{label:32} {key[0]:>5} {key[1]:5} {f:11} {row['event_us']:8.2f} us"
                  + (f" | span {row['span_us']:.2f} | {brief}" if row.get("span_us") else ""))
        del calls, keep
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"gpu": gpu, "torch": torch.__version__, "rows": cs.json_safe(rows)}, fh,
                      indent=1)
            fh.write("\n")


if __name__ == "__main__":
    main()
