// The e4m3 conversion and the scaling recipe of common/fp8.h (host code, no GPU): the conversion
// against the CUDA toolkit's own (__nv_cvt_float_to_fp8, satfinite) on every representable value,
// every midpoint (the ties) and its neighbours, and out-of-range values; the quantisation of a
// tensor per tensor and per head (amax lands on 448, the error within half a step); the rule on
// descale factors.
#include <gtest/gtest.h>

#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/fp8.h"

namespace {

uint8_t cuda_e4m3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

TEST(Fp8, EveryBitPatternRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const uint8_t bits = static_cast<uint8_t>(b);
    const float v = fl::from_e4m3(bits);
    if ((bits & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << "bits " << b;
      continue;
    }
    EXPECT_EQ(fl::to_e4m3(v), bits) << "bits " << b << " value " << v;
  }
  EXPECT_EQ(fl::from_e4m3(0x7E), 448.f);
  EXPECT_EQ(fl::from_e4m3(0x01), std::ldexp(1.f, -9));
  EXPECT_EQ(fl::from_e4m3(0x08), std::ldexp(1.f, -6));
}

TEST(Fp8, ConversionMatchesTheToolkitsIncludingTiesAndSaturation) {
  std::vector<float> xs;
  std::vector<float> values;
  for (int b = 0; b < 0x7F; ++b) values.push_back(fl::from_e4m3(static_cast<uint8_t>(b)));
  for (size_t i = 0; i < values.size(); ++i) {
    xs.push_back(values[i]);
    if (i + 1 < values.size()) {
      const float mid = 0.5f * (values[i] + values[i + 1]);  // a tie: to the even mantissa
      xs.push_back(mid);
      xs.push_back(std::nextafter(mid, 0.f));
      xs.push_back(std::nextafter(mid, 1e30f));
    }
  }
  for (float x : {449.f, 463.99f, 464.f, 480.f, 1e6f, std::numeric_limits<float>::infinity(),
                  1e-12f, std::ldexp(1.f, -10), std::ldexp(1.f, -10) * 1.01f}) {
    xs.push_back(x);
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-500.f, 500.f);
  for (int i = 0; i < 20000; ++i) xs.push_back(u(rng));
  int wrong = 0;
  for (float x : xs) {
    for (float s : {1.f, -1.f}) {
      const float v = s * x;
      if (fl::to_e4m3(v) != cuda_e4m3(v) && ++wrong <= 5) {
        ADD_FAILURE() << "x = " << v << ": ours " << int(fl::to_e4m3(v)) << ", toolkit "
                      << int(cuda_e4m3(v));
      }
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(fl::to_e4m3(std::nanf("")) & 0x7F, 0x7F);
}

TEST(Fp8, QuantiseUsesTheRangeAndStaysWithinHalfAStep) {
  const int64_t B = 2, H = 3, N = 17, d = 8;
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> x(B * H * N * d);
  for (float& v : x) v = g(rng);
  for (int64_t i = 0; i < N * d; ++i) x[(1 * H + 2) * N * d + i] *= 50.f;  // one loud head
  for (int64_t i = 0; i < N * d; ++i) x[(0 * H + 1) * N * d + i] = 0.f;    // one silent head
  for (bool per_head : {false, true}) {
    SCOPED_TRACE(per_head ? "per head" : "per tensor");
    const fl::E4m3Tensor t = fl::quantize_e4m3(x, B, H, N, d, per_head);
    ASSERT_EQ(t.descale.size(), per_head ? static_cast<size_t>(B * H) : 1u);
    EXPECT_EQ(fl::check_descale("Q", t.descale), "");
    const std::vector<float> back = fl::dequantize_e4m3(t, N, d);
    const int64_t group = per_head ? N * d : B * H * N * d;
    for (int64_t g0 = 0; g0 < B * H * N * d; g0 += group) {
      float amax = 0.f;
      int64_t arg = g0;
      for (int64_t i = g0; i < g0 + group; ++i) {
        if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), arg = i;
      }
      const float descale = t.descale[per_head ? g0 / group : 0];
      if (amax == 0.f) {
        EXPECT_EQ(descale, 1.f);
        continue;
      }
      EXPECT_FLOAT_EQ(descale, amax / 448.f);
      EXPECT_EQ(t.bits[arg] & 0x7F, 0x7E) << "the group's largest magnitude maps to 448";
      for (int64_t i = g0; i < g0 + group; ++i) {
        // Half a step: 2^-4 of the value's binade (relative), or half the subnormal step.
        const float bound = std::fmax(std::fabs(x[i]) / 16.f, std::ldexp(1.f, -10) * descale);
        EXPECT_LE(std::fabs(back[i] - x[i]), bound * 1.0001f) << "element " << i;
      }
    }
  }
}

TEST(Fp8, DescaleMustBeFiniteAndPositive) {
  EXPECT_EQ(fl::check_descale("K", {1.f, 0.5f}), "");
  for (float bad : {0.f, -1.f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
    const std::string why = fl::check_descale("K", {1.f, bad});
    EXPECT_NE(why.find("K's descale factors must be finite and > 0"), std::string::npos) << why;
  }
}

}  // namespace
