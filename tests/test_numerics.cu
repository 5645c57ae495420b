// Numerics of every registered kernel (GPU; skipped without one), on shapes every kernel claims:
//   LargeMagnitude  inputs up to 1e4 in magnitude, and scores as large as each kernel's contract
//                   allows (docs/contract.md, "Numerics"), through fl::verify
//   DominantKey     every query row has one key whose score dominates the others, through verify
//   NaN             a NaN in one element of Q, of K, of V: exactly which outputs become NaN, and
//                   that every other output is what the same problem without the NaN gives
// fl::verify also runs each kernel twice and requires bitwise equal outputs (determinism).
// A kernel with fp8_inputs runs every case in e4m3 (tests/gpu_test_util.h, in_input_type): the same
// host inputs quantised per tensor, O in the case's 16-bit type; the reference reads the
// dequantised inputs, and a NaN input is a NaN e4m3 value (0x7F), which must reach exactly the
// same outputs.
//
// The inputs are built on the host (seeded, library-independent) and loaded with
// Problem::set_inputs, so that the cases can be checked on the host before any kernel runs: that
// check runs first, GPU or not.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/harness.h"
#include "common/registry.h"
#include "gpu_test_util.h"

namespace {

using fl::test::Rng;

using fl::test::round_16;

// Q, K, V as fp32 in [B, H, N, d] order (B = 1 throughout), already rounded to the dtype.
struct Inputs {
  std::vector<float> q, k, v;
};

fl::ProblemSpec spec_of(fl::DType t, int64_t heads_q, int64_t heads_kv) {
  fl::ProblemSpec s;
  s.dtype = t;
  s.batch = 1;
  s.heads_q = heads_q;
  s.heads_kv = heads_kv;
  s.seqlen_q = s.seqlen_k = 256;
  s.head_dim = 128;
  s.with_lse = true;
  return s;
}

Inputs sized(const fl::ProblemSpec& s) {
  Inputs in;
  in.q.resize(s.heads_q * s.seqlen_q * s.head_dim);
  in.k.resize(s.heads_kv * s.seqlen_k * s.head_dim);
  in.v.resize(in.k.size());
  return in;
}

void fill(std::vector<float>& x, fl::DType t, const std::function<float()>& draw) {
  for (float& e : x) e = round_16(t, draw());
}

// The largest |scale * q . k| of the problem, in double, and the scaled score of query row i of
// head h against key j.
double scaled_score(const fl::ProblemSpec& s, const Inputs& in, float scale, int64_t h,
                    int64_t i, int64_t j) {
  const int64_t d = s.head_dim, hk = h / (s.heads_q / s.heads_kv);
  double acc = 0.0;
  for (int64_t c = 0; c < d; ++c) {
    acc += static_cast<double>(in.q[(h * s.seqlen_q + i) * d + c]) *
           static_cast<double>(in.k[(hk * s.seqlen_k + j) * d + c]);
  }
  return acc * scale;
}
double max_abs_score(const fl::ProblemSpec& s, const Inputs& in, float scale) {
  double m = 0.0;
  for (int64_t h = 0; h < s.heads_q; ++h) {
    for (int64_t i = 0; i < s.seqlen_q; ++i) {
      for (int64_t j = 0; j < s.seqlen_k; ++j) {
        m = std::max(m, std::abs(scaled_score(s, in, scale, h, i, j)));
      }
    }
  }
  return m;
}

float default_scale(const fl::ProblemSpec& s) {
  return 1.0f / std::sqrt(static_cast<float>(s.head_dim));
}

// ---------------------------------------------------------------------------------------------
// Large magnitude
// ---------------------------------------------------------------------------------------------

constexpr float kMaxInput = 1e4f;

// Q, K and V up to 1e4 in turn, the other inputs such that the scaled scores stay about N(0, 1):
// each tensor's large values go through the kernel's arithmetic without an overflow. (A large Q
// or K alone scales the scores; K small by the same factor keeps them ordinary.)
float large(Rng& r) { return std::clamp(2500.f * r.normal(), -kMaxInput, kMaxInput); }

// The bound on |q| and |k| that kernel k is given when Q and K are both large. With every input
// at most M in magnitude, |scale * q . k| <= scale * d * M^2 (Cauchy-Schwarz), so M bounds every
// scaled score for any inputs:
//   * kernel 00 stores S in the input dtype (KernelInfo::scores_in_input_dtype): in fp16 a score
//     above 65504 becomes inf and its row NaN, so M = sqrt(65504 / (scale * d)) (76 at d = 128);
//     in bf16 (max ~3.4e38) there is no such limit;
//   * rungs 11-16 compute P = 2^(s c - m c) with m c = max * scale * log2(e) rounded to fp32 once:
//     its rounding error (|m c| * 2^-24) shifts every weight of a row by the same factor 2^delta,
//     which cancels in O = sum(P V) / sum(P) except where P is rounded to fp16/bf16. On a row
//     whose softmax is one-hot (every large-score row) the reference is exact and that rounding
//     is all the error there is: it stays below half an ulp of the output while |m c| < 2^12,
//     i.e. |scaled score| < 2839. M = sqrt(2048 / (scale * d)) keeps every score below 2048;
//   * every other kernel keeps S in fp32 and takes e^(s - max) with s - max exact for the
//     winning key: inputs up to 1e4 (scores up to ~1e9).
double qk_bound(const fl::KernelInfo& k, fl::DType t, float scale, int64_t d) {
  const double per_unit = static_cast<double>(scale) * static_cast<double>(d);
  if (k.scores_in_input_dtype && t == fl::DType::f16) return std::sqrt(65504.0 / per_unit);
  if (k.number >= 11) return std::sqrt(2048.0 / per_unit);
  return kMaxInput;
}

// Q and K entries of magnitude in [M/2, M], random signs, on a lattice that makes every score
// exact in fp32: entries are integers k (|k| <= 312) times a power of two u, so every partial sum
// of q . k is an integer multiple of u^2 below 128 * 312^2 u^2 < 2^24 u^2. The kernel and the
// reference then compute the same scores bit for bit, whatever the order of their sums: the
// winning key of a one-hot row cannot differ between them by a rounding.
void fill_lattice(std::vector<float>& x, fl::DType t, double bound, Rng& r) {
  constexpr int64_t kMaxInt = 312;
  const double unit = std::exp2(std::ceil(std::log2(bound / kMaxInt)));
  const int64_t top = std::min<int64_t>(kMaxInt, static_cast<int64_t>(bound / unit));
  for (float& e : x) {
    const int64_t n = r.integer(top / 2, top) * (r.next() % 2 ? 1 : -1);
    e = round_16(t, static_cast<float>(static_cast<double>(n) * unit));
  }
}

TEST(Numerics, LatticeScoresAreExactInFp32) {
  // The premise of fill_lattice, on the host: the largest possible partial sum is below 2^24 u^2,
  // and rounding to bf16 (8 significant bits) keeps the entries multiples of u.
  EXPECT_LT(128.0 * 312 * 312, std::exp2(24.0));
  for (double bound : {9.5, 13.45, 76.09, 1e4}) {
    Rng r(11);
    std::vector<float> x(4096);
    fill_lattice(x, fl::DType::bf16, bound, r);
    const double unit = std::exp2(std::ceil(std::log2(bound / 312)));
    for (float e : x) {
      ASSERT_LE(std::abs(e), bound * (1 + 1.0 / 128)) << bound;
      ASSERT_EQ(std::fmod(static_cast<double>(e), unit), 0.0) << bound << " " << e;
    }
  }
}

// Runs `kernel` on the problem `s` with the host inputs `in`, through fl::verify against the
// reference (a failure is reported here). False, and nothing run, when the kernel does not claim
// the shape.
bool verify_on(const fl::KernelInfo& kernel, const fl::ProblemSpec& s, const Inputs& in,
               fl::CublasHandle& cublas) {
  fl::Problem problem(s);
  if (!fl::why_unsupported(kernel, problem.params_for(kernel)).empty()) return false;
  problem.set_inputs(in.q.data(), in.k.data(), in.v.data());
  fl::Reference ref(problem, cublas);
  const fl::Verdict v = fl::verify(kernel, problem, ref);
  EXPECT_TRUE(v.passed) << v.why << " [max err " << v.out.max_abs_err << ", tolerance "
                        << v.tolerance << "]";
  return true;
}

class NumericsTest : public ::testing::TestWithParam<const fl::KernelInfo*> {};

// The cases below are prefill shapes (N = 256 queries), which a rung of the serving track
// refuses by its rule; its own numerics (large magnitudes, a NaN in Q, K or V, on decode shapes)
// are tests/test_decode.cu's.
#define SKIP_SERVING_RUNG(kernel)                                                           \
  do {                                                                                      \
    if ((kernel).number >= FL_SERVING_FIRST_RUNG) {                                         \
      GTEST_SKIP() << (kernel).name() << " is a serving rung: tests/test_decode.cu";        \
    }                                                                                       \
  } while (0)

TEST_P(NumericsTest, LargeMagnitude) {
  const fl::KernelInfo& kernel = *GetParam();
  SKIP_SERVING_RUNG(kernel);
  struct Case {
    std::string name;
    std::function<void(Inputs&, fl::DType, Rng&)> make;
  };
  const fl::ProblemSpec shape = spec_of(fl::DType::f16, 2, 1);
  const float scale = default_scale(shape);
  const std::vector<Case> cases = {
      {"large_v",
       [](Inputs& in, fl::DType t, Rng& r) {
         fill(in.q, t, [&] { return r.normal(); });
         fill(in.k, t, [&] { return r.normal(); });
         fill(in.v, t, [&] { return large(r); });
       }},
      {"large_q",
       [](Inputs& in, fl::DType t, Rng& r) {
         fill(in.q, t, [&] { return large(r); });
         fill(in.k, t, [&] { return 4e-4f * r.normal(); });
         fill(in.v, t, [&] { return r.normal(); });
       }},
      {"large_k",
       [](Inputs& in, fl::DType t, Rng& r) {
         fill(in.q, t, [&] { return 4e-4f * r.normal(); });
         fill(in.k, t, [&] { return large(r); });
         fill(in.v, t, [&] { return r.normal(); });
       }},
      {"large_scores",
       [&kernel, scale, &shape](Inputs& in, fl::DType t, Rng& r) {
         const double bound = qk_bound(kernel, t, scale, shape.head_dim);
         fill_lattice(in.q, t, bound, r);
         fill_lattice(in.k, t, bound, r);
         fill(in.v, t, [&] { return r.normal(); });
       }},
  };

  // The inputs of every case and dtype, built once; first checked on the host: every input is
  // within 1e4 (and the bound of the large scores), each tensor reaches its magnitude, and the
  // large scores are large but within the kernel's limit.
  struct Built {
    std::string name;
    fl::ProblemSpec spec;
    Inputs in;
  };
  std::vector<Built> built;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    const fl::ProblemSpec s = spec_of(t, 2, 1);
    for (const Case& c : cases) {
      Rng r(1000 + static_cast<uint64_t>(t));
      Inputs in = sized(s);
      c.make(in, t, r);
      built.push_back({fl::to_string(t) + std::string(" ") + c.name, s, std::move(in)});
    }
  }
  for (const Built& b : built) {
    SCOPED_TRACE(kernel.name() + " " + b.name);
    float max_in = 0.f;
    for (const auto* x : {&b.in.q, &b.in.k, &b.in.v}) {
      for (float e : *x) max_in = std::max(max_in, std::abs(e));
    }
    EXPECT_LE(max_in, 1.0001f * kMaxInput);
    if (b.name.find("large_scores") != std::string::npos) {
      const double bound = qk_bound(kernel, b.spec.dtype, scale, b.spec.head_dim);
      const double limit = bound * bound * scale * b.spec.head_dim;
      const double m = max_abs_score(b.spec, b.in, scale);
      EXPECT_LE(m, limit * 1.01) << "bound " << bound;
      EXPECT_GE(m, 0.1 * limit) << "bound " << bound << ": the scores are not large";
    } else {
      EXPECT_GE(max_in, 0.5f * kMaxInput);
    }
  }

  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  int claimed = 0;
  for (const Built& b : built) {
    SCOPED_TRACE(kernel.name() + " " + b.name);
    if (verify_on(kernel, fl::test::in_input_type(kernel, b.spec), b.in, cublas)) ++claimed;
  }
  EXPECT_EQ(claimed, 8) << kernel.name() << " must claim B = 1, H = 2/1, N = 256, d = 128";
}

// ---------------------------------------------------------------------------------------------
// One dominant key per row
// ---------------------------------------------------------------------------------------------

// Query row i of head h has its dominant key at pi(i) = (97 i + 13) mod N (a permutation: 97 and
// 256 are coprime), spread over the first, middle and last KV tiles, so that the dominant score
// arrives at every point of the online softmax: first (the later tiles add weights of ~e^-16) or
// last (everything before is rescaled by ~e^-16).
constexpr int64_t kPermStep = 97, kPermShift = 13;
int64_t dominant_key(int64_t i, int64_t n) { return (kPermStep * i + kPermShift) % n; }

// K = noise + 2 * Q[pi^-1(j)]: the score of (i, pi(i)) is about 2 |q_i|^2 scale = 2 sqrt(d) ~ 23
// (scaled) above the others, which are ~N(0, 5).
Inputs dominant_inputs(const fl::ProblemSpec& s, Rng& r) {
  Inputs in = sized(s);
  const int64_t n = s.seqlen_q, d = s.head_dim;
  fill(in.q, s.dtype, [&] { return r.normal(); });
  fill(in.v, s.dtype, [&] { return r.normal(); });
  for (int64_t h = 0; h < s.heads_kv; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = dominant_key(i, n);
      for (int64_t c = 0; c < d; ++c) {
        in.k[(h * n + j) * d + c] =
            round_16(s.dtype, r.normal() + 2.f * in.q[(h * n + i) * d + c]);
      }
    }
  }
  return in;
}

// The smallest margin, over all rows, between the dominant key's scaled score and the next one.
constexpr double kMinMargin = 6.0;

TEST_P(NumericsTest, DominantKey) {
  const fl::KernelInfo& kernel = *GetParam();
  SKIP_SERVING_RUNG(kernel);
  // The case, on the host: every row's largest score is its dominant key's, by at least
  // kMinMargin (e^-6: the other keys together weigh a few percent at most).
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    const fl::ProblemSpec s = spec_of(t, 2, 2);
    Rng r(2000 + static_cast<uint64_t>(t));
    const Inputs in = dominant_inputs(s, r);
    double margin = std::numeric_limits<double>::infinity();
    for (int64_t h = 0; h < s.heads_q; ++h) {
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        const int64_t jd = dominant_key(i, s.seqlen_k);
        const double top = scaled_score(s, in, default_scale(s), h, i, jd);
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          if (j != jd) margin = std::min(margin, top - scaled_score(s, in, default_scale(s), h, i, j));
        }
      }
    }
    EXPECT_GE(margin, kMinMargin) << fl::to_string(t);
  }

  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  int claimed = 0;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    SCOPED_TRACE(kernel.name() + " " + fl::to_string(t));
    const fl::ProblemSpec s = spec_of(t, 2, 2);
    Rng r(2000 + static_cast<uint64_t>(t));
    if (verify_on(kernel, fl::test::in_input_type(kernel, s), dominant_inputs(s, r), cublas)) {
      ++claimed;
    }
  }
  EXPECT_EQ(claimed, 2) << kernel.name() << " must claim B = 1, H = 2, N = 256, d = 128";
}

// ---------------------------------------------------------------------------------------------
// NaN in an input
// ---------------------------------------------------------------------------------------------
//
// What every kernel does with a NaN (read from the code): the row max is taken with fmaxf, which
// ignores a NaN, but e^(NaN - m) (expf or ex2) is NaN, so it enters the row sum l, P and O.
//   * Q[h, i, c] NaN: every score of row i of head h is NaN; that row's max stays -inf, its
//     weights, l and LSE are NaN: O[h, i, :] is NaN (all d columns) and LSE[h, i] NaN. Rung 16's
//     epilogue stores l > 0 ? O / l : 0 * O, and 0 * NaN is NaN: the same.
//   * K[g, j, c] NaN: score j of every row of every query head of KV group g is NaN: all those
//     rows are NaN, every column (P[j] * V[j, :] is NaN even where V is 0), and their LSE NaN.
//   * V[g, j, c] NaN: the scores and P are untouched; O[:, c] = sum_j P[j] V[j, c] is NaN in
//     every row of group g (0 * NaN is NaN too, for a P that underflowed), column c only; the LSE
//     does not involve V and is untouched.
// Everything else equals the run without the NaN: the other heads bitwise (no kernel mixes heads),
// the other columns under a NaN in V bitwise (P and l are unchanged, columns never mix), the LSE
// under a NaN in V bitwise. The other rows of head h under a NaN in Q are held to the pass
// tolerance instead of bitwise equality: a kernel may make one decision for several rows at once
// (rung 16 skips the rescale of a 16-row M-tile when no row's max moved, a warp vote that the
// NaN row, whose max never moves, takes part in), and that changes the rounding of its
// neighbours, not their value.

enum class Where { kQ, kK, kV };

struct NanCase {
  const char* name;
  Where where;
  int64_t head;  // query head (Q) or KV head (K, V)
  int64_t row, col;
};

// B = 1, H_q = 4 over H_kv = 2: KV group g is query heads 2g and 2g + 1.
constexpr int64_t kHeadsQ = 4, kHeadsKv = 2, kGroup = kHeadsQ / kHeadsKv;
const NanCase kNanCases[] = {
    {"Q[h=1, i=77, c=5]", Where::kQ, 1, 77, 5},
    {"K[g=1, j=150, c=33]", Where::kK, 1, 150, 33},
    {"V[g=0, j=200, c=70]", Where::kV, 0, 200, 70},
};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// The outputs of one run: O as fp32 [H_q, Nq, d] and the LSE [H_q, Nq].
struct Outputs {
  std::vector<float> o, lse;
};

Outputs run_once(const fl::KernelInfo& kernel, fl::Problem& problem) {
  problem.poison_output();
  fl::run_kernel(kernel, problem.params_for(kernel));
  FL_CUDA_CHECK(cudaDeviceSynchronize());
  Outputs out;
  out.o = problem.output_host();
  out.lse.resize(problem.lse.bytes() / sizeof(float));
  FL_CUDA_CHECK(cudaMemcpy(out.lse.data(), problem.lse.get(), problem.lse.bytes(),
                           cudaMemcpyDeviceToHost));
  return out;
}

TEST_P(NumericsTest, NaNReachesExactlyTheOutputsThatAttendToIt) {
  FL_REQUIRE_GPU();
  const fl::KernelInfo& kernel = *GetParam();
  SKIP_SERVING_RUNG(kernel);
  fl::CublasHandle cublas;
  int claimed = 0;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    const fl::ProblemSpec s = fl::test::in_input_type(kernel, spec_of(t, kHeadsQ, kHeadsKv));
    const int64_t n = s.seqlen_q, d = s.head_dim;
    fl::Problem problem(s);
    if (!fl::why_unsupported(kernel, problem.params_for(kernel)).empty()) continue;
    ++claimed;
    Rng r(3000 + static_cast<uint64_t>(t));
    Inputs clean = sized(s);
    fill(clean.q, t, [&] { return r.normal(); });
    fill(clean.k, t, [&] { return r.normal(); });
    fill(clean.v, t, [&] { return r.normal(); });
    problem.set_inputs(clean.q.data(), clean.k.data(), clean.v.data());
    // The run without a NaN passes (so it is the right answer to compare with).
    fl::Reference ref(problem, cublas);
    const fl::Verdict v = fl::verify(kernel, problem, ref);
    ASSERT_TRUE(v.passed) << kernel.name() << " " << fl::to_string(t) << ": " << v.why;
    const double tol = v.tolerance;
    const Outputs base = run_once(kernel, problem);

    for (const NanCase& c : kNanCases) {
      SCOPED_TRACE(kernel.name() + " " + fl::to_string(t) + " NaN in " + c.name);
      Inputs bad = clean;
      std::vector<float>& x = c.where == Where::kQ ? bad.q : c.where == Where::kK ? bad.k : bad.v;
      x[(c.head * n + c.row) * d + c.col] = std::numeric_limits<float>::quiet_NaN();
      problem.set_inputs(bad.q.data(), bad.k.data(), bad.v.data());
      const Outputs got = run_once(kernel, problem);

      int64_t wrong = 0;  // outputs that break the rule, reported with the first few
      auto fail = [&](const std::string& what) {
        if (++wrong <= 5) ADD_FAILURE() << what;
      };
      for (int64_t h = 0; h < kHeadsQ; ++h) {
        const bool in_group = c.where != Where::kQ && h / kGroup == c.head;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t row = h * n + i;
          const std::string at = "h=" + std::to_string(h) + " i=" + std::to_string(i);
          const bool nan_row = (c.where == Where::kQ && h == c.head && i == c.row) ||
                               (c.where == Where::kK && in_group);
          // LSE: NaN on a NaN row; else bitwise the clean one, but for the Q-row neighbours.
          const float lse = got.lse[row], lse0 = base.lse[row];
          if (nan_row) {
            if (!std::isnan(lse)) fail("LSE " + at + " = " + std::to_string(lse) + ", want NaN");
          } else if (c.where == Where::kQ && h == c.head) {
            if (!(std::abs(lse - lse0) <= fl::kLseTolerance * std::max(1.f, std::abs(lse0)))) {
              fail("LSE " + at + " = " + std::to_string(lse) + ", clean " + std::to_string(lse0));
            }
          } else if (!same_bits(lse, lse0)) {
            fail("LSE " + at + " = " + std::to_string(lse) + ", clean " + std::to_string(lse0));
          }
          for (int64_t col = 0; col < d; ++col) {
            const float o = got.o[row * d + col], o0 = base.o[row * d + col];
            const std::string at_col = "O " + at + " c=" + std::to_string(col);
            const bool nan_out = nan_row || (c.where == Where::kV && in_group && col == c.col);
            if (nan_out) {
              if (!std::isnan(o)) fail(at_col + " = " + std::to_string(o) + ", want NaN");
            } else if (c.where == Where::kQ && h == c.head) {
              if (!(std::abs(o - o0) <= tol)) {
                fail(at_col + " = " + std::to_string(o) + ", clean " + std::to_string(o0) +
                     " (tolerance " + std::to_string(tol) + ")");
              }
            } else if (!same_bits(o, o0)) {
              fail(at_col + " = " + std::to_string(o) + ", clean " + std::to_string(o0) +
                   " (want bitwise equal)");
            }
          }
        }
      }
      EXPECT_EQ(wrong, 0) << "outputs that break the NaN rule";
    }
    problem.set_inputs(clean.q.data(), clean.k.data(), clean.v.data());
  }
  EXPECT_EQ(claimed, 2) << kernel.name() << " must claim B = 1, H = 4/2, N = 256, d = 128";
}

INSTANTIATE_TEST_SUITE_P(Ladder, NumericsTest, ::testing::ValuesIn(fl::forward_kernels()),
                         [](const ::testing::TestParamInfo<const fl::KernelInfo*>& info) {
                           return "k" + info.param->name();
                         });

}  // namespace
