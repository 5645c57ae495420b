#include "common/attention.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <vector>

#include "common/fp8.h"

namespace fl {

Strides make_strides(Layout layout, int64_t heads, int64_t seqlen, int64_t head_dim) {
  Strides s;
  if (layout == Layout::BHND) {
    s.row = head_dim;
    s.head = seqlen * head_dim;
    s.batch = heads * seqlen * head_dim;
  } else {
    s.head = head_dim;
    s.row = heads * head_dim;
    s.batch = seqlen * heads * head_dim;
  }
  return s;
}

AttnParams make_params(DType dtype, int64_t batch, int64_t heads, int64_t seqlen_q,
                       int64_t seqlen_k, int64_t head_dim, bool causal, Layout layout) {
  AttnParams p;
  p.dtype = dtype;
  // O has the inputs' type for fp16 and bf16; e4m3 inputs write fp16 unless told otherwise.
  p.out_dtype = dtype == DType::e4m3 ? DType::f16 : dtype;
  p.batch = batch;
  p.heads_q = p.heads_kv = heads;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.causal = causal;
  p.softmax_scale = head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(head_dim)) : 1.0f;
  p.q_stride = p.o_stride = make_strides(layout, heads, seqlen_q, head_dim);
  p.k_stride = p.v_stride = make_strides(layout, heads, seqlen_k, head_dim);
  return p;
}

namespace {

// a * b + c, or -1 when it would not fit in int64 (all arguments >= 0).
int64_t mul_add(int64_t a, int64_t b, int64_t c) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  if (a != 0 && b > (kMax - c) / a) return -1;
  return a * b + c;
}

}  // namespace

int64_t span_elements(const Strides& s, int64_t batch, int64_t heads, int64_t rows,
                      int64_t head_dim) {
  if (batch <= 0 || heads <= 0 || rows <= 0 || head_dim <= 0) return 0;
  int64_t last = mul_add(s.batch, batch - 1, 0);
  if (last < 0) return -1;
  last = mul_add(s.head, heads - 1, last);
  if (last < 0) return -1;
  last = mul_add(s.row, rows - 1, last);
  if (last < 0) return -1;
  last = mul_add(s.dim, head_dim - 1, last);
  if (last < 0) return -1;
  return mul_add(1, 1, last);
}

std::string check_shape(const AttnParams& p) {
  std::ostringstream why;
  if (p.batch < 1 || p.heads_q < 1 || p.heads_kv < 1 || p.seqlen_q < 1 || p.seqlen_k < 1 ||
      p.head_dim < 1) {
    why << "every size must be >= 1 (B=" << p.batch << ", H_q=" << p.heads_q
        << ", H_kv=" << p.heads_kv << ", Nq=" << p.seqlen_q << ", Nk=" << p.seqlen_k
        << ", d=" << p.head_dim << ")";
    return why.str();
  }
  if (p.heads_q % p.heads_kv != 0) {
    why << "H_q (" << p.heads_q << ") must be a multiple of H_kv (" << p.heads_kv << ")";
    return why.str();
  }
  if (!(p.softmax_scale > 0.f) || !std::isfinite(p.softmax_scale)) {
    why << "softmax_scale must be finite and > 0 (got " << p.softmax_scale << ")";
    return why.str();
  }
  return "";
}

namespace {

bool is_16bit(DType t) { return t == DType::f16 || t == DType::bf16; }

// The rules on the types: O's type against the inputs', and the descale factors, which e4m3
// inputs need and fp16/bf16 inputs must not have. "" when they hold.
std::string check_types(const AttnParams& p) {
  std::ostringstream why;
  if (is_16bit(p.dtype)) {
    if (p.out_dtype != p.dtype) {
      why << "O's dtype (out_dtype) must be the inputs' dtype for fp16 and bf16 inputs (got "
          << to_string(p.dtype) << " inputs, " << to_string(p.out_dtype) << " O)";
      return why.str();
    }
  } else if (p.dtype == DType::e4m3) {
    if (!is_16bit(p.out_dtype)) {
      why << "O's dtype (out_dtype) must be fp16 or bf16 for e4m3 inputs (got "
          << to_string(p.out_dtype) << ")";
      return why.str();
    }
  } else {
    why << "dtype must be fp16, bf16 or e4m3 (got enum value " << static_cast<int>(p.dtype)
        << ")";
    return why.str();
  }
  return "";
}

// The descale rules, after the pointers and strides: e4m3 inputs need one finite factor > 0 per
// tensor, or per (batch, head) with descale_per_head; fp16/bf16 inputs take none.
std::string check_descales(const AttnParams& p) {
  const struct {
    const char* name;
    const float* ptr;
    int64_t heads;
  } t[] = {{"Q", p.q_descale, p.heads_q},
           {"K", p.k_descale, p.heads_kv},
           {"V", p.v_descale, p.heads_kv}};
  if (p.dtype != DType::e4m3) {
    for (const auto& x : t) {
      if (x.ptr != nullptr) {
        return std::string("descale factors are for e4m3 inputs: ") + x.name +
               "'s descale must be null for " + to_string(p.dtype) + " inputs";
      }
    }
    if (p.descale_per_head) {
      return std::string("descale factors are for e4m3 inputs: descale_per_head must be false "
                         "for ") + to_string(p.dtype) + " inputs";
    }
    return "";
  }
  for (const auto& x : t) {
    if (x.ptr == nullptr) {
      return std::string("e4m3 inputs need descale factors (x = e4m3 * descale): ") + x.name +
             "'s descale is a null pointer";
    }
    int64_t count = 1;
    if (p.descale_per_head) {
      if (p.batch > std::numeric_limits<int64_t>::max() / x.heads) {
        return std::string(x.name) + "'s per-head descale count (B x H) overflows int64";
      }
      count = p.batch * x.heads;
    }
    const std::string bad = check_descale(x.name, std::vector<float>(x.ptr, x.ptr + count));
    if (!bad.empty()) {
      return bad + (p.descale_per_head ? " (per head: one factor per (b, h), factor b H + h)"
                                       : " (one factor per tensor)");
    }
  }
  return "";
}

}  // namespace

// The rules on one tensor of a call: non-null, 16-byte aligned, head-dimension stride 1,
// strides >= 0, rows >= d apart, row/head/batch strides multiples of 16 bytes, offsets in int64.
std::string check_tensor(const char* name, const void* ptr, const Strides& s, int64_t batch,
                         int64_t heads, int64_t rows, int64_t head_dim, int64_t elem) {
  std::ostringstream why;
  if (ptr == nullptr) {
    why << name << " is a null pointer";
    return why.str();
  }
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) {
    why << name << " must be 16-byte aligned (address " << ptr << ")";
    return why.str();
  }
  if (s.dim != 1) {
    why << name << "'s head-dimension stride must be 1 (got " << s.dim
        << "): every kernel reads a row's d elements as contiguous 16-byte vectors";
    return why.str();
  }
  if (s.batch < 0 || s.head < 0 || s.row < 0) {
    why << name << " strides must be >= 0";
    return why.str();
  }
  if (rows > 1 && s.row < head_dim) {
    why << name << " row stride (" << s.row << ") must be >= d (" << head_dim
        << "): rows must not overlap";
    return why.str();
  }
  // Strides in bytes: every row, head and batch starts on a 16-byte boundary (8 elements of a
  // 16-bit type, 16 of e4m3).
  const int64_t per16 = 16 / elem;
  if (s.row % per16 != 0 || s.head % per16 != 0 || s.batch % per16 != 0) {
    why << name << " strides must be multiples of " << per16 << " elements (16 bytes"
        << (elem == 1 ? " of e4m3" : "") << "), got batch=" << s.batch << " head=" << s.head
        << " row=" << s.row;
    return why.str();
  }
  if (span_elements(s, batch, heads, rows, head_dim) < 0) {
    why << name << " offsets overflow int64";
    return why.str();
  }
  return "";
}

std::string check_workspace(const void* workspace, int64_t bytes) {
  if (bytes < 0) return "workspace_bytes must be >= 0";
  if (bytes > 0 && workspace == nullptr) {
    return "workspace is a null pointer but workspace_bytes is " + std::to_string(bytes);
  }
  if (workspace != nullptr && reinterpret_cast<uintptr_t>(workspace) % 256 != 0) {
    return "workspace must be 256-byte aligned";
  }
  return "";
}

std::string check_kv_cache(const AttnParams& p) {
  std::ostringstream why;
  if (reinterpret_cast<uintptr_t>(p.seqlens_k) % 4 != 0) {
    return "seqlens_k must be 4-byte aligned";
  }
  if (reinterpret_cast<uintptr_t>(p.block_table) % 4 != 0) {
    return "block_table must be 4-byte aligned";
  }
  if (p.block_table == nullptr) {
    if (p.page_size != 0 || p.block_table_stride != 0) {
      why << "page_size and block_table_stride describe a block table: both must be 0 without "
             "one (got page_size = " << p.page_size << ", block_table_stride = "
          << p.block_table_stride << ")";
      return why.str();
    }
    return "";
  }
  if (p.page_size < 16 || p.page_size % 16 != 0) {
    why << "page_size must be a multiple of 16 and >= 16 with a block table (got " << p.page_size
        << ")";
    return why.str();
  }
  const int64_t pages = p.seqlen_k / p.page_size + (p.seqlen_k % p.page_size != 0);
  if (p.block_table_stride < pages) {
    why << "block_table_stride (" << p.block_table_stride << ") must be >= ceil(seqlen_k / "
        << "page_size) = " << pages << ": a row of the table holds the pages of seqlen_k keys";
    return why.str();
  }
  return "";
}

std::string check_common(const AttnParams& p) {
  const std::string shape = check_shape(p);
  if (!shape.empty()) return shape;
  const std::string types = check_types(p);
  if (!types.empty()) return types;
  const std::string cache = check_kv_cache(p);
  if (!cache.empty()) return cache;
  const int64_t in_size = element_size(p.dtype), out_size = element_size(p.out_dtype);
  // With a block table, K and V are page pools: checked as one page of page_size rows (the
  // number of pages is the caller's; its batch stride is the stride between pages).
  const bool paged = p.block_table != nullptr;
  const int64_t kv_batch = paged ? 1 : p.batch, kv_rows = paged ? p.page_size : p.seqlen_k;
  const struct {
    const char* name;
    const void* ptr;
    const Strides* s;
    int64_t batch, heads, rows, elem;
  } tensors[] = {{"Q", p.q, &p.q_stride, p.batch, p.heads_q, p.seqlen_q, in_size},
                 {"K", p.k, &p.k_stride, kv_batch, p.heads_kv, kv_rows, in_size},
                 {"V", p.v, &p.v_stride, kv_batch, p.heads_kv, kv_rows, in_size},
                 {"O", p.o, &p.o_stride, p.batch, p.heads_q, p.seqlen_q, out_size}};
  for (const auto& t : tensors) {
    const std::string bad =
        check_tensor(t.name, t.ptr, *t.s, t.batch, t.heads, t.rows, p.head_dim, t.elem);
    if (!bad.empty()) return bad;
  }
  if (p.lse != nullptr && reinterpret_cast<uintptr_t>(p.lse) % 4 != 0) {
    return "LSE must be 4-byte aligned";
  }
  const std::string ws = check_workspace(p.workspace, p.workspace_bytes);
  if (!ws.empty()) return ws;
  return check_descales(p);
}

std::string check_backward(const BwdParams& b) {
  const AttnParams& p = b.fwd;
  const std::string common = check_common(p);
  if (!common.empty()) return common;
  if (p.dtype == DType::e4m3) return "the backward takes fp16 and bf16 inputs (got e4m3)";
  if (p.seqlens_k != nullptr || p.block_table != nullptr) {
    return "the backward takes a contiguous K/V of seqlen_k keys a sequence (no seqlens_k, no "
           "block_table): the K/V cache is for decode";
  }
  if (p.lse == nullptr) {
    return "LSE is required: the backward recomputes P from the forward's log-sum-exp";
  }
  const int64_t e = element_size(p.dtype);
  const struct {
    const char* name;
    const void* ptr;
    const Strides* s;
    int64_t heads, rows;
  } tensors[] = {{"dO", b.dout, &b.do_stride, p.heads_q, p.seqlen_q},
                 {"dQ", b.dq, &b.dq_stride, p.heads_q, p.seqlen_q},
                 {"dK", b.dk, &b.dk_stride, p.heads_kv, p.seqlen_k},
                 {"dV", b.dv, &b.dv_stride, p.heads_kv, p.seqlen_k}};
  for (const auto& t : tensors) {
    const std::string bad =
        check_tensor(t.name, t.ptr, *t.s, p.batch, t.heads, t.rows, p.head_dim, e);
    if (!bad.empty()) return bad;
  }
  return check_workspace(b.workspace, b.workspace_bytes);
}

BwdParams make_bwd_params(const AttnParams& fwd) {
  BwdParams b;
  b.fwd = fwd;
  b.do_stride = b.dq_stride = fwd.q_stride;
  b.dk_stride = b.dv_stride = fwd.k_stride;
  return b;
}

double attention_flops(const AttnParams& p) {
  const double f = 4.0 * static_cast<double>(p.batch) * static_cast<double>(p.heads_q) *
                   static_cast<double>(p.seqlen_q) * static_cast<double>(p.seqlen_k) *
                   static_cast<double>(p.head_dim);
  return p.causal ? f / 2.0 : f;
}

double minimum_bytes(const AttnParams& p) {
  const double in = static_cast<double>(element_size(p.dtype));
  const double out = static_cast<double>(element_size(p.out_dtype));
  const double q = 1.0 * p.batch * p.heads_q * p.seqlen_q * p.head_dim;  // Q read, O written
  const double kv = 2.0 * p.batch * p.heads_kv * p.seqlen_k * p.head_dim;
  return (q + kv) * in + q * out;
}

double backward_flops(const AttnParams& p) { return 2.5 * attention_flops(p); }

double problem_intensity(const AttnParams& p) { return attention_flops(p) / minimum_bytes(p); }

double tile_intensity(int64_t br, int64_t bc, int64_t seqlen, int64_t head_dim,
                      int64_t elem_bytes) {
  const double Br = static_cast<double>(br), Bc = static_cast<double>(bc);
  const double N = static_cast<double>(seqlen), d = static_cast<double>(head_dim);
  const double flops = (4.0 * Br * Bc * d + Br * (4.0 * Bc + d + 4.0)) * N / Bc;
  const double bytes = 2.0 * d * (Br + N) * static_cast<double>(elem_bytes);
  return flops / bytes;
}

}  // namespace fl
