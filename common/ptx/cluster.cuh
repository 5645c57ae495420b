// Thread block clusters: the blocks of one cluster wait for each other and read each other's
// shared memory (distributed shared memory).
//   PTX ISA: "Parallel synchronization and communication instructions: barrier.cluster",
//   "Data movement and conversion instructions: mapa", "ld" with the .shared::cluster state
//   space, and the special register %cluster_ctarank (all PTX 7.8, sm_90).
//
// A grid launched with a cluster dimension (cudaLaunchAttributeClusterDimension) is made of
// clusters of that many blocks, which the GPU runs at the same time on SMs of one GPC. A block's
// rank in its cluster is %cluster_ctarank (x fastest). mapa turns an address in this block's
// shared window into the same offset in the shared memory of the block of rank r, an address in
// the .shared::cluster window that ld.shared::cluster reads (this block's own rank included).
// barrier.cluster.arrive.release then barrier.cluster.wait.acquire, executed by every thread of
// every block of the cluster, is a cluster-wide barrier: the shared-memory writes a thread made
// before its arrive are visible to the threads of the cluster after their wait. A block's shared
// memory exists only while the block runs, so a block whose memory others read must not exit
// before they are done: a last barrier after the reads (arrive_relaxed will do for it).
//
// sm_90 instructions: compiled for an earlier architecture the functions are empty or return 0.
// The host must then not launch with a cluster dimension (nor take a path that reads another
// block's memory); it asks the kernel's PTX version (cudaFuncGetAttributes: ptxVersion >= 90).
#pragma once

#include <cstdint>

namespace fl::ptx::cluster {

// This block's rank in its cluster.
__device__ __forceinline__ uint32_t ctarank() {
  uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}

// Arrive at the cluster barrier: this thread's earlier shared-memory writes are released to the
// cluster.
__device__ __forceinline__ void arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
#endif
}

// Arrive at the cluster barrier without releasing anything: no fence before the arrive (the
// released arrive above compiles to MEMBAR.ALL.GPU first, which waits for this thread's stores to
// global memory too). For a barrier that orders nothing but the threads' progress, such as the
// last one of a block whose shared memory others read: a load is done once its value is used.
__device__ __forceinline__ void arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
#endif
}

// Wait until every thread of the cluster has arrived; what they released is visible after it.
__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}

// arrive, then wait.
__device__ __forceinline__ void sync() {
  arrive();
  wait();
}

// The .shared::cluster address of offset `addr` (a shared-window address, smem_addr) in the shared
// memory of the block of rank `rank`.
__device__ __forceinline__ uint32_t map(uint32_t addr, uint32_t rank) {
  uint32_t out = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
#endif
  return out;
}

// One fp32 at a .shared::cluster address (map).
__device__ __forceinline__ float ld_f32(uint32_t addr) {
  float v = 0.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
#endif
  return v;
}

// Four fp32 at a 16-byte-aligned .shared::cluster address (map).
__device__ __forceinline__ float4 ld_v4_f32(uint32_t addr) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
#endif
  return v;
}

}  // namespace fl::ptx::cluster
