// Bad input, for every registered kernel: each rule of check_common, and each kernel's own rule on
// the head dimension, is broken in turn on an otherwise valid problem in the kernel's input type
// (fp16 for the 16-bit rungs, e4m3 with descale factors for a kernel with fp8_inputs), and each
// kernel is handed the input type it does not take. The contract
// (docs/contract.md): the call throws fl::UnsupportedError whose message names the kernel and the
// rule, before anything is launched, so O and the LSE stay bitwise as they were; the C API
// (tools/fl_api.h) returns FL_UNSUPPORTED with the same message.
//
// Nothing runs on a refused input, so this test needs no GPU and runs in CI: where there is none,
// host memory stands in for the device buffers (a kernel that wrongly accepted an input would try
// to launch and fail with a CudaError, not the UnsupportedError expected). Where there is a GPU,
// the buffers are device memory, read back after a device synchronisation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/attention.h"
#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/registry.h"
#include "tools/fl_api.h"

namespace {

// Bytes a kernel could be handed: device memory when there is a GPU, else host memory, 256-byte
// aligned either way (as cudaMalloc's), so that an offset of 2 or 8 bytes is the only
// misalignment.
class Buffer {
 public:
  Buffer(size_t bytes, bool on_device) : bytes_(bytes), on_device_(on_device) {
    if (on_device_) {
      device_.resize(bytes);
    } else {
      host_.resize(bytes + kAlign);
    }
  }
  unsigned char* get() {
    if (on_device_) return device_.as<unsigned char>();
    const uintptr_t a = reinterpret_cast<uintptr_t>(host_.data());
    return host_.data() + (kAlign - a % kAlign) % kAlign;
  }
  void fill(unsigned char byte) {
    if (on_device_) {
      FL_CUDA_CHECK(cudaMemset(get(), byte, bytes_));
    } else {
      std::memset(get(), byte, bytes_);
    }
  }
  // True when every byte still equals `byte`.
  bool all_equal(unsigned char byte) {
    std::vector<unsigned char> bytes(bytes_);
    if (on_device_) {
      FL_CUDA_CHECK(cudaDeviceSynchronize());  // anything a launch wrote has landed
      FL_CUDA_CHECK(cudaMemcpy(bytes.data(), get(), bytes_, cudaMemcpyDeviceToHost));
    } else {
      std::memcpy(bytes.data(), get(), bytes_);
    }
    for (unsigned char b : bytes) {
      if (b != byte) return false;
    }
    return true;
  }

 private:
  static constexpr size_t kAlign = 256;
  size_t bytes_;
  bool on_device_;
  fl::DeviceBuffer device_;
  std::vector<unsigned char> host_;
};

// Q, K, V, O and the LSE, large enough for every case below (the largest is d = 512: 1 MiB a
// tensor). O and the LSE are filled with 0xFF (a NaN in fp16, bf16 and fp32): after a refused
// call they must still be.
struct Buffers {
  static constexpr size_t kTensorBytes = size_t{4} << 20;
  explicit Buffers(bool on_device)
      : q(kTensorBytes, on_device), k(kTensorBytes, on_device), v(kTensorBytes, on_device),
        o(kTensorBytes, on_device), lse(size_t{64} << 10, on_device) {
    q.fill(0);
    k.fill(0);
    v.fill(0);
  }
  Buffer q, k, v, o, lse;
};

constexpr unsigned char kPoison = 0xFF;

// Descale factors of 1, more than any case below needs (B x H_q = 4), alive for the whole run.
const float* unit_descales() {
  static const std::vector<float> ones(64, 1.f);
  return ones.data();
}

// The input type of kernel k's base problem: the one it takes.
fl::DType input_type(const fl::KernelInfo& k) {
  return k.fp8_inputs ? fl::DType::e4m3 : fl::DType::f16;
}

// The base problem: valid for every kernel that takes `t` (B = 1, H_q = 4 over H_kv = 2,
// Nq = Nk = 256, d = 128, non-causal, with LSE; e4m3 inputs with an fp16 O and descale factors of
// 1 per tensor), so that each case breaks exactly the rule it names. A rung of the serving track
// (decode calls only) gets `seqlen_q` = 16 queries against the same 256 keys (32 rows of its tile).
fl::AttnParams base_params(Buffers& b, int64_t head_dim = 128, fl::DType t = fl::DType::f16,
                           int64_t seqlen_q = 256) {
  fl::AttnParams p = fl::make_params(t, 1, 4, seqlen_q, 256, head_dim);
  p.heads_kv = 2;
  // Rows padded to 16 bytes (8 elements of 16 bits, 16 of e4m3), for a head dim that is not a
  // multiple; O is 16-bit whatever the inputs.
  const int64_t per16 = 16 / fl::element_size(t);
  const int64_t row = (head_dim + per16 - 1) / per16 * per16, orow = (head_dim + 7) / 8 * 8;
  p.q_stride = {p.heads_q * 256 * row, 256 * row, row};
  p.o_stride = {p.heads_q * 256 * orow, 256 * orow, orow};
  p.k_stride = p.v_stride = {p.heads_kv * 256 * row, 256 * row, row};
  if (t == fl::DType::e4m3) p.q_descale = p.k_descale = p.v_descale = unit_descales();
  p.q = b.q.get();
  p.k = b.k.get();
  p.v = b.v.get();
  p.o = b.o.get();
  p.lse = reinterpret_cast<float*>(b.lse.get());
  return p;
}

// The base problem's query count for kernel k: 256, or 16 for a serving rung.
int64_t base_seqlen_q(const fl::KernelInfo& k) {
  return k.number >= FL_SERVING_FIRST_RUNG ? 16 : 256;
}

// The head dims kernel k claims (docs/contract.md): any multiple of 8 for the cuBLAS baseline,
// 64 and 128 for rungs 01-15, 128 alone for rungs 17-23, 64, 128 and 256 for rung 16 and for
// the Hopper rungs from the whole contract (24) on, and 64 and 128 for the serving rungs.
bool claims_head_dim(const fl::KernelInfo& k, int64_t d) {
  if (k.number == 0) return d % 8 == 0;
  if (k.number >= FL_SERVING_FIRST_RUNG) return d == 64 || d == 96 || d == 128 || d == 192;
  // Rung 27 runs d = 96 and 192 as 128 and 256; 16, 24-26 and the FP8 rung, 28, do not.
  if (k.number == 27) return d == 64 || d == 96 || d == 128 || d == 192 || d == 256;
  if (k.number == 16 || k.number >= 24) return d == 64 || d == 128 || d == 256;
  if (k.number >= 17 && k.number <= 23) return d == 128;  // the Hopper rungs before the contract
  return d == 64 || d == 128;
}
const int64_t kHeadDims[] = {8, 20, 32, 36, 48, 64, 96, 100, 128, 192, 256, 512};

// fl::AttnParams -> the C API's struct, field for field.
int type_code(fl::DType t) { return t == fl::DType::f16 ? 0 : t == fl::DType::bf16 ? 1 : 2; }

fl_attention_params to_c(const fl::AttnParams& p) {
  fl_attention_params c{};
  c.dtype = type_code(p.dtype);
  c.out_dtype = type_code(p.out_dtype);
  c.q_descale = p.q_descale;
  c.k_descale = p.k_descale;
  c.v_descale = p.v_descale;
  c.descale_per_head = p.descale_per_head ? 1 : 0;
  c.batch = p.batch;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.seqlen_q = p.seqlen_q;
  c.seqlen_k = p.seqlen_k;
  c.head_dim = p.head_dim;
  c.causal = p.causal ? 1 : 0;
  c.softmax_scale = p.softmax_scale;
  c.q = p.q;
  c.k = p.k;
  c.v = p.v;
  c.o = p.o;
  c.lse = p.lse;
  c.q_stride_batch = p.q_stride.batch;
  c.q_stride_head = p.q_stride.head;
  c.q_stride_row = p.q_stride.row;
  c.q_stride_dim = p.q_stride.dim;
  c.k_stride_batch = p.k_stride.batch;
  c.k_stride_head = p.k_stride.head;
  c.k_stride_row = p.k_stride.row;
  c.k_stride_dim = p.k_stride.dim;
  c.v_stride_batch = p.v_stride.batch;
  c.v_stride_head = p.v_stride.head;
  c.v_stride_row = p.v_stride.row;
  c.v_stride_dim = p.v_stride.dim;
  c.o_stride_batch = p.o_stride.batch;
  c.o_stride_head = p.o_stride.head;
  c.o_stride_row = p.o_stride.row;
  c.o_stride_dim = p.o_stride.dim;
  return c;
}

// Runs `k` on p through the C++ API and the C API and checks the contract for a refused input:
// UnsupportedError naming the kernel and `rule`, the same message from why_unsupported, fl_run
// (FL_UNSUPPORTED) and fl_supports (0), and O and the LSE untouched.
void expect_refused(const fl::KernelInfo& k, const fl::AttnParams& p, const std::string& rule,
                    Buffers& b) {
  b.o.fill(kPoison);
  b.lse.fill(kPoison);
  std::string what;
  try {
    fl::run_kernel(k, p);
    ADD_FAILURE() << k.name() << " accepted the input";
    return;  // it launched: the C API would launch it again
  } catch (const fl::UnsupportedError& e) {
    what = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << k.name() << " threw something else than UnsupportedError: " << e.what();
    return;
  }
  EXPECT_NE(what.find(k.name()), std::string::npos) << "the message does not name the kernel: "
                                                    << what;
  EXPECT_NE(what.find(rule), std::string::npos) << "the message does not name the rule '" << rule
                                                << "': " << what;
  EXPECT_EQ(fl::why_unsupported(k, p), what);

  const fl_attention_params c = to_c(p);
  char err[1024], why[1024];
  EXPECT_EQ(fl_run(k.number, &c, nullptr, err, sizeof(err)), FL_UNSUPPORTED) << what;
  EXPECT_EQ(std::string(err), what);
  EXPECT_EQ(fl_supports(k.number, &c, why, sizeof(why)), 0) << what;
  EXPECT_EQ(std::string(why), what);

  EXPECT_TRUE(b.o.all_equal(kPoison)) << k.name() << " wrote to O on a refused input (" << what
                                      << ")";
  EXPECT_TRUE(b.lse.all_equal(kPoison)) << k.name() << " wrote to the LSE on a refused input ("
                                        << what << ")";
}

struct BadCase {
  std::string name;
  std::string rule;  // a piece of the message that names the broken rule
  std::function<void(fl::AttnParams&)> apply;
};

// Every bad input of the contract, as changes to the base problem of input type t.
std::vector<BadCase> bad_cases(fl::DType type) {
  std::vector<BadCase> cases;
  const bool fp8 = type == fl::DType::e4m3;
  using P = fl::AttnParams;
  const struct {
    const char* name;
    const void* P::*ptr;
    fl::Strides P::*stride;
  } tensors[] = {{"Q", &P::q, &P::q_stride},
                 {"K", &P::k, &P::k_stride},
                 {"V", &P::v, &P::v_stride},
                 {"O", nullptr, &P::o_stride}};  // O is a `void*`: set_ptr writes p.o
  for (const auto& t : tensors) {
    const std::string n = t.name;
    const auto set_ptr = [t](P& p, const void* value) {
      if (t.ptr != nullptr) {
        p.*t.ptr = value;
      } else {
        p.o = const_cast<void*>(value);
      }
    };
    const auto get_ptr = [t](const P& p) -> const char* {
      return static_cast<const char*>(t.ptr != nullptr ? p.*t.ptr : p.o);
    };
    cases.push_back({n + " null", n + " is a null pointer",
                     [set_ptr](P& p) { set_ptr(p, nullptr); }});
    for (int offset : {2, 8}) {
      cases.push_back({n + " misaligned by " + std::to_string(offset) + " bytes",
                       n + " must be 16-byte aligned",
                       [set_ptr, get_ptr, offset](P& p) { set_ptr(p, get_ptr(p) + offset); }});
    }
    for (int64_t dim : {2, 0, -1}) {
      cases.push_back({n + " dim stride " + std::to_string(dim),
                       n + "'s head-dimension stride must be 1",
                       [t, dim](P& p) { (p.*t.stride).dim = dim; }});
    }
    cases.push_back({n + " row stride < d", n + " row stride",
                     [t](P& p) { (p.*t.stride).row = p.head_dim - 8; }});
    // 16 bytes: 8 elements of O and of 16-bit inputs, 16 of e4m3 inputs.
    const std::string per16 = fp8 && n != "O" ? "16" : "8";
    cases.push_back({n + " row stride not a multiple of " + per16,
                     n + " strides must be multiples of " + per16 + " elements (16 bytes",
                     [t](P& p) { (p.*t.stride).row = p.head_dim + 4; }});
    if (fp8 && n != "O") {
      // 8 elements of e4m3 are 8 bytes: a 16-bit rule in elements would let this through.
      cases.push_back({n + " row stride 8 elements past d (8 bytes of e4m3)",
                       n + " strides must be multiples of 16 elements (16 bytes of e4m3)",
                       [t](P& p) { (p.*t.stride).row = p.head_dim + 8; }});
      cases.push_back({n + " head stride not a multiple of 16 bytes",
                       n + " strides must be multiples of 16 elements",
                       [t](P& p) { (p.*t.stride).head += 8; }});
    }
    cases.push_back({n + " negative head stride", n + " strides must be >= 0",
                     [t](P& p) { (p.*t.stride).head = -8; }});
  }
  cases.push_back({"LSE misaligned", "LSE must be 4-byte aligned", [](P& p) {
                     p.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(p.lse) + 2);
                   }});
  cases.push_back({"offsets past int64", "Q offsets overflow int64", [](P& p) {
                     p.batch = int64_t{1} << 20;
                     p.q_stride.batch = int64_t{1} << 50;
                   }});
  const struct {
    const char* name;
    int64_t P::*size;
  } sizes[] = {{"B", &P::batch},     {"H_q", &P::heads_q},   {"H_kv", &P::heads_kv},
               {"Nq", &P::seqlen_q}, {"Nk", &P::seqlen_k}, {"d", &P::head_dim}};
  for (const auto& s : sizes) {
    for (int64_t value : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
      cases.push_back({std::string(s.name) + " = " + std::to_string(value),
                       "every size must be >= 1", [s, value](P& p) { p.*s.size = value; }});
    }
  }
  cases.push_back({"H_q 3 over H_kv 2", "must be a multiple of H_kv", [](P& p) {
                     p.heads_q = 3;
                     p.heads_kv = 2;
                   }});
  cases.push_back({"H_q 4 over H_kv 3", "must be a multiple of H_kv", [](P& p) {
                     p.heads_q = 4;
                     p.heads_kv = 3;
                   }});
  for (float scale : {0.f, -0.f, -0.125f, std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity()}) {
    cases.push_back({"scale " + std::to_string(scale), "softmax_scale must be finite and > 0",
                     [scale](P& p) { p.softmax_scale = scale; }});
  }
  // The types and the descale factors.
  const struct {
    const char* name;
    const float* P::*ptr;
    bool kv;  // B x H_kv factors per head, else B x H_q
  } descales[] = {{"Q", &P::q_descale, false}, {"K", &P::k_descale, true},
                  {"V", &P::v_descale, true}};
  if (!fp8) {
    cases.push_back({"O bf16 for fp16 inputs",
                     "O's dtype (out_dtype) must be the inputs' dtype for fp16 and bf16 inputs",
                     [](P& p) { p.out_dtype = fl::DType::bf16; }});
    for (const auto& d : descales) {
      cases.push_back({std::string(d.name) + " descale set on fp16 inputs",
                       std::string("descale factors are for e4m3 inputs: ") + d.name +
                           "'s descale must be null for fp16 inputs",
                       [d](P& p) { p.*d.ptr = unit_descales(); }});
    }
    cases.push_back({"descale_per_head on fp16 inputs",
                     "descale factors are for e4m3 inputs: descale_per_head must be false",
                     [](P& p) { p.descale_per_head = true; }});
    return cases;
  }
  for (const auto& d : descales) {
    const std::string n = d.name;
    cases.push_back({n + " descale null", "e4m3 inputs need descale factors (x = e4m3 * descale): " +
                                              n + "'s descale is a null pointer",
                     [d](P& p) { p.*d.ptr = nullptr; }});
    for (float bad : {0.f, -1.f, std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity(), -0.f}) {
      for (bool per_head : {false, true}) {
        // Per head, the bad factor is the last of the tensor's B x H (B = 1; H_q = 4, H_kv = 2):
        // the count is B x H_q for Q, B x H_kv for K and V.
        auto factors = std::make_shared<std::vector<float>>(64, 1.f);
        const int index = per_head ? (d.kv ? 1 : 3) : 0;
        (*factors)[index] = bad;
        cases.push_back({n + " descale " + std::to_string(bad) + (per_head ? " per head" : ""),
                         n + "'s descale factors must be finite and > 0 (factor " +
                             std::to_string(index) + " is",
                         [d, factors, per_head](P& p) {
                           p.*d.ptr = factors->data();
                           p.descale_per_head = per_head;
                         }});
      }
    }
  }
  return cases;
}

class BadInputTest : public ::testing::TestWithParam<const fl::KernelInfo*> {};

TEST_P(BadInputTest, RefusedBeforeLaunchNamingKernelAndRule) {
  const fl::KernelInfo& k = *GetParam();
  Buffers b(fl::gpu_available());
  const fl::AttnParams base = base_params(b, 128, input_type(k), base_seqlen_q(k));
  // The base problem is valid: each case below breaks only the rule it names.
  ASSERT_EQ(fl::why_unsupported(k, base), "") << k.name();
  for (const BadCase& c : bad_cases(input_type(k))) {
    SCOPED_TRACE(k.name() + ": " + c.name);
    fl::AttnParams p = base;
    c.apply(p);
    expect_refused(k, p, c.rule, b);
  }
}

TEST_P(BadInputTest, HeadDimsAreTheContractsExactly) {
  // Every head dim the contract lists is accepted, every other one refused by the kernel's own
  // rule ("head_dim ..."), with the same guarantees as the common rules.
  const fl::KernelInfo& k = *GetParam();
  Buffers b(fl::gpu_available());
  int refused = 0;
  for (int64_t d : kHeadDims) {
    SCOPED_TRACE(k.name() + ": d = " + std::to_string(d));
    const fl::AttnParams p = base_params(b, d, input_type(k), base_seqlen_q(k));
    if (claims_head_dim(k, d)) {
      EXPECT_EQ(fl::why_unsupported(k, p), "");
    } else {
      expect_refused(k, p, "head_dim", b);
      ++refused;
    }
  }
  EXPECT_GE(refused, 3) << k.name() << ": the list must hold head dims the kernel refuses";
}

TEST_P(BadInputTest, TheOtherInputTypeIsRefused) {
  // A kernel handed a problem, valid in every other respect, of the input type it does not take:
  // the 16-bit rungs refuse e4m3 inputs, a kernel with fp8_inputs fp16 and bf16 ones, by the
  // rule of why_unsupported.
  const fl::KernelInfo& k = *GetParam();
  Buffers b(fl::gpu_available());
  if (k.fp8_inputs) {
    for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
      SCOPED_TRACE(k.name() + ": " + fl::to_string(t));
      const fl::AttnParams p = base_params(b, 128, t, base_seqlen_q(k));
      ASSERT_EQ(fl::check_common(p), "");
      expect_refused(k, p, std::string("takes e4m3 inputs only (got ") + fl::to_string(t) + ")",
                     b);
    }
  } else {
    for (fl::DType out : {fl::DType::f16, fl::DType::bf16}) {
      SCOPED_TRACE(k.name() + ": e4m3 -> " + fl::to_string(out));
      fl::AttnParams p = base_params(b, 128, fl::DType::e4m3, base_seqlen_q(k));
      p.out_dtype = out;
      ASSERT_EQ(fl::check_common(p), "");
      expect_refused(k, p, "takes fp16 and bf16 inputs (got e4m3): e4m3 inputs need rung 28", b);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ladder, BadInputTest, ::testing::ValuesIn(fl::forward_kernels()),
                         [](const ::testing::TestParamInfo<const fl::KernelInfo*>& info) {
                           return "k" + info.param->name();
                         });

// The C API's own checks, before any kernel rule.

fl_attention_params valid_c_params(Buffers& b) { return to_c(base_params(b)); }

TEST(CApi, ParamsSizeMatchesTheHeader) {
  EXPECT_EQ(fl_params_size(), sizeof(fl_attention_params));
}

TEST(CApi, ContiguousStridesAreMakeStridesWithDimOne) {
  fl_attention_params c{};
  c.batch = 2;
  c.heads_q = 8;
  c.heads_kv = 2;
  c.seqlen_q = 100;
  c.seqlen_k = 300;
  c.head_dim = 64;
  fl_set_contiguous_strides(&c);
  const fl::Strides q = fl::make_strides(fl::Layout::BHND, 8, 100, 64);
  const fl::Strides kv = fl::make_strides(fl::Layout::BHND, 2, 300, 64);
  for (const auto& [name, batch, head, row, dim, want] :
       {std::make_tuple("q", c.q_stride_batch, c.q_stride_head, c.q_stride_row, c.q_stride_dim, q),
        std::make_tuple("o", c.o_stride_batch, c.o_stride_head, c.o_stride_row, c.o_stride_dim, q),
        std::make_tuple("k", c.k_stride_batch, c.k_stride_head, c.k_stride_row, c.k_stride_dim, kv),
        std::make_tuple("v", c.v_stride_batch, c.v_stride_head, c.v_stride_row, c.v_stride_dim,
                        kv)}) {
    EXPECT_EQ(batch, want.batch) << name;
    EXPECT_EQ(head, want.head) << name;
    EXPECT_EQ(row, want.row) << name;
    EXPECT_EQ(dim, 1) << name;
  }
}

TEST(CApi, DimStridesLeftZeroAreRefused) {
  // A caller that fills the batch, head and row strides but not the dim strides (zero-initialised
  // struct, e.g. a mirror written before they existed) is told so, not run.
  Buffers b(fl::gpu_available());
  fl_attention_params c = valid_c_params(b);
  c.q_stride_dim = c.k_stride_dim = c.v_stride_dim = c.o_stride_dim = 0;
  char err[1024];
  const int number = fl_kernel_number(0);
  EXPECT_EQ(fl_run(number, &c, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
  EXPECT_NE(std::string(err).find("Q's head-dimension stride must be 1 (got 0)"),
            std::string::npos)
      << err;
}

TEST(CApi, BadDtypeAndNullParamsAreRefusedNamingTheKernel) {
  Buffers b(fl::gpu_available());
  fl_attention_params c = valid_c_params(b);
  c.dtype = 3;
  char err[1024];
  const int number = fl_kernel_number(0);
  const std::string name = fl_kernel_name(0);
  EXPECT_EQ(fl_run(number, &c, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
  EXPECT_EQ(std::string(err),
            "kernel " + name + ": dtype must be 0 (fp16), 1 (bf16) or 2 (e4m3), got 3");
  c = valid_c_params(b);
  c.out_dtype = 2;  // e4m3 is an input type only
  EXPECT_EQ(fl_run(number, &c, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
  EXPECT_EQ(std::string(err), "kernel " + name + ": out_dtype must be 0 (fp16) or 1 (bf16), got 2");
  c = valid_c_params(b);
  EXPECT_EQ(fl_run(number, nullptr, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
  EXPECT_EQ(std::string(err), "kernel " + name + ": params is a null pointer");
}

TEST(CApi, E4m3FieldsReachTheRules) {
  // dtype 2 with out_dtype and the descale pointers: a valid e4m3 call is what check_common
  // accepts (refused by a 16-bit kernel for its input type alone), and each field is read.
  Buffers b(fl::gpu_available());
  fl_attention_params c = to_c(base_params(b, 128, fl::DType::e4m3));
  ASSERT_EQ(c.dtype, 2);
  c.out_dtype = 1;
  char why[1024];
  ASSERT_NE(fl::find_kernel("00"), nullptr);
  EXPECT_EQ(fl_supports(0, &c, why, sizeof(why)), 0);
  EXPECT_EQ(std::string(why),
            "kernel 00_cublas: takes fp16 and bf16 inputs (got e4m3): e4m3 inputs need rung 28");
  c.v_descale = nullptr;
  EXPECT_EQ(fl_supports(0, &c, why, sizeof(why)), 0);
  EXPECT_NE(std::string(why).find("V's descale is a null pointer"), std::string::npos) << why;
  const float factors[4] = {1.f, 1.f, 1.f, 0.f};  // Q per head: B x H_q = 4 factors
  c.v_descale = c.k_descale;
  c.q_descale = factors;
  EXPECT_EQ(fl_supports(0, &c, why, sizeof(why)), 0);
  EXPECT_NE(std::string(why).find("takes fp16 and bf16 inputs"), std::string::npos) << why;
  c.descale_per_head = 1;
  EXPECT_EQ(fl_supports(0, &c, why, sizeof(why)), 0);
  EXPECT_NE(std::string(why).find("Q's descale factors must be finite and > 0 (factor 3 is"),
            std::string::npos)
      << why;
  // fp16 inputs: out_dtype must be 0, the descale pointers null.
  c = valid_c_params(b);
  c.out_dtype = 1;
  EXPECT_EQ(fl_supports(0, &c, why, sizeof(why)), 0);
  EXPECT_NE(std::string(why).find("O's dtype (out_dtype) must be the inputs' dtype"),
            std::string::npos)
      << why;
  c.out_dtype = 0;
  c.q_descale = factors;
  EXPECT_EQ(fl_supports(0, &c, why, sizeof(why)), 0);
  EXPECT_NE(std::string(why).find("descale factors are for e4m3 inputs"), std::string::npos)
      << why;
}

TEST(CApi, UnknownKernelNumber) {
  Buffers b(fl::gpu_available());
  const fl_attention_params c = valid_c_params(b);
  char err[1024];
  EXPECT_EQ(fl_run(99, &c, nullptr, err, sizeof(err)), FL_NO_SUCH_KERNEL);
  EXPECT_NE(std::string(err).find("no kernel numbered 99"), std::string::npos) << err;
  EXPECT_EQ(fl_supports(99, &c, err, sizeof(err)), 0);
}

TEST(CApi, BestIsTheRegistrysChoiceAndRefusesWithEveryReason) {
  // FL_KERNEL_BEST: fl_best_kernel names the kernel fl::best_kernel picks; fl_supports and fl_run
  // take it as a kernel number. A call no kernel can run is refused before anything is launched,
  // with every kernel's reason, so O is untouched (no GPU needed).
  Buffers b(fl::gpu_available());
  fl_attention_params c = valid_c_params(b);
  char why[16384];
  const fl::KernelInfo* expected = fl::best_kernel(base_params(b));
  ASSERT_NE(expected, nullptr);
  EXPECT_EQ(fl_best_kernel(&c, why, sizeof(why)), expected->number) << why;
  EXPECT_EQ(fl_supports(FL_KERNEL_BEST, &c, why, sizeof(why)), 1) << why;

  c.heads_q = 3;  // not a multiple of H_kv = 2
  EXPECT_EQ(fl_best_kernel(&c, why, sizeof(why)), -1);
  const std::string message = why;
  EXPECT_EQ(message.rfind("no kernel of this build supports this call:", 0), 0u) << message;
  // Every forward rung's reason, and no backward rung's (FL_KERNEL_BEST in fl_run is a forward
  // rung; the backward's own best is fl_best_backward_kernel).
  for (int i = 0; i < fl_num_kernels(); ++i) {
    const std::string named = std::string("kernel ") + fl_kernel_name(i) + ": ";
    if (fl_kernel_op(i) == FL_OP_FORWARD) {
      EXPECT_NE(message.find(named + "H_q (3)"), std::string::npos) << message;
    } else {
      EXPECT_EQ(message.find(named), std::string::npos) << message;
    }
  }
  EXPECT_EQ(fl_supports(FL_KERNEL_BEST, &c, why, sizeof(why)), 0);
  EXPECT_EQ(std::string(why), message);
  b.o.fill(kPoison);
  char err[16384];
  EXPECT_EQ(fl_run(FL_KERNEL_BEST, &c, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
  EXPECT_EQ(std::string(err), message);
  EXPECT_TRUE(b.o.all_equal(kPoison)) << "O was written on a refused call";
}

TEST(CApi, MessageIsTruncatedToTheBuffer) {
  // err_len bounds the write, NUL included: a short buffer gets the start of the message.
  Buffers b(fl::gpu_available());
  fl_attention_params c = valid_c_params(b);
  c.q = nullptr;
  char err[8];
  std::memset(err, 'x', sizeof(err));
  EXPECT_EQ(fl_run(fl_kernel_number(0), &c, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
  EXPECT_EQ(std::string(err), "kernel ");
}

}  // namespace
