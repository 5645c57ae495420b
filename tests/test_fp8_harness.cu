// The harness side of e4m3 inputs (GPU; skipped without one):
//   * the device quantiser (quantize_e4m3_device, common/random.h) equals fl::quantize_e4m3
//     (common/fp8.h) bit for bit: the e4m3 values and the descale factors, per tensor and per
//     head, into a dense and a strided layout, with NaN, zeros (a group of zeros: descale 1),
//     -0, outliers and values in e4m3's subnormal range;
//   * a Problem with e4m3 inputs holds exactly that quantisation of its seeded fp32 values
//     (the same numbers an fp16 problem of the same spec rounds), and set_inputs quantises the
//     values it is given the same way;
//   * the reference on e4m3 inputs is fp32 attention on the dequantised inputs: it equals the
//     float64 CPU reference on e4m3 x descale (per tensor and per head, GQA, causal, both
//     layouts), and its low-precision twin quantises P as the FP8 rung does (a host model of
//     e4m3(448 exp(s - m)) / 448 / l, O rounded to out_dtype);
//   * Fp8Inputs.OutliersAndLargeMagnitude: every kernel with fp8_inputs passes fl::verify on
//     randn inputs with a few entries x50 (set_inputs) and on input_std 8, per tensor and per head,
//     O in fp16 and in bf16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/elementwise.cuh"
#include "common/fp8.h"
#include "common/harness.h"
#include "common/random.h"
#include "common/reference.h"
#include "common/registry.h"
#include "gpu_test_util.h"

namespace {

using fl::test::Rng;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

std::vector<uint8_t> download(const void* ptr, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  FL_CUDA_CHECK(cudaMemcpy(out.data(), ptr, bytes, cudaMemcpyDeviceToHost));
  return out;
}

// The bytes of a strided e4m3 tensor in logical [B, H, N, d] order.
std::vector<uint8_t> logical(const std::vector<uint8_t>& bytes, const fl::Strides& s,
                             int64_t batch, int64_t heads, int64_t rows, int64_t d) {
  std::vector<uint8_t> out(batch * heads * rows * d);
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    out[i] = bytes[fl::strided_offset(i, s, heads, rows, d)];
  }
  return out;
}

// Host values with everything the quantiser must handle, [B, H, N, d]: randn, a head of zeros,
// a head of zeros with one NaN, a NaN and a -0 in an ordinary head, an outlier x1000 in another,
// and a head of values in e4m3's subnormal range once scaled (a spread of 2^20 under its amax).
std::vector<float> awkward_values(int64_t B, int64_t H, int64_t N, int64_t d) {
  Rng r(42);
  std::vector<float> x(B * H * N * d);
  for (float& e : x) e = r.normal();
  const int64_t head = N * d;
  auto at = [&](int64_t b, int64_t h, int64_t i) -> float& { return x[(b * H + h) * head + i]; };
  for (int64_t i = 0; i < head; ++i) at(0, 1, i) = 0.f;
  for (int64_t i = 0; i < head; ++i) at(1, 0, i) = 0.f;
  at(1, 0, 5) = std::numeric_limits<float>::quiet_NaN();
  at(0, 0, 7) = std::numeric_limits<float>::quiet_NaN();
  at(0, 0, 8) = -0.f;
  at(1, 2, 3) *= 1000.f;
  for (int64_t i = 0; i < head; ++i) at(0, 2, i) *= std::ldexp(1.f, -static_cast<int>(i % 21));
  return x;
}

TEST(Fp8Harness, DeviceQuantiserEqualsTheHostsBitForBit) {
  FL_REQUIRE_GPU();
  const int64_t B = 2, H = 3, N = 17, d = 32;
  const std::vector<float> x = awkward_values(B, H, N, d);
  fl::DeviceBuffer src(x.size() * sizeof(float));
  FL_CUDA_CHECK(cudaMemcpy(src.get(), x.data(), src.bytes(), cudaMemcpyHostToDevice));
  const fl::Strides dense = fl::make_strides(fl::Layout::BHND, H, N, d);
  for (bool per_head : {false, true}) {
    const fl::E4m3Tensor want = fl::quantize_e4m3(x, B, H, N, d, per_head);
    for (fl::Layout layout : {fl::Layout::BHND, fl::Layout::BNHD}) {
      SCOPED_TRACE(std::string(per_head ? "per head" : "per tensor") +
                   (layout == fl::Layout::BNHD ? ", BNHD" : ", BHND"));
      const fl::Strides out_s = fl::make_strides(layout, H, N, d);
      fl::DeviceBuffer dst(x.size());
      FL_CUDA_CHECK(cudaMemset(dst.get(), 0xAA, dst.bytes()));
      const std::vector<float> descale = fl::quantize_e4m3_device(
          src.as<float>(), dense, dst.get(), out_s, B, H, N, d, per_head);
      ASSERT_EQ(descale.size(), want.descale.size());
      for (size_t g = 0; g < descale.size(); ++g) {
        EXPECT_TRUE(same_bits(descale[g], want.descale[g]))
            << "group " << g << ": " << descale[g] << " vs " << want.descale[g];
      }
      const std::vector<uint8_t> got = logical(download(dst.get(), dst.bytes()), out_s, B, H, N, d);
      int64_t wrong = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        if (got[i] != want.bits[i] && ++wrong <= 5) {
          ADD_FAILURE() << "element " << i << " (x = " << x[i] << "): device "
                        << int(got[i]) << ", host " << int(want.bits[i]);
        }
      }
      EXPECT_EQ(wrong, 0);
    }
    // The cases are what they claim: a zero group has descale 1 (per head), NaN is 0x7F.
    if (per_head) EXPECT_EQ(want.descale[1], 1.f);
    EXPECT_EQ(want.bits[7], 0x7F);
  }
}

TEST(Fp8Harness, ProblemQuantisesItsSeededValuesAndSetInputs) {
  FL_REQUIRE_GPU();
  for (bool per_head : {false, true}) {
    for (fl::Layout layout : {fl::Layout::BHND, fl::Layout::BNHD}) {
      SCOPED_TRACE(std::string(per_head ? "per head" : "per tensor") +
                   (layout == fl::Layout::BNHD ? ", BNHD" : ", BHND"));
      fl::ProblemSpec s = fl::test::as_e4m3(
          fl::test::shape_spec(fl::DType::bf16, 2, 4, 2, 40, 24, 64, false, layout, 9), per_head);
      s.with_lse = false;
      s.input_std = 3.f;
      fl::Problem pr(s);
      const fl::AttnParams& p = pr.params();
      EXPECT_EQ(p.dtype, fl::DType::e4m3);
      EXPECT_EQ(p.out_dtype, fl::DType::bf16);
      EXPECT_EQ(p.descale_per_head, per_head);
      EXPECT_EQ(p.q_descale, pr.q_descale().data());
      EXPECT_EQ(p.k_descale, pr.k_descale().data());
      EXPECT_EQ(p.v_descale, pr.v_descale().data());
      EXPECT_EQ(fl::check_common(p), "");
      EXPECT_EQ(pr.q.bytes(), static_cast<size_t>(2 * 4 * 40 * 64));  // one byte an input
      EXPECT_EQ(pr.o.bytes(), static_cast<size_t>(2 * 4 * 40 * 64 * 2));  // O in bf16

      // Q: the seeded fp32 values (fill_randn_fp32, the numbers fp16 problems round), in the
      // buffer's memory order, quantised on the host.
      const int64_t nq = 2 * 4 * 40 * 64;
      fl::DeviceBuffer values(nq * sizeof(float));
      fl::fill_randn_fp32(values.as<float>(), nq, s.seed * 3 + 0, s.input_std);
      std::vector<float> mem(nq);
      FL_CUDA_CHECK(cudaMemcpy(mem.data(), values.get(), values.bytes(), cudaMemcpyDeviceToHost));
      std::vector<float> logical_q(nq);
      for (int64_t i = 0; i < nq; ++i) {
        logical_q[i] = mem[fl::strided_offset(i, p.q_stride, 4, 40, 64)];
      }
      const fl::E4m3Tensor want = fl::quantize_e4m3(logical_q, 2, 4, 40, 64, per_head);
      EXPECT_EQ(logical(download(pr.q.get(), pr.q.bytes()), p.q_stride, 2, 4, 40, 64), want.bits);
      EXPECT_EQ(pr.q_descale(), want.descale);
      EXPECT_EQ(pr.k_descale().size(), per_head ? 4u : 1u);

      // set_inputs: the given values, quantised the same way.
      Rng r(5);
      std::vector<float> q(nq), kv(2 * 2 * 24 * 64);
      for (float& e : q) e = 2.f * r.normal();
      for (float& e : kv) e = r.normal();
      kv[100] *= 50.f;
      pr.set_inputs(q.data(), kv.data(), kv.data());
      const fl::E4m3Tensor wq = fl::quantize_e4m3(q, 2, 4, 40, 64, per_head);
      const fl::E4m3Tensor wkv = fl::quantize_e4m3(kv, 2, 2, 24, 64, per_head);
      EXPECT_EQ(logical(download(pr.q.get(), pr.q.bytes()), p.q_stride, 2, 4, 40, 64), wq.bits);
      EXPECT_EQ(logical(download(pr.v.get(), pr.v.bytes()), p.v_stride, 2, 2, 24, 64), wkv.bits);
      EXPECT_EQ(pr.q_descale(), wq.descale);
      EXPECT_EQ(pr.k_descale(), wkv.descale);
      EXPECT_EQ(pr.v_descale(), wkv.descale);
      EXPECT_EQ(pr.params().q_descale, pr.q_descale().data());
    }
  }
}

// Host copies of an e4m3 problem's inputs, dequantised (e4m3 x its group's descale), in the
// problem's strided layout: what cpu_reference reads.
std::vector<float> dequantised(const fl::Problem& pr, const fl::DeviceBuffer& buf,
                               const fl::Strides& s, int64_t heads, int64_t rows,
                               const std::vector<float>& descale) {
  const fl::AttnParams& p = pr.params();
  const std::vector<uint8_t> bytes = download(buf.get(), buf.bytes());
  std::vector<float> out(bytes.size(), 0.f);
  for (int64_t i = 0; i < p.batch * heads * rows * p.head_dim; ++i) {
    const int64_t off = fl::strided_offset(i, s, heads, rows, p.head_dim);
    const int64_t group = i / (rows * p.head_dim);  // b * heads + h
    out[off] = fl::from_e4m3(bytes[off]) * descale[p.descale_per_head ? group : 0];
  }
  return out;
}

struct RefCase {
  const char* name;
  fl::ProblemSpec spec;
};

std::vector<RefCase> ref_cases() {
  auto spec = [](int64_t b, int64_t hq, int64_t hkv, int64_t nq, int64_t nk, int64_t d,
                 bool causal, fl::Layout layout, bool per_head, fl::DType out) {
    return fl::test::as_e4m3(
        fl::test::shape_spec(out, b, hq, hkv, nq, nk, d, causal, layout, 17), per_head);
  };
  using fl::DType;
  using fl::Layout;
  return {{"plain", spec(2, 2, 2, 64, 64, 64, false, Layout::BHND, false, DType::f16)},
          {"per_head_gqa_bnhd", spec(2, 4, 2, 33, 65, 128, false, Layout::BNHD, true, DType::bf16)},
          {"causal_nq_gt_nk", spec(1, 2, 1, 40, 24, 64, true, Layout::BHND, true, DType::f16)}};
}

TEST(Fp8Harness, ReferenceIsFp32OnTheDequantisedInputs) {
  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  for (const RefCase& c : ref_cases()) {
    SCOPED_TRACE(c.name);
    fl::Problem pr(c.spec);
    const fl::AttnParams& p = pr.params();
    const int64_t n = p.batch * p.heads_q * p.seqlen_q * p.head_dim;
    // The bounds of the 16-bit inputs' test (test_reference.cu), on inputs of the same magnitude.
    const fl::test::ReferenceCheck r = fl::test::expect_reference_matches_float64(
        p, dequantised(pr, pr.q, p.q_stride, p.heads_q, p.seqlen_q, pr.q_descale()),
        dequantised(pr, pr.k, p.k_stride, p.heads_kv, p.seqlen_k, pr.k_descale()),
        dequantised(pr, pr.v, p.v_stride, p.heads_kv, p.seqlen_k, pr.v_descale()), cublas);
    // The reference must read the descale factors: a copy of the problem whose factors are all
    // doubled gives twice the output (V's factor) through different scores (Q's and K's).
    std::vector<float> dq = pr.q_descale(), dk = pr.k_descale(), dv = pr.v_descale();
    for (auto* f : {&dq, &dk, &dv}) {
      for (float& e : *f) e *= 2.f;
    }
    fl::AttnParams doubled = p;
    doubled.q_descale = dq.data();
    doubled.k_descale = dk.data();
    doubled.v_descale = dv.data();
    fl::DeviceBuffer o2(n * 4);
    fl::reference_attention(doubled, fl::RefPrecision::kFp32, o2.as<float>(), nullptr,
                            cublas.get());
    EXPECT_GT(fl::compare_fp32(o2.as<float>(), r.out32.as<float>(), n).max_abs_err,
              0.1 * r.max_ref);
  }
}

using fl::test::round_16;

TEST(Fp8Harness, LowPrecisionReferenceQuantisesPAsTheFp8RungDoes) {
  // kLowp on e4m3 inputs against a host model in double: s = scale q.k on the dequantised
  // inputs, m the row max, e = exp(s - m), l = sum e, P = e4m3(448 e) / 448 / l,
  // O = round_16(sum P v). The two differ by a few ulp of O where fp32 and double round s, e and
  // O differently, and by more in a row where 448 e of one key lies so close to a midpoint of two
  // e4m3 values that the two round it to different sides (about one key in 10^5): at most 1% of
  // the rows may differ by more than 4 ulp. A model that differs (no 448, P rounded before the
  // max is taken out, l summing the rounded P, O not rounded) moves nearly every row.
  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  for (const RefCase& c : ref_cases()) {
    SCOPED_TRACE(c.name);
    fl::Problem pr(c.spec);
    const fl::AttnParams& p = pr.params();
    const int64_t n = p.batch * p.heads_q * p.seqlen_q * p.head_dim;
    fl::DeviceBuffer lowp(n * 4), o32(n * 4), scores(n * 4);
    fl::reference_attention(p, fl::RefPrecision::kLowp, lowp.as<float>(), nullptr, cublas.get());
    fl::reference_attention(p, fl::RefPrecision::kFp32, o32.as<float>(), nullptr, cublas.get());
    fl::reference_attention(p, fl::RefPrecision::kLowpScores, scores.as<float>(), nullptr,
                            cublas.get());
    std::vector<float> got(n);
    FL_CUDA_CHECK(cudaMemcpy(got.data(), lowp.get(), n * 4, cudaMemcpyDeviceToHost));

    const std::vector<float> q =
        dequantised(pr, pr.q, p.q_stride, p.heads_q, p.seqlen_q, pr.q_descale());
    const std::vector<float> k =
        dequantised(pr, pr.k, p.k_stride, p.heads_kv, p.seqlen_k, pr.k_descale());
    const std::vector<float> v =
        dequantised(pr, pr.v, p.v_stride, p.heads_kv, p.seqlen_k, pr.v_descale());
    const int64_t nq = p.seqlen_q, nk = p.seqlen_k, d = p.head_dim, group = p.heads_q / p.heads_kv;
    std::vector<double> want(n);
    std::vector<double> s(nk), w(nk);
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t h = 0; h < p.heads_q; ++h) {
        const int64_t hk = h / group;
        for (int64_t i = 0; i < nq; ++i) {
          const int64_t visible =
              p.causal ? std::min(nk, std::max<int64_t>(0, i + nk - nq + 1)) : nk;
          double m = -INFINITY, l = 0;
          for (int64_t j = 0; j < visible; ++j) {
            double acc = 0;
            for (int64_t c2 = 0; c2 < d; ++c2) {
              acc += double(q[b * p.q_stride.batch + h * p.q_stride.head + i * p.q_stride.row + c2]) *
                     k[b * p.k_stride.batch + hk * p.k_stride.head + j * p.k_stride.row + c2];
            }
            s[j] = acc * p.softmax_scale;
            m = std::max(m, s[j]);
          }
          for (int64_t j = 0; j < visible; ++j) l += std::exp(s[j] - m);
          for (int64_t j = 0; j < visible; ++j) {
            const float e = static_cast<float>(std::exp(s[j] - m));
            w[j] = fl::from_e4m3(fl::to_e4m3(448.f * e)) / 448.0 / l;
          }
          for (int64_t c2 = 0; c2 < d; ++c2) {
            double acc = 0;
            for (int64_t j = 0; j < visible; ++j) {
              acc += w[j] * v[b * p.v_stride.batch + hk * p.v_stride.head + j * p.v_stride.row + c2];
            }
            want[((b * p.heads_q + h) * nq + i) * d + c2] =
                round_16(p.out_dtype, static_cast<float>(acc));
          }
        }
      }
    }
    double max_o = 0;
    for (double x : want) max_o = std::max(max_o, std::abs(x));
    const double ulp = p.out_dtype == fl::DType::f16 ? 0x1p-10 : 0x1p-7;
    const double bound = 4 * ulp * std::max(1.0, max_o);
    const int64_t rows = n / d;
    int64_t rows_off = 0;
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double row_diff = 0;
      for (int64_t c2 = 0; c2 < d; ++c2) {
        row_diff = std::max(row_diff, std::abs(got[r * d + c2] - want[r * d + c2]));
      }
      worst = std::max(worst, row_diff);
      rows_off += row_diff > bound;
    }
    EXPECT_LE(rows_off, std::max<int64_t>(2, rows / 100))
        << "rows of kLowp off the host model by more than " << bound << " (worst " << worst
        << ", of " << rows << " rows)";
    const double lowp_err = fl::compare_fp32(lowp.as<float>(), o32.as<float>(), n).max_abs_err;
    EXPECT_GT(lowp_err, 0x1p-10 * std::max(1.0, max_o))
        << "the low-precision reference must differ from the fp32 one";
    // kLowpScores is kLowp for e4m3 inputs (no fp8 kernel stores S).
    EXPECT_EQ(fl::compare_fp32(scores.as<float>(), lowp.as<float>(), n).max_abs_err, 0.0);
  }
}

// Every kernel with fp8_inputs in this build; skips the test (with the reason) when there is
// none or the GPU cannot run them.
std::vector<const fl::KernelInfo*> fp8_kernels_here(std::string* why_none) {
  std::vector<const fl::KernelInfo*> out;
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    if (k->fp8_inputs) out.push_back(k);
  }
  if (out.empty()) *why_none = "no kernel with fp8_inputs in this build (FL_KERNELS, FL_HOPPER)";
  return out;
}

TEST(Fp8Inputs, OutliersAndLargeMagnitude) {
  FL_REQUIRE_GPU();
  std::string none;
  const std::vector<const fl::KernelInfo*> kernels = fp8_kernels_here(&none);
  if (kernels.empty()) GTEST_SKIP() << none;
  fl::CublasHandle cublas;
  for (const fl::KernelInfo* k : kernels) {
    int ran = 0;
    for (fl::DType out : {fl::DType::f16, fl::DType::bf16}) {
      for (bool per_head : {false, true}) {
        const fl::ProblemSpec s = fl::test::as_e4m3(
            fl::test::shape_spec(out, 2, 4, 2, 256, 320, 128, false, fl::Layout::BHND, 31 + ran),
            per_head);
        const std::string label = k->name() + " " + s.describe();
        {
          fl::Problem pr(s);
          const std::string why = fl::why_unsupported(*k, pr.params());
          if (why.find("compute capability") != std::string::npos) GTEST_SKIP() << why;
          ASSERT_EQ(why, "") << label;
        }
        // (1) randn with a few entries x50 in each of Q, K and V: the outliers set the scale of
        // their group, the ordinary values keep 3 mantissa bits at 1/50 of the range.
        {
          SCOPED_TRACE(label + " outliers x50");
          fl::Problem pr(s);
          Rng r(1000 + ran);
          std::vector<float> q(s.batch * s.heads_q * s.seqlen_q * s.head_dim);
          std::vector<float> kk(s.batch * s.heads_kv * s.seqlen_k * s.head_dim), v(kk.size());
          for (auto* x : {&q, &kk, &v}) {
            for (float& e : *x) e = r.normal();
            for (int i = 0; i < 7; ++i) (*x)[r.next() % x->size()] *= 50.f;
          }
          pr.set_inputs(q.data(), kk.data(), v.data());
          const fl::Reference ref(pr, cublas);
          const fl::Verdict verdict = fl::verify(*k, pr, ref);
          EXPECT_TRUE(verdict.passed) << verdict.why << " [max err " << verdict.out.max_abs_err
                                      << ", tolerance " << verdict.tolerance << "]";
        }
        // (2) input_std 8: scores of std ~64 x scale, a sharp softmax.
        {
          fl::ProblemSpec big = s;
          big.input_std = 8.f;
          SCOPED_TRACE(k->name() + " " + big.describe());
          fl::Problem pr(big);
          const fl::Reference ref(pr, cublas);
          const fl::Verdict verdict = fl::verify(*k, pr, ref);
          EXPECT_TRUE(verdict.passed) << verdict.why << " [max err " << verdict.out.max_abs_err
                                      << ", tolerance " << verdict.tolerance << "]";
        }
        ++ran;
      }
    }
    EXPECT_EQ(ran, 4) << k->name();
  }
}

}  // namespace
