// The cuBLAS fp32 reference against a float64 CPU reference on small shapes (GPU; skipped
// without one). Everything else is judged against the cuBLAS reference, so it is judged here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_fp16.h>

#include "common/cuda_check.h"
#include "common/harness.h"
#include "common/reference.h"
#include "gpu_test_util.h"

namespace {

// Host fp32 copies of the problem's inputs in their own strided layout.
std::vector<float> host_tensor(const fl::Problem& pr, const fl::DeviceBuffer& buf) {
  const size_t n = buf.bytes() / 2;
  std::vector<uint16_t> raw(n);
  FL_CUDA_CHECK(cudaMemcpy(raw.data(), buf.get(), buf.bytes(), cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    if (pr.params().dtype == fl::DType::bf16) {
      bits = static_cast<uint32_t>(raw[i]) << 16;
      std::memcpy(&out[i], &bits, 4);
    } else {
      __half h;
      std::memcpy(&h, &raw[i], 2);
      out[i] = __half2float(h);
    }
  }
  return out;
}

struct Case {
  const char* name;
  fl::ProblemSpec spec;
};

std::vector<Case> cases() {
  auto spec = [](fl::DType t, int64_t b, int64_t hq, int64_t hkv, int64_t nq, int64_t nk,
                 int64_t d, bool causal, fl::Layout layout) {
    return fl::test::shape_spec(t, b, hq, hkv, nq, nk, d, causal, layout, 7);
  };
  using fl::DType;
  using fl::Layout;
  return {{"fp16_plain", spec(DType::f16, 2, 2, 2, 64, 64, 64, false, Layout::BHND)},
          {"bf16_plain", spec(DType::bf16, 1, 3, 3, 48, 80, 128, false, Layout::BHND)},
          {"fp16_causal_nq_lt_nk", spec(DType::f16, 1, 2, 2, 17, 113, 64, true, Layout::BHND)},
          {"fp16_causal_nq_gt_nk", spec(DType::f16, 1, 2, 2, 40, 24, 64, true, Layout::BHND)},
          {"fp16_gqa_bnhd", spec(DType::f16, 2, 4, 2, 33, 65, 128, false, Layout::BNHD)},
          {"bf16_d256_len1", spec(DType::bf16, 1, 1, 1, 1, 1, 256, false, Layout::BHND)}};
}

// The chunk rule (CPU): the buffers of a chunk stay under the budget and the chunk is the largest
// that does, at a decode shape (where the K and V copies, not S, are large: sized by S alone, a
// chunk of B = 64 x 32 heads at Nk = 32768 asked for 64 GiB) and a prefill one; at least one pair.
TEST(Reference, ChunksStayUnderTheBudget) {
  const int64_t budget = int64_t{1} << 30;
  struct Shape {
    int64_t pairs, nq, nk, d;
  };
  for (bool backward : {false, true}) {
    for (const Shape& s : {Shape{64 * 32, 1, 32768, 128}, Shape{64 * 32, 16, 131072, 192},
                           Shape{16 * 16, 4096, 4096, 128}, Shape{8, 16384, 16384, 256}}) {
      SCOPED_TRACE(std::string(backward ? "backward" : "forward") + " pairs " +
                   std::to_string(s.pairs) + " Nq " + std::to_string(s.nq) + " Nk " +
                   std::to_string(s.nk) + " d " + std::to_string(s.d));
      const int64_t floats = backward ? 2 * s.nq * s.nk + 3 * s.nq * s.d + 4 * s.nk * s.d + s.nq
                                      : s.nq * s.nk + s.nq * s.d + 2 * s.nk * s.d;
      const int64_t per_pair = 4 * floats;
      const int64_t c = fl::reference_chunk_pairs(s.pairs, s.nq, s.nk, s.d, backward);
      ASSERT_GE(c, 1);
      ASSERT_LE(c, s.pairs);
      if (per_pair <= budget) {
        EXPECT_LE(c * per_pair, budget);
        if (c < s.pairs) EXPECT_GT((c + 1) * per_pair, budget) << "not the largest chunk";
      } else {
        EXPECT_EQ(c, 1) << "one pair over the budget still runs, alone";
      }
    }
  }
  // Decode, B = 64, 32 query heads, Nk = 32768, d = 128: 33.7 MB a pair (K and V), 31 pairs.
  EXPECT_EQ(fl::reference_chunk_pairs(2048, 1, 32768, 128, false), 31);
}

TEST(Reference, CublasMatchesFloat64) {
  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    fl::Problem pr(c.spec);
    const fl::test::ReferenceCheck r = fl::test::expect_reference_matches_float64(
        pr.params(), host_tensor(pr, pr.q), host_tensor(pr, pr.k), host_tensor(pr, pr.v), cublas);
    if (std::string(c.name) == "fp16_causal_nq_gt_nk") {
      EXPECT_EQ(r.masked_rows, 2 * (40 - 24)) << "rows that see no key";
    }
  }
}

TEST(Reference, LowPrecisionDiffersButClosely) {
  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    fl::ProblemSpec s;
    s.dtype = t;
    s.batch = 1;
    s.heads_q = s.heads_kv = 2;
    s.seqlen_q = s.seqlen_k = 256;
    s.head_dim = 128;
    fl::Problem pr(s);
    fl::Reference ref(pr, cublas);
    // Rounding P and O to 16 bits must show (else the pass rule degenerates to the floor)...
    EXPECT_GT(ref.lowp_err(), 0.0);
    // ...and stay at the level of one rounding of O (|O| < ~1 here).
    EXPECT_LT(ref.lowp_err(), t == fl::DType::f16 ? 5e-3 : 4e-2);
  }
}

}  // namespace

namespace {

TEST(Reference, RoundingScoresCostsAccuracy) {
  // The reference for kernels that store S in the input dtype is the less accurate one.
  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  fl::ProblemSpec s;
  s.batch = 2;
  s.heads_q = s.heads_kv = 4;
  s.seqlen_q = s.seqlen_k = 512;
  s.head_dim = 128;
  fl::Problem pr(s);
  fl::Reference ref(pr, cublas);
  EXPECT_GT(ref.lowp_scores_err(), ref.lowp_err());
}

}  // namespace
