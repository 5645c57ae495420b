// =================================================================================================
// Kernel 55 of 55 — bwd_split_barrier: the step's barrier split into an arrive and a wait
// builds on: 54 (bwd_one_barrier)
// changes:   1. the barrier after the stores of Pᵀ and dSᵀ becomes an mbarrier: each thread
//               arrives when its stores are in, and waits for everyone's only before dV and dK
//            2. between the two, the warp computes the previous step's dQ (its dSᵀ has been whole
//               since the last wait), so a warp that arrives early works instead of waiting
//            3. a second mbarrier says every warp's dQ of a step is done, and a step's stores into
//               a dSᵀ buffer wait for it (two steps on; expected to wait seldom)
//            the last step's dQ comes after the loop; nothing else changes
// expect:    the same mma, ldmatrix and stores; no block-wide barrier in the loop, so no barrier
//            stalls; faster than rung 54 at every shape
// supports:  fp16, bf16; d in {64, 128, 256}; any Nq, Nk >= 1; causal or not; GQA/MQA; any
//            strides (rows 16-byte aligned), both layouts; the forward's LSE required
// doc:       docs/kernels/55_bwd_split_barrier.md
// =================================================================================================
//
// Notation: a block owns keys [k0, k0 + Bc) of KV head (b, hk), Bc = 128 (64 at d = 256). For
// each query head h of the group (h = G hk + i, G = H_q / H_kv) and each query tile [q0, q0 +
// kBr) that sees one of the block's keys (the inner loop, one sequence of steps over the group;
// kBr = 128 at d = 64, 64 otherwise), with warp w's key group kw = w % 4 (keys k0 + Bc / 4 kw +
// [0, Bc / 4)) and half w / 4:
//   Sᵀ   = K_kw Q_half^T          (Bc / 4 keys x kBr / 2 queries per warp, fp32 accumulators)
//   Pᵀ   = exp(scale Sᵀ - LSE)   with LSE broadcast along the keys (a column per query)
//   dPᵀ  = V_kw dO_half^T
//   dSᵀ  = Pᵀ * (dPᵀ - D)        Pᵀ and dSᵀ stored to shared memory
//   dV_w += Pᵀ_kw dO,  dK_w += dSᵀ_kw Q      (Bc / 4 keys x d / 2 per warp, in registers)
//   dQ   += dS K     (kBr queries x d: warp w has queries 32 (w % M) + [0, 32), M = kBr / 32,
//                     and d M / 8 dims)
// and, after the loop, dK = scale dK_w and dV = dV_w are stored. dQ's fp32 sum over every block
// of the head is scaled and rounded by the conversion pass.
//
// Shared memory (rows swizzled as in rung 06: element (r, c) of a tile with n columns at
// swizzle::offset(r, c, n)):
//   sK [Bc][d], sV [Bc][d]              the block's keys and values, loaded once
//   sQ [2][kBr][d], sdO [2][kBr][d]     two stages of the query tile and its dO
//   sL [2][kBr], sD [2][kBr]            two stages of the tile's LSE (times log2 e, padded) and D
//   sPt [2][Bc][kBr], sdSt [2][Bc][kBr] Pᵀ and dSᵀ (keys x queries), step n's in buffer n % 2:
//                                       A operands of dV and dK, and (dSᵀ by ldmatrix.trans) of dQ
//   full [2]                            an mbarrier a stage: every thread's copies have landed
//   stored, dq_done                     mbarriers: every thread's Pᵀ and dSᵀ of the step are in;
//                                       every warp's dQ of the step has read its dSᵀ
//
// The workspace, per (b, h) and rows padded to whole tiles (Nq_pad = kBr ceil(Nq / kBr)), each
// part 256-byte aligned: the fp32 dQ accumulator (B H_q Nq_pad d floats, in fragment order:
// acc_at), D [B, H_q, Nq_pad] and L = LSE log2 e [B, H_q, Nq_pad], with L = +inf on the padding
// and where LSE = -inf.
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
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/red.cuh"
#include "common/ptx/smem.cuh"
#include "common/ptx/swizzle.cuh"
#include "common/registry.h"

namespace fl {
namespace k55_bwd_split_barrier {

// Queries per tile of the inner loop: 128 at d = 64, where the registers and shared memory allow
// it, 64 otherwise.
__host__ __device__ constexpr int br_of(int head_dim) { return head_dim == 64 ? 128 : 64; }
template <int kHeadDim>
constexpr int kBr = br_of(kHeadDim);
constexpr int kThreads = 256;  // eight warps
constexpr float kLog2e = 1.4426950408889634f;
// Keys per block: 128, or 64 at d = 256 (shared memory); a warp's key group is a quarter of them.
template <int kHeadDim>
constexpr int kBc = kHeadDim == 256 ? 64 : 128;

int64_t round256(int64_t n) { return (n + 255) / 256 * 256; }
// Nq padded to whole tiles of the head dim's kBr (the kernels pass the constant).
__host__ __device__ inline int64_t padded_rows(const AttnParams& p, int br) {
  return (p.seqlen_q + br - 1) / br * br;
}
int64_t padded_rows(const AttnParams& p) { return padded_rows(p, br_of(p.head_dim)); }
int64_t dq_acc_bytes(const AttnParams& p) {
  return round256(p.batch * p.heads_q * padded_rows(p) * p.head_dim * 4);
}
int64_t row_bytes(const AttnParams& p) {
  return round256(p.batch * p.heads_q * padded_rows(p) * 4);
}
int64_t workspace(const AttnParams& p) { return dq_acc_bytes(p) + 2 * row_bytes(p); }

// The dQ accumulator in fragment order: 16-row x 8-dim tiles (row tile major, rows counted over
// every (b, h), padded), and in a tile the four floats that lane 4 g + qd of an m16n8 accumulator
// holds (rows g and g + 8, dims 2 qd and 2 qd + 1, in the mma's register order) at 4 (4 g + qd).
// Element (r, c) of the accumulator sits at:
__host__ __device__ inline int64_t acc_at(int64_t r, int c, int d) {
  return ((r / 16 * (d / 8) + c / 8) * 32 + r % 8 * 4 + c % 8 / 2) * 4 + r % 16 / 8 * 2 + c % 2;
}

// Launch 1: one warp per padded query row: D = sum_c dO[c] O[c] in fp32 and L = LSE log2 e
// (0 and +inf past Nq; +inf where LSE = -inf), and the row of the dQ accumulator zeroed.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(128) dot_do_o(BwdParams b, float* dq_acc, float* d_out,
                                                float* l_out) {
  const AttnParams& p = b.fwd;
  const int64_t rows_pad = padded_rows(p, kBr<kHeadDim>);
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
  float* acc = dq_acc + row * kHeadDim;  // a row's worth of the accumulator, in any order
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
  const int64_t r = bh * padded_rows(p, kBr<kHeadDim>) + i;
  for (int c = lane * 2; c < kHeadDim; c += 64) {
    const float2 v = *reinterpret_cast<const float2*>(dq_acc + acc_at(r, c, kHeadDim));
    *reinterpret_cast<typename TypeTraits<T>::pair*>(dq + c) =
        TypeTraits<T>::from_float2(v.x * p.softmax_scale, v.y * p.softmax_scale);
  }
}

// Every shared-memory address of a step is a thread's address for slice 0 and a constant. In a
// swizzled tile of d columns, rows of 2d bytes (128, 256 or 512: a power of two, tiles aligned
// to it), logical 16-byte chunk c of row r is stored at chunk c ^ (r % 8). Two facts make the
// fragment loads cheap:
//   - moving 8 rows (any multiple of 8) keeps r % 8: the address moves by a constant;
//   - moving the columns by 16 j (two chunks a slice) XORs the address with 32 j: chunk
//     2 j + x of a lane (x < 2) is (2 j) ^ x, so its swizzled chunk is (2 j) ^ (x ^ r % 8), and
//     the XOR touches bits 5-8 of the byte address only, below the row.
// lane_a, lane_b, lane_bt and lane_at below are the lane's byte offset for the first fragment
// of the four ldmatrix patterns (rung 32's load_a, load_b, load_b_trans, load_a_trans).

// A 16 x 16 A fragment of a row-major tile (rows m0 + lane % 16, columns + 8 (lane / 16)).
__device__ __forceinline__ uint32_t lane_a(int n, int m0) {
  const int lane = threadIdx.x % 32;
  return swizzle::byte_offset(m0 + lane % 16, lane / 16 * 8, n);
}
// The B fragments of two n-tiles from a tile stored [n][k] (registers {0, 1} n-tile 0's).
__device__ __forceinline__ uint32_t lane_b(int n, int n0) {
  const int lane = threadIdx.x % 32;
  return swizzle::byte_offset(n0 + lane / 16 * 8 + lane % 8, lane / 8 % 2 * 8, n);
}
// The same from a tile stored [k][n], by ldmatrix .trans (rows are k).
__device__ __forceinline__ uint32_t lane_bt(int n, int n0) {
  const int lane = threadIdx.x % 32;
  return swizzle::byte_offset(lane / 8 % 2 * 8 + lane % 8, n0 + lane / 16 * 8, n);
}
// The A fragment (rows m0..) from a tile stored [k][m], by ldmatrix .trans.
__device__ __forceinline__ uint32_t lane_at(int n, int m0) {
  const int lane = threadIdx.x % 32;
  return swizzle::byte_offset(lane / 16 * 8 + lane % 8, m0 + lane / 8 % 2 * 8, n);
}

// Copies rows [0, kRows) of a row-major global tile (rows `stride` apart) into the swizzled
// shared tile at `dst`, 16 bytes a thread a step; rows >= `valid` are zero-filled (0 source
// bytes, read from row 0). Used once a block, for K and V.
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

// A thread's share of the copy of a kBr-row tile of Q or dO, every step: kPasses chunks, rows
// kRowsPer apart in the same 16-byte column. `at` points at the thread's first chunk in the
// current tile; a step moves it by kBr rows, a new head sets it again.
template <typename T, int kHeadDim>
struct TileCopy {
  static constexpr int kChunks = kHeadDim / 8, kRowsPer = kThreads / kChunks;
  static constexpr int kPasses = kBr<kHeadDim> / kRowsPer;
  const T* at;
  int64_t pass;  // kRowsPer rows of the tensor
  __device__ __forceinline__ void issue(uint32_t dst, const void* row0, int valid) const {
    const int r = threadIdx.x / kChunks;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const bool in = r + i * kRowsPer < valid;
      ptx::cp_async::copy_16(dst + i * kRowsPer * kHeadDim * 2,
                             in ? static_cast<const void*>(at + i * pass) : row0,
                             in ? 16 : 0);
    }
  }
};

// Issues the copies of kRows contiguous floats (a tile's L or D, padded: always whole) to shared
// memory: kRows / 4 threads.
template <int kRows>
__device__ __forceinline__ void copy_row(uint32_t dst, const float* src, int first_thread) {
  const int t = threadIdx.x - first_thread;
  if (t >= 0 && t < kRows / 4) ptx::cp_async::copy_16(dst + 16 * t, src + 4 * t);
}

// Launch 2: grid (ceil(Nk / Bc), H_kv, B), 256 threads.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads) bwd_main(BwdParams b, const float* dq_acc_c,
                                                     const float* d_in, const float* l_in) {
  constexpr int kD = kHeadDim, kT = kThreads;
  constexpr int kBc = k55_bwd_split_barrier::kBc<kHeadDim>;
  constexpr int kKW = kBc / 4, kMT = kKW / 16;  // a warp's keys, in 16-row tiles
  constexpr int kBr = k55_bwd_split_barrier::kBr<kHeadDim>, kWQ = kBr / 2;  // a warp's queries
  constexpr int kNT = kWQ / 8;                  // ... in n-tiles of 8
  constexpr int kDV = kD / 2;                   // a warp's dims of dK and dV
  constexpr int kMQ = kBr / 32;                 // dQ: warps along the queries, 32 each
  constexpr int kDQ = kD / (8 / kMQ);           // a warp's dims of dQ
  constexpr uint32_t kRow = kD * 2;             // bytes a row of sK, sV, sQ, sdO
  constexpr uint32_t kPRow = kBr * 2;           // bytes a row of sPt, sdSt
  extern __shared__ __align__(1024) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem);
  T* sV = sK + kBc * kD;
  T* sQ = sV + kBc * kD;          // [2][kBr][kD]
  T* sdO = sQ + 2 * kBr * kD;     // [2][kBr][kD]
  T* sPt = sdO + 2 * kBr * kD;    // [2][kBc][kBr]
  T* sdSt = sPt + 2 * kBc * kBr;  // [2][kBc][kBr]
  float* sL = reinterpret_cast<float*>(sdSt + 2 * kBc * kBr);  // [2][kBr]
  float* sD = sL + 2 * kBr;                                     // [2][kBr]
  // mbarriers: full [2] (a stage has landed), stored (every thread's Pᵀ and dSᵀ of the step are
  // in), dq_done (every warp's dQ of the step has read its dSᵀ)
  uint64_t* sFull = reinterpret_cast<uint64_t*>(sD + 2 * kBr);

  const AttnParams& p = b.fwd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kw = warp % 4, half = warp / 4;  // key group; half of the queries (Sᵀ), of d (dK, dV)
  const int mq = warp % kMQ, wdq = warp / kMQ;  // dQ: 32 queries, a share of d
  const int g = lane / 4, qd = lane % 4;     // row group and quad of the fragment layouts
  const int64_t bi = blockIdx.z, hk = blockIdx.y, k0 = int64_t{blockIdx.x} * kBc;
  const int64_t group = p.heads_q / p.heads_kv, rows_pad = padded_rows(p, kBr);
  const float scale_log2 = p.softmax_scale * kLog2e;
  const int64_t diag = p.seqlen_k - p.seqlen_q;  // query i sees key j iff j <= i + diag

  // The query tiles that see a key of the block: from t0 (causal: the first tile with a row
  // i >= k0 - diag) to the last; each query head of the group walks them.
  const int64_t tiles = rows_pad / kBr;
  const int64_t t0 = p.causal ? (k0 - diag > 0 ? (k0 - diag) / kBr : 0) : 0;
  const int64_t steps = group * (tiles > t0 ? tiles - t0 : 0);

  const uint32_t aK = ptx::smem_addr(sK), aV = ptx::smem_addr(sV);
  const uint32_t aQ = ptx::smem_addr(sQ), adO = ptx::smem_addr(sdO);
  const uint32_t aPt = ptx::smem_addr(sPt), adSt = ptx::smem_addr(sdSt);
  const uint32_t aL = ptx::smem_addr(sL), aD = ptx::smem_addr(sD);
  constexpr uint32_t kTileBytes = kBr * kD * 2, kRowBytes = kBr * 4, kPBytes = kBc * kBr * 2;
  const uint32_t aFull = ptx::smem_addr(sFull), aStored = aFull + 16, aDqDone = aFull + 24;

  // The copies of a step, made once: the thread's chunk of Q and dO (and its place in the
  // stage), moved by a tile a step; the row of L and D the tile starts at.
  using Copy = TileCopy<T, kD>;
  const int cr = threadIdx.x / Copy::kChunks, cc = threadIdx.x % Copy::kChunks * 8;
  const uint32_t c_off = swizzle::byte_offset(cr, cc, kD);
  const T* q_base = static_cast<const T*>(p.q) + bi * p.q_stride.batch + cr * p.q_stride.row + cc;
  const T* do_base =
      static_cast<const T*>(b.dout) + bi * b.do_stride.batch + cr * b.do_stride.row + cc;
  Copy cq{nullptr, Copy::kRowsPer * p.q_stride.row};
  Copy cdo{nullptr, Copy::kRowsPer * b.do_stride.row};
  int64_t ih = group * hk, iq = t0 * kBr, irow = 0;  // the step to issue: head, tile, L/D row
  auto point = [&]() {  // the copies at (ih, iq)
    cq.at = q_base + ih * p.q_stride.head + iq * p.q_stride.row;
    cdo.at = do_base + ih * b.do_stride.head + iq * b.do_stride.row;
    irow = (bi * p.heads_q + ih) * rows_pad + iq;
  };
  auto issue = [&](uint32_t st) {
    const int valid = static_cast<int>(min(p.seqlen_q - iq, int64_t{kBr}));
    cq.issue(aQ + st * kTileBytes + c_off, p.q, valid);
    cdo.issue(adO + st * kTileBytes + c_off, b.dout, valid);
    copy_row<kBr>(aL + st * kRowBytes, l_in + irow, 0);
    copy_row<kBr>(aD + st * kRowBytes, d_in + irow, 32);
  };
  auto advance = [&]() {  // to the next step's tile: kBr rows on, or the next head's first
    iq += kBr;
    irow += kBr;
    cq.at += kBr * p.q_stride.row;
    cdo.at += kBr * b.do_stride.row;
    if (iq >= rows_pad) {
      ++ih;
      iq = t0 * kBr;
      point();
    }
  };

  if (threadIdx.x == 0) {
    ptx::mbarrier::init(aFull, kT);
    ptx::mbarrier::init(aFull + 8, kT);
    ptx::mbarrier::init(aStored, kT);
    ptx::mbarrier::init(aDqDone, kT);
  }
  __syncthreads();  // the barriers are set before anyone arrives

  const int64_t keys = p.seqlen_k - k0;
  copy_tile<T, kBc, kD, kT>(aK, static_cast<const T*>(p.k) + bi * p.k_stride.batch +
                                    hk * p.k_stride.head + k0 * p.k_stride.row,
                            p.k_stride.row, keys);
  copy_tile<T, kBc, kD, kT>(aV, static_cast<const T*>(p.v) + bi * p.v_stride.batch +
                                    hk * p.v_stride.head + k0 * p.v_stride.row,
                            p.v_stride.row, keys);
  point();
  if (steps > 0) issue(0);
  ptx::cp_async::mbarrier_arrive_noinc(aFull);  // K, V and step 0 landed: stage 0's first phase

  // The lane's fragment addresses for slice 0 (see lane_a above); a 16-row tile further is a
  // constant on, a slice kk is XOR 32 kk.
  //   Sᵀ, dPᵀ: A = the warp's keys of sK, sV; B = the warp's 32 queries of sQ, sdO.
  //   dV, dK:  A = the warp's keys of sPt, sdSt; B = sdO, sQ by .trans, dims of the warp's half.
  //   dQ:      A = dS by .trans of sdSt, the warp's 32 queries; B = sK by .trans.
  const uint32_t fa_k = aK + lane_a(kD, kKW * kw), fa_v = aV + lane_a(kD, kKW * kw);
  const uint32_t fb = lane_b(kD, kWQ * half);
  const uint32_t fa_p = aPt + lane_a(kBr, kKW * kw), fa_ds = adSt + lane_a(kBr, kKW * kw);
  const uint32_t fbt = lane_bt(kD, kDV * half);
  const uint32_t fdq_a = adSt + lane_at(kBr, 32 * mq);
  // Pᵀ's and dSᵀ's 32-bit stores: element (kKW kw + 16 m + g + 8 h, kWQ half + 8 nt + 2 qd) of
  // a [Bc][kBr] tile sits at st0 + (16 m + 8 h) kBr, XOR 8 nt (the row's chunk kWQ / 8 half + nt,
  // XOR g).
  const int st0 = (kKW * kw + g) * kBr + ((kWQ / 8 * half) ^ g) * 8 + 2 * qd;

  float dk[kMT][kDV / 8][4] = {}, dv[kMT][kDV / 8][4] = {};  // kKW keys x d / 2

  // dQ of a step whose dSᵀ is in buffer buf (a byte offset) and whose first row is `row`:
  // rows [32 mq, 32 mq + 32) of the tile (two 16-row tiles), kDQ dims from kDQ wdq: dS (from
  // sdSt by .trans, tile mt at XOR 32 mt) K (from sK by .trans), kC dims at a time. Element e
  // of n-tile nt of row tile mt is the step's query 32 mq + 16 mt + g + 8 (e / 2), dim c0 + 8 nt
  // + 2 qd + e % 2 (rows past Nq land in the padding, which nobody reads). Slice kk is 16 keys
  // on in both tiles: a constant.
  constexpr int kC = kDQ < 32 ? kDQ : 32;
  auto dq_step = [&](uint32_t buf, int64_t row) {
#pragma unroll 1
    for (int c0 = kDQ * wdq; c0 < kDQ * (wdq + 1); c0 += kC) {
      float dq[2][kC / 8][4] = {};
      const uint32_t fk = aK + lane_bt(kD, c0);
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        uint32_t a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          ptx::ldmatrix_x4_trans(a[mt], ((fdq_a + buf) ^ (32 * mt)) + kk * 16 * kPRow);
        }
#pragma unroll
        for (int np = 0; np < kC / 16; ++np) {
          uint32_t bk[4];
          ptx::ldmatrix_x4_trans(bk, (fk ^ (32 * np)) + kk * 16 * kRow);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            ptx::mma_m16n8k16<T>(dq[mt][2 * np], a[mt], {bk[0], bk[1]}, dq[mt][2 * np]);
            ptx::mma_m16n8k16<T>(dq[mt][2 * np + 1], a[mt], {bk[2], bk[3]}, dq[mt][2 * np + 1]);
          }
        }
      }
      // Each n-tile's four floats go out as they are, one v4 a lane: a warp's 512 contiguous
      // bytes (acc_at), the next n-tile 128 floats on, the next row tile d / 8 times that.
      float* at0 = const_cast<float*>(dq_acc_c) + acc_at(row + 32 * mq, c0, kD) + 4 * lane;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kC / 8; ++nt) {
          float* at = at0 + (mt * (kD / 8) + nt) * 128;
          const float4 v = make_float4(dq[mt][nt][0], dq[mt][nt][1], dq[mt][nt][2], dq[mt][nt][3]);
#if __CUDA_ARCH__ >= 900
          ptx::red_global_add_v4_f32(at, v);
#else
          ptx::red_global_add_f32(at, v.x);
          ptx::red_global_add_f32(at + 1, v.y);
          ptx::red_global_add_f32(at + 2, v.z);
          ptx::red_global_add_f32(at + 3, v.w);
#endif
        }
      }
    }
  };
  uint32_t buf_prev = 0;  // step n - 1's dSᵀ and first row
  int64_t row_prev = 0;

  for (int64_t n = 0; n < steps; ++n) {
    const uint32_t st = static_cast<uint32_t>(n % 2), buf = st * kPBytes;
    const int64_t row_n = irow, q0 = iq;  // step n's first row of L, D and dQ; its tile
    // Every thread's copies of step n have landed (the stage's (n / 2)-th phase).
    ptx::mbarrier::wait(aFull + 8 * st, static_cast<uint32_t>(n / 2 % 2));
    const uint32_t aQs = aQ + st * kTileBytes, adOs = adO + st * kTileBytes;
    const float* sLs = sL + st * kBr + kWQ * half;
    const float* sDs = sD + st * kBr + kWQ * half;

    // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ on the warp's kKW keys x kWQ queries (kNT n-tiles of 8), one
    // product at a time in the source. Every k-loop of the step is unrolled whole: ptxas loads
    // the next slices' fragments under this slice's mma (and interleaves the two products
    // itself), and each slice's XOR is a constant.
    float s[kMT][kNT][4] = {}, dp[kMT][kNT][4] = {};
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint32_t x = 32 * kk;
      uint32_t a[kMT][4], bq[kNT / 2][4];
#pragma unroll
      for (int m = 0; m < kMT; ++m) ptx::ldmatrix_x4(a[m], (fa_k ^ x) + m * 16 * kRow);
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) ptx::ldmatrix_x4(bq[np], ((aQs + fb) ^ x) + np * 16 * kRow);
#pragma unroll
      for (int m = 0; m < kMT; ++m) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          ptx::mma_m16n8k16<T>(s[m][nt], a[m], {bq[nt / 2][nt % 2 * 2], bq[nt / 2][nt % 2 * 2 + 1]},
                               s[m][nt]);
        }
      }
    }
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint32_t x = 32 * kk;
      uint32_t a[kMT][4], bo[kNT / 2][4];
#pragma unroll
      for (int m = 0; m < kMT; ++m) ptx::ldmatrix_x4(a[m], (fa_v ^ x) + m * 16 * kRow);
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) ptx::ldmatrix_x4(bo[np], ((adOs + fb) ^ x) + np * 16 * kRow);
#pragma unroll
      for (int m = 0; m < kMT; ++m) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          ptx::mma_m16n8k16<T>(dp[m][nt], a[m],
                               {bo[nt / 2][nt % 2 * 2], bo[nt / 2][nt % 2 * 2 + 1]}, dp[m][nt]);
        }
      }
    }

    // Pᵀ and dSᵀ in place of Sᵀ and dPᵀ. Element e of tile (m, nt) is key k0 + kKW kw + 16 m +
    // g + 8 (e / 2), query q0 + kWQ half + 8 nt + 2 qd + e % 2: its L and D are those of that
    // query (a column, two of them read as one float2). A tile that crosses the causal
    // diagonal (a key above some row's last) or holds keys past Nk masks P (zero K rows give
    // S = 0, and exp(-LSE) may overflow).
    const bool masked = (p.causal && k0 + kBc - 1 > q0 + diag) || k0 + kBc > p.seqlen_k;
    // In 32 bits, relative to the tile: key k0 + r is visible to query q0 + c iff r < r_end and
    // (not causal or r <= c + c_off).
    const int r_end = static_cast<int>(min(p.seqlen_k - k0, int64_t{kBc}));
    const int c_off =
        p.causal ? static_cast<int>(max(min(q0 + diag - k0, int64_t{kBc}), -int64_t{2 * kBr}))
                 : kBc;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const float2 l2 = *reinterpret_cast<const float2*>(sLs + 8 * nt + 2 * qd);
      const float2 d2 = *reinterpret_cast<const float2*>(sDs + 8 * nt + 2 * qd);
#pragma unroll
      for (int m = 0; m < kMT; ++m) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float pr = ptx::ex2_approx(s[m][nt][e] * scale_log2 - (e % 2 ? l2.y : l2.x));
          s[m][nt][e] = pr;
          dp[m][nt][e] = pr * (dp[m][nt][e] - (e % 2 ? d2.y : d2.x));
        }
      }
    }
    // The mask, on the tiles that need it only (the branch is the block's): P and dS = 0 set,
    // not multiplied, over whatever the unmasked formula gave there (inf or NaN included).
    if (masked) {
#pragma unroll
      for (int m = 0; m < kMT; ++m) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = kWQ * half + 8 * nt + 2 * qd + e % 2;
            const int r = kKW * kw + 16 * m + g + 8 * (e / 2);
            if (r >= r_end || r > col + c_off) s[m][nt][e] = dp[m][nt][e] = 0.f;
          }
        }
      }
    }

    // Step n - 2's dQ, the last reader of this buffer's dSᵀ, is done in every warp (its phase
    // n - 2; each warp did that dQ right after its arrival a step ago, so this should seldom
    // wait, which is not measured).
    if (n >= 2) ptx::mbarrier::wait(aDqDone, static_cast<uint32_t>(n % 2));
    // Pᵀ and dSᵀ to shared memory as the warp holds them: [key][query], queries 2 qd and
    // 2 qd + 1 of an n-tile in one 32-bit store.
#pragma unroll
    for (int m = 0; m < kMT; ++m) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int at = (st0 + (16 * m + 8 * h) * kBr) ^ (8 * nt);
          *reinterpret_cast<uint32_t*>(sPt + buf / 2 + at) =
              pack2<T>(s[m][nt][2 * h], s[m][nt][2 * h + 1]);
          *reinterpret_cast<uint32_t*>(sdSt + buf / 2 + at) =
              pack2<T>(dp[m][nt][2 * h], dp[m][nt][2 * h + 1]);
        }
      }
    }
    // The block-wide barrier split in two: this thread's stores are in (arrive) ...
    ptx::mbarrier::arrive(aStored);
    // ... and, before waiting for everyone's, step n - 1's dQ, which needs only step n - 1's
    // dSᵀ (whole since the last wait).
    if (n >= 1) {
      dq_step(buf_prev, row_prev);
      ptx::mbarrier::arrive(aDqDone);
    }
    buf_prev = buf;
    row_prev = row_n;
    ptx::mbarrier::wait(aStored, static_cast<uint32_t>(n % 2));  // sPt and sdSt are whole;
    // every warp is done with step n - 1's Sᵀ, dPᵀ, dV and dK
    // Step n + 1 into the other stage, which step n - 1 left at the barrier above.
    advance();
    if (n + 1 < steps) {
      issue(st ^ 1);
      ptx::cp_async::mbarrier_arrive_noinc(aFull + 8 * (st ^ 1));
    }

    // dV_w += Pᵀ dO and dK_w += dSᵀ Q: the warp's keys x its half of d, over the 64 queries
    // (4 slices). A from sPt and sdSt (slice kk at XOR 32 kk), B from sdO and sQ by .trans
    // (slice kk 16 rows on, a constant; n-tile pair np at XOR 32 np).
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) {
      uint32_t ap[kMT][4], ads[kMT][4];
#pragma unroll
      for (int m = 0; m < kMT; ++m) {
        ptx::ldmatrix_x4(ap[m], ((fa_p + buf) ^ (32 * kk)) + m * 16 * kPRow);
        ptx::ldmatrix_x4(ads[m], ((fa_ds + buf) ^ (32 * kk)) + m * 16 * kPRow);
      }
#pragma unroll
      for (int np = 0; np < kDV / 16; ++np) {
        uint32_t bo[4], bq[4];
        ptx::ldmatrix_x4_trans(bo, ((adOs + fbt) ^ (32 * np)) + kk * 16 * kRow);
        ptx::ldmatrix_x4_trans(bq, ((aQs + fbt) ^ (32 * np)) + kk * 16 * kRow);
#pragma unroll
        for (int m = 0; m < kMT; ++m) {
          ptx::mma_m16n8k16<T>(dv[m][2 * np], ap[m], {bo[0], bo[1]}, dv[m][2 * np]);
          ptx::mma_m16n8k16<T>(dv[m][2 * np + 1], ap[m], {bo[2], bo[3]}, dv[m][2 * np + 1]);
          ptx::mma_m16n8k16<T>(dk[m][2 * np], ads[m], {bq[0], bq[1]}, dk[m][2 * np]);
          ptx::mma_m16n8k16<T>(dk[m][2 * np + 1], ads[m], {bq[2], bq[3]}, dk[m][2 * np + 1]);
        }
      }
    }

  }

  if (steps > 0) dq_step(buf_prev, row_prev);  // the last step's

  // dK = scale dK_w, dV = dV_w, rounded to T: keys k0 + kKW kw + 16 m + g (+ 8) below Nk, dims
  // kDV half + 8 nt + 2 qd (+ 1). A block whose keys no query sees (causal) stores zeros.
  T* dkp = static_cast<T*>(b.dk) + bi * b.dk_stride.batch + hk * b.dk_stride.head;
  T* dvp = static_cast<T*>(b.dv) + bi * b.dv_stride.batch + hk * b.dv_stride.head;
#pragma unroll
  for (int m = 0; m < kMT; ++m) {
#pragma unroll
    for (int nt = 0; nt < kDV / 8; ++nt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t key = k0 + kKW * kw + 16 * m + g + 8 * h;
        if (key >= p.seqlen_k) continue;
        const int col = kDV * half + 8 * nt + 2 * qd;
        *reinterpret_cast<uint32_t*>(dkp + key * b.dk_stride.row + col) = pack2<T>(
            dk[m][nt][2 * h] * p.softmax_scale, dk[m][nt][2 * h + 1] * p.softmax_scale);
        *reinterpret_cast<uint32_t*>(dvp + key * b.dv_stride.row + col) =
            pack2<T>(dv[m][nt][2 * h], dv[m][nt][2 * h + 1]);
      }
    }
  }
}

template <int kHeadDim>
constexpr int smem_bytes() {
  constexpr int kBc = k55_bwd_split_barrier::kBc<kHeadDim>;
  constexpr int kBr = k55_bwd_split_barrier::kBr<kHeadDim>;
  return 2 * (2 * kBc * kHeadDim + 4 * kBr * kHeadDim + 4 * kBr * kBc) + 4 * kBr * 4 + 32;
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
  constexpr int kBc = k55_bwd_split_barrier::kBc<kHeadDim>;
  const dim3 grid(static_cast<unsigned>((p.seqlen_k + kBc - 1) / kBc),
                  static_cast<unsigned>(p.heads_kv), static_cast<unsigned>(p.batch));
  bwd_main<T, kHeadDim><<<grid, kThreads, kSmem, stream>>>(b, dq_acc, d, l);
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

}  // namespace k55_bwd_split_barrier

const KernelInfo& kernel_55() {
  static const KernelInfo info = [] {
    KernelInfo k;
    k.number = 55;
    k.slug = "bwd_split_barrier";
    k.title = "backward: the step's barrier split into an arrive and a wait (the previous step's dQ between)";
    k.doc = "docs/kernels/55_bwd_split_barrier.md";
    k.min_sm = 80;
    k.op = Op::backward;
    k.supports_backward = k55_bwd_split_barrier::supports;
    k.launch_backward = k55_bwd_split_barrier::launch;
    k.workspace = k55_bwd_split_barrier::workspace;
    return k;
  }();
  return info;
}

}  // namespace fl
