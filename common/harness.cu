#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
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
  os << to_string(dtype);
  if (dtype == DType::e4m3) os << " O=" << to_string(out_dtype);
  os << " B=" << batch << " H=" << heads_q << "/" << heads_kv
     << " Nq=" << seqlen_q << " Nk=" << seqlen_k << " d=" << head_dim
     << (causal ? " causal" : "") << (layout == Layout::BNHD ? " BNHD" : "");
  if (dtype == DType::e4m3 && descale_per_head) os << " descale=head";
  if (input_std != 1.0f) os << " std=" << input_std;
  return os.str();
}

namespace {

int64_t bytes_of(const AttnParams& p, DType t, const Strides& s, int64_t heads, int64_t rows) {
  return span_elements(s, p.batch, heads, rows, p.head_dim) * element_size(t);
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
  if (dtype == DType::e4m3) {
    p.out_dtype = out_dtype;  // a bad one is kept, for check_common to report
    p.descale_per_head = descale_per_head;
  }
  return p;
}

namespace {

// At least `count` floats equal to 1, alive until the program ends (earlier, shorter arrays are
// kept, so a pointer handed out stays valid).
const float* unit_factors(int64_t count) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<std::vector<float>>> arrays;
  std::lock_guard<std::mutex> lock(mutex);
  if (arrays.empty() || static_cast<int64_t>(arrays.back()->size()) < count) {
    arrays.push_back(std::make_unique<std::vector<float>>(std::max<int64_t>(count, 64), 1.f));
  }
  return arrays.back()->data();
}

}  // namespace

AttnParams placeholder_params(const ProblemSpec& spec) {
  AttnParams p = spec.params();
  p.q = reinterpret_cast<void*>(0x1000);
  p.k = reinterpret_cast<void*>(0x2000);
  p.v = reinterpret_cast<void*>(0x3000);
  p.o = reinterpret_cast<void*>(0x4000);
  p.lse = spec.with_lse ? reinterpret_cast<float*>(0x5000) : nullptr;
  // Per head: B x H_q factors (H_kv <= H_q). A shape too large for a placeholder array of them
  // (more than 2^22) keeps null pointers, and check_common says so.
  const bool small = spec.batch >= 1 && spec.heads_q >= 1 && spec.batch <= (int64_t{1} << 22) &&
                     spec.heads_q <= (int64_t{1} << 22) / spec.batch;
  if (spec.dtype == DType::e4m3 && (!p.descale_per_head || small)) {
    const float* ones = unit_factors(p.descale_per_head ? spec.batch * spec.heads_q : 1);
    p.q_descale = p.k_descale = p.v_descale = ones;
  }
  // A workspace as large as any rung could ask: the claim is decided by every other rule (the
  // caller sizes the real one for the rung it runs, as Problem::params_for does).
  p.workspace = reinterpret_cast<void*>(0x6000);
  p.workspace_bytes = INT64_MAX;
  return p;
}

Problem::Problem(const ProblemSpec& spec) : spec_(spec), params_(spec.params()) {
  const std::string bad = check_shape(params_);
  if (!bad.empty()) throw std::invalid_argument("problem " + spec.describe() + ": " + bad);
  AttnParams& p = params_;
  if (p.dtype == DType::e4m3 && p.out_dtype != DType::f16 && p.out_dtype != DType::bf16) {
    throw std::invalid_argument("problem " + spec.describe() +
                                ": O's dtype (out_dtype) must be fp16 or bf16 for e4m3 inputs");
  }
  q.resize(bytes_of(p, p.dtype, p.q_stride, p.heads_q, p.seqlen_q));
  k.resize(bytes_of(p, p.dtype, p.k_stride, p.heads_kv, p.seqlen_k));
  v.resize(bytes_of(p, p.dtype, p.v_stride, p.heads_kv, p.seqlen_k));
  o.resize(bytes_of(p, p.out_dtype, p.o_stride, p.heads_q, p.seqlen_q));
  o2.resize(o.bytes());
  if (spec.with_lse) lse.resize(p.batch * p.heads_q * p.seqlen_q * sizeof(float));
  p.q = q.get();
  p.k = k.get();
  p.v = v.get();
  p.o = o.get();
  p.lse = spec.with_lse ? lse.as<float>() : nullptr;
  // Distinct streams of numbers for Q, K and V from one seed.
  if (p.dtype != DType::e4m3) {
    fill_randn(q.get(), p.dtype, q.bytes() / 2, spec.seed * 3 + 0, spec.input_std);
    fill_randn(k.get(), p.dtype, k.bytes() / 2, spec.seed * 3 + 1, spec.input_std);
    fill_randn(v.get(), p.dtype, v.bytes() / 2, spec.seed * 3 + 2, spec.input_std);
  } else {
    // The same numbers in fp32 (element i of the buffer gets the value fill_randn would round),
    // quantised per tensor or per head in place of a rounding.
    const struct {
      DeviceBuffer* buf;
      const Strides* s;
      int64_t heads, rows;
      std::vector<float>* descale;
    } t[] = {{&q, &p.q_stride, p.heads_q, p.seqlen_q, &q_descale_},
             {&k, &p.k_stride, p.heads_kv, p.seqlen_k, &k_descale_},
             {&v, &p.v_stride, p.heads_kv, p.seqlen_k, &v_descale_}};
    for (int i = 0; i < 3; ++i) {
      const int64_t n = static_cast<int64_t>(t[i].buf->bytes());  // one byte an element
      DeviceBuffer values(n * sizeof(float));
      fill_randn_fp32(values.as<float>(), n, spec.seed * 3 + i, spec.input_std);
      FL_CUDA_CHECK(cudaMemset(t[i].buf->get(), 0, t[i].buf->bytes()));
      *t[i].descale = quantize_e4m3_device(values.as<float>(), *t[i].s, t[i].buf->get(), *t[i].s,
                                           p.batch, t[i].heads, t[i].rows, p.head_dim,
                                           p.descale_per_head);
    }
    point_at_descales();
  }
  poison_output();
  FL_CUDA_CHECK(cudaDeviceSynchronize());
}

void Problem::point_at_descales() {
  params_.q_descale = q_descale_.data();
  params_.k_descale = k_descale_.data();
  params_.v_descale = v_descale_.data();
}

void Problem::set_inputs(const float* hq, const float* hk, const float* hv) {
  const AttnParams& p = params_;
  const struct {
    const float* src;
    void* dst;
    const Strides* s;
    int64_t heads, rows;
    std::vector<float>* descale;
  } t[] = {{hq, q.get(), &p.q_stride, p.heads_q, p.seqlen_q, &q_descale_},
           {hk, k.get(), &p.k_stride, p.heads_kv, p.seqlen_k, &k_descale_},
           {hv, v.get(), &p.v_stride, p.heads_kv, p.seqlen_k, &v_descale_}};
  for (const auto& x : t) {
    const int64_t n = p.batch * x.heads * x.rows * p.head_dim;
    DeviceBuffer tmp(n * sizeof(float));
    FL_CUDA_CHECK(cudaMemcpy(tmp.get(), x.src, n * sizeof(float), cudaMemcpyHostToDevice));
    if (p.dtype == DType::e4m3) {
      const Strides dense = make_strides(Layout::BHND, x.heads, x.rows, p.head_dim);
      *x.descale = quantize_e4m3_device(tmp.as<float>(), dense, x.dst, *x.s, p.batch, x.heads,
                                        x.rows, p.head_dim, p.descale_per_head);
      continue;
    }
    scatter_from_fp32<<<elementwise_grid(n), kElementwiseThreads>>>(x.dst, p.dtype, *x.s, tmp.as<float>(), x.heads,
                                            x.rows, p.head_dim, n);
    FL_CHECK_LAUNCH();
    FL_CUDA_CHECK(cudaDeviceSynchronize());
  }
  if (p.dtype == DType::e4m3) point_at_descales();
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
  gather_to_fp32<<<elementwise_grid(n), kElementwiseThreads>>>(tmp.as<float>(), p.o, p.out_dtype, p.o_stride, p.heads_q,
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
  if (p.dtype == DType::e4m3) {
    // No fp8 kernel stores S: the scores reference is the low-precision one (reference.h).
    lowp_scores_err_ = lowp_err_;
    lse_lowp_scores_err_ = 0;
    return;
  }
  DeviceBuffer lse_lowp(rows * sizeof(float));
  reference_attention(p, RefPrecision::kLowpScores, lowp.as<float>(), lse_lowp.as<float>(),
                      cublas.get());
  lowp_scores_err_ = compare_fp32(lowp.as<float>(), out32_.as<float>(), n).max_abs_err;
  lse_lowp_scores_err_ = compare_fp32(lse_lowp.as<float>(), lse32_.as<float>(), rows).max_abs_err;
}

AttnParams& Problem::params_for(const KernelInfo& kernel) {
  const int64_t need = workspace_bytes(kernel, params_);
  if (need > params_.workspace_bytes) {
    workspace.resize(need);
    params_.workspace = workspace.get();
    params_.workspace_bytes = need;
  }
  return params_;
}

Verdict verify(const KernelInfo& kernel, Problem& problem, const Reference& reference,
               cudaStream_t stream) {
  AttnParams& p = problem.params_for(kernel);
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

// ---------------------------------------------------------------------------------------------
// The backward.
// ---------------------------------------------------------------------------------------------

namespace {

// dO's seed stream: distinct from every problem's Q, K, V (seed * 3 + 0, 1, 2).
constexpr uint64_t kDoutSeed = 0x9e3779b97f4a7c15ull;

void check_bwd_spec(const ProblemSpec& spec) {
  const std::string bad = check_shape(spec.params());
  if (!bad.empty()) throw std::invalid_argument("problem " + spec.describe() + ": " + bad);
  if (spec.dtype != DType::f16 && spec.dtype != DType::bf16) {
    throw std::invalid_argument("problem " + spec.describe() +
                                ": the backward takes fp16 and bf16 inputs");
  }
}

}  // namespace

BwdParams placeholder_bwd_params(const ProblemSpec& spec, const KernelInfo& kernel) {
  ProblemSpec s = spec;
  s.with_lse = true;
  BwdParams b = make_bwd_params(placeholder_params(s));
  b.dout = reinterpret_cast<void*>(0x6000);
  b.dq = reinterpret_cast<void*>(0x7000);
  b.dk = reinterpret_cast<void*>(0x8000);
  b.dv = reinterpret_cast<void*>(0x9000);
  b.workspace_bytes = workspace_bytes(kernel, b.fwd);
  b.workspace = b.workspace_bytes > 0 ? reinterpret_cast<void*>(0x10000) : nullptr;
  return b;
}

BwdProblem::BwdProblem(const ProblemSpec& spec, CublasHandle& cublas) : spec_(spec) {
  check_bwd_spec(spec);
  spec_.with_lse = true;
  AttnParams p = spec_.params();
  params_ = make_bwd_params(p);
  BwdParams& b = params_;
  q.resize(bytes_of(p, p.dtype, p.q_stride, p.heads_q, p.seqlen_q));
  k.resize(bytes_of(p, p.dtype, p.k_stride, p.heads_kv, p.seqlen_k));
  v.resize(bytes_of(p, p.dtype, p.v_stride, p.heads_kv, p.seqlen_k));
  o.resize(bytes_of(p, p.dtype, p.o_stride, p.heads_q, p.seqlen_q));
  lse.resize(p.batch * p.heads_q * p.seqlen_q * sizeof(float));
  dout.resize(bytes_of(p, p.dtype, b.do_stride, p.heads_q, p.seqlen_q));
  for (DeviceBuffer* g : {&dq, &dq2}) {
    g->resize(bytes_of(p, p.dtype, b.dq_stride, p.heads_q, p.seqlen_q));
  }
  for (DeviceBuffer* g : {&dk, &dk2}) {
    g->resize(bytes_of(p, p.dtype, b.dk_stride, p.heads_kv, p.seqlen_k));
  }
  for (DeviceBuffer* g : {&dv, &dv2}) {
    g->resize(bytes_of(p, p.dtype, b.dv_stride, p.heads_kv, p.seqlen_k));
  }
  b.fwd.q = q.get();
  b.fwd.k = k.get();
  b.fwd.v = v.get();
  b.fwd.o = o.get();
  b.fwd.lse = lse.as<float>();
  b.dout = dout.get();
  b.dq = dq.get();
  b.dk = dk.get();
  b.dv = dv.get();
  fill_randn(q.get(), p.dtype, q.bytes() / 2, spec.seed * 3 + 0, spec.input_std);
  fill_randn(k.get(), p.dtype, k.bytes() / 2, spec.seed * 3 + 1, spec.input_std);
  fill_randn(v.get(), p.dtype, v.bytes() / 2, spec.seed * 3 + 2, spec.input_std);
  fill_randn(dout.get(), p.dtype, dout.bytes() / 2, spec.seed ^ kDoutSeed, 1.0f);
  forward(cublas);
  poison_grads();
  for (DeviceBuffer* g : {&dq2, &dk2, &dv2}) fill_bits16(g->get(), 0xFFFF, g->bytes() / 2);
  FL_CUDA_CHECK(cudaDeviceSynchronize());
}

void BwdProblem::forward(CublasHandle& cublas) {
  // O and the LSE of the fp32 reference; O rounded to the dtype, in O's layout.
  const AttnParams& p = params_.fwd;
  const int64_t n = p.batch * p.heads_q * p.seqlen_q * p.head_dim;
  DeviceBuffer o32(n * sizeof(float));
  reference_attention(p, RefPrecision::kFp32, o32.as<float>(), lse.as<float>(), cublas.get());
  scatter_from_fp32<<<elementwise_grid(n), kElementwiseThreads>>>(
      o.get(), p.dtype, p.o_stride, o32.as<float>(), p.heads_q, p.seqlen_q, p.head_dim, n);
  FL_CHECK_LAUNCH();
  FL_CUDA_CHECK(cudaDeviceSynchronize());
}

void BwdProblem::set_inputs(const float* hq, const float* hk, const float* hv,
                            CublasHandle& cublas) {
  const AttnParams& p = params_.fwd;
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
    scatter_from_fp32<<<elementwise_grid(n), kElementwiseThreads>>>(
        x.dst, p.dtype, *x.s, tmp.as<float>(), x.heads, x.rows, p.head_dim, n);
    FL_CHECK_LAUNCH();
    FL_CUDA_CHECK(cudaDeviceSynchronize());
  }
  forward(cublas);
}

void BwdProblem::prepare_workspace(const KernelInfo& kernel) {
  const int64_t need = workspace_bytes(kernel, params_.fwd);
  if (need > static_cast<int64_t>(workspace.bytes())) workspace.resize(static_cast<size_t>(need));
  params_.workspace = workspace.get();
  params_.workspace_bytes = static_cast<int64_t>(workspace.bytes());
}

void BwdProblem::poison_grads(cudaStream_t stream) {
  for (DeviceBuffer* g : {&dq, &dk, &dv}) fill_bits16(g->get(), 0xFFFF, g->bytes() / 2, stream);
}

void* BwdProblem::grad(Grad g, bool second) const {
  const DeviceBuffer* sets[2][kGrads] = {{&dq, &dk, &dv}, {&dq2, &dk2, &dv2}};
  return sets[second ? 1 : 0][static_cast<int>(g)]->get();
}

namespace {

// Gradient g of b described as the "O" of an AttnParams (heads, rows, strides, dtype), so that
// the forward's comparisons (compare_output, count_bitwise_differences, describe_worst) read it.
AttnParams grad_view(const BwdParams& b, Grad g) {
  AttnParams v = b.fwd;
  v.out_dtype = b.fwd.dtype;
  if (g == Grad::dq) {
    v.o_stride = b.dq_stride;
  } else {
    v.heads_q = b.fwd.heads_kv;
    v.seqlen_q = b.fwd.seqlen_k;
    v.o_stride = g == Grad::dk ? b.dk_stride : b.dv_stride;
  }
  return v;
}

}  // namespace

std::vector<float> BwdProblem::grad_host(Grad g) const {
  const AttnParams v = grad_view(params_, g);
  const int64_t n = grad_elements(params_, g);
  DeviceBuffer tmp(n * sizeof(float));
  gather_to_fp32<<<elementwise_grid(n), kElementwiseThreads>>>(
      tmp.as<float>(), grad(g), v.out_dtype, v.o_stride, v.heads_q, v.seqlen_q, v.head_dim, n);
  FL_CHECK_LAUNCH();
  std::vector<float> host(n);
  FL_CUDA_CHECK(cudaMemcpy(host.data(), tmp.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

int64_t grad_elements(const BwdParams& b, Grad g) {
  const AttnParams v = grad_view(b, g);
  return v.batch * v.heads_q * v.seqlen_q * v.head_dim;
}

ErrorStats compare_gradient(const BwdParams& b, Grad g, const void* grad, const float* ref,
                            cudaStream_t stream) {
  return compare_output(grad_view(b, g), grad, ref, stream);
}

std::string describe_grad_index(const BwdParams& b, Grad g, int64_t index) {
  return describe_worst(grad_view(b, g), index);
}

BwdReference::BwdReference(const BwdProblem& problem, CublasHandle& cublas) {
  const BwdParams& b = problem.params();
  DeviceBuffer lowp[kGrads];
  for (Grad g : kAllGrads) {
    const size_t bytes = grad_elements(b, g) * sizeof(float);
    grad32_[static_cast<int>(g)].resize(bytes);
    lowp[static_cast<int>(g)].resize(bytes);
  }
  reference_backward(b, RefPrecision::kFp32, grad32_[0].as<float>(), grad32_[1].as<float>(),
                     grad32_[2].as<float>(), cublas.get());
  reference_backward(b, RefPrecision::kLowp, lowp[0].as<float>(), lowp[1].as<float>(),
                     lowp[2].as<float>(), cublas.get());
  for (Grad g : kAllGrads) {
    const int i = static_cast<int>(g);
    lowp_err_[i] =
        compare_fp32(lowp[i].as<float>(), grad32_[i].as<float>(), grad_elements(b, g)).max_abs_err;
  }
}

std::string gradient_failures(const BwdParams& b, Grad g, const ErrorStats& err,
                              double tolerance) {
  std::ostringstream why;
  const char* name = to_string(g);
  if (err.non_finite > 0) {
    why << name << ": " << err.non_finite << " values not finite (NaN/inf or poison left); ";
  }
  if (err.nonzero == 0) why << name << ": all zero; ";
  if (err.max_abs_err > tolerance) {
    why << name << ": max error " << err.max_abs_err << " > " << tolerance << " at "
        << describe_grad_index(b, g, err.worst_index) << "; ";
  }
  return why.str();
}

BwdVerdict verify_backward(const KernelInfo& kernel, BwdProblem& problem,
                           const BwdReference& reference, cudaStream_t stream) {
  problem.prepare_workspace(kernel);
  BwdParams& b = problem.params();
  BwdVerdict v;
  std::ostringstream why;

  problem.poison_grads(stream);
  run_backward(kernel, b, stream);
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (Grad g : kAllGrads) {
    GradVerdict& r = v.grads[static_cast<int>(g)];
    r.err = compare_gradient(b, g, problem.grad(g), reference.grad32(g), stream);
    r.lowp_err = reference.lowp_err(g);
    r.tolerance = pass_tolerance(r.lowp_err);
    why << gradient_failures(b, g, r.err, r.tolerance);
  }

  // Second run into the second set: it must pass too, and agree with the first within the
  // tolerance (not bitwise: dQ may be summed with atomics in a varying order).
  for (DeviceBuffer* s : {&problem.dq2, &problem.dk2, &problem.dv2}) {
    fill_bits16(s->get(), 0xFFFF, s->bytes() / 2, stream);
  }
  void* first[kGrads] = {b.dq, b.dk, b.dv};
  b.dq = problem.grad(Grad::dq, true);
  b.dk = problem.grad(Grad::dk, true);
  b.dv = problem.grad(Grad::dv, true);
  try {
    run_backward(kernel, b, stream);
  } catch (...) {
    b.dq = first[0];
    b.dk = first[1];
    b.dv = first[2];
    throw;
  }
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
  b.dq = first[0];
  b.dk = first[1];
  b.dv = first[2];
  for (Grad g : kAllGrads) {
    GradVerdict& r = v.grads[static_cast<int>(g)];
    const void* again = problem.grad(g, true);
    const ErrorStats e2 = compare_gradient(b, g, again, reference.grad32(g), stream);
    const std::string bad2 = gradient_failures(b, g, e2, r.tolerance);
    if (!bad2.empty()) why << "second run: " << bad2;
    // The first run as fp32, the "reference" of the second.
    const AttnParams view = grad_view(b, g);
    const int64_t n = grad_elements(b, g);
    DeviceBuffer first32(n * sizeof(float));
    gather_to_fp32<<<elementwise_grid(n), kElementwiseThreads, 0, stream>>>(
        first32.as<float>(), problem.grad(g), view.out_dtype, view.o_stride, view.heads_q,
        view.seqlen_q, view.head_dim, n);
    FL_CHECK_LAUNCH();
    const ErrorStats d = compare_gradient(b, g, again, first32.as<float>(), stream);
    r.run_diff = d.max_abs_err;
    r.bitwise_diffs = count_bitwise_differences(view, problem.grad(g), again, stream);
    if (r.err.non_finite == 0 && e2.non_finite == 0 && r.run_diff > r.tolerance) {
      why << to_string(g) << ": the two runs differ by " << r.run_diff << " > " << r.tolerance
          << " at " << describe_grad_index(b, g, d.worst_index) << "; ";
    }
  }

  v.why = why.str();
  v.passed = v.why.empty();
  return v;
}

float time_backward_ms(const KernelInfo& kernel, BwdProblem& problem, EventTimer& timer,
                       L2Flusher& flusher, cudaStream_t stream) {
  flusher.flush(stream);
  timer.start(stream);
  run_backward(kernel, problem.params(), stream);
  return timer.stop_ms(stream);
}

}  // namespace fl
