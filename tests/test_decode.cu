// The serving track's decode rung (37, decode_gqa): a few query rows a sequence against a long
// K/V cache, the g = H_q / H_kv query heads of a KV head packed into the rows of one tile.
//
//   DecodeRules.*       (CPU) the rule that keeps prefill off the rung (Nq x g <= 64), its head
//                       dims and grid limits, each refused before any launch with a message
//                       naming the rung and the rule; every shape of the grid below claimed or
//                       refused exactly by that rule; "best" sends decode calls to a serving
//                       rung and prefill calls to the rungs before it
//   Decode.*            (GPU) the grid: Nq in {1, 2, 4, 16} x Nk in {1, 7, 64, 100, 1000, 4096,
//                       33000} x H_q / H_kv in {32/8, 8/8, 16/1, 6/2} x causal or not x B in
//                       {1, 3}, for each of fp16/bf16 x d = 64/128 x both layouts, every claimed
//                       shape through fl::verify (the pass rule against the fp32 reference, all
//                       of O written and finite, the LSE, two runs bitwise equal); large
//                       magnitudes; a NaN in Q, K or V reaches exactly the outputs that read it
//                       (a wrong packing, a head or position mixed up, breaks these)
//   DecodeLargeShape.*  (GPU, alone) a K/V cache of more than 2^31 elements
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/harness.h"
#include "common/registry.h"
#include "gpu_test_util.h"

namespace {

constexpr int64_t kNq[] = {1, 2, 4, 16};
constexpr int64_t kNk[] = {1, 7, 64, 100, 1000, 4096, 33000};
constexpr int64_t kHeads[][2] = {{32, 8}, {8, 8}, {16, 1}, {6, 2}};  // H_q, H_kv
constexpr int64_t kBatches[] = {1, 3};
constexpr int64_t kMaxRows = 64;  // rows of rung 37's packed tile

// Rung 37 from the list of forward rungs (the list lives in the kernels' library: reading it
// here is what links that library's objects into this test).
const fl::KernelInfo* decode_rung() {
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    if (k->number == 37) return k;
  }
  return nullptr;
}

#define REQUIRE_DECODE_RUNG(k)                                                  \
  const fl::KernelInfo* k = decode_rung();                                      \
  if (k == nullptr) GTEST_SKIP() << "rung 37 is not in this build (FL_KERNELS)"

// A decode problem: the LSE written for B = 1 (the output is optional: B = 3 runs without it).
fl::ProblemSpec decode_spec(fl::DType t, int64_t b, int64_t hq, int64_t hkv, int64_t nq,
                            int64_t nk, int64_t d, bool causal, fl::Layout layout) {
  fl::ProblemSpec s = fl::test::shape_spec(t, b, hq, hkv, nq, nk, d, causal, layout,
                                           1000 * nq + 7 * nk + hq + d + (causal ? 1 : 0));
  s.with_lse = b == 1;
  return s;
}

bool in_contract(int64_t nq, int64_t hq, int64_t hkv) { return nq * (hq / hkv) <= kMaxRows; }

// The rule's message, as the rung states it.
const char kRowsRule[] = "Nq x H_q / H_kv must be <= 64, the rows of one packed tile";

// ---------------------------------------------------------------------------------------------
// CPU: the rules, before any launch
// ---------------------------------------------------------------------------------------------

TEST(DecodeRules, TheGridIsClaimedExactlyByTheRowsRule) {
  REQUIRE_DECODE_RUNG(k);
  int claimed = 0, refused = 0;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (int64_t d : {64, 128}) {
      for (fl::Layout layout : {fl::Layout::BHND, fl::Layout::BNHD}) {
        for (int64_t nq : kNq) {
          for (int64_t nk : kNk) {
            for (const auto& h : kHeads) {
              for (bool causal : {false, true}) {
                const fl::ProblemSpec s = decode_spec(t, 3, h[0], h[1], nq, nk, d, causal, layout);
                const std::string why = fl::why_unsupported(*k, fl::placeholder_params(s));
                if (in_contract(nq, h[0], h[1])) {
                  EXPECT_EQ(why, "") << s.describe();
                  ++claimed;
                } else {
                  EXPECT_EQ(why.rfind("kernel 37_decode_gqa: " + std::string(kRowsRule), 0), 0u)
                      << s.describe() << ": " << why;
                  ++refused;
                }
              }
            }
          }
        }
      }
    }
  }
  // 16 query heads over 1 at Nq = 16 (256 rows) is the one refused kind of the grid.
  EXPECT_EQ(refused, 2 * 2 * 2 * 7 * 2);
  EXPECT_EQ(claimed, 2 * 2 * 2 * (4 * 7 * 4 - 7) * 2);
}

TEST(DecodeRules, RefusalsNameTheRungAndTheRule) {
  REQUIRE_DECODE_RUNG(k);
  struct Bad {
    const char* name;
    int64_t b, hq, hkv, nq, nk, d;
    std::string rule;
  };
  const Bad cases[] = {
      {"Nq 65 (a prefill)", 1, 1, 1, 65, 1000, 128, kRowsRule},
      {"Nq 17 x g 4 = 68 rows", 1, 32, 8, 17, 1000, 128, kRowsRule},
      {"Nq 5 x g 16 = 80 rows", 1, 16, 1, 5, 1000, 64, kRowsRule},
      {"g 65 (MQA, 65 query heads)", 1, 65, 1, 1, 1000, 128, kRowsRule},
      {"Nq 1024 (the ladder's prefill)", 1, 2, 2, 1024, 1024, 128, kRowsRule},
      {"d 256", 1, 8, 8, 1, 1000, 256, "head_dim must be 64 or 128 (got 256)"},
      {"d 32", 1, 8, 8, 1, 1000, 32, "head_dim must be 64 or 128 (got 32)"},
      {"B 65536", 65536, 8, 8, 1, 64, 128, "B must be <= 65535"},
      {"Nk 2^30 + 1", 1, 8, 8, 1, (int64_t{1} << 30) + 1, 128, "Nk must be <= 2^30"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.name);
    const fl::ProblemSpec s =
        decode_spec(fl::DType::f16, c.b, c.hq, c.hkv, c.nq, c.nk, c.d, false, fl::Layout::BHND);
    const fl::AttnParams p = fl::placeholder_params(s);
    ASSERT_EQ(fl::check_common(p), "") << "each case breaks the rung's own rule alone";
    const std::string why = fl::why_unsupported(*k, p);
    EXPECT_EQ(why.rfind("kernel 37_decode_gqa: " + c.rule, 0), 0u) << why;
    try {
      fl::run_kernel(*k, p);  // refused before the launch: no GPU needed
      ADD_FAILURE() << "run_kernel took " << c.name;
    } catch (const fl::UnsupportedError& e) {
      EXPECT_EQ(std::string(e.what()), why);
    }
  }
}

TEST(DecodeRules, TheEdgesOfTheRuleAreClaimed) {
  // 64 rows exactly, in each way of making them, and the least call.
  REQUIRE_DECODE_RUNG(k);
  const int64_t shapes[][3] = {{64, 1, 1}, {1, 64, 1}, {16, 32, 8}, {4, 16, 1}, {1, 1, 1}};
  for (const auto& sh : shapes) {
    for (bool causal : {false, true}) {
      const fl::ProblemSpec s = decode_spec(fl::DType::bf16, 1, sh[1], sh[2], sh[0], 5, 128,
                                            causal, fl::Layout::BNHD);
      EXPECT_EQ(fl::why_unsupported(*k, fl::placeholder_params(s)), "") << s.describe();
    }
  }
}

TEST(DecodeRules, BestSendsDecodeHereAndPrefillElsewhere) {
  // "best" is the highest rung that takes a call: a decode call goes to a serving rung (37 or a
  // later one), a prefill call (more rows than one tile) to a rung before the serving track.
  REQUIRE_DECODE_RUNG(k);
  (void)k;
  const fl::ProblemSpec decode =
      decode_spec(fl::DType::f16, 1, 32, 8, 1, 4096, 128, true, fl::Layout::BNHD);
  const fl::KernelInfo* best = fl::best_kernel(fl::placeholder_params(decode));
  ASSERT_NE(best, nullptr);
  EXPECT_GE(best->number, FL_SERVING_FIRST_RUNG) << best->name();
  const fl::ProblemSpec prefill =
      decode_spec(fl::DType::f16, 1, 32, 8, 512, 4096, 128, true, fl::Layout::BNHD);
  best = fl::best_kernel(fl::placeholder_params(prefill));
  ASSERT_NE(best, nullptr);
  EXPECT_LT(best->number, FL_SERVING_FIRST_RUNG) << best->name();
}

TEST(DecodeRules, TileIsTheRowsTheBlockComputes) {
  // Nq x g rounded up to whole warps of 16 rows (the padding warps skip the math); 64 keys.
  REQUIRE_DECODE_RUNG(k);
  const int64_t shapes[][4] = {// Nq, H_q, H_kv, rows
                               {1, 8, 8, 16},  {1, 32, 8, 16}, {4, 32, 8, 16}, {5, 32, 8, 32},
                               {16, 6, 2, 48}, {2, 16, 1, 32}, {16, 32, 8, 64}};
  for (const auto& sh : shapes) {
    const fl::ProblemSpec s =
        decode_spec(fl::DType::f16, 1, sh[1], sh[2], sh[0], 100, 128, false, fl::Layout::BHND);
    const fl::TileShape tile = k->tile(fl::placeholder_params(s));
    EXPECT_EQ(tile.br, sh[3]) << s.describe();
    EXPECT_EQ(tile.bc, 64) << s.describe();
  }
}

// ---------------------------------------------------------------------------------------------
// GPU: the grid against the reference
// ---------------------------------------------------------------------------------------------

class Decode : public ::testing::TestWithParam<std::tuple<fl::DType, int64_t, fl::Layout>> {};

TEST_P(Decode, PassesTheGrid) {
  FL_REQUIRE_GPU();
  REQUIRE_DECODE_RUNG(k);
  const auto [t, d, layout] = GetParam();
  fl::CublasHandle cublas;
  int ran = 0;
  for (int64_t nq : kNq) {
    for (int64_t nk : kNk) {
      for (const auto& h : kHeads) {
        if (!in_contract(nq, h[0], h[1])) continue;  // DecodeRules checks the refusal
        for (bool causal : {false, true}) {
          for (int64_t b : kBatches) {
            const fl::ProblemSpec s = decode_spec(t, b, h[0], h[1], nq, nk, d, causal, layout);
            fl::Problem problem(s);
            const std::string why = fl::why_unsupported(*k, problem.params());
            if (why.find("shared memory") != std::string::npos) {
              GTEST_SKIP() << why;  // a GPU with less than 144 KiB a block (d = 128)
            }
            ASSERT_EQ(why, "") << s.describe();
            const fl::Reference ref(problem, cublas);
            const fl::Verdict v = fl::verify(*k, problem, ref);
            EXPECT_TRUE(v.passed) << s.describe() << (s.with_lse ? " lse" : "") << ": " << v.why
                                  << " [max err " << v.out.max_abs_err << ", tolerance "
                                  << v.tolerance << "]";
            ++ran;
          }
        }
      }
    }
  }
  EXPECT_EQ(ran, (4 * 7 * 4 - 7) * 2 * 2);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, Decode,
    ::testing::Combine(::testing::Values(fl::DType::f16, fl::DType::bf16),
                       ::testing::Values(int64_t{64}, int64_t{128}),
                       ::testing::Values(fl::Layout::BHND, fl::Layout::BNHD)),
    [](const ::testing::TestParamInfo<Decode::ParamType>& info) {
      return std::string(fl::to_string(std::get<0>(info.param))) + "_d" +
             std::to_string(std::get<1>(info.param)) +
             (std::get<2>(info.param) == fl::Layout::BHND ? "_bhnd" : "_bnhd");
    });

TEST(DecodeNumerics, LargeMagnitude) {
  // Scores of tens to hundreds (inputs of std 8 in fp16, 20 in bf16, as test_kernels.cu's large
  // case): a sharp softmax whose max moves from tile to tile.
  FL_REQUIRE_GPU();
  REQUIRE_DECODE_RUNG(k);
  fl::CublasHandle cublas;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (bool causal : {false, true}) {
      fl::ProblemSpec s = decode_spec(t, 2, 32, 8, 4, 1000, 128, causal, fl::Layout::BNHD);
      s.input_std = t == fl::DType::f16 ? 8.0f : 20.0f;
      s.with_lse = true;
      fl::Problem problem(s);
      const fl::Reference ref(problem, cublas);
      const fl::Verdict v = fl::verify(*k, problem, ref);
      EXPECT_TRUE(v.passed) << s.describe() << ": " << v.why << " [max err "
                            << v.out.max_abs_err << ", tolerance " << v.tolerance << "]";
    }
  }
}

// A NaN in an input reaches exactly the outputs that read it (as tests/test_numerics.cu states
// it for the prefill rungs): Q[h, s, c] NaN makes row (h, s) NaN (O and LSE); K[hk, j, c] NaN
// every row of the g query heads of KV head hk (O and LSE); V[hk, j, c] NaN column c of those
// rows (the LSE untouched). Every other output equals the clean run bitwise: the rows of a tile
// never mix, so a head or a position read from the wrong place shows here.
TEST(DecodeNumerics, NaNReachesExactlyTheOutputsThatReadIt) {
  FL_REQUIRE_GPU();
  REQUIRE_DECODE_RUNG(k);
  constexpr int64_t kHq = 12, kHkv = 4, kG = kHq / kHkv, kNqN = 5, kNkN = 300, kD = 64;
  struct NanCase {
    const char* name;
    int which;  // 0 Q, 1 K, 2 V
    int64_t head, row, col;
  };
  const NanCase nan_cases[] = {{"Q[h=7, s=3, c=5]", 0, 7, 3, 5},
                               {"K[hk=2, j=150, c=33]", 1, 2, 150, 33},
                               {"V[hk=1, j=299, c=60]", 2, 1, 299, 60}};
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    const fl::ProblemSpec s =
        decode_spec(t, 1, kHq, kHkv, kNqN, kNkN, kD, false, fl::Layout::BHND);
    fl::Problem problem(s);
    fl::test::Rng r(5000 + static_cast<uint64_t>(t));
    std::vector<float> q(kHq * kNqN * kD), kk(kHkv * kNkN * kD), v(kHkv * kNkN * kD);
    for (auto* x : {&q, &kk, &v}) {
      for (float& e : *x) e = fl::test::round_16(t, r.normal());
    }
    auto run = [&](const std::vector<float>& qi, const std::vector<float>& ki,
                   const std::vector<float>& vi, std::vector<float>& o, std::vector<float>& lse) {
      problem.set_inputs(qi.data(), ki.data(), vi.data());
      problem.poison_output();
      fl::run_kernel(*k, problem.params());
      FL_CUDA_CHECK(cudaDeviceSynchronize());
      o = problem.output_host();
      lse.resize(kHq * kNqN);
      FL_CUDA_CHECK(cudaMemcpy(lse.data(), problem.lse.get(), lse.size() * 4,
                               cudaMemcpyDeviceToHost));
    };
    std::vector<float> o0, lse0;
    run(q, kk, v, o0, lse0);
    for (const NanCase& c : nan_cases) {
      SCOPED_TRACE(std::string(fl::to_string(t)) + " NaN in " + c.name);
      std::vector<float> qb = q, kb = kk, vb = v;
      std::vector<float>& x = c.which == 0 ? qb : c.which == 1 ? kb : vb;
      const int64_t rows = c.which == 0 ? kNqN : kNkN;
      x[(c.head * rows + c.row) * kD + c.col] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> o, lse;
      run(qb, kb, vb, o, lse);
      int64_t wrong = 0;
      for (int64_t h = 0; h < kHq; ++h) {
        for (int64_t i = 0; i < kNqN; ++i) {
          const int64_t row = h * kNqN + i;
          const bool group = c.which != 0 && h / kG == c.head;
          const bool nan_row = (c.which == 0 && h == c.head && i == c.row) ||
                               (c.which == 1 && group);
          const bool lse_ok = nan_row ? std::isnan(lse[row])
                                      : std::memcmp(&lse[row], &lse0[row], 4) == 0;
          if (!lse_ok && ++wrong <= 5) ADD_FAILURE() << "LSE h=" << h << " s=" << i;
          for (int64_t col = 0; col < kD; ++col) {
            const float a = o[row * kD + col], a0 = o0[row * kD + col];
            const bool nan_out = nan_row || (c.which == 2 && group && col == c.col);
            const bool ok = nan_out ? std::isnan(a) : std::memcmp(&a, &a0, 4) == 0;
            if (!ok && ++wrong <= 5) {
              ADD_FAILURE() << "O h=" << h << " s=" << i << " c=" << col << " = " << a
                            << ", clean " << a0 << (nan_out ? ", want NaN" : "");
            }
          }
        }
      }
      EXPECT_EQ(wrong, 0);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// GPU, alone: a K/V cache of more than 2^31 elements
// ---------------------------------------------------------------------------------------------

TEST(DecodeLargeShape, IndexesACachePast2To31Elements) {
  // B = 1, 32 query heads over 8 KV heads, one query, Nk = 2^21 + 71 keys at d = 128:
  // 8 x 2,097,223 x 128 = 2,147,556,352 elements in K and in V, just past 2^31, so that the
  // last keys of the last KV head sit at offsets a 32-bit index would wrap. Causal (the one
  // query sees every key) with the LSE. About 8.6 GB for K and V, 0.5 GB for the reference's
  // scores.
  FL_REQUIRE_GPU();
  REQUIRE_DECODE_RUNG(k);
  const fl::ProblemSpec s = decode_spec(fl::DType::f16, 1, 32, 8, 1, (int64_t{1} << 21) + 71,
                                        128, true, fl::Layout::BHND);
  const fl::AttnParams shape = s.params();
  ASSERT_GT(fl::span_elements(shape.k_stride, s.batch, s.heads_kv, s.seqlen_k, s.head_dim),
            INT32_MAX);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double needed = 2.0 * 2 * 8 * s.seqlen_k * 128 + 4.0 * gib;  // K, V and a margin
  size_t free_bytes = 0, total_bytes = 0;
  FL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (static_cast<double>(free_bytes) < needed) {
    GTEST_SKIP() << "needs " << needed / gib << " GiB of free device memory, the GPU has "
                 << static_cast<double>(free_bytes) / gib << " GiB free";
  }
  fl::CublasHandle cublas;
  fl::Problem problem(s);
  ASSERT_EQ(fl::why_unsupported(*k, problem.params()), "");
  const fl::Reference ref(problem, cublas);
  const fl::Verdict v = fl::verify(*k, problem, ref);
  EXPECT_TRUE(v.passed) << s.describe() << ": " << v.why << " [max err " << v.out.max_abs_err
                        << ", tolerance " << v.tolerance << "]";
}

}  // namespace
