#!/usr/bin/env python3
"""Writes common/ptx/wgmma_ops.inc: the wgmma.mma_async wrappers for every (type, N) the ladder uses:
fp16 and bf16 (m64nNk16, with the transpose immediates) and fp8 e4m3 (m64nNk32: 32 one-byte k
per instruction, the same 32 bytes of a K-major row as a 16-bit k16; no transpose exists for
8-bit types, both operands are K-major).

Inline asm cannot loop over operands, so an m64nNk16 with N/2 fp32 accumulators per thread must
name each of them ("%0, %1, ..., %63" and 64 "+f" constraints for N = 128). This script spells
them out once; common/ptx/wgmma.cuh explains the instruction and includes the result.

    python3 scripts/gen_wgmma.py                 # rewrites common/ptx/wgmma_ops.inc
    python3 scripts/gen_wgmma.py --out PATH      # writes PATH instead
    python3 scripts/gen_wgmma.py --check         # exit 1, with a diff, if the file differs
                                                 # (ctest: gen_wgmma_check)
"""
import argparse
import difflib
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# 16-bit N: 64, 128, 256, 80 (the S tile of 80 keys at d = 256 and 192, rungs 24-27), 192
# (rung 27's P.V at d = 192) and 96 (rung 71's P.V at d = 96).
N_VALUES = (16, 64, 80, 96, 128, 192, 256)
N_VALUES_FP8 = (64, 128, 256)
TYPES = (("__half", "f16"), ("__nv_bfloat16", "bf16"))
FP8_TYPES = (("__nv_fp8_e4m3", "e4m3"),)


def operand_lines(count, per_line=16):
    names = [f"%{i}" for i in range(count)]
    rows = [", ".join(names[k:k + per_line]) for k in range(0, count, per_line)]
    return "\n".join(f'        "{r}{"," if i < len(rows) - 1 else ""}"' for i, r in enumerate(rows))


def one(n, ctype, suffix):
    acc = n // 2  # fp32 accumulators per thread: 64 x N over 128 threads
    constraints = ", ".join(f"FL_WGMMA_ACC8(d, {i})" for i in range(0, acc, 8))
    return f"""template <>
struct Wgmma<{ctype}, {n}> {{
  // SS: A and B from shared memory through descriptors; A K-major (no transpose).
  template <int kTransB>
  static __device__ __forceinline__ void ss(float (&d)[{acc}], uint64_t desc_a, uint64_t desc_b,
                                            int accumulate) {{
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{acc + 2}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{suffix}.{suffix} {{"
{operand_lines(acc)}
        "}}, %{acc}, %{acc + 1}, p, 1, 1, 0, %{acc + 3};\\n}}\\n"
        : {constraints}
        : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB)
        : "memory");
  }}
  // RS: A from four 32-bit registers per thread (the mma.sync m16k16 A layout per warp).
  template <int kTransB>
  static __device__ __forceinline__ void rs(float (&d)[{acc}], const uint32_t (&a)[4],
                                            uint64_t desc_b, int accumulate) {{
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{acc + 5}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{suffix}.{suffix} {{"
{operand_lines(acc)}
        "}}, {{%{acc}, %{acc + 1}, %{acc + 2}, %{acc + 3}}}, %{acc + 4}, p, 1, 1, %{acc + 6};\\n}}\\n"
        : {constraints}
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate),
          "n"(kTransB)
        : "memory");
  }}
}};
"""


def one_fp8(n, ctype, suffix):
    acc = n // 2
    constraints = ", ".join(f"FL_WGMMA_ACC8(d, {i})" for i in range(0, acc, 8))
    return f"""template <>
struct Wgmma<{ctype}, {n}> {{
  static constexpr int kK = 32;  // k per instruction: 32 one-byte elements
  // SS: A and B from shared memory, both K-major (8-bit types have no transpose).
  template <int kTransB>
  static __device__ __forceinline__ void ss(float (&d)[{acc}], uint64_t desc_a, uint64_t desc_b,
                                            int accumulate) {{
    static_assert(kTransB == 0, "wgmma on 8-bit types reads K-major operands only");
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{acc + 2}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{suffix}.{suffix} {{"
{operand_lines(acc)}
        "}}, %{acc}, %{acc + 1}, p, 1, 1;\\n}}\\n"
        : {constraints}
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
  }}
  // RS: A from four 32-bit registers per thread, four 8-bit k each (mma.sync's m16n8k32 A
  // layout per warp: see common/ptx/wgmma.cuh).
  template <int kTransB>
  static __device__ __forceinline__ void rs(float (&d)[{acc}], const uint32_t (&a)[4],
                                            uint64_t desc_b, int accumulate) {{
    static_assert(kTransB == 0, "wgmma on 8-bit types reads K-major operands only");
    asm volatile(
        "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{acc + 5}, 0;\\n"
        "wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{suffix}.{suffix} {{"
{operand_lines(acc)}
        "}}, {{%{acc}, %{acc + 1}, %{acc + 2}, %{acc + 3}}}, %{acc + 4}, p, 1, 1;\\n}}\\n"
        : {constraints}
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)
        : "memory");
  }}
}};
"""


DEFAULT_OUT = os.path.join(REPO, "common", "ptx", "wgmma_ops.inc")


def generate():
    parts = ["// Generated by scripts/gen_wgmma.py; do not edit. Included by common/ptx/wgmma.cuh.",
             "// clang-format off", ""]
    for n in N_VALUES:
        for ctype, suffix in TYPES:
            parts.append(one(n, ctype, suffix))
    for n in N_VALUES_FP8:
        for ctype, suffix in FP8_TYPES:
            parts.append(one_fp8(n, ctype, suffix))
    parts.append("// clang-format on")
    return "\n".join(parts) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description="Generate the wgmma.mma_async wrappers "
                                 "(common/ptx/wgmma_ops.inc).")
    ap.add_argument("--out", default=DEFAULT_OUT,
                    help="the file to write or check (default: common/ptx/wgmma_ops.inc)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 with a diff if the file is not what this script "
                         "generates")
    args = ap.parse_args(argv)
    text = generate()
    out = os.path.abspath(args.out)
    shown = os.path.relpath(out, REPO) if out.startswith(REPO + os.sep) else args.out
    if args.check:
        try:
            with open(args.out, newline="") as f:
                current = f.read()
        except OSError as e:
            print(f"gen_wgmma.py --check: cannot read {shown}: {e}", file=sys.stderr)
            return 1
        if current == text:
            print(f"{shown} is up to date")
            return 0
        diff = difflib.unified_diff(current.splitlines(keepends=True),
                                    text.splitlines(keepends=True),
                                    fromfile=f"{shown} (in the tree)",
                                    tofile=f"{shown} (generated)")
        sys.stdout.writelines(diff)
        print(f"\n{shown} differs from what scripts/gen_wgmma.py generates: run "
              f"python3 scripts/gen_wgmma.py", file=sys.stderr)
        return 1
    with open(args.out, "w", newline="") as f:
        f.write(text)
    print("wrote", shown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
