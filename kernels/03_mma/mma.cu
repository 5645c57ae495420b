// =================================================================================================
// Kernel 03 of 16 — tensor cores: mma.sync.m16n8k16 with FlashAttention-2's split-Q
// builds on: 02 (shared-memory tiling, scalar FMAs)
// changes:   1. both products, S = Q·Kᵀ and O += P·V, run on the tensor cores:
//               mma.sync.m16n8k16, fp16/bf16 inputs, fp32 accumulators
//            2. split-Q (FlashAttention-2): each of the 4 warps owns 16 of the block's 64 query
//               rows and walks every KV tile alone; warps never exchange partial results
//            3. fragments are gathered from shared memory with plain 32-bit loads that follow
//               the PTX fragment layout (V's B operand needs two 16-bit loads per register)
//            4. the online softmax runs on the accumulator fragments: a row lives in the 4 lanes
//               of a quad and is reduced with __shfl_xor_sync(…, 1) and (…, 2)
//            5. P never leaves registers: S's accumulator fragments are re-packed, rounded to
//               fp16/bf16, as the A operand of P·V
// expect:    TFLOP/s about 10x rung 02 (tensor cores instead of scalar FMAs)
// supports:  fp16, bf16; d in {64, 128}; Nq a multiple of 64; Nk a multiple of 64; non-causal;
//            GQA; LSE output
// doc:       docs/kernels/03_mma.md
// =================================================================================================
//
// Grid: (Nq / 64, H_q, B); block: 128 threads = 4 warps. Block x computes query rows
// [64x, 64x + 64) of head (b, h), which reads KV head h / (H_q / H_kv); warp w owns rows
// [16w, 16w + 16) of the tile: exactly the M = 16 of one mma.
//
// Shared memory (dynamic, row-major, 3 * 64 * d * 2 bytes = 48 KiB at d = 128). Rows are not
// padded as in rung 02: the bank conflicts this causes are measured, then removed with an XOR
// swizzle, in rung 06.
//   sQ [64][d]   the block's queries, loaded once
//   sK [64][d]   keys of KV tile j
//   sV [64][d]   values of KV tile j
//
// Registers of one warp for KV tile j (a lane holds rows `group` and `group + 8` of the warp's
// 16 rows, lane = 4 * group + quad; the layouts are in common/ptx/fragment.cuh):
//   rS [8][4]      S = scale * Q_w · K_jᵀ, 16 x 64 fp32: 8 accumulator tiles of 16 x 8
//   rO [d/8][4]    O, 16 x d fp32: d/8 accumulator tiles of 16 x 8, alive for the whole loop
//   rQ [4], rK [2], rV [2], rP [4]   one A or B operand at a time
//
// Per KV tile: d/16 k-steps x 8 n-tiles mma for S, then 4 k-steps x d/8 n-tiles mma for P·V.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/mma.cuh"
#include "common/registry.h"

namespace fl {
namespace k03_mma {

constexpr int kBr = 64;                 // query rows per block
constexpr int kBc = 64;                 // keys per KV tile
constexpr int kWarps = 4;               // warps per block
constexpr int kThreads = 32 * kWarps;   // 128
constexpr int kRowsPerWarp = kBr / kWarps;
static_assert(kRowsPerWarp == 16, "split-Q: each warp owns the 16 rows of one mma");
static_assert(kBc % 16 == 0, "P·V walks the keys 16 at a time (the k of one mma)");

template <int kHeadDim>
constexpr int smem_bytes() {
  return (kBr + 2 * kBc) * kHeadDim * 2;  // sQ + sK + sV, 2-byte elements
}

// 32 bits (two adjacent elements) of shared memory: the unit of an mma operand register.
template <typename T>
__device__ __forceinline__ uint32_t lds32(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Two 16-bit elements from unrelated addresses packed into one register, `lo` in the low half
// (the element with the smaller k, as the mma expects).
template <typename T>
__device__ __forceinline__ uint32_t lds16x2(const T* lo, const T* hi) {
  const uint32_t a = *reinterpret_cast<const uint16_t*>(lo);
  const uint32_t b = *reinterpret_cast<const uint16_t*>(hi);
  return a | (b << 16);
}

// Copies a kRows x kHeadDim tile from global memory (rows `stride` elements apart) into a dense
// shared tile, 32 bits per thread per step. Thread t takes word t % (d/2) of row t / (d/2), then
// the same word kRowsPerStep rows further down: consecutive threads read consecutive words of a
// row, so every warp reads 128 contiguous bytes (coalesced). The values pass through registers.
template <typename T, int kRows, int kHeadDim>
__device__ __forceinline__ void load_tile(T* sTile, const T* gTile, int64_t stride) {
  constexpr int kWordsPerRow = kHeadDim / 2;             // 32-bit words per row
  constexpr int kRowsPerStep = kThreads / kWordsPerRow;  // rows the block covers per step
  static_assert(kRows % kRowsPerStep == 0, "the block covers the tile evenly");
  const int row = threadIdx.x / kWordsPerRow, col = (threadIdx.x % kWordsPerRow) * 2;
  const T* src = gTile + row * stride + col;
  T* dst = sTile + row * kHeadDim + col;
  // One source pointer, stepped by kRowsPerStep rows. (Written as base + offset(s), the
  // offsets are loop-invariant across the KV loop, and the compiler keeps all of them, 64-bit,
  // in registers for the whole kernel.)
#pragma unroll
  for (int s = 0; s < kRows / kRowsPerStep; ++s) {
    *reinterpret_cast<uint32_t*>(dst + s * kRowsPerStep * kHeadDim) =
        *reinterpret_cast<const uint32_t*>(src);
    src += kRowsPerStep * stride;
  }
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(const AttnParams p) {
  using Pair = typename TypeTraits<T>::pair;
  constexpr int kQKSteps = kHeadDim / 16;  // k-steps of S = Q·Kᵀ (16 dims each)
  constexpr int kSTiles = kBc / 8;         // n-tiles of S (8 keys each)
  constexpr int kPVSteps = kBc / 16;       // k-steps of O += P·V (16 keys each)
  constexpr int kOTiles = kHeadDim / 8;    // n-tiles of O (8 dims each)

  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);  // [kBr][kHeadDim]
  T* sK = sQ + kBr * kHeadDim;         // [kBc][kHeadDim]
  T* sV = sK + kBc * kHeadDim;         // [kBc][kHeadDim]

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
  // PROLOGUE: the Q tile into shared memory (made visible by the first barrier of the loop);
  // the output accumulators and the running softmax statistics start empty.
  // ---------------------------------------------------------------------------------------------
  load_tile<T, kBr, kHeadDim>(sQ, gQ, p.q_stride.row);

  float rO[kOTiles][4];  // 16 x d per warp
#pragma unroll
  for (int nt = 0; nt < kOTiles; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) rO[nt][i] = 0.f;
  }
  // Index r = 0 is row `group`, r = 1 is row `group + 8`; accumulator element i is in row i / 2.
  float row_max[2] = {-INFINITY, -INFINITY};  // running max of the scaled scores
  float row_sum[2] = {0.f, 0.f};              // this lane's part of the running sum

  const T* sQw = sQ + warp * kRowsPerWarp * kHeadDim;  // [16][d], this warp's rows

  // ---------------------------------------------------------------------------------------------
  // MAIN LOOP over the KV tiles
  // ---------------------------------------------------------------------------------------------
  const int64_t kv_tiles = p.seqlen_k / kBc;
  for (int64_t j = 0; j < kv_tiles; ++j) {
    __syncthreads();  // every warp is done reading the previous tile's sK and sV
    load_tile<T, kBc, kHeadDim>(sK, gK + j * kBc * p.k_stride.row, p.k_stride.row);
    load_tile<T, kBc, kHeadDim>(sV, gV + j * kBc * p.v_stride.row, p.v_stride.row);
    __syncthreads();  // sK, sV (and, the first time, sQ) are complete

    // S = Q_w · K_jᵀ. A = Q (16 x 16 slice, row-major); B = Kᵀ (16 x 8, "col"), whose element
    // (k, n) is sK[n][k]: a lane's B register holds 2 adjacent dims of one key, 32 bits.
    float rS[kSTiles][4];  // 16 x kBc per warp
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) rS[nt][i] = 0.f;
    }
#pragma unroll
    for (int kk = 0; kk < kQKSteps; ++kk) {
      const int k0 = kk * 16;
      uint32_t rQ[4];  // A: rows group / group + 8, dims k0 + 2 quad (+8)
      rQ[0] = lds32(sQw + group * kHeadDim + k0 + 2 * quad);
      rQ[1] = lds32(sQw + (group + 8) * kHeadDim + k0 + 2 * quad);
      rQ[2] = lds32(sQw + group * kHeadDim + k0 + 8 + 2 * quad);
      rQ[3] = lds32(sQw + (group + 8) * kHeadDim + k0 + 8 + 2 * quad);
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        const T* key = sK + (nt * 8 + group) * kHeadDim;  // the key this lane's B column is
        uint32_t rK[2];                                   // B: dims k0 + 2 quad (+8)
        rK[0] = lds32(key + k0 + 2 * quad);
        rK[1] = lds32(key + k0 + 8 + 2 * quad);
        ptx::mma_m16n8k16<T>(rS[nt], rQ, rK, rS[nt]);
      }
    }

    // Online softmax on the fragments. Row `group` of the warp is spread over the 4 lanes of
    // the quad (2 columns of each 8-wide tile per lane): the row max needs the other three,
    // fetched with two butterfly shuffles (lane ^ 1, lane ^ 2).
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        rS[nt][i] *= p.softmax_scale;
        tile_max[i / 2] = fmaxf(tile_max[i / 2], rS[nt][i]);
      }
    }
    float correction[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      // Non-causal: every row sees every key, so new_max is finite from the first tile on and
      // exp(-inf - new_max) = 0 is the right correction then (no -inf guard needed here).
      const float new_max = fmaxf(row_max[r], tile_max[r]);
      correction[r] = expf(row_max[r] - new_max);
      row_max[r] = new_max;
      row_sum[r] *= correction[r];
    }
    // P = exp(S - max), in place. Each lane sums only its own columns: all of a row's partial
    // sums are rescaled by the same correction, so the quad adds them once, in the epilogue.
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        rS[nt][i] = expf(rS[nt][i] - row_max[i / 2]);
        row_sum[i / 2] += rS[nt][i];
      }
    }
#pragma unroll
    for (int nt = 0; nt < kOTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) rO[nt][i] *= correction[i / 2];
    }

    // O += P · V_j. A = P: the accumulator tiles 2kk and 2kk+1 of S hold exactly the A fragment
    // of keys [16kk, 16kk + 16) (C: row group (+8), cols 2quad, 2quad+1 of each 8-wide half), so
    // P is rounded to T and packed in registers, no shared-memory round trip. B = V_j (16 x 8,
    // element (k, n) = sV[k][n]): a lane's register holds 2 consecutive keys of one dim, two
    // rows apart in sV, so it takes two 16-bit loads (ldmatrix .trans does this in rung 04).
#pragma unroll
    for (int kk = 0; kk < kPVSteps; ++kk) {
      uint32_t rP[4];  // A: 16 x 16 slice of P, keys 16kk..16kk+15
      rP[0] = pack2<T>(rS[2 * kk][0], rS[2 * kk][1]);          // row group,     keys +2quad
      rP[1] = pack2<T>(rS[2 * kk][2], rS[2 * kk][3]);          // row group + 8, keys +2quad
      rP[2] = pack2<T>(rS[2 * kk + 1][0], rS[2 * kk + 1][1]);  // row group,     keys +8+2quad
      rP[3] = pack2<T>(rS[2 * kk + 1][2], rS[2 * kk + 1][3]);  // row group + 8, keys +8+2quad
      const T* v_row = sV + (kk * 16 + 2 * quad) * kHeadDim;   // key 16kk + 2quad
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        const int col = nt * 8 + group;  // the dim this lane's B column is
        uint32_t rV[2];                  // B: keys 2quad, 2quad+1 (+8) of the k-step
        rV[0] = lds16x2(v_row + col, v_row + kHeadDim + col);
        rV[1] = lds16x2(v_row + 8 * kHeadDim + col, v_row + 9 * kHeadDim + col);
        ptx::mma_m16n8k16<T>(rO[nt], rP, rV, rO[nt]);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // EPILOGUE: finish the row sums across the quad, normalise by 1/l, store O (and LSE).
  // ---------------------------------------------------------------------------------------------
  float inv_sum[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
    inv_sum[r] = 1.f / row_sum[r];
  }
  const int row = warp * kRowsPerWarp + group;  // tile row of r = 0; r = 1 is row + 8
  T* o_row0 = gO + row * p.o_stride.row;
  T* o_row1 = gO + (row + 8) * p.o_stride.row;
#pragma unroll
  for (int nt = 0; nt < kOTiles; ++nt) {
    const int col = nt * 8 + 2 * quad;
    *reinterpret_cast<Pair*>(o_row0 + col) =
        TypeTraits<T>::from_float2(rO[nt][0] * inv_sum[0], rO[nt][1] * inv_sum[0]);
    *reinterpret_cast<Pair*>(o_row1 + col) =
        TypeTraits<T>::from_float2(rO[nt][2] * inv_sum[1], rO[nt][3] * inv_sum[1]);
  }
  if (p.lse != nullptr && quad == 0) {
    // LSE = log(sum_j exp(scale * s_j)) = max + log(sum_j exp(scale * s_j - max)).
    float* lse = p.lse + (b * p.heads_q + h) * p.seqlen_q + q_row0 + row;
    lse[0] = row_max[0] + logf(row_sum[0]);
    lse[8] = row_max[1] + logf(row_sum[1]);
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
  if (p.seqlen_q / kBr > INT_MAX) return "Nq / 64 must be <= 2^31 - 1 (grid limit)";
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

}  // namespace k03_mma

const KernelInfo& kernel_03() {
  static const KernelInfo info{3,
                               "mma",
                               "tensor cores: mma.sync.m16n8k16, split-Q, P kept in registers",
                               "docs/kernels/03_mma.md",
                               80,
                               k03_mma::tile,
                               k03_mma::supports,
                               k03_mma::launch};
  return info;
}

}  // namespace fl
