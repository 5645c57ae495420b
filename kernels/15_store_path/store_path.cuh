// =================================================================================================
// Kernel 15 of 16 — store path: O staged through swizzled shared memory, 128-bit streaming stores
// builds on: 14 (loop hygiene)
// changes:   1. the epilogue writes the normalised O fragments (4 bytes a lane per store, the mma
//               accumulator layout) into shared memory, over the warp's own rows of the Q tile,
//               which nothing reads any more; then reads them back 16 bytes a lane and stores
//               them to global memory with st.global.cs.v4.b32 (fl::ptx::st_global_cs_v4_b32,
//               new in common/ptx/st_global.cuh): 16 lanes write a whole 256-byte row (d = 128),
//               instead of 8 rows x 16 bytes scattered per store instruction
//            2. the staging tile is split into d/64 regions of 64 columns (128-byte rows), each
//               XOR-swizzled by row: both the 4-byte fragment writes and the 16-byte reads are
//               free of bank conflicts, and a region is the 128-byte swizzle atom a TMA store
//               would use (the Hopper track)
//            3. .cs (cache streaming, evict-first): O is written once and never read back, so its
//               lines are the first to leave L2, not the K/V tiles other blocks still read
// expect:    fewer store instructions (STG: 16 instead of 128 per warp at d = 128) and less
//            epilogue time; global store transactions fully coalesced
//            (ncu: l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum / ..._requests)
// supports:  fp16, bf16; d in {64, 128}; Nq a multiple of Br and Nk a multiple of Bc of the
//            config that runs (kernels/15_store_path/tuned_configs.h); Nk / Bc < 2^31; non-causal;
//            GQA; LSE output
// doc:       docs/kernels/15_store_path.md
// =================================================================================================
//
// This header holds the kernel and its launcher for one config; store_path.cu instantiates the
// configs of rung 12's tuned_configs.h (the config search is rung 12's; rung 16 runs it again).
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
// t = 0, 1, ..., n-1 computes tile j = n-1-t out of stage t % S (groups in commit order):
//   prologue   issue Q, K_{n-1} -> stage 0                     group {Q, K_{n-1}}
//              issue V_{n-1} -> stage 0                        group {V_{n-1}}
//              for s = 1 .. S-2: K_{n-1-s}, then V_{n-1-s} -> stage s   groups {K} {V}
//   visit t    wait K_j; barrier (also: all done with visit t-1, i.e. with stage (t-1) % S)
//   (tile j)   issue K_{j-S+1} -> stage (t+S-1) % S = (t-1) % S  group {K_{j-S+1}}
//              S = Q·K_jᵀ, softmax
//              wait V_j; barrier
//              issue V_{j-S+1} -> stage (t-1) % S                group {V_{j-S+1}}
//              O += P·V_j
// (a copy before tile 0 is not issued, but its group is still committed, empty, so that the
// count of groups is the same on every visit). When visit t waits for K_j, the groups committed
// after {K_j} are {V_j} and the pairs {K} {V} of the next S-2 visits: 2S - 3 of them may stay in
// flight. When it waits for V_j, the groups after {V_j} are those pairs and {K_{j-S+1}}: again
// 2S - 3. Hence one wait, wait_group<2S - 3>, for both.
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
namespace k15_store_path {

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
};

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

  // 1024-byte aligned: the XOR of a slice into (tile base + lane_off) needs tile bases that are
  // multiples of the row size (see "Addresses" above).
  extern __shared__ __align__(1024) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);     // [kBr][kHeadDim]
  T* sK = sQ + kBr * kHeadDim;            // [kStages][kBc][kHeadDim]
  T* sV = sK + kStages * kBc * kHeadDim;  // [kStages][kBc][kHeadDim]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4;  // accumulator row (and row + 8) this lane holds
  const int quad = lane % 4;   // which pair of columns in each 8-wide tile

  // Block-indexed base pointers, once: 64-bit arithmetic (B * H * N * d overflows 32 bits at
  // realistic sizes), but the GQA division in 32 bits (H_q <= 65535: supports_config).
  const int h32 = static_cast<int>(blockIdx.y);
  const int h_kv32 = h32 / (static_cast<int>(p.heads_q) / static_cast<int>(p.heads_kv));
  const int64_t b = blockIdx.z, h = h32, h_kv = h_kv32;
  const int64_t q_row0 = static_cast<int64_t>(blockIdx.x) * kBr;  // first query row of the block
  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head +
                q_row0 * p.q_stride.row;                                 // [kBr][d]
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + h_kv * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + h_kv * p.v_stride.head;
  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head +
          q_row0 * p.o_stride.row;                                       // [kBr][d]
  const int n_tiles = static_cast<int>(p.seqlen_k / kBc);  // < 2^31 (supports_config)

  // The copiers. K and V start at the last tile (the first visited) and step back one tile per
  // copy; Q is copied once.
  TileCopy<T, kBc, kHeadDim, kThreads> copy_k(gK + (n_tiles - 1) * int64_t{kBc} * p.k_stride.row,
                                              p.k_stride.row, -int64_t{kBc} * p.k_stride.row);
  TileCopy<T, kBc, kHeadDim, kThreads> copy_v(gV + (n_tiles - 1) * int64_t{kBc} * p.v_stride.row,
                                              p.v_stride.row, -int64_t{kBc} * p.v_stride.row);
  constexpr uint32_t kRowBytes = kHeadDim * 2;       // R
  constexpr uint32_t kStageBytes = kBc * kRowBytes;  // one K or V stage
  const uint32_t sK_addr = ptx::smem_addr(sK), sV_addr = ptx::smem_addr(sV);

  // ---------------------------------------------------------------------------------------------
  // PROLOGUE: start the copies of the Q tile and K_{n-1} (one group), of V_{n-1} (a second
  // group), then of the tiles of the next S - 2 visits (one group each); the output accumulators
  // and the running softmax statistics start empty.
  // ---------------------------------------------------------------------------------------------
  {
    TileCopy<T, kBr, kHeadDim, kThreads> copy_q(gQ, p.q_stride.row, 0);
    copy_q.issue(ptx::smem_addr(sQ));
  }
  copy_k.issue(sK_addr);
  ptx::cp_async::commit_group();  // group: Q, K_{n-1}
  copy_v.issue(sV_addr);
  ptx::cp_async::commit_group();  // group: V_{n-1}
#pragma unroll
  for (int s = 1; s < kStages - 1; ++s) {
    if (s < n_tiles) copy_k.issue(sK_addr + s * kStageBytes);
    ptx::cp_async::commit_group();  // group: K_{n-1-s}
    if (s < n_tiles) copy_v.issue(sV_addr + s * kStageBytes);
    ptx::cp_async::commit_group();  // group: V_{n-1-s}
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

  // The swizzled byte offset of this lane's row and chunk in every ldmatrix of the kernel, and
  // the shared addresses it is applied to (see "Addresses" above): computed once, here.
  const uint32_t lane_off = swizzle::byte_offset(lane % 16, (lane / 16) * 8, kHeadDim);
  const uint32_t k_lane_off =
      swizzle::byte_offset((lane / 16) * 8 + lane % 8, ((lane / 8) % 2) * 8, kHeadDim);
  // This warp's rows of sQ (row R w: a multiple of 16, so the swizzle pattern is sQ's).
  const uint32_t q_addr = ptx::smem_addr(sQ + warp * kRowsPerWarp * kHeadDim) + lane_off;
  const uint32_t k_addr = sK_addr + k_lane_off;  // stage 0; stage s: + s kStageBytes
  const uint32_t v_addr = sV_addr + lane_off;

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
    // Load every Q fragment now, once: wait for the group {Q, K_{n-1}} (the 2S - 3 groups after
    // it may still fly) and for everyone's copies. The first visit's wait and barrier then find
    // nothing left to wait for.
    ptx::cp_async::wait_group<kWait>();
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kQKSteps; ++kk) load_q_slice(kk, rQ[kk]);
  }

  // The ring: byte offsets of the stage this visit reads (stage t % S) and of the stage its
  // copies write (stage (t - 1) % S, the one visit t - 1 read), kept from visit to visit.
  uint32_t read_off = 0, write_off = (kStages - 1) * kStageBytes;

  // ---------------------------------------------------------------------------------------------
  // ONE VISIT: tile j (j = n-1, n-2, ..., 0). kFirst: the first visit (j = n - 1), whose online
  // softmax has nothing to rescale yet (rung 11). Called once with kFirst, then in the loop
  // without: the loop body is one piece of straight-line code between its barriers.
  // ---------------------------------------------------------------------------------------------
  auto visit = [&](int j, auto first) {
    constexpr bool kFirst = decltype(first)::value;
    const uint32_t kj_addr = k_addr + read_off;  // K_j, this lane's offset included
    const uint32_t vj_addr = v_addr + read_off;  // V_j
    ptx::cp_async::wait_group<kWait>();  // K_j (and Q) landed; the 2S - 3 newer groups may fly
    // Everyone's K_j landed; and every warp is done with the previous visit, so the stage at
    // write_off is free.
    __syncthreads();
    // K_{j-S+1} now, into the stage the previous visit used: it has S - 1 visits of math to land
    // in. Before tile 0, an empty group keeps the count of groups the same on every visit.
    if (j >= kStages - 1) copy_k.issue(sK_addr + write_off);
    ptx::cp_async::commit_group();  // group: K_{j-S+1}

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

    // Online softmax, M-tile by M-tile; the first visit's version has no rescale.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      online_softmax<kFirst>(rS[mt], rO[mt], row_max[mt], row_sum[mt], scale_log2);
    }

    ptx::cp_async::wait_group<kWait>();  // V_j landed; the 2S - 3 newer groups may fly
    __syncthreads();                     // everyone's V_j landed: V_j's stage is complete
    // V_{j-S+1} now, into the stage the previous visit used (free since the barrier at the top
    // of this visit): it has S - 1 visits of math to land in.
    if (j >= kStages - 1) copy_v.issue(sV_addr + write_off);
    ptx::cp_async::commit_group();  // group: V_{j-S+1}

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
  // MAIN LOOP over the KV tiles, last to first: the first visit peeled, the rest counting down.
  // ---------------------------------------------------------------------------------------------
  visit(n_tiles - 1, std::true_type{});
#pragma unroll 1
  for (int j = n_tiles - 2; j >= 0; --j) visit(j, std::false_type{});

  // ---------------------------------------------------------------------------------------------
  // EPILOGUE: finish the row sums across the quad, normalise by 1/l, stage O in shared memory,
  // store it with 128-bit streaming stores (and store LSE).
  //
  // The staging tile: the warp's own kRowsPerWarp rows of sQ (no other warp reads them, and the
  // warp has read its last Q fragment: no barrier, only the warp's own ordering), laid out as
  // d/64 regions [region][row][64 columns], rows of 128 bytes (8 chunks of 16), chunk c of row r
  // at c ^ (r % 8). Writes: one store puts lane (group, quad)'s 2 elements of n-tile nt at row
  // group (+8), chunk nt % 8 of region nt / 8, bytes 4 quad: the 8 rows hit 8 different chunk
  // positions, 4 lanes each: 32 different banks. Reads: 8 consecutive lanes take the 8 chunks
  // of one row of a region: 8 different 16-byte bank groups.
  // ---------------------------------------------------------------------------------------------
  constexpr int kRegions = kHeadDim / 64;  // 64-column swizzle regions: 1 (d = 64) or 2
  static_assert(kRegions * 64 == kHeadDim, "d is a whole number of 64-column regions");
  constexpr uint32_t kRegionRowBytes = 128;                          // 64 columns x 2 bytes
  constexpr uint32_t kRegionBytes = kRowsPerWarp * kRegionRowBytes;  // one region, this warp
  // This warp's staging area: its rows of sQ, kRowsPerWarp x d x 2 bytes, re-cut into regions.
  unsigned char* stage_o = reinterpret_cast<unsigned char*>(sQ + warp * kRowsPerWarp * kHeadDim);
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
      inv_sum[r] = 1.f / row_sum[mt][r];
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
      // the same natural-log LSE as before, computed from the base-2 quantities.
      constexpr float kLn2 = 0.69314718055994530942f;
      const int row = warp * kRowsPerWarp + mt * 16 + group;  // tile row of r = 0
      float* lse = p.lse + (b * p.heads_q + h) * p.seqlen_q + q_row0 + row;
      lse[0] = (row_max[mt][0] * scale_log2 + log2f(row_sum[mt][0])) * kLn2;
      lse[8] = (row_max[mt][1] * scale_log2 + log2f(row_sum[mt][1])) * kLn2;
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
  T* o_lane = gO + (warp * kRowsPerWarp + srow) * p.o_stride.row + chunk * 8;  // 16-byte aligned
  const int64_t o_step = kRowsPerStore * p.o_stride.row;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp / kRowsPerStore; ++i) {
    const uint32_t at =
        (r_off ^ (((i * kRowsPerStore) % 8) * 16)) + i * kRowsPerStore * kRegionRowBytes;
    const uint4 v = *reinterpret_cast<const uint4*>(stage_o + at);
    ptx::st_global_cs_v4_b32(o_lane, v);
    o_lane += o_step;
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
  if (p.seqlen_k / Cfg::kBc > INT_MAX) return "Nk / Bc must be <= 2^31 - 1 (an int32 tile count)";
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

}  // namespace k15_store_path
}  // namespace fl
