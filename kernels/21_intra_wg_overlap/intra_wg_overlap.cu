// =================================================================================================
// Kernel 21 of 28 — intra-warpgroup overlap: the softmax runs while the warpgroup's own P·V does
// builds on: 20 (ping-pong)
// changes:   1. the batch of a step is two commit groups, S_j first, then P_{j-1}·V_{j-1}; the
//               consumer waits with wgmma.wait_group 1, for S_j alone, and computes the softmax of
//               S_j while P_{j-1}·V_{j-1} is still on the tensor cores; wgmma.wait_group 0 follows
//            2. the rescale of O moves out of the softmax: online_softmax returns the correction
//               2^(m_old c - m_new c), and rescale_o applies it after the wait for P·V (O is being
//               written until then), before the next step issues into O again: the tensor cores
//               never wait for it, the other consumer's batch runs meanwhile
//            3. P_j is packed after that wait too: rP is the A operand of the P·V in flight
// expect:    tensor-pipe utilisation and TFLOP/s above rung 20 (FlashAttention-3 reports 582 ->
//            661 TFLOP/s for this step at d = 128); the softmax no longer between a warpgroup's
//            two GEMMs
// supports:  fp16, bf16; d = 128; Nq a multiple of 128; Nk a multiple of 128; non-causal; GQA;
//            LSE output; any scale; strides (16-byte multiples, below 2^40 bytes: TMA's rules);
//            compute capability 9.0 only
// doc:       docs/kernels/21_intra_wg_overlap.md
// =================================================================================================
//
// Grid: (Nq / 128, H_q, B); block: 384 threads = 3 warpgroups. Block x computes query rows
// [128 x, 128 x + 128) of head (b, h), which reads KV head h / (H_q / H_kv). Warpgroup 0
// produces; consumer c = 0, 1 (warpgroup c + 1) owns rows [64 c, 64 c + 64) of the tile, and in
// it warp w (of 4) rows [16 w, 16 w + 16) (common/ptx/wgmma.cuh).
//
// Shared memory (dynamic, (128 + 2 x 3 x 128) x 128 x 2 bytes = 224 KiB, + 1 KiB to align): as
// rung 20.
//   sQ [128][128]            the block's queries                       (q_full)
//   sK [3][128][128]         keys of KV tile j in stage j % 3          (full[j % 3], empty[j % 3])
//   sV [3][128][128]         values of KV tile j in stage j % 3
//
// Registers of a consumer thread: rS [64] (S_j, then P_j in place, while P_{j-1}·V_{j-1} runs),
// rP [8][4] (P_{j-1} packed, read by the tensor cores until wait_group 0), rO [64].
//
// Schedule of consumer c (stage s = j % 3; the producer is rung 19's):
//   step 0:  wait full[0]; sync turn c; issue S_0, commit; arrive turn 1-c; wait 0; softmax; pack
//   step j:  wait full[s]; sync turn c; issue S_j, commit; issue P_{j-1}·V_{j-1}, commit;
//            arrive turn 1-c; wait 1 (S_j); softmax of S_j; wait 0 (P·V); release tile j-1's
//            stage; O *= correction; pack P_j
//   step n:  sync turn c; issue P_{n-1}·V_{n-1}; arrive turn 1-c (consumer 0 only); wait 0; release
//   epilogue: O / l to global memory, LSE
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
namespace k21_intra_wg_overlap {

namespace gmma = ptx::gmma;

constexpr int kHeadDim = 128;
constexpr int kBr = 128;                     // query rows per block
constexpr int kBc = 128;                     // keys per KV tile (the N of the S wgmma)
constexpr int kConsumers = kBr / 64;         // 2 consumer warpgroups, one per 64 query rows
constexpr int kThreads = 128 * (1 + kConsumers);  // 384: the producer warpgroup first
constexpr int kProducerRegs = 24;            // setmaxnreg targets: 128 x 24 + 256 x 240
constexpr int kConsumerRegs = 240;           //   = 64512 <= 65536 registers of the SM
static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "register file");
// A stage is read by two steps now (K_j by step j, V_j by step j + 1) and released after the
// second: three stages keep one tile of lead for the producer, as two did in rung 19.
constexpr int kStages = 3;
constexpr uint32_t kTurn = 1;                // named barriers kTurn, kTurn + 1: the consumers' turns
constexpr int tile_bytes(int rows) { return rows * kHeadDim * 2; }
constexpr int kSmemBytes = tile_bytes(kBr) + 2 * kStages * tile_bytes(kBc) + 1024;  // + alignment
static_assert(kBc % 16 == 0 && kBc <= 256, "S = Q·Kᵀ is one wgmma of N = kBc");

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

// One KV tile of the online softmax (rung 11's), split in two so that O can still be in flight:
// online_softmax updates the row max and row sums and turns the raw scores rS into P = 2^(s c -
// m c) in place, and returns in `correction` the factor 2^(m_old c - m_new c) by which O must
// still be multiplied; rescale_o applies it once the P·V that was writing O has completed. r = 0
// is row `group`, r = 1 row `group + 8`; element 4b + i is in row i / 2. kFirst: nothing to
// rescale yet (correction 1 is not even computed).
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

// The producer: one thread issues Q, then every K/V tile as soon as its stage is empty.
__device__ __forceinline__ void producer(const AttnParams& p, const CUtensorMap* tmQ,
                                         const CUtensorMap* tmK, const CUtensorMap* tmV,
                                         uint8_t* sQ, uint8_t* sK, uint8_t* sV, uint64_t* q_full,
                                         uint64_t* full, uint64_t* empty) {
  const int cb = static_cast<int>(blockIdx.z), ch = static_cast<int>(blockIdx.y);
  const int ch_kv = static_cast<int>(blockIdx.y / (p.heads_q / p.heads_kv));
  const int64_t kv_tiles = p.seqlen_k / kBc;
  ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(q_full), tile_bytes(kBr));
  load_tile<kBr>(sQ, tmQ, ptx::smem_addr(q_full), static_cast<int>(blockIdx.x) * kBr, ch, cb);
  for (int64_t j = 0; j < kv_tiles; ++j) {
    const int stage = static_cast<int>(j % kStages);
    const int64_t use = j / kStages;
    // The consumers released this stage's previous tile (j - S): its (use - 1)-th phase.
    if (use > 0) {
      ptx::mbarrier::wait(ptx::smem_addr(&empty[stage]), static_cast<uint32_t>((use - 1) % 2));
    }
    const uint32_t bar = ptx::smem_addr(&full[stage]);
    const int row = static_cast<int>(j * kBc);
    ptx::mbarrier::arrive_expect_tx(bar, 2 * tile_bytes(kBc));
    load_tile<kBc>(sK + stage * tile_bytes(kBc), tmK, bar, row, ch_kv, cb);
    load_tile<kBc>(sV + stage * tile_bytes(kBc), tmV, bar, row, ch_kv, cb);
  }
}

// A consumer warpgroup: 64 query rows, the whole KV loop, the epilogue. `wg` is the consumer's
// index, 0 or 1 (warpgroup wg + 1 of the block).
//
// Rung 20's steps and turns, with the two GEMMs of a step committed as two groups: step j
// issues S_j, then P_{j-1}·V_{j-1}, and waits with wgmma.wait_group 1 for S_j alone. The softmax
// of S_j then runs while P_{j-1}·V_{j-1} is still on the tensor cores; only after
// wgmma.wait_group 0 is O multiplied by the step's correction and P_j packed (rP is the A operand
// of the P·V in flight until then). Steps 0 and n are the ends: S_0 alone, P_{n-1}·V_{n-1} alone.
template <typename T>
__device__ __forceinline__ void consumer(const AttnParams& p, int wg, const uint8_t* sQ,
                                         const uint8_t* sK, const uint8_t* sV, uint64_t* q_full,
                                         uint64_t* full, uint64_t* empty) {
  const int warp = (threadIdx.x / 32) % 4;  // warp of the warpgroup: 16 of its rows
  const int lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int64_t q_row0 = static_cast<int64_t>(blockIdx.x) * kBr;
  const int64_t kv_tiles = p.seqlen_k / kBc;
  const uint32_t my_turn = kTurn + wg, other_turn = kTurn + (1 - wg);
  constexpr uint32_t kTurnThreads = 128 * kConsumers;  // both consumers meet at each barrier

  float rO[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) rO[i] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  const float scale_log2 = p.softmax_scale * 1.44269504088896340736f;
  float rS[kBc / 2];            // S_j, then P_j in place
  uint32_t rP[kBc / 16][4];     // P_{j-1} packed: the A operand of the next step's P·V

  // The descriptors of k-step 0; a k-step only adds to the start address (gmma::advance).
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
  // O += P · V out of `stage`: 8 k-steps of 16 keys, V read MN-major (transpose bit).
  auto issue_pv = [&](int stage) {
    const uint64_t desc_v = gmma::advance(desc_v0, stage * tile_bytes(kBc));
#pragma unroll
    for (int s = 0; s < kBc / 16; ++s) {
      ptx::wgmma::Wgmma<T, kHeadDim>::template rs<1>(rO, rP[s],
                                                     gmma::advance(desc_v, s * 16 * 128), 1);
    }
  };
  // P_j packed into rP, the A operand of the next step's P·V.
  auto pack_p = [&] {
#pragma unroll
    for (int s = 0; s < kBc / 16; ++s) {
      rP[s][0] = pack2<T>(rS[8 * s + 0], rS[8 * s + 1]);  // row group,     keys 2 quad, +1
      rP[s][1] = pack2<T>(rS[8 * s + 2], rS[8 * s + 3]);  // row group + 8
      rP[s][2] = pack2<T>(rS[8 * s + 4], rS[8 * s + 5]);  // row group,     keys 8 + 2 quad, +1
      rP[s][3] = pack2<T>(rS[8 * s + 6], rS[8 * s + 7]);  // row group + 8
    }
  };
  // Tile j is the (j / S)-th use of its stage: wait for the phase of that parity.
  auto wait_full = [&](int64_t j) {
    ptx::mbarrier::wait(ptx::smem_addr(&full[j % kStages]), static_cast<uint32_t>((j / kStages) % 2));
  };
  // The batch that read tile j's stage last is complete: one thread tells the producer.
  auto release = [&](int64_t j) {
    if (threadIdx.x % 128 == 0) ptx::mbarrier::arrive(ptx::smem_addr(&empty[j % kStages]));
  };
  float correction[2];  // 2^(m_old c - m_new c) of the last softmax, still owed by O
  // wgmma.wait_group 0, placed after the softmax. The wait has no operands, and ptxas schedules
  // it like any instruction without dependences: as early as it likes, here into the latency of
  // the first shuffle of the row max, before the 64 exponentials (seen in the SASS), which then
  // run after P·V instead of under it. A branch on a warp vote over the finished row sums gives
  // the wait a dependence on the whole softmax. Both sides wait: a row sum is never negative
  // (NaN compares false), so the vote is always true, but the compiler cannot know it.
  auto wait_pv_after = [&](const float (&sums)[2]) {
    if (__all_sync(0xffffffffu, !(sums[0] < 0.f) && !(sums[1] < 0.f))) {
      ptx::wgmma::wait_group<0>();
    } else {
      ptx::wgmma::wait_group<0>();
    }
  };
  // rP is read by the tensor cores until the wait_group that covers its P·V: pinning it after the
  // wait keeps the compiler from reusing its registers for the softmax in between.
  auto fence_p = [&] {
#pragma unroll
    for (int s = 0; s < kBc / 16; ++s) ptx::wgmma::fence_operands(rP[s]);
  };

  ptx::mbarrier::wait(ptx::smem_addr(q_full), 0);  // Q's one and only phase
  if (wg == 1) ptx::named_barrier_arrive(kTurn + 0, kTurnThreads);  // consumer 0 goes first

  // ---------------------------------------------------------------------------------------------
  // STEP 0: S_0 alone
  // ---------------------------------------------------------------------------------------------
  wait_full(0);
  ptx::named_barrier_sync(my_turn, kTurnThreads);
  ptx::wgmma::fence();
  issue_s(0);
  ptx::wgmma::commit_group();
  ptx::named_barrier_arrive(other_turn, kTurnThreads);
  ptx::wgmma::wait_group<0>();
  ptx::wgmma::fence_operands(rS);
  online_softmax<true>(rS, row_max, row_sum, correction, scale_log2);
  pack_p();

  // ---------------------------------------------------------------------------------------------
  // MAIN LOOP, steps 1 .. n-1: S_j, then P_{j-1}·V_{j-1}; the softmax of S_j under the second
  // ---------------------------------------------------------------------------------------------
  for (int64_t j = 1; j < kv_tiles; ++j) {
    wait_full(j);
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    ptx::wgmma::fence();  // rO (rescaled) and rP were written by ordinary instructions
    issue_s(static_cast<int>(j % kStages));
    ptx::wgmma::commit_group();  // group 1: S_j
    issue_pv(static_cast<int>((j - 1) % kStages));
    ptx::wgmma::commit_group();  // group 2: P_{j-1}·V_{j-1}
    ptx::named_barrier_arrive(other_turn, kTurnThreads);
    ptx::wgmma::wait_group<1>();  // S_j is done; P_{j-1}·V_{j-1} may still run
    ptx::wgmma::fence_operands(rS);
    online_softmax<false>(rS, row_max, row_sum, correction, scale_log2);
    wait_pv_after(row_sum);  // P_{j-1}·V_{j-1} is done: O and rP are free again
    ptx::wgmma::fence_operands(rO);
    fence_p();
    release(j - 1);  // K_{j-1} (read by the step before) and V_{j-1} (this one) are done
    rescale_o(rO, correction);
    pack_p();
  }

  // ---------------------------------------------------------------------------------------------
  // STEP n: P_{n-1}·V_{n-1} alone
  // ---------------------------------------------------------------------------------------------
  ptx::named_barrier_sync(my_turn, kTurnThreads);
  ptx::wgmma::fence();
  issue_pv(static_cast<int>((kv_tiles - 1) % kStages));
  ptx::wgmma::commit_group();
  if (wg == 0) ptx::named_barrier_arrive(other_turn, kTurnThreads);  // consumer 1's last phase
  ptx::wgmma::wait_group<0>();
  ptx::wgmma::fence_operands(rO);
  fence_p();
  release(kv_tiles - 1);

  // ---------------------------------------------------------------------------------------------
  // EPILOGUE: finish the row sums across the quad, normalise by 1/l, store O (and LSE).
  // ---------------------------------------------------------------------------------------------
  const int64_t row = q_row0 + 64 * wg + 16 * warp + group;  // r = 0; r = 1 is row + 8
  float inv_sum[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
    inv_sum[r] = 1.f / row_sum[r];
  }
  using Pair = typename TypeTraits<T>::pair;
  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head;
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
    float* lse = p.lse + (b * p.heads_q + h) * p.seqlen_q + row;
    lse[0] = (row_max[0] * scale_log2 + log2f(row_sum[0])) * kLn2;
    lse[8] = (row_max[1] * scale_log2 + log2f(row_sum[1])) * kLn2;
  }
}

// One block of 384 threads per SM (224 KiB of shared memory); the launch bounds give every
// thread 65536 / 384 = 168 registers at entry, the cap that setmaxnreg then moves.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    attention_kernel(const AttnParams p, const __grid_constant__ CUtensorMap tmQ,
                     const __grid_constant__ CUtensorMap tmK,
                     const __grid_constant__ CUtensorMap tmV) {
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and the descriptors assume it starts there.
  uint8_t* smem = smem_raw + ((1024 - ptx::smem_addr(smem_raw) % 1024) % 1024);
  uint8_t* sQ = smem;                            // [kBr][128]
  uint8_t* sK = sQ + tile_bytes(kBr);            // [kStages][kBc][128]
  uint8_t* sV = sK + kStages * tile_bytes(kBc);  // [kStages][kBc][128]
  __shared__ alignas(8) uint64_t q_full, full[kStages], empty[kStages];  // the mbarriers

  if (threadIdx.x == 0) {
    ptx::tma::prefetch_map(&tmQ);
    ptx::tma::prefetch_map(&tmK);
    ptx::tma::prefetch_map(&tmV);
    ptx::mbarrier::init(ptx::smem_addr(&q_full), 1);
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier::init(ptx::smem_addr(&full[s]), 1);            // the producer's expect_tx
      ptx::mbarrier::init(ptx::smem_addr(&empty[s]), kConsumers);  // one thread per consumer
    }
    ptx::mbarrier::fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the roles part here

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) producer(p, &tmQ, &tmK, &tmV, sQ, sK, sV, &q_full, full, empty);
  } else {
    ptx::setmaxnreg_inc<kConsumerRegs>();
    consumer<T>(p, wg - 1, sQ, sK, sV, &q_full, full, empty);
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
  if (p.heads_q > 65535 || p.batch > 65535) return "H_q and B must be <= 65535 (grid limits)";
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
    const dim3 grid(static_cast<unsigned>(p.seqlen_q / kBr), static_cast<unsigned>(p.heads_q),
                    static_cast<unsigned>(p.batch));
    // The maps are built for every call: they hold the tensors' addresses. Each costs a driver
    // call of a few microseconds on the host, not on the GPU.
    const CUtensorMap tmQ = make_tensor_map_4d(p.q, kHeadDim, p.seqlen_q, p.heads_q, p.batch,
                                               p.q_stride, kBr);
    const CUtensorMap tmK = make_tensor_map_4d(p.k, kHeadDim, p.seqlen_k, p.heads_kv, p.batch,
                                               p.k_stride, kBc);
    const CUtensorMap tmV = make_tensor_map_4d(p.v, kHeadDim, p.seqlen_k, p.heads_kv, p.batch,
                                               p.v_stride, kBc);
    attention_kernel<T><<<grid, kThreads, kSmemBytes, stream>>>(p, tmQ, tmK, tmV);
  });
}

}  // namespace k21_intra_wg_overlap

const KernelInfo& kernel_21() {
  static const KernelInfo info{21,
                               "intra_wg_overlap",
                               "intra-warpgroup overlap: the softmax of S_j runs under the P·V before it",
                               "docs/kernels/21_intra_wg_overlap.md",
                               90,
                               k21_intra_wg_overlap::tile,
                               k21_intra_wg_overlap::supports,
                               k21_intra_wg_overlap::launch,
                               false,
                               90};
  return info;
}

}  // namespace fl
