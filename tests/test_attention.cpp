// The counting formulas and the argument rules of common/attention.h, pinned to worked numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/attention.h"

namespace {

fl::AttnParams valid_params() {
  fl::AttnParams p = fl::make_params(fl::DType::f16, 2, 4, 128, 128, 128);
  // Any 16-byte aligned addresses: check_common never dereferences them.
  p.q = reinterpret_cast<void*>(0x1000);
  p.k = reinterpret_cast<void*>(0x2000);
  p.v = reinterpret_cast<void*>(0x3000);
  p.o = reinterpret_cast<void*>(0x4000);
  return p;
}

TEST(Formulas, AttentionFlops) {
  fl::AttnParams p = fl::make_params(fl::DType::f16, 16, 16, 4096, 4096, 128);
  EXPECT_DOUBLE_EQ(fl::attention_flops(p), 4.0 * 16 * 16 * 4096.0 * 4096.0 * 128);
  p.causal = true;
  EXPECT_DOUBLE_EQ(fl::attention_flops(p), 2.0 * 16 * 16 * 4096.0 * 4096.0 * 128);
}

TEST(Formulas, TileIntensityWorkedExample) {
  // The design model's worked example: Br = 64 (Bc = 64), N = 4096, d = 128, fp16 -> about 63.8
  // FLOP/byte.
  // FLOPs = (4*64*64*128 + 64*(4*64 + 128 + 4)) * 4096/64 = 135,806,976
  // bytes = 2*128*(64 + 4096)*2 = 2,129,920
  const double ai = fl::tile_intensity(64, 64, 4096, 128, 2);
  EXPECT_NEAR(ai, 135806976.0 / 2129920.0, 1e-9);
  EXPECT_NEAR(ai, 63.8, 0.05);
  // Br = 1, Bc = 1 (the naive kernel): about one FLOP per byte.
  EXPECT_NEAR(fl::tile_intensity(1, 1, 4096, 128, 2), (4.0 * 128 + 4 + 128 + 4) * 4096 / (2.0 * 128 * 4097 * 2), 1e-12);
}

TEST(Formulas, ProblemIntensity) {
  // Self-attention, N = 4096, d = 128, fp16: 4 N^2 d / (4 N d * 2 bytes) = N / 2.
  fl::AttnParams p = fl::make_params(fl::DType::f16, 1, 1, 4096, 4096, 128);
  EXPECT_DOUBLE_EQ(fl::problem_intensity(p), 2048.0);
  EXPECT_DOUBLE_EQ(fl::minimum_bytes(p), 4.0 * 4096 * 128 * 2);
  // GQA reads fewer K/V bytes.
  p.heads_q = 8;
  p.heads_kv = 2;
  EXPECT_DOUBLE_EQ(fl::minimum_bytes(p), (2.0 * 8 * 4096 * 128 + 2.0 * 2 * 4096 * 128) * 2);
}

TEST(Strides, Layouts) {
  const fl::Strides bhnd = fl::make_strides(fl::Layout::BHND, 16, 1024, 128);
  EXPECT_EQ(bhnd.row, 128);
  EXPECT_EQ(bhnd.head, 1024 * 128);
  EXPECT_EQ(bhnd.batch, 16 * 1024 * 128);
  const fl::Strides bnhd = fl::make_strides(fl::Layout::BNHD, 16, 1024, 128);
  EXPECT_EQ(bnhd.head, 128);
  EXPECT_EQ(bnhd.row, 16 * 128);
  EXPECT_EQ(bnhd.batch, 1024 * 16 * 128);
  EXPECT_EQ(fl::span_elements(bnhd, 2, 16, 1024, 128), 2 * 1024 * 16 * 128);
}

TEST(CheckCommon, AcceptsValid) { EXPECT_EQ(fl::check_common(valid_params()), ""); }

TEST(CheckCommon, RejectsNullPointers) {
  fl::AttnParams p = valid_params();
  p.k = nullptr;
  EXPECT_NE(fl::check_common(p).find("K is a null pointer"), std::string::npos);
  p = valid_params();
  p.o = nullptr;
  EXPECT_NE(fl::check_common(p).find("O is a null pointer"), std::string::npos);
}

TEST(CheckCommon, RejectsMisalignedPointers) {
  fl::AttnParams p = valid_params();
  p.v = reinterpret_cast<void*>(0x3008);
  EXPECT_NE(fl::check_common(p).find("V must be 16-byte aligned"), std::string::npos);
}

TEST(CheckCommon, RejectsBadSizes) {
  for (int which = 0; which < 6; ++which) {
    fl::AttnParams p = valid_params();
    int64_t* sizes[] = {&p.batch, &p.heads_q, &p.heads_kv, &p.seqlen_q, &p.seqlen_k, &p.head_dim};
    *sizes[which] = which % 2 ? 0 : -3;
    EXPECT_NE(fl::check_common(p).find("must be >= 1"), std::string::npos) << which;
  }
}

TEST(CheckCommon, RejectsHeadsNotMultiple) {
  fl::AttnParams p = valid_params();
  p.heads_q = 6;
  p.heads_kv = 4;
  EXPECT_NE(fl::check_common(p).find("multiple of H_kv"), std::string::npos);
}

TEST(CheckCommon, RejectsBadStrides) {
  fl::AttnParams p = valid_params();
  p.q_stride.row = 64;  // < d: rows would overlap / last dim not contiguous
  EXPECT_NE(fl::check_common(p).find("row stride"), std::string::npos);
  p = valid_params();
  p.k_stride.row = 132;  // not a multiple of 8 elements
  EXPECT_NE(fl::check_common(p).find("multiples of 8"), std::string::npos);
}

// The four tensors of a problem, by name and by their strides in AttnParams.
const struct {
  const char* name;
  fl::Strides fl::AttnParams::*stride;
} kTensors[] = {{"Q", &fl::AttnParams::q_stride},
                {"K", &fl::AttnParams::k_stride},
                {"V", &fl::AttnParams::v_stride},
                {"O", &fl::AttnParams::o_stride}};

TEST(CheckCommon, RejectsNonContiguousHeadDim) {
  // A head dimension with stride 2 (e.g. every other element of a wider tensor): each tensor is
  // refused by name, with the stride it was given.
  for (const auto& t : kTensors) {
    fl::AttnParams p = valid_params();
    (p.*t.stride).dim = 2;
    EXPECT_NE(fl::check_common(p).find(std::string(t.name) +
                                       "'s head-dimension stride must be 1 (got 2)"),
              std::string::npos)
        << t.name << ": " << fl::check_common(p);
  }
  for (int64_t dim : {0, -1}) {
    fl::AttnParams p = valid_params();
    p.v_stride.dim = dim;
    EXPECT_NE(fl::check_common(p).find("V's head-dimension stride must be 1 (got " +
                                       std::to_string(dim) + ")"),
              std::string::npos)
        << dim;
  }
}

TEST(Strides, SpanCountsTheHeadDimStride) {
  // One row of d = 4 elements 3 apart: offsets 0, 3, 6, 9, so it spans 10 elements.
  fl::Strides s;
  s.dim = 3;
  EXPECT_EQ(fl::span_elements(s, 1, 1, 1, 4), 10);
  s.dim = 1;
  EXPECT_EQ(fl::span_elements(s, 1, 1, 1, 4), 4);
}

TEST(CheckShape, NeedsNoPointers) {
  // The shape rules alone: a well-formed shape with null pointers passes; the size, head and
  // scale rules give the same message as check_common.
  fl::AttnParams p = fl::make_params(fl::DType::f16, 2, 4, 128, 128, 128);
  EXPECT_EQ(fl::check_shape(p), "");
  p.seqlen_k = 0;
  EXPECT_NE(fl::check_shape(p).find("every size must be >= 1"), std::string::npos);
  p = valid_params();
  p.heads_q = 6;
  p.heads_kv = 4;
  EXPECT_EQ(fl::check_shape(p), fl::check_common(p));
  EXPECT_NE(fl::check_shape(p).find("multiple of H_kv"), std::string::npos);
  p = valid_params();
  p.softmax_scale = -1.f;
  EXPECT_EQ(fl::check_shape(p), fl::check_common(p));
  EXPECT_NE(fl::check_shape(p).find("softmax_scale"), std::string::npos);
}

TEST(CheckCommon, RejectsOverflowingOffsets) {
  fl::AttnParams p = valid_params();
  p.batch = int64_t{1} << 40;
  p.q_stride.batch = int64_t{1} << 40;
  EXPECT_NE(fl::check_common(p).find("overflow"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// e4m3 inputs: O's type, strides in bytes, descale factors
// ---------------------------------------------------------------------------------------------

// A valid e4m3 problem (B = 2, H_q = 4 over H_kv = 2): descale factors of 1 per tensor.
const std::vector<float>& unit_factors() {
  static const std::vector<float> ones(64, 1.f);
  return ones;
}
fl::AttnParams valid_e4m3() {
  fl::AttnParams p = fl::make_params(fl::DType::e4m3, 2, 4, 128, 128, 128);
  p.heads_kv = 2;
  p.k_stride = p.v_stride = fl::make_strides(fl::Layout::BHND, 2, 128, 128);
  p.q = reinterpret_cast<void*>(0x1000);
  p.k = reinterpret_cast<void*>(0x2000);
  p.v = reinterpret_cast<void*>(0x3000);
  p.o = reinterpret_cast<void*>(0x4000);
  p.q_descale = p.k_descale = p.v_descale = unit_factors().data();
  return p;
}

bool has(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

TEST(CheckCommon, E4m3TypesAndSizes) {
  EXPECT_EQ(fl::element_size(fl::DType::e4m3), 1);
  EXPECT_EQ(fl::make_params(fl::DType::e4m3, 1, 1, 8, 8, 64).out_dtype, fl::DType::f16);
  EXPECT_EQ(fl::make_params(fl::DType::bf16, 1, 1, 8, 8, 64).out_dtype, fl::DType::bf16);
  EXPECT_EQ(fl::check_common(valid_e4m3()), "");
  fl::AttnParams p = valid_e4m3();
  p.out_dtype = fl::DType::bf16;
  EXPECT_EQ(fl::check_common(p), "");
  p.descale_per_head = true;  // 8 factors for Q, 4 for K and V
  EXPECT_EQ(fl::check_common(p), "");
  // Inputs at one byte, O at out_dtype's two: Q + K + V + O for N = 4096, d = 128, H = 1.
  fl::AttnParams m = fl::make_params(fl::DType::e4m3, 1, 1, 4096, 4096, 128);
  EXPECT_DOUBLE_EQ(fl::minimum_bytes(m), 3.0 * 4096 * 128 * 1 + 4096 * 128 * 2);
  EXPECT_DOUBLE_EQ(fl::problem_intensity(m), 4.0 * 4096 * 4096 * 128 / (5.0 * 4096 * 128));
}

TEST(CheckCommon, OutDtypeRules) {
  for (fl::DType in : {fl::DType::f16, fl::DType::bf16}) {
    for (fl::DType out : {fl::DType::f16, fl::DType::bf16, fl::DType::e4m3}) {
      fl::AttnParams p = valid_params();
      p.dtype = in;
      p.out_dtype = out;
      const std::string why = fl::check_common(p);
      if (in == out) {
        EXPECT_EQ(why, "");
      } else {
        EXPECT_TRUE(has(why, "O's dtype (out_dtype) must be the inputs' dtype for fp16 and bf16 "
                             "inputs (got " + std::string(fl::to_string(in)) + " inputs, " +
                             fl::to_string(out) + " O)"))
            << why;
      }
    }
  }
  fl::AttnParams p = valid_e4m3();
  p.out_dtype = fl::DType::e4m3;
  EXPECT_TRUE(has(fl::check_common(p),
                  "O's dtype (out_dtype) must be fp16 or bf16 for e4m3 inputs (got e4m3)"))
      << fl::check_common(p);
}

TEST(CheckCommon, E4m3NeedsDescaleFactors) {
  for (const auto& [name, ptr] : {std::make_pair("Q", &fl::AttnParams::q_descale),
                                  std::make_pair("K", &fl::AttnParams::k_descale),
                                  std::make_pair("V", &fl::AttnParams::v_descale)}) {
    fl::AttnParams p = valid_e4m3();
    p.*ptr = nullptr;
    EXPECT_EQ(fl::check_common(p), "e4m3 inputs need descale factors (x = e4m3 * descale): " +
                                       std::string(name) + "'s descale is a null pointer");
  }
}

TEST(CheckCommon, DescaleFactorsMustBeFiniteAndPositive) {
  const float bads[] = {0.f, -0.f, -2.f, std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  const struct {
    const char* name;
    const float* fl::AttnParams::*ptr;
    int64_t per_head_count;  // B x H_q = 8 for Q, B x H_kv = 4 for K and V
  } tensors[] = {{"Q", &fl::AttnParams::q_descale, 8},
                 {"K", &fl::AttnParams::k_descale, 4},
                 {"V", &fl::AttnParams::v_descale, 4}};
  for (const auto& t : tensors) {
    for (float bad : bads) {
      // Per tensor: factor 0 is the one read.
      std::vector<float> f(64, 1.f);
      f[0] = bad;
      fl::AttnParams p = valid_e4m3();
      p.*t.ptr = f.data();
      std::string why = fl::check_common(p);
      EXPECT_TRUE(has(why, std::string(t.name) +
                               "'s descale factors must be finite and > 0 (factor 0 is"))
          << t.name << " " << bad << ": " << why;
      EXPECT_TRUE(has(why, "one factor per tensor")) << why;
      // Per head: every one of the B x H factors is read, the last included...
      f[0] = 1.f;
      f[t.per_head_count - 1] = bad;
      p.descale_per_head = true;
      why = fl::check_common(p);
      EXPECT_TRUE(has(why, std::string(t.name) + "'s descale factors must be finite and > 0 "
                                                 "(factor " +
                               std::to_string(t.per_head_count - 1) + " is"))
          << t.name << " " << bad << ": " << why;
      EXPECT_TRUE(has(why, "per head")) << why;
      // ...and none past them; per tensor, only the first.
      f[t.per_head_count - 1] = 1.f;
      f[t.per_head_count] = bad;
      EXPECT_EQ(fl::check_common(p), "") << t.name << " " << bad;
      p.descale_per_head = false;
      f[1] = bad;
      EXPECT_EQ(fl::check_common(p), "") << t.name << " " << bad;
    }
  }
}

TEST(CheckCommon, DescaleFactorsAreForE4m3Only) {
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    for (const auto& [name, ptr] : {std::make_pair("Q", &fl::AttnParams::q_descale),
                                    std::make_pair("K", &fl::AttnParams::k_descale),
                                    std::make_pair("V", &fl::AttnParams::v_descale)}) {
      fl::AttnParams p = valid_params();
      p.dtype = p.out_dtype = t;
      p.*ptr = unit_factors().data();
      EXPECT_EQ(fl::check_common(p), "descale factors are for e4m3 inputs: " +
                                         std::string(name) + "'s descale must be null for " +
                                         fl::to_string(t) + " inputs");
    }
    fl::AttnParams p = valid_params();
    p.dtype = p.out_dtype = t;
    p.descale_per_head = true;
    EXPECT_TRUE(has(fl::check_common(p), "descale factors are for e4m3 inputs: "
                                         "descale_per_head must be false"))
        << fl::check_common(p);
  }
}

TEST(CheckCommon, StridesAreMultiplesOf16Bytes) {
  // 8 elements are 16 bytes of fp16 but 8 bytes of e4m3: the rule is in bytes, per tensor by its
  // own type (O by out_dtype).
  for (const auto& t : kTensors) {
    for (int which = 0; which < 3; ++which) {
      fl::AttnParams f16 = valid_params(), e4m3 = valid_e4m3();
      for (fl::AttnParams* p : {&f16, &e4m3}) {
        fl::Strides& s = p->*t.stride;
        int64_t* field = which == 0 ? &s.row : which == 1 ? &s.head : &s.batch;
        *field += 8;
      }
      EXPECT_EQ(fl::check_common(f16), "") << t.name << " " << which;
      const std::string why = fl::check_common(e4m3);
      if (std::string(t.name) == "O") {
        EXPECT_EQ(why, "") << "O is fp16: 8 elements are 16 bytes";
      } else {
        EXPECT_TRUE(has(why, std::string(t.name) +
                                 " strides must be multiples of 16 elements (16 bytes of e4m3)"))
            << t.name << " " << which << ": " << why;
      }
    }
  }
  // 16 elements of e4m3 are fine; 4 are not 16 bytes of fp16 either.
  fl::AttnParams p = valid_e4m3();
  p.k_stride.row += 16;
  EXPECT_EQ(fl::check_common(p), "");
  p = valid_params();
  p.q_stride.row += 4;
  EXPECT_TRUE(has(fl::check_common(p), "Q strides must be multiples of 8 elements (16 bytes)"))
      << fl::check_common(p);
}

TEST(CheckCommon, RejectsBadScale) {
  fl::AttnParams p = valid_params();
  p.softmax_scale = 0.f;
  EXPECT_NE(fl::check_common(p).find("softmax_scale"), std::string::npos);
  p.softmax_scale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(fl::check_common(p).find("softmax_scale"), std::string::npos);
}

}  // namespace
