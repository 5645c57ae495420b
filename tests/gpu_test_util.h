// Shared by the GPU tests: skip cleanly (with the reason) where there is no GPU; a problem in the
// input type a kernel takes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/harness.h"
#include "common/reference.h"
#include "common/registry.h"

#define FL_REQUIRE_GPU()                                   \
  do {                                                     \
    std::string fl_why_no_gpu;                             \
    if (!::fl::gpu_available(&fl_why_no_gpu)) {            \
      GTEST_SKIP() << "needs a GPU: " << fl_why_no_gpu;    \
    }                                                      \
  } while (0)

namespace fl::test {

// The last of `ks` (a track's rungs, lowest first) whose code runs on this device, as the
// registry judges it (why_not_this_device; without a device, the last); null if none. "best"
// takes it for a call all of them take: rung 76 (sm_90a) on an H100 or H200, 69 on an A100.
inline const KernelInfo* last_on_this_device(const std::vector<const KernelInfo*>& ks) {
  for (auto it = ks.rbegin(); it != ks.rend(); ++it) {
    if (why_not_this_device(**it).empty()) return *it;
  }
  return nullptr;
}

// A problem of these sizes, mask, layout and seed, the LSE written (the tests' shape lists); the
// rest of ProblemSpec as it defaults.
inline ProblemSpec shape_spec(DType t, int64_t b, int64_t hq, int64_t hkv, int64_t nq, int64_t nk,
                              int64_t d, bool causal, Layout layout, uint64_t seed) {
  ProblemSpec s;
  s.dtype = t;
  s.batch = b;
  s.heads_q = hq;
  s.heads_kv = hkv;
  s.seqlen_q = nq;
  s.seqlen_k = nk;
  s.head_dim = d;
  s.causal = causal;
  s.layout = layout;
  s.with_lse = true;
  s.seed = seed;
  return s;
}

// A 16-bit spec on e4m3 inputs: the same seeded values, quantised; its dtype becomes O's type,
// with descale factors per head when `per_head`.
inline ProblemSpec as_e4m3(ProblemSpec s, bool per_head) {
  s.out_dtype = s.dtype;
  s.dtype = DType::e4m3;
  s.descale_per_head = per_head;
  return s;
}

// The input type of kernel k: the tests' 16-bit cases become e4m3 cases for a kernel with
// fp8_inputs (rung 28). A 16-bit spec (fp16 or bf16) is returned as it is for a 16-bit kernel,
// as_e4m3 of it for an fp8 kernel.
inline ProblemSpec in_input_type(const KernelInfo& k, ProblemSpec s, bool per_head = false) {
  if (!k.fp8_inputs || s.dtype == DType::e4m3) return s;
  return as_e4m3(s, per_head);
}

// x rounded to fp16 or bf16 (t), as Problem::set_inputs stores a 16-bit input and a kernel
// rounds a 16-bit O.
inline float round_16(DType t, float x) {
  return t == DType::f16 ? __half2float(__float2half_rn(x))
                         : __bfloat162float(__float2bfloat16_rn(x));
}

// Seeded numbers on the host (splitmix64, Box-Muller): the same on every machine and standard
// library, so that host-made inputs and the checks on them hold wherever a test runs.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t x = (state_ += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  float normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  int64_t integer(int64_t lo, int64_t hi) {  // uniform in [lo, hi]
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t state_;
};

// The cuBLAS fp32 reference of `p` against the float64 CPU reference on the host copies q, k, v
// (p's strides, the values the reference reads): O within 2e-5, the LSE within 1e-4 relative and
// -inf exactly where a row sees no key, O not trivially zero. Returns the fp32 output (device,
// [B, H_q, Nq, d]), max |O_ref| and the number of rows that see no key.
struct ReferenceCheck {
  DeviceBuffer out32;
  double max_ref = 0;
  int masked_rows = 0;
};
inline ReferenceCheck expect_reference_matches_float64(const AttnParams& p,
                                                       const std::vector<float>& q,
                                                       const std::vector<float>& k,
                                                       const std::vector<float>& v,
                                                       CublasHandle& cublas) {
  const int64_t n = p.batch * p.heads_q * p.seqlen_q * p.head_dim;
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  ReferenceCheck r;
  r.out32.resize(n * 4);
  DeviceBuffer lse32(rows * 4);
  reference_attention(p, RefPrecision::kFp32, r.out32.as<float>(), lse32.as<float>(),
                      cublas.get());
  std::vector<float> o(n), lse(rows);
  FL_CUDA_CHECK(cudaMemcpy(o.data(), r.out32.get(), n * 4, cudaMemcpyDeviceToHost));
  FL_CUDA_CHECK(cudaMemcpy(lse.data(), lse32.get(), rows * 4, cudaMemcpyDeviceToHost));
  std::vector<double> o_ref, lse_ref;
  cpu_reference(p, q, k, v, o_ref, lse_ref);
  double max_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_err = std::max(max_err, std::abs(o[i] - o_ref[i]));
    r.max_ref = std::max(r.max_ref, std::abs(o_ref[i]));
  }
  EXPECT_GT(r.max_ref, 0.01);  // the data is not trivially zero
  EXPECT_LT(max_err, 2e-5) << "fp32 cuBLAS reference vs float64 (" << to_string(p.dtype)
                           << " inputs)";
  for (int64_t row = 0; row < rows; ++row) {
    if (std::isinf(lse_ref[row])) {
      ++r.masked_rows;
      EXPECT_TRUE(std::isinf(lse[row]) && lse[row] < 0) << "row " << row;
    } else {
      EXPECT_NEAR(lse[row], lse_ref[row], 1e-4 * std::max(1.0, std::abs(lse_ref[row])))
          << "row " << row;
    }
  }
  return r;
}

}  // namespace fl::test
