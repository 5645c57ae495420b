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
  DType dtype = DType::f16;
  int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 128, seqlen_k = 128, head_dim = 128;
  bool causal = false;
  bool with_lse = false;
  Layout layout = Layout::BHND;
  float scale = 0.f;       // softmax scale; 0 means 1/sqrt(d)
  float input_std = 1.0f;  // inputs are input_std * randn
  uint64_t seed = 1;
  std::string describe() const;  // "fp16 B=2 H=4/4 Nq=128 Nk=128 d=128 BHND"
  // The problem's sizes, strides and scale as kernel parameters, pointers null.
  AttnParams params() const;
};

// Device tensors for one problem, filled with seeded randn; O poisoned (NaN) until a kernel runs.
class Problem {
 public:
  // Throws std::invalid_argument, before allocating anything, when the spec breaks check_shape
  // (a size < 1, H_q not a multiple of H_kv, a scale that is not finite and > 0).
  explicit Problem(const ProblemSpec& spec);
  // Fills Q, K, V from host fp32 arrays in [B, H, N, d] order instead of randn (for .npy input).
  void set_inputs(const float* q, const float* k, const float* v);
  const ProblemSpec& spec() const { return spec_; }
  const AttnParams& params() const { return params_; }
  AttnParams& params() { return params_; }
  void poison_output(cudaStream_t stream = nullptr);
  // O as fp32 in [B, H_q, Nq, d] order.
  std::vector<float> output_host() const;

  DeviceBuffer q, k, v, o, o2, lse;

 private:
  ProblemSpec spec_;
  AttnParams params_;
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
