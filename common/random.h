// Seeded inputs, generated on the GPU so that large benchmark shapes cost no host time.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/attention.h"

namespace fl {

// dst[i] = scale * N(0, 1), rounded to `dtype`; element i depends only on (seed, i), so any
// subrange or device gives the same values.
void fill_randn(void* dst, DType dtype, int64_t count, uint64_t seed, float scale,
                cudaStream_t stream = nullptr);

// dst[i] = scale * N(0, 1) in fp32: the same numbers fill_randn rounds to 16 bits (same seed,
// same index), for the e4m3 problems, which quantise them (quantize_e4m3_device).
void fill_randn_fp32(float* dst, int64_t count, uint64_t seed, float scale,
                     cudaStream_t stream = nullptr);

// fl::quantize_e4m3 (common/fp8.h) on the device, bit for bit: src is a logical
// [batch, heads, rows, head_dim] fp32 tensor on the device laid out with strides src_s, dst the
// e4m3 tensor (one byte an element) laid out with strides dst_s. Per group (the whole tensor, or
// each (b, h) with per_head): amax = max |x| ignoring NaN, scale = 448 / amax (1 when amax is 0),
// e4m3 = round to nearest even of x * scale, saturated to +-448, NaN -> 0x7F. Returns the host
// descale factors 1 / scale: one, or batch x heads (index b * heads + h). Synchronises `stream`.
std::vector<float> quantize_e4m3_device(const float* src, const Strides& src_s, void* dst,
                                        const Strides& dst_s, int64_t batch, int64_t heads,
                                        int64_t rows, int64_t head_dim, bool per_head,
                                        cudaStream_t stream = nullptr);

// Sets every 16-bit element to `bits` (0xFFFF is a NaN in fp16 and bf16: the poison value).
void fill_bits16(void* dst, uint16_t bits, int64_t count, cudaStream_t stream = nullptr);

}  // namespace fl
