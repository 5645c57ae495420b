// Rung 27's work items: rung 26's schedule, copied unchanged (which query tile of which head an
// item is, which KV tiles it visits and masks, which items a block takes). tests/test_schedule26.cu
// checks rung 26's copy on the CPU against a brute force; this one differs only in its namespace.
// Included by kernels/27_fp8/fp8_attention.cu.
#pragma once

#include <cstdint>

namespace fl {
namespace k27_fp8 {

// The problem's lengths, as the kernel uses them (int: Nq, Nk <= 2^30, supports()).
struct Schedule {
  int q_tiles;   // Tq = ceil(Nq / Br)
  int count;     // Tq x H_q x B items
  int seqlen_q, seqlen_k;
  bool causal;
};

// One item: where it is, and which KV tiles it visits.
struct Work {
  int q0, head, batch;
  int n;         // KV tiles visited: j = n - 1 down to 0
  int n_masked;  // the first n_masked visits (tiles n - 1 .. n - n_masked) are masked
};

__host__ __device__ __forceinline__ int imin(int a, int b) {
#ifdef __CUDA_ARCH__
  return min(a, b);
#else
  return a < b ? a : b;
#endif
}

// The items in order: head after head (b H_q + h), and within a head its query tiles from the
// last to the first: the blocks running at one time share a few heads' K/V in L2 (rung 23's
// order), and a causal head's longest items come first.
template <int kBr, int kBc>
__host__ __device__ __forceinline__ Work work_of(int t, const Schedule& s, int heads_q) {
  const int q_tile = s.q_tiles - 1 - t % s.q_tiles;
  const int bh = t / s.q_tiles;
  Work w;
  w.q0 = q_tile * kBr;
  w.head = bh % heads_q;
  w.batch = bh / heads_q;
  const int q1 = imin(w.q0 + kBr, s.seqlen_q);
  const int diag = s.seqlen_k - s.seqlen_q;  // row i sees keys <= i + diag (causal)
  const int kv_end = s.causal ? imin(s.seqlen_k, q1 + diag) : s.seqlen_k;
  const int kv_full = s.causal ? imin(s.seqlen_k, w.q0 + 1 + diag) : s.seqlen_k;
  w.n = kv_end <= 0 ? 0 : (kv_end + kBc - 1) / kBc;
  w.n_masked = w.n - (kv_full <= 0 ? 0 : kv_full / kBc);
  return w;
}

// Which items a block takes: the G blocks take them in rounds of G, block i the i-th item of an
// even round and the (G - 1 - i)-th of an odd one (a snake). Rung 23's plain round robin gives a
// block the same place in every round; when the rounds line up with the heads (G = 132 SMs and
// 33 query tiles a head: N = 4097), that is the same query tile of every head, and causal, the
// longest to block 0 every time and the shortest to block 131 (measured: 0.68x the speed of
// N = 4096). The snake pairs a long item with a short one. -1: no item for this block in the
// round (the last one).
__host__ __device__ __forceinline__ int item_of(int64_t round, unsigned blocks, unsigned block,
                                                const Schedule& s) {
  const int64_t g = blocks, i = block;
  const int64_t t = round * g + (round % 2 == 0 ? i : g - 1 - i);
  return t < s.count ? static_cast<int>(t) : -1;
}

}  // namespace k27_fp8
}  // namespace fl
