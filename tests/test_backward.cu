// The backward: its references, its pass rule, every backward rung on the shapes it claims, and
// the rules of the backward's calls.
//
//   BackwardReference.*  the cuBLAS fp32 reference against the float64 CPU one on small shapes
//                        (MHA, GQA, MQA, causal both ways, ragged lengths, a row that sees no
//                        key), and the low-precision one a little off it (GPU)
//   BackwardPassRule.*   the gradients' rule is not vacuous: wrong gradients fail it, through
//                        compare_gradient and through verify_backward with stand-in "kernels"
//                        that write given gradients (GPU, no rung needed)
//   BackwardKernel.*     every backward rung (fl::backward_kernels()) over FlashAttention-2's
//                        backward test grid: each shape it claims passes verify_backward, each it
//                        refuses is refused with a message naming it (GPU)
//   BackwardRules.*      check_backward, the op of a rung, the workspace rule, best_backward_kernel
//                        and what every backward rung must claim (CPU: refusals come before any
//                        launch; placeholder pointers)
// The GPU tests skip with the reason where there is no GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/harness.h"
#include "common/reference.h"
#include "common/registry.h"
#include "fuzz_shapes.h"
#include "gpu_test_util.h"

namespace {

using fl::Grad;

fl::ProblemSpec bwd_spec(fl::DType t, int64_t b, int64_t hq, int64_t hkv, int64_t nq, int64_t nk,
                         int64_t d, bool causal, uint64_t seed,
                         fl::Layout layout = fl::Layout::BHND) {
  return fl::test::shape_spec(t, b, hq, hkv, nq, nk, d, causal, layout, seed);
}

// A 16-bit device buffer as floats, element for element (its own strided layout).
std::vector<float> host_floats(fl::DType t, const fl::DeviceBuffer& buf) {
  const size_t n = buf.bytes() / 2;
  std::vector<uint16_t> raw(n);
  FL_CUDA_CHECK(cudaMemcpy(raw.data(), buf.get(), buf.bytes(), cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (t == fl::DType::bf16) {
      const uint32_t bits = static_cast<uint32_t>(raw[i]) << 16;
      std::memcpy(&out[i], &bits, 4);
    } else {
      __half h;
      std::memcpy(&h, &raw[i], 2);
      out[i] = __half2float(h);
    }
  }
  return out;
}

// Floats rounded to fp16 or bf16, as the bits a kernel would store.
std::vector<uint16_t> to_bits16(fl::DType t, const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (t == fl::DType::bf16) {
      const __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
      std::memcpy(&out[i], &h, 2);
    } else {
      const __half h = __float2half_rn(x[i]);
      std::memcpy(&out[i], &h, 2);
    }
  }
  return out;
}

std::vector<float> device_floats(const float* p, int64_t n) {
  std::vector<float> out(n);
  FL_CUDA_CHECK(cudaMemcpy(out.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

// The three gradients of reference_backward at `precision`, on the host.
struct HostGrads {
  std::vector<float> g[fl::kGrads];
};
HostGrads reference_grads(const fl::BwdProblem& pr, fl::RefPrecision precision,
                          fl::CublasHandle& cublas) {
  const fl::BwdParams& b = pr.params();
  fl::DeviceBuffer d[fl::kGrads];
  for (Grad g : fl::kAllGrads) d[static_cast<int>(g)].resize(fl::grad_elements(b, g) * 4);
  fl::reference_backward(b, precision, d[0].as<float>(), d[1].as<float>(), d[2].as<float>(),
                         cublas.get());
  HostGrads h;
  for (Grad g : fl::kAllGrads) {
    const int i = static_cast<int>(g);
    h.g[i] = device_floats(d[i].as<float>(), fl::grad_elements(b, g));
  }
  return h;
}

// ---------------------------------------------------------------------------------------------
// The references.
// ---------------------------------------------------------------------------------------------

struct RefCase {
  const char* name;
  fl::ProblemSpec spec;
};

std::vector<RefCase> reference_cases() {
  using fl::DType;
  using fl::Layout;
  return {
      {"fp16_mha_d64", bwd_spec(DType::f16, 2, 2, 2, 64, 64, 64, false, 11)},
      {"bf16_mha_d128_48x80", bwd_spec(DType::bf16, 1, 2, 2, 48, 80, 128, false, 12)},
      {"fp16_gqa_4_2_ragged_17x33", bwd_spec(DType::f16, 1, 4, 2, 17, 33, 64, false, 13)},
      {"bf16_mqa_4_1_ragged_33x17", bwd_spec(DType::bf16, 1, 4, 1, 33, 17, 128, false, 14)},
      {"fp16_causal_nq_lt_nk_17x33", bwd_spec(DType::f16, 1, 2, 2, 17, 33, 64, true, 15)},
      // Rows 0-15 of each head see no key (i + Nk - Nq < 0): LSE -inf, O = 0, dQ = 0.
      {"bf16_causal_nq_gt_nk_33x17", bwd_spec(DType::bf16, 1, 2, 2, 33, 17, 128, true, 16)},
      {"fp16_gqa_causal_bnhd_40x24",
       bwd_spec(DType::f16, 2, 4, 2, 40, 24, 64, true, 17, Layout::BNHD)},
      {"fp16_mqa_causal_d128_24x40", bwd_spec(DType::f16, 1, 4, 1, 24, 40, 128, true, 18)},
  };
}

TEST(BackwardReference, CublasMatchesFloat64) {
  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  for (const RefCase& c : reference_cases()) {
    SCOPED_TRACE(c.name);
    fl::BwdProblem pr(c.spec, cublas);
    const fl::BwdParams& b = pr.params();
    const fl::DType t = b.fwd.dtype;
    const int64_t rows = b.fwd.batch * b.fwd.heads_q * b.fwd.seqlen_q;
    const std::vector<float> lse = device_floats(b.fwd.lse, rows);
    std::vector<double> want[fl::kGrads];
    fl::cpu_reference_backward(b, host_floats(t, pr.q), host_floats(t, pr.k),
                               host_floats(t, pr.v), host_floats(t, pr.o),
                               host_floats(t, pr.dout), lse, want[0], want[1], want[2]);
    const HostGrads got = reference_grads(pr, fl::RefPrecision::kFp32, cublas);
    for (Grad g : fl::kAllGrads) {
      const int i = static_cast<int>(g);
      ASSERT_EQ(got.g[i].size(), want[i].size()) << fl::to_string(g);
      double max_ref = 0, max_err = 0;
      int64_t non_finite = 0;
      for (size_t e = 0; e < want[i].size(); ++e) {
        if (!std::isfinite(got.g[i][e])) ++non_finite;
        max_ref = std::max(max_ref, std::abs(want[i][e]));
        max_err = std::max(max_err, std::abs(got.g[i][e] - want[i][e]));
      }
      EXPECT_EQ(non_finite, 0) << fl::to_string(g);
      EXPECT_GT(max_ref, 0.01) << fl::to_string(g) << ": the gradient is not trivially zero";
      // fp32 against float64: sums of at most a few hundred terms, relative to the largest.
      EXPECT_LT(max_err, 1e-4 * std::max(1.0, max_ref)) << fl::to_string(g) << " (max |ref| "
                                                        << max_ref << ")";
    }
    // The rows that see no key: their LSE is -inf, and their dQ exactly zero (not NaN).
    int64_t masked = 0;
    const int64_t d = b.fwd.head_dim;
    for (int64_t r = 0; r < rows; ++r) {
      if (!(std::isinf(lse[r]) && lse[r] < 0)) continue;
      ++masked;
      for (int64_t c = 0; c < d; ++c) ASSERT_EQ(got.g[0][r * d + c], 0.f) << "row " << r;
    }
    if (std::string(c.name) == "bf16_causal_nq_gt_nk_33x17") {
      EXPECT_EQ(masked, 2 * (33 - 17)) << "rows that see no key";
    }
  }
}

TEST(BackwardReference, LowPrecisionDiffersButClosely) {
  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  double err[2][fl::kGrads] = {};
  const fl::DType types[2] = {fl::DType::f16, fl::DType::bf16};
  for (int t = 0; t < 2; ++t) {
    fl::BwdProblem pr(bwd_spec(types[t], 1, 2, 2, 256, 256, 128, false, 21), cublas);
    fl::BwdReference ref(pr, cublas);
    for (Grad g : fl::kAllGrads) {
      const int i = static_cast<int>(g);
      const int64_t n = fl::grad_elements(pr.params(), g);
      double max_ref = 0;
      for (float x : device_floats(ref.grad32(g), n)) {
        max_ref = std::max(max_ref, std::abs(static_cast<double>(x)));
      }
      err[t][i] = ref.lowp_err(g);
      // Rounding P, dS and the output to 16 bits must show (else the rule is its floor alone)...
      EXPECT_GT(err[t][i], 0.0) << fl::to_string(types[t]) << " " << fl::to_string(g);
      // ...and stay near one rounding of the output: well under 5% of the largest value.
      EXPECT_LT(err[t][i], 0.05 * max_ref) << fl::to_string(types[t]) << " " << fl::to_string(g);
    }
  }
  // bf16 keeps 8 bits of mantissa against fp16's 11: its references are further apart.
  for (Grad g : fl::kAllGrads) {
    const int i = static_cast<int>(g);
    EXPECT_GT(err[1][i], err[0][i]) << fl::to_string(g);
  }
}

// ---------------------------------------------------------------------------------------------
// The pass rule is not vacuous.
// ---------------------------------------------------------------------------------------------

// Stand-in backward "kernels": each run copies the gradients held here (one set per run,
// alternating) into the call's dQ, dK, dV (contiguous layouts), so that verify_backward judges
// given numbers. `skip_dv` leaves dV as it is (the poison).
struct StandIn {
  std::vector<uint16_t> grads[2][fl::kGrads];
  int runs = 0;
  bool skip_dv = false;
};
StandIn& stand_in() {
  static StandIn s;
  return s;
}
std::string takes_any_backward(const fl::BwdParams&) { return ""; }
int64_t no_workspace(const fl::AttnParams&) { return 0; }
void stand_in_launch(const fl::BwdParams& b, cudaStream_t stream) {
  StandIn& s = stand_in();
  const auto& set = s.grads[s.runs++ % 2];
  void* dst[fl::kGrads] = {b.dq, b.dk, b.dv};
  for (int i = 0; i < fl::kGrads; ++i) {
    if (i == 2 && s.skip_dv) continue;
    FL_CUDA_CHECK(cudaMemcpyAsync(dst[i], set[i].data(), set[i].size() * 2,
                                  cudaMemcpyHostToDevice, stream));
  }
  FL_CUDA_CHECK(cudaStreamSynchronize(stream));
}
fl::KernelInfo stand_in_kernel() {
  fl::KernelInfo k;
  k.number = 97;
  k.slug = "stand_in";
  k.min_sm = 0;
  k.op = fl::Op::backward;
  k.supports_backward = takes_any_backward;
  k.launch_backward = stand_in_launch;
  k.workspace = no_workspace;
  return k;
}

TEST(BackwardPassRule, WrongGradientsFail) {
  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    SCOPED_TRACE(fl::to_string(t));
    fl::BwdProblem pr(bwd_spec(t, 1, 2, 2, 128, 128, 64, false, 31), cublas);
    fl::BwdReference ref(pr, cublas);
    const fl::BwdParams& b = pr.params();
    const HostGrads lowp = reference_grads(pr, fl::RefPrecision::kLowp, cublas);
    // Gradient g given as `x` (rounded to the dtype), judged by the rule.
    auto judge = [&](Grad g, const std::vector<float>& x) {
      const std::vector<uint16_t> bits = to_bits16(t, x);
      fl::DeviceBuffer buf(bits.size() * 2);
      FL_CUDA_CHECK(cudaMemcpy(buf.get(), bits.data(), buf.bytes(), cudaMemcpyHostToDevice));
      const fl::ErrorStats e = fl::compare_gradient(b, g, buf.get(), ref.grad32(g));
      return fl::gradient_failures(b, g, e, fl::pass_tolerance(ref.lowp_err(g)));
    };
    // The low-precision reference itself passes: a kernel doing that math exactly would.
    for (Grad g : fl::kAllGrads) {
      EXPECT_EQ(judge(g, lowp.g[static_cast<int>(g)]), "") << fl::to_string(g);
    }
    // dV with its largest row zeroed.
    std::vector<float> dv = lowp.g[2];
    const int64_t d = b.fwd.head_dim;
    const int64_t worst =
        (std::max_element(dv.begin(), dv.end(),
                          [](float a, float c) { return std::abs(a) < std::abs(c); }) -
         dv.begin()) / d;
    std::fill(dv.begin() + worst * d, dv.begin() + (worst + 1) * d, 0.f);
    EXPECT_NE(judge(Grad::dv, dv).find("dV: max error"), std::string::npos);
    // A NaN in dQ; dQ all zero.
    std::vector<float> dq = lowp.g[0];
    dq[dq.size() / 2] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_NE(judge(Grad::dq, dq).find("dQ: 1 values not finite"), std::string::npos);
    EXPECT_NE(judge(Grad::dq, std::vector<float>(dq.size(), 0.f)).find("dQ: all zero"),
              std::string::npos);
    if (t == fl::DType::f16) {
      // dK 1% too large: ten times fp16's rounding of it, so the rule must see it (bf16's own
      // rounding, 0.4%, is too close to 1% to be a sure test).
      std::vector<float> dk = lowp.g[1];
      for (float& x : dk) x *= 1.01f;
      EXPECT_NE(judge(Grad::dk, dk).find("dK: max error"), std::string::npos);
    }
  }
}

TEST(BackwardPassRule, VerifyBackwardJudgesWhatTheKernelWrites) {
  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  const fl::DType t = fl::DType::f16;
  fl::BwdProblem pr(bwd_spec(t, 1, 2, 2, 128, 128, 64, false, 41), cublas);
  fl::BwdReference ref(pr, cublas);
  const HostGrads lowp = reference_grads(pr, fl::RefPrecision::kLowp, cublas);
  const fl::KernelInfo k = stand_in_kernel();
  StandIn& s = stand_in();
  auto both_runs = [&](const HostGrads& h) {
    for (int r = 0; r < 2; ++r) {
      for (int i = 0; i < fl::kGrads; ++i) s.grads[r][i] = to_bits16(t, h.g[i]);
    }
    s.runs = 0;
    s.skip_dv = false;
  };

  both_runs(lowp);
  fl::BwdVerdict v = fl::verify_backward(k, pr, ref);
  EXPECT_TRUE(v.passed) << v.why;
  EXPECT_EQ(s.runs, 2) << "verify_backward runs the kernel twice";
  for (Grad g : fl::kAllGrads) {
    EXPECT_EQ(v[g].bitwise_diffs, 0) << fl::to_string(g);
    EXPECT_DOUBLE_EQ(v[g].lowp_err, ref.lowp_err(g));
    EXPECT_DOUBLE_EQ(v[g].tolerance, fl::pass_tolerance(ref.lowp_err(g)));
  }

  // dK 1% too large in both runs.
  HostGrads wrong = lowp;
  for (float& x : wrong.g[1]) x *= 1.01f;
  both_runs(wrong);
  v = fl::verify_backward(k, pr, ref);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.why.find("dK: max error"), std::string::npos) << v.why;
  EXPECT_EQ(v.why.find("dQ:"), std::string::npos) << v.why;

  // dV never written: the poison is found.
  both_runs(lowp);
  s.skip_dv = true;
  v = fl::verify_backward(k, pr, ref);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.why.find("dV: "), std::string::npos) << v.why;
  EXPECT_NE(v.why.find("values not finite"), std::string::npos) << v.why;

  // Two runs that each pass but disagree by more than the tolerance: at dQ's smallest element,
  // the first run 0.8 tolerance above the fp32 value, the second 0.8 below.
  both_runs(lowp);
  const std::vector<float> dq32 =
      device_floats(ref.grad32(Grad::dq), fl::grad_elements(pr.params(), Grad::dq));
  const size_t at = std::min_element(dq32.begin(), dq32.end(),
                                     [](float a, float c) { return std::abs(a) < std::abs(c); }) -
                    dq32.begin();
  const double tol = fl::pass_tolerance(ref.lowp_err(Grad::dq));
  HostGrads up = lowp, down = lowp;
  up.g[0][at] = static_cast<float>(dq32[at] + 0.8 * tol);
  down.g[0][at] = static_cast<float>(dq32[at] - 0.8 * tol);
  for (int i = 0; i < fl::kGrads; ++i) {
    s.grads[0][i] = to_bits16(t, up.g[i]);
    s.grads[1][i] = to_bits16(t, down.g[i]);
  }
  v = fl::verify_backward(k, pr, ref);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.why.find("dQ: the two runs differ by"), std::string::npos) << v.why;
  EXPECT_EQ(v.why.find("max error"), std::string::npos) << "each run alone passes: " << v.why;
  EXPECT_EQ(v[Grad::dq].bitwise_diffs, 1);
}

// ---------------------------------------------------------------------------------------------
// Every backward rung over FlashAttention-2's backward test grid.
// ---------------------------------------------------------------------------------------------

struct GridCase {
  std::string name;
  fl::ProblemSpec spec;
};

// FlashAttention-2's seqlen pairs (Nq, Nk) x d {64, 128} x causal x fp16/bf16 x MHA/MQA/GQA
// (B = 2, H_q = 6: H_kv 6, 1, 2).
std::vector<GridCase> fa2_grid() {
  const int64_t lengths[][2] = {{113, 203}, {128, 217}, {113, 211},  {108, 256},  {256, 512},
                                {512, 256}, {1024, 1024}, {1023, 1024}, {1024, 1023}, {2048, 2048}};
  const struct {
    const char* name;
    int64_t heads_kv;
  } heads[] = {{"mha", 6}, {"mqa", 1}, {"gqa", 2}};
  std::vector<GridCase> out;
  uint64_t seed = 100;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (const auto& h : heads) {
      for (bool causal : {false, true}) {
        for (int64_t d : {64, 128}) {
          for (const auto& n : lengths) {
            GridCase c;
            c.name = std::string(fl::to_string(t)) + "_" + h.name + (causal ? "_causal" : "") +
                     "_d" + std::to_string(d) + "_" + std::to_string(n[0]) + "x" +
                     std::to_string(n[1]);
            c.spec = bwd_spec(t, 2, 6, h.heads_kv, n[0], n[1], d, causal, ++seed);
            out.push_back(c);
          }
        }
      }
    }
  }
  return out;
}

class BackwardKernel : public ::testing::TestWithParam<const fl::KernelInfo*> {};

TEST_P(BackwardKernel, PassesEveryClaimedShapeOfTheGrid) {
  FL_REQUIRE_GPU();
  const fl::KernelInfo& k = *GetParam();
  fl::CublasHandle cublas;
  int claimed = 0;
  for (const GridCase& c : fa2_grid()) {
    const std::string why = fl::why_unsupported_backward(k, fl::placeholder_bwd_params(c.spec, k));
    if (!why.empty()) {
      EXPECT_EQ(why.rfind("kernel " + k.name() + ": ", 0), 0u) << c.name << ": " << why;
      continue;
    }
    ++claimed;
    fl::BwdProblem pr(c.spec, cublas);
    fl::BwdReference ref(pr, cublas);
    const fl::BwdVerdict v = fl::verify_backward(k, pr, ref);
    EXPECT_TRUE(v.passed) << k.name() << " " << c.name << " (" << c.spec.describe()
                          << "): " << v.why;
  }
  // At least the ladder's minimum: fp16 and bf16 MHA, d = 128, 1024 x 1024, non-causal.
  EXPECT_GE(claimed, 2) << k.name();
  std::printf("%s: %d of %zu shapes of the grid claimed\n", k.name().c_str(), claimed,
              fa2_grid().size());
}

TEST_P(BackwardKernel, DetectsAWrongAnswer) {
  // verify_backward given the reference of another problem (another seed) must fail.
  FL_REQUIRE_GPU();
  const fl::KernelInfo& k = *GetParam();
  fl::CublasHandle cublas;
  fl::ProblemSpec s = bwd_spec(fl::DType::f16, 1, 2, 2, 1024, 1024, 128, false, 51);
  fl::BwdProblem pr(s, cublas);
  s.seed += 1;
  fl::BwdProblem other(s, cublas);
  fl::BwdReference wrong(other, cublas);
  EXPECT_FALSE(fl::verify_backward(k, pr, wrong).passed) << k.name();
}

// Seeded random problems (tests/fuzz_shapes.h: B, H_q, H_kv, Nq, Nk, d, causal, dtype, layout,
// scale; lengths snapped to 64 half the time, the tile of rungs 29 and 30), FL_FUZZ_CASES of
// them a rung (the forward fuzz test's variables: FL_FUZZ_SEED, FL_FUZZ_CASES, FL_FUZZ_ONLY),
// each claimed by the rung and then held to verify_backward. A draw the rung refuses is drawn
// again, so that a rung cannot pass by refusing everything.
TEST_P(BackwardKernel, MatchesTheReferenceOnRandomShapes) {
  FL_REQUIRE_GPU();
  const fl::KernelInfo& k = *GetParam();
  const auto env = fl::fuzz::env_u64;
  const uint64_t seed = env("FL_FUZZ_SEED", fl::fuzz::kDefaultSeed);
  const bool only_one = std::getenv("FL_FUZZ_ONLY") != nullptr;
  const uint64_t first = only_one ? env("FL_FUZZ_ONLY", 0) : 0;
  const uint64_t end = only_one ? first + 1 : env("FL_FUZZ_CASES", fl::fuzz::kDefaultCases);
  const fl::fuzz::TileOf tile_of = [](const fl::ProblemSpec&) { return fl::TileShape{64, 64}; };
  fl::CublasHandle cublas;
  uint64_t checked = 0;
  for (uint64_t i = first; i < end; ++i) {
    // Backward rungs draw from streams of their own (number + 1000): not the forward's cases.
    std::mt19937_64 rng = fl::fuzz::case_rng(seed, k.number + 1000, i);
    fl::ProblemSpec spec;
    bool claimed = false;
    for (int draw = 0; draw < fl::fuzz::kMaxDraws && !claimed; ++draw) {
      spec = fl::fuzz::draw_spec(rng, tile_of);
      spec.with_lse = true;
      claimed = fl::why_unsupported_backward(k, fl::placeholder_bwd_params(spec, k)).empty();
    }
    std::ostringstream where;
    where << k.name() << ", seed " << seed << ", case " << i << " ("
          << fl::fuzz::describe_case(spec) << "); rerun alone: FL_FUZZ_SEED=" << seed
          << " FL_FUZZ_ONLY=" << i
          << " build/tests/test_backward --gtest_filter='*MatchesTheReferenceOnRandomShapes/k"
          << k.name() << "'";
    ASSERT_TRUE(claimed) << "refused " << fl::fuzz::kMaxDraws << " draws in a row: " << where.str();
    fl::BwdProblem pr(spec, cublas);
    fl::BwdReference ref(pr, cublas);
    const fl::BwdVerdict v = fl::verify_backward(k, pr, ref);
    std::printf("[fuzz] %s case %llu: %s: %s\n", k.name().c_str(),
                static_cast<unsigned long long>(i), fl::fuzz::describe_case(spec).c_str(),
                v.passed ? "pass" : "FAIL");
    EXPECT_TRUE(v.passed) << v.why << " " << where.str();
    ++checked;
  }
  EXPECT_EQ(checked, end - first) << k.name() << " did not get its full count of cases";
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackwardKernel);
INSTANTIATE_TEST_SUITE_P(Ladder, BackwardKernel, ::testing::ValuesIn(fl::backward_kernels()),
                         [](const ::testing::TestParamInfo<const fl::KernelInfo*>& info) {
                           return "k" + info.param->name();
                         });

// ---------------------------------------------------------------------------------------------
// The rules of the backward's calls (CPU).
// ---------------------------------------------------------------------------------------------

// A well-formed backward call of this shape on placeholder pointers, no workspace.
fl::BwdParams placeholder_call(const fl::ProblemSpec& spec) {
  fl::ProblemSpec s = spec;
  s.with_lse = true;
  fl::BwdParams b = fl::make_bwd_params(fl::placeholder_params(s));
  b.dout = reinterpret_cast<void*>(0x6000);
  b.dq = reinterpret_cast<void*>(0x7000);
  b.dk = reinterpret_cast<void*>(0x8000);
  b.dv = reinterpret_cast<void*>(0x9000);
  return b;
}

fl::ProblemSpec ladder_minimum(fl::DType t) {
  return bwd_spec(t, 1, 2, 2, 1024, 1024, 128, false, 1);
}

TEST(BackwardRules, CheckBackward) {
  const fl::BwdParams good = placeholder_call(ladder_minimum(fl::DType::f16));
  ASSERT_EQ(fl::check_backward(good), "");
  const struct {
    const char* rule;
    void (*breaks)(fl::BwdParams&);
  } cases[] = {
      {"dO is a null pointer", [](fl::BwdParams& b) { b.dout = nullptr; }},
      {"dQ is a null pointer", [](fl::BwdParams& b) { b.dq = nullptr; }},
      {"dK is a null pointer", [](fl::BwdParams& b) { b.dk = nullptr; }},
      {"dV is a null pointer", [](fl::BwdParams& b) { b.dv = nullptr; }},
      {"dQ must be 16-byte aligned",
       [](fl::BwdParams& b) { b.dq = reinterpret_cast<void*>(0x7002); }},
      {"dV strides must be multiples of 8 elements",
       [](fl::BwdParams& b) { b.dv_stride.row = b.fwd.head_dim + 1; }},
      {"dK's head-dimension stride must be 1", [](fl::BwdParams& b) { b.dk_stride.dim = 2; }},
      {"LSE is required", [](fl::BwdParams& b) { b.fwd.lse = nullptr; }},
      {"Q is a null pointer", [](fl::BwdParams& b) { b.fwd.q = nullptr; }},
      {"workspace is a null pointer but workspace_bytes is 64",
       [](fl::BwdParams& b) { b.workspace_bytes = 64; }},
      {"workspace_bytes must be >= 0", [](fl::BwdParams& b) { b.workspace_bytes = -1; }},
      {"workspace must be 256-byte aligned",
       [](fl::BwdParams& b) {
         b.workspace = reinterpret_cast<void*>(0x10010);
         b.workspace_bytes = 64;
       }},
  };
  for (const auto& c : cases) {
    fl::BwdParams b = good;
    c.breaks(b);
    const std::string why = fl::check_backward(b);
    EXPECT_NE(why.find(c.rule), std::string::npos) << "expected \"" << c.rule << "\", got \""
                                                    << why << "\"";
  }
  // e4m3 inputs (well formed for the forward, descale factors and all) are refused.
  fl::ProblemSpec e4m3 = ladder_minimum(fl::DType::f16);
  e4m3.dtype = fl::DType::e4m3;
  const fl::BwdParams b8 = placeholder_call(e4m3);
  ASSERT_EQ(fl::check_common(b8.fwd), "");
  EXPECT_EQ(fl::check_backward(b8), "the backward takes fp16 and bf16 inputs (got e4m3)");
  // bf16 takes the same rules as fp16.
  EXPECT_EQ(fl::check_backward(placeholder_call(ladder_minimum(fl::DType::bf16))), "");
}

// Every backward rung of the build and a stand-in (so that the rules are tested with no rung).
std::vector<fl::KernelInfo> backward_rungs_and_stand_in() {
  std::vector<fl::KernelInfo> out;
  for (const fl::KernelInfo* k : fl::backward_kernels()) out.push_back(*k);
  fl::KernelInfo s = stand_in_kernel();
  s.workspace = [](const fl::AttnParams& p) { return 4 * p.seqlen_q * p.head_dim; };
  out.push_back(s);
  return out;
}

TEST(BackwardRules, TheWorkspaceMustHoldWhatTheKernelAsks) {
  for (const fl::KernelInfo& k : backward_rungs_and_stand_in()) {
    for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
      SCOPED_TRACE(k.name() + " " + fl::to_string(t));
      fl::BwdParams b = fl::placeholder_bwd_params(ladder_minimum(t), k);
      const int64_t need = fl::workspace_bytes(k, b.fwd);
      EXPECT_EQ(b.workspace_bytes, need);
      EXPECT_EQ(fl::why_unsupported_backward(k, b), "") << "the ladder's minimum shape";
      if (need == 0) continue;
      b.workspace_bytes = need - 1;
      const std::string why = fl::why_unsupported_backward(k, b);
      EXPECT_EQ(why, "kernel " + k.name() + ": the workspace holds " + std::to_string(need - 1) +
                         " bytes; this shape needs " + std::to_string(need) +
                         " (workspace_bytes)");
      b.workspace = nullptr;
      b.workspace_bytes = 0;
      EXPECT_NE(fl::why_unsupported_backward(k, b).find("this shape needs " +
                                                        std::to_string(need)),
                std::string::npos);
      EXPECT_THROW(fl::run_backward(k, b), fl::UnsupportedError);
    }
  }
}

TEST(BackwardRules, EachOpRefusesTheOther) {
  const fl::ProblemSpec spec = ladder_minimum(fl::DType::f16);
  // A forward rung refuses the backward.
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    const fl::BwdParams b = placeholder_call(spec);
    EXPECT_EQ(fl::why_unsupported_backward(*k, b),
              "kernel " + k->name() +
                  ": is a forward rung (it computes O): the backward needs a backward rung");
    EXPECT_THROW(fl::run_backward(*k, b), fl::UnsupportedError);
  }
  // A backward rung refuses the forward (why_unsupported, run_kernel).
  for (const fl::KernelInfo& k : backward_rungs_and_stand_in()) {
    const fl::AttnParams p = fl::placeholder_params(spec);
    const std::string why = fl::why_unsupported(k, p);
    EXPECT_EQ(why, "kernel " + k.name() +
                       ": is a backward rung (it computes dQ, dK, dV): call it through "
                       "run_backward");
    try {
      fl::run_kernel(k, p);
      ADD_FAILURE() << k.name() << " took a forward call";
    } catch (const fl::UnsupportedError& e) {
      EXPECT_EQ(std::string(e.what()), why);
    }
  }
}

TEST(BackwardRules, EveryBackwardRungIsARungOfItsTrack) {
  // The registry's contract for a backward rung: the backward's three entry points, none of
  // the forward's; built for sm_80 and up (not sm_90a alone) when FL_SM80_LATE_RUNGS lists
  // it (tests/CMakeLists.txt passes the list; it holds the serving track's rungs too).
  std::vector<int> sm80_backward;  // FL_SM80_LATE_RUNGS: "29 30 31 32 37 38 39"
  std::istringstream list(FL_SM80_LATE_RUNGS);
  for (int n; list >> n;) sm80_backward.push_back(n);
  EXPECT_FALSE(sm80_backward.empty()) << "FL_SM80_LATE_RUNGS: \"" << FL_SM80_LATE_RUNGS << "\"";
  for (const fl::KernelInfo* k : fl::backward_kernels()) {
    EXPECT_EQ(k->op, fl::Op::backward);
    EXPECT_NE(k->supports_backward, nullptr) << k->name();
    EXPECT_NE(k->launch_backward, nullptr) << k->name();
    EXPECT_NE(k->workspace, nullptr) << k->name();
    EXPECT_EQ(k->supports, nullptr) << k->name();
    EXPECT_EQ(k->launch, nullptr) << k->name();
    EXPECT_EQ(k->tile, nullptr) << k->name();
    EXPECT_FALSE(k->fp8_inputs) << k->name();
    if (std::find(sm80_backward.begin(), sm80_backward.end(), k->number) !=
        sm80_backward.end()) {
      EXPECT_EQ(k->min_sm, 80) << k->name();
      EXPECT_EQ(k->max_sm, 0) << k->name();
    }
  }
  for (const fl::KernelInfo* k : fl::forward_kernels()) EXPECT_EQ(k->op, fl::Op::forward);
  EXPECT_EQ(fl::forward_kernels().size() + fl::backward_kernels().size(),
            fl::all_kernels().size());
}

TEST(BackwardRules, EveryBackwardRungClaimsTheLadderMinimum) {
  // Rung 29's contract is every backward rung's least: fp16 and bf16, MHA, d = 128,
  // Nq = Nk = 1024, not causal.
  for (const fl::KernelInfo* k : fl::backward_kernels()) {
    for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
      EXPECT_EQ(fl::why_unsupported_backward(*k, fl::placeholder_bwd_params(ladder_minimum(t), *k)),
                "")
          << fl::to_string(t);
    }
  }
}

TEST(BackwardRules, RefusalsOfTheGridNameTheKernel) {
  // The GPU test runs every shape of the grid a rung claims; here, without a GPU, every shape
  // it refuses is refused by a message that starts with the rung's name.
  for (const fl::KernelInfo* k : fl::backward_kernels()) {
    int refused = 0;
    for (const GridCase& c : fa2_grid()) {
      const std::string why =
          fl::why_unsupported_backward(*k, fl::placeholder_bwd_params(c.spec, *k));
      if (why.empty()) continue;
      ++refused;
      EXPECT_EQ(why.rfind("kernel " + k->name() + ": ", 0), 0u) << c.name << ": " << why;
      EXPECT_GT(why.size(), ("kernel " + k->name() + ": ").size()) << c.name;
    }
    std::printf("%s refuses %d of %zu shapes of the grid\n", k->name().c_str(), refused,
                fa2_grid().size());
  }
}

TEST(BackwardRules, BestIsTheHighestRungThatTakesTheCallHopperTrackFirst) {
  using fl::DType;
  const fl::ProblemSpec shapes[] = {
      ladder_minimum(DType::f16), ladder_minimum(DType::bf16),
      bwd_spec(DType::f16, 1, 2, 2, 1024, 1024, 64, true, 1),
      bwd_spec(DType::bf16, 2, 6, 2, 113, 203, 128, false, 1),
      bwd_spec(DType::f16, 1, 4, 1, 1024, 1023, 64, true, 1),
      bwd_spec(DType::f16, 1, 2, 2, 256, 256, 256, false, 1)};
  for (const fl::ProblemSpec& s : shapes) {
    SCOPED_TRACE(s.describe());
    const fl::KernelInfo* expected = nullptr;
    // Sorted: the last one that takes the call wins, a Hopper rung (compute capability 9.0)
    // over any mma.sync rung.
    for (const fl::KernelInfo* k : fl::backward_kernels()) {
      if (fl::why_unsupported_backward(*k, fl::placeholder_bwd_params(s, *k)).empty() &&
          (expected == nullptr || k->min_sm >= 90 || expected->min_sm < 90)) {
        expected = k;
      }
    }
    // Whether or not the caller has a workspace yet: best does not judge its size.
    fl::BwdParams none = placeholder_call(s);
    fl::BwdParams sized = none;
    sized.workspace = reinterpret_cast<void*>(0x10000);
    sized.workspace_bytes = 1;
    for (const fl::BwdParams* b : {&none, &sized}) {
      std::string why;
      const fl::KernelInfo* best = fl::best_backward_kernel(*b, &why);
      EXPECT_EQ(best, expected) << "got " << (best ? best->name() : "none") << ", expected "
                                << (expected ? expected->name() : "none") << "; " << why;
      if (best != nullptr) EXPECT_EQ(best->op, fl::Op::backward);
      if (expected == nullptr) {
        EXPECT_EQ(why.rfind("no backward kernel of this build supports this call:", 0), 0u)
            << why;
        for (const fl::KernelInfo* k : fl::backward_kernels()) {
          EXPECT_NE(why.find("\n  kernel " + k->name() + ": "), std::string::npos) << why;
        }
      }
    }
  }
  // Every rung's reason when none takes the call; never a forward rung's.
  fl::BwdParams bad = placeholder_call(ladder_minimum(DType::f16));
  bad.fwd.heads_q = 3;  // not a multiple of H_kv = 2
  std::string why;
  EXPECT_EQ(fl::best_backward_kernel(bad, &why), nullptr);
  EXPECT_EQ(why.rfind("no backward kernel of this build supports this call:", 0), 0u) << why;
  for (const fl::KernelInfo* k : fl::backward_kernels()) {
    EXPECT_NE(why.find("kernel " + k->name() + ": H_q (3) must be a multiple of H_kv (2)"),
              std::string::npos)
        << why;
  }
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    EXPECT_EQ(why.find("kernel " + k->name() + ":"), std::string::npos) << why;
  }
}

}  // namespace
