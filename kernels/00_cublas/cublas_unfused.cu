// =================================================================================================
// Kernel 00 — the cuBLAS unfused baseline (not a rung: the yardstick the C++ tables divide by)
// what:      S = scale * Q K^T (cuBLAS GEMM, fp32 accumulate, S stored in the input dtype),
//            P = softmax(S) (a row kernel, fp32 math, P stored in the input dtype),
//            O = P V (cuBLAS GEMM). The whole Nq x Nk score matrix goes through device memory:
//            this is what "unfused" costs, and what every fused rung avoids.
// supports:  fp16, bf16; any d (multiple of 8); any Nq, Nk >= 1; causal; GQA; LSE output
// doc:       docs/kernels/00_cublas.md
// =================================================================================================
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/dtype.cuh"
#include "common/registry.h"

namespace fl {
namespace k00_cublas {

// Score workspace per call: at most this many bytes; heads are processed in chunks that fit.
constexpr int64_t kWorkspaceBytes = int64_t{1} << 30;

// Per-(b, h) pointers for one chunk of heads, written on the device so that a launch stays
// asynchronous. GEMM 1 reads (K, Q) and writes S; GEMM 2 reads (V, P = S) and writes O.
struct ChunkPointers {
  const void** k;
  const void** q;
  void** s;
  const void** v;
  const void** p;
  void** o;
};

template <typename T>
__global__ void pointers_kernel(AttnParams prm, int64_t first, int64_t count, T* scores,
                                int64_t score_elems, ChunkPointers ptr) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= count) return;
  const int64_t pair = first + c, b = pair / prm.heads_q, h = pair % prm.heads_q;
  const int64_t hk = h / (prm.heads_q / prm.heads_kv);
  ptr.s[c] = scores + c * score_elems;
  ptr.p[c] = scores + c * score_elems;
  ptr.q[c] = static_cast<const T*>(prm.q) + b * prm.q_stride.batch + h * prm.q_stride.head;
  ptr.k[c] = static_cast<const T*>(prm.k) + b * prm.k_stride.batch + hk * prm.k_stride.head;
  ptr.v[c] = static_cast<const T*>(prm.v) + b * prm.v_stride.batch + hk * prm.v_stride.head;
  ptr.o[c] = static_cast<T*>(prm.o) + b * prm.o_stride.batch + h * prm.o_stride.head;
}

// One block per score row: masked max, sum of exponentials (fp32), P = e^(s - max) / sum
// written back in place in T, LSE = max + log(sum).
template <typename T>
__global__ void softmax_kernel(T* scores, float* lse, int64_t first_row, int64_t rows_q,
                               int64_t cols, bool causal) {
  const int64_t r = blockIdx.x, i = r % rows_q;
  T* row = scores + r * cols;
  int64_t visible = cols;
  if (causal) {  // bottom-right aligned: keys j <= i + (Nk - Nq)
    const int64_t last = i + cols - rows_q;
    visible = last < 0 ? 0 : (last + 1 < cols ? last + 1 : cols);
  }
  __shared__ float partial[32];
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) {
    m = fmaxf(m, TypeTraits<T>::to_float(row[j]));
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = m;
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) m = fmaxf(m, partial[w]);
  __syncthreads();
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) {
    sum += expf(TypeTraits<T>::to_float(row[j]) - m);
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  sum = 0.f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) sum += partial[w];
  const float inv = visible > 0 ? 1.f / sum : 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float p = j < visible ? expf(TypeTraits<T>::to_float(row[j]) - m) * inv : 0.f;
    row[j] = TypeTraits<T>::from_float(p);
  }
  if (threadIdx.x == 0 && lse != nullptr) lse[first_row + r] = visible > 0 ? m + logf(sum) : -INFINITY;
}

// cuBLAS handle and workspace, created on first use and kept (a launch must not allocate when
// it is being timed; the first call, a warm-up, does).
struct State {
  std::mutex mutex;
  cublasHandle_t handle = nullptr;
  DeviceBuffer scores, pointers;
};
State& state() {
  static State s;
  return s;
}

template <typename T>
void run(const AttnParams& p, cudaStream_t stream) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.handle == nullptr) FL_CUBLAS_CHECK(cublasCreate(&st.handle));
  FL_CUBLAS_CHECK(cublasSetStream(st.handle, stream));
  const int64_t pairs = p.batch * p.heads_q, nq = p.seqlen_q, nk = p.seqlen_k, d = p.head_dim;
  const int64_t per_pair = nq * nk * static_cast<int64_t>(sizeof(T));
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(pairs, kWorkspaceBytes / per_pair));
  if (st.scores.bytes() < static_cast<size_t>(chunk * per_pair)) {
    st.scores.resize(chunk * per_pair);
    // Zeroed once per allocation, for compute-sanitizer's initcheck only: it does not register
    // the cuBLAS GEMM's stores into S (why is not established; docs/results/sanitize_h100.md),
    // so without this every softmax read of S is reported as a read of uninitialized memory.
    // The zeros are never used: GEMM 1 (beta = 0) overwrites every score the softmax reads
    // before it reads it, so results are unchanged, and the cost is one memset per (re)allocation,
    // not per call. A GEMM that really left part of S unwritten would leave zeros for scores,
    // and the wrong output that follows is what verification catches.
    FL_CUDA_CHECK(cudaMemsetAsync(st.scores.get(), 0, st.scores.bytes(), stream));
  }
  if (st.pointers.bytes() < static_cast<size_t>(6 * chunk * sizeof(void*))) {
    st.pointers.resize(6 * chunk * sizeof(void*));
  }
  void** base = st.pointers.as<void*>();
  ChunkPointers ptr{const_cast<const void**>(base), const_cast<const void**>(base + chunk),
                    base + 2 * chunk, const_cast<const void**>(base + 3 * chunk),
                    const_cast<const void**>(base + 4 * chunk), base + 5 * chunk};
  const cudaDataType_t type = std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = p.softmax_scale, one = 1.f, zero = 0.f;
  for (int64_t first = 0; first < pairs; first += chunk) {
    const int64_t count = std::min(chunk, pairs - first);
    pointers_kernel<T><<<static_cast<unsigned>((count + 127) / 128), 128, 0, stream>>>(
        p, first, count, st.scores.as<T>(), nq * nk, ptr);
    FL_CHECK_LAUNCH();
    // S^T (column-major Nk x Nq) = K Q^T: A = K (col-major d x Nk, transposed), B = Q.
    FL_CUBLAS_CHECK(cublasGemmBatchedEx(
        st.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(nk), static_cast<int>(nq),
        static_cast<int>(d), &alpha, ptr.k, type, static_cast<int>(p.k_stride.row), ptr.q, type,
        static_cast<int>(p.q_stride.row), &zero, ptr.s, type, static_cast<int>(nk),
        static_cast<int>(count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    softmax_kernel<T><<<static_cast<unsigned>(count * nq), 256, 0, stream>>>(
        st.scores.as<T>(), p.lse, first * nq, nq, nk, p.causal);
    FL_CHECK_LAUNCH();
    // O^T (column-major d x Nq) = V^T P^T: A = V (col-major d x Nk), B = P (col-major Nk x Nq).
    FL_CUBLAS_CHECK(cublasGemmBatchedEx(
        st.handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(d), static_cast<int>(nq),
        static_cast<int>(nk), &one, ptr.v, type, static_cast<int>(p.v_stride.row), ptr.p, type,
        static_cast<int>(nk), &zero, ptr.o, type, static_cast<int>(p.o_stride.row),
        static_cast<int>(count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

std::string supports(const AttnParams& p) {
  if (p.head_dim % 8 != 0) return "head_dim must be a multiple of 8";
  if (p.seqlen_q > INT32_MAX || p.seqlen_k > INT32_MAX) return "Nq and Nk must fit in int32 (cuBLAS)";
  if (p.seqlen_q * p.seqlen_k * 2 > kWorkspaceBytes) {
    return "Nq * Nk * 2 bytes must fit the 1 GiB score workspace";
  }
  // The row strides are cuBLAS's leading dimensions, which are int.
  for (int64_t row : {p.q_stride.row, p.k_stride.row, p.v_stride.row, p.o_stride.row}) {
    if (row > INT32_MAX) return "row strides must fit in int32 (cuBLAS leading dimensions)";
  }
  return "";
}

TileShape tile(const AttnParams& p) {
  // Unfused: each GEMM is its own tiled kernel; the tile model does not describe it. Report the
  // intensity of one pass over a full row of scores (Br = 1 row, Bc = Nk).
  return {1, static_cast<int>(std::min<int64_t>(p.seqlen_k, INT32_MAX))};
}

void launch(const AttnParams& p, cudaStream_t stream) {
  dispatch_dtype(p.dtype, [&](auto tag) { run<decltype(tag)>(p, stream); });
}

}  // namespace k00_cublas

const KernelInfo& kernel_00() {
  static const KernelInfo info{0,
                               "cublas",
                               "unfused cuBLAS baseline: GEMM, softmax, GEMM",
                               "docs/kernels/00_cublas.md",
                               80,
                               k00_cublas::tile,
                               k00_cublas::supports,
                               k00_cublas::launch,
                               /*scores_in_input_dtype=*/true};
  return info;
}

}  // namespace fl
