#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/elementwise.cuh"
#include "common/fp8.h"
#include "common/reference.h"

namespace fl {

CublasHandle::CublasHandle() {
  FL_CUBLAS_CHECK(cublasCreate(&handle_));
  // Plain fp32 arithmetic: no TF32 tensor-core shortcut in the reference.
  FL_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));
}
CublasHandle::~CublasHandle() { cublasDestroy(handle_); }

namespace {

// An e4m3 value (every one of them is exact in fp16) as a float; NaN stays NaN.
__device__ float e4m3_to_float(uint8_t bits) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(bits), __NV_E4M3);
  return __half2float(__half(h));
}

__device__ float load_as_float(const void* base, DType dtype, int64_t offset) {
  if (dtype == DType::f16) return __half2float(static_cast<const __half*>(base)[offset]);
  if (dtype == DType::e4m3) return e4m3_to_float(static_cast<const uint8_t*>(base)[offset]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[offset]);
}

__device__ float round_to(DType dtype, float x) {
  if (dtype == DType::f16) return __half2float(__float2half_rn(x));
  return __bfloat162float(__float2bfloat16_rn(x));
}

// P of the FP8 rung: e4m3(448 e) / 448 for e = exp(s - m) in [0, 1] (round to nearest even,
// saturating: 448 e <= 448).
__device__ float round_p_e4m3(float e) {
  const __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(kE4m3Max * e, __NV_SATFINITE, __NV_E4M3);
  return e4m3_to_float(static_cast<uint8_t>(q)) / kE4m3Max;
}

// dst[c, n, :] (contiguous fp32) = src[b, h, n, :] for the chunk of (b, h_q) pairs
// [first, first + count); for K and V, h is the KV head of query head h_q (GQA). e4m3 inputs
// are multiplied by their descale factor: descale[0], or descale[b * heads + h] when per_head
// (heads: the tensor's own, H_q / group).
__global__ void gather_fp32(float* dst, const void* src, DType dtype, Strides s, int64_t first,
                            int64_t heads_q, int64_t group, int64_t rows, int64_t head_dim,
                            int64_t total, const float* descale, bool per_head) {
  const int64_t heads = heads_q / group;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t col = i % head_dim;
    const int64_t row = (i / head_dim) % rows;
    const int64_t pair = first + i / (head_dim * rows);
    const int64_t b = pair / heads_q, h = (pair % heads_q) / group;
    float x = load_as_float(src, dtype, b * s.batch + h * s.head + row * s.row + col);
    if (descale != nullptr) x *= descale[per_head ? b * heads + h : 0];
    dst[i] = x;
  }
}

// One block per score row: causal mask, max, exp, sum; P written in place (rounded to the input
// dtype for the low-precision reference), LSE = max + log(sum).
__global__ void softmax_rows(float* s, float* lse, int64_t first_row, int64_t rows_q,
                             int64_t cols, bool causal, int64_t causal_offset, bool round_p,
                             bool round_s, DType dtype) {
  const int64_t r = blockIdx.x;
  float* row = s + r * cols;
  if (round_s) {
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) row[j] = round_to(dtype, row[j]);
    __syncthreads();
  }
  const int64_t i = r % rows_q;  // query index inside its head
  // Keys j <= i + (Nk - Nq) are visible (bottom-right aligned causal mask).
  int64_t visible = cols;
  if (causal) {
    const int64_t last = i + causal_offset;  // last visible key
    visible = last < 0 ? 0 : (last + 1 < cols ? last + 1 : cols);
  }
  __shared__ float red[32];
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) m = fmaxf(m, row[j]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) sum += expf(row[j] - m);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = sum;
  __syncthreads();
  sum = 0.f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) sum += red[w];
  const float inv = visible > 0 ? 1.0f / sum : 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    if (round_p && dtype == DType::e4m3) {
      // The FP8 rung's P: quantised relative to the row max, normalised by the unrounded sum.
      row[j] = j < visible ? round_p_e4m3(expf(row[j] - m)) * inv : 0.f;
      continue;
    }
    float p = j < visible ? expf(row[j] - m) * inv : 0.f;
    row[j] = round_p ? round_to(dtype, p) : p;
  }
  if (threadIdx.x == 0 && lse != nullptr) {
    lse[first_row + r] = visible > 0 ? m + logf(sum) : -INFINITY;
  }
}

__global__ void round_in_place(float* x, int64_t n, DType dtype) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = round_to(dtype, x[i]);
  }
}

// The backward's kernels, over a chunk of `count` (batch, query head) pairs whose score blocks
// are row-major [Nq, Nk] one after another.

// P = exp(S - LSE) in place (S already scaled): 0 where the causal mask hides the key, and in a
// row whose LSE is -inf (it sees no key: no exp(-inf + inf) = NaN).
__global__ void probs_from_lse(float* s, const float* lse, int64_t first_row, int64_t rows_q,
                               int64_t cols, bool causal, int64_t causal_offset, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, j = i % cols;
    const float l = lse[first_row + r];
    const bool visible = !causal || j <= r % rows_q + causal_offset;
    s[i] = visible && l != -INFINITY ? expf(s[i] - l) : 0.f;
  }
}

// out[r] = sum_c a[r, c] b[r, c] over contiguous rows of d: D = rowsum(dO * O).
__global__ void row_dots(float* out, const float* a, const float* b, int64_t rows, int64_t d) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.f;
    for (int64_t c = 0; c < d; ++c) sum += a[r * d + c] * b[r * d + c];
    out[r] = sum;
  }
}

// dS = P * (dP - D), written over dP. For the low-precision reference dS is rounded to the
// inputs' dtype (the operand of dQ = dS K and dK = dS^T Q), and P too, once dS has used it
// unrounded (the operand of dV = P^T dO).
__global__ void grad_scores(float* p, float* dp, const float* dsum, int64_t cols, int64_t total,
                            bool round, DType dtype) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float pv = p[i];
    const float ds = pv * (dp[i] - dsum[i / cols]);
    dp[i] = round ? round_to(dtype, ds) : ds;
    if (round) p[i] = round_to(dtype, pv);
  }
}

// dst[kv pair] += src[pair] for the chunk's pairs [first, first + count), kv pair = pair / group
// (b H_q + h over G = b H_kv + h / G): dK and dV summed over each KV head's query heads. A thread
// owns one element of a head and adds the chunk's pairs in order (no two threads write the same
// element, and the sum's order is fixed).
__global__ void add_to_kv_heads(float* dst, const float* src, int64_t first, int64_t count,
                                int64_t group, int64_t per_pair) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < per_pair;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    for (int64_t c = 0; c < count; ++c) {
      dst[(first + c) / group * per_pair + e] += src[c * per_pair + e];
    }
  }
}

}  // namespace

int64_t reference_chunk_pairs(int64_t pairs, int64_t nq, int64_t nk, int64_t d, bool backward,
                              int64_t budget_bytes) {
  const int64_t floats = backward ? 2 * nq * nk + 3 * nq * d + 4 * nk * d + nq
                                  : nq * nk + nq * d + 2 * nk * d;
  const int64_t per_pair = floats * static_cast<int64_t>(sizeof(float));
  return std::max<int64_t>(1, std::min<int64_t>(pairs, budget_bytes / per_pair));
}

void reference_attention(const AttnParams& p, RefPrecision precision, float* o_ref,
                         float* lse_ref, cublasHandle_t handle, cudaStream_t stream) {
  const int64_t pairs = p.batch * p.heads_q, group = p.heads_q / p.heads_kv;
  const int64_t nq = p.seqlen_q, nk = p.seqlen_k, d = p.head_dim;
  const int64_t per_pair = nq * nk * static_cast<int64_t>(sizeof(float));  // S's bytes a pair
  const int64_t chunk = reference_chunk_pairs(pairs, nq, nk, d, /*backward=*/false);
  DeviceBuffer q32(chunk * nq * d * sizeof(float)), k32(chunk * nk * d * sizeof(float)),
      v32(chunk * nk * d * sizeof(float)), s32(chunk * per_pair);
  FL_CUBLAS_CHECK(cublasSetStream(handle, stream));
  const bool lowp = precision != RefPrecision::kFp32;
  const bool fp8 = p.dtype == DType::e4m3;
  // No fp8 kernel stores S: for e4m3 inputs kLowpScores is kLowp.
  const bool round_s = precision == RefPrecision::kLowpScores && !fp8;
  // The descale factors of e4m3 inputs, on the device (null for fp16/bf16).
  DeviceBuffer descales;
  const float *q_descale = nullptr, *k_descale = nullptr, *v_descale = nullptr;
  if (fp8) {
    if (p.q_descale == nullptr || p.k_descale == nullptr || p.v_descale == nullptr) {
      throw std::invalid_argument("reference_attention: e4m3 inputs need their descale factors");
    }
    const int64_t nq_f = p.descale_per_head ? p.batch * p.heads_q : 1;
    const int64_t nkv_f = p.descale_per_head ? p.batch * p.heads_kv : 1;
    std::vector<float> all(p.q_descale, p.q_descale + nq_f);
    all.insert(all.end(), p.k_descale, p.k_descale + nkv_f);
    all.insert(all.end(), p.v_descale, p.v_descale + nkv_f);
    descales.resize(all.size() * sizeof(float));
    FL_CUDA_CHECK(cudaMemcpyAsync(descales.get(), all.data(), descales.bytes(),
                                  cudaMemcpyHostToDevice, stream));
    q_descale = descales.as<float>();
    k_descale = q_descale + nq_f;
    v_descale = k_descale + nkv_f;
  }
  for (int64_t first = 0; first < pairs; first += chunk) {
    const int64_t count = std::min(chunk, pairs - first);
    const int64_t nq_el = count * nq * d, nk_el = count * nk * d;
    gather_fp32<<<elementwise_grid(nq_el), kElementwiseThreads, 0, stream>>>(q32.as<float>(), p.q, p.dtype, p.q_stride,
                                                     first, p.heads_q, 1, nq, d, nq_el, q_descale, p.descale_per_head);
    FL_CHECK_LAUNCH();
    gather_fp32<<<elementwise_grid(nk_el), kElementwiseThreads, 0, stream>>>(k32.as<float>(), p.k, p.dtype, p.k_stride,
                                                     first, p.heads_q, group, nk, d, nk_el, k_descale, p.descale_per_head);
    FL_CHECK_LAUNCH();
    gather_fp32<<<elementwise_grid(nk_el), kElementwiseThreads, 0, stream>>>(v32.as<float>(), p.v, p.dtype, p.v_stride,
                                                     first, p.heads_q, group, nk, d, nk_el, v_descale, p.descale_per_head);
    FL_CHECK_LAUNCH();
    // S (row-major Nq x Nk) = scale * Q K^T, i.e. column-major S^T (Nk x Nq) = K Q^T.
    const float alpha = p.softmax_scale, beta = 0.f, one = 1.f;
    FL_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(nk), static_cast<int>(nq),
        static_cast<int>(d), &alpha, k32.as<float>(), static_cast<int>(d), nk * d,
        q32.as<float>(), static_cast<int>(d), nq * d, &beta, s32.as<float>(),
        static_cast<int>(nk), nq * nk, static_cast<int>(count)));
    softmax_rows<<<static_cast<unsigned>(count * nq), 256, 0, stream>>>(
        s32.as<float>(), lse_ref, first * nq, nq, nk, p.causal, nk - nq, lowp, round_s, p.dtype);
    FL_CHECK_LAUNCH();
    // O (row-major Nq x d) = P V, i.e. column-major O^T (d x Nq) = V^T P^T.
    float* o_chunk = o_ref + first * nq * d;
    FL_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(d), static_cast<int>(nq),
        static_cast<int>(nk), &one, v32.as<float>(), static_cast<int>(d), nk * d,
        s32.as<float>(), static_cast<int>(nk), nq * nk, &beta, o_chunk, static_cast<int>(d),
        nq * d, static_cast<int>(count)));
    if (lowp) {
      round_in_place<<<elementwise_grid(nq_el), kElementwiseThreads, 0, stream>>>(o_chunk, nq_el, p.out_dtype);
      FL_CHECK_LAUNCH();
    }
  }
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void reference_backward(const BwdParams& bp, RefPrecision precision, float* dq, float* dk,
                        float* dv, cublasHandle_t handle, cudaStream_t stream) {
  const AttnParams& p = bp.fwd;
  const std::string bad = check_shape(p);
  if (!bad.empty()) throw std::invalid_argument("reference_backward: " + bad);
  if (p.dtype == DType::e4m3) {
    throw std::invalid_argument("reference_backward: the backward takes fp16 and bf16 inputs");
  }
  if (p.lse == nullptr || bp.dout == nullptr || p.o == nullptr) {
    throw std::invalid_argument("reference_backward: needs the forward's O and LSE, and dO");
  }
  const int64_t pairs = p.batch * p.heads_q, group = p.heads_q / p.heads_kv;
  const int64_t nq = p.seqlen_q, nk = p.seqlen_k, d = p.head_dim;
  const int64_t per_pair = nq * nk * static_cast<int64_t>(sizeof(float));  // P's bytes a pair
  const int64_t chunk = reference_chunk_pairs(pairs, nq, nk, d, /*backward=*/true);
  const size_t fq = sizeof(float) * chunk * nq * d, fk = sizeof(float) * chunk * nk * d;
  DeviceBuffer q32(fq), o32(fq), do32(fq), k32(fk), v32(fk), dk_h(fk), dv_h(fk),
      p32(chunk * per_pair), dp32(chunk * per_pair), dsum(sizeof(float) * chunk * nq);
  FL_CUBLAS_CHECK(cublasSetStream(handle, stream));
  const bool lowp = precision != RefPrecision::kFp32;
  const int64_t kv_el = p.batch * p.heads_kv * nk * d;
  FL_CUDA_CHECK(cudaMemsetAsync(dk, 0, kv_el * sizeof(float), stream));
  FL_CUDA_CHECK(cudaMemsetAsync(dv, 0, kv_el * sizeof(float), stream));
  const int inq = static_cast<int>(nq), ink = static_cast<int>(nk), id = static_cast<int>(d);
  for (int64_t first = 0; first < pairs; first += chunk) {
    const int64_t count = std::min(chunk, pairs - first);
    const int64_t nq_el = count * nq * d, nk_el = count * nk * d, s_el = count * nq * nk;
    const int batches = static_cast<int>(count);
    const struct {
      float* dst;
      const void* src;
      const Strides* s;
      int64_t group, rows, n;
    } gathers[] = {{q32.as<float>(), p.q, &p.q_stride, 1, nq, nq_el},
                   {o32.as<float>(), p.o, &p.o_stride, 1, nq, nq_el},
                   {do32.as<float>(), bp.dout, &bp.do_stride, 1, nq, nq_el},
                   {k32.as<float>(), p.k, &p.k_stride, group, nk, nk_el},
                   {v32.as<float>(), p.v, &p.v_stride, group, nk, nk_el}};
    for (const auto& g : gathers) {
      gather_fp32<<<elementwise_grid(g.n), kElementwiseThreads, 0, stream>>>(
          g.dst, g.src, p.dtype, *g.s, first, p.heads_q, g.group, g.rows, d, g.n, nullptr, false);
      FL_CHECK_LAUNCH();
    }
    const float scale = p.softmax_scale, one = 1.f, zero = 0.f;
    // S (row-major Nq x Nk) = scale Q K^T, i.e. column-major S^T (Nk x Nq) = K Q^T; then P.
    FL_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle, CUBLAS_OP_T, CUBLAS_OP_N, ink, inq, id, &scale, k32.as<float>(), id, nk * d,
        q32.as<float>(), id, nq * d, &zero, p32.as<float>(), ink, nq * nk, batches));
    probs_from_lse<<<elementwise_grid(s_el), kElementwiseThreads, 0, stream>>>(
        p32.as<float>(), p.lse, first * nq, nq, nk, p.causal, nk - nq, s_el);
    FL_CHECK_LAUNCH();
    // dP (row-major Nq x Nk) = dO V^T, the same product as S.
    FL_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle, CUBLAS_OP_T, CUBLAS_OP_N, ink, inq, id, &one, v32.as<float>(), id, nk * d,
        do32.as<float>(), id, nq * d, &zero, dp32.as<float>(), ink, nq * nk, batches));
    row_dots<<<elementwise_grid(count * nq), kElementwiseThreads, 0, stream>>>(
        dsum.as<float>(), do32.as<float>(), o32.as<float>(), count * nq, d);
    FL_CHECK_LAUNCH();
    grad_scores<<<elementwise_grid(s_el), kElementwiseThreads, 0, stream>>>(
        p32.as<float>(), dp32.as<float>(), dsum.as<float>(), nk, s_el, lowp, p.dtype);
    FL_CHECK_LAUNCH();
    // dV (row-major Nk x d) = P^T dO, i.e. column-major dV^T (d x Nk) = dO^T P, with P the
    // column-major Nk x Nq block read transposed. dK = scale dS^T Q the same way.
    FL_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle, CUBLAS_OP_N, CUBLAS_OP_T, id, ink, inq, &one, do32.as<float>(), id, nq * d,
        p32.as<float>(), ink, nq * nk, &zero, dv_h.as<float>(), id, nk * d, batches));
    FL_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle, CUBLAS_OP_N, CUBLAS_OP_T, id, ink, inq, &scale, q32.as<float>(), id, nq * d,
        dp32.as<float>(), ink, nq * nk, &zero, dk_h.as<float>(), id, nk * d, batches));
    // dQ (row-major Nq x d) = scale dS K, i.e. column-major dQ^T (d x Nq) = K^T dS^T.
    FL_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle, CUBLAS_OP_N, CUBLAS_OP_N, id, inq, ink, &scale, k32.as<float>(), id, nk * d,
        dp32.as<float>(), ink, nq * nk, &zero, dq + first * nq * d, id, nq * d, batches));
    add_to_kv_heads<<<elementwise_grid(nk * d), kElementwiseThreads, 0, stream>>>(
        dk, dk_h.as<float>(), first, count, group, nk * d);
    FL_CHECK_LAUNCH();
    add_to_kv_heads<<<elementwise_grid(nk * d), kElementwiseThreads, 0, stream>>>(
        dv, dv_h.as<float>(), first, count, group, nk * d);
    FL_CHECK_LAUNCH();
  }
  if (lowp) {
    const int64_t q_el = pairs * nq * d;
    round_in_place<<<elementwise_grid(q_el), kElementwiseThreads, 0, stream>>>(dq, q_el, p.dtype);
    FL_CHECK_LAUNCH();
    for (float* g : {dk, dv}) {
      round_in_place<<<elementwise_grid(kv_el), kElementwiseThreads, 0, stream>>>(g, kv_el,
                                                                                  p.dtype);
      FL_CHECK_LAUNCH();
    }
  }
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void cpu_reference_backward(const BwdParams& bp, const std::vector<float>& q,
                            const std::vector<float>& k, const std::vector<float>& v,
                            const std::vector<float>& o, const std::vector<float>& dout,
                            const std::vector<float>& lse, std::vector<double>& dq,
                            std::vector<double>& dk, std::vector<double>& dv) {
  const AttnParams& p = bp.fwd;
  const int64_t nq = p.seqlen_q, nk = p.seqlen_k, d = p.head_dim;
  const int64_t group = p.heads_q / p.heads_kv;
  const double scale = p.softmax_scale;
  dq.assign(p.batch * p.heads_q * nq * d, 0.0);
  dk.assign(p.batch * p.heads_kv * nk * d, 0.0);
  dv.assign(dk.size(), 0.0);
  auto at = [](const std::vector<float>& x, const Strides& s, int64_t b, int64_t h, int64_t r,
               int64_t c) {
    return static_cast<double>(x[b * s.batch + h * s.head + r * s.row + c]);
  };
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < nq; ++i) {
        const double l = lse[(b * p.heads_q + h) * nq + i];
        if (l == -std::numeric_limits<double>::infinity()) continue;  // sees no key: P = 0
        const int64_t visible =
            p.causal ? std::min(nk, std::max<int64_t>(0, i + nk - nq + 1)) : nk;
        double dsum = 0.0;  // D = rowsum(dO * O)
        for (int64_t c = 0; c < d; ++c) {
          dsum += at(dout, bp.do_stride, b, h, i, c) * at(o, p.o_stride, b, h, i, c);
        }
        double* dq_row = &dq[((b * p.heads_q + h) * nq + i) * d];
        for (int64_t j = 0; j < visible; ++j) {
          double s = 0.0, dp = 0.0;
          for (int64_t c = 0; c < d; ++c) {
            s += at(q, p.q_stride, b, h, i, c) * at(k, p.k_stride, b, hk, j, c);
            dp += at(dout, bp.do_stride, b, h, i, c) * at(v, p.v_stride, b, hk, j, c);
          }
          const double pr = std::exp(scale * s - l);
          const double ds = pr * (dp - dsum);
          const int64_t kv_row = ((b * p.heads_kv + hk) * nk + j) * d;
          for (int64_t c = 0; c < d; ++c) {
            dv[kv_row + c] += pr * at(dout, bp.do_stride, b, h, i, c);
            dk[kv_row + c] += scale * ds * at(q, p.q_stride, b, h, i, c);
            dq_row[c] += scale * ds * at(k, p.k_stride, b, hk, j, c);
          }
        }
      }
    }
  }
}

void cpu_reference(const AttnParams& p, const std::vector<float>& q, const std::vector<float>& k,
                   const std::vector<float>& v, std::vector<double>& o, std::vector<double>& lse) {
  const int64_t nq = p.seqlen_q, nk = p.seqlen_k, d = p.head_dim;
  const int64_t group = p.heads_q / p.heads_kv;
  o.assign(p.batch * p.heads_q * nq * d, 0.0);
  lse.assign(p.batch * p.heads_q * nq, -std::numeric_limits<double>::infinity());
  std::vector<double> s(nk);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < nq; ++i) {
        const int64_t visible = p.causal ? std::min(nk, std::max<int64_t>(0, i + nk - nq + 1)) : nk;
        const int64_t out = ((b * p.heads_q + h) * nq + i);
        if (visible == 0) continue;  // O = 0, LSE = -inf
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          double acc = 0.0;
          for (int64_t c = 0; c < d; ++c) {
            acc += static_cast<double>(q[b * p.q_stride.batch + h * p.q_stride.head + i * p.q_stride.row + c]) *
                   static_cast<double>(k[b * p.k_stride.batch + hk * p.k_stride.head + j * p.k_stride.row + c]);
          }
          s[j] = acc * static_cast<double>(p.softmax_scale);
          m = std::max(m, s[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < visible; ++j) {
          s[j] = std::exp(s[j] - m);
          sum += s[j];
        }
        for (int64_t j = 0; j < visible; ++j) {
          const double w = s[j] / sum;
          for (int64_t c = 0; c < d; ++c) {
            o[out * d + c] += w * static_cast<double>(v[b * p.v_stride.batch + hk * p.v_stride.head + j * p.v_stride.row + c]);
          }
        }
        lse[out] = m + std::log(sum);
      }
    }
  }
}

}  // namespace fl
