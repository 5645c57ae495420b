// =================================================================================================
// Kernel 29 of 36 — bwd_loop: the backward pass, FlashAttention-2's loop on mma.sync
// builds on: 16 (final: mma.sync, ldmatrix, the swizzle) for the instructions; the first rung of
//            the backward track, which computes dQ, dK, dV from Q, K, V, O, the LSE and dO
// changes:   1. three launches: D = rowsum(dO * O) (and the fp32 dQ accumulator zeroed), the main
//               kernel, and the conversion of dQ from fp32 to the inputs' type
//            2. the main kernel's order: a block owns one tile of 64 keys (K, V loaded once, dK
//               and dV in registers for its life) and loops over every tile of 64 queries
//            3. P recomputed from the forward's LSE (no max, no row sum), transposed: each warp
//               computes S^T and dP^T for its 16 keys, so P^T and dS^T are already A fragments
//               of dV += P^T dO and dK += dS^T Q
//            4. dQ = dS K needs every warp's keys: dS goes through shared memory, and each block's
//               share of dQ is added to the fp32 accumulator with red.global.add.f32
//            5. the operands read transposed (K^T, Q^T, dO^T, dS) are transposed copies in shared
//               memory, written element by element when the tiles are loaded (synchronously,
//               through registers)
// expect:    correct gradients by the pass rule; slower than FlashAttention-2's backward (the
//            transposed copies, loads without overlap) — the rungs after it close the gap
// supports:  fp16, bf16; d in {64, 128}; H_q == H_kv; not causal; Nq and Nk multiples of 64;
//            any strides (rows 16-byte aligned); the forward's LSE required
// doc:       docs/kernels/29_bwd_loop.md
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
//   sK [64][d], sV [64][d]    the block's keys and values, loaded once
//   sKt [d][64]               K^T, the B operand of dQ = dS K
//   sQ [64][d], sdO [64][d]   the query tile and its dO
//   sQt [d][64], sdOt [d][64] their transposes, the B operands of dK and dV
//   sdS [64][64]              dS (queries x keys), the A operand of dQ
//   sL [64], sD [64]          the tile's LSE (times log2 e) and D
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype.cuh"
#include "common/ptx/ldmatrix.cuh"
#include "common/ptx/math.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/red.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/swizzle.cuh"
#include "common/registry.h"

namespace fl {
namespace k29_bwd_loop {

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

// Copies rows [0, kRows) of a row-major global tile (rows `stride` apart) into the swizzled shared
// tile `dst` [kRows][kHeadDim] and, when `dst_t` is not null, element by element into its
// transpose `dst_t` [kHeadDim][kRows]. Synchronous: 16 bytes a thread a step through registers.
template <typename T, int kRows, int kHeadDim>
__device__ __forceinline__ void load_tile(T* dst, T* dst_t, const T* src, int64_t stride) {
  constexpr int kChunks = kHeadDim / 8;
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks * 8;
    const uint4 v = *reinterpret_cast<const uint4*>(src + r * stride + c);
    *reinterpret_cast<uint4*>(dst + swizzle::offset(r, c, kHeadDim)) = v;
    if (dst_t != nullptr) {
      const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
      for (int j = 0; j < 8; ++j) dst_t[swizzle::offset(c + j, r, kRows)] = e[j];
    }
  }
}

// Launch 2: grid (Nk / 64, H, B), 128 threads.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads) bwd_main(BwdParams b, const float* dq_acc_c,
                                                      const float* d_in) {
  constexpr int kD = kHeadDim;
  extern __shared__ __align__(1024) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem);
  T* sV = sK + kBc * kD;
  T* sKt = sV + kBc * kD;
  T* sQ = sKt + kBc * kD;
  T* sdO = sQ + kBr * kD;
  T* sQt = sdO + kBr * kD;
  T* sdOt = sQt + kBr * kD;
  T* sdS = sdOt + kBr * kD;
  float* sL = reinterpret_cast<float*>(sdS + kBr * kBc);
  float* sD = sL + kBr;

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
  load_tile<T, kBc, kD>(sK, sKt, static_cast<const T*>(p.k) + bi * p.k_stride.batch +
                                     h * p.k_stride.head + k0 * p.k_stride.row,
                        p.k_stride.row);
  load_tile<T, kBc, kD>(sV, nullptr, static_cast<const T*>(p.v) + bi * p.v_stride.batch +
                                         h * p.v_stride.head + k0 * p.v_stride.row,
                        p.v_stride.row);

  const uint32_t aK = ptx::smem_addr(sK), aV = ptx::smem_addr(sV), aKt = ptx::smem_addr(sKt);
  const uint32_t aQ = ptx::smem_addr(sQ), adO = ptx::smem_addr(sdO);
  const uint32_t aQt = ptx::smem_addr(sQt), adOt = ptx::smem_addr(sdOt);
  const uint32_t adS = ptx::smem_addr(sdS);

  float dk[kD / 8][4] = {}, dv[kD / 8][4] = {};  // this warp's 16 keys x d

  for (int64_t q0 = 0; q0 < p.seqlen_q; q0 += kBr) {
    load_tile<T, kBr, kD>(sQ, sQt, q + q0 * p.q_stride.row, p.q_stride.row);
    load_tile<T, kBr, kD>(sdO, sdOt, dout + q0 * b.do_stride.row, b.do_stride.row);
    if (threadIdx.x < kBr) {
      sL[threadIdx.x] = lse[q0 + threadIdx.x] * kLog2e;
      sD[threadIdx.x] = d_row[q0 + threadIdx.x];
    }
    __syncthreads();  // the tiles are in; and every warp is done with the last tile's sdS

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
        load_b(bq, aQ, kD, 16 * np, 16 * kk);
        load_b(bo, adO, kD, 16 * np, 16 * kk);
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
        s[nt][e] = ptx::ex2_approx(s[nt][e] * scale_log2 - sL[col]);
        dp[nt][e] = s[nt][e] * (dp[nt][e] - sD[col]);
      }
    }

    // dS to shared memory, transposed: sdS[query][key], one 16-bit store per element.
#pragma unroll
    for (int nt = 0; nt < kBr / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sdS[swizzle::offset(8 * nt + 2 * qd + e % 2, 16 * warp + g + 8 * (e / 2), kBc)] =
            TypeTraits<T>::from_float(dp[nt][e]);
      }
    }

    // dV_w += P^T dO and dK_w += dS^T Q: A from registers (query slices of 16), B from the
    // transposed copies sdOt, sQt ([d][queries]).
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
        load_b(bo, adOt, kBr, 16 * np, 16 * kk);
        load_b(bq, aQt, kBr, 16 * np, 16 * kk);
        ptx::mma_m16n8k16<T>(dv[2 * np], ap, {bo[0], bo[1]}, dv[2 * np]);
        ptx::mma_m16n8k16<T>(dv[2 * np + 1], ap, {bo[2], bo[3]}, dv[2 * np + 1]);
        ptx::mma_m16n8k16<T>(dk[2 * np], ads, {bq[0], bq[1]}, dk[2 * np]);
        ptx::mma_m16n8k16<T>(dk[2 * np + 1], ads, {bq[2], bq[3]}, dk[2 * np + 1]);
      }
    }
    __syncthreads();  // sdS is whole; every warp is done with sQ, sdO and their transposes

    // dQ rows [16 w, 16 w + 16) of the tile: dS (16 queries x 64 keys) K, added to the
    // accumulator, 64 dims at a time (32 accumulators a thread, not d / 2). Element e of n-tile
    // nt is query 16 w + g + 8 (e / 2), dim 64 dh + 8 nt + 2 qd + e % 2.
#pragma unroll
    for (int dh = 0; dh < kD / 64; ++dh) {
      float dq[8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        uint32_t a[4];
        load_a(a, adS, kBc, 16 * warp, 16 * kk);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t bk[4];
          load_b(bk, aKt, kBc, 64 * dh + 16 * np, 16 * kk);
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
  return 2 * (3 * kBc * kHeadDim + 4 * kBr * kHeadDim + kBr * kBc) + 2 * kBr * 4;
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

}  // namespace k29_bwd_loop

const KernelInfo& kernel_29() {
  static const KernelInfo info = [] {
    KernelInfo k;
    k.number = 29;
    k.slug = "bwd_loop";
    k.title = "backward: FlashAttention-2's loop, P from the LSE, dQ by fp32 atomics";
    k.doc = "docs/kernels/29_bwd_loop.md";
    k.min_sm = 80;
    k.op = Op::backward;
    k.supports_backward = k29_bwd_loop::supports;
    k.launch_backward = k29_bwd_loop::launch;
    k.workspace = k29_bwd_loop::workspace;
    return k;
  }();
  return info;
}

}  // namespace fl
