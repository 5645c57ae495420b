#!/usr/bin/env python3
"""The tables of scripts/contract_bench.sh: rung 16's full contract against FlashAttention-2.

  python3 scripts/contract_table.py DIR [--kernel 16_final]

DIR holds the JSON files of compare_sdpa.py that contract_bench.sh writes (plus1_r*.json,
plus1_b8_r*.json, plus1_causal_r*.json, causal.json, d256.json, d256_causal.json). Prints
Markdown: the cost of a length one above a block multiple (TFLOP/s at N + 1 over TFLOP/s at N,
per repeat), and TFLOP/s against FlashAttention-2 (SDPA's flash backend, same process).
"""
import argparse
import glob
import json
import os


def rows(path):
    with open(path) as f:
        return json.load(f)["rows"]


def tflops(rs, impl, n):
    for r in rs:
        if r["impl"] == impl and r["N"] == n and r.get("tflops"):
            return r["tflops"]
    return None


def plus1(dir_, kernel):
    out = ["| series | B | N | TFLOP/s at N | at N + 1 | N + 1 / N |", "|---|---:|---:|---|---|---|"]
    for pattern, label in (("plus1_r*.json", "non-causal"), ("plus1_b8_r*.json", "non-causal"),
                           ("plus1_causal_r*.json", "causal")):
        files = sorted(glob.glob(os.path.join(dir_, pattern)))
        if not files:
            continue
        runs = [rows(f) for f in files]
        ns = sorted({r["N"] for r in runs[0] if r["impl"] == kernel and r["N"] % 2 == 0})
        for n in ns:
            a = [tflops(rs, kernel, n) for rs in runs]
            b = [tflops(rs, kernel, n + 1) for rs in runs]
            if None in a or None in b:
                continue
            ratios = [y / x for x, y in zip(a, b)]
            batch = next(r["B"] for r in runs[0] if r["impl"] == kernel and r["N"] == n)
            out.append(f"| {label} | {batch} | {n} | {' / '.join(f'{x:.1f}' for x in a)} | "
                       f"{' / '.join(f'{y:.1f}' for y in b)} | "
                       f"{' / '.join(f'{q:.3f}' for q in ratios)} |")
    return "\n".join(out)


def against_fa2(path, kernel, title):
    if not os.path.exists(path):
        return ""
    rs = rows(path)
    ns = sorted({r["N"] for r in rs if r["impl"] == kernel})
    head = "| " + title + " | " + " | ".join(str(n) for n in ns) + " |"
    sep = "|---|" + "---:|" * len(ns)
    lines = [head, sep]
    for impl in (kernel, "sdpa_flash", "sdpa_cudnn"):
        cells = [tflops(rs, impl, n) for n in ns]
        lines.append(f"| {impl} | " + " | ".join("-" if c is None else f"{c:.1f}" for c in cells)
                     + " |")
    ratio = [(tflops(rs, kernel, n), tflops(rs, "sdpa_flash", n)) for n in ns]
    lines.append(f"| {kernel} / FA2 | " + " | ".join(
        "-" if a is None or b is None else f"{a / b:.2f}" for a, b in ratio) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--kernel", default="16_final")
    args = ap.parse_args()
    print("A length one above a block multiple (TFLOP/s per repeat):\n")
    print(plus1(args.dir, args.kernel))
    for name, title in (("causal", "causal, fp16, d = 128"), ("d256", "d = 256, fp16"),
                        ("d256_causal", "d = 256, fp16, causal")):
        table = against_fa2(os.path.join(args.dir, name + ".json"), args.kernel, title)
        if table:
            print("\n" + table)


if __name__ == "__main__":
    main()
