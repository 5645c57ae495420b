#!/usr/bin/env python3
"""Registers, shared memory, stack and spills of every kernel, from the ptxas reports the build
keeps beside each kernel object (build/CMakeFiles/fl_kernels.dir/kernels/NN_slug/*.ptxas.txt;
the Hopper rungs, 17+: build/CMakeFiles/fl_kernels_sm90a.dir/kernels/NN_slug/).

    scripts/resource_report.py build                 # print a table per kernel
    scripts/resource_report.py build --pages         # also fill the <!-- BEGIN resources -->
                                                     # block of docs/kernels/NN_*.md
"""
import argparse
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


def short(name):
    """fl::k03_mma::attention_kernel<__half, 128>(fl::AttnParams) -> attention_kernel<__half, 128>"""
    name = re.sub(r"\(.*\)$", "", name)
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"^fl::k\d\d_\w+?::", "", name)
    return name.replace("__nv_bfloat16", "bf16").replace("__half", "fp16")


def parse(report):
    rows, arch, fn = [], None, None
    for line in report.splitlines():
        m = re.search(r"Compiling entry function '(\S+)' for '(sm_\w+)'", line)
        if m:
            fn, arch = m.group(1), m.group(2)
            rows.append({"fn": fn, "arch": arch, "regs": 0, "smem": 0, "stack": 0, "spill_st": 0, "spill_ld": 0})
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and rows:
            rows[-1].update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and rows:
            rows[-1]["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            rows[-1]["smem"] = int(s.group(1)) if s else 0
    return rows


def table(rows):
    names = demangle(sorted({r["fn"] for r in rows}))
    lines = ["| function | arch | registers | static smem (bytes) | stack (bytes) | spill stores / loads (bytes) |",
             "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (short(names[r["fn"]]), r["arch"])):
        lines.append(f"| `{short(names[r['fn']])}` | {r['arch']} | {r['regs']} | {r['smem']} | {r['stack']} | "
                     f"{r['spill_st']} / {r['spill_ld']} |")
    return "\n".join(lines)


def fill(page, block, text):
    src = page.read_text()
    pat = re.compile(rf"(<!-- BEGIN {block} -->\n).*?(<!-- END {block} -->)", re.S)
    if not pat.search(src):
        return False
    page.write_text(pat.sub(lambda m: m.group(1) + text + "\n" + m.group(2), src))
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--pages", action="store_true", help="fill the resources block of each page")
    args = ap.parse_args()
    # Rungs 00-16 (target fl_kernels) and the Hopper rungs, 17+ (target fl_kernels_sm90a).
    bases = [pathlib.Path(args.build) / "CMakeFiles" / t / "kernels"
             for t in ("fl_kernels.dir", "fl_kernels_sm90a.dir")]
    if not bases[0].exists():
        sys.exit(f"no kernel objects under {bases[0]}: build first")
    # Only the rungs the tree has: a build folder can keep the objects of a rung since renamed.
    kdirs = [p for base in bases if base.exists() for p in base.iterdir()
             if p.is_dir() and (ROOT / "kernels" / p.name).is_dir()]
    for kdir in sorted(kdirs, key=lambda p: p.name):
        rows = []
        for rep in sorted(kdir.glob("*.ptxas.txt")):
            rows += parse(rep.read_text())
        if not rows:
            continue
        text = table(rows)
        print(f"## {kdir.name}\n\n{text}\n")
        if args.pages:
            for page in (ROOT / "docs" / "kernels").glob(f"{kdir.name}.md"):
                cmd = ("Compiler report of `cmake --build build` (nvcc 13.0, `--resource-usage`), "
                       "printed by `scripts/resource_report.py build`:\n\n")
                fill(page, "resources", cmd + text)


if __name__ == "__main__":
    main()
