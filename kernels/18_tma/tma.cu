// =================================================================================================
// Kernel 18 of 28 — TMA: tiles arrive by the copy engine, completion on an mbarrier
// builds on: 17 (wgmma)
// changes:   1. Q, K and V tiles are copied by TMA (cp.async.bulk.tensor.4d), issued by ONE thread:
//               the engine computes every address from a tensor map built on the host
//               (common/tensor_map.h: cuTensorMapEncodeTiled, reached through
//               cudaGetDriverEntryPointByVersion) and writes the 128-byte swizzle itself. A
//               128-column tile is two boxes (columns 0-63 and 64-127): the swizzle's inner box
//               is at most 128 bytes
//            2. completion is counted in bytes on an mbarrier per stage (and one for Q): the
//               issuing thread announces the tile's bytes with mbarrier.arrive.expect_tx, the
//               engine counts them down, every thread waits with mbarrier.try_wait.parity on the
//               stage's phase (use u of a stage waits for parity u % 2)
//            3. gone: the 48 cp.async of every thread per tile and their address arithmetic,
//               cp.async.wait_group, and the proxy fence (TMA writes through the async proxy,
//               the one wgmma reads through)
//            4. the schedule is rung 17's: one barrier per tile, after which stage (j + 1) % 2
//               is free and tile j + 1 is issued into it
// expect:    fewer instructions per KV tile than rung 17 (no LDGSTS, no address math); stalls
//            on the copies replaced by a wait on the mbarrier; TFLOP/s >= rung 17 at every N
// supports:  fp16, bf16; d = 128; Nq a multiple of 128; Nk a multiple of 128; non-causal; GQA;
//            LSE output; any scale; strides (16-byte multiples, below 2^40 bytes: TMA's rules);
//            compute capability 9.0 only
// doc:       docs/kernels/18_tma.md
// =================================================================================================
//
// Grid: (Nq / 128, H_q, B); block: 256 threads = 2 warpgroups. Block x computes query rows
// [128 x, 128 x + 128) of head (b, h), which reads KV head h / (H_q / H_kv); warpgroup g owns
// rows [64 g, 64 g + 64) of the tile, and in it warp w (of 4) rows [16 w, 16 w + 16), as the
// accumulator layout of wgmma dictates (common/ptx/wgmma.cuh).
//
// Shared memory (dynamic, (128 + 2 x 2 x 128) x 128 x 2 bytes = 160 KiB, + 1 KiB to align):
// every tile [R][128] is two blocks [R][64] (columns 0-63, then 64-127) of 128-byte rows in the
// 128-byte swizzle; element (r, c) at gmma::sw128_offset(r, c, R). Each block is one TMA box.
//   sQ [128][128]            the block's queries, loaded once          (barrier q_full)
//   sK [2][128][128]         a ring of 2 stages: keys of KV tile j in stage j % 2  (full[j % 2])
//   sV [2][128][128]         values of KV tile j in stage j % 2                    (full[j % 2])
//
// Registers of one thread: as rung 17 (rS [64], rP [8][4], rO [64]).
//
// Tensor maps (4-D: d, N, H, B; box 64 columns x 128 rows; common/tensor_map.h): tmQ over Q,
// tmK and tmV over K and V (H = H_kv). Box (c, r, h, b) = columns c..c+63 of rows r..r+127 of
// head h of batch b.
//
// Copy schedule (two stages; thread 0 issues, every thread waits):
//   prologue   arm q_full with 32 KiB: Q's two boxes; arm full[0] with 64 KiB: K_0's and V_0's
//              four boxes
//   tile j     barrier (both warpgroups are done with tile j-1, so stage (j+1) % 2 is free);
//              thread 0 arms full[(j+1) % 2] and issues K_{j+1}, V_{j+1} into it;
//              wait full[j % 2] with parity (j / 2) % 2
//              S = Q·K_jᵀ (wgmma, wait), softmax, O += P·V_j (wgmma, wait)
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
#include "common/ptx/tma.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/registry.h"
#include "common/tensor_map.h"

namespace fl {
namespace k18_tma {

namespace gmma = ptx::gmma;

constexpr int kHeadDim = 128;
constexpr int kBr = 128;                     // query rows per block
constexpr int kBc = 128;                     // keys per KV tile (the N of the S wgmma)
constexpr int kWarpgroups = kBr / 64;        // 2: one per 64 query rows
constexpr int kThreads = 128 * kWarpgroups;  // 256
constexpr int kStages = 2;                   // KV tiles in flight (3 measured no faster: page)
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
// The tensor maps are kernel parameters (__grid_constant__: the copy engine reads them where they
// are, in the parameter space, by address).
template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    attention_kernel(const AttnParams p, const __grid_constant__ CUtensorMap tmQ,
                     const __grid_constant__ CUtensorMap tmK,
                     const __grid_constant__ CUtensorMap tmV) {
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and the descriptors assume it starts there.
  uint8_t* smem = smem_raw + ((1024 - ptx::smem_addr(smem_raw) % 1024) % 1024);
  uint8_t* sQ = smem;                                 // [kBr][128]
  uint8_t* sK = sQ + tile_bytes(kBr);                 // [kStages][kBc][128]
  uint8_t* sV = sK + kStages * tile_bytes(kBc);       // [kStages][kBc][128]
  __shared__ alignas(8) uint64_t q_full, full[kStages];  // the mbarriers

  const int wg = threadIdx.x / 128;              // warpgroup: rows [64 wg, 64 wg + 64)
  const int warp = (threadIdx.x / 32) % 4;       // warp of the warpgroup: 16 of those rows
  const int lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;

  const int64_t b = blockIdx.z, h = blockIdx.y, h_kv = h / (p.heads_q / p.heads_kv);
  const int64_t q_row0 = static_cast<int64_t>(blockIdx.x) * kBr;
  const int64_t kv_tiles = p.seqlen_k / kBc;
  // TMA coordinates are 32-bit: supports() keeps N below 2^31 (tma_rules), H and B below 2^16.
  const int cb = static_cast<int>(b), ch = static_cast<int>(h), ch_kv = static_cast<int>(h_kv);

  // ---------------------------------------------------------------------------------------------
  // PROLOGUE: thread 0 initialises the barriers (one arrival completes a phase: its own
  // arrive.expect_tx; the bytes do the rest), then issues Q and tile 0 into stage 0.
  // ---------------------------------------------------------------------------------------------
  if (threadIdx.x == 0) {
    ptx::tma::prefetch_map(&tmQ);
    ptx::tma::prefetch_map(&tmK);
    ptx::tma::prefetch_map(&tmV);
    ptx::mbarrier::init(ptx::smem_addr(&q_full), 1);
    for (int s = 0; s < kStages; ++s) ptx::mbarrier::init(ptx::smem_addr(&full[s]), 1);
    ptx::mbarrier::fence_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&q_full), tile_bytes(kBr));
    load_tile<kBr>(sQ, &tmQ, ptx::smem_addr(&q_full), static_cast<int>(q_row0), ch, cb);
    for (int t = 0; t < kStages - 1 && t < kv_tiles; ++t) {  // tiles 0 .. S-2 into stages 0 .. S-2
      ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&full[t]), 2 * tile_bytes(kBc));
      load_tile<kBc>(sK + t * tile_bytes(kBc), &tmK, ptx::smem_addr(&full[t]), t * kBc, ch_kv, cb);
      load_tile<kBc>(sV + t * tile_bytes(kBc), &tmV, ptx::smem_addr(&full[t]), t * kBc, ch_kv, cb);
    }
  }

  float rO[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) rO[i] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  const float scale_log2 = p.softmax_scale * 1.44269504088896340736f;

  // The descriptors of k-step 0; a k-step only adds to the start address (gmma::advance).
  const uint64_t desc_q = gmma::kmajor_sw128(ptx::smem_addr(sQ) + wg * 64 * 128);
  const uint64_t desc_k0 = gmma::kmajor_sw128(ptx::smem_addr(sK));
  const uint64_t desc_v0 = gmma::mnmajor_sw128(ptx::smem_addr(sV), kBc * 128);
  ptx::mbarrier::wait(ptx::smem_addr(&q_full), 0);  // Q's one and only phase

  // ---------------------------------------------------------------------------------------------
  // MAIN LOOP over the KV tiles
  // ---------------------------------------------------------------------------------------------
  for (int64_t j = 0; j < kv_tiles; ++j) {
    const int stage = static_cast<int>(j % kStages);
    // Both warpgroups are done with tile j - 1: its stage, (j + S - 1) % S, is free for tile
    // j + S - 1, which then has S - 1 tiles of math to land in.
    __syncthreads();
    if (threadIdx.x == 0 && j + kStages - 1 < kv_tiles) {
      const int next = static_cast<int>((j + kStages - 1) % kStages);
      const int row = static_cast<int>((j + kStages - 1) * kBc);
      ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&full[next]), 2 * tile_bytes(kBc));
      load_tile<kBc>(sK + next * tile_bytes(kBc), &tmK, ptx::smem_addr(&full[next]), row, ch_kv, cb);
      load_tile<kBc>(sV + next * tile_bytes(kBc), &tmV, ptx::smem_addr(&full[next]), row, ch_kv, cb);
    }
    // Tile j is the (j / S)-th use of its stage: wait for the phase of that parity.
    ptx::mbarrier::wait(ptx::smem_addr(&full[stage]), static_cast<uint32_t>((j / kStages) % 2));

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

}  // namespace k18_tma

const KernelInfo& kernel_18() {
  static const KernelInfo info{18,
                               "tma",
                               "TMA: tiles copied by the tensor memory accelerator, completion on mbarriers",
                               "docs/kernels/18_tma.md",
                               90,
                               k18_tma::tile,
                               k18_tma::supports,
                               k18_tma::launch,
                               false,
                               90};
  return info;
}

}  // namespace fl
