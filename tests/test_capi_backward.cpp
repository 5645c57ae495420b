// The backward through the C API (tools/fl_api.h): fl_backward_params field for field
// fl::BwdParams, the rungs listed by op, the workspace's size, the choice of rung, and every
// refusal with the registry's message (the kernel and the rule), before anything is launched.
//
// A refused call runs nothing, so most of this needs no GPU and runs in CI: where there is none,
// host memory stands in for the device buffers (a rung that wrongly accepted a call would try to
// launch and fail with FL_CUDA_ERROR, not the FL_UNSUPPORTED expected). Where there is a GPU, the
// last test runs each backward rung through the C API and through the C++ API on the same inputs
// and holds the two to each other; the gradients' numerics are the GPU tests' (test_gpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "common/attention.h"
#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/random.h"
#include "common/registry.h"
#include "tools/fl_api.h"

namespace {

// Bytes a kernel could be handed: device memory when there is a GPU, else host memory, 256-byte
// aligned either way (as cudaMalloc's).
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
  std::vector<unsigned char> read() {
    std::vector<unsigned char> bytes(bytes_);
    if (on_device_) {
      FL_CUDA_CHECK(cudaDeviceSynchronize());  // anything a launch wrote has landed
      FL_CUDA_CHECK(cudaMemcpy(bytes.data(), get(), bytes_, cudaMemcpyDeviceToHost));
    } else {
      std::memcpy(bytes.data(), get(), bytes_);
    }
    return bytes;
  }
  bool all_equal(unsigned char byte) {
    const std::vector<unsigned char> bytes = read();
    return std::all_of(bytes.begin(), bytes.end(), [&](unsigned char b) { return b == byte; });
  }

 private:
  static constexpr size_t kAlign = 256;
  size_t bytes_;
  bool on_device_;
  fl::DeviceBuffer device_;
  std::vector<unsigned char> host_;
};

constexpr unsigned char kPoison = 0xFF;  // a NaN in fp16, bf16 and fp32

// The base problem: fp16, B = 1, H_q = H_kv = 2, Nq = Nk = 128, d = 128, non-causal,
// contiguous: in the contract of every backward rung (rung 29's is the narrowest: MHA,
// non-causal, d = 64 or 128, lengths multiples of 64; the Hopper rungs 33-35 take d = 128 only),
// so that each case below breaks exactly the rule it names.
constexpr int64_t kB = 1, kH = 2, kN = 128, kD = 128;
constexpr size_t kTensorBytes = size_t{1} << 20;  // room for every case (d = 128, N = 256, H = 4)

struct Buffers {
  explicit Buffers(bool on_device)
      : q(kTensorBytes, on_device), k(kTensorBytes, on_device), v(kTensorBytes, on_device),
        o(kTensorBytes, on_device), lse(size_t{64} << 10, on_device),
        dout(kTensorBytes, on_device), dq(kTensorBytes, on_device), dk(kTensorBytes, on_device),
        dv(kTensorBytes, on_device), workspace(size_t{8} << 20, on_device) {
    for (Buffer* b : {&q, &k, &v, &o, &lse, &dout}) b->fill(0);
  }
  void poison_gradients() {
    for (Buffer* b : {&dq, &dk, &dv}) b->fill(kPoison);
  }
  bool gradients_untouched() {
    return dq.all_equal(kPoison) && dk.all_equal(kPoison) && dv.all_equal(kPoison);
  }
  Buffer q, k, v, o, lse, dout, dq, dk, dv, workspace;
};

fl::BwdParams base_params(Buffers& b, int64_t heads_q = kH, int64_t heads_kv = kH,
                          int64_t seqlen = kN, int64_t head_dim = kD, bool causal = false) {
  fl::AttnParams p = fl::make_params(fl::DType::f16, kB, heads_q, seqlen, seqlen, head_dim, causal);
  p.heads_kv = heads_kv;
  p.k_stride = p.v_stride = fl::make_strides(fl::Layout::BHND, heads_kv, seqlen, head_dim);
  p.q = b.q.get();
  p.k = b.k.get();
  p.v = b.v.get();
  p.o = b.o.get();
  p.lse = reinterpret_cast<float*>(b.lse.get());
  fl::BwdParams g = fl::make_bwd_params(p);
  g.dout = b.dout.get();
  g.dq = b.dq.get();
  g.dk = b.dk.get();
  g.dv = b.dv.get();
  g.workspace = b.workspace.get();
  g.workspace_bytes = static_cast<int64_t>(size_t{8} << 20);
  return g;
}

int type_code(fl::DType t) { return t == fl::DType::f16 ? 0 : t == fl::DType::bf16 ? 1 : 2; }

// fl::AttnParams -> fl_attention_params, field for field.
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
  std::tie(c.q_stride_batch, c.q_stride_head, c.q_stride_row, c.q_stride_dim) =
      std::make_tuple(p.q_stride.batch, p.q_stride.head, p.q_stride.row, p.q_stride.dim);
  std::tie(c.k_stride_batch, c.k_stride_head, c.k_stride_row, c.k_stride_dim) =
      std::make_tuple(p.k_stride.batch, p.k_stride.head, p.k_stride.row, p.k_stride.dim);
  std::tie(c.v_stride_batch, c.v_stride_head, c.v_stride_row, c.v_stride_dim) =
      std::make_tuple(p.v_stride.batch, p.v_stride.head, p.v_stride.row, p.v_stride.dim);
  std::tie(c.o_stride_batch, c.o_stride_head, c.o_stride_row, c.o_stride_dim) =
      std::make_tuple(p.o_stride.batch, p.o_stride.head, p.o_stride.row, p.o_stride.dim);
  return c;
}

// fl::BwdParams -> fl_backward_params, field for field.
fl_backward_params to_c(const fl::BwdParams& b) {
  fl_backward_params c{};
  c.fwd = to_c(b.fwd);
  c.dout = b.dout;
  c.dq = b.dq;
  c.dk = b.dk;
  c.dv = b.dv;
  std::tie(c.do_stride_batch, c.do_stride_head, c.do_stride_row, c.do_stride_dim) =
      std::make_tuple(b.do_stride.batch, b.do_stride.head, b.do_stride.row, b.do_stride.dim);
  std::tie(c.dq_stride_batch, c.dq_stride_head, c.dq_stride_row, c.dq_stride_dim) =
      std::make_tuple(b.dq_stride.batch, b.dq_stride.head, b.dq_stride.row, b.dq_stride.dim);
  std::tie(c.dk_stride_batch, c.dk_stride_head, c.dk_stride_row, c.dk_stride_dim) =
      std::make_tuple(b.dk_stride.batch, b.dk_stride.head, b.dk_stride.row, b.dk_stride.dim);
  std::tie(c.dv_stride_batch, c.dv_stride_head, c.dv_stride_row, c.dv_stride_dim) =
      std::make_tuple(b.dv_stride.batch, b.dv_stride.head, b.dv_stride.row, b.dv_stride.dim);
  c.workspace = b.workspace;
  c.workspace_bytes = b.workspace_bytes;
  return c;
}

const std::vector<const fl::KernelInfo*>& backward_rungs() { return fl::backward_kernels(); }

// The rule a rung's own check gives for b on top of the shared ones ("" when it takes b).
std::string own_rule(const fl::KernelInfo& k, const fl::BwdParams& b) {
  const std::string shared = fl::check_backward(b);
  return shared.empty() ? k.supports_backward(b) : shared;
}

// Runs backward rung k on b through the C++ API and the C API and checks the contract of a
// refused call: UnsupportedError naming the kernel and `rule`, the same message from
// why_unsupported_backward, fl_run_backward (FL_UNSUPPORTED) and fl_supports_backward (0), and
// dQ, dK, dV untouched.
void expect_refused(const fl::KernelInfo& k, const fl::BwdParams& b, const std::string& rule,
                    Buffers& buffers, const std::string& label) {
  SCOPED_TRACE(k.name() + ": " + label);
  buffers.poison_gradients();
  std::string what;
  try {
    fl::run_backward(k, b);
    ADD_FAILURE() << "the call was accepted";
    return;  // it launched: the C API would launch it again
  } catch (const fl::UnsupportedError& e) {
    what = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something else than UnsupportedError: " << e.what();
    return;
  }
  EXPECT_EQ(what.rfind("kernel " + k.name() + ": ", 0), 0u) << what;
  EXPECT_NE(what.find(rule), std::string::npos) << "no '" << rule << "' in: " << what;
  EXPECT_EQ(fl::why_unsupported_backward(k, b), what);

  const fl_backward_params c = to_c(b);
  char err[1024], why[1024];
  EXPECT_EQ(fl_run_backward(k.number, &c, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
  EXPECT_EQ(std::string(err), what);
  EXPECT_EQ(fl_supports_backward(k.number, &c, why, sizeof(why)), 0);
  EXPECT_EQ(std::string(why), what);
  EXPECT_TRUE(buffers.gradients_untouched()) << "dQ, dK or dV was written on a refused call";
}

// --------------------------------------------------------------------------------------------
// The struct and the list of rungs
// --------------------------------------------------------------------------------------------

TEST(CApiBackward, ParamsSizeMatchesTheHeader) {
  EXPECT_EQ(fl_backward_params_size(), sizeof(fl_backward_params));
  // The forward's call first, whole, then the backward's fields (python/flash_ladder/_capi.py
  // mirrors this order).
  EXPECT_EQ(offsetof(fl_backward_params, fwd), 0u);
  EXPECT_EQ(offsetof(fl_backward_params, dout), sizeof(fl_attention_params));
  EXPECT_EQ(offsetof(fl_backward_params, do_stride_batch), sizeof(fl_attention_params) + 32);
  EXPECT_EQ(offsetof(fl_backward_params, workspace), sizeof(fl_attention_params) + 32 + 16 * 8);
  EXPECT_EQ(sizeof(fl_backward_params), sizeof(fl_attention_params) + 32 + 16 * 8 + 16);
}

TEST(CApiBackward, ContiguousStridesAreMakeStridesForEveryTensor) {
  fl_backward_params c{};
  c.fwd.batch = 2;
  c.fwd.heads_q = 8;
  c.fwd.heads_kv = 2;
  c.fwd.seqlen_q = 100;
  c.fwd.seqlen_k = 300;
  c.fwd.head_dim = 64;
  fl_set_contiguous_backward_strides(&c);
  const fl::Strides q = fl::make_strides(fl::Layout::BHND, 8, 100, 64);
  const fl::Strides kv = fl::make_strides(fl::Layout::BHND, 2, 300, 64);
  const fl_attention_params& f = c.fwd;
  for (const auto& [name, batch, head, row, dim, want] :
       {std::make_tuple("q", f.q_stride_batch, f.q_stride_head, f.q_stride_row, f.q_stride_dim, q),
        std::make_tuple("o", f.o_stride_batch, f.o_stride_head, f.o_stride_row, f.o_stride_dim, q),
        std::make_tuple("k", f.k_stride_batch, f.k_stride_head, f.k_stride_row, f.k_stride_dim, kv),
        std::make_tuple("v", f.v_stride_batch, f.v_stride_head, f.v_stride_row, f.v_stride_dim, kv),
        std::make_tuple("dO", c.do_stride_batch, c.do_stride_head, c.do_stride_row,
                        c.do_stride_dim, q),
        std::make_tuple("dQ", c.dq_stride_batch, c.dq_stride_head, c.dq_stride_row,
                        c.dq_stride_dim, q),
        std::make_tuple("dK", c.dk_stride_batch, c.dk_stride_head, c.dk_stride_row,
                        c.dk_stride_dim, kv),
        std::make_tuple("dV", c.dv_stride_batch, c.dv_stride_head, c.dv_stride_row,
                        c.dv_stride_dim, kv)}) {
    EXPECT_EQ(batch, want.batch) << name;
    EXPECT_EQ(head, want.head) << name;
    EXPECT_EQ(row, want.row) << name;
    EXPECT_EQ(dim, 1) << name;
  }
}

TEST(CApiBackward, KernelOpListsBothOps) {
  const auto& all = fl::all_kernels();
  ASSERT_EQ(fl_num_kernels(), static_cast<int>(all.size()));
  size_t backward = 0;
  for (int i = 0; i < fl_num_kernels(); ++i) {
    const int want = all[i]->op == fl::Op::backward ? FL_OP_BACKWARD : FL_OP_FORWARD;
    EXPECT_EQ(fl_kernel_op(i), want) << fl_kernel_name(i);
    backward += fl_kernel_op(i) == FL_OP_BACKWARD ? 1 : 0;
  }
  EXPECT_EQ(backward, backward_rungs().size());
  EXPECT_EQ(fl_kernel_op(-1), -1);
  EXPECT_EQ(fl_kernel_op(fl_num_kernels()), -1);
}

// --------------------------------------------------------------------------------------------
// Refusals
// --------------------------------------------------------------------------------------------

TEST(CApiBackward, ForwardRungIsRefusedByTheBackwardCalls) {
  // Rung 00 is in every build.
  Buffers buffers(fl::gpu_available());
  const fl::KernelInfo* k0 = fl::find_kernel("00");
  ASSERT_NE(k0, nullptr);
  expect_refused(*k0, base_params(buffers), "is a forward rung", buffers, "forward rung");
  const fl_attention_params c = to_c(base_params(buffers).fwd);
  char why[1024];
  EXPECT_EQ(fl_backward_workspace_size(0, &c, why, sizeof(why)), -1);
  EXPECT_EQ(std::string(why).rfind("kernel 00_cublas: is a forward rung", 0), 0u) << why;
}

TEST(CApiBackward, BackwardRungIsRefusedByFlRun) {
  if (backward_rungs().empty()) GTEST_SKIP() << "no backward rung in this build (FL_KERNELS)";
  Buffers buffers(fl::gpu_available());
  const fl_attention_params c = to_c(base_params(buffers).fwd);
  for (const fl::KernelInfo* k : backward_rungs()) {
    buffers.o.fill(kPoison);
    char err[1024], why[1024];
    EXPECT_EQ(fl_run(k->number, &c, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
    EXPECT_EQ(std::string(err), fl::why_unsupported(*k, base_params(buffers).fwd));
    EXPECT_EQ(std::string(err).rfind("kernel " + k->name() + ": is a backward rung", 0), 0u)
        << err;
    EXPECT_EQ(fl_supports(k->number, &c, why, sizeof(why)), 0);
    EXPECT_EQ(std::string(why), std::string(err));
    EXPECT_TRUE(buffers.o.all_equal(kPoison)) << k->name() << " wrote O through fl_run";
  }
}

TEST(CApiBackward, StructErrorsNameTheKernel) {
  // The C API's own checks (a null struct, a dtype code out of range), before any rule; with
  // rung 00 when no backward rung is built (the struct is checked before the op).
  Buffers buffers(fl::gpu_available());
  const fl::KernelInfo* k =
      backward_rungs().empty() ? fl::find_kernel("00") : backward_rungs().front();
  ASSERT_NE(k, nullptr);
  char err[1024];
  EXPECT_EQ(fl_run_backward(k->number, nullptr, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
  EXPECT_EQ(std::string(err), "kernel " + k->name() + ": params is a null pointer");
  EXPECT_EQ(fl_supports_backward(k->number, nullptr, err, sizeof(err)), 0);
  EXPECT_EQ(std::string(err), "kernel " + k->name() + ": params is a null pointer");
  fl_backward_params c = to_c(base_params(buffers));
  c.fwd.dtype = 3;
  EXPECT_EQ(fl_run_backward(k->number, &c, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
  EXPECT_EQ(std::string(err),
            "kernel " + k->name() + ": dtype must be 0 (fp16), 1 (bf16) or 2 (e4m3), got 3");
  EXPECT_EQ(fl_best_backward_kernel(&c, err, sizeof(err)), -1);
  EXPECT_EQ(std::string(err), "dtype must be 0 (fp16), 1 (bf16) or 2 (e4m3), got 3");
  EXPECT_EQ(fl_best_backward_kernel(nullptr, err, sizeof(err)), -1);
  EXPECT_EQ(std::string(err), "params is a null pointer");
  EXPECT_EQ(fl_backward_workspace_size(k->number, nullptr, err, sizeof(err)), -1);
  EXPECT_EQ(std::string(err), "kernel " + k->name() + ": params is a null pointer");
}

TEST(CApiBackward, UnknownKernelNumber) {
  Buffers buffers(fl::gpu_available());
  const fl_backward_params c = to_c(base_params(buffers));
  char err[1024];
  EXPECT_EQ(fl_run_backward(99, &c, nullptr, err, sizeof(err)), FL_NO_SUCH_KERNEL);
  EXPECT_NE(std::string(err).find("no kernel numbered 99 in this build (built: 00_cublas"),
            std::string::npos)
      << err;
  EXPECT_EQ(fl_supports_backward(99, &c, err, sizeof(err)), 0);
  EXPECT_NE(std::string(err).find("no kernel numbered 99"), std::string::npos) << err;
  EXPECT_EQ(fl_backward_workspace_size(99, &c.fwd, err, sizeof(err)), -1);
  EXPECT_NE(std::string(err).find("no kernel numbered 99"), std::string::npos) << err;
}

TEST(CApiBackward, EveryRuleRefusedNamingTheKernelAndTheRule) {
  if (backward_rungs().empty()) GTEST_SKIP() << "no backward rung in this build (FL_KERNELS)";
  Buffers buffers(fl::gpu_available());
  static const float one = 1.f;  // e4m3's descale factor, one per tensor
  struct Case {
    const char* name;
    const char* rule;
    void (*apply)(fl::BwdParams&, Buffers&);
  };
  const Case shared[] = {
      {"no LSE", "LSE is required", [](fl::BwdParams& b, Buffers&) { b.fwd.lse = nullptr; }},
      {"no O", "O is a null pointer", [](fl::BwdParams& b, Buffers&) { b.fwd.o = nullptr; }},
      {"no dO", "dO is a null pointer", [](fl::BwdParams& b, Buffers&) { b.dout = nullptr; }},
      {"no dV", "dV is a null pointer", [](fl::BwdParams& b, Buffers&) { b.dv = nullptr; }},
      {"dQ misaligned", "dQ must be 16-byte aligned",
       [](fl::BwdParams& b, Buffers& bufs) { b.dq = bufs.dq.get() + 8; }},
      {"dK's dim stride 0", "dK's head-dimension stride must be 1",
       [](fl::BwdParams& b, Buffers&) { b.dk_stride.dim = 0; }},
      {"dV's row stride d + 4", "dV strides must be multiples of 8 elements",
       [](fl::BwdParams& b, Buffers&) {
         b.dv_stride.row = kD + 4;
         b.dv_stride.head = kN * (kD + 4);
         b.dv_stride.batch = kH * kN * (kD + 4);
       }},
      {"dO's rows overlap", "dO row stride (32) must be >= d (128)",
       [](fl::BwdParams& b, Buffers&) { b.do_stride.row = 32; }},
      {"bf16 O for fp16 inputs", "O's dtype (out_dtype) must be the inputs' dtype",
       [](fl::BwdParams& b, Buffers&) { b.fwd.out_dtype = fl::DType::bf16; }},
      {"e4m3 inputs", "the backward takes fp16 and bf16 inputs (got e4m3)",
       [](fl::BwdParams& b, Buffers&) {
         b.fwd.dtype = fl::DType::e4m3;
         b.fwd.q_descale = b.fwd.k_descale = b.fwd.v_descale = &one;
         // e4m3 strides are in 1-byte elements: the 16-bit ones double as valid here.
       }},
      {"workspace null with a size", "workspace is a null pointer but workspace_bytes is",
       [](fl::BwdParams& b, Buffers&) { b.workspace = nullptr; }},
      {"workspace misaligned", "workspace must be 256-byte aligned",
       [](fl::BwdParams& b, Buffers& bufs) { b.workspace = bufs.workspace.get() + 16; }},
      {"negative workspace size", "workspace_bytes must be >= 0",
       [](fl::BwdParams& b, Buffers&) { b.workspace_bytes = -1; }},
      {"no scale", "softmax_scale", [](fl::BwdParams& b, Buffers&) { b.fwd.softmax_scale = 0; }},
  };
  for (const fl::KernelInfo* k : backward_rungs()) {
    // Every backward rung takes the base call (the narrowest contract's): each case breaks one
    // rule of it.
    const std::string base_why = fl::why_unsupported_backward(*k, base_params(buffers));
    if (!base_why.empty()) {
      ADD_FAILURE() << k->name() << " refuses the base call: " << base_why;
      continue;
    }
    for (const Case& c : shared) {
      fl::BwdParams b = base_params(buffers);
      c.apply(b, buffers);
      expect_refused(*k, b, c.rule, buffers, c.name);
    }
    // The workspace one byte short of the rung's size for the shape (when it needs one).
    fl::BwdParams b = base_params(buffers);
    const int64_t need = fl::workspace_bytes(*k, b.fwd);
    if (need > 0) {
      b.workspace_bytes = need - 1;
      expect_refused(*k, b, "the workspace holds " + std::to_string(need - 1) +
                                " bytes; this shape needs " + std::to_string(need),
                     buffers, "workspace short by a byte");
    }
    // The rung's own rules, where it has one for these calls (GQA, causal, d, lengths): the
    // message is the rung's supports_backward's.
    const fl::BwdParams own[] = {base_params(buffers, 4, 2), base_params(buffers, kH, kH, kN, kD,
                                                                         true),
                                 base_params(buffers, kH, kH, kN, 96),
                                 base_params(buffers, kH, kH, 100, kD),
                                 base_params(buffers, kH, kH, kN, 256)};
    const char* names[] = {"GQA", "causal", "d = 96", "N = 100", "d = 256"};
    for (size_t i = 0; i < std::size(own); ++i) {
      const std::string rule = own_rule(*k, own[i]);
      if (!rule.empty()) expect_refused(*k, own[i], rule, buffers, names[i]);
    }
  }
}

// --------------------------------------------------------------------------------------------
// The choice of rung and the workspace's size
// --------------------------------------------------------------------------------------------

TEST(CApiBackward, BestIsTheRegistrysChoiceAndRefusesWithEveryBackwardReason) {
  Buffers buffers(fl::gpu_available());
  fl::BwdParams b = base_params(buffers);
  fl_backward_params c = to_c(b);
  char why[16384];
  std::string expected_why;
  const fl::KernelInfo* expected = fl::best_backward_kernel(b, &expected_why);
  if (expected != nullptr) {
    EXPECT_EQ(fl_best_backward_kernel(&c, why, sizeof(why)), expected->number) << why;
    EXPECT_STREQ(why, "");
    EXPECT_EQ(fl_supports_backward(FL_KERNEL_BEST, &c, why, sizeof(why)), 1) << why;
    // The workspace is not part of the choice (a caller asks before it has one), but it is part
    // of the call.
    c.workspace = nullptr;
    c.workspace_bytes = 0;
    EXPECT_EQ(fl_best_backward_kernel(&c, why, sizeof(why)), expected->number) << why;
    const int64_t need = fl::workspace_bytes(*expected, b.fwd);
    if (need > 0) {
      EXPECT_EQ(fl_supports_backward(FL_KERNEL_BEST, &c, why, sizeof(why)), 0);
      EXPECT_EQ(std::string(why), "kernel " + expected->name() + ": the workspace holds 0 bytes; "
                                  "this shape needs " + std::to_string(need) +
                                  " (workspace_bytes)");
      buffers.poison_gradients();
      EXPECT_EQ(fl_run_backward(FL_KERNEL_BEST, &c, nullptr, why, sizeof(why)), FL_UNSUPPORTED);
      EXPECT_NE(std::string(why).find("the workspace holds 0 bytes"), std::string::npos) << why;
      EXPECT_TRUE(buffers.gradients_untouched()) << "a gradient was written on a refused call";
    }
  } else {
    EXPECT_EQ(fl_best_backward_kernel(&c, why, sizeof(why)), -1);
    EXPECT_EQ(std::string(why), expected_why);
  }

  // A call no rung can run: every backward rung's reason and no forward rung's, before anything
  // is launched (dQ, dK, dV untouched).
  c = to_c(b);
  c.fwd.heads_q = 3;  // not a multiple of H_kv = 2
  EXPECT_EQ(fl_best_backward_kernel(&c, why, sizeof(why)), -1);
  const std::string message = why;
  EXPECT_EQ(message.rfind("no backward kernel of this build supports this call:", 0), 0u)
      << message;
  for (int i = 0; i < fl_num_kernels(); ++i) {
    const std::string named = std::string("kernel ") + fl_kernel_name(i) + ": ";
    if (fl_kernel_op(i) == FL_OP_BACKWARD) {
      EXPECT_NE(message.find(named + "H_q (3)"), std::string::npos) << message;
    } else {
      EXPECT_EQ(message.find(named), std::string::npos) << message;
    }
  }
  EXPECT_EQ(fl_supports_backward(FL_KERNEL_BEST, &c, why, sizeof(why)), 0);
  EXPECT_EQ(std::string(why), message);
  buffers.poison_gradients();
  char err[16384];
  EXPECT_EQ(fl_run_backward(FL_KERNEL_BEST, &c, nullptr, err, sizeof(err)), FL_UNSUPPORTED);
  EXPECT_EQ(std::string(err), message);
  EXPECT_TRUE(buffers.gradients_untouched()) << "a gradient was written on a refused call";
  // The same through the size query, which judges the sizes alone.
  EXPECT_EQ(fl_backward_workspace_size(FL_KERNEL_BEST, &c.fwd, err, sizeof(err)), -1);
  EXPECT_EQ(std::string(err), message);
}

TEST(CApiBackward, WorkspaceSizeIsTheRegistrysForTheShapesARungTakes) {
  Buffers buffers(fl::gpu_available());
  struct Shape {
    int64_t hq, hkv, n, d;
    bool causal;
  };
  const Shape shapes[] = {{2, 2, 128, 64, false}, {4, 4, 256, 128, false}, {4, 2, 128, 64, false},
                          {2, 2, 192, 128, true},  {2, 2, 100, 64, false},  {2, 2, 128, 96, false}};
  char why[4096];
  for (const Shape& s : shapes) {
    const fl::BwdParams b = base_params(buffers, s.hq, s.hkv, s.n, s.d, s.causal);
    fl_attention_params c = to_c(b.fwd);
    const std::string label = "H_q=" + std::to_string(s.hq) + " H_kv=" + std::to_string(s.hkv) +
                              " N=" + std::to_string(s.n) + " d=" + std::to_string(s.d) +
                              (s.causal ? " causal" : "");
    for (const fl::KernelInfo* k : backward_rungs()) {
      const std::string rule = own_rule(*k, b);
      const int64_t got = fl_backward_workspace_size(k->number, &c, why, sizeof(why));
      if (rule.empty()) {
        EXPECT_EQ(got, fl::workspace_bytes(*k, b.fwd)) << k->name() << " " << label;
        EXPECT_GE(got, 0) << k->name() << " " << label;
        EXPECT_STREQ(why, "") << k->name() << " " << label;
      } else {
        EXPECT_EQ(got, -1) << k->name() << " " << label;
        EXPECT_EQ(std::string(why), "kernel " + k->name() + ": " + rule) << label;
      }
    }
    // FL_KERNEL_BEST: the size of the rung fl_best_backward_kernel picks for the call (contiguous
    // tensors, as these are), or -1 with every rung's reason.
    std::string none;
    const fl::KernelInfo* best = fl::best_backward_kernel(b, &none);
    const int64_t got = fl_backward_workspace_size(FL_KERNEL_BEST, &c, why, sizeof(why));
    if (best != nullptr) {
      EXPECT_EQ(got, fl::workspace_bytes(*best, b.fwd)) << label;
    } else {
      EXPECT_EQ(got, -1) << label;
      EXPECT_EQ(std::string(why), none) << label;
    }
    // Pointers and strides are not read: the same answer with none of them set.
    fl_attention_params bare = c;
    bare.q = bare.k = bare.v = bare.o = nullptr;
    bare.lse = nullptr;
    bare.q_stride_dim = bare.k_stride_dim = bare.v_stride_dim = bare.o_stride_dim = 0;
    EXPECT_EQ(fl_backward_workspace_size(FL_KERNEL_BEST, &bare, why, sizeof(why)), got) << label;
  }
  // Sizes that break a shared rule: -1 with it.
  fl_attention_params c = to_c(base_params(buffers).fwd);
  c.seqlen_q = 0;
  for (const fl::KernelInfo* k : backward_rungs()) {
    EXPECT_EQ(fl_backward_workspace_size(k->number, &c, why, sizeof(why)), -1);
    EXPECT_NE(std::string(why).find("kernel " + k->name() + ": every size must be >= 1"),
              std::string::npos)
        << why;
  }
}

// --------------------------------------------------------------------------------------------
// On the GPU: the C API runs what the C++ API runs
// --------------------------------------------------------------------------------------------

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant != 0 ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign != 0 ? -v : v;
}

std::vector<float> read_f16(Buffer& b, int64_t count) {
  const std::vector<unsigned char> bytes = b.read();
  std::vector<float> out(count);
  for (int64_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    out[i] = half_to_float(h);
  }
  return out;
}

TEST(CApiBackward, RunMatchesTheCppApiOnTheGpu) {
  std::string why;
  if (!fl::gpu_available(&why)) GTEST_SKIP() << why;
  Buffers buffers(true);
  const fl::BwdParams base = base_params(buffers);
  std::vector<const fl::KernelInfo*> rungs;
  for (const fl::KernelInfo* k : backward_rungs()) {
    if (fl::why_unsupported_backward(*k, base).empty()) rungs.push_back(k);
  }
  if (rungs.empty()) {
    std::string none;
    fl::best_backward_kernel(base, &none);
    GTEST_SKIP() << "no backward rung runs the base call here: " << none;
  }
  // Inputs, the forward's O and LSE (the best forward rung), and dO.
  const int64_t q_count = kB * kH * kN * kD;
  fl::fill_randn(buffers.q.get(), fl::DType::f16, q_count, 1, 1.f);
  fl::fill_randn(buffers.k.get(), fl::DType::f16, q_count, 2, 1.f);
  fl::fill_randn(buffers.v.get(), fl::DType::f16, q_count, 3, 1.f);
  fl::fill_randn(buffers.dout.get(), fl::DType::f16, q_count, 4, 1.f);
  const fl::KernelInfo* forward = fl::best_kernel(base.fwd);
  ASSERT_NE(forward, nullptr);
  fl::run_kernel(*forward, base.fwd);
  FL_CUDA_CHECK(cudaDeviceSynchronize());

  for (const fl::KernelInfo* k : rungs) {
    SCOPED_TRACE(k->name());
    // The C++ API, then the C API, with the workspace fl_backward_workspace_size reports
    // (poisoned: its contents on entry must not matter).
    fl::BwdParams b = base;
    char err[1024];
    const fl_attention_params fc = to_c(b.fwd);
    const int64_t need = fl_backward_workspace_size(k->number, &fc, err, sizeof(err));
    ASSERT_GE(need, 0) << err;
    b.workspace_bytes = need;
    if (need == 0) b.workspace = nullptr;
    buffers.poison_gradients();
    buffers.workspace.fill(kPoison);
    fl::run_backward(*k, b);
    FL_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> dq = read_f16(buffers.dq, q_count);
    const std::vector<float> dk = read_f16(buffers.dk, q_count);
    const std::vector<float> dv = read_f16(buffers.dv, q_count);

    for (const int number : {k->number, FL_KERNEL_BEST}) {
      if (number == FL_KERNEL_BEST && fl::best_backward_kernel(b) != k) continue;
      buffers.poison_gradients();
      buffers.workspace.fill(kPoison);
      const fl_backward_params c = to_c(b);
      ASSERT_EQ(fl_run_backward(number, &c, nullptr, err, sizeof(err)), FL_OK) << err;
      FL_CUDA_CHECK(cudaDeviceSynchronize());
      // The two runs may add dQ's fp32 partial sums in another order (fp32 atomics), which can
      // move an fp16 result by an ulp: held to 2 ulps of the largest value, not bitwise.
      for (const auto& [name, want, got] :
           {std::make_tuple("dQ", &dq, read_f16(buffers.dq, q_count)),
            std::make_tuple("dK", &dk, read_f16(buffers.dk, q_count)),
            std::make_tuple("dV", &dv, read_f16(buffers.dv, q_count))}) {
        float largest = 0.f, diff = 0.f;
        for (int64_t i = 0; i < q_count; ++i) {
          ASSERT_TRUE(std::isfinite(got[i])) << name << "[" << i << "] through the C API";
          largest = std::max(largest, std::fabs((*want)[i]));
          diff = std::max(diff, std::fabs(got[i] - (*want)[i]));
        }
        EXPECT_GT(largest, 0.f) << name << " is all zero";
        EXPECT_LE(diff, largest * std::ldexp(1.f, -9)) << name << ", kernel " << number;
      }
    }
  }
}

}  // namespace
