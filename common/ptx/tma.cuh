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
//   load_1d(dst, src, bytes, bar)            a contiguous run of bytes, no map (cp.async.bulk)
// The box's byte count (zero-filled bytes included) must be announced on the barrier with
// arrive_expect_tx before (or in the same phase as) the copy, or the phase never completes.
//
// The other direction, shared -> global, is a bulk async-group, not an mbarrier:
//   store_4d(src, map, c0, c1, c2, c3)   writes the box at those coordinates from shared memory;
//                                        what lies outside the tensor is not written (clipped)
//   commit_group()                       closes a group of the thread's stores
//   wait_group_read<N>()                 until at most N groups still read shared memory: the
//                                        source may be overwritten
//   wait_group<N>()                      until at most N groups are incomplete (written)
//   reduce_add_1d_f32(dst, src, bytes)   adds `bytes` of fp32 from shared memory into global
//                                        memory, element by element (cp.reduce.async.bulk), in
//                                        the same groups as the stores
// The source was written by ordinary stores (st.shared, stmatrix): the writers make them visible
// to the async proxy (fence.proxy.async.shared::cta, common/ptx/fence_proxy.cuh), then a barrier,
// then one thread issues the store.
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

// cp.async.bulk global -> shared (no tensor map): `bytes` contiguous bytes (a multiple of 16, both
// addresses 16-byte aligned), completion on mbarrier `bar` like a tensor copy. For small
// contiguous rows such as the backward's per-query LSE and D.
__device__ __forceinline__ void load_1d(uint32_t dst, const void* src, uint32_t bytes,
                                        uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

// Brings the tensor map itself into the cache ahead of the first copy that uses it.
__device__ __forceinline__ void prefetch_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// cp.async.bulk.tensor.4d shared -> global, completion tracked by the thread's bulk groups.
__device__ __forceinline__ void store_4d(uint32_t src, const void* map, int c0, int c1, int c2,
                                         int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// cp.reduce.async.bulk .add.f32 shared -> global: dst[i] += src[i] for `bytes` / 4 floats, both
// 16-byte aligned, `bytes` a multiple of 16; the adds are atomic per element, like red.add.
__device__ __forceinline__ void reduce_add_1d_f32(float* dst, uint32_t src, uint32_t bytes) {
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
          reinterpret_cast<uint64_t>(dst)),
      "r"(src), "r"(bytes)
      : "memory");
}

__device__ __forceinline__ void commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

template <int N>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace fl::ptx::tma
