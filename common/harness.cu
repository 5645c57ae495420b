#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/cuda_check.h"
#include "common/elementwise.cuh"
#include "common/harness.h"
#include "common/random.h"

namespace fl {

std::string ProblemSpec::describe() const {
  std::ostringstream os;
  os << to_string(dtype) << " B=" << batch << " H=" << heads_q << "/" << heads_kv
     << " Nq=" << seqlen_q << " Nk=" << seqlen_k << " d=" << head_dim
     << (causal ? " causal" : "") << (layout == Layout::BNHD ? " BNHD" : "");
  if (input_std != 1.0f) os << " std=" << input_std;
  return os.str();
}

namespace {

int64_t bytes_of(const AttnParams& p, const Strides& s, int64_t heads, int64_t rows) {
  return span_elements(s, p.batch, heads, rows, p.head_dim) * element_size(p.dtype);
}

// dst (p's layout, dtype) <- src (fp32, [B, H, N, d]).
__global__ void scatter_from_fp32(void* dst, DType dtype, Strides s, const float* src,
                                  int64_t heads, int64_t rows, int64_t d, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t off = strided_offset(i, s, heads, rows, d);
    if (dtype == DType::f16) {
      static_cast<__half*>(dst)[off] = __float2half_rn(src[i]);
    } else {
      static_cast<__nv_bfloat16*>(dst)[off] = __float2bfloat16_rn(src[i]);
    }
  }
}

// dst (fp32, [B, H, N, d]) <- src (p's layout, dtype).
__global__ void gather_to_fp32(float* dst, const void* src, DType dtype, Strides s, int64_t heads,
                               int64_t rows, int64_t d, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t off = strided_offset(i, s, heads, rows, d);
    dst[i] = dtype == DType::f16 ? __half2float(static_cast<const __half*>(src)[off])
                                 : __bfloat162float(static_cast<const __nv_bfloat16*>(src)[off]);
  }
}

}  // namespace

AttnParams ProblemSpec::params() const {
  AttnParams p = make_params(dtype, batch, heads_q, seqlen_q, seqlen_k, head_dim, causal, layout);
  p.heads_kv = heads_kv;
  p.k_stride = p.v_stride = make_strides(layout, heads_kv, seqlen_k, head_dim);
  if (scale != 0.f) p.softmax_scale = scale;  // a bad scale is kept, for check_shape to report
  return p;
}

Problem::Problem(const ProblemSpec& spec) : spec_(spec), params_(spec.params()) {
  const std::string bad = check_shape(params_);
  if (!bad.empty()) throw std::invalid_argument("problem " + spec.describe() + ": " + bad);
  AttnParams& p = params_;
  q.resize(bytes_of(p, p.q_stride, p.heads_q, p.seqlen_q));
  k.resize(bytes_of(p, p.k_stride, p.heads_kv, p.seqlen_k));
  v.resize(bytes_of(p, p.v_stride, p.heads_kv, p.seqlen_k));
  o.resize(bytes_of(p, p.o_stride, p.heads_q, p.seqlen_q));
  o2.resize(o.bytes());
  if (spec.with_lse) lse.resize(p.batch * p.heads_q * p.seqlen_q * sizeof(float));
  p.q = q.get();
  p.k = k.get();
  p.v = v.get();
  p.o = o.get();
  p.lse = spec.with_lse ? lse.as<float>() : nullptr;
  // Distinct streams of numbers for Q, K and V from one seed.
  fill_randn(q.get(), p.dtype, q.bytes() / 2, spec.seed * 3 + 0, spec.input_std);
  fill_randn(k.get(), p.dtype, k.bytes() / 2, spec.seed * 3 + 1, spec.input_std);
  fill_randn(v.get(), p.dtype, v.bytes() / 2, spec.seed * 3 + 2, spec.input_std);
  poison_output();
  FL_CUDA_CHECK(cudaDeviceSynchronize());
}

void Problem::set_inputs(const float* hq, const float* hk, const float* hv) {
  const AttnParams& p = params_;
  const struct {
    const float* src;
    void* dst;
    const Strides* s;
    int64_t heads, rows;
  } t[] = {{hq, q.get(), &p.q_stride, p.heads_q, p.seqlen_q},
           {hk, k.get(), &p.k_stride, p.heads_kv, p.seqlen_k},
           {hv, v.get(), &p.v_stride, p.heads_kv, p.seqlen_k}};
  for (const auto& x : t) {
    const int64_t n = p.batch * x.heads * x.rows * p.head_dim;
    DeviceBuffer tmp(n * sizeof(float));
    FL_CUDA_CHECK(cudaMemcpy(tmp.get(), x.src, n * sizeof(float), cudaMemcpyHostToDevice));
    scatter_from_fp32<<<elementwise_grid(n), kElementwiseThreads>>>(x.dst, p.dtype, *x.s, tmp.as<float>(), x.heads,
                                            x.rows, p.head_dim, n);
    FL_CHECK_LAUNCH();
    FL_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

void Problem::poison_output(cudaStream_t stream) {
  fill_bits16(o.get(), 0xFFFF, o.bytes() / 2, stream);
  if (lse.get() != nullptr) {
    FL_CUDA_CHECK(cudaMemsetAsync(lse.get(), 0xFF, lse.bytes(), stream));  // NaN
  }
}

std::vector<float> Problem::output_host() const {
  const AttnParams& p = params_;
  const int64_t n = p.batch * p.heads_q * p.seqlen_q * p.head_dim;
  DeviceBuffer tmp(n * sizeof(float));
  gather_to_fp32<<<elementwise_grid(n), kElementwiseThreads>>>(tmp.as<float>(), p.o, p.dtype, p.o_stride, p.heads_q,
                                       p.seqlen_q, p.head_dim, n);
  FL_CHECK_LAUNCH();
  std::vector<float> host(n);
  FL_CUDA_CHECK(cudaMemcpy(host.data(), tmp.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

Reference::Reference(const Problem& problem, CublasHandle& cublas) {
  const AttnParams& p = problem.params();
  const int64_t n = p.batch * p.heads_q * p.seqlen_q * p.head_dim;
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  out32_.resize(n * sizeof(float));
  lse32_.resize(rows * sizeof(float));
  reference_attention(p, RefPrecision::kFp32, out32_.as<float>(), lse32_.as<float>(),
                      cublas.get());
  DeviceBuffer lowp(n * sizeof(float));
  reference_attention(p, RefPrecision::kLowp, lowp.as<float>(), nullptr, cublas.get());
  lowp_err_ = compare_fp32(lowp.as<float>(), out32_.as<float>(), n).max_abs_err;
  DeviceBuffer lse_lowp(rows * sizeof(float));
  reference_attention(p, RefPrecision::kLowpScores, lowp.as<float>(), lse_lowp.as<float>(),
                      cublas.get());
  lowp_scores_err_ = compare_fp32(lowp.as<float>(), out32_.as<float>(), n).max_abs_err;
  lse_lowp_scores_err_ = compare_fp32(lse_lowp.as<float>(), lse32_.as<float>(), rows).max_abs_err;
}

Verdict verify(const KernelInfo& kernel, Problem& problem, const Reference& reference,
               cudaStream_t stream) {
  AttnParams& p = problem.params();
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  Verdict v;
  std::ostringstream why;

  problem.poison_output(stream);
  run_kernel(kernel, p, stream);
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
  v.out = compare_output(p, p.o, reference.out32(), stream);
  v.lowp_err = reference.lowp_err_for(kernel);
  v.tolerance = pass_tolerance(v.lowp_err);
  if (v.out.non_finite > 0) why << v.out.non_finite << " outputs not finite (NaN/inf or poison left); ";
  if (v.out.nonzero == 0) why << "output all zero; ";
  if (v.out.max_abs_err > v.tolerance) {
    why << "max error " << v.out.max_abs_err << " > " << v.tolerance << " at "
        << describe_worst(p, v.out.worst_index) << "; ";
  }
  if (p.lse != nullptr) {
    const ErrorStats l = compare_fp32(p.lse, reference.lse32(), rows, stream);
    v.lse_err = l.max_abs_err;
    // The same rule as for O where the kernel's precision class moves the LSE (a kernel that
    // rounds S): twice the matching reference's LSE error; else 1e-3 relative.
    const double tol = std::max(kLseTolerance * std::max(1.0, l.max_abs_ref),
                                kPassFactor * reference.lse_lowp_err_for(kernel));
    if (l.non_finite > 0) {
      // An LSE equal to the reference's -inf (a row that sees no key) is not counted here.
      why << l.non_finite << " LSE values not finite where the reference is; ";
    }
    if (l.max_abs_err > tol) why << "LSE error " << l.max_abs_err << " > " << tol << "; ";
  }

  // Second run into another buffer: the two outputs must be bitwise equal.
  void* first = p.o;
  fill_bits16(problem.o2.get(), 0xFFFF, problem.o2.bytes() / 2, stream);
  p.o = problem.o2.get();
  run_kernel(kernel, p, stream);
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
  p.o = first;
  v.bitwise_diffs = count_bitwise_differences(p, p.o, problem.o2.get(), stream);
  if (v.bitwise_diffs > 0) why << v.bitwise_diffs << " elements differ between two runs; ";

  v.why = why.str();
  v.passed = v.why.empty();
  return v;
}

}  // namespace fl
