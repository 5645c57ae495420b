// TMA, the Tensor Memory Accelerator (Hopper's bulk tensor copy engine), through inline PTX.
//   PTX ISA: "Data movement: cp.async.bulk.tensor" (sm_90), "prefetch.tensormap",
//   "fence.proxy.async". Host side (building the tensor map): common/tensor_map.h.
//
// One thread issues a copy of a whole box (a tile of up to 256 x 256 x ... elements) of a tensor
// described by a CUtensorMap (built on the host, passed as a __grid_constant__ kernel parameter);
// the engine computes every address, writes the box into shared memory in the map's swizzle, fills
// what lies outside the tensor with zeros, and counts the bytes down on an mbarrier
// (common/ptx/mbarrier.cuh) as they land: the consumers wait on that barrier, nobody on the copy.
//   load_4d(dst, map, bar, c0, c1, c2, c3)   box at coordinates (c0 innermost .. c3), in elements
// The box's byte count (zero-filled bytes included) must be announced on the barrier with
// arrive_expect_tx before (or in the same phase as) the copy, or the phase never completes.
#pragma once

#include <cstdint>

namespace fl::ptx::tma {

// cp.async.bulk.tensor.4d global -> shared, completion on mbarrier `bar` (complete_tx::bytes).
// `map` is the generic address of the CUtensorMap (a __grid_constant__ parameter).
__device__ __forceinline__ void load_4d(uint32_t dst, const void* map, uint32_t bar, int c0,
                                        int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// Brings the tensor map itself into the cache ahead of the first copy that uses it.
__device__ __forceinline__ void prefetch_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

}  // namespace fl::ptx::tma
