// Rung 16's short tiles (kernels/16_final/final.cuh, SplitKeys and the narrow first visit), on
// shapes computed from the config rung 16 runs on this GPU, d and dtype, so that each case lands
// on the edge it names whatever the tuned table says:
//   a split query tile (at most `rows` rows: the warps share the keys, then merge) with 1 row and
//   with exactly `rows`, and one row more (not split); a last KV tile with 1 key and with exactly
//   `keys` keys (narrow first visit), and one more (whole); both under a causal mask; causal rows
//   in a split tile that see no key; a single query row (Nq = 1); a NaN in a key that only a
//   warp other than the slab's first computes, which must reach every row of the split tile
//   through the merge.
// Rungs 24-27, the Hopper rungs of the same contract, run the same shapes and their own edges
// (ContractRungsPassAtEveryEdge).
// Rung 28 (FP8) runs the edges of its own narrow first visit, in e4m3 (Rung28PassesAtEveryEdge).
// Each case goes through fl::verify (the pass rule against the fp32 reference, LSE, every row
// written, two runs bitwise equal). The shipped configs all split (checked without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/harness.h"
#include "common/registry.h"
#include "common/tune/dispatch.h"
#include "gpu_test_util.h"
#include "kernels/16_final/final.cuh"
#include "kernels/16_final/tuned_configs.h"

namespace {

using fl::k12_autotune::ConfigValues;
using fl::k16_final::kTunedConfigs;
using fl::k16_final::split_shape;
using fl::k16_final::SplitShape;

// Every row of rung 16's table splits its short tiles, so the cases below test a mechanism that
// runs (a config that did not split would pass them through the whole-tile path).
TEST(ShortTiles, EveryShippedConfigSplits) {
  for (const auto& row : kTunedConfigs) {
    const SplitShape s = split_shape(row.config, row.head_dim);
    SCOPED_TRACE("sm " + std::to_string(row.sm) + " d " + std::to_string(row.head_dim) + " " +
                 fl::to_string(row.dtype));
    EXPECT_TRUE(s.enabled);
    EXPECT_GE(s.split, 2);
    EXPECT_EQ(s.keys * s.split, row.config.bc);
    EXPECT_EQ(s.keys % 16, 0);
    EXPECT_EQ(s.rows % 16, 0);
    EXPECT_LT(s.rows, row.config.br);  // a split tile is a short one
  }
  // The rule on a few configs, by hand: d = 128, Bc = 64, 4 warps of 32 rows: 4 warps share the
  // keys of one slab (16 keys each); Bc = 32: 2 warps (2 slabs); 8 warps, Bc = 32: 2 (4 slabs).
  const SplitShape a = split_shape(ConfigValues{128, 64, 4, 2, 0}, 128);
  EXPECT_EQ(a.split, 4);
  EXPECT_EQ(a.keys, 16);
  EXPECT_EQ(a.rows, 32);
  const SplitShape b = split_shape(ConfigValues{128, 32, 4, 2, 0}, 128);
  EXPECT_EQ(b.split, 2);
  EXPECT_EQ(b.rows, 64);
  const SplitShape c = split_shape(ConfigValues{128, 32, 8, 2, 0}, 256);
  EXPECT_EQ(c.split, 2);
  EXPECT_EQ(c.rows, 64);
  EXPECT_FALSE(split_shape(ConfigValues{128, 48, 4, 2, 0}, 128).enabled);  // 3 k-steps: no split
}

struct Case {
  std::string name;
  fl::ProblemSpec spec;
};

fl::ProblemSpec spec(fl::DType t, int64_t d, int64_t nq, int64_t nk, bool causal) {
  fl::ProblemSpec s;
  s.dtype = t;
  s.batch = 2;
  s.heads_q = 4;
  s.heads_kv = 2;  // GQA: the split tiles of two query heads read one KV head
  s.seqlen_q = nq;
  s.seqlen_k = nk;
  s.head_dim = d;
  s.causal = causal;
  s.with_lse = true;
  s.seed = 77 + nq * 3 + nk;
  return s;
}

// The config rung 16 runs for (d, dtype) on this GPU, and its split shape.
struct Shape {
  ConfigValues config;
  SplitShape split;
};
Shape shape_for(fl::DType t, int64_t d) {
  fl::AttnParams p{};
  p.dtype = t;
  p.head_dim = d;
  const int i = fl::k12_autotune::tuned_index(kTunedConfigs, p);
  EXPECT_GE(i, 0);
  const ConfigValues c = kTunedConfigs[i < 0 ? 0 : i].config;
  return {c, split_shape(c, static_cast<int>(d))};
}

std::vector<Case> cases(fl::DType t, int64_t d) {
  const Shape s = shape_for(t, d);
  const int64_t br = s.config.br, bc = s.config.bc, rows = s.split.rows, keys = s.split.keys;
  const std::string ty = std::string(fl::to_string(t)) + "_d" + std::to_string(d) + "_";
  std::vector<Case> out;
  // Nq = 2 Br + 1, Nk = 3 Bc + 1: a length one above a block multiple (the target's +1) on both
  // sides (split, narrow).
  out.push_back({ty + "split1_narrow1", spec(t, d, 2 * br + 1, 3 * bc + 1, false)});
  // The largest split tile and the widest narrow visit (`keys` keys in the last KV tile).
  out.push_back({ty + "split_max_narrow_max", spec(t, d, br + rows, 2 * bc + keys, false)});
  // One more of each: the whole-tile path and the whole first visit.
  out.push_back(
      {ty + "whole_tile_whole_visit", spec(t, d, br + rows + 1, 2 * bc + keys + 1, false)});
  // Causal, Nk = Nq + 1: the split tile, and in the whole tile (rows 0 .. Br - 1, keys up to
  // Br + 1) a last KV tile of which its rows see 1 key.
  out.push_back({ty + "split_max_narrow1_causal", spec(t, d, br + rows, br + rows + 1, true)});
  // Causal with Nq > Nk: in the split tile (rows Br .. Br + 2) row Br sees no key (O = 0, LSE =
  // -inf), the next ones 1 and 2 keys; the first tile sees none at all.
  out.push_back({ty + "split_causal_empty_rows", spec(t, d, br + 3, 2, true)});
  // One query against many keys: a tile of one row, every warp a slice of every KV tile.
  out.push_back({ty + "nq1", spec(t, d, 1, 5 * bc + 7, false)});
  return out;
}

// One case through fl::verify: the pass rule, every row written, two runs bitwise equal.
void expect_passes(const fl::KernelInfo& k, const Case& c, fl::CublasHandle& cublas) {
  fl::Problem problem(c.spec);
  fl::Reference ref(problem, cublas);
  const fl::Verdict v = fl::verify(k, problem, ref);
  EXPECT_TRUE(v.passed) << c.name << " (" << c.spec.describe() << "): " << v.why << " [max err "
                        << v.out.max_abs_err << ", tolerance " << v.tolerance << "]";
}

TEST(ShortTiles, Rung16PassesAtEveryEdge) {
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k = fl::find_kernel("16");
  if (k == nullptr) GTEST_SKIP() << "rung 16 is not in this build (FL_KERNELS)";
  fl::CublasHandle cublas;
  int ran = 0;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (int64_t d : {64, 128, 256}) {
      for (const Case& c : cases(t, d)) {
        ASSERT_EQ(fl::why_unsupported(*k, fl::Problem(c.spec).params()), "")
            << c.name << ": rung 16 claims every length";
        expect_passes(*k, c, cublas);
        ++ran;
      }
    }
  }
  EXPECT_EQ(ran, 2 * 3 * 6);
}

// Rungs 24-27 (the Hopper rungs of rung 16's contract: the whole contract, the schedule, the trims,
// the final rung) on rung 16's edge shapes, and on their own: a last query tile of 1 row and of
// Br - 1 rows, a last KV tile of 1 key, causal with Nk = Nq + 1 and with Nq > Nk (rows and whole
// items that see no key), per d with its tile shape (tile()); and the edges of the short items
// tried on rung 27 (its notebook, "Short items"): a last query tile of 64 rows (one consumer's)
// with a last KV tile of 16 keys, one row and one key more, an odd number of KV tiles behind a
// 1-row query tile, and causal N + 1 (the longest item a single row).
TEST(ShortTiles, ContractRungsPassAtEveryEdge) {
  FL_REQUIRE_GPU();
  int rungs = 0;
  for (const char* id : {"24", "25", "26", "27"}) {
    const fl::KernelInfo* k = fl::find_kernel(id);
    if (k == nullptr) continue;
    ++rungs;
    fl::CublasHandle cublas;
    int ran = 0;
    for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
      for (int64_t d : {64, 128, 256}) {
        fl::AttnParams probe = fl::make_params(t, 1, 1, 1, 1, d);
        const fl::TileShape tile = k->tile(probe);
        const int64_t br = tile.br, bc = tile.bc;
        std::vector<Case> all = cases(t, d);
        const std::string ty = std::string(fl::to_string(t)) + "_d" + std::to_string(d) + "_r23_";
        all.push_back({ty + "last_q_tile_1_kv_tile_1", spec(t, d, br + 1, bc + 1, false)});
        all.push_back({ty + "last_q_tile_br_minus_1", spec(t, d, 2 * br - 1, 2 * bc, false)});
        all.push_back({ty + "causal_nk_nq_plus_1", spec(t, d, br + 1, br + 2, true)});
        all.push_back({ty + "causal_items_see_no_key", spec(t, d, 2 * br + 5, 3, true)});
        all.push_back({ty + "last_q_tile_64_kv_tile_16", spec(t, d, br + 64, 2 * bc + 16, false)});
        all.push_back({ty + "last_q_tile_65_kv_tile_17", spec(t, d, br + 65, 2 * bc + 17, false)});
        all.push_back({ty + "last_q_tile_1_three_kv_tiles", spec(t, d, br + 1, 2 * bc + 1, false)});
        all.push_back({ty + "causal_n_plus_1", spec(t, d, 2 * br + 1, 2 * br + 1, true)});
        for (const Case& c : all) {
          const std::string why = fl::why_unsupported(*k, fl::Problem(c.spec).params());
          if (why.find("compute capability") != std::string::npos) {
            GTEST_SKIP() << k->name() << " needs compute capability 9.0: " << why;
          }
          ASSERT_EQ(why, "") << c.name << ": " << k->name() << " claims every length";
          expect_passes(*k, c, cublas);
          ++ran;
        }
      }
    }
    EXPECT_EQ(ran, 2 * 3 * 14) << k->name();
  }
  if (rungs == 0) GTEST_SKIP() << "rungs 24-27 are not in this build (FL_KERNELS, FL_HOPPER)";
}

// Rung 27 at d = 96, which it runs as 128 with TMA's zero fill past 96, and at d = 192 (tiles of
// 80 keys, as d = 256's): its own edges at those tiles (a last query tile of 1 row, a last KV tile of 1 key, one more of each,
// causal rows and items that see no key, the narrow first visit), both layouts (in BNHD a column
// stored past d would land in the next head's row), GQA, the LSE.
TEST(ShortTiles, Rung27TakesHeadDims96And192) {
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k = fl::find_kernel("27");
  if (k == nullptr) GTEST_SKIP() << "rung 27 is not in this build (FL_KERNELS, FL_HOPPER)";
  fl::CublasHandle cublas;
  int ran = 0;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (int64_t d : {96, 192}) {
      const fl::TileShape tile = k->tile(fl::make_params(t, 1, 1, 1, 1, d));
      const int64_t br = tile.br, bc = tile.bc;
      for (fl::Layout layout : {fl::Layout::BHND, fl::Layout::BNHD}) {
        const std::string ty = std::string(fl::to_string(t)) + "_d" + std::to_string(d) +
                               (layout == fl::Layout::BHND ? "_bhnd_" : "_bnhd_");
        std::vector<Case> all = {
            {ty + "one_row_one_key", spec(t, d, 1, 1, false)},
            {ty + "last_q_tile_1_kv_tile_1", spec(t, d, br + 1, bc + 1, false)},
            {ty + "whole_tiles", spec(t, d, 2 * br, 2 * bc, false)},
            {ty + "last_q_tile_64_kv_tile_16", spec(t, d, br + 64, 2 * bc + 16, false)},
            {ty + "causal_n_plus_1", spec(t, d, 2 * br + 1, 2 * br + 1, true)},
            {ty + "causal_items_see_no_key", spec(t, d, 2 * br + 5, 3, true)},
            {ty + "causal_nk_above_nq", spec(t, d, 300, 1000, true)},
        };
        for (Case& c : all) {
          c.spec.layout = layout;
          const std::string why = fl::why_unsupported(*k, fl::Problem(c.spec).params());
          if (why.find("compute capability") != std::string::npos) {
            GTEST_SKIP() << k->name() << " needs compute capability 9.0: " << why;
          }
          ASSERT_EQ(why, "") << c.name;
          expect_passes(*k, c, cublas);
          ++ran;
        }
      }
    }
  }
  EXPECT_EQ(ran, 2 * 2 * 2 * 7);
}

// The ragged query tile among many items a block, on rungs 24-27: 128 heads (GQA, 16 over 4,
// B = 8) of three query tiles, the ragged one (rung 24: a head's last; rungs 25-27: its first,
// the tiles counted from its last row) of 1 row (only the first consumer has a row of it) or of
// 65 rows. On 132 SMs each block takes 2-4 items, and 88 of the blocks a whole one and a ragged
// one, so the rings' barrier phases must stay in step across them (the edge cases above are one
// or two items a block); non-causal and causal (rungs 25-27: there the ragged tile is a head's
// shortest item, and the next item's rows in its Q tile are computed and not stored).
TEST(ShortTiles, ContractRungsRaggedTilesAmongManyItems) {
  FL_REQUIRE_GPU();
  int rungs = 0;
  for (const char* id : {"24", "25", "26", "27"}) {
    const fl::KernelInfo* k = fl::find_kernel(id);
    if (k == nullptr) continue;
    ++rungs;
    fl::CublasHandle cublas;
    int ran = 0;
    for (int64_t d : {64, 128, 256}) {
      fl::AttnParams probe = fl::make_params(fl::DType::f16, 1, 1, 1, 1, d);
      const fl::TileShape tile = k->tile(probe);
      for (int64_t last_rows : {int64_t{1}, int64_t{65}}) {
        for (bool causal : {false, true}) {
          const int64_t nq = 2 * tile.br + last_rows;
          fl::ProblemSpec s = spec(fl::DType::f16, d, nq, 2 * tile.br + 7, causal);
          s.batch = 8;
          s.heads_q = 16;
          s.heads_kv = 4;
          const Case c{"d" + std::to_string(d) + "_last_" + std::to_string(last_rows) +
                           (causal ? "_causal" : ""),
                       s};
          const std::string why = fl::why_unsupported(*k, fl::Problem(c.spec).params());
          if (why.find("compute capability") != std::string::npos) {
            GTEST_SKIP() << k->name() << " needs compute capability 9.0: " << why;
          }
          ASSERT_EQ(why, "") << c.name << ": " << k->name();
          expect_passes(*k, c, cublas);
          ++ran;
        }
      }
    }
    EXPECT_EQ(ran, 3 * 2 * 2) << k->name();
  }
  if (rungs == 0) GTEST_SKIP() << "rungs 24-27 are not in this build (FL_KERNELS, FL_HOPPER)";
}

// Rung 27 loads a narrow first visit's K and V as 16 rows, not Bc, except in an item of one visit:
// its last P.V reads the stage's Bc rows of V (P zero past the 16 keys), so the rows past 16 must
// be TMA's zero fill, not what an earlier tile left there (0 x NaN = NaN). A launch whose V is NaN
// everywhere (every block's V stages full of NaN), then a launch of items of one narrow visit
// (Nk = 5) must come out finite, and right. (The stages keep the first launch's bytes only if the
// GPU leaves shared memory as it was between launches, as it does in practice; where it does not,
// the first check passes either way, and the second still checks the results.)
TEST(ShortTiles, Rung27ItemOfOneNarrowVisitReadsNoStaleRows) {
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k = fl::find_kernel("27");
  if (k == nullptr) GTEST_SKIP() << "rung 27 is not in this build (FL_KERNELS, FL_HOPPER)";
  fl::CublasHandle cublas;
  for (int64_t d : {64, 128, 256}) {
    fl::ProblemSpec stale = spec(fl::DType::f16, d, 512, 512, false);
    stale.batch = 1;
    stale.heads_q = stale.heads_kv = 64;  // 192-256 items of 4-7 KV tiles: every block fills
                                          // both of its V stages with NaN
    stale.with_lse = false;
    const std::string why = fl::why_unsupported(*k, fl::Problem(stale).params());
    if (why.find("compute capability") != std::string::npos) {
      GTEST_SKIP() << "rung 27 needs compute capability 9.0: " << why;
    }
    ASSERT_EQ(why, "");
    fl::Problem nan_v(stale);
    FL_CUDA_CHECK(cudaMemset(nan_v.v.get(), 0xFF, nan_v.v.bytes()));  // fp16 0xFFFF: NaN
    fl::run_kernel(*k, nan_v.params());
    FL_CUDA_CHECK(cudaDeviceSynchronize());

    fl::ProblemSpec one = spec(fl::DType::f16, d, 1000, 5, false);
    one.batch = 1;
    one.heads_q = one.heads_kv = 16;
    fl::Problem problem(one);
    fl::run_kernel(*k, problem.params());
    FL_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> o = problem.output_host();
    int64_t not_finite = 0;
    for (float e : o) not_finite += !std::isfinite(e);
    EXPECT_EQ(not_finite, 0) << "d = " << d << ": " << one.describe();
    expect_passes(*k, {"d" + std::to_string(d) + "_nk5", one}, cublas);
  }
}

// A NaN in K at a key that only the last warp of a slab computes in the split tile (a key of its
// slice of the second KV tile): every row of that KV head's query heads attends to it, so every
// row of the split tile must come out NaN, through the merge into the slab's first warp (and the
// whole tile's rows too); the rows of the other KV head stay finite.
TEST(ShortTiles, NaNInAnotherWarpsKeysReachesTheSplitRows) {
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k = fl::find_kernel("16");
  if (k == nullptr) GTEST_SKIP() << "rung 16 is not in this build (FL_KERNELS)";
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    const Shape s = shape_for(t, 128);
    fl::ProblemSpec ps = spec(t, 128, s.config.br + 5, 4 * s.config.bc, false);
    ps.batch = 1;
    ps.with_lse = false;
    const int64_t nq = ps.seqlen_q, nk = ps.seqlen_k, d = ps.head_dim;
    // Host inputs, small integers / 8 (exact in both dtypes).
    std::vector<float> q(ps.heads_q * nq * d), kk(ps.heads_kv * nk * d), v(ps.heads_kv * nk * d);
    uint64_t x = 12345;
    auto next = [&] {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<float>(static_cast<int>((x >> 33) % 17) - 8) / 8.f;
    };
    for (auto* vec : {&q, &kk, &v}) {
      for (float& e : *vec) e = next();
    }
    // KV head 1, key: the last warp's slice of the second KV tile.
    const int64_t key = s.config.bc + (s.split.split - 1) * s.split.keys + 3;
    kk[(1 * nk + key) * d + 5] = std::numeric_limits<float>::quiet_NaN();
    fl::Problem problem(ps);
    problem.set_inputs(q.data(), kk.data(), v.data());
    fl::run_kernel(*k, problem.params());
    const std::vector<float> o = problem.output_host();
    const int64_t group = ps.heads_q / ps.heads_kv;
    int64_t nan_rows = 0;
    for (int64_t h = 0; h < ps.heads_q; ++h) {
      for (int64_t i = 0; i < nq; ++i) {
        bool all_nan = true, all_finite = true;
        for (int64_t c = 0; c < d; ++c) {
          const float e = o[(h * nq + i) * d + c];
          all_nan = all_nan && std::isnan(e);
          all_finite = all_finite && std::isfinite(e);
        }
        if (h / group == 1) {
          EXPECT_TRUE(all_nan) << fl::to_string(t) << " head " << h << " row " << i;
          nan_rows += all_nan;
        } else {
          EXPECT_TRUE(all_finite) << fl::to_string(t) << " head " << h << " row " << i;
        }
      }
    }
    EXPECT_EQ(nan_rows, group * nq);
  }
}


// Rung 28 (FP8) at the edges of its narrow first visit, 64 keys where rung 27's is 16 (P.V takes
// keys in k32 steps): a last KV tile of 1, 64 and 65 keys (narrow, the widest narrow, whole)
// behind whole ones, and items of one narrow visit (K loaded as 64 rows, V^T whole); causal
// N + 1, a last KV tile of 64 keys causal, and rows that see no key; per d with its tile shape.
// e4m3 inputs with the descales per head and the LSE (the deferred epilogue stores an item's LSE
// while the next item runs, with the scale of the stored item's head), O in fp16 and bf16.
TEST(ShortTiles, Rung28PassesAtEveryEdge) {
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k = fl::find_kernel("28");
  if (k == nullptr) GTEST_SKIP() << "rung 28 is not in this build (FL_KERNELS, FL_HOPPER)";
  fl::CublasHandle cublas;
  int ran = 0;
  for (fl::DType out : {fl::DType::f16, fl::DType::bf16}) {
    for (int64_t d : {64, 128, 256}) {
      const fl::TileShape tile = k->tile(fl::make_params(fl::DType::f16, 1, 1, 1, 1, d));
      const int64_t br = tile.br, bc = tile.bc;
      const fl::DType t = fl::DType::e4m3;
      const std::string ty = "e4m3_" + std::string(fl::to_string(out)) + "_d" +
                             std::to_string(d) + "_";
      std::vector<Case> all = {
          {ty + "kv_tile_1", spec(t, d, br + 1, 2 * bc + 1, false)},
          {ty + "kv_tile_64", spec(t, d, 2 * br - 1, 2 * bc + 64, false)},
          {ty + "kv_tile_65", spec(t, d, br + 65, 2 * bc + 65, false)},
          {ty + "one_narrow_visit", spec(t, d, 1000, 5, false)},
          {ty + "causal_n_plus_1", spec(t, d, 2 * br + 1, 2 * br + 1, true)},
          {ty + "causal_kv_tile_64", spec(t, d, br + 64, 2 * bc + 64, true)},
          {ty + "causal_items_see_no_key", spec(t, d, 2 * br + 5, 3, true)},
      };
      for (Case& c : all) {
        c.spec.out_dtype = out;
        c.spec.descale_per_head = true;
        const std::string why = fl::why_unsupported(*k, fl::Problem(c.spec).params());
        if (why.find("compute capability") != std::string::npos) {
          GTEST_SKIP() << "rung 28 needs compute capability 9.0: " << why;
        }
        ASSERT_EQ(why, "") << c.name << ": rung 28 claims every length";
        expect_passes(*k, c, cublas);
        ++ran;
      }
    }
  }
  EXPECT_EQ(ran, 2 * 3 * 7);
}

}  // namespace
