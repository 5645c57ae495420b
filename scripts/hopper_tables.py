#!/usr/bin/env python3
"""Tables of the Hopper track (rungs 17+) against rung 16, FlashAttention-2 and cuDNN.

Inputs, all under docs/results/:
  * the JSON of scripts/compare_sdpa.py holding rung 16, rungs 17-21 and PyTorch SDPA's
    backends timed in one process per series (--sdpa; fp16 and bf16, d = 128);
  * the JSON of the final Hopper rungs (--final): rungs 16-27 and the SDPA backends, fp16,
    d = 64, 128 and 256, causal and not, one process per series;
  * Google Benchmark JSON of the C++ sweep (build/ladder_bench; --bench);
  * Google Benchmark JSON of bench/bench_wgmma_ceiling.cu (--ceiling): wgmma m64n128k16 issued
    back to back from shared memory, the instruction shape of the rungs' GEMMs.

Writes, between markers:
  * docs/results/README.md, <!-- BEGIN hopper-table --> ... <!-- END hopper-table -->: TFLOP/s of
    rungs 16-21 and the peers per N from --sdpa, each cell with its ratio to cuDNN (fp16), and
    the bf16/fp16 ratios;
  * README.md, <!-- BEGIN hopper-ladder-table --> ...: the same for every rung of --final (fp16);
  * docs/results/README.md, <!-- BEGIN final-table --> ...: the final rung (27) in every series
    of --final, with its ratios to cuDNN and FlashAttention-2; the same block on page 27
    (final-series);
  * docs/kernels/NN_*.md for NN >= 17, <!-- BEGIN hopper-results --> ... <!-- END ... -->: the
    rung's TFLOP/s, its ratio to the rung before, to FlashAttention-2 and to cuDNN, its fraction
    of the wgmma ceiling, and the C++ sweep (rungs 17-21 from --sdpa, 22+ from --final).

    python3 scripts/hopper_tables.py            # rewrites the blocks in place
    python3 scripts/hopper_tables.py --check    # exit 1 if a block is out of date
"""
import argparse
import json
import os
import re
import sys

from results_table import expand_rows

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "docs", "results")
FIRST_HOPPER = 17
PEERS = [("sdpa_flash", "FlashAttention-2 (SDPA flash)"), ("sdpa_cudnn", "cuDNN fused (SDPA cudnn)")]


def load_sdpa(path, d=128, causal=False):
    data = json.load(open(path))
    table = {}  # (dtype, impl) -> {N: tflops}
    for r in expand_rows(data["rows"]):
        if r.get("d") != d or bool(r.get("causal")) != causal:
            continue
        table.setdefault((r["dtype"], r["impl"]), {})[int(r["N"])] = r["tflops"]
    return data, table


def benchmarks(path):
    """A Google Benchmark JSON's benchmarks, as it writes them or stored compactly."""
    return expand_rows(json.load(open(path))["benchmarks"])


def load_bench(path):
    rows = {}  # kernel number -> {N: tflops}, fp16 d = 128, medians
    for b in benchmarks(path):
        if b.get("aggregate_name") == "median" and int(b.get("d", 0)) == 128:
            rows.setdefault(int(b["kernel"]), {})[int(b["N"])] = b["TFLOPS"]
    return rows


def load_ceiling(path):
    out = {}
    for b in benchmarks(path):
        if b.get("aggregate_name") == "median":
            m = re.match(r"wgmma_ss_(fp16|bf16)_m64n(\d+)k16", b["name"])
            if m:
                out[(m.group(1), int(m.group(2)))] = b["TFLOPS"]
    return out


def fmt(x):
    return f"{x:.1f}"


def pct(a, b):
    return f"{100.0 * a / b:.0f}%"


_ORIGINAL = {}  # path -> the text on disk; _CURRENT: the text with the blocks replaced so far
_CURRENT = {}


def replace_block(path, marker, body):
    """Replaces one block of `path` (in memory: a page may hold several blocks). Returns the
    file's text on disk, its text with every block so far, and nothing is written here."""
    if path not in _CURRENT:
        _ORIGINAL[path] = _CURRENT[path] = open(path).read()
    text = _CURRENT[path]
    begin, end = f"<!-- BEGIN {marker} -->", f"<!-- END {marker} -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{path}: no {begin} ... {end} block")
    new = text[: text.index(begin) + len(begin)] + "\n" + body.rstrip() + "\n" + text[text.index(end):]
    _CURRENT[path] = new
    return _ORIGINAL[path], new


def impls(table, dtype):
    return sorted({i for (t, i) in table if t == dtype and re.match(r"\d\d_", i)})


def readme_block(meta, table, ns, src, dtypes=("fp16", "bf16")):
    lines = [f"{meta['gpu']}, d = 128, H = 16, the sweep's B; TFLOP/s (ratio to cuDNN, the SDPA "
             f"cudnn backend timed in the same run). torch {meta['torch']}, {meta['date'][:10]}. "
             f"Source: `{src}` (`scripts/compare_sdpa.py`; table: `scripts/hopper_tables.py`).", ""]
    for dtype in dtypes:
        cudnn = table.get((dtype, "sdpa_cudnn"), {})
        lines.append(f"**{dtype}**")
        lines.append("")
        lines.append("| implementation | " + " | ".join(f"N = {n}" for n in ns) + " |")
        lines.append("|---|" + "---:|" * len(ns))
        for impl in impls(table, dtype) + [p for p, _ in PEERS]:
            row = table.get((dtype, impl), {})
            label = dict(PEERS).get(impl, impl)
            cells = []
            for n in ns:
                if n not in row:
                    cells.append("–")
                elif impl == "sdpa_cudnn" or n not in cudnn:
                    cells.append(fmt(row[n]))
                else:
                    cells.append(f"{fmt(row[n])} ({row[n] / cudnn[n]:.2f}×)")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    if "bf16" not in dtypes:
        return "\n".join(lines[:-1])
    # bf16 against fp16, per rung: the target is "bf16 within 3% of fp16".
    lines.append("bf16 / fp16 TFLOP/s of each rung, same run: " + "; ".join(
        f"{impl}: " + ", ".join(
            f"{table[('bf16', impl)][n] / table[('fp16', impl)][n]:.2f}" for n in ns
            if n in table.get(("bf16", impl), {}) and n in table.get(("fp16", impl), {}))
        for impl in impls(table, "fp16") if int(impl[:2]) >= FIRST_HOPPER) + " (N = "
        + ", ".join(map(str, ns)) + ").")
    return "\n".join(lines)


def page_block(meta, table, bench, ceiling, impl, prev, ns, src, bench_src, ceiling_src):
    dtype = "fp16"
    row = table[(dtype, impl)]
    prev_row = table.get((dtype, prev), {})
    flash = table.get((dtype, "sdpa_flash"), {})
    cudnn = table.get((dtype, "sdpa_cudnn"), {})
    ceil = ceiling.get((dtype, 128))
    lines = [f"Measured by `scripts/compare_sdpa.py` on {meta['gpu']} (fp16, d = 128, H = 16, the "
             f"sweep's B; {meta['date'][:10]}), from `{src}`; rung 16, FlashAttention-2 and cuDNN "
             f"timed in the same process. Ceiling: wgmma m64n128k16 back to back from shared "
             f"memory, {fmt(ceil)} TFLOP/s (`{ceiling_src}`, bench/bench_wgmma_ceiling.cu). "
             f"Regenerate with `scripts/hopper_tables.py`.", ""]
    lines.append("| N | " + " | ".join(str(n) for n in ns) + " |")
    lines.append("|---|" + "---:|" * len(ns))
    lines.append("| TFLOP/s | " + " | ".join(fmt(row[n]) for n in ns) + " |")
    lines.append(f"| vs rung {prev[:2]} | " + " | ".join(
        f"{row[n] / prev_row[n]:.2f}×" if n in prev_row else "–" for n in ns) + " |")
    lines.append("| vs FlashAttention-2 | " + " | ".join(
        f"{row[n] / flash[n]:.2f}×" if n in flash else "–" for n in ns) + " |")
    lines.append("| vs cuDNN | " + " | ".join(
        f"{row[n] / cudnn[n]:.2f}×" if n in cudnn else "–" for n in ns) + " |")
    lines.append("| % of the wgmma ceiling | " + " | ".join(pct(row[n], ceil) for n in ns) + " |")
    number = int(impl[:2])
    if number in bench:
        b, b16 = bench[number], bench.get(16, {})
        lines += ["", f"C++ sweep (`build/ladder_bench`, Google Benchmark JSON `{bench_src}`, "
                  "median of 3 repetitions of ≥ 0.2 s, L2 flushed before each launch, output "
                  "checked after timing):", ""]
        lines.append("| N | " + " | ".join(str(n) for n in ns) + " |")
        lines.append("|---|" + "---:|" * len(ns))
        lines.append("| TFLOP/s | " + " | ".join(fmt(b[n]) if n in b else "–" for n in ns) + " |")
        lines.append("| vs rung 16 | " + " | ".join(
            f"{b[n] / b16[n]:.2f}×" if n in b and n in b16 else "–" for n in ns) + " |")
    return "\n".join(lines)


FINAL = "27_final_hopper"


def final_block(path, src):
    """The final rung in every series of `path`: TFLOP/s, and its ratios to cuDNN and FA2."""
    meta = json.load(open(path))
    lines = [f"{meta['gpu']}, fp16, H = 16, the sweep's B (16 up to N = 4096, then halved with "
             f"each doubling); TFLOP/s of rung 27 (ratio to cuDNN / to FlashAttention-2, PyTorch "
             f"SDPA's cudnn and flash backends timed in the same process). torch {meta['torch']}. "
             f"Source: `{src}` (`scripts/compare_sdpa.py`; table: `scripts/hopper_tables.py`).", ""]
    series = [(d, c) for d in (64, 128, 256) for c in (False, True)]
    ns = sorted({int(r["N"]) for r in expand_rows(meta["rows"])})
    lines.append("| d | mask | " + " | ".join(f"N = {n}" for n in ns) + " |")
    lines.append("|---|---|" + "---:|" * len(ns))
    for d, causal in series:
        _, table = load_sdpa(path, d, causal)
        ours = table.get(("fp16", FINAL), {})
        cudnn = table.get(("fp16", "sdpa_cudnn"), {})
        flash = table.get(("fp16", "sdpa_flash"), {})
        if not ours:
            continue
        cells = []
        for n in ns:
            if n not in ours:
                cells.append("–")
                continue
            c = f"{ours[n] / cudnn[n]:.2f}" if n in cudnn else "–"
            f = f"{ours[n] / flash[n]:.2f}" if n in flash else "–"
            cells.append(f"{fmt(ours[n])} ({c} / {f})")
        lines.append(f"| {d} | {'causal' if causal else 'none'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdpa", default=os.path.join(RESULTS, "h100_hopper_sdpa.json"))
    ap.add_argument("--final", default=os.path.join(RESULTS, "h100_final_hopper_sdpa.json"))
    ap.add_argument("--bench", default=os.path.join(RESULTS, "h100_hopper_bench.json"))
    ap.add_argument("--ceiling", default=os.path.join(RESULTS, "h100_wgmma_ceiling.json"))
    ap.add_argument("--check", action="store_true", help="only check that the blocks are current")
    args = ap.parse_args()
    rel = lambda p: os.path.relpath(p, REPO)
    meta, table = load_sdpa(args.sdpa)
    bench, ceiling = load_bench(args.bench), load_ceiling(args.ceiling)
    ns = sorted({n for (t, i), row in table.items() if t == "fp16" for n in row})
    results_readme = os.path.join("docs", "results", "README.md")
    updates = [replace_block(os.path.join(REPO, results_readme), "hopper-table",
                             readme_block(meta, table, ns, rel(args.sdpa))) + (results_readme,)]
    final_meta, final_table = load_sdpa(args.final)
    final_ns = sorted({n for (t, i), row in final_table.items() if t == "fp16" for n in row})
    block = final_block(args.final, rel(args.final))
    updates.append(replace_block(os.path.join(REPO, "README.md"), "hopper-ladder-table",
                                 readme_block(final_meta, final_table, final_ns, rel(args.final),
                                              dtypes=("fp16",))) + ("README.md",))
    updates.append(replace_block(os.path.join(REPO, results_readme), "final-table", block)
                   + (results_readme,))
    # Rungs 17-21 from --sdpa, 22 and up from --final (each against the rung before in its file).
    for src, m, t, n_list, lo, hi in ((args.sdpa, meta, table, ns, FIRST_HOPPER, 21),
                                      (args.final, final_meta, final_table, final_ns, 22, 99)):
        rungs = impls(t, "fp16")
        for prev, impl in zip(rungs, rungs[1:]):
            if not lo <= int(impl[:2]) <= hi:
                continue
            page = os.path.join(REPO, "docs", "kernels", impl + ".md")
            if os.path.exists(page):
                updates.append(replace_block(page, "hopper-results", page_block(
                    m, t, bench, ceiling, impl, prev, n_list, rel(src), rel(args.bench),
                    rel(args.ceiling))) + (rel(page),))
    page23 = os.path.join(REPO, "docs", "kernels", FINAL + ".md")
    if os.path.exists(page23):
        updates.append(replace_block(page23, "final-series", block) + (rel(page23),))
    # One entry per file, with all its blocks.
    final = {}
    for _, _, name in updates:
        path = os.path.join(REPO, name)
        final[name] = (_ORIGINAL[path], _CURRENT[path], name)
    updates = list(final.values())
    stale = [name for old, new, name in updates if old != new]
    if args.check:
        for name in stale:
            print(f"out of date: {name}")
        return 1 if stale else 0
    for (old, new, name) in updates:
        if old != new:
            open(os.path.join(REPO, name), "w").write(new)
            print("updated", name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
