// =================================================================================================
// Kernel 10 of 16 — fragment reuse: every fragment loaded feeds as many mma as it can
// builds on: 09 (fragment double buffering)
// changes:   1. each warp owns 2 M-tiles (32 query rows) instead of 1: Br = 128 with the same
//               4 warps, the split-Q of FlashAttention-2. Every K and V fragment a warp loads
//               with ldmatrix now feeds 2 mma (one per M-tile) instead of 1
//            2. at d = 64 the Q fragments of the warp stay resident in registers for the whole
//               KV loop: loaded once, before it, instead of once per KV tile. At d = 128 they
//               (64 registers) do not fit beside the 2 M-tiles' O (128): each Q slice is still
//               read per KV tile, double buffered as in rung 09
//            3. Bc = 32 instead of 64: with 2 M-tiles, S costs 2 x 16 x Bc / 32 registers a
//               lane; at Bc = 64 (64 registers) the d = 128 kernel spills, at Bc = 32 (32) it
//               does not (the register budget is on the page)
// expect:    fewer ldmatrix per mma (smsp__inst_executed_op_ldsm.sum over the mma count):
//            0.375 at d = 128 and 0.25 at d = 64, down from 0.5625 in rung 09
// supports:  fp16, bf16; d in {64, 128}; Nq a multiple of 128; Nk a multiple of 32; non-causal;
//            GQA; LSE output
// doc:       docs/kernels/10_frag_reuse.md
// =================================================================================================
//
// Grid: (Nq / 128, H_q, B); block: 128 threads = 4 warps. Block x computes query rows
// [128x, 128x + 128) of head (b, h), which reads KV head h / (H_q / H_kv); warp w owns rows
// [32w, 32w + 32) of the tile: 2 M-tiles of 16 rows (the M = 16 of one mma), M-tile mt being
// rows [32w + 16mt, 32w + 16mt + 16).
//
// Shared memory (dynamic, (128 + 4 * 32) * d * 2 bytes = 64 KiB at d = 128), rows of d
// elements, each row's 16-byte chunks permuted by the XOR swizzle (element (r, c) at
// swizzle::offset(r, c, d)). Unswizzled, the 8 rows an ldmatrix matrix reads are 128 or 256
// bytes apart: the same 4 banks, an 8-way conflict. Swizzled, they are 8 different 16-byte bank
// groups.
//   sQ [128][d]     the block's queries, loaded once
//   sK [2][32][d]   a ring of 2 stages: keys of KV tile j in stage j % 2
//   sV [2][32][d]   values of KV tile j in stage j % 2
//
// Registers of one warp for KV tile j (in M-tile mt a lane holds rows `group` and `group + 8`,
// lane = 4 * group + quad; the layouts are in common/ptx/fragment.cuh):
//   rS [2][4][4]     S = scale * Q_w · K_jᵀ, 32 x 32 fp32: 2 M-tiles x 4 accumulator tiles
//   rO [2][d/8][4]   O, 32 x d fp32: 2 M-tiles x d/8 accumulator tiles, alive for the whole loop
//   rQ [4][2][4]     d = 64: A of all 4 k-slices of S for both M-tiles, resident (loaded once)
//   rQ [2][2][4]     d = 128: A of one k-slice of S for both M-tiles, two buffers
//   rK [2][2][4]     B of one k-slice of S (32 keys x 16 dims: 4 n-tiles), two buffers
//   rV [2][d/16][4]  B of one k-slice of P·V (16 keys x d dims: d/8 n-tiles), two buffers
//   rP [2][4]        A of one k-slice of P·V for both M-tiles, packed from rS before its mma
//
// Per KV tile: d/16 k-steps x 4 n-tiles x 2 M-tiles mma for S, then 2 k-steps x d/8 n-tiles x
// 2 M-tiles mma for P·V. In both, the innermost loop runs over the M-tiles: one B fragment
// (loaded once), 2 mma.
// Each k-loop runs one iteration more than it has slices (time runs down; L = ldmatrix, M = mma):
//   kk = 0        L(0) -> buffer 0
//   kk = 1        L(1) -> buffer 1     M(0) <- buffer 0
//   kk = 2        L(2) -> buffer 0     M(1) <- buffer 1
//   ...
//   kk = steps                         M(steps - 1)
//
// Copy schedule (two stages each for K and V; groups in the order they are committed):
//   prologue   issue Q, K_0 -> stage 0                    group {Q, K_0}
//              issue V_0 -> stage 0                       group {V_0}
//   tile j     wait K_j; barrier (also: all done with tile j-1, i.e. with stage (j+1) % 2)
//              issue K_{j+1} -> stage (j+1) % 2           group {K_{j+1}} (empty after the last)
//              S = Q·K_jᵀ, softmax                        (V_j, K_{j+1} in flight)
//              wait V_j; barrier
//              issue V_{j+1} -> stage (j+1) % 2           group {V_{j+1}} (empty after the last)
//              O += P·V_j                                 (K_{j+1}, V_{j+1} in flight)
// At every wait exactly one newer group may stay in flight: always wait_group<1>.
// ldmatrix.x4: lanes 8i..8i+7 give the addresses of the 8 rows (16 bytes each) of 8x8 matrix i,
// and register i of every lane receives its piece of matrix i (common/ptx/ldmatrix.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/ldmatrix.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/swizzle.cuh"
#include "common/registry.h"

namespace fl {
namespace k10_frag_reuse {

constexpr int kBr = 128;                // query rows per block
constexpr int kBc = 32;                 // keys per KV tile
constexpr int kWarps = 4;               // warps per block
constexpr int kStages = 2;              // KV tiles in flight in shared memory (the ring's size)
constexpr int kThreads = 32 * kWarps;   // 128
constexpr int kRowsPerWarp = kBr / kWarps;  // 32
constexpr int kMTiles = kRowsPerWarp / 16;   // M-tiles (16 rows, the M of one mma) per warp
static_assert(kRowsPerWarp == 16 * kMTiles, "split-Q: each warp owns whole M-tiles");
static_assert(kBc % 16 == 0, "P·V walks the keys 16 at a time (the k of one mma)");

template <int kHeadDim>
constexpr int smem_bytes() {
  return (kBr + 2 * kStages * kBc) * kHeadDim * 2;  // sQ + sK ring + sV ring, 2-byte elements
}

// Starts copying a kRows x kHeadDim tile from global memory (rows `stride` elements apart) into
// a swizzled shared tile, 16 bytes per thread per step, with cp.async: the data does not pass
// through registers, and the thread moves on at once. The tile is in shared memory only after
// cp.async.wait_group (this thread's copies) and a barrier (everyone's). Thread t takes chunk
// t % (d/8) of row t / (d/8), then the same chunk kRowsPerStep rows further down: every warp
// reads 512 contiguous bytes (coalesced). Rows start 16-byte aligned (check_common). A chunk is
// swizzled as a whole, so each 16-byte copy still lands in 16 contiguous bytes; the 8 lanes of
// a phase write 8 chunks of one row, a permutation of 8 bank groups: still conflict-free.
template <typename T, int kRows, int kHeadDim>
__device__ __forceinline__ void copy_tile_async(T* sTile, const T* gTile, int64_t stride) {
  constexpr int kChunksPerRow = kHeadDim / 8;             // 16-byte chunks per row
  constexpr int kRowsPerStep = kThreads / kChunksPerRow;  // rows the block covers per step
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

// At least 2 blocks of kThreads per SM: a budget of 65536 / (2 * 128) = 256 registers a thread
// (255 usable). Two M-tiles per warp need most of them at d = 128 (see the page).
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads, 2)
    attention_kernel(const AttnParams p) {
  using Pair = typename TypeTraits<T>::pair;
  constexpr int kQKSteps = kHeadDim / 16;  // k-steps of S = Q·Kᵀ (16 dims each)
  constexpr int kSTiles = kBc / 8;         // n-tiles of S (8 keys each)
  constexpr int kPVSteps = kBc / 16;       // k-steps of O += P·V (16 keys each)
  constexpr int kOTiles = kHeadDim / 8;    // n-tiles of O (8 dims each)
  // Q fragments of the warp: 2 M-tiles x d/16 slices x 4 registers = d/2 registers a lane.
  // Resident at d = 64 (32 registers); at d = 128 the 64 they would take do not fit beside rO
  // (128), rS (32) and the two buffers of V fragments (64): see the register budget on the page.
  constexpr bool kQResident = kHeadDim <= 64;
  constexpr int kQBufs = kQResident ? kQKSteps : 2;  // resident: one per slice; else two buffers

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

  // ---------------------------------------------------------------------------------------------
  // PROLOGUE: start the copies of the Q tile and K_0 (one group, waited for at the top of the
  // first iteration) and of V_0 (a second group) into stage 0; the output accumulators and the
  // running softmax statistics start empty.
  // ---------------------------------------------------------------------------------------------
  copy_tile_async<T, kBr, kHeadDim>(sQ, gQ, p.q_stride.row);
  copy_tile_async<T, kBc, kHeadDim>(sK, gK, p.k_stride.row);
  ptx::cp_async::commit_group();  // group: Q, K_0
  copy_tile_async<T, kBc, kHeadDim>(sV, gV, p.v_stride.row);
  ptx::cp_async::commit_group();  // group: V_0

  float rO[kMTiles][kOTiles][4];  // 32 x d per warp
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
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[mt][r] = -INFINITY;  // running max of the scaled scores
      row_sum[mt][r] = 0.f;        // this lane's part of the running sum
    }
  }

  // [32][d], this warp's rows. They start at row 32w, and M-tile mt at row 32w + 16mt, multiples
  // of 8, so the swizzle (which depends on row % 8) has the same pattern relative to sQw as to sQ.
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
    // Load every Q fragment now, once: wait for the group {Q, K_0} (V_0 may still fly) and for
    // everyone's copies. The loop's first wait and barrier then find nothing left to wait for.
    ptx::cp_async::wait_group<1>();
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kQKSteps; ++kk) load_q_slice(kk, rQ[kk]);
  }

  // ---------------------------------------------------------------------------------------------
  // MAIN LOOP over the KV tiles
  // ---------------------------------------------------------------------------------------------
  const int64_t kv_tiles = p.seqlen_k / kBc;
  for (int64_t j = 0; j < kv_tiles; ++j) {
    const int stage = static_cast<int>(j % kStages), next = static_cast<int>((j + 1) % kStages);
    const T* sKj = sK + stage * kBc * kHeadDim;  // [kBc][kHeadDim], K_j
    const T* sVj = sV + stage * kBc * kHeadDim;  // [kBc][kHeadDim], V_j
    ptx::cp_async::wait_group<1>();  // all but the newest group (V_j) landed: K_j (and Q) have
    // Everyone's K_j landed; and every warp is done with tile j-1, so stage `next` is free.
    __syncthreads();
    // K_{j+1} now, into the other stage: it has S, the softmax and P·V_j to land in. After the
    // last tile, an empty group keeps the count of groups the same on every iteration.
    if (j + 1 < kv_tiles) {
      copy_tile_async<T, kBc, kHeadDim>(sK + next * kBc * kHeadDim,
                                        gK + (j + 1) * kBc * p.k_stride.row, p.k_stride.row);
    }
    ptx::cp_async::commit_group();  // group: K_{j+1}

    // S = Q_w · K_jᵀ. A = Q (16 x 16 slice, row-major): its registers a0..a3 are the 8x8 blocks
    // (rows 0-7, dims 0-7), (rows 8-15, dims 0-7), (rows 0-7, dims 8-15), (rows 8-15, dims 8-15)
    // and ldmatrix hands lane l row l/4, columns 2(l%4), +1 of each, exactly the A layout: so
    // lane l points at row l % 16, dims 8 (l / 16) of the slice. B = Kᵀ (16 x 8, "col"), element
    // (k, n) = sK[n][k]: stored as rows of sK (keys) it is again "row l/4, columns 2(l%4)" of
    // 8x8 blocks (keys 0-7, dims 0-7) and (keys 0-7, dims 8-15); one x4 takes these two blocks
    // for two n-tiles: matrix i = l / 8 is n-tile i / 2, dims 8 (i % 2).
    float rS[kMTiles][kSTiles][4];  // 32 x kBc per warp
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
    // not loaded here: slice kk is rQ[kk] (d = 64); else it is read into buffer kk % 2.
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

    // Online softmax on the fragments. Row `group` of the warp is spread over the 4 lanes of
    // the quad (2 columns of each 8-wide tile per lane): the row max needs the other three,
    // fetched with two butterfly shuffles (lane ^ 1, lane ^ 2).
    // Each M-tile has its own rows: the same steps, once per M-tile.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          rS[mt][nt][i] *= p.softmax_scale;
          tile_max[i / 2] = fmaxf(tile_max[i / 2], rS[mt][nt][i]);
        }
      }
      float correction[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        // Non-causal: every row sees every key, so new_max is finite from the first tile on and
        // exp(-inf - new_max) = 0 is the right correction then (no -inf guard needed here).
        const float new_max = fmaxf(row_max[mt][r], tile_max[r]);
        correction[r] = expf(row_max[mt][r] - new_max);
        row_max[mt][r] = new_max;
        row_sum[mt][r] *= correction[r];
      }
      // P = exp(S - max), in place. Each lane sums only its own columns: all of a row's partial
      // sums are rescaled by the same correction, so the quad adds them once, in the epilogue.
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          rS[mt][nt][i] = expf(rS[mt][nt][i] - row_max[mt][i / 2]);
          row_sum[mt][i / 2] += rS[mt][nt][i];
        }
      }
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) rO[mt][nt][i] *= correction[i / 2];
      }
    }

    ptx::cp_async::wait_group<1>();  // all but the newest group (K_{j+1}) landed: V_j has
    __syncthreads();                 // everyone's V_j landed: V_j's stage is complete
    // V_{j+1} now, into the other stage (free since the barrier at the top of this tile): it
    // has P·V_j and S_{j+1} to land in.
    if (j + 1 < kv_tiles) {
      copy_tile_async<T, kBc, kHeadDim>(sV + next * kBc * kHeadDim,
                                        gV + (j + 1) * kBc * p.v_stride.row, p.v_stride.row);
    }
    ptx::cp_async::commit_group();  // group: V_{j+1}

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
      // LSE = log(sum_j exp(scale * s_j)) = max + log(sum_j exp(scale * s_j - max)).
      float* lse = p.lse + (b * p.heads_q + h) * p.seqlen_q + q_row0 + row;
      lse[0] = row_max[mt][0] + logf(row_sum[mt][0]);
      lse[8] = row_max[mt][1] + logf(row_sum[mt][1]);
    }
  }
}

std::string supports(const AttnParams& p) {
  if (p.causal) return "causal masking is not supported (rungs 03-15 are non-causal)";
  if (p.head_dim != 64 && p.head_dim != 128) {
    return "head_dim must be 64 or 128 (got " + std::to_string(p.head_dim) + ")";
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
  if (p.seqlen_q / kBr > INT_MAX) return "Nq / 128 must be <= 2^31 - 1 (grid limit)";
  return "";
}

TileShape tile(const AttnParams&) { return {kBr, kBc}; }

template <typename T, int kHeadDim>
void launch_typed(const AttnParams& p, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<kHeadDim>();
  if constexpr (kSmem > 48 * 1024) {  // above 48 KiB a kernel must opt in
    FL_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<T, kHeadDim>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  }
  const dim3 grid(static_cast<unsigned>(p.seqlen_q / kBr), static_cast<unsigned>(p.heads_q),
                  static_cast<unsigned>(p.batch));
  attention_kernel<T, kHeadDim><<<grid, kThreads, kSmem, stream>>>(p);
}

void launch(const AttnParams& p, cudaStream_t stream) {
  dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (p.head_dim == 64) {
      launch_typed<T, 64>(p, stream);
    } else {
      launch_typed<T, 128>(p, stream);
    }
  });
}

}  // namespace k10_frag_reuse

const KernelInfo& kernel_10() {
  static const KernelInfo info{10,
                               "frag_reuse",
                               "fragment reuse: 2 M-tiles per warp, resident Q fragments (d = 64)",
                               "docs/kernels/10_frag_reuse.md",
                               80,
                               k10_frag_reuse::tile,
                               k10_frag_reuse::supports,
                               k10_frag_reuse::launch};
  return info;
}

}  // namespace fl
