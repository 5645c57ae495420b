// =================================================================================================
// Kernel 36 of 36 — bwd_dq_warp: dQ added by a warp of its own, from shared memory
// builds on: 35 (bwd_warp_spec)
// changes:   1. the consumers write their dQ tile into shared memory (two buffers) and go on:
//               no shuffles, no red.global.add in the consumers' loop
//            2. a thread of the producer warpgroup adds each tile into the accumulator with one
//               bulk reduce (cp.reduce.async.bulk .add.f32, 32 KiB) and gives the buffer back
//               when the engine has read it (full / empty barriers, as for Q and dO)
//            3. the accumulator holds each tile in the order the consumers' registers hold it
//               (the conversion pass puts rows back in order), so that the stores to shared
//               memory are 16 bytes a lane and the tile is one contiguous run
// expect:    a busier tensor pipe than rung 35 (ncu: sm__pipe_tensor_op_hmma_cycles_active)
//            and fewer L2 requests for dQ; faster than rung 35 at every shape it takes
// supports:  fp16, bf16; d = 128; any Nq, Nk >= 1 (below 2^31); causal or not; GQA/MQA; any
//            strides (rows 16-byte aligned, strides below 2^40 bytes), both layouts; the
//            forward's LSE required; compute capability 9.0
// doc:       docs/kernels/36_bwd_dq_warp.md
// =================================================================================================
//
// Notation: a block owns keys [k0, k0 + 128) of KV head (b, hk); warpgroup 0 copies, and
// consumer wg (warpgroups 1 and 2, wg = 0 and 1 in the code) owns keys
// k0 + 64 wg + [0, 64), and in it warp w (of 4) keys 16 w + [0, 16), as wgmma's accumulator
// layout dictates (common/ptx/wgmma.cuh): a thread holds, per 8-column block c, elements 4c, 4c + 1
// (key 16 w + g, columns 8c + 2 qd, + 1) and 4c + 2, 4c + 3 (key + 8): rung 32's fragments. The
// steps (query head, query tile of 64) are rung 32's:
//   S^T  = K_wg Q^T, dP^T = V_wg dO^T    (64 keys x 64 queries, SS)
//   P^T  = exp(scale S^T - LSE), dS^T = P^T * (dP^T - D), masked as in rung 32
//   dV_wg += P^T dO, dK_wg += dS^T Q     (64 keys x 128 dims, RS)
//   dQ    += dS K                        (64 queries x 64 dims per warpgroup, SS, into sdQ)
//
// Shared memory (dynamic, 1024-byte aligned; [R][128] tiles are two [R][64] blocks of 128-byte
// rows in the 128-byte swizzle, element (r, c) at gmma::sw128_offset(r, c, R)):
//   sK [128][128], sV [128][128]     the block's keys and values, loaded once
//   sQ [2][64][128], sdO [2][64][128] two stages of the query tile and its dO
//   sdS [64][128]                    dS, queries x keys (stmatrix .trans), the A operand of dQ
//   sL [2][64], sD [2][64]           two stages of the tile's L and D
//   sdQ [2][64 x 128] fp32           two buffers of the step's dQ tile, in fragment order
//
// Descriptors, k-step s of 16:
//   A of S^T (K_wg, K-major)   sK + 64 wg x 128 B, + (s / 4) 128 x 128 B + (s % 4) 32 B
//   B of S^T (Q, K-major)      sQ[st], + (s / 4) 64 x 128 B + (s % 4) 32 B           (dP^T: V, dO)
//   B of dV (dO, MN-major)     sdO[st] + s x 16 x 128 B; LBO = 64 x 128 B            (dK: Q)
//   A of dQ (dS, K-major)      sdS, + (s / 4) 64 x 128 B + (s % 4) 32 B
//   B of dQ (K, MN-major)      sK + wg x 128 x 128 B (column block wg) + s x 16 x 128 B
//
// Copy schedule (two stages; full[s] armed by the producer with a step's bytes, empty[s] counting
// the 256 consumer threads that have finished reading it; kv_full for K and V): the producer
// waits for empty[n % 2] (step n - 2 read), arms and fills stage n % 2; a consumer waits for
// full[n % 2], computes step n, and arrives on empty[n % 2] once its wgmmas have completed.
// dQ: the consumers wait for dq_empty[n % 2] (step n - 2's tile read by the engine), write the
// tile into sdQ[n % 2] and arrive on dq_full[n % 2]; the dQ thread (thread 32) waits for
// dq_full, issues the bulk reduce and, once the engine has read the buffer, arrives on dq_empty.
//
// Fragment order: in the accumulator (and in sdQ) a step's tile of 64 x 128 floats is 2048
// float4s; float4 number ((4 wg + w) 8 + j) 32 + lane holds the thread's dq[4j .. 4j + 3]: rows
// 16 w + g and 16 w + g + 8, dims 64 wg + 8 j + 2 qd, + 1 (dq_offset below; wgmma's layout).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/fence_proxy.cuh"
#include "common/ptx/gmma_desc.cuh"
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/named_barrier.cuh"
#include "common/ptx/setmaxnreg.cuh"
#include "common/ptx/tma.cuh"
#include "common/ptx/math.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/stmatrix.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/registry.h"
#include "common/tensor_map.h"

namespace fl {
namespace k36_bwd_dq_warp {

namespace gmma = ptx::gmma;

constexpr int kD = 128;        // head dimension
constexpr int kBr = 64;        // queries per tile of the inner loop (the N of S^T)
constexpr int kBc = 128;       // keys per block: 64 a warpgroup
constexpr int kThreads = 384;  // a producer warpgroup and two consumers
constexpr int kConsumerThreads = 256;
constexpr uint32_t kProducerRegs = 24, kConsumerRegs = 240;  // setmaxnreg: 128 x 24 + 256 x 240
constexpr float kLog2e = 1.4426950408889634f;
constexpr uint32_t kTileBytes = kBr * kD * 2, kKTile = kBc * kD * 2, kRowBytes = kBr * 4;
constexpr uint32_t kDqBytes = kBr * kD * 4;  // a step's dQ tile in fp32: 32 KiB
constexpr int kSmemBytes =
    2 * kKTile + 4 * kTileBytes + 2 * kBr * kBc * 2 + 4 * kRowBytes + 2 * kDqBytes + 1024;
static_assert(kSmemBytes <= 227 * 1024, "an H100 block has at most 227 KiB of shared memory");
static_assert(kBc <= 256 && kBr <= 256, "a TMA box has at most 256 rows");

int64_t round256(int64_t n) { return (n + 255) / 256 * 256; }
__host__ __device__ inline int64_t padded_rows(const AttnParams& p) {
  return (p.seqlen_q + kBr - 1) / kBr * kBr;
}
int64_t dq_acc_bytes(const AttnParams& p) {
  return round256(p.batch * p.heads_q * padded_rows(p) * p.head_dim * 4);
}
int64_t row_bytes(const AttnParams& p) {
  return round256(p.batch * p.heads_q * padded_rows(p) * 4);
}
int64_t workspace(const AttnParams& p) { return dq_acc_bytes(p) + 2 * row_bytes(p); }

// Launch 1: one warp per padded query row: D = sum_c dO[c] O[c] in fp32 and L = LSE log2 e
// (0 and +inf past Nq; +inf where LSE = -inf), and the row of the dQ accumulator zeroed.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(128) dot_do_o(BwdParams b, float* dq_acc, float* d_out,
                                                float* l_out) {
  const AttnParams& p = b.fwd;
  const int64_t rows_pad = padded_rows(p);
  const int64_t row = int64_t{blockIdx.x} * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.batch * p.heads_q * rows_pad) return;
  const int64_t i = row % rows_pad, bh = row / rows_pad;
  const int64_t h = bh % p.heads_q, bi = bh / p.heads_q;
  float sum = 0.f, l = INFINITY;
  if (i < p.seqlen_q) {
    const T* o = static_cast<const T*>(p.o) + bi * p.o_stride.batch + h * p.o_stride.head +
                 i * p.o_stride.row;
    const T* dout = static_cast<const T*>(b.dout) + bi * b.do_stride.batch +
                    h * b.do_stride.head + i * b.do_stride.row;
    using Pair = typename TypeTraits<T>::pair;
    for (int c = lane * 2; c < kHeadDim; c += 64) {
      const float2 x = TypeTraits<T>::to_float2(*reinterpret_cast<const Pair*>(o + c));
      const float2 y = TypeTraits<T>::to_float2(*reinterpret_cast<const Pair*>(dout + c));
      sum += x.x * y.x + x.y * y.y;
    }
    const float lse = p.lse[bh * p.seqlen_q + i];
    if (lse != -INFINITY) l = lse * kLog2e;
  }
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
  if (lane == 0) {
    d_out[row] = sum;
    l_out[row] = l;
  }
  float* acc = dq_acc + row * kHeadDim;
  for (int c = lane; c < kHeadDim; c += 32) acc[c] = 0.f;
}

// Where element (r, c) of a 64 x 128 tile lies in the tile's fragment order (see the top).
__host__ __device__ inline int dq_offset(int r, int c) {
  const int wg = c / 64, j = c % 64 / 8, qd = c % 8 / 2, w = r / 16, g = r % 8, half = r % 16 / 8;
  return (((4 * wg + w) * 8 + j) * 32 + 4 * g + qd) * 4 + 2 * half + c % 2;
}

// Launch 3: dQ = scale * the accumulator, rounded to T; one warp per row below Nq, reading the
// row's pairs of dims out of its tile's fragment order.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(128) convert_dq(BwdParams b, const float* dq_acc) {
  const AttnParams& p = b.fwd;
  const int64_t row = int64_t{blockIdx.x} * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.batch * p.heads_q * p.seqlen_q) return;
  const int64_t i = row % p.seqlen_q, bh = row / p.seqlen_q;
  const int64_t h = bh % p.heads_q, bi = bh / p.heads_q;
  T* dq = static_cast<T*>(b.dq) + bi * b.dq_stride.batch + h * b.dq_stride.head +
          i * b.dq_stride.row;
  const float* tile = dq_acc + (bh * padded_rows(p) + i / kBr * kBr) * kHeadDim;
  for (int c = lane * 2; c < kHeadDim; c += 64) {
    const int r = static_cast<int>(i % kBr);
    const float2 x = *reinterpret_cast<const float2*>(tile + dq_offset(r, c));
    *reinterpret_cast<typename TypeTraits<T>::pair*>(dq + c) =
        TypeTraits<T>::from_float2(x.x * p.softmax_scale, x.y * p.softmax_scale);
  }
}

// Issues the two boxes of a [kRows][128] tile (columns 0-63 into the first 64-column block,
// 64-127 into the second, kRows x 128 bytes further) at rows row.. of head `head`, completing on
// `bar`. Called by one thread.
template <int kRows>
__device__ __forceinline__ void load_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                          int64_t row, int64_t head, int64_t batch) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    ptx::tma::load_4d(dst + half * kRows * 128, map, bar, 64 * half, static_cast<int>(row),
                      static_cast<int>(head), static_cast<int>(batch));
  }
}

// Launch 2: grid (ceil(Nk / 128), H_kv, B), 384 threads; one block an SM (65536 / 384 = 168
// registers a thread at entry, the cap setmaxnreg then moves).
template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    bwd_main(BwdParams b, const float* dq_acc_c, const float* d_in, const float* l_in,
             const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
             const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmdO) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[2], empty[2], kv_full, dq_full[2], dq_empty[2];
  // The 128-byte swizzle repeats every 1024 bytes and the descriptors assume it starts there.
  const uint32_t base = ptx::smem_addr(smem_raw);
  const uint32_t pad = (1024 - base % 1024) % 1024;
  const uint32_t aK = base + pad, aV = aK + kKTile, aQ = aV + kKTile, adO = aQ + 2 * kTileBytes;
  const uint32_t adS = adO + 2 * kTileBytes, aL = adS + 2 * kBr * kBc * 2, aD = aL + 2 * kRowBytes;
  const uint32_t adQ = aD + 2 * kRowBytes;
  float4* sdQ = reinterpret_cast<float4*>(smem_raw + pad + (adQ - aK));
  const float* sL = reinterpret_cast<const float*>(smem_raw + pad + (aL - aK));
  const float* sD = reinterpret_cast<const float*>(smem_raw + pad + (aD - aK));

  const AttnParams& p = b.fwd;
  const int wg = threadIdx.x / 128 - 1, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, qd = lane % 4;  // row group and quad of the fragment layouts
  const int64_t bi = blockIdx.z, hk = blockIdx.y, k0 = int64_t{blockIdx.x} * kBc;
  const int64_t group = p.heads_q / p.heads_kv, rows_pad = padded_rows(p);
  const float scale_log2 = p.softmax_scale * kLog2e;
  const int64_t diag = p.seqlen_k - p.seqlen_q;  // query i sees key j iff j <= i + diag

  // The query tiles that see a key of the block (rung 32's steps).
  const int64_t tiles = rows_pad / kBr;
  const int64_t t0 = p.causal ? (k0 - diag > 0 ? (k0 - diag) / kBr : 0) : 0;
  const int64_t steps = group * (tiles > t0 ? tiles - t0 : 0);

  // Step (h, q0) into stage st, by one thread: Q, dO, L and D on full[st].
  auto issue = [&](int64_t h, int64_t q0, uint32_t st) {
    const uint32_t bar = ptx::smem_addr(&full[st]);
    ptx::mbarrier::arrive_expect_tx(bar, 2 * kTileBytes + 2 * kRowBytes);
    load_tile<kBr>(aQ + st * kTileBytes, &tmQ, bar, q0, h, bi);
    load_tile<kBr>(adO + st * kTileBytes, &tmdO, bar, q0, h, bi);
    const int64_t row0 = (bi * p.heads_q + h) * rows_pad + q0;
    ptx::tma::load_1d(aL + st * kRowBytes, l_in + row0, kRowBytes, bar);
    ptx::tma::load_1d(aD + st * kRowBytes, d_in + row0, kRowBytes, bar);
  };
  if (threadIdx.x == 0) {
    ptx::tma::prefetch_map(&tmQ);
    ptx::tma::prefetch_map(&tmdO);
    for (int i = 0; i < 2; ++i) {
      ptx::mbarrier::init(ptx::smem_addr(&full[i]), 1);                  // the producer's
      ptx::mbarrier::init(ptx::smem_addr(&empty[i]), kConsumerThreads);  // every consumer thread
    }
    ptx::mbarrier::init(ptx::smem_addr(&kv_full), 1);
    for (int i = 0; i < 2; ++i) {
      ptx::mbarrier::init(ptx::smem_addr(&dq_full[i]), kConsumerThreads);
      ptx::mbarrier::init(ptx::smem_addr(&dq_empty[i]), 1);  // the dQ thread's
    }
    ptx::mbarrier::fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the roles part here

  // The dQ thread: step n's tile from sdQ[n % 2] into the accumulator, one bulk reduce.
  if (wg < 0) {
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 32) {
      int64_t h = group * hk, q0 = t0 * kBr;
      for (int64_t n = 0; n < steps; ++n) {
        const uint32_t buf = static_cast<uint32_t>(n % 2);
        ptx::mbarrier::wait(ptx::smem_addr(&dq_full[buf]), static_cast<uint32_t>((n / 2) % 2));
        float* dst = const_cast<float*>(dq_acc_c) + ((bi * p.heads_q + h) * rows_pad + q0) * kD;
        ptx::tma::reduce_add_1d_f32(dst, adQ + buf * kDqBytes, kDqBytes);
        ptx::tma::commit_group();
        ptx::tma::wait_group_read<0>();  // the engine has read sdQ[buf]: the consumers may refill
        ptx::mbarrier::arrive(ptx::smem_addr(&dq_empty[buf]));
        q0 += kBr;
        if (q0 >= rows_pad) {
          ++h;
          q0 = t0 * kBr;
        }
      }
      ptx::tma::wait_group<0>();  // every add done before the block's shared memory goes
      return;
    }
    // The producer: step n into stage n % 2 once the consumers gave back step n - 2's.
    if (threadIdx.x != 0) return;
    ptx::mbarrier::arrive_expect_tx(ptx::smem_addr(&kv_full), 2 * kKTile);
    load_tile<kBc>(aK, &tmK, ptx::smem_addr(&kv_full), k0, hk, bi);
    load_tile<kBc>(aV, &tmV, ptx::smem_addr(&kv_full), k0, hk, bi);
    int64_t h = group * hk, q0 = t0 * kBr;
    for (int64_t n = 0; n < steps; ++n) {
      const uint32_t st = static_cast<uint32_t>(n % 2);
      if (n >= 2) {
        ptx::mbarrier::wait(ptx::smem_addr(&empty[st]), static_cast<uint32_t>((n / 2 - 1) % 2));
      }
      issue(h, q0, st);
      q0 += kBr;
      if (q0 >= rows_pad) {
        ++h;
        q0 = t0 * kBr;
      }
    }
    return;
  }
  ptx::setmaxnreg_inc<kConsumerRegs>();
  ptx::mbarrier::wait(ptx::smem_addr(&kv_full), 0);

  // The descriptors of k-step 0 (gmma::advance moves them).
  const uint64_t desc_k = gmma::kmajor_sw128(aK + wg * 64 * 128);
  const uint64_t desc_v = gmma::kmajor_sw128(aV + wg * 64 * 128);
  const uint64_t desc_ds = gmma::kmajor_sw128(adS);
  const uint64_t desc_k_mn = gmma::mnmajor_sw128(aK + wg * kKTile / 2, kKTile / 2);

  float dk[kD / 2], dv[kD / 2];  // 64 keys x 128 dims over the warpgroup
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) dk[i] = dv[i] = 0.f;

  int64_t q0 = t0 * kBr;  // step n's tile (the dQ thread follows the heads)
  for (int64_t n = 0; n < steps; ++n) {
    const uint32_t st = static_cast<uint32_t>(n % 2);
    const int64_t q_next = q0 + kBr < rows_pad ? q0 + kBr : t0 * kBr;
    ptx::mbarrier::wait(ptx::smem_addr(&full[st]), static_cast<uint32_t>((n / 2) % 2));
    const uint32_t adSs = adS + st * kBr * kBc * 2;  // dS of this step (two buffers)
    const uint32_t aQs = aQ + st * kTileBytes, adOs = adO + st * kTileBytes;
    const float* sLs = sL + st * kBr;
    const float* sDs = sD + st * kBr;

    // S^T = K_wg Q^T and dP^T = V_wg dO^T: 8 k-steps of 16 dims each, SS.
    float s[kBr / 2], dp[kBr / 2];
    ptx::wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      const uint32_t a_off = (ks / 4) * kBc * 128 + (ks % 4) * 32;
      const uint32_t b_off = (ks / 4) * kBr * 128 + (ks % 4) * 32;
      ptx::wgmma::Wgmma<T, kBr>::template ss<0>(s, gmma::advance(desc_k, a_off),
                                                gmma::advance(gmma::kmajor_sw128(aQs), b_off),
                                                ks > 0);
    }
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      const uint32_t a_off = (ks / 4) * kBc * 128 + (ks % 4) * 32;
      const uint32_t b_off = (ks / 4) * kBr * 128 + (ks % 4) * 32;
      ptx::wgmma::Wgmma<T, kBr>::template ss<0>(dp, gmma::advance(desc_v, a_off),
                                                gmma::advance(gmma::kmajor_sw128(adOs), b_off),
                                                ks > 0);
    }
    ptx::wgmma::commit_group();
    ptx::wgmma::wait_group<0>();
    ptx::wgmma::fence_operands(s);
    ptx::wgmma::fence_operands(dp);

    // P^T and dS^T in place (rung 32's, on element 4c + e: key r = 64 wg + 16 w + g + 8 (e / 2),
    // query col = 8 c + 2 qd + e % 2 of the tile).
    const bool masked = (p.causal && k0 + kBc - 1 > q0 + diag) || k0 + kBc > p.seqlen_k;
    const int r_end = static_cast<int>(min(p.seqlen_k - k0, int64_t{kBc}));
    const int c_off =
        p.causal ? static_cast<int>(max(min(q0 + diag - k0, int64_t{kBc}), -int64_t{2 * kBr}))
                 : kBc;
#pragma unroll
    for (int c = 0; c < kBr / 8; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * c + 2 * qd + e % 2, r = 64 * wg + 16 * warp + g + 8 * (e / 2);
        float pr = ptx::ex2_approx(s[4 * c + e] * scale_log2 - sLs[col]);
        if (masked && (r >= r_end || r > col + c_off)) pr = 0.f;
        s[4 * c + e] = pr;
        dp[4 * c + e] = pr * (dp[4 * c + e] - sDs[col]);
      }
    }

    // P^T and dS^T as A operands: blocks 2j and 2j + 1 (queries 16 j ..) packed in pairs.
    uint32_t rp[kBr / 16][4], rds[kBr / 16][4];
#pragma unroll
    for (int j = 0; j < kBr / 16; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        rp[j][i] = pack2<T>(s[8 * j + 2 * i], s[8 * j + 2 * i + 1]);
        rds[j][i] = pack2<T>(dp[8 * j + 2 * i], dp[8 * j + 2 * i + 1]);
      }
    }

    // dV_wg += P^T dO and dK_wg += dS^T Q: 4 k-steps of 16 queries, RS, B MN-major.
    ptx::wgmma::fence();
#pragma unroll
    for (int j = 0; j < kBr / 16; ++j) {
      ptx::wgmma::Wgmma<T, kD>::template rs<1>(
          dv, rp[j], gmma::advance(gmma::mnmajor_sw128(adOs, kTileBytes / 2), j * 16 * 128), 1);
    }
#pragma unroll
    for (int j = 0; j < kBr / 16; ++j) {
      ptx::wgmma::Wgmma<T, kD>::template rs<1>(
          dk, rds[j], gmma::advance(gmma::mnmajor_sw128(aQs, kTileBytes / 2), j * 16 * 128), 1);
    }
    ptx::wgmma::commit_group();

    // dS^T to sdS as dS (queries x keys) by stmatrix .trans: per 16 x 16 block (this warp's keys
    // 64 wg + 16 w .., queries 16 j ..), lane l addresses row 16 j + 8 (m / 2) + l % 8, keys
    // + 8 (m % 2) of the stored matrix m = l / 8.
    {
      const int m = lane / 8;
      const int key = 64 * wg + 16 * warp + 8 * (m % 2);
#pragma unroll
      for (int j = 0; j < kBr / 16; ++j) {
        const int q = 16 * j + 8 * (m / 2) + lane % 8;
        ptx::stmatrix_x4_trans(adSs + gmma::sw128_offset(q, key, kBr), rds[j][0], rds[j][1],
                               rds[j][2], rds[j][3]);
      }
    }
    ptx::fence_proxy_async_shared();  // the stmatrix writes, before wgmma reads them
    ptx::named_barrier_sync(1, kConsumerThreads);  // both consumers' keys of dS are in

    // dQ (64 queries x this warpgroup's 64 dims) = dS K: 8 k-steps of 16 keys, SS, K MN-major.
    float dq[32];
    ptx::wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < kBc / 16; ++ks) {
      ptx::wgmma::Wgmma<T, 64>::template ss<1>(
          dq, gmma::advance(desc_ds, st * kBr * kBc * 2 + (ks / 4) * kBr * 128 + (ks % 4) * 32),
          gmma::advance(desc_k_mn, ks * 16 * 128), ks > 0);
    }
    ptx::wgmma::commit_group();
    ptx::wgmma::wait_group<0>();  // dV, dK and dQ
    ptx::wgmma::fence_operands(dq);
    ptx::wgmma::fence_operands(dv);
    ptx::wgmma::fence_operands(dk);
    ptx::mbarrier::arrive(ptx::smem_addr(&empty[st]));  // this thread is done with the stage

    // dQ into sdQ[n % 2] in fragment order, 16 bytes a lane (a warp's store is 512 contiguous
    // bytes), once the dQ thread has handed step n - 2's buffer back.
    if (n >= 2) {
      ptx::mbarrier::wait(ptx::smem_addr(&dq_empty[st]), static_cast<uint32_t>((n / 2 - 1) % 2));
    }
    float4* out = sdQ + st * (kDqBytes / 16) + (4 * wg + warp) * 8 * 32 + lane;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      out[32 * j] = make_float4(dq[4 * j], dq[4 * j + 1], dq[4 * j + 2], dq[4 * j + 3]);
    }
    ptx::fence_proxy_async_shared();  // the stores, before the engine reads them
    ptx::mbarrier::arrive(ptx::smem_addr(&dq_full[st]));
    q0 = q_next;
  }

  // dK = scale dK_wg, dV = dV_wg, rounded to T: keys k0 + 64 wg + 16 w + g (+ 8) below Nk, dims
  // 8 c + 2 qd (+ 1). A block whose keys no query sees (causal) stores zeros.
  T* dkp = static_cast<T*>(b.dk) + bi * b.dk_stride.batch + hk * b.dk_stride.head;
  T* dvp = static_cast<T*>(b.dv) + bi * b.dv_stride.batch + hk * b.dv_stride.head;
#pragma unroll
  for (int c = 0; c < kD / 8; ++c) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t key = k0 + 64 * wg + 16 * warp + g + 8 * half;
      if (key >= p.seqlen_k) continue;
      const int col = 8 * c + 2 * qd;
      *reinterpret_cast<uint32_t*>(dkp + key * b.dk_stride.row + col) = pack2<T>(
          dk[4 * c + 2 * half] * p.softmax_scale, dk[4 * c + 2 * half + 1] * p.softmax_scale);
      *reinterpret_cast<uint32_t*>(dvp + key * b.dv_stride.row + col) =
          pack2<T>(dv[4 * c + 2 * half], dv[4 * c + 2 * half + 1]);
    }
  }
}

std::string supports(const BwdParams& b) {
  const AttnParams& p = b.fwd;
  if (p.head_dim != kD) {
    return "head_dim must be 128 (got " + std::to_string(p.head_dim) +
           "; d = 64 and 256 need rung 32)";
  }
  if (p.heads_kv > 65535 || p.batch > 65535) {
    return "H_kv and B must be <= 65535 (grid dimensions y and z)";
  }
  if (p.seqlen_q > (int64_t{1} << 30) || p.seqlen_k > (int64_t{1} << 30)) {
    return "Nq and Nk must be <= 2^30";
  }
  std::string why = tma_rules("Q", p.q_stride, p.seqlen_q);
  if (why.empty()) why = tma_rules("K", p.k_stride, p.seqlen_k);
  if (why.empty()) why = tma_rules("V", p.v_stride, p.seqlen_k);
  if (why.empty()) why = tma_rules("dO", b.do_stride, p.seqlen_q);
  return why;
}

template <typename T>
void launch_typed(const BwdParams& b, cudaStream_t stream) {
  const AttnParams& p = b.fwd;
  char* ws = static_cast<char*>(b.workspace);
  float* dq_acc = reinterpret_cast<float*>(ws);
  float* d = reinterpret_cast<float*>(ws + dq_acc_bytes(p));
  float* l = reinterpret_cast<float*>(ws + dq_acc_bytes(p) + row_bytes(p));
  const int64_t rows_pad = p.batch * p.heads_q * padded_rows(p);
  dot_do_o<T, kD><<<static_cast<unsigned>((rows_pad + 3) / 4), 128, 0, stream>>>(b, dq_acc, d, l);
  FL_CHECK_LAUNCH();
  FL_CUDA_CHECK(cudaFuncSetAttribute(bwd_main<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     kSmemBytes));
  const dim3 grid(static_cast<unsigned>((p.seqlen_k + kBc - 1) / kBc),
                  static_cast<unsigned>(p.heads_kv), static_cast<unsigned>(p.batch));
  // The maps hold the tensors' addresses: built for every call (a host-side driver call).
  const CUtensorMap tmQ =
      make_tensor_map_4d(p.q, kD, p.seqlen_q, p.heads_q, p.batch, p.q_stride, kBr);
  const CUtensorMap tmK =
      make_tensor_map_4d(p.k, kD, p.seqlen_k, p.heads_kv, p.batch, p.k_stride, kBc);
  const CUtensorMap tmV =
      make_tensor_map_4d(p.v, kD, p.seqlen_k, p.heads_kv, p.batch, p.v_stride, kBc);
  const CUtensorMap tmdO =
      make_tensor_map_4d(b.dout, kD, p.seqlen_q, p.heads_q, p.batch, b.do_stride, kBr);
  bwd_main<T><<<grid, kThreads, kSmemBytes, stream>>>(b, dq_acc, d, l, tmQ, tmK, tmV, tmdO);
  FL_CHECK_LAUNCH();
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  convert_dq<T, kD><<<static_cast<unsigned>((rows + 3) / 4), 128, 0, stream>>>(b, dq_acc);
}

void launch(const BwdParams& b, cudaStream_t stream) {
  dispatch_dtype(b.fwd.dtype, [&](auto t) { launch_typed<decltype(t)>(b, stream); });
}

}  // namespace k36_bwd_dq_warp

const KernelInfo& kernel_36() {
  static const KernelInfo info = [] {
    KernelInfo k;
    k.number = 36;
    k.slug = "bwd_dq_warp";
    k.title = "backward: dQ added from shared memory by a warp of its own (bulk reduce-add)";
    k.doc = "docs/kernels/36_bwd_dq_warp.md";
    k.min_sm = 90;
    k.max_sm = 90;
    k.op = Op::backward;
    k.supports_backward = k36_bwd_dq_warp::supports;
    k.launch_backward = k36_bwd_dq_warp::launch;
    k.workspace = k36_bwd_dq_warp::workspace;
    return k;
  }();
  return info;
}

}  // namespace fl
