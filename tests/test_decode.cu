// The serving track's decode rungs (FL_SERVING_FIRST_RUNG on: 37 decode_gqa, 38 decode_split,
// 39 decode_paged, 40 decode_occupancy, 46 decode_combine, 47 decode_pdl, 48 decode_key_warps,
// 49 decode_combine_loads, 50 decode_split_price, 51 decode_combine_one_trip, 52 decode_q_rows,
// 53 decode_page_runs, 56 decode_page_cursor, 57 decode_split_lengths, 58
// decode_cluster_combine, 59 decode_wide_cluster, 60 decode_cluster_push, 61
// decode_cluster_fit, 62 decode_split_waves, here on plain calls; their K/V cache calls are
// tests/test_paged.cu's): a few query rows a sequence against a long K/V cache, the g = H_q /
// H_kv query heads of a KV head packed into the rows of one tile; from 38 on, the keys split
// over several blocks whose partial outputs a second launch merges (from 58 on, two splits
// merge in a thread block cluster instead; from 59 on, two to eight; rung 61 only where the
// call's clusters fit the GPU at once). Every test runs every
// serving rung of the build.
//
//   DecodeRules.*       (CPU) the rule that keeps prefill off the rungs (Nq x g <= 64), their
//                       head dims and grid limits, each refused before any launch with a message
//                       naming the rung and the rule; every shape of the grid below claimed or
//                       refused exactly by that rule; "best" sends decode calls to a serving
//                       rung and prefill calls to the rungs before it; rung 38's split rule
//                       (a table of made-up GPUs, and its properties) and its workspace (the
//                       size, none for one split, a call with less refused by the rule); what
//                       rung 40 tells the rule (one slot an SM for tiles of 32 KiB or more);
//                       rung 50's price of a split (a table, and its properties); rung
//                       57's cut of the longest sequence (every tile once, in order, the
//                       longest's shares even, none empty where its tiles are as many as
//                       the splits); the calls rung 58 merges in a cluster (two splits)
//                       and rung 59 (two to eight), which rung 60 keeps, and rung 61 (those
//                       of them whose clusters fit); rung 62's cut-off for one wave only and
//                       the shared memory of its split launch
//   Decode.*            (GPU) the grid: Nq in {1, 2, 4, 16} x Nk in {1, 7, 64, 100, 1000, 4096,
//                       33000} x H_q / H_kv in {32/8, 8/8, 16/1, 6/2} x causal or not x B in
//                       {1, 3}, for each of fp16/bf16 x d = 64/96/128/192 x both layouts,
//                       every claimed shape through fl::verify (the pass rule against the
//                       fp32 reference, all of O written and finite, the LSE, two runs bitwise
//                       equal); large magnitudes; a NaN in Q, K or V reaches exactly the
//                       outputs that read it (a wrong packing, a head or position mixed up, a
//                       partial merged with the wrong row, breaks these)
//   DecodeSplits.*      (GPU) rows that see no key of a split (causal, one key tile a split),
//                       rows that see no key at all (Nq > Nk: O = 0, LSE = -inf), a long cache
//                       in many splits (B = 1, 32/8, Nk = 131072; rung 40 in its rule's count);
//                       rung 50's short calls in its count on the device; rung 62's grids of
//                       more blocks than SMs split; the workspace poisoned first
//   DecodeLargeShape.*  (GPU, alone) a K/V cache of more than 2^31 elements
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/clusters.h"
#include "common/harness.h"
#include "common/random.h"
#include "common/registry.h"
#include "gpu_test_util.h"
#include "kernels/38_decode_split/splits.h"
#include "kernels/40_decode_occupancy/splits.h"
#include "kernels/50_decode_split_price/splits.h"
#include "kernels/57_decode_split_lengths/splits.h"
#include "kernels/58_decode_cluster_combine/splits.h"
#include "kernels/59_decode_wide_cluster/splits.h"
#include "kernels/60_decode_cluster_push/splits.h"
#include "kernels/61_decode_cluster_fit/splits.h"
#include "kernels/62_decode_split_waves/splits.h"
#include "kernels/63_decode_split_cutoff/splits.h"
#include "kernels/64_decode_price_d96/splits.h"
#include "kernels/65_decode_tiles_d64/splits.h"
#include "kernels/66_decode_half_grid/splits.h"
#include "kernels/67_decode_d96_one_wave/splits.h"
#include "kernels/68_decode_copy_steps/row_copy.h"
#include "kernels/69_decode_rows_two/splits.h"
#include "kernels/73_decode_rows_unsplit/splits.h"
#include "kernels/75_decode_table_alone/splits.h"
#include "kernels/76_decode_ragged_balance/splits.h"

namespace {

constexpr int64_t kNq[] = {1, 2, 4, 16};
constexpr int64_t kNk[] = {1, 7, 64, 100, 1000, 4096, 33000};
constexpr int64_t kHeads[][2] = {{32, 8}, {8, 8}, {16, 1}, {6, 2}};  // H_q, H_kv
constexpr int64_t kBatches[] = {1, 3};
constexpr int64_t kMaxRows = 64;  // rows of the serving rungs' packed tile

namespace split = fl::k38_decode_split;
namespace split40 = fl::k40_decode_occupancy;  // rung 40: the rule, told of big tiles
namespace split50 = fl::k50_decode_split_price;  // rung 50: the price of a split
namespace split57 = fl::k57_decode_split_lengths;  // rung 57: a split's share of the tiles
namespace split58 = fl::k58_decode_cluster_combine;  // rung 58: which calls combine in a cluster
namespace split59 = fl::k59_decode_wide_cluster;     // rung 59: two to eight splits in a cluster
namespace split60 = fl::k60_decode_cluster_push;     // rung 60: rung 59's splits, pushed
namespace split61 = fl::k61_decode_cluster_fit;      // rung 61: a cluster where the clusters fit
namespace split62 = fl::k62_decode_split_waves;      // rung 62: the waves the rule counts
namespace split63 = fl::k63_decode_split_cutoff;     // rung 63: the cut-off for big tiles
namespace split64 = fl::k64_decode_price_d96;        // rung 64: the price at d = 96
namespace split65 = fl::k65_decode_tiles_d64;        // rung 65: tiles of 128 keys at d = 64
namespace split66 = fl::k66_decode_half_grid;        // rung 66: lone blocks past half the SMs
namespace split67 = fl::k67_decode_d96_one_wave;     // rung 67: short d = 96 calls, one wave
namespace copy68 = fl::k68_decode_copy_steps;    // rung 68: copies of eight whole rows
namespace split69 = fl::k69_decode_rows_two;      // rung 69: two slots for blocks of many rows
namespace split73 = fl::k73_decode_rows_unsplit;  // rung 73: one split past the SMs
namespace split75 = fl::k75_decode_table_alone;   // rung 75: room for the block table
namespace split76 = fl::k76_decode_ragged_balance;  // rung 76: the deal of a ragged batch

// The serving rungs from the list of forward rungs (the list lives in the kernels' library:
// reading it here is what links that library's objects into this test).
std::vector<const fl::KernelInfo*> serving_rungs() {
  std::vector<const fl::KernelInfo*> out;
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    if (k->number >= FL_SERVING_FIRST_RUNG) out.push_back(k);
  }
  return out;
}

#define REQUIRE_SERVING_RUNGS(ks)                                                      \
  const std::vector<const fl::KernelInfo*> ks = serving_rungs();                       \
  if (ks.empty()) GTEST_SKIP() << "no serving rung (37 on) in this build (FL_KERNELS)"

// The rungs that split the keys (38 on: the serving rungs with a workspace), or skip.
#define REQUIRE_SPLIT_RUNGS(ks)                                                        \
  std::vector<const fl::KernelInfo*> ks;                                               \
  for (const fl::KernelInfo* k : serving_rungs()) {                                    \
    if (k->workspace != nullptr) ks.push_back(k);                                      \
  }                                                                                    \
  if (ks.empty()) GTEST_SKIP() << "no split rung (38 on) in this build (FL_KERNELS)"

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

// Every shape of the grid below claimed by serving rung k exactly where Nq x g <= 64, refused
// by the rows rule elsewhere.
void expect_grid_claims(const fl::KernelInfo& k) {
  SCOPED_TRACE(k.name());
  int claimed = 0, refused = 0, smem = 0;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (int64_t d : {64, 96, 128, 192}) {
      for (fl::Layout layout : {fl::Layout::BHND, fl::Layout::BNHD}) {
        for (int64_t nq : kNq) {
          for (int64_t nk : kNk) {
            for (const auto& h : kHeads) {
              for (bool causal : {false, true}) {
                const fl::ProblemSpec s = decode_spec(t, 3, h[0], h[1], nq, nk, d, causal, layout);
                const std::string why = fl::why_unsupported(k, fl::placeholder_params(s));
                if (why.find("shared memory per block at d = ") != std::string::npos) {
                  ++smem;  // this GPU's limit (d = 192 needs 216 KiB a block): neither claim
                  continue;
                }
                if (in_contract(nq, h[0], h[1])) {
                  EXPECT_EQ(why, "") << s.describe();
                  ++claimed;
                } else {
                  EXPECT_EQ(why.rfind("kernel " + k.name() + ": " + kRowsRule, 0), 0u)
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
  // 16 query heads over 1 at Nq = 16 (256 rows) is the one refused kind of the grid; with no
  // GPU, or one of 227 KiB a block (H100, H200), every head dim's shapes are claimed or refused.
  EXPECT_EQ(refused + claimed + smem, 2 * 4 * 2 * 4 * 7 * 4 * 2);
  if (smem == 0) {
    EXPECT_EQ(refused, 2 * 4 * 2 * 7 * 2);
    EXPECT_EQ(claimed, 2 * 4 * 2 * (4 * 7 * 4 - 7) * 2);
  }
}

TEST(DecodeRules, TheGridIsClaimedExactlyByTheRowsRule) {
  REQUIRE_SERVING_RUNGS(ks);
  for (const fl::KernelInfo* k : ks) expect_grid_claims(*k);
}

TEST(DecodeRules, RefusalsNameTheRungAndTheRule) {
  REQUIRE_SERVING_RUNGS(ks);
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
      {"d 256", 1, 8, 8, 1, 1000, 256, "head_dim must be 64, 96, 128 or 192 (got 256)"},
      {"d 32", 1, 8, 8, 1, 1000, 32, "head_dim must be 64, 96, 128 or 192 (got 32)"},
      {"d 160", 1, 8, 8, 1, 1000, 160, "head_dim must be 64, 96, 128 or 192 (got 160)"},
      {"B 65536", 65536, 8, 8, 1, 64, 128, "B must be <= 65535"},
      {"Nk 2^30 + 1", 1, 8, 8, 1, (int64_t{1} << 30) + 1, 128, "Nk must be <= 2^30"},
  };
  for (const fl::KernelInfo* k : ks) {
    for (const Bad& c : cases) {
      SCOPED_TRACE(k->name() + ": " + c.name);
      const fl::ProblemSpec s =
          decode_spec(fl::DType::f16, c.b, c.hq, c.hkv, c.nq, c.nk, c.d, false, fl::Layout::BHND);
      const fl::AttnParams p = fl::placeholder_params(s);
      ASSERT_EQ(fl::check_common(p), "") << "each case breaks the rung's own rule alone";
      const std::string why = fl::why_unsupported(*k, p);
      EXPECT_EQ(why.rfind("kernel " + k->name() + ": " + c.rule, 0), 0u) << why;
      try {
        fl::run_kernel(*k, p);  // refused before the launch: no GPU needed
        ADD_FAILURE() << "run_kernel took " << c.name;
      } catch (const fl::UnsupportedError& e) {
        EXPECT_EQ(std::string(e.what()), why);
      }
    }
  }
}

TEST(DecodeRules, TheEdgesOfTheRuleAreClaimed) {
  // 64 rows exactly, in each way of making them, and the least call.
  REQUIRE_SERVING_RUNGS(ks);
  const int64_t shapes[][3] = {{64, 1, 1}, {1, 64, 1}, {16, 32, 8}, {4, 16, 1}, {1, 1, 1}};
  for (const fl::KernelInfo* k : ks) {
    for (const auto& sh : shapes) {
      for (bool causal : {false, true}) {
        const fl::ProblemSpec s = decode_spec(fl::DType::bf16, 1, sh[1], sh[2], sh[0], 5, 128,
                                              causal, fl::Layout::BNHD);
        EXPECT_EQ(fl::why_unsupported(*k, fl::placeholder_params(s)), "")
            << k->name() << " " << s.describe();
      }
    }
  }
}

TEST(DecodeRules, BestSendsDecodeHereAndPrefillElsewhere) {
  // "best" is the highest rung that takes a call: a decode call goes to a serving rung (37 or a
  // later one), a prefill call (more rows than one tile) to a rung before the serving track.
  REQUIRE_SERVING_RUNGS(ks);
  const fl::ProblemSpec decode =
      decode_spec(fl::DType::f16, 1, 32, 8, 1, 4096, 128, true, fl::Layout::BNHD);
  const fl::KernelInfo* best = fl::best_kernel(fl::placeholder_params(decode));
  ASSERT_NE(best, nullptr);
  EXPECT_GE(best->number, FL_SERVING_FIRST_RUNG) << best->name();
  EXPECT_EQ(best, fl::test::last_on_this_device(ks))
      << best->name() << ": the last serving rung this device runs takes every decode call";
  const fl::ProblemSpec prefill =
      decode_spec(fl::DType::f16, 1, 32, 8, 512, 4096, 128, true, fl::Layout::BNHD);
  best = fl::best_kernel(fl::placeholder_params(prefill));
  ASSERT_NE(best, nullptr);
  EXPECT_LT(best->number, FL_SERVING_FIRST_RUNG) << best->name();
}

TEST(DecodeRules, TileIsTheRowsTheBlockComputes) {
  // Nq x g rounded up to whole warps of 16 rows (the padding warps skip the math); 64 keys.
  REQUIRE_SERVING_RUNGS(ks);
  const int64_t shapes[][4] = {// Nq, H_q, H_kv, rows
                               {1, 8, 8, 16},  {1, 32, 8, 16}, {4, 32, 8, 16}, {5, 32, 8, 32},
                               {16, 6, 2, 48}, {2, 16, 1, 32}, {16, 32, 8, 64}};
  for (const fl::KernelInfo* k : ks) {
    for (const auto& sh : shapes) {
      const fl::ProblemSpec s =
          decode_spec(fl::DType::f16, 1, sh[1], sh[2], sh[0], 100, 128, false, fl::Layout::BHND);
      const fl::TileShape tile = k->tile(fl::placeholder_params(s));
      EXPECT_EQ(tile.br, sh[3]) << k->name() << " " << s.describe();
      EXPECT_EQ(tile.bc, 64) << k->name() << " " << s.describe();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// CPU: rung 38's split rule and its workspace
// ---------------------------------------------------------------------------------------------

// eff(s) = w / ceil(w), w = blocks s / slots: the share of the slots the waves of s splits use.
double wave_efficiency(int64_t blocks, int64_t slots, int s) {
  const double w = static_cast<double>(blocks) * s / static_cast<double>(slots);
  return w / std::ceil(w);
}

TEST(DecodeRules, SplitRuleTable) {
  // Made-up GPUs (SMs x blocks an SM holds) and grids; each answer worked out by hand from the
  // rule (splits.h): w = blocks s / slots waves, eff = w / ceil(w), the smallest s with eff >= 85%
  // of the best over s = 1 .. min(128, SMs, key tiles).
  struct Case {
    int64_t blocks;
    int sms, per_sm;
    int64_t tiles;
    int want;
    const char* why;
  };
  const Case cases[] = {
      {8, 132, 1, 2048, 15, "eff = 8 s / 132 under a wave, >= 0.85 (2 waves at 33) from 15"},
      {8, 132, 3, 2048, 43, "396 slots: eff = 8 s / 396 >= 0.85 (2 waves at 99) from 43"},
      {105, 132, 1, 2048, 5, "79.5% of a wave: 5 splits make 3.98 waves, eff 0.994"},
      {106, 132, 1, 2048, 1, "80.3% of the slots: the grid fills the GPU"},
      {512, 132, 1, 2048, 1, "several waves already"},
      {1, 132, 1, 5, 5, "5 tiles: eff = s / 132, the best at s = 5, 85% of it from 4.25"},
      {1, 132, 1, 4, 1, "4 tiles: never split"},
      {1, 132, 1, 20, 17, "20 tiles: 85% of 20 is 17"},
      {2, 8, 1, 1000, 4, "8 SMs: 4 splits make one full wave, the first eff of 1"},
      {1, 200, 1, 100000, 109, "at most 128 splits: eff = s / 200, 85% of 128 is 108.8"},
      {3, 4, 1, 1000, 4, "3 of 4 slots (75%): at most 4 splits (the SMs), 4 make 3 full waves"},
      {8, 0, 0, 2048, 1, "no device (no SMs): one split"},
      {0, 132, 1, 2048, 1, "no blocks"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(split::choose_splits(c.blocks, c.sms, c.per_sm, c.tiles), c.want)
        << c.blocks << " blocks, " << c.sms << " SMs x " << c.per_sm << ", " << c.tiles
        << " tiles: " << c.why;
  }
}

TEST(DecodeRules, SplitRuleProperties) {
  // Over a sweep of made-up GPUs and grids: 1 split where the grid fills 80% of the slots or the
  // keys are 4 tiles or fewer; never more splits than key tiles, SMs or 128; the splits' eff
  // within 85% of the best (checked here in floating point, the rule works in integers), and
  // no smaller count of splits is.
  int split_grids = 0;
  for (int sms : {1, 7, 46, 80, 108, 132, 144}) {
    for (int per_sm : {1, 2, 3, 4}) {
      const int64_t slots = int64_t{sms} * per_sm;
      for (int64_t blocks = 1; blocks <= 2 * slots; ++blocks) {
        for (int64_t tiles : {1, 4, 5, 6, 9, 17, 64, 200, 2048, 16777216}) {
          const int s = split::choose_splits(blocks, sms, per_sm, tiles);
          const std::string where = std::to_string(blocks) + " blocks, " + std::to_string(sms) +
                                    " SMs x " + std::to_string(per_sm) + ", " +
                                    std::to_string(tiles) + " tiles -> " + std::to_string(s);
          ASSERT_GE(s, 1) << where;
          if (blocks * 10 >= slots * 8 || tiles <= 4) {
            ASSERT_EQ(s, 1) << where;
            continue;
          }
          const int most = static_cast<int>(std::min<int64_t>({128, sms, tiles}));
          ASSERT_LE(s, most) << where;
          double best = 0.0;
          for (int t = 1; t <= most; ++t) best = std::max(best, wave_efficiency(blocks, slots, t));
          ASSERT_GE(wave_efficiency(blocks, slots, s), 0.85 * best - 1e-12) << where;
          for (int t = 1; t < s; ++t) {
            ASSERT_LT(wave_efficiency(blocks, slots, t), 0.85 * best + 1e-12) << where << ", " << t;
          }
          if (s > 1) ++split_grids;
        }
      }
    }
  }
  EXPECT_GT(split_grids, 1000) << "the sweep must reach grids that split";
}

// Rung 50's count for a grid of `blocks` blocks over `tiles` key tiles of `tile_bytes` (K and V)
// on a GPU of `sms` SMs, one slot an SM for big tiles (rung 40).
int rung50_splits(int64_t blocks, int sms, int per_sm, int64_t tiles, int64_t tile_bytes,
                  int64_t rows = 4) {
  const int waves = split50::choose_splits(
      blocks, sms, split50::split_slots_per_sm(tile_bytes, per_sm), tiles);
  return split50::price_splits(waves, blocks, sms, tiles, tile_bytes, rows);
}

TEST(DecodeRules, Rung50PricesASplit) {
  // Each answer worked out by hand from splits.h on 132 SMs (an H100): half = floor(66 /
  // blocks) splits put one block on half the SMs; a short call (a block of `half` splits reads
  // <= 256 KiB, or <= 1 MiB with no split) takes them, else rung 40's count. d = 128: a tile of
  // K and V is 32 KiB, 64 keys. One query row of GQA 32/8 (4 rows a block) unless noted.
  constexpr int64_t kTile128 = 2 * 64 * 128 * 2, kTile192 = 2 * 64 * 192 * 2,
                    kTile64 = 2 * 64 * 64 * 2;
  struct Case {
    int64_t blocks, tiles, tile_bytes;
    int want;
    const char* why;
  };
  const Case cases[] = {
      {8, 16, kTile128, 8, "B = 1, GQA 32/8, Nk = 1024: 8 splits of 2 tiles (64 KiB), not 14"},
      {8, 64, kTile128, 8, "Nk = 4096: 8 splits of 8 tiles, 256 KiB: still short"},
      {8, 65, kTile128, 15, "Nk = 4160: 9 tiles (288 KiB) a block: rung 40's 15"},
      {8, 128, kTile128, 15, "Nk = 8192: 512 KiB a block: rung 40's 15"},
      {64, 16, kTile128, 1, "B = 8, GQA, Nk = 1024: 64 blocks fill half; 512 KiB each: no split"},
      {64, 32, kTile128, 1, "Nk = 2048: 1 MiB a block, the most a lone block may read"},
      {64, 33, kTile128, 2, "Nk = 2112: past 1 MiB, rung 40's 2"},
      {32, 16, kTile128, 2, "B = 1, MHA, Nk = 1024: 2 splits of 256 KiB, not 4"},
      {32, 32, kTile128, 4, "Nk = 2048: 512 KiB a block at 2: rung 40's 4"},
      {1, 256, kTile128, 66, "MQA, B = 1, Nk = 16384: 66 splits of 4 tiles, not 109"},
      {106, 16, kTile128, 1, "rung 40's rule: the grid fills the GPU"},
      {8, 16, kTile192, 8, "d = 192 (48 KiB tiles): 8 splits of 96 KiB"},
      {8, 48, kTile192, 15, "d = 192, Nk = 3072: 6 tiles a block, 288 KiB: rung 40's 15"},
      {8, 16, kTile64, 14, "d = 64: small tiles keep rung 40's count (3 slots an SM: 14)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(rung50_splits(c.blocks, 132, c.tile_bytes == kTile64 ? 3 : 2, c.tiles,
                            c.tile_bytes),
              c.want)
        << c.blocks << " blocks, " << c.tiles << " tiles of " << c.tile_bytes << " bytes: "
        << c.why;
  }
  EXPECT_EQ(rung50_splits(8, 132, 2, 16, kTile128, 16), 8) << "16 rows: one warp's";
  EXPECT_EQ(rung50_splits(8, 132, 2, 16, kTile128, 17), 14) << "17 rows: rung 40's count";
  EXPECT_EQ(rung50_splits(8, 132, 2, 16, kTile128, 64), 14) << "GQA 32/8, Nq = 16: 64 rows";
  EXPECT_EQ(split50::price_splits(15, 8, 0, 16, kTile128, 4), 15) << "no device: the count given";
}

TEST(DecodeRules, Rung50PriceProperties) {
  // Over made-up GPUs and grids: never more splits than rung 40's count, which is kept for small
  // tiles and for blocks of more than 16 rows; wherever the count differs it is floor(SMs / 2 /
  // blocks) (at least 1), whose blocks read no more than 256 KiB each (1 MiB where it is 1).
  int cut = 0;
  for (int sms : {7, 46, 108, 132, 144}) {
    for (int64_t blocks = 1; blocks <= sms; ++blocks) {
      for (int64_t tiles : {1, 5, 8, 9, 16, 17, 32, 33, 64, 256, 2048}) {
        for (int64_t d : {64, 96, 128, 192}) {
          const int64_t tile_bytes = 2 * 64 * d * 2;
          const int per_sm = d == 64 ? 3 : 2;
          const int waves = split50::choose_splits(
              blocks, sms, split50::split_slots_per_sm(tile_bytes, per_sm), tiles);
          const int s = rung50_splits(blocks, sms, per_sm, tiles, tile_bytes);
          ASSERT_EQ(rung50_splits(blocks, sms, per_sm, tiles, tile_bytes, 32), waves);
          const std::string where = std::to_string(blocks) + " blocks, " + std::to_string(sms) +
                                    " SMs, " + std::to_string(tiles) + " tiles, d = " +
                                    std::to_string(d) + " -> " + std::to_string(s);
          ASSERT_GE(s, 1) << where;
          ASSERT_LE(s, waves) << where;
          if (d <= 96) ASSERT_EQ(s, waves) << where;
          if (s == waves) continue;
          ASSERT_EQ(s, std::max<int64_t>(1, sms / 2 / blocks)) << where;
          const int64_t chunk = (tiles + s - 1) / s * tile_bytes;
          ASSERT_LE(chunk, s == 1 ? 1024 * 1024 : 256 * 1024) << where;
          ++cut;
        }
      }
    }
  }
  EXPECT_GT(cut, 100) << "the sweep must reach calls whose count is cut back";
}

TEST(DecodeRules, Rung40TellsTheRuleOfOneSlotAnSMForBigTiles) {
  // Rung 40 keeps rung 38's rule (the same answers) and changes what it is told: a tile of K and
  // V of 32 KiB or more (64 keys at d >= 128) makes 1 slot an SM, whatever an SM holds, and
  // its ring 3 stages; a smaller tile keeps the blocks an SM holds and 4 stages.
  for (int sms : {7, 132}) {
    for (int64_t blocks = 1; blocks <= 2 * sms; ++blocks) {
      for (int per_sm : {1, 2, 3}) {
        ASSERT_EQ(split40::choose_splits(blocks, sms, per_sm, 2048),
                  split::choose_splits(blocks, sms, per_sm, 2048));
      }
    }
  }
  const int64_t tile_bytes[] = {2 * 64 * 64 * 2, 2 * 64 * 96 * 2, 2 * 64 * 128 * 2,
                                2 * 64 * 192 * 2};  // d = 64, 96, 128, 192
  const int want_slots[] = {3, 2, 1, 1}, want_stages[] = {4, 4, 3, 3};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(split40::split_slots_per_sm(tile_bytes[i], i == 0 ? 3 : 2), want_slots[i]) << i;
    EXPECT_EQ(split40::ring_stages(tile_bytes[i]), want_stages[i]) << i;
  }
  EXPECT_EQ(split40::split_slots_per_sm(32768, 0), 0) << "no device: nothing to fill";
  // B = 1, 8 KV heads, 2048 key tiles, d = 128 on 132 SMs holding two blocks each: told of two
  // slots the rule takes 29 splits (232 blocks over 264 slots), told of one 15 (120 blocks).
  EXPECT_EQ(split::choose_splits(8, 132, 2, 2048), 29);
  EXPECT_EQ(split40::choose_splits(8, 132, split40::split_slots_per_sm(32768, 2), 2048), 15);
  // B = 8 (64 blocks): 4 splits told of two slots, 2 told of one.
  EXPECT_EQ(split::choose_splits(64, 132, 2, 2048), 4);
  EXPECT_EQ(split40::choose_splits(64, 132, 1, 2048), 2);
}

TEST(DecodeRules, Rung57CutsTheLongestSequence) {
  // Rung 57's split s of S takes the tiles [s T / S, (s + 1) T / S) of T, the batch's longest
  // sequence's tiles, cut at its own sequence's n <= T. The shares follow each other from tile
  // 0 to tile n; for the longest (n = T) they differ by one tile at most, and none is empty
  // where T >= S. With T the capacity's tiles this is rung 56's cut, which left a batch shorter
  // than its cache in its first splits: the case at the end.
  for (int splits = 1; splits <= 130; ++splits) {
    for (int longest : {0, 1, 2, 5, 7, 63, 64, 129, 2047, 2048}) {
      for (int tiles : {longest, longest / 2, longest / 3, 1, 0}) {
        if (tiles > longest) continue;
        int next = 0, least = tiles, most = 0;
        for (int s = 0; s < splits; ++s) {
          const split57::SplitTiles t = split57::split_tiles(s, splits, longest, tiles);
          ASSERT_GE(t.end, t.first);
          if (t.end > t.first) {  // a share: it starts where the last one ended
            ASSERT_EQ(t.first, next)
                << splits << " splits, " << longest << " / " << tiles << " tiles, split " << s;
            next = t.end;
          }
          least = std::min(least, t.end - t.first);
          most = std::max(most, t.end - t.first);
        }
        EXPECT_EQ(next, tiles) << splits << " splits, " << longest << " / " << tiles;
        if (tiles == longest) {
          EXPECT_LE(most - least, 1) << splits << " splits, " << tiles << " tiles";
          if (tiles >= splits) EXPECT_GE(least, 1) << splits << " splits, " << tiles;
        }
      }
    }
  }
  // B = 1, GQA 32/8, d = 128, a cache of 131072 keys (2048 tiles) on 132 SMs: 15 splits. A
  // sequence of 2048 keys (32 tiles) gets 2-3 tiles a split; cut from the capacity's tiles
  // (136-137 a split) it filled split 0 alone.
  const int splits = split57::price_splits(
      split57::choose_splits(8, 132, split57::split_slots_per_sm(32768, 2), 2048), 8, 132, 2048,
      32768, 4);
  ASSERT_EQ(splits, 15);
  for (int s = 0; s < splits; ++s) {
    const split57::SplitTiles t = split57::split_tiles(s, splits, 32, 32);
    EXPECT_GE(t.end - t.first, 2) << s;
    EXPECT_LE(t.end - t.first, 3) << s;
    const split57::SplitTiles cap = split57::split_tiles(s, splits, 2048, 32);
    EXPECT_EQ(cap.end > cap.first, s == 0) << s;
  }
}

TEST(DecodeRules, Rung58MergesTwoSplitsInACluster) {
  // A call of two splits merges them in a cluster where the GPU has clusters; one split has
  // nothing to merge, and more, or a GPU without clusters, keep rung 57's combine kernel. The
  // rule and the count of splits are rung 57's: only where the merge happens changes.
  for (int splits = 0; splits <= 130; ++splits) {
    EXPECT_EQ(split58::combines_in_cluster(splits, true), splits == 2) << splits;
    EXPECT_FALSE(split58::combines_in_cluster(splits, false)) << splits;
  }
  for (int64_t blocks : {1, 8, 24, 64}) {
    for (int64_t tiles : {4, 16, 64, 2048}) {
      EXPECT_EQ(split58::price_splits(split58::choose_splits(blocks, 132, 1, tiles), blocks, 132,
                                      tiles, 32768, 4),
                split57::price_splits(split57::choose_splits(blocks, 132, 1, tiles), blocks, 132,
                                      tiles, 32768, 4))
          << blocks << " blocks, " << tiles << " tiles";
    }
  }
}

TEST(DecodeRules, Rung59MergesTwoToEightSplitsInACluster) {
  // A call of two to eight splits merges them in a cluster where the GPU has clusters (eight: the
  // most blocks a cluster may portably have); one split has nothing to merge, and more, or a GPU
  // without clusters, keep rung 57's combine kernel. The count of splits is rung 57's, and the
  // workspace is asked only where the combine kernel runs.
  for (int splits = 0; splits <= 130; ++splits) {
    EXPECT_EQ(split59::combines_in_cluster(splits, true), splits >= 2 && splits <= 8) << splits;
    EXPECT_FALSE(split59::combines_in_cluster(splits, false)) << splits;
    EXPECT_EQ(split59::split_workspace_bytes(splits, 1, 32, 1, 128),
              split57::split_workspace_bytes(splits, 1, 32, 1, 128))
        << splits;
  }
  for (int64_t blocks : {1, 8, 24, 64}) {
    for (int64_t tiles : {4, 16, 64, 2048}) {
      EXPECT_EQ(split59::price_splits(split59::choose_splits(blocks, 132, 1, tiles), blocks, 132,
                                      tiles, 32768, 4),
                split57::price_splits(split57::choose_splits(blocks, 132, 1, tiles), blocks, 132,
                                      tiles, 32768, 4))
          << blocks << " blocks, " << tiles << " tiles";
    }
  }
  // The shortest call of the sweep (B = 1, GQA 32/8, 1024 keys: 8 blocks over 16 tiles) takes 8
  // splits on an H100's 132 SMs: rung 58 sends them to the combine kernel, rung 59 merges them
  // in a cluster.
  const int shortest = split59::price_splits(split59::choose_splits(8, 132, 1, 16), 8, 132, 16,
                                             32768, 4);
  EXPECT_EQ(shortest, 8);
  EXPECT_FALSE(split58::combines_in_cluster(shortest, true));
  EXPECT_TRUE(split59::combines_in_cluster(shortest, true));
}

// A later rung's split count and workspace (its splits.h's choose_splits, price_splits and
// split_workspace_bytes) equal rung 59's: every split count up to 130, and a table of grids.
template <typename Choose, typename Price, typename Workspace>
void expect_rung59_splits(Choose choose, Price price, Workspace workspace) {
  for (int splits = 0; splits <= 130; ++splits) {
    EXPECT_EQ(workspace(splits, 1, 32, 1, 128),
              split59::split_workspace_bytes(splits, 1, 32, 1, 128))
        << splits;
  }
  for (int64_t blocks : {1, 8, 24, 64}) {
    for (int64_t tiles : {4, 16, 64, 2048}) {
      EXPECT_EQ(price(choose(blocks, 132, 1, tiles), blocks, 132, tiles, 32768, 4),
                split59::price_splits(split59::choose_splits(blocks, 132, 1, tiles), blocks, 132,
                                      tiles, 32768, 4))
          << blocks << " blocks, " << tiles << " tiles";
    }
  }
}
#define RUNG_SPLITS(ns)                                                          \
  [](auto... a) { return ns::choose_splits(a...); },                             \
      [](auto... a) { return ns::price_splits(a...); },                          \
      [](auto... a) { return ns::split_workspace_bytes(a...); }

TEST(DecodeRules, Rung60KeepsRung59sSplitsAndClusters) {
  // Rung 60 changes how a cluster's blocks pass their partials, not which calls split or merge in
  // a cluster: rung 59's counts, clusters and workspace.
  for (int splits = 0; splits <= 130; ++splits) {
    for (bool clusters : {true, false}) {
      EXPECT_EQ(split60::combines_in_cluster(splits, clusters),
                split59::combines_in_cluster(splits, clusters))
          << splits;
    }
  }
  expect_rung59_splits(RUNG_SPLITS(split60));
}

TEST(DecodeRules, Rung61MergesInAClusterOnlyWhereTheClustersFit) {
  // Rung 61 merges rung 59's calls in a cluster only where the call's clusters (B x H_kv) are no
  // more than those the GPU runs at once, one block an SM (`fit`; 0 without clusters).
  for (int splits = 0; splits <= 130; ++splits) {
    for (int64_t clusters : {1, 8, 31, 32, 33, 64, 2048}) {
      for (int fit : {0, 1, 16, 32, 66}) {
        EXPECT_EQ(split61::combines_in_cluster(splits, clusters, fit),
                  split59::combines_in_cluster(splits, true) && clusters <= fit)
            << splits << " splits, " << clusters << " clusters, " << fit << " fit";
      }
    }
  }
  expect_rung59_splits(RUNG_SPLITS(split61));
}

// Rung 62's count's efficiency against rung 38's definition: eff(s) = blocks s / (slots
// ceil(blocks s / slots)), compared in integers: whether eff(a) >= pct% of eff(b).
bool eff_at_least(int64_t blocks, int64_t slots, int a, int b, int pct) {
  const int64_t num_a = blocks * a, den_a = slots * ((blocks * a + slots - 1) / slots);
  const int64_t num_b = blocks * b, den_b = slots * ((blocks * b + slots - 1) / slots);
  return 100 * num_a * den_b >= pct * num_b * den_a;
}

TEST(DecodeRules, Rung62WeighsGridsPastOneWaveAndLaunchesBigTilesAlone) {
  // Rung 62's rule is rung 59's wherever the grid is one wave or less (blocks <= slots). Past one
  // wave it has no cut-off: its count is the smallest s whose eff is at least 85% of every
  // other count's, where rung 59 took one split for any grid of 80% of the slots or more.
  for (int sms : {7, 132}) {
    for (int per_sm : {1, 2}) {
      const int64_t slots = int64_t{sms} * per_sm;
      for (int64_t blocks = 1; blocks <= 3 * slots; ++blocks) {
        for (int64_t tiles : {4, 5, 64, 2048}) {
          const int s = split62::choose_splits(blocks, sms, per_sm, tiles);
          const int old = split59::choose_splits(blocks, sms, per_sm, tiles);
          if (blocks <= slots || tiles < 5) {
            ASSERT_EQ(s, old) << blocks << " blocks, " << tiles << " tiles, " << sms << " SMs";
            continue;
          }
          ASSERT_EQ(old, 1);
          const int most = static_cast<int>(std::min<int64_t>({128, sms, tiles}));
          ASSERT_GE(s, 1);
          ASSERT_LE(s, most);
          for (int t = 1; t <= most; ++t) {
            ASSERT_TRUE(eff_at_least(blocks, slots, s, t, 85)) << blocks << " blocks: " << s
                                                               << " against " << t;
          }
          for (int r = 1; r < s; ++r) {  // a smaller count falls below 85% of some count
            bool below = false;
            for (int t = 1; t <= most; ++t) below |= !eff_at_least(blocks, slots, r, t, 85);
            ASSERT_TRUE(below) << blocks << " blocks: " << r << " would do";
          }
        }
      }
    }
  }
  // MHA 32/32 at d = 128 (one slot an SM on 132 SMs, 64 tiles of 4096 keys): B = 5 and 6 (160
  // and 192 blocks) take 3 and 2 splits, as rung 50's price leaves them; B = 8 (256 blocks, 97%
  // of two waves) one.
  const int want[][2] = {{160, 3}, {192, 2}, {256, 1}};
  for (const auto& w : want) {
    const int s = split62::choose_splits(w[0], 132, 1, 64);
    EXPECT_EQ(split62::price_splits(s, w[0], 132, 64, 32768, 1), w[1]) << w[0] << " blocks";
    EXPECT_EQ(split59::choose_splits(w[0], 132, 1, 64), 1) << w[0] << " blocks";
  }
  // The split launch's shared memory: `alone` (more than half an SM) for big tiles whose kernel
  // asks less (d = 128: 112 KiB) where a split reads 1 MiB of K and V or more (32 tiles at d =
  // 128), the kernel's own for shorter chunks, at d = 192 (168 KiB), at d = 64 and 96, and
  // without a figure.
  const int alone = 115 * 1024;
  const int64_t t64 = 2 * 64 * 64 * 2, t96 = 2 * 64 * 96 * 2, t128 = 2 * 64 * 128 * 2,
                t192 = 2 * 64 * 192 * 2;
  EXPECT_EQ(split62::split_launch_smem(t128, 32, 112 * 1024, alone), alone);
  EXPECT_EQ(split62::split_launch_smem(t128, 2048, 112 * 1024, alone), alone);
  EXPECT_EQ(split62::split_launch_smem(t128, 31, 112 * 1024, alone), 112 * 1024);
  EXPECT_EQ(split62::split_launch_smem(t128, 1, 112 * 1024, alone), 112 * 1024);
  EXPECT_EQ(split62::split_launch_smem(t192, 2048, 168 * 1024, alone), 168 * 1024);
  EXPECT_EQ(split62::split_launch_smem(t96, 2048, 108 * 1024, alone), 108 * 1024);
  EXPECT_EQ(split62::split_launch_smem(t64, 2048, 72 * 1024, alone), 72 * 1024);
  EXPECT_EQ(split62::split_launch_smem(t128, 2048, 112 * 1024, 0), 112 * 1024);
  // Its clusters and workspace are rung 61's.
  for (int splits = 0; splits <= 130; ++splits) {
    for (int64_t clusters : {1, 31, 32, 2048}) {
      for (int fit : {0, 30, 66}) {
        EXPECT_EQ(split62::combines_in_cluster(splits, clusters, fit),
                  split61::combines_in_cluster(splits, clusters, fit));
      }
    }
    EXPECT_EQ(split62::split_workspace_bytes(splits, 5, 32, 1, 128),
              split59::split_workspace_bytes(splits, 5, 32, 1, 128));
  }
}

TEST(DecodeRules, Rung63CutsAOneWaveGridAtSixtyPercentAtD128) {
  // Rung 63's rule is rung 62's but for one-wave grids at d = 128: one split from 60% of the
  // slots (one an SM), where rung 62 split up to 80%. Other head dims keep 80%.
  const int64_t t128 = 2 * 64 * 128 * 2, t192 = 2 * 64 * 192 * 2, t96 = 2 * 64 * 96 * 2;
  EXPECT_EQ(split63::cut_pct(t128), 60);
  EXPECT_EQ(split63::cut_pct(t192), 80);
  EXPECT_EQ(split63::cut_pct(t96), 80);
  EXPECT_EQ(split63::cut_pct(2 * 64 * 64 * 2), 80);
  for (int sms : {7, 132}) {
    for (int per_sm : {1, 2}) {
      const int64_t slots = int64_t{sms} * per_sm;
      for (int64_t blocks = 1; blocks <= 3 * slots; ++blocks) {
        for (int64_t tiles : {4, 5, 64, 2048}) {
          ASSERT_EQ(split63::choose_splits(blocks, sms, per_sm, tiles, 80),
                    split62::choose_splits(blocks, sms, per_sm, tiles))
              << blocks << " blocks, " << tiles << " tiles";
          const int s = split63::choose_splits(blocks, sms, per_sm, tiles, 60);
          if (blocks <= slots && blocks * 10 >= slots * 6) {
            ASSERT_EQ(s, 1) << blocks << " blocks of " << slots << " slots";
          } else {
            ASSERT_EQ(s, split62::choose_splits(blocks, sms, per_sm, tiles)) << blocks << " blocks";
          }
        }
      }
    }
  }
  // On 132 SMs at d = 128 (one slot an SM): 80 blocks (GQA 32/8 at B = 10) and 96 (MHA at B = 3)
  // are whole, 72 (GQA at B = 9) still split; rung 62 split all three.
  for (int64_t blocks : {72, 80, 96, 104}) {
    const int s63 = split63::choose_splits(blocks, 132, 1, 64, split63::cut_pct(t128));
    const int s62 = split62::choose_splits(blocks, 132, 1, 64);
    EXPECT_GT(s62, 1) << blocks << " blocks";
    EXPECT_EQ(s63, blocks >= 80 ? 1 : s62) << blocks << " blocks";
  }
  // The sweep's shapes (B = 1, 8, 64; 8 or 32 KV heads; 1024-131072 keys; Nq = 1 and 16; d =
  // 128 on 132 SMs) take rung 62's counts: none has 80-105 blocks, where the two rules differ.
  for (int64_t b : {1, 8, 64}) {
    for (int64_t hkv : {8, 32}) {
      for (int64_t nk : {1024, 4096, 8192, 32768, 131072}) {
        for (int64_t rows : {32 / hkv, 16 * 32 / hkv}) {
          const int64_t blocks = b * hkv, tiles = nk / 64;
          const int w63 = split63::choose_splits(blocks, 132, 1, tiles, split63::cut_pct(t128));
          const int w62 = split62::choose_splits(blocks, 132, 1, tiles);
          EXPECT_EQ(split63::price_splits(w63, blocks, 132, tiles, t128, rows),
                    split62::price_splits(w62, blocks, 132, tiles, t128, rows))
              << "B = " << b << ", H_kv = " << hkv << ", Nk = " << nk;
        }
      }
    }
  }
}

TEST(DecodeRules, Rung64PricesASplitAtD96) {
  // Rung 64's rule is rung 63's but for rung 50's price, which now holds for tiles of 24 KiB
  // (d = 96) as for big ones: at every other head dim the two counts are equal, and at d = 96
  // they differ only where the price cuts a call of one warp's rows back (a count below rung
  // 63's). The waves' count is the same function, and d = 96 keeps its slots.
  const int64_t t64 = 2 * 64 * 64 * 2, t96 = 2 * 64 * 96 * 2, t128 = 2 * 64 * 128 * 2,
                t192 = 2 * 64 * 192 * 2;
  EXPECT_EQ(split64::split_slots_per_sm(t96, 2), 2);
  EXPECT_EQ(split64::split_slots_per_sm(t128, 2), 1);
  EXPECT_EQ(split64::ring_stages(t96), 4);
  for (int sms : {7, 132}) {
    for (int64_t blocks : {1, 2, 3, 8, 16, 32, 64, 96, 128, 256, 512}) {
      for (int64_t tiles : {1, 4, 5, 16, 32, 64, 128, 512, 2048}) {
        for (int64_t rows : {1, 4, 8, 16, 17, 64}) {
          for (int64_t tb : {t64, t96, t128, t192}) {
            const int per_sm = split64::split_slots_per_sm(tb, 2);
            const int w = split64::choose_splits(blocks, sms, per_sm, tiles, split64::cut_pct(tb));
            ASSERT_EQ(w, split63::choose_splits(blocks, sms, per_sm, tiles, split63::cut_pct(tb)));
            const int s64 = split64::price_splits(w, blocks, sms, tiles, tb, rows, 2);
            const int s63 = split63::price_splits(w, blocks, sms, tiles, tb, rows);
            if (tb != t96) {
              ASSERT_EQ(s64, s63) << blocks << " blocks, " << tiles << " tiles, d = " << tb / 256;
            } else {
              ASSERT_EQ(s63, w) << "rung 63 does not price d = 96";
              ASSERT_LE(s64, w);
              if (rows > 16) ASSERT_EQ(s64, w) << "64 rows a block are not priced";
              if (s64 < w) {
                ASSERT_EQ(s64, std::max<int64_t>(1, sms / 2 / blocks)) << "half the SMs";
              }
              if (s64 == 1 && w > 1 && blocks > 2 * sms) {  // one split past a wave
                ASSERT_GE(blocks, 4 * sms) << "two waves of two blocks an SM at least";
                ASSERT_LE(blocks % (2 * sms), 2 * sms / 6) << "a last wave of a sixth of the slots";
              }
            }
          }
        }
      }
    }
  }
  // On 132 SMs at d = 96 (two blocks an SM), one query row: GQA 32/8 at B = 1 with 1024 and 4096
  // keys takes 8 splits where rung 63 took 14 and 29, and keeps 29 at 8192 (a block of 8 splits
  // would read 384 KiB); MHA at B = 1 with 1024 keys 2 (rung 63: 7); GQA at B = 8 with 1024 keys
  // one (rung 63: 4); GQA with 16 query rows (64 rows a block) rung 63's 14. Past one wave of
  // 264 slots, GQA with 1024 keys: at B = 40 (320 blocks, 1.2 waves) rung 63's 3, at B = 67 (536
  // blocks, a last wave of 8) one, at B = 76 (608, a last wave of 80) rung 63's 2.
  struct Call {
    int64_t blocks, nk, rows;
    int r63, r64;
  };
  for (const Call& c : {Call{8, 1024, 4, 14, 8}, Call{8, 4096, 4, 29, 8}, Call{8, 8192, 4, 29, 29},
                        Call{32, 1024, 1, 7, 2}, Call{64, 1024, 4, 4, 1}, Call{8, 1024, 64, 14, 14},
                        Call{320, 1024, 4, 3, 3}, Call{536, 1024, 4, 3, 1},
                        Call{608, 1024, 4, 2, 2}}) {
    const int64_t tiles = c.nk / 64;
    const int w = split64::choose_splits(c.blocks, 132, 2, tiles, split64::cut_pct(t96));
    EXPECT_EQ(split63::price_splits(w, c.blocks, 132, tiles, t96, c.rows), c.r63)
        << c.blocks << " blocks, " << c.nk << " keys";
    EXPECT_EQ(split64::price_splits(w, c.blocks, 132, tiles, t96, c.rows, 2), c.r64)
        << c.blocks << " blocks, " << c.nk << " keys";
  }
}

TEST(DecodeRules, Rung65TilesOf128KeysAtD64) {
  // Rung 65's tiles hold 128 keys at d = 64 for a block whose rows fit one warp (the key warps)
  // where a tile lies in one page (no table, or pages of a multiple of 128 keys), and 64 for
  // more rows, smaller pages and the other head dims. Such a d = 64 tile is 32 KiB of K and V,
  // d = 128's, and every rule that reads a tile's bytes takes it as d = 128's: three stages, one
  // slot an SM, the 60% cut-off, the price, the launch alone for long chunks. The rules are rung
  // 64's: given the same tile bytes, the same counts.
  for (int64_t page : {0, 128, 256, 384, 1024}) {
    EXPECT_EQ(split65::tile_keys(64, true, page), 128) << page;
    EXPECT_EQ(split65::tile_keys(64, false, page), 64) << page;
  }
  for (int64_t page : {16, 48, 64, 192, 272}) {
    EXPECT_EQ(split65::tile_keys(64, true, page), 64) << page;
  }
  for (int64_t d : {96, 128, 192}) {
    EXPECT_EQ(split65::tile_keys(d, true, 0), 64) << d;
    EXPECT_EQ(split65::tile_keys(d, false, 256), 64) << d;
  }
  auto tile_bytes = [](int64_t d, bool key_warps) {
    return 2 * split65::tile_keys(d, key_warps, 0) * d * 2;
  };
  EXPECT_EQ(tile_bytes(64, true), tile_bytes(128, true));
  EXPECT_EQ(split65::ring_stages(tile_bytes(64, true)), 3);
  EXPECT_EQ(split65::ring_stages(tile_bytes(64, false)), 4);
  EXPECT_EQ(split65::split_slots_per_sm(tile_bytes(64, true), 2), 1);
  EXPECT_EQ(split65::split_slots_per_sm(tile_bytes(64, false), 3), 3);
  EXPECT_EQ(split65::cut_pct(tile_bytes(64, true)), 60);
  EXPECT_EQ(split65::cut_pct(tile_bytes(64, false)), 80);
  EXPECT_EQ(split65::split_launch_smem(tile_bytes(64, true), 32, 104 * 1024, 120 * 1024),
            120 * 1024);
  for (int sms : {7, 132}) {
    for (int64_t blocks : {1, 2, 8, 32, 64, 96, 128, 256, 512}) {
      for (int64_t tiles : {1, 4, 5, 8, 16, 32, 256, 1024}) {
        for (int64_t rows : {1, 4, 16, 17, 64}) {
          for (int64_t d : {64, 96, 128, 192}) {
            const int64_t tb = tile_bytes(d, rows <= 16);
            // The kernel's blocks an SM on an H100: 72 KiB blocks (d = 64, more rows) hold three.
            const int per_sm = d == 192 ? 1 : (tb == 16 * 1024 ? 3 : 2);
            const int w65 = split65::choose_splits(
                blocks, sms, split65::split_slots_per_sm(tb, per_sm), tiles, split65::cut_pct(tb));
            const int w64 = split64::choose_splits(
                blocks, sms, split64::split_slots_per_sm(tb, per_sm), tiles, split64::cut_pct(tb));
            ASSERT_EQ(w65, w64) << blocks << " blocks, " << tiles << " tiles, d = " << d;
            ASSERT_EQ(split65::price_splits(w65, blocks, sms, tiles, tb, rows, per_sm),
                      split64::price_splits(w64, blocks, sms, tiles, tb, rows, per_sm))
                << blocks << " blocks, " << tiles << " tiles, d = " << d;
          }
        }
      }
    }
  }
  // On 132 SMs, d = 64, one query row, worked out from the rules: rung 64 counts 64-key tiles of
  // 16 KiB, three blocks an SM and the 80% cut-off, unpriced; rung 65 counts 128-key tiles as
  // d = 128's. GQA 32/8 at B = 1 with 4096 keys: 42 splits and the combine kernel against 8 (the
  // price); MHA 32/32 at B = 8 with 32768 keys (256 blocks): 3 against 1.
  struct Call {
    int64_t blocks, nk, rows;
    int r64, r65;
  };
  for (const Call& c : {Call{8, 4096, 4, 42, 8}, Call{256, 32768, 1, 3, 1},
                        Call{32, 1024, 1, 11, 2}, Call{64, 4096, 4, 6, 1}}) {
    const int64_t t64 = 2 * 64 * 64 * 2, tiles64 = c.nk / 64, tiles65 = c.nk / 128;
    const int w64 = split64::choose_splits(c.blocks, 132, split64::split_slots_per_sm(t64, 3),
                                           tiles64, split64::cut_pct(t64));
    EXPECT_EQ(split64::price_splits(w64, c.blocks, 132, tiles64, t64, c.rows, 3), c.r64)
        << c.blocks << " blocks, " << c.nk << " keys";
    const int64_t t65 = tile_bytes(64, true);
    const int w65 = split65::choose_splits(c.blocks, 132, split65::split_slots_per_sm(t65, 2),
                                           tiles65, split65::cut_pct(t65));
    EXPECT_EQ(split65::price_splits(w65, c.blocks, 132, tiles65, t65, c.rows, 2), c.r65)
        << c.blocks << " blocks, " << c.nk << " keys";
  }
}

TEST(DecodeRules, Rung66SplitsTheLoneBlocksOfAGridOnHalfTheSMs) {
  // Rung 66's rule is rung 65's but for the price's limit on lone blocks (half = 1, no split):
  // 1 MiB of K and V only for a grid of more than half the SMs (floor(SMs / 2 / blocks) = 0);
  // a grid on half the SMs or fewer is held to 256 KiB, as every other count. The waves' count,
  // the tiles and the slots are rung 65's; the two prices differ exactly where rung 65 keeps
  // one split of more than 256 KiB (at most 1 MiB) for a grid on half the SMs or fewer, and
  // there rung 66 takes the waves' count.
  int moved = 0;
  for (int sms : {7, 132}) {
    for (int64_t blocks : {1, 2, 3, 4, 8, 32, 33, 34, 40, 64, 66, 67, 72, 80, 96, 128, 192, 512}) {
      for (int64_t tiles : {1, 4, 5, 8, 12, 16, 24, 32, 48, 64, 256, 1024}) {
        for (int64_t rows : {1, 4, 16, 17, 64}) {
          for (int64_t d : {64, 96, 128, 192}) {
            const int64_t keys = split66::tile_keys(d, rows <= 16, 0), tb = 2 * keys * d * 2;
            ASSERT_EQ(keys, split65::tile_keys(d, rows <= 16, 0));
            const int per_sm = d == 192 ? 1 : (tb == 16 * 1024 ? 3 : 2);
            const int w = split66::choose_splits(
                blocks, sms, split66::split_slots_per_sm(tb, per_sm), tiles, split66::cut_pct(tb));
            ASSERT_EQ(w, split65::choose_splits(blocks, sms,
                                                split65::split_slots_per_sm(tb, per_sm), tiles,
                                                split65::cut_pct(tb)));
            const int s65 = split65::price_splits(w, blocks, sms, tiles, tb, rows, per_sm);
            const int s66 = split66::price_splits(w, blocks, sms, tiles, tb, rows, per_sm);
            const bool half_grid = 2 * blocks <= sms;
            if (s65 == 1 && w > 1 && half_grid && tiles * tb > 256 * 1024) {
              ASSERT_LE(tiles * tb, 1024 * 1024) << "rung 65's lone limit";
              ASSERT_EQ(s66, w) << blocks << " blocks, " << tiles << " tiles, d = " << d;
              ++moved;
            } else {
              ASSERT_EQ(s66, s65) << blocks << " blocks, " << tiles << " tiles, d = " << d;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(moved, 0);
  // On 132 SMs, one query row, worked out from the rules (rung 65 -> rung 66): GQA 32/8 at B = 8
  // (64 blocks) with 4096 keys at d = 64 (32 tiles of 128 keys, 1 MiB): 1 -> 2; with 2048 keys at
  // d = 128: 1 -> 2; at B = 5 with 1024 keys at d = 96 (384 KiB): 1 -> 6; MHA 32/32 at B = 2 with
  // 1024 keys at d = 192 (768 KiB): 1 -> 2. Unmoved: GQA at B = 8 with 512 keys at d = 128 (256
  // KiB: one split for both), with 4096 keys (2 MiB: the waves' 2 for both); grids past half the
  // SMs, whose waves' count would split, one split for both: GQA at B = 9 with 1024 keys at
  // d = 128 (72 blocks), at B = 16 with 1024 keys at d = 96 (128 blocks) and at B = 12 with 1024
  // keys at d = 192 (96 blocks).
  struct Call {
    int64_t blocks, nk, d;
    int r65, r66;
  };
  // Page 66's table: also GQA at B = 5 with 2048 keys at d = 96 (40 blocks): 1 -> 6; at B = 8
  // with 1024 keys at d = 128: 1 -> 2, and at d = 96: 1 -> 4; at B = 5 with 1024 keys at d = 192:
  // 1 -> 3.
  for (const Call& c : {Call{64, 4096, 64, 1, 2}, Call{64, 2048, 128, 1, 2},
                        Call{40, 1024, 96, 1, 6}, Call{64, 1024, 192, 1, 2},
                        Call{40, 2048, 96, 1, 6}, Call{64, 1024, 128, 1, 2},
                        Call{64, 1024, 96, 1, 4}, Call{40, 1024, 192, 1, 3},
                        Call{64, 512, 128, 1, 1}, Call{64, 4096, 128, 2, 2},
                        Call{72, 1024, 128, 1, 1}, Call{128, 1024, 96, 1, 1},
                        Call{96, 1024, 192, 1, 1}}) {
    const int64_t keys = split66::tile_keys(c.d, true, 0), tb = 2 * keys * c.d * 2;
    const int64_t tiles = c.nk / keys;
    const int per_sm = c.d == 192 ? 1 : 2;
    const int w = split66::choose_splits(c.blocks, 132, split66::split_slots_per_sm(tb, per_sm),
                                         tiles, split66::cut_pct(tb));
    EXPECT_EQ(split65::price_splits(w, c.blocks, 132, tiles, tb, 4, per_sm), c.r65)
        << c.blocks << " blocks, " << c.nk << " keys, d = " << c.d;
    EXPECT_EQ(split66::price_splits(w, c.blocks, 132, tiles, tb, 4, per_sm), c.r66)
        << c.blocks << " blocks, " << c.nk << " keys, d = " << c.d;
    if (c.blocks > 66) EXPECT_GT(w, 1) << c.blocks << " blocks: the waves' count would split";
  }
}

TEST(DecodeRules, Rung67RunsAShortD96CallInOneWaveOfOneBlockAnSM) {
  // Rung 67 asks the rule again with one slot an SM for a d = 96 block of rows in one warp, and
  // takes that count where it is one wave (blocks x splits <= SMs) of blocks reading under 1 MiB
  // of K and V each; elsewhere (0) rung 66's count stands. The rules it asks are rung 66's.
  int moved = 0;
  for (int sms : {7, 78, 114, 132}) {
    for (int64_t blocks : {1, 2, 3, 8, 16, 24, 32, 40, 56, 64, 66, 67, 96, 128, 132, 133, 264}) {
      for (int64_t tiles : {1, 4, 5, 8, 12, 16, 32, 42, 43, 64, 128, 256, 512, 2048}) {
        for (int64_t rows : {1, 4, 16, 17, 64}) {
          for (int64_t d : {64, 96, 128, 192}) {
            const int64_t tb = 2 * split67::tile_keys(d, rows <= 16, 0) * d * 2;
            const int per_sm = d == 192 ? 1 : (tb == 16 * 1024 ? 3 : 2);
            auto count = [&](int slots, int price_slots) {
              return split66::price_splits(
                  split66::choose_splits(blocks, sms, slots, tiles, split66::cut_pct(tb)), blocks,
                  sms, tiles, tb, rows, price_slots);
            };
            const int s66 = count(split66::split_slots_per_sm(tb, per_sm), per_sm);
            const int one = split67::one_wave_splits(blocks, sms, tiles, tb, rows);
            ASSERT_EQ(split67::choose_splits(blocks, sms, split67::split_slots_per_sm(tb, per_sm),
                                             tiles, split67::cut_pct(tb)),
                      split66::choose_splits(blocks, sms, split66::split_slots_per_sm(tb, per_sm),
                                             tiles, split66::cut_pct(tb)));
            if (d != 96 || rows > 16) {
              ASSERT_EQ(one, 0) << "d = " << d << ", " << rows << " rows";
              continue;
            }
            const int s1 = count(1, 1);  // the count for one slot an SM
            const int64_t chunk = (tiles + s1 - 1) / s1 * tb;
            const bool wave = blocks * s1 <= sms && chunk < 1024 * 1024;
            ASSERT_EQ(one, wave ? s1 : 0) << blocks << " blocks, " << tiles << " tiles, " << sms;
            if (one == 0 || one == s66) continue;
            // Where it moves, it takes fewer splits, and the grid is on half the SMs or fewer.
            EXPECT_LT(one, s66) << blocks << " blocks, " << tiles << " tiles, " << sms << " SMs";
            EXPECT_LE(2 * blocks, sms) << blocks << " blocks, " << tiles << " tiles";
            ++moved;
          }
        }
      }
    }
  }
  EXPECT_GT(moved, 0);
  // On 132 SMs (two 108 KiB blocks an SM), d = 96, worked out from the rules (rung 66 -> rung
  // 67): GQA 32/8 at B = 1 (8 blocks) with 8192 and 32768 keys: 29 -> 15 (splits of 8-9 tiles,
  // and of 34-35); with 131072 keys 29 for both (15 splits would read 3.2 MiB each); at B = 2 with 8192
  // keys 15 -> 8; at B = 8 (64 blocks) with 2048 keys 4 -> 2, with 32768 keys 4 for both (2
  // splits of 6 MiB); MHA 32/32 at B = 1 with 8192 keys 8 -> 4; GQA at B = 5 with 1024 keys
  // 6 -> 3. A block of 64 rows (GQA with 16 query rows) keeps rung 66's count.
  struct Call {
    int64_t blocks, nk, rows;
    int r66, r67;
  };
  for (const Call& c : {Call{8, 8192, 4, 29, 15}, Call{8, 32768, 4, 29, 15},
                        Call{8, 131072, 4, 29, 29}, Call{16, 8192, 4, 15, 8},
                        Call{64, 2048, 4, 4, 2}, Call{64, 32768, 4, 4, 4},
                        Call{32, 8192, 1, 8, 4}, Call{40, 1024, 4, 6, 3},
                        Call{8, 8192, 64, 29, 29}}) {
    const int64_t tb = 2 * 64 * 96 * 2, tiles = c.nk / 64;
    const int w = split66::choose_splits(c.blocks, 132, 2, tiles, split66::cut_pct(tb));
    EXPECT_EQ(split66::price_splits(w, c.blocks, 132, tiles, tb, c.rows, 2), c.r66)
        << c.blocks << " blocks, " << c.nk << " keys, " << c.rows << " rows";
    const int one = split67::one_wave_splits(c.blocks, 132, tiles, tb, c.rows);
    EXPECT_EQ(one ? one : c.r66, c.r67)
        << c.blocks << " blocks, " << c.nk << " keys, " << c.rows << " rows";
  }
}

// Rung 68's plan of a copy of `rows` rows of d columns by 128 threads (row_copy.h): every 16-byte
// chunk of every row is copied exactly once, by a thread below kCopiers, at the offset the swizzle
// gives it, whether the offset is worked out at each step or moved by a constant.
template <int kD>
void check_row_copy(int rows, int rows_per_step, int copiers) {
  using C = copy68::RowCopy<kD, 128>;
  SCOPED_TRACE("d = " + std::to_string(kD) + ", " + std::to_string(rows) + " rows");
  EXPECT_EQ(C::kRowsPerStep, rows_per_step);
  EXPECT_EQ(C::kCopiers, copiers);
  ASSERT_LE(C::kCopiers, 128);
  std::vector<int> copies(static_cast<size_t>(rows) * C::kChunks, 0);
  std::vector<int> at_offset(static_cast<size_t>(rows) * kD * 2 / 16, 0);
  for (unsigned t = 0; t < static_cast<unsigned>(C::kCopiers); ++t) {
    const int r0 = C::first_row(t), c = C::column(t);
    ASSERT_LT(r0, C::kRowsPerStep);
    for (int step = 0; r0 + step * C::kRowsPerStep < rows; ++step) {
      const int r = r0 + step * C::kRowsPerStep;
      ++copies[static_cast<size_t>(r) * C::kChunks + c / 8];
      const int off = C::offset(r0, c, step);
      ASSERT_EQ(off, fl::swizzle::byte_offset(r, c, kD)) << "thread " << t << ", step " << step;
      ++at_offset[static_cast<size_t>(off) / 16];
    }
  }
  for (size_t i = 0; i < copies.size(); ++i) {
    ASSERT_EQ(copies[i], 1) << "row " << i / C::kChunks << ", chunk " << i % C::kChunks;
  }
  for (size_t i = 0; i < at_offset.size(); ++i) ASSERT_EQ(at_offset[i], 1) << "slot " << i;
}

TEST(DecodeRules, Rung68CopiesEveryChunkOnceWhereTheSwizzlePutsIt) {
  // d = 96: steps of 8 rows (a period of the swizzle) by 96 threads, where rung 67 stepped 10
  // rows by all 128 (row_copy.h's table); d = 192 keeps 5-row steps by 120 threads. The tiles
  // (64 and 128 keys) and the 64-row Q tile; at d = 64-128 a run of 16 keys of a tile across
  // pages too (d = 192's runs keep rung 67's chunk-by-chunk copy).
  for (int rows : {16, 64, 128}) {
    check_row_copy<64>(rows, 16, 128);
    check_row_copy<96>(rows, 8, 96);
    check_row_copy<128>(rows, 8, 128);
    if (rows != 16) check_row_copy<192>(rows, 5, 120);
  }
  EXPECT_TRUE((copy68::RowCopy<96, 128>::kPeriodic));
  EXPECT_FALSE((copy68::RowCopy<192, 128>::kPeriodic));
}

TEST(DecodeRules, Rung69CountsTwoSlotsForBlocksOfManyRowsWhereChunksStayLong) {
  // An H200's 132 SMs, two blocks of d = 128 an SM, tiles of 64 keys (32 KiB of K and V), GQA
  // 32/8 with 16 query rows: 64 rows a block, B x 8 blocks. Rung 68 counts one slot an SM.
  constexpr int kSms = 132, kPerSm = 2;
  constexpr int64_t kTile = 32 * 1024, kRows = 64;
  auto two = [&](int64_t b, int64_t nk, int64_t rows = 64, int64_t tile = 32 * 1024,
                 int per_sm = 2) {  // kRows, kTile, kPerSm
    return split69::two_slot_splits(b * 8, kSms, per_sm, nk / 64, tile, rows);
  };
  auto one = [&](int64_t b, int64_t nk) {
    return split69::choose_splits(b * 8, kSms, 1, nk / 64, split69::cut_pct(kTile));
  };
  // Where the count doubles and each split still reads 512 KiB or more, it is taken: the
  // calls a trial ran 1.05-1.18x faster.
  EXPECT_EQ(one(8, 32768), 2);
  EXPECT_EQ(two(8, 32768), 4);
  EXPECT_EQ(one(4, 8192), 4);
  EXPECT_EQ(two(4, 8192), 8);  // 16 tiles a split: 512 KiB, the line
  EXPECT_EQ(two(1, 32768), 29);
  EXPECT_EQ(two(2, 16384), 15);
  EXPECT_EQ(one(16, 8192), 1);  // one wave of 128 blocks over 60% of 132 slots
  EXPECT_EQ(two(16, 8192), 2);  // under 60% of 264
  // Where it would leave shorter chunks, rung 68's count: 0.79-0.99x in the trial.
  EXPECT_EQ(two(1, 8192), 0);   // 29 splits of 5 tiles: 160 KiB
  EXPECT_EQ(two(1, 16384), 0);  // 29 of 9: 288 KiB
  EXPECT_EQ(two(2, 8192), 0);   // 15 of 9: 288 KiB
  EXPECT_EQ(two(4, 4096), 0);   // 8 of 8: 256 KiB
  // Where the count would be one split of more blocks than SMs, rung 68's count: some SMs would
  // run two blocks and the rest one (B = 20: 0.91-0.93x rung 68's three splits alone).
  EXPECT_EQ(two(20, 8192), 0);   // 160 blocks
  EXPECT_EQ(two(24, 32768), 0);  // 192 blocks
  EXPECT_EQ(two(64, 8192), 0);   // 512 blocks: no split either way
  EXPECT_EQ(two(12, 8192), 5);   // 96 blocks: one split one an SM -> five, two an SM
  EXPECT_EQ(two(18, 8192), 5);   // 144 blocks: rung 68's 4
  EXPECT_EQ(two(40, 8192), 3);   // 320 blocks: rung 68's 2
  EXPECT_EQ(two(48, 8192), 2);
  // Every count it gives splits the keys and leaves a block at least kTwoChunkBytes.
  for (int64_t b : {1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 48, 64, 128}) {
    for (int64_t nk : {1024, 4096, 8192, 16384, 32768, 131072}) {
      const int s = two(b, nk);
      if (s == 0) continue;
      EXPECT_EQ(s, split69::choose_splits(b * 8, kSms, kPerSm, nk / 64, split69::cut_pct(kTile)));
      EXPECT_GE(s, 2) << b << " " << nk;
      EXPECT_GE((nk / 64 + s - 1) / s * kTile, split69::kTwoChunkBytes) << b << " " << nk;
    }
  }
  // Not such a call: rows in one warp, small tiles (d <= 96), one block an SM (d = 192), no
  // device figures.
  EXPECT_EQ(two(8, 32768, 16), 0);
  EXPECT_EQ(two(8, 32768, kRows, 24 * 1024), 0);
  EXPECT_EQ(two(8, 32768, kRows, 48 * 1024, 1), 0);
  EXPECT_EQ(split69::two_slot_splits(64, 0, kPerSm, 512, kTile, kRows), 0);
}

TEST(DecodeRules, Rung73TakesOneSplitForAGridOfManyRowsPastTheSms) {
  // An H200's 132 SMs, two 64-row blocks of d = 128 an SM (tiles of 32 KiB of K and V), GQA 32/8
  // with 16 query rows: B x 8 blocks. Rung 73 takes the two-slot count's one split where the
  // grid has more blocks than SMs and every sequence has the capacity's length (no cache
  // lengths); rung 69's rule (rung 72's) gave those calls rung 68's count, as rung 73 still does
  // for a call with cache lengths.
  constexpr int kSms = 132, kPerSm = 2;
  constexpr int64_t kTile = 32 * 1024;
  auto two73 = [&](int64_t b, int64_t nk, bool equal = true, int64_t rows = 64,
                   int64_t tile = 32 * 1024, int per_sm = 2) {  // kTile, kPerSm
    return split73::two_slot_splits(b * 8, kSms, per_sm, nk / 64, tile, rows, equal);
  };
  auto two69 = [&](int64_t b, int64_t nk) {
    return split69::two_slot_splits(b * 8, kSms, kPerSm, nk / 64, kTile, 64);
  };
  auto one = [&](int64_t b, int64_t nk) {  // rung 68's count: one slot an SM
    return split69::choose_splits(b * 8, kSms, 1, nk / 64, split69::cut_pct(kTile));
  };
  // The grids it moves: 160-224 blocks, which rung 68's count cut into 2-4 splits.
  for (int64_t nk : {4096, 8192, 32768, 131072}) {
    EXPECT_EQ(two73(20, nk), 1) << nk;
    EXPECT_EQ(two69(20, nk), 0) << nk;
    EXPECT_EQ(one(20, nk), 3) << nk;
    EXPECT_EQ(two73(24, nk), 1) << nk;
    EXPECT_EQ(one(24, nk), 2) << nk;
    EXPECT_EQ(two73(28, nk), 1) << nk;
    EXPECT_EQ(one(28, nk), 4) << nk;
    EXPECT_EQ(two73(20, nk, false), 0) << nk;  // cache lengths: rung 68's count
  }
  // Every count: with cache lengths rung 69's rule; without, rung 69's count wherever rung 69
  // took one, and one split exactly where the two-slot count is one split of more blocks than
  // SMs, 0 (rung 68's count) elsewhere. Over B = 1-160, the grids it moves are B = 20-28.
  int moved = 0;
  for (int64_t b = 1; b <= 160; ++b) {
    for (int64_t nk : {1024, 4096, 8192, 16384, 32768, 131072}) {
      const int a = two69(b, nk), s = two73(b, nk);
      EXPECT_EQ(two73(b, nk, false), a) << b << " " << nk;
      if (a > 0) {
        EXPECT_EQ(s, a) << b << " " << nk;
        continue;
      }
      const bool past = b * 8 > kSms &&
                        split73::choose_splits(b * 8, kSms, kPerSm, nk / 64,
                                               split73::cut_pct(kTile)) == 1;
      EXPECT_EQ(s, past ? 1 : 0) << b << " " << nk;
      if (s == 1 && one(b, nk) != 1) {
        EXPECT_GE(b, 20) << nk;
        EXPECT_LE(b, 28) << nk;
        ++moved;
      }
    }
  }
  EXPECT_EQ(moved, 9 * 6 - 1) << "B = 20-28 at every length but B = 28 with 1024 keys";
  // Not such a call: rows in one warp, small tiles (d <= 96), one block an SM (d = 192), a grid
  // within the SMs (B = 16: rung 69's two splits), no device figures.
  EXPECT_EQ(two73(24, 32768, true, 16), 0);
  EXPECT_EQ(two73(24, 32768, true, 64, 24 * 1024), 0);
  EXPECT_EQ(two73(24, 32768, true, 64, 48 * 1024, 1), 0);
  EXPECT_EQ(two73(16, 8192), 2);
  EXPECT_EQ(split73::two_slot_splits(192, 0, kPerSm, 512, kTile, 64, true), 0);
}

TEST(DecodeRules, SplitWorkspaceSize) {
  // The partials of s splits: O_s (fp32, d a row) then LSE_s (fp32), each part 256-byte aligned;
  // nothing for one split.
  EXPECT_EQ(split::split_workspace_bytes(1, 1, 32, 1, 128), 0);
  EXPECT_EQ(split::split_workspace_bytes(1, 64, 32, 16, 128), 0);
  // 2 x 32 rows: 2 x 32 x 128 x 4 = 32768 of O, 256 of LSE.
  EXPECT_EQ(split::split_workspace_bytes(2, 1, 32, 1, 128), 32768 + 256);
  EXPECT_EQ(split::lse_part_offset(2, 1, 32, 1, 128), 32768);
  // 3 x 30 rows at d = 64: 23040 of O (90 x 256), 360 of LSE rounded up to 512.
  EXPECT_EQ(split::split_workspace_bytes(3, 1, 6, 5, 64), 23040 + 512);
  // 15 x 32 rows: 245760 of O, 1920 of LSE rounded up to 2048.
  EXPECT_EQ(split::split_workspace_bytes(15, 1, 32, 1, 128), 245760 + 2048);
  // An O part that is not a multiple of 256 (made-up d = 8): 3 x 8 x 4 = 96 -> 256.
  EXPECT_EQ(split::lse_part_offset(3, 1, 1, 1, 8), 256);
}

TEST(DecodeRules, Rung75AsksTheTablesRoomOnlyWhereABlockRunsAlone) {
  // An H200's SMs: 228 KiB of shared memory each, so rung 62's launch of one block an SM asks
  // 115 KiB (half and 1 KiB). Rung 75 gives a launch of one-row blocks (key warps) that runs one
  // block an SM the room for its split's block-table entries: the ring, the cluster's 16-byte
  // mbarrier and 4 KiB. d = 128: 112 KiB of tiles (Q and the K/V ring); d = 192: 168 KiB.
  constexpr int kKiB = 1024, kAlone = 115 * kKiB;
  constexpr int k128 = 112 * kKiB, k192 = 168 * kKiB, kRoom = 16 + 4 * kKiB;
  // The launches of one block an SM: rung 62's split launch at d = 128 (115 KiB) and every
  // launch at d = 192 (its ring alone is more than half an SM) take the table's room.
  EXPECT_EQ(split75::with_table(kAlone, k128 + kRoom, kAlone, true), k128 + kRoom);
  EXPECT_EQ(split75::with_table(k192, k192 + kRoom, kAlone, true), k192 + kRoom);
  // Two blocks an SM (d = 128 at its own size, d = 96's 108 KiB) keep their size: 116 KiB would
  // leave no room for the second block.
  EXPECT_EQ(split75::with_table(k128, k128 + kRoom, kAlone, true), k128);
  EXPECT_EQ(split75::with_table(108 * kKiB, 108 * kKiB + kRoom, kAlone, true), 108 * kKiB);
  // Blocks of more rows (no key warps, no table), no device figure (alone = 0), and a launch
  // already past the table's end keep theirs.
  EXPECT_EQ(split75::with_table(kAlone, k128 + kRoom, kAlone, false), kAlone);
  EXPECT_EQ(split75::with_table(k192, k192 + kRoom, 0, true), k192);
  EXPECT_EQ(split75::with_table(200 * kKiB, k128 + kRoom, kAlone, true), 200 * kKiB);
}

TEST(DecodeRules, Rung76DealsARaggedBatchEvenly) {
  // Rung 76's deal, block by block as the kernel walks it: a KV head's sequences end to end, U
  // tiles; block j (of S x B) takes tiles [j c, (j + 1) c) of them, the sequences whose tiles lie
  // there one after the other; a sequence in one block is whole (it writes O), one across
  // blocks writes a partial from each, in slot deal_slot (first block) or 2 j (the next ones).
  struct Result {
    int64_t chunk = 0, most_block = 0, slots_used = 0;
    bool covered = true, slots_unique = true, spans_ok = true;
  };
  auto deal = [](const std::vector<int>& tiles, int splits) {
    const int64_t blocks = int64_t{splits} * static_cast<int64_t>(tiles.size());
    int64_t total = 0, most = 0;
    for (int t : tiles) total += t, most = std::max<int64_t>(most, t);
    Result r;
    r.chunk = split76::deal_chunk(total, most, blocks);
    std::vector<int> seen(static_cast<size_t>(total), 0);
    std::vector<int> slot_writes(static_cast<size_t>(2 * blocks), 0);
    for (int64_t j = 0; j < blocks; ++j) {
      const int64_t lo = j * r.chunk, hi = std::min(lo + r.chunk, total);
      r.most_block = std::max(r.most_block, std::max<int64_t>(0, hi - lo));
      int64_t before = 0;
      for (int t : tiles) {
        const int64_t first = std::max(lo, before), end = std::min(hi, before + t);
        if (first < end) {
          for (int64_t x = first; x < end; ++x) ++seen[static_cast<size_t>(x)];
          const split76::DealSpan span = split76::deal_span(before, t, r.chunk);
          const bool whole = before >= lo && before + t <= hi;
          if (whole != (span.first == span.last)) r.spans_ok = false;
          if (span.first > j || span.last < j) r.spans_ok = false;
          if (!whole) {
            const int64_t slot = j == span.first ? split76::deal_slot(j, before, r.chunk) : 2 * j;
            if (slot != split76::deal_slot(j, before, r.chunk)) r.spans_ok = false;
            if (slot < 0 || slot >= 2 * blocks || slot / 2 != j) r.slots_unique = false;
            else if (slot_writes[static_cast<size_t>(slot)]++ > 0) r.slots_unique = false;
            if (span.last - span.first + 1 > split76::kMaxSplits) r.spans_ok = false;
          }
        }
        before += t;
      }
    }
    for (int n : seen) r.covered = r.covered && n == 1;
    for (int n : slot_writes) r.slots_used += n;
    return r;
  };
  // GQA 32/8 at B = 8 with 32768 keys (512 tiles of 64) takes 2 splits: 16 blocks a KV head. With
  // lengths as paged_bench draws them, rung 57 gives the longest's two blocks 256 tiles each,
  // the deal every block ceil(1645 / 16) = 103.
  const Result ragged = deal({512, 0, 1, 313, 13, 256, 65, 485}, 2);
  EXPECT_EQ(ragged.chunk, 103);
  EXPECT_EQ(ragged.most_block, 103);
  EXPECT_TRUE(ragged.covered);
  EXPECT_TRUE(ragged.slots_unique);
  EXPECT_TRUE(ragged.spans_ok);
  EXPECT_GT(ragged.slots_used, 0);
  // Every sequence at the capacity: rung 57's cut, every sequence whole in no block.
  const Result equal = deal(std::vector<int>(8, 512), 2);
  EXPECT_EQ(equal.chunk, 256);
  EXPECT_TRUE(equal.covered && equal.slots_unique && equal.spans_ok);
  // One sequence holds every key: 16 blocks of 32 tiles; none at all: no tile, chunk 1.
  EXPECT_EQ(deal({0, 0, 0, 512, 0, 0, 0, 0}, 2).chunk, 32);
  EXPECT_EQ(deal({0, 0, 0, 0}, 4).chunk, 1);
  // Many short sequences: blocks of 8 tiles hold several whole ones, and the rest are cut.
  const Result shorts = deal({64, 0, 1, 32, 13, 64, 1, 53, 63, 2, 3, 1, 16, 1, 16, 64}, 4);
  EXPECT_EQ(shorts.chunk, (394 + 63) / 64);
  EXPECT_TRUE(shorts.covered && shorts.slots_unique && shorts.spans_ok);
  // A sequence lies in at most kMaxSplits blocks, what the combine reads: B = 64 with 4 splits
  // (256 blocks) and one sequence of 16384 tiles take chunks of 130, 127 blocks.
  std::vector<int> lone(64, 0);
  lone[17] = 16384;
  const Result capped = deal(lone, 4);
  EXPECT_EQ(capped.chunk, (16384 + 126) / 127);
  EXPECT_TRUE(capped.covered && capped.slots_unique && capped.spans_ok);
  // Odd counts.
  for (int splits : {2, 3, 5, 8, 15}) {
    std::vector<int> tiles;
    for (int i = 0; i < 11; ++i) tiles.push_back((i * 7919 + splits * 131) % 700);
    const Result r = deal(tiles, splits);
    EXPECT_TRUE(r.covered && r.slots_unique && r.spans_ok) << splits << " splits";
  }
  // Which calls deal: cache lengths for four sequences or more, more than one split, splits of
  // 4 MiB or more (d = 128: 128 tiles of 64 keys), a split grid of one wave (132 SMs, one block
  // each): GQA 32/8 at B = 8 and 4 with 32768 keys (two and four splits), not with 8192 keys,
  // not at B = 2, not without lengths, not 16 query rows at B = 20 (3 splits, 480 blocks two an
  // SM).
  constexpr int64_t kMiB = 1024 * 1024;
  EXPECT_TRUE(split76::deals(true, 8, 2, 8 * kMiB, 128, 132));
  EXPECT_TRUE(split76::deals(true, 4, 4, 4 * kMiB, 128, 132));
  EXPECT_FALSE(split76::deals(true, 4, 4, 1 * kMiB, 128, 132));
  EXPECT_FALSE(split76::deals(true, 8, 2, 2 * kMiB, 128, 132));
  EXPECT_FALSE(split76::deals(true, 2, 8, 4 * kMiB, 128, 132));
  EXPECT_FALSE(split76::deals(false, 8, 2, 8 * kMiB, 128, 132));
  EXPECT_FALSE(split76::deals(true, 8, 1, 16 * kMiB, 64, 132));
  EXPECT_FALSE(split76::deals(true, 20, 3, 11 * kMiB / 2, 480, 264));
}

// A decode call's params with no workspace (placeholder_params gives one as large as any).
fl::AttnParams without_workspace(const fl::ProblemSpec& s) {
  fl::AttnParams p = fl::placeholder_params(s);
  p.workspace = nullptr;
  p.workspace_bytes = 0;
  return p;
}

TEST(DecodeRules, WorkspaceIsNoneForOneSplit) {
  // Four key tiles or fewer never split, on any device; a grid of 512 blocks (B = 64, 8 KV
  // heads) fills any GPU of up to 640 slots. Those calls need no workspace, and are claimed
  // without one, by every serving rung.
  REQUIRE_SERVING_RUNGS(ks);
  const fl::ProblemSpec one_split[] = {
      decode_spec(fl::DType::f16, 1, 32, 8, 1, 256, 128, false, fl::Layout::BNHD),
      decode_spec(fl::DType::bf16, 1, 1, 1, 16, 16, 64, true, fl::Layout::BHND),
      decode_spec(fl::DType::f16, 64, 32, 8, 1, 131072, 128, false, fl::Layout::BNHD),
  };
  for (const fl::KernelInfo* k : ks) {
    for (const fl::ProblemSpec& s : one_split) {
      const fl::AttnParams p = without_workspace(s);
      EXPECT_EQ(fl::workspace_bytes(*k, p), 0) << k->name() << " " << s.describe();
      EXPECT_EQ(fl::why_unsupported(*k, p), "") << k->name() << " " << s.describe();
    }
  }
}

TEST(DecodeRules, SplitWorkspaceIsRequired) {
  // B = 1, 32 query heads over 8, Nk = 131072 (2048 key tiles), d = 128: 8 blocks. Without a
  // device the rule has no SMs to fill: one split, no workspace. On one (10 SMs or more, and the
  // 144 KiB a block), it splits: the workspace is the partials of s splits, 2 <= s <= 128, and a
  // call with a byte less is refused by the rule, naming the rung, before any launch. Every
  // split rung.
  REQUIRE_SPLIT_RUNGS(ks);
  const fl::ProblemSpec s =
      decode_spec(fl::DType::bf16, 1, 32, 8, 1, 131072, 128, true, fl::Layout::BNHD);
  std::string no_gpu;
  if (!fl::gpu_available(&no_gpu)) {
    for (const fl::KernelInfo* k : ks) {
      const fl::AttnParams p = without_workspace(s);
      EXPECT_EQ(fl::workspace_bytes(*k, p), 0) << k->name() << ": no device, one split";
      EXPECT_EQ(fl::why_unsupported(*k, p), "") << k->name();
    }
    GTEST_SKIP() << "the split workspace needs a device's figures: " << no_gpu;
  }
  const std::string refused = fl::why_unsupported(*ks.front(), fl::placeholder_params(s));
  if (refused.find("shared memory") != std::string::npos) GTEST_SKIP() << refused;
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  if (sms < 10) GTEST_SKIP() << "a GPU of " << sms << " SMs: 8 blocks fill it";
  for (const fl::KernelInfo* k : ks) {
    SCOPED_TRACE(k->name());
    fl::AttnParams p = without_workspace(s);
    const int64_t need = fl::workspace_bytes(*k, p);
    int splits = 0;
    for (int t = 2; t <= split::kMaxSplits; ++t) {
      if (split::split_workspace_bytes(t, 1, 32, 1, 128) == need) splits = t;
    }
    ASSERT_GE(splits, 2) << need << " bytes is no count of splits' partials";
    EXPECT_LE(splits, sms);
    p.workspace = reinterpret_cast<void*>(0x6000);
    p.workspace_bytes = need - 1;
    const std::string why = fl::why_unsupported(*k, p);
    EXPECT_EQ(why.rfind("kernel " + k->name() + ": the workspace holds " +
                            std::to_string(need - 1) + " bytes",
                        0),
              0u)
        << why;
    EXPECT_NE(why.find(std::to_string(need)), std::string::npos) << why;
    try {
      fl::run_kernel(*k, p);
      ADD_FAILURE() << "run_kernel took a workspace a byte short";
    } catch (const fl::UnsupportedError& e) {
      EXPECT_EQ(std::string(e.what()), why);
    }
    p.workspace_bytes = need;
    EXPECT_EQ(fl::why_unsupported(*k, p), "");
  }
}

TEST(DecodeRules, SplitRungGridLimits) {
  // A split rung's grid is (splits, H_kv, B): H_kv and B are its y and z dimensions, 65535 each.
  REQUIRE_SPLIT_RUNGS(ks);
  for (const fl::KernelInfo* k : ks) {
    const fl::ProblemSpec ok =
        decode_spec(fl::DType::f16, 65535, 65535, 65535, 1, 64, 64, false, fl::Layout::BHND);
    EXPECT_EQ(fl::why_unsupported(*k, fl::placeholder_params(ok)), "") << k->name();
    const fl::ProblemSpec heads =
        decode_spec(fl::DType::f16, 1, 65536, 65536, 1, 64, 64, false, fl::Layout::BHND);
    const std::string why = fl::why_unsupported(*k, fl::placeholder_params(heads));
    EXPECT_EQ(why, "kernel " + k->name() + ": H_kv must be <= 65535 (the grid's y dimension)");
  }
}

// ---------------------------------------------------------------------------------------------
// GPU: the grid against the reference
// ---------------------------------------------------------------------------------------------

class Decode : public ::testing::TestWithParam<std::tuple<fl::DType, int64_t, fl::Layout>> {};

TEST_P(Decode, PassesTheGrid) {
  // Each shape's problem and reference are made once and every serving rung is verified on it.
  FL_REQUIRE_GPU();
  REQUIRE_SERVING_RUNGS(ks);
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
            const fl::Reference ref(problem, cublas);
            for (const fl::KernelInfo* k : ks) {
              const std::string why = fl::why_unsupported(*k, problem.params_for(*k));
              if (why.find("shared memory") != std::string::npos) {
                GTEST_SKIP() << why;  // a GPU with less than 144 KiB a block (d = 128)
              }
              ASSERT_EQ(why, "") << k->name() << " " << s.describe();
              const fl::Verdict v = fl::verify(*k, problem, ref);
              EXPECT_TRUE(v.passed) << k->name() << " " << s.describe()
                                    << (s.with_lse ? " lse" : "") << ": " << v.why
                                    << " [max err " << v.out.max_abs_err << ", tolerance "
                                    << v.tolerance << "]";
              ++ran;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(ran, (4 * 7 * 4 - 7) * 2 * 2 * static_cast<int>(ks.size()));
}

INSTANTIATE_TEST_SUITE_P(
    Grid, Decode,
    ::testing::Combine(::testing::Values(fl::DType::f16, fl::DType::bf16),
                       ::testing::Values(int64_t{64}, int64_t{96}, int64_t{128}, int64_t{192}),
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
  REQUIRE_SERVING_RUNGS(ks);
  fl::CublasHandle cublas;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (bool causal : {false, true}) {
      fl::ProblemSpec s = decode_spec(t, 2, 32, 8, 4, 1000, 128, causal, fl::Layout::BNHD);
      s.input_std = t == fl::DType::f16 ? 8.0f : 20.0f;
      s.with_lse = true;
      fl::Problem problem(s);
      const fl::Reference ref(problem, cublas);
      for (const fl::KernelInfo* k : ks) {
        const fl::Verdict v = fl::verify(*k, problem, ref);
        EXPECT_TRUE(v.passed) << k->name() << " " << s.describe() << ": " << v.why
                              << " [max err " << v.out.max_abs_err << ", tolerance "
                              << v.tolerance << "]";
      }
    }
  }
}

// A NaN in an input reaches exactly the outputs that read it (as tests/test_numerics.cu states
// it for the prefill rungs): Q[h, s, c] NaN makes row (h, s) NaN (O and LSE); K[hk, j, c] NaN
// every row of the g query heads of KV head hk (O and LSE); V[hk, j, c] NaN column c of those
// rows (the LSE untouched). Every other output equals the clean run bitwise: the rows of a tile
// never mix, so a head or a position read from the wrong place shows here. (Nk = 300 is 5 key
// tiles: rung 38 splits it on a GPU of 5 SMs or more, and its combine must carry each NaN.)
void expect_nan_reaches_exactly(const fl::KernelInfo& k);

TEST(DecodeNumerics, NaNReachesExactlyTheOutputsThatReadIt) {
  FL_REQUIRE_GPU();
  REQUIRE_SERVING_RUNGS(ks);
  for (const fl::KernelInfo* k : ks) expect_nan_reaches_exactly(*k);
}

void expect_nan_reaches_exactly(const fl::KernelInfo& kernel) {
  const fl::KernelInfo* k = &kernel;
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
      fl::run_kernel(*k, problem.params_for(*k));
      FL_CUDA_CHECK(cudaDeviceSynchronize());
      o = problem.output_host();
      lse.resize(kHq * kNqN);
      FL_CUDA_CHECK(cudaMemcpy(lse.data(), problem.lse.get(), lse.size() * 4,
                               cudaMemcpyDeviceToHost));
    };
    std::vector<float> o0, lse0;
    run(q, kk, v, o0, lse0);
    for (const NanCase& c : nan_cases) {
      SCOPED_TRACE(k->name() + " " + fl::to_string(t) + " NaN in " + c.name);
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
// GPU: the splits' edges (every serving rung; rung 38's splits checked through its workspace)
// ---------------------------------------------------------------------------------------------

// The number of splits rung 38 runs `problem` in, read back from the workspace it asks (the
// partials of s splits, splits.h); 1 for none, 0 for a size no count of splits gives.
int splits_of(const fl::KernelInfo& k, const fl::Problem& problem) {
  const fl::ProblemSpec& s = problem.spec();
  const int64_t bytes = fl::workspace_bytes(k, problem.params());
  if (bytes == 0) return 1;
  for (int t = 2; t <= split::kMaxSplits; ++t) {
    if (split::split_workspace_bytes(t, s.batch, s.heads_q, s.seqlen_q, s.head_dim) == bytes) {
      return t;
    }
  }
  return 0;
}

// verify, with the workspace poisoned first (all bits set: NaN as fp32), so that a partial read
// before it is written shows as a NaN in O.
fl::Verdict verify_poisoned(const fl::KernelInfo& k, fl::Problem& problem,
                            const fl::Reference& ref) {
  const fl::AttnParams& p = problem.params_for(k);
  if (p.workspace_bytes > 0) fl::fill_bits16(p.workspace, 0xFFFF, p.workspace_bytes / 2);
  return fl::verify(k, problem, ref);
}

// Whether rung k combines the splits of `splits` in a cluster on this device (rung 58's rule, then
// rung 59's from 59 on, on a GPU of compute capability 9.0; rung 61's asks that the call's
// `clusters` all run at once, one block an SM): then it asks no workspace for them.
bool in_cluster(const fl::KernelInfo& k, int splits, int64_t clusters) {
  int device = 0, major = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (k.number >= 61) {  // rung 62 keeps rung 61's clusters
    const int fit = major >= 9 && splits <= 8 ? fl::clusters_one_block_an_sm(splits) : 0;
    return split61::combines_in_cluster(splits, clusters, fit);
  }
  if (k.number >= 59) return split59::combines_in_cluster(splits, major >= 9);
  return k.number == 58 && split58::combines_in_cluster(splits, major >= 9);
}

int sm_count() {
  int device = 0, sms = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// The blocks of `block_bytes` of shared memory an SM of this device holds by its shared memory
// (each block also takes the reserved bytes), at most `by_registers`. Rung 69's 64-row blocks at
// d = 128 ask 112 KiB and 221 registers a thread (28,288 a block of 65,536: two an SM): two on an
// H100 or H200 (228 KiB an SM), one on an A100 (164 KiB).
int blocks_per_sm(int block_bytes, int by_registers) {
  int device = 0, smem = 0, reserved = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  FL_CUDA_CHECK(
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  return std::min(by_registers, smem / (block_bytes + reserved));
}

TEST(DecodeSplits, RowsThatSeeNoKeyOfASplit) {
  // Causal, Nq = 16, Nk = 4 Bc + r (5 key tiles of the rung's Bc keys: 64, or 128 for rung 65
  // at d = 64 with 16 rows a block) at B = 1 with 1 or 2 KV heads: on a GPU of 11 SMs or more
  // the rule gives 5 splits (eff grows with s up to the 5 tiles), one tile each. Row s sees the
  // keys j <= Nk - 16 + s: of the last split's r keys (4 Bc ..), rows s < 16 - r see none
  // (LSE_s = -inf, O_s = 0), and the combine must leave that split out of their rows.
  FL_REQUIRE_GPU();
  REQUIRE_SERVING_RUNGS(ks);
  fl::CublasHandle cublas;
  const int sms = sm_count();
  int ran = 0;
  for (int64_t d : {64, 96, 128, 192}) {
    for (const auto& h : {std::array<int64_t, 2>{1, 1}, std::array<int64_t, 2>{8, 2}}) {
      for (int64_t r : {1, 7, 15, 16}) {
        for (const fl::KernelInfo* k : ks) {
          const int64_t bc = k->tile(fl::placeholder_params(decode_spec(
                                         fl::DType::f16, 1, h[0], h[1], 16, 256, d, true,
                                         fl::Layout::BNHD)))
                                 .bc;
          const fl::ProblemSpec s = decode_spec(fl::DType::f16, 1, h[0], h[1], 16, 4 * bc + r,
                                                d, true, fl::Layout::BNHD);
          fl::Problem problem(s);
          const fl::Reference ref(problem, cublas);
          const std::string why = fl::why_unsupported(*k, problem.params_for(*k));
          if (why.find("shared memory") != std::string::npos) GTEST_SKIP() << why;
          ASSERT_EQ(why, "") << k->name() << " " << s.describe();
          if (k->workspace != nullptr && sms >= 11) {
            // Rung 59 on: five splits merge in a cluster, with no workspace.
            EXPECT_EQ(splits_of(*k, problem), in_cluster(*k, 5, h[1]) ? 1 : 5)
                << k->name() << " " << s.describe();
          }
          const fl::Verdict v = verify_poisoned(*k, problem, ref);
          EXPECT_TRUE(v.passed) << k->name() << " " << s.describe() << ": " << v.why
                                << " [max err " << v.out.max_abs_err << ", tolerance "
                                << v.tolerance << "]";
          ++ran;
        }
      }
    }
  }
  EXPECT_EQ(ran, 4 * 2 * 4 * static_cast<int>(ks.size()));
}

TEST(DecodeSplits, RowsThatSeeNoKeyAtAll) {
  // Causal, Nq = 16 against Nk < 16 keys (one tile: one split): rows s < 16 - Nk see no key and
  // get O = 0 and LSE = -inf exactly, the others finite; no NaN anywhere. Nq = 16, Nk = 16: every
  // row sees 1 .. 16 keys, all finite.
  FL_REQUIRE_GPU();
  REQUIRE_SERVING_RUNGS(ks);
  fl::CublasHandle cublas;
  for (int64_t nk : {1, 5, 15, 16}) {
    for (const auto& h : {std::array<int64_t, 2>{1, 1}, std::array<int64_t, 2>{8, 2}}) {
      constexpr int64_t kQ = 16, kD = 64;
      const fl::ProblemSpec s =
          decode_spec(fl::DType::bf16, 1, h[0], h[1], kQ, nk, kD, true, fl::Layout::BHND);
      fl::Problem problem(s);
      const fl::Reference ref(problem, cublas);
      for (const fl::KernelInfo* k : ks) {
        SCOPED_TRACE(k->name() + " " + s.describe());
        EXPECT_EQ(splits_of(*k, problem), 1);
        const fl::Verdict v = verify_poisoned(*k, problem, ref);
        EXPECT_TRUE(v.passed) << v.why;
        const std::vector<float> o = problem.output_host();
        std::vector<float> lse(h[0] * kQ);
        FL_CUDA_CHECK(cudaMemcpy(lse.data(), problem.lse.get(), lse.size() * 4,
                                 cudaMemcpyDeviceToHost));
        int64_t wrong = 0;
        for (int64_t head = 0; head < h[0]; ++head) {
          for (int64_t q = 0; q < kQ; ++q) {
            const int64_t row = head * kQ + q;
            const bool empty = q + nk - kQ + 1 <= 0;  // sees the keys j <= q + Nk - Nq
            const bool lse_ok = empty ? lse[row] == -std::numeric_limits<float>::infinity()
                                      : std::isfinite(lse[row]);
            if (!lse_ok && ++wrong <= 5) ADD_FAILURE() << "LSE h=" << head << " s=" << q;
            for (int64_t c = 0; c < kD; ++c) {
              const float x = o[row * kD + c];
              const bool ok = empty ? x == 0.f : std::isfinite(x);
              if (!ok && ++wrong <= 5) {
                ADD_FAILURE() << "O h=" << head << " s=" << q << " c=" << c << " = " << x;
              }
            }
          }
        }
        EXPECT_EQ(wrong, 0);
      }
    }
  }
}

TEST(DecodeSplits, ALongCacheInManySplits) {
  // B = 1, 32 query heads over 8, Nk = 131072 (2048 key tiles) and 131072 - 37: 8 blocks, which
  // rung 38 splits on any GPU of 10 SMs or more; one query and four (causal), both dtypes.
  FL_REQUIRE_GPU();
  REQUIRE_SERVING_RUNGS(ks);
  fl::CublasHandle cublas;
  const int sms = sm_count();
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (int64_t nq : {1, 4}) {
      const int64_t nk = nq == 1 ? 131072 : 131072 - 37;
      const fl::ProblemSpec s = decode_spec(t, 1, 32, 8, nq, nk, 128, nq > 1, fl::Layout::BNHD);
      fl::Problem problem(s);
      const fl::Reference ref(problem, cublas);
      for (const fl::KernelInfo* k : ks) {
        const std::string why = fl::why_unsupported(*k, problem.params_for(*k));
        if (why.find("shared memory") != std::string::npos) GTEST_SKIP() << why;
        ASSERT_EQ(why, "") << k->name() << " " << s.describe();
        if (k->workspace != nullptr && sms >= 10) {
          const int n = splits_of(*k, problem);
          EXPECT_GE(n, 2) << k->name() << " " << s.describe();
          EXPECT_LE(n, std::min(sms, split::kMaxSplits)) << k->name() << " " << s.describe();
          if (k->number == 40 || k->number >= 46) {
            // d = 128: one slot an SM, 15 splits on 132 SMs
            EXPECT_EQ(n, split40::choose_splits(8, sms, 1, 2048)) << s.describe();
          }
        }
        const fl::Verdict v = verify_poisoned(*k, problem, ref);
        EXPECT_TRUE(v.passed) << k->name() << " " << s.describe() << ": " << v.why
                              << " [max err " << v.out.max_abs_err << ", tolerance "
                              << v.tolerance << "]";
      }
    }
  }
}

TEST(DecodeSplits, Rung50ShortCallsInItsCount) {
  // Rung 50 on the device: the count its workspace holds is its rule's with the device's SMs
  // (splits.h), for short calls that rung 40's rule splits further (B = 1 GQA and MHA, B = 8 GQA:
  // 14, 4 and 2 splits on 132 SMs, here 8, 2 and none at d = 128) and a long one it leaves
  // alone; each verified with the workspace poisoned. d = 128 (fp16) and 192 (bf16).
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k = nullptr;
  for (const fl::KernelInfo* x : serving_rungs()) {
    if (x->number == 50) k = x;
  }
  if (k == nullptr) GTEST_SKIP() << "rung 50 is not in this build";
  fl::CublasHandle cublas;
  const int sms = sm_count();
  struct Shape {
    int64_t b, hq, hkv, nk;
  };
  const Shape shapes[] = {{1, 32, 8, 1024}, {1, 32, 8, 4096}, {1, 32, 32, 1000},
                          {8, 32, 8, 2048}, {1, 32, 8, 8192}};
  int cut = 0;
  for (int64_t d : {128, 192}) {
    for (const Shape& sh : shapes) {
      const fl::DType t = d == 128 ? fl::DType::f16 : fl::DType::bf16;
      const fl::ProblemSpec s = decode_spec(t, sh.b, sh.hq, sh.hkv, 1, sh.nk, d, false,
                                            fl::Layout::BNHD);
      fl::Problem problem(s);
      const std::string why = fl::why_unsupported(*k, problem.params_for(*k));
      if (why.find("shared memory") != std::string::npos) GTEST_SKIP() << why;
      ASSERT_EQ(why, "") << s.describe();
      const int64_t blocks = sh.b * sh.hkv, tiles = (sh.nk + 63) / 64, tile_bytes = 2 * 64 * d * 2;
      const int waves = split50::choose_splits(blocks, sms, 1, tiles);
      const int want =
          split50::price_splits(waves, blocks, sms, tiles, tile_bytes, sh.hq / sh.hkv);
      EXPECT_EQ(splits_of(*k, problem), want) << s.describe();
      if (want < waves) ++cut;
      const fl::Reference ref(problem, cublas);
      const fl::Verdict v = verify_poisoned(*k, problem, ref);
      EXPECT_TRUE(v.passed) << s.describe() << ": " << v.why << " [max err "
                            << v.out.max_abs_err << ", tolerance " << v.tolerance << "]";
    }
  }
  // On 128 SMs or more the four short shapes are cut back at d = 128 (at d = 192 the first).
  if (sms >= 128) EXPECT_GE(cut, 5) << "the short shapes cut back";
}

TEST(DecodeSplits, Rung62SplitsGridsOfMoreBlocksThanSMs) {
  // Rung 62 on the device: MHA 32/32 at B = 5 and 6, one query row, 4096 keys: 160 and 192
  // blocks, more than one wave of one block an SM on a GPU of up to 159 SMs, which rung 61 ran
  // unsplit. The count its workspace holds is its rule's with the device's SMs (3 and 2 on 132
  // SMs), and the call, verified with the workspace poisoned, is right; d = 128 (fp16: splits of
  // 22 tiles at B = 5, launched two an SM, and of 32 at B = 6, one an SM) and 192 (bf16). Rung
  // 61 keeps one split.
  FL_REQUIRE_GPU();
  const fl::KernelInfo *k62 = nullptr, *k61 = nullptr;
  for (const fl::KernelInfo* x : serving_rungs()) {
    if (x->number == 62) k62 = x;
    if (x->number == 61) k61 = x;
  }
  if (k62 == nullptr) GTEST_SKIP() << "rung 62 is not in this build";
  fl::CublasHandle cublas;
  const int sms = sm_count();
  int split_calls = 0;
  for (int64_t d : {128, 192}) {
    for (int64_t b : {5, 6}) {
      const fl::DType t = d == 128 ? fl::DType::f16 : fl::DType::bf16;
      const fl::ProblemSpec s = decode_spec(t, b, 32, 32, 1, 4096, d, false, fl::Layout::BNHD);
      fl::Problem problem(s);
      const std::string why = fl::why_unsupported(*k62, problem.params_for(*k62));
      if (why.find("shared memory") != std::string::npos) GTEST_SKIP() << why;
      ASSERT_EQ(why, "") << s.describe();
      const int64_t blocks = b * 32, tiles = 64;
      const int want = split62::price_splits(split62::choose_splits(blocks, sms, 1, tiles), blocks,
                                             sms, tiles, 2 * 64 * d * 2, 1);
      EXPECT_EQ(splits_of(*k62, problem), want) << s.describe();
      split_calls += want > 1;
      if (k61 != nullptr && blocks > sms) EXPECT_EQ(splits_of(*k61, problem), 1) << s.describe();
      const fl::Reference ref(problem, cublas);
      const fl::Verdict v = verify_poisoned(*k62, problem, ref);
      EXPECT_TRUE(v.passed) << s.describe() << ": " << v.why << " [max err "
                            << v.out.max_abs_err << ", tolerance " << v.tolerance << "]";
    }
  }
  if (sms >= 128 && sms < 160) EXPECT_EQ(split_calls, 4) << "every call past one wave splits";
}

TEST(DecodeSplits, Rung63RunsAWaveOfSixtyPercentOfTheSMsWhole) {
  // Rung 63 on the device: GQA 32/8 at B = 10 (80 blocks) and MHA 32/32 at B = 3 (96 blocks),
  // one query row, 4096 keys, d = 128 (fp16 and bf16). On a GPU of 121-133 SMs (an H100 SXM's
  // 132) one wave of these blocks is 60-80% of the SMs: one split (no workspace), where rung 62
  // splits; the count is its rule's with the device's SMs, and the call, verified with the
  // workspace poisoned, is right.
  FL_REQUIRE_GPU();
  const fl::KernelInfo *k63 = nullptr, *k62 = nullptr;
  for (const fl::KernelInfo* x : serving_rungs()) {
    if (x->number == 63) k63 = x;
    if (x->number == 62) k62 = x;
  }
  if (k63 == nullptr) GTEST_SKIP() << "rung 63 is not in this build";
  fl::CublasHandle cublas;
  const int sms = sm_count();
  int whole = 0;
  for (const fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (const auto& [b, hkv] : {std::pair<int64_t, int64_t>{10, 8}, {3, 32}}) {
      const int64_t d = 128;
      const fl::ProblemSpec s = decode_spec(t, b, 32, hkv, 1, 4096, d, false, fl::Layout::BNHD);
      fl::Problem problem(s);
      const std::string why = fl::why_unsupported(*k63, problem.params_for(*k63));
      if (why.find("shared memory") != std::string::npos) GTEST_SKIP() << why;
      ASSERT_EQ(why, "") << s.describe();
      const int64_t blocks = b * hkv, tiles = 64, tile_bytes = 2 * 64 * d * 2;
      const int want = split63::price_splits(
          split63::choose_splits(blocks, sms, 1, tiles, split63::cut_pct(tile_bytes)), blocks, sms,
          tiles, tile_bytes, 32 / hkv);
      EXPECT_EQ(splits_of(*k63, problem), want) << s.describe();
      whole += want == 1;
      if (k62 != nullptr && sms >= 121 && sms <= 133) {
        EXPECT_GT(splits_of(*k62, problem), 1) << s.describe();
      }
      const fl::Reference ref(problem, cublas);
      const fl::Verdict v = verify_poisoned(*k63, problem, ref);
      EXPECT_TRUE(v.passed) << s.describe() << ": " << v.why << " [max err "
                            << v.out.max_abs_err << ", tolerance " << v.tolerance << "]";
    }
  }
  if (sms >= 121 && sms <= 133) EXPECT_EQ(whole, 4) << "every call one split";
}

TEST(DecodeSplits, Rung64PricesShortCallsAtD96) {
  // Rung 64 on the device, d = 96, one query row (fp16 and bf16): GQA 32/8 at B = 1 with 1024
  // and 4096 keys, MHA 32/32 at B = 1 with 1024, GQA at B = 8 and B = 67 with 1024 are priced. On
  // a GPU of 128-133 SMs (an H100 SXM's 132) they take 8, 8, 2, 1 and 1 splits (half the SMs'
  // worth), merged in a cluster where the clusters fit, else by the combine kernel; GQA at B = 1
  // with 8192 keys and at B = 40 with 1024 (1.2 waves unsplit) are not priced, and ask rung 63's
  // workspace. Each call, verified with the workspace poisoned, is right.
  FL_REQUIRE_GPU();
  const fl::KernelInfo *k64 = nullptr, *k63 = nullptr;
  for (const fl::KernelInfo* x : serving_rungs()) {
    if (x->number == 64) k64 = x;
    if (x->number == 63) k63 = x;
  }
  if (k64 == nullptr) GTEST_SKIP() << "rung 64 is not in this build";
  fl::CublasHandle cublas;
  const int sms = sm_count();
  struct Shape {
    int64_t b, hkv, nk;
    int want;  // on 128-133 SMs; 0: not priced
  };
  const Shape shapes[] = {{1, 8, 1024, 8}, {1, 8, 4096, 8}, {1, 32, 1024, 2}, {8, 8, 1024, 1},
                          {67, 8, 1024, 1}, {1, 8, 8192, 0}, {40, 8, 1024, 0}};
  int priced = 0;
  for (const fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (const Shape& sh : shapes) {
      const int64_t d = 96;
      const fl::ProblemSpec s = decode_spec(t, sh.b, 32, sh.hkv, 1, sh.nk, d, false,
                                            fl::Layout::BNHD);
      fl::Problem problem(s);
      const std::string why = fl::why_unsupported(*k64, problem.params_for(*k64));
      if (why.find("shared memory") != std::string::npos) GTEST_SKIP() << why;
      ASSERT_EQ(why, "") << s.describe();
      const int64_t bytes = fl::workspace_bytes(*k64, problem.params());
      if (sms >= 128 && sms <= 133) {
        if (sh.want > 0) {
          const bool cluster = in_cluster(*k64, sh.want, sh.b * sh.hkv);
          EXPECT_EQ(bytes, sh.want == 1 || cluster ? 0
                                                   : split64::split_workspace_bytes(
                                                         sh.want, sh.b, 32, 1, d))
              << s.describe();
          ++priced;
        } else if (k63 != nullptr) {
          EXPECT_EQ(bytes, fl::workspace_bytes(*k63, problem.params())) << s.describe();
        }
      }
      const fl::Reference ref(problem, cublas);
      const fl::Verdict v = verify_poisoned(*k64, problem, ref);
      EXPECT_TRUE(v.passed) << s.describe() << ": " << v.why << " [max err "
                            << v.out.max_abs_err << ", tolerance " << v.tolerance << "]";
    }
  }
  if (sms >= 128 && sms <= 133) EXPECT_EQ(priced, 10) << "five priced calls, two dtypes";
}

// ---------------------------------------------------------------------------------------------
// GPU, alone: a K/V cache of more than 2^31 elements
// ---------------------------------------------------------------------------------------------

TEST(DecodeSplits, Rung65ReadsTilesOf128KeysAtD64) {
  // Rung 65 on the device (fp16 and bf16): at d = 64, GQA 32/8 at B = 1 with 1024, 4096 and
  // 32768 keys (one query row; and four, causal, with 4096 - 37: 16 rows a block) and MHA 32/32
  // at B = 8 with 1000 and 4096 keys ask the workspace of their rule's count with tiles of 128
  // keys and the device's SMs (none for one split or a cluster). GQA with 16 query rows (64 rows
  // a block, B = 1 and 8, 4096 keys) and d = 128 ask rung 64's. Each call, verified with the
  // workspace poisoned, is right.
  FL_REQUIRE_GPU();
  const fl::KernelInfo *k65 = nullptr, *k64 = nullptr;
  for (const fl::KernelInfo* x : serving_rungs()) {
    if (x->number == 65) k65 = x;
    if (x->number == 64) k64 = x;
  }
  if (k65 == nullptr) GTEST_SKIP() << "rung 65 is not in this build";
  fl::CublasHandle cublas;
  const int sms = sm_count();
  struct Shape {
    int64_t b, hkv, nq, nk, d;
  };
  const Shape shapes[] = {{1, 8, 1, 1024, 64},   {1, 8, 1, 4096, 64},   {1, 8, 4, 4096 - 37, 64},
                          {1, 8, 1, 32768, 64},  {8, 32, 1, 1000, 64},  {8, 32, 1, 4096, 64},
                          {1, 8, 16, 4096, 64},  {8, 8, 16, 4096, 64},  {1, 8, 1, 4096, 128}};
  int split_calls = 0;
  for (const fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (const Shape& sh : shapes) {
      const fl::ProblemSpec s = decode_spec(t, sh.b, 32, sh.hkv, sh.nq, sh.nk, sh.d, sh.nq > 1,
                                            fl::Layout::BNHD);
      fl::Problem problem(s);
      const std::string why = fl::why_unsupported(*k65, problem.params_for(*k65));
      if (why.find("shared memory") != std::string::npos) GTEST_SKIP() << why;
      ASSERT_EQ(why, "") << s.describe();
      const int64_t rows = sh.nq * (32 / sh.hkv);
      const int64_t keys = split65::tile_keys(sh.d, rows <= 16, 0), tb = 2 * keys * sh.d * 2;
      if (keys == 128 || sh.d != 64) {  // 32 KiB tiles: one slot an SM for a split grid
        const int64_t tiles = (sh.nk + keys - 1) / keys, blocks = sh.b * sh.hkv;
        const int want = split65::price_splits(
            split65::choose_splits(blocks, sms, split65::split_slots_per_sm(tb, 2), tiles,
                                   split65::cut_pct(tb)),
            blocks, sms, tiles, tb, rows, 2);
        const bool cluster = in_cluster(*k65, want, blocks);
        EXPECT_EQ(fl::workspace_bytes(*k65, problem.params()),
                  want == 1 || cluster
                      ? 0
                      : split65::split_workspace_bytes(want, sh.b, 32, sh.nq, sh.d))
            << s.describe() << ": " << want << " splits";
        split_calls += want > 1;
      }
      if (keys == 64 && k64 != nullptr) {
        EXPECT_EQ(fl::workspace_bytes(*k64, problem.params()),
                  fl::workspace_bytes(*k65, problem.params()))
            << s.describe();
      }
      const fl::Reference ref(problem, cublas);
      const fl::Verdict v = verify_poisoned(*k65, problem, ref);
      EXPECT_TRUE(v.passed) << s.describe() << ": " << v.why << " [max err "
                            << v.out.max_abs_err << ", tolerance " << v.tolerance << "]";
    }
  }
  if (sms >= 100) EXPECT_GE(split_calls, 8) << "GQA at B = 1 splits, both dtypes";
}

TEST(DecodeSplits, Rung69CountsTwoSlotsForBlocksOfManyRows) {
  // Rung 69 on the device (fp16 and bf16): GQA 32/8 with 16 query rows at d = 128 (64 rows a
  // block) asks the workspace of the two-slot count (the device's SMs, the blocks an SM holds)
  // where each split still reads 512 KiB or more, and rung 68's where it would not (B = 1 with
  // 8192 keys, B = 4 with 4096) or where the call is not such a call (one query row: 4 rows).
  // Each call, verified with the workspace poisoned, is right.
  FL_REQUIRE_GPU();
  const fl::KernelInfo *k69 = nullptr, *k68 = nullptr;
  for (const fl::KernelInfo* x : serving_rungs()) {
    if (x->number == 69) k69 = x;
    if (x->number == 68) k68 = x;
  }
  if (k69 == nullptr) GTEST_SKIP() << "rung 69 is not in this build";
  fl::CublasHandle cublas;
  const int sms = sm_count();
  struct Shape {
    int64_t b, nq, nk;
  };
  const int per_sm = blocks_per_sm(112 * 1024, 2);  // the 64-row d = 128 blocks an SM holds
  const Shape shapes[] = {{1, 16, 32768}, {2, 16, 16384}, {4, 16, 8192}, {8, 16, 32768},
                          {16, 16, 8192}, {1, 16, 8192},  {4, 16, 4096}, {8, 1, 32768}};
  int moved = 0;
  for (const fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (const Shape& sh : shapes) {
      const fl::ProblemSpec s =
          decode_spec(t, sh.b, 32, 8, sh.nq, sh.nk, 128, true, fl::Layout::BNHD);
      fl::Problem problem(s);
      const std::string why = fl::why_unsupported(*k69, problem.params_for(*k69));
      if (why.find("shared memory") != std::string::npos) GTEST_SKIP() << why;
      ASSERT_EQ(why, "") << s.describe();
      const int two = split69::two_slot_splits(sh.b * 8, sms, per_sm, sh.nk / 64, 32 * 1024,
                                               sh.nq * 4);
      const int64_t bytes = fl::workspace_bytes(*k69, problem.params());
      if (two == 0 && k68 != nullptr) {
        EXPECT_EQ(bytes, fl::workspace_bytes(*k68, problem.params())) << s.describe();
      }
      if (two > 0) {
        const bool cluster = in_cluster(*k69, two, sh.b * 8);
        EXPECT_EQ(bytes, cluster ? 0 : split69::split_workspace_bytes(two, sh.b, 32, sh.nq, 128))
            << s.describe() << ": " << two << " splits";
        moved += k68 != nullptr && bytes != fl::workspace_bytes(*k68, problem.params());
      }
      const fl::Reference ref(problem, cublas);
      const fl::Verdict v = verify_poisoned(*k69, problem, ref);
      EXPECT_TRUE(v.passed) << s.describe() << ": " << v.why << " [max err "
                            << v.out.max_abs_err << ", tolerance " << v.tolerance << "]";
    }
  }
  if (sms >= 128 && sms <= 133 && k68 != nullptr) {
    EXPECT_EQ(moved, 10) << "B = 1, 2, 4, 8 and 16 of many rows, both dtypes";
  }
}

TEST(DecodeLargeShape, IndexesACachePast2To31Elements) {
  // B = 1, 32 query heads over 8 KV heads, one query, Nk = 2^21 + 71 keys at d = 128:
  // 8 x 2,097,223 x 128 = 2,147,556,352 elements in K and in V, just past 2^31, so that the
  // last keys of the last KV head sit at offsets a 32-bit index would wrap. Causal (the one
  // query sees every key) with the LSE. About 8.6 GB for K and V, 0.5 GB for the reference's
  // scores.
  FL_REQUIRE_GPU();
  REQUIRE_SERVING_RUNGS(ks);
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
  const fl::Reference ref(problem, cublas);
  for (const fl::KernelInfo* k : ks) {
    ASSERT_EQ(fl::why_unsupported(*k, problem.params_for(*k)), "") << k->name();
    const fl::Verdict v = fl::verify(*k, problem, ref);
    EXPECT_TRUE(v.passed) << k->name() << " " << s.describe() << ": " << v.why << " [max err "
                          << v.out.max_abs_err << ", tolerance " << v.tolerance << "]";
  }
}

}  // namespace
