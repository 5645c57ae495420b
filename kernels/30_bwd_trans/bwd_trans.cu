// =================================================================================================
// Kernel 30 of 36 — bwd_trans: transposed operands by ldmatrix.trans, Q and dO double-buffered
// builds on: 29 (bwd_loop)
// changes:   1. no transposed copies: K^T, Q^T, dO^T and dS are read from the tiles sK, sQ, sdO
//               and sdSt by ldmatrix .trans (the B operand of a [k][n] tile, the A operand of a
//               [k][m] tile), which transposes each 8 x 8 matrix on its way to the registers;
//               dS^T is stored as the warp holds it, two queries in one 32-bit store
//            2. the loads by cp.async into two stages of Q, dO, LSE and D: the copy of query
//               tile t + 1 is issued before the math of tile t and lands under it (K and V too,
//               once, with the first tile)
// expect:    the shared-memory stores of a tile's loads down from 8 per 16 bytes (and their bank
//            conflicts) to none through registers; faster than rung 29 at every shape
// supports:  fp16, bf16; d in {64, 128}; H_q == H_kv; not causal; Nq and Nk multiples of 64;
//            any strides (rows 16-byte aligned); the forward's LSE required
// doc:       docs/kernels/30_bwd_trans.md
// =================================================================================================
//
// Notation: a block owns keys [k0, k0 + 64) of head (b, h); warp w owns keys k0 + [16w, 16w + 16).
// For each query tile [q0, q0 + 64) (the inner loop):
//   S^T  = K_w Q^T            (16 keys x 64 queries per warp, fp32 accumulators)
//   P^T  = exp(scale S^T - LSE)   with LSE broadcast along the keys (a column per query)
//   dP^T = V_w dO^T
//   dS^T = P^T * (dP^T - D)
//   dV_w += P^T dO,  dK_w += dS^T Q          (16 keys x d each, in registers)
//   dQ   += dS K     (64 queries x d, every warp's keys: dS through shared memory)
// and, after the loop, dK = scale dK_w and dV = dV_w are stored. dQ's fp32 sum over every block
// of the head is scaled and rounded by the conversion pass.
//
// Shared memory (rows swizzled as in rung 06: element (r, c) of a tile with n columns at
// swizzle::offset(r, c, n)):
//   sK [64][d], sV [64][d]          the block's keys and values, loaded once
//   sQ [2][64][d], sdO [2][64][d]   two stages of the query tile and its dO
//   sL [2][64], sD [2][64]          two stages of the tile's LSE and D
//   sdSt [64][64]                   dS^T (keys x queries), the A operand of dQ by ldmatrix.trans
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
namespace k30_bwd_trans {

constexpr int kBr = 64;               // queries per tile of the inner loop
constexpr int kBc = 64;               // keys per block
constexpr int kWarps = kBc / 16;      // one warp per 16 keys
constexpr int kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f;

// The workspace: the fp32 dQ accumulator [B, H, Nq, d], then D [B, H, Nq], each 256-byte aligned.
int64_t round256(int64_t n) { return (n + 255) / 256 * 256; }
int64_t dq_acc_bytes(const AttnParams& p) {
  return round256(p.batch * p.heads_q * p.seqlen_q * p.head_dim * 4);
}
int64_t workspace(const AttnParams& p) {
  return dq_acc_bytes(p) + round256(p.batch * p.heads_q * p.seqlen_q * 4);
}

// Launch 1: one warp per query row: D = sum_c dO[c] O[c] in fp32, and the row of the dQ
// accumulator zeroed (the main kernel only adds to it).
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(128) dot_do_o(BwdParams b, float* dq_acc, float* d_out) {
  const AttnParams& p = b.fwd;
  const int64_t row = int64_t{blockIdx.x} * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.batch * p.heads_q * p.seqlen_q) return;
  const int64_t i = row % p.seqlen_q, h = (row / p.seqlen_q) % p.heads_q;
  const int64_t bi = row / (p.seqlen_q * p.heads_q);
  const T* o = static_cast<const T*>(p.o) + bi * p.o_stride.batch + h * p.o_stride.head +
               i * p.o_stride.row;
  const T* dout = static_cast<const T*>(b.dout) + bi * b.do_stride.batch +
                  h * b.do_stride.head + i * b.do_stride.row;
  float sum = 0.f;
  for (int c = lane * 2; c < kHeadDim; c += 64) {
    using Pair = typename TypeTraits<T>::pair;
    const float2 x = TypeTraits<T>::to_float2(*reinterpret_cast<const Pair*>(o + c));
    const float2 y = TypeTraits<T>::to_float2(*reinterpret_cast<const Pair*>(dout + c));
    sum += x.x * y.x + x.y * y.y;
  }
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
  if (lane == 0) d_out[row] = sum;
  float* acc = dq_acc + row * kHeadDim;
  for (int c = lane; c < kHeadDim; c += 32) acc[c] = 0.f;
}

// Launch 3: dQ = scale * the accumulator, rounded to T; one warp per row.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(128) convert_dq(BwdParams b, const float* dq_acc) {
  const AttnParams& p = b.fwd;
  const int64_t row = int64_t{blockIdx.x} * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.batch * p.heads_q * p.seqlen_q) return;
  const int64_t i = row % p.seqlen_q, h = (row / p.seqlen_q) % p.heads_q;
  const int64_t bi = row / (p.seqlen_q * p.heads_q);
  T* dq = static_cast<T*>(b.dq) + bi * b.dq_stride.batch + h * b.dq_stride.head +
          i * b.dq_stride.row;
  const float* acc = dq_acc + row * kHeadDim;
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
// global to shared memory (complete after cp_async::wait_group and a barrier).
template <typename T, int kRows, int kHeadDim>
__device__ __forceinline__ void copy_tile(uint32_t dst, const T* src, int64_t stride) {
  constexpr int kChunks = kHeadDim / 8;
#pragma unroll
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks * 8;
    ptx::cp_async::copy_16(dst + swizzle::byte_offset(r, c, kHeadDim), src + r * stride + c);
  }
}

// Issues the copies of 64 contiguous floats (a tile's LSE or D) to shared memory: 16 threads.
__device__ __forceinline__ void copy_row(uint32_t dst, const float* src, int first_thread) {
  const int t = threadIdx.x - first_thread;
  if (t >= 0 && t < 16) ptx::cp_async::copy_16(dst + 16 * t, src + 4 * t);
}

// Launch 2: grid (Nk / 64, H, B), 128 threads.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads) bwd_main(BwdParams b, const float* dq_acc_c,
                                                      const float* d_in) {
  constexpr int kD = kHeadDim;
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
  const int g = lane / 4, qd = lane % 4;  // row group and quad of the fragment layouts
  const int64_t bi = blockIdx.z, h = blockIdx.y, k0 = int64_t{blockIdx.x} * kBc;
  float* dq_acc = const_cast<float*>(dq_acc_c) + (bi * p.heads_q + h) * p.seqlen_q * kD;
  const float* d_row = d_in + (bi * p.heads_q + h) * p.seqlen_q;
  const float* lse = p.lse + (bi * p.heads_q + h) * p.seqlen_q;
  const float scale_log2 = p.softmax_scale * kLog2e;

  const T* q = static_cast<const T*>(p.q) + bi * p.q_stride.batch + h * p.q_stride.head;
  const T* dout = static_cast<const T*>(b.dout) + bi * b.do_stride.batch + h * b.do_stride.head;
  const uint32_t aK = ptx::smem_addr(sK), aV = ptx::smem_addr(sV);
  const uint32_t aQ = ptx::smem_addr(sQ), adO = ptx::smem_addr(sdO);
  const uint32_t adSt = ptx::smem_addr(sdSt);
  const uint32_t aL = ptx::smem_addr(sL), aD = ptx::smem_addr(sD);
  constexpr uint32_t kTileBytes = kBr * kD * 2, kRowBytes = kBr * 4;

  // Query tile t into stage t % 2: Q, dO, LSE, D in one cp.async group.
  auto issue = [&](int64_t t) {
    const int64_t q0 = t * kBr;
    const uint32_t st = static_cast<uint32_t>(t % 2);
    copy_tile<T, kBr, kD>(aQ + st * kTileBytes, q + q0 * p.q_stride.row, p.q_stride.row);
    copy_tile<T, kBr, kD>(adO + st * kTileBytes, dout + q0 * b.do_stride.row, b.do_stride.row);
    copy_row(aL + st * kRowBytes, lse + q0, 0);
    copy_row(aD + st * kRowBytes, d_row + q0, 32);
  };
  copy_tile<T, kBc, kD>(aK, static_cast<const T*>(p.k) + bi * p.k_stride.batch +
                                h * p.k_stride.head + k0 * p.k_stride.row,
                        p.k_stride.row);
  copy_tile<T, kBc, kD>(aV, static_cast<const T*>(p.v) + bi * p.v_stride.batch +
                                h * p.v_stride.head + k0 * p.v_stride.row,
                        p.v_stride.row);
  issue(0);
  ptx::cp_async::commit_group();  // group 0: K, V and query tile 0

  float dk[kD / 8][4] = {}, dv[kD / 8][4] = {};  // this warp's 16 keys x d
  const int64_t tiles = p.seqlen_q / kBr;

  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t q0 = t * kBr;
    const uint32_t st = static_cast<uint32_t>(t % 2);
    // Tile t + 1 into the other stage, which every warp left at the middle barrier of tile t - 1.
    if (t + 1 < tiles) issue(t + 1);
    ptx::cp_async::commit_group();  // (empty after the last tile: the count stays the same)
    ptx::cp_async::wait_group<1>();  // tile t's group has landed (this thread's copies)
    __syncthreads();  // everyone's copies; and every warp is done with the last tile's sdSt
    const uint32_t aQs = aQ + st * kTileBytes, adOs = adO + st * kTileBytes;
    const float* sLs = sL + st * kBr;
    const float* sDs = sD + st * kBr;

    // S^T = K_w Q^T and dP^T = V_w dO^T: 16 keys x 64 queries (8 n-tiles of 8 queries).
    float s[kBr / 8][4] = {}, dp[kBr / 8][4] = {};
#pragma unroll 1  // unrolled, the compiler hoists every slice's loads: 255 registers and spills
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t ak[4], av[4];
      load_a(ak, aK, kD, 16 * warp, 16 * kk);
      load_a(av, aV, kD, 16 * warp, 16 * kk);
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

    // P^T and dS^T in place of S^T and dP^T. Element e of n-tile nt is key g + 8 (e / 2),
    // query 8 nt + 2 qd + e % 2: its LSE and D are those of that query (a column).
#pragma unroll
    for (int nt = 0; nt < kBr / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * nt + 2 * qd + e % 2;
        s[nt][e] = ptx::ex2_approx(s[nt][e] * scale_log2 - sLs[col] * kLog2e);
        dp[nt][e] = s[nt][e] * (dp[nt][e] - sDs[col]);
      }
    }

    // dS^T to shared memory as the warp holds it: sdSt[key][query], queries 2 qd and 2 qd + 1
    // of an n-tile in one 32-bit store.
#pragma unroll
    for (int nt = 0; nt < kBr / 8; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        *reinterpret_cast<uint32_t*>(
            sdSt + swizzle::offset(16 * warp + g + 8 * half, 8 * nt + 2 * qd, kBr)) =
            pack2<T>(dp[nt][2 * half], dp[nt][2 * half + 1]);
      }
    }

    // dV_w += P^T dO and dK_w += dS^T Q: A from registers (query slices of 16), B from sdO and
    // sQ themselves ([queries][d]: row-major B) by ldmatrix .trans.
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
      for (int np = 0; np < kD / 16; ++np) {
        uint32_t bo[4], bq[4];
        load_b_trans(bo, adOs, kD, 16 * np, 16 * kk);
        load_b_trans(bq, aQs, kD, 16 * np, 16 * kk);
        ptx::mma_m16n8k16<T>(dv[2 * np], ap, {bo[0], bo[1]}, dv[2 * np]);
        ptx::mma_m16n8k16<T>(dv[2 * np + 1], ap, {bo[2], bo[3]}, dv[2 * np + 1]);
        ptx::mma_m16n8k16<T>(dk[2 * np], ads, {bq[0], bq[1]}, dk[2 * np]);
        ptx::mma_m16n8k16<T>(dk[2 * np + 1], ads, {bq[2], bq[3]}, dk[2 * np + 1]);
      }
    }
    __syncthreads();  // sdSt is whole; every warp is done with this stage of sQ and sdO

    // dQ rows [16 w, 16 w + 16) of the tile: dS (16 queries x 64 keys, from sdSt by .trans) K
    // (from sK by .trans), added to the accumulator, 64 dims at a time. Element e of n-tile nt
    // is query 16 w + g + 8 (e / 2), dim 64 dh + 8 nt + 2 qd + e % 2.
#pragma unroll 1  // unrolled at d = 128, 20 bytes spill
    for (int dh = 0; dh < kD / 64; ++dh) {
      float dq[8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        uint32_t a[4];
        load_a_trans(a, adSt, kBr, 16 * warp, 16 * kk);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t bk[4];
          load_b_trans(bk, aK, kD, 64 * dh + 16 * np, 16 * kk);
          ptx::mma_m16n8k16<T>(dq[2 * np], a, {bk[0], bk[1]}, dq[2 * np]);
          ptx::mma_m16n8k16<T>(dq[2 * np + 1], a, {bk[2], bk[3]}, dq[2 * np + 1]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t row = q0 + 16 * warp + g + 8 * (e / 2);
          ptx::red_global_add_f32(dq_acc + row * kD + 64 * dh + 8 * nt + 2 * qd + e % 2,
                                  dq[nt][e]);
        }
      }
    }
  }

  // dK = scale dK_w, dV = dV_w, rounded to T: keys k0 + 16 w + g (+ 8), dims 8 nt + 2 qd (+ 1).
  T* dkp = static_cast<T*>(b.dk) + bi * b.dk_stride.batch + h * b.dk_stride.head;
  T* dvp = static_cast<T*>(b.dv) + bi * b.dv_stride.batch + h * b.dv_stride.head;
#pragma unroll
  for (int nt = 0; nt < kD / 8; ++nt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t key = k0 + 16 * warp + g + 8 * half;
      const int col = 8 * nt + 2 * qd;
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
  if (p.head_dim != 64 && p.head_dim != 128) {
    return "head_dim must be 64 or 128 (got " + std::to_string(p.head_dim) + ")";
  }
  if (p.heads_q != p.heads_kv) return "H_q must equal H_kv (GQA needs rung 31)";
  if (p.heads_q > 65535 || p.batch > 65535) {
    return "H_q and B must be <= 65535 (grid dimensions y and z)";
  }
  if (p.causal) return "causal is not supported (it needs rung 31)";
  if (p.seqlen_q % kBr != 0 || p.seqlen_k % kBc != 0) {
    return "Nq and Nk must be multiples of 64 (got " + std::to_string(p.seqlen_q) + " and " +
           std::to_string(p.seqlen_k) + "; any length needs rung 31)";
  }
  // The block's shared memory, against what this device gives a block.
  const int smem = p.head_dim == 64 ? smem_bytes<64>() : smem_bytes<128>();
  return shared_memory_refusal(smem, p.head_dim);
}

template <typename T, int kHeadDim>
void launch_typed(const BwdParams& b, cudaStream_t stream) {
  const AttnParams& p = b.fwd;
  float* dq_acc = static_cast<float*>(b.workspace);
  float* d = reinterpret_cast<float*>(static_cast<char*>(b.workspace) + dq_acc_bytes(p));
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  const dim3 row_grid(static_cast<unsigned>((rows + 3) / 4));
  dot_do_o<T, kHeadDim><<<row_grid, 128, 0, stream>>>(b, dq_acc, d);
  FL_CHECK_LAUNCH();
  constexpr int kSmem = smem_bytes<kHeadDim>();
  FL_CUDA_CHECK(cudaFuncSetAttribute(bwd_main<T, kHeadDim>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(static_cast<unsigned>(p.seqlen_k / kBc), static_cast<unsigned>(p.heads_q),
                  static_cast<unsigned>(p.batch));
  bwd_main<T, kHeadDim><<<grid, kThreads, kSmem, stream>>>(b, dq_acc, d);
  FL_CHECK_LAUNCH();
  convert_dq<T, kHeadDim><<<row_grid, 128, 0, stream>>>(b, dq_acc);
}

void launch(const BwdParams& b, cudaStream_t stream) {
  dispatch_dtype(b.fwd.dtype, [&](auto t) {
    using T = decltype(t);
    if (b.fwd.head_dim == 64) {
      launch_typed<T, 64>(b, stream);
    } else {
      launch_typed<T, 128>(b, stream);
    }
  });
}

}  // namespace k30_bwd_trans

const KernelInfo& kernel_30() {
  static const KernelInfo info = [] {
    KernelInfo k;
    k.number = 30;
    k.slug = "bwd_trans";
    k.title =
        "backward: transposed operands by ldmatrix.trans, Q and dO double-buffered by cp.async";
    k.doc = "docs/kernels/30_bwd_trans.md";
    k.min_sm = 80;
    k.op = Op::backward;
    k.supports_backward = k30_bwd_trans::supports;
    k.launch_backward = k30_bwd_trans::launch;
    k.workspace = k30_bwd_trans::workspace;
    return k;
  }();
  return info;
}

}  // namespace fl
