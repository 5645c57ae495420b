#!/usr/bin/env python3
"""Decode calls with a K/V cache through the package, for compute-sanitizer to watch.

scripts/sanitize.sh runs `ladder` on plain shapes; the cache calls (cache lengths, a block table)
reach the decode rungs only through the C API. This script makes them: for each head dim, heads
pair, query length (1, and the most rows of one warp: 16 / g, or 1; or --nq), batch (one
sequence of 523 keys; five of 1000, 0, 1, 300 and 777) and page size (0: the contiguous cache
with lengths; else pages of that many keys, shuffled), one call of
`flash_ladder.attention_with_kvcache` (causal, capacity 1024, or --capacity: a larger one splits
the call more, most splits empty), each checked against a float32 reference (2e-2; a row that
sees no key is 0). The sanitizer is the test; the check catches a launch that did nothing. Exit 1
if any call is wrong.

  compute-sanitizer --tool racecheck --kernel-name kns=k66_ --error-exitcode 9 \\
      python3 scripts/sanitize_cache.py --kernel 66 --d 64,128 --pages 0,64,256

(`--kernel-name kns=SUBSTRING` instruments only the rung's kernels, whose names hold its
namespace, `kNN_`.) FLASH_LADDER_LIB names the library, as for the package. Needs PyTorch and a
GPU.
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flash_ladder as fl  # noqa: E402

CAPACITY = 1024
LENGTHS = ([523], [1000, 0, 1, 300, 777])
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def ints(text):
    return [int(x) for x in text.split(",") if x.strip()]


def heads(text):
    return [tuple(int(y) for y in x.split("/")) for x in text.split(",") if x.strip()]


def reference(q, k, v, n, hq, hkv, nq, d):
    """O of one sequence, float32, [Nq, H_q, d]: causal bottom-right over its first n keys."""
    g = hq // hkv
    qq = q.float().transpose(0, 1)
    kk = k[:n].float().transpose(0, 1).repeat_interleave(g, 0)
    vv = v[:n].float().transpose(0, 1).repeat_interleave(g, 0)
    s = qq @ kk.transpose(1, 2) / math.sqrt(d)
    i = torch.arange(nq, device=q.device)[:, None]
    j = torch.arange(n, device=q.device)[None]
    s = s.masked_fill(j > i + n - nq, float("-inf"))
    return torch.nan_to_num((s.softmax(-1) @ vv).transpose(0, 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", default="best", help="a rung number or best (default best)")
    ap.add_argument("--d", type=ints, default=[64], help="head dims (default 64)")
    ap.add_argument("--pages", type=ints, default=[0, 64, 256],
                    help="page sizes, 0 for the contiguous cache (default 0,64,256)")
    ap.add_argument("--heads", type=heads, default=[(32, 8), (8, 8)],
                    help="H_q/H_kv pairs (default 32/8,8/8)")
    ap.add_argument("--nq", type=ints, default=None,
                    help="query lengths (default 1 and 16 / g: the rows of one warp)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="fp16")
    ap.add_argument("--capacity", type=int, default=CAPACITY,
                    help=f"keys of each sequence's cache (default {CAPACITY}; at least "
                         f"{max(max(x) for x in LENGTHS)}, a multiple of every page size)")
    args = ap.parse_args()
    longest = max(max(x) for x in LENGTHS)
    if args.capacity < longest or any(p and args.capacity % p for p in args.pages):
        ap.error(f"--capacity must be >= {longest} and a multiple of every page size")
    kernel = args.kernel if args.kernel == "best" else int(args.kernel)
    dt, dev = DTYPES[args.dtype], "cuda"
    torch.manual_seed(0)
    calls = wrong = 0
    for d in args.d:
        for hq, hkv in args.heads:
            g = hq // hkv
            for nq in args.nq or sorted({1, 16 // g if g <= 16 else 1}):
                for lens in LENGTHS:
                    for page in args.pages:
                        b = len(lens)
                        q = torch.randn(b, nq, hq, d, device=dev, dtype=dt)
                        k = torch.randn(b, args.capacity, hkv, d, device=dev, dtype=dt)
                        v = torch.randn(b, args.capacity, hkv, d, device=dev, dtype=dt)
                        seqlens = torch.tensor(lens, dtype=torch.int32, device=dev)
                        if page:
                            npg = args.capacity // page
                            perm = torch.randperm(b * npg, device=dev)
                            kp = torch.empty(b * npg, page, hkv, d, device=dev, dtype=dt)
                            vp = torch.empty_like(kp)
                            kp[perm] = k.reshape(b * npg, page, hkv, d)
                            vp[perm] = v.reshape(b * npg, page, hkv, d)
                            table = perm.reshape(b, npg).to(torch.int32).contiguous()
                            o = fl.attention_with_kvcache(q, kp, vp, cache_seqlens=seqlens,
                                                          block_table=table, causal=True,
                                                          kernel=kernel)
                        else:
                            o = fl.attention_with_kvcache(q, k, v, cache_seqlens=seqlens,
                                                          causal=True, kernel=kernel)
                        torch.cuda.synchronize()
                        calls += 1
                        for i, n in enumerate(lens):
                            if n == 0:
                                continue
                            ref = reference(q[i], k[i], v[i], n, hq, hkv, nq, d)
                            err = (o[i].float() - ref).abs().max().item()
                            if err > 2e-2:
                                wrong += 1
                                print(f"WRONG kernel {kernel} d {d} heads {hq}/{hkv} nq {nq} "
                                      f"page {page} sequence {i}: max error {err}")
    print(f"sanitize_cache.py kernel {kernel} {args.dtype} d {args.d} capacity {args.capacity}: "
          f"{calls} calls, "
          f"{wrong} wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
