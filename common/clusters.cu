#include "common/clusters.h"

#include <cuda_runtime.h>

#include <array>
#include <map>
#include <mutex>

namespace fl {
namespace {

// The probe: a kernel that does nothing, launched by no one; only its occupancy is asked.
__global__ void cluster_probe_kernel() {}

int ask(int size) {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  const int smem = smem_one_block_an_sm();
  if (major < 9 || size < 1 || size > 8 || smem == 0) return 0;
  cudaFuncAttributes a{};
  if (cudaFuncGetAttributes(&a, cluster_probe_kernel) != cudaSuccess || a.ptxVersion < 90 ||
      cudaFuncSetAttribute(cluster_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           smem) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(size);
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(size));
  config.blockDim = dim3(128);
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.attrs = &cluster;
  config.numAttrs = 1;
  int count = 0;
  if (cudaOccupancyMaxActiveClusters(&count, cluster_probe_kernel, &config) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace

int smem_one_block_an_sm() {
  int device = 0, per_sm = 0, per_block = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  // More than half an SM's shared memory (half and 1 KiB), so a second such block never fits
  // beside the first.
  const int smem = per_sm / 2 + 1024;
  return smem <= per_block ? smem : 0;
}

int clusters_one_block_an_sm(int size) {
  static std::mutex mutex;
  static std::map<int, std::array<int, 9>> known;  // device -> count by size (-1: not asked)
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (size < 1 || size > 8) return 0;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(device);
  if (it == known.end()) {
    std::array<int, 9> none;
    none.fill(-1);
    it = known.emplace(device, none).first;
  }
  if (it->second[size] < 0) it->second[size] = ask(size);
  return it->second[size];
}

}  // namespace fl
