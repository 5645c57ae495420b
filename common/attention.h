// The attention problem every kernel of the ladder solves, and the arithmetic the harness does
// about it (FLOPs, arithmetic intensity, validation of the arguments). Host code only.
//
//   O[b, h, i, :] = softmax_j( scale * Q[b, h, i, :] . K[b, h / G, j, :] ) . V[b, h / G, j, :]
//
// with G = H_q / H_kv (grouped-query attention; G = 1 is plain multi-head attention) and, when
// causal, key j visible to query i only if j <= i + (Nk - Nq) (bottom-right aligned, as
// FlashAttention-2 defines it). Rows that see no key get O = 0 and LSE = -inf.
#pragma once

#include <cstdint>
#include <string>

namespace fl {

// e4m3 is OCP FP8 (4 exponent bits, 3 mantissa bits, no infinities; common/fp8.h), an input type
// only: rung 28 reads e4m3 Q, K, V and writes an fp16 or bf16 O.
enum class DType { f16, bf16, e4m3 };

inline const char* to_string(DType t) {
  return t == DType::f16 ? "fp16" : t == DType::bf16 ? "bf16" : "e4m3";
}
inline int64_t element_size(DType t) { return t == DType::e4m3 ? 1 : 2; }
// The inverse of to_string, for the command lines: "fp16", "bf16" or "e4m3" into *t; false (and
// *t untouched) for any other name.
inline bool parse_dtype(const std::string& name, DType* t) {
  for (DType d : {DType::f16, DType::bf16, DType::e4m3}) {
    if (name == to_string(d)) {
      *t = d;
      return true;
    }
  }
  return false;
}

// Strides in elements. `dim` is the stride of the head dimension: every kernel reads a row's d
// elements as contiguous 16-byte vectors, so check_common rejects any dim other than 1. It is a
// field at all so that a caller holding a non-contiguous view (a transposed tensor, a slice with a
// step) can say so and get a clear error instead of silently wrong output.
struct Strides {
  int64_t batch = 0, head = 0, row = 0;
  int64_t dim = 1;
};

struct AttnParams {
  DType dtype = DType::f16;      // Q, K, V
  DType out_dtype = DType::f16;  // O: the inputs' dtype for fp16/bf16 inputs; fp16 or bf16 for e4m3
  int64_t batch = 1;     // B
  int64_t heads_q = 1;   // H_q
  int64_t heads_kv = 1;  // H_kv (H_q must be a multiple of it)
  int64_t seqlen_q = 1;  // Nq
  int64_t seqlen_k = 1;  // Nk
  int64_t head_dim = 128;
  bool causal = false;
  float softmax_scale = 0.f;  // usually 1/sqrt(d)

  const void* q = nullptr;  // [B, H_q, Nq, d] by default (see strides)
  const void* k = nullptr;  // [B, H_kv, Nk, d]
  const void* v = nullptr;  // [B, H_kv, Nk, d]
  void* o = nullptr;        // [B, H_q, Nq, d]
  float* lse = nullptr;     // optional [B, H_q, Nq], natural-log log-sum-exp of the scaled scores

  Strides q_stride, k_stride, v_stride, o_stride;

  // e4m3 inputs only: the descale factors that give back the caller's values, x = e4m3 * descale
  // (common/fp8.h: how to make them from a 16-bit or fp32 tensor). Host memory, read during the
  // call (the launcher checks them and copies them to the GPU): one float per tensor, or, with
  // descale_per_head, one per (batch, head): q_descale[b H_q + h], k_descale[b H_kv + h],
  // v_descale[b H_kv + h]. Null for fp16/bf16 inputs.
  const float* q_descale = nullptr;
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;
  bool descale_per_head = false;

  // Scratch device memory for a forward rung that needs it (the split-key decode's partial
  // outputs): at least the size the registry reports for the kernel and the sizes
  // (workspace_bytes), 256-byte aligned; its contents need not be anything on entry, and the
  // call owns it until the stream reaches the call's end. Null with 0 for every other rung.
  // (The backward's scratch is BwdParams::workspace; a backward call leaves these null.)
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;

  // A K/V cache: per-sequence lengths and pages. Null: every sequence has seqlen_k keys, and
  // K, V are the usual [B, H_kv, Nk, d] tensors (by k_stride / v_stride). Only a kernel with
  // KernelInfo::kv_cache (rungs 39 on) takes either; why_unsupported refuses the others.
  //   seqlens_k: sequence b has seqlens_k[b] keys, 0 <= seqlens_k[b] <= seqlen_k (seqlen_k is
  //     then the capacity). Device data: the host cannot check the values; one outside
  //     [0, seqlen_k] is the caller's undefined behaviour (as in FlashAttention), which the
  //     kernel clamps to [0, seqlen_k] so that nothing reads out of bounds. A sequence of 0 keys
  //     sees none: O = 0 and LSE = -inf for its rows. Causal is bottom-right per sequence: query
  //     i of sequence b sees key j iff j <= i + seqlens_k[b] - Nq.
  //   block_table: k and v point at page pools [num_pages, page_size, H_kv, d]; key j of
  //     sequence b lives in page block_table[b * block_table_stride + j / page_size], row
  //     j % page_size. k_stride.batch is then the stride between pages, k_stride.row between
  //     rows of a page, k_stride.head between heads (likewise v_stride); seqlen_k is the
  //     capacity (pages a row of the table x page_size, or less). The page numbers are device
  //     data too: each must name a page of the pool.
  const int32_t* seqlens_k = nullptr;   // device [B], or null
  const int32_t* block_table = nullptr; // device [B][block_table_stride], or null
  int64_t block_table_stride = 0;       // elements between rows of block_table
  int64_t page_size = 0;                // keys a page (block_table set: required); else 0
};

// Fills the strides for the [B, H, N, d] layout ("BHND") or the [B, N, H, d] layout ("BNHD").
enum class Layout { BHND, BNHD };
Strides make_strides(Layout layout, int64_t heads, int64_t seqlen, int64_t head_dim);

// A contiguous [B, H, N, d] problem with scale 1/sqrt(d); pointers left null. out_dtype is dtype
// for fp16 and bf16, fp16 for e4m3 (descale pointers left null: the caller sets them).
AttnParams make_params(DType dtype, int64_t batch, int64_t heads, int64_t seqlen_q,
                       int64_t seqlen_k, int64_t head_dim, bool causal = false,
                       Layout layout = Layout::BHND);

// Number of elements a tensor with these sizes and strides spans (largest offset + 1).
int64_t span_elements(const Strides& s, int64_t batch, int64_t heads, int64_t rows,
                      int64_t head_dim);

// The rules on the sizes and the scale alone (no pointers, no strides): every size >= 1, H_q a
// multiple of H_kv, softmax_scale finite and > 0. Returns "" when they hold, else the broken rule.
// check_common starts with these; the harness checks a problem's shape with it before it
// allocates anything (a reference of a shape that breaks them would divide by zero or read out
// of bounds).
std::string check_shape(const AttnParams& p);

// The rules every kernel shares: check_shape; O's type (out_dtype == dtype for fp16 and bf16
// inputs, fp16 or bf16 for e4m3 inputs); pointers non-null and 16-byte aligned, head-dimension
// strides 1, row, head and batch strides multiples of 16 bytes (8 elements of a 16-bit type, 16 of
// e4m3; O's by out_dtype) and rows >= d apart, offsets that fit in int64, LSE 4-byte aligned; the
// descale factors: for e4m3 inputs non-null and every factor finite and > 0 (1 per tensor, or
// B x H_q for Q and B x H_kv for K and V with descale_per_head), for fp16/bf16 inputs null (and
// descale_per_head false); the workspace (check_workspace); the K/V cache (check_kv_cache: with a
// block table, K and V are checked as page pools, one page of page_size rows). Returns "" when
// the parameters are well formed, else the broken rule.
std::string check_common(const AttnParams& p);

// The host-side rules on the K/V cache fields (no device reads): seqlens_k and block_table
// 4-byte aligned; with a block table, page_size a multiple of 16 (>= 16) and
// block_table_stride >= ceil(seqlen_k / page_size); without one, page_size and
// block_table_stride 0. A kernel may require more of page_size in its supports (rungs 39
// and 40 take every such size). "" when they hold.
std::string check_kv_cache(const AttnParams& p);

// A workspace of `bytes` at `workspace`: bytes >= 0, non-null when bytes > 0, 256-byte aligned.
// (Whether it is large enough depends on the kernel: why_unsupported checks that.)
std::string check_workspace(const void* workspace, int64_t bytes);

// The backward of the same problem: given dO = dLoss/dO, the gradients dQ, dK, dV (GQA: dK and
// dV per KV head, summed over the H_q / H_kv query heads that share it). With S = scale Q K^T,
// P = exp(S - LSE) (recomputed from the forward's LSE), D = rowsum(dO * O):
//   dV = P^T dO, dP = dO V^T, dS = P * (dP - D), dQ = scale dS K, dK = scale dS^T Q.
struct BwdParams {
  // Q, K, V, the forward's O and LSE (required here: an input), sizes, causal, scale. fwd.o and
  // fwd.lse must be what the forward wrote for these Q, K, V (O in dtype, LSE in fp32).
  AttnParams fwd;
  const void* dout = nullptr;  // dO, shaped like O   [B, H_q, Nq, d]
  void* dq = nullptr;          // dQ, shaped like Q   [B, H_q, Nq, d]
  void* dk = nullptr;          // dK, shaped like K   [B, H_kv, Nk, d]
  void* dv = nullptr;          // dV, shaped like V   [B, H_kv, Nk, d]
  Strides do_stride, dq_stride, dk_stride, dv_stride;
  // Scratch the kernel needs (fp32 dQ accumulator, D, ...): at least the size the registry
  // reports for the kernel and shape (workspace_bytes), 256-byte aligned. Its contents
  // need not be anything on entry; the call owns it until the stream reaches the call's end.
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

// dO, dQ strides as fwd's Q strides and dK, dV's as K's; every pointer of the backward null.
BwdParams make_bwd_params(const AttnParams& fwd);

// The rules every backward kernel shares: check_common(fwd); fp16 or bf16 inputs; no K/V cache
// (seqlens_k and block_table null); the LSE
// present; dO, dQ, dK, dV by the same rules as Q, K, V (in the inputs' dtype); the workspace
// non-null when its size is > 0, 256-byte aligned. "" when they hold, else the broken rule.
// (Whether the workspace is large enough depends on the kernel: run_backward checks it.)
std::string check_backward(const BwdParams& b);

// Attention FLOPs: 4 * B * H_q * Nq * Nk * d (two GEMMs of 2 FLOPs per multiply-add),
// halved when causal (the convention of FlashAttention-2's benchmarks).
double attention_flops(const AttnParams& p);

// Backward FLOPs: 2.5 times attention_flops (five GEMMs against the forward's two), the count
// FlashAttention's benchmarks use; halved when causal, as the forward's.
double backward_flops(const AttnParams& p);

// The rules on one tensor (the name is the message's): non-null, 16-byte aligned, head-dimension
// stride 1, strides >= 0, rows >= d apart, strides multiples of 16 bytes (elem bytes each),
// offsets that fit in int64. "" when they hold.
std::string check_tensor(const char* name, const void* ptr, const Strides& s, int64_t batch,
                         int64_t heads, int64_t rows, int64_t head_dim, int64_t elem);

// The bytes the whole problem must move at least: read Q, K, V once (element_size(dtype)), write
// O once (element_size(out_dtype)).
double minimum_bytes(const AttnParams& p);

// Arithmetic intensity of the whole problem (FLOP / minimum byte).
double problem_intensity(const AttnParams& p);

// Tile model of one thread block (the project's design model): one Br-row Q tile against all
// N/Bc KV tiles.
//   FLOPs = (4 * Br * Bc * d + Br * (4 * Bc + d + 4)) * N / Bc
//   bytes = 2 * d * (Br + N) * sizeof(elem)      (Q tile read once, K and V streamed once)
double tile_intensity(int64_t br, int64_t bc, int64_t seqlen, int64_t head_dim,
                      int64_t elem_bytes);

}  // namespace fl
