// =================================================================================================
// Kernel 27 of 27 — FP8: rung 26 with e4m3 Q, K, V
// builds on: 23 (final Hopper)
// changes:   1. Q, K and V are e4m3 (one byte), with descale factors per tensor or per head
//               (AttnParams, common/fp8.h); O stays 16-bit (fp16 or bf16, the caller's choice).
//               Tiles are half the bytes: a d = 128 row is one 128-byte swizzle row, so Q and K are
//               one TMA box each (d = 256: two; d = 64: one 64-byte row in the 64-byte swizzle)
//            2. both GEMMs are wgmma.m64nNk32.f32.e4m3.e4m3: 32 keys (or dims) per instruction,
//               twice the 16-bit k, at twice the 16-bit rate
//            3. 8-bit wgmma reads K-major operands only, so P·V needs V^T (keys contiguous): a
//               pre-pass (transpose_v below, timed with the kernel) writes V^T [B][H_kv][d][Nk']
//               once per call into a kept workspace, the keys of each 16-key group permuted so
//               that the fp32 accumulator of S, converted to e4m3, IS the k32 A operand of P·V
//               without a shuffle (pack_p; tests/test_hopper_ptx.cu,
//               WgmmaE4m3.PVFromAccumulatorLayoutWithPermutedKeys)
//            4. P in [0, 1] is quantised to e4m3 scaled by 448, so that the row maximum lands on
//               e4m3's largest value and small probabilities keep their 3 mantissa bits: the 448
//               is folded into the exponent (free), cancelled by 1 / l (l sums the scaled P)
//            5. the descale factors are folded in where they cost nothing: dq dk into the softmax
//               scale, dv into the final 1 / l, per (batch, head) from a small table
// expect:    up to 2x rung 26's TFLOP/s where the GEMMs dominate (d = 256); at d = 128 the
//            exponentials (one MUFU.EX2 per score) cost as much as the GEMMs of a tile, so less
// supports:  e4m3 Q, K, V (descale per tensor or per head), fp16 or bf16 O; d in {64, 128, 256};
//            any Nq, Nk >= 1; causal or not; GQA; LSE; any scale; strides (TMA's rules);
//            compute capability 9.0 only
// doc:       docs/kernels/27_fp8.md
// =================================================================================================
//
// Everything else is rung 26's: the persistent schedule (schedule.cuh, copied unchanged), one
// producer warp issuing TMA loads into K and V^T rings of 2 stages, consumers taking turns at the
// tensor cores, masked tiles in a loop of their own, O out by stmatrix and a TMA store.
//
// Shared memory (dynamic, + 1 KiB to align); e4m3 tiles are [d / 128][rows][128 bytes] in the
// 128-byte swizzle ([rows][64 bytes] in the 64-byte swizzle at d = 64); V^T tiles [d][Bc = 128
// keys], one 128-byte swizzle block; O is staged 16-bit as in rung 26:
//   sQ [Br][d] e4m3   sO [Br][d] 16-bit   sK [2][Bc][d] e4m3   sVt [2][d][Bc] e4m3
//   d = 64: 68 KiB; d = 128: 112 KiB; d = 256: 224 KiB (each + 1 KiB to align: Config::kSmemBytes).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/dtype.cuh"
#include "common/ptx/cvt_fp8.cuh"
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
#include "kernels/27_fp8/schedule.cuh"

namespace fl {
namespace k27_fp8 {

namespace gmma = ptx::gmma;
using Fp8 = __nv_fp8_e4m3;  // the wgmma type tag of e4m3 operands

constexpr int kRingStages = 2;  // stages of the K ring and of the V^T ring (rung 23's)
constexpr float kLog2PScale = 8.80735492205760410744f;  // log2(448): P is quantised as 448 P

template <int kHeadDim>
struct Config {
  // Rung 26's shapes (three consumers at d = 64), with Bc = 128 at every d: at d = 256 the e4m3
  // P of 128 keys is 16 registers, so O (128), S (64) and P fit in 240 where rung 26's 16-bit
  // P did not.
  static constexpr int kConsumers = kHeadDim == 64 ? 3 : 2;
  static constexpr int kBr = 64 * kConsumers;
  static constexpr int kBc = 128;
  static constexpr int kStages = kRingStages;
  static constexpr int kThreads = 128 * (1 + kConsumers);  // the producer warpgroup first
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = kConsumers == 3 ? 160 : 240;
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "registers");
  // A Q or K row is d bytes, in blocks of kRowBytes: 128-byte swizzle rows, or one 64-byte row in
  // the 64-byte swizzle at d = 64.
  static constexpr int kRowBytes = kHeadDim < 128 ? kHeadDim : 128;
  static constexpr int kBlocks = kHeadDim / kRowBytes;
  static constexpr int qk_tile_bytes(int rows) { return rows * kHeadDim; }
  static constexpr int kVtTileBytes = kHeadDim * kBc;     // [d][Bc]: Bc = 128 keys = 128 bytes
  static constexpr int kOTileBytes = kBr * kHeadDim * 2;  // 16-bit O
  static constexpr int kSmemBytes = qk_tile_bytes(kBr) + kOTileBytes +
                                    kStages * (qk_tile_bytes(kBc) + kVtTileBytes) + 1024;
  static_assert(kSmemBytes <= 227 * 1024 - 256, "shared memory");
};

// The descriptor of a K-major e4m3 tile (Q, K, V^T) in the swizzle of its row length.
template <int kRowBytes>
__device__ __forceinline__ uint64_t kmajor(uint32_t smem_addr) {
  if constexpr (kRowBytes == 128) {
    return gmma::kmajor_sw128(smem_addr);
  } else {
    static_assert(kRowBytes == 64, "e4m3 rows of 64 or 128 bytes");
    return gmma::kmajor_sw64(smem_addr);
  }
}

// Named barriers, as rung 26: kTurn + c is consumer c's turn, kOwn + c its own 128 threads.
constexpr uint32_t kTurn = 1;
constexpr uint32_t kOwn = 4;

// Per (batch, query head): the softmax scale times log2(e) times the Q and K descales, and the V
// descale (the table the launcher builds from AttnParams' descale factors).
struct Factors {
  float scale_log2;
  float v_descale;
};

// Issues the kBlocks boxes of a kRows x d e4m3 tile (bytes kRowBytes b .. kRowBytes (b + 1) - 1
// of each row into block b, kRows x kRowBytes bytes apart), completing on `bar`.
template <int kHeadDim, int kRows>
__device__ __forceinline__ void load_qk_tile(uint8_t* sTile, const CUtensorMap* map, uint32_t bar,
                                             int row, int head, int batch) {
  using C = Config<kHeadDim>;
#pragma unroll
  for (int blk = 0; blk < C::kBlocks; ++blk) {
    ptx::tma::load_4d(ptx::smem_addr(sTile) + blk * kRows * C::kRowBytes, map, bar,
                      C::kRowBytes * blk, row, head, batch);
  }
}

// One KV tile of the online softmax (rung 26's), with P scaled by 448 before it is quantised:
// P = 2^(s c - m c + log2 448), the bias folded into the one FFMA each score already takes.
template <bool kFirst, int kBc>
__device__ __forceinline__ void online_softmax(float (&rS)[kBc / 2], float (&row_max)[2],
                                               float (&row_sum)[2], float (&correction)[2],
                                               float scale_log2) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < kBc / 2; ++i) tile_max[(i / 2) % 2] = fmaxf(tile_max[(i / 2) % 2], rS[i]);
  float bias[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float new_max = kFirst ? tile_max[r] : fmaxf(row_max[r], tile_max[r]);
    // The -inf guard of rung 11 (a row that has seen only masked keys gets P = 0, never NaN).
    const float max_scaled = new_max == -INFINITY ? 0.f : new_max * scale_log2;
    if constexpr (!kFirst) {
      correction[r] = ptx::ex2_approx(fmaf(row_max[r], scale_log2, -max_scaled));
      row_sum[r] *= correction[r];
    }
    row_max[r] = new_max;
    bias[r] = max_scaled - kLog2PScale;
  }
#pragma unroll
  for (int i = 0; i < kBc / 2; ++i) {
    rS[i] = ptx::ex2_approx(fmaf(rS[i], scale_log2, -bias[(i / 2) % 2]));
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

struct Barriers {
  uint64_t q_full, q_empty;
  uint64_t k_full[kRingStages], k_empty[kRingStages];
  uint64_t v_full[kRingStages], v_empty[kRingStages];
};

__device__ __forceinline__ uint32_t parity(uint32_t use) { return use % 2; }

// The producer (one thread): rung 26's, with V^T tiles of d rows x Bc keys (one box).
template <int kHeadDim>
__device__ __forceinline__ void producer(const AttnParams& p, const Schedule& sched,
                                         const CUtensorMap* tmQ, const CUtensorMap* tmK,
                                         const CUtensorMap* tmVt, uint8_t* sQ, uint8_t* sK,
                                         uint8_t* sVt, Barriers& bar) {
  using C = Config<kHeadDim>;
  const int group_size = static_cast<int>(p.heads_q / p.heads_kv);
  uint32_t k = 0;
  uint32_t q_use = 0;
  for (int64_t round = 0; round * gridDim.x < sched.count; ++round) {
    const int t = item_of(round, gridDim.x, blockIdx.x, sched);
    if (t < 0) continue;
    const Work w = work_of<C::kBr, C::kBc>(t, sched, static_cast<int>(p.heads_q));
    if (w.n == 0) continue;
    const int head_kv = w.head / group_size;
    if (q_use > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.q_empty), parity(q_use - 1));
    ++q_use;
    ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&bar.q_full), C::qk_tile_bytes(C::kBr));
    load_qk_tile<kHeadDim, C::kBr>(sQ, tmQ, ptx::smem_addr(&bar.q_full), w.q0, w.head, w.batch);
    for (int j = w.n - 1; j >= 0; --j, ++k) {
      const int stage = static_cast<int>(k % C::kStages);
      const uint32_t use = k / C::kStages;
      if (use > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.k_empty[stage]), parity(use - 1));
      ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&bar.k_full[stage]),
                                      C::qk_tile_bytes(C::kBc));
      load_qk_tile<kHeadDim, C::kBc>(sK + stage * C::qk_tile_bytes(C::kBc), tmK,
                                     ptx::smem_addr(&bar.k_full[stage]), j * C::kBc, head_kv,
                                     w.batch);
      if (use > 0) ptx::mbarrier::wait(ptx::smem_addr(&bar.v_empty[stage]), parity(use - 1));
      ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&bar.v_full[stage]), C::kVtTileBytes);
      // V^T [d][Nk'] of this KV head: keys j Bc .. j Bc + Bc - 1 of all d rows.
      ptx::tma::load_4d(ptx::smem_addr(sVt + stage * C::kVtTileBytes), tmVt,
                        ptx::smem_addr(&bar.v_full[stage]), j * C::kBc, 0, head_kv, w.batch);
    }
  }
}

// A consumer warpgroup: rung 26's steps; what differs is the k32 GEMMs, P packed to e4m3, and
// the factors of the item's head.
template <typename T, int kHeadDim>
__device__ __forceinline__ void consumer(const AttnParams& p, const Schedule& sched,
                                         const Factors* factors, int wg, const CUtensorMap* tmO,
                                         uint8_t* sQ, const uint8_t* sK, const uint8_t* sVt,
                                         uint8_t* sO, Barriers& bar) {
  using C = Config<kHeadDim>;
  constexpr int kBc = C::kBc;
  constexpr int kStages = C::kStages;
  constexpr int kRowBytes = C::kRowBytes;
  const int warp = (threadIdx.x / 32) % 4;
  const int lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  const bool leader = threadIdx.x % 128 == 0;
  constexpr int kConsumers = C::kConsumers;
  constexpr int kBr = C::kBr;
  const uint32_t my_turn = kTurn + wg, other_turn = kTurn + (wg + 1) % kConsumers;
  constexpr uint32_t kTurnThreads = 256;
  const int diag = sched.seqlen_k - sched.seqlen_q;

  float rO[kHeadDim / 2];
  float rS[kBc / 2];
  uint32_t rP[kBc / 32][4];  // P in e4m3: one k32 step of P·V per 4 registers
  float row_max[2], row_sum[2];
  float correction[2];

  const uint64_t desc_q = kmajor<kRowBytes>(ptx::smem_addr(sQ) + wg * 64 * kRowBytes);
  const uint64_t desc_k0 = kmajor<kRowBytes>(ptx::smem_addr(sK));
  const uint64_t desc_vt0 = gmma::kmajor_sw128(ptx::smem_addr(sVt));

  // S = Q_g · K_jᵀ: d / 32 k-steps of 32 bytes, kRowBytes / 32 per block.
  auto issue_s = [&](int stage) {
    const uint64_t desc_k = gmma::advance(desc_k0, stage * C::qk_tile_bytes(kBc));
    constexpr int kSteps = kRowBytes / 32;
#pragma unroll
    for (int s = 0; s < kHeadDim / 32; ++s) {
      ptx::wgmma::Wgmma<Fp8, kBc>::template ss<0>(
          rS, gmma::advance(desc_q, (s / kSteps) * kBr * kRowBytes + (s % kSteps) * 32),
          gmma::advance(desc_k, (s / kSteps) * kBc * kRowBytes + (s % kSteps) * 32), s > 0);
    }
  };
  // O += P · V: Bc / 32 k-steps of 32 keys, B = V^T (K-major: d rows of Bc keys), N = d.
  auto issue_pv = [&](int stage, bool accumulate) {
    const uint64_t desc_vt = gmma::advance(desc_vt0, stage * C::kVtTileBytes);
#pragma unroll
    for (int s = 0; s < kBc / 32; ++s) {
      ptx::wgmma::Wgmma<Fp8, kHeadDim>::template rs<0>(rO, rP[s], gmma::advance(desc_vt, s * 32),
                                                       s > 0 || accumulate);
    }
  };
  // The k32 A operand of step s, per thread: for each 16-key half h and row r, the thread's keys
  // 2quad, 2quad + 1 of accumulator blocks 4s + 2h and 4s + 2h + 1, as if they were keys
  // 4quad .. 4quad + 3 of the 16: V^T's keys are permuted to match (transpose_v).
  auto pack_p = [&] {
#pragma unroll
    for (int s = 0; s < kBc / 32; ++s) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int b = 4 * s + 2 * h;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          rP[s][2 * h + r] = ptx::pack4_e4m3(rS[4 * b + 2 * r], rS[4 * b + 2 * r + 1],
                                             rS[4 * b + 4 + 2 * r], rS[4 * b + 5 + 2 * r]);
        }
      }
    }
  };
  int limit[2];
  auto mask = [&](int j) {
    const int key0 = j * kBc + 2 * quad;
#pragma unroll
    for (int i = 0; i < kBc / 2; ++i) {
      if (key0 + 8 * (i / 4) + i % 2 >= limit[(i / 2) % 2]) rS[i] = -INFINITY;
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
    if (leader) ptx::mbarrier::arrive(ptx::smem_addr(&bar.q_empty));
  };
  auto wait_pv_after = [&](const float (&sums)[2]) {  // rung 21's dependent wait
    if (__all_sync(0xffffffffu, !(sums[0] < 0.f) && !(sums[1] < 0.f))) {
      ptx::wgmma::wait_group<0>();
    } else {
      ptx::wgmma::wait_group<0>();
    }
  };
  auto fence_p = [&] {
#pragma unroll
    for (int s = 0; s < kBc / 32; ++s) ptx::wgmma::fence_operands(rP[s]);
  };

  if (wg == kConsumers - 1) ptx::named_barrier_arrive(kTurn + 0, kTurnThreads);

  uint32_t k = 0, q_use = 0;
  for (int64_t round = 0; round * gridDim.x < sched.count; ++round) {
    const int t = item_of(round, gridDim.x, blockIdx.x, sched);
    if (t < 0) continue;
    const Work w = work_of<C::kBr, kBc>(t, sched, static_cast<int>(p.heads_q));
    const int row0 = w.q0 + 64 * wg + 16 * warp + group;
    if (w.n == 0) {
      T* gO = static_cast<T*>(p.o) + w.batch * p.o_stride.batch + w.head * p.o_stride.head;
      using Pair = typename TypeTraits<T>::pair;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        if (row >= sched.seqlen_q) continue;
        for (int blk = 0; blk < kHeadDim / 8; ++blk) {
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
    const Factors f = factors[static_cast<int64_t>(w.batch) * p.heads_q + w.head];
    const float scale_log2 = f.scale_log2;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      limit[r] = sched.causal ? min(sched.seqlen_k, row0 + 8 * r + 1 + diag) : sched.seqlen_k;
    }
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.f;
    ptx::mbarrier::wait(ptx::smem_addr(&bar.q_full), parity(q_use));
    ++q_use;
    const int n = w.n;

    // -------------------------------------------------------------------------------------------
    // STEP 0: S of tile n - 1 alone
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
    if (n == 1) release_q();
    if (w.n_masked > 0) mask(n - 1);
    online_softmax<true, kBc>(rS, row_max, row_sum, correction, scale_log2);
    pack_p();

    // -------------------------------------------------------------------------------------------
    // MAIN LOOP, steps 1 .. n-1: S of tile n - 1 - i, then P·V of the tile before
    // -------------------------------------------------------------------------------------------
    auto step = [&](int i, auto masked) {
      const uint32_t ki = k + i;
      wait_k(ki);
      wait_v(ki - 1);
      ptx::named_barrier_sync(my_turn, kTurnThreads);
      ptx::wgmma::fence();
      issue_s(static_cast<int>(ki % kStages));
      ptx::wgmma::commit_group();
      issue_pv(static_cast<int>((ki - 1) % kStages), i > 1);
      ptx::wgmma::commit_group();
      ptx::named_barrier_arrive(other_turn, kTurnThreads);
      ptx::wgmma::wait_group<1>();
      ptx::wgmma::fence_operands(rS);
      release_k(ki);
      if (i == n - 1) release_q();  // the item's last S
      if constexpr (decltype(masked)::value) mask(n - 1 - i);
      online_softmax<false, kBc>(rS, row_max, row_sum, correction, scale_log2);
      wait_pv_after(row_sum);
      ptx::wgmma::fence_operands(rO);
      fence_p();
      release_v(ki - 1);
      rescale_o<kHeadDim>(rO, correction);
      pack_p();
    };
    const int masked_end = min(w.n_masked, n);
    int i = 1;
    for (; i < masked_end; ++i) step(i, std::true_type{});
    for (; i < n; ++i) step(i, std::false_type{});

    // -------------------------------------------------------------------------------------------
    // STEP n: P·V of tile 0 alone
    // -------------------------------------------------------------------------------------------
    const uint32_t k_last = k + n - 1;
    wait_v(k_last);
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    ptx::wgmma::fence();
    issue_pv(static_cast<int>(k_last % kStages), n > 1);
    ptx::wgmma::commit_group();
    ptx::named_barrier_arrive(other_turn, kTurnThreads);
    ptx::wgmma::wait_group<0>();
    ptx::wgmma::fence_operands(rO);
    fence_p();
    release_v(k_last);
    k += n;

    // -------------------------------------------------------------------------------------------
    // EPILOGUE: O dv / l into the staging buffer by stmatrix, then TMA stores; LSE directly.
    // l sums the scaled P (448 P), so dv / l undoes the 448 as well.
    // -------------------------------------------------------------------------------------------
    float inv_sum[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
      inv_sum[r] = row_sum[r] > 0.f ? f.v_descale / row_sum[r] : 0.f;
    }
    if (leader) ptx::tma::wait_group_read<0>();
    ptx::named_barrier_sync(kOwn + wg, 128);
    const uint32_t o_base = ptx::smem_addr(sO) + wg * 64 * 128;
    const int m = lane / 8;
    const int r_st = 16 * warp + (m % 2) * 8 + lane % 8;
#pragma unroll
    for (int b = 0; b < kHeadDim / 8; b += 2) {
      const uint32_t addr = o_base + gmma::sw128_offset(r_st, 8 * (b + m / 2), kBr);
      ptx::stmatrix_x4(addr, pack2<T>(rO[4 * b] * inv_sum[0], rO[4 * b + 1] * inv_sum[0]),
                       pack2<T>(rO[4 * b + 2] * inv_sum[1], rO[4 * b + 3] * inv_sum[1]),
                       pack2<T>(rO[4 * b + 4] * inv_sum[0], rO[4 * b + 5] * inv_sum[0]),
                       pack2<T>(rO[4 * b + 6] * inv_sum[1], rO[4 * b + 7] * inv_sum[1]));
    }
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(kOwn + wg, 128);
    if (leader) {
      const int q_row = w.q0 + 64 * wg;
      if (q_row < sched.seqlen_q) {
#pragma unroll
        for (int blk = 0; blk < kHeadDim / 64; ++blk) {
          ptx::tma::store_4d(o_base + blk * kBr * 128, tmO, 64 * blk, q_row, w.head, w.batch);
        }
      }
      ptx::tma::commit_group();
    }
    if (p.lse != nullptr && quad == 0) {
      constexpr float kLn2 = 0.69314718055994530942f;
      float* lse = p.lse + (static_cast<int64_t>(w.batch) * p.heads_q + w.head) * sched.seqlen_q;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (row0 + 8 * r < sched.seqlen_q) {
          lse[row0 + 8 * r] =
              (row_max[r] * scale_log2 + log2f(row_sum[r]) - kLog2PScale) * kLn2;
        }
      }
    }
  }
  if (wg == 0) ptx::named_barrier_sync(my_turn, kTurnThreads);
  if (leader) ptx::tma::wait_group<0>();
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(Config<kHeadDim>::kThreads, 1)
    attention_kernel(const AttnParams p, const Schedule sched, const Factors* factors,
                     const __grid_constant__ CUtensorMap tmQ,
                     const __grid_constant__ CUtensorMap tmK,
                     const __grid_constant__ CUtensorMap tmVt,
                     const __grid_constant__ CUtensorMap tmO) {
  using C = Config<kHeadDim>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - ptx::smem_addr(smem_raw) % 1024) % 1024);
  uint8_t* sQ = smem;
  uint8_t* sO = sQ + C::qk_tile_bytes(C::kBr);
  uint8_t* sK = sO + C::kOTileBytes;
  uint8_t* sVt = sK + C::kStages * C::qk_tile_bytes(C::kBc);
  __shared__ alignas(8) Barriers bar;

  if (threadIdx.x == 0) {
    ptx::tma::prefetch_map(&tmQ);
    ptx::tma::prefetch_map(&tmK);
    ptx::tma::prefetch_map(&tmVt);
    ptx::tma::prefetch_map(&tmO);
    ptx::mbarrier::init(ptx::smem_addr(&bar.q_full), 1);
    ptx::mbarrier::init(ptx::smem_addr(&bar.q_empty), C::kConsumers);
    for (int s = 0; s < C::kStages; ++s) {
      ptx::mbarrier::init(ptx::smem_addr(&bar.k_full[s]), 1);
      ptx::mbarrier::init(ptx::smem_addr(&bar.k_empty[s]), C::kConsumers);
      ptx::mbarrier::init(ptx::smem_addr(&bar.v_full[s]), 1);
      ptx::mbarrier::init(ptx::smem_addr(&bar.v_empty[s]), C::kConsumers);
    }
    ptx::mbarrier::fence_init();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (threadIdx.x == 0) producer<kHeadDim>(p, sched, &tmQ, &tmK, &tmVt, sQ, sK, sVt, bar);
  } else {
    ptx::setmaxnreg_inc<C::kConsumerRegs>();
    consumer<T, kHeadDim>(p, sched, factors, wg - 1, &tmO, sQ, sK, sVt, sO, bar);
  }
}

// -------------------------------------------------------------------------------------------------
// The V^T pre-pass
// -------------------------------------------------------------------------------------------------
// Position l of a 16-key group of V^T holds key key_perm(l) of the group: what pack_p puts in
// byte l % 4 of register (l / 4) of a k32 A fragment is the thread's accumulator key 2q, 2q + 1,
// 8 + 2q or 9 + 2q (q = l / 4). P·V sums over keys, so permuting both P's keys and V's alike
// leaves O unchanged.
__host__ __device__ constexpr int key_perm(int l) {
  return (l % 4 < 2) ? 2 * (l / 4) + l % 4 : 8 + 2 * (l / 4) + (l % 4 - 2);
}

constexpr int kTransposeKeys = 64;  // keys per block of the pre-pass (its V^T rows: 64 bytes)
constexpr int kTransposeCols = 64;  // head-dim columns per block

// Vt[bh][c][l] = V[b][h][key][c], key = 16 (l / 16) + key_perm(l % 16); 0 for key >= Nk (the
// padding up to Nk', a multiple of 64). Grid: (B H_kv, key tiles (looped), d / 64); 256 threads.
__global__ void __launch_bounds__(256)
    transpose_v(const uint8_t* v, Strides vs, int heads_kv, int seqlen_k, int64_t seqlen_k_pad,
                int head_dim, uint8_t* vt) {
  __shared__ alignas(16) uint8_t tile[kTransposeKeys][kTransposeCols + 16];
  const int64_t bh = blockIdx.x;
  const int64_t b = bh / heads_kv, h = bh % heads_kv;
  const int col0 = blockIdx.z * kTransposeCols;
  const uint8_t* src = v + b * vs.batch + h * vs.head + col0;
  uint8_t* dst = vt + (bh * head_dim + col0) * seqlen_k_pad;
  const int t = threadIdx.x;
  for (int64_t key0 = static_cast<int64_t>(blockIdx.y) * kTransposeKeys; key0 < seqlen_k_pad;
       key0 += static_cast<int64_t>(gridDim.y) * kTransposeKeys) {
    // In: 64 keys x 64 bytes, one 16-byte chunk a thread.
    const int r = t / 4, c = (t % 4) * 16;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (key0 + r < seqlen_k) x = *reinterpret_cast<const uint4*>(src + (key0 + r) * vs.row + c);
    *reinterpret_cast<uint4*>(&tile[r][c]) = x;
    __syncthreads();
    // Out: 64 columns x 64 keys, a thread's 16 bytes the 16 (permuted) keys of one group.
    const int col = t / 4, g = t % 4;
    uint32_t out[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      out[w] = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        out[w] |= static_cast<uint32_t>(tile[16 * g + key_perm(4 * w + i)][col]) << (8 * i);
      }
    }
    *reinterpret_cast<uint4*>(dst + col * seqlen_k_pad + key0 + 16 * g) =
        make_uint4(out[0], out[1], out[2], out[3]);
    __syncthreads();
  }
}

// -------------------------------------------------------------------------------------------------
// Host side
// -------------------------------------------------------------------------------------------------
template <typename F>
void dispatch_head_dim(int64_t d, F&& f) {
  switch (d) {
    case 64: f(std::integral_constant<int, 64>{}); break;
    case 128: f(std::integral_constant<int, 128>{}); break;
    case 256: f(std::integral_constant<int, 256>{}); break;
    default: throw UnsupportedError("27_fp8: head_dim must be 64, 128 or 256");
  }
}

bool supported_head_dim(int64_t d) { return d == 64 || d == 128 || d == 256; }

int64_t padded_keys(int64_t seqlen_k) {
  return (seqlen_k + kTransposeKeys - 1) / kTransposeKeys * kTransposeKeys;
}

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
    return "head_dim must be 64, 128 or 256 (got " + std::to_string(p.head_dim) + ")";
  }
  std::string why = tma_rules("Q", p.q_stride, p.seqlen_q, 1);
  if (why.empty()) why = tma_rules("K", p.k_stride, p.seqlen_k, 1);
  if (why.empty()) why = tma_rules("O", p.o_stride, p.seqlen_q, 2);
  if (!why.empty()) return why;
  if (p.seqlen_q > (int64_t{1} << 30) || p.seqlen_k > (int64_t{1} << 30)) {
    return "Nq and Nk must be <= 2^30 (got Nq = " + std::to_string(p.seqlen_q) +
           ", Nk = " + std::to_string(p.seqlen_k) + ")";
  }
  // V^T [B][H_kv][d][Nk'] is one TMA tensor: its batch stride must stay below 2^40 bytes.
  if (p.heads_kv * p.head_dim * padded_keys(p.seqlen_k) >= (int64_t{1} << 40)) {
    return "H_kv x d x Nk must be below 2^40 (the V^T workspace is one TMA tensor)";
  }
  const int64_t br = tile(p).br;
  if ((p.seqlen_q + br - 1) / br > INT_MAX / p.heads_q / p.batch) {
    return "ceil(Nq / " + std::to_string(br) + ") x H_q x B work items must be <= 2^31 - 1";
  }
  return "";
}

// The launcher's workspace, kept between calls and grown when a call needs more (as rung 00's:
// a timed call must not allocate): the factor table, then V^T. Calls are ordered on their stream;
// two calls on different streams at once would share it, which this rung does not support.
struct Workspace {
  std::mutex mutex;
  DeviceBuffer buffer;
};
Workspace& workspace() {
  static Workspace w;
  return w;
}

void launch(const AttnParams& p, cudaStream_t stream) {
  dispatch_dtype(p.out_dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_head_dim(p.head_dim, [&](auto dim) {
      constexpr int kHeadDim = decltype(dim)::value;
      using C = Config<kHeadDim>;
      // The factor table: per (b, h_q), scale log2(e) dq dk and dv (check_common has checked
      // every descale factor: finite and > 0).
      const int64_t pairs = p.batch * p.heads_q, group = p.heads_q / p.heads_kv;
      std::vector<Factors> table(static_cast<size_t>(pairs));
      for (int64_t b = 0; b < p.batch; ++b) {
        for (int64_t h = 0; h < p.heads_q; ++h) {
          const int64_t iq = p.descale_per_head ? b * p.heads_q + h : 0;
          const int64_t ikv = p.descale_per_head ? b * p.heads_kv + h / group : 0;
          table[b * p.heads_q + h] = {
              p.softmax_scale * 1.44269504088896340736f * p.q_descale[iq] * p.k_descale[ikv],
              p.v_descale[ikv]};
        }
      }
      const int64_t nk_pad = padded_keys(p.seqlen_k);
      const size_t table_bytes = (pairs * sizeof(Factors) + 1023) / 1024 * 1024;
      const size_t vt_bytes = static_cast<size_t>(p.batch * p.heads_kv * kHeadDim * nk_pad);
      Workspace& ws = workspace();
      std::lock_guard<std::mutex> lock(ws.mutex);
      if (ws.buffer.bytes() < table_bytes + vt_bytes) ws.buffer.resize(table_bytes + vt_bytes);
      auto* factors = static_cast<Factors*>(ws.buffer.get());
      uint8_t* vt = static_cast<uint8_t*>(ws.buffer.get()) + table_bytes;
      // From pageable memory: copied to a staging buffer before the call returns, so `table`
      // may go out of scope; ordered on the stream after the previous call's kernel.
      FL_CUDA_CHECK(cudaMemcpyAsync(factors, table.data(), pairs * sizeof(Factors),
                                    cudaMemcpyHostToDevice, stream));

      const dim3 tgrid(static_cast<unsigned>(p.batch * p.heads_kv),
                       static_cast<unsigned>(std::min<int64_t>(nk_pad / kTransposeKeys, 65535)),
                       static_cast<unsigned>(kHeadDim / kTransposeCols));
      transpose_v<<<tgrid, 256, 0, stream>>>(static_cast<const uint8_t*>(p.v), p.v_stride,
                                             static_cast<int>(p.heads_kv),
                                             static_cast<int>(p.seqlen_k), nk_pad, kHeadDim, vt);
      FL_CHECK_LAUNCH();

      FL_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<T, kHeadDim>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         C::kSmemBytes));
      Schedule sched;
      sched.q_tiles = static_cast<int>((p.seqlen_q + C::kBr - 1) / C::kBr);
      sched.count = static_cast<int>(sched.q_tiles * p.heads_q * p.batch);
      sched.seqlen_q = static_cast<int>(p.seqlen_q);
      sched.seqlen_k = static_cast<int>(p.seqlen_k);
      sched.causal = p.causal;
      int device = 0, sms = 0;
      FL_CUDA_CHECK(cudaGetDevice(&device));
      FL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      const unsigned blocks = static_cast<unsigned>(sms < sched.count ? sms : sched.count);
      const CUtensorMap tmQ = make_tensor_map_4d(p.q, 1, kHeadDim, p.seqlen_q, p.heads_q, p.batch,
                                                 p.q_stride, C::kRowBytes, C::kBr, C::kRowBytes);
      const CUtensorMap tmK = make_tensor_map_4d(p.k, 1, kHeadDim, p.seqlen_k, p.heads_kv,
                                                 p.batch, p.k_stride, C::kRowBytes, C::kBc,
                                                 C::kRowBytes);
      Strides vts;
      vts.row = nk_pad;
      vts.head = kHeadDim * nk_pad;
      vts.batch = p.heads_kv * kHeadDim * nk_pad;
      const CUtensorMap tmVt = make_tensor_map_4d(vt, 1, nk_pad, kHeadDim, p.heads_kv, p.batch,
                                                  vts, C::kBc, kHeadDim, 128);
      const CUtensorMap tmO = make_tensor_map_4d(p.o, kHeadDim, p.seqlen_q, p.heads_q, p.batch,
                                                 p.o_stride, 64);
      attention_kernel<T, kHeadDim><<<blocks, C::kThreads, C::kSmemBytes, stream>>>(
          p, sched, factors, tmQ, tmK, tmVt, tmO);
    });
  });
}

}  // namespace k27_fp8

const KernelInfo& kernel_27() {
  static const KernelInfo info{27,
                               "fp8",
                               "FP8: rung 26 with e4m3 Q, K, V (k32 wgmma, V^T pre-pass, P in e4m3)",
                               "docs/kernels/27_fp8.md",
                               90,
                               k27_fp8::tile,
                               k27_fp8::supports,
                               k27_fp8::launch,
                               false,
                               90,
                               true};
  return info;
}

}  // namespace fl
