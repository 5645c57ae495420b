// =================================================================================================
// Kernel 01 of 16 — naive: one thread per query row
// builds on: nothing (the baseline of the ladder)
// changes:   1. each thread owns one query row and keeps it, and its output row, in registers
//            2. it walks every key once, straight from global memory, with a scalar fp32
//               online softmax (running max m, running sum l, output rescaled when m grows)
// expect:    ~1 FLOP per byte of global traffic per thread: far below any roof; the baseline
// supports:  fp16, bf16; d in {64, 128}; any Nq, Nk >= 1; causal; GQA; LSE output
// doc:       docs/kernels/01_naive.md
// =================================================================================================
//
// Grid: (ceil(Nq / 128), H_q, B); block: 128 threads; thread t of block x owns query row
// i = 128 x + t of head (b, h). For each key j it computes s = scale * q.k_j (d FMAs), updates
//   m' = max(m, s);  l = l * e^(m - m') + e^(s - m');  o = o * e^(m - m') + e^(s - m') * v_j
// and at the end writes o / l. Every thread of a warp reads the same K and V row at the same
// time, so each load is one broadcast transaction, but nothing is reused from fast memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "common/dtype.cuh"
#include "common/registry.h"

namespace fl {
namespace k01_naive {

constexpr int kThreads = 128;

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(const AttnParams p) {
  using Pair = typename TypeTraits<T>::pair;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;  // query row
  if (i >= p.seqlen_q) return;
  const int64_t b = blockIdx.z, h = blockIdx.y, h_kv = h / (p.heads_q / p.heads_kv);

  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head +
                i * p.q_stride.row;
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + h_kv * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + h_kv * p.v_stride.head;
  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head + i * p.o_stride.row;

  // The output row accumulates in fp32 registers (kHeadDim of them). The query row is read from
  // global memory for every key (it stays in L1): holding it in registers as well would need
  // more registers than a thread has at d = 128 and spill.
  float rO[kHeadDim];
#pragma unroll
  for (int c = 0; c < kHeadDim; ++c) rO[c] = 0.f;

  float row_max = -INFINITY, row_sum = 0.f;
  // Causal, bottom-right aligned: key j is visible to query i when j <= i + (Nk - Nq).
  int64_t visible = p.seqlen_k;
  if (p.causal) {
    const int64_t last = i + p.seqlen_k - p.seqlen_q;  // last visible key
    visible = last < 0 ? 0 : (last + 1 < p.seqlen_k ? last + 1 : p.seqlen_k);
  }

  for (int64_t j = 0; j < visible; ++j) {
    const Pair* k_row = reinterpret_cast<const Pair*>(gK + j * p.k_stride.row);
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < kHeadDim / 2; ++c) {
      const float2 q = TypeTraits<T>::to_float2(reinterpret_cast<const Pair*>(gQ)[c]);
      const float2 k = TypeTraits<T>::to_float2(k_row[c]);
      s = fmaf(q.x, k.x, s);
      s = fmaf(q.y, k.y, s);
    }
    s *= p.softmax_scale;

    // Online softmax: rescale what was accumulated when the running max grows.
    const float new_max = fmaxf(row_max, s);
    const float correction = expf(row_max - new_max);  // exp(-inf) = 0 on the first key
    const float weight = expf(s - new_max);
    row_sum = row_sum * correction + weight;
    row_max = new_max;

    const Pair* v_row = reinterpret_cast<const Pair*>(gV + j * p.v_stride.row);
#pragma unroll
    for (int c = 0; c < kHeadDim / 2; ++c) {
      const float2 v = TypeTraits<T>::to_float2(v_row[c]);
      rO[2 * c] = fmaf(rO[2 * c], correction, weight * v.x);
      rO[2 * c + 1] = fmaf(rO[2 * c + 1], correction, weight * v.y);
    }
  }

  // A row that sees no key (causal with Nq > Nk) gets O = 0 and LSE = -inf.
  const float inv_sum = visible > 0 ? 1.f / row_sum : 0.f;
#pragma unroll
  for (int c = 0; c < kHeadDim / 2; ++c) {
    reinterpret_cast<Pair*>(gO)[c] = TypeTraits<T>::from_float2(rO[2 * c] * inv_sum,
                                                                rO[2 * c + 1] * inv_sum);
  }
  if (p.lse != nullptr) {
    p.lse[(b * p.heads_q + h) * p.seqlen_q + i] = visible > 0 ? row_max + logf(row_sum) : -INFINITY;
  }
}

std::string supports(const AttnParams& p) {
  if (p.head_dim != 64 && p.head_dim != 128) {
    return "head_dim must be 64 or 128 (got " + std::to_string(p.head_dim) + ")";
  }
  if (p.heads_q > 65535 || p.batch > 65535) return "H_q and B must be <= 65535 (grid limits)";
  return "";
}

TileShape tile(const AttnParams&) { return {1, 1}; }  // nothing is shared: each row alone

void launch(const AttnParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.seqlen_q + kThreads - 1) / kThreads),
                  static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch));
  dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (p.head_dim == 64) {
      attention_kernel<T, 64><<<grid, kThreads, 0, stream>>>(p);
    } else {
      attention_kernel<T, 128><<<grid, kThreads, 0, stream>>>(p);
    }
  });
}

}  // namespace k01_naive

const KernelInfo& kernel_01() {
  static const KernelInfo info{1,
                               "naive",
                               "one thread per query row, scalar fp32 online softmax",
                               "docs/kernels/01_naive.md",
                               80,
                               k01_naive::tile,
                               k01_naive::supports,
                               k01_naive::launch};
  return info;
}

}  // namespace fl
