// =================================================================================================
// Kernel 16 of 16 — final: fewer rescales, one barrier per tile, constant strides, L2 order
// builds on: 15 (store path)
// changes:   1. rescale only when the max moved: O and the row sums of an M-tile are multiplied
//               by the correction 2^(m_old c - m_new c) only when a row of the M-tile has a new
//               max in this tile; the warp votes (__any_sync) and skips the d/2 multiplies of O,
//               the correction ex2 and their wait on the row max otherwise. The skipped
//               correction would have been 1: the result is that of rung 15 (to a rounding of
//               that 1), unlike a threshold on the growth (FlashAttention-4's), which the
//               ladder's pass rule rejects (see the page)
//            2. compile-time specialisation: contiguous K and V rows (row stride = d, the BHND
//               layout) get their own instantiation, in which every offset of the K/V copies is a
//               compile-time immediate (no 64-bit adds per copy step, fewer registers); any other
//               stride runs the general instantiation
//            3. an explicit L2-aware block order: a 1D grid decoded as (query tile fastest, then
//               query head, then batch), so the blocks that share one KV head's K and V (all
//               query tiles of its G query heads) are launched back to back and stream the same
//               K/V tiles through L2 together; B and H_q are no longer bound by grid.y/z
//            4. one barrier per KV tile instead of two: K_j and V_j travel in one cp.async group
//               and are waited for together at the top of the tile, where the copies of tile
//               j - S + 1 (K and V) are issued; with a ring of S >= 2 stages each copy still has
//               S - 1 tiles of math to land in, and the wait and barrier before P·V go
//            5. its own tuned table (kernels/16_final/tuned_configs.h, scripts/autotune.py
//               --rungs 16): the registers this rung saves admit configs that spilled in rung 12
//            6. the full contract (docs/contract.md): any Nq, Nk >= 1 (the last Q tile and the last
//               K/V tile are copied with zero fill, the scores of keys past Nk masked, rows past
//               Nq neither computed nor stored), causal masking aligned bottom-right (KV tiles
//               above the diagonal skipped, the tiles that cross it masked; a row that sees no
//               key gets O = 0, LSE = -inf) and d = 256 (one M-tile per warp, 8 warps)
//            7. short tiles: a query tile of at most SplitKeys::kRows rows (the last of Nq = 2049)
//               shares the keys of every KV tile among its warps and merges their (m, l, O)
//               (SplitKeys, merge_split, a second version of the body); the first visit computes
//               only 16 keys when no row of the block sees more of that tile (Nk = 2049)
// expect:    fewer FP32 multiplies executed per KV tile than rung 15, the more the longer the
//            sequence (ncu: smsp__sass_thread_inst_executed_op_fmul_pred_on.sum); TFLOP/s vs
//            FlashAttention-2 at N >= 2048, d = 128, fp16 (scripts/compare_sdpa.py), causal
//            too; a length one above a block multiple at most 5% slower than the multiple
// supports:  fp16, bf16; d in {64, 128, 256}; any Nq, Nk >= 1 (up to 2^30); causal or not; GQA;
//            LSE output; any softmax scale; strides (rows 16-byte aligned)
// doc:       docs/kernels/16_final.md
// =================================================================================================
//
// This header holds the kernel and its launcher for one config; final.cu instantiates the configs
// of kernels/16_final/tuned_configs.h (rung 12's search, run again on this kernel).
//
// Grid: Tq x H_q x B blocks in one dimension, Tq = ceil(Nq / Br) query tiles, block id =
// (b H_q + h) Tq + (Tq - 1 - x): the query tiles of a head last to first (see block_coords);
// block: 32 * kWarps threads. Block (x, h, b) computes query rows [Br x, Br x + Br) of head
// (b, h) (those below Nq), which reads KV head h / (H_q / H_kv); warp w owns rows
// [R w, R w + R) of the tile, R = Br / kWarps = 16 kMTiles: kMTiles M-tiles of 16 rows (the M
// = 16 of one mma), M-tile mt being rows [R w + 16 mt, R w + 16 mt + 16).
//
// Lengths and masking. Query row i sees key k when k < Nk and, if causal, k <= i + Nk - Nq
// (bottom-right aligned). For the block's rows [q0, q1), q1 = min(q0 + Br, Nq), the keys that
// any row sees end at kv_end = Nk, or min(Nk, q1 + Nk - Nq) when causal; the keys that every row
// sees at kv_full = Nk, or min(Nk, q0 + 1 + Nk - Nq). The block visits the KV tiles
// j < ceil(kv_end / Bc) (none when kv_end <= 0: O = 0, LSE = -inf); tiles j >= kv_full / Bc
// (floor) hold a key some row must not see, and are masked (scores set to -inf, which the
// online softmax turns into P = 0); the others are not. Visited last to first, the masked tiles
// come first: one masked kind of visit, then the plain one, with no test inside the plain loop.
// The memory side: the last Q tile and the last K/V tile may be partial; their missing rows are
// zero-filled by the copy (cp.async with 0 source bytes), never read from past the tensor's
// end, and zero K/V rows keep NaN-free garbage out of the masked scores and of P·V. Rows >= Nq
// of the last Q tile are not stored. A last Q tile of few rows is a split tile (SplitKeys): its
// warps compute those rows only, each on a share of the keys. In a longer last tile the rows past
// Nq are computed on zero queries like the others: skipping a warp whose rows are all past Nq
// needs a branch around the math (it spilled) or a second loop whose barrier the other warps do
// not execute (not allowed for __syncthreads; see the page).
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
//   rV [2][Bc/16][4]        B of one n-tile pair of P·V (Bc keys x 16 dims), two buffers
//   rP [kMTiles][Bc/16][4]  A of P·V for the whole tile, packed from rS before the first mma
//
// Per KV tile: d/16 k-steps x Bc/8 n-tiles x kMTiles mma for S, then d/16 n-tile pairs x Bc/16
// k-steps x 2 x kMTiles mma for P·V. In both, the innermost loop runs over the M-tiles: one B
// fragment (loaded once), kMTiles mma. Each loop over slices runs one iteration more than it
// has slices (time runs down; L = ldmatrix, M = mma):
//   s = 0        L(0) -> buffer 0
//   s = 1        L(1) -> buffer 1     M(0) <- buffer 0
//   ...
//   s = steps                         M(steps - 1)
// (S = Q·Kᵀ: a slice is 16 dims of Q and K; P·V: a slice is 16 dims of V, i.e. an n-tile pair.)
//
// Addresses. With rows of R = 2d bytes (a power of two) and the XOR swizzle of 16-byte chunks
// (chunk c of row r at c ^ (r % 8)), every ldmatrix of the kernel reads rows r0 + (l % 16) and
// the chunk pair of a 16-dim slice s: chunk 2s + l / 16 (l = lane). Because 2s is even,
// 2s + l/16 = 2s ^ (l/16), so the byte offset is
//   (r0 + l % 16) R + ((2s ^ (l/16)) ^ (l % 8)) 16  =  r0 R + (lane_off ^ 32 s)
// with lane_off = (l % 16) R + ((l / 16) ^ (l % 8)) 16, the same for Q (r0 = 16 M-tile) and V
// (r0 = 16 k-step; s = n-tile pair). K's x4 reads keys (l / 16) 8 + l % 8 and chunk
// 2s + (l / 8) % 2 instead (so that each n-tile's B is a register pair, see below): the same
// algebra with k_lane_off = ((l / 16) 8 + l % 8) R + (((l / 8) % 2) ^ (l % 8)) 16 and
// r0 = 16 n-tile pair. r0 is a multiple of 16, so
// r0 R is an immediate of the ldmatrix; 32 s < R touches only the low bits of the offset, so the
// XOR may be applied to (tile base + lane_off) when the tile base is a multiple of R: the shared
// memory is declared 1024-byte aligned and every tile is a multiple of 8 KiB (Q) or 4 KiB (K, V
// stages) from it.
//
// Copy schedule, S = kStages stages each for K and V, n = Nk / Bc tiles visited in reverse: visit
// t = 0, 1, ..., n-1 computes tile j = n-1-t out of stage t % S; K and V of a tile are one
// cp.async group (groups in commit order):
//   prologue   issue Q, K_{n-1}, V_{n-1} -> stage 0               group {Q, K_{n-1}, V_{n-1}}
//              for s = 1 .. S-2: K_{n-1-s}, V_{n-1-s} -> stage s   group {K, V} each
//   visit t    wait K_j, V_j; barrier (also: all done with visit t-1, i.e. with stage (t-1) % S)
//   (tile j)   issue K_{j-S+1}, V_{j-S+1} -> stage (t+S-1) % S = (t-1) % S   group {K, V}
//              S = Q·K_jᵀ, softmax, O += P·V_j
// (a copy before tile 0 is not issued, but its group is still committed, empty, so that the
// count of groups is the same on every visit). When visit t waits, the groups committed after
// tile j's are those of the next S - 2 visits: wait_group<S - 2>, 0 for two stages. Rungs 07-15
// waited for V_j only before P·V_j, behind a second barrier; with the ring, V_j's copy was issued
// a whole visit earlier (t - S + 1, like K_j's), so it has as much time to land as before, and
// the second barrier of every tile goes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/ldmatrix.cuh"
#include "common/ptx/math.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/st_global.cuh"
#include "common/ptx/swizzle.cuh"
#include "common/registry.h"
#include "common/tune/config.h"

namespace fl {
namespace k16_final {

using k12_autotune::smem_bytes;

// The cp.async copy of kRows x kHeadDim tiles from global memory (rows `stride` elements apart)
// into swizzled shared tiles, 16 bytes per thread per step: the data does not pass through
// registers, and the thread moves on at once. A tile is in shared memory only after
// cp.async.wait_group (this thread's copies) and a barrier (everyone's). Thread t takes chunk
// t % (d/8) of row t / (d/8), then the same chunk kRowsPerStep rows further down: every warp
// reads 512 contiguous bytes (coalesced). Rows start 16-byte aligned (check_common). A chunk is
// swizzled as a whole, so each 16-byte copy still lands in 16 contiguous bytes; the 8 lanes of
// a phase write 8 chunks of one row, a permutation of 8 bank groups: still conflict-free.
//
// Block-indexed: what a thread needs is computed once, when the copier is made: its source
// pointer into the first tile it copies (64-bit), the 64-bit step of kRowsPerStep rows, and its
// swizzled offset inside a tile (kRowsPerStep is a multiple of 8, so every step has the same
// swizzle pattern and the steps' shared offsets are compile-time immediates). Each copy then
// moves the source pointer by `tile_step` elements (one tile, in the direction of the visits).
template <typename T, int kRows, int kHeadDim, int kThreads>
struct TileCopy {
  static constexpr int kChunksPerRow = kHeadDim / 8;             // 16-byte chunks per row
  static constexpr int kRowsPerStep = kThreads / kChunksPerRow;  // rows the block covers per step
  static_assert(kThreads % kChunksPerRow == 0, "whole rows per step");
  static_assert(kRows % kRowsPerStep == 0, "the block covers the tile evenly");
  static_assert(kRowsPerStep % 8 == 0, "every step has the swizzle pattern of the first");

  const T* src;       // this thread's element of the next tile to copy
  int64_t row_step;   // kRowsPerStep rows, in elements
  int64_t tile_step;  // added to src after each copy: +-kRows rows, in elements
  uint32_t dst_off;   // this thread's swizzled byte offset in a tile

  __device__ __forceinline__ TileCopy(const T* first_tile, int64_t stride, int64_t tile_step_)
      : row_step(kRowsPerStep * stride), tile_step(tile_step_) {
    const int row = threadIdx.x / kChunksPerRow, col = (threadIdx.x % kChunksPerRow) * 8;
    src = first_tile + row * stride + col;
    dst_off = swizzle::byte_offset(row, col, kHeadDim);
  }

  // Copies the tile at src into the shared tile at byte address tile_addr, then moves src on.
  __device__ __forceinline__ void issue(uint32_t tile_addr) {
    const T* from = src;
#pragma unroll
    for (int s = 0; s < kRows / kRowsPerStep; ++s) {
      ptx::cp_async::copy_16(tile_addr + dst_off + s * kRowsPerStep * kHeadDim * 2, from);
      from += row_step;
    }
    src += tile_step;
  }

  // The same for a tile of which only the first `rows` (>= 1) rows exist: the last tile of a
  // length that is not a multiple of kRows. A missing row is zero-filled (0 source bytes: nothing
  // is read) and its address is the tile's first row, which exists: no address past the
  // tensor's end is formed.
  __device__ __forceinline__ void issue_rows(uint32_t tile_addr, int64_t rows) {
    const int row = threadIdx.x / kChunksPerRow;
    const T* first_row = src - row * (row_step / kRowsPerStep);
    const T* from = src;
#pragma unroll
    for (int s = 0; s < kRows / kRowsPerStep; ++s) {
      const bool exists = row + s * kRowsPerStep < rows;
      ptx::cp_async::copy_16(tile_addr + dst_off + s * kRowsPerStep * kHeadDim * 2,
                             exists ? from : first_row, exists ? 16 : 0);
      from += row_step;
    }
    src += tile_step;
  }
};

// Where this thread and block are. The block order (L2-aware): a 1D grid, block id =
// (b H_q + h) Tq + (Tq - 1 - x), Tq = ceil(Nq / Br), the query tile fastest and last to first:
// with causal masking the last query tile has the most keys to visit, and the longest blocks
// start first, so that the short ones fill the tail of the grid. The blocks of one query head
// are consecutive, and the G = H_q / H_kv query heads of a KV head are consecutive heads: all
// blocks that read the same K and V are launched back to back, run at the same time, and visit
// the same K/V tiles in the same order (last to first), so that each tile comes from DRAM about
// once and from L2 for the others. 32-bit arithmetic: the block count is < 2^31
// (supports_config). The special registers are read through volatile asm, which the compiler
// does not merge: the masked visits and the epilogue call this again instead of keeping these
// values in registers through the KV loop, where registers are scarcest (kept, ptxas spilled
// them around the loop at d = 128).
struct Coords {
  int warp, lane;            // this thread
  int64_t x, b, h, h_kv;     // this block: query tile, batch, query head, KV head
};
template <int kBr>
__device__ __forceinline__ Coords block_coords(const AttnParams& p) {
  uint32_t tid, block;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
  asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(block));
  const uint32_t q_tiles = static_cast<uint32_t>((p.seqlen_q + kBr - 1) / kBr);
  const uint32_t head_id = block / q_tiles;  // b * H_q + h
  const uint32_t heads_q = static_cast<uint32_t>(p.heads_q);
  const uint32_t b = head_id / heads_q, h = head_id - b * heads_q;
  const uint32_t h_kv = h / (heads_q / static_cast<uint32_t>(p.heads_kv));
  return {static_cast<int>(tid / 32), static_cast<int>(tid % 32),
          q_tiles - 1 - (block - head_id * q_tiles), b, h, h_kv};
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
// The FFMA's per-row term is m * c (0 while m is -inf: the guard of rung 11).
//
// Rescale only when the max moved. A row whose max does not grow in this tile has the
// correction 2^(m c - m c) = 1: multiplying its O and sum by it changes nothing. The rows of an
// M-tile share every multiply instruction (one register of O holds 2 columns of rows `group` and
// `group + 8` for all 8 groups), so the M-tile skips the multiplies only when none of its 16
// rows grew: the warp votes (__any_sync, a uniform branch). For iid scores the max of a row grows
// in visit t with probability 1/(t + 1), so the 16 rows of an M-tile all keep theirs with
// probability about (t / (t + 1))^16: most tiles of a long sequence skip, the first ~16 do not.
// The result equals rung 15's up to the rounding of that correction of 1 (one ulp of fp32 at
// most). A tolerance on the growth instead (refresh m only when P would exceed 2^8, as
// FlashAttention-4 does) skips nearly every rescale, but its P = 2^(s c - m c) with a stale m
// round differently from the reference's, and the ladder's pass rule catches it (the page).
// kFirst: the first KV tile. m is still -inf, the row sums and O are zero: m is set to the tile's
// max, nothing is rescaled.
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
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
  }
  if constexpr (kFirst) {
#pragma unroll
    for (int r = 0; r < 2; ++r) row_max[r] = tile_max[r];
  } else {
    // A row grows when this tile has a larger score (-inf < finite: a first finite score; a row
    // that has seen only -inf does not grow and stays empty).
    const bool grows = tile_max[0] > row_max[0] || tile_max[1] > row_max[1];
    if (__any_sync(0xffffffffu, grows)) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float new_max = fmaxf(row_max[r], tile_max[r]);
        const float new_scaled = new_max == -INFINITY ? 0.f : new_max * scale_log2;
        // 2^(m_old c - m_new c) <= 1: one FFMA, one ex2 per row.
        const float correction = ptx::ex2_approx(fmaf(row_max[r], scale_log2, -new_scaled));
        row_sum[r] *= correction;
#pragma unroll
        for (int nt = 0; nt < kOTiles; ++nt) {
          rO[nt][2 * r] *= correction;
          rO[nt][2 * r + 1] *= correction;
        }
        row_max[r] = new_max;
      }
    }
  }
  float max_scaled[2];  // m * c
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // The -inf guard (rung 11): a row with only -inf scores gets P = 2^-inf = 0, not NaN.
    max_scaled[r] = row_max[r] == -INFINITY ? 0.f : row_max[r] * scale_log2;
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

// The mask of one M-tile (16 rows) in a visit of a KV tile that a row must not see whole (see
// "Lengths and masking" above): the scores of the keys a row does not see become -inf, which
// the online softmax turns into P = 0. Row `group` (r = 0) and `group + 8` (r = 1) of the M-tile
// are query rows row0 and row0 + 8; accumulator element (nt, i) is key key0 + 8 nt + i % 2, with
// key0 = j Bc + 2 quad. A row sees the keys [0, end): end - key0, clamped to [0, Bc], is the
// first element column it does not see. 32-bit arithmetic: Nq, Nk <= 2^30 (supports_config),
// and every register counts here (the masked visit is where the kernel needs the most).
template <int kSTiles>
__device__ __forceinline__ void mask_scores(float (&rS)[kSTiles][4], int row0, int key0,
                                            const AttnParams& p) {
  const int nk = static_cast<int>(p.seqlen_k), diag = nk - static_cast<int>(p.seqlen_q);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int end = p.causal ? min(nk, row0 + 8 * r + 1 + diag) : nk;
    const int first_hidden = max(0, min(end - key0, 8 * kSTiles));
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        if (8 * nt + c >= first_hidden) rS[nt][2 * r + c] = -INFINITY;
      }
    }
  }
}

// A query tile with few rows: the last tile of a length just above a block multiple (Nq = 2049
// is 16 whole tiles of 128 rows and one of 1 row), or the only tile of a short Nq. Its rows all
// belong to the first warp (or the first few), and the others would compute on zero queries: a
// block that takes a whole tile's time for one row, 1/16 more time at Nq = 2049. Instead, its
// warps share the keys. The warps are cut into kSlabs groups of kSplit; group g (a "slab") owns
// rows [R g, R g + R) of the tile (R = kRowsPerWarp, as warp g does in a whole tile), and its
// warp number s of kSplit takes the keys [s kKeys, s kKeys + kKeys) of every KV tile, kKeys =
// Bc / kSplit: the same M-tiles as always, 1/kSplit of the keys, its own running max, sums and
// O. After the last tile the warps of a slab merge their (m, l, O) (merge_split), as the online
// softmax folds in a tile, and the slab's first warp stores the rows. kSplit is the largest of 8,
// 4, 2 that divides Bc / 16 (a warp's keys are whole 16-key k-steps of P·V) and is at most the
// warps; at d = 128, Bc = 64 and 4 warps, a tile of at most 32 rows runs with 16 keys a warp.
// The merge goes through the shared memory past the slabs' Q rows (the K/V stages, free after
// the loop); a config whose partials do not fit there does not split.
//
// split_shape: these numbers for a config, as values (tests/test_short_tiles.cu reads them for the
// configs rung 16 runs); SplitKeys: the same for the kernel's config type.
struct SplitShape {
  int split, keys, rows;
  bool enabled;
};
constexpr SplitShape split_shape(const k12_autotune::ConfigValues& c, int head_dim) {
  int split = 1;
  for (int s = 8; s > 1 && split == 1; s /= 2) {
    if (s <= c.warps && (c.bc / 16) % s == 0) split = s;
  }
  const int slabs = c.warps / split, rows_per_warp = c.br / c.warps;
  const int rows = slabs * rows_per_warp;
  // One float4 a lane for each n-tile of O and one for {m0, m1, l0, l1}, per M-tile, for every
  // warp but the slabs' first; they go past the slabs' Q rows.
  const int partial_bytes = (c.warps - slabs) * (rows_per_warp / 16) * (head_dim / 8 + 1) * 32 * 16;
  const int free_bytes = k12_autotune::smem_bytes(c, head_dim) - rows * head_dim * 2;
  return {split, c.bc / split, rows, split > 1 && partial_bytes <= free_bytes};
}

template <typename Cfg, int kHeadDim>
struct SplitKeys {
  static constexpr SplitShape kShape = split_shape(Cfg::values(), kHeadDim);
  static constexpr int kSplit = kShape.split;      // warps per slab
  static constexpr int kKeys = kShape.keys;        // keys a warp takes per tile
  static constexpr int kRows = kShape.rows;        // the most rows a split tile has
  static constexpr bool kEnabled = kShape.enabled;

  // Whether query tile x is split: it has at most kRows rows (block-uniform).
  __device__ __forceinline__ static bool applies(const AttnParams& p, int64_t x) {
    return kEnabled && p.seqlen_q - x * Cfg::kBr <= kRows;
  }
};

// The end of a split tile (SplitKeys): the warps of a slab but its first write their running
// max, row sums and O (fp32, this lane's fragments) to shared memory past the slabs' Q rows;
// the first warp folds each in. For rows with maxima m1 (its own) and m2 (another warp's), m =
// max(m1, m2) and f_i = 2^(m_i c - m c): l = f1 l1 + f2 l2, O = f1 O1 + f2 O2 (a warp whose keys
// a row does not see has m_i = -inf: f_i = 0). Lanes exchange with the same lane of another
// warp: the same rows and columns, no shuffles; the row sums stay per lane (the epilogue adds
// the quad's). Every thread of the block calls this (two barriers); returns whether this warp
// stores its slab's rows. float4 per lane, 32 lanes apart: 512 contiguous bytes a store.
template <typename Split, int kHeadDim, int kMTiles, int kOTiles>
__device__ __forceinline__ bool merge_split(unsigned char* smem, int warp, int lane,
                                            float (&rO)[kMTiles][kOTiles][4],
                                            float (&row_max)[kMTiles][2],
                                            float (&row_sum)[kMTiles][2], float scale_log2) {
  // part[((w kMTiles + mt) (kOTiles + 1) + i) 32 + lane], w the writing warp's number among
  // the writers: i < kOTiles is n-tile i of O, i = kOTiles the row maxima and sums.
  float4* part = reinterpret_cast<float4*>(smem + Split::kRows * kHeadDim * 2);
  const int slab = warp / Split::kSplit, member = warp % Split::kSplit;
  __syncthreads();  // every warp is past its last read of the K/V stages
  if (member != 0) {
    const int w = slab * (Split::kSplit - 1) + member - 1;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      float4* dst = part + (w * kMTiles + mt) * (kOTiles + 1) * 32 + lane;
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        dst[nt * 32] = make_float4(rO[mt][nt][0], rO[mt][nt][1], rO[mt][nt][2], rO[mt][nt][3]);
      }
      dst[kOTiles * 32] = make_float4(row_max[mt][0], row_max[mt][1], row_sum[mt][0],
                                      row_sum[mt][1]);
    }
  }
  __syncthreads();  // the partials are written
  if (member != 0) return false;
#pragma unroll 1
  for (int other = 1; other < Split::kSplit; ++other) {
    const int w = slab * (Split::kSplit - 1) + other - 1;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const float4* src = part + (w * kMTiles + mt) * (kOTiles + 1) * 32 + lane;
      const float4 ml = src[kOTiles * 32];
      const float other_max[2] = {ml.x, ml.y}, other_sum[2] = {ml.z, ml.w};
      float f_own[2], f_other[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m = fmaxf(row_max[mt][r], other_max[r]);
        const float m_scaled = m == -INFINITY ? 0.f : m * scale_log2;
        f_own[r] = ptx::ex2_approx(fmaf(row_max[mt][r], scale_log2, -m_scaled));
        f_other[r] = ptx::ex2_approx(fmaf(other_max[r], scale_log2, -m_scaled));
        row_sum[mt][r] = row_sum[mt][r] * f_own[r] + other_sum[r] * f_other[r];
        row_max[mt][r] = m;
      }
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        const float4 o = src[nt * 32];
        rO[mt][nt][0] = rO[mt][nt][0] * f_own[0] + o.x * f_other[0];
        rO[mt][nt][1] = rO[mt][nt][1] * f_own[0] + o.y * f_other[0];
        rO[mt][nt][2] = rO[mt][nt][2] * f_own[1] + o.z * f_other[1];
        rO[mt][nt][3] = rO[mt][nt][3] * f_own[1] + o.w * f_other[1];
      }
    }
  }
  return true;
}

// Register budget: Cfg::kMinBlocksPerSm blocks of Cfg::kThreads per SM (2 x 128 or 1 x 256), so
// 65536 / 256 = 256 registers a thread (255 usable) either way. Two M-tiles per warp need most
// of them at d = 128 (see rung 11's page).
//
// kContiguousKV: K and V rows are d elements apart (checked by the launcher), a compile-time
// constant: every offset of their copies folds into immediates. The default (true) is the
// instantiation tune_16 measures, the BHND layout of the benchmarks.
//
// kSplitTile: the block's query tile is a split one (SplitKeys); the kernel picks the version at
// its start (attention_kernel, below). Two versions of one body rather than a branch inside it:
// the whole tile's version is the register-tightest code of the ladder (255 registers at d = 128),
// and a run-time split inside it spilled (12-20 bytes at d = 128 on sm_90).
template <typename T, int kHeadDim, typename Cfg, bool kContiguousKV, bool kSplitTile>
__device__ __forceinline__ void attention_tile(const AttnParams& p, unsigned char* smem) {
  constexpr int kBr = Cfg::kBr;                  // query rows per block
  constexpr int kBc = Cfg::kBc;                  // keys per KV tile
  constexpr int kStages = Cfg::kStages;          // KV tiles in the shared ring
  constexpr int kThreads = Cfg::kThreads;
  constexpr int kRowsPerWarp = Cfg::kRowsPerWarp;
  constexpr int kMTiles = Cfg::kMTiles;          // M-tiles per warp
  constexpr int kQKSteps = kHeadDim / 16;  // k-steps of S = Q·Kᵀ (16 dims each)
  constexpr int kOTiles = kHeadDim / 8;    // n-tiles of O (8 dims each)
  constexpr int kWait = kStages - 2;       // groups that may stay in flight at the wait
  // Q fragments of the warp: kMTiles x d/16 slices x 4 registers a lane. Resident (loaded once,
  // before the loop) or read per KV tile, one slice at a time, double buffered: Cfg::kLoad.
  constexpr bool kQResident = Cfg::kQResident;
  constexpr int kQBufs = kQResident ? kQKSteps : 2;  // resident: one per slice; else two buffers
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "d = 64, 128 or 256");

  // smem: the kernel's dynamic shared memory, 1024-byte aligned (attention_kernel).
  T* sQ = reinterpret_cast<T*>(smem);     // [kBr][kHeadDim]
  T* sK = sQ + kBr * kHeadDim;            // [kStages][kBc][kHeadDim]
  T* sV = sK + kStages * kBc * kHeadDim;  // [kStages][kBc][kHeadDim]

  const Coords at = block_coords<kBr>(p);  // the L2-aware block order: see block_coords
  const int warp = at.warp, lane = at.lane;
  // A tile of at most Split::kRows rows shares the keys among its warps (SplitKeys).
  using Split = SplitKeys<Cfg, kHeadDim>;
  // Block-indexed base pointers, once, in 64-bit arithmetic (B * H * N * d overflows 32 bits).
  const int64_t b = at.b, h = at.h, h_kv = at.h_kv;
  const int64_t q_row0 = at.x * kBr;  // first query row of the block
  // Row strides of K and V: compile-time constants in the contiguous instantiation.
  const int64_t k_row = kContiguousKV ? int64_t{kHeadDim} : p.k_stride.row;
  const int64_t v_row = kContiguousKV ? int64_t{kHeadDim} : p.v_stride.row;
  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head +
                q_row0 * p.q_stride.row;                                 // [kBr][d]
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + h_kv * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + h_kv * p.v_stride.head;

  // The KV tiles of the block (see "Lengths and masking"): tiles [0, n_tiles) are visited, the
  // tiles [n_full, n_tiles) masked. int: Nk <= 2^30 (supports_config).
  const int64_t diag = p.seqlen_k - p.seqlen_q;  // causal: row i sees the keys k <= i + diag
  const int64_t q_end = min(q_row0 + kBr, p.seqlen_q);
  const int64_t kv_end = p.causal ? min(p.seqlen_k, q_end + diag) : p.seqlen_k;
  const int64_t kv_full = p.causal ? min(p.seqlen_k, q_row0 + 1 + diag) : p.seqlen_k;
  const int n_tiles = kv_end > 0 ? static_cast<int>((kv_end + kBc - 1) / kBc) : 0;
  const int n_full = kv_full > 0 ? static_cast<int>(kv_full / kBc) : 0;

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

  // A block whose rows all see no key (causal, Nq > Nk) goes straight to the epilogue: O = 0.
  if (n_tiles > 0) {
  // The copiers. K and V start at the last tile (the first visited) and step back one tile per
  // copy; Q is copied once.
  TileCopy<T, kBc, kHeadDim, kThreads> copy_k(gK + (n_tiles - 1) * int64_t{kBc} * k_row, k_row,
                                              -int64_t{kBc} * k_row);
  TileCopy<T, kBc, kHeadDim, kThreads> copy_v(gV + (n_tiles - 1) * int64_t{kBc} * v_row, v_row,
                                              -int64_t{kBc} * v_row);
  constexpr uint32_t kRowBytes = kHeadDim * 2;       // R
  constexpr uint32_t kStageBytes = kBc * kRowBytes;  // one K or V stage
  const uint32_t sK_addr = ptx::smem_addr(sK), sV_addr = ptx::smem_addr(sV);

  // ---------------------------------------------------------------------------------------------
  // PROLOGUE: start the copies of the Q tile, K_{n-1} and V_{n-1} (one group), then of the
  // tiles of the next S - 2 visits (one group each). The Q tile and tile n - 1 may be partial
  // (the last of their tensor): they are the copies with zero fill.
  // ---------------------------------------------------------------------------------------------
  {
    TileCopy<T, kBr, kHeadDim, kThreads> copy_q(gQ, p.q_stride.row, 0);
    copy_q.issue_rows(ptx::smem_addr(sQ), p.seqlen_q - q_row0);
  }
  const int64_t last_rows = p.seqlen_k - (n_tiles - 1) * int64_t{kBc};  // keys of tile n - 1
  copy_k.issue_rows(sK_addr, last_rows);
  copy_v.issue_rows(sV_addr, last_rows);
  ptx::cp_async::commit_group();  // group: Q, K_{n-1}, V_{n-1}
#pragma unroll
  for (int s = 1; s < kStages - 1; ++s) {
    if (s < n_tiles) {
      copy_k.issue(sK_addr + s * kStageBytes);
      copy_v.issue(sV_addr + s * kStageBytes);
    }
    ptx::cp_async::commit_group();  // group: K_{n-1-s}, V_{n-1-s}
  }

  // The swizzled byte offset of this lane's row and chunk in every ldmatrix of the kernel, and
  // the shared addresses it is applied to (see "Addresses" above): computed once, here.
  const uint32_t lane_off = swizzle::byte_offset(lane % 16, (lane / 16) * 8, kHeadDim);
  const uint32_t k_lane_off =
      swizzle::byte_offset((lane / 16) * 8 + lane % 8, ((lane / 8) % 2) * 8, kHeadDim);
  // This warp's rows of sQ (row R w: a multiple of 16, so the swizzle pattern is sQ's), and its
  // keys of a K/V stage. A split tile: the rows of the warp's slab (row R slab), and its keys
  // from key kKeys member (a multiple of 16 rows: the same swizzle pattern again).
  const int slab = kSplitTile ? warp / Split::kSplit : warp;
  const uint32_t key_bytes = kSplitTile ? (warp % Split::kSplit) * Split::kKeys * kRowBytes : 0;
  const uint32_t q_addr = ptx::smem_addr(sQ + slab * kRowsPerWarp * kHeadDim) + lane_off;
  const uint32_t k_addr = sK_addr + key_bytes + k_lane_off;  // stage 0; stage s: + s kStageBytes
  const uint32_t v_addr = sV_addr + key_bytes + lane_off;

  // The A fragment of k-slice kk of S (dims 16kk..16kk+15) for M-tile mt: lane l points at row
  // 16mt + l % 16, dims 16kk + 8 (l / 16) (see S = Q·K_jᵀ below for why): one XOR per slice,
  // the M-tile's 16 rows an immediate.
  uint32_t rQ[kQBufs][kMTiles][4];
  auto load_q_slice = [&](int kk, uint32_t (&rQs)[kMTiles][4]) {
    const uint32_t slice = q_addr ^ (kk * 32);
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) ptx::ldmatrix_x4(rQs[mt], slice + mt * 16 * kRowBytes);
  };
  if constexpr (kQResident) {
    // Load every Q fragment now, once: wait for the group {Q, K_{n-1}, V_{n-1}} (the S - 2
    // groups after it may still fly) and for everyone's copies. The first visit's wait and
    // barrier then find nothing left to wait for.
    ptx::cp_async::wait_group<kWait>();
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kQKSteps; ++kk) load_q_slice(kk, rQ[kk]);
  }

  // The ring: byte offsets of the stage this visit reads (stage t % S) and of the stage its
  // copies write (stage (t - 1) % S, the one visit t - 1 read), kept from visit to visit.
  uint32_t read_off = 0, write_off = (kStages - 1) * kStageBytes;

  // The keys a warp computes: all Bc of a tile; Split::kKeys in a split tile; and in a narrow
  // first visit as many, from key 0 (16 at d = 128: see the visit).
  using AllKeys = std::integral_constant<int, kBc>;
  using FewKeys = std::integral_constant<int, Split::kEnabled ? Split::kKeys : 16>;

  // ---------------------------------------------------------------------------------------------
  // ONE VISIT: tile j (j = n-1, n-2, ..., 0). kFirst: the first visit (j = n - 1), whose online
  // softmax has nothing to rescale yet (rung 11). kMask: a tile some row must not see whole
  // (mask_scores). Called once with both, then in two loops, masked and plain: each loop body is
  // one piece of straight-line code between its barriers. kSplitTile: a split tile (the warp's
  // slab and key offset, SplitKeys). kKeys: the keys of the tile this warp computes, from its
  // key offset: Bc; Split::kKeys in a split tile; 16 in a narrow first visit, whose tile holds
  // at most 16 keys that any row of the block sees (Nk = 2049 leaves 1 key in the last tile of
  // 64): the other Bc - 16 are masked for every row, P = 0 there, and the visit skips their
  // mma instead of computing them.
  // ---------------------------------------------------------------------------------------------
  auto visit = [&](int j, auto first, auto mask, auto keys) {
    constexpr bool kFirst = decltype(first)::value;
    constexpr bool kMask = decltype(mask)::value;
    constexpr int kKeys = decltype(keys)::value;
    constexpr int kSTiles = kKeys / 8;    // n-tiles of S (8 keys each)
    constexpr int kPVSteps = kKeys / 16;  // k-steps of O += P·V (16 keys each)
    const uint32_t kj_addr = k_addr + read_off;  // K_j, this lane's offset included
    const uint32_t vj_addr = v_addr + read_off;  // V_j
    ptx::cp_async::wait_group<kWait>();  // K_j, V_j (and Q) landed; S - 2 newer groups may fly
    // Everyone's K_j and V_j landed; and every warp is done with the previous visit, so the
    // stage at write_off is free.
    __syncthreads();
    // K_{j-S+1} and V_{j-S+1} now, into the stage the previous visit used: they have S - 1
    // visits of math to land in. Before tile 0, an empty group keeps the count of groups the
    // same on every visit.
    if (j >= kStages - 1) {
      copy_k.issue(sK_addr + write_off);
      copy_v.issue(sV_addr + write_off);
    }
    ptx::cp_async::commit_group();  // group: K_{j-S+1}, V_{j-S+1}

    // S = Q_w · K_jᵀ. A = Q (16 x 16 slice, row-major): its registers a0..a3 are the 8x8 blocks
    // (rows 0-7, dims 0-7), (rows 8-15, dims 0-7), (rows 0-7, dims 8-15), (rows 8-15, dims 8-15)
    // and ldmatrix hands lane l row l/4, columns 2(l%4), +1 of each, exactly the A layout: so
    // lane l points at row l % 16, dims 8 (l / 16) of the slice. B = Kᵀ (16 x 8, "col"), element
    // (k, n) = sK[n][k]: stored as rows of sK (keys) it is again "row l/4, columns 2(l%4)" of
    // 8x8 blocks (keys 0-7, dims 0-7) and (keys 0-7, dims 8-15); one x4 takes these two blocks
    // for two n-tiles: matrix i = l / 8 is n-tile i / 2, dims 8 (i % 2), so that registers
    // {0, 1} are n-tile 2np's B and {2, 3} n-tile 2np + 1's, each an aligned register pair as
    // mma.sync wants (B-operand fragment order; lane l points at key 8 (l / 16) + l % 8, chunk
    // (l / 8) % 2 of the slice: k_lane_off).
    float rS[kMTiles][kSTiles][4];  // kRowsPerWarp x kKeys per warp
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
        const int buf = kk % 2;
        if constexpr (!kQResident) load_q_slice(kk, rQ[buf]);
        const uint32_t slice = kj_addr ^ (kk * 32);  // dims 16kk..16kk+15 of K_j
#pragma unroll
        for (int np = 0; np < kSTiles / 2; ++np) {  // keys 16np..16np+15: an immediate
          ptx::ldmatrix_x4(rK[buf][np], slice + np * 16 * kRowBytes);
        }
      }
      if (kk > 0) {  // mma of slice kk - 1, from fragments loaded one iteration ago
        const int buf = (kk - 1) % 2, qbuf = kQResident ? kk - 1 : buf;
#pragma unroll
        for (int np = 0; np < kSTiles / 2; ++np) {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {  // one K fragment, one mma per M-tile
            ptx::mma_m16n8k16<T>(rS[mt][2 * np], rQ[qbuf][mt], {rK[buf][np][0], rK[buf][np][1]},
                                 rS[mt][2 * np]);
            ptx::mma_m16n8k16<T>(rS[mt][2 * np + 1], rQ[qbuf][mt],
                                 {rK[buf][np][2], rK[buf][np][3]}, rS[mt][2 * np + 1]);
          }
        }
      }
    }

    // Online softmax, M-tile by M-tile; the first visit's version has no rescale, the others
    // rescale only the M-tiles whose max moved. A masked visit masks the M-tile's scores first;
    // this lane's first row and key come from the coordinates, read again (see block_coords).
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      if constexpr (kMask) {
        const Coords c = block_coords<kBr>(p);
        const int slab = kSplitTile ? c.warp / Split::kSplit : c.warp;
        const int key0 = j * kBc + (kSplitTile ? (c.warp % Split::kSplit) * Split::kKeys : 0);
        const int row0 = static_cast<int>(c.x) * kBr + slab * kRowsPerWarp + 16 * mt;
        mask_scores(rS[mt], row0 + c.lane / 4, key0 + 2 * (c.lane % 4), p);
      }
      online_softmax<kFirst>(rS[mt], rO[mt], row_max[mt], row_sum[mt], scale_log2);
    }

    // (V_j landed with K_j, before the barrier at the top of the visit: no second wait.)

    // O += P · V_j. A = P: the accumulator tiles 2kk and 2kk+1 of S hold exactly the A fragment
    // of keys [16kk, 16kk + 16) (C: row group (+8), cols 2quad, 2quad+1 of each 8-wide half), so
    // P is rounded to T and packed in registers, no shared-memory round trip. B = V_j (16 x 8,
    // element (k, n) = sV[k][n]): a lane needs 2 consecutive keys of one dim, a column pair of
    // the 8x8 block as stored. ldmatrix .trans delivers row 2(l%4), +1, column l/4 of each block
    // as stored: exactly B's (k = 2 quad, +1; n = group). The blocks are (keys 0-7, dims 0-7),
    // (keys 8-15, dims 0-7) = b0, b1 of n-tile nt, then the same for dims 8-15 = n-tile nt + 1:
    // lane l points at key l % 16, dims 8 (l / 16): the lane offset of Q again.
    // P for the whole tile first (the S registers die as P's are born: half as many).
    uint32_t rP[kMTiles][kPVSteps][4];  // A: 16 x 16 slices of P, keys 16ks..16ks+15
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int ks = 0; ks < kPVSteps; ++ks) {
        const float(&rSm)[kSTiles][4] = rS[mt];
        rP[mt][ks][0] = pack2<T>(rSm[2 * ks][0], rSm[2 * ks][1]);  // row group,     keys +2quad
        rP[mt][ks][1] = pack2<T>(rSm[2 * ks][2], rSm[2 * ks][3]);  // row group + 8, keys +2quad
        rP[mt][ks][2] = pack2<T>(rSm[2 * ks + 1][0], rSm[2 * ks + 1][1]);  // row group, +8+2quad
        rP[mt][ks][3] = pack2<T>(rSm[2 * ks + 1][2], rSm[2 * ks + 1][3]);  // group + 8, +8+2quad
      }
    }
    // B-operand fragment order for V: iteration np loads the n-tile pair np (dims 16np..16np+15)
    // for every k-step of V_j (one XOR, the k-steps' 16 keys immediates) into buffer np % 2,
    // then multiplies pair np - 1.
    uint32_t rV[2][kPVSteps][4];  // B of n-tiles 2np ([ks][0..1]) and 2np + 1 ([ks][2..3])
#pragma unroll
    for (int np = 0; np <= kOTiles / 2; ++np) {
      if (np < kOTiles / 2) {  // ldmatrix of n-tile pair np
        const uint32_t slice = vj_addr ^ (np * 32);  // dims 16np..16np+15 of V_j
#pragma unroll
        for (int ks = 0; ks < kPVSteps; ++ks) {
          ptx::ldmatrix_x4_trans(rV[np % 2][ks], slice + ks * 16 * kRowBytes);
        }
      }
      if (np > 0) {  // mma of n-tile pair np - 1
        const int pair = np - 1, buf = pair % 2;
#pragma unroll
        for (int ks = 0; ks < kPVSteps; ++ks) {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {  // one V fragment, one mma per M-tile
            ptx::mma_m16n8k16<T>(rO[mt][2 * pair], rP[mt][ks], {rV[buf][ks][0], rV[buf][ks][1]},
                                 rO[mt][2 * pair]);
            ptx::mma_m16n8k16<T>(rO[mt][2 * pair + 1], rP[mt][ks],
                                 {rV[buf][ks][2], rV[buf][ks][3]}, rO[mt][2 * pair + 1]);
          }
        }
      }
    }
    // The ring turns: this visit's stage is the next one's write stage.
    write_off = read_off;
    read_off = read_off + kStageBytes == kStages * kStageBytes ? 0 : read_off + kStageBytes;
  };

  // ---------------------------------------------------------------------------------------------
  // MAIN LOOP over the KV tiles, last to first: the first visit peeled (masked: it may hold the
  // keys past Nk or cross the diagonal; narrow when at most 16 of its keys are seen), then the
  // masked tiles, then the plain ones. A split tile runs the same loops with its warps' keys.
  // ---------------------------------------------------------------------------------------------

  if constexpr (kSplitTile) {
    // Every visit masked: the split tile is the short one, and its few rows may sit anywhere.
    visit(n_tiles - 1, std::true_type{}, std::true_type{}, FewKeys{});
#pragma unroll 1
    for (int j = n_tiles - 2; j >= 0; --j) visit(j, std::false_type{}, std::true_type{}, FewKeys{});
  } else {
    if (kv_end - (n_tiles - 1) * int64_t{kBc} <= FewKeys::value) {
      visit(n_tiles - 1, std::true_type{}, std::true_type{}, FewKeys{});
    } else {
      visit(n_tiles - 1, std::true_type{}, std::true_type{}, AllKeys{});
    }
    int j = n_tiles - 2;
#pragma unroll 1
    for (; j >= n_full; --j) visit(j, std::false_type{}, std::true_type{}, AllKeys{});
#pragma unroll 1
    for (; j >= 0; --j) visit(j, std::false_type{}, std::false_type{}, AllKeys{});
  }
  }  // n_tiles > 0

  // A split tile: the warps of each slab merge into its first, which alone goes on to store.
  if constexpr (kSplitTile) {
    const Coords at = block_coords<kBr>(p);
    if (!merge_split<Split, kHeadDim>(smem, at.warp, at.lane, rO, row_max, row_sum, scale_log2)) {
      return;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // EPILOGUE: finish the row sums across the quad, normalise by 1/l, stage O in shared memory,
  // store it with 128-bit streaming stores (and store LSE).
  //
  // The staging tile: the warp's own kRowsPerWarp rows of sQ (no other warp reads them, and the
  // warp has read its last Q fragment: no barrier, only the warp's own ordering; in a split tile
  // the slab's rows, which its other warps read before merge_split's barriers), laid out as
  // d/64 regions [region][row][64 columns], rows of 128 bytes (8 chunks of 16), chunk c of row r
  // at c ^ (r % 8). Writes: one store puts lane (group, quad)'s 2 elements of n-tile nt at row
  // group (+8), chunk nt % 8 of region nt / 8, bytes 4 quad: the 8 rows hit 8 different chunk
  // positions, 4 lanes each: 32 different banks. Reads: 8 consecutive lanes take the 8 chunks
  // of one row of a region: 8 different 16-byte bank groups.
  // ---------------------------------------------------------------------------------------------
  {
  // The epilogue's coordinates, read again rather than kept through the loop (block_coords).
  const Coords at = block_coords<kBr>(p);
  const int lane = at.lane;
  // The rows this warp stores: its own, or its slab's in a split tile (only the slab's first
  // warp is still here).
  const int slab = kSplitTile ? at.warp / Split::kSplit : at.warp;
  const int group = lane / 4;  // accumulator row (and row + 8) this lane holds
  const int quad = lane % 4;   // which pair of columns in each 8-wide tile
  const int64_t b = at.b, h = at.h, q_row0 = at.x * kBr;
  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head +
          q_row0 * p.o_stride.row;  // [kBr][d]
  constexpr int kRegions = kHeadDim / 64;  // 64-column swizzle regions: 1 (d = 64) or 2
  static_assert(kRegions * 64 == kHeadDim, "d is a whole number of 64-column regions");
  constexpr uint32_t kRegionRowBytes = 128;                          // 64 columns x 2 bytes
  constexpr uint32_t kRegionBytes = kRowsPerWarp * kRegionRowBytes;  // one region, this warp
  // This warp's staging area: its rows of sQ, kRowsPerWarp x d x 2 bytes, re-cut into regions.
  unsigned char* stage_o = reinterpret_cast<unsigned char*>(sQ + slab * kRowsPerWarp * kHeadDim);
  // (row, column) sits at byte (col / 64) kRegionBytes + 128 row + ((col % 64 / 8) ^ (row % 8)) 16
  // + 2 (col % 8). As for the ldmatrix addresses (rung 13), each lane's part is computed once and
  // the rest is an XOR with a constant (the chunk) plus an immediate (region, rows):
  //   writes, lane (group, quad), row 16 mt + 8 r + group, columns 8 nt + 2 quad:
  //     (w_off ^ 16 (nt % 8)) + (nt / 8) kRegionBytes + 128 (16 mt + 8 r),
  //     w_off = 128 group + 16 group + 4 quad
  //   reads, lane l: row i kRowsPerStore + srow, chunk cc = l % (d/8) (region cc / 8, c = cc % 8):
  //     (r_off ^ 16 ((i kRowsPerStore) % 8)) + 128 i kRowsPerStore,
  //     r_off = (cc / 8) kRegionBytes + 128 srow + 16 (c ^ srow)
  // (row % 8 = group for the writes; for the reads (i kRowsPerStore) % 8 is a multiple of
  // kRowsPerStore > srow, so row % 8 = that ^ srow.)
  const uint32_t w_off = group * (kRegionRowBytes + 16) + quad * 4;
  __syncwarp();  // (every lane's last reads of sQ, the Q fragments, are behind it)
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    float inv_sum[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[mt][r] += __shfl_xor_sync(0xffffffffu, row_sum[mt][r], 1);
      row_sum[mt][r] += __shfl_xor_sync(0xffffffffu, row_sum[mt][r], 2);
      // A row that saw no key (causal) has l = 0 and O = 0: it stores 0, not 0 / 0.
      inv_sum[r] = row_sum[mt][r] > 0.f ? 1.f / row_sum[mt][r] : 0.f;
    }
#pragma unroll
    for (int nt = 0; nt < kOTiles; ++nt) {
      // Row mt * 16 + group (lo) and + 8 (hi), columns nt * 8 + 2 quad and + 1.
      const uint32_t lo = pack2<T>(rO[mt][nt][0] * inv_sum[0], rO[mt][nt][1] * inv_sum[0]);
      const uint32_t hi = pack2<T>(rO[mt][nt][2] * inv_sum[1], rO[mt][nt][3] * inv_sum[1]);
      const uint32_t at = (w_off ^ ((nt % 8) * 16)) + (nt / 8) * kRegionBytes +
                          mt * 16 * kRegionRowBytes;
      *reinterpret_cast<uint32_t*>(stage_o + at) = lo;
      *reinterpret_cast<uint32_t*>(stage_o + at + 8 * kRegionRowBytes) = hi;  // row + 8
    }
    if (p.lse != nullptr && quad == 0) {
      // LSE = ln(sum_j exp(scale * s_j)) = ln 2 * log2(sum_j 2^(s_j * c))
      //     = ln 2 * (m * c + log2(sum_j 2^(s_j * c - m * c))) = ln 2 * (m * c + log2(l)):
      // the same natural-log LSE as before, computed from the base-2 quantities. A row that saw
      // no key has m = -inf and l = 0: -inf. Rows past Nq are not stored.
      constexpr float kLn2 = 0.69314718055994530942f;
      const int64_t row = q_row0 + slab * kRowsPerWarp + mt * 16 + group;  // row of r = 0
      float* lse = p.lse + (b * p.heads_q + h) * p.seqlen_q + row;
      if (row < p.seqlen_q) lse[0] = (row_max[mt][0] * scale_log2 + log2f(row_sum[mt][0])) * kLn2;
      if (row + 8 < p.seqlen_q) {
        lse[8] = (row_max[mt][1] * scale_log2 + log2f(row_sum[mt][1])) * kLn2;
      }
    }
  }
  __syncwarp();  // the staged rows are complete (and visible to every lane of the warp)
  // 16 bytes a lane: lane l takes chunk l % (d/8) of row l / (d/8), kRowsPerStore rows per
  // store instruction, whole rows of consecutive lanes (256 contiguous bytes at d = 128).
  constexpr int kChunksPerRow = kHeadDim / 8;
  constexpr int kRowsPerStore = 32 / kChunksPerRow;  // 2 (d = 128) or 4 (d = 64)
  static_assert(kRowsPerWarp % kRowsPerStore == 0, "whole stores per warp");
  const int srow = lane / kChunksPerRow, chunk = lane % kChunksPerRow;
  const uint32_t r_off = (chunk / 8) * kRegionBytes + srow * kRegionRowBytes +
                         ((chunk % 8) ^ srow) * 16;
  T* o_lane = gO + (slab * kRowsPerWarp + srow) * p.o_stride.row + chunk * 8;  // 16-byte aligned
  const int64_t o_step = kRowsPerStore * p.o_stride.row;
  // Rows of this lane's first store that exist (the last Q tile stops at Nq).
  const int64_t rows_left = p.seqlen_q - (q_row0 + slab * kRowsPerWarp + srow);
#pragma unroll
  for (int i = 0; i < kRowsPerWarp / kRowsPerStore; ++i) {
    const uint32_t at =
        (r_off ^ (((i * kRowsPerStore) % 8) * 16)) + i * kRowsPerStore * kRegionRowBytes;
    const uint4 v = *reinterpret_cast<const uint4*>(stage_o + at);
    if (i * kRowsPerStore < rows_left) ptx::st_global_cs_v4_b32(o_lane, v);
    o_lane += o_step;
  }
  }
}

// The kernel: one block per query tile (block_coords), the split version of the body for a
// split tile (SplitKeys), the whole one otherwise. A uniform branch at the start: the two bodies
// share no code, and each gets its registers as if it were alone.
template <typename T, int kHeadDim, typename Cfg, bool kContiguousKV = true>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    attention_kernel(const AttnParams p) {
  // 1024-byte aligned: the XOR of a slice into (tile base + lane_off) needs tile bases that are
  // multiples of the row size (see "Addresses" above).
  extern __shared__ __align__(1024) unsigned char smem[];
  using Split = SplitKeys<Cfg, kHeadDim>;
  if constexpr (Split::kEnabled) {
    if (Split::applies(p, block_coords<Cfg::kBr>(p).x)) {
      attention_tile<T, kHeadDim, Cfg, kContiguousKV, true>(p, smem);
      return;
    }
  }
  attention_tile<T, kHeadDim, Cfg, kContiguousKV, false>(p, smem);
}

// "" when a kernel compiled for d = kHeadDim and Cfg can run p, else the rule broken.
template <int kHeadDim, typename Cfg>
std::string supports_config(const AttnParams& p) {
  if (p.head_dim != kHeadDim) {
    return "this config is compiled for d = " + std::to_string(kHeadDim) + " (got " +
           std::to_string(p.head_dim) + ")";
  }
  // Row and key indices and the tile counts are 32-bit in the kernel's loops.
  if (p.seqlen_q > (int64_t{1} << 30) || p.seqlen_k > (int64_t{1} << 30)) {
    return "Nq and Nk must be <= 2^30 (got Nq = " + std::to_string(p.seqlen_q) +
           ", Nk = " + std::to_string(p.seqlen_k) + ")";
  }
  // One grid dimension: ceil(Nq / Br) x H_q x B blocks, at most 2^31 - 1.
  const int64_t q_tiles = (p.seqlen_q + Cfg::kBr - 1) / Cfg::kBr;
  if (q_tiles > INT_MAX / p.heads_q / p.batch) {
    return "ceil(Nq / Br) x H_q x B must be <= 2^31 - 1 (the grid's block count)";
  }
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

template <typename T, int kHeadDim, typename Cfg, bool kContiguousKV>
void launch_specialised(const AttnParams& p, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes(Cfg::values(), kHeadDim);
  if constexpr (kSmem > 48 * 1024) {  // above 48 KiB a kernel must opt in
    FL_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<T, kHeadDim, Cfg, kContiguousKV>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  }
  const int64_t q_tiles = (p.seqlen_q + Cfg::kBr - 1) / Cfg::kBr;
  const unsigned blocks = static_cast<unsigned>(q_tiles * p.heads_q * p.batch);
  attention_kernel<T, kHeadDim, Cfg, kContiguousKV><<<blocks, Cfg::kThreads, kSmem, stream>>>(p);
}

// Picks the compile-time specialisation: contiguous K and V rows, or any stride.
template <typename T, int kHeadDim, typename Cfg>
void launch_config(const AttnParams& p, cudaStream_t stream) {
  if (p.k_stride.row == kHeadDim && p.v_stride.row == kHeadDim) {
    launch_specialised<T, kHeadDim, Cfg, true>(p, stream);
  } else {
    launch_specialised<T, kHeadDim, Cfg, false>(p, stream);
  }
}

}  // namespace k16_final
}  // namespace fl
