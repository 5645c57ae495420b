// Shared by the harness's element-wise kernels (inputs, references, comparisons): the grid of a
// grid-stride loop, and the offset of element i of a [B, H, N, d] tensor stored with strides.
#pragma once

#include <cstdint>

#include "common/attention.h"

namespace fl {

constexpr int kElementwiseThreads = 256;

// Blocks for a grid-stride loop over n elements (at least 1, at most `cap`).
inline int elementwise_grid(int64_t n, int64_t cap = 65536) {
  const int64_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

// Offset (in elements) of flat index i of a logical [B, heads, rows, d] tensor in memory laid out
// with strides s (d contiguous).
__host__ __device__ inline int64_t strided_offset(int64_t i, const Strides& s, int64_t heads,
                                                  int64_t rows, int64_t d) {
  const int64_t c = i % d, r = (i / d) % rows, h = (i / (d * rows)) % heads,
                b = i / (d * rows * heads);
  return b * s.batch + h * s.head + r * s.row + c;
}

}  // namespace fl
