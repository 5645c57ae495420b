#!/usr/bin/env python3
"""One decode call of each named rung through the package, timed as its own CUDA graph.

decode_bench.py calls the C API with one output and one workspace that every rung shares. This
script times the same kind of call the way a PyTorch user runs it: each rung gets a CUDA graph of
one flash_ladder.attention(q, k, v, layout="bnhd", kernel=N) call, so its output and workspace
come from that graph's own memory pool. The L2 is flushed before every replay, as in
decode_bench.py. Rounds are balanced (the order is reversed every other round). Each rung's
figure is the median of its rounds' medians.

Notebook 58 uses it on the shortest call (B = 1, GQA 32/8, Nq = 1, Nk = 1024, d = 128, fp16), with
rung 57, an exact copy of it, and rung 58:

  python3 scripts/package_timing.py --kernels 57,59,58 --rounds 10 --repeats 60 --out t.json

Needs PyTorch and a GPU.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", required=True, help="rung numbers, comma-separated; the first "
                    "is the one the ratios compare against")
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--heads", default="32/8", help="H_q/H_kv (default 32/8)")
    ap.add_argument("--nq", type=int, default=1)
    ap.add_argument("--nk", type=int, default=1024)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=60, help="replays a round (default 60)")
    ap.add_argument("--out", default="", help="write the medians and rounds here as JSON")
    args = ap.parse_args()
    import torch
    import flash_ladder

    rungs = [int(x) for x in args.kernels.split(",")]
    hq, hkv = (int(x) for x in args.heads.split("/"))
    torch.manual_seed(0)
    q = torch.randn(args.b, args.nq, hq, args.d, dtype=torch.float16, device="cuda")
    k = torch.randn(args.b, args.nk, hkv, args.d, dtype=torch.float16, device="cuda")
    v = torch.randn(args.b, args.nk, hkv, args.d, dtype=torch.float16, device="cuda")
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")

    def graph_of(n):
        def call():
            return flash_ladder.attention(q, k, v, causal=args.nq > 1, layout="bnhd", kernel=n)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream, as torch asks before a capture
            call()
            call()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        return graph

    def median_us(graph):
        pairs = []
        for _ in range(args.repeats):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        return 1e3 * statistics.median(s.elapsed_time(e) for s, e in pairs)

    graphs = {n: graph_of(n) for n in rungs}
    for graph in graphs.values():
        for _ in range(200):
            graph.replay()
    rounds = {n: [] for n in rungs}
    for r in range(args.rounds):
        for n in (rungs if r % 2 == 0 else rungs[::-1]):
            rounds[n].append(median_us(graphs[n]))
    us = {n: statistics.median(x) for n, x in rounds.items()}
    for n in rungs:
        print(f"rung {n}: {us[n]:.2f} us, {us[rungs[0]] / us[n]:.3f}x rung {rungs[0]}'s speed")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "rows": [{"kernel": n, "us": us[n], "round_us": rounds[n]} for n in rungs]},
                      f)


if __name__ == "__main__":
    main()
