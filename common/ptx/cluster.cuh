// Thread block clusters: the blocks of one cluster wait for each other and read each other's
// shared memory (distributed shared memory).
//   PTX ISA: "Parallel synchronization and communication instructions: barrier.cluster",
//   "Data movement and conversion instructions: mapa", "ld" with the .shared::cluster state
//   space, and the special register %cluster_ctarank (all PTX 7.8, sm_90); "st.async" (PTX 8.1,
//   sm_90) and "mbarrier" (expect_tx, try_wait with .acquire.cluster).
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
// A block may also push into another block's shared memory: st_async* stores to a .shared::cluster
// address and counts its bytes on an mbarrier in the receiving block (mapped the same way). The
// receiver sets its mbarrier up to expect a number of bytes (expect_bytes) before any block may
// push to it (a cluster barrier in between), then waits for them (wait_bytes): no fence and no
// barrier between the pushes and the reads, only the byte count. The pushed-to memory must be
// read by no one else by then, and a block must not exit before every block has its bytes.
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

// Sets up this block's mbarrier `bar` (a shared-window address, 8-byte aligned, used for nothing
// else) to complete its first phase once `bytes` bytes have been pushed to it: init with one
// arrival, the init released to the cluster (fence.mbarrier_init), and that one arrival made
// with the byte count. One thread, before the cluster barrier after which others may push.
__device__ __forceinline__ void expect_bytes(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "mbarrier.init.shared::cta.b64 [%0], 1;\n"
      "fence.mbarrier_init.release.cluster;\n"
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
      "r"(bytes)
      : "memory");
#endif
}

// Stores to a .shared::cluster address (map) of a block of the cluster (this one included) and
// counts the bytes on that block's mbarrier `bar` (its address mapped the same way): 16, 8 or 4
// bytes (an address aligned to as many). The store is asynchronous: nothing in this thread waits
// for it; the receiver's wait_bytes does.
__device__ __forceinline__ void st_async_v4(uint32_t addr, float4 v, uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(addr),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
      : "memory");
#endif
}

__device__ __forceinline__ void st_async_v2(uint32_t addr, float x, float y, uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];\n" ::"r"(
          addr),
      "f"(x), "f"(y), "r"(bar)
      : "memory");
#endif
}

__device__ __forceinline__ void st_async_f32(uint32_t addr, float x, uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n" ::"r"(
                   addr),
               "f"(x), "r"(bar)
               : "memory");
#endif
}

// Waits until the first phase of this block's mbarrier `bar` (expect_bytes) is complete, every
// byte pushed to it landed: with acquire semantics at cluster scope, so the pushed data is
// visible after it.
__device__ __forceinline__ void wait_bytes(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar)
        : "memory");
  }
#endif
}

}  // namespace fl::ptx::cluster
