// Named barriers: block-level barriers among a subset of warps, through inline PTX.
//   PTX ISA: "Parallel synchronization and communication instructions: bar, barrier"
//   (bar.sync, bar.arrive).
//
// A block has 16 hardware barriers; id 0 is __syncthreads. `bar.sync id, n` waits until n
// threads (a multiple of 32: whole warps) have arrived at barrier id, counting itself;
// `bar.arrive id, n` counts this warp's arrival and goes on without waiting. Two warpgroups thus
// take turns: the one that may go syncs, the one that hands over arrives, n = 256 (both).
// n must count exactly the threads that reach the barrier: a warp that returned never will.
#pragma once

#include <cstdint>

namespace fl::ptx {

__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace fl::ptx
