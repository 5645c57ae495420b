// Seeded fuzzing of every registered kernel against the reference (GPU; skipped without one).
//
// For each kernel, FL_FUZZ_CASES random problems (tests/fuzz_shapes.h: B, H_q, H_kv, Nq, Nk, d,
// causal, dtype, layout, LSE, scale; for a kernel with fp8_inputs, e4m3 inputs with the drawn
// dtype as O's and descale factors per tensor or per head) that the kernel claims, each through fl::verify: the same
// checks as test_kernels.cu (pass rule against the fp32 reference, every output finite, LSE,
// two runs bitwise equal). A draw the kernel refuses is drawn again, so every kernel gets its
// full count of cases and the test cannot pass by refusing everything.
//
// Environment:
//   FL_FUZZ_SEED=S    seed (default fuzz::kDefaultSeed)
//   FL_FUZZ_CASES=N   cases per kernel (default fuzz::kDefaultCases: the ctest budget)
//   FL_FUZZ_ONLY=I    run case I alone, whatever FL_FUZZ_CASES is (a failure prints the command)
// scripts/fuzz.sh is the long run (many cases, several seeds) for the GPU machine.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>

#include "common/harness.h"
#include "common/registry.h"
#include "fuzz_shapes.h"
#include "gpu_test_util.h"

namespace {

class FuzzTest : public ::testing::TestWithParam<const fl::KernelInfo*> {};

TEST_P(FuzzTest, MatchesTheReferenceOnRandomShapes) {
  FL_REQUIRE_GPU();
  const fl::KernelInfo& k = *GetParam();
  ASSERT_NE(k.tile, nullptr) << k.name();
  const uint64_t seed = fl::fuzz::env_u64("FL_FUZZ_SEED", fl::fuzz::kDefaultSeed);
  const uint64_t cases = fl::fuzz::env_u64("FL_FUZZ_CASES", fl::fuzz::kDefaultCases);
  ASSERT_GE(cases, 1u) << "FL_FUZZ_CASES must be >= 1";
  // Cases [first, end): all of them, or the one FL_FUZZ_ONLY names (each case is drawn from its
  // own stream, so it does not depend on FL_FUZZ_CASES).
  const bool only_one = std::getenv("FL_FUZZ_ONLY") != nullptr;
  const uint64_t first = only_one ? fl::fuzz::env_u64("FL_FUZZ_ONLY", 0) : 0;
  const uint64_t end = only_one ? first + 1 : cases;

  // A kernel with fp8_inputs gets each draw in e4m3 (fl::fuzz::as_e4m3, O in the drawn type).
  const auto in_type = [&](const fl::ProblemSpec& s) {
    return k.fp8_inputs ? fl::fuzz::as_e4m3(s) : s;
  };
  const fl::fuzz::TileOf tile_of = [&](const fl::ProblemSpec& s) {
    return k.tile(fl::fuzz::shape_params(in_type(s)));
  };
  fl::CublasHandle cublas;
  uint64_t checked = 0;  // cases claimed and run through verify
  for (uint64_t i = first; i < end; ++i) {
    std::mt19937_64 rng = fl::fuzz::case_rng(seed, k.number, i);
    fl::ProblemSpec spec;
    bool claimed = false;
    for (int draw = 0; draw < fl::fuzz::kMaxDraws && !claimed; ++draw) {
      spec = in_type(fl::fuzz::draw_spec(rng, tile_of));
      claimed = fl::why_unsupported(k, fl::fuzz::shape_params(spec)).empty();
    }
    std::ostringstream where;
    where << k.name() << ", seed " << seed << ", case " << i << " (" << fl::fuzz::describe_case(spec)
          << "); rerun alone: FL_FUZZ_SEED=" << seed << " FL_FUZZ_ONLY=" << i
          << " build/tests/test_gpu --gtest_filter='*FuzzTest*/k" << k.name() << "'";
    if (!claimed) {
      ADD_FAILURE() << "refused " << fl::fuzz::kMaxDraws << " draws in a row: " << where.str();
      continue;
    }
    try {
      fl::Problem problem(spec);
      // shape_params() stood in for this Problem when the claim was decided; they must agree.
      ASSERT_EQ(fl::why_unsupported(k, problem.params_for(k)), "") << where.str();
      fl::Reference ref(problem, cublas);
      const fl::Verdict v = fl::verify(k, problem, ref);
      std::printf("[fuzz] %s case %llu: %s: %s (max err %.3g, tolerance %.3g)\n",
                  k.name().c_str(), static_cast<unsigned long long>(i),
                  fl::fuzz::describe_case(spec).c_str(), v.passed ? "pass" : "FAIL",
                  v.out.max_abs_err, v.tolerance);
      EXPECT_TRUE(v.passed) << v.why << " [max err " << v.out.max_abs_err << ", tolerance "
                            << v.tolerance << "] " << where.str();
      ++checked;
    } catch (const std::exception& e) {
      // A CUDA error (an illegal address, say) poisons the context: report the case and stop.
      FAIL() << e.what() << ": " << where.str();
    }
  }
  EXPECT_EQ(checked, end - first) << k.name() << " did not get its full count of cases";
}

INSTANTIATE_TEST_SUITE_P(Ladder, FuzzTest, ::testing::ValuesIn(fl::forward_kernels()),
                         [](const ::testing::TestParamInfo<const fl::KernelInfo*>& info) {
                           return "k" + info.param->name();
                         });

}  // namespace
