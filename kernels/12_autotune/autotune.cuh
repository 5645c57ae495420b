// =================================================================================================
// Kernel 12 of 16 — auto-tuning: the block shape becomes a template parameter, searched per GPU
// builds on: 11 (exp2 softmax)
// changes:   1. Br, Bc, the number of warps, the depth of the K/V ring and where the Q fragments
//               come from (read per KV tile, or resident in registers) are the template parameter
//               Cfg (Config in common/tune/config.h) instead of constants; rung 11's
//               choice by head dim (resident Q at d = 64 only) becomes Cfg::kLoad
//            2. the ring holds kStages = 2 or 3 stages: the copies of tile j + kStages - 1 are
//               issued while tile j is computed, so every wait leaves 2 kStages - 3 newer groups
//               in flight (wait_group<1> for 2 stages, as before; <3> for 3)
//            3. scripts/autotune.py compiles a list of candidate configs (tune_candidates.h) into
//               the executable tune_12, verifies and times every one on the GPU, and writes the
//               fastest per (architecture, d, dtype) into tuned_configs.h; the launcher
//               (autotune.cu) reads the device's compute capability and runs that config
// expect:    TFLOP/s >= rung 11's on the shapes the tuner timed (rung 11's shape is a candidate)
// supports:  fp16, bf16; d in {64, 128}; Nq a multiple of Br and Nk a multiple of Bc of the
//            config that runs (tuned_configs.h: Br = 128, Bc = 32 until tuned); non-causal; GQA;
//            LSE output
// doc:       docs/kernels/12_autotune.md
// =================================================================================================
//
// This header holds the kernel and its launcher for one config; autotune.cu instantiates the
// configs of tuned_configs.h, tune_candidate.cuh those of tune_candidates.h.
//
// Grid: (Nq / Br, H_q, B); block: 32 * kWarps threads. Block x computes query rows
// [Br x, Br x + Br) of head (b, h), which reads KV head h / (H_q / H_kv); warp w owns rows
// [R w, R w + R) of the tile, R = Br / kWarps = 16 kMTiles: kMTiles M-tiles of 16 rows (the M
// = 16 of one mma), M-tile mt being rows [R w + 16 mt, R w + 16 mt + 16).
//
// Shared memory (dynamic, (Br + 2 kStages Bc) * d * 2 bytes: 64 KiB for rung 11's shape at
// d = 128), rows of d elements, each row's 16-byte chunks permuted by the XOR swizzle (element
// (r, c) at swizzle::offset(r, c, d)). Unswizzled, the 8 rows an ldmatrix matrix reads are 128 or
// 256 bytes apart: the same 4 banks, an 8-way conflict. Swizzled, they are 8 different 16-byte
// bank groups.
//   sQ [Br][d]             the block's queries, loaded once
//   sK [kStages][Bc][d]    a ring of kStages stages: keys of KV tile j in stage j % kStages
//   sV [kStages][Bc][d]    values of KV tile j in stage j % kStages
//
// Registers of one warp for KV tile j (in M-tile mt a lane holds rows `group` and `group + 8`,
// lane = 4 * group + quad; the layouts are in common/ptx/fragment.cuh):
//   rS [kMTiles][Bc/8][4]   S = Q_w · K_jᵀ (unscaled), R x Bc fp32
//   rO [kMTiles][d/8][4]    O, R x d fp32, alive for the whole loop
//   rQ [d/16][kMTiles][4]   kLoadQResident: A of every k-slice of S, loaded once
//   rQ [2][kMTiles][4]      kLoadQPerTile: A of one k-slice of S, two buffers
//   rK [2][Bc/16][4]        B of one k-slice of S (Bc keys x 16 dims: Bc/8 n-tiles), two buffers
//   rV [2][d/16][4]         B of one k-slice of P·V (16 keys x d dims: d/8 n-tiles), two buffers
//   rP [kMTiles][4]         A of one k-slice of P·V, packed from rS before its mma
//
// Per KV tile: d/16 k-steps x Bc/8 n-tiles x kMTiles mma for S, then Bc/16 k-steps x d/8
// n-tiles x kMTiles mma for P·V. In both, the innermost loop runs over the M-tiles: one B
// fragment (loaded once), kMTiles mma. Each k-loop runs one iteration more than it has slices
// (time runs down; L = ldmatrix, M = mma):
//   kk = 0        L(0) -> buffer 0
//   kk = 1        L(1) -> buffer 1     M(0) <- buffer 0
//   ...
//   kk = steps                         M(steps - 1)
//
// Copy schedule, S = kStages stages each for K and V (groups in the order they are committed):
//   prologue   issue Q, K_0 -> stage 0                         group {Q, K_0}
//              issue V_0 -> stage 0                            group {V_0}
//              for s = 1 .. S-2: issue K_s, then V_s -> stage s  groups {K_s} {V_s}
//   tile j     wait K_j; barrier (also: all done with tile j-1, i.e. with stage (j-1) % S)
//              issue K_{j+S-1} -> stage (j+S-1) % S = (j-1) % S  group {K_{j+S-1}}
//              S = Q·K_jᵀ, softmax
//              wait V_j; barrier
//              issue V_{j+S-1} -> stage (j-1) % S                group {V_{j+S-1}}
//              O += P·V_j
// (a copy past the last tile is not issued, but its group is still committed, empty, so that
// the count of groups is the same on every iteration). When tile j waits for K_j, the groups
// committed after {K_j} are {V_j} and the pairs {K_t} {V_t} for t = j+1 .. j+S-2: 2S - 3 of them
// may stay in flight. When it waits for V_j, the groups after {V_j} are those pairs and
// {K_{j+S-1}}: again 2S - 3. Hence one wait, wait_group<2S - 3>, for both.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/ldmatrix.cuh"
#include "common/ptx/math.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/swizzle.cuh"
#include "common/registry.h"
#include "common/tune/config.h"

namespace fl {
namespace k12_autotune {

// Starts copying a kRows x kHeadDim tile from global memory (rows `stride` elements apart) into
// a swizzled shared tile, 16 bytes per thread per step, with cp.async: the data does not pass
// through registers, and the thread moves on at once. The tile is in shared memory only after
// cp.async.wait_group (this thread's copies) and a barrier (everyone's). Thread t takes chunk
// t % (d/8) of row t / (d/8), then the same chunk kRowsPerStep rows further down: every warp
// reads 512 contiguous bytes (coalesced). Rows start 16-byte aligned (check_common). A chunk is
// swizzled as a whole, so each 16-byte copy still lands in 16 contiguous bytes; the 8 lanes of
// a phase write 8 chunks of one row, a permutation of 8 bank groups: still conflict-free.
template <typename T, int kRows, int kHeadDim, int kThreads>
__device__ __forceinline__ void copy_tile_async(T* sTile, const T* gTile, int64_t stride) {
  constexpr int kChunksPerRow = kHeadDim / 8;             // 16-byte chunks per row
  constexpr int kRowsPerStep = kThreads / kChunksPerRow;  // rows the block covers per step
  static_assert(kThreads % kChunksPerRow == 0, "whole rows per step");
  static_assert(kRows % kRowsPerStep == 0, "the block covers the tile evenly");
  const int row = threadIdx.x / kChunksPerRow, col = (threadIdx.x % kChunksPerRow) * 8;
  const T* src = gTile + row * stride + col;
  const uint32_t dst = ptx::smem_addr(sTile);
  // One source pointer, stepped by kRowsPerStep rows. (Written as base + offset(s), the
  // offsets are loop-invariant across the KV loop, and the compiler keeps all of them, 64-bit,
  // in registers for the whole kernel.)
#pragma unroll
  for (int s = 0; s < kRows / kRowsPerStep; ++s) {
    ptx::cp_async::copy_16(dst + swizzle::byte_offset(row + s * kRowsPerStep, col, kHeadDim), src);
    src += kRowsPerStep * stride;
  }
}

// One KV tile of the online softmax for one M-tile (16 rows) of the warp, on the accumulator
// fragments: the raw scores rS (S = Q·K_jᵀ, not yet scaled) become P in place, and the running
// max, the running sums and O are updated. Row `group` of the M-tile is spread over the 4 lanes
// of the quad (2 columns of each 8-wide tile per lane): the row max needs the other three,
// fetched with two butterfly shuffles (lane ^ 1, lane ^ 2). Index r = 0 is row `group`, r = 1
// row `group + 8`; accumulator element i is in row i / 2.
//
// In base 2, with c = scale * log2(e) (scale_log2) and m the row max of the raw scores:
//   exp(scale * s - scale * m) = 2^(s * c - m * c)      one FFMA (m * c is per row) + one ex2
// The max of the raw scores is the max of the scaled ones because scale > 0 (check_common).
// kFirst: the first KV tile. The running max is still -inf, the row sums and O are zero: the
// correction 2^((m_old - m_new) * c) would be 0 and multiply zeros, so it is compiled out.
template <bool kFirst, int kSTiles, int kOTiles>
__device__ __forceinline__ void online_softmax(float (&rS)[kSTiles][4], float (&rO)[kOTiles][4],
                                               float (&row_max)[2], float (&row_sum)[2],
                                               float scale_log2) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) tile_max[i / 2] = fmaxf(tile_max[i / 2], rS[nt][i]);
  }
  float max_scaled[2];  // m * c, the per-row term of the FFMA
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float new_max = kFirst ? tile_max[r] : fmaxf(row_max[r], tile_max[r]);
    // The -inf guard. A row whose scores so far are all -inf (none in this non-causal kernel
    // with finite inputs; a fully masked row once masking arrives) has m = -inf, and
    // s * c - m * c would be -inf + inf = NaN. Scaled as 0 instead, P = 2^-inf = 0 and the
    // correction below is 2^(-inf - 0) = 0: the row stays empty instead of poisoned.
    max_scaled[r] = new_max == -INFINITY ? 0.f : new_max * scale_log2;
    if constexpr (!kFirst) {
      // Every earlier P of the row was computed against m_old <= m_new, so the row sum and O
      // are rescaled by 2^(m_old * c - m_new * c) <= 1 (one FFMA, one ex2 per row).
      const float correction = ptx::ex2_approx(fmaf(row_max[r], scale_log2, -max_scaled[r]));
      row_sum[r] *= correction;
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        rO[nt][2 * r] *= correction;
        rO[nt][2 * r + 1] *= correction;
      }
    }
    row_max[r] = new_max;
  }
  // P = 2^(s * c - m * c), in place. Each lane sums only its own columns: all of a row's
  // partial sums are rescaled by the same correction, so the quad adds them once, in the
  // epilogue.
#pragma unroll
  for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      rS[nt][i] = ptx::ex2_approx(fmaf(rS[nt][i], scale_log2, -max_scaled[i / 2]));
      row_sum[i / 2] += rS[nt][i];
    }
  }
}

// Register budget: Cfg::kMinBlocksPerSm blocks of Cfg::kThreads per SM (2 x 128 or 1 x 256), so
// 65536 / 256 = 256 registers a thread (255 usable) either way. Two M-tiles per warp need most
// of them at d = 128 (see rung 11's page).
template <typename T, int kHeadDim, typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    attention_kernel(const AttnParams p) {
  using Pair = typename TypeTraits<T>::pair;
  constexpr int kBr = Cfg::kBr;                  // query rows per block
  constexpr int kBc = Cfg::kBc;                  // keys per KV tile
  constexpr int kStages = Cfg::kStages;          // KV tiles in the shared ring
  constexpr int kThreads = Cfg::kThreads;
  constexpr int kRowsPerWarp = Cfg::kRowsPerWarp;
  constexpr int kMTiles = Cfg::kMTiles;          // M-tiles per warp
  constexpr int kQKSteps = kHeadDim / 16;  // k-steps of S = Q·Kᵀ (16 dims each)
  constexpr int kSTiles = kBc / 8;         // n-tiles of S (8 keys each)
  constexpr int kPVSteps = kBc / 16;       // k-steps of O += P·V (16 keys each)
  constexpr int kOTiles = kHeadDim / 8;    // n-tiles of O (8 dims each)
  constexpr int kWait = 2 * kStages - 3;   // groups that may stay in flight at every wait
  // Q fragments of the warp: kMTiles x d/16 slices x 4 registers a lane. Resident (loaded once,
  // before the loop) or read per KV tile, one slice at a time, double buffered: Cfg::kLoad.
  constexpr bool kQResident = Cfg::kQResident;
  constexpr int kQBufs = kQResident ? kQKSteps : 2;  // resident: one per slice; else two buffers
  static_assert(kHeadDim == 64 || kHeadDim == 128, "d = 64 or 128");

  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);     // [kBr][kHeadDim]
  T* sK = sQ + kBr * kHeadDim;            // [kStages][kBc][kHeadDim]
  T* sV = sK + kStages * kBc * kHeadDim;  // [kStages][kBc][kHeadDim]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4;  // accumulator row (and row + 8) this lane holds
  const int quad = lane % 4;   // which pair of columns in each 8-wide tile

  // Base pointers in 64-bit arithmetic: B * H * N * d overflows 32 bits at realistic sizes.
  const int64_t b = blockIdx.z, h = blockIdx.y, h_kv = h / (p.heads_q / p.heads_kv);
  const int64_t q_row0 = static_cast<int64_t>(blockIdx.x) * kBr;  // first query row of the block
  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head +
                q_row0 * p.q_stride.row;                                 // [kBr][d]
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + h_kv * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + h_kv * p.v_stride.head;
  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head +
          q_row0 * p.o_stride.row;                                       // [kBr][d]
  const int64_t kv_tiles = p.seqlen_k / kBc;

  // ---------------------------------------------------------------------------------------------
  // PROLOGUE: start the copies of the Q tile and K_0 (one group), of V_0 (a second group), then
  // of K_s and V_s for the other stages but the last (one group each); the output accumulators
  // and the running softmax statistics start empty.
  // ---------------------------------------------------------------------------------------------
  copy_tile_async<T, kBr, kHeadDim, kThreads>(sQ, gQ, p.q_stride.row);
  copy_tile_async<T, kBc, kHeadDim, kThreads>(sK, gK, p.k_stride.row);
  ptx::cp_async::commit_group();  // group: Q, K_0
  copy_tile_async<T, kBc, kHeadDim, kThreads>(sV, gV, p.v_stride.row);
  ptx::cp_async::commit_group();  // group: V_0
#pragma unroll
  for (int s = 1; s < kStages - 1; ++s) {
    if (s < kv_tiles) {
      copy_tile_async<T, kBc, kHeadDim, kThreads>(sK + s * kBc * kHeadDim,
                                                  gK + s * kBc * p.k_stride.row, p.k_stride.row);
    }
    ptx::cp_async::commit_group();  // group: K_s
    if (s < kv_tiles) {
      copy_tile_async<T, kBc, kHeadDim, kThreads>(sV + s * kBc * kHeadDim,
                                                  gV + s * kBc * p.v_stride.row, p.v_stride.row);
    }
    ptx::cp_async::commit_group();  // group: V_s
  }

  float rO[kMTiles][kOTiles][4];  // kRowsPerWarp x d per warp
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kOTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) rO[mt][nt][i] = 0.f;
    }
  }
  // Index [mt][r]: r = 0 is row `group` of M-tile mt, r = 1 is row `group + 8`; accumulator
  // element i is in row i / 2.
  float row_max[kMTiles][2], row_sum[kMTiles][2];
  // scale * log2(e): exp(scale * x) = 2^(x * scale_log2). One multiply per kernel.
  const float scale_log2 = p.softmax_scale * 1.44269504088896340736f;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[mt][r] = -INFINITY;  // running max of the raw (unscaled) scores
      row_sum[mt][r] = 0.f;        // this lane's part of the running sum
    }
  }

  // [kRowsPerWarp][d], this warp's rows. They start at row R w, and M-tile mt at row R w + 16mt,
  // multiples of 8, so the swizzle (which depends on row % 8) has the same pattern relative to
  // sQw as to sQ.
  const T* sQw = sQ + warp * kRowsPerWarp * kHeadDim;

  // The A fragment of k-slice kk of S (dims 16kk..16kk+15) for M-tile mt: lane l points at row
  // 16mt + l % 16, dims 16kk + 8 (l / 16) (see S = Q·K_jᵀ below for why).
  uint32_t rQ[kQBufs][kMTiles][4];
  auto load_q_slice = [&](int kk, uint32_t (&rQs)[kMTiles][4]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      ptx::ldmatrix_x4(rQs[mt], ptx::smem_addr(sQw) +
                                    swizzle::byte_offset(16 * mt + lane % 16,
                                                         kk * 16 + (lane / 16) * 8, kHeadDim));
    }
  };
  if constexpr (kQResident) {
    // Load every Q fragment now, once: wait for the group {Q, K_0} (the 2S - 3 groups after it
    // may still fly) and for everyone's copies. The loop's first wait and barrier then find
    // nothing left to wait for.
    ptx::cp_async::wait_group<kWait>();
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kQKSteps; ++kk) load_q_slice(kk, rQ[kk]);
  }

  // ---------------------------------------------------------------------------------------------
  // MAIN LOOP over the KV tiles
  // ---------------------------------------------------------------------------------------------
  for (int64_t j = 0; j < kv_tiles; ++j) {
    const int stage = static_cast<int>(j % kStages);
    // The stage of tile j + S - 1: the one tile j - 1 used.
    const int refill = static_cast<int>((j + kStages - 1) % kStages);
    const T* sKj = sK + stage * kBc * kHeadDim;  // [kBc][kHeadDim], K_j
    const T* sVj = sV + stage * kBc * kHeadDim;  // [kBc][kHeadDim], V_j
    ptx::cp_async::wait_group<kWait>();  // K_j (and Q) landed; the 2S - 3 newer groups may fly
    // Everyone's K_j landed; and every warp is done with tile j-1, so stage `refill` is free.
    __syncthreads();
    // K_{j+S-1} now, into the stage tile j-1 used: it has S - 1 tiles of math to land in. Past
    // the last tile, an empty group keeps the count of groups the same on every iteration.
    if (j + kStages - 1 < kv_tiles) {
      copy_tile_async<T, kBc, kHeadDim, kThreads>(
          sK + refill * kBc * kHeadDim, gK + (j + kStages - 1) * kBc * p.k_stride.row,
          p.k_stride.row);
    }
    ptx::cp_async::commit_group();  // group: K_{j+S-1}

    // S = Q_w · K_jᵀ. A = Q (16 x 16 slice, row-major): its registers a0..a3 are the 8x8 blocks
    // (rows 0-7, dims 0-7), (rows 8-15, dims 0-7), (rows 0-7, dims 8-15), (rows 8-15, dims 8-15)
    // and ldmatrix hands lane l row l/4, columns 2(l%4), +1 of each, exactly the A layout: so
    // lane l points at row l % 16, dims 8 (l / 16) of the slice. B = Kᵀ (16 x 8, "col"), element
    // (k, n) = sK[n][k]: stored as rows of sK (keys) it is again "row l/4, columns 2(l%4)" of
    // 8x8 blocks (keys 0-7, dims 0-7) and (keys 0-7, dims 8-15); one x4 takes these two blocks
    // for two n-tiles: matrix i = l / 8 is n-tile i / 2, dims 8 (i % 2).
    float rS[kMTiles][kSTiles][4];  // kRowsPerWarp x kBc per warp
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) rS[mt][nt][i] = 0.f;
      }
    }
    // Iteration kk loads k-slice kk (dims 16kk..16kk+15) into buffer kk % 2, then multiplies
    // slice kk - 1 out of the other buffer: the loads of a slice are in flight while the tensor
    // cores work on the slice before it. kk is a compile-time constant (the loop is unrolled),
    // so both buffers are plain registers and the branches vanish. Resident Q fragments are
    // not loaded here: slice kk is rQ[kk]; else it is read into buffer kk % 2.
    uint32_t rK[2][kSTiles / 2][4];  // B of n-tiles 2i ([i][0..1]) and 2i + 1 ([i][2..3])
#pragma unroll
    for (int kk = 0; kk <= kQKSteps; ++kk) {
      if (kk < kQKSteps) {  // ldmatrix of slice kk
        const int k0 = kk * 16, buf = kk % 2;
        if constexpr (!kQResident) load_q_slice(kk, rQ[buf]);
#pragma unroll
        for (int nt = 0; nt < kSTiles; nt += 2) {
          const int key = nt * 8 + (lane / 16) * 8 + lane % 8;  // the row lane l points at
          ptx::ldmatrix_x4(rK[buf][nt / 2],
                           ptx::smem_addr(sKj) +
                               swizzle::byte_offset(key, k0 + ((lane / 8) % 2) * 8, kHeadDim));
        }
      }
      if (kk > 0) {  // mma of slice kk - 1, from fragments loaded one iteration ago
        const int buf = (kk - 1) % 2, qbuf = kQResident ? kk - 1 : buf;
#pragma unroll
        for (int nt = 0; nt < kSTiles; nt += 2) {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {  // one K fragment, one mma per M-tile
            ptx::mma_m16n8k16<T>(rS[mt][nt], rQ[qbuf][mt],
                                 {rK[buf][nt / 2][0], rK[buf][nt / 2][1]}, rS[mt][nt]);
            ptx::mma_m16n8k16<T>(rS[mt][nt + 1], rQ[qbuf][mt],
                                 {rK[buf][nt / 2][2], rK[buf][nt / 2][3]}, rS[mt][nt + 1]);
          }
        }
      }
    }

    // Online softmax, M-tile by M-tile. The branch is uniform (every thread has the same j),
    // and picks one of two compiled versions of the update: the first tile's has no rescale.
    if (j == 0) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        online_softmax<true>(rS[mt], rO[mt], row_max[mt], row_sum[mt], scale_log2);
      }
    } else {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        online_softmax<false>(rS[mt], rO[mt], row_max[mt], row_sum[mt], scale_log2);
      }
    }

    ptx::cp_async::wait_group<kWait>();  // V_j landed; the 2S - 3 newer groups may fly
    __syncthreads();                     // everyone's V_j landed: V_j's stage is complete
    // V_{j+S-1} now, into the stage tile j-1 used (free since the barrier at the top of this
    // tile): it has S - 1 tiles of math to land in.
    if (j + kStages - 1 < kv_tiles) {
      copy_tile_async<T, kBc, kHeadDim, kThreads>(
          sV + refill * kBc * kHeadDim, gV + (j + kStages - 1) * kBc * p.v_stride.row,
          p.v_stride.row);
    }
    ptx::cp_async::commit_group();  // group: V_{j+S-1}

    // O += P · V_j. A = P: the accumulator tiles 2kk and 2kk+1 of S hold exactly the A fragment
    // of keys [16kk, 16kk + 16) (C: row group (+8), cols 2quad, 2quad+1 of each 8-wide half), so
    // P is rounded to T and packed in registers, no shared-memory round trip. B = V_j (16 x 8,
    // element (k, n) = sV[k][n]): a lane needs 2 consecutive keys of one dim, a column pair of
    // the 8x8 block as stored. ldmatrix .trans delivers row 2(l%4), +1, column l/4 of each block
    // as stored: exactly B's (k = 2 quad, +1; n = group). The blocks are (keys 0-7, dims 0-7),
    // (keys 8-15, dims 0-7) = b0, b1 of n-tile nt, then the same for dims 8-15 = n-tile nt + 1:
    // lane l points at key l % 16, dims 8 (l / 16).
    // Pipelined like S: iteration kk loads k-slice kk of V_j (keys 16kk..16kk+15, all d dims)
    // into buffer kk % 2, then multiplies slice kk - 1.
    uint32_t rV[2][kOTiles / 2][4];  // B of n-tiles 2i ([i][0..1]) and 2i + 1 ([i][2..3])
#pragma unroll
    for (int kk = 0; kk <= kPVSteps; ++kk) {
      if (kk < kPVSteps) {  // ldmatrix of slice kk
        const int key = kk * 16 + lane % 16, buf = kk % 2;  // the row lane l points at
#pragma unroll
        for (int nt = 0; nt < kOTiles; nt += 2) {
          const int col = nt * 8 + (lane / 16) * 8;  // the dim of the row lane l points at
          ptx::ldmatrix_x4_trans(rV[buf][nt / 2],
                                 ptx::smem_addr(sVj) + swizzle::byte_offset(key, col, kHeadDim));
        }
      }
      if (kk > 0) {  // mma of slice kk - 1
        const int ks = kk - 1, buf = ks % 2;
        uint32_t rP[kMTiles][4];  // A: 16 x 16 slice of P per M-tile, keys 16ks..16ks+15
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          const float(&rSm)[kSTiles][4] = rS[mt];
          rP[mt][0] = pack2<T>(rSm[2 * ks][0], rSm[2 * ks][1]);  // row group,     keys +2quad
          rP[mt][1] = pack2<T>(rSm[2 * ks][2], rSm[2 * ks][3]);  // row group + 8, keys +2quad
          rP[mt][2] = pack2<T>(rSm[2 * ks + 1][0], rSm[2 * ks + 1][1]);  // row group, +8+2quad
          rP[mt][3] = pack2<T>(rSm[2 * ks + 1][2], rSm[2 * ks + 1][3]);  // row group + 8, +8+2quad
        }
#pragma unroll
        for (int nt = 0; nt < kOTiles; nt += 2) {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {  // one V fragment, one mma per M-tile
            ptx::mma_m16n8k16<T>(rO[mt][nt], rP[mt], {rV[buf][nt / 2][0], rV[buf][nt / 2][1]},
                                 rO[mt][nt]);
            ptx::mma_m16n8k16<T>(rO[mt][nt + 1], rP[mt],
                                 {rV[buf][nt / 2][2], rV[buf][nt / 2][3]}, rO[mt][nt + 1]);
          }
        }
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // EPILOGUE: finish the row sums across the quad, normalise by 1/l, store O (and LSE).
  // ---------------------------------------------------------------------------------------------
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    float inv_sum[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[mt][r] += __shfl_xor_sync(0xffffffffu, row_sum[mt][r], 1);
      row_sum[mt][r] += __shfl_xor_sync(0xffffffffu, row_sum[mt][r], 2);
      inv_sum[r] = 1.f / row_sum[mt][r];
    }
    // Tile row of r = 0; r = 1 is row + 8.
    const int row = warp * kRowsPerWarp + mt * 16 + group;
    T* o_row0 = gO + row * p.o_stride.row;
    T* o_row1 = gO + (row + 8) * p.o_stride.row;
#pragma unroll
    for (int nt = 0; nt < kOTiles; ++nt) {
      const int col = nt * 8 + 2 * quad;
      *reinterpret_cast<Pair*>(o_row0 + col) =
          TypeTraits<T>::from_float2(rO[mt][nt][0] * inv_sum[0], rO[mt][nt][1] * inv_sum[0]);
      *reinterpret_cast<Pair*>(o_row1 + col) =
          TypeTraits<T>::from_float2(rO[mt][nt][2] * inv_sum[1], rO[mt][nt][3] * inv_sum[1]);
    }
    if (p.lse != nullptr && quad == 0) {
      // LSE = ln(sum_j exp(scale * s_j)) = ln 2 * log2(sum_j 2^(s_j * c))
      //     = ln 2 * (m * c + log2(sum_j 2^(s_j * c - m * c))) = ln 2 * (m * c + log2(l)):
      // the same natural-log LSE as before, computed from the base-2 quantities.
      constexpr float kLn2 = 0.69314718055994530942f;
      float* lse = p.lse + (b * p.heads_q + h) * p.seqlen_q + q_row0 + row;
      lse[0] = (row_max[mt][0] * scale_log2 + log2f(row_sum[mt][0])) * kLn2;
      lse[8] = (row_max[mt][1] * scale_log2 + log2f(row_sum[mt][1])) * kLn2;
    }
  }
}

// "" when a kernel compiled for d = kHeadDim and Cfg can run p, else the rule broken.
template <int kHeadDim, typename Cfg>
std::string supports_config(const AttnParams& p) {
  if (p.causal) return "causal masking is not supported (rungs 03-15 are non-causal)";
  if (p.head_dim != kHeadDim) {
    return "this config is compiled for d = " + std::to_string(kHeadDim) + " (got " +
           std::to_string(p.head_dim) + ")";
  }
  if (p.seqlen_q % Cfg::kBr != 0) {
    return "Nq must be a multiple of Br = " + std::to_string(Cfg::kBr) + " (got " +
           std::to_string(p.seqlen_q) + ")";
  }
  if (p.seqlen_k % Cfg::kBc != 0) {
    return "Nk must be a multiple of Bc = " + std::to_string(Cfg::kBc) + " (got " +
           std::to_string(p.seqlen_k) + ")";
  }
  if (p.heads_q > 65535 || p.batch > 65535) return "H_q and B must be <= 65535 (grid limits)";
  if (p.seqlen_q / Cfg::kBr > INT_MAX) return "Nq / Br must be <= 2^31 - 1 (grid limit)";
  constexpr int kSmem = smem_bytes(Cfg::values(), kHeadDim);
  int device = 0, max_smem = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) ==
          cudaSuccess &&
      kSmem > max_smem) {
    return "needs " + std::to_string(kSmem / 1024) + " KiB of shared memory per block (the " +
           "device allows " + std::to_string(max_smem / 1024) + " KiB)";
  }
  cudaGetLastError();  // leave no error behind (no device: the registry reports that)
  return "";
}

template <typename Cfg>
TileShape tile_config(const AttnParams&) {
  return {Cfg::kBr, Cfg::kBc};
}

template <typename T, int kHeadDim, typename Cfg>
void launch_config(const AttnParams& p, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes(Cfg::values(), kHeadDim);
  if constexpr (kSmem > 48 * 1024) {  // above 48 KiB a kernel must opt in
    FL_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<T, kHeadDim, Cfg>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  }
  const dim3 grid(static_cast<unsigned>(p.seqlen_q / Cfg::kBr), static_cast<unsigned>(p.heads_q),
                  static_cast<unsigned>(p.batch));
  attention_kernel<T, kHeadDim, Cfg><<<grid, Cfg::kThreads, kSmem, stream>>>(p);
}

}  // namespace k12_autotune
}  // namespace fl
