// =================================================================================================
// Kernel 23 of 28 — TMA-store epilogue: O leaves through shared memory while the consumer goes on
// builds on: 22 (persistent)
// changes:   1. O leaves through shared memory: stmatrix writes the normalised tile into a
//               128-byte-swizzled buffer, one thread per consumer stores it with a TMA store
//               (cp.async.bulk.tensor, shared -> global), and the consumer goes on to the next
//               item at once; it waits for that store to have read the buffer only when it needs
//               the buffer again, an item later
//            2. the 32 KiB of that buffer come from the K/V ring: K and V get rings of their own,
//               2 stages each, with their own barriers. K_j is released as soon as S_j is done,
//               V_j after P_j·V_j: 2 stages give the producer the lead that 3 shared ones gave
// expect:    TFLOP/s above rung 22, the most at N = 512 and 1024 (short items: the epilogue is a
//            larger part of each)
// supports:  fp16, bf16; d = 128; Nq a multiple of 128; Nk a multiple of 128; non-causal; GQA;
//            LSE output; any scale; strides (16-byte multiples, below 2^40 bytes: TMA's rules, O's
//            too); at most 2^31 - 1 work items; compute capability 9.0 only
// doc:       docs/kernels/23_tma_store.md
// =================================================================================================
//
// Grid: min(#SMs, items) blocks, items = (Nq / 128) x H_q x B; block: 384 threads = 3
// warpgroups. Item t is query tile t % (Nq / 128) of head (b, h), t / (Nq / 128) = b H_q + h, and
// covers query rows [128 x, 128 x + 128) of that head, which reads KV head h / (H_q / H_kv).
// Warpgroup 0 produces; consumer c = 0, 1 (warpgroup c + 1) owns rows [64 c, 64 c + 64) of the
// tile, and in it warp w (of 4) rows [16 w, 16 w + 16) (common/ptx/wgmma.cuh).
//
// Shared memory (dynamic, (128 + 128 + 2 x 2 x 128) x 128 x 2 bytes = 192 KiB, + 1 KiB to align):
//   sQ [128][128]            the item's queries                  (q_full, q_empty)
//   sO [128][128]            the item's output on its way out    (consumer c: rows 64c..64c+63)
//   sK [2][128][128]         keys of KV tile k in stage k % 2    (k_full[], k_empty[])
//   sV [2][128][128]         values of KV tile k in stage k % 2  (v_full[], v_empty[])
// k counts the block's KV tiles over all its items, so the rings do not restart between items
// (rung 22's count, now of two rings).
// Every tile is two 64-column blocks in the 128-byte swizzle, as in rung 18.
//
// Registers of a consumer thread: as rung 21.
//
// Schedule of consumer c for one item (n KV tiles; stage of tile j = (k0 + j) % 2), rung 22's
// with K and V waited for and released apart, and the new epilogue:
//   wait q_full
//   step 0:  wait K_0; sync turn c; issue S_0, commit; arrive turn 1-c; wait 0; release K_0;
//            softmax; pack
//   step j:  wait K_j, V_{j-1}; sync turn c; issue S_j, commit; issue P_{j-1}·V_{j-1}, commit;
//            arrive turn 1-c; wait 1 (S_j); release K_j (and Q, at j = n - 1); softmax of S_j;
//            wait 0; release V_{j-1}; O *= correction; pack P_j
//   step n:  wait V_{n-1}; sync turn c; issue P_{n-1}·V_{n-1}; arrive turn 1-c; wait 0;
//            release V_{n-1}
//   epilogue: wait until this consumer's last TMA store has read sO; O / l into sO (stmatrix);
//            fence.proxy.async; one thread issues the TMA store of the consumer's 64 rows; LSE
//   after the last item: consumer 0 takes the turn consumer 1 handed it (no arrival left pending)
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/gmma_desc.cuh"
#include "common/ptx/math.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/named_barrier.cuh"
#include "common/ptx/setmaxnreg.cuh"
#include "common/ptx/stmatrix.cuh"
#include "common/ptx/fence_proxy.cuh"
#include "common/ptx/tma.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/registry.h"
#include "common/tensor_map.h"

namespace fl {
namespace k23_tma_store {

namespace gmma = ptx::gmma;

constexpr int kHeadDim = 128;
constexpr int kBr = 128;                     // query rows per item
constexpr int kBc = 128;                     // keys per KV tile (the N of the S wgmma)
constexpr int kConsumers = kBr / 64;         // 2 consumer warpgroups, one per 64 query rows
constexpr int kThreads = 128 * (1 + kConsumers);  // 384: the producer warpgroup first
constexpr int kProducerRegs = 24;            // setmaxnreg targets: 128 x 24 + 256 x 240
constexpr int kConsumerRegs = 240;           //   = 64512 <= 65536 registers of the SM
static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "register file");
constexpr int kStages = 2;                   // per ring: K and V have one each
constexpr uint32_t kTurn = 1;                // named barriers kTurn, kTurn + 1: the consumers' turns
constexpr uint32_t kOwn = 3;                 // named barriers kOwn + c: consumer c's 128 threads
constexpr int tile_bytes(int rows) { return rows * kHeadDim * 2; }
constexpr int kSmemBytes = 2 * tile_bytes(kBr) + 2 * kStages * tile_bytes(kBc) + 1024;
static_assert(kBc % 16 == 0 && kBc <= 256, "S = Q·Kᵀ is one wgmma of N = kBc");

// The block's work: items first, first + step, ... below count.
struct Schedule {
  int q_tiles;  // Nq / kBr: item t is query tile t % q_tiles of head t / q_tiles = b H_q + h
  int count;    // q_tiles x H_q x B
};

struct Item {
  int q_tile, head, batch;
};

__device__ __forceinline__ Item item_coords(int t, const Schedule& s, int heads_q) {
  const int bh = t / s.q_tiles;
  return {t % s.q_tiles, bh % heads_q, bh / heads_q};
}

// Issues the two boxes of a kRows x 128 tile (columns 0-63 into the first block, 64-127 into the
// second, kRows x 128 bytes further), completing on `bar`, which the caller has armed with the
// bytes of everything it issues for that phase. Called by one thread.
template <int kRows>
__device__ __forceinline__ void load_tile(uint8_t* sTile, const CUtensorMap* map, uint32_t bar,
                                          int row, int head, int batch) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    ptx::tma::load_4d(ptx::smem_addr(sTile) + half * kRows * 128, map, bar, 64 * half, row, head,
                      batch);
  }
}

// One KV tile of the online softmax, as rung 21: P in place of S, the correction still owed by O.
template <bool kFirst>
__device__ __forceinline__ void online_softmax(float (&rS)[kBc / 2], float (&row_max)[2],
                                               float (&row_sum)[2], float (&correction)[2],
                                               float scale_log2) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < kBc / 2; ++i) tile_max[(i / 2) % 2] = fmaxf(tile_max[(i / 2) % 2], rS[i]);
  float max_scaled[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float new_max = kFirst ? tile_max[r] : fmaxf(row_max[r], tile_max[r]);
    // The -inf guard of FlashAttention-2 (see rung 11).
    max_scaled[r] = new_max == -INFINITY ? 0.f : new_max * scale_log2;
    if constexpr (!kFirst) {
      correction[r] = ptx::ex2_approx(fmaf(row_max[r], scale_log2, -max_scaled[r]));
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
__device__ __forceinline__ void rescale_o(float (&rO)[kHeadDim / 2], const float (&correction)[2]) {
#pragma unroll
  for (int b = 0; b < kHeadDim / 8; ++b) {
#pragma unroll
    for (int i = 0; i < 4; ++i) rO[4 * b + i] *= correction[i / 2];
  }
}

// The barriers of the block, all in shared memory.
struct Barriers {
  uint64_t q_full, q_empty;                  // Q: loaded / no longer read (count 2: consumers)
  uint64_t k_full[kStages], k_empty[kStages];
  uint64_t v_full[kStages], v_empty[kStages];
};

// Use u of a ring slot (u = tile count / kStages) waits for the phase of parity u % 2.
__device__ __forceinline__ uint32_t parity(uint32_t use) { return use % 2; }

// The producer: rung 22's, one thread. For each item: Q once the consumers are done with the last
// item's, then K_j and V_j, each as soon as its stage of its own ring is free. It runs ahead into
// the next item.
__device__ __forceinline__ void producer(const AttnParams& p, const Schedule& sched,
                                         const CUtensorMap* tmQ, const CUtensorMap* tmK,
                                         const CUtensorMap* tmV, uint8_t* sQ, uint8_t* sK,
                                         uint8_t* sV, Barriers& bar) {
  const int group_size = static_cast<int>(p.heads_q / p.heads_kv);
  const int kv_tiles = static_cast<int>(p.seqlen_k / kBc);
  uint32_t k = 0;  // the block's KV tile count
  int it = 0;      // the block's item count
  for (int t = blockIdx.x; t < sched.count; t += gridDim.x, ++it) {
    const Item item = item_coords(t, sched, static_cast<int>(p.heads_q));
    const int head_kv = item.head / group_size;
    if (it > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.q_empty), parity(it - 1));
    ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&bar.q_full), tile_bytes(kBr));
    load_tile<kBr>(sQ, tmQ, ptx::smem_addr(&bar.q_full), item.q_tile * kBr, item.head, item.batch);
    for (int j = 0; j < kv_tiles; ++j, ++k) {
      const int stage = static_cast<int>(k % kStages);
      const uint32_t use = k / kStages;
      // The consumers released this stage's previous tile (k - kStages): its (use - 1)-th phase.
      if (use > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.k_empty[stage]), parity(use - 1));
      ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&bar.k_full[stage]), tile_bytes(kBc));
      load_tile<kBc>(sK + stage * tile_bytes(kBc), tmK, ptx::smem_addr(&bar.k_full[stage]),
                     j * kBc, head_kv, item.batch);
      if (use > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.v_empty[stage]), parity(use - 1));
      ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&bar.v_full[stage]), tile_bytes(kBc));
      load_tile<kBc>(sV + stage * tile_bytes(kBc), tmV, ptx::smem_addr(&bar.v_full[stage]),
                     j * kBc, head_kv, item.batch);
    }
  }
}

// A consumer warpgroup: 64 query rows of each of the block's items. `wg` is the consumer's
// index, 0 or 1 (warpgroup wg + 1 of the block). The item loop is rung 22's; what is new: K and V
// are waited for and released apart (two rings), and the epilogue goes through sO and a TMA
// store.
template <typename T>
__device__ __forceinline__ void consumer(const AttnParams& p, const Schedule& sched, int wg,
                                         const CUtensorMap* tmO, const uint8_t* sQ,
                                         const uint8_t* sK, const uint8_t* sV, uint8_t* sO,
                                         Barriers& bar) {
  const int warp = (threadIdx.x / 32) % 4;  // warp of the warpgroup: 16 of its rows
  const int lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  const bool leader = threadIdx.x % 128 == 0;  // the consumer's thread that talks to the producer
  const int kv_tiles = static_cast<int>(p.seqlen_k / kBc);
  const uint32_t my_turn = kTurn + wg, other_turn = kTurn + (1 - wg);
  constexpr uint32_t kTurnThreads = 128 * kConsumers;  // both consumers meet at each barrier
  const float scale_log2 = p.softmax_scale * 1.44269504088896340736f;

  float rO[kHeadDim / 2];
  float rS[kBc / 2];            // S_j, then P_j in place
  uint32_t rP[kBc / 16][4];     // P_{j-1} packed: the A operand of the next step's P·V
  float row_max[2], row_sum[2];
  float correction[2];          // 2^(m_old c - m_new c) of the last softmax, still owed by O

  // The descriptors of k-step 0 of stage 0; a k-step or a stage only adds to the start address.
  const uint64_t desc_q = gmma::kmajor_sw128(ptx::smem_addr(sQ) + wg * 64 * 128);
  const uint64_t desc_k0 = gmma::kmajor_sw128(ptx::smem_addr(sK));
  const uint64_t desc_v0 = gmma::mnmajor_sw128(ptx::smem_addr(sV), kBc * 128);

  // S = Q_g · K_jᵀ out of `stage`: 8 k-steps of 16 dims, accumulate off on the first.
  auto issue_s = [&](int stage) {
    const uint64_t desc_k = gmma::advance(desc_k0, stage * tile_bytes(kBc));
#pragma unroll
    for (int s = 0; s < kHeadDim / 16; ++s) {
      ptx::wgmma::Wgmma<T, kBc>::template ss<0>(
          rS, gmma::advance(desc_q, (s / 4) * kBr * 128 + (s % 4) * 32),
          gmma::advance(desc_k, (s / 4) * kBc * 128 + (s % 4) * 32), s > 0);
    }
  };
  // O += P · V out of `stage`: 8 k-steps of 16 keys, V read MN-major (transpose bit). The first
  // P·V of an item starts O: accumulate off (scale-d 0), no register zeroing inside a batch.
  auto issue_pv = [&](int stage, bool accumulate) {
    const uint64_t desc_v = gmma::advance(desc_v0, stage * tile_bytes(kBc));
#pragma unroll
    for (int s = 0; s < kBc / 16; ++s) {
      ptx::wgmma::Wgmma<T, kHeadDim>::template rs<1>(rO, rP[s], gmma::advance(desc_v, s * 16 * 128),
                                                     s > 0 || accumulate);
    }
  };
  auto pack_p = [&] {
#pragma unroll
    for (int s = 0; s < kBc / 16; ++s) {
      rP[s][0] = pack2<T>(rS[8 * s + 0], rS[8 * s + 1]);  // row group,     keys 2 quad, +1
      rP[s][1] = pack2<T>(rS[8 * s + 2], rS[8 * s + 3]);  // row group + 8
      rP[s][2] = pack2<T>(rS[8 * s + 4], rS[8 * s + 5]);  // row group,     keys 8 + 2 quad, +1
      rP[s][3] = pack2<T>(rS[8 * s + 6], rS[8 * s + 7]);  // row group + 8
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
  // Rung 21's wait_group 0 with a dependence on the finished softmax (see its page).
  auto wait_pv_after = [&](const float (&sums)[2]) {
    if (__all_sync(0xffffffffu, !(sums[0] < 0.f) && !(sums[1] < 0.f))) {
      ptx::wgmma::wait_group<0>();
    } else {
      ptx::wgmma::wait_group<0>();
    }
  };
  auto fence_p = [&] {
#pragma unroll
    for (int s = 0; s < kBc / 16; ++s) ptx::wgmma::fence_operands(rP[s]);
  };

  if (wg == 1) ptx::named_barrier_arrive(kTurn + 0, kTurnThreads);  // consumer 0 goes first

  uint32_t k = 0;  // the block's KV tile count: tile j of this item is tile k + j of the rings
  int it = 0;
  for (int t = blockIdx.x; t < sched.count; t += gridDim.x, ++it) {
    const Item item = item_coords(t, sched, static_cast<int>(p.heads_q));
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.f;
    ptx::mbarrier::wait(ptx::smem_addr(&bar.q_full), parity(it));

    // -------------------------------------------------------------------------------------------
    // STEP 0: S_0 alone
    // -------------------------------------------------------------------------------------------
    wait_k(k);
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    ptx::wgmma::fence();
    issue_s(static_cast<int>(k % kStages));
    ptx::wgmma::commit_group();
    ptx::named_barrier_arrive(other_turn, kTurnThreads);
    ptx::wgmma::wait_group<0>();
    ptx::wgmma::fence_operands(rS);
    release_k(k);
    if (kv_tiles == 1 && leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.q_empty));
    online_softmax<true>(rS, row_max, row_sum, correction, scale_log2);
    pack_p();

    // -------------------------------------------------------------------------------------------
    // MAIN LOOP, steps 1 .. n-1: S_j, then P_{j-1}·V_{j-1}; the softmax of S_j under the second
    // -------------------------------------------------------------------------------------------
    for (int j = 1; j < kv_tiles; ++j) {
      const uint32_t kj = k + j;
      wait_k(kj);
      wait_v(kj - 1);
      ptx::named_barrier_sync(my_turn, kTurnThreads);
      ptx::wgmma::fence();  // rO (rescaled) and rP were written by ordinary instructions
      issue_s(static_cast<int>(kj % kStages));
      ptx::wgmma::commit_group();  // group 1: S_j
      issue_pv(static_cast<int>((kj - 1) % kStages), j > 1);
      ptx::wgmma::commit_group();  // group 2: P_{j-1}·V_{j-1}
      ptx::named_barrier_arrive(other_turn, kTurnThreads);
      ptx::wgmma::wait_group<1>();  // S_j is done; P_{j-1}·V_{j-1} may still run
      ptx::wgmma::fence_operands(rS);
      release_k(kj);
      // The item's last S: Q is free for the producer's next item.
      if (j == kv_tiles - 1 && leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.q_empty));
      online_softmax<false>(rS, row_max, row_sum, correction, scale_log2);
      wait_pv_after(row_sum);  // P_{j-1}·V_{j-1} is done: O and rP are free again
      ptx::wgmma::fence_operands(rO);
      fence_p();
      release_v(kj - 1);
      rescale_o(rO, correction);
      pack_p();
    }

    // -------------------------------------------------------------------------------------------
    // STEP n: P_{n-1}·V_{n-1} alone
    // -------------------------------------------------------------------------------------------
    const uint32_t k_last = k + kv_tiles - 1;
    wait_v(k_last);
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    ptx::wgmma::fence();
    issue_pv(static_cast<int>(k_last % kStages), kv_tiles > 1);
    ptx::wgmma::commit_group();
    // Consumer 0's turn comes next, in the next item (after the block's last item, in the drain
    // below the loop).
    ptx::named_barrier_arrive(other_turn, kTurnThreads);
    ptx::wgmma::wait_group<0>();
    ptx::wgmma::fence_operands(rO);
    fence_p();
    release_v(k_last);
    k += kv_tiles;

    // -------------------------------------------------------------------------------------------
    // EPILOGUE: O / l into sO by stmatrix, then one TMA store; LSE directly
    // -------------------------------------------------------------------------------------------
    float inv_sum[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
      inv_sum[r] = 1.f / row_sum[r];
    }
    // This consumer's previous store must have read its half of sO before it is overwritten.
    if (leader) ptx::tma::wait_group_read<0>();
    ptx::named_barrier_sync(kOwn + wg, 128);
    // sO of consumer wg: two 64-column blocks of [64 rows][128 bytes], 128-byte swizzle. One
    // stmatrix.x4 writes 8-column blocks b, b + 1 of the warp's 16 rows (common/ptx/stmatrix.cuh:
    // lane l addresses row l % 8 of matrix l / 8 = (row half, column block)).
    uint8_t* sO_wg = sO + wg * 64 * kHeadDim * 2;
    const int m = lane / 8;
    const int r_st = 16 * warp + (m % 2) * 8 + lane % 8;  // this lane's row of the 64
#pragma unroll
    for (int b = 0; b < kHeadDim / 8; b += 2) {
      const uint32_t addr = ptx::smem_addr(sO_wg) + gmma::sw128_offset(r_st, 8 * (b + m / 2), 64);
      ptx::stmatrix_x4(addr, pack2<T>(rO[4 * b] * inv_sum[0], rO[4 * b + 1] * inv_sum[0]),
                       pack2<T>(rO[4 * b + 2] * inv_sum[1], rO[4 * b + 3] * inv_sum[1]),
                       pack2<T>(rO[4 * b + 4] * inv_sum[0], rO[4 * b + 5] * inv_sum[0]),
                       pack2<T>(rO[4 * b + 6] * inv_sum[1], rO[4 * b + 7] * inv_sum[1]));
    }
    ptx::fence_proxy_async_shared();  // the TMA engine reads what stmatrix wrote
    ptx::named_barrier_sync(kOwn + wg, 128);
    const int q_row = item.q_tile * kBr + 64 * wg;
    if (leader) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        ptx::tma::store_4d(ptx::smem_addr(sO_wg) + half * 64 * 128, tmO, 64 * half, q_row,
                           item.head, item.batch);
      }
      ptx::tma::commit_group();
    }
    if (p.lse != nullptr && quad == 0) {
      constexpr float kLn2 = 0.69314718055994530942f;
      const int64_t row = q_row + 16 * warp + group;
      float* lse = p.lse + (static_cast<int64_t>(item.batch) * p.heads_q + item.head) * p.seqlen_q + row;
      lse[0] = (row_max[0] * scale_log2 + log2f(row_sum[0])) * kLn2;
      lse[8] = (row_max[1] * scale_log2 + log2f(row_sum[1])) * kLn2;
    }
  }
  // Consumer 1 handed consumer 0 a turn after its last step; consumer 0 takes it, so that no
  // arrival is left pending on the barrier when the block ends.
  if (wg == 0) ptx::named_barrier_sync(my_turn, kTurnThreads);
  if (leader) ptx::tma::wait_group<0>();  // the last store is written before the block ends
}

// One block of 384 threads per SM (193 KiB of shared memory); the launch bounds give every
// thread 65536 / 384 = 168 registers at entry, the cap that setmaxnreg then moves.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    attention_kernel(const AttnParams p, const Schedule sched,
                     const __grid_constant__ CUtensorMap tmQ,
                     const __grid_constant__ CUtensorMap tmK,
                     const __grid_constant__ CUtensorMap tmV,
                     const __grid_constant__ CUtensorMap tmO) {
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and the descriptors assume it starts there.
  uint8_t* smem = smem_raw + ((1024 - ptx::smem_addr(smem_raw) % 1024) % 1024);
  uint8_t* sQ = smem;                            // [kBr][128]
  uint8_t* sO = sQ + tile_bytes(kBr);            // [kBr][128]
  uint8_t* sK = sO + tile_bytes(kBr);            // [kStages][kBc][128]
  uint8_t* sV = sK + kStages * tile_bytes(kBc);  // [kStages][kBc][128]
  __shared__ alignas(8) Barriers bar;

  if (threadIdx.x == 0) {
    ptx::tma::prefetch_map(&tmQ);
    ptx::tma::prefetch_map(&tmK);
    ptx::tma::prefetch_map(&tmV);
    ptx::tma::prefetch_map(&tmO);
    ptx::mbarrier::init(ptx::smem_addr(&bar.q_full), 1);
    ptx::mbarrier::init(ptx::smem_addr(&bar.q_empty), kConsumers);
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier::init(ptx::smem_addr(&bar.k_full[s]), 1);            // the producer's expect_tx
      ptx::mbarrier::init(ptx::smem_addr(&bar.k_empty[s]), kConsumers);  // one thread per consumer
      ptx::mbarrier::init(ptx::smem_addr(&bar.v_full[s]), 1);
      ptx::mbarrier::init(ptx::smem_addr(&bar.v_empty[s]), kConsumers);
    }
    ptx::mbarrier::fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the roles part here

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) producer(p, sched, &tmQ, &tmK, &tmV, sQ, sK, sV, bar);
  } else {
    ptx::setmaxnreg_inc<kConsumerRegs>();
    consumer<T>(p, sched, wg - 1, &tmO, sQ, sK, sV, sO, bar);
  }
}

std::string supports(const AttnParams& p) {
  if (p.causal) return "causal masking is not supported (rungs 17-23 are non-causal)";
  if (p.head_dim != kHeadDim) {
    return "head_dim must be 128 (got " + std::to_string(p.head_dim) + ")";
  }
  if (p.seqlen_q % kBr != 0) {
    return "Nq must be a multiple of " + std::to_string(kBr) + " (got " +
           std::to_string(p.seqlen_q) + ")";
  }
  if (p.seqlen_k % kBc != 0) {
    return "Nk must be a multiple of " + std::to_string(kBc) + " (got " +
           std::to_string(p.seqlen_k) + ")";
  }
  // The block's tile and item counters are 32-bit.
  if (p.seqlen_q / kBr * p.heads_q * p.batch > INT_MAX) {
    return "(Nq / 128) x H_q x B work items must be <= 2^31 - 1";
  }
  std::string why = tma_rules("Q", p.q_stride, p.seqlen_q);
  if (why.empty()) why = tma_rules("K", p.k_stride, p.seqlen_k);
  if (why.empty()) why = tma_rules("V", p.v_stride, p.seqlen_k);
  if (why.empty()) why = tma_rules("O", p.o_stride, p.seqlen_q);
  return why;
}

TileShape tile(const AttnParams&) { return {kBr, kBc}; }

void launch(const AttnParams& p, cudaStream_t stream) {
  dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    FL_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<T>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    const Schedule sched{static_cast<int>(p.seqlen_q / kBr),
                         static_cast<int>(p.seqlen_q / kBr * p.heads_q * p.batch)};
    int device = 0, sms = 0;
    FL_CUDA_CHECK(cudaGetDevice(&device));
    FL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const unsigned blocks = static_cast<unsigned>(sms < sched.count ? sms : sched.count);
    const CUtensorMap tmQ = make_tensor_map_4d(p.q, kHeadDim, p.seqlen_q, p.heads_q, p.batch,
                                               p.q_stride, kBr);
    const CUtensorMap tmK = make_tensor_map_4d(p.k, kHeadDim, p.seqlen_k, p.heads_kv, p.batch,
                                               p.k_stride, kBc);
    const CUtensorMap tmV = make_tensor_map_4d(p.v, kHeadDim, p.seqlen_k, p.heads_kv, p.batch,
                                               p.v_stride, kBc);
    // O goes out in boxes of 64 rows: one consumer's half of the tile, per 64-column block.
    const CUtensorMap tmO = make_tensor_map_4d(p.o, kHeadDim, p.seqlen_q, p.heads_q, p.batch,
                                               p.o_stride, 64);
    attention_kernel<T><<<blocks, kThreads, kSmemBytes, stream>>>(p, sched, tmQ, tmK, tmV, tmO);
  });
}

}  // namespace k23_tma_store

const KernelInfo& kernel_23() {
  static const KernelInfo info{23,
                               "tma_store",
                               "TMA-store epilogue: O leaves by stmatrix and a TMA store",
                               "docs/kernels/23_tma_store.md",
                               90,
                               k23_tma_store::tile,
                               k23_tma_store::supports,
                               k23_tma_store::launch,
                               false,
                               90};
  return info;
}

}  // namespace fl
