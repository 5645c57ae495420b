// Asynchronous global -> shared copies through inline PTX.
//   PTX ISA: "Data movement: cp.async", "cp.async.commit_group", "cp.async.wait_group",
//   "cp.async.mbarrier.arrive", sm_80+.
#pragma once

#include <cstdint>

namespace fl::ptx::cp_async {

// cp.async.cg.shared.global [dst], [src], 16, src_bytes: copies src_bytes (0..16) from global
// memory and fills the rest of the 16 bytes with zeros. src_bytes = 0 reads nothing (the address
// must still be a valid-looking global address) and writes 16 zero bytes: the tail of a tensor.
// .cg caches in L2 only, bypassing L1 (the data is used once per block).
__device__ __forceinline__ void copy_16(uint32_t dst_smem, const void* src, uint32_t src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_smem), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// cp.async.commit_group: closes the group of copies issued since the last commit.
__device__ __forceinline__ void commit_group() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// cp.async.wait_group N: waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// cp.async.wait_all: waits for every copy this thread issued.
__device__ __forceinline__ void wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// cp.async.mbarrier.arrive.noinc: one arrival on the mbarrier at `bar` (shared memory), made when
// every cp.async this thread issued before it has landed; the writes are then visible to any
// thread that sees the barrier's phase complete. .noinc: the arrival is one of the count given at
// init (init with the number of threads that arrive this way). sm_80+.
__device__ __forceinline__ void mbarrier_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

}  // namespace fl::ptx::cp_async
