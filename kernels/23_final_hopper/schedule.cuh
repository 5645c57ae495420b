// Rung 23's work items: which two query tiles of which head an item is (one for each block of a
// cluster of two), which KV tiles each block visits and masks, which the pair loads together, and
// which items a cluster takes. Host and device code, so that tests/test_schedule23.cu can check it
// on the CPU against a brute force (every query tile taken once, every tile a row sees visited,
// exactly the tiles that hide a key from some row masked, the clusters' loads balanced).
// Included by kernels/23_final_hopper/final_hopper.cu.
#pragma once

#include <cstdint>

namespace fl {
namespace k23_final_hopper {

// The problem's lengths, as the kernel uses them (int: Nq, Nk <= 2^30, supports()).
struct Schedule {
  int q_tiles;   // Tq = ceil(Nq / Br)
  int pairs;     // ceil(Tq / 2): a head's items, query tiles 2u and 2u + 1 each
  int count;     // pairs x H_q x B items
  int seqlen_q, seqlen_k;
  bool causal;
};

// One block's half of an item: where its query tile is, and which KV tiles it visits.
struct Work {
  int q0, head, batch;
  int slots;     // KV tiles the pair loads: j = slots - 1 down to 0, the more of its two n
  int n;         // KV tiles this block computes: j = n - 1 down to 0 (n <= slots: the last ones)
  int n_masked;  // the first n_masked of those (tiles n - 1 .. n - n_masked) are masked
};

__host__ __device__ __forceinline__ int imin(int a, int b) {
#ifdef __CUDA_ARCH__
  return min(a, b);
#else
  return a < b ? a : b;
#endif
}

// The KV tiles query rows [q0, q0 + Br) visit (n: tiles 0 .. n - 1, those some row sees) and
// mask (the last n_masked of them: across the diagonal or past Nk). A tile past Nq visits none.
template <int kBr, int kBc>
__host__ __device__ __forceinline__ void tiles_of(int q0, const Schedule& s, int& n,
                                                  int& n_masked) {
  if (q0 >= s.seqlen_q) {
    n = n_masked = 0;
    return;
  }
  const int q1 = imin(q0 + kBr, s.seqlen_q);
  const int diag = s.seqlen_k - s.seqlen_q;  // row i sees keys <= i + diag (causal)
  const int kv_end = s.causal ? imin(s.seqlen_k, q1 + diag) : s.seqlen_k;
  const int kv_full = s.causal ? imin(s.seqlen_k, q0 + 1 + diag) : s.seqlen_k;
  n = kv_end <= 0 ? 0 : (kv_end + kBc - 1) / kBc;
  n_masked = n - (kv_full <= 0 ? 0 : kv_full / kBc);
}

// Item t, as block `rank` (0 or 1) of its cluster sees it. The items in order: head after head
// (b H_q + h), and within a head its pairs of query tiles from the last to the first: the
// clusters running at one time share a few heads' K/V in L2 (rung 22's order), and a causal
// head's longest items come first. Rank r takes query tile 2u + r of pair u; the two visit the
// same KV tiles in the same order, the more of the two (causal: the lower tile sees one tile
// fewer, and skips that first visit).
template <int kBr, int kBc>
__host__ __device__ __forceinline__ Work work_of(int t, int rank, const Schedule& s, int heads_q) {
  const int pair = s.pairs - 1 - t % s.pairs;
  const int bh = t / s.pairs;
  Work w;
  w.head = bh % heads_q;
  w.batch = bh / heads_q;
  int n0, n_masked0, n1, n_masked1;  // rank 0's and rank 1's (not an array: rank is not constant)
  tiles_of<kBr, kBc>(2 * pair * kBr, s, n0, n_masked0);
  tiles_of<kBr, kBc>((2 * pair + 1) * kBr, s, n1, n_masked1);
  w.q0 = (2 * pair + rank) * kBr;
  w.slots = n0 > n1 ? n0 : n1;
  w.n = rank == 0 ? n0 : n1;
  w.n_masked = rank == 0 ? n_masked0 : n_masked1;
  return w;
}

// Which items a cluster takes: the G clusters take them in rounds of G, cluster i the i-th item
// of an even round and the (G - 1 - i)-th of an odd one (a snake). Rung 22's plain round robin gives a
// block the same place in every round; when the rounds line up with the heads (G = 132 SMs and
// 33 query tiles a head: N = 4097), that is the same query tile of every head, and causal, the
// longest to block 0 every time and the shortest to block 131 (measured: 0.68x the speed of
// N = 4096). The snake pairs a long item with a short one. -1: no item for this cluster in the
// round (the last one).
// 32-bit: the count is at most 2^29 items (supports(): 2^30 query tiles), so round x clusters
// stays below 2^30 + clusters.
__host__ __device__ __forceinline__ int item_of(int round, int clusters, int cluster,
                                                const Schedule& s) {
  const int t = round * clusters + (round % 2 == 0 ? cluster : clusters - 1 - cluster);
  return t < s.count ? t : -1;
}

}  // namespace k23_final_hopper
}  // namespace fl
