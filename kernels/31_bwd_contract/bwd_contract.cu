// =================================================================================================
// Kernel 31 of 36 — bwd_contract: the backward's whole contract on mma.sync
// builds on: 30 (bwd_trans)
// changes:   1. any Nq, Nk >= 1: the last tiles copied with zero fill; the pre-pass writes the
//               LSE (times log2 e) and D padded to whole tiles, +inf and 0 in the padding, so the
//               rows past Nq get P = 0 with no test in the loop; keys past Nk are masked in
//               the last key tile and not stored
//            2. causal, bottom-right: a block starts at the first query tile that sees one of
//               its keys, and masks P in the tiles that cross the diagonal; rows that see no key
//               (LSE = -inf) get +inf too: P = 0, no NaN
//            3. GQA / MQA: a block owns a tile of one KV head's keys and loops over the query
//               tiles of every query head of its group, so dK and dV are summed in registers
//               and stored once, with no per-query-head copies
//            4. d = 256: eight warps, two per 16 keys, each holding half of dK and dV (both
//               compute that S^T and dP^T); dQ split across them by rows and halves of d
// expect:    the contract of the forward rungs, the speed of rung 30 where both run (within a
//            few percent), causal at about half the time of the full problem
// supports:  fp16, bf16; d in {64, 128, 256}; any Nq, Nk >= 1; causal or not; GQA/MQA; any
//            strides (rows 16-byte aligned), both layouts; the forward's LSE required
// doc:       docs/kernels/31_bwd_contract.md
// =================================================================================================
//
// Notation: a block owns keys [k0, k0 + 64) of KV head (b, hk); warp w owns keys
// k0 + 16 (w % 4) + [0, 16) and, at d = 256, half w / 4 of dK and dV. For each query head h of
// the group (h = G hk + i, G = H_q / H_kv) and each query tile [q0, q0 + 64) that sees one of the
// block's keys (the inner loop, one sequence of steps over the group):
//   S^T  = K_w Q^T            (16 keys x 64 queries per warp, fp32 accumulators)
//   P^T  = exp(scale S^T - LSE)   with LSE broadcast along the keys (a column per query)
//   dP^T = V_w dO^T
//   dS^T = P^T * (dP^T - D)
//   dV_w += P^T dO,  dK_w += dS^T Q          (16 keys x d / kSplit each, in registers)
//   dQ   += dS K     (64 queries x d, every warp's keys: dS through shared memory)
// and, after the loop, dK = scale dK_w and dV = dV_w are stored. dQ's fp32 sum over every block
// of the head is scaled and rounded by the conversion pass.
//
// Shared memory (rows swizzled as in rung 06: element (r, c) of a tile with n columns at
// swizzle::offset(r, c, n)):
//   sK [64][d], sV [64][d]          the block's keys and values, loaded once
//   sQ [2][64][d], sdO [2][64][d]   two stages of the query tile and its dO
//   sL [2][64], sD [2][64]          two stages of the tile's LSE (times log2 e, padded) and D
//   sdSt [64][64]                   dS^T (keys x queries), the A operand of dQ by ldmatrix.trans
//
// The workspace, per (b, h) and rows padded to whole tiles (Nq_pad = 64 ceil(Nq / 64)), each
// part 256-byte aligned: the fp32 dQ accumulator [B, H_q, Nq_pad, d], D [B, H_q, Nq_pad] and
// L = LSE log2 e [B, H_q, Nq_pad], with L = +inf on the padding and where LSE = -inf.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/ldmatrix.cuh"
#include "common/ptx/math.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/red.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/swizzle.cuh"
#include "common/registry.h"

namespace fl {
namespace k31_bwd_contract {

constexpr int kBr = 64;  // queries per tile of the inner loop
constexpr int kBc = 64;  // keys per block
constexpr float kLog2e = 1.4426950408889634f;
// Warps that share the 16 keys of a key group, each with d / kSplit of dK and dV.
template <int kHeadDim>
constexpr int kSplit = kHeadDim == 256 ? 2 : 1;
template <int kHeadDim>
constexpr int kThreads = 32 * (kBc / 16) * kSplit<kHeadDim>;

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

// Launch 3: dQ = scale * the accumulator, rounded to T; one warp per row below Nq.
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
  const float* acc = dq_acc + (bh * padded_rows(p) + i) * kHeadDim;
  for (int c = lane * 2; c < kHeadDim; c += 64) {
    *reinterpret_cast<typename TypeTraits<T>::pair*>(dq + c) =
        TypeTraits<T>::from_float2(acc[c] * p.softmax_scale, acc[c + 1] * p.softmax_scale);
  }
}

// ldmatrix x4 of a 16 x 16 A fragment: rows r0.. of a row-major tile of n columns, columns c0..
// (lanes 0-15 give rows r0 + lane % 16 at c0, lanes 16-31 the same rows at c0 + 8).
__device__ __forceinline__ void load_a(uint32_t (&a)[4], uint32_t tile, int n, int r0, int c0) {
  const int lane = threadIdx.x % 32;
  ptx::ldmatrix_x4(a, tile + swizzle::byte_offset(r0 + lane % 16, c0 + lane / 16 * 8, n));
}

// ldmatrix x4 of the B fragments of two n-tiles (n0.. and n0 + 8..) over k-slice k0..k0 + 15,
// from a tile stored [n][k] (k contiguous: "column-major B"): registers {0, 1} are n-tile 0's,
// {2, 3} n-tile 1's.
__device__ __forceinline__ void load_b(uint32_t (&b)[4], uint32_t tile, int n, int n0, int k0) {
  const int lane = threadIdx.x % 32;
  ptx::ldmatrix_x4(
      b, tile + swizzle::byte_offset(n0 + lane / 16 * 8 + lane % 8, k0 + lane / 8 % 2 * 8, n));
}

// The same fragments from a tile stored [k][n] (n contiguous, row-major B) by ldmatrix .trans:
// matrix i holds k rows k0 + 8 (i % 2).., n columns n0 + 8 (i / 2)..; transposed on the way, each
// lands as load_b's would from the [n][k] copy.
__device__ __forceinline__ void load_b_trans(uint32_t (&b)[4], uint32_t tile, int n, int n0,
                                             int k0) {
  const int lane = threadIdx.x % 32;
  ptx::ldmatrix_x4_trans(
      b, tile + swizzle::byte_offset(k0 + lane / 8 % 2 * 8 + lane % 8, n0 + lane / 16 * 8, n));
}

// The 16 x 16 A fragment (rows m0.., columns k0..) from a tile stored [k][m] (m contiguous) by
// ldmatrix .trans: matrix i holds k rows k0 + 8 (i / 2).., m columns m0 + 8 (i % 2)...
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], uint32_t tile, int n, int m0,
                                             int k0) {
  const int lane = threadIdx.x % 32;
  ptx::ldmatrix_x4_trans(
      a, tile + swizzle::byte_offset(k0 + lane / 16 * 8 + lane % 8, m0 + lane / 8 % 2 * 8, n));
}

// Issues the cp.async copies of rows [0, kRows) of a row-major global tile (rows `stride` apart)
// into the swizzled shared tile at byte address `dst`: 16 bytes a thread a step, straight from
// global to shared memory (complete after cp_async::wait_group and a barrier). Rows >= `valid`
// are zero-filled (0 source bytes, read from row 0: an address inside the tensor).
template <typename T, int kRows, int kHeadDim, int kThreadCount>
__device__ __forceinline__ void copy_tile(uint32_t dst, const T* src, int64_t stride,
                                          int64_t valid) {
  constexpr int kChunks = kHeadDim / 8;
#pragma unroll
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreadCount) {
    const int r = idx / kChunks, c = idx % kChunks * 8;
    const bool in = r < valid;
    ptx::cp_async::copy_16(dst + swizzle::byte_offset(r, c, kHeadDim),
                           src + (in ? r * stride : 0) + c, in ? 16 : 0);
  }
}

// Issues the copies of 64 contiguous floats (a tile's L or D, padded: always whole) to shared
// memory: 16 threads.
__device__ __forceinline__ void copy_row(uint32_t dst, const float* src, int first_thread) {
  const int t = threadIdx.x - first_thread;
  if (t >= 0 && t < 16) ptx::cp_async::copy_16(dst + 16 * t, src + 4 * t);
}

// Launch 2: grid (ceil(Nk / 64), H_kv, B), kThreads threads.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads<kHeadDim>) bwd_main(BwdParams b, const float* dq_acc_c,
                                                              const float* d_in,
                                                              const float* l_in) {
  constexpr int kD = kHeadDim, kS = kSplit<kHeadDim>, kDP = kD / kS, kT = kThreads<kHeadDim>;
  extern __shared__ __align__(1024) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem);
  T* sV = sK + kBc * kD;
  T* sQ = sV + kBc * kD;          // [2][kBr][kD]
  T* sdO = sQ + 2 * kBr * kD;     // [2][kBr][kD]
  T* sdSt = sdO + 2 * kBr * kD;   // [kBc][kBr]
  float* sL = reinterpret_cast<float*>(sdSt + kBc * kBr);  // [2][kBr]
  float* sD = sL + 2 * kBr;                                 // [2][kBr]

  const AttnParams& p = b.fwd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kw = warp % 4, part = warp / 4;  // key group, part of d (of dK, dV and dQ)
  const int g = lane / 4, qd = lane % 4;     // row group and quad of the fragment layouts
  const int64_t bi = blockIdx.z, hk = blockIdx.y, k0 = int64_t{blockIdx.x} * kBc;
  const int64_t group = p.heads_q / p.heads_kv, rows_pad = padded_rows(p);
  const float scale_log2 = p.softmax_scale * kLog2e;
  const int64_t diag = p.seqlen_k - p.seqlen_q;  // query i sees key j iff j <= i + diag

  // The query tiles that see a key of the block: from t0 (causal: the first tile with a row
  // i >= k0 - diag) to the last; each query head of the group walks them.
  const int64_t tiles = rows_pad / kBr;
  const int64_t t0 = p.causal ? (k0 - diag > 0 ? (k0 - diag) / kBr : 0) : 0;
  const int64_t steps = group * (tiles > t0 ? tiles - t0 : 0);

  const uint32_t aK = ptx::smem_addr(sK), aV = ptx::smem_addr(sV);
  const uint32_t aQ = ptx::smem_addr(sQ), adO = ptx::smem_addr(sdO);
  const uint32_t adSt = ptx::smem_addr(sdSt);
  const uint32_t aL = ptx::smem_addr(sL), aD = ptx::smem_addr(sD);
  constexpr uint32_t kTileBytes = kBr * kD * 2, kRowBytes = kBr * 4;

  // A step: query head h of the group, query tile at row q0, into stage st: Q, dO, L, D in one
  // cp.async group. The steps walk the tiles t0.. of head G hk, then of head G hk + 1, ...
  auto issue = [&](int64_t h, int64_t q0, uint32_t st) {
    const int64_t valid = p.seqlen_q - q0;
    copy_tile<T, kBr, kD, kT>(aQ + st * kTileBytes,
                              static_cast<const T*>(p.q) + bi * p.q_stride.batch +
                                  h * p.q_stride.head + q0 * p.q_stride.row,
                              p.q_stride.row, valid);
    copy_tile<T, kBr, kD, kT>(adO + st * kTileBytes,
                              static_cast<const T*>(b.dout) + bi * b.do_stride.batch +
                                  h * b.do_stride.head + q0 * b.do_stride.row,
                              b.do_stride.row, valid);
    const int64_t row0 = (bi * p.heads_q + h) * rows_pad + q0;
    copy_row(aL + st * kRowBytes, l_in + row0, 0);
    copy_row(aD + st * kRowBytes, d_in + row0, 32);
  };
  const int64_t keys = p.seqlen_k - k0;
  copy_tile<T, kBc, kD, kT>(aK, static_cast<const T*>(p.k) + bi * p.k_stride.batch +
                                    hk * p.k_stride.head + k0 * p.k_stride.row,
                            p.k_stride.row, keys);
  copy_tile<T, kBc, kD, kT>(aV, static_cast<const T*>(p.v) + bi * p.v_stride.batch +
                                    hk * p.v_stride.head + k0 * p.v_stride.row,
                            p.v_stride.row, keys);
  if (steps > 0) issue(group * hk, t0 * kBr, 0);
  ptx::cp_async::commit_group();  // group 0: K, V and step 0

  float dk[kDP / 8][4] = {}, dv[kDP / 8][4] = {};  // 16 keys x d / kS

  int64_t h = group * hk, q0 = t0 * kBr;  // step n's head and tile
  for (int64_t n = 0; n < steps; ++n) {
    const uint32_t st = static_cast<uint32_t>(n % 2);
    // Step n + 1 into the other stage, which every warp left at the middle barrier of step n - 1.
    int64_t h_next = h, q_next = q0 + kBr;
    if (q_next >= rows_pad) {
      ++h_next;
      q_next = t0 * kBr;
    }
    if (n + 1 < steps) issue(h_next, q_next, st ^ 1);
    ptx::cp_async::commit_group();   // (empty after the last step: the count stays the same)
    ptx::cp_async::wait_group<1>();  // step n's group has landed (this thread's copies)
    __syncthreads();  // everyone's copies; and every warp is done with the last step's sdSt
    const uint32_t aQs = aQ + st * kTileBytes, adOs = adO + st * kTileBytes;
    const float* sLs = sL + st * kBr;
    const float* sDs = sD + st * kBr;

    // S^T = K_w Q^T and dP^T = V_w dO^T: 16 keys x 64 queries (8 n-tiles of 8 queries).
    float s[kBr / 8][4] = {}, dp[kBr / 8][4] = {};
#pragma unroll 1  // unrolled, the compiler hoists every slice's loads: 255 registers and spills
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t ak[4], av[4];
      load_a(ak, aK, kD, 16 * kw, 16 * kk);
      load_a(av, aV, kD, 16 * kw, 16 * kk);
#pragma unroll
      for (int np = 0; np < kBr / 16; ++np) {
        uint32_t bq[4], bo[4];
        load_b(bq, aQs, kD, 16 * np, 16 * kk);
        load_b(bo, adOs, kD, 16 * np, 16 * kk);
        ptx::mma_m16n8k16<T>(s[2 * np], ak, {bq[0], bq[1]}, s[2 * np]);
        ptx::mma_m16n8k16<T>(s[2 * np + 1], ak, {bq[2], bq[3]}, s[2 * np + 1]);
        ptx::mma_m16n8k16<T>(dp[2 * np], av, {bo[0], bo[1]}, dp[2 * np]);
        ptx::mma_m16n8k16<T>(dp[2 * np + 1], av, {bo[2], bo[3]}, dp[2 * np + 1]);
      }
    }

    // P^T and dS^T in place of S^T and dP^T. Element e of n-tile nt is key k0 + 16 kw + g +
    // 8 (e / 2), query q0 + 8 nt + 2 qd + e % 2: its L and D are those of that query (a
    // column). A tile that crosses the causal diagonal (a key above some row's last) or holds
    // keys past Nk masks P (zero K rows give S = 0, and exp(-LSE) may overflow).
    const bool masked = (p.causal && k0 + kBc - 1 > q0 + diag) || k0 + kBc > p.seqlen_k;
    // In 32 bits, relative to the tile: key k0 + r is visible to query q0 + c iff r < r_end and
    // (not causal or r <= c + c_off).
    const int r_end = static_cast<int>(min(p.seqlen_k - k0, int64_t{kBc}));
    const int c_off =
        p.causal ? static_cast<int>(max(min(q0 + diag - k0, int64_t{kBc}), -int64_t{2 * kBr}))
                 : kBc;
#pragma unroll
    for (int nt = 0; nt < kBr / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * nt + 2 * qd + e % 2, r = 16 * kw + g + 8 * (e / 2);
        float pr = ptx::ex2_approx(s[nt][e] * scale_log2 - sLs[col]);
        if (masked && (r >= r_end || r > col + c_off)) pr = 0.f;
        s[nt][e] = pr;
        dp[nt][e] = pr * (dp[nt][e] - sDs[col]);
      }
    }

    // dS^T to shared memory as the warp holds it: sdSt[key][query], queries 2 qd and 2 qd + 1
    // of an n-tile in one 32-bit store (at d = 256 by the warps of part 0: both parts hold it).
    if (part == 0) {
#pragma unroll
      for (int nt = 0; nt < kBr / 8; ++nt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          *reinterpret_cast<uint32_t*>(
              sdSt + swizzle::offset(16 * kw + g + 8 * half, 8 * nt + 2 * qd, kBr)) =
              pack2<T>(dp[nt][2 * half], dp[nt][2 * half + 1]);
        }
      }
    }

    // dV_w += P^T dO and dK_w += dS^T Q over this warp's part of d: A from registers (query
    // slices of 16), B from sdO and sQ by ldmatrix .trans.
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) {
      const uint32_t ap[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                              pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                              pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const uint32_t ads[4] = {pack2<T>(dp[2 * kk][0], dp[2 * kk][1]),
                               pack2<T>(dp[2 * kk][2], dp[2 * kk][3]),
                               pack2<T>(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                               pack2<T>(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < kDP / 16; ++np) {
        uint32_t bo[4], bq[4];
        load_b_trans(bo, adOs, kD, kDP * part + 16 * np, 16 * kk);
        load_b_trans(bq, aQs, kD, kDP * part + 16 * np, 16 * kk);
        ptx::mma_m16n8k16<T>(dv[2 * np], ap, {bo[0], bo[1]}, dv[2 * np]);
        ptx::mma_m16n8k16<T>(dv[2 * np + 1], ap, {bo[2], bo[3]}, dv[2 * np + 1]);
        ptx::mma_m16n8k16<T>(dk[2 * np], ads, {bq[0], bq[1]}, dk[2 * np]);
        ptx::mma_m16n8k16<T>(dk[2 * np + 1], ads, {bq[2], bq[3]}, dk[2 * np + 1]);
      }
    }
    __syncthreads();  // sdSt is whole; every warp is done with this stage of sQ and sdO

    // dQ rows [16 kw, 16 kw + 16) of the tile, dims of this warp's part: dS (16 queries x 64
    // keys, from sdSt by .trans) K (from sK by .trans), added to the accumulator, 64 dims at a
    // time. Element e of n-tile nt is query q0 + 16 kw + g + 8 (e / 2), dim kDP part + 64 dh +
    // 8 nt + 2 qd + e % 2 (rows past Nq land in the padding, which nobody reads).
    float* dq_acc = const_cast<float*>(dq_acc_c) + ((bi * p.heads_q + h) * rows_pad + q0) * kD;
#pragma unroll 1  // unrolled at d = 128, 20 bytes spill
    for (int dh = 0; dh < kDP / 64; ++dh) {
      float dq[8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        uint32_t a[4];
        load_a_trans(a, adSt, kBr, 16 * kw, 16 * kk);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t bk[4];
          load_b_trans(bk, aK, kD, kDP * part + 64 * dh + 16 * np, 16 * kk);
          ptx::mma_m16n8k16<T>(dq[2 * np], a, {bk[0], bk[1]}, dq[2 * np]);
          ptx::mma_m16n8k16<T>(dq[2 * np + 1], a, {bk[2], bk[3]}, dq[2 * np + 1]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = 16 * kw + g + 8 * (e / 2);
          ptx::red_global_add_f32(
              dq_acc + row * kD + kDP * part + 64 * dh + 8 * nt + 2 * qd + e % 2, dq[nt][e]);
        }
      }
    }
    h = h_next;
    q0 = q_next;
  }

  // dK = scale dK_w, dV = dV_w, rounded to T: keys k0 + 16 kw + g (+ 8) below Nk, dims
  // kDP part + 8 nt + 2 qd (+ 1). A block whose keys no query sees (causal) stores zeros.
  T* dkp = static_cast<T*>(b.dk) + bi * b.dk_stride.batch + hk * b.dk_stride.head;
  T* dvp = static_cast<T*>(b.dv) + bi * b.dv_stride.batch + hk * b.dv_stride.head;
#pragma unroll
  for (int nt = 0; nt < kDP / 8; ++nt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t key = k0 + 16 * kw + g + 8 * half;
      if (key >= p.seqlen_k) continue;
      const int col = kDP * part + 8 * nt + 2 * qd;
      *reinterpret_cast<uint32_t*>(dkp + key * b.dk_stride.row + col) =
          pack2<T>(dk[nt][2 * half] * p.softmax_scale, dk[nt][2 * half + 1] * p.softmax_scale);
      *reinterpret_cast<uint32_t*>(dvp + key * b.dv_stride.row + col) =
          pack2<T>(dv[nt][2 * half], dv[nt][2 * half + 1]);
    }
  }
}

template <int kHeadDim>
constexpr int smem_bytes() {
  return 2 * (2 * kBc * kHeadDim + 4 * kBr * kHeadDim + kBr * kBc) + 4 * kBr * 4;
}

std::string supports(const BwdParams& b) {
  const AttnParams& p = b.fwd;
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) {
    return "head_dim must be 64, 128 or 256 (got " + std::to_string(p.head_dim) + ")";
  }
  if (p.heads_kv > 65535 || p.batch > 65535) {
    return "H_kv and B must be <= 65535 (grid dimensions y and z)";
  }
  if (p.seqlen_q > (int64_t{1} << 30) || p.seqlen_k > (int64_t{1} << 30)) {
    return "Nq and Nk must be <= 2^30";
  }
  // The block's shared memory, against what this device gives a block.
  const int smem = p.head_dim == 64    ? smem_bytes<64>()
                   : p.head_dim == 128 ? smem_bytes<128>()
                                       : smem_bytes<256>();
  return shared_memory_refusal(smem, p.head_dim);
}

template <typename T, int kHeadDim>
void launch_typed(const BwdParams& b, cudaStream_t stream) {
  const AttnParams& p = b.fwd;
  char* ws = static_cast<char*>(b.workspace);
  float* dq_acc = reinterpret_cast<float*>(ws);
  float* d = reinterpret_cast<float*>(ws + dq_acc_bytes(p));
  float* l = reinterpret_cast<float*>(ws + dq_acc_bytes(p) + row_bytes(p));
  const int64_t rows_pad = p.batch * p.heads_q * padded_rows(p);
  dot_do_o<T, kHeadDim><<<static_cast<unsigned>((rows_pad + 3) / 4), 128, 0, stream>>>(
      b, dq_acc, d, l);
  FL_CHECK_LAUNCH();
  constexpr int kSmem = smem_bytes<kHeadDim>();
  FL_CUDA_CHECK(cudaFuncSetAttribute(bwd_main<T, kHeadDim>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(static_cast<unsigned>((p.seqlen_k + kBc - 1) / kBc),
                  static_cast<unsigned>(p.heads_kv), static_cast<unsigned>(p.batch));
  bwd_main<T, kHeadDim><<<grid, kThreads<kHeadDim>, kSmem, stream>>>(b, dq_acc, d, l);
  FL_CHECK_LAUNCH();
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  convert_dq<T, kHeadDim><<<static_cast<unsigned>((rows + 3) / 4), 128, 0, stream>>>(b, dq_acc);
}

void launch(const BwdParams& b, cudaStream_t stream) {
  dispatch_dtype(b.fwd.dtype, [&](auto t) {
    using T = decltype(t);
    if (b.fwd.head_dim == 64) {
      launch_typed<T, 64>(b, stream);
    } else if (b.fwd.head_dim == 128) {
      launch_typed<T, 128>(b, stream);
    } else {
      launch_typed<T, 256>(b, stream);
    }
  });
}

}  // namespace k31_bwd_contract

const KernelInfo& kernel_31() {
  static const KernelInfo info = [] {
    KernelInfo k;
    k.number = 31;
    k.slug = "bwd_contract";
    k.title = "backward: any lengths, causal, GQA summed in registers, d = 256";
    k.doc = "docs/kernels/31_bwd_contract.md";
    k.min_sm = 80;
    k.op = Op::backward;
    k.supports_backward = k31_bwd_contract::supports;
    k.launch_backward = k31_bwd_contract::launch;
    k.workspace = k31_bwd_contract::workspace;
    return k;
  }();
  return info;
}

}  // namespace fl
