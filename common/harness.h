// One attention problem on the GPU (inputs, output, references) and the verification every
// kernel goes through: the main tool, the benchmark and the tests all call verify().
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/attention.h"
#include "common/compare.h"
#include "common/device_buffer.h"
#include "common/reference.h"
#include "common/registry.h"
#include "common/timing.h"

namespace fl {

struct ProblemSpec {
  DType dtype = DType::f16;  // Q, K, V
  // e4m3 inputs only (ignored for fp16/bf16, whose O has their type): O's type, fp16 or bf16, and
  // whether the inputs are scaled per (batch, head) rather than per tensor (common/fp8.h).
  DType out_dtype = DType::f16;
  bool descale_per_head = false;
  int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 128, seqlen_k = 128, head_dim = 128;
  bool causal = false;
  bool with_lse = false;
  Layout layout = Layout::BHND;
  float scale = 0.f;       // softmax scale; 0 means 1/sqrt(d)
  float input_std = 1.0f;  // inputs are input_std * randn
  uint64_t seed = 1;
  // "fp16 B=2 H=4/4 Nq=128 Nk=128 d=128"; for e4m3 inputs "e4m3 O=fp16 B=2 ..." and, when the
  // descale factors are per head, " descale=head".
  std::string describe() const;
  // The problem's sizes, strides, scale and types as kernel parameters, pointers null (the
  // descale pointers too: the Problem holds the factors).
  AttnParams params() const;
};

// The parameters a Problem of `spec` will have (params()), with placeholder 16-byte aligned
// addresses for the tensors (and the LSE when spec.with_lse) and, for e4m3 inputs, descale
// factors of 1 (host memory that lives as long as the program): what why_unsupported and tile()
// need to decide a claim without allocating anything, and a workspace pointer and size that
// satisfy any rung (Problem::params_for sizes the real one). Never to be launched.
AttnParams placeholder_params(const ProblemSpec& spec);

// Device tensors for one problem, filled with seeded randn; O poisoned (NaN) until a kernel runs.
// e4m3 inputs: the same seeded randn in fp32, quantised on the device as fl::quantize_e4m3 does
// (quantize_e4m3_device, common/random.h), the descale factors held here (params() points at
// them); O (and o2) in out_dtype.
class Problem {
 public:
  // Throws std::invalid_argument, before allocating anything, when the spec breaks check_shape
  // (a size < 1, H_q not a multiple of H_kv, a scale that is not finite and > 0).
  explicit Problem(const ProblemSpec& spec);
  // Fills Q, K, V from host fp32 arrays in [B, H, N, d] order instead of randn (for .npy input,
  // and for tests' hand-made inputs): rounded to fp16/bf16, or for e4m3 inputs quantised as
  // fl::quantize_e4m3 does (new descale factors).
  void set_inputs(const float* q, const float* k, const float* v);
  const ProblemSpec& spec() const { return spec_; }
  const AttnParams& params() const { return params_; }
  AttnParams& params() { return params_; }
  // The params with the workspace `kernel` needs for them (workspace_bytes), grown here when it
  // is short: call it outside any timed region. verify() does.
  AttnParams& params_for(const KernelInfo& kernel);
  void poison_output(cudaStream_t stream = nullptr);
  // O (out_dtype) as fp32 in [B, H_q, Nq, d] order.
  std::vector<float> output_host() const;
  // The descale factors of e4m3 inputs (empty for fp16/bf16): one, or B x H of the tensor.
  const std::vector<float>& q_descale() const { return q_descale_; }
  const std::vector<float>& k_descale() const { return k_descale_; }
  const std::vector<float>& v_descale() const { return v_descale_; }

  DeviceBuffer q, k, v, o, o2, lse, workspace;

 private:
  void point_at_descales();
  ProblemSpec spec_;
  AttnParams params_;
  std::vector<float> q_descale_, k_descale_, v_descale_;
};

// fp32 and low-precision references of a problem, computed once and reused for every kernel.
class Reference {
 public:
  Reference(const Problem& problem, CublasHandle& cublas);
  const float* out32() const { return out32_.as<float>(); }
  const float* lse32() const { return lse32_.as<float>(); }
  double lowp_err() const { return lowp_err_; }  // max |ref_lowp - ref_fp32|
  // max |ref - ref_fp32| for the reference that also rounds S (RefPrecision::kLowpScores).
  double lowp_scores_err() const { return lowp_scores_err_; }
  // The low-precision error the pass rule scales for `kernel`.
  double lowp_err_for(const KernelInfo& kernel) const {
    return kernel.scores_in_input_dtype ? lowp_scores_err_ : lowp_err_;
  }
  // max |LSE - LSE_fp32| of that reference: 0 when only P is rounded (P does not enter the
  // LSE), the effect of rounding S otherwise.
  double lse_lowp_err_for(const KernelInfo& kernel) const {
    return kernel.scores_in_input_dtype ? lse_lowp_scores_err_ : 0.0;
  }

 private:
  DeviceBuffer out32_, lse32_;
  double lowp_err_ = 0, lowp_scores_err_ = 0, lse_lowp_scores_err_ = 0;
};

// Runs `kernel` on `problem` twice (output poisoned before each run) and applies every check of
// the ladder: pass rule, all outputs finite (poison overwritten), not all zero, LSE within
// tolerance when requested, both runs bitwise equal. Throws UnsupportedError when the kernel
// does not support the problem.
Verdict verify(const KernelInfo& kernel, Problem& problem, const Reference& reference,
               cudaStream_t stream = nullptr);

// ---------------------------------------------------------------------------------------------
// The backward: a problem with dO, the forward's O and LSE, three gradients and a workspace; its
// references; the gradients' pass rule.
// ---------------------------------------------------------------------------------------------

// The three gradients, in the order of every array of them here.
enum class Grad { dq, dk, dv };
constexpr int kGrads = 3;
inline const char* to_string(Grad g) { return g == Grad::dq ? "dQ" : g == Grad::dk ? "dK" : "dV"; }
constexpr Grad kAllGrads[kGrads] = {Grad::dq, Grad::dk, Grad::dv};

// The parameters a BwdProblem of `spec` will have, with placeholder aligned addresses for every
// tensor and the LSE, and a workspace (a placeholder too) of the size `kernel` asks for this
// shape (workspace_bytes): what why_unsupported_backward needs to decide a claim
// without allocating anything. Never to be launched.
BwdParams placeholder_bwd_params(const ProblemSpec& spec, const KernelInfo& kernel);

// Device tensors for one backward problem: Q, K, V and dO seeded randn in the spec's dtype (fp16
// or bf16; dO is randn of std 1 whatever input_std, from a seed stream of its own); O and the LSE
// from the fp32 reference forward (reference_attention, RefPrecision::kFp32), O rounded to the
// dtype, the LSE kept in fp32 ([B, H_q, Nq], -inf for a row that sees no key); dQ, dK, dV (and a
// second set, for the second run of verify_backward) poisoned with NaN until a kernel runs. The
// gradients have the layouts make_bwd_params gives (dO, dQ as Q; dK, dV as K). The workspace is
// sized for a kernel by prepare_workspace, outside any timed region.
class BwdProblem {
 public:
  // Throws std::invalid_argument, before allocating anything, when the spec breaks check_shape
  // or its dtype is not fp16 or bf16.
  BwdProblem(const ProblemSpec& spec, CublasHandle& cublas);
  // Q, K, V from host fp32 arrays in [B, H, N, d] order instead of randn (rounded to the dtype),
  // and O and the LSE computed again from them; dO stays as it was.
  void set_inputs(const float* q, const float* k, const float* v, CublasHandle& cublas);
  const ProblemSpec& spec() const { return spec_; }
  const BwdParams& params() const { return params_; }
  BwdParams& params() { return params_; }
  // Makes the workspace at least workspace_bytes(kernel, shape) (it only grows: one
  // buffer serves every kernel) and points params() at it, its whole size; a kernel that needs
  // none gets a null workspace of 0 bytes while none was allocated.
  void prepare_workspace(const KernelInfo& kernel);
  // NaN into dQ, dK, dV (the gradients a run writes).
  void poison_grads(cudaStream_t stream = nullptr);
  // Where gradient g lives: the first set (params()), or the second (`second`).
  void* grad(Grad g, bool second = false) const;
  // Gradient g of the first set as fp32 in [B, H, N, d] order.
  std::vector<float> grad_host(Grad g) const;

  DeviceBuffer q, k, v, o, lse, dout, dq, dk, dv, dq2, dk2, dv2, workspace;

 private:
  void forward(CublasHandle& cublas);
  ProblemSpec spec_;
  BwdParams params_;
};

// The gradients' references of a problem, computed once and reused for every kernel: fp32 (the
// truth) as contiguous fp32 tensors, and, per gradient, the error of the low-precision one
// (RefPrecision::kLowp: P and dS rounded before their GEMMs, the outputs rounded),
// max |grad_lowp - grad_fp32|, which the pass rule scales.
class BwdReference {
 public:
  BwdReference(const BwdProblem& problem, CublasHandle& cublas);
  const float* grad32(Grad g) const { return grad32_[static_cast<int>(g)].as<float>(); }
  double lowp_err(Grad g) const { return lowp_err_[static_cast<int>(g)]; }

 private:
  DeviceBuffer grad32_[kGrads];
  double lowp_err_[kGrads] = {0, 0, 0};
};

// Number of elements of gradient g of b ([B, H_q, Nq, d] for dQ, [B, H_kv, Nk, d] for dK, dV).
int64_t grad_elements(const BwdParams& b, Grad g);

// Gradient g (b's dtype, at b's strides for it) against a contiguous fp32 tensor of its shape.
// The worst index is a flat index of the contiguous shape (describe_grad_index names it).
ErrorStats compare_gradient(const BwdParams& b, Grad g, const void* grad, const float* ref,
                            cudaStream_t stream = nullptr);
std::string describe_grad_index(const BwdParams& b, Grad g, int64_t index);  // "b=0 h=1 ..."

// The gradients' pass rule on one gradient's statistics against the fp32 reference (that of
// FlashAttention-2, each gradient by itself): every value finite (no poison left), not all zero,
// and max |grad - grad_fp32| <= `tolerance` (pass_tolerance of that gradient's low-precision
// error). "" when it holds, else the failures, each "dK: ...; ".
std::string gradient_failures(const BwdParams& b, Grad g, const ErrorStats& err, double tolerance);

struct GradVerdict {
  ErrorStats err;             // the first run against the fp32 reference
  double lowp_err = 0;        // max |grad_lowp - grad_fp32|
  double tolerance = 0;       // pass_tolerance(lowp_err)
  double run_diff = 0;        // max |second run - first run|
  int64_t bitwise_diffs = 0;  // elements that differ bitwise between the two runs
};

struct BwdVerdict {
  bool passed = false;
  std::string why;  // the failed checks, empty when passed
  GradVerdict grads[kGrads];
  const GradVerdict& operator[](Grad g) const { return grads[static_cast<int>(g)]; }
};

// Runs `kernel`'s backward on `problem` twice (the workspace sized first, by prepare_workspace;
// each run into its own poisoned set of gradients) and applies every check of the ladder's
// backward, to dQ, dK and dV separately: the pass rule on each run (gradient_failures), and the
// two runs within the tolerance of each other. Bitwise equality of the runs is not required (a
// kernel may add dQ with fp32 atomics, in an order that varies): bitwise_diffs reports it.
// Throws UnsupportedError when the kernel does not support the problem.
BwdVerdict verify_backward(const KernelInfo& kernel, BwdProblem& problem,
                           const BwdReference& reference, cudaStream_t stream = nullptr);

// One timed backward call, as the ladder and the benchmark time it: the L2 flushed, then events
// around run_backward, which enqueues every launch of the call (a pre-pass, the main kernel, a
// conversion). Milliseconds. The workspace must be sized for the kernel first
// (prepare_workspace, or verify_backward), so that no allocation is timed.
float time_backward_ms(const KernelInfo& kernel, BwdProblem& problem, EventTimer& timer,
                       L2Flusher& flusher, cudaStream_t stream = nullptr);

}  // namespace fl
