// fp32 -> fp8 e4m3 conversion in registers, through inline PTX.
//   PTX ISA: "Data movement and conversion instructions: cvt" (.e4m3x2, sm_89+).
//
// cvt.rn.satfinite.e4m3x2.f32 d, a, b converts two fp32 values to a pair of e4m3 in a 16-bit
// register: a in the UPPER byte, b in the lower (the same order trap as cvt.rn.f16x2.f32), rounded
// to nearest even and saturated to +-448 (NaN stays NaN). pack4_e4m3 puts four values into one
// 32-bit register, x0 in the lowest byte: the byte order in which wgmma reads four consecutive k
// of an 8-bit A operand from a register (common/ptx/wgmma.cuh).
#pragma once

#include <cstdint>

namespace fl::ptx {

__device__ __forceinline__ uint32_t pack4_e4m3(float x0, float x1, float x2, float x3) {
  uint16_t lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

}  // namespace fl::ptx
