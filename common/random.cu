#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "common/cuda_check.h"
#include "common/elementwise.cuh"
#include "common/random.h"

namespace fl {
namespace {

// splitmix64: a cheap, well-mixed hash of (seed, index).
__device__ uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Box-Muller on two 24-bit uniforms taken from one hash.
__device__ float normal_at(uint64_t seed, int64_t index) {
  const uint64_t h = mix64(seed * 0x2545F4914F6CDD1Dull + static_cast<uint64_t>(index));
  const float u1 = (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777217.0f);  // (0, 1]
  const float u2 = static_cast<float>((h >> 16) & 0xFFFFFF) * (1.0f / 16777216.0f);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
}

template <typename T>
__global__ void randn_kernel(T* dst, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = scale * normal_at(seed, i);
    if constexpr (std::is_same_v<T, __half>) {
      dst[i] = __float2half_rn(x);
    } else {
      dst[i] = __float2bfloat16_rn(x);
    }
  }
}

__global__ void fill_bits16_kernel(uint16_t* dst, uint16_t bits, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = bits;
  }
}

}  // namespace

void fill_randn(void* dst, DType dtype, int64_t count, uint64_t seed, float scale,
                cudaStream_t stream) {
  if (dtype == DType::f16) {
    randn_kernel<<<elementwise_grid(count), kElementwiseThreads, 0, stream>>>(static_cast<__half*>(dst), count, seed,
                                                      scale);
  } else {
    randn_kernel<<<elementwise_grid(count), kElementwiseThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), count,
                                                      seed, scale);
  }
  FL_CHECK_LAUNCH();
}

void fill_bits16(void* dst, uint16_t bits, int64_t count, cudaStream_t stream) {
  fill_bits16_kernel<<<elementwise_grid(count), kElementwiseThreads, 0, stream>>>(static_cast<uint16_t*>(dst), bits,
                                                          count);
  FL_CHECK_LAUNCH();
}

}  // namespace fl
