#!/usr/bin/env python3
"""Static SASS opcode counts per kernel function, from `cuobjdump -sass`.

Later rungs are steered by SASS ("fewer IADD3/LOP3/SHF/MOV", "one LDSM per HMMA"): this counts, for
every function in a binary or object whose mangled name matches a filter, how many instructions
of each opcode the compiler emitted (static counts: instructions in the code, not executions).

  scripts/sass_counts.py build/ladder --kernel 3                 # functions of namespace k03_
  scripts/sass_counts.py build/ladder --kernel 12 --kernel 13 --opcodes HMMA,LDSM,IADD3,LOP3,SHF,MOV
  scripts/sass_counts.py build/CMakeFiles/fl_kernels.dir/kernels/06_swizzle/swizzle.cu.o --full
  scripts/sass_counts.py build/ladder --filter 'k0[5-8]_' --json sass.json
  cuobjdump -sass build/ladder > all.sass; scripts/sass_counts.py --sass all.sass --kernel 3
  scripts/sass_counts.py build/ladder --kernel 12 --kernel 13 --arch sm_90 --loop   # KV loop only
  scripts/sass_hopper.sh build      # HGMMA/HMMA/LDL/STL per kernel of each Hopper rung (17+)

Opcodes are counted without modifiers (HMMA.16816.F32.BF16 -> HMMA) unless --full; predicates
(@P0, @!PT) are dropped. --loop counts only the body of each function's largest loop (from the
target of its longest backward branch to that branch): the KV loop of an attention kernel, whose
instructions run once per KV tile, without the prologue and epilogue that run once per block. With several functions, one column per function; --json writes
{"arch": ..., "functions": [{"mangled", "name", "arch", "total", "counts": {opcode: n}}]}.
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
from collections import Counter

INSTR_RE = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;")
BRA_RE = re.compile(r"\bBRA\s+(?:\S+\s+)?0x([0-9a-fA-F]+)")
FUNC_RE = re.compile(r"^\s*Function\s*:\s*(\S+)")
ARCH_RE = re.compile(r"code for (sm_\d+[a-z]?)")


def find_cuobjdump():
    """cuobjdump from PATH, else from the pip wheels nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm
    (<site-packages>/nvidia/*/bin, as cmake/sass_tools.cmake looks); (path, env for nvdisasm)."""
    exe = shutil.which("cuobjdump")
    if exe is not None:
        return exe, None
    import glob
    import os
    import site
    roots = list(sys.path)
    try:
        roots += site.getsitepackages() + [site.getusersitepackages()]
    except Exception:
        pass
    for root in roots:
        for d in sorted(glob.glob(os.path.join(root, "nvidia", "*", "bin"))):
            if os.path.exists(os.path.join(d, "cuobjdump")):
                env = dict(os.environ, PATH=d + os.pathsep + os.environ.get("PATH", ""))
                return os.path.join(d, "cuobjdump"), env
    return None, None


def dump_sass(path, arch):
    exe, env = find_cuobjdump()
    if exe is None:
        sys.exit("sass_counts.py: cuobjdump is not on PATH (it ships with the CUDA toolkit, or: "
                 "python3 -m pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm); "
                 "or pass a dump with --sass")
    cmd = [exe, "-sass"] + (["-arch", arch] if arch else []) + [path]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        sys.exit(f"sass_counts.py: {' '.join(cmd)} failed:\n{res.stderr}")
    return res.stdout


def opcode_of(text, full):
    """'@!P0 BRA 0x1a0' -> 'BRA'; '{ HMMA.16816.F32 R4, ...' -> 'HMMA' (or the full mnemonic)."""
    tokens = text.replace("{", " ").replace("}", " ").split()
    while tokens and tokens[0].startswith("@"):
        tokens = tokens[1:]
    if not tokens:
        return None
    op = tokens[0]
    return op if full else op.split(".")[0]


def largest_loop(instrs):
    """(first, last) addresses of the longest backward branch's span, or None."""
    best = None
    for addr, text in instrs:
        m = BRA_RE.search(text)
        if m:
            target = int(m.group(1), 16)
            if target < addr and (best is None or addr - target > best[1] - best[0]):
                best = (target, addr)
    return best


def parse(sass, full, loop=False):
    """[(arch, mangled, Counter)] in the order of the dump (with loop: the largest loop only)."""
    functions, arch, current = [], "", None
    for line in sass.splitlines():
        m = ARCH_RE.search(line)
        if m:
            arch = m.group(1)
            continue
        m = FUNC_RE.match(line)
        if m:
            current = (arch, m.group(1), [])
            functions.append(current)
            continue
        m = INSTR_RE.match(line)
        if m and current is not None:
            current[2].append((int(m.group(1), 16), m.group(2)))
    out = []
    for arch, name, instrs in functions:
        span = largest_loop(instrs) if loop else None
        counts = Counter()
        if loop and span is None:
            counts["(no loop: whole function)"] = 0
        for addr, text in instrs:
            if span is not None and not span[0] <= addr <= span[1]:
                continue
            op = opcode_of(text, full)
            if op:
                counts[op] += 1
        out.append((arch, name, counts))
    return out


def demangle(names):
    exe = shutil.which("c++filt") or shutil.which("cu++filt")
    if exe is None or not names:
        return {n: n for n in names}
    res = subprocess.run([exe], input="\n".join(names), capture_output=True, text=True)
    out = res.stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def short_name(demangled):
    """'void fl::k03_mma::attention_kernel<__half, 128>(fl::AttnParams)' ->
    'k03_mma::attention_kernel<__half, 128>'."""
    s = re.sub(r"^void\s+", "", demangled)
    s = re.sub(r"\(.*\)$", "", s)
    return re.sub(r"^fl::", "", s)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary", nargs="?", help="executable, shared library, object or cubin")
    ap.add_argument("--sass", help="read this cuobjdump -sass output instead ('-' = stdin)")
    ap.add_argument("--kernel", action="append", type=int, default=[],
                    help="keep functions of rung NN (mangled name contains kNN_); repeatable")
    ap.add_argument("--filter", default="", help="keep functions whose mangled name matches")
    ap.add_argument("--arch", default="", help="e.g. sm_90 (default: every arch in the binary)")
    ap.add_argument("--full", action="store_true", help="count opcodes with their modifiers")
    ap.add_argument("--loop", action="store_true",
                    help="count only each function's largest loop (the KV loop)")
    ap.add_argument("--opcodes", default="", help="comma-separated opcodes to show (default all)")
    ap.add_argument("--top", type=int, default=0, help="show only the N most frequent opcodes")
    ap.add_argument("--json", default="", help="write the counts as JSON here ('-' = stdout)")
    args = ap.parse_args()

    if args.sass:
        sass = sys.stdin.read() if args.sass == "-" else open(args.sass).read()
    elif args.binary:
        sass = dump_sass(args.binary, args.arch)
    else:
        ap.error("give a binary or --sass")

    patterns = [re.compile(f"k{k:02d}_") for k in args.kernel]
    if args.filter:
        patterns.append(re.compile(args.filter))
    functions = [(arch, name, counts) for arch, name, counts in parse(sass, args.full, args.loop)
                 if (not args.arch or arch == args.arch)
                 and (not patterns or any(p.search(name) for p in patterns))]
    for _, name, counts in functions:
        if counts.pop("(no loop: whole function)", None) is not None:
            print(f"sass_counts.py: {name}: no loop found, counted the whole function",
                  file=sys.stderr)
    if not functions:
        sys.exit("sass_counts.py: no function matched (the names are mangled: try --filter with "
                 "a part of the namespace, e.g. k03_)")
    names = demangle(sorted({name for _, name, _ in functions}))

    result = {"functions": [
        {"mangled": name, "name": short_name(names[name]), "arch": arch,
         "total": sum(counts.values()), "counts": dict(counts.most_common())}
        for arch, name, counts in functions]}
    if args.json:
        text = json.dumps(result, indent=1) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
            return
        with open(args.json, "w") as fh:
            fh.write(text)

    total = Counter()
    for _, _, counts in functions:
        total.update(counts)
    if args.opcodes:
        wanted = [o.strip() for o in args.opcodes.split(",") if o.strip()]
    else:
        wanted = [op for op, _ in total.most_common(args.top or None)]

    for i, f in enumerate(result["functions"]):
        print(f"[{i}] {f['arch']} {f['name']}  ({f['total']} instructions)")
    print()
    width = max(8, *(len(op) for op in wanted)) if wanted else 8
    print(f"{'opcode':<{width}}" + "".join(f"{f'[{i}]':>9}" for i in range(len(functions))))
    for op in wanted:
        print(f"{op:<{width}}" + "".join(f"{counts.get(op, 0):>9}" for _, _, counts in functions))
    print(f"{'total':<{width}}" + "".join(f"{sum(c.values()):>9}" for _, _, c in functions))
    if args.json and args.json != "-":
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
