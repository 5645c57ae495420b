// =================================================================================================
// Kernel 22 of 28 — persistent: one block per SM walks the work items
// builds on: 21 (intra-warpgroup overlap)
// changes:   1. the grid is one block per SM (fewer when there are fewer items); block i takes the
//               work items i, i + G, i + 2G, ... (G blocks), an item being (query tile, head,
//               batch), query tiles fastest (rung 21's grid order: the blocks running at one time
//               share K/V heads in L2). The prologue (barrier init, map prefetch, setmaxnreg) is
//               paid once per SM, not once per query tile
//            2. the producer runs ahead across items: it loads the next item's Q as soon as both
//               consumers are done with their last S of this item (mbarrier pair q_full / q_empty),
//               then the next item's K/V into the same ring, which does not restart between items:
//               the next item's first tiles land during this item's last steps and its epilogue
//            O is still stored from registers, and the K/V ring is still rung 21's 3 stages
// expect:    TFLOP/s above rung 21 at short N (512, 1024), where the prologue and the wait for the
//            first tiles are a large part of a query tile's time; about rung 21's at long N
// supports:  fp16, bf16; d = 128; Nq a multiple of 128; Nk a multiple of 128; non-causal; GQA;
//            LSE output; any scale; strides (16-byte multiples, below 2^40 bytes: TMA's rules);
//            at most 2^31 - 1 work items; compute capability 9.0 only
// doc:       docs/kernels/22_persistent.md
// =================================================================================================
//
// Grid: min(#SMs, items) blocks, items = (Nq / 128) x H_q x B; block: 384 threads = 3
// warpgroups. Item t is query tile t % (Nq / 128) of head (b, h), t / (Nq / 128) = b H_q + h, and
// covers query rows [128 x, 128 x + 128) of that head, which reads KV head h / (H_q / H_kv).
// Warpgroup 0 produces; consumer c = 0, 1 (warpgroup c + 1) owns rows [64 c, 64 c + 64) of the
// tile, and in it warp w (of 4) rows [16 w, 16 w + 16) (common/ptx/wgmma.cuh).
//
// Shared memory (dynamic, (128 + 2 x 3 x 128) x 128 x 2 bytes = 224 KiB, + 1 KiB to align): as
// rung 21.
//   sQ [128][128]            the item's queries                  (q_full, q_empty)
//   sK [3][128][128]         keys of KV tile k in stage k % 3    (full[k % 3], empty[k % 3])
//   sV [3][128][128]         values of KV tile k in stage k % 3
// k counts the block's KV tiles over all its items, so the ring does not restart between items.
//
// Registers of a consumer thread: as rung 21.
//
// Schedule of consumer c for one item (n KV tiles; tile j of the item is tile k0 + j of the ring):
//   wait q_full
//   step 0:  wait full; sync turn c; issue S_0, commit; arrive turn 1-c; wait 0; softmax; pack
//   step j:  wait full; sync turn c; issue S_j, commit; issue P_{j-1}·V_{j-1}, commit;
//            arrive turn 1-c; wait 1 (S_j); release Q (at j = n - 1); softmax of S_j; wait 0;
//            release tile j-1's stage; O *= correction; pack P_j
//   step n:  sync turn c; issue P_{n-1}·V_{n-1}; arrive turn 1-c; wait 0; release
//   epilogue: O / l to global memory, LSE, as rung 21
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
#include "common/ptx/tma.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/registry.h"
#include "common/tensor_map.h"

namespace fl {
namespace k22_persistent {

namespace gmma = ptx::gmma;

constexpr int kHeadDim = 128;
constexpr int kBr = 128;                     // query rows per item
constexpr int kBc = 128;                     // keys per KV tile (the N of the S wgmma)
constexpr int kConsumers = kBr / 64;         // 2 consumer warpgroups, one per 64 query rows
constexpr int kThreads = 128 * (1 + kConsumers);  // 384: the producer warpgroup first
constexpr int kProducerRegs = 24;            // setmaxnreg targets: 128 x 24 + 256 x 240
constexpr int kConsumerRegs = 240;           //   = 64512 <= 65536 registers of the SM
static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "register file");
// A stage is read by two steps (K_j by step j, V_j by step j + 1) and released after the second:
// three stages keep one tile of lead for the producer, as in rung 21.
constexpr int kStages = 3;
constexpr uint32_t kTurn = 1;                // named barriers kTurn, kTurn + 1: consumers' turns
constexpr int tile_bytes(int rows) { return rows * kHeadDim * 2; }
constexpr int kSmemBytes = tile_bytes(kBr) + 2 * kStages * tile_bytes(kBc) + 1024;  // + alignment
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
  uint64_t full[kStages], empty[kStages];    // the K/V ring, as rung 21's
};

// Use u of a ring slot (u = tile count / kStages) waits for the phase of parity u % 2.
__device__ __forceinline__ uint32_t parity(uint32_t use) { return use % 2; }

// The producer: one thread. For each item: Q once the consumers are done with the last item's,
// then K_j and V_j, as soon as their stage is free. It runs ahead into the next item.
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
      if (use > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.empty[stage]), parity(use - 1));
      ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&bar.full[stage]), 2 * tile_bytes(kBc));
      load_tile<kBc>(sK + stage * tile_bytes(kBc), tmK, ptx::smem_addr(&bar.full[stage]),
                     j * kBc, head_kv, item.batch);
      load_tile<kBc>(sV + stage * tile_bytes(kBc), tmV, ptx::smem_addr(&bar.full[stage]),
                     j * kBc, head_kv, item.batch);
    }
  }
}

// A consumer warpgroup: 64 query rows of each of the block's items. `wg` is the consumer's
// index, 0 or 1 (warpgroup wg + 1 of the block). The steps of an item are rung 21's; what is new
// is around them: the ring's counter carries over from item to item, Q is released after the
// item's last S, and O restarts with each item.
template <typename T>
__device__ __forceinline__ void consumer(const AttnParams& p, const Schedule& sched, int wg,
                                         const uint8_t* sQ, const uint8_t* sK, const uint8_t* sV,
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
  // Tile k of the ring is the (k / S)-th use of its stage: wait for the phase of that parity.
  auto wait_full = [&](uint32_t k) {
    ptx::mbarrier::wait(ptx::smem_addr(&bar.full[k % kStages]), parity(k / kStages));
  };
  // The batch that read tile k's stage last is complete: one thread tells the producer.
  auto release = [&](uint32_t k) {
    if (leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.empty[k % kStages]));
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

  uint32_t k = 0;  // the block's KV tile count: tile j of this item is tile k + j of the ring
  int it = 0;
  for (int t = blockIdx.x; t < sched.count; t += gridDim.x, ++it) {
    const Item item = item_coords(t, sched, static_cast<int>(p.heads_q));
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.f;
    ptx::mbarrier::wait(ptx::smem_addr(&bar.q_full), parity(it));

    // -------------------------------------------------------------------------------------------
    // STEP 0: S_0 alone
    // -------------------------------------------------------------------------------------------
    wait_full(k);
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    ptx::wgmma::fence();
    issue_s(static_cast<int>(k % kStages));
    ptx::wgmma::commit_group();
    ptx::named_barrier_arrive(other_turn, kTurnThreads);
    ptx::wgmma::wait_group<0>();
    ptx::wgmma::fence_operands(rS);
    if (kv_tiles == 1 && leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.q_empty));
    online_softmax<true>(rS, row_max, row_sum, correction, scale_log2);
    pack_p();

    // -------------------------------------------------------------------------------------------
    // MAIN LOOP, steps 1 .. n-1: S_j, then P_{j-1}·V_{j-1}; the softmax of S_j under the second
    // -------------------------------------------------------------------------------------------
    for (int j = 1; j < kv_tiles; ++j) {
      const uint32_t kj = k + j;
      wait_full(kj);
      ptx::named_barrier_sync(my_turn, kTurnThreads);
      ptx::wgmma::fence();  // rO (rescaled) and rP were written by ordinary instructions
      issue_s(static_cast<int>(kj % kStages));
      ptx::wgmma::commit_group();  // group 1: S_j
      issue_pv(static_cast<int>((kj - 1) % kStages), j > 1);
      ptx::wgmma::commit_group();  // group 2: P_{j-1}·V_{j-1}
      ptx::named_barrier_arrive(other_turn, kTurnThreads);
      ptx::wgmma::wait_group<1>();  // S_j is done; P_{j-1}·V_{j-1} may still run
      ptx::wgmma::fence_operands(rS);
      // The item's last S: Q is free for the producer's next item.
      if (j == kv_tiles - 1 && leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.q_empty));
      online_softmax<false>(rS, row_max, row_sum, correction, scale_log2);
      wait_pv_after(row_sum);  // P_{j-1}·V_{j-1} is done: O and rP are free again
      ptx::wgmma::fence_operands(rO);
      fence_p();
      release(kj - 1);  // K_{j-1} (read by the step before) and V_{j-1} (this one) are done
      rescale_o(rO, correction);
      pack_p();
    }

    // -------------------------------------------------------------------------------------------
    // STEP n: P_{n-1}·V_{n-1} alone
    // -------------------------------------------------------------------------------------------
    const uint32_t k_last = k + kv_tiles - 1;
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
    release(k_last);
    k += kv_tiles;

    // -------------------------------------------------------------------------------------------
    // EPILOGUE: finish the row sums across the quad, normalise by 1/l, store O (and LSE), as
    // rung 21: the consumer goes on to its next item when its stores are issued
    // -------------------------------------------------------------------------------------------
    float inv_sum[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
      inv_sum[r] = 1.f / row_sum[r];
    }
    const int q_row = item.q_tile * kBr + 64 * wg;
    const int64_t row = q_row + 16 * warp + group;  // r = 0; r = 1 is row + 8
    using Pair = typename TypeTraits<T>::pair;
    T* gO = static_cast<T*>(p.o) + item.batch * p.o_stride.batch + item.head * p.o_stride.head;
    T* o_row0 = gO + row * p.o_stride.row;
    T* o_row1 = gO + (row + 8) * p.o_stride.row;
#pragma unroll
    for (int blk = 0; blk < kHeadDim / 8; ++blk) {
      const int col = 8 * blk + 2 * quad;
      *reinterpret_cast<Pair*>(o_row0 + col) =
          TypeTraits<T>::from_float2(rO[4 * blk] * inv_sum[0], rO[4 * blk + 1] * inv_sum[0]);
      *reinterpret_cast<Pair*>(o_row1 + col) =
          TypeTraits<T>::from_float2(rO[4 * blk + 2] * inv_sum[1], rO[4 * blk + 3] * inv_sum[1]);
    }
    if (p.lse != nullptr && quad == 0) {
      constexpr float kLn2 = 0.69314718055994530942f;
      float* lse =
          p.lse + (static_cast<int64_t>(item.batch) * p.heads_q + item.head) * p.seqlen_q + row;
      lse[0] = (row_max[0] * scale_log2 + log2f(row_sum[0])) * kLn2;
      lse[8] = (row_max[1] * scale_log2 + log2f(row_sum[1])) * kLn2;
    }
  }
  // Consumer 1 handed consumer 0 a turn after its last step; consumer 0 takes it, so that no
  // arrival is left pending on the barrier when the block ends.
  if (wg == 0) ptx::named_barrier_sync(my_turn, kTurnThreads);
}

// One block of 384 threads per SM (225 KiB of shared memory); the launch bounds give every
// thread 65536 / 384 = 168 registers at entry, the cap that setmaxnreg then moves.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    attention_kernel(const AttnParams p, const Schedule sched,
                     const __grid_constant__ CUtensorMap tmQ,
                     const __grid_constant__ CUtensorMap tmK,
                     const __grid_constant__ CUtensorMap tmV) {
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and the descriptors assume it starts there.
  uint8_t* smem = smem_raw + ((1024 - ptx::smem_addr(smem_raw) % 1024) % 1024);
  uint8_t* sQ = smem;                            // [kBr][128]
  uint8_t* sK = sQ + tile_bytes(kBr);            // [kStages][kBc][128]
  uint8_t* sV = sK + kStages * tile_bytes(kBc);  // [kStages][kBc][128]
  __shared__ alignas(8) Barriers bar;

  if (threadIdx.x == 0) {
    ptx::tma::prefetch_map(&tmQ);
    ptx::tma::prefetch_map(&tmK);
    ptx::tma::prefetch_map(&tmV);
    ptx::mbarrier::init(ptx::smem_addr(&bar.q_full), 1);
    ptx::mbarrier::init(ptx::smem_addr(&bar.q_empty), kConsumers);
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier::init(ptx::smem_addr(&bar.full[s]), 1);            // the producer's expect_tx
      ptx::mbarrier::init(ptx::smem_addr(&bar.empty[s]), kConsumers);  // one thread per consumer
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
    consumer<T>(p, sched, wg - 1, sQ, sK, sV, bar);
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
    attention_kernel<T><<<blocks, kThreads, kSmemBytes, stream>>>(p, sched, tmQ, tmK, tmV);
  });
}

}  // namespace k22_persistent

const KernelInfo& kernel_22() {
  static const KernelInfo info{22,
                               "persistent",
                               "persistent: one block per SM walks the work items",
                               "docs/kernels/22_persistent.md",
                               90,
                               k22_persistent::tile,
                               k22_persistent::supports,
                               k22_persistent::launch,
                               false,
                               90};
  return info;
}

}  // namespace fl
