// Rung 23's work items: which query tile of which head an item is, which KV tiles it visits and
// masks, and which items a block takes. Host and device code, so that tests/test_schedule23.cu
// can check it on the CPU against a brute force (every item taken once, every tile a row sees
// visited, exactly the tiles that hide a key from some row masked, the blocks' loads balanced).
// Included by kernels/23_final_hopper/final_hopper.cu.
#pragma once

#include <cstdint>

namespace fl {
namespace k23_final_hopper {

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
  int rows;        // the item's query rows that exist: min(Br, Nq - q0)
  int n;           // KV tiles visited: j = n - 1 down to 0 (visit v is tile n - 1 - v)
  int n_masked;    // the first n_masked visits (tiles n - 1 .. n - n_masked) are masked
  int first_keys;  // keys some row sees in the first visit (tile n - 1): 1 .. Bc; 0 when n = 0
};

__host__ __device__ __forceinline__ int imin(int a, int b) {
#ifdef __CUDA_ARCH__
  return min(a, b);
#else
  return a < b ? a : b;
#endif
}

// The items in order: head after head (b H_q + h), and within a head its query tiles from the
// last to the first: the blocks running at one time share a few heads' K/V in L2 (rung 22's
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
  w.rows = q1 - w.q0;
  w.n = kv_end <= 0 ? 0 : (kv_end + kBc - 1) / kBc;
  w.n_masked = w.n - (kv_full <= 0 ? 0 : kv_full / kBc);
  w.first_keys = w.n == 0 ? 0 : kv_end - (w.n - 1) * kBc;
  return w;
}

// Short items. A length one above a tile multiple gives an item of a few rows and a first visit
// of a few keys, each as costly as a whole one unless the kernel makes them cheap:
//  - a first visit of at most kNarrowKeys keys is narrow: its S is one wgmma of N = 16, its P.V
//    one k-step;
//  - with two consumers, an item whose rows fit in one consumer's 64 (and that visits two tiles or
//    more) is split: both consumers take those rows, consumer c the visits v = c, c + 2, c + 4,
//    ... (with its own max, sums and O), and they merge what they hold at the end.
// Two, because the rings have two stages: consumer c's visits are then the uses of one stage of
// each ring, one after the other, and it waits for each phase of that stage's barriers in turn,
// as a parity wait needs (a wait for a phase two ahead of the last seen would pass at once). The
// producer releases each stage on behalf of the consumer that skips it. With three consumers (d =
// 64) a consumer would skip phases of a stage, so an item there is never split.
constexpr int kNarrowKeys = 16;

// The visits consumer c of C makes in an item: v = first + stride t, t = 0 .. count - 1; the first
// `masked` of them are masked visits (v < n_masked). A consumer takes count + 1 turns at the
// tensor cores (S of its first visit alone, then one a visit: S of the next beside P.V of the
// last, then P.V of the last alone), and pad empty ones after them: every consumer of an item
// takes the same number of turns, as the handover of turns needs.
struct Visits {
  bool split;
  int first, stride, count, masked, pad;
};

__host__ __device__ __forceinline__ Visits visits_of(const Work& w, int c, int consumers) {
  Visits v;
  v.split = consumers == 2 && w.rows <= 64 && w.n >= 2;
  v.first = v.split ? c : 0;
  v.stride = v.split ? consumers : 1;
  v.count = (w.n - v.first + v.stride - 1) / v.stride;
  v.masked = (w.n_masked - v.first + v.stride - 1) / v.stride;  // numerator >= 0: first < stride
  v.pad = (w.n + v.stride - 1) / v.stride - v.count;            // consumer 0's count less its own
  return v;
}

// Which items a block takes: the G blocks take them in rounds of G, block i the i-th item of an
// even round and the (G - 1 - i)-th of an odd one (a snake). Rung 22's plain round robin gives a
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

}  // namespace k23_final_hopper
}  // namespace fl
