#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <vector>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/elementwise.cuh"
#include "common/fp8.h"
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

__global__ void randn_fp32_kernel(float* dst, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = scale * normal_at(seed, i);
  }
}

// The groups of quantize_e4m3_device: group g covers flat indices [g * span, (g + 1) * span)
// of the logical [B, H, N, d] order. Grid: x runs over a group's elements, y over the groups
// (strided, for more groups than gridDim.y holds).
struct QuantGroups {
  int64_t count, span;
};

// amax_bits[g] = the largest |x| of group g as float bits (non-negative floats order as their
// bits), NaN ignored.
__global__ void amax_kernel(const float* src, Strides s, int64_t heads, int64_t rows, int64_t d,
                            QuantGroups groups, unsigned int* amax_bits) {
  for (int64_t g = blockIdx.y; g < groups.count; g += gridDim.y) {
    float m = 0.f;
    for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < groups.span;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const float x = src[strided_offset(g * groups.span + j, s, heads, rows, d)];
      if (!isnan(x)) m = fmaxf(m, fabsf(x));
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0) atomicMax(&amax_bits[g], __float_as_uint(m));
  }
}

__global__ void to_e4m3_kernel(const float* src, Strides src_s, uint8_t* dst, Strides dst_s,
                               int64_t heads, int64_t rows, int64_t d, QuantGroups groups,
                               const float* scale) {
  for (int64_t g = blockIdx.y; g < groups.count; g += gridDim.y) {
    const float sc = scale[g];
    for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < groups.span;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const int64_t i = g * groups.span + j;
      const float x = src[strided_offset(i, src_s, heads, rows, d)];
      // __NV_SATFINITE: round to nearest even, saturate to +-448; a NaN is written as 0x7F
      // whatever its sign, as fl::to_e4m3 does.
      dst[strided_offset(i, dst_s, heads, rows, d)] =
          isnan(x) ? uint8_t{0x7F}
                   : static_cast<uint8_t>(__nv_cvt_float_to_fp8(x * sc, __NV_SATFINITE, __NV_E4M3));
    }
  }
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

void fill_randn_fp32(float* dst, int64_t count, uint64_t seed, float scale,
                     cudaStream_t stream) {
  randn_fp32_kernel<<<elementwise_grid(count), kElementwiseThreads, 0, stream>>>(dst, count, seed,
                                                                                 scale);
  FL_CHECK_LAUNCH();
}

std::vector<float> quantize_e4m3_device(const float* src, const Strides& src_s, void* dst,
                                        const Strides& dst_s, int64_t batch, int64_t heads,
                                        int64_t rows, int64_t head_dim, bool per_head,
                                        cudaStream_t stream) {
  const int64_t n = batch * heads * rows * head_dim;
  const QuantGroups groups{per_head ? batch * heads : 1, per_head ? rows * head_dim : n};
  // Blocks per group along x (together at most ~65536 blocks), groups along y (<= 65535).
  const int64_t gy = groups.count < 65535 ? groups.count : 65535;
  int64_t gx = (groups.span + kElementwiseThreads - 1) / kElementwiseThreads;
  const int64_t cap_x = 65536 / gy > 0 ? 65536 / gy : 1;
  gx = gx < 1 ? 1 : (gx > cap_x ? cap_x : gx);
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));

  DeviceBuffer amax(groups.count * sizeof(unsigned int));
  FL_CUDA_CHECK(cudaMemsetAsync(amax.get(), 0, amax.bytes(), stream));
  amax_kernel<<<grid, kElementwiseThreads, 0, stream>>>(src, src_s, heads, rows, head_dim, groups,
                                                        amax.as<unsigned int>());
  FL_CHECK_LAUNCH();
  std::vector<float> amax_host(groups.count);
  FL_CUDA_CHECK(cudaMemcpyAsync(amax_host.data(), amax.get(), amax.bytes(),
                                cudaMemcpyDeviceToHost, stream));
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
  // The scales on the host, with the very expressions of fl::quantize_e4m3.
  std::vector<float> scale(groups.count), descale(groups.count);
  for (int64_t g = 0; g < groups.count; ++g) {
    scale[g] = amax_host[g] > 0.f ? kE4m3Max / amax_host[g] : 1.f;
    descale[g] = 1.f / scale[g];
  }
  DeviceBuffer scale_dev(groups.count * sizeof(float));
  FL_CUDA_CHECK(cudaMemcpyAsync(scale_dev.get(), scale.data(), scale_dev.bytes(),
                                cudaMemcpyHostToDevice, stream));
  to_e4m3_kernel<<<grid, kElementwiseThreads, 0, stream>>>(
      src, src_s, static_cast<uint8_t*>(dst), dst_s, heads, rows, head_dim, groups,
      scale_dev.as<float>());
  FL_CHECK_LAUNCH();
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return descale;
}

void fill_bits16(void* dst, uint16_t bits, int64_t count, cudaStream_t stream) {
  fill_bits16_kernel<<<elementwise_grid(count), kElementwiseThreads, 0, stream>>>(static_cast<uint16_t*>(dst), bits,
                                                          count);
  FL_CHECK_LAUNCH();
}

}  // namespace fl
