#!/usr/bin/env python3
"""How much of a kernel's time is spent outside the KV loop (prologue + epilogue), measured:
time the kernel at a fixed Nq for several Nk and fit t(Nk) = a + b·Nk. The intercept a is the
cost of everything that does not scale with the number of KV tiles — loading Q, the final
normalisation and the stores of O — and a / t(Nk) is its share at that Nk.

    scripts/epilogue_share.py --kernels 14,15 [--nq 512] [--batch 16] [--heads 16] [--d 128]

Runs build/ladder (--no-verify, median of --repeats launches, L2 flushed) and prints, per kernel,
the fit and the share at each Nk; --json FILE keeps the numbers.
"""
import argparse
import json
import re
import subprocess
import sys


def time_ms(ladder, kernel, nq, nk, batch, heads, d, repeats):
    out = subprocess.run([ladder, "--kernel", str(kernel), "--nq", str(nq), "--nk", str(nk),
                          "--batch", str(batch), "--heads", str(heads), "--d", str(d),
                          "--no-verify", "--warmup", "20", "--repeats", str(repeats)],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        m = re.match(r"^(\d\d)_\S+\s+([\d.]+)\s", line)
        if m and int(m.group(1)) == int(kernel):
            return float(m.group(2))
    sys.exit(f"no timing for kernel {kernel} in:\n{out}")


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="14,15")
    ap.add_argument("--ladder", default="build/ladder")
    ap.add_argument("--nq", type=int, default=512)
    ap.add_argument("--nk", default="128,256,512,1024,2048")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    nks = [int(x) for x in args.nk.split(",")]
    result = {"nq": args.nq, "batch": args.batch, "heads": args.heads, "d": args.d, "kernels": {}}
    for k in args.kernels.split(","):
        ts = [time_ms(args.ladder, k, args.nq, nk, args.batch, args.heads, args.d, args.repeats)
              for nk in nks]
        a, b = fit(nks, ts)
        result["kernels"][k] = {"nk": nks, "ms": ts, "intercept_ms": a, "ms_per_key": b}
        print(f"kernel {k}: t(Nk) = {a:.4f} ms + {b * 1e3:.4f} us/key   (Nq = {args.nq}, "
              f"B = {args.batch}, H = {args.heads}, d = {args.d})")
        for nk, t in zip(nks, ts):
            print(f"   Nk = {nk:6d}: {t:8.4f} ms, outside the KV loop {100 * a / t:5.1f}%")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
