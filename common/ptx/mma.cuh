// Tensor-core matrix multiply-accumulate through inline PTX.
//   PTX ISA: "Warp-level matrix instructions: mma" (mma.sync.aligned.m16n8k16), sm_80+.
// Fragment layouts (which lane holds which element) are in common/ptx/fragment.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace fl::ptx {

// D(16x8, f32) = A(16x16, row-major) * B(16x8, column-major) + C, f16 inputs.
// a: 4 x .b32 (8 halves), b: 2 x .b32 (4 halves), c/d: 4 x f32.
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2], const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
        "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// The same with bf16 inputs.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
                                                  const uint32_t (&b)[2], const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
        "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// Picks the instruction from the element type: mma_m16n8k16<T>(d, a, b, c), d += a * b when
// d and c are the same array.
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2], const float (&c)[4]);
template <>
__device__ __forceinline__ void mma_m16n8k16<__half>(float (&d)[4], const uint32_t (&a)[4],
                                                     const uint32_t (&b)[2],
                                                     const float (&c)[4]) {
  mma_m16n8k16_f16(d, a, b, c);
}
template <>
__device__ __forceinline__ void mma_m16n8k16<__nv_bfloat16>(float (&d)[4],
                                                            const uint32_t (&a)[4],
                                                            const uint32_t (&b)[2],
                                                            const float (&c)[4]) {
  mma_m16n8k16_bf16(d, a, b, c);
}

}  // namespace fl::ptx
