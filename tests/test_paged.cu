// The rungs with a K/V cache (KernelInfo::kv_cache: 39 decode_paged, 40 decode_occupancy), each
// through every test but the first of PagedSame: decode on a K/V cache, each sequence with its
// own length (AttnParams::seqlens_k), its keys in pages of a pool that a block table maps
// (block_table, page_size), or in a contiguous [B, H_kv, Nk, d] cache of capacity Nk.
//
//   PagedRules.*  (CPU) the page sizes a cache rung claims (every one of the common rule, a multiple
//                 of 16; another refused by name and rule before any launch); the cache calls it
//                 claims (lengths, a table, both), their workspace that of the same call without
//                 them (the splits are decided on the capacity)
//   Paged.*       (GPU) a cache grid after FlashAttention's kvcache tests: ragged lengths (0, 1,
//                 one that is no multiple of 64 or of the page, the capacity), block tables
//                 shuffled over a pool larger than needed whose unused pages and rows are NaN (a
//                 wrong page shows), pages of 16, 48, 64 and 256 keys and the contiguous cache
//                 with lengths alone; GQA 32/8, MQA 16/1, MHA 8/8; causal or not; Nq 1, 2, 16
//                 (where Nq x g <= 64); fp16, bf16; d 64, 96, 128, 192; B 1, 5. The reference:
//                 each sequence's keys gathered into a problem of its own (B = 1, Nk = its
//                 length) through the harness's Reference, causal bottom-right by that length; O
//                 by the pass rule, the LSE as verify holds it; an empty sequence's rows exactly
//                 O = 0, LSE = -inf; two runs bitwise equal; the workspace poisoned (NaN) first
//   PagedSame.*   (GPU) what the lookup must not change: rung 39 on a plain call equals rung 38
//                 bit for bit (the same splits), rung 40 equals rung 39 where it splits alike,
//                 rung 46 equals rung 40 always (the same splits, the same sums), rung 47
//                 rung 46, rung 48 rung 47 above 16 rows a block, rung 49 rung 48 always, and
//                 rung 50 rung 49 where it splits alike (always at d <= 96), rung 51
//                 rung 50 always, rung 52 rung 51 always (group sizes 1, 3, 5-7 and 12
//                 too), rung 53 rung 52 always (pages of 32, 48, 80, 112 and 208 too), and
//                 rung 56 rung 53 always (pages of 32, 48, 128, 192 and 256, splits that
//                 start inside a page), and rung 57 rung 56 where the longest length is the
//                 capacity; rung 57's splits each hold some keys of the longest sequence of a
//                 batch much shorter than its cache (their LSEs in the workspace); rung 58
//                 rung 57 always, with no workspace where it merges two splits in a cluster,
//                 and rungs 59-61 rung 57 always, with none where they merge two to eight
//                 (rung 61: only where the call's clusters fit the GPU at once), and rung 62
//                 rung 57 where it splits alike (its grids of one wave or less);
//                 a table that maps pages in order, and lengths all at the capacity, equal the
//                 plain call bit for bit; lengths outside [0, Nk] run as the clamped ones
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "common/clusters.h"
#include "common/harness.h"
#include "common/random.h"
#include "common/registry.h"
#include "gpu_test_util.h"
#include "kernels/57_decode_split_lengths/splits.h"
#include "kernels/58_decode_cluster_combine/splits.h"
#include "kernels/59_decode_wide_cluster/splits.h"
#include "kernels/60_decode_cluster_push/splits.h"
#include "kernels/61_decode_cluster_fit/splits.h"
#include "kernels/62_decode_split_waves/splits.h"
#include "kernels/63_decode_split_cutoff/splits.h"
#include "kernels/64_decode_price_d96/splits.h"
#include "kernels/65_decode_tiles_d64/splits.h"
#include "kernels/66_decode_half_grid/splits.h"
#include "kernels/67_decode_d96_one_wave/splits.h"
#include "kernels/69_decode_rows_two/splits.h"
#include "kernels/73_decode_rows_unsplit/splits.h"

namespace {

// The forward rung numbered `number`, or null, from the list of forward rungs (the list lives in
// the kernels' library: reading it here is what links that library's objects into this test).
const fl::KernelInfo* forward_rung(int number) {
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    if (k->number == number) return k;
  }
  return nullptr;
}

// The rungs that take a K/V cache (KernelInfo::kv_cache: 39 on), lowest first.
std::vector<const fl::KernelInfo*> cache_rungs() {
  std::vector<const fl::KernelInfo*> out;
  for (const fl::KernelInfo* k : fl::forward_kernels()) {
    if (k->kv_cache) out.push_back(k);
  }
  return out;
}

// Runs the block that follows once for each rung with a K/V cache (k), or skips the test.
#define FOR_EACH_CACHE_RUNG(k)                                                         \
  const std::vector<const fl::KernelInfo*> cache_rungs_ = cache_rungs();               \
  if (cache_rungs_.empty()) GTEST_SKIP() << "no rung with a K/V cache (39 on) in this build"; \
  for (const fl::KernelInfo* k : cache_rungs_)

// A cache call's shape with placeholder pointers (what why_unsupported and workspace_bytes
// read): B sequences of capacity nk, pages of `page` keys (0: the contiguous cache, lengths
// alone).
fl::AttnParams placeholder_cache(fl::DType t, int64_t b, int64_t hq, int64_t hkv, int64_t nq,
                                 int64_t nk, int64_t d, int64_t page) {
  fl::ProblemSpec s = fl::test::shape_spec(t, b, hq, hkv, nq, nk, d, false, fl::Layout::BNHD, 1);
  fl::AttnParams p = fl::placeholder_params(s);
  p.seqlens_k = reinterpret_cast<const int32_t*>(0x9000);
  if (page > 0) {
    p.block_table = reinterpret_cast<const int32_t*>(0xa000);
    p.page_size = page;
    p.block_table_stride = (nk + page - 1) / page;
    p.k_stride = p.v_stride = fl::make_strides(fl::Layout::BNHD, hkv, page, d);
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// CPU: the rules, before any launch
// ---------------------------------------------------------------------------------------------

TEST(PagedRules, EveryPageSizeOfTheCommonRuleIsClaimed) {
  // Pages that hold whole tiles (multiples of 64) and pages that do not (16-48, 80, 96, 240:
  // each row's page looked up) alike.
  FOR_EACH_CACHE_RUNG(k) {
    SCOPED_TRACE(k->name());
    for (int64_t page : {16, 32, 48, 80, 96, 240}) {
      const fl::AttnParams p = placeholder_cache(fl::DType::f16, 2, 32, 8, 1, 1000, 128, page);
      ASSERT_EQ(fl::check_common(p), "") << page << ": a multiple of 16, the common rule's";
      EXPECT_EQ(fl::why_unsupported(*k, p), "") << page;
    }
    for (int64_t page : {64, 128, 256, 1024}) {
      EXPECT_EQ(fl::why_unsupported(
                    *k, placeholder_cache(fl::DType::bf16, 2, 32, 8, 1, 1000, 128, page)),
                "")
          << page;
    }
    // The common rule comes first: 8 is no multiple of 16.
    fl::AttnParams p = placeholder_cache(fl::DType::f16, 2, 32, 8, 1, 1000, 128, 64);
    p.page_size = 8;
    p.block_table_stride = 125;
    EXPECT_EQ(fl::why_unsupported(*k, p),
              "kernel " + k->name() +
                  ": page_size must be a multiple of 16 and >= 16 with a block table (got 8)");
  }
}

TEST(PagedRules, ClaimsCacheCallsAndSizesTheirWorkspaceByTheCapacity) {
  // Lengths alone, a table alone, both: claimed, with the workspace of the same call without
  // them (the splits come from the capacity, which is all the host knows). Rung 38's rules hold
  // as they were: a call of more than 64 rows is refused by the rows rule.
  FOR_EACH_CACHE_RUNG(k) {
    SCOPED_TRACE(k->name());
    for (int64_t page : {0, 64, 256}) {
      for (bool lengths : {false, true}) {
        if (page == 0 && !lengths) continue;
        fl::AttnParams p = placeholder_cache(fl::DType::f16, 1, 32, 8, 1, 131072, 128, page);
        if (!lengths) p.seqlens_k = nullptr;
        p.workspace = nullptr;
        p.workspace_bytes = 0;
        fl::AttnParams plain = placeholder_cache(fl::DType::f16, 1, 32, 8, 1, 131072, 128, 0);
        plain.seqlens_k = nullptr;
        EXPECT_EQ(fl::workspace_bytes(*k, p), fl::workspace_bytes(*k, plain)) << page;
        p.workspace = reinterpret_cast<void*>(0x6000);
        p.workspace_bytes = fl::workspace_bytes(*k, p);
        EXPECT_EQ(fl::why_unsupported(*k, p), "") << page << " " << lengths;
        const fl::KernelInfo* best = fl::best_kernel(p);
        ASSERT_NE(best, nullptr);
        EXPECT_EQ(best, fl::test::last_on_this_device(cache_rungs_))
            << "the highest cache rung this device runs";
        p.seqlen_q = 17;  // 17 x 4 = 68 rows
        EXPECT_NE(fl::why_unsupported(*k, p).find("Nq x H_q / H_kv must be <= 64"),
                  std::string::npos);
      }
    }
  }
}

TEST(PagedRules, Rung72HoldsTheTmaMapsToTheirStrides) {
  // Rung 72's blocks of more than 16 rows copy their tiles in one page by TMA, whose maps take
  // strides below 2^40 bytes: a K whose sequences lie 2^40 bytes apart is refused by name and
  // rule there (rung 71 takes it); blocks of 16 rows or fewer, and pages of 16 keys (copied in
  // runs by cp.async), build no map and are taken.
  const fl::KernelInfo* k71 = forward_rung(71);
  const fl::KernelInfo* k72 = forward_rung(72);
  if (k71 == nullptr || k72 == nullptr) GTEST_SKIP() << "rungs 71 and 72 are not both built";
  auto far_apart = [](int64_t nq, int64_t page) {
    fl::AttnParams p = placeholder_cache(fl::DType::f16, 2, 32, 8, nq, 1000, 128, page);
    p.k_stride.batch = int64_t{1} << 39;  // elements: 2^40 bytes
    return p;
  };
  const fl::AttnParams many = far_apart(16, 0);  // 64 rows a block
  ASSERT_EQ(fl::check_common(many), "");
  EXPECT_EQ(fl::why_unsupported(*k71, many), "");
  EXPECT_EQ(fl::why_unsupported(*k72, many),
            "kernel " + k72->name() +
                ": K's strides must be below 2^40 bytes (a TMA rule), for the TMA copies of a "
                "block of more than 16 rows");
  EXPECT_EQ(fl::why_unsupported(*k72, far_apart(4, 0)), "") << "16 rows: key warps, no map";
  EXPECT_EQ(fl::why_unsupported(*k72, far_apart(16, 16)), "") << "pages of 16: no map";
}

// ---------------------------------------------------------------------------------------------
// GPU: a cache, its run and its reference
// ---------------------------------------------------------------------------------------------

// 16-bit bits of x in t (the values are rounded to t already).
uint16_t bits_of(fl::DType t, float x) {
  uint16_t b;
  if (t == fl::DType::f16) {
    const __half h = __float2half_rn(x);
    std::memcpy(&b, &h, 2);
  } else {
    const __nv_bfloat16 h = __float2bfloat16_rn(x);
    std::memcpy(&b, &h, 2);
  }
  return b;
}

constexpr uint16_t kNanBits = 0xFFFF;  // NaN in fp16 and in bf16

struct CacheCase {
  fl::DType t = fl::DType::f16;
  int64_t hq = 32, hkv = 8, nq = 1, d = 128;
  bool causal = false;
  int64_t capacity = 1000;      // seqlen_k
  int64_t page = 0;             // keys a page; 0: the contiguous cache [B, H_kv, Nk, d]
  bool shuffle = true;          // pages in random order over a larger pool (else in order)
  bool with_lengths = true;     // seqlens_k set (else every sequence has `capacity` keys)
  std::vector<int32_t> lengths;  // one a sequence (what the call passes: may be out of range)
  uint64_t seed = 1;

  int64_t batch() const { return static_cast<int64_t>(lengths.size()); }
  // The keys sequence b has: its length clamped to [0, capacity] (the rung's rule).
  int64_t keys(int64_t b) const {
    if (!with_lengths) return capacity;
    return std::min<int64_t>(std::max<int32_t>(lengths[b], 0), capacity);
  }
  std::string describe() const {
    std::string s = std::string(fl::to_string(t)) + " H=" + std::to_string(hq) + "/" +
                    std::to_string(hkv) + " Nq=" + std::to_string(nq) +
                    " d=" + std::to_string(d) + (causal ? " causal" : "") +
                    " cap=" + std::to_string(capacity) +
                    (page > 0 ? " page=" + std::to_string(page) + (shuffle ? " shuffled" : "")
                              : " contiguous") +
                    " lengths=";
    for (int32_t n : lengths) s += std::to_string(n) + ",";
    return with_lengths ? s : s + "(not passed)";
  }
};

// A cache call of the PagedSame comparisons: GQA 32/hkv, causal where Nq > 1.
CacheCase cache_case(fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity,
                     int64_t page, bool shuffle, std::vector<int32_t> lengths, uint64_t seed) {
  CacheCase c;
  c.t = t;
  c.d = d;
  c.hkv = hkv;
  c.nq = nq;
  c.causal = nq > 1;
  c.capacity = capacity;
  c.page = page;
  c.shuffle = shuffle;
  c.lengths = std::move(lengths);
  c.seed = seed;
  return c;
}

// The host data of a case: Q [B, H_q, Nq, d], and each sequence's keys and values
// [H_kv, n_b, d], all rounded to the dtype (fl::test::Rng: the same on every machine).
struct HostData {
  std::vector<float> q;
  std::vector<std::vector<float>> k, v;  // per sequence
};

HostData make_host_data(const CacheCase& c) {
  fl::test::Rng r(c.seed);
  HostData h;
  h.q.resize(c.batch() * c.hq * c.nq * c.d);
  for (float& x : h.q) x = fl::test::round_16(c.t, r.normal());
  for (int64_t b = 0; b < c.batch(); ++b) {
    const int64_t n = c.keys(b);
    h.k.emplace_back(c.hkv * n * c.d);
    h.v.emplace_back(c.hkv * n * c.d);
    for (float& x : h.k.back()) x = fl::test::round_16(c.t, r.normal());
    for (float& x : h.v.back()) x = fl::test::round_16(c.t, r.normal());
  }
  return h;
}

// 16-bit bits as fp32.
float value_of(fl::DType t, uint16_t b) {
  if (t == fl::DType::f16) {
    __half_raw r;
    r.x = b;
    return __half2float(__half(r));
  }
  const uint32_t w = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &w, 4);
  return x;
}

// What a run wrote: O [B, H_q, Nq, d] (its bits, and as fp32), the LSE [B, H_q, Nq].
struct RunResult {
  std::string refused;  // why_unsupported's answer; the rest is empty when it is not ""
  std::vector<uint16_t> o_bits;
  std::vector<float> o, lse;
  int64_t run_diffs = 0;  // O and LSE elements that differ bitwise between the two runs
  int64_t workspace_bytes = 0;
  std::vector<uint8_t> workspace;  // after the first run, where run_case is asked to keep it
  int tile_keys = 0;               // the keys of the kernel's tile for this call (its tile())
};

// Runs kernel k on case c twice, O, the LSE and the workspace poisoned (NaN) before each run.
// The cache: with pages, a pool of B x (pages a sequence + 1) pages (+ 3 spare ones when
// shuffled), pages in random order, the table's rows one entry longer than needed; without, a
// [B, H_kv, Nk, d] tensor. Every element that holds no key of a sequence is NaN: a read of a
// wrong page, of a row past a sequence's length, or of an unmapped page shows in O. Q is BNHD,
// O BHND. A case without lengths and without pages is a plain call (no cache field set).
// keep_workspace: the workspace's bytes after the first run are returned too.
RunResult run_case(const fl::KernelInfo& k, const CacheCase& c, const HostData& h,
                   bool keep_workspace = false) {
  const int64_t B = c.batch(), H = c.hkv, d = c.d;
  fl::AttnParams p = fl::make_params(c.t, B, c.hq, c.nq, c.capacity, d, c.causal,
                                     fl::Layout::BNHD);
  p.heads_kv = H;
  p.o_stride = fl::make_strides(fl::Layout::BHND, c.hq, c.nq, d);
  int64_t units = B, unit_rows = c.capacity, stride = 0;
  std::vector<int32_t> table;
  if (c.page > 0) {
    stride = (c.capacity + c.page - 1) / c.page + 1;
    units = B * stride + (c.shuffle ? 3 : 0);
    unit_rows = c.page;
    std::vector<int32_t> order(units);
    std::iota(order.begin(), order.end(), 0);
    if (c.shuffle) {
      fl::test::Rng r(c.seed * 7 + 3);
      for (int64_t i = units - 1; i > 0; --i) std::swap(order[i], order[r.integer(0, i)]);
    }
    table.assign(order.begin(), order.begin() + B * stride);
    p.k_stride = p.v_stride = fl::make_strides(fl::Layout::BNHD, H, c.page, d);  // by page
  } else {
    p.k_stride = p.v_stride = fl::make_strides(fl::Layout::BHND, H, c.capacity, d);
  }
  const fl::Strides& ks = p.k_stride;
  std::vector<uint16_t> kb(units * unit_rows * H * d, kNanBits), vb = kb;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = c.keys(b);
    for (int64_t hh = 0; hh < H; ++hh) {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t unit = c.page > 0 ? table[b * stride + j / c.page] : b;
        const int64_t row = c.page > 0 ? j % c.page : j;
        const int64_t at = unit * ks.batch + hh * ks.head + row * ks.row;
        for (int64_t x = 0; x < d; ++x) {
          kb[at + x] = bits_of(c.t, h.k[b][(hh * n + j) * d + x]);
          vb[at + x] = bits_of(c.t, h.v[b][(hh * n + j) * d + x]);
        }
      }
    }
  }
  std::vector<uint16_t> qb(B * c.hq * c.nq * d);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t hh = 0; hh < c.hq; ++hh) {
      for (int64_t i = 0; i < c.nq; ++i) {
        for (int64_t x = 0; x < d; ++x) {
          qb[b * p.q_stride.batch + hh * p.q_stride.head + i * p.q_stride.row + x] =
              bits_of(c.t, h.q[((b * c.hq + hh) * c.nq + i) * d + x]);
        }
      }
    }
  }
  const int64_t rows = B * c.hq * c.nq;
  fl::DeviceBuffer q(qb.size() * 2), kd(kb.size() * 2), vd(vb.size() * 2), o(rows * d * 2),
      lse(rows * 4), lengths(B * 4), tab(std::max<size_t>(table.size(), 1) * 4), ws;
  FL_CUDA_CHECK(cudaMemcpy(q.get(), qb.data(), qb.size() * 2, cudaMemcpyHostToDevice));
  FL_CUDA_CHECK(cudaMemcpy(kd.get(), kb.data(), kb.size() * 2, cudaMemcpyHostToDevice));
  FL_CUDA_CHECK(cudaMemcpy(vd.get(), vb.data(), vb.size() * 2, cudaMemcpyHostToDevice));
  FL_CUDA_CHECK(cudaMemcpy(lengths.get(), c.lengths.data(), B * 4, cudaMemcpyHostToDevice));
  if (!table.empty()) {
    FL_CUDA_CHECK(cudaMemcpy(tab.get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  }
  p.q = q.get();
  p.k = kd.get();
  p.v = vd.get();
  p.o = o.get();
  p.lse = lse.as<float>();
  if (c.with_lengths) p.seqlens_k = lengths.as<int32_t>();
  if (c.page > 0) {
    p.block_table = tab.as<int32_t>();
    p.block_table_stride = stride;
    p.page_size = c.page;
  }
  RunResult r;
  if (k.tile != nullptr) r.tile_keys = k.tile(p).bc;
  r.workspace_bytes = fl::workspace_bytes(k, p);
  if (r.workspace_bytes > 0) {
    ws.resize(r.workspace_bytes);
    p.workspace = ws.get();
    p.workspace_bytes = r.workspace_bytes;
  }
  r.refused = fl::why_unsupported(k, p);
  if (!r.refused.empty()) return r;
  std::vector<uint16_t> o_bits(rows * d);
  std::vector<float> lse_host(rows);
  for (int run = 0; run < 2; ++run) {
    fl::fill_bits16(o.get(), 0xFFFF, rows * d);
    FL_CUDA_CHECK(cudaMemset(lse.get(), 0xFF, rows * 4));  // NaN
    if (p.workspace_bytes > 0) fl::fill_bits16(p.workspace, 0xFFFF, p.workspace_bytes / 2);
    fl::run_kernel(k, p);
    FL_CUDA_CHECK(cudaDeviceSynchronize());
    FL_CUDA_CHECK(cudaMemcpy(o_bits.data(), o.get(), rows * d * 2, cudaMemcpyDeviceToHost));
    FL_CUDA_CHECK(cudaMemcpy(lse_host.data(), lse.get(), rows * 4, cudaMemcpyDeviceToHost));
    if (run == 0) {
      r.o_bits = o_bits;
      r.lse = lse_host;
      if (keep_workspace && p.workspace_bytes > 0) {
        r.workspace.resize(p.workspace_bytes);
        FL_CUDA_CHECK(cudaMemcpy(r.workspace.data(), p.workspace, p.workspace_bytes,
                                 cudaMemcpyDeviceToHost));
      }
      continue;
    }
    for (int64_t i = 0; i < rows * d; ++i) r.run_diffs += o_bits[i] != r.o_bits[i];
    for (int64_t i = 0; i < rows; ++i) {
      r.run_diffs += std::memcmp(&lse_host[i], &r.lse[i], 4) != 0;
    }
  }
  r.o.resize(rows * d);
  for (int64_t i = 0; i < rows * d; ++i) r.o[i] = value_of(c.t, r.o_bits[i]);
  return r;
}

// The reference of one sequence: its keys gathered into a problem of its own (B = 1, Nk = its
// length, causal bottom-right by that length), the harness's fp32 reference and the tolerance
// of its pass rule for k. Empty for a sequence of no key.
struct SeqReference {
  std::vector<float> o, lse;  // [H_q, Nq, d], [H_q, Nq]
  double tolerance = 0;
};

std::vector<SeqReference> references(const fl::KernelInfo& k, const CacheCase& c,
                                     const HostData& h, fl::CublasHandle& cublas) {
  std::vector<SeqReference> out(c.batch());
  const int64_t per_seq = c.hq * c.nq * c.d;
  for (int64_t b = 0; b < c.batch(); ++b) {
    const int64_t n = c.keys(b);
    if (n == 0) continue;
    fl::ProblemSpec s = fl::test::shape_spec(c.t, 1, c.hq, c.hkv, c.nq, n, c.d, c.causal,
                                             fl::Layout::BHND, c.seed + b);
    fl::Problem problem(s);
    problem.set_inputs(h.q.data() + b * per_seq, h.k[b].data(), h.v[b].data());
    const fl::Reference ref(problem, cublas);
    SeqReference& r = out[b];
    r.o.resize(per_seq);
    r.lse.resize(c.hq * c.nq);
    FL_CUDA_CHECK(cudaMemcpy(r.o.data(), ref.out32(), per_seq * 4, cudaMemcpyDeviceToHost));
    FL_CUDA_CHECK(cudaMemcpy(r.lse.data(), ref.lse32(), r.lse.size() * 4,
                             cudaMemcpyDeviceToHost));
    r.tolerance = fl::pass_tolerance(ref.lowp_err_for(k));
  }
  return out;
}

// Holds a run to the references, sequence by sequence: O finite and within the pass rule, the
// LSE within verify's tolerance (1e-3 relative to the largest |LSE|; -inf exactly where the
// reference's is), an empty sequence's rows O = 0 and LSE = -inf exactly, two runs bitwise
// equal, something nonzero. "" when it holds, else the first failures.
std::string check_run(const CacheCase& c, const RunResult& r,
                      const std::vector<SeqReference>& refs) {
  if (!r.refused.empty()) return "refused: " + r.refused;
  std::string why;
  int failures = 0;
  auto fail = [&](const std::string& what) {
    if (++failures <= 4) why += what + "; ";
  };
  const int64_t rows_b = c.hq * c.nq, d = c.d;
  int64_t nonzero = 0;
  for (int64_t b = 0; b < c.batch(); ++b) {
    const SeqReference& ref = refs[b];
    double lse_max = 1.0;
    for (float x : ref.lse) {
      if (std::isfinite(x)) lse_max = std::max(lse_max, static_cast<double>(std::abs(x)));
    }
    for (int64_t row = 0; row < rows_b; ++row) {
      const std::string at = "b=" + std::to_string(b) + " h=" + std::to_string(row / c.nq) +
                             " s=" + std::to_string(row % c.nq);
      const float lse = r.lse[b * rows_b + row];
      if (c.keys(b) == 0 || std::isinf(ref.lse[row])) {
        if (!(std::isinf(lse) && lse < 0)) fail("LSE " + at + " = " + std::to_string(lse) +
                                                ", want -inf (no key)");
      } else if (!(std::abs(lse - ref.lse[row]) <= 1e-3 * lse_max)) {
        fail("LSE " + at + " = " + std::to_string(lse) + ", reference " +
             std::to_string(ref.lse[row]));
      }
      for (int64_t x = 0; x < d; ++x) {
        const float o = r.o[(b * rows_b + row) * d + x];
        nonzero += o != 0.f;
        if (c.keys(b) == 0) {
          if (o != 0.f) fail("O " + at + " c=" + std::to_string(x) + " = " +
                             std::to_string(o) + ", want 0 (an empty sequence)");
        } else if (!(std::abs(o - ref.o[row * d + x]) <= ref.tolerance)) {
          fail("O " + at + " c=" + std::to_string(x) + " = " + std::to_string(o) +
               ", reference " + std::to_string(ref.o[row * d + x]) + ", tolerance " +
               std::to_string(ref.tolerance));
        }
      }
    }
  }
  if (r.run_diffs > 0) fail(std::to_string(r.run_diffs) + " elements differ between two runs");
  if (nonzero == 0) fail("output all zero");
  if (failures > 4) why += std::to_string(failures - 4) + " more";
  return why;
}

// Two runs of the same case data alike bit for bit (O and the LSE).
int64_t bitwise_differences(const RunResult& a, const RunResult& b) {
  if (a.o_bits.size() != b.o_bits.size() || a.lse.size() != b.lse.size()) return -1;
  int64_t n = 0;
  for (size_t i = 0; i < a.o_bits.size(); ++i) n += a.o_bits[i] != b.o_bits[i];
  for (size_t i = 0; i < a.lse.size(); ++i) n += std::memcmp(&a.lse[i], &b.lse[i], 4) != 0;
  return n;
}

int sm_count() {
  int device = 0, sms = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

int compute_major() {
  int device = 0, major = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major;
}

// The blocks of `block_bytes` of shared memory an SM of this device holds by its shared memory
// (each block also takes the reserved bytes), at most `by_registers`. Rung 69's 64-row blocks at
// d = 128 ask 112 KiB and 221 registers a thread (28,288 a block of 65,536: two an SM): two on an
// H100 or H200 (228 KiB an SM), one on an A100 (164 KiB).
int blocks_per_sm(int block_bytes, int by_registers) {
  int device = 0, smem = 0, reserved = 0;
  FL_CUDA_CHECK(cudaGetDevice(&device));
  FL_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  FL_CUDA_CHECK(
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  return std::min(by_registers, smem / (block_bytes + reserved));
}

// Whether rung k merges a call's `splits` splits in a cluster on this device, with no workspace:
// rung 58's rule (two splits), rung 59's (two to eight), which rung 60 keeps, on compute
// capability 9.0; rung 61's adds that the call's `clusters` (B x H_kv) all run at once, one block
// an SM.
bool merges_in_cluster(const fl::KernelInfo& k, int splits, int64_t clusters) {
  const bool has = compute_major() >= 9;
  if (k.number >= 61) {  // rung 62 keeps rung 61's clusters
    const int fit = has && splits <= 8 ? fl::clusters_one_block_an_sm(splits) : 0;
    return fl::k61_decode_cluster_fit::combines_in_cluster(splits, clusters, fit);
  }
  if (k.number == 60) return fl::k60_decode_cluster_push::combines_in_cluster(splits, has);
  if (k.number >= 59) return fl::k59_decode_wide_cluster::combines_in_cluster(splits, has);
  return k.number == 58 && fl::k58_decode_cluster_combine::combines_in_cluster(splits, has);
}

// The smem rule of a smaller GPU (d = 128 needs 144 KiB a block): skip with it.
#define SKIP_ON_SHARED_MEMORY(r) \
  if ((r).refused.find("shared memory") != std::string::npos) GTEST_SKIP() << (r).refused

// ---------------------------------------------------------------------------------------------
// GPU: the cache grid
// ---------------------------------------------------------------------------------------------

class Paged : public ::testing::TestWithParam<std::tuple<fl::DType, int64_t>> {};

TEST_P(Paged, PassesTheCacheGrid) {
  // Each shape's data is drawn once and its references made once for each kind of tolerance (a
  // rung's depends only on whether it rounds S to the input type: references), the rungs looping
  // inside the shapes. For each rung the cache is laid out five ways (pages of 64, 16, 48 and 256
  // keys, shuffled, and the contiguous cache with lengths alone), each held to the references,
  // and all runs of the same tile must agree bit for bit (the same tiles reach the same math).
  // Rung 65's tile (and rung 66's) at d = 64 depends on the pages (128 keys where a tile lies in
  // one page, with rows that fit one warp): the contiguous cache and pages of 256 then agree with
  // each other, and pages of 16, 48 and 64 with each other.
  FL_REQUIRE_GPU();
  const std::vector<const fl::KernelInfo*> rungs = cache_rungs();
  if (rungs.empty()) GTEST_SKIP() << "no rung with a K/V cache (39 on) in this build";
  const auto [t, d] = GetParam();
  fl::CublasHandle cublas;
  const int64_t heads[][2] = {{32, 8}, {16, 1}, {8, 8}};
  std::vector<int> ran(rungs.size(), 0);
  for (const auto& hh : heads) {
    for (int64_t nq : {1, 2, 16}) {
      if (nq * (hh[0] / hh[1]) > 64) continue;  // a prefill: the rows rule refuses it
      for (bool causal : {false, true}) {
        for (int64_t batch : {1, 5}) {
          CacheCase c;
          c.t = t;
          c.hq = hh[0];
          c.hkv = hh[1];
          c.nq = nq;
          c.d = d;
          c.causal = causal;
          c.capacity = 1000;
          // 0 and 1 key, 300 (no multiple of 64 or of a page), 777, the capacity.
          c.lengths = batch == 1 ? std::vector<int32_t>{523}
                                 : std::vector<int32_t>{1000, 0, 1, 300, 777};
          c.seed = 100 * nq + 10 * hh[0] + (causal ? 1 : 0) + batch + d;
          const HostData h = make_host_data(c);
          std::vector<SeqReference> refs_of[2];  // [rounds S to the input type]
          for (size_t i = 0; i < rungs.size(); ++i) {
            const fl::KernelInfo* k = rungs[i];
            SCOPED_TRACE(k->name());
            std::vector<SeqReference>& refs = refs_of[k->scores_in_input_dtype ? 1 : 0];
            if (refs.empty()) refs = references(*k, c, h, cublas);
            std::vector<RunResult> runs;
            std::vector<int64_t> pages;
            for (int64_t page : {64, 16, 48, 256, 0}) {
              c.page = page;
              SCOPED_TRACE(c.describe());
              runs.push_back(run_case(*k, c, h));
              pages.push_back(page);
              SKIP_ON_SHARED_MEMORY(runs.back());
              EXPECT_EQ(check_run(c, runs.back(), refs), "");
              // The first earlier run of the same tile.
              size_t same = 0;
              while (runs[same].tile_keys != runs.back().tile_keys) ++same;
              EXPECT_EQ(bitwise_differences(runs.back(), runs[same]), 0)
                  << "page " << page << " against page " << pages[same] << " ("
                  << runs.back().tile_keys << "-key tiles)";
              ++ran[i];
            }
            // Every rung's tile is the same through pages of 16, 48 and 64; rung 65's (and
            // rung 66's, its copy) differs, for the contiguous cache and pages of 256 at d = 64.
            const bool wide = k->number >= 65 && d == 64 && nq * (hh[0] / hh[1]) <= 16;
            EXPECT_EQ(runs[0].tile_keys, runs[1].tile_keys);
            EXPECT_EQ(runs[0].tile_keys, runs[2].tile_keys);
            EXPECT_EQ(runs[3].tile_keys != runs[0].tile_keys, wide);
            EXPECT_EQ(runs[4].tile_keys, runs[3].tile_keys);
          }
        }
      }
    }
  }
  for (size_t i = 0; i < rungs.size(); ++i) {
    EXPECT_EQ(ran[i], (3 + 2 + 3) * 2 * 2 * 5) << rungs[i]->name();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cache, Paged,
    ::testing::Combine(::testing::Values(fl::DType::f16, fl::DType::bf16),
                       ::testing::Values(int64_t{64}, int64_t{96}, int64_t{128},
                                         int64_t{192})),
    [](const ::testing::TestParamInfo<std::tuple<fl::DType, int64_t>>& info) {
      return std::string(fl::to_string(std::get<0>(info.param))) + "_d" +
             std::to_string(std::get<1>(info.param));
    });

TEST(PagedLong, ALongCacheInManySplits) {
  // A longer cache, whose (KV head, sequence) blocks rung 39 splits on a GPU of 20 SMs or more:
  // capacity 32768 (512 key tiles), B = 3 with lengths 20001, 0 and the capacity, so that the
  // splits of the shorter sequences past their length see no key; pages of 256, shuffled; GQA
  // 32/8 with one query and four (causal).
  // Each call's data (108 million values) is drawn once for every rung, and its references made
  // once for each kind of tolerance (as in the cache grid).
  FL_REQUIRE_GPU();
  fl::CublasHandle cublas;
  for (int64_t nq : {1, 4}) {
    CacheCase c;
    c.t = fl::DType::bf16;
    c.nq = nq;
    c.causal = nq > 1;
    c.capacity = 32768;
    c.page = 256;
    c.lengths = {20001, 0, 32768};
    c.seed = 7 + nq;
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    std::vector<SeqReference> refs_of[2];  // [rounds S to the input type]
    FOR_EACH_CACHE_RUNG(k) {
      SCOPED_TRACE(k->name());
      std::vector<SeqReference>& refs = refs_of[k->scores_in_input_dtype ? 1 : 0];
      if (refs.empty()) refs = references(*k, c, h, cublas);
      const RunResult r = run_case(*k, c, h);
      SKIP_ON_SHARED_MEMORY(r);
      if (sm_count() >= 20) {
        // The keys split. From rung 58 on, some calls' splits merge in a cluster on a GPU that
        // has clusters, with no workspace: the rule (24 blocks over 512 key tiles at d = 128,
        // one slot an SM, 4 or 16 rows) and merges_in_cluster say whether this call's do.
        namespace s58 = fl::k58_decode_cluster_combine;
        const int sms = sm_count();
        const int splits = s58::price_splits(s58::choose_splits(24, sms, 1, 512), 24, sms, 512,
                                             2 * 64 * 128 * 2, nq * 4);
        if (merges_in_cluster(*k, splits, 24)) {
          EXPECT_EQ(r.workspace_bytes, 0) << splits << " splits merge in a cluster";
        } else {
          EXPECT_GT(r.workspace_bytes, 0) << "the keys split";
        }
      }
      EXPECT_EQ(check_run(c, r, refs), "");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// GPU: what the page lookup must not change
// ---------------------------------------------------------------------------------------------

TEST(PagedSame, APlainCallIsRung38BitForBit) {
  // No lengths, no table: rung 39 reads the cache as rung 38 does, in as many splits (the same
  // workspace), and writes the same bits; shapes of one split and of several.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k = forward_rung(39);
  if (k == nullptr) GTEST_SKIP() << "rung 39 is not in this build (FL_KERNELS)";
  const fl::KernelInfo* k38 = forward_rung(38);
  if (k38 == nullptr) GTEST_SKIP() << "rung 38 is not in this build (FL_KERNELS)";
  struct Shape {
    fl::DType t;
    int64_t b, hq, hkv, nq, nk, d;
    bool causal;
  };
  const Shape shapes[] = {{fl::DType::f16, 1, 32, 8, 1, 1000, 128, false},
                          {fl::DType::bf16, 3, 32, 8, 4, 4096, 128, true},
                          {fl::DType::f16, 2, 16, 1, 2, 777, 64, false},
                          {fl::DType::bf16, 1, 8, 8, 16, 33000, 64, true},
                          {fl::DType::f16, 64, 32, 8, 1, 200, 128, false}};
  for (const Shape& sh : shapes) {
    CacheCase c;
    c.t = sh.t;
    c.hq = sh.hq;
    c.hkv = sh.hkv;
    c.nq = sh.nq;
    c.d = sh.d;
    c.causal = sh.causal;
    c.capacity = sh.nk;
    c.with_lengths = false;
    c.lengths.assign(sh.b, static_cast<int32_t>(sh.nk));
    c.seed = sh.nk + sh.b;
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k38, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(b.workspace_bytes, a.workspace_bytes) << "the same splits";
    EXPECT_EQ(bitwise_differences(a, b), 0);
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
  }
}

// The split grid of the bit-for-bit tests: d = 64, 96, 128, 192 (bf16 where d is not a multiple
// of 64) x B = 1, 3, 16 x the contiguous cache, pages of 64 and of 16, cache lengths passed but
// for the plain call at B = 16. B = 3 is ragged ({1024, 1, 700}: a row with one key, whose
// splits but the first are empty); the others sit at the capacity, 1024 keys. long_single: B = 1
// is MQA over 16384 keys instead (one KV head; a long cache in more than 32 splits, so that the
// LSEs of a row fill more than one register of the lanes). many_rows: Nq = 2 at B = 1 (64 rows a
// block) and 8 at B = 3 and 16 (32 rows), else one query row (32 and 4 rows). B = 16 fills an
// H100's SMs at d = 128 and 192. Each case's seed is `seed` + d + B + the page size.
std::vector<CacheCase> split_grid(int seed, bool long_single, bool many_rows = false) {
  std::vector<CacheCase> out;
  for (int64_t d : {64, 96, 128, 192}) {
    for (int64_t batch : {1, 3, 16}) {
      for (int64_t page : {0, 64, 16}) {
        CacheCase c;
        c.t = d % 64 == 0 ? fl::DType::f16 : fl::DType::bf16;
        c.d = d;
        c.capacity = long_single && batch == 1 ? 16384 : 1024;
        if (long_single && batch == 1) c.hkv = 1;
        if (many_rows) c.nq = batch == 1 ? 2 : 8;
        c.page = page;
        c.with_lengths = page != 0 || batch != 16;
        c.lengths.assign(batch, static_cast<int32_t>(c.capacity));
        if (batch == 3) c.lengths = {1024, 1, 700};
        c.seed = seed + d + batch + page;
        out.push_back(c);
      }
    }
  }
  return out;
}

TEST(PagedSame, Rung40IsRung39BitForBitWhereItSplitsAlike) {
  // Rung 40 changes when a tile is copied (its ring) and what the split rule is told, not what
  // is computed: wherever it takes as many splits as rung 39 (the same workspace) it writes the
  // same bits. At d <= 96 (tiles under 32 KiB) it is rung 39 altogether: the same splits always.
  // Over split_grid with 1024 keys at B = 1: B = 1 and 3 split, B = 16 (128 blocks) fills an
  // H100's SMs at d = 128.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k39 = forward_rung(39);
  const fl::KernelInfo* k40 = forward_rung(40);
  if (k39 == nullptr || k40 == nullptr) GTEST_SKIP() << "rungs 39 and 40 are not both built";
  int same_splits = 0;
  for (const CacheCase& c : split_grid(0, /*long_single=*/false)) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k39, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k40, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    if (c.d <= 96) EXPECT_EQ(b.workspace_bytes, a.workspace_bytes) << "rung 39's splits";
    if (b.workspace_bytes == a.workspace_bytes) {
      EXPECT_EQ(bitwise_differences(a, b), 0);
      EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
      ++same_splits;
    }
  }
  EXPECT_GE(same_splits, 2 * 3 * 3) << "every call at d <= 96";
}

// Rung `b` writes rung `a`'s bits wherever both run (the same splits, the same sums) over
// split_grid with the long single sequence (B = 16 makes one split at d = 128 and 192: no
// combine; two or three at d = 64 and 96). run_case fills the workspace with NaN before each of
// its two runs: a combine that read a partial before its split wrote it would write NaN.
void expect_same_bits(int a_number, int b_number, int seed, bool many_rows = false) {
  const fl::KernelInfo* ka = forward_rung(a_number);
  const fl::KernelInfo* kb = forward_rung(b_number);
  if (ka == nullptr || kb == nullptr) {
    GTEST_SKIP() << "rungs " << a_number << " and " << b_number << " are not both built";
  }
  int split_calls = 0;
  for (const CacheCase& c : split_grid(seed, /*long_single=*/true, many_rows)) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*ka, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*kb, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(b.workspace_bytes, a.workspace_bytes) << "the same splits";
    EXPECT_EQ(bitwise_differences(a, b), 0);
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    if (a.workspace_bytes > 0) ++split_calls;
  }
  EXPECT_GE(split_calls, 2 * 4 * 3) << "B = 1 and 3 split at every d";
}

TEST(PagedSame, Rung46IsRung40BitForBit) {
  // Rung 46 changes how the combine reads the partials (all the LSEs at once, the partials' loads
  // eight splits at a time), not the splits or the sum: the same weights, added in the same
  // order, write the same bits.
  FL_REQUIRE_GPU();
  expect_same_bits(40, 46, 46);
}

TEST(PagedSame, Rung47IsRung46BitForBit) {
  // Rung 47 launches rung 46's combine as the split kernel's programmatic dependent: its blocks
  // start beside the split kernel and wait for it (on compute capability 9.0). The same kernels
  // write the same bits, and a combine that did not wait would read the NaN run_case leaves in the
  // workspace.
  FL_REQUIRE_GPU();
  expect_same_bits(46, 47, 47);
}

TEST(PagedSame, Rung48IsRung47BitForBitAboveSixteenRows) {
  // Rung 48 changes the split kernel only where a block's rows fit in one warp (Nq x g <= 16);
  // with more rows it runs rung 47's split kernel (the template's other instance), so the bits
  // are rung 47's. Calls of 16 rows or fewer are held to the reference by the grids.
  FL_REQUIRE_GPU();
  expect_same_bits(47, 48, 48, /*many_rows=*/true);
}

TEST(PagedSame, Rung49IsRung48BitForBit) {
  // Rung 49's combine issues the loads of 16 partials together where rung 48's issued 8; it adds
  // the same partials with the same weights in the same order, so the bits are rung 48's, with
  // one query row (the key warps) and with more. On 132 SMs the single-sequence calls here make
  // 109 splits (seven batches of 16, the last one partly past the last split), the three-
  // sequence calls 5-14 (by head dim: both batches) and the sixteen-sequence calls 1-3.
  FL_REQUIRE_GPU();
  expect_same_bits(48, 49, 49);
  expect_same_bits(48, 49, 149, /*many_rows=*/true);
}

TEST(PagedSame, Rung50IsRung49BitForBitWhereItSplitsAlike) {
  // Rung 50 changes the split count of short calls with big tiles (d >= 128), not the kernels:
  // where its workspace is rung 49's (the same splits) the bits are rung 49's, which is every
  // call at d <= 96; over split_grid (the long single sequence) some calls at d >= 128 split
  // otherwise (held to the reference by the grids), which shows the rule at work on the device.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k49 = forward_rung(49);
  const fl::KernelInfo* k50 = forward_rung(50);
  if (k49 == nullptr || k50 == nullptr) GTEST_SKIP() << "rungs 49 and 50 are not both built";
  int alike = 0, otherwise = 0;
  for (const CacheCase& c : split_grid(50, /*long_single=*/true)) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k49, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k50, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    if (c.d <= 96) EXPECT_EQ(b.workspace_bytes, a.workspace_bytes) << "rung 49's splits";
    if (b.workspace_bytes != a.workspace_bytes) {
      EXPECT_LT(b.workspace_bytes, a.workspace_bytes) << "fewer splits, never more";
      ++otherwise;
      continue;
    }
    EXPECT_EQ(bitwise_differences(a, b), 0);
    ++alike;
  }
  EXPECT_GE(alike, 2 * 3 * 3) << "every call at d <= 96";
  if (sm_count() >= 128) EXPECT_GE(otherwise, 3) << "short calls at d >= 128 split less";
}

TEST(PagedSame, Rung51IsRung50BitForBit) {
  // Rung 51's combine loads a row's first batch of partials with its LSEs, before the
  // reductions; it adds the same partials with the same weights in the same order, so the bits
  // are rung 50's, with one query row (the key warps) and with more. The workspace is filled
  // with NaN before each run: a partial loaded before its split wrote it would show.
  FL_REQUIRE_GPU();
  expect_same_bits(50, 51, 51);
  expect_same_bits(50, 51, 151, /*many_rows=*/true);
}

TEST(PagedSame, Rung52IsRung51BitForBit) {
  // Rung 52 fills the packed Q tile with the same rows, found by stepping (s, i) rather than
  // dividing each row by g; the tile, and so every bit, is rung 51's. Besides the common grid
  // (g = 4 and 32), group sizes 1, 3, 5, 6, 7 and 12, most of which do not divide a thread's
  // step of rows (16, 10, 8 or 5 rows at d = 64, 96, 128, 192), with query rows from 1 to 16:
  // steps with a carry and without, at every head dim.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k51 = forward_rung(51);
  const fl::KernelInfo* k52 = forward_rung(52);
  if (k51 == nullptr || k52 == nullptr) GTEST_SKIP() << "rungs 51 and 52 are not both built";
  expect_same_bits(51, 52, 52);
  expect_same_bits(51, 52, 152, /*many_rows=*/true);
  const int64_t groups[][3] = {{1, 1, 16}, {3, 1, 16}, {10, 2, 12}, {12, 2, 10},
                               {7, 1, 9},  {24, 2, 5}, {3, 3, 1}};  // H_q, H_kv, Nq
  for (int64_t d : {64, 96, 128, 192}) {
    for (const auto& gq : groups) {
      CacheCase c;
      c.t = d == 96 ? fl::DType::bf16 : fl::DType::f16;
      c.d = d;
      c.hq = gq[0];
      c.hkv = gq[1];
      c.nq = gq[2];
      c.causal = true;
      c.capacity = 700;
      c.lengths = {700, 333};
      c.seed = 52 + d + gq[0];
      SCOPED_TRACE(c.describe());
      const HostData h = make_host_data(c);
      const RunResult a = run_case(*k51, c, h);
      SKIP_ON_SHARED_MEMORY(a);
      const RunResult b = run_case(*k52, c, h);
      ASSERT_EQ(a.refused, "");
      ASSERT_EQ(b.refused, "");
      EXPECT_EQ(bitwise_differences(a, b), 0);
      EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    }
  }
}

// Rung `b` writes rung `a`'s bits on paged calls at every head dim (fp16; bf16 at d = 96), GQA
// 8/2, causal, over pages of each size in `pages`, a shuffled table, `capacity` keys and the
// sequences' `lengths`.
void expect_same_bits_on_pages(int a_number, int b_number, int seed,
                               std::initializer_list<int64_t> pages, int64_t capacity,
                               std::vector<int32_t> lengths) {
  const fl::KernelInfo* ka = forward_rung(a_number);
  const fl::KernelInfo* kb = forward_rung(b_number);
  if (ka == nullptr || kb == nullptr) {
    GTEST_SKIP() << "rungs " << a_number << " and " << b_number << " are not both built";
  }
  for (int64_t d : {64, 96, 128, 192}) {
    for (int64_t page : pages) {
      CacheCase c;
      c.t = d == 96 ? fl::DType::bf16 : fl::DType::f16;
      c.d = d;
      c.hq = 8;
      c.hkv = 2;
      c.causal = true;
      c.capacity = capacity;
      c.page = page;
      c.lengths = lengths;
      c.seed = seed + d + page;
      SCOPED_TRACE(c.describe());
      const HostData h = make_host_data(c);
      const RunResult a = run_case(*ka, c, h);
      SKIP_ON_SHARED_MEMORY(a);
      const RunResult b = run_case(*kb, c, h);
      ASSERT_EQ(a.refused, "");
      ASSERT_EQ(b.refused, "");
      EXPECT_EQ(bitwise_differences(a, b), 0);
      EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    }
  }
}

TEST(PagedSame, Rung53IsRung52BitForBit) {
  // Rung 53 finds the rows of a tile that spans pages through four runs of 16 keys, a table
  // read a run, where rung 52 read the table and divided by the page size a row; the same rows
  // land in the same places, so every bit is rung 52's. Besides the common grid (pages of 64 and
  // 16), pages of 32, 48, 80, 112 and 208 keys (over 1100 keys a tile starts at every multiple
  // of 16 inside a page of 48, 80, 112 or 208), with lengths that end inside a run, on a run's
  // edge, at one key and at the capacity, causal and with four rows a block, at every head dim.
  FL_REQUIRE_GPU();
  expect_same_bits(52, 53, 53);
  expect_same_bits(52, 53, 153, /*many_rows=*/true);
  expect_same_bits_on_pages(52, 53, 53, {32, 48, 80, 112, 208}, 1100, {1100, 1, 333, 640, 1057});
}

TEST(PagedSame, Rung56IsRung53BitForBit) {
  // Rung 56 finds each tile's page from a cursor that it moves from tile to tile, where rung 53
  // divided the tile's first key by the page size: the same pages and rows, so rung 53's bits.
  // Besides the common grid (pages of 64: a new page every tile; 16: runs), whole-tile pages of
  // 128, 192 and 256 keys, where the cursor stays in a page for two to four tiles, and runs over
  // pages of 32 and 48. With 4100 keys and ten blocks' worth of (KV head, sequence) the keys are
  // split many ways, so most splits start inside a page: the one division a block must find
  // the right row.
  FL_REQUIRE_GPU();
  expect_same_bits(53, 56, 56);
  expect_same_bits(53, 56, 156, /*many_rows=*/true);
  expect_same_bits_on_pages(53, 56, 56, {32, 48, 128, 192, 256}, 4100,
                            {4100, 1, 333, 2500, 4097});
}

TEST(PagedSame, Rung57IsRung56BitForBitWhereTheLongestFillsTheCapacity) {
  // Rung 57 cuts the splits on the batch's longest sequence where rung 56 cut them on the
  // capacity: where the longest length is the capacity (or no lengths are passed) the cuts are
  // one and rung 57 writes rung 56's bits: split_grid's calls of one, three (1024, 1 and 700
  // keys in 1024) and sixteen sequences, one query row and more, contiguous and through pages
  // of 64 and 16.
  FL_REQUIRE_GPU();
  expect_same_bits(56, 57, 57);
  expect_same_bits(56, 57, 157, /*many_rows=*/true);
}

// The count of splits whose partials fill `bytes` of workspace for case c (rung 57's layout,
// which every split rung keeps: splits.h), or 0 for none.
int splits_of(int64_t bytes, const CacheCase& c) {
  for (int s = 1; s <= 128; ++s) {
    if (fl::k57_decode_split_lengths::split_workspace_bytes(s, c.batch(), c.hq, c.nq, c.d) ==
        bytes) {
      return s;
    }
  }
  return 0;
}

TEST(PagedSame, Rung57GivesEverySplitAShareOfAShortBatch) {
  // Sequences of 2000 keys (32 tiles), and of 2000, 1 and 700, in a cache of 16384 (256 tiles),
  // GQA 32/8, d = 128, one query row, contiguous and through shuffled pages of 64 and 16: the
  // count of splits is the capacity's (15 and 5 on 132 SMs). Rung 57 cuts the 32 tiles of the
  // longest sequence, 2-7 a split, so each split's LSE in the workspace is finite for every
  // row of that sequence; rung 56 (where built) cut the capacity's, 17-52 tiles a split, and
  // left the later splits empty (LSE = -inf), which this test tells.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k57 = forward_rung(57);
  if (k57 == nullptr) GTEST_SKIP() << "rung 57 is not built";
  const fl::KernelInfo* k56 = forward_rung(56);
  for (const std::vector<int32_t>& lengths : {std::vector<int32_t>{2000}, {2000, 1, 700}}) {
    for (int64_t page : {0, 64, 16}) {
      CacheCase c;
      c.capacity = 16384;
      c.page = page;
      c.lengths = lengths;
      c.seed = 57 + page + lengths.size();
      SCOPED_TRACE(c.describe());
      const HostData h = make_host_data(c);
      for (const fl::KernelInfo* k : {k57, k56}) {
        if (k == nullptr) continue;
        SCOPED_TRACE(k->name());
        const RunResult r = run_case(*k, c, h, /*keep_workspace=*/true);
        SKIP_ON_SHARED_MEMORY(r);
        ASSERT_EQ(r.refused, "");
        EXPECT_EQ(r.run_diffs, 0);
        const int splits = splits_of(r.workspace_bytes, c);
        ASSERT_GT(splits, 0) << "a workspace of " << r.workspace_bytes << " bytes";
        if (splits < 3) GTEST_SKIP() << splits << " split(s) on this device: nothing to cut";
        // The partials' LSEs, [splits][B][H_q][Nq]: sequence 0's rows first in each split.
        const int64_t rows = c.batch() * c.hq * c.nq, seq_rows = c.hq * c.nq;
        const float* lse = reinterpret_cast<const float*>(
            r.workspace.data() +
            fl::k57_decode_split_lengths::lse_part_offset(splits, c.batch(), c.hq, c.nq, c.d));
        int filled = 0;
        for (int s = 0; s < splits; ++s) {
          bool all = true;
          for (int64_t row = 0; row < seq_rows; ++row) {
            all = all && std::isfinite(lse[s * rows + row]);
          }
          filled += all;
        }
        if (k == k57) {
          EXPECT_EQ(filled, splits) << "every split holds some keys of the longest sequence";
        } else {
          EXPECT_LT(filled, splits) << "rung 56 cut the capacity's tiles";
        }
      }
    }
  }
}

// Rung `rung` (58 on) merges a call's partials in a thread block cluster where its rule
// (merges_in_cluster) says so, term for term as rung 57's combine kernel: rung 57's bits. Where
// it does (compute capability 9.0) it asks no workspace, the partials never leaving shared
// memory; elsewhere it keeps rung 57's combine kernel and workspace. split_grid (one query row
// and more: the key warps' end and the other), B = 8, GQA 32/8, 4096 keys, Nq = 1 and 16 (causal;
// 4 and 64 rows a block; two splits at d >= 128 on 132 SMs), every d, and `more`.
struct ClusterCounts {
  int in_cluster = 0, wide = 0, in_kernel = 0;  // wide: in a cluster, more than two splits
};
void expect_rung57_bits(int rung, const std::vector<CacheCase>& more, ClusterCounts& n) {
  const fl::KernelInfo* k57 = forward_rung(57);
  const fl::KernelInfo* k = forward_rung(rung);
  if (k57 == nullptr || k == nullptr) {
    GTEST_SKIP() << "rungs 57 and " << rung << " are not both built";
  }
  std::vector<CacheCase> cases = split_grid(rung, /*long_single=*/true);
  for (const CacheCase& c : split_grid(100 + rung, /*long_single=*/true, /*many_rows=*/true)) {
    cases.push_back(c);
  }
  for (int64_t d : {64, 96, 128, 192}) {
    for (int64_t nq : {1, 16}) {
      CacheCase c;
      c.t = d == 128 ? fl::DType::f16 : fl::DType::bf16;
      c.d = d;
      c.nq = nq;
      c.causal = nq > 1;
      c.capacity = 4096;
      c.with_lengths = false;
      c.lengths.assign(8, 4096);
      c.seed = 200 + rung + d + nq;
      cases.push_back(c);
    }
  }
  cases.insert(cases.end(), more.begin(), more.end());
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k57, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    const int splits = splits_of(a.workspace_bytes, c);
    ASSERT_GT(splits, 0) << "a workspace of " << a.workspace_bytes << " bytes";
    if (merges_in_cluster(*k, splits, c.batch() * c.hkv)) {
      EXPECT_EQ(b.workspace_bytes, 0) << splits << " splits merge in a cluster";
      ++n.in_cluster;
      n.wide += splits > 2;
    } else {
      EXPECT_EQ(b.workspace_bytes, a.workspace_bytes) << splits << " split(s)";
      n.in_kernel += splits > 1;
    }
    EXPECT_EQ(bitwise_differences(a, b), 0);
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
  }
}

TEST(PagedSame, Rung58IsRung57BitForBitAndMergesTwoSplitsInACluster) {
  FL_REQUIRE_GPU();
  ClusterCounts n;
  expect_rung57_bits(58, {}, n);
  if (IsSkipped() || HasFatalFailure()) return;
  if (compute_major() >= 9 && sm_count() >= 128) {
    EXPECT_GE(n.in_cluster, 12) << "two splits: B = 3 at d >= 128, B = 16 at d = 96, B = 8";
    EXPECT_EQ(n.wide, 0) << "rung 58 merges two splits in a cluster, no more";
    EXPECT_GE(n.in_kernel, 12) << "more splits: the long single sequence at every d";
  }
}

// Beside split_grid's cases, the sweep's short calls at B = 1 with 1024 and 4096 keys, GQA 32/8
// and MHA 32/32, Nq = 1 and 16, every d: on 132 SMs GQA with 1024 keys and one query row takes 8
// splits at d >= 128, MHA with 4096 keys 4 (the price of a split: splits.h); the long single
// sequence (14-16 splits) keeps the combine kernel.
std::vector<CacheCase> short_calls() {
  std::vector<CacheCase> more;
  for (int64_t d : {64, 96, 128, 192}) {
    for (int64_t hkv : {8, 32}) {
      for (int64_t keys : {1024, 4096}) {
        for (int64_t nq : {1, 16}) {
          CacheCase c;
          c.t = d == 192 ? fl::DType::bf16 : fl::DType::f16;
          c.d = d;
          c.hkv = hkv;
          c.nq = nq;
          c.causal = nq > 1;
          c.capacity = keys;
          c.page = keys == 4096 ? 64 : 0;
          c.lengths.assign(1, static_cast<int32_t>(keys));
          c.seed = 590 + d + hkv + keys + nq;
          more.push_back(c);
        }
      }
    }
  }
  return more;
}

// Two to eight splits in a cluster: rung 58's two-split calls and the short calls, some of them
// of more than two splits, in a cluster; the long single sequence in the combine kernel.
void expect_up_to_eight_in_cluster(const ClusterCounts& n) {
  if (compute_major() >= 9 && sm_count() >= 128) {
    EXPECT_GE(n.in_cluster, 12 + 6) << "rung 58's two splits and the short calls";
    EXPECT_GE(n.wide, 6) << "GQA, 1024 keys, Nq = 1; MHA, 4096 keys: d = 128 and 192";
    EXPECT_GE(n.in_kernel, 8) << "more than eight splits: the long single sequence";
  }
}

TEST(PagedSame, Rung59IsRung57BitForBitAndMergesUpToEightSplitsInACluster) {
  FL_REQUIRE_GPU();
  ClusterCounts n;
  expect_rung57_bits(59, short_calls(), n);
  if (IsSkipped() || HasFatalFailure()) return;
  expect_up_to_eight_in_cluster(n);
}

TEST(PagedSame, Rung60IsRung57BitForBitWithItsPartialsPushed) {
  // Rung 60 merges the calls rung 59 merges, from partials each split pushed into the merging
  // blocks' shared memory: still rung 57's bits.
  FL_REQUIRE_GPU();
  ClusterCounts n;
  expect_rung57_bits(60, short_calls(), n);
  if (IsSkipped() || HasFatalFailure()) return;
  expect_up_to_eight_in_cluster(n);
}

TEST(PagedSame, Rung61IsRung57BitForBitAndMergesInAClusterOnlyWhereTheClustersFit) {
  // Rung 61 merges in a cluster only where the call's B x H_kv clusters all run at once, one
  // block an SM (merges_in_cluster asks common/clusters.h as the rung does). Beside the short
  // calls, MHA 32/32 at B = 1 with 32768 keys, d = 128 and 192: 32 clusters of four blocks,
  // more than an H100 runs at once so.
  FL_REQUIRE_GPU();
  std::vector<CacheCase> more = short_calls();
  for (int64_t d : {128, 192}) {
    CacheCase c;
    c.t = d == 192 ? fl::DType::bf16 : fl::DType::f16;
    c.d = d;
    c.hkv = 32;
    c.capacity = 32768;
    c.with_lengths = false;
    c.lengths.assign(1, 32768);
    c.seed = 610 + d;
    more.push_back(c);
  }
  ClusterCounts n;
  expect_rung57_bits(61, more, n);
  if (IsSkipped() || HasFatalFailure()) return;
  if (compute_major() >= 9 && sm_count() >= 128) {
    EXPECT_GE(n.wide, 2) << "GQA, 1024 keys, Nq = 1, d = 128 and 192: 8 clusters of eight";
    EXPECT_GE(n.in_kernel, 8) << "more than eight splits: the long single sequence";
  }
}

TEST(PagedSame, Rung62IsRung57BitForBitWhereItSplitsAlike) {
  // Rung 62 launches a split grid of big tiles and long chunks one block an SM and takes a split
  // count of its own only past one wave of blocks (more than the SMs at d >= 128): on rung 61's
  // calls, none of them past one wave, it writes rung 57's bits with rung 61's clusters and
  // workspace. The launch changes where blocks run, not what they compute: MHA at B = 1 with
  // 32768 keys, d = 128 (four splits of 128 tiles), runs one block an SM.
  FL_REQUIRE_GPU();
  std::vector<CacheCase> more = short_calls();
  for (int64_t d : {128, 192}) {
    CacheCase c;
    c.t = d == 192 ? fl::DType::bf16 : fl::DType::f16;
    c.d = d;
    c.hkv = 32;
    c.capacity = 32768;
    c.with_lengths = false;
    c.lengths.assign(1, 32768);
    c.seed = 620 + d;
    more.push_back(c);
  }
  ClusterCounts n;
  expect_rung57_bits(62, more, n);
  if (IsSkipped() || HasFatalFailure()) return;
  if (compute_major() >= 9 && sm_count() >= 128) {
    EXPECT_GE(n.wide, 2) << "GQA, 1024 keys, Nq = 1, d = 128 and 192: 8 clusters of eight";
    EXPECT_GE(n.in_kernel, 8) << "more than eight splits: the long single sequence";
  }
}

TEST(PagedSame, Rung63IsRung62BitForBitWhereItSplitsAlike) {
  // Rung 63 changes the split count of one-wave grids at d = 128 between 60% and 80% of the SMs
  // (one split) and nothing else: wherever its count is rung 62's it writes rung 62's bits with
  // rung 62's workspace, through pages of 16-256 (shuffled and in order), the contiguous cache,
  // every head dim, one query row and 16; where the count differs (GQA at B = 10, MHA at B = 3
  // on 132 SMs, d = 128) it asks no workspace.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k62 = forward_rung(62);
  const fl::KernelInfo* k63 = forward_rung(63);
  if (k62 == nullptr || k63 == nullptr) GTEST_SKIP() << "rungs 62 and 63 are not both built";
  namespace r62 = fl::k62_decode_split_waves;
  namespace r63 = fl::k63_decode_split_cutoff;
  std::vector<CacheCase> cases;
  auto add = [&](fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths) {
    cases.push_back(cache_case(t, d, hkv, nq, capacity, page, shuffle, std::move(lengths),
                               630 + cases.size()));
  };
  using fl::DType;
  const std::vector<int32_t> ragged = {4100, 1, 8192, 2333, 7000, 0, 6144, 100};
  for (int64_t page : {64, 256}) {
    add(DType::f16, 128, 8, 1, 8192, page, true, ragged);     // two splits in clusters
    add(DType::bf16, 128, 8, 1, 32768, page, true, {30001});  // 15 splits, the combine kernel
  }
  add(DType::f16, 128, 8, 1, 8192, 64, false, ragged);       // in order
  add(DType::f16, 128, 8, 16, 8192, 256, true, ragged);      // 16 rows a position: 64 rows
  add(DType::f16, 128, 8, 1, 8192, 16, true, ragged);        // runs of 16 keys
  add(DType::f16, 128, 8, 1, 8192, 0, true, ragged);         // contiguous
  add(DType::bf16, 192, 8, 1, 8192, 64, true, ragged);
  add(DType::f16, 96, 8, 2, 8192, 128, true, ragged);
  add(DType::bf16, 64, 8, 4, 8192, 64, true, ragged);
  add(DType::f16, 128, 8, 1, 2048, 64, true, std::vector<int32_t>(16, 2048));  // one split
  add(DType::f16, 128, 8, 1, 4096, 64, true, std::vector<int32_t>(9, 4096));   // 72 blocks
  add(DType::f16, 128, 8, 1, 4096, 64, true, std::vector<int32_t>(10, 3000));  // 80 blocks
  add(DType::bf16, 128, 32, 1, 4096, 0, true, {4096, 1, 2500});                // MHA, 96 blocks
  add(DType::bf16, 192, 32, 16, 4096, 0, true, {4096, 4000, 333});
  const int sms = sm_count();
  int alike = 0, whole = 0;
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k62, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k63, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    // The two rules with this GPU's SMs (big tiles count one slot an SM; small tiles' counts are
    // the same in both rules whatever the slots).
    const int64_t tile_bytes = 2 * 64 * c.d * 2, tiles = (c.capacity + 63) / 64;
    const int64_t blocks = c.batch() * c.hkv, rows = c.nq * (c.hq / c.hkv);
    const int per_sm = r63::split_slots_per_sm(tile_bytes, 2);
    const int s62 = r62::price_splits(r62::choose_splits(blocks, sms, per_sm, tiles), blocks, sms,
                                      tiles, tile_bytes, rows);
    const int s63 = r63::price_splits(
        r63::choose_splits(blocks, sms, per_sm, tiles, r63::cut_pct(tile_bytes)), blocks, sms,
        tiles, tile_bytes, rows);
    if (s63 == s62) {
      EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
      EXPECT_EQ(bitwise_differences(a, b), 0);
      ++alike;
    } else {
      EXPECT_EQ(s63, 1) << s62 << " splits in rung 62";
      EXPECT_EQ(b.workspace_bytes, 0);
      ++whole;
    }
  }
  if (sms >= 121 && sms <= 133 && compute_major() >= 9) {
    EXPECT_GE(alike, 13) << "every call but those of 80-105 blocks at d = 128";
    EXPECT_EQ(whole, 2) << "GQA at B = 10, MHA at B = 3, d = 128";
  }
}

TEST(PagedSame, Rung64IsRung63BitForBitWhereItSplitsAlike) {
  // Rung 64 prices the splits of short calls at d = 96 (rung 50's price, which rung 63 held for
  // d >= 128) and changes nothing else: wherever its count is rung 63's it writes rung 63's bits
  // with rung 63's workspace, through pages of 16-256 (shuffled and in order), the contiguous
  // cache, every head dim, one query row and more; where the count differs (d = 96, a block's
  // rows in one warp, a short call) it is lower, and asks no more workspace.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k63 = forward_rung(63);
  const fl::KernelInfo* k64 = forward_rung(64);
  if (k63 == nullptr || k64 == nullptr) GTEST_SKIP() << "rungs 63 and 64 are not both built";
  namespace r63 = fl::k63_decode_split_cutoff;
  namespace r64 = fl::k64_decode_price_d96;
  std::vector<CacheCase> cases;
  auto add = [&](fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths) {
    cases.push_back(cache_case(t, d, hkv, nq, capacity, page, shuffle, std::move(lengths),
                               640 + cases.size()));
  };
  using fl::DType;
  const std::vector<int32_t> ragged = {1000, 1, 1024, 333, 700, 0, 512, 100};
  add(DType::f16, 96, 8, 1, 1024, 64, true, {1000});              // GQA, B = 1: 8 splits, 14
  add(DType::bf16, 96, 8, 1, 4096, 0, true, {4000});              // 8 splits, 29
  add(DType::f16, 96, 8, 4, 1024, 16, true, {1024});              // 16 rows: 8 splits, 14
  add(DType::f16, 96, 32, 1, 1024, 256, false, {777});            // MHA, B = 1: 2, 7
  add(DType::bf16, 96, 8, 1, 1024, 64, true, ragged);             // GQA, B = 8: 1, 4
  add(DType::f16, 96, 8, 16, 1024, 64, true, {1024});             // 64 rows: not priced
  add(DType::f16, 96, 8, 1, 8192, 128, true, {8000});             // long: not priced
  add(DType::bf16, 96, 8, 2, 8192, 64, true, ragged);             // long: not priced
  add(DType::f16, 128, 8, 1, 1024, 64, true, {1000});             // d = 128: rung 63's count
  add(DType::f16, 128, 8, 1, 8192, 0, true, ragged);
  add(DType::bf16, 192, 8, 1, 4096, 64, true, ragged);
  add(DType::bf16, 64, 8, 1, 1024, 64, true, {1000});
  add(DType::f16, 64, 32, 4, 8192, 16, true, ragged);
  const int sms = sm_count();
  int alike = 0, priced = 0;
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k63, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k64, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    // The two rules with this GPU's SMs: at d = 96 a split grid counts two blocks an SM (a block
    // of 108 KiB), at d >= 128 one; d = 64's slots do not matter, both rules being the same there.
    const int64_t tile_bytes = 2 * 64 * c.d * 2, tiles = (c.capacity + 63) / 64;
    const int64_t blocks = c.batch() * c.hkv, rows = c.nq * (c.hq / c.hkv);
    const int per_sm = r64::split_slots_per_sm(tile_bytes, 2);
    const int waves =
        r63::choose_splits(blocks, sms, per_sm, tiles, r63::cut_pct(tile_bytes));
    const int s63 = r63::price_splits(waves, blocks, sms, tiles, tile_bytes, rows);
    const int s64 = r64::price_splits(waves, blocks, sms, tiles, tile_bytes, rows, 2);
    if (s64 == s63) {
      EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
      EXPECT_EQ(bitwise_differences(a, b), 0);
      ++alike;
    } else {
      EXPECT_EQ(c.d, 96);
      EXPECT_LT(s64, s63);
      EXPECT_LE(b.workspace_bytes, a.workspace_bytes);
      ++priced;
    }
  }
  if (sms >= 128 && sms <= 133 && compute_major() >= 9) {
    EXPECT_EQ(priced, 5) << "the five short calls at d = 96 with a block's rows in one warp";
    EXPECT_EQ(alike, 8);
  }
}

TEST(PagedSame, Rung65IsRung64BitForBitButForItsTiles) {
  // Rung 65 changes only d = 64 calls of up to 16 rows a block whose tiles lie in one page (the
  // contiguous cache, pages of a multiple of 128 keys): tiles of 128 keys. Elsewhere (d = 96,
  // 128 and 192; d = 64 with more rows, or pages of 16, 48 or 64) it writes rung 64's bits with
  // rung 64's workspace, through pages shuffled and in order, one query row and more. With its
  // 128-key tiles the keys split elsewhere and the sums run in another order: the cache grid
  // holds it to the reference there; here each such call is deterministic and asks the
  // workspace of its own rule's count.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k64 = forward_rung(64);
  const fl::KernelInfo* k65 = forward_rung(65);
  if (k64 == nullptr || k65 == nullptr) GTEST_SKIP() << "rungs 64 and 65 are not both built";
  namespace r65 = fl::k65_decode_tiles_d64;
  std::vector<CacheCase> cases;
  auto add = [&](fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths) {
    cases.push_back(cache_case(t, d, hkv, nq, capacity, page, shuffle, std::move(lengths),
                               650 + cases.size()));
  };
  using fl::DType;
  const std::vector<int32_t> ragged = {1000, 1, 1024, 333, 700, 0, 512, 100};
  add(DType::f16, 96, 8, 1, 1024, 64, true, {1000});
  add(DType::bf16, 96, 32, 4, 8192, 16, true, ragged);
  add(DType::f16, 128, 8, 1, 8192, 256, false, ragged);
  add(DType::bf16, 128, 8, 16, 4096, 0, true, {4000});
  add(DType::f16, 192, 8, 1, 4096, 48, true, ragged);
  add(DType::f16, 64, 8, 1, 4096, 64, true, {4000});     // pages of 64: 64-key tiles
  add(DType::f16, 64, 32, 1, 1000, 16, false, ragged);   // pages of 16: 64-key tiles
  add(DType::bf16, 64, 8, 16, 32768, 0, true, {30001});  // 64 rows a block: 64-key tiles
  add(DType::f16, 64, 8, 8, 4096, 48, true, ragged);     // 32 rows, pages of 48
  add(DType::bf16, 64, 8, 2, 8192, 256, true, ragged);   // pages of 256: 128-key tiles
  add(DType::bf16, 64, 32, 1, 4096, 128, true, ragged);  // pages of 128: 128-key tiles
  add(DType::f16, 64, 8, 1, 8192, 0, true, ragged);      // contiguous: 128-key tiles
  const int sms = sm_count();
  int alike = 0, wide = 0;
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k64, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k65, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    const int64_t keys = r65::tile_keys(c.d, c.nq * (c.hq / c.hkv) <= 16, c.page);
    if (keys == 64) {
      EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
      EXPECT_EQ(bitwise_differences(a, b), 0);
      ++alike;
      continue;
    }
    const int64_t tb = 2 * keys * c.d * 2;
    const int64_t tiles = (c.capacity + keys - 1) / keys, blocks = c.batch() * c.hkv;
    const int splits = r65::price_splits(
        r65::choose_splits(blocks, sms, r65::split_slots_per_sm(tb, 2), tiles, r65::cut_pct(tb)),
        blocks, sms, tiles, tb, c.nq * (c.hq / c.hkv), 2);
    const bool cluster = merges_in_cluster(*k65, splits, blocks);
    EXPECT_EQ(b.workspace_bytes,
              splits == 1 || cluster
                  ? 0
                  : r65::split_workspace_bytes(splits, c.batch(), c.hq, c.nq, c.d))
        << splits << " splits";
    ++wide;
  }
  EXPECT_EQ(alike, 9);
  EXPECT_EQ(wide, 3);
}

TEST(PagedSame, Rung66IsRung65BitForBitWhereItSplitsAlike) {
  // Rung 66 holds the lone blocks of a grid on half the SMs or fewer to the price's 256 KiB of K
  // and V, where rung 65 let them read 1 MiB, and changes nothing else: where its count is rung
  // 65's it writes rung 65's bits with rung 65's workspace, through pages of 16-256 (shuffled
  // and in order), the contiguous cache, every head dim, one query row and more, grids past
  // half the SMs among them; where the count differs (rung 65 one split of 256 KiB-1 MiB) it is
  // the waves' count, and the call asks that count's workspace (none where the splits merge in
  // a cluster).
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k65 = forward_rung(65);
  const fl::KernelInfo* k66 = forward_rung(66);
  if (k65 == nullptr || k66 == nullptr) GTEST_SKIP() << "rungs 65 and 66 are not both built";
  namespace r65 = fl::k65_decode_tiles_d64;
  namespace r66 = fl::k66_decode_half_grid;
  std::vector<CacheCase> cases;
  auto add = [&](fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths) {
    cases.push_back(cache_case(t, d, hkv, nq, capacity, page, shuffle, std::move(lengths),
                               660 + cases.size()));
  };
  using fl::DType;
  const std::vector<int32_t> ragged = {1000, 1, 1024, 333, 700, 0, 512, 100};
  const std::vector<int32_t> five = {1000, 0, 1, 300, 777};
  add(DType::f16, 128, 8, 1, 2048, 64, true, ragged);   // 64 blocks, 1 MiB: 1 -> 2
  add(DType::bf16, 128, 8, 1, 1024, 0, true, five);     // 40 blocks, 512 KiB: 1 -> 3
  add(DType::f16, 64, 8, 1, 4096, 0, true, ragged);     // 128-key tiles, 1 MiB: 1 -> 2
  add(DType::bf16, 64, 8, 2, 4096, 256, false, ragged); // pages of 256: 128-key tiles, 1 -> 2
  add(DType::f16, 96, 8, 1, 1024, 16, true, ragged);    // 384 KiB: 1 -> 4
  add(DType::bf16, 96, 32, 4, 2048, 48, true, {2000, 7});  // MHA, 4 rows: 1 -> 4
  add(DType::f16, 192, 8, 1, 1024, 64, true, ragged);   // 768 KiB: 1 -> 2
  add(DType::f16, 128, 8, 1, 512, 64, true, ragged);    // 256 KiB: one split for both
  add(DType::bf16, 128, 8, 1, 8192, 0, true, {8000});   // B = 1: rung 65's count
  add(DType::f16, 64, 8, 16, 4096, 0, true, ragged);    // 64 rows a block: not priced
  add(DType::f16, 64, 8, 1, 4096, 64, true, ragged);    // pages of 64: 64-key tiles, unpriced
  add(DType::bf16, 128, 8, 1, 8192, 128, true, ragged); // 4 MiB a lone block: the waves' count
  std::vector<int32_t> nine = ragged;
  nine.push_back(900);
  add(DType::f16, 128, 8, 1, 1024, 64, true, nine);     // 72 blocks, past half: one split
  add(DType::bf16, 96, 32, 1, 2048, 0, true, {2000, 1, 2048, 5});  // 128 blocks: one split
  const int sms = sm_count();
  int alike = 0, moved = 0;
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k65, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k66, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    EXPECT_EQ(a.tile_keys, b.tile_keys);
    const int64_t rows = c.nq * (c.hq / c.hkv), keys = b.tile_keys, tb = 2 * keys * c.d * 2;
    const int64_t tiles = (c.capacity + keys - 1) / keys, blocks = c.batch() * c.hkv;
    const int per_sm = c.d == 192 ? 1 : (tb == 16 * 1024 ? 3 : 2);
    const int waves = r66::choose_splits(blocks, sms, r66::split_slots_per_sm(tb, per_sm), tiles,
                                         r66::cut_pct(tb));
    const int s65 = r65::price_splits(waves, blocks, sms, tiles, tb, rows, per_sm);
    const int s66 = r66::price_splits(waves, blocks, sms, tiles, tb, rows, per_sm);
    if (s66 == s65) {
      EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
      EXPECT_EQ(bitwise_differences(a, b), 0);
      ++alike;
      continue;
    }
    EXPECT_EQ(s65, 1);
    EXPECT_EQ(s66, waves);
    const bool cluster = merges_in_cluster(*k66, s66, blocks);
    EXPECT_EQ(b.workspace_bytes,
              cluster ? 0 : r66::split_workspace_bytes(s66, c.batch(), c.hq, c.nq, c.d))
        << s66 << " splits";
    ++moved;
  }
  if (sms >= 128 && sms <= 133) {
    EXPECT_EQ(moved, 7) << "the seven calls of a grid on half the SMs, 256 KiB-1 MiB a block";
    EXPECT_EQ(alike, 7);
  }
}

TEST(PagedSame, Rung67IsRung66BitForBitWhereItSplitsAlike) {
  // Rung 67 gives a d = 96 call of rows in one warp the count for one slot an SM where that
  // count is one wave of blocks reading under 1 MiB each, and changes nothing else: where its
  // count is rung 66's it writes rung 66's bits with rung 66's workspace (other head dims, 64
  // rows a block, long chunks, pages of 16-256 and the contiguous cache); where it differs the
  // call is right against the reference and asks the workspace of rung 67's count (none where
  // the splits merge in a cluster).
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k66 = forward_rung(66);
  const fl::KernelInfo* k67 = forward_rung(67);
  if (k66 == nullptr || k67 == nullptr) GTEST_SKIP() << "rungs 66 and 67 are not both built";
  namespace r66 = fl::k66_decode_half_grid;
  namespace r67 = fl::k67_decode_d96_one_wave;
  std::vector<CacheCase> cases;
  auto add = [&](fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths) {
    cases.push_back(cache_case(t, d, hkv, nq, capacity, page, shuffle, std::move(lengths),
                               670 + cases.size()));
  };
  using fl::DType;
  const std::vector<int32_t> ragged = {1000, 1, 1024, 333, 700, 0, 512, 100};
  const std::vector<int32_t> five = {4000, 0, 1, 3000, 777};
  add(DType::f16, 96, 8, 1, 8192, 0, true, {8000});      // 8 blocks: 29 -> 15, the combine
  add(DType::bf16, 96, 8, 1, 2048, 64, true, ragged);    // 64 blocks: 4 -> 2
  add(DType::f16, 96, 8, 1, 1024, 16, true, ragged);     // 64 blocks, pages of 16: 4 -> 2
  add(DType::bf16, 96, 32, 1, 4096, 256, false, {4000, 3});  // MHA, 64 blocks: 4 -> 2
  add(DType::f16, 96, 8, 4, 4096, 48, true, five);       // 16 rows, 40 blocks: 6 -> 3
  add(DType::bf16, 96, 32, 16, 8192, 128, true, {8000}); // MHA, 16 rows, 32 blocks: 8 -> 4
  add(DType::f16, 96, 8, 1, 32768, 0, true, {30001, 5}); // 16 blocks, 1.5 MiB a block: 15
  add(DType::f16, 96, 8, 16, 8192, 64, true, {8000});    // 64 rows a block: rung 66's count
  add(DType::bf16, 96, 8, 1, 1024, 64, true, {1000, 3, 999, 5, 1, 700, 600, 500, 400, 1000,
                                              900, 800, 700, 600, 500, 400});  // 128 blocks
  add(DType::f16, 128, 8, 1, 8192, 0, true, {8000});     // d = 128: rung 66's count
  add(DType::bf16, 64, 8, 1, 4096, 0, true, ragged);     // d = 64: rung 66's count
  add(DType::f16, 192, 8, 1, 1024, 64, true, ragged);    // d = 192: rung 66's count
  const int sms = sm_count();
  int alike = 0, moved = 0;
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k66, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k67, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    EXPECT_EQ(a.tile_keys, b.tile_keys);
    const int64_t rows = c.nq * (c.hq / c.hkv), keys = b.tile_keys, tb = 2 * keys * c.d * 2;
    const int64_t tiles = (c.capacity + keys - 1) / keys, blocks = c.batch() * c.hkv;
    const int per_sm = c.d == 192 ? 1 : (tb == 16 * 1024 ? 3 : 2);
    const int s66 = r66::price_splits(
        r66::choose_splits(blocks, sms, r66::split_slots_per_sm(tb, per_sm), tiles,
                           r66::cut_pct(tb)),
        blocks, sms, tiles, tb, rows, per_sm);
    const int one = r67::one_wave_splits(blocks, sms, tiles, tb, rows);
    const int s67 = one ? one : s66;
    if (s67 == s66) {
      EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
      EXPECT_EQ(bitwise_differences(a, b), 0);
      ++alike;
      continue;
    }
    EXPECT_LT(s67, s66);
    const bool cluster = merges_in_cluster(*k67, s67, blocks);
    EXPECT_EQ(b.workspace_bytes,
              s67 == 1 || cluster ? 0
                                  : r67::split_workspace_bytes(s67, c.batch(), c.hq, c.nq, c.d))
        << s67 << " splits";
    ++moved;
  }
  if (sms >= 128 && sms <= 133) {
    EXPECT_EQ(moved, 6) << "the six short d = 96 calls of rows in one warp";
    EXPECT_EQ(alike, 6);
  }
}

TEST(PagedSame, Rung68IsRung67BitForBit) {
  // Rung 68 changes which thread copies which 16 bytes of a K, V or Q row (at d = 96 eight rows a
  // step by 96 threads), not what lands in shared memory nor the splits: every call writes rung
  // 67's bits with rung 67's workspace. The cases take both copies of a tile (in one page, and in
  // runs of 16 keys across pages of 16 and 48), every head dim, 1-64 rows a block, one split,
  // the combine kernel and a cluster; the cache's unused rows are NaN, so a copy from a wrong
  // row or a chunk left unwritten shows.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k67 = forward_rung(67);
  const fl::KernelInfo* k68 = forward_rung(68);
  if (k67 == nullptr || k68 == nullptr) GTEST_SKIP() << "rungs 67 and 68 are not both built";
  std::vector<CacheCase> cases;
  auto add = [&](fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths) {
    cases.push_back(cache_case(t, d, hkv, nq, capacity, page, shuffle, std::move(lengths),
                               680 + cases.size()));
  };
  using fl::DType;
  const std::vector<int32_t> ragged = {1000, 1, 1024, 333, 700, 0, 512, 100};
  for (int64_t d : {64, 96, 128, 192}) {
    add(DType::f16, d, 8, 1, 8192, 0, true, {8000});       // B = 1: many splits
    add(DType::bf16, d, 8, 1, 2048, 16, true, ragged);     // pages of 16: runs
    add(DType::f16, d, 8, 4, 4096, 48, true, {4000, 0, 1, 3000, 777});  // 16 rows, pages of 48
    add(DType::bf16, d, 32, 1, 4096, 256, false, {4000, 3});  // MHA, pages of 256
    add(DType::f16, d, 8, 16, 1024, 64, true, ragged);     // 64 rows a block
    add(DType::bf16, d, 2, 3, 100, 0, false, {100, 100});  // 48 rows (Nq 3 x g 16)
    cases.back().with_lengths = false;                     // a plain call
  }
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k67, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k68, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    EXPECT_EQ(a.tile_keys, b.tile_keys);
    EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
    EXPECT_EQ(bitwise_differences(a, b), 0);
  }
}

TEST(PagedSame, Rung69IsRung68BitForBitWhereItSplitsAlike) {
  // Rung 69 gives a block of more than 16 rows of big tiles (d = 128) the count for the two
  // slots an SM holds where each split still reads 512 KiB or more, and changes nothing else:
  // where that rule does not apply (one query row, short chunks, d = 64, 96 and 192) it writes
  // rung 68's bits with rung 68's workspace; where it does, the call is right against the
  // reference and asks the workspace of the two-slot count (none where the splits merge in a
  // cluster). The capacity sets the count, the lengths (ragged, past it, none) what is read.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k68 = forward_rung(68);
  const fl::KernelInfo* k69 = forward_rung(69);
  if (k68 == nullptr || k69 == nullptr) GTEST_SKIP() << "rungs 68 and 69 are not both built";
  namespace r69 = fl::k69_decode_rows_two;
  std::vector<CacheCase> cases;
  auto add = [&](fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths) {
    cases.push_back(cache_case(t, d, hkv, nq, capacity, page, shuffle, std::move(lengths),
                               690 + cases.size()));
  };
  using fl::DType;
  const std::vector<int32_t> ragged = {30001, 1, 1024, 333, 32768, 0, 512, 100};
  std::vector<int32_t> sixteen(16, 700);
  sixteen[0] = 8192;
  sixteen[3] = 0;
  sixteen[9] = 5000;
  add(DType::f16, 128, 8, 16, 32768, 0, true, ragged);      // B = 8: 2 -> 4 (no cluster)
  add(DType::bf16, 128, 8, 16, 32768, 64, true, ragged);    // the same through pages of 64
  add(DType::f16, 128, 8, 16, 32768, 0, true, {30001});     // B = 1: 15 -> 29, the combine
  add(DType::bf16, 128, 8, 16, 16384, 16, true, {16000, 9});   // B = 2, pages of 16: 8 -> 15
  add(DType::f16, 128, 8, 16, 8192, 256, true, {8192, 1, 4000, 7000});  // B = 4: 4 -> 8
  add(DType::bf16, 128, 8, 16, 8192, 48, true, sixteen);    // B = 16: one split -> 2
  add(DType::f16, 128, 8, 16, 8192, 0, true, {8000});       // B = 1, 288 KiB: rung 68's
  add(DType::bf16, 128, 8, 16, 4096, 64, true, {4000, 3, 4096, 100});  // 256 KiB: rung 68's
  add(DType::f16, 128, 8, 1, 32768, 0, true, ragged);       // 4 rows a block: rung 68's
  add(DType::f16, 96, 8, 16, 32768, 0, true, {30001, 5});   // d = 96: rung 68's
  add(DType::bf16, 64, 8, 16, 32768, 64, true, {30001, 5}); // d = 64: rung 68's
  add(DType::f16, 192, 8, 16, 16384, 0, true, {16000, 9});  // d = 192, one an SM: rung 68's
  const int sms = sm_count();
  fl::CublasHandle cublas;
  int alike = 0, moved = 0;
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k68, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k69, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    EXPECT_EQ(a.tile_keys, b.tile_keys);
    const int64_t rows = c.nq * (c.hq / c.hkv), keys = b.tile_keys, tb = 2 * keys * c.d * 2;
    const int64_t tiles = (c.capacity + keys - 1) / keys, blocks = c.batch() * c.hkv;
    // Blocks an SM (only d = 128 can take the two-slot count): 112 KiB, two by registers.
    const int per_sm = c.d == 128 ? blocks_per_sm(112 * 1024, 2) : 1;
    const int two = r69::two_slot_splits(blocks, sms, per_sm, tiles, tb, rows);
    if (two == 0) {
      EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
      EXPECT_EQ(bitwise_differences(a, b), 0);
      ++alike;
      continue;
    }
    const bool cluster = merges_in_cluster(*k69, two, blocks);
    EXPECT_EQ(b.workspace_bytes,
              cluster ? 0 : r69::split_workspace_bytes(two, c.batch(), c.hq, c.nq, c.d))
        << two << " splits";
    EXPECT_NE(b.workspace_bytes, a.workspace_bytes) << "the count moved from rung 68's";
    EXPECT_EQ(check_run(c, b, references(*k69, c, h, cublas)), "");
    ++moved;
  }
  if (sms >= 128 && sms <= 133) {
    EXPECT_EQ(moved, 6) << "the six calls of 64 rows whose splits stay 512 KiB or more";
    EXPECT_EQ(alike, 6);
  }
}

// Rungs 70 and 71: rung `next` computes a block of more than 16 rows at the head dims `wgmma`
// with wgmma, from K and V stored in wgmma's swizzle; everything else is rung `prev`'s. So: one
// query row (key warps, at `key_warps`) and 64-row blocks at `others` write rung prev's bits;
// blocks of 20, 48 and 64 rows at `wgmma` are right against the reference (tiles in one page,
// in runs across pages of 16 and 48, shuffled; ragged and empty sequences; one split, the
// combine, a cluster), with rung prev's tiles and workspace (the same splits). The cache's
// unused rows are NaN: a copy to or a read from a wrong place in the swizzle shows.
void expect_wgmma_only_for_many_rows(int prev, int next, std::array<int64_t, 2> wgmma,
                                     std::array<int64_t, 2> key_warps,
                                     std::array<int64_t, 2> others, uint64_t seed) {
  const fl::KernelInfo* kp = forward_rung(prev);
  const fl::KernelInfo* kn = forward_rung(next);
  if (kp == nullptr || kn == nullptr) {
    GTEST_SKIP() << "rungs " << prev << " and " << next << " are not both built";
  }
  if (compute_major() != 9) GTEST_SKIP() << "rung " << next << " (wgmma) runs on 9.0";
  std::vector<CacheCase> cases;
  auto add = [&](fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths) {
    cases.push_back(cache_case(t, d, hkv, nq, capacity, page, shuffle, std::move(lengths),
                               seed + cases.size()));
  };
  using fl::DType;
  const std::vector<int32_t> ragged = {30001, 1, 1024, 333, 32768, 0, 512, 100};
  std::vector<int32_t> sixteen(16, 700);
  sixteen[0] = 8192;
  sixteen[3] = 0;
  for (int64_t d : wgmma) {
    add(DType::f16, d, 8, 16, 32768, 0, true, ragged);        // 64 rows, B = 8: splits
    add(DType::bf16, d, 8, 16, 32768, 64, true, ragged);      // through pages of 64
    add(DType::f16, d, 8, 16, 32768, 0, true, {30001});       // B = 1: many splits
    add(DType::bf16, d, 8, 16, 16384, 16, true, {16000, 9});  // pages of 16: runs
    add(DType::f16, d, 8, 16, 8192, 48, true, sixteen);       // B = 16, pages of 48: runs
    add(DType::bf16, d, 8, 16, 4096, 256, false, {4000, 3, 4096, 100});  // pages in order
    add(DType::f16, d, 8, 5, 2048, 0, true, {2000, 17, 5});   // 20 rows: padding warps
    add(DType::bf16, d, 2, 3, 1000, 0, false, {1000, 1000});  // 48 rows (Nq 3 x g 16)
    cases.back().with_lengths = false;                        // a plain call
  }
  add(DType::f16, key_warps[0], 8, 1, 32768, 0, true, ragged);      // 4 rows a block
  add(DType::bf16, key_warps[1], 8, 2, 8192, 64, true, {8000, 5});  // 8 rows a block
  add(DType::f16, others[0], 8, 16, 32768, 0, true, {30001, 5});     // 64 rows, prev's path
  add(DType::bf16, others[1], 8, 16, 16384, 16, true, {16000, 9});   // 64 rows, prev's path
  fl::CublasHandle cublas;
  int alike = 0, multiplied = 0;
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*kp, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*kn, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    EXPECT_EQ(a.tile_keys, b.tile_keys);
    EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
    const int64_t rows = c.nq * (c.hq / c.hkv);
    if (rows <= 16 || (c.d != wgmma[0] && c.d != wgmma[1])) {
      EXPECT_EQ(bitwise_differences(a, b), 0);
      ++alike;
      continue;
    }
    EXPECT_EQ(check_run(c, b, references(*kn, c, h, cublas)), "");
    ++multiplied;
  }
  EXPECT_EQ(multiplied, 16);
  EXPECT_EQ(alike, 4);
}

TEST(PagedSame, Rung70IsRung69BitForBitButForBlocksOfManyRowsAtD64And128) {
  // Rung 70: wgmma at d = 64 and 128, from the 128-byte swizzle; d = 96 and 192 rung 69's.
  FL_REQUIRE_GPU();
  expect_wgmma_only_for_many_rows(69, 70, {64, 128}, {128, 64}, {96, 192}, 700);
}

TEST(PagedSame, Rung71IsRung70BitForBitButForBlocksOfManyRowsAtD96And192) {
  // Rung 71: wgmma at d = 96 (the 64-byte swizzle) and 192 (three 64-column blocks of the
  // 128-byte one) too; d = 64 and 128 are rung 70's.
  FL_REQUIRE_GPU();
  expect_wgmma_only_for_many_rows(70, 71, {96, 192}, {96, 192}, {64, 128}, 800);
}

TEST(PagedSame, Rung72IsRung71BitForBit) {
  // Rung 72 copies a tile of a block of more than 16 rows by TMA where the tile lies in one page
  // (no table, or pages of 64, 128, 256 keys), and zeroes the values of its keys past the
  // sequence's end, which cp.async zero-filled: the same bytes land where rung 71's copies put
  // them, so every call writes rung 71's bits with rung 71's workspace. The cases: every head
  // dim; 64, 48 and 20 rows a block (TMA) and 4 and 16 (key warps, rung 71's code); tiles in one
  // page (the contiguous cache, pages of 64, 128 and 256, shuffled or in order) and in runs
  // across pages of 16 and 48 (cp.async); ragged and empty sequences and lengths that are no
  // multiple of 64; a plain call whose capacity is none either (the map's rows past it arrive
  // as zeros); one split, the combine kernel and a cluster. The cache's unused rows are NaN: a
  // value past a sequence's end left in the stage, or a box landing in the wrong place, shows.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k71 = forward_rung(71);
  const fl::KernelInfo* k72 = forward_rung(72);
  if (k71 == nullptr || k72 == nullptr) GTEST_SKIP() << "rungs 71 and 72 are not both built";
  if (compute_major() != 9) GTEST_SKIP() << "rungs 71 and 72 (wgmma, TMA) run on 9.0";
  std::vector<CacheCase> cases;
  auto add = [&](fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths) {
    cases.push_back(cache_case(t, d, hkv, nq, capacity, page, shuffle, std::move(lengths),
                               900 + cases.size()));
  };
  using fl::DType;
  const std::vector<int32_t> ragged = {8001, 1, 1024, 333, 8192, 0, 512, 100};
  for (int64_t d : {64, 96, 128, 192}) {
    add(DType::f16, d, 8, 16, 8192, 0, true, ragged);         // 64 rows, B = 8
    add(DType::bf16, d, 8, 16, 8192, 64, true, ragged);       // pages of 64, shuffled
    add(DType::f16, d, 8, 16, 16384, 0, true, {16001});       // B = 1: many splits
    add(DType::bf16, d, 8, 16, 8192, 128, true, {8000, 65});  // B = 2, pages of 128
    add(DType::f16, d, 8, 16, 4096, 256, false, {4000, 3, 4096, 100});  // pages in order
    add(DType::bf16, d, 8, 16, 16384, 16, true, {16000, 9});  // pages of 16: runs
    add(DType::f16, d, 8, 12, 4096, 48, true, {4000, 0, 4090});  // 48 rows, pages of 48: runs
    add(DType::bf16, d, 8, 5, 2048, 0, true, {2000, 17, 5});  // 20 rows: padding rows
    add(DType::f16, d, 2, 3, 1000, 0, false, {1000, 1000});   // 48 rows, capacity 1000
    cases.back().with_lengths = false;                        // a plain call
    add(DType::bf16, d, 8, 1, 8192, 64, true, ragged);        // 4 rows a block: key warps
    add(DType::f16, d, 8, 4, 8192, 0, true, {8000, 5});       // 16 rows a block: key warps
  }
  int tma = 0, alike = 0;
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    std::cout << c.describe() << std::endl;  // a call that never ends is named before it
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k71, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k72, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    EXPECT_EQ(a.tile_keys, b.tile_keys);
    EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
    EXPECT_EQ(bitwise_differences(a, b), 0);
    const bool many_rows = c.nq * (c.hq / c.hkv) > 16;
    ++(many_rows && (c.page == 0 || c.page % 64 == 0) ? tma : alike);
  }
  EXPECT_EQ(tma, 28);
  EXPECT_EQ(alike, 16);
}

TEST(PagedSame, Rung73IsRung72BitForBitWhereItSplitsAlike) {
  // Rung 73 gives a grid of blocks of more than 16 rows at d = 128 one split where the count of
  // the two slots an SM holds is one split, the grid has more blocks than SMs and the call passes
  // no cache lengths (rung 72 took rung 68's count there: 2-4 splits), and changes nothing else.
  // Such a call is right against the reference with no workspace (one split: no partials), where
  // rung 72's asked for its splits' partials; every other call (the same grids with cache
  // lengths, rung 69's two-slot count, one query row, d = 64, 96 and 192, a grid of one split
  // either way) writes rung 72's bits with rung 72's workspace.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k72 = forward_rung(72);
  const fl::KernelInfo* k73 = forward_rung(73);
  if (k72 == nullptr || k73 == nullptr) GTEST_SKIP() << "rungs 72 and 73 are not both built";
  if (compute_major() != 9) GTEST_SKIP() << "rungs 72 and 73 (wgmma, TMA) run on 9.0";
  namespace r73 = fl::k73_decode_rows_unsplit;
  std::vector<CacheCase> cases;
  auto lengths = [](int64_t b, int32_t capacity) {  // ragged, one full and one empty
    std::vector<int32_t> l(static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i) {
      l[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % (capacity + 1));
    }
    l[0] = capacity;
    l[3] = 0;
    return l;
  };
  auto add = [&](fl::DType t, int64_t d, int64_t nq, int64_t b, int32_t capacity, int64_t page,
                 bool shuffle, bool with_lengths) {
    cases.push_back(cache_case(t, d, 8, nq, capacity, page, shuffle, lengths(b, capacity),
                               730 + cases.size()));
    cases.back().with_lengths = with_lengths;
  };
  using fl::DType;
  add(DType::f16, 128, 16, 20, 2048, 0, true, false);    // 160 blocks: rung 72's 3 splits -> 1
  add(DType::bf16, 128, 16, 24, 4096, 64, true, false);  // 192, pages of 64 shuffled: 2 -> 1
  add(DType::f16, 128, 16, 28, 3072, 256, false, false); // 224, pages of 256 in order: 4 -> 1
  add(DType::bf16, 128, 8, 22, 2048, 16, true, false);   // 32 rows, pages of 16 (runs): 2 -> 1
  add(DType::f16, 128, 16, 20, 2048, 0, true, true);     // the same grids with cache lengths
  add(DType::bf16, 128, 16, 24, 4096, 64, true, true);
  add(DType::f16, 128, 16, 16, 4096, 0, true, false);    // 128 blocks: rung 69's 2 splits, both
  add(DType::f16, 128, 1, 24, 2048, 64, true, false);    // 4 rows a block: key warps
  add(DType::bf16, 96, 16, 24, 2048, 0, true, false);    // d = 96: small tiles
  add(DType::f16, 64, 16, 20, 2048, 64, true, false);    // d = 64: small tiles
  add(DType::bf16, 192, 16, 20, 2048, 0, true, false);   // d = 192: one block an SM
  add(DType::f16, 128, 16, 32, 2048, 0, true, false);    // 256 blocks: one split either way
  const int sms = sm_count();
  fl::CublasHandle cublas;
  int alike = 0, moved = 0;
  for (const CacheCase& c : cases) {
    SCOPED_TRACE(c.describe());
    std::cout << c.describe() << std::endl;
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k72, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k73, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    EXPECT_EQ(a.tile_keys, b.tile_keys);
    const int64_t rows = c.nq * (c.hq / c.hkv), keys = b.tile_keys, tb = 2 * keys * c.d * 2;
    const int64_t tiles = (c.capacity + keys - 1) / keys, blocks = c.batch() * c.hkv;
    // Blocks an SM (only d = 128 can take the two-slot count): 112 KiB and the stage barriers.
    const int per_sm = c.d == 128 ? blocks_per_sm(112 * 1024 + 40, 2) : 1;
    const bool one_past =
        r73::two_slot_splits(blocks, sms, per_sm, tiles, tb, rows, !c.with_lengths) == 1 &&
        r73::choose_splits(blocks, sms, 1, tiles, r73::cut_pct(tb)) > 1;
    if (!one_past) {
      EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
      EXPECT_EQ(bitwise_differences(a, b), 0);
      ++alike;
      continue;
    }
    EXPECT_EQ(b.workspace_bytes, 0) << "one split: no partials";
    EXPECT_GT(a.workspace_bytes, 0) << "rung 72's splits, merged by the combine kernel";
    EXPECT_EQ(check_run(c, b, references(*k73, c, h, cublas)), "");
    ++moved;
  }
  if (sms >= 128 && sms <= 133) {
    EXPECT_EQ(moved, 4) << "the four grids of 160-224 blocks of 32 or 64 rows at d = 128";
    EXPECT_EQ(alike, 8);
  }
}

TEST(PagedSame, Rung74IsRung73BitForBit) {
  // Rung 74 changes where a cluster launch of one-row blocks (key warps) reads its block-table
  // entries: from a copy in shared memory, made once a split, where a tile lies in one page and
  // the split needs at most 1024 entries; from the table itself otherwise. The same pages, the
  // same tiles, the same math: every call writes rung 73's bits, with rung 73's workspace. The
  // calls (GQA 32/8): the paged one-row cell (B = 8, 32768 keys, pages of 64 shuffled), and
  // others of eight sequences, whose 64 blocks split in two and merge in a cluster on 132 SMs
  // (no workspace), at every head dim, with pages of 256 in order and four query rows causal;
  // then the paths that keep the table: d = 64's 64-key tiles (its small blocks split six ways,
  // merged by the combine kernel), pages of 16 (runs of 16 keys), the contiguous cache, B = 1
  // (15 splits), 64-row blocks (wgmma, TMA). The last call's longest sequence has 2049 tiles
  // over two splits: the first needs 1025 entries, one more than the shared copy holds (the
  // table, as rung 73), the second exactly 1024 (the copy full).
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k73 = forward_rung(73);
  const fl::KernelInfo* k74 = forward_rung(74);
  if (k73 == nullptr || k74 == nullptr) GTEST_SKIP() << "rungs 73 and 74 are not both built";
  if (compute_major() != 9) GTEST_SKIP() << "rungs 73 and 74 (wgmma, TMA) run on 9.0";
  struct Call {
    CacheCase c;
    bool cluster;  // on 128-133 SMs: split, and merged in a cluster (no workspace)
  };
  std::vector<Call> calls;
  auto add = [&](fl::DType t, int64_t d, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths, bool cluster) {
    calls.push_back({cache_case(t, d, 8, nq, capacity, page, shuffle, std::move(lengths),
                                740 + calls.size()),
                     cluster});
  };
  using fl::DType;
  const std::vector<int32_t> cell = {32768, 0, 1, 20001, 777, 16384, 4097, 31000};
  const std::vector<int32_t> eight = {4096, 0, 1, 2000, 777, 4095, 64, 3333};
  add(DType::f16, 128, 1, 32768, 64, true, cell, true);  // the cell
  add(DType::bf16, 128, 1, 4096, 256, false, eight, true);
  add(DType::f16, 128, 4, 4096, 64, true, eight, true);   // 16 rows, causal
  add(DType::f16, 64, 1, 4096, 128, true, eight, true);   // 128-key tiles
  add(DType::bf16, 64, 1, 4096, 64, true, eight, false);  // 64-key tiles: 6 splits, combined
  add(DType::f16, 96, 1, 4096, 64, true, eight, true);
  add(DType::bf16, 192, 1, 4096, 64, true, eight, true);
  add(DType::f16, 128, 1, 4096, 16, true, eight, true);   // runs: the table itself
  add(DType::f16, 128, 1, 4096, 0, true, eight, true);    // contiguous: no table
  add(DType::f16, 128, 1, 32768, 64, true, {30000}, false);       // 15 splits: combine kernel
  add(DType::bf16, 128, 16, 4096, 64, true, {4096, 3000}, false);  // 64 rows: wgmma, TMA
  add(DType::f16, 128, 1, 131136, 64, true, {131136, 0, 1, 300, 777, 4097, 64, 65}, true);
  const int sms = sm_count();
  fl::CublasHandle cublas;
  for (const Call& call : calls) {
    const CacheCase& c = call.c;
    SCOPED_TRACE(c.describe());
    std::cout << c.describe() << std::endl;
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k73, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k74, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
    if (sms >= 128 && sms <= 133 && call.cluster) {
      EXPECT_EQ(b.workspace_bytes, 0) << "two splits merged in a cluster";
    }
    EXPECT_EQ(bitwise_differences(a, b), 0);
    EXPECT_EQ(check_run(c, b, references(*k74, c, h, cublas)), "");
  }
}

TEST(PagedSame, Rung75IsRung74BitForBit) {
  // Rung 75 gives the launches of one-row blocks (key warps) that run one block an SM, split
  // launches merged by the combine kernel and unsplit ones, the room for the split's block-table
  // entries, and their blocks copy them into shared memory as rung 74's cluster launches do. The
  // same pages, the same tiles, the same math: every call writes rung 74's bits, with rung 74's
  // workspace. GQA 32/8, on 128-133 SMs: B = 1 and 4 with 32768 keys at d = 128 (15 and 4
  // splits through the combine kernel: more than 8, and 32 clusters of four, which do not all
  // fit one block an SM; launched alone, so with the table's room), the same with 16 rows causal
  // and with pages of 256 in order; d = 192 (every launch alone): B = 1 split, B = 16 unsplit;
  // d = 64's 128-key tiles split alone (65536 keys: 1 MiB a split); then the calls that keep
  // the table or have none: B = 1 with 8192 keys (short chunks, two blocks an SM), d = 96
  // (small tiles), pages of 16 (runs), the contiguous cache (the barrier alone), and the
  // cluster cell of rung 74.
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k74 = forward_rung(74);
  const fl::KernelInfo* k75 = forward_rung(75);
  if (k74 == nullptr || k75 == nullptr) GTEST_SKIP() << "rungs 74 and 75 are not both built";
  if (compute_major() != 9) GTEST_SKIP() << "rungs 74 and 75 (wgmma, TMA) run on 9.0";
  struct Call {
    CacheCase c;
    bool combine;  // on 128-133 SMs: split and merged by the combine kernel (a workspace)
  };
  std::vector<Call> calls;
  auto add = [&](fl::DType t, int64_t d, int64_t nq, int64_t capacity, int64_t page,
                 bool shuffle, std::vector<int32_t> lengths, bool combine) {
    calls.push_back({cache_case(t, d, 8, nq, capacity, page, shuffle, std::move(lengths),
                                780 + calls.size()),
                     combine});
  };
  using fl::DType;
  const std::vector<int32_t> four = {32768, 9000, 1, 20001};
  const std::vector<int32_t> sixteen = {4096, 0,  1,   2000, 777, 4095, 64, 3333,
                                        4000, 65, 129, 3,    1024, 17,  999, 4096};
  add(DType::f16, 128, 1, 32768, 64, true, {30000}, true);  // B = 1: 15 splits, alone
  add(DType::f16, 128, 1, 32768, 64, true, four, true);     // B = 4: 32 clusters of four
  add(DType::bf16, 128, 4, 32768, 64, true, four, true);    // 16 rows, causal
  add(DType::f16, 128, 1, 32768, 256, false, four, true);   // pages of 256 in order
  add(DType::bf16, 192, 1, 32768, 64, true, {32768}, true);  // d = 192: alone by its size
  add(DType::f16, 192, 1, 4096, 64, true, sixteen, false);  // B = 16: one split, alone
  add(DType::f16, 64, 1, 65536, 128, true, {60000}, true);  // 128-key tiles, alone
  add(DType::f16, 128, 1, 8192, 64, true, {8000}, true);    // short chunks: the table
  add(DType::f16, 96, 1, 32768, 64, true, {30000}, true);   // small tiles: the table
  add(DType::f16, 128, 1, 32768, 16, true, four, true);     // runs: the table itself
  add(DType::f16, 128, 1, 32768, 0, true, four, true);      // contiguous: no table
  add(DType::f16, 128, 1, 32768, 64, true, {32768, 0, 1, 20001, 777, 16384, 4097, 31000},
      false);                                               // rung 74's cluster cell
  const int sms = sm_count();
  fl::CublasHandle cublas;
  for (const Call& call : calls) {
    const CacheCase& c = call.c;
    SCOPED_TRACE(c.describe());
    std::cout << c.describe() << std::endl;
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k74, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k75, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
    if (sms >= 128 && sms <= 133) {
      EXPECT_EQ(b.workspace_bytes > 0, call.combine) << "split and merged by the combine kernel";
    }
    EXPECT_EQ(bitwise_differences(a, b), 0);
    EXPECT_EQ(check_run(c, b, references(*k75, c, h, cublas)), "");
  }
}

TEST(PagedSame, Rung76DealsRaggedBatchesRightAndLeavesTheRestAsRung75) {
  // Rung 76 deals a KV head's tiles evenly to its blocks where the call passes cache lengths for
  // four sequences or more and splits into chunks of 4 MiB or more, in one wave (splits.h,
  // deals): a block computes the pieces of the sequences its tiles hold one after the other. A dealt call sums other pieces than rung 75's, so it is checked against the
  // reference, with the workspace poisoned (NaN) before each run: a slot the combine reads and
  // no block wrote shows in O. Every other call writes rung 75's bits. On 128-133 SMs, GQA 32/8
  // (d = 128 unless said), dealt: rung 74's cluster cell (B = 8, 32768 keys, two splits of 8 MiB:
  // a workspace where rung 75 had none), the same contiguous, one sequence holding every key (16
  // blocks), B = 4 (the combine kernel in rung 75 too), with four query rows causal, through
  // pages of 16 (runs), at d = 64's 128-key tiles and at d = 192; many short sequences, several
  // in a block (GQA 32/2: one row is 16; and four rows, 64: the wgmma blocks, whose TMA barriers
  // count on across a block's pieces); 64 rows at B = 4; a batch of no key (no block has a
  // tile: the combine writes O = 0 and LSE = -inf, rung 75's bits). Not dealt: one sequence, the
  // B = 4 call without lengths, and B = 8 with 2048 keys (two splits of 512 KiB).
  FL_REQUIRE_GPU();
  const fl::KernelInfo* k75 = forward_rung(75);
  const fl::KernelInfo* k76 = forward_rung(76);
  if (k75 == nullptr || k76 == nullptr) GTEST_SKIP() << "rungs 75 and 76 are not both built";
  if (compute_major() != 9) GTEST_SKIP() << "rungs 75 and 76 (wgmma, TMA) run on 9.0";
  struct Call {
    CacheCase c;
    bool dealt;  // on 128-133 SMs
  };
  std::vector<Call> calls;
  auto add = [&](fl::DType t, int64_t d, int64_t hkv, int64_t nq, int64_t capacity, int64_t page,
                 std::vector<int32_t> lengths, bool dealt) {
    calls.push_back({cache_case(t, d, hkv, nq, capacity, page, true, std::move(lengths),
                                840 + calls.size()),
                     dealt});
  };
  using fl::DType;
  const std::vector<int32_t> eight = {32768, 0, 1, 20001, 777, 16384, 4097, 31000};
  const std::vector<int32_t> four = {32768, 9000, 1, 20001};
  const std::vector<int32_t> sixteen = {4096, 0,  1,   2000, 777, 4095, 64, 3333,
                                        4000, 65, 129, 3,    1024, 17,  999, 4096};
  add(DType::f16, 128, 8, 1, 32768, 64, eight, true);                     // rung 74's cluster cell
  add(DType::bf16, 128, 8, 1, 32768, 0, eight, true);                     // contiguous
  add(DType::f16, 128, 8, 1, 32768, 64, {0, 0, 0, 32768, 0, 0, 0, 0}, true);  // one holds all
  add(DType::f16, 128, 8, 1, 32768, 64, four, true);                      // B = 4
  add(DType::bf16, 128, 8, 4, 32768, 64, four, true);                     // 16 rows, causal
  add(DType::f16, 128, 8, 1, 32768, 16, four, true);                      // pages of 16: runs
  add(DType::f16, 64, 8, 1, 65536, 128, {60000, 3000, 0, 65536}, true);   // 128-key tiles
  add(DType::f16, 192, 8, 1, 32768, 64, four, true);                      // d = 192
  add(DType::f16, 128, 2, 1, 32768, 64, sixteen, true);                   // short ones, 16 rows
  add(DType::bf16, 128, 2, 4, 65536, 64, sixteen, true);                  // 64 rows: wgmma
  add(DType::f16, 96, 8, 16, 131072, 0, four, true);                      // 64 rows at d = 96
  add(DType::f16, 128, 8, 1, 32768, 64, {30000}, false);                  // one sequence
  add(DType::f16, 128, 8, 1, 32768, 64, {0, 0, 0, 0, 0, 0, 0, 0}, true);  // no key at all
  add(DType::f16, 128, 8, 1, 2048, 64, {2048, 0, 1, 2001, 777, 1638, 95, 1100}, false);
  calls.push_back({cache_case(DType::f16, 128, 8, 1, 32768, 0, true, four, 860), false});
  calls.back().c.with_lengths = false;  // the B = 4 call without lengths: rung 57's cut
  const int sms = sm_count();
  fl::CublasHandle cublas;
  for (const Call& call : calls) {
    const CacheCase& c = call.c;
    SCOPED_TRACE(c.describe());
    std::cout << c.describe() << std::endl;
    const HostData h = make_host_data(c);
    const RunResult a = run_case(*k75, c, h);
    SKIP_ON_SHARED_MEMORY(a);
    const RunResult b = run_case(*k76, c, h);
    ASSERT_EQ(a.refused, "");
    ASSERT_EQ(b.refused, "");
    EXPECT_EQ(a.run_diffs + b.run_diffs, 0);
    bool any_key = false;
    for (int64_t i = 0; i < c.batch(); ++i) any_key = any_key || c.keys(i) > 0;
    if (any_key) {
      EXPECT_EQ(check_run(c, b, references(*k76, c, h, cublas)), "");
    } else {
      EXPECT_EQ(bitwise_differences(a, b), 0) << "no key: O = 0 and LSE = -inf, as rung 75's";
    }
    if (sms < 128 || sms > 133) continue;
    if (call.dealt) {
      EXPECT_GT(b.workspace_bytes, 0) << "dealt: the partials in the workspace";
    } else {
      EXPECT_EQ(b.workspace_bytes, a.workspace_bytes);
      EXPECT_EQ(bitwise_differences(a, b), 0);
    }
  }
}

TEST(PagedSame, LengthsAtTheCapacityAndPagesInOrderChangeNothing) {
  // Lengths all equal to the capacity, on the contiguous cache and through a table of pages in
  // order (and shuffled), write what the plain call writes, bit for bit.
  FL_REQUIRE_GPU();
  FOR_EACH_CACHE_RUNG(k) {
    SCOPED_TRACE(k->name());
    CacheCase c;
    c.t = fl::DType::f16;
    c.nq = 2;
    c.causal = true;
    c.capacity = 2048;
    c.lengths.assign(3, 2048);
    c.with_lengths = false;
    c.seed = 11;
    const HostData h = make_host_data(c);
    const RunResult plain = run_case(*k, c, h);
    SKIP_ON_SHARED_MEMORY(plain);
    ASSERT_EQ(plain.refused, "");
    for (int64_t page : {0, 64, 256}) {
      for (bool with_lengths : {false, true}) {
        for (bool shuffle : {false, true}) {
          if ((page == 0 && (!with_lengths || shuffle))) continue;
          c.page = page;
          c.with_lengths = with_lengths;
          c.shuffle = shuffle;
          SCOPED_TRACE(c.describe());
          const RunResult r = run_case(*k, c, h);
          ASSERT_EQ(r.refused, "");
          EXPECT_EQ(bitwise_differences(plain, r), 0);
        }
      }
    }
  }
}

TEST(PagedSame, LengthsOutsideTheCapacityAreClamped) {
  // A length below 0 or past the capacity is the caller's error; the rung clamps it to [0, Nk]
  // and reads nothing outside the cache: -5 runs as 0, Nk + 100 and INT32_MAX as Nk.
  FL_REQUIRE_GPU();
  FOR_EACH_CACHE_RUNG(k) {
    SCOPED_TRACE(k->name());
    for (int64_t page : {0, 64}) {
      CacheCase c;
      c.t = fl::DType::bf16;
      c.nq = 1;
      c.capacity = 640;
      c.page = page;
      c.lengths = {0, 640, 640, 100};
      c.seed = 5;
      const HostData h = make_host_data(c);
      const RunResult in_range = run_case(*k, c, h);
      SKIP_ON_SHARED_MEMORY(in_range);
      c.lengths = {-5, 740, std::numeric_limits<int32_t>::max(), 100};
      SCOPED_TRACE(c.describe());
      const RunResult out_of_range = run_case(*k, c, h);  // the same data: keys(b) clamps
      ASSERT_EQ(out_of_range.refused, "");
      EXPECT_EQ(bitwise_differences(in_range, out_of_range), 0);
    }
  }
}

}  // namespace
