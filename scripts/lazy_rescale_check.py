#!/usr/bin/env python3
"""Why rung 16 skips the rescale of O only when the row max did not move, and does not use a
tolerance on its growth (FlashAttention-4's lazy rescaling): the ladder's pass rule, emulated.

Emulates, in numpy on the CPU, the online softmax of one block of query rows the way rungs 11-16
compute it (base-2 exponentials in fp32, KV tiles visited last to first, P rounded to the input
dtype before P.V, O accumulated in fp32 and rounded to the dtype at the end), with three policies
for the running max m that P = 2^(s c - m c) is taken against:

  eager      m is the row's running max after every tile, O rescaled every tile (rungs 11-15);
  skip       the same m, but an M-tile (16 rows) skips the rescale when none of its rows got a
             new max: the skipped correction is exactly 1 (rung 16);
  threshold  m is refreshed only when a tile's max exceeds it by more than 8 / c, so P <= 2^8
             (FlashAttention-4).

and checks each output with the harness' rule (common/compare.h): max|O - ref_fp32| <=
2 * max|ref_lowp - ref_fp32| + 1e-4, ref_lowp rounding P (exact max) and O to the dtype.

  python3 scripts/lazy_rescale_check.py              # fp16 and bf16, N = 512 and 4096, 3 seeds
"""
import argparse

import numpy as np

ROWS, VOTE_ROWS = 64, 16  # one block of rows; rows that share one rescale decision (an M-tile)


def to_bf16(x):
    """Round-to-nearest-even to bf16, returned as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32)


def rnd(x, dtype):
    x = np.asarray(x, np.float32)
    return x.astype(np.float16).astype(np.float32) if dtype == "fp16" else to_bf16(x)


def kernel(S, V, c, bc, policy, dtype):
    """O of the emulated kernel and the number of (M-tile, tile) rescales."""
    rows, n = S.shape
    m = np.full(rows, -np.inf, np.float32)
    l = np.zeros(rows, np.float32)
    O = np.zeros((rows, V.shape[1]), np.float32)
    rescales = 0
    threshold = np.float32(8.0 / c)
    for t, j in enumerate(range(n // bc - 1, -1, -1)):
        s = S[:, j * bc:(j + 1) * bc]
        tile_max = s.max(1)
        if t == 0:
            m = tile_max.copy()
        else:
            for w in range(0, rows, VOTE_ROWS):
                rs = slice(w, w + VOTE_ROWS)
                if policy == "threshold":
                    move = (tile_max[rs] - m[rs] > threshold).any()
                elif policy == "skip":
                    move = (tile_max[rs] > m[rs]).any()
                else:
                    move = True
                if move:
                    rescales += 1
                    new_m = np.maximum(m[rs], tile_max[rs])
                    corr = np.exp2(m[rs] * c - new_m * c).astype(np.float32)
                    l[rs] *= corr
                    O[rs] *= corr[:, None]
                    m[rs] = new_m
        P = np.exp2(s * c - (m * c)[:, None]).astype(np.float32)
        l += P.sum(1)
        O += rnd(P, dtype) @ V[j * bc:(j + 1) * bc]
    return rnd(O / l[:, None], dtype), rescales


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--verbose", action="store_true", help="one line per seed")
    ap.add_argument("--bc", type=int, default=32, help="keys per KV tile (default 32)")
    args = ap.parse_args()
    d = 128
    failures = {"eager": 0, "skip": 0, "threshold": 0}
    print(f"worst error / tolerance over {args.seeds} seeds (> 1 fails), and the share of "
          "(M-tile, tile) rescales done")
    print(f"{'dtype':5} {'std':>4} {'N':>5}  {'eager':>6} {'skip':>6} {'threshold':>9}  "
          f"{'rescaled: eager':>15} {'skip':>6} {'threshold':>9}")
    for dtype, std in (("fp16", 1.0), ("fp16", 8.0), ("bf16", 1.0), ("bf16", 20.0)):
        for n in (512, 4096):
            worst = {"eager": 0.0, "skip": 0.0, "threshold": 0.0}
            done = {"eager": 0, "skip": 0, "threshold": 0}
            total = 0
            for seed in range(args.seeds):
                rng = np.random.default_rng(1000 * seed + n)
                Q = rnd(std * rng.standard_normal((ROWS, d)), dtype)
                K = rnd(std * rng.standard_normal((n, d)), dtype)
                V = rnd(rng.standard_normal((n, d)), dtype)
                scale = 1 / np.sqrt(d)
                c = np.float32(scale * np.log2(np.e))
                S64 = Q.astype(np.float64) @ K.astype(np.float64).T
                E = np.exp(scale * (S64 - S64.max(1, keepdims=True)))
                ref32 = (E / E.sum(1, keepdims=True)) @ V.astype(np.float64)
                E32 = E.astype(np.float32)
                ref_lowp = rnd((rnd(E32, dtype) @ V) / E32.sum(1, keepdims=True), dtype)
                tol = 2 * np.abs(ref_lowp - ref32).max() + 1e-4
                errs, counts = {}, {}
                for policy in ("eager", "skip", "threshold"):
                    O, r = kernel(S64.astype(np.float32), V, c, args.bc, policy, dtype)
                    errs[policy] = np.abs(O - ref32).max()
                    counts[policy] = r
                    failures[policy] += errs[policy] > tol
                total += (n // args.bc - 1) * ROWS // VOTE_ROWS
                for k in worst:
                    worst[k] = max(worst[k], errs[k] / tol)
                    done[k] += counts[k]
                if args.verbose:
                    print(f"  seed {seed}: tolerance {tol:.2e}, errors " +
                          ", ".join(f"{k} {v:.2e}" for k, v in errs.items()))
            print(f"{dtype:5} {std:4.0f} {n:5d}  {worst['eager']:6.2f} {worst['skip']:6.2f} "
                  f"{worst['threshold']:9.2f}  {done['eager'] / total:15.0%} "
                  f"{done['skip'] / total:6.0%} {done['threshold'] / total:9.0%}")
    print("\nfailures of the pass rule:", {k: int(v) for k, v in failures.items()})


if __name__ == "__main__":
    main()
