// The counting formulas and the argument rules of common/attention.h, pinned to worked numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

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
  // LADDER.md / the issue: Br = 64 (Bc = 64), N = 4096, d = 128, fp16 -> about 63.8 FLOP/byte.
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

TEST(CheckCommon, RejectsNonContiguousHeadDim) {
  // A head dimension with stride 2 (e.g. every other element of a wider tensor): each tensor is
  // refused by name, with the stride it was given.
  const struct {
    const char* name;
    fl::Strides fl::AttnParams::*stride;
  } tensors[] = {{"Q", &fl::AttnParams::q_stride},
                 {"K", &fl::AttnParams::k_stride},
                 {"V", &fl::AttnParams::v_stride},
                 {"O", &fl::AttnParams::o_stride}};
  for (const auto& t : tensors) {
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

TEST(CheckCommon, RejectsBadScale) {
  fl::AttnParams p = valid_params();
  p.softmax_scale = 0.f;
  EXPECT_NE(fl::check_common(p).find("softmax_scale"), std::string::npos);
  p.softmax_scale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(fl::check_common(p).find("softmax_scale"), std::string::npos);
}

}  // namespace
