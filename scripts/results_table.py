#!/usr/bin/env python3
"""Tables and a plot from the ladder's measurements.

Inputs: the JSON that scripts/compare_sdpa.py writes (docs/results/<gpu>.json: rows of impl, dtype,
d, causal, B, H, N, ms, tflops, max_err) and, optionally, Google Benchmark JSON from the C++ sweep
(build/ladder_bench --benchmark_out=bench.json --benchmark_out_format=json). A benchmark entry is
read as one row when its name contains the kernel ("03_mma") and its counters (or "key:value"
parts of its name) give N; TFLOP/s comes from a counter whose name contains "tflop", else from
its time and the FLOPs of (B, H, N, d). Medians are used when the run reports aggregates. Rows read
later replace earlier ones with the same (impl, dtype, d, causal, N).

One series (--dtype, --d, --causal) makes:
  * a Markdown table: one row per implementation, one column per N, cells "TFLOP/s (% of
    sdpa_flash)" (stdout, and --md FILE);
  * a PNG plot, TFLOP/s against N on a log2 axis, one line per implementation (--png FILE);
  * with --readme README.md: the table between <!-- BEGIN ladder-table --> and
    <!-- END ladder-table -->;
  * with --docs docs/kernels: in each docs/kernels/NN_*.md that has <!-- BEGIN results --> and
    <!-- END results -->, that rung's row: TFLOP/s per N, % of the previous rung, % of
    FlashAttention-2 (sdpa_flash).

  python3 scripts/results_table.py docs/results/nvidia-h100-80gb-hbm3.json \\
      --png docs/results/h100.png --readme README.md --docs docs/kernels
"""
import argparse
import glob
import json
import os
import re
import sys

FLASH = "sdpa_flash"
SDPA_LABELS = {
    "sdpa_flash": "FlashAttention-2 (SDPA flash)",
    "sdpa_cudnn": "cuDNN fused (SDPA cudnn)",
    "sdpa_efficient": "memory-efficient (SDPA)",
}


def expand_rows(listed):
    """A list of rows as written, or as stored compactly ({"columns": [...], "rows": [[...], ...]},
    docs/results/README.md): the list of dicts either way."""
    if isinstance(listed, dict):
        return [dict(zip(listed["columns"], r)) for r in listed["rows"]]
    return listed


KERNEL_RE = re.compile(r"\b(\d\d)_([a-z0-9_]+?)(?=$|[/:,\s]|_(?:fp16|bf16)\b)")


# ------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------
def load_results(path):
    with open(path) as fh:
        doc = json.load(fh)
    meta = {k: doc.get(k) for k in ("gpu", "torch", "date")}
    meta["path"] = os.path.relpath(path)
    rows = []
    for r in expand_rows(doc.get("rows", [])):
        rows.append(dict(r, source=os.path.basename(path)))
    return meta, rows


def _bench_fields(bench):
    """name 'BM_Ladder/03_mma/N:4096/B:16' + counters -> dict of the fields found."""
    fields = {}
    for part in re.split(r"[/ ]", bench.get("name", "")):
        if ":" in part:
            key, _, value = part.partition(":")
            fields[key.strip().lower()] = value.strip()
    for key, value in bench.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            fields.setdefault(key.lower(), value)
    label = bench.get("label", "")
    return fields, bench.get("name", "") + " " + label


def load_bench(path):
    with open(path) as fh:
        doc = json.load(fh)
    # Per benchmark: its median aggregate when the run had repetitions, else its iteration(s).
    by_run = {}
    for b in expand_rows(doc.get("benchmarks", [])):
        by_run.setdefault(b.get("run_name", b.get("name", "")), []).append(b)
    benches = []
    for group in by_run.values():
        medians = [b for b in group if b.get("aggregate_name") == "median"]
        benches += medians or [b for b in group if b.get("run_type", "iteration") == "iteration"]
    to_ms = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    rows = []
    for bench in benches:
        fields, text = _bench_fields(bench)
        m = KERNEL_RE.search(text)
        n = fields.get("n") or fields.get("seqlen") or fields.get("nq")
        if m is None or n is None:
            continue
        impl = f"{m.group(1)}_{m.group(2)}"
        dtype = "bf16" if "bf16" in text.lower() or str(fields.get("dtype")) in ("1", "bf16") \
            else "fp16"
        d = int(float(fields.get("d", fields.get("head_dim", 128))))
        causal = bool(int(float(fields.get("causal", 0)))) or "causal" in text.lower()
        b = int(float(fields.get("b", fields.get("batch", 0)) or 0))
        h = int(float(fields.get("h", fields.get("heads", 0)) or 0))
        n = int(float(n))
        ms = float(bench.get("real_time", 0)) * to_ms.get(bench.get("time_unit", "ns"), 1e-6)
        tflops = next((float(v) for k, v in bench.items()
                       if "tflop" in k.lower() and isinstance(v, (int, float))), None)
        if tflops is None and b and h and ms:
            tflops = 4.0 * b * h * n * n * d / (2 if causal else 1) / (ms * 1e-3) / 1e12
        if tflops is None:
            continue
        rows.append(dict(impl=impl, dtype=dtype, d=d, causal=causal, B=b, H=h, N=n, ms=ms,
                         tflops=tflops, max_err=None, source=os.path.basename(path)))
    return rows


def series(rows, dtype, d, causal):
    """{impl: {N: row}} for one series; later rows replace earlier ones."""
    out = {}
    for r in rows:
        if r.get("dtype") != dtype or int(r.get("d", 0)) != d or bool(r.get("causal")) != causal:
            continue
        if not r.get("tflops"):
            continue
        out.setdefault(r["impl"], {})[int(r["N"])] = r
    return out


def impl_order(impl):
    """Kernels by number, then the SDPA backends."""
    m = re.match(r"(\d+)_", impl)
    if m:
        return (0, int(m.group(1)), impl)
    return (1, list(SDPA_LABELS).index(impl) if impl in SDPA_LABELS else 99, impl)


def heads_of(data):
    heads = sorted({r.get("H") for per_n in data.values() for r in per_n.values() if r.get("H")})
    return "/".join(str(h) for h in heads) or "?"


def kernel_number(impl):
    m = re.match(r"(\d+)_", impl)
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------------
def pct(a, b):
    """a as a percentage of b ("46%", "0.5%"), or a multiple beyond 10x ("×66.7")."""
    if not a or not b:
        return "—"
    ratio = a / b
    if ratio >= 10:
        return f"×{ratio:.1f}"
    return f"{100 * ratio:.0f}%" if ratio >= 0.1 else f"{100 * ratio:.1f}%"


def markdown_table(data, meta, dtype, d, causal):
    ns = sorted({n for per_n in data.values() for n in per_n})
    flash = data.get(FLASH, {})
    lines = []
    shape = ", ".join(f"B={b}" for b in sorted({r.get("B") for per_n in data.values()
                                                 for r in per_n.values() if r.get("B")}))
    lines.append(f"{meta.get('gpu') or 'GPU'}, {dtype}, d = {d}, H = {heads_of(data)}"
                 f"{', causal' if causal else ''}; TFLOP/s (% of FlashAttention-2, the SDPA flash "
                 f"backend timed in the same run). torch {meta.get('torch') or '?'}, "
                 f"{(meta.get('date') or '')[:10]}. Source: `{meta.get('path') or '?'}` "
                 f"(`scripts/compare_sdpa.py`).")
    lines.append("")
    lines.append("| implementation | " + " | ".join(f"N = {n}" for n in ns) + " |")
    lines.append("|---|" + "---:|" * len(ns))
    for impl in sorted(data, key=impl_order):
        cells = []
        for n in ns:
            r = data[impl].get(n)
            if r is None:
                cells.append("—")
                continue
            t = r["tflops"]
            mark = " ✗" if r.get("ok") is False else ""
            cells.append(f"{t:.1f}{mark}" if impl == FLASH
                         else f"{t:.1f} ({pct(t, flash.get(n, {}).get('tflops'))}){mark}")
        lines.append(f"| {SDPA_LABELS.get(impl, impl)} | " + " | ".join(cells) + " |")
    if any(r.get("ok") is False for per_n in data.values() for r in per_n.values()):
        lines.append("")
        lines.append("✗: the output failed the check against the fp32 reference.")
    if shape:
        lines.append("")
        lines.append(f"Batch sizes in the sweep: {shape} (B halves as N doubles beyond 4096).")
    return "\n".join(lines) + "\n"


def plot(data, meta, dtype, d, causal, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for impl in sorted(data, key=impl_order):
        ns = sorted(data[impl])
        ys = [data[impl][n]["tflops"] for n in ns]
        style = "--" if impl.startswith("sdpa") else "-"
        ax.plot(ns, ys, style, marker="o", markersize=4, label=SDPA_LABELS.get(impl, impl))
    ax.set_xscale("log", base=2)
    all_n = sorted({n for per_n in data.values() for n in per_n})
    ax.set_xticks(all_n)
    ax.set_xticklabels([str(n) for n in all_n])
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title(f"{meta.get('gpu') or ''} — {dtype}, d = {d}{', causal' if causal else ''}")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as im:  # 256 indexed colours: a third of the RGBA file
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
    from png_pack import repack  # beside this script

    repack(path)


def replace_block(text, begin, end, body):
    """Replaces what lies between the begin and end markers; None when they are missing."""
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < 0 or j < i:
        return None
    return text[:i + len(begin)] + "\n" + body.rstrip("\n") + "\n" + text[j:]


def rung_block(impl, data, meta, dtype, d, causal):
    ns = sorted(data[impl])
    number = kernel_number(impl)
    lines = [f"Measured by `scripts/compare_sdpa.py` on {meta.get('gpu') or 'the GPU'} "
             f"({dtype}, d = {d}, H = {heads_of(data)}{', causal' if causal else ''}; "
             f"{(meta.get('date') or '')[:10]}), from `{meta.get('path') or '?'}`; "
             f"regenerate with `scripts/results_table.py`.", "",
             "| N | " + " | ".join(str(n) for n in ns) + " |",
             "|---|" + "---:|" * len(ns)]
    tflops = [data[impl][n]["tflops"] for n in ns]
    lines.append("| TFLOP/s | " + " | ".join(f"{t:.1f}" for t in tflops) + " |")
    prev_cells = []
    for n in ns:
        prev = [k for k in data if kernel_number(k) is not None and 1 <= kernel_number(k) < number
                and n in data[k]]
        if number is None or number <= 1 or not prev:
            prev_cells.append("—")
        else:
            p = max(prev, key=kernel_number)
            ratio = pct(data[impl][n]["tflops"], data[p][n]["tflops"])
            multiple = ratio.startswith("×")
            prev_cells.append(f"{ratio[1:]}× {p[:2]}" if multiple else f"{ratio} of {p[:2]}")
    lines.append("| vs previous rung | " + " | ".join(prev_cells) + " |")
    flash = data.get(FLASH, {})
    lines.append("| % of FlashAttention-2 | " + " | ".join(
        pct(data[impl][n]["tflops"], flash.get(n, {}).get("tflops")) for n in ns) + " |")
    return "\n".join(lines) + "\n"


def cpp_block(impl, cpp, path):
    """The C++ benchmark's figures for one rung: TFLOP/s and % of the cuBLAS baseline."""
    base = next((k for k in cpp if kernel_number(k) == 0), None)
    ns = sorted(cpp[impl])
    lines = ["", f"C++ sweep (`build/ladder_bench`, Google Benchmark JSON `{os.path.relpath(path)}`, "
             "median of 3 repetitions, L2 flushed before each launch):", "",
             "| N | " + " | ".join(str(n) for n in ns) + " |",
             "|---|" + "---:|" * len(ns),
             "| TFLOP/s | " + " | ".join(f"{cpp[impl][n]['tflops']:.1f}" for n in ns) + " |"]
    if base is not None and base != impl:
        lines.append("| % of cuBLAS unfused (00) | " + " | ".join(
            pct(cpp[impl][n]["tflops"], cpp[base].get(n, {}).get("tflops")) for n in ns) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="compare_sdpa.py JSON file(s)")
    ap.add_argument("--bench", nargs="*", default=[],
                    help="Google Benchmark JSON file(s): merged into the table (replacing rows)")
    ap.add_argument("--cpp-bench", default="",
                    help="Google Benchmark JSON of the C++ sweep: kept apart, and added to each "
                         "rung's results block as TFLOP/s and %% of the cuBLAS baseline (00)")
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--md", default="", help="write the Markdown table here too")
    ap.add_argument("--png", default="", help="write the plot here")
    ap.add_argument("--readme", default="", help="fill the ladder-table block of this file")
    ap.add_argument("--docs", default="", help="fill the results block of docs/kernels/NN_*.md")
    args = ap.parse_args()

    meta, rows = {}, []
    for path in args.results:
        m, r = load_results(path)
        meta = {k: v for k, v in m.items() if v} or meta
        rows += r
    for path in args.bench:
        rows += load_bench(path)
    data = series(rows, args.dtype, args.d, args.causal)
    cpp = series(load_bench(args.cpp_bench), args.dtype, args.d, args.causal) if args.cpp_bench else {}
    if not data:
        sys.exit(f"no rows for {args.dtype}, d = {args.d}, causal = {args.causal}")

    table = markdown_table(data, meta, args.dtype, args.d, args.causal)
    print(table)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(table)
    if args.png:
        plot(data, meta, args.dtype, args.d, args.causal, args.png)
        print(f"wrote {args.png}")
    if args.readme:
        with open(args.readme) as fh:
            text = fh.read()
        body = table
        if args.png:
            rel = os.path.relpath(args.png, os.path.dirname(os.path.abspath(args.readme)))
            body += f"\n![TFLOP/s against N]({rel})\n"
        new = replace_block(text, "<!-- BEGIN ladder-table -->", "<!-- END ladder-table -->", body)
        if new is None:
            sys.exit(f"{args.readme}: no <!-- BEGIN ladder-table --> / <!-- END ladder-table -->")
        with open(args.readme, "w") as fh:
            fh.write(new)
        print(f"updated {args.readme}")
    if args.docs:
        for impl in sorted(data, key=impl_order):
            number = kernel_number(impl)
            if number is None:
                continue
            pages = glob.glob(os.path.join(args.docs, f"{number:02d}_*.md"))
            for page in pages:
                with open(page) as fh:
                    text = fh.read()
                block = rung_block(impl, data, meta, args.dtype, args.d, args.causal)
                if impl in cpp:
                    block += cpp_block(impl, cpp, args.cpp_bench)
                new = replace_block(text, "<!-- BEGIN results -->", "<!-- END results -->", block)
                if new is None:
                    print(f"{page}: no results block, left alone")
                    continue
                if new != text:
                    with open(page, "w") as fh:
                        fh.write(new)
                    print(f"updated {page}")


if __name__ == "__main__":
    main()
