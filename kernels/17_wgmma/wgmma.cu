// =================================================================================================
// Kernel 17 of 28 — wgmma: warpgroup matrix multiplies straight from shared memory (Hopper)
// builds on: 11 (exp2 softmax: the online softmax of rungs 11-16, unchanged) and the copy ring of
//            rungs 08-16; the first rung of the Hopper track (sm_90a only)
// changes:   1. the unit of work is a warpgroup (4 warps, 128 threads) and 64 query rows: two
//               warpgroups per block, Br = 128
//            2. S = Q·K_jᵀ is 8 wgmma.mma_async m64n128k16 per warpgroup, A (Q) and B (K) read by
//               the tensor cores from shared memory through matrix descriptors (SS): no ldmatrix,
//               no fragments of Q or K in registers
//            3. O += P·V_j is 8 wgmma m64n128k16 with A = P from registers (RS): the S accumulator,
//               exponentiated, rounded and packed in pairs, is the A operand as it stands; V is
//               read MN-major (its d values of one key contiguous) through the descriptor's
//               transpose bit, so there is no ldmatrix.trans either
//            4. the shared tiles take the layout the descriptor names: 64-column blocks of
//               128-byte rows with the 128-byte swizzle (chunk c of row r at c ^ (r % 8)),
//               1024-byte aligned (common/ptx/gmma_desc.cuh)
//            5. copies stay cp.async by every thread, completed by wait_group, then
//               fence.proxy.async (ordinary writes, read next by wgmma's async proxy) and a
//               barrier; each GEMM is waited for at once (wgmma.wait_group 0): synchronous
// expect:    HGMMA in SASS and no HMMA; fewer instructions per KV tile than rung 16 (no
//            ldmatrix, 16 HGMMA instead of 1024 HMMA per warpgroup); tensor-pipe utilisation and
//            TFLOP/s above rung 16 at N >= 4096, d = 128
// supports:  fp16, bf16; d = 128; Nq a multiple of 128; Nk a multiple of 128; non-causal; GQA;
//            LSE output; any scale; strides (rows 16-byte aligned); compute capability 9.0 only
// doc:       docs/kernels/17_wgmma.md
// =================================================================================================
//
// Grid: (Nq / 128, H_q, B); block: 256 threads = 2 warpgroups. Block x computes query rows
// [128 x, 128 x + 128) of head (b, h), which reads KV head h / (H_q / H_kv); warpgroup g owns
// rows [64 g, 64 g + 64) of the tile, and in it warp w (of 4) rows [16 w, 16 w + 16), as the
// accumulator layout of wgmma dictates (common/ptx/wgmma.cuh).
//
// Shared memory (dynamic, (128 + 2 x 2 x 128) x 128 x 2 bytes = 160 KiB, + 1 KiB to align):
// every tile [R][128] is two blocks [R][64] (columns 0-63, then 64-127) of 128-byte rows in the
// 128-byte swizzle; element (r, c) at gmma::sw128_offset(r, c, R).
//   sQ [128][128]            the block's queries, loaded once
//   sK [2][128][128]         a ring of 2 stages: keys of KV tile j in stage j % 2
//   sV [2][128][128]         values of KV tile j in stage j % 2
//
// Registers of one thread (a thread of warp w holds rows `group` and `group + 8` of the warp's
// 16, lane = 4 group + quad; per 8-column block b, elements 4b, 4b+1 (row group, columns 8b +
// 2 quad, +1) and 4b+2, 4b+3 (row group + 8)):
//   rS [64]        S = Q_g · K_jᵀ, 64 x 128 fp32 over the warpgroup, then P in place
//   rP [8][4]      P rounded to 16 bits: A of the 8 k-steps of P·V (keys 16 s .. 16 s + 15)
//   rO [64]        O, 64 x 128 fp32 over the warpgroup, alive for the whole loop
//
// Descriptors (gmma::kmajor_sw128 / mnmajor_sw128), k-step s of 16:
//   A of S  (Q_g, K-major)  sQ + 64 g x 128 B, + (s / 4) x 128 x 128 B (column block), + (s % 4) x 32 B
//   B of S  (K_j, K-major)  sK[stage], + (s / 4) x 128 x 128 B, + (s % 4) x 32 B
//   B of PV (V_j, MN-major, transpose bit)   sV[stage], + s x 16 keys x 128 B; LBO = 128 x 128 B
//                                            (the second column block), SBO = 1024 B
//
// Copy schedule (two stages; K and V of a tile in one cp.async group):
//   prologue   issue Q, K_0, V_0 -> stage 0                    group {Q, K_0, V_0}
//   tile j     wait for every group (K_j, V_j: the only one in flight); fence.proxy.async;
//              barrier (also: both warpgroups are done with tile j-1, so stage (j+1) % 2 is free)
//              issue K_{j+1}, V_{j+1} -> stage (j+1) % 2        group {K_{j+1}, V_{j+1}}
//              S = Q·K_jᵀ (wgmma, wait), softmax, O += P·V_j (wgmma, wait)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/fence_proxy.cuh"
#include "common/ptx/gmma_desc.cuh"
#include "common/ptx/math.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/registry.h"

namespace fl {
namespace k17_wgmma {

namespace gmma = ptx::gmma;

constexpr int kHeadDim = 128;
constexpr int kBr = 128;                     // query rows per block
constexpr int kBc = 128;                     // keys per KV tile (the N of the S wgmma)
constexpr int kWarpgroups = kBr / 64;        // 2: one per 64 query rows
constexpr int kThreads = 128 * kWarpgroups;  // 256
constexpr int kStages = 2;                   // KV tiles in flight in shared memory
constexpr int tile_bytes(int rows) { return rows * kHeadDim * 2; }
constexpr int kSmemBytes = tile_bytes(kBr) + 2 * kStages * tile_bytes(kBc) + 1024;  // + alignment
static_assert(kBc % 16 == 0 && kBc <= 256, "S = Q·Kᵀ is one wgmma of N = kBc");

// Starts copying a kRows x 128 tile from global memory (rows `stride` elements apart) into the
// 128-byte-swizzled layout, 16 bytes per thread per step with cp.async. Thread t takes 16-byte
// chunk t % 16 of row t / 16, then the same chunk 16 rows further down: 16 threads read one
// 256-byte row (coalesced). Chunk k of a row is chunk k % 8 of column block k / 8, stored at
// chunk (k % 8) ^ (row % 8); row % 8 is the same for every step of a thread, so one offset,
// advanced by 16 rows x 128 bytes a step.
template <typename T, int kRows>
__device__ __forceinline__ void copy_tile_async(uint8_t* sTile, const T* gTile, int64_t stride) {
  constexpr int kRowsPerStep = kThreads / 16;  // 16
  static_assert(kRows % kRowsPerStep == 0, "the block covers the tile evenly");
  const int row = threadIdx.x / 16, chunk = threadIdx.x % 16;
  const uint32_t dst = ptx::smem_addr(sTile) + (chunk / 8) * kRows * 128 + row * 128 +
                       (((chunk % 8) ^ (row % 8)) * 16);
  const T* src = gTile + row * stride + chunk * 8;
#pragma unroll
  for (int s = 0; s < kRows / kRowsPerStep; ++s) {
    ptx::cp_async::copy_16(dst + s * kRowsPerStep * 128, src);
    src += kRowsPerStep * stride;
  }
}

// One KV tile of the online softmax (rung 11's, on wgmma's accumulator layout): the raw scores
// rS become P = 2^(s c - m c) in place, and the running max, the row sums and O are updated. r = 0
// is row `group`, r = 1 row `group + 8`; element 4b + i is in row i / 2. A row is spread over the
// 4 lanes of a quad: its max needs two butterfly shuffles. kFirst: nothing to rescale yet.
template <bool kFirst>
__device__ __forceinline__ void online_softmax(float (&rS)[kBc / 2], float (&rO)[kHeadDim / 2],
                                               float (&row_max)[2], float (&row_sum)[2],
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
      const float correction = ptx::ex2_approx(fmaf(row_max[r], scale_log2, -max_scaled[r]));
      row_sum[r] *= correction;
#pragma unroll
      for (int b = 0; b < kHeadDim / 8; ++b) {
        rO[4 * b + 2 * r] *= correction;
        rO[4 * b + 2 * r + 1] *= correction;
      }
    }
    row_max[r] = new_max;
  }
#pragma unroll
  for (int i = 0; i < kBc / 2; ++i) {
    rS[i] = ptx::ex2_approx(fmaf(rS[i], scale_log2, -max_scaled[(i / 2) % 2]));
    row_sum[(i / 2) % 2] += rS[i];
  }
}

// At most one block of 256 threads per SM (160 KiB of shared memory): 255 registers a thread.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1) attention_kernel(const AttnParams p) {
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and the descriptors assume it starts there.
  uint8_t* smem = smem_raw + ((1024 - ptx::smem_addr(smem_raw) % 1024) % 1024);
  uint8_t* sQ = smem;                                 // [kBr][128]
  uint8_t* sK = sQ + tile_bytes(kBr);                 // [kStages][kBc][128]
  uint8_t* sV = sK + kStages * tile_bytes(kBc);       // [kStages][kBc][128]

  const int wg = threadIdx.x / 128;              // warpgroup: rows [64 wg, 64 wg + 64)
  const int warp = (threadIdx.x / 32) % 4;       // warp of the warpgroup: 16 of those rows
  const int lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;

  const int64_t b = blockIdx.z, h = blockIdx.y, h_kv = h / (p.heads_q / p.heads_kv);
  const int64_t q_row0 = static_cast<int64_t>(blockIdx.x) * kBr;
  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head +
                q_row0 * p.q_stride.row;  // [kBr][d]
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + h_kv * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + h_kv * p.v_stride.head;

  // ---------------------------------------------------------------------------------------------
  // PROLOGUE: Q, K_0, V_0 into stage 0 (one group); O and the softmax state start empty.
  // ---------------------------------------------------------------------------------------------
  copy_tile_async<T, kBr>(sQ, gQ, p.q_stride.row);
  copy_tile_async<T, kBc>(sK, gK, p.k_stride.row);
  copy_tile_async<T, kBc>(sV, gV, p.v_stride.row);
  ptx::cp_async::commit_group();

  float rO[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) rO[i] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  const float scale_log2 = p.softmax_scale * 1.44269504088896340736f;

  // The descriptors of k-step 0; a k-step only adds to the start address (gmma::advance).
  const uint64_t desc_q = gmma::kmajor_sw128(ptx::smem_addr(sQ) + wg * 64 * 128);
  const uint64_t desc_k0 = gmma::kmajor_sw128(ptx::smem_addr(sK));
  const uint64_t desc_v0 = gmma::mnmajor_sw128(ptx::smem_addr(sV), kBc * 128);

  // ---------------------------------------------------------------------------------------------
  // MAIN LOOP over the KV tiles
  // ---------------------------------------------------------------------------------------------
  const int64_t kv_tiles = p.seqlen_k / kBc;
  for (int64_t j = 0; j < kv_tiles; ++j) {
    const int stage = static_cast<int>(j % kStages);
    ptx::cp_async::wait_group<0>();     // this thread's copies of tile j have landed
    ptx::fence_proxy_async_shared();    // ... and are ordered before wgmma's (async) reads
    __syncthreads();                    // everyone's; and stage (j + 1) % 2 is free
    if (j + 1 < kv_tiles) {
      const int next = static_cast<int>((j + 1) % kStages);
      copy_tile_async<T, kBc>(sK + next * tile_bytes(kBc), gK + (j + 1) * kBc * p.k_stride.row,
                              p.k_stride.row);
      copy_tile_async<T, kBc>(sV + next * tile_bytes(kBc), gV + (j + 1) * kBc * p.v_stride.row,
                              p.v_stride.row);
      ptx::cp_async::commit_group();
    }

    // S = Q_g · K_jᵀ: 8 k-steps of 16 dims, both operands from shared memory. accumulate = 0 on
    // the first overwrites whatever rS held: no zeroing moves.
    float rS[kBc / 2];
    const uint64_t desc_k = gmma::advance(desc_k0, stage * tile_bytes(kBc));
    ptx::wgmma::fence();
#pragma unroll
    for (int s = 0; s < kHeadDim / 16; ++s) {
      ptx::wgmma::Wgmma<T, kBc>::template ss<0>(
          rS, gmma::advance(desc_q, (s / 4) * kBr * 128 + (s % 4) * 32),
          gmma::advance(desc_k, (s / 4) * kBc * 128 + (s % 4) * 32), s > 0);
    }
    ptx::wgmma::commit_group();
    ptx::wgmma::wait_group<0>();
    ptx::wgmma::fence_operands(rS);

    if (j == 0) {
      online_softmax<true>(rS, rO, row_max, row_sum, scale_log2);
    } else {
      online_softmax<false>(rS, rO, row_max, row_sum, scale_log2);
    }

    // P as the A operand: accumulator blocks 2s and 2s + 1 (keys 16 s .. 16 s + 15) packed in
    // pairs are exactly k-step s's four A registers (common/ptx/wgmma.cuh).
    uint32_t rP[kBc / 16][4];
#pragma unroll
    for (int s = 0; s < kBc / 16; ++s) {
      rP[s][0] = pack2<T>(rS[8 * s + 0], rS[8 * s + 1]);  // row group,     keys 2 quad, +1
      rP[s][1] = pack2<T>(rS[8 * s + 2], rS[8 * s + 3]);  // row group + 8
      rP[s][2] = pack2<T>(rS[8 * s + 4], rS[8 * s + 5]);  // row group,     keys 8 + 2 quad, +1
      rP[s][3] = pack2<T>(rS[8 * s + 6], rS[8 * s + 7]);  // row group + 8
    }

    // O += P · V_j: 8 k-steps of 16 keys; B = V_j read MN-major (transpose bit).
    const uint64_t desc_v = gmma::advance(desc_v0, stage * tile_bytes(kBc));
    ptx::wgmma::fence();  // rO (rescaled) and rP were written by ordinary instructions
#pragma unroll
    for (int s = 0; s < kBc / 16; ++s) {
      ptx::wgmma::Wgmma<T, kHeadDim>::template rs<1>(rO, rP[s],
                                                     gmma::advance(desc_v, s * 16 * 128), 1);
    }
    ptx::wgmma::commit_group();
    ptx::wgmma::wait_group<0>();
    ptx::wgmma::fence_operands(rO);
  }

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
  if (p.seqlen_q / kBr > INT_MAX) return "Nq / 128 must be <= 2^31 - 1 (grid limit)";
  return "";
}

TileShape tile(const AttnParams&) { return {kBr, kBc}; }

void launch(const AttnParams& p, cudaStream_t stream) {
  dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    FL_CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<T>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    const dim3 grid(static_cast<unsigned>(p.seqlen_q / kBr), static_cast<unsigned>(p.heads_q),
                    static_cast<unsigned>(p.batch));
    attention_kernel<T><<<grid, kThreads, kSmemBytes, stream>>>(p);
  });
}

}  // namespace k17_wgmma

const KernelInfo& kernel_17() {
  static const KernelInfo info{17,
                               "wgmma",
                               "wgmma: warpgroup MMA from shared memory (SS) and P from registers (RS)",
                               "docs/kernels/17_wgmma.md",
                               90,
                               k17_wgmma::tile,
                               k17_wgmma::supports,
                               k17_wgmma::launch,
                               false,
                               90};
  return info;
}

}  // namespace fl
