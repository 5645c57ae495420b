// =================================================================================================
// Kernel 27 of 28 — final Hopper: the narrow first visit
// builds on: 26 (the trims)
// changes:   a narrow first visit: where an item's rows see at most 16 keys of its first KV tile
//            (a length one above a tile multiple, the tiles counted from the last row), that
//            visit takes those 16 keys, not Bc:
//            1. its mask and softmax over 16 keys (8 scores a thread, rS_narrow)
//            2. its GEMMs narrowed: S one wgmma of N = 16 a k-step, its P.V (at step 1) one k-step
//            3. the item's steps compiled twice (`item`), for a narrow first visit and for a
//               whole one: a wgmma in a branch must have its whole life there, or ptxas
//               serializes every wgmma of the kernel (C7514, C7515); Q's descriptor built from
//               the warpgroup index read through redux.sync, in uniform registers
//            4. its K and V loaded as boxes of 16 rows (tmKNarrow, tmVNarrow), not Bc rows of
//               TMA's zero fill (not in an item of one visit, whose last P.V reads the whole tile)
// expect:    a length one above a tile multiple closer to its N than on rung 26, 0-7% slower
//            than N (measured); whole items as rung 26
// supports:  fp16, bf16; d in {64, 96, 128, 192, 256} (96 runs as 128, the columns past 96
//            zero); any Nq, Nk >= 1 (up to 2^30); causal or not; GQA;
//            LSE output; any scale; strides (16-byte multiples below 2^40 bytes: TMA's rules);
//            compute capability 9.0 only
// doc:       docs/kernels/27_final_hopper.md (its notebook: docs/notebooks/27_final_hopper.md)
// =================================================================================================
//
// Grid: min(#SMs, units) blocks, items = ceil(Nq / Br) x H_q x B, Br = 64 x consumers, units =
// items, or causal, about half as many pairs of them (schedule.cuh); block:
// 128 x (1 + consumers) threads. Item t is rows [Nq - (k + 1) Br, Nq - k Br), k = t % Tq, of head
// t / Tq = b H_q + h (Tq = ceil(Nq / Br); the first tile ragged, its Q tile from row 0); block i
// takes the items of item_of (both in schedule.cuh, tested on the CPU by
// tests/test_schedule.cu). Warpgroup 0 produces; consumer c (warpgroup c + 1) owns rows
// [64 c, 64 c + 64) of the tile, warp w of it rows [16 w, 16 w + 16); it visits the item's tiles
// that its own rows see (consumer_work). The consumers take turns in a cycle (c hands over to
// c + 1, the last to 0).
//
// Lengths and masking (rung 16's rules). Query row i sees key k when k < Nk and, if causal,
// k <= i + Nk - Nq. For the item's rows [q0, q1) (work_of), the keys any row sees end at
// kv_end = Nk, or min(Nk, q1 + Nk - Nq) when causal; the keys every row sees at kv_full = Nk, or
// min(Nk, q0 + 1 + Nk - Nq). The item visits the n = ceil(kv_end / Bc) tiles (none when
// kv_end <= 0), in the order j = n - 1, ..., 0; tiles j >= floor(kv_full / Bc) are masked, and
// in that order they are the first n_masked visits. A row of the item's Q tile past q1 (the next
// item's, or past Nq: zero queries) is computed like the others and never stored.
//
// Shared memory (dynamic, + 1 KiB to align); tiles are [d / 64][rows][64] in the 128-byte swizzle:
//   sQ [2][Br][d]            the queries of item q in stage q % 2 (q_full, q_empty; d = 256: one)
//   sO [Br][d]               the item's output on its way out    (d = 64, 128; at d = 256: sQ)
//   sK [2][Bc][d], sV [2][Bc][d]   K/V tile k of the block in stage k % 2 (rung 23's rings)
//   d = 64: 136 KiB; d = 128: 224 KiB; d = 256: 224 KiB.
//
// Schedule of consumer c for one item: rung 26's; a narrow first visit's S is one wgmma of N = 16 a
// k-step, its mask and softmax take 16 keys, and its P.V (at step 1, a masked step) one k-step.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/fence_proxy.cuh"
#include "common/ptx/gmma_desc.cuh"
#include "common/ptx/math.cuh"
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/named_barrier.cuh"
#include "common/ptx/setmaxnreg.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/stmatrix.cuh"
#include "common/ptx/tma.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/registry.h"
#include "common/tensor_map.h"
#include "kernels/27_final_hopper/schedule.cuh"

namespace fl {
namespace k27_final_hopper {

namespace gmma = ptx::gmma;

// The tile shape of each head dim: Br = 64 rows per consumer warpgroup (two, or three at d = 64);
// Bc is the N of the S wgmma. At d = 256 a consumer thread holds O in 128 registers: S of 80 keys
// (40) and P (20) fit beside it in 240, S of 128 keys would not; K and V of 80 keys (2 stages x 2
// x 40 KiB) fit beside Q's 64 KiB in 227 KiB, 96 keys would not. Measured: 80 keys is 2-7% faster
// than 64 at N >= 2048 (docs/notebooks/24_full_contract.md, "The KV tile at d = 128 and 256").
constexpr int kRingStages = 2;  // stages of the K ring and of the V ring (rung 23's), every d
constexpr int kMaxQStages = 2;  // Q's stages where a second fits (Config::kQStages)
// A first visit whose rows see at most kNarrowKeys keys of its tile is narrow: its GEMMs read
// those 16 keys only (consumer), and the producer loads only them (tmKNarrow, tmVNarrow).
constexpr int kNarrowKeys = 16;

template <int kHeadDim>
struct Config {
  // d = 64: three consumers (Br = 192): the GEMMs of a tile are half those of d = 128 while its
  // softmax is the same, so a third warpgroup's GEMMs are needed to keep the tensor cores busy
  // while two are in their softmax. A consumer's O, S and P (32 + 64 + 32 registers) fit in 160.
  static constexpr int kConsumers = kHeadDim == 64 ? 3 : 2;
  static constexpr int kBr = 64 * kConsumers;
  // d = 192 and 256: 80 keys a KV tile, so that two stages of K and V (and Q and O's buffer at
  // d = 192) fit in 227 KiB.
  static constexpr int kBc = kHeadDim >= 192 ? 80 : 128;
  static constexpr int kStages = kRingStages;
  // Each consumer visits only the tiles its own 64 rows see, where those can be fewer than the
  // item's: where the item's rows are not a KV tile's length (d = 64: 192 rows over 128 keys;
  // d = 256: 128 over 80), the causal diagonal crosses tile edges inside the item, and the upper
  // consumers' rows see fewer tiles. At d = 128 (128 over 128) they see the same ones (when
  // Nk - Nq is a multiple of 128), and the kernel keeps its loop as it was: built in, the extra
  // code measured 0.96-1.00x causal there (docs/notebooks/25_schedule.md, "Each consumer its
  // own tiles").
  static constexpr bool kConsumerTiles = kBr != kBc;
  static constexpr int tile_bytes(int rows) { return rows * kHeadDim * 2; }
  // O staged in sQ (see the banner) when a separate buffer does not fit in 227 KiB.
  static constexpr bool kOInQ =
      tile_bytes(kBr) * 2 + 2 * kStages * tile_bytes(kBc) + 1024 > 227 * 1024;
  // Two Q stages when a second one fits beside O's buffer (d = 64, 128): the next item's Q is
  // loaded while this item's steps run, not after its last S (the item before's Q is released
  // at its last S, so the producer waits on the release of two items back).
  static constexpr int kQStages =
      !kOInQ && tile_bytes(kBr) * 3 + 2 * kStages * tile_bytes(kBc) + 1024 <= 227 * 1024
          ? kMaxQStages
          : 1;
  static constexpr int kThreads = 128 * (1 + kConsumers);  // the producer warpgroup first
  static constexpr int kProducerRegs = 24;                 // setmaxnreg targets
  static constexpr int kConsumerRegs = kConsumers == 3 ? 160 : 240;
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "registers");
  static constexpr int kSmemBytes =
      tile_bytes(kBr) * (kQStages + (kOInQ ? 0 : 1)) + 2 * kStages * tile_bytes(kBc) + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory: 227 KiB a block");
};

// Named barriers: kTurn + c is consumer c's turn (taken with bar.sync by c, handed over with
// bar.arrive by consumer c - 1, cyclically: 256 threads each); kOwn + c is consumer c's own 128
// threads.
constexpr uint32_t kTurn = 1;
constexpr uint32_t kOwn = 4;

// Issues the d / 64 boxes of a kRows x d tile (columns 64 b .. 64 b + 63 into block b, kRows x
// 128 bytes apart), completing on `bar`, armed by the caller. Called by one thread.
template <int kHeadDim, int kRows>
__device__ __forceinline__ void load_tile(uint8_t* sTile, const CUtensorMap* map, uint32_t bar,
                                          int row, int head, int batch) {
#pragma unroll
  for (int blk = 0; blk < kHeadDim / 64; ++blk) {
    ptx::tma::load_4d(ptx::smem_addr(sTile) + blk * kRows * 128, map, bar, 64 * blk, row, head,
                      batch);
  }
}

// One KV tile of the online softmax, as rung 21: P in place of S, the correction still owed by O
// (exactly 1 for a row whose max did not move).
template <bool kFirst, int kBc>
__device__ __forceinline__ void online_softmax(float (&rS)[kBc / 2], float (&row_max)[2],
                                               float (&row_sum)[2], float (&correction)[2],
                                               float scale_log2) {
  // A row's max over this thread's Bc / 4 scores of it: four chains (8-key blocks b = c mod 4),
  // joined at the end. One chain would be Bc / 4 FMNMX each waiting on the last (nvcc 13.0's SASS
  // of rung 23 shows exactly that), the whole latency on the path to the exponentials.
  float tile_max[2];
  float part[2][4];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int c = 0; c < 4; ++c) part[r][c] = -INFINITY;
  }
#pragma unroll
  for (int i = 0; i < kBc / 2; ++i) {
    part[(i / 2) % 2][(i / 4) % 4] = fmaxf(part[(i / 2) % 2][(i / 4) % 4], rS[i]);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(fmaxf(part[r][0], part[r][1]), fmaxf(part[r][2], part[r][3]));
  }
  float max_scaled[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float new_max = kFirst ? tile_max[r] : fmaxf(row_max[r], tile_max[r]);
    // The -inf guard of rung 11: a row that has seen only masked keys keeps m = -inf and gets
    // P = 2^-inf = 0 (and, later, a correction 2^-inf = 0 of its zero O), never NaN.
    max_scaled[r] = new_max == -INFINITY ? 0.f : new_max * scale_log2;
    if constexpr (!kFirst) {
      correction[r] = new_max == row_max[r]
                          ? 1.f
                          : ptx::ex2_approx(fmaf(row_max[r], scale_log2, -max_scaled[r]));
      row_sum[r] *= correction[r];
    }
    row_max[r] = new_max;
  }
#pragma unroll
  for (int i = 0; i < kBc / 2; ++i) {
    rS[i] = ptx::ex2_approx(fmaf(rS[i], scale_log2, -max_scaled[(i / 2) % 2]));
    row_sum[(i / 2) % 2] += rS[i];
  }
}

// O *= correction, row by row (elements 4b + 2r and 4b + 2r + 1 are in row r).
template <int kHeadDim>
__device__ __forceinline__ void rescale_o(float (&rO)[kHeadDim / 2], const float (&correction)[2]) {
#pragma unroll
  for (int b = 0; b < kHeadDim / 8; ++b) {
#pragma unroll
    for (int i = 0; i < 4; ++i) rO[4 * b + i] *= correction[i / 2];
  }
}

// The keys of a score array (a reference to one): Bc for rS, 16 for a narrow visit's 8 scores.
template <typename Scores>
constexpr int keys_of = 2 * static_cast<int>(std::extent_v<std::remove_reference_t<Scores>>);

struct Barriers {
  uint64_t q_full[kMaxQStages], q_empty[kMaxQStages];  // Q's stages: loaded / released
  uint64_t k_full[kRingStages], k_empty[kRingStages];
  uint64_t v_full[kRingStages], v_empty[kRingStages];
};

__device__ __forceinline__ uint32_t parity(uint32_t use) { return use % 2; }

// The producer: one thread. For each item that visits a tile: Q once the consumers are done with
// the last one's, then K_j and V_j for j = n - 1 down to 0, each as soon as its stage is free.
template <int kHeadDim>
__device__ __forceinline__ void producer(const AttnParams& p, const Schedule& sched,
                                         const CUtensorMap* tmQ, const CUtensorMap* tmK,
                                         const CUtensorMap* tmV, const CUtensorMap* tmKNarrow,
                                         const CUtensorMap* tmVNarrow, uint8_t* sQ, uint8_t* sK,
                                         uint8_t* sV, Barriers& bar) {
  using C = Config<kHeadDim>;
  const int group_size = static_cast<int>(p.heads_q / p.heads_kv);
  uint32_t k = 0;      // the block's KV tile count
  uint32_t q_use = 0;  // the block's Q tile count (items with n > 0)
  const unsigned slots = slot_count(gridDim.x, sched);
  for (unsigned slot = 0; slot < slots; ++slot) {
    const int t = item_of(slot, gridDim.x, blockIdx.x, sched);
    if (t < 0) continue;
    const Work w = work_of<C::kBr, C::kBc>(t, sched, static_cast<int>(p.heads_q));
    if (w.n == 0) continue;  // written by the consumers alone
    const int head_kv = w.head / group_size;
    const int qs = static_cast<int>(q_use % C::kQStages);
    if (q_use >= C::kQStages) {
      ptx::mbarrier::wait(ptx::smem_addr(&bar.q_empty[qs]), parity(q_use / C::kQStages - 1));
    }
    ++q_use;
    ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&bar.q_full[qs]), C::tile_bytes(C::kBr));
    load_tile<kHeadDim, C::kBr>(sQ + qs * C::tile_bytes(C::kBr), tmQ,
                                ptx::smem_addr(&bar.q_full[qs]), w.q0, w.head, w.batch);
    for (int j = w.n - 1; j >= 0; --j, ++k) {
      const int stage = static_cast<int>(k % C::kStages);
      const uint32_t use = k / C::kStages;
      // A narrow first visit reads the first 16 keys of its tile and no more: a box of 16 rows
      // (into the stage's first rows of each column block), not Bc rows of TMA's zero fill. Not
      // in an item of one visit, whose last P.V (STEP n) reads the whole stage, P zero past 16.
      const bool narrow = j == w.n - 1 && w.n > 1 && w.first_keys <= kNarrowKeys;
      const uint32_t bytes = C::tile_bytes(narrow ? kNarrowKeys : C::kBc);
      if (use > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.k_empty[stage]), parity(use - 1));
      ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&bar.k_full[stage]), bytes);
      load_tile<kHeadDim, C::kBc>(sK + stage * C::tile_bytes(C::kBc), narrow ? tmKNarrow : tmK,
                                  ptx::smem_addr(&bar.k_full[stage]), j * C::kBc, head_kv, w.batch);
      if (use > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.v_empty[stage]), parity(use - 1));
      ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&bar.v_full[stage]), bytes);
      load_tile<kHeadDim, C::kBc>(sV + stage * C::tile_bytes(C::kBc), narrow ? tmVNarrow : tmV,
                                  ptx::smem_addr(&bar.v_full[stage]), j * C::kBc, head_kv, w.batch);
    }
  }
}

// A consumer warpgroup: 64 query rows of each of the block's items (rung 23's steps; see the
// banner for what masks and when).
template <typename T, int kHeadDim>
__device__ __forceinline__ void consumer(const AttnParams& p, const Schedule& sched, int wg,
                                         const CUtensorMap* tmO, const CUtensorMap* tmOFirst,
                                         uint8_t* sQ, const uint8_t* sK,
                                         const uint8_t* sV, uint8_t* sO, Barriers& bar) {
  using C = Config<kHeadDim>;
  constexpr int kBc = C::kBc;
  constexpr int kStages = C::kStages;
  const int warp = (threadIdx.x / 32) % 4;  // warp of the warpgroup: 16 of its rows
  const int lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  const bool leader = threadIdx.x % 128 == 0;  // the consumer's thread that talks to the producer
  constexpr int kConsumers = C::kConsumers;
  constexpr int kBr = C::kBr;
  const uint32_t my_turn = kTurn + wg, other_turn = kTurn + (wg + 1) % kConsumers;
  constexpr uint32_t kTurnThreads = 256;  // the consumer that hands over and the one that takes
  const float scale_log2 = p.softmax_scale * 1.44269504088896340736f;
  const int diag = sched.seqlen_k - sched.seqlen_q;

  float rO[kHeadDim / 2];
  float rS[kBc / 2];            // S_j, then P_j in place
  uint32_t rP[kBc / 16][4];     // P_{j-1} packed: the A operand of the next step's P·V
  float row_max[2], row_sum[2];
  float correction[2] = {1.f, 1.f};

  // The warpgroup index through redux.sync, whose result ptxas keeps in a uniform register: what
  // depends on it stays uniform. Q's descriptor, built from wg read from threadIdx, sat in
  // per-thread registers and was moved to uniform ones (R2UR) at every k-step of S; a branch on
  // such an index (the consumer's tiles, below) put the ring's stage there too.
  const int wg_uniform = int(__reduce_min_sync(~0u, unsigned(wg)));
  const uint64_t desc_q0 = gmma::kmajor_sw128(ptx::smem_addr(sQ) + wg_uniform * 64 * 128);
  uint64_t desc_q = desc_q0;  // the item's Q stage
  int q_stage = 0;
  const uint64_t desc_k0 = gmma::kmajor_sw128(ptx::smem_addr(sK));
  const uint64_t desc_v0 = gmma::mnmajor_sw128(ptx::smem_addr(sV), kBc * 128);

  // S = Q_g · K_jᵀ of the tile's first keys_of<acc> keys (Bc into rS, or a narrow first visit's
  // 16): d / 16 k-steps, four per 64-column block.
  auto issue_s = [&](auto& acc, int stage) {
    const uint64_t desc_k = gmma::advance(desc_k0, stage * C::tile_bytes(kBc));
#pragma unroll
    for (int s = 0; s < kHeadDim / 16; ++s) {
      ptx::wgmma::Wgmma<T, keys_of<decltype(acc)>>::template ss<0>(
          acc, gmma::advance(desc_q, (s / 4) * kBr * 128 + (s % 4) * 32),
          gmma::advance(desc_k, (s / 4) * kBc * 128 + (s % 4) * 32), s > 0);
    }
  };
  // O += P · V over the tile's first `keys` keys (Bc, or a narrow first visit's 16): keys / 16
  // k-steps of 16 keys, one wgmma of N = d each (the descriptor's leading byte offset, Bc x 128
  // bytes, steps across V's column blocks).
  auto issue_pv = [&](int stage, bool accumulate, auto keys) {
    const uint64_t desc_v = gmma::advance(desc_v0, stage * C::tile_bytes(kBc));
#pragma unroll
    for (int s = 0; s < decltype(keys)::value / 16; ++s) {
      ptx::wgmma::Wgmma<T, kHeadDim>::template rs<1>(rO, rP[s], gmma::advance(desc_v, s * 16 * 128),
                                                     s > 0 || accumulate);
    }
  };
  // P of the keys in acc (rS, or a narrow visit's 16) into rP's first k-steps.
  auto pack_p = [&](const auto& acc) {
#pragma unroll
    for (int s = 0; s < keys_of<decltype(acc)> / 16; ++s) {
      rP[s][0] = pack2<T>(acc[8 * s + 0], acc[8 * s + 1]);
      rP[s][1] = pack2<T>(acc[8 * s + 2], acc[8 * s + 3]);
      rP[s][2] = pack2<T>(acc[8 * s + 4], acc[8 * s + 5]);
      rP[s][3] = pack2<T>(acc[8 * s + 6], acc[8 * s + 7]);
    }
  };
  // The scores of the keys a row does not see become -inf: key >= limit[r] for row r, limit =
  // Nk, or min(Nk, row + 1 + Nk - Nq) when causal. Element i is key 8 (i / 4) + 2 quad + i % 2
  // of the tile, row (i / 2) % 2.
  int limit[2];
  auto mask = [&](auto& acc, int j) {
    const int key0 = j * kBc + 2 * quad;
#pragma unroll
    for (int i = 0; i < keys_of<decltype(acc)> / 2; ++i) {
      if (key0 + 8 * (i / 4) + i % 2 >= limit[(i / 2) % 2]) acc[i] = -INFINITY;
    }
  };
  auto wait_k = [&](uint32_t k) {
    ptx::mbarrier::wait(ptx::smem_addr(&bar.k_full[k % kStages]), parity(k / kStages));
  };
  auto wait_v = [&](uint32_t k) {
    ptx::mbarrier::wait(ptx::smem_addr(&bar.v_full[k % kStages]), parity(k / kStages));
  };
  auto release_k = [&](uint32_t k) {
    if (leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.k_empty[k % kStages]));
  };
  auto release_v = [&](uint32_t k) {
    if (leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.v_empty[k % kStages]));
  };
  auto release_q = [&] {
    if (leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.q_empty[q_stage]));
  };
  // Rung 21's wait_group 0 with a dependence on the finished softmax (see its page).
  auto wait_pv_after = [&](const float (&sums)[2]) {
    if (__all_sync(0xffffffffu, !(sums[0] < 0.f) && !(sums[1] < 0.f))) {
      ptx::wgmma::wait_group<0>();
    } else {
      ptx::wgmma::wait_group<0>();
    }
  };
  // O *= the correction of the last softmax, skipped by a warp none of whose 16 rows got a new max
  // (rung 16's rule; the vote is per warp, the rows of a warp are its own).
  auto rescale_if_moved = [&] {
    if (__any_sync(0xffffffffu, correction[0] != 1.f || correction[1] != 1.f)) {
      rescale_o<kHeadDim>(rO, correction);
    }
  };
  // The widths of a visit's GEMMs: a whole tile, or a narrow first visit's 16 keys.
  constexpr std::integral_constant<int, kBc> kWide{};
  constexpr std::integral_constant<int, kNarrowKeys> kNarrow{};
  auto fence_p = [&] {
#pragma unroll
    for (int s = 0; s < kBc / 16; ++s) ptx::wgmma::fence_operands(rP[s]);
  };

  // One turn that issues nothing: the cycle of turns counts every consumer's n + 1 turns an item.
  auto pass_turn = [&] {
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    ptx::named_barrier_arrive(other_turn, kTurnThreads);
  };
  // EPILOGUE, in three parts. sum_rows: l summed across the quad and inverted, while the item's
  // last P.V runs; pack_o: O / l, rounded to T, into oP (the fragments stmatrix takes); store_o:
  // oP into the staging buffer by stmatrix, then TMA stores, and the LSE. Where O has its
  // own buffer (d = 64, 128), store_o runs once the next item's first S is issued, while that S
  // runs (flush, below): it reads oP, the row max and the row sum, not O, which the S's wgmma
  // makes ptxas fence off (C7517: a wait injected before any read of O while a wgmma is in flight).
  uint32_t oP[kHeadDim / 4];
  // The row sums are whole once the item's last softmax is done: summed and inverted then, not
  // after the last P.V, where the tensor cores would wait on them (docs/notebooks/26_trims.md,
  // "An item's end").
  float inv_sum[2];
  auto sum_rows = [&] {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
      inv_sum[r] = row_sum[r] > 0.f ? 1.f / row_sum[r] : 0.f;  // a row that sees no key: O = 0
    }
  };
  auto pack_o = [&] {
#pragma unroll
    for (int i = 0; i < kHeadDim / 4; ++i) {
      oP[i] = pack2<T>(rO[2 * i] * inv_sum[i % 2], rO[2 * i + 1] * inv_sum[i % 2]);
    }
  };
  auto store_o = [&](const Work& w) {
    const int row0 = w.q0 + 64 * wg + 16 * warp + group;
    // With its own buffer: the consumer's previous store must have read it. In sQ: the consumer
    // has finished its last S (the wait on its last P.V), and its rows of sQ are its own.
    if (!C::kOInQ && leader) ptx::tma::wait_group_read<0>();
    ptx::named_barrier_sync(kOwn + wg, 128);
    // The consumer's rows 64 wg .. 64 wg + 63 of each column block of the staging tile (the
    // layout of sQ); one stmatrix.x4 writes 8-column blocks b, b + 1 of the warp's 16 rows.
    const uint32_t o_base = ptx::smem_addr(sO) + wg * 64 * 128;
    const int m = lane / 8;
    const int r_st = 16 * warp + (m % 2) * 8 + lane % 8;  // this lane's row of the 64
#pragma unroll
    for (int b = 0; b < kHeadDim / 8; b += 2) {
      const uint32_t addr = o_base + gmma::sw128_offset(r_st, 8 * (b + m / 2), kBr);
      ptx::stmatrix_x4(addr, oP[2 * b], oP[2 * b + 1], oP[2 * b + 2], oP[2 * b + 3]);
    }
    ptx::fence_proxy_async_shared();  // the TMA engine reads what stmatrix wrote
    ptx::named_barrier_sync(kOwn + wg, 128);
    if (leader) {
      const int q_row = w.q0 + 64 * wg;
      // Rows past the item's end: past Nq, clipped by the store; or, in a head's ragged first
      // item, the next item's rows, clipped by the map of O cut at the end of that item.
      if (q_row < w.q1) {  // none of the rows the item's: skip
        const CUtensorMap* map = q_row + 64 > w.q1 ? tmOFirst : tmO;
#pragma unroll
        for (int blk = 0; blk < kHeadDim / 64; ++blk) {
          ptx::tma::store_4d(o_base + blk * kBr * 128, map, 64 * blk, q_row, w.head, w.batch);
        }
      }
      ptx::tma::commit_group();
      if constexpr (C::kOInQ) {
        ptx::tma::wait_group_read<0>();  // sQ is free once the store has read it
      }
    }
    if constexpr (C::kOInQ) release_q();
    if (p.lse != nullptr && quad == 0) {
      constexpr float kLn2 = 0.69314718055994530942f;
      float* lse = p.lse + (static_cast<int64_t>(w.batch) * p.heads_q + w.head) * sched.seqlen_q;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (row0 + 8 * r < w.q1) {
          lse[row0 + 8 * r] = (row_max[r] * scale_log2 + log2f(row_sum[r])) * kLn2;
        }
      }
    }
  };
  // O staged in sQ (d = 256) is stored at once: the next item's Q goes where it is staged.
  constexpr bool kDeferEpilogue = !C::kOInQ;
  Work pending{0, 0, 0, 0, 0, 0, 0};  // the item whose O is in oP, not stored yet: has_pending
  bool has_pending = false;
  auto flush = [&] {
    if (has_pending) {
      store_o(pending);
      has_pending = false;
    }
  };

  // Consumer 0 goes first: the last consumer hands it its first turn.
  if (wg == kConsumers - 1) ptx::named_barrier_arrive(kTurn + 0, kTurnThreads);

  uint32_t k = 0, q_use = 0;
  const unsigned slots = slot_count(gridDim.x, sched);
  for (unsigned slot = 0; slot < slots; ++slot) {
    const int t = item_of(slot, gridDim.x, blockIdx.x, sched);
    if (t < 0) continue;
    const Work w = work_of<C::kBr, kBc>(t, sched, static_cast<int>(p.heads_q));
    const int row0 = w.q0 + 64 * wg + 16 * warp + group;  // this thread's rows: row0, row0 + 8
    // This consumer's rows visit the item's last mine.n tiles (fewer than the item's when they
    // are above the diagonal's lowest rows, none when past the item's): the visits before are the
    // other consumers'. It takes their turns without issuing, and lets each stage go once it has
    // landed.
    const Work mine = C::kConsumerTiles ? consumer_work<kBc>(w, wg_uniform, sched) : w;
    for (int i = mine.n; i < w.n; ++i, ++k) {
      pass_turn();
      wait_k(k);
      release_k(k);
      wait_v(k);
      release_v(k);
    }
    if (mine.n == 0) {
      flush();
      if (w.n > 0) {  // the item's last turn (P.V of tile 0), and its Q, unread
        pass_turn();
        q_stage = static_cast<int>(q_use % C::kQStages);
        ++q_use;
        release_q();
      }
      // No row of this consumer sees a key: O = 0, LSE = -inf, stored directly.
      T* gO = static_cast<T*>(p.o) + w.batch * p.o_stride.batch + w.head * p.o_stride.head;
      using Pair = typename TypeTraits<T>::pair;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        if (row >= w.q1) continue;  // past the item's rows: the next item's
        for (int blk = 0; blk < kHeadDim / 8 && 8 * blk < p.head_dim; ++blk) {
          *reinterpret_cast<Pair*>(gO + row * p.o_stride.row + 8 * blk + 2 * quad) =
              TypeTraits<T>::from_float2(0.f, 0.f);
        }
        if (p.lse != nullptr && quad == 0) {
          p.lse[(static_cast<int64_t>(w.batch) * p.heads_q + w.head) * sched.seqlen_q + row] =
              -INFINITY;
        }
      }
      continue;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      limit[r] = sched.causal ? min(sched.seqlen_k, row0 + 8 * r + 1 + diag) : sched.seqlen_k;
    }
    q_stage = static_cast<int>(q_use % C::kQStages);
    desc_q = gmma::advance(desc_q0, q_stage * C::tile_bytes(kBr));
    ptx::mbarrier::wait(ptx::smem_addr(&bar.q_full[q_stage]), parity(q_use / C::kQStages));
    ++q_use;
    const int n = mine.n;
    // A narrow first visit: the rows see at most 16 keys of tile n - 1 (a length one above a
    // tile multiple, the tiles counted from the last row). Its S is one wgmma of N = 16 a k-step,
    // into an array of its own, its mask and softmax take those 16 keys, and its P.V (at step 1)
    // is one k-step. The item's steps are compiled twice (`item`): for a narrow first visit and
    // for a whole one. A wgmma in a branch must have its whole life there (fence, issue, commit,
    // wait), or ptxas serializes every wgmma of the kernel (C7514, C7515); with both lives in one
    // body, the whole items' plain loop took 541 instructions instead of 509 at d = 128 (notebook).
    const bool narrow = mine.first_keys <= kNarrowKeys;

    auto item = [&](auto narrow_c) {
      // -------------------------------------------------------------------------------------------
      // STEP 0: S of tile n - 1 alone (a narrow visit's into 8 scores of its own), the mask (a
      // tile of which rows see fewer than Bc keys is masked; a narrow one always is), softmax, P.
      // The two branches are one code written twice: moved into one lambda called from both,
      // the build ran 3-6% slower at d = 128, N >= 2048 (ptxas's schedule, not the work: notebook)
      // -------------------------------------------------------------------------------------------
      wait_k(k);
      ptx::named_barrier_sync(my_turn, kTurnThreads);
      if constexpr (decltype(narrow_c)::value) {
        float rS_narrow[kNarrowKeys / 2];
        ptx::wgmma::fence();
        issue_s(rS_narrow, static_cast<int>(k % kStages));
        ptx::wgmma::commit_group();
        ptx::named_barrier_arrive(other_turn, kTurnThreads);
        flush();  // the item before's O, while this S runs
        row_max[0] = row_max[1] = -INFINITY;
        row_sum[0] = row_sum[1] = 0.f;
        ptx::wgmma::wait_group<0>();
        ptx::wgmma::fence_operands(rS_narrow);
        release_k(k);
        if (n == 1 && !C::kOInQ) release_q();
        mask(rS_narrow, n - 1);
        online_softmax<true, kNarrowKeys>(rS_narrow, row_max, row_sum, correction, scale_log2);
        pack_p(rS_narrow);
#pragma unroll
        for (int s = kNarrowKeys / 16; s < kBc / 16; ++s) {  // P past the 16 keys: none (an
          rP[s][0] = rP[s][1] = rP[s][2] = rP[s][3] = 0u;    // item of one visit reads it, STEP n)
        }
      } else {
        ptx::wgmma::fence();
        issue_s(rS, static_cast<int>(k % kStages));
        ptx::wgmma::commit_group();
        ptx::named_barrier_arrive(other_turn, kTurnThreads);
        flush();  // the item before's O, while this S runs
        row_max[0] = row_max[1] = -INFINITY;
        row_sum[0] = row_sum[1] = 0.f;
        ptx::wgmma::wait_group<0>();
        ptx::wgmma::fence_operands(rS);
        release_k(k);
        if (n == 1 && !C::kOInQ) release_q();
        if (mine.n_masked > 0) mask(rS, n - 1);
        online_softmax<true, kBc>(rS, row_max, row_sum, correction, scale_log2);
        pack_p(rS);
      }
      correction[0] = correction[1] = 1.f;  // O holds nothing yet

      // -------------------------------------------------------------------------------------------
      // MAIN LOOP, steps 1 .. n-1: S of tile n - 1 - i, then P·V of the tile before
      // -------------------------------------------------------------------------------------------
      // One step; kMasked: the tile crosses the diagonal or the end of the keys. The masked steps
      // come first (the tiles are visited last to first) and run in a loop of their own, so that
      // the loop of the plain ones is rung 23's, without a test (but for the rescale's place).
      auto step = [&](int i, auto masked) {
        const uint32_t ki = k + i;
        wait_k(ki);
        wait_v(ki - 1);
        ptx::named_barrier_sync(my_turn, kTurnThreads);
        ptx::wgmma::fence();
        issue_s(rS, static_cast<int>(ki % kStages));
        ptx::wgmma::commit_group();
        rescale_if_moved();  // O is no wgmma's while S runs: P·V of the tile before waited for
        // the rescale's writes of O, fenced before the wgmma that reads them. A narrow first
        // visit's P.V (step 1, then a masked step) is one k-step.
        if (decltype(narrow_c)::value && decltype(masked)::value && i == 1) {
          ptx::wgmma::fence();
          issue_pv(static_cast<int>((ki - 1) % kStages), false, kNarrow);
          ptx::wgmma::commit_group();
        } else {
          ptx::wgmma::fence();
          issue_pv(static_cast<int>((ki - 1) % kStages), i > 1, kWide);
          ptx::wgmma::commit_group();
        }
        ptx::named_barrier_arrive(other_turn, kTurnThreads);
        ptx::wgmma::wait_group<1>();
        ptx::wgmma::fence_operands(rS);
        release_k(ki);
        if (i == n - 1 && !C::kOInQ) release_q();  // the item's last S
        if constexpr (decltype(masked)::value) mask(rS, n - 1 - i);
        online_softmax<false, kBc>(rS, row_max, row_sum, correction, scale_log2);
        wait_pv_after(row_sum);
        ptx::wgmma::fence_operands(rO);
        fence_p();
        release_v(ki - 1);
        pack_p(rS);
      };
      // A narrow visit's P.V is at step 1, which is then taken in the masked loop.
      const int masked_end = min(max(mine.n_masked, decltype(narrow_c)::value ? 2 : 1), n);
      int i = 1;
      for (; i < masked_end; ++i) step(i, std::true_type{});
      for (; i < n; ++i) step(i, std::false_type{});

      // -------------------------------------------------------------------------------------------
      // STEP n: P·V of tile 0 alone
      // -------------------------------------------------------------------------------------------
      const uint32_t k_last = k + n - 1;
      rescale_if_moved();
      wait_v(k_last);
      ptx::named_barrier_sync(my_turn, kTurnThreads);
      ptx::wgmma::fence();
      issue_pv(static_cast<int>(k_last % kStages), n > 1, kWide);  // narrow or not (zeros in P)
      ptx::wgmma::commit_group();
      ptx::named_barrier_arrive(other_turn, kTurnThreads);
      sum_rows();  // while this P.V runs
      ptx::wgmma::wait_group<0>();
      ptx::wgmma::fence_operands(rO);
      fence_p();
      release_v(k_last);
      k += n;

      // -------------------------------------------------------------------------------------------
      // EPILOGUE: O / l packed now; stored (stmatrix, TMA) with the LSE while the next item's first
      // S runs (flush, at STEP 0 above), or now where O is staged in sQ
      // -------------------------------------------------------------------------------------------
      pack_o();
      if constexpr (kDeferEpilogue) {
        pending = w;
        has_pending = true;
      } else {
        store_o(w);
      }
    };
    if (narrow) item(std::true_type{}); else item(std::false_type{});  // one of two compilations
  }
  flush();
  // The last consumer handed consumer 0 a turn after its last step: consumer 0 takes it.
  if (wg == 0) ptx::named_barrier_sync(my_turn, kTurnThreads);
  if (leader) ptx::tma::wait_group<0>();  // the last store is written before the block ends
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(Config<kHeadDim>::kThreads, 1)
    attention_kernel(const AttnParams p, const Schedule sched,
                     const __grid_constant__ CUtensorMap tmQ,
                     const __grid_constant__ CUtensorMap tmK,
                     const __grid_constant__ CUtensorMap tmV,
                     const __grid_constant__ CUtensorMap tmKNarrow,
                     const __grid_constant__ CUtensorMap tmVNarrow,
                     const __grid_constant__ CUtensorMap tmO,
                     const __grid_constant__ CUtensorMap tmOFirst) {
  using C = Config<kHeadDim>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - ptx::smem_addr(smem_raw) % 1024) % 1024);
  uint8_t* sQ = smem;
  uint8_t* sO = C::kOInQ ? sQ : sQ + C::kQStages * C::tile_bytes(C::kBr);
  uint8_t* sK = (C::kOInQ ? sQ : sO) + C::tile_bytes(C::kBr);
  uint8_t* sV = sK + C::kStages * C::tile_bytes(C::kBc);
  __shared__ alignas(8) Barriers bar;

  if (threadIdx.x == 0) {
    ptx::tma::prefetch_map(&tmQ);
    ptx::tma::prefetch_map(&tmK);
    ptx::tma::prefetch_map(&tmV);
    ptx::tma::prefetch_map(&tmKNarrow);
    ptx::tma::prefetch_map(&tmVNarrow);
    ptx::tma::prefetch_map(&tmO);
    ptx::tma::prefetch_map(&tmOFirst);
    for (int s = 0; s < C::kQStages; ++s) {
      ptx::mbarrier::init(ptx::smem_addr(&bar.q_full[s]), 1);
      ptx::mbarrier::init(ptx::smem_addr(&bar.q_empty[s]), C::kConsumers);
    }
    for (int s = 0; s < C::kStages; ++s) {
      ptx::mbarrier::init(ptx::smem_addr(&bar.k_full[s]), 1);            // the producer's expect_tx
      ptx::mbarrier::init(ptx::smem_addr(&bar.k_empty[s]), C::kConsumers);
      ptx::mbarrier::init(ptx::smem_addr(&bar.v_full[s]), 1);
      ptx::mbarrier::init(ptx::smem_addr(&bar.v_empty[s]), C::kConsumers);
    }
    ptx::mbarrier::fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the roles part here

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (threadIdx.x == 0) {
      producer<kHeadDim>(p, sched, &tmQ, &tmK, &tmV, &tmKNarrow, &tmVNarrow, sQ, sK, sV, bar);
    }
  } else {
    ptx::setmaxnreg_inc<C::kConsumerRegs>();
    consumer<T, kHeadDim>(p, sched, wg - 1, &tmO, &tmOFirst, sQ, sK, sV, sO, bar);
  }
}

// Calls f with std::integral_constant<int, D> for the head dim the call runs at, D the tiles'
// columns. d = 96 runs as 128: the tensor maps keep the call's d, so TMA fills columns 96 .. 127
// of every Q, K and V tile with zeros (they add nothing to S, and O's columns there are P times
// zero) and leaves them out of O's stores; the work is d = 128's. d = 192 is three boxes of 64
// columns, compiled as it is.
template <typename F>
void dispatch_head_dim(int64_t d, F&& f) {
  switch (d) {
    case 64: f(std::integral_constant<int, 64>{}); break;
    case 96:
    case 128: f(std::integral_constant<int, 128>{}); break;
    case 192: f(std::integral_constant<int, 192>{}); break;
    case 256: f(std::integral_constant<int, 256>{}); break;
    default: throw UnsupportedError("27_final_hopper: head_dim must be 64, 96, 128, 192 or 256");
  }
}

bool supported_head_dim(int64_t d) {
  return d == 64 || d == 96 || d == 128 || d == 192 || d == 256;
}

// The tile of the call's head dim (Config); rung 23's 128 x 128 for a head dim the rung refuses.
TileShape tile(const AttnParams& p) {
  TileShape t{128, 128};
  if (supported_head_dim(p.head_dim)) {
    dispatch_head_dim(p.head_dim, [&](auto dim) {
      using C = Config<decltype(dim)::value>;
      t = {C::kBr, C::kBc};
    });
  }
  return t;
}

std::string supports(const AttnParams& p) {
  if (!supported_head_dim(p.head_dim)) {
    return "head_dim must be 64, 96, 128, 192 or 256 (got " + std::to_string(p.head_dim) + ")";
  }
  std::string why = tma_rules("Q", p.q_stride, p.seqlen_q);
  if (why.empty()) why = tma_rules("K", p.k_stride, p.seqlen_k);
  if (why.empty()) why = tma_rules("V", p.v_stride, p.seqlen_k);
  if (why.empty()) why = tma_rules("O", p.o_stride, p.seqlen_q);
  if (!why.empty()) return why;
  // Row and key indices, tile and item counts are 32-bit in the kernel (rung 16's limit).
  if (p.seqlen_q > (int64_t{1} << 30) || p.seqlen_k > (int64_t{1} << 30)) {
    return "Nq and Nk must be <= 2^30 (got Nq = " + std::to_string(p.seqlen_q) +
           ", Nk = " + std::to_string(p.seqlen_k) + ")";
  }
  const int64_t br = tile(p).br;
  if ((p.seqlen_q + br - 1) / br > INT_MAX / p.heads_q / p.batch) {
    return "ceil(Nq / " + std::to_string(br) + ") x H_q x B work items must be <= 2^31 - 1";
  }
  return "";
}

void launch(const AttnParams& p, cudaStream_t stream) {
  dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_head_dim(p.head_dim, [&](auto dim) {
      constexpr int kHeadDim = decltype(dim)::value;
      using C = Config<kHeadDim>;
      FL_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<T, kHeadDim>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         C::kSmemBytes));
      const Schedule sched =
          make_schedule(C::kBr, p.seqlen_q, p.seqlen_k, p.heads_q * p.batch, p.causal);
      int device = 0, sms = 0;
      FL_CUDA_CHECK(cudaGetDevice(&device));
      FL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      const unsigned blocks = static_cast<unsigned>(sms < sched.units ? sms : sched.units);
      const int64_t d = p.head_dim;  // the maps' columns: the call's d, not the tiles'
      const CUtensorMap tmQ =
          make_tensor_map_4d(p.q, d, p.seqlen_q, p.heads_q, p.batch, p.q_stride, C::kBr);
      const CUtensorMap tmK =
          make_tensor_map_4d(p.k, d, p.seqlen_k, p.heads_kv, p.batch, p.k_stride, C::kBc);
      const CUtensorMap tmV =
          make_tensor_map_4d(p.v, d, p.seqlen_k, p.heads_kv, p.batch, p.v_stride, C::kBc);
      const CUtensorMap tmKNarrow =
          make_tensor_map_4d(p.k, d, p.seqlen_k, p.heads_kv, p.batch, p.k_stride, kNarrowKeys);
      const CUtensorMap tmVNarrow =
          make_tensor_map_4d(p.v, d, p.seqlen_k, p.heads_kv, p.batch, p.v_stride, kNarrowKeys);
      const CUtensorMap tmO =
          make_tensor_map_4d(p.o, d, p.seqlen_q, p.heads_q, p.batch, p.o_stride, 64);
      // O cut at the end of a head's first query tile, rows [0, Nq - (Tq - 1) Br): the store of
      // that ragged tile's rows (schedule.cuh, work_of).
      const int64_t first_rows = p.seqlen_q - int64_t{sched.q_tiles - 1} * C::kBr;
      const CUtensorMap tmOFirst =
          make_tensor_map_4d(p.o, d, first_rows, p.heads_q, p.batch, p.o_stride, 64);
      attention_kernel<T, kHeadDim><<<blocks, C::kThreads, C::kSmemBytes, stream>>>(
          p, sched, tmQ, tmK, tmV, tmKNarrow, tmVNarrow, tmO, tmOFirst);
    });
  });
}

}  // namespace k27_final_hopper

const KernelInfo& kernel_27() {
  static const KernelInfo info{27,
                               "final_hopper",
                               "final Hopper: the narrow first visit",
                               "docs/kernels/27_final_hopper.md",
                               90,
                               k27_final_hopper::tile,
                               k27_final_hopper::supports,
                               k27_final_hopper::launch,
                               false,
                               90};
  return info;
}

}  // namespace fl
