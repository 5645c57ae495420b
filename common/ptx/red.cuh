// Reductions into global memory through inline PTX (the backward's fp32 dQ accumulator).
//   PTX ISA: "Parallel synchronization and communication instructions: red" (red.global.add.f32,
//   sm_20+).
#pragma once

namespace fl::ptx {

// red.global.add.f32 [addr], v: *addr += v, done by the memory system (in L2), atomic with respect
// to every other red/atom on the same address, and returning nothing (unlike atom.add, the
// thread does not wait for an old value). The order in which blocks add is not fixed, and fp32
// addition is not associative: the sum may differ in its last bits from run to run.
__device__ __forceinline__ void red_global_add_f32(float* addr, float v) {
  asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(addr), "f"(v) : "memory");
}

}  // namespace fl::ptx
