// Rung 68: how the block's threads share a copy of rows of d / 8 chunks of 16 bytes into a
// swizzled tile (common/ptx/swizzle.cuh), for the K/V ring and the Q tile. Plain integers,
// host and device: the kernel asks it, and the tests check on the CPU that a tile's copy
// covers every chunk once and lands where the swizzle puts it.
//
// A thread keeps chunk c of its first row r0 (thread t: r0 = t / (d / 8), c = t % (d / 8)) and
// steps kRowsPerStep rows: the rows the threads hold whole, rounded down to a multiple of 8 where
// that leaves 8 or more. The first kCopiers threads copy; the others leave the copy at once:
//   d       chunks a row   whole rows   kRowsPerStep   kCopiers   steps of a 64-row tile
//   64      8              16           16             128        4
//   96      12             10           8              96         8
//   128     16             8            8              128        8
//   192     24             5            5              120        13 (the last partial)
// A step of 8 rows is a whole period of the swizzle: chunk(r + 8, c) = chunk(r, c) for rows of
// 8, 12, 16 and 24 chunks. So a thread's shared-memory offset moves by 8 rows of bytes at every
// step and its row by 8 (the global address is that row's, or row 0 where the copy zero-fills):
// one address worked out, then constants. Rung 67
// stepped 10 rows at d = 96 with all 128 threads: the swizzle of row r there takes (r / 2) % 4,
// which 10 rows change, so each of a thread's 7 steps worked out its address again, and the last
// step was partial (64 = 6 x 10 + 4); at d = 96 and 192 each step also asked whether the thread
// copied at all. At d = 192 five rows are no period: its steps keep the offset worked out each
// step, as rung 67's did.
#pragma once

#include "common/ptx/swizzle.cuh"

namespace fl {
namespace k76_decode_ragged_balance {

template <int kHeadDim, int kThreads>
struct RowCopy {
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr int kWholeRows = kThreads / kChunks;
  static constexpr int kRowsPerStep = kWholeRows >= 8 ? kWholeRows / 8 * 8 : kWholeRows;
  static constexpr int kCopiers = kRowsPerStep * kChunks;
  // Whether a step is a whole period of the swizzle (the offsets move by constants).
  static constexpr bool kPeriodic = kRowsPerStep % 8 == 0;

  // Thread t's first row and column (elements), for t < kCopiers (unsigned: the cheaper
  // division).
  __host__ __device__ static constexpr int first_row(unsigned t) { return t / kChunks; }
  __host__ __device__ static constexpr int column(unsigned t) { return t % kChunks * 8; }

  // The byte offset in the swizzled tile of row r0 + kRowsPerStep step, column c: on a period,
  // r0's offset and a constant.
  __host__ __device__ static constexpr int offset(int r0, int c, int step) {
    if constexpr (kPeriodic) {
      return swizzle::byte_offset(r0, c, kHeadDim) + step * kRowsPerStep * kHeadDim * 2;
    } else {
      return swizzle::byte_offset(r0 + step * kRowsPerStep, c, kHeadDim);
    }
  }
};

}  // namespace k76_decode_ragged_balance
}  // namespace fl
