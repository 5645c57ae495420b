// Every registered kernel on every shape it claims (GPU; skipped without one). The list of
// kernels comes from the registry, so a new rung is tested without touching this file.
//
// Each case goes through fl::verify: the FlashAttention-2 pass rule against the fp32 cuBLAS
// reference, every output finite (poison overwritten), output not all zero, LSE within
// tolerance when asked for, two runs bitwise equal. The cases come in fp16, bf16 and e4m3 (the
// fp16 shapes with e4m3 inputs, O in fp16 or bf16, descale factors per tensor or per head): a
// 16-bit rung must refuse every e4m3 case, a kernel with fp8_inputs every fp16 and bf16 one.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/harness.h"
#include "common/npy.h"
#include "common/random.h"
#include "common/registry.h"
#include "gpu_test_util.h"

namespace {

struct Case {
  std::string name;
  fl::ProblemSpec spec;
};

fl::ProblemSpec base(fl::DType t, int64_t b, int64_t h, int64_t n, int64_t d) {
  fl::ProblemSpec s;
  s.dtype = t;
  s.batch = b;
  s.heads_q = s.heads_kv = h;
  s.seqlen_q = s.seqlen_k = n;
  s.head_dim = d;
  s.seed = 1234 + n + d;
  return s;
}

// The shapes a kernel may claim. A kernel is run on each one its supports() accepts.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
    const std::string ty = fl::to_string(t);
    out.push_back({ty + "_d128_n256_b2h4", base(t, 2, 4, 256, 128)});
    out.push_back({ty + "_d128_n1024_b1h2", base(t, 1, 2, 1024, 128)});
    out.push_back({ty + "_d64_n512_b2h2", base(t, 2, 2, 512, 64)});
    fl::ProblemSpec big = base(t, 1, 2, 512, 128);
    big.input_std = t == fl::DType::f16 ? 8.0f : 20.0f;  // large scores: a sharp softmax
    out.push_back({ty + "_large_magnitude", big});
    fl::ProblemSpec gqa = base(t, 2, 8, 256, 128);
    gqa.heads_kv = 2;
    out.push_back({ty + "_gqa_8_2", gqa});
    fl::ProblemSpec bnhd = base(t, 2, 4, 256, 128);
    bnhd.layout = fl::Layout::BNHD;
    out.push_back({ty + "_bnhd", bnhd});
    fl::ProblemSpec lse = base(t, 1, 4, 512, 128);
    lse.with_lse = true;
    lse.scale = 0.05f;
    out.push_back({ty + "_lse_scale", lse});
    fl::ProblemSpec cross = base(t, 1, 2, 128, 128);
    cross.seqlen_k = 384;
    out.push_back({ty + "_nq128_nk384", cross});
    // Awkward lengths (FlashAttention-2's test set), for kernels that claim any length.
    for (int64_t n : {1, 17, 113, 1023}) {
      out.push_back({ty + "_n" + std::to_string(n), base(t, 1, 2, n, 128)});
    }
    fl::ProblemSpec ragged = base(t, 1, 2, 113, 64);
    ragged.seqlen_k = 203;
    ragged.with_lse = true;
    out.push_back({ty + "_nq113_nk203", ragged});
    // Causal, bottom-right aligned; Nq > Nk leaves rows that see no key (O = 0, LSE = -inf).
    fl::ProblemSpec causal = base(t, 1, 2, 256, 128);
    causal.causal = true;
    out.push_back({ty + "_causal_n256", causal});
    fl::ProblemSpec causal_wide = base(t, 1, 2, 113, 128);
    causal_wide.seqlen_k = 1023;
    causal_wide.causal = true;
    causal_wide.with_lse = true;
    out.push_back({ty + "_causal_nq113_nk1023", causal_wide});
    fl::ProblemSpec causal_tall = base(t, 1, 2, 200, 64);
    causal_tall.seqlen_k = 64;
    causal_tall.causal = true;
    causal_tall.with_lse = true;
    out.push_back({ty + "_causal_nq200_nk64", causal_tall});
    // Causal with an odd number of heads and of query tiles (5 of 128 rows): rung 27's units pair
    // a head's items and two heads' middle ones, and leave the last head's middle item alone.
    fl::ProblemSpec causal_odd = base(t, 1, 3, 640, 128);
    causal_odd.causal = true;
    out.push_back({ty + "_causal_n640_b1h3", causal_odd});
    // d = 256, for kernels that claim it: a plain shape, then ragged, causal, GQA and LSE at once.
    out.push_back({ty + "_d256_n256", base(t, 1, 2, 256, 256)});
    fl::ProblemSpec wide = base(t, 2, 4, 77, 256);
    wide.heads_kv = 2;
    wide.seqlen_k = 300;
    wide.causal = true;
    wide.with_lse = true;
    out.push_back({ty + "_d256_causal_gqa_nq77_nk300", wide});
    // Decode: a few query rows against a longer K/V, for the rungs that claim any length (the
    // serving rungs take only these: Nq x H_q / H_kv <= 64, their packed tile's rows).
    struct Decode {
      const char* name;
      int64_t b, hq, hkv, nq, nk, d;
      bool causal;
      fl::Layout layout;
    };
    const Decode decode[] = {
        {"_decode_nq1_nk1000_gqa_32_8", 1, 32, 8, 1, 1000, 128, false, fl::Layout::BHND},
        {"_decode_nq4_nk4096_gqa_32_8_causal", 1, 32, 8, 4, 4096, 128, true, fl::Layout::BNHD},
        {"_decode_nq16_nk100_gqa_6_2_causal_d64", 2, 6, 2, 16, 100, 64, true, fl::Layout::BHND},
        {"_decode_nq2_nk777_mqa_16_1", 2, 16, 1, 2, 777, 128, false, fl::Layout::BNHD},
        {"_decode_nq3_nk5_causal_mha_8_8", 1, 8, 8, 3, 5, 128, true, fl::Layout::BHND},
    };
    for (const Decode& c : decode) {
      fl::ProblemSpec s = base(t, c.b, c.hq, c.nq, c.d);
      s.heads_kv = c.hkv;
      s.seqlen_k = c.nk;
      s.causal = c.causal;
      s.layout = c.layout;
      s.with_lse = true;
      out.push_back({ty + c.name, s});
    }
  }
  // e4m3 inputs: each fp16 shape again, O in fp16 for even cases and bf16 for odd ones, the
  // descale factors per head for every third (per tensor otherwise). The large-magnitude case
  // keeps input_std 8: e4m3 is scaled to its range whatever the magnitude.
  const size_t n16 = out.size() / 2;
  for (size_t i = 0; i < n16; ++i) {
    Case c = out[i];
    if (c.spec.dtype != fl::DType::f16) throw std::logic_error("cases(): fp16 cases come first");
    c.spec.dtype = fl::DType::e4m3;
    c.spec.out_dtype = i % 2 ? fl::DType::bf16 : fl::DType::f16;
    c.spec.descale_per_head = i % 3 == 0;
    c.name = "e4m3_" + std::string(fl::to_string(c.spec.out_dtype)) +
             (c.spec.descale_per_head ? "_per_head" : "") + c.name.substr(4);
    out.push_back(c);
  }
  return out;
}

class KernelTest : public ::testing::TestWithParam<const fl::KernelInfo*> {};

TEST(KernelCases, E4m3CasesMirrorTheFp16Ones) {
  // The case list itself (no GPU): as many e4m3 cases as fp16 ones, both O types and both kinds
  // of descale factors among them.
  std::map<std::string, int> count;
  int per_head = 0, out_bf16 = 0;
  for (const Case& c : cases()) {
    ++count[fl::to_string(c.spec.dtype)];
    if (c.spec.dtype == fl::DType::e4m3) {
      per_head += c.spec.descale_per_head;
      out_bf16 += c.spec.out_dtype == fl::DType::bf16;
      EXPECT_EQ(c.name.rfind("e4m3_", 0), 0u) << c.name;
    }
  }
  EXPECT_EQ(count["e4m3"], count["fp16"]);
  EXPECT_EQ(count["bf16"], count["fp16"]);
  EXPECT_GE(per_head, 4);
  EXPECT_GE(out_bf16, 4);
  EXPECT_GE(count["e4m3"] - out_bf16, 4);
}

TEST_P(KernelTest, PassesEveryClaimedShape) {
  FL_REQUIRE_GPU();
  const fl::KernelInfo& k = *GetParam();
  fl::CublasHandle cublas;
  std::map<std::string, int> claimed;  // per input dtype
  for (const Case& c : cases()) {
    fl::Problem problem(c.spec);
    if (!fl::why_unsupported(k, problem.params_for(k)).empty()) {
      // Refused shapes must be refused at launch too, and leave O untouched (still poison).
      EXPECT_THROW(fl::run_kernel(k, problem.params()), fl::UnsupportedError) << c.name;
      fl::fill_bits16(problem.o2.get(), 0xFFFF, problem.o2.bytes() / 2);
      EXPECT_EQ(fl::count_bitwise_differences(problem.params(), problem.params().o,
                                              problem.o2.get()),
                0)
          << k.name() << " wrote to O on a refused shape (" << c.name << ")";
      continue;
    }
    ++claimed[fl::to_string(c.spec.dtype)];
    fl::Reference ref(problem, cublas);
    const fl::Verdict v = fl::verify(k, problem, ref);
    EXPECT_TRUE(v.passed) << k.name() << " on " << c.name << " (" << c.spec.describe()
                          << "): " << v.why << " [max err " << v.out.max_abs_err
                          << ", tolerance " << v.tolerance << "]";
  }
  // Every rung claims a real set of shapes in each type it takes and none in the other, so this
  // test can fail.
  if (k.fp8_inputs) {
    EXPECT_GE(claimed["e4m3"], 6) << k.name();
    EXPECT_EQ(claimed["fp16"] + claimed["bf16"], 0) << k.name() << " claimed 16-bit inputs";
  } else {
    EXPECT_GE(claimed["fp16"], 6) << k.name();
    EXPECT_GE(claimed["bf16"], 6) << k.name();
    EXPECT_EQ(claimed["e4m3"], 0) << k.name() << " claimed e4m3 inputs";
  }
}

TEST_P(KernelTest, DetectsAWrongAnswer) {
  // The harness itself: feed verify a reference of a different problem; it must fail.
  FL_REQUIRE_GPU();
  const fl::KernelInfo& k = *GetParam();
  fl::CublasHandle cublas;
  // In the kernel's input type (e4m3 with an fp16 O for a kernel with fp8_inputs); one query
  // row against the 256 keys for a kernel that takes decode calls alone (the serving rungs).
  fl::ProblemSpec s = fl::test::in_input_type(k, base(fl::DType::f16, 1, 2, 256, 128));
  if (!fl::why_unsupported(k, fl::placeholder_params(s)).empty()) s.seqlen_q = 1;
  fl::Problem problem(s);
  s.seed += 1;
  fl::Problem other(s);
  fl::Reference wrong(other, cublas);
  EXPECT_FALSE(fl::verify(k, problem, wrong).passed) << k.name();
}

INSTANTIATE_TEST_SUITE_P(Ladder, KernelTest, ::testing::ValuesIn(fl::forward_kernels()),
                         [](const ::testing::TestParamInfo<const fl::KernelInfo*>& info) {
                           return "k" + info.param->name();
                         });

}  // namespace

namespace {

TEST(NpyInputs, FileRoundTripGivesTheSameOutput) {
  // The path `ladder --q --k --v --o` takes: inputs written to .npy (fp32 and fp16), read back
  // into a Problem, run through a kernel, O read back; it must equal the run on the original.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* naive = fl::find_kernel("01");
  ASSERT_NE(naive, nullptr);
  fl::ProblemSpec s = base(fl::DType::f16, 2, 2, 96, 64);
  fl::Problem original(s);
  fl::run_kernel(*naive, original.params());
  const std::vector<float> expected = original.output_host();

  // Inputs as fp32 [B, H, N, d] on the host, via the same gather the output uses.
  auto host_input = [&](const fl::DeviceBuffer& buf) {
    fl::Problem view(s);  // borrow its output path: point O at the input tensor
    view.params().o = buf.get();
    return view.output_host();
  };
  const std::vector<int64_t> shape = {s.batch, s.heads_q, s.seqlen_q, s.head_dim};
  const std::string dir = ::testing::TempDir();
  fl::npy::save(dir + "q.npy", shape, host_input(original.q), /*as_fp16=*/true);
  fl::npy::save(dir + "k.npy", shape, host_input(original.k), /*as_fp16=*/false);
  fl::npy::save(dir + "v.npy", shape, host_input(original.v), /*as_fp16=*/true);

  fl::Problem loaded(s);
  loaded.set_inputs(fl::npy::load(dir + "q.npy").data.data(),
                    fl::npy::load(dir + "k.npy").data.data(),
                    fl::npy::load(dir + "v.npy").data.data());
  fl::run_kernel(*naive, loaded.params());
  fl::npy::save(dir + "o.npy", shape, loaded.output_host());
  const fl::npy::Array o = fl::npy::load(dir + "o.npy");
  ASSERT_EQ(o.shape, shape);
  ASSERT_EQ(o.data.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(o.data[i], expected[i]) << i;
}

}  // namespace
