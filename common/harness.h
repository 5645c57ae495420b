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
// need to decide a claim without allocating anything. Never to be launched.
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
  void poison_output(cudaStream_t stream = nullptr);
  // O (out_dtype) as fp32 in [B, H_q, Nq, d] order.
  std::vector<float> output_host() const;
  // The descale factors of e4m3 inputs (empty for fp16/bf16): one, or B x H of the tensor.
  const std::vector<float>& q_descale() const { return q_descale_; }
  const std::vector<float>& k_descale() const { return k_descale_; }
  const std::vector<float>& v_descale() const { return v_descale_; }

  DeviceBuffer q, k, v, o, o2, lse;

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

}  // namespace fl
