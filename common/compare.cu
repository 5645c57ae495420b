#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "common/compare.h"
#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/elementwise.cuh"

namespace fl {
namespace {

struct StatsAccum {
  // (bits of the error << 32) | low 32 bits of the flat index: one atomicMax keeps both, and
  // the index is exact below 2^32 elements (every shape the harness allocates).
  unsigned long long worst;
  double sum;
  unsigned long long non_finite;
  unsigned long long nonzero;
  unsigned int max_ref_bits;
};

struct OutView {
  const void* ptr;
  DType dtype;
  bool is_fp32;
  Strides s;
  int64_t heads, rows, head_dim;
  __device__ float at(int64_t i) const {
    if (is_fp32) return static_cast<const float*>(ptr)[i];
    const int64_t off = strided_offset(i, s, heads, rows, head_dim);
    if (dtype == DType::f16) return __half2float(static_cast<const __half*>(ptr)[off]);
    return __bfloat162float(static_cast<const __nv_bfloat16*>(ptr)[off]);
  }
};

__global__ void stats_kernel(OutView out, const float* ref, int64_t n, StatsAccum* acc) {
  unsigned long long worst = 0;
  double sum = 0;
  unsigned long long non_finite = 0, nonzero = 0;
  float max_ref = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float o = out.at(i), r = ref[i];
    if (isfinite(r)) max_ref = fmaxf(max_ref, fabsf(r));
    float err = 0.f;
    if (o == r) {
      // Equal, including both -inf (the LSE of a row that sees no key).
    } else if (!isfinite(o)) {
      ++non_finite;
      continue;
    } else {
      err = fabsf(o - r);  // inf when the reference is -inf and the output is finite
    }
    if (o != 0.f) ++nonzero;
    sum += isfinite(err) ? err : 0.0;
    const unsigned long long key =
        (static_cast<unsigned long long>(__float_as_uint(err)) << 32) | static_cast<uint32_t>(i);
    worst = key > worst ? key : worst;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long w = __shfl_xor_sync(0xffffffffu, worst, o);
    worst = w > worst ? w : worst;
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
    non_finite += __shfl_xor_sync(0xffffffffu, non_finite, o);
    nonzero += __shfl_xor_sync(0xffffffffu, nonzero, o);
    max_ref = fmaxf(max_ref, __shfl_xor_sync(0xffffffffu, max_ref, o));
  }
  if (threadIdx.x % 32 == 0) {
    atomicMax(&acc->worst, worst);
    atomicAdd(&acc->sum, sum);
    atomicAdd(&acc->non_finite, non_finite);
    atomicAdd(&acc->nonzero, nonzero);
    atomicMax(&acc->max_ref_bits, __float_as_uint(max_ref));
  }
}

ErrorStats run_stats(const OutView& view, const float* ref, int64_t n, cudaStream_t stream) {
  DeviceBuffer acc(sizeof(StatsAccum));
  FL_CUDA_CHECK(cudaMemsetAsync(acc.get(), 0, sizeof(StatsAccum), stream));
  stats_kernel<<<elementwise_grid(n, 4096), kElementwiseThreads, 0, stream>>>(view, ref, n, acc.as<StatsAccum>());
  FL_CHECK_LAUNCH();
  StatsAccum h{};
  FL_CUDA_CHECK(cudaMemcpyAsync(&h, acc.get(), sizeof(h), cudaMemcpyDeviceToHost, stream));
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
  ErrorStats s;
  const uint32_t bits = static_cast<uint32_t>(h.worst >> 32);
  float maxerr;
  std::memcpy(&maxerr, &bits, sizeof(maxerr));
  s.max_abs_err = maxerr;
  s.worst_index = h.worst == 0 ? -1 : static_cast<int64_t>(h.worst & 0xffffffffull);
  s.non_finite = static_cast<int64_t>(h.non_finite);
  s.nonzero = static_cast<int64_t>(h.nonzero);
  const int64_t finite = n - s.non_finite;
  s.mean_abs_err = finite > 0 ? h.sum / static_cast<double>(finite) : 0.0;
  float max_ref;
  std::memcpy(&max_ref, &h.max_ref_bits, sizeof(max_ref));
  s.max_abs_ref = max_ref;
  return s;
}

__global__ void bitwise_diff_kernel(OutView a, OutView b, int64_t n, unsigned long long* count) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t off = strided_offset(i, a.s, a.heads, a.rows, a.head_dim);
    local += static_cast<const uint16_t*>(a.ptr)[off] != static_cast<const uint16_t*>(b.ptr)[off];
  }
  for (int o = 16; o > 0; o >>= 1) local += __shfl_xor_sync(0xffffffffu, local, o);
  if (threadIdx.x % 32 == 0) atomicAdd(count, local);
}

OutView view_of(const AttnParams& p, const void* out) {
  // O's type: the inputs' for fp16/bf16, fp16 or bf16 for e4m3 inputs.
  return OutView{out, p.out_dtype, false, p.o_stride, p.heads_q, p.seqlen_q, p.head_dim};
}

}  // namespace

ErrorStats compare_output(const AttnParams& p, const void* out, const float* ref,
                          cudaStream_t stream) {
  const int64_t n = p.batch * p.heads_q * p.seqlen_q * p.head_dim;
  return run_stats(view_of(p, out), ref, n, stream);
}

ErrorStats compare_fp32(const float* out, const float* ref, int64_t count, cudaStream_t stream) {
  OutView v{out, DType::f16, true, Strides{}, 1, 1, 1};
  return run_stats(v, ref, count, stream);
}

int64_t count_bitwise_differences(const AttnParams& p, const void* a, const void* b,
                                  cudaStream_t stream) {
  const int64_t n = p.batch * p.heads_q * p.seqlen_q * p.head_dim;
  DeviceBuffer count(sizeof(unsigned long long));
  FL_CUDA_CHECK(cudaMemsetAsync(count.get(), 0, sizeof(unsigned long long), stream));
  bitwise_diff_kernel<<<elementwise_grid(n, 4096), kElementwiseThreads, 0, stream>>>(view_of(p, a), view_of(p, b), n,
                                                count.as<unsigned long long>());
  FL_CHECK_LAUNCH();
  unsigned long long h = 0;
  FL_CUDA_CHECK(cudaMemcpyAsync(&h, count.get(), sizeof(h), cudaMemcpyDeviceToHost, stream));
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<int64_t>(h);
}

std::string describe_worst(const AttnParams& p, int64_t i) {
  if (i < 0) return "-";
  std::ostringstream os;
  const int64_t d = p.head_dim, n = p.seqlen_q, h = p.heads_q;
  os << "b=" << i / (d * n * h) << " h=" << (i / (d * n)) % h << " row=" << (i / d) % n
     << " col=" << i % d;
  return os.str();
}

}  // namespace fl
