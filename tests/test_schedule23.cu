// Rung 23's work items (kernels/23_final_hopper/schedule.cuh), on the CPU, against a brute force
// over rows and keys: every item is taken by exactly one block; an item visits exactly the KV
// tiles that some of its rows see (none when no row sees a key); the masked visits are exactly
// the tiles that hide a key from some row of the item; and causal, the snake keeps the busiest
// block within a few percent of the mean where the round robin it replaced was 1.94x.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/23_final_hopper/schedule.cuh"

namespace {

using fl::k23_final_hopper::item_of;
using fl::k23_final_hopper::Schedule;
using fl::k23_final_hopper::Work;
using fl::k23_final_hopper::work_of;

Schedule make(int br, int64_t nq, int64_t nk, int64_t bh, bool causal) {
  Schedule s;
  s.q_tiles = static_cast<int>((nq + br - 1) / br);
  s.count = static_cast<int>(s.q_tiles * bh);
  s.seqlen_q = static_cast<int>(nq);
  s.seqlen_k = static_cast<int>(nk);
  s.causal = causal;
  return s;
}

bool sees(const Schedule& s, int row, int key) {
  return key < s.seqlen_k && (!s.causal || key <= row + s.seqlen_k - s.seqlen_q);
}

template <int kBr, int kBc>
void check_items(int64_t nq, int64_t nk, bool causal, int heads, int batch) {
  const Schedule s = make(kBr, nq, nk, int64_t{heads} * batch, causal);
  SCOPED_TRACE("Br " + std::to_string(kBr) + " Bc " + std::to_string(kBc) + " Nq " +
               std::to_string(nq) + " Nk " + std::to_string(nk) + (causal ? " causal" : ""));
  std::vector<int> seen_items(s.count, 0);
  for (int t = 0; t < s.count; ++t) {
    const Work w = work_of<kBr, kBc>(t, s, heads);
    ASSERT_EQ(w.batch * heads + w.head, t / s.q_tiles);
    ASSERT_EQ(w.q0 % kBr, 0);
    ASSERT_LT(w.q0, s.seqlen_q);
    const int q1 = std::min<int>(w.q0 + kBr, s.seqlen_q);
    const int tiles = static_cast<int>((nk + kBc - 1) / kBc);
    int last_seen = -1;
    for (int j = 0; j < tiles; ++j) {
      bool any_seen = false, any_hidden = false;
      for (int r = w.q0; r < q1; ++r) {
        for (int k = j * kBc; k < (j + 1) * kBc; ++k) {
          (sees(s, r, k) ? any_seen : any_hidden) = true;
        }
      }
      if (any_seen) last_seen = j;
      if (j < w.n) {
        EXPECT_EQ(any_hidden, j >= w.n - w.n_masked)
            << "item " << t << " tile " << j << ": masked iff a row of the item cannot see one of "
            << "its keys";
      }
    }
    EXPECT_EQ(w.n, last_seen + 1) << "item " << t << " visits tiles 0 .. n - 1";
    EXPECT_GE(w.n_masked, 0);
    EXPECT_LE(w.n_masked, w.n);
  }
  // Every item once, for a few grid sizes.
  for (int blocks : {1, 7, 132, s.count + 5}) {
    std::fill(seen_items.begin(), seen_items.end(), 0);
    for (int64_t round = 0; round * blocks < s.count; ++round) {
      for (int b = 0; b < blocks; ++b) {
        const int t = item_of(round, blocks, b, s);
        if (t >= 0) ++seen_items[t];
      }
    }
    for (int t = 0; t < s.count; ++t) {
      ASSERT_EQ(seen_items[t], 1) << "item " << t << " with " << blocks << " blocks";
    }
  }
}

TEST(Schedule23, ItemsVisitAndMaskExactlyTheRightTiles) {
  for (bool causal : {false, true}) {
    for (auto nq_nk : {std::pair<int, int>{1, 1}, {1, 300}, {300, 1}, {128, 128}, {129, 257},
                       {300, 77}, {77, 300}, {513, 513}, {640, 384}, {192, 193}}) {
      check_items<128, 128>(nq_nk.first, nq_nk.second, causal, 3, 2);
      check_items<192, 128>(nq_nk.first, nq_nk.second, causal, 3, 2);
      check_items<128, 80>(nq_nk.first, nq_nk.second, causal, 3, 2);
    }
  }
  // The causal diagonal at every offset near a tile edge: Nk - Nq = -129 .. 129 around the
  // multiples of Bc (the masked range moves by one tile there).
  for (int nq : {1, 5, 128, 200}) {
    for (int delta : {-129, -128, -127, -81, -80, -79, -2, -1, 0, 1, 2, 79, 80, 81, 127, 128, 129}) {
      if (nq + delta < 1) continue;
      check_items<128, 128>(nq, nq + delta, true, 1, 1);
      check_items<192, 128>(nq, nq + delta, true, 1, 1);
      check_items<128, 80>(nq, nq + delta, true, 1, 1);
    }
  }
}

// Causal, Nq = Nk = 4097 (33 query tiles a head), 256 heads, 132 blocks: the busiest block's KV
// tiles over the mean, for the snake and for the round robin the snake replaced.
TEST(Schedule23, SnakeBalancesCausalItemsWhereTheRoundRobinDoesNot) {
  for (int n : {4096, 4097, 4224, 2048, 16384}) {
    const int heads = n > 4224 ? 64 : 256, blocks = 132;
    const Schedule s = make(128, n, n, heads, true);
    std::vector<double> snake(blocks, 0.0), robin(blocks, 0.0);
    double total = 0;
    for (int64_t round = 0; round * blocks < s.count; ++round) {
      for (int b = 0; b < blocks; ++b) {
        const int t = item_of(round, blocks, b, s);
        if (t >= 0) snake[b] += work_of<128, 128>(t, s, heads).n;
        const int64_t t_robin = round * blocks + b;
        if (t_robin < s.count) {
          robin[b] += work_of<128, 128>(static_cast<int>(t_robin), s, heads).n;
        }
      }
    }
    for (double x : snake) total += x;
    const double mean = total / blocks;
    const double snake_max = *std::max_element(snake.begin(), snake.end()) / mean;
    const double robin_max = *std::max_element(robin.begin(), robin.end()) / mean;
    EXPECT_LE(snake_max, 1.05) << "N = " << n;
    if (n == 4097 || n == 4224) EXPECT_GE(robin_max, 1.5) << "N = " << n;
  }
}

}  // namespace
