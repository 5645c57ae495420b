// Reductions into global memory through inline PTX (the backward's fp32 dQ accumulator).
//   PTX ISA: "Parallel synchronization and communication instructions: red" (red.global.add.f32,
//   sm_20+; the vector form red.global.add.v4.f32, sm_90+).
#pragma once

namespace fl::ptx {

// red.global.add.f32 [addr], v: *addr += v, done by the memory system (in L2), atomic with respect
// to every other red/atom on the same address, and returning nothing (unlike atom.add, the
// thread does not wait for an old value). The order in which blocks add is not fixed, and fp32
// addition is not associative: the sum may differ in its last bits from run to run.
__device__ __forceinline__ void red_global_add_f32(float* addr, float v) {
  asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(addr), "f"(v) : "memory");
}

// red.global.add.v4.f32 [addr], {v.x, v.y, v.z, v.w}: the same for four consecutive floats at a
// 16-byte aligned address, in one request to L2 (vector red: compute capability 9.0, PTX 8.1).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__device__ __forceinline__ void red_global_add_v4_f32(float* addr, float4 v) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "f"(v.x), "f"(v.y),
               "f"(v.z), "f"(v.w)
               : "memory");
}
#endif

}  // namespace fl::ptx
