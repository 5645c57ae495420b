// =================================================================================================
// Kernel 02 of 16 — shared-memory tiling
// builds on: 01_naive
// changes:   1. a block of 256 threads owns a tile of kBr = 64 query rows and stages it, and each
//               tile of kBc = 32 keys and values, in shared memory: every K/V element read from
//               global memory now serves 64 query rows instead of one
//            2. the threads cooperate on the 64 x 32 score tile S: 4 threads per query row, each
//               computing 8 scores with scalar fp32 FMAs from shared memory
//            3. the online softmax runs once per tile (not once per key), its row max and sum
//               reduced across the 4 threads of a row with warp shuffles
//            4. P goes through shared memory so that each thread can read a whole row of it for
//               O += P V (each thread owns 1/4 of its row's output columns)
// expect:    global loads per FLOP fall by ~64x (kBr); the kernel becomes bound by shared-memory
//            loads and scalar FMA issue instead
// supports:  fp16, bf16; d in {64, 128}; Nq a multiple of 64, Nk a multiple of 32; non-causal;
//            GQA; LSE output
// doc:       docs/kernels/02_smem_tiling.md
// =================================================================================================
//
// Grid: (Nq / kBr, H_q, B). Block: 256 threads = 64 rows x 4 "quarters".
// Thread t: row r = t / 4 of the tile, quarter q = t % 4. The 4 threads of a row are 4
// consecutive lanes of one warp, so their reductions are two __shfl_xor_sync steps.
//   S[r][c]      for c = q, q + 4, ..., q + 28                  (8 scores per thread)
//   O[r][2m..2m+1] for column pairs m = q, q + 4, q + 8, ...     (kHeadDim / 4 outputs per thread)
//
// Shared-memory rows are padded by kPad elements so that the 8 rows a warp touches at once fall
// in 8 different banks (a 256-byte row stride alone would put them all in the same bank).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "common/dtype.cuh"
#include "common/registry.h"

namespace fl {
namespace k02_smem_tiling {

constexpr int kBr = 64;        // query rows per block
constexpr int kBc = 32;        // keys per KV tile
constexpr int kThreads = 256;  // 4 threads per query row
constexpr int kPad = 8;        // padding of T rows (elements): rows 16 bytes apart in bank space
constexpr int kPadP = 1;       // padding of the fp32 P rows (words)

// Two blocks per SM (a 128-register cap): without the hint, ptxas for sm_80 squeezes the d = 64
// kernel into 80 registers to fit three blocks and spills 4 bytes doing it.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads, 2)
    attention_kernel(const AttnParams p) {
  using Pair = typename TypeTraits<T>::pair;
  constexpr int kStride = kHeadDim + kPad;  // elements per shared row of Q, K, V
  constexpr int kPairsPerRow = kHeadDim / 2;
  constexpr int kOutPairs = kPairsPerRow / 4;  // column pairs of O per thread

  __shared__ __align__(16) T sQ[kBr * kStride];           // (kBr, kHeadDim) + pad
  __shared__ __align__(16) T sK[kBc * kStride];           // (kBc, kHeadDim) + pad
  __shared__ __align__(16) T sV[kBc * kStride];           // (kBc, kHeadDim) + pad
  __shared__ float sP[kBr * (kBc + kPadP)];               // (kBr, kBc) + pad

  const int tid = threadIdx.x, r = tid / 4, q = tid % 4;
  const int64_t b = blockIdx.z, h = blockIdx.y, h_kv = h / (p.heads_q / p.heads_kv);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBr;

  const T* gQ = static_cast<const T*>(p.q) + b * p.q_stride.batch + h * p.q_stride.head +
                row0 * p.q_stride.row;
  const T* gK = static_cast<const T*>(p.k) + b * p.k_stride.batch + h_kv * p.k_stride.head;
  const T* gV = static_cast<const T*>(p.v) + b * p.v_stride.batch + h_kv * p.v_stride.head;
  T* gO = static_cast<T*>(p.o) + b * p.o_stride.batch + h * p.o_stride.head +
          row0 * p.o_stride.row;

  // ---------------------------------------------------------------------------------------------
  // PROLOGUE: the Q tile, copied once, two elements (32 bits) per thread per step.
  // ---------------------------------------------------------------------------------------------
  for (int e = tid; e < kBr * kPairsPerRow; e += kThreads) {
    const int row = e / kPairsPerRow, pair = e % kPairsPerRow;
    reinterpret_cast<Pair*>(sQ + row * kStride)[pair] =
        reinterpret_cast<const Pair*>(gQ + row * p.q_stride.row)[pair];
  }

  float rO[2 * kOutPairs];  // O[r][2m], O[r][2m + 1] for m = q + 4 i
#pragma unroll
  for (int i = 0; i < 2 * kOutPairs; ++i) rO[i] = 0.f;
  float row_max = -INFINITY;  // running max of the scaled scores of row r (same in the 4 threads)
  float row_sum = 0.f;        // this thread's part of the running sum (its 8 columns per tile)

  // ---------------------------------------------------------------------------------------------
  // MAIN LOOP over KV tiles.
  // ---------------------------------------------------------------------------------------------
  for (int64_t kv0 = 0; kv0 < p.seqlen_k; kv0 += kBc) {
    __syncthreads();  // everyone is done with the previous sK, sV (and the Q copy is visible)
    for (int e = tid; e < kBc * kPairsPerRow; e += kThreads) {
      const int row = e / kPairsPerRow, pair = e % kPairsPerRow;
      reinterpret_cast<Pair*>(sK + row * kStride)[pair] =
          reinterpret_cast<const Pair*>(gK + (kv0 + row) * p.k_stride.row)[pair];
      reinterpret_cast<Pair*>(sV + row * kStride)[pair] =
          reinterpret_cast<const Pair*>(gV + (kv0 + row) * p.v_stride.row)[pair];
    }
    __syncthreads();

    // S = scale * Q K^T for this thread's 8 scores.
    float rS[kBc / 4];
#pragma unroll
    for (int i = 0; i < kBc / 4; ++i) rS[i] = 0.f;
    const Pair* q_row = reinterpret_cast<const Pair*>(sQ + r * kStride);
#pragma unroll 4
    for (int k = 0; k < kPairsPerRow; ++k) {
      const float2 qv = TypeTraits<T>::to_float2(q_row[k]);
#pragma unroll
      for (int i = 0; i < kBc / 4; ++i) {
        const int c = q + 4 * i;
        const float2 kv = TypeTraits<T>::to_float2(reinterpret_cast<const Pair*>(sK + c * kStride)[k]);
        rS[i] = fmaf(qv.x, kv.x, rS[i]);
        rS[i] = fmaf(qv.y, kv.y, rS[i]);
      }
    }

    // Online softmax, once per tile: the new row max over the 4 threads of the row.
    float tile_max = -INFINITY;
#pragma unroll
    for (int i = 0; i < kBc / 4; ++i) {
      rS[i] *= p.softmax_scale;
      tile_max = fmaxf(tile_max, rS[i]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(row_max, tile_max);
    const float correction = expf(row_max - new_max);  // 0 on the first tile (row_max = -inf)
    row_max = new_max;
    row_sum *= correction;
#pragma unroll
    for (int i = 0; i < kBc / 4; ++i) {
      const float pv = expf(rS[i] - new_max);
      row_sum += pv;
      sP[r * (kBc + kPadP) + q + 4 * i] = pv;
    }
    // The whole row of P is written by the 4 lanes of this row, all in this warp.
    __syncwarp();

    // O = O * correction + P V for this thread's output columns.
#pragma unroll
    for (int i = 0; i < 2 * kOutPairs; ++i) rO[i] *= correction;
#pragma unroll 4
    for (int j = 0; j < kBc; ++j) {
      const float pj = sP[r * (kBc + kPadP) + j];
      const Pair* v_row = reinterpret_cast<const Pair*>(sV + j * kStride);
#pragma unroll
      for (int m = 0; m < kOutPairs; ++m) {
        const float2 vv = TypeTraits<T>::to_float2(v_row[q + 4 * m]);
        rO[2 * m] = fmaf(pj, vv.x, rO[2 * m]);
        rO[2 * m + 1] = fmaf(pj, vv.y, rO[2 * m + 1]);
      }
    }
    __syncwarp();  // sP of this row is read before the next tile overwrites it
  }

  // ---------------------------------------------------------------------------------------------
  // EPILOGUE: the full row sum, O / l, and the LSE.
  // ---------------------------------------------------------------------------------------------
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
  const float inv_sum = 1.f / row_sum;
  Pair* o_row = reinterpret_cast<Pair*>(gO + r * p.o_stride.row);
#pragma unroll
  for (int m = 0; m < kOutPairs; ++m) {
    o_row[q + 4 * m] = TypeTraits<T>::from_float2(rO[2 * m] * inv_sum, rO[2 * m + 1] * inv_sum);
  }
  if (p.lse != nullptr && q == 0) {
    p.lse[(b * p.heads_q + h) * p.seqlen_q + row0 + r] = row_max + logf(row_sum);
  }
}

std::string supports(const AttnParams& p) {
  if (p.head_dim != 64 && p.head_dim != 128) {
    return "head_dim must be 64 or 128 (got " + std::to_string(p.head_dim) + ")";
  }
  if (p.seqlen_q % kBr != 0) return "Nq must be a multiple of 64 (got " + std::to_string(p.seqlen_q) + ")";
  if (p.seqlen_k % kBc != 0) return "Nk must be a multiple of 32 (got " + std::to_string(p.seqlen_k) + ")";
  if (p.causal) return "causal masking is not supported (rungs 02-15 are non-causal)";
  if (p.heads_q > 65535 || p.batch > 65535) return "H_q and B must be <= 65535 (grid limits)";
  return "";
}

TileShape tile(const AttnParams&) { return {kBr, kBc}; }

void launch(const AttnParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.seqlen_q / kBr), static_cast<unsigned>(p.heads_q),
                  static_cast<unsigned>(p.batch));
  dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (p.head_dim == 64) {
      attention_kernel<T, 64><<<grid, kThreads, 0, stream>>>(p);
    } else {
      attention_kernel<T, 128><<<grid, kThreads, 0, stream>>>(p);
    }
  });
}

}  // namespace k02_smem_tiling

const KernelInfo& kernel_02() {
  static const KernelInfo info{2,
                               "smem_tiling",
                               "shared-memory tiles of Q, K, V; threads cooperate on S",
                               "docs/kernels/02_smem_tiling.md",
                               80,
                               k02_smem_tiling::tile,
                               k02_smem_tiling::supports,
                               k02_smem_tiling::launch};
  return info;
}

}  // namespace fl
