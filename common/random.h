// Seeded inputs, generated on the GPU so that large benchmark shapes cost no host time.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/attention.h"

namespace fl {

// dst[i] = scale * N(0, 1), rounded to `dtype`; element i depends only on (seed, i), so any
// subrange or device gives the same values.
void fill_randn(void* dst, DType dtype, int64_t count, uint64_t seed, float scale,
                cudaStream_t stream = nullptr);

// Sets every 16-bit element to `bits` (0xFFFF is a NaN in fp16 and bf16: the poison value).
void fill_bits16(void* dst, uint16_t bits, int64_t count, cudaStream_t stream = nullptr);

}  // namespace fl
