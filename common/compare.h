// Comparing a kernel's output with the reference, and the pass rule of the ladder.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/attention.h"

namespace fl {

struct ErrorStats {
  double max_abs_err = 0;    // max |out - ref| over finite outputs
  double mean_abs_err = 0;
  int64_t worst_index = -1;  // flat index into [B, H_q, Nq, d] of the largest error
  int64_t non_finite = 0;    // NaN or inf outputs (poison left behind shows up here)
  int64_t nonzero = 0;       // outputs != 0
  double max_abs_ref = 0;    // max |ref|
};

// Statistics of `out` (p.out_dtype, p.o_stride layout) against `ref` (fp32, contiguous
// [B, H_q, Nq, d]).
ErrorStats compare_output(const AttnParams& p, const void* out, const float* ref,
                          cudaStream_t stream = nullptr);

// The same for two contiguous fp32 tensors of `count` elements (used for ref_lowp vs ref_fp32,
// and for the LSE).
ErrorStats compare_fp32(const float* out, const float* ref, int64_t count,
                        cudaStream_t stream = nullptr);

// Number of elements (16-bit: O is fp16 or bf16 for every input type) that differ bitwise
// between two outputs of p's shape and strides.
int64_t count_bitwise_differences(const AttnParams& p, const void* a, const void* b,
                                  cudaStream_t stream = nullptr);

// FlashAttention-2's rule: max|out - ref_fp32| <= 2 * max|ref_lowp - ref_fp32| + floor.
// The floor keeps the rule meaningful when the low-precision reference happens to be exact.
constexpr double kPassFactor = 2.0;
constexpr double kPassFloor = 1e-4;
inline double pass_tolerance(double lowp_err) { return kPassFactor * lowp_err + kPassFloor; }

// The LSE is fp32 in every kernel: |lse - ref| <= 1e-3 * max(1, |ref|) (same -inf where masked),
// or twice the LSE error of the kernel's low-precision reference if that is larger (only the
// unfused baseline, which rounds S, has a non-zero one).
constexpr double kLseTolerance = 1e-3;

struct Verdict {
  bool passed = false;
  std::string why;  // the failed checks, empty when passed
  ErrorStats out;   // kernel vs ref_fp32
  double lowp_err = 0;
  double tolerance = 0;
  double lse_err = 0;  // max |lse - lse_ref| (0 when no LSE requested)
  int64_t bitwise_diffs = 0;
};

std::string describe_worst(const AttnParams& p, int64_t index);  // "b=0 h=3 row=17 col=64"

}  // namespace fl
