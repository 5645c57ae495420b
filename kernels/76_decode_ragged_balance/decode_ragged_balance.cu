// =================================================================================================
// Kernel 76 of 76 — decode_ragged_balance: a ragged batch's key tiles dealt evenly to the blocks
// builds on: 75 (decode_table_alone). Rung 57 cuts every sequence at the boundaries of the
//            batch's longest: split s of S takes the same share of each sequence's tiles, so a
//            short sequence's last splits are empty and the longest's blocks run on after the
//            others have finished. On an H200, one query row, B = 8, 32768 keys, lengths
//            uniform in [Nk / 4, Nk]: the contiguous cache read at 3.99 TB/s, the same call with
//            every sequence at the capacity at 4.39
// changes:   a call with cache lengths for four sequences or more whose splits read 4 MiB or
//            more, in one wave (splits.h: deals), lays a KV head's sequences end to end and
//            gives each of its S x B blocks the same number of their tiles; a block computes
//            the pieces of sequences its tiles hold one after the other, a sequence whole in one
//            block writes O, and the combine kernel (in place of a cluster) merges the partials
//            of a sequence the blocks' ends cut
// expect:    a ragged batch at about the speed of an equal one; every call that does not deal
//            writes rung 75's bits
// supports:  rung 58's calls (fp16, bf16; d in {64, 96, 128, 192}; Nq x H_q / H_kv <= 64;
//            Nk <= 2^30; causal or not; MHA, GQA, MQA; H_kv, B <= 65535), with cache lengths, a
//            block table (page_size a multiple of 16), both or neither
// doc:       docs/kernels/76_decode_ragged_balance.md
// =================================================================================================
//
// Notation: block (split, hk, b) owns KV head hk of sequence b, its g query heads, and the key
// tiles of its split that hold some of the sequence's n keys (n = seqlens_k[b], or Nk); rows =
// Nq g <= 64 of the tile are real, the rest padding (zero queries, computed by an active warp,
// never stored).
// A tile holds kBc keys (tile_keys): 128 at d = 64 with key warps and a tile in one page, else
// 64. Warp w owns tile rows [16 w, 16 w + 16) (with key warps: rows 0-15 and keys [kBc / 4 w,
// kBc / 4 (w + 1)) of each tile, below); a lane holds rows row0 + group and + 8 (the mma
// accumulator layout, lane = 4 group + quad; rung 70: with wgmma the warpgroup's accumulators
// hold the same rows in the same layout). For each K/V tile j of the split:
//   S = Q_w K_j^T         (16 rows x kBc keys per warp, or kBc / 4 with key warps; fp32)
//   the online softmax of rung 16 in base 2 (m, l per row; O rescaled when m moves)
//   O_w += P V_j          (16 rows x d, fp32, in registers for the whole loop)
// and at the end O = O_w / l, LSE = ln 2 (m scale log2 e + log2 l): the outputs for one split,
// the partials for more.
//
// Shared memory (rows swizzled as in rung 06: element (r, c) at swizzle::offset(r, c, d)):
//   sQ [64][d]                   the packed query tile, loaded once (then kept in registers
//                                by the key-warp instances, but at d = 192)
//   sK [S][kBc][d], sV [S][kBc][d] the ring: K and V of the split's tile j in stage j % S,
//                                S = stages() = 3, 4, 3, 3 at d = 64, 96, 128, 192 (4 at
//                                d = 64 for blocks of more than 16 rows: 64-key tiles)
// Rung 70: the wgmma instances (more than 16 rows) store sQ, sK and sV in wgmma's swizzle
// instead (kv_offset), the same bytes: rung 71, the 128-byte one at d = 64, 128 and 192, the
// 64-byte one at d = 96.
// 104, 108, 112 and 168 KiB at d = 64, 96, 128, 192 (72 KiB at d = 64 for blocks of more than 16
// rows; supports checks the device's limit); an SM's 228 KiB hold 2, 2, 2 and 1 of them (3).
// Rung 72: the wgmma instances keep one mbarrier a stage past the cluster's (tma_bar), 8 bytes
// each, which counts the bytes of the stage's TMA copies.
// Rung 74: the key-warp instances' cluster launches keep, past the cluster's mbarrier,
//   sTable [kTableSlots]         the split's entries of the block table, int32
// Rung 75: and so does every key-warp launch that runs one block an SM (table_smem), at the same
// offset (in a launch without a cluster the mbarrier's 16 bytes go unused).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "common/clusters.h"
#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/cluster.cuh"
#include "common/ptx/fence_proxy.cuh"
#include "common/ptx/gmma_desc.cuh"
#include "common/ptx/griddep.cuh"
#include "common/ptx/ldmatrix.cuh"
#include "common/ptx/math.cuh"
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/swizzle.cuh"
#include "common/ptx/tma.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/registry.h"
#include "common/tensor_map.h"
#include "kernels/76_decode_ragged_balance/row_copy.h"
#include "kernels/76_decode_ragged_balance/splits.h"

namespace fl {
namespace k76_decode_ragged_balance {

constexpr int kRows = 64;      // rows of the packed tile: Nq x g of them real
constexpr int kThreads = 128;  // four warps of 16 rows
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.69314718055994530942f;

// The stages of the cp.async ring (splits.h): 3 where a tile of K and V is 32 KiB or more
// (d >= 128), 4 below.
template <int kHeadDim, int kBc>
constexpr int stages() {
  return ring_stages(int64_t{2} * kBc * kHeadDim * 2);
}

template <int kHeadDim, int kBc>
constexpr int smem_bytes() {
  return (kRows + 2 * stages<kHeadDim, kBc>() * kBc) * kHeadDim * 2;
}

// Rung 70: whether an instance multiplies with wgmma. A block of more than 16 rows (no key
// warps): its four warps are one warpgroup, its 64 rows wgmma's M. Rung 70 took d = 64 and 128
// alone; rung 71 every head dim. Key warps (each warp its own keys) stay on rung 69's mma.sync.
template <bool kKeyWarps>
constexpr bool uses_wgmma() {
  return !kKeyWarps;
}

// Rung 71: the swizzle of the wgmma instances, in bytes a row of one column block: 128 where a
// row is whole 64-column blocks (d = 64, 128, 192), else 64 (d = 96: three 32-column blocks; a
// 128-byte block would hold a row and a half). 0: rung 06's swizzle of whole rows (mma.sync).
template <int kHeadDim, bool kWgmma>
constexpr int swizzle_bytes() {
  return !kWgmma ? 0 : kHeadDim % 64 == 0 ? 128 : 64;
}

// Rung 70: the byte offset of element (r, c) of a K or V stage of kBc rows: with kSwizzle 128,
// wgmma's 128-byte swizzle (gmma::sw128_offset: 64-column blocks kBc x 128 bytes apart, chunk
// c ^ (r % 8) of a 128-byte row); rung 71, with 64, the 64-byte one (gmma::sw64_offset:
// 32-column blocks kBc x 64 bytes apart, chunk c ^ ((r / 2) % 4) of a 64-byte row); with 0,
// rung 06's swizzle of whole rows.
template <int kHeadDim, int kBc, int kSwizzle>
__host__ __device__ constexpr int kv_offset(int r, int c) {
  if constexpr (kSwizzle == 128) {
    return static_cast<int>(ptx::gmma::sw128_offset(r, c, kBc));
  } else if constexpr (kSwizzle == 64) {
    return static_cast<int>(ptx::gmma::sw64_offset(r, c, kBc));
  } else {
    return swizzle::byte_offset(r, c, kHeadDim);
  }
}

// Calls f with the head dim as a compile-time constant: d in {64, 96, 128, 192} (supports).
template <typename F>
void with_head_dim(int64_t d, F&& f) {
  if (d == 64) {
    f(std::integral_constant<int, 64>{});
  } else if (d == 96) {
    f(std::integral_constant<int, 96>{});
  } else if (d == 128) {
    f(std::integral_constant<int, 128>{});
  } else {
    f(std::integral_constant<int, 192>{});
  }
}

// Whether a block's rows, Nq x H_q / H_kv, fit one warp: the key warps' instances (rung 48).
inline bool key_warps(const AttnParams& p) {
  return p.seqlen_q * (p.heads_q / p.heads_kv) <= 16;
}

// Calls f with the call's instance as compile-time constants: the head dim, the key warps
// (std::true_type or false_type) and the keys of a tile (splits.h's tile_keys: rung 65's 128 at
// d = 64 for key warps where a tile lies in one page, else 64). Each is an instance with its own
// ring and shared memory.
template <typename F>
void with_instance(const AttnParams& p, F&& f) {
  using Keys64 = std::integral_constant<int, 64>;
  with_head_dim(p.head_dim, [&](auto d) {
    if (!key_warps(p)) {
      f(d, std::false_type{}, Keys64{});
      return;
    }
    if constexpr (tile_keys(decltype(d)::value, true, 0) == 128) {
      if (tile_keys(p.head_dim, true, p.page_size) == 128) {
        f(d, std::true_type{}, std::integral_constant<int, 128>{});
        return;
      }
    }
    f(d, std::true_type{}, Keys64{});
  });
}

// ldmatrix x4 of a 16 x 16 A fragment: rows r0.. of a row-major tile of n columns, columns c0..
// (lanes 0-15 give rows r0 + lane % 16 at c0, lanes 16-31 the same rows at c0 + 8).
__device__ __forceinline__ void load_a(uint32_t (&a)[4], uint32_t tile, int n, int r0, int c0) {
  const int lane = threadIdx.x % 32;
  ptx::ldmatrix_x4(a, tile + swizzle::byte_offset(r0 + lane % 16, c0 + lane / 16 * 8, n));
}

// The B fragments of two n-tiles (n0.. and n0 + 8..) over k-slice k0..k0 + 15, from a tile
// stored [n][k] (K: keys x dims): registers {0, 1} are n-tile 0's, {2, 3} n-tile 1's.
__device__ __forceinline__ void load_b(uint32_t (&b)[4], uint32_t tile, int n, int n0, int k0) {
  const int lane = threadIdx.x % 32;
  ptx::ldmatrix_x4(
      b, tile + swizzle::byte_offset(n0 + lane / 16 * 8 + lane % 8, k0 + lane / 8 % 2 * 8, n));
}

// The same fragments from a tile stored [k][n] (V: keys x dims) by ldmatrix .trans: matrix i
// holds k rows k0 + 8 (i % 2).., n columns n0 + 8 (i / 2)..; each lands as load_b's would.
__device__ __forceinline__ void load_b_trans(uint32_t (&b)[4], uint32_t tile, int n, int n0,
                                             int k0) {
  const int lane = threadIdx.x % 32;
  ptx::ldmatrix_x4_trans(
      b, tile + swizzle::byte_offset(k0 + lane / 8 % 2 * 8 + lane % 8, n0 + lane / 16 * 8, n));
}

// The cp.async copies of one K or V tile: kBc rows of a row-major global tile (rows `stride`
// elements apart) into the swizzled stage at `dst`, 16 bytes a thread a step. Rung 68
// (row_copy.h): the threads past kCopiers leave at once; the others step kRowsPerStep rows, and
// where a step is a period of the swizzle (d = 64, 96, 128) their shared-memory offset and
// their row move by constants. Rows >= `valid` (past n) are zero-filled (0 source bytes, read
// from row 0, which exists): zero keys give finite scores, which the mask hides, and zero
// values add nothing.
template <typename T, int kHeadDim, int kBc, int kSwizzle>
__device__ __forceinline__ void copy_kv_tile(uint32_t dst, const T* src, int64_t stride,
                                             int valid) {
  using C = RowCopy<kHeadDim, kThreads>;
  if (C::kCopiers < kThreads && static_cast<int>(threadIdx.x) >= C::kCopiers) return;
  const int r0 = C::first_row(threadIdx.x), c = C::column(threadIdx.x);
#pragma unroll
  for (int step = 0; step < (kBc + C::kRowsPerStep - 1) / C::kRowsPerStep; ++step) {
    const int r = r0 + step * C::kRowsPerStep;
    if (kBc % C::kRowsPerStep != 0 && r >= kBc) continue;
    const bool in = r < valid;
    // Rung 70: in the 128-byte swizzle a step of 8 rows (a period) moves 8 rows of 128 bytes;
    // rung 71: in the 64-byte one 8 rows of 64 bytes (its period too), and d = 192's steps of
    // 5 rows, no period, work out each offset.
    constexpr int kStepBytes = C::kRowsPerStep * kSwizzle;
    const int at = kSwizzle == 0 ? C::offset(r0, c, step)
                   : C::kPeriodic ? kv_offset<kHeadDim, kBc, kSwizzle>(r0, c) + step * kStepBytes
                                  : kv_offset<kHeadDim, kBc, kSwizzle>(r, c);
    ptx::cp_async::copy_16(dst + at, src + (in ? r * stride : 0) + c, in ? 16 : 0);
  }
}

// The same copy where the tile spans pages (page_size a multiple of 16 that the tile's keys do
// not divide): the tile's kBc keys are kRuns = kBc / 16 runs of 16 keys (four: rung 65's
// 128-key tiles lie in one page by tile_keys' rule), and a run lies inside one page, since pages
// and runs both start at multiples of 16 keys. run[q] is run q's first row in global memory, and
// the threads copy the runs one after the other, so that which run a copy reads is known at
// compile time. Where a step is a whole period of the swizzle (RowCopy: d = 64, 96, 128), a run's
// 16 rows are 16 / kRowsPerStep steps of RowCopy's; else (d = 192) its 16 rows x d / 8 chunks,
// a thread a chunk a step (384 chunks: three whole steps). Rows >= `valid` (past n) read their
// run's first row, zero-filled.
template <typename T, int kHeadDim, int kRuns, int kSwizzle>
__device__ __forceinline__ void copy_kv_runs(uint32_t dst, const T* const (&run)[kRuns],
                                             int64_t stride, int valid) {
  using C = RowCopy<kHeadDim, kThreads>;
  if constexpr (C::kPeriodic) {
    static_assert(16 % C::kRowsPerStep == 0, "a run of 16 rows is whole steps");
    if (C::kCopiers < kThreads && static_cast<int>(threadIdx.x) >= C::kCopiers) return;
    const int r0 = C::first_row(threadIdx.x), c = C::column(threadIdx.x);
#pragma unroll
    for (int q = 0; q < kRuns; ++q) {
#pragma unroll
      for (int step = 0; step < 16 / C::kRowsPerStep; ++step) {
        const int row = r0 + step * C::kRowsPerStep;  // row of the run
        const int ahead = 16 * q + step * C::kRowsPerStep;
        const bool in = 16 * q + row < valid;
        // Run q's rows start 16 q rows of 2 d bytes into the stage (rung 70: 16 q rows of 128
        // bytes into each 64-column block of the 128-byte swizzle, whose period 16 rows keep;
        // rung 71: of 64 bytes in the 64-byte one).
        const int at = kSwizzle != 0
                           ? kv_offset<kHeadDim, 16 * kRuns, kSwizzle>(r0, c) + kSwizzle * ahead
                           : 16 * q * kHeadDim * 2 + C::offset(r0, c, step);
        ptx::cp_async::copy_16(dst + at, run[q] + (in ? row * stride : 0) + c, in ? 16 : 0);
      }
    }
  } else {
    constexpr int kRunChunks = 16 * C::kChunks;
#pragma unroll
    for (int q = 0; q < kRuns; ++q) {
#pragma unroll
      for (int i0 = 0; i0 < kRunChunks; i0 += kThreads) {
        const int i = i0 + static_cast<int>(threadIdx.x);
        if (kRunChunks % kThreads != 0 && i >= kRunChunks) continue;
        const int row = i / C::kChunks, c = i % C::kChunks * 8;  // row of the run, column
        const bool in = 16 * q + row < valid;
        // Rung 71: d = 192's wgmma instances in the 128-byte swizzle (kv_offset).
        ptx::cp_async::copy_16(dst + kv_offset<kHeadDim, 16 * kRuns, kSwizzle>(16 * q + row, c),
                               run[q] + (in ? row * stride : 0) + c, in ? 16 : 0);
      }
    }
  }
}

// Rung 72: zeroes rows [valid, kBc) of a V stage at `stage` in wgmma's swizzle: in each column
// block (kBc rows of kSwizzle bytes) a row is kSwizzle contiguous bytes, its chunks permuted
// within them, so a row's bytes are zeroed whatever the permutation. 16 bytes a thread a step.
template <int kD, int kBc, int kSwizzle>
__device__ __forceinline__ void zero_rows(unsigned char* stage, int valid) {
  constexpr int kRowChunks = kSwizzle / 16, kChunks = kD / 8;  // a block's row; a whole row
#pragma unroll 1
  for (int i = static_cast<int>(threadIdx.x); i < (kBc - valid) * kChunks; i += kThreads) {
    const int r = valid + i / kChunks, c = i % kChunks;
    *reinterpret_cast<uint4*>(stage + (c / kRowChunks) * kBc * kSwizzle + r * kSwizzle +
                              (c % kRowChunks) * 16) = make_uint4(0u, 0u, 0u, 0u);
  }
}

// Rung 60: what a block receives, past merge_key_warps' buffers (merge_bytes), over the K/V ring:
// from each split s, the groups of four columns the block owns of each real row, [s][rows][G]
// float4 (group rank + S j at j, G = ceil(kD / 4 / S)), then the splits' LSEs [s][64]. The
// mbarrier that counts those bytes sits past the kernel's shared memory (kSmem): the cluster
// instances ask kBarBytes more.
template <int kD>
constexpr int merge_bytes() {
  return (4 * 16 * (kD + 8) + 2 * 4 * 16) * 4;
}
template <int kD>
constexpr int recv_bytes() {
  return 64 * (kD / 4 + kClusterSplits - 1) * 16;
}
template <int kD>
constexpr int cluster_bytes() {
  return merge_bytes<kD>() + recv_bytes<kD>() + kClusterSplits * 64 * 4;
}
constexpr int kBarBytes = 16;
// Rung 74: the block-table entries a cluster launch of key warps holds in shared memory (4 KiB:
// a split of up to 65536 keys in pages of 64); a split that needs more reads the table as before.
// Rung 75: so does a launch of key warps that runs one block an SM (table_smem, launch_typed).
constexpr int kTableSlots = 1024;

// Rung 72: the shared memory a block asks: the wgmma instances add, past the cluster's mbarrier,
// one mbarrier a stage for the TMA copies (tma_bar). The cluster instances ask kBarBytes more than
// this where it holds no TMA barriers (the key warps), the same otherwise.
template <int kHeadDim, int kBc, bool kKeyWarps>
constexpr int block_smem() {
  return smem_bytes<kHeadDim, kBc>() +
         (uses_wgmma<kKeyWarps>() ? kBarBytes + 8 * stages<kHeadDim, kBc>() : 0);
}
// Rung 75: where a key-warp block's table ends: the shared memory a launch must give it for the
// kernel to copy the table (rung 74's offset, past the ring and the cluster's mbarrier).
template <int kHeadDim, int kBc>
constexpr int table_smem() {
  return smem_bytes<kHeadDim, kBc>() + kBarBytes + 4 * kTableSlots;
}
// The byte offset of stage s's mbarrier from the start of shared memory.
template <int kHeadDim, int kBc>
constexpr int tma_bar(int s) {
  return smem_bytes<kHeadDim, kBc>() + kBarBytes + 8 * s;
}
// The columns of one TMA box: one column block of the swizzle, kSwizzle bytes a row.
constexpr int box_cols(int swizzle) { return swizzle / 2; }
// What the L2 fetches from memory for each row piece of a box (common/tensor_map.h): the
// piece's 128-byte line. A 256-byte fetch, the maps' default, also brings in the neighbouring
// heads' bytes where a head's row is no multiple of 256 bytes (d = 64, 96, 192): at d = 96 the
// DRAM then read 1.25x the bytes of K and V (Nsight Compute, H200).
constexpr int kL2Promotion = 128;

// Every split has pushed to this block its share of every real row (the groups of four columns
// rank + S j) and its LSEs; the block waits for their bytes on its mbarrier, then merges them as
// rung 59 does, from its own shared memory: the combine kernel's arithmetic term for term (rung
// 57's bits). kThreads / rows threads share a row, each works out its weights and takes every
// per-th of the block's groups of the row.
template <typename T, int kD, int kBc>
__device__ __forceinline__ void cluster_combine(const AttnParams& p, unsigned char* smem, int rows,
                                                int g, int nq, int64_t b, int64_t hk) {
  constexpr int kGroups = kD / 4;  // groups of 4 columns a row
  const float4* sRecv = reinterpret_cast<const float4*>(smem + merge_bytes<kD>());
  const float* sRecvLse =
      reinterpret_cast<const float*>(smem + merge_bytes<kD>() + recv_bytes<kD>());
  const int splits = static_cast<int>(gridDim.x);
  const int rank = static_cast<int>(ptx::cluster::ctarank());
  const int tid = static_cast<int>(threadIdx.x);
  const int per = kThreads / rows;                            // threads a row (rows <= 64)
  const int groups = (kGroups - rank + splits - 1) / splits;  // the block's groups of a row
  const int slots = (kGroups + splits - 1) / splits;          // G, a row's slots a split
  // Every split's share has landed (the bytes counted at the kernel's start).
  ptx::cluster::wait_bytes(ptx::smem_addr(smem) + smem_bytes<kD, kBc>());
  if (tid < rows * per) {
    const int row = tid / per;
    float ls[kClusterSplits];
#pragma unroll
    for (int s = 0; s < kClusterSplits; ++s) ls[s] = s < splits ? sRecvLse[s * 64 + row] : -INFINITY;
    float m = -INFINITY;
#pragma unroll
    for (int s = 0; s < kClusterSplits; ++s) m = fmaxf(m, ls[s]);
    static_assert(kClusterSplits <= 8, "the sum below adds eight lanes");
    float x[8] = {};
#pragma unroll
    for (int s = 0; s < kClusterSplits; ++s) x[s] = ls[s] != -INFINITY ? expf(ls[s] - m) : 0.f;
    const float sum = ((x[0] + x[4]) + (x[2] + x[6])) + ((x[1] + x[5]) + (x[3] + x[7]));
    const float lse = sum == 0.f ? -INFINITY : m + logf(sum);
    float w[kClusterSplits];
    uint32_t live = 0;
#pragma unroll
    for (int s = 0; s < kClusterSplits; ++s) {
      w[s] = 0.f;
      if (s < splits && ls[s] != -INFINITY && sum != 0.f) {
        w[s] = expf(ls[s] - lse);
        live |= 1u << s;
      }
    }
    // Row `row` is position row / g of head hk g + row % g (as in decode_kernel's epilogue).
    const int64_t h = hk * g + row % g;
    T* o_row = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head +
               (row / g) * p.o_stride.row;
    for (int j = tid % per; j < groups; j += per) {
      const int c = (rank + splits * j) * 4;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int s = 0; s < kClusterSplits; ++s) {
        if (!(live >> s & 1u)) continue;
        const float4 v = sRecv[(s * rows + row) * slots + j];
        acc.x = fmaf(w[s], v.x, acc.x), acc.y = fmaf(w[s], v.y, acc.y);
        acc.z = fmaf(w[s], v.z, acc.z), acc.w = fmaf(w[s], v.w, acc.w);
      }
      reinterpret_cast<uint32_t*>(o_row + c)[0] = pack2<T>(acc.x, acc.y);
      reinterpret_cast<uint32_t*>(o_row + c)[1] = pack2<T>(acc.z, acc.w);
    }
    // Group 0 of the row (rank 0's first) writes its LSE.
    if (p.lse != nullptr && rank == 0 && tid % per == 0) {
      p.lse[(b * p.heads_q + h) * nq + row / g] = lse;
    }
  }
  // No block leaves before every block of the cluster has all its bytes: a block's pushes then
  // have all landed before it leaves (a relaxed barrier: no block reads another's memory here).
  ptx::cluster::arrive_relaxed();
  ptx::cluster::wait();
}

// The end of a block with key warps. Warp w holds, for the rows 0-15, the largest score m_w of
// its keys (raw), its lane's part of their sum l_w (the quad adds them) and O_w, not yet divided:
// with M = max_w m_w c and f_w = 2^(m_w c - M), O = sum_w f_w O_w / L where L = sum_w f_w l_w,
// and LSE = ln 2 (M + log2 L), c = scale log2 e. The four go through shared memory, over the Q
// tile and the K/V ring (read no more once every warp is past its last tile). Then warp w
// writes columns [w d / 4, (w + 1) d / 4) of the real rows: lane 2 i + h row i, d / 8 columns.
template <typename T, int kD, int kBc, bool kCluster>
__device__ __forceinline__ void merge_key_warps(const AttnParams& p, float* part_o,
                                                float* part_lse, unsigned char* smem,
                                                float (&rO)[kD / 8][4],
                                                const float (&row_max)[2],
                                                const float (&row_sum)[2], int rows, int g, int nq,
                                                int64_t b, int64_t hk, bool whole,
                                                int64_t part_base, float scale_log2) {
  // sO [4][16][kStride] fp32, a row padded by 8 floats: a half-warp's float2 stores (4 rows of 8
  // floats) fall on 32 different banks. sM, sL [4][16]: m_w c (-inf for no key) and l_w.
  constexpr int kOTiles = kD / 8, kStride = kD + 8, kCols = kD / 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  float* sO = reinterpret_cast<float*>(smem);
  float* sM = sO + 4 * 16 * kStride;
  float* sL = sM + 4 * 16;
  // Q and the ring are free once every warp is past its last tile (the groups still open are
  // empty).
  ptx::cp_async::wait_group<0>();
  __syncthreads();
  // Rung 60: this block reads its ring no more; the cluster's pushes may land on it (they wait).
  if constexpr (kCluster) ptx::cluster::arrive_relaxed();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = row_sum[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (quad == 0) {
      sM[warp * 16 + group + 8 * r] = row_max[r] == -INFINITY ? -INFINITY : row_max[r] * scale_log2;
      sL[warp * 16 + group + 8 * r] = l;
    }
  }
  __syncthreads();
  // The common max of this lane's two rows, and O_w rescaled to it.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = group + 8 * r;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < 4; ++w) m = fmaxf(m, sM[w * 16 + row]);
    const float f = ptx::ex2_approx(sM[warp * 16 + row] - (m == -INFINITY ? 0.f : m));
    float* o = sO + (warp * 16 + row) * kStride + 2 * quad;
#pragma unroll
    for (int nt = 0; nt < kOTiles; ++nt) {
      *reinterpret_cast<float2*>(o + 8 * nt) =
          make_float2(rO[nt][2 * r] * f, rO[nt][2 * r + 1] * f);
    }
  }
  __syncthreads();
  if constexpr (kCluster) ptx::cluster::wait();  // every block of the cluster reads its ring no more
  const int row = lane / 2;
  if (row >= rows) return;
  float m = -INFINITY, l = 0.f;
#pragma unroll
  for (int w = 0; w < 4; ++w) m = fmaxf(m, sM[w * 16 + row]);
  const float m0 = m == -INFINITY ? 0.f : m;
#pragma unroll
  for (int w = 0; w < 4; ++w) l += ptx::ex2_approx(sM[w * 16 + row] - m0) * sL[w * 16 + row];
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const float lse = (m0 + log2f(l)) * kLn2;
  const int c0 = warp * (kD / 4) + lane % 2 * kCols;
  float acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; c += 4) {
    float4 a = *reinterpret_cast<const float4*>(sO + row * kStride + c0 + c);
#pragma unroll
    for (int w = 1; w < 4; ++w) {
      const float4 x = *reinterpret_cast<const float4*>(sO + (w * 16 + row) * kStride + c0 + c);
      a.x += x.x, a.y += x.y, a.z += x.z, a.w += x.w;
    }
    acc[c] = a.x * inv, acc[c + 1] = a.y * inv, acc[c + 2] = a.z * inv, acc[c + 3] = a.w * inv;
  }
  // Row `row` is position s = row / g of head hk g + row % g (as in decode_kernel's epilogue).
  const int s = row / g;
  const int64_t h = hk * g + row % g;
  const int64_t out_row = (b * p.heads_q + h) * nq + s;  // in [B, H_q, Nq]
  const bool writes_lse = warp == 0 && lane % 2 == 0;
  if (whole) {  // rung 76: the block's whole sequence (rung 57: one split)
    T* o = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head +
           s * p.o_stride.row + c0;
#pragma unroll
    for (int c = 0; c < kCols; c += 2) {
      *reinterpret_cast<uint32_t*>(o + c) = pack2<T>(acc[c], acc[c + 1]);
    }
    if (p.lse != nullptr && writes_lse) p.lse[out_row] = lse;
  } else if (kCluster) {
    // Rung 60: each group of four columns goes to the block that owns it (group % S), its LSE to
    // every block (the row's 8 threads one block each), counted on that block's mbarrier.
    const int splits = static_cast<int>(gridDim.x), slots = (kD / 4 + splits - 1) / splits;
    const uint32_t rank = ptx::cluster::ctarank();
    const uint32_t aRecv = ptx::smem_addr(smem + merge_bytes<kD>());
    const uint32_t bar = ptx::smem_addr(smem) + smem_bytes<kD, kBc>();
#pragma unroll
    for (int c = 0; c < kCols; c += 4) {
      const int gi = (c0 + c) / 4, owner = gi % splits;
      const uint32_t at = aRecv + 16 * ((rank * rows + row) * slots + gi / splits);
      ptx::cluster::st_async_v4(ptx::cluster::map(at, owner),
                                make_float4(acc[c], acc[c + 1], acc[c + 2], acc[c + 3]),
                                ptx::cluster::map(bar, owner));
    }
    const int k = 2 * warp + lane % 2;
    if (k < splits) {
      ptx::cluster::st_async_f32(ptx::cluster::map(aRecv + recv_bytes<kD>() + 4 * (rank * 64 + row), k),
                                 lse, ptx::cluster::map(bar, k));
    }
  } else {
    const int64_t part_row = part_base + out_row;  // rung 76: part_base, the block's slot's
    float* o = part_o + part_row * kD + c0;
#pragma unroll
    for (int c = 0; c < kCols; c += 4) {
      *reinterpret_cast<float4*>(o + c) = make_float4(acc[c], acc[c + 1], acc[c + 2], acc[c + 3]);
    }
    if (writes_lse) part_lse[part_row] = lse;
  }
}

// Rung 76: the deal on the device (splits.h), worked out by each warp alone (every lane gets the
// result; B is small wherever a call splits): sequence i's tiles, its cache length clamped as
// nk is; the batch's tiles U and the chunk; and the first sequence with a tile at or past tile
// `at` of U, with the tiles before it (the sequences' tiles summed 32 at a time, each lane one
// sequence).
template <int kBc>
__device__ __forceinline__ int seq_tiles(const AttnParams& p, int64_t i) {
  const int n = min(max(p.seqlens_k[i], 0), static_cast<int>(p.seqlen_k));
  return (n + kBc - 1) / kBc;
}

__device__ __forceinline__ long long warp_sum(long long x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

struct Deal {
  long long total, chunk;
};
template <int kBc>
__device__ Deal deal_of(const AttnParams& p, int splits) {
  const int lane = threadIdx.x % 32;
  int most = 0;
  long long total = 0;
#pragma unroll 1
  for (int64_t i = lane; i < p.batch; i += 32) {
    const int t = seq_tiles<kBc>(p, i);
    most = max(most, t);
    total += t;
  }
  total = warp_sum(total);
  most = __reduce_max_sync(0xffffffffu, most);
  return {total, deal_chunk(total, most, int64_t{splits} * p.batch)};
}

struct DealSeq {
  int64_t i;
  long long before;  // the tiles of sequences 0 .. i - 1
};
template <int kBc>
__device__ DealSeq deal_first(const AttnParams& p, long long at) {
  const int lane = threadIdx.x % 32;
  long long before = 0;
#pragma unroll 1
  for (int64_t base = 0; base < p.batch; base += 32) {  // warp-uniform
    const int t = base + lane < p.batch ? seq_tiles<kBc>(p, base + lane) : 0;
    long long upto = t;  // the tiles of sequences base .. base + lane
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const long long x = __shfl_up_sync(0xffffffffu, upto, o);
      if (lane >= o) upto += x;
    }
    const unsigned past = __ballot_sync(0xffffffffu, before + upto > at);
    if (past != 0u) {
      const int l = __ffs(past) - 1;
      return {base + l, before + __shfl_sync(0xffffffffu, upto - t, l)};
    }
    before += __shfl_sync(0xffffffffu, upto, 31);
  }
  return {p.batch, before};
}

// Grid (splits, H_kv, B), 128 threads. One split (gridDim.x = 1) writes O and the LSE; more
// write their partials into part_o [splits][B][H_q][Nq][d] and part_lse [splits][B][H_q][Nq],
// or, kCluster (rung 58: the grid launched in clusters of its splits, no workspace), merge them
// in the cluster (cluster_combine). kKeyWarps (rows <= 16): every warp computes rows 0-15 on
// keys [kBc / 4 w, kBc / 4 (w + 1)) of each tile, and the four results merge at the end
// (merge_key_warps); else warp w owns rows [16 w, 16 w + 16) on all kBc keys. The instances
// without kCluster are rung 57's kernel. Rung 72: tmK and tmV, the tensor maps of K and V (the
// wgmma instances' copies of tiles in one page; unused, and zero, for the key warps).
template <typename T, int kHeadDim, int kBc, bool kKeyWarps, bool kCluster, bool kDeal = false>
__global__ void __launch_bounds__(kThreads)
    decode_kernel(const AttnParams p, float* part_o, float* part_lse,
                  const __grid_constant__ CUtensorMap tmK,
                  const __grid_constant__ CUtensorMap tmV) {
  constexpr int kD = kHeadDim, kKSteps = kD / 16, kOTiles = kD / 8;
  // A warp's keys of a tile, and their n-tiles of 8.
  constexpr int kKeysW = kKeyWarps ? kBc / 4 : kBc, kSTiles = kKeysW / 8;
  constexpr uint32_t kStageBytes = kBc * kD * 2;
  constexpr bool kWgmma = uses_wgmma<kKeyWarps>();  // rung 70
  constexpr int kSwizzle = swizzle_bytes<kHeadDim, kWgmma>();  // rung 71: 128, 64 or 0
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t aQ = ptx::smem_addr(smem);
  const uint32_t aK = aQ + kRows * kD * 2;
  constexpr int kStages = stages<kHeadDim, kBc>();
  const uint32_t aV = aK + kStages * kStageBytes;

  // The combine (launched after this grid with programmatic serialization) may start once every
  // block has been here: its blocks take the SMs' free slots and wait there for this grid's end.
  ptx::griddep_launch_dependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  // The warp's first row of the tile, and its first key of each K/V tile.
  const int row0 = kKeyWarps ? 0 : 16 * warp, key_w = kKeyWarps ? kKeysW * warp : 0;
  const int split = blockIdx.x, splits = gridDim.x;
  const int64_t hk = blockIdx.y;
  // 32-bit from here: g, Nq <= 64 and Nk <= 2^30 (supports).
  const int g = static_cast<int>(p.heads_q / p.heads_kv);
  const int nq = static_cast<int>(p.seqlen_q), capacity = static_cast<int>(p.seqlen_k);
  // Rung 76, kDeal: block j = b S + split takes tiles [lo, hi) of the U its KV head's sequences
  // hold end to end (splits.h), in segments: sequence seq.i's tiles there, then the next
  // sequence's, until hi. Every warp works the deal out alike, so the whole block leaves where
  // it has no tile. `done` counts the tiles of the segments before (the TMA stages' uses go on
  // from them). Without kDeal the loop below runs once, as rung 75's block: sequence blockIdx.z,
  // its partial in slot split B + b of the workspace's [slot][H_q][Nq] rows.
  const long long block = static_cast<long long>(blockIdx.z) * splits + split;
  long long lo = 0, hi = 0, chunk = 1;
  DealSeq seq{blockIdx.z, 0};
  int done = 0;
  if constexpr (kDeal) {
    const Deal deal = deal_of<kBc>(p, splits);
    chunk = deal.chunk;
    lo = block * chunk;
    hi = min(lo + chunk, deal.total);
    if (lo >= hi) return;
    seq = deal_first<kBc>(p, lo);
  }
  // The body runs once a segment (once without kDeal); it keeps rung 75's indentation.
#pragma unroll 1
  for (;;) {
  const int64_t b = seq.i;
  // The sequence's keys: its cache length clamped to [0, capacity] (a value outside is the
  // caller's error; the clamp keeps every read inside the cache), or the capacity.
  const int nk = p.seqlens_k == nullptr ? capacity : min(max(p.seqlens_k[b], 0), capacity);
  const int rows = nq * g;
  // Rung 76: the segment's tiles of its sequence [first, end); whether they are all of them
  // (one block takes the sequence whole: it writes O), and else its partial's slot.
  const int seq_t = (nk + kBc - 1) / kBc;
  const int seg_first = static_cast<int>(max(lo - seq.before, 0ll));
  const int seg_end = static_cast<int>(min(hi - seq.before, static_cast<long long>(seq_t)));
  const bool whole = kDeal ? seg_first == 0 && seg_end == seq_t : splits == 1;
  // The partial's rows [B, H_q, Nq] start at part_base + b H_q Nq: slot s's rows at s H_q Nq.
  const int64_t part_base = kDeal ? (deal_slot(block, seq.before, chunk) - b) * p.heads_q * nq
                                  : split * p.batch * p.heads_q * nq;
  // Rung 60: the block's mbarrier counts the bytes the cluster pushes to it: from each split, its
  // groups of every real row and the rows' LSEs. Initialised before the block's first arrive at
  // the cluster barrier, which every block waits on before it pushes.
  if constexpr (kCluster) {
    if (threadIdx.x == 0) {
      const int groups = (kD / 4 - static_cast<int>(ptx::cluster::ctarank()) + splits - 1) / splits;
      ptx::cluster::expect_bytes(aQ + smem_bytes<kHeadDim, kBc>(),
                                 static_cast<uint32_t>(splits * rows * (16 * groups + 4)));
    }
  }
  const int diag = nk - nq;  // causal: position s sees the keys j <= s + diag
  // The split's key tiles [t0, t1): its share of the batch's longest sequence's tiles, cut at
  // this sequence's (split_tiles: splits.h); none past them. The longest length: every warp
  // reads the lengths (a call splits only where its B x H_kv blocks fill under 80% of the GPU's
  // block slots, so B is small) and takes their maximum, with no barrier; a call without
  // lengths, or of one split, has the capacity. From here on keys count from the split's first,
  // first_key = kBc t0: the split's tile j holds keys [kBc j, kBc j + kBc) of the nk - first_key
  // from there to n. Rung 76, kDeal: the segment's tiles instead.
  int longest = capacity;
  if (!kDeal && p.seqlens_k != nullptr && splits > 1) {
    int most = 0;
#pragma unroll 1
    for (int i = lane; i < static_cast<int>(p.batch); i += 32) most = max(most, p.seqlens_k[i]);
    longest = min(max(__reduce_max_sync(0xffffffffu, most), 0), capacity);  // clamped as nk
  }
  const SplitTiles st =
      kDeal ? SplitTiles{seg_first, seg_end}
            : split_tiles(split, splits, (longest + kBc - 1) / kBc, (nk + kBc - 1) / kBc);
  const int t0 = st.first, t1 = st.end;
  const int first_key = t0 * kBc, n_tiles = max(0, t1 - t0);
  const float scale_log2 = p.softmax_scale * kLog2e;

  // The packed Q tile: row r is position s = r / g of query head hk g + r % g. Padding rows are
  // zero-filled from the block's first query row (an address inside the tensor). A thread keeps
  // its 16-byte chunk c of the row and steps kStep rows (RowCopy, as copy_kv_tile does): its
  // first row's (s, i) is one division, and a step moves it by (kStep / g, kStep % g), carrying
  // one position when i reaches g. Rung 51 divided r by g at every step, eight divisions (g is
  // not known at compile time) before the first K/V copy could leave.
  using QCopy = RowCopy<kD, kThreads>;
  if (QCopy::kCopiers == kThreads || static_cast<int>(threadIdx.x) < QCopy::kCopiers) {
    constexpr int kStep = QCopy::kRowsPerStep;
    const int r0 = QCopy::first_row(threadIdx.x), c = QCopy::column(threadIdx.x);
    const int64_t q_row = p.q_stride.row, q_head = p.q_stride.head;
    const T* q0 = static_cast<const T*>(p.q) + b * p.q_stride.batch + hk * g * q_head + c;
    const int ds = kStep / g, di = kStep % g;
    int i = r0 % g;
    int64_t at = (r0 / g) * q_row + i * q_head;  // row r's element offset from q0
#pragma unroll
    for (int step = 0; step < (kRows + kStep - 1) / kStep; ++step) {
      const int r = r0 + step * kStep;
      if (kRows % kStep == 0 || r < kRows) {
        const bool real = r < rows;
        // Rung 70: the wgmma instances store Q in their swizzle too (S reads it there); rung
        // 71: d = 192's steps of 5 rows work out each offset.
        const int q_at = kSwizzle == 0 ? QCopy::offset(r0, c, step)
                         : QCopy::kPeriodic
                             ? kv_offset<kD, kRows, kSwizzle>(r0, c) + step * kStep * kSwizzle
                             : kv_offset<kD, kRows, kSwizzle>(r, c);
        ptx::cp_async::copy_16(aQ + q_at, q0 + (real ? at : 0),
                               real ? 16 : 0);
      }
      at += ds * q_row + di * q_head;
      i += di;
      if (i >= g) {
        i -= g;
        at += q_row - g * q_head;
      }
    }
  }
  const T* gK = static_cast<const T*>(p.k) + hk * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + hk * p.v_stride.head;
  // The sequence's row of the block table (null: no table).
  const int32_t* table =
      p.block_table == nullptr ? nullptr : p.block_table + b * p.block_table_stride;
  const int page_size = static_cast<int>(p.page_size);
  // K_j and V_j into stage j % kStages, by the copying threads, the padding warps' too (RowCopy:
  // all 128 at d = 64 and 128, 96 at d = 96, 120 at d = 192 but in runs across pages, which take
  // all 128 there). Where the tile's kBc keys lie in one page (page_size a multiple of kBc): its
  // page and first row, looked up once (the same table entry for every thread: one load, from L1
  // mostly), then rung 38's copy. Smaller pages: the page of each run of 16 keys
  // (copy_kv_runs). Without a table a key's page is its sequence: page b, row = the key, by the
  // batch stride. Rung 65: the 128-key instances are launched only where this holds
  // (tile_keys), so their runs path never runs.
  const bool tile_in_page = table == nullptr || page_size % kBc == 0;
  // Rung 72: the wgmma instances copy a tile in one page by TMA: thread 0 announces the stage's
  // bytes on its mbarrier and issues the boxes (d / box_cols of K, as many of V, each kBc rows of
  // one column block, landing where kv_offset puts them); every thread waits on the barrier.
  // The barriers are set up once, by thread 0, and a block barrier orders that before any use
  // (compute-sanitizer's racecheck reports the first copy's arrive against the set-up without
  // it, even from the same thread).
  const bool tma = kWgmma && tile_in_page;
  constexpr int kBoxCols = box_cols(kSwizzle == 0 ? 128 : kSwizzle);
  if (tma && done == 0) {  // rung 76: once, before a block's first segment
    if (threadIdx.x == 0) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) ptx::mbarrier::init(aQ + tma_bar<kHeadDim, kBc>(s), 1);
      ptx::mbarrier::fence_init();
    }
    __syncthreads();
  }
  // The cursor, for a call with a block table: the next tile's first key is row cur_row of
  // page table[cur_index]. One division here, for the split's first key; issue_tile moves the
  // cursor kBc keys a tile, so the tiles must be issued in order (they are: 0, 1, 2, ..). Rung
  // 53 divided each tile's first key by the page size.
  int cur_index = 0, cur_row = 0;
  if (table != nullptr) {
    cur_index = first_key / page_size;
    cur_row = first_key - cur_index * page_size;
  }
  // Rung 74: a cluster launch of key warps whose tiles lie in one page copies the entries its
  // tiles will read, [cur_index, last_index], into sTable: thread i entries i, i + 128, .. (at
  // most kTableSlots / 128 each, unrolled so that their loads fly together: sm_90a issues five
  // before the first store, so a split of up to 256 entries takes one trip to the L2, a longer
  // one two), then a block barrier. From then on `table` points there (a generic pointer into
  // shared memory, shifted so that table[cur_index] is the split's first entry), and
  // issue_tile's lookups, unchanged, find their page in shared memory instead of waiting on
  // the L1 and the L2. Rung 73 loaded the entry from global memory in each tile's copies, and
  // every thread waited for it there, the computing warps among them.
  // Rung 75: every launch of key warps whose shared memory has the table's room copies it, with
  // or without a cluster: the cluster launches (cluster_smem) and the launches that run one block
  // an SM (launch_typed: table_smem), which only tiles of kBigTileBytes or more take (splits.h).
  // The room is the launch's, the same for every block, so the barrier is uniform; a launch
  // without it (two blocks an SM) reads the table as rung 73 did.
  if constexpr (kKeyWarps && (kCluster || int64_t{2} * kBc * kHeadDim * 2 >= kBigTileBytes)) {
    if (kCluster ||
        ptx::dynamic_smem_size() >= static_cast<uint32_t>(table_smem<kHeadDim, kBc>())) {
      if (table != nullptr && tile_in_page && n_tiles > 0) {
        const int last_index = (min(nk, first_key + n_tiles * kBc) - 1) / page_size;
        if (last_index - cur_index < kTableSlots) {
          int32_t* st =
              reinterpret_cast<int32_t*>(smem + smem_bytes<kHeadDim, kBc>() + kBarBytes);
#pragma unroll
          for (int k = 0; k < kTableSlots / kThreads; ++k) {
            const int i = threadIdx.x + k * kThreads;
            if (i <= last_index - cur_index) st[i] = table[cur_index + i];
          }
          table = st - cur_index;  // table[cur_index] is sTable[0]
        }
      }
      __syncthreads();
    }
  }
  auto issue_tile = [&](int j) {
    const uint32_t stage = static_cast<uint32_t>((done + j) % kStages) * kStageBytes;
    const int valid = min(kBc, nk - (first_key + j * kBc));
    if (!tile_in_page) {
      // Run q holds keys 16 q.. of the tile, from the cursor on: 16 rows on a run, into the next
      // page where this one ends (a multiple of 16 rows); after the last run the cursor is at
      // the next tile. A run past the sequence's keys (16 q >= valid) copies nothing and is not
      // looked up (its entry may be unset): it reads the first run's entry instead.
      const int first_index = cur_index, first_row = cur_row;
      constexpr int kRuns = kBc / 16;
      const T* k_run[kRuns];
      const T* v_run[kRuns];
#pragma unroll
      for (int q = 0; q < kRuns; ++q) {
        const bool in = 16 * q < valid;
        const int64_t page = table[in ? cur_index : first_index];
        const int64_t at = in ? cur_row : first_row;
        k_run[q] = gK + page * p.k_stride.batch + at * p.k_stride.row;
        v_run[q] = gV + page * p.v_stride.batch + at * p.v_stride.row;
        cur_row += 16;
        if (cur_row == page_size) {
          cur_row = 0;
          ++cur_index;
        }
      }
      copy_kv_runs<T, kD, kRuns, kSwizzle>(aK + stage, k_run, p.k_stride.row, valid);
      copy_kv_runs<T, kD, kRuns, kSwizzle>(aV + stage, v_run, p.v_stride.row, valid);
      return;
    }
    // The tile lies in one page (a multiple of kBc keys): one table entry for every thread, then
    // rung 38's copy, and the cursor steps to the next tile. Without a table the tile is rows
    // [first_key + kBc j, + kBc) of page b, as in rung 53.
    int64_t page = b;
    int row = first_key + j * kBc;
    if (table != nullptr) {
      page = table[cur_index];
      row = cur_row;
      cur_row += kBc;
      if (cur_row == page_size) {
        cur_row = 0;
        ++cur_index;
      }
    }
    // Rung 72: box (column block cb, rows row.., head hk, page) of each map; the map's rows are
    // the page's (or the cache's: rows past the capacity arrive as zeros), so a box never
    // reads past its page. Rows past the sequence's end arrive as the cache holds them: the
    // mask hides their keys, and the warps zero their values (below). (A wgmma instance here has
    // its tile in one page: tma holds.)
    if constexpr (kWgmma) {
      const uint32_t bar = aQ + tma_bar<kHeadDim, kBc>((done + j) % kStages);
      ptx::mbarrier::arrive_expect_tx(bar, 2 * kStageBytes);
#pragma unroll
      for (int cb = 0; cb < kD / kBoxCols; ++cb) {
        const uint32_t at = stage + cb * kBc * kSwizzle;
        ptx::tma::load_4d(aK + at, &tmK, bar, cb * kBoxCols, row, static_cast<int>(hk),
                          static_cast<int>(page));
        ptx::tma::load_4d(aV + at, &tmV, bar, cb * kBoxCols, row, static_cast<int>(hk),
                          static_cast<int>(page));
      }
      return;
    }
    copy_kv_tile<T, kD, kBc, kSwizzle>(aK + stage, gK + page * p.k_stride.batch + row * p.k_stride.row,
                        p.k_stride.row, valid);
    copy_kv_tile<T, kD, kBc, kSwizzle>(aV + stage, gV + page * p.v_stride.batch + row * p.v_stride.row,
                        p.v_stride.row, valid);
  };
  // Prologue: group 0 = {Q, tile 0}, then tiles 1 .. kStages - 2 (a group each, empty past the
  // last tile, so that every wait below counts the same number of groups). A split with no tile
  // (past the sequence's keys) copies Q alone and skips the loop: its rows get l = 0, m = -inf.
  // Rung 72: a TMA tile is issued by thread 0 alone (it alone keeps the cursor).
  const bool issues = !tma || threadIdx.x == 0;
  if (n_tiles > 0 && issues) issue_tile(0);
  ptx::cp_async::commit_group();
#pragma unroll
  for (int j = 1; j < kStages - 1; ++j) {
    if (j < n_tiles && issues) issue_tile(j);
    ptx::cp_async::commit_group();
  }

  // A warp whose rows are all padding (rows <= 16 w) does the copies and the barriers only: a
  // warp-uniform branch around the math. With key warps every warp computes.
  // Rung 70: with wgmma every warp computes (the warpgroup's instructions take all four).
  const bool active = kKeyWarps || kWgmma || 16 * warp < rows;
  // This lane's two rows (r = 0: row 16 w + group, r = 1: + 8) see the split's keys [0, end[r])
  // (none where end <= 0); a padding row takes n (it is computed on zero queries, not stored).
  int end[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + group + 8 * r;
    end[r] = (row < rows && p.causal ? min(nk, row / g + 1 + diag) : nk) - first_key;
  }
  // Tiles from mask_from / kBc on hold a key some row does not see (past n, or past the
  // diagonal of position 0, the row that sees fewest): they are masked, the others not. No tile
  // of the split's n_tiles is past every row's end (the last position sees all n keys), but a
  // row may see no key of its split (LSE_s = -inf, O_s = 0).
  const int mask_from = (p.causal ? max(0, min(nk, 1 + diag)) : nk) - first_key;

  float rO[kOTiles][4];
#pragma unroll
  for (int nt = 0; nt < kOTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) rO[nt][e] = 0.f;
  }
  float row_max[2] = {-INFINITY, -INFINITY};  // of the raw scores, per row
  float row_sum[2] = {0.f, 0.f};              // this lane's part of l (the quad adds at the end)

  // Q's A fragments, once: group 0 has landed (this thread's copies; the barrier: everyone's).
  // At d = 192 they would not fit beside O's 96 accumulators: read from sQ at every tile instead.
  // Rung 70: the wgmma instances read Q from shared memory, as K.
  constexpr bool kQInRegisters = kD <= 128 && !kWgmma;
  uint32_t rQ[kQInRegisters ? kKSteps : 1][4];
  ptx::cp_async::wait_group<kStages - 2>();
  __syncthreads();
  if (active && kQInRegisters) {
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) load_a(rQ[kk], aQ, kD, row0, 16 * kk);
  }

#pragma unroll 1
  for (int j = 0; j < n_tiles; ++j) {
    // Tile j's group has landed: kStages - 2 newer ones may fly. The barrier: everyone's copies,
    // and every warp is done with tile j - 1, whose stage the next copies overwrite.
    ptx::cp_async::wait_group<kStages - 2>();
    if constexpr (kWgmma) {
      // Rung 72: a TMA tile has landed when its stage's barrier completes the phase of parity
      // (j / kStages) % 2 (tile j is the (j / kStages)-th use of stage j % kStages). A
      // tile past the sequence's end (the split's last) holds the cache's rows there: their keys
      // score -inf under the mask, but their values, NaN or Inf in a cache that keeps them,
      // would turn P's zeros into NaN; the warps zero them (cp.async zero-filled them).
      if (tma) {
        const uint32_t stage = static_cast<uint32_t>((done + j) % kStages) * kStageBytes;
        ptx::mbarrier::wait(aQ + tma_bar<kHeadDim, kBc>((done + j) % kStages),
                            ((done + j) / kStages) & 1);
        const int valid = min(kBc, nk - (first_key + j * kBc));
        if (valid < kBc) zero_rows<kD, kBc, kSwizzle>(smem + (aV - aQ) + stage, valid);
      }
      // Rung 70: this thread's copies (generic proxy) are ordered before the wgmmas' reads of
      // them (async proxy), as the barrier then orders everyone's.
      ptx::fence_proxy_async_shared();
    }
    __syncthreads();
    if (j + kStages - 1 < n_tiles && issues) issue_tile(j + kStages - 1);
    ptx::cp_async::commit_group();
    if (!active) continue;
    const uint32_t stage = static_cast<uint32_t>((done + j) % kStages) * kStageBytes;

    // S = Q_w K_j^T: 16 rows x the warp's keys (64, or 16 with key warps; n-tiles of 8 keys).
    float rS[kSTiles][4];
    // Rung 70: the warpgroup's S, 64 rows x kBc keys, in kKSteps wgmmas of 16 dims, A = Q and
    // B = K_j from shared memory (both with their dims contiguous: K-major; k-step kk is 32
    // bytes into 64-column block kk / 4); the first overwrites S. Its accumulators are rS, laid
    // out as mma.sync's n-tiles of 8 (common/ptx/wgmma.cuh). Rung 71: a block's row holds
    // kSwizzle / 32 k-steps (4, or 2 in the 64-byte swizzle), and the descriptors name its
    // swizzle.
    if constexpr (kWgmma) {
      float(&s_acc)[kSTiles * 4] = *reinterpret_cast<float(*)[kSTiles * 4]>(&rS[0][0]);
      constexpr int kInBlock = kSwizzle / 32;
      const uint64_t desc_q =
          kSwizzle == 128 ? ptx::gmma::kmajor_sw128(aQ) : ptx::gmma::kmajor_sw64(aQ);
      const uint64_t desc_k = kSwizzle == 128 ? ptx::gmma::kmajor_sw128(aK + stage)
                                              : ptx::gmma::kmajor_sw64(aK + stage);
      ptx::wgmma::fence();
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        const uint32_t in_block = (kk % kInBlock) * 32;
        ptx::wgmma::Wgmma<T, kBc>::template ss<0>(
            s_acc, ptx::gmma::advance(desc_q, (kk / kInBlock) * kRows * kSwizzle + in_block),
            ptx::gmma::advance(desc_k, (kk / kInBlock) * kBc * kSwizzle + in_block), kk > 0);
      }
      ptx::wgmma::commit_group();
      ptx::wgmma::wait_group<0>();
      ptx::wgmma::fence_operands(s_acc);
    } else {
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) rS[nt][e] = 0.f;
    }
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      uint32_t aq[4];
      if constexpr (kQInRegisters) {
#pragma unroll
        for (int i = 0; i < 4; ++i) aq[i] = rQ[kk][i];
      } else {
        load_a(aq, aQ, kD, row0, 16 * kk);
      }
#pragma unroll
      for (int np = 0; np < kSTiles / 2; ++np) {
        uint32_t bk[4];
        load_b(bk, aK + stage, kD, key_w + 16 * np, 16 * kk);
        ptx::mma_m16n8k16<T>(rS[2 * np], aq, {bk[0], bk[1]}, rS[2 * np]);
        ptx::mma_m16n8k16<T>(rS[2 * np + 1], aq, {bk[2], bk[3]}, rS[2 * np + 1]);
      }
    }
    }

    // The mask: element (nt, e) is key kBc j + key_w + 8 nt + 2 quad + e % 2 of row r = e / 2; a
    // key at or past the row's end scores -inf (P = 0).
    if ((j + 1) * kBc > mask_from) {
      const int key0 = j * kBc + key_w + 2 * quad;
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (key0 + 8 * nt + e % 2 >= end[e / 2]) rS[nt][e] = -INFINITY;
        }
      }
    }

    // The online softmax in base 2 (rung 11): c = scale log2 e, P = 2^(s c - m c). A row's max
    // is spread over its quad (lanes ^ 1, ^ 2). O and l are rescaled by 2^(m_old c - m_new c)
    // every tile: a few multiplies against kBc keys x d of loads, nothing to save here.
    float max_scaled[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = row_max[r];
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) m = fmaxf(m, fmaxf(rS[nt][2 * r], rS[nt][2 * r + 1]));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      // A row that has seen only -inf keeps m = -inf: the guard makes its P 2^-inf = 0, not NaN.
      max_scaled[r] = m == -INFINITY ? 0.f : m * scale_log2;
      const float correction = ptx::ex2_approx(fmaf(row_max[r], scale_log2, -max_scaled[r]));
      row_sum[r] *= correction;
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        rO[nt][2 * r] *= correction;
        rO[nt][2 * r + 1] *= correction;
      }
      row_max[r] = m;
    }
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        rS[nt][e] = ptx::ex2_approx(fmaf(rS[nt][e], scale_log2, -max_scaled[e / 2]));
        row_sum[e / 2] += rS[nt][e];
      }
    }

    // O_w += P V_j: P rounded to T is the A fragment as the accumulators hold it (n-tiles 2 ks
    // and 2 ks + 1 are keys [16 ks, 16 ks + 16)); V_j by ldmatrix .trans, 16 dims a step.
    uint32_t rP[kKeysW / 16][4];
#pragma unroll
    for (int ks = 0; ks < kKeysW / 16; ++ks) {
      rP[ks][0] = pack2<T>(rS[2 * ks][0], rS[2 * ks][1]);
      rP[ks][1] = pack2<T>(rS[2 * ks][2], rS[2 * ks][3]);
      rP[ks][2] = pack2<T>(rS[2 * ks + 1][0], rS[2 * ks + 1][1]);
      rP[ks][3] = pack2<T>(rS[2 * ks + 1][2], rS[2 * ks + 1][3]);
    }
    // Rung 70: O += P V_j as kBc / 16 wgmmas of 16 keys, N = d, A = P from registers, B = V_j
    // from the stage read with the transpose bit (its dims contiguous: MN-major, 64-column
    // blocks kBc x 128 bytes apart). Its accumulators are rO. Rung 71: at d = 96, 32-column
    // blocks kBc x 64 bytes apart, and a step of 16 keys 16 rows of 64 bytes.
    if constexpr (kWgmma) {
      float(&o_acc)[kOTiles * 4] = *reinterpret_cast<float(*)[kOTiles * 4]>(&rO[0][0]);
      const uint64_t desc_v = kSwizzle == 128
                                  ? ptx::gmma::mnmajor_sw128(aV + stage, kBc * kSwizzle)
                                  : ptx::gmma::mnmajor_sw64(aV + stage, kBc * kSwizzle);
      ptx::wgmma::fence();  // rO (rescaled) and rP were written by ordinary instructions
#pragma unroll
      for (int ks = 0; ks < kBc / 16; ++ks) {
        ptx::wgmma::Wgmma<T, kD>::template rs<1>(
            o_acc, rP[ks], ptx::gmma::advance(desc_v, ks * 16 * kSwizzle), 1);
      }
      ptx::wgmma::commit_group();
      ptx::wgmma::wait_group<0>();
      ptx::wgmma::fence_operands(o_acc);
    } else {
#pragma unroll
    for (int np = 0; np < kD / 16; ++np) {
#pragma unroll
      for (int ks = 0; ks < kKeysW / 16; ++ks) {
        uint32_t bv[4];
        load_b_trans(bv, aV + stage, kD, 16 * np, key_w + 16 * ks);
        ptx::mma_m16n8k16<T>(rO[2 * np], rP[ks], {bv[0], bv[1]}, rO[2 * np]);
        ptx::mma_m16n8k16<T>(rO[2 * np + 1], rP[ks], {bv[2], bv[3]}, rO[2 * np + 1]);
      }
    }
    }
  }
  // Rung 58, kCluster: the cluster (the splits of hk, b) merges the partials; every thread of the
  // block takes part, the padding warps' too. Rung 60: each split pushes its partial to the
  // blocks that merge it.
  if constexpr (kKeyWarps) {
    merge_key_warps<T, kD, kBc, kCluster>(p, part_o, part_lse, smem, rO, row_max, row_sum, rows, g,
                                          nq, b, hk, whole, part_base, scale_log2);
    if constexpr (kCluster) cluster_combine<T, kD, kBc>(p, smem, rows, g, nq, b, hk);
    if constexpr (!kDeal) return;
    // Rung 76, kDeal: the next segment (as at the end below).
    done += n_tiles;
    seq.before += seq_t;
    for (++seq.i; seq.i < p.batch && seq_tiles<kBc>(p, seq.i) == 0; ++seq.i) {
    }
    if (seq.i >= p.batch || seq.before >= hi) return;
    ptx::cp_async::wait_group<0>();
    __syncthreads();
    continue;
  }
  if constexpr (kCluster) {
    ptx::cp_async::wait_group<0>();
    __syncthreads();  // every warp is past its last tile
    // Rung 60: this block reads its ring no more; then every block of the cluster reads its own
    // no more, and the pushes may land.
    ptx::cluster::arrive_relaxed();
    ptx::cluster::wait();
  } else {
    if (!active) return;
  }

  // O = O_w / l and LSE = ln 2 (m c + log2 l), scattered back: row 16 w + group + 8 r is
  // position s = row / g of head hk g + row % g. A row that saw no key has l = 0 and m = -inf:
  // O = 0 and LSE = -inf. One split: each lane writes 4 bytes of every 16-byte chunk of its rows
  // in O (a few rows: nothing beside K's and V's bytes); more: 8 bytes of its partial, in fp32,
  // to the workspace or, in a cluster, to the blocks that merge it.
  T* o_base = static_cast<T*>(p.o) + b * p.o_stride.batch;
#pragma unroll
  for (int r = 0; r < 2 && (!kCluster || active); ++r) {  // a padding warp stores nothing
    float l = row_sum[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = 16 * warp + group + 8 * r;  // not key warps: row0 = 16 w
    if (row >= rows) continue;
    const int s = row / g;
    const int64_t h = hk * g + row % g;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = (row_max[r] * scale_log2 + log2f(l)) * kLn2;
    const int64_t out_row = (b * p.heads_q + h) * nq + s;  // in [B, H_q, Nq]
    if (whole) {  // rung 76: the block's whole sequence (rung 57: one split)
      T* o = o_base + h * p.o_stride.head + s * p.o_stride.row + 2 * quad;
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        *reinterpret_cast<uint32_t*>(o + 8 * nt) = pack2<T>(rO[nt][2 * r] * inv,
                                                            rO[nt][2 * r + 1] * inv);
      }
      if (p.lse != nullptr && quad == 0) p.lse[out_row] = lse;
    } else if (kCluster) {
      // Rung 60: the two columns 8 nt + 2 quad are half of group 2 nt + quad / 2, which goes to
      // the block that owns it; the LSE to every block (the row's 4 lanes, two blocks each).
      const int slots = (kD / 4 + splits - 1) / splits;
      const uint32_t rank = ptx::cluster::ctarank();
      const uint32_t aRecv = ptx::smem_addr(smem + merge_bytes<kD>());
      const uint32_t bar = aQ + smem_bytes<kHeadDim, kBc>();
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        const int gi = 2 * nt + quad / 2, owner = gi % splits;
        const uint32_t at =
            aRecv + 16 * ((rank * rows + row) * slots + gi / splits) + 8 * (quad % 2);
        ptx::cluster::st_async_v2(ptx::cluster::map(at, owner), rO[nt][2 * r] * inv,
                                  rO[nt][2 * r + 1] * inv, ptx::cluster::map(bar, owner));
      }
      for (int k = quad; k < splits; k += 4) {
        ptx::cluster::st_async_f32(
            ptx::cluster::map(aRecv + recv_bytes<kD>() + 4 * (rank * 64 + row), k), lse,
            ptx::cluster::map(bar, k));
      }
    } else {
      const int64_t part_row = part_base + out_row;  // rung 76: part_base, the block's slot's
      float* o = part_o + part_row * kD + 2 * quad;
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        *reinterpret_cast<float2*>(o + 8 * nt) =
            make_float2(rO[nt][2 * r] * inv, rO[nt][2 * r + 1] * inv);
      }
      if (quad == 0) part_lse[part_row] = lse;
    }
  }
  if constexpr (kCluster) cluster_combine<T, kD, kBc>(p, smem, rows, g, nq, b, hk);
  if constexpr (!kDeal) return;
  // Rung 76, kDeal: the next segment, the next sequence that has a tile (up to hi), once every
  // thread is done with this one's shared memory.
  done += n_tiles;
  seq.before += seq_t;
  for (++seq.i; seq.i < p.batch && seq_tiles<kBc>(p, seq.i) == 0; ++seq.i) {
  }
  if (seq.i >= p.batch || seq.before >= hi) return;
  ptx::cp_async::wait_group<0>();
  __syncthreads();
  }
}

// The combine: grid (rows / 4 rounded up), 128 threads; warp w of block x merges row
// 4 x + w of [B, H_q, Nq] over its `splits` partials, a lane kD / 32 contiguous columns:
//   m = max_s LSE_s, LSE = m + ln sum_s exp(LSE_s - m), O = sum_s exp(LSE_s - LSE) O_s,
// a split with LSE_s = -inf (no key of its chunk for this row) skipped. Every split empty: the
// sum is 0, O = 0 and LSE = -inf. A NaN partial is never skipped: it reaches O and the LSE.
// Every split's block writes its partial of every real row, so each partial can be loaded
// before its LSE is looked at (a split past the last reloads the last: no load leaves the
// workspace); what is added is decided by the LSE alone, as in rung 40. The
// loads of kBatch splits are issued together: rung 48's 8 where a row has 8 splits or fewer,
// else 16 (launch_typed picks), so a row of up to 16 splits, every split count the rule picks for
// B = 1 with GQA 32/8 up to Nk = 2^30, waits for one round of loads, not two.
// Rung 76, kDeal: a row of sequence b merges the partials of the blocks its tiles lie in (the
// deal of splits.h, worked out here too, before the wait: it reads the lengths alone), slot
// deal_slot of the first block, then 2 j of each next block j; a sequence one block took whole
// has its O already (the row is left as it is), and a sequence of no key has no partial (O = 0,
// LSE = -inf).
template <typename T, int kHeadDim, int kBc, int kBatch, bool kDeal>
__global__ void __launch_bounds__(kThreads)
    combine_kernel(const AttnParams p, const float* part_o, const float* part_lse, int splits) {
  // Columns a lane: d / 32 rounded up to even (whole 4-byte pairs): 2, 4, 4, 6 at d = 64, 96,
  // 128, 192; at d = 96 lanes 0-23 hold the row.
  constexpr int kCols = (kHeadDim / 32 + 1) / 2 * 2;
  constexpr int kPer = kMaxSplits / 32;  // a lane's splits: lane, lane + 32, ...
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  const int64_t row = int64_t{blockIdx.x} * (kThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // warp-uniform
  const int lane = threadIdx.x % 32;
  // Rung 76: where split k's partial of the row lies, from o_lane (times d) and from lse_row.
  int64_t lse_row = row, first_slot = 0, first_block = 0;
  const int64_t slot_rows = p.heads_q * p.seqlen_q;
  if constexpr (kDeal) {
    const int64_t b = row / slot_rows;
    const Deal deal = deal_of<kBc>(p, splits);
    long long before = 0;
#pragma unroll 1
    for (int64_t i = lane; i < b; i += 32) before += seq_tiles<kBc>(p, i);
    before = warp_sum(before);
    const int tiles = seq_tiles<kBc>(p, b);
    const DealSpan span = deal_span(before, tiles, deal.chunk);
    if (tiles > 0 && span.first == span.last) return;  // warp-uniform: the block wrote O
    splits = tiles > 0 ? static_cast<int>(span.last - span.first + 1) : 0;
    first_block = span.first;
    first_slot = deal_slot(span.first, before, deal.chunk);
    lse_row = row % slot_rows;
  }
  auto at = [&](int k) -> int64_t {
    if constexpr (kDeal) {
      return (k == 0 ? first_slot : 2 * (first_block + k)) * slot_rows;
    } else {
      return k * rows;
    }
  };
  // Launched as the split kernel's dependent, this block may run beside it: it reads no partial
  // before the split kernel has finished and its writes are visible (a no-op when launched
  // plainly).
  ptx::griddep_wait();
  const bool holds = kCols * lane < kHeadDim;
  const float* o_lane = part_o + lse_row * kHeadDim + kCols * lane;
  // The partials of splits t0 .. t0 + kBatch - 1 into part (a split past the last loads the
  // last again; an empty split's partial is loaded and not added).
  float part[kBatch][kCols];
  auto load_batch = [&](int t0) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const float* o_s = o_lane + at(min(t0 + j, splits - 1)) * kHeadDim;
#pragma unroll
      for (int c = 0; c < kCols; ++c) part[j][c] = holds ? o_s[c] : 0.f;
    }
  };
  // The row's LSEs, all loaded at once: lane holds splits lane + 32 i. Rung 51: the first
  // batch's partials are loaded with them, not after their reductions: neither depends on the
  // other, so a row of up to kBatch splits waits for one trip to memory, not two.
  float ls[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int s = lane + 32 * i;
    ls[i] = s < splits ? part_lse[at(s) + lse_row] : -INFINITY;
  }
  if (!kDeal || splits > 0) load_batch(0);
  float m = -INFINITY, sum = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) m = fmaxf(m, ls[i]);
#pragma unroll
  for (int x = 16; x > 0; x /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, x));
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (ls[i] != -INFINITY) sum += expf(ls[i] - m);
  }
#pragma unroll
  for (int x = 16; x > 0; x /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, x);
  const float lse = sum == 0.f ? -INFINITY : m + logf(sum);
  // Each split's weight, in the lane that holds its LSE.
  float w[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) w[i] = ls[i] == -INFINITY ? 0.f : expf(ls[i] - lse);
  float acc[kCols] = {};
  // Splits t0 .. t0 + kBatch - 1 (in one register of the lanes: kBatch divides 32): their
  // weights and LSEs by shuffle, their partials (loaded above for the first batch), then the
  // FMAs of the live ones in split order, rung 40's order.
  for (int t0 = 0; t0 < splits && sum != 0.f; t0 += kBatch) {  // warp-uniform
    const int i = t0 / 32;
    float wi = w[0], li = ls[0];
#pragma unroll
    for (int k = 1; k < kPer; ++k) {
      if (i == k) wi = w[k], li = ls[k];
    }
    if (t0 > 0) load_batch(t0);
    float ws[kBatch];
    bool live[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int s = t0 + j;
      ws[j] = __shfl_sync(0xffffffffu, wi, s % 32);
      live[j] = s < splits && __shfl_sync(0xffffffffu, li, s % 32) != -INFINITY;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (!live[j]) continue;
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[c] = fmaf(ws[j], part[j][c], acc[c]);
    }
  }
  const int64_t nq = p.seqlen_q, pos = row % nq, h = row / nq % p.heads_q;
  const int64_t b = row / (nq * p.heads_q);
  T* o = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head +
         pos * p.o_stride.row + kCols * lane;
#pragma unroll
  for (int c = 0; c < kCols && holds; c += 2) {
    *reinterpret_cast<uint32_t*>(o + c) = pack2<T>(acc[c], acc[c + 1]);
  }
  if (p.lse != nullptr && lane == 0) p.lse[row] = lse;
}

std::string supports(const AttnParams& p) {
  if (p.head_dim != 64 && p.head_dim != 96 && p.head_dim != 128 && p.head_dim != 192) {
    return "head_dim must be 64, 96, 128 or 192 (got " + std::to_string(p.head_dim) + ")";
  }
  const int64_t g = p.heads_q / p.heads_kv;
  if (p.seqlen_q > kRows || g > kRows || p.seqlen_q * g > kRows) {
    return "Nq x H_q / H_kv must be <= 64, the rows of one packed tile (got Nq = " +
           std::to_string(p.seqlen_q) + ", H_q / H_kv = " + std::to_string(g) +
           "): a longer call is a prefill, for the forward rungs";
  }
  if (p.seqlen_k > (int64_t{1} << 30)) {
    return "Nk must be <= 2^30 (got " + std::to_string(p.seqlen_k) + ")";
  }
  if (p.batch > 65535) return "B must be <= 65535 (the grid's z dimension)";
  if (p.heads_kv > 65535) return "H_kv must be <= 65535 (the grid's y dimension)";
  // Rung 72: the tensor maps of a block of many rows (K's and V's strides, TMA's rules).
  if (!key_warps(p) && (p.block_table == nullptr || p.page_size % 64 == 0)) {
    for (const auto& [name, strides] : {std::pair{"K", p.k_stride}, std::pair{"V", p.v_stride}}) {
      const std::string broken = tma_rules(name, strides, p.seqlen_k);
      if (!broken.empty()) return broken + ", for the TMA copies of a block of more than 16 rows";
    }
  }
  int smem = 0;
  int keys = 64;
  with_instance(p, [&](auto d, auto kw, auto bc) {
    smem = block_smem<decltype(d)::value, decltype(bc)::value, decltype(kw)::value>();
    keys = decltype(bc)::value;
  });
  const std::string refusal = shared_memory_refusal(smem, p.head_dim);
  if (refusal.empty() || keys == 64) return refusal;
  return refusal + ", for tiles of 128 keys (rows that fit one warp, the tile in one page)";
}

// The rows the block computes: Nq g rounded up to whole warps of 16 (the padding warps skip;
// the wgmma instances, rung 70's and 71's, compute all 64 rows, padding included, and report the
// same figure).
TileShape tile(const AttnParams& p) {
  const int64_t g = p.heads_q / (p.heads_kv > 0 ? p.heads_kv : 1);
  const int64_t rows = p.seqlen_q > kRows || g > kRows ? kRows : p.seqlen_q * g;
  return {static_cast<int>(rows >= kRows ? kRows : (rows + 15) / 16 * 16),
          tile_keys(p.head_dim, rows <= 16, p.page_size)};
}

// The device's figures the split rule asks for: its SMs, and the blocks of decode_kernel an SM
// holds at this shared memory size; and whether its splits may combine in a cluster (rung 58:
// the kernel's code has the cluster instructions, PTX 9.0 or later, and the GPU can run a
// cluster of kClusterSplits of its blocks); rung 62: the shared memory that keeps a block alone
// on its SM. Asked once a device (and host thread); {0, 0, false} without a device, or where the
// kernel cannot run on it (supports refuses those calls): one split.
struct Figures {
  int sms = 0, blocks_per_sm = 0;
  bool clusters = false;
  int fit[kClusterSplits + 1] = {};  // rung 61: clusters of s blocks at once, one block an SM
  int alone = 0;                     // rung 62: the shared memory that keeps a block alone
};

// Whether the GPU runs clusters of kClusterSplits blocks of `kernel` (128 threads, kSmem bytes):
// compiled for compute capability 9.0 or later, and at least one such cluster fits.
template <typename Kernel>
bool runs_clusters(Kernel kernel, int smem) {
  cudaFuncAttributes a{};
  if (cudaFuncGetAttributes(&a, kernel) != cudaSuccess || a.ptxVersion < 90 ||
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) !=
          cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = kClusterSplits;
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kClusterSplits);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.attrs = &cluster;
  config.numAttrs = 1;
  int count = 0;
  if (cudaOccupancyMaxActiveClusters(&count, kernel, &config) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

// Rung 72: the shared memory of a cluster launch: the block's, and the cluster's mbarrier past
// the K/V ring (the wgmma instances' block_smem holds it already). Rung 74: and the key warps'
// table entries past the mbarrier. A call takes the cluster launch only where all its clusters
// run at once one block an SM (rung 61), so the 4 KiB cost it no block it counted; they do leave
// no room for a second block on an SM where rung 73's left it (d = 128: 112 KiB fit twice, 116
// KiB do not; d = 64's 64-key tiles: three fit, now two).
template <int kHeadDim, int kBc, bool kKeyWarps>
constexpr int cluster_smem() {
  return std::max(block_smem<kHeadDim, kBc, kKeyWarps>(),
                  kKeyWarps ? table_smem<kHeadDim, kBc>()
                            : smem_bytes<kHeadDim, kBc>() + kBarBytes);
}

template <typename T, int kHeadDim, int kBc, bool kKeyWarps>
Figures device_figures() {
  constexpr int kSmem = block_smem<kHeadDim, kBc, kKeyWarps>();
  thread_local int known_device = -1;
  thread_local Figures known;
  int device = 0;
  Figures f;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return f;
  }
  if (device == known_device) return known;
  if (cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaFuncSetAttribute(decode_kernel<T, kHeadDim, kBc, kKeyWarps, false>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &f.blocks_per_sm, decode_kernel<T, kHeadDim, kBc, kKeyWarps, false>, kThreads, kSmem) !=
          cudaSuccess) {
    cudaGetLastError();
    return Figures{};
  }
  f.clusters = runs_clusters(decode_kernel<T, kHeadDim, kBc, kKeyWarps, true>,
                             cluster_smem<kHeadDim, kBc, kKeyWarps>());
  for (int s = 2; f.clusters && s <= kClusterSplits; ++s) f.fit[s] = clusters_one_block_an_sm(s);
  f.alone = smem_one_block_an_sm();
  known_device = device;
  known = f;
  return f;
}

// The splits of this call on the current device (rung 69's two_slot_splits, with rung 73's one
// split past the SMs, else rung 67's one_wave_splits, where they apply; else choose_splits,
// then rung 50's price_splits: splits.h).
template <typename T, int kHeadDim, int kBc, bool kKeyWarps>
int splits_for(const AttnParams& p) {
  const Figures f = device_figures<T, kHeadDim, kBc, kKeyWarps>();
  constexpr int64_t kTileBytes = int64_t{2} * kBc * kHeadDim * 2;
  const int64_t blocks = p.batch * p.heads_kv, tiles = (p.seqlen_k + kBc - 1) / kBc;
  const int64_t rows = p.seqlen_q * (p.heads_q / p.heads_kv);
  // Rung 69: a block of many rows, two an SM where its chunks stay long.
  // Rung 73: and one split past the SMs where every sequence has the capacity's length.
  if (const int two = two_slot_splits(blocks, f.sms, f.blocks_per_sm, tiles, kTileBytes, rows,
                                      p.seqlens_k == nullptr)) {
    return two;
  }
  // Rung 67: a short d = 96 call, one wave of one block an SM.
  if (const int one = one_wave_splits(blocks, f.sms, tiles, kTileBytes, rows)) return one;
  const int waves = choose_splits(blocks, f.sms, split_slots_per_sm(kTileBytes, f.blocks_per_sm),
                                  tiles, cut_pct(kTileBytes));
  return price_splits(waves, blocks, f.sms, tiles, kTileBytes, rows, f.blocks_per_sm);
}

// Whether this call's splits merge in a cluster on the current device (splits.h). Rung 61: only
// where its B x H_kv clusters all run at once, each block on an SM of its own.
template <typename T, int kHeadDim, int kBc, bool kKeyWarps>
bool merges_in_cluster(const AttnParams& p, int splits) {
  const Figures f = device_figures<T, kHeadDim, kBc, kKeyWarps>();
  return combines_in_cluster(splits, p.batch * p.heads_kv,
                             splits <= kClusterSplits ? f.fit[splits] : 0);
}

// Rung 76: the launch a call takes: its splits; the shared memory of its launch of one split
// and of its split launch (rung 62: alone where its splits read long chunks; rung 69: never
// where a block of many rows took the two-slot count; rung 75: the table's room where a block
// of key warps runs alone); and whether the splits merge in a cluster, or are dealt the batch's
// tiles (deals, splits.h: in place of a cluster too).
struct Plan {
  int splits = 1, plain_smem = 0, split_smem = 0;
  bool cluster = false, deal = false;
};
template <typename T, int kHeadDim, int kBc, bool kKeyWarps>
Plan plan_for(const AttnParams& p) {
  constexpr int kSmem = block_smem<kHeadDim, kBc, kKeyWarps>();
  constexpr int64_t kTileBytes = int64_t{2} * kBc * kHeadDim * 2;
  Plan plan;
  plan.splits = splits_for<T, kHeadDim, kBc, kKeyWarps>(p);
  const int64_t tiles = (p.seqlen_k + kBc - 1) / kBc;
  const int64_t chunk_tiles = (tiles + plan.splits - 1) / plan.splits;
  const Figures f = device_figures<T, kHeadDim, kBc, kKeyWarps>();
  const bool two = two_slot_splits(p.batch * p.heads_kv, f.sms, f.blocks_per_sm, tiles,
                                   kTileBytes, p.seqlen_q * (p.heads_q / p.heads_kv),
                                   p.seqlens_k == nullptr) > 0;
  plan.plain_smem = with_table(kSmem, table_smem<kHeadDim, kBc>(), f.alone, kKeyWarps);
  plan.split_smem = with_table(
      two ? kSmem : split_launch_smem(kTileBytes, chunk_tiles, kSmem, f.alone),
      table_smem<kHeadDim, kBc>(), f.alone, kKeyWarps);
  const int resident = f.alone > 0 && plan.split_smem >= f.alone ? 1 : f.blocks_per_sm;
  const bool cluster = merges_in_cluster<T, kHeadDim, kBc, kKeyWarps>(p, plan.splits);
  plan.deal = deals(p.seqlens_k != nullptr, p.batch, plan.splits, chunk_tiles * kTileBytes,
                    p.batch * p.heads_kv * plan.splits, int64_t{f.sms} * resident);
  plan.cluster = cluster && !plan.deal;
  return plan;
}

// The workspace of a call: the partials of its splits (none for one split, for a call that
// combines in a cluster, or for a call the rung refuses). Rung 76: a dealt call's two slots a
// block, as many as 2 S splits.
int64_t workspace(const AttnParams& p) {
  if (p.dtype == DType::e4m3 || !supports(p).empty()) return 0;
  Plan plan;
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_instance(p, [&](auto d, auto kw, auto bc) {
      plan = plan_for<T, decltype(d)::value, decltype(bc)::value, decltype(kw)::value>(p);
    });
  });
  if (plan.cluster) return 0;
  return split_workspace_bytes(plan.deal ? 2 * plan.splits : plan.splits, p.batch, p.heads_q,
                               p.seqlen_q, p.head_dim);
}

// Whether the combine's code holds the wait: compiled for a virtual architecture of 9.0 or later
// (griddep.cuh; its two batches' instances are compiled alike). Asked once a device (and host
// thread).
template <typename T, int kHeadDim>
bool combine_waits() {
  thread_local int known_device = -1;
  thread_local bool known = false;
  int device = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  if (device != known_device) {
    cudaFuncAttributes a{};
    FL_CUDA_CHECK(cudaFuncGetAttributes(&a, (combine_kernel<T, kHeadDim, 64, 8, false>)));
    known = a.ptxVersion >= 90;
    known_device = device;
  }
  return known;
}

// Rung 72: the tensor maps of K and V for the wgmma instances' TMA copies of tiles in one page;
// zero maps (never read) for the others. A map's rows are the page's (page_size; its pages up to
// 2^31 - 1, since the host does not know the pool's size and the table names only pages of it),
// or the cache's (the capacity; B sequences); a box is kBc rows of one column block of the
// instance's swizzle.
struct KvMaps {
  CUtensorMap k{}, v{};
};
template <int kHeadDim, int kBc, bool kKeyWarps>
KvMaps kv_maps(const AttnParams& p) {
  KvMaps m;
  constexpr int kSwizzle = swizzle_bytes<kHeadDim, uses_wgmma<kKeyWarps>()>();
  if constexpr (kSwizzle != 0) {
    const bool paged = p.block_table != nullptr;
    if (paged && p.page_size % kBc != 0) return m;  // runs across pages: cp.async
    const int64_t rows = paged ? p.page_size : p.seqlen_k;
    const int64_t pages = paged ? int64_t{INT32_MAX} : p.batch;
    m.k = make_tensor_map_4d(p.k, 2, kHeadDim, rows, p.heads_kv, pages, p.k_stride,
                             box_cols(kSwizzle), kBc, kSwizzle, kL2Promotion);
    m.v = make_tensor_map_4d(p.v, 2, kHeadDim, rows, p.heads_kv, pages, p.v_stride,
                             box_cols(kSwizzle), kBc, kSwizzle, kL2Promotion);
  }
  return m;
}

// The launch of instance (d, kBc, kKeyWarps), which with_instance picks.
template <typename T, int kHeadDim, int kBc, bool kKeyWarps>
void launch_typed(const AttnParams& p, cudaStream_t stream) {
  static_assert(cluster_bytes<kHeadDim>() <= smem_bytes<kHeadDim, kBc>(),
                "merge_key_warps' and the cluster's buffers");
  const KvMaps maps = kv_maps<kHeadDim, kBc, kKeyWarps>(p);
  auto kernel = decode_kernel<T, kHeadDim, kBc, kKeyWarps, false>;
  const Plan plan = plan_for<T, kHeadDim, kBc, kKeyWarps>(p);
  const int splits = plan.splits;
  // The launches' shared memory (rungs 62, 69 and 75): plan_for's, which says why; the cluster's
  // below, as before.
  const int plain_smem = plan.plain_smem, split_smem = plan.split_smem;
  FL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     std::max(plain_smem, split_smem)));
  // Rung 76: a dealt call's split kernel, at the split launch's size.
  if (plan.deal) {
    kernel = decode_kernel<T, kHeadDim, kBc, kKeyWarps, false, true>;
    FL_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, split_smem));
  }
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(p.heads_kv),
                  static_cast<unsigned>(p.batch));
  if (splits == 1) {
    kernel<<<grid, kThreads, plain_smem, stream>>>(p, nullptr, nullptr, maps.k, maps.v);
    return;
  }
  if (plan.cluster) {
    // Rung 58: the splits of (hk, b) are one cluster (its x extent is the grid's: rank = split),
    // and the kernel's kCluster instance merges them there (its shared memory attribute was set
    // by device_figures, through runs_clusters).
    kernel = decode_kernel<T, kHeadDim, kBc, kKeyWarps, true>;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = static_cast<unsigned>(splits);
    cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = cluster_smem<kHeadDim, kBc, kKeyWarps>();  // rung 60's mbarrier
    config.stream = stream;
    config.attrs = &cluster;
    config.numAttrs = 1;
    FL_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, p, static_cast<float*>(nullptr),
                                     static_cast<float*>(nullptr), maps.k, maps.v));
    return;
  }
  // The partials, in the workspace (why_unsupported checked its size against workspace()).
  float* part_o = static_cast<float*>(p.workspace);
  const int slots = plan.deal ? 2 * splits : splits;  // rung 76: two a dealt block
  float* part_lse = reinterpret_cast<float*>(
      static_cast<char*>(p.workspace) +
      lse_part_offset(slots, p.batch, p.heads_q, p.seqlen_q, kHeadDim));
  kernel<<<grid, kThreads, split_smem, stream>>>(p, part_o, part_lse, maps.k, maps.v);
  // The combine, as the split kernel's dependent where its code waits for it (compiled for
  // compute capability 9.0 or later), else a plain launch that starts after it.
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q, warps = kThreads / 32;
  cudaLaunchAttribute serialization{};
  serialization.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  serialization.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>((rows + warps - 1) / warps));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &serialization;
  config.numAttrs = combine_waits<T, kHeadDim>() ? 1 : 0;
  // Rung 49: the loads of 16 partials at once where a row has more than 8 (one round up to 16
  // splits); with 8 or fewer, rung 48's batch of 8 and its registers (71 against 116 at d = 128:
  // the combine of a long row grid, such as B = 8 with Nq = 16, runs more blocks an SM).
  // Rung 76: a dealt sequence's row merges up to S + 1 partials where the lengths are equal (more
  // where one sequence holds most keys: then in rounds of the batch).
  auto combine = plan.deal ? (splits >= 8 ? combine_kernel<T, kHeadDim, kBc, 16, true>
                                       : combine_kernel<T, kHeadDim, kBc, 8, true>)
                           : (splits > 8 ? combine_kernel<T, kHeadDim, 64, 16, false>
                                         : combine_kernel<T, kHeadDim, 64, 8, false>);
  FL_CUDA_CHECK(cudaLaunchKernelEx(&config, combine, p, static_cast<const float*>(part_o),
                                   static_cast<const float*>(part_lse), splits));
}

void launch(const AttnParams& p, cudaStream_t stream) {
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_instance(p, [&](auto d, auto kw, auto bc) {
      launch_typed<T, decltype(d)::value, decltype(bc)::value, decltype(kw)::value>(p, stream);
    });
  });
}

}  // namespace k76_decode_ragged_balance

const KernelInfo& kernel_76() {
  static const KernelInfo info = [] {
    KernelInfo k;
    k.number = 76;
    k.slug = "decode_ragged_balance";
    k.title = "decode: a ragged batch's key tiles dealt evenly to the blocks";
    k.doc = "docs/kernels/76_decode_ragged_balance.md";
    k.min_sm = 90;
    k.max_sm = 90;  // sm_90a code alone (wgmma): no other GPU runs it
    k.tile = k76_decode_ragged_balance::tile;
    k.supports = k76_decode_ragged_balance::supports;
    k.launch = k76_decode_ragged_balance::launch;
    k.workspace = k76_decode_ragged_balance::workspace;
    k.kv_cache = true;
    return k;
  }();
  return info;
}

}  // namespace fl
