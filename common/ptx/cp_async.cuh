// Asynchronous global -> shared copies through inline PTX.
//   PTX ISA: "Data movement: cp.async", "cp.async.commit_group", "cp.async.wait_group", sm_80+.
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

}  // namespace fl::ptx::cp_async
