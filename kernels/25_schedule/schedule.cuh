// Rung 25's work items: which query tile of which head an item is, which KV tiles it (and each
// consumer's rows of it) visits and masks, and which items a block takes. Host and device code, so
// that tests/test_schedule.cu can check it on the CPU against a brute force (every item taken
// once, every tile a row sees visited, exactly the tiles that hide a key from some row masked, the
// blocks' loads balanced). Included by kernels/25_schedule/schedule.cu.
#pragma once

#include <cstdint>

namespace fl {
namespace k25_schedule {

// The problem's lengths, as the kernel uses them (int: Nq, Nk <= 2^30, supports()).
struct Schedule {
  int q_tiles;   // Tq = ceil(Nq / Br)
  int count;     // Tq x H_q x B items
  int units;     // what the blocks take in rounds (unit_item): causal, pairs of items; else items
  int seqlen_q, seqlen_k;
  bool causal;
};

// One item (or one consumer's 64 rows of it): where it is, and which KV tiles it visits.
struct Work {
  int q0, q1;      // its query rows [q0, q1); an item's Q tile is rows [q0, q0 + Br) (work_of)
  int head, batch;
  int n;           // KV tiles visited: j = n - 1 down to 0
  int n_masked;    // the first n_masked visits (tiles n - 1 .. n - n_masked) are masked
};

__host__ __device__ __forceinline__ int imin(int a, int b) {
#ifdef __CUDA_ARCH__
  return min(a, b);
#else
  return a < b ? a : b;
#endif
}

// The KV tiles that query rows [q0, q1) of a head visit (q0 < q1): n tiles, j = n - 1 down to 0,
// none when no row sees a key; the first n_masked of them masked.
template <int kBc>
__host__ __device__ __forceinline__ Work rows_work(int q0, int q1, int head, int batch,
                                                   const Schedule& s) {
  Work w;
  w.q0 = q0;
  w.q1 = q1;
  w.head = head;
  w.batch = batch;
  const int diag = s.seqlen_k - s.seqlen_q;  // row i sees keys <= i + diag (causal)
  const int kv_end = s.causal ? imin(s.seqlen_k, q1 + diag) : s.seqlen_k;
  const int kv_full = s.causal ? imin(s.seqlen_k, q0 + 1 + diag) : s.seqlen_k;
  w.n = kv_end <= 0 ? 0 : (kv_end + kBc - 1) / kBc;
  w.n_masked = w.n - (kv_full <= 0 ? 0 : kv_full / kBc);
  return w;
}

// The items in order: head after head (b H_q + h), and within a head its query tiles from the
// last to the first: the blocks running at one time share a few heads' K/V in L2 (rung 23's
// order), and a causal head's longest items come first.
//
// The tiles are counted from a head's last row, as the causal diagonal is aligned: the k-th item
// of a head is rows [Nq - (k + 1) Br, Nq - k Br), and where Br does not divide Nq the ragged one
// is the head's first, rows [0, Nq - (Tq - 1) Br), whose rows see the fewest keys, not its last,
// whose rows would see them all. Its Q tile is loaded from row 0 (TMA takes no negative row), so
// its tile's rows past its own are the next item's, computed and not stored.
template <int kBr, int kBc>
__host__ __device__ __forceinline__ Work work_of(int t, const Schedule& s, int heads_q) {
  const int q1 = s.seqlen_q - (t % s.q_tiles) * kBr;
  const int bh = t / s.q_tiles;
  return rows_work<kBc>(q1 > kBr ? q1 - kBr : 0, q1, bh % heads_q, bh / heads_q, s);
}

// The tiles that consumer c's 64 rows of an item, [q0 + 64 c, q0 + 64 c + 64) cut at q1, visit:
// the item's last n of its visits (a row sees the keys the rows above it see, and more); none
// when its rows are past the item's (the ragged first item of a head) or see no key.
template <int kBc>
__host__ __device__ __forceinline__ Work consumer_work(const Work& item, int c, const Schedule& s) {
  const int q0 = item.q0 + 64 * c;
  if (q0 >= item.q1) return Work{q0, q0, item.head, item.batch, 0, 0};
  return rows_work<kBc>(q0, imin(q0 + 64, item.q1), item.head, item.batch, s);
}

// Which items a block takes. The blocks take *units* in rounds of G (G blocks), block i the i-th
// unit of an even round and the (G - 1 - i)-th of an odd one (a snake), and the items of a unit one
// after the other.
//
// Non-causal, every item visits the same tiles: a unit is one item. Causal, the items of a head
// are of every length, and a unit is a pair of them whose lengths add up to about the same in
// every pair: a head's k-th longest item and its k-th shortest (items k and Tq - 1 - k in work_of's
// order, the longer first). With Tq odd, a head's middle item pairs with the next head's middle
// one. The units of two heads a, a + 1 run: a's pairs, the two middles, a + 1's pairs.
//
// Rung 24's round robin of items gives a block the same place in every round: when the rounds
// line up with the heads (G = 132 SMs and 33 query tiles a head: N = 4097), that is the same
// query tile of every head, causal, the longest to block 0 every time (measured: 0.68x the speed
// of N = 4096). A snake of items pairs a long item with a short one only where a round's items
// are sorted by length, which they are not where a round spans the end of one head and the start
// of the next: 1.2x the mean for d = 64's 192-row tiles at N = 16384, 1.5x with one batch of 16
// heads at N = 8192 (docs/notebooks/25_schedule.md, "Units: a long item and a short one"). Pairs
// are about equal wherever the rounds fall.
__host__ __device__ __forceinline__ int unit_size(const Schedule& s) { return s.causal ? 2 : 1; }

// The units of a call: causal, floor(Tq / 2) pairs a head and one for every two middle items.
__host__ __device__ __forceinline__ int64_t unit_count(int q_tiles, int64_t heads_x_batch,
                                                       bool causal) {
  if (!causal) return q_tiles * heads_x_batch;
  return (q_tiles / 2) * heads_x_batch + (q_tiles % 2) * ((heads_x_batch + 1) / 2);
}

// Item `member` (0, or 1: the shorter) of unit p, or -1: a unit of one item (the last head's
// middle when the heads are odd in number) has no member 1.
__host__ __device__ __forceinline__ int unit_item(int p, int member, const Schedule& s) {
  if (!s.causal) return member == 0 ? p : -1;
  const int tq = s.q_tiles, half = tq / 2, odd = tq % 2;
  const int per_two_heads = 2 * half + odd;
  const int a = 2 * (p / per_two_heads), r = p % per_two_heads;
  if (r < half) return a * tq + (member == 0 ? r : tq - 1 - r);              // head a's pair r
  if (r >= half + odd) {                                                      // head a + 1's
    const int k = r - half - odd;
    return (a + 1) * tq + (member == 0 ? k : tq - 1 - k);
  }
  const int head = a + member;                                                // the middles
  return head * tq < s.count ? head * tq + half : -1;
}

// The block's slots: ceil(units / G) rounds of unit_size items (below 2^32: units < 2^31).
__host__ __device__ __forceinline__ unsigned slot_count(unsigned blocks, const Schedule& s) {
  return (static_cast<unsigned>(s.units) + blocks - 1) / blocks * unit_size(s);
}

// The item of the block's slot-th slot, or -1: none (the last round, or a unit of one item).
__host__ __device__ __forceinline__ int item_of(unsigned slot, unsigned blocks, unsigned block,
                                                const Schedule& s) {
  const unsigned round = s.causal ? slot / 2 : slot;
  const unsigned p = round * blocks + (round % 2 == 0 ? block : blocks - 1 - block);
  return p < static_cast<unsigned>(s.units)
             ? unit_item(static_cast<int>(p), static_cast<int>(slot - round * unit_size(s)), s)
             : -1;
}

// The schedule of a call (host): Br is the item's rows (Config::kBr).
inline Schedule make_schedule(int br, int64_t nq, int64_t nk, int64_t heads_x_batch, bool causal) {
  Schedule s;
  s.q_tiles = static_cast<int>((nq + br - 1) / br);
  s.count = static_cast<int>(s.q_tiles * heads_x_batch);
  s.units = static_cast<int>(unit_count(s.q_tiles, heads_x_batch, causal));
  s.seqlen_q = static_cast<int>(nq);
  s.seqlen_k = static_cast<int>(nk);
  s.causal = causal;
  return s;
}

}  // namespace k25_schedule
}  // namespace fl
