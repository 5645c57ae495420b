#!/usr/bin/env python3
"""The tables of scripts/contract_bench.sh: rung 16's full contract against FlashAttention-2.

  python3 scripts/contract_table.py DIR [--kernel 16_final]

DIR holds what contract_bench.sh writes: plus1.json (scripts/plus1_bench.py) and the JSON files
of compare_sdpa.py (causal.json, d256.json, d256_causal.json). Prints Markdown: the cost of a
length one above a block multiple (TFLOP/s at N + 1 over TFLOP/s at N, the median of alternating
rounds, FlashAttention-2's beside it), and TFLOP/s against FlashAttention-2 (SDPA's flash
backend, same process).
"""
import argparse
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


def plus1(dir_):
    path = os.path.join(dir_, "plus1.json")
    if not os.path.exists(path):
        return "(no plus1.json)"
    with open(path) as f:
        doc = json.load(f)
    out = [f"{doc['kernel']}, median of {doc['rounds']} alternating rounds (min-max):", "",
           "| series | B | N | TFLOP/s at N | at N + 1 | N + 1 / N | min-max | FA2: N + 1 / N |",
           "|---|---:|---:|---:|---:|---:|---|---:|"]
    for p in doc["pairs"]:
        out.append(f"| {'causal' if p['causal'] else 'non-causal'} | {p['B']} | {p['N']} | "
                   f"{p['ours_tflops_n']:.1f} | {p['ours_tflops_n1']:.1f} | "
                   f"{p['ours_ratio_median']:.3f} | "
                   f"{p['ours_ratio_min']:.3f}-{p['ours_ratio_max']:.3f} | "
                   f"{p['fa2_ratio_median']:.3f} |")
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
    print("A length one above a block multiple:\n")
    print(plus1(args.dir))
    for name, title in (("causal", "causal, fp16, d = 128"), ("d256", "d = 256, fp16"),
                        ("d256_causal", "d = 256, fp16, causal")):
        table = against_fa2(os.path.join(args.dir, name + ".json"), args.kernel, title)
        if table:
            print("\n" + table)


if __name__ == "__main__":
    main()
