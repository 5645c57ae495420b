// Global stores with a cache operator through inline PTX (rung 15 onwards: the output tile).
//   PTX ISA: "Data Movement and Conversion Instructions: st" and "Cache Operators" (.cs),
//   .v4.b32 with a cache operator: sm_20+ (every GPU the ladder runs on, sm_80+).
//
// The output O is written once and never read back by the kernel: a normal store (st.global.wb)
// leaves its lines in L2 with the same priority as K and V, which every block of the same
// (batch, KV head) reads again. .cs ("cache streaming, likely to be accessed once") allocates the
// lines with the evict-first policy, so O's lines are the first to go when L2 needs room and K/V
// tiles stay resident longer. The hint changes no result: cache operators are performance hints
// only, and do not change the memory consistency of the program.
#pragma once

#include <cstdint>

namespace fl::ptx {

// st.global.cs.v4.b32 [ptr], {r0, r1, r2, r3}: one 16-byte store (ptr 16-byte aligned), lines
// allocated evict-first. Four 32-bit registers, e.g. eight packed 16-bit elements.
__device__ __forceinline__ void st_global_cs_v4_b32(void* ptr, uint32_t r0, uint32_t r1,
                                                    uint32_t r2, uint32_t r3) {
  asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(ptr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// The same for a uint4 (the value ld.shared.v4 / a 128-bit shared load returns).
__device__ __forceinline__ void st_global_cs_v4_b32(void* ptr, const uint4& v) {
  st_global_cs_v4_b32(ptr, v.x, v.y, v.z, v.w);
}

}  // namespace fl::ptx
