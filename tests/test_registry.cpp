// The registry: one entry per kernel folder, each with its page; unsupported shapes are refused
// with a message that names the kernel and the rule (no GPU needed: refusal comes before launch).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/harness.h"
#include "common/registry.h"

namespace {

namespace fs = std::filesystem;

fl::AttnParams shape(int64_t n, int64_t d, bool causal = false) {
  fl::AttnParams p = fl::make_params(fl::DType::f16, 1, 2, n, n, d, causal);
  p.q = reinterpret_cast<void*>(0x1000);
  p.k = reinterpret_cast<void*>(0x2000);
  p.v = reinterpret_cast<void*>(0x3000);
  p.o = reinterpret_cast<void*>(0x4000);
  return p;
}

// The same shape in the input type kernel k takes: fp16 (or `out`) for the 16-bit rungs, e4m3
// with an `out` O and placeholder descale factors of 1 for a kernel with fp8_inputs.
fl::AttnParams shape_for(const fl::KernelInfo& k, int64_t n, int64_t d, bool causal = false,
                         fl::DType out = fl::DType::f16) {
  fl::ProblemSpec s;
  s.dtype = k.fp8_inputs ? fl::DType::e4m3 : out;
  s.out_dtype = out;
  s.batch = 1;
  s.heads_q = s.heads_kv = 2;
  s.seqlen_q = s.seqlen_k = n;
  s.head_dim = d;
  s.causal = causal;
  return fl::placeholder_params(s);
}

TEST(Registry, OneEntryPerKernelFolder) {
  std::set<std::string> folders;
  for (const auto& e : fs::directory_iterator(fs::path(FL_SOURCE_DIR) / "kernels")) {
    if (e.is_directory()) folders.insert(e.path().filename().string());
  }
  std::set<std::string> registered;
  int previous = -1;
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    EXPECT_GT(k->number, previous) << "kernels must be sorted and numbered uniquely";
    previous = k->number;
    registered.insert(k->name());
    EXPECT_TRUE(folders.count(k->name())) << k->name() << " is not a folder under kernels/";
  }
  ASSERT_TRUE(registered.count("00_cublas"));
  ASSERT_TRUE(registered.count("01_naive"));
  ASSERT_TRUE(registered.count("02_smem_tiling"));
}

TEST(Registry, EveryKernelHasItsPage) {
  std::set<std::string> titles;
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    const fs::path page = fs::path(FL_SOURCE_DIR) / k->doc;
    EXPECT_TRUE(fs::exists(page)) << k->name() << ": page " << k->doc << " is missing";
    // The page of rung NN_slug is docs/kernels/NN_slug.md (a rung copied from another keeps
    // the other's page otherwise).
    EXPECT_EQ(std::string(k->doc), "docs/kernels/" + k->name() + ".md") << k->name();
    EXPECT_NE(std::string(k->title), "") << k->name();
    EXPECT_TRUE(titles.insert(k->title).second) << k->name() << ": another rung's title";
    EXPECT_GE(k->min_sm, 80) << k->name();
  }
}

TEST(Registry, FindsKernelsByNumberAndName) {
  ASSERT_NE(fl::find_kernel("1"), nullptr);
  EXPECT_EQ(fl::find_kernel("1"), fl::find_kernel("01"));
  EXPECT_EQ(fl::find_kernel("01_naive"), fl::find_kernel("naive"));
  EXPECT_EQ(fl::find_kernel("99"), nullptr);
  EXPECT_EQ(fl::find_kernel("x"), nullptr);
}

TEST(Registry, EveryKernelSupportsTheLadderShape) {
  // Every rung claims at least fp16 and bf16 O (for the 16-bit rungs, fp16 and bf16 inputs; for
  // a kernel with fp8_inputs, e4m3 inputs), d = 128, N = 1024 (a multiple of any block size),
  // and no other input type. Forward rungs: the backward's least is tests/test_backward.cu's.
  // A rung of the serving track (FL_SERVING_FIRST_RUNG on) takes decode calls alone: its least
  // is one query row against those 1024 keys.
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    for (fl::DType t : {fl::DType::f16, fl::DType::bf16}) {
      fl::AttnParams p = shape_for(*k, 1024, 128, false, t);
      if (k->number >= FL_SERVING_FIRST_RUNG) {
        p.seqlen_q = 1;
        EXPECT_NE(k->supports(shape_for(*k, 1024, 128, false, t)), "")
            << k->name() << " is a serving rung: it must leave N = 1024 to the prefill rungs";
      }
      ASSERT_EQ(fl::check_common(p), "");
      EXPECT_EQ(k->supports(p), "") << k->name() << " " << fl::to_string(p.dtype) << " -> "
                                    << fl::to_string(p.out_dtype);
    }
  }
}

// A kernel that would take anything: the input-type rule of why_unsupported is all that refuses.
std::string takes_anything(const fl::AttnParams&) { return ""; }

TEST(Registry, InputTypeIsRefusedByFp8Inputs) {
  fl::KernelInfo fake16;
  fake16.number = 98;
  fake16.slug = "fake16";
  fake16.supports = takes_anything;
  fake16.min_sm = 0;
  fl::KernelInfo fake8 = fake16;
  fake8.number = 99;
  fake8.slug = "fake8";
  fake8.fp8_inputs = true;
  for (fl::DType out : {fl::DType::f16, fl::DType::bf16}) {
    const fl::AttnParams e4m3 = shape_for(fake8, 256, 128, false, out);
    const fl::AttnParams b16 = shape_for(fake16, 256, 128, false, out);
    ASSERT_EQ(fl::check_common(e4m3), "");
    ASSERT_EQ(fl::check_common(b16), "");
    EXPECT_EQ(fl::why_unsupported(fake16, e4m3),
              "kernel 98_fake16: takes fp16 and bf16 inputs (got e4m3): e4m3 inputs need rung 28");
    EXPECT_EQ(fl::why_unsupported(fake8, b16), std::string("kernel 99_fake8: takes e4m3 inputs "
                                                           "only (got ") +
                                                   fl::to_string(out) + ")");
    EXPECT_EQ(fl::why_unsupported(fake16, b16), "");
    EXPECT_EQ(fl::why_unsupported(fake8, e4m3), "");
    EXPECT_THROW(fl::run_kernel(fake16, e4m3), fl::UnsupportedError);
  }
  // The common rules come first: a broken one is reported, not the input type.
  fl::AttnParams p = shape_for(fake8, 256, 128);
  p.k_descale = nullptr;
  EXPECT_EQ(fl::why_unsupported(fake16, p),
            "kernel 98_fake16: e4m3 inputs need descale factors (x = e4m3 * descale): K's "
            "descale is a null pointer");
}

TEST(Registry, EveryKernelRefusesTheOtherInputType) {
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    fl::ProblemSpec s;
    s.batch = 1;
    s.heads_q = s.heads_kv = 2;
    s.seqlen_q = s.seqlen_k = 256;
    s.dtype = k->fp8_inputs ? fl::DType::f16 : fl::DType::e4m3;
    const std::string why = fl::why_unsupported(*k, fl::placeholder_params(s));
    EXPECT_NE(why.find("kernel " + k->name() + ": takes "), std::string::npos) << why;
  }
}

TEST(Registry, RefusalNamesKernelAndRule) {
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    fl::AttnParams p = shape(1024, 128);
    p.q = nullptr;
    try {
      fl::run_kernel(*k, p);
      ADD_FAILURE() << k->name() << " accepted a null Q";
    } catch (const fl::UnsupportedError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("kernel " + k->name()), std::string::npos) << msg;
      EXPECT_NE(msg.find("Q is a null pointer"), std::string::npos) << msg;
    }
  }
}

TEST(Registry, UnsupportedHeadDimIsRefused) {
  // d = 72 is supported by no rung except the cuBLAS baseline (any multiple of 8).
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    if (k->number == 0) continue;
    // e4m3 rows of 72 bytes would break the 16-byte stride rule first: d = 80 there.
    const fl::AttnParams p = shape_for(*k, 1024, k->fp8_inputs ? 80 : 72);
    const std::string why = fl::why_unsupported(*k, p);
    EXPECT_NE(why.find("kernel " + k->name()), std::string::npos) << why;
    EXPECT_NE(why.find("head_dim"), std::string::npos) << why;
    EXPECT_THROW(fl::run_kernel(*k, p), fl::UnsupportedError);
  }
}

TEST(Registry, TiledKernelsRefuseRaggedLengths) {
  // Rungs 02-15 may demand N a multiple of their block sizes; those that do must say so. (A
  // serving rung refuses N = 1023 queries for its rows; tests/test_decode.cu checks that rule.)
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    if (k->number >= FL_SERVING_FIRST_RUNG) continue;
    const fl::AttnParams p = shape_for(*k, 1023, 128);
    const std::string why = fl::why_unsupported(*k, p);
    if (why.empty()) continue;  // the kernel claims any length: the GPU tests check that claim
    EXPECT_NE(why.find("multiple of"), std::string::npos) << why;
  }
}

TEST(Registry, CublasBaselineRefusesRowStridesBeyondInt32) {
  // Kernel 00 hands the row strides to cuBLAS as int leading dimensions: one past 2^31 - 1 would be
  // truncated, so it is refused (and one just below is not).
  const fl::KernelInfo* k = fl::find_kernel("00");
  ASSERT_NE(k, nullptr);
  fl::AttnParams p = shape(4, 128);
  p.k_stride.row = (int64_t{1} << 31) + 8;
  p.k_stride.head = 4 * p.k_stride.row;
  p.k_stride.batch = 2 * p.k_stride.head;
  const std::string why = fl::why_unsupported(*k, p);
  EXPECT_NE(why.find("kernel 00_cublas"), std::string::npos) << why;
  EXPECT_NE(why.find("row strides must fit in int32"), std::string::npos) << why;
  p.k_stride.row = (int64_t{1} << 31) - 8;
  p.k_stride.head = 4 * p.k_stride.row;
  p.k_stride.batch = 2 * p.k_stride.head;
  EXPECT_EQ(fl::why_unsupported(*k, p).find("row strides"), std::string::npos);
}

}  // namespace

namespace {

// "best" (fl::best_kernel, the C API's FL_KERNEL_BEST, `ladder --kernel best`): of the kernels that
// can run the call on this device, the highest-numbered. Without a GPU the device rule is not
// checked; with one, the Hopper rungs count only on compute capability 9.0. Either way the
// answer must be the highest kernel whose why_unsupported is empty, and the causal call must
// go to a rung that takes a mask.
TEST(Registry, BestIsTheHighestKernelThatTakesTheCall) {
  const fl::AttnParams shapes[] = {shape(256, 128), shape(256, 128, /*causal=*/true),
                                   shape(113, 64), shape(1024, 256, /*causal=*/true)};
  for (const fl::AttnParams& p : shapes) {
    const fl::KernelInfo* expected = nullptr;
    for (const fl::KernelInfo* k : fl::forward_kernels()) {
      if (fl::why_unsupported(*k, p).empty()) expected = k;  // sorted: the last one wins
    }
    std::string why;
    const fl::KernelInfo* best = fl::best_kernel(p, &why);
    ASSERT_NE(expected, nullptr) << "the baseline takes every well-formed call";
    EXPECT_EQ(best, expected) << "got " << (best ? best->name() : "none") << ", expected "
                              << expected->name();
    if (p.causal) {
      // Of the rungs above 16, 24 and up take a causal mask: the final rung of a track is the
      // best there (27 where it can run, else 16).
      const fl::KernelInfo* k27 = fl::find_kernel("27");
      const bool takes_27 = k27 != nullptr && fl::why_unsupported(*k27, p).empty();
      if (takes_27) {
        EXPECT_EQ(best->number, 27) << best->name();
      } else if (fl::find_kernel("16") != nullptr) {
        EXPECT_EQ(best->number, 16) << best->name();
      }
    }
  }
}

TEST(Registry, BestForE4m3InputsIsAKernelThatTakesThem) {
  // An e4m3 call goes to the highest kernel with fp8_inputs that takes it (rung 28 on an H100),
  // never to a 16-bit rung; where none can (no such rung in the build, or no Hopper GPU), best
  // refuses with every kernel's reason, the 16-bit rungs' being the input type.
  fl::ProblemSpec s;
  s.dtype = fl::DType::e4m3;
  s.batch = 1;
  s.heads_q = s.heads_kv = 2;
  s.seqlen_q = s.seqlen_k = 256;
  const fl::AttnParams p = fl::placeholder_params(s);
  const fl::KernelInfo* expected = nullptr;
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    if (fl::why_unsupported(*k, p).empty()) {
      EXPECT_TRUE(k->fp8_inputs) << k->name() << " took an e4m3 call";
      expected = k;
    }
  }
  std::string why;
  EXPECT_EQ(fl::best_kernel(p, &why), expected);
  if (expected == nullptr) {
    EXPECT_NE(why.find("kernel 00_cublas: takes fp16 and bf16 inputs (got e4m3)"),
              std::string::npos)
        << why;
  }
}

TEST(Registry, BestRefusesWithEveryKernelsReason) {
  fl::AttnParams p = shape(256, 128);
  p.heads_q = 3;  // not a multiple of H_kv = 2
  std::string why;
  EXPECT_EQ(fl::best_kernel(p, &why), nullptr);
  EXPECT_EQ(why.rfind("no kernel of this build supports this call:", 0), 0u) << why;
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    EXPECT_NE(why.find("kernel " + k->name() + ": H_q (3) must be a multiple of H_kv (2)"),
              std::string::npos)
        << why;
  }
}

}  // namespace

namespace {

// The TMA rungs (18 and up) pass box coordinates to cp.async.bulk.tensor as 32-bit integers:
// a length of 2^31 (a multiple of every tile) must be refused by that rule, not wrap around.
TEST(Registry, TmaRungsRefuseLengthsPastTheir32BitCoordinates) {
  int checked = 0;
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    // The serving track's rungs (mma.sync, no TMA) refuse these lengths by their rows rule.
    if (k->number < 18 || k->number >= FL_SERVING_FIRST_RUNG) continue;
    fl::ProblemSpec s;
    s.dtype = k->fp8_inputs ? fl::DType::e4m3 : fl::DType::f16;
    s.seqlen_q = s.seqlen_k = int64_t{1} << 31;
    const std::string why = fl::why_unsupported(*k, fl::placeholder_params(s));
    // The FP8 rung states its own, lower limit on the lengths (2^30).
    const bool rule = why.find("length must be below 2^31 (TMA coordinates are 32-bit)") !=
                          std::string::npos ||
                      (k->fp8_inputs && why.find("Nq and Nk must be <= 2^30") != std::string::npos);
    EXPECT_TRUE(rule) << k->name() << ": " << why;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no TMA rung (18+) in this build";
}

// The forward's workspace (a rung's scratch, e.g. the split-key decode's partial outputs): the
// rules on the pointer and size, the size a kernel asks for, the refusal of a short one, and
// best's choice, which does not depend on it. A stand-in rung (the baseline's entry with a
// workspace) makes the rules testable whatever rungs the build has.
TEST(Registry, TheForwardWorkspaceMustHoldWhatTheKernelAsks) {
  const fl::KernelInfo* base = fl::find_kernel("00");
  ASSERT_NE(base, nullptr);
  fl::KernelInfo k = *base;
  k.workspace = [](const fl::AttnParams& p) { return 4 * p.seqlen_q * p.head_dim + 256; };
  fl::AttnParams p = shape(256, 128);
  const int64_t need = 4 * 256 * 128 + 256;
  EXPECT_EQ(fl::workspace_bytes(k, p), need);
  EXPECT_EQ(fl::workspace_bytes(*base, p), 0) << "no workspace function: none needed";
  EXPECT_EQ(fl::why_unsupported(k, p),
            "kernel 00_cublas: the workspace holds 0 bytes; this shape needs " +
                std::to_string(need) + " (workspace_bytes)");
  EXPECT_THROW(fl::run_kernel(k, p), fl::UnsupportedError);
  p.workspace = reinterpret_cast<void*>(0x6000);
  p.workspace_bytes = need - 1;
  EXPECT_NE(fl::why_unsupported(k, p).find("holds " + std::to_string(need - 1)), std::string::npos);
  p.workspace_bytes = need;
  EXPECT_EQ(fl::why_unsupported(k, p), "");
  // The pointer and size themselves, for every kernel (check_common).
  p.workspace_bytes = -1;
  EXPECT_EQ(fl::check_common(p), "workspace_bytes must be >= 0");
  p.workspace_bytes = need;
  p.workspace = nullptr;
  EXPECT_EQ(fl::check_common(p), "workspace is a null pointer but workspace_bytes is " +
                                     std::to_string(need));
  p.workspace = reinterpret_cast<void*>(0x6010);
  EXPECT_EQ(fl::check_common(p), "workspace must be 256-byte aligned");
  EXPECT_NE(fl::why_unsupported(*base, p).find("256-byte aligned"), std::string::npos);
  // A shape that breaks check_shape has no size (0), not a size computed from nonsense.
  fl::AttnParams bad = shape(256, 128);
  bad.heads_q = 3;  // not a multiple of H_kv = 2
  EXPECT_EQ(fl::workspace_bytes(k, bad), 0);
}

TEST(Registry, BestDoesNotDependOnTheWorkspace) {
  // best picks the rung; the caller then sizes that rung's workspace. A call without one gets
  // the same answer as a call with an ample one, for every shape tried, decode shapes included.
  std::vector<fl::AttnParams> shapes = {shape(256, 128), shape(113, 64, /*causal=*/true)};
  for (int64_t nk : {1000, 33000}) {
    fl::AttnParams p = fl::make_params(fl::DType::f16, 1, 32, 1, nk, 128, false,
                                       fl::Layout::BNHD);
    p.heads_kv = 8;
    p.k_stride = p.v_stride = fl::make_strides(fl::Layout::BNHD, 8, nk, 128);
    p.q = reinterpret_cast<void*>(0x1000);
    p.k = reinterpret_cast<void*>(0x2000);
    p.v = reinterpret_cast<void*>(0x3000);
    p.o = reinterpret_cast<void*>(0x4000);
    shapes.push_back(p);
  }
  for (const fl::AttnParams& bare : shapes) {
    fl::AttnParams ample = bare;
    ample.workspace = reinterpret_cast<void*>(0x6000);
    ample.workspace_bytes = INT64_MAX;
    const fl::KernelInfo* a = fl::best_kernel(bare);
    const fl::KernelInfo* b = fl::best_kernel(ample);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a, b) << a->name() << " against " << (b ? b->name() : "none");
    EXPECT_EQ(fl::why_unsupported(*a, ample), "") << a->name();
  }
}

}  // namespace

namespace {

// A K/V cache call (decode: B = 3, GQA 32/8, Nq = 1, d = 128, capacity seqlen_k = 1000, BNHD
// queries), placeholder pointers: per-sequence lengths alone, or with a block table of 256-key
// pages (K and V then page pools [pages, 256, H_kv, d], batch stride = a page's).
fl::AttnParams cache_call(bool paged) {
  fl::AttnParams p = fl::make_params(fl::DType::f16, 3, 32, 1, 1000, 128, false,
                                     fl::Layout::BNHD);
  p.heads_kv = 8;
  p.k_stride = p.v_stride = fl::make_strides(fl::Layout::BNHD, 8, 1000, 128);
  p.q = reinterpret_cast<void*>(0x1000);
  p.k = reinterpret_cast<void*>(0x2000);
  p.v = reinterpret_cast<void*>(0x3000);
  p.o = reinterpret_cast<void*>(0x4000);
  p.seqlens_k = reinterpret_cast<const int32_t*>(0x5000);
  if (paged) {
    p.block_table = reinterpret_cast<const int32_t*>(0x7000);
    p.page_size = 256;
    p.block_table_stride = 4;  // ceil(1000 / 256)
    p.k_stride = p.v_stride = fl::make_strides(fl::Layout::BNHD, 8, 256, 128);
  }
  return p;
}

// check_common's rules on the cache fields (host side: the pointers' alignment, the page size,
// the table's row length; the lengths and page numbers are device data, never read).
TEST(Registry, KvCacheRulesOfCheckCommon) {
  EXPECT_EQ(fl::check_common(cache_call(false)), "");
  EXPECT_EQ(fl::check_common(cache_call(true)), "");
  fl::AttnParams p = cache_call(true);
  p.seqlens_k = nullptr;  // a block table alone: every sequence has seqlen_k keys
  EXPECT_EQ(fl::check_common(p), "");

  p = cache_call(false);
  p.seqlens_k = reinterpret_cast<const int32_t*>(0x5002);
  EXPECT_EQ(fl::check_common(p), "seqlens_k must be 4-byte aligned");
  p = cache_call(true);
  p.block_table = reinterpret_cast<const int32_t*>(0x7001);
  EXPECT_EQ(fl::check_common(p), "block_table must be 4-byte aligned");
  p = cache_call(false);
  p.page_size = 256;
  EXPECT_EQ(fl::check_common(p),
            "page_size and block_table_stride describe a block table: both must be 0 without one "
            "(got page_size = 256, block_table_stride = 0)");
  p = cache_call(false);
  p.block_table_stride = 4;
  EXPECT_NE(fl::check_common(p).find("both must be 0 without one"), std::string::npos);
  for (int64_t bad : {0, -16, 8, 24, 100}) {
    p = cache_call(true);
    p.page_size = bad;
    p.block_table_stride = 1000;
    EXPECT_EQ(fl::check_common(p),
              "page_size must be a multiple of 16 and >= 16 with a block table (got " +
                  std::to_string(bad) + ")");
  }
  p = cache_call(true);
  p.block_table_stride = 3;
  EXPECT_EQ(fl::check_common(p),
            "block_table_stride (3) must be >= ceil(seqlen_k / page_size) = 4: a row of the "
            "table holds the pages of seqlen_k keys");
  p.page_size = 16;
  p.block_table_stride = 62;  // 1000 keys are 62.5 pages of 16
  EXPECT_NE(fl::check_common(p).find("(62) must be >= ceil(seqlen_k / page_size) = 63"),
            std::string::npos);
  p.block_table_stride = 63;
  EXPECT_EQ(fl::check_common(p), "");
  // With a block table K and V are checked as page pools: a page's rows by the row rules.
  p = cache_call(true);
  p.k_stride.row = 64;  // rows of a page overlap (d = 128)
  EXPECT_EQ(fl::check_common(p), "K row stride (64) must be >= d (128): rows must not overlap");
  p = cache_call(true);
  p.v_stride.batch = 4;  // pages 8 bytes apart
  EXPECT_NE(fl::check_common(p).find("V strides must be multiples of 8 elements"),
            std::string::npos);
  // The backward takes no cache.
  fl::AttnParams fwd = shape(256, 128);
  fwd.lse = reinterpret_cast<float*>(0x8000);
  fwd.seqlens_k = reinterpret_cast<const int32_t*>(0x5000);
  fl::BwdParams b = fl::make_bwd_params(fwd);
  b.dout = reinterpret_cast<void*>(0x9000);
  b.dq = reinterpret_cast<void*>(0xa000);
  b.dk = reinterpret_cast<void*>(0xb000);
  b.dv = reinterpret_cast<void*>(0xc000);
  EXPECT_NE(fl::check_backward(b).find("the backward takes a contiguous K/V"), std::string::npos);
  b.fwd.seqlens_k = nullptr;
  EXPECT_EQ(fl::check_backward(b), "");
}

// Every forward kernel without kv_cache refuses a call with cache lengths or a block table, by
// name and rule; best_kernel takes such a call to the highest rung with a K/V cache (39 on) where
// the build has one, else to none.
TEST(Registry, KvCacheCallsNeedAKernelWithKvCache) {
  const std::string rule =
      "takes a contiguous K/V of seqlen_k keys a sequence: a K/V cache with cache lengths or a "
      "block table needs a rung with a K/V cache (39 on)";
  for (bool paged : {false, true}) {
    for (bool lengths : {false, true}) {
      if (!paged && !lengths) continue;
      fl::AttnParams p = cache_call(paged);
      if (!lengths) p.seqlens_k = nullptr;
      for (const fl::KernelInfo* k : fl::forward_kernels()) {
        if (k->fp8_inputs) {
          // The input type is judged first: an e4m3 rung refuses these fp16 calls for that.
          EXPECT_NE(fl::why_unsupported(*k, p).find("takes e4m3 inputs only"), std::string::npos);
        } else if (k->kv_cache) {
          EXPECT_EQ(fl::why_unsupported(*k, p).find(rule), std::string::npos) << k->name();
        } else {
          EXPECT_EQ(fl::why_unsupported(*k, p), "kernel " + k->name() + ": " + rule);
          EXPECT_THROW(fl::run_kernel(*k, p), fl::UnsupportedError) << k->name();
        }
      }
      std::string why;
      const fl::KernelInfo* best = fl::best_kernel(p, &why);
      const fl::KernelInfo* highest = nullptr;
      for (const fl::KernelInfo* k : fl::forward_kernels()) {
        if (k->kv_cache && (highest == nullptr || k->number > highest->number)) highest = k;
      }
      if (highest != nullptr) {
        ASSERT_NE(best, nullptr) << why;
        EXPECT_EQ(best->number, highest->number) << best->name();
      } else {
        EXPECT_EQ(best, nullptr) << best->name();
        EXPECT_NE(why.find("kernel 00_cublas: " + rule), std::string::npos) << why;
      }
    }
  }
  // The same call without the cache fields is a plain decode call: no kernel refuses it for that.
  fl::AttnParams plain = cache_call(false);
  plain.seqlens_k = nullptr;
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    EXPECT_EQ(fl::why_unsupported(*k, plain).find(rule), std::string::npos) << k->name();
  }
  // The forward rungs from 39 on (the serving track's) say kv_cache, and no other: not the
  // backward rungs 41-45 and 54-55 numbered after them.
  for (const fl::KernelInfo* k : fl::all_kernels()) {
    EXPECT_EQ(k->kv_cache, k->number >= 39 && k->op == fl::Op::forward) << k->name();
  }
}

}  // namespace

TEST(Registry, SharedMemoryRefusalNamesBothSizes) {
  // A block of no bytes fits anywhere.
  EXPECT_EQ(fl::shared_memory_refusal(0, 128), "");
  std::string why;
  if (!fl::gpu_available(&why)) {
    // No device answers: the rule says nothing (the registry reports the missing device).
    EXPECT_EQ(fl::shared_memory_refusal(1 << 30, 64), "");
    return;
  }
  // On a GPU: a block no device holds is refused with both sizes, and no CUDA error is left.
  const std::string no = fl::shared_memory_refusal(1 << 30, 64);
  EXPECT_EQ(no.rfind("needs 1048576 KiB of shared memory per block at d = 64 (the device allows ", 0),
            0u)
      << no;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}
