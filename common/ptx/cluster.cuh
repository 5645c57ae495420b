// Thread block clusters (sm_90): blocks launched together on one GPC, each able to reach the
// others' shared memory, through inline PTX.
//   PTX ISA: "Special registers: %cluster_ctarank", "barrier.cluster" (sm_90).
//
// A kernel launched with a cluster dimension (cudaLaunchKernelEx, cudaLaunchAttributeClusterDimension)
// runs its blocks in groups; the block of rank r of a group can be written by the others' TMA
// multicast (common/ptx/tma.cuh) and arrived on by their mbarrier arrivals (arrive_cluster,
// common/ptx/mbarrier.cuh).
//   rank()    %cluster_ctarank: this block's rank in its cluster, 0 .. size - 1
//   id(), count()   %clusterid.x, %nclusterid.x: this cluster's index along x, and how many
//             (volatile: read again where used, not held in a register across a loop)
//   sync()    barrier.cluster.arrive.release + wait.acquire: every thread of every block of the
//             cluster has arrived. Needed after the mbarriers are initialised (before another
//             block may arrive on them or multicast into this one) and before a block exits
//             (while another may still write into it).
#pragma once

#include <cstdint>

namespace fl::ptx::cluster {

__device__ __forceinline__ uint32_t rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

__device__ __forceinline__ int id() {
  int r;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  return r;
}

__device__ __forceinline__ int count() {
  int r;
  asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
  return r;
}

__device__ __forceinline__ void sync() {
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
}

}  // namespace fl::ptx::cluster
