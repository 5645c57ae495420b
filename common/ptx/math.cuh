// Fast transcendental functions through inline PTX (rung 11 onwards).
//   PTX ISA: "Floating point instructions: ex2" (ex2.approx.ftz.f32: all target architectures).
#pragma once

namespace fl::ptx {

// ex2.approx.ftz.f32: 2^x from the special-function unit in one instruction (SASS MUFU.EX2),
// without the range reduction and correction steps of the accurate expf. .ftz flushes subnormal
// inputs and results to zero: 2^x for x < -126 gives 0 instead of a subnormal, which a softmax
// weight that small does not miss. ex2(-inf) = +0, ex2(+inf) = +inf, ex2(NaN) = NaN.
// Not volatile: a pure function of its input, which the compiler may schedule or merge freely.
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace fl::ptx
