// =================================================================================================
// Kernel 19 of 28 — warp specialisation: a producer warpgroup loads, two consumer warpgroups compute
// builds on: 18 (TMA)
// changes:   1. three warpgroups of distinct roles, one branch each: warpgroup 0 is the producer
//               (one of its threads issues every TMA copy; the other 127 leave at once), warpgroups
//               1 and 2 are the consumers (64 query rows each, only wgmma and softmax)
//            2. full/empty mbarrier pairs per stage replace the block barrier of every tile:
//               "full" (1 arrival: the producer's expect_tx, then the bytes) says a stage holds
//               its tile; "empty" (2 arrivals: one thread of each consumer, after its
//               wgmma.wait_group covered the stage's reads) says it may be overwritten. No
//               __syncthreads after the start: the consumers run apart, one's softmax beside the
//               other's GEMMs, and the producer runs ahead as far as the ring allows
//            3. setmaxnreg: the producer gives registers back (24 a thread) and the consumers take
//               them (240): the block starts with 65536 / 384 = 168 a thread (launch bounds), which
//               would not hold S, P and O beside each other
// expect:    tensor-pipe utilisation up from rung 18; no block barrier stalls; registers per role
//            24 / 240; TFLOP/s >= rung 18 at every N, >= 0.9x cuDNN at N >= 4096
// supports:  fp16, bf16; d = 128; Nq a multiple of 128; Nk a multiple of 128; non-causal; GQA;
//            LSE output; any scale; strides (16-byte multiples, below 2^40 bytes: TMA's rules);
//            compute capability 9.0 only
// doc:       docs/kernels/19_warp_specialization.md
// =================================================================================================
//
// Grid: (Nq / 128, H_q, B); block: 384 threads = 3 warpgroups. Block x computes query rows
// [128 x, 128 x + 128) of head (b, h), which reads KV head h / (H_q / H_kv). Warpgroup 0
// produces; consumer c = 0, 1 (warpgroup c + 1) owns rows [64 c, 64 c + 64) of the tile, and in
// it warp w (of 4) rows [16 w, 16 w + 16) (common/ptx/wgmma.cuh).
//
// Shared memory (dynamic, (128 + 2 x 2 x 128) x 128 x 2 bytes = 160 KiB, + 1 KiB to align): as
// rung 18, every tile in 64-column blocks of 128-byte rows, 128-byte swizzle, one TMA box each.
//   sQ [128][128]            the block's queries                       (q_full)
//   sK [2][128][128]         keys of KV tile j in stage j % 2          (full[j % 2], empty[j % 2])
//   sV [2][128][128]         values of KV tile j in stage j % 2
//
// Registers of a consumer thread: as rung 17 (rS [64], rP [8][4], rO [64]).
//
// Schedule (stage s = j % 2, used for the u-th time, u = j / 2; waits by parity):
//   producer   arm q_full, issue Q
//              tile j: wait empty[s] with parity (u - 1) % 2 (not on a stage's first use);
//                      arm full[s] with K_j's and V_j's bytes; issue K_j, V_j into stage s
//   consumer   wait q_full (parity 0)
//              tile j: wait full[s] with parity u % 2; S = Q·K_jᵀ (wgmma, wait); softmax;
//                      O += P·V_j (wgmma, wait); one thread arrives on empty[s]
//              epilogue: O / l to global memory, LSE
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
#include "common/ptx/setmaxnreg.cuh"
#include "common/ptx/tma.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/registry.h"
#include "common/tensor_map.h"

namespace fl {
namespace k19_warp_specialization {

namespace gmma = ptx::gmma;

constexpr int kHeadDim = 128;
constexpr int kBr = 128;                     // query rows per block
constexpr int kBc = 128;                     // keys per KV tile (the N of the S wgmma)
constexpr int kConsumers = kBr / 64;         // 2 consumer warpgroups, one per 64 query rows
constexpr int kThreads = 128 * (1 + kConsumers);  // 384: the producer warpgroup first
constexpr int kProducerRegs = 24;            // setmaxnreg targets: 128 x 24 + 256 x 240
constexpr int kConsumerRegs = 240;           //   = 64512 <= 65536 registers of the SM
static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "register file");
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

// The producer: one thread issues Q, then every K/V tile as soon as its stage is empty.
__device__ __forceinline__ void producer(const AttnParams& p, const CUtensorMap* tmQ,
                                         const CUtensorMap* tmK, const CUtensorMap* tmV,
                                         uint8_t* sQ, uint8_t* sK, uint8_t* sV, uint64_t* q_full,
                                         uint64_t* full, uint64_t* empty) {
  const int cb = static_cast<int>(blockIdx.z), ch = static_cast<int>(blockIdx.y);
  const int ch_kv = static_cast<int>(blockIdx.y / (p.heads_q / p.heads_kv));
  const int64_t kv_tiles = p.seqlen_k / kBc;
  ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(q_full), tile_bytes(kBr));
  load_tile<kBr>(sQ, tmQ, ptx::smem_addr(q_full), static_cast<int>(blockIdx.x) * kBr, ch, cb);
  for (int64_t j = 0; j < kv_tiles; ++j) {
    const int stage = static_cast<int>(j % kStages);
    const int64_t use = j / kStages;
    // The consumers released this stage's previous tile (j - S): its (use - 1)-th phase.
    if (use > 0) {
      ptx::mbarrier::wait(ptx::smem_addr(&empty[stage]), static_cast<uint32_t>((use - 1) % 2));
    }
    const uint32_t bar = ptx::smem_addr(&full[stage]);
    const int row = static_cast<int>(j * kBc);
    ptx::mbarrier::arrive_expect_tx(bar, 2 * tile_bytes(kBc));
    load_tile<kBc>(sK + stage * tile_bytes(kBc), tmK, bar, row, ch_kv, cb);
    load_tile<kBc>(sV + stage * tile_bytes(kBc), tmV, bar, row, ch_kv, cb);
  }
}

// A consumer warpgroup: 64 query rows, the whole KV loop, the epilogue. `wg` is the consumer's
// index, 0 or 1 (warpgroup wg + 1 of the block).
template <typename T>
__device__ __forceinline__ void consumer(const AttnParams& p, int wg, const uint8_t* sQ,
                                         const uint8_t* sK, const uint8_t* sV, uint64_t* q_full,
                                         uint64_t* full, uint64_t* empty) {
  const int warp = (threadIdx.x / 32) % 4;  // warp of the warpgroup: 16 of its rows
  const int lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int64_t q_row0 = static_cast<int64_t>(blockIdx.x) * kBr;
  const int64_t kv_tiles = p.seqlen_k / kBc;

  float rO[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) rO[i] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  const float scale_log2 = p.softmax_scale * 1.44269504088896340736f;

  // The descriptors of k-step 0; a k-step only adds to the start address (gmma::advance).
  const uint64_t desc_q = gmma::kmajor_sw128(ptx::smem_addr(sQ) + wg * 64 * 128);
  const uint64_t desc_k0 = gmma::kmajor_sw128(ptx::smem_addr(sK));
  const uint64_t desc_v0 = gmma::mnmajor_sw128(ptx::smem_addr(sV), kBc * 128);
  ptx::mbarrier::wait(ptx::smem_addr(q_full), 0);  // Q's one and only phase

  // ---------------------------------------------------------------------------------------------
  // MAIN LOOP over the KV tiles
  // ---------------------------------------------------------------------------------------------
  for (int64_t j = 0; j < kv_tiles; ++j) {
    const int stage = static_cast<int>(j % kStages);
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

    // Both GEMMs of this warpgroup are complete (wait_group 0): the stage's K and V are no longer
    // read. One thread tells the producer (empty[stage] completes when both consumers did).
    if (threadIdx.x % 128 == 0) ptx::mbarrier::arrive(ptx::smem_addr(&empty[stage]));
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

// One block of 384 threads per SM (160 KiB of shared memory); the launch bounds give every
// thread 65536 / 384 = 168 registers at entry, the cap that setmaxnreg then moves.
template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    attention_kernel(const AttnParams p, const __grid_constant__ CUtensorMap tmQ,
                     const __grid_constant__ CUtensorMap tmK,
                     const __grid_constant__ CUtensorMap tmV) {
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes and the descriptors assume it starts there.
  uint8_t* smem = smem_raw + ((1024 - ptx::smem_addr(smem_raw) % 1024) % 1024);
  uint8_t* sQ = smem;                            // [kBr][128]
  uint8_t* sK = sQ + tile_bytes(kBr);            // [kStages][kBc][128]
  uint8_t* sV = sK + kStages * tile_bytes(kBc);  // [kStages][kBc][128]
  __shared__ alignas(8) uint64_t q_full, full[kStages], empty[kStages];  // the mbarriers

  if (threadIdx.x == 0) {
    ptx::tma::prefetch_map(&tmQ);
    ptx::tma::prefetch_map(&tmK);
    ptx::tma::prefetch_map(&tmV);
    ptx::mbarrier::init(ptx::smem_addr(&q_full), 1);
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier::init(ptx::smem_addr(&full[s]), 1);            // the producer's expect_tx
      ptx::mbarrier::init(ptx::smem_addr(&empty[s]), kConsumers);  // one thread per consumer
    }
    ptx::mbarrier::fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the roles part here

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) producer(p, &tmQ, &tmK, &tmV, sQ, sK, sV, &q_full, full, empty);
  } else {
    ptx::setmaxnreg_inc<kConsumerRegs>();
    consumer<T>(p, wg - 1, sQ, sK, sV, &q_full, full, empty);
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

}  // namespace k19_warp_specialization

const KernelInfo& kernel_19() {
  static const KernelInfo info{19,
                               "warp_specialization",
                               "warp specialisation: a TMA producer warpgroup, two wgmma consumers, setmaxnreg",
                               "docs/kernels/19_warp_specialization.md",
                               90,
                               k19_warp_specialization::tile,
                               k19_warp_specialization::supports,
                               k19_warp_specialization::launch,
                               false,
                               90};
  return info;
}

}  // namespace fl
