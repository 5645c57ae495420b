// FP8 (e4m3) inputs for the FP8 rung: how a caller turns a 16-bit or fp32 tensor into e4m3 values
// and the descale factors that undo the scaling. Host code; the tests, the CLI and the benchmark
// use it to make their FP8 problems, and it is the recipe the FP8 rung's page documents.
//
// e4m3 (OCP FP8, the "fn" variant: no infinities, one NaN pattern) has 4 exponent bits and 3
// mantissa bits: largest finite 448, smallest normal 2^-6, smallest subnormal 2^-9; a value of
// magnitude in a binade [2^e, 2^(e+1)) is rounded to a multiple of 2^(e-3), a relative error of at
// most 2^-4 (half a step: 1/16 of the binade's lower end).
//
// Scaling: a group of values x (a whole tensor, or one head of it) is stored as
//   q = e4m3(x * scale),  scale = 448 / amax,  amax = max |x| over the group (scale = 1 if 0),
// so that the group's largest magnitude lands on 448 and uses the whole range; the kernel is given
// descale = 1 / scale = amax / 448 per group and computes with q * descale. Rounding is to nearest
// even, saturating to +-448 (a value can only exceed 448 * descale through a NaN in x, which stays
// NaN).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fl {

constexpr float kE4m3Max = 448.f;

// x -> its e4m3 bits (round to nearest even, saturate to +-448, NaN -> NaN), and back.
uint8_t to_e4m3(float x);
float from_e4m3(uint8_t bits);

// One tensor [B][H][N][d] (contiguous, `values` of fp32) in e4m3, with its descale factors: one
// per tensor (per_head = false: descale.size() == 1) or one per (b, h) (descale[b H + h]).
struct E4m3Tensor {
  std::vector<uint8_t> bits;   // B H N d e4m3 values, same order as the input
  std::vector<float> descale;  // amax / 448 of each group (1 where the group is all zeros)
  bool per_head = false;
};

E4m3Tensor quantize_e4m3(const std::vector<float>& values, int64_t batch, int64_t heads,
                         int64_t rows, int64_t head_dim, bool per_head);

// The values the kernel computes with: from_e4m3(bits) * descale of the element's group. This is
// what the FP8 rung's reference attention reads (the reference is fp32 attention on these).
std::vector<float> dequantize_e4m3(const E4m3Tensor& t, int64_t rows, int64_t head_dim);

// "" when every descale factor is finite and > 0, else the rule it breaks, naming the tensor.
std::string check_descale(const char* tensor, const std::vector<float>& descale);

}  // namespace fl
