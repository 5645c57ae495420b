// See common/fp8.h. The conversion is written out (not the CUDA headers' __nv_cvt_float_to_fp8) so
// that the rounding rule is visible and testable on any host.
#include "common/fp8.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace fl {

uint8_t to_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;  // e4m3fn's NaN (S.1111.111)
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= kE4m3Max) return sign | 0x7E;  // saturate: 448 = 1.75 x 2^8 (S.1111.110)
  // The step of the binade of a: 2^(e - 3) for a in [2^e, 2^(e+1)), e >= -6; subnormals below
  // 2^-6 have the step 2^-9. Round a to a multiple of the step, to nearest even.
  int e = 0;
  std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1): a is in [2^(e-1), 2^e)
  int binade = e - 1;
  if (binade < -6) binade = -6;
  const float step = std::ldexp(1.f, binade - 3);
  const float q = std::nearbyint(a / step);  // round half to even (default rounding mode)
  float r = q * step;                        // may round up into the next binade: still exact
  if (r >= kE4m3Max) return sign | 0x7E;
  // Encode r: exponent field 0 for subnormals (r < 2^-6), else binade + 7.
  if (r < std::ldexp(1.f, -6)) {
    const int m = static_cast<int>(r / std::ldexp(1.f, -9));  // 0 .. 7
    return sign | static_cast<uint8_t>(m);
  }
  int re = 0;
  const float rf = std::frexp(r, &re);  // r = rf 2^re, rf in [0.5, 1)
  const int exp_field = (re - 1) + 7;
  const int mant = static_cast<int>((rf * 2.f - 1.f) * 8.f);  // 3 bits
  return sign | static_cast<uint8_t>(exp_field << 3) | static_cast<uint8_t>(mant);
}

float from_e4m3(uint8_t bits) {
  const float sign = (bits & 0x80) ? -1.f : 1.f;
  const int exp_field = (bits >> 3) & 0xF, mant = bits & 0x7;
  if (exp_field == 0xF && mant == 0x7) return std::nanf("");
  if (exp_field == 0) return sign * std::ldexp(static_cast<float>(mant), -9);
  return sign * std::ldexp(1.f + mant / 8.f, exp_field - 7);
}

E4m3Tensor quantize_e4m3(const std::vector<float>& values, int64_t batch, int64_t heads,
                         int64_t rows, int64_t head_dim, bool per_head) {
  const int64_t group = rows * head_dim, groups = batch * heads;
  if (static_cast<int64_t>(values.size()) != group * groups) {
    throw std::invalid_argument("quantize_e4m3: values.size() must be B x H x N x d");
  }
  E4m3Tensor t;
  t.per_head = per_head;
  t.bits.resize(values.size());
  const int64_t n_scales = per_head ? groups : 1;
  const int64_t span = per_head ? group : group * groups;
  t.descale.assign(n_scales, 1.f);
  for (int64_t g = 0; g < n_scales; ++g) {
    float amax = 0.f;
    for (int64_t i = g * span; i < (g + 1) * span; ++i) {
      if (!std::isnan(values[i])) amax = std::fmax(amax, std::fabs(values[i]));
    }
    const float scale = amax > 0.f ? kE4m3Max / amax : 1.f;
    t.descale[g] = 1.f / scale;
    for (int64_t i = g * span; i < (g + 1) * span; ++i) t.bits[i] = to_e4m3(values[i] * scale);
  }
  return t;
}

std::vector<float> dequantize_e4m3(const E4m3Tensor& t, int64_t rows, int64_t head_dim) {
  const int64_t group = rows * head_dim;
  std::vector<float> out(t.bits.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const float descale = t.per_head ? t.descale[static_cast<int64_t>(i) / group] : t.descale[0];
    out[i] = from_e4m3(t.bits[i]) * descale;
  }
  return out;
}

std::string check_descale(const char* tensor, const std::vector<float>& descale) {
  for (size_t i = 0; i < descale.size(); ++i) {
    if (!std::isfinite(descale[i]) || !(descale[i] > 0.f)) {
      return std::string(tensor) + "'s descale factors must be finite and > 0 (factor " +
             std::to_string(i) + " is " + std::to_string(descale[i]) + ")";
    }
  }
  return "";
}

}  // namespace fl
