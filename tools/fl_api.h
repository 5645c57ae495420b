/* The C API of the ladder: every registered kernel, callable on device pointers from any language
 * that can call C (Python ctypes, Julia, Rust, ...). Built as the shared library flash_ladder
 * (build/libflash_ladder.so) from tools/c_api.cpp.
 *
 * Kernels are addressed by their number in the ladder (0 = cuBLAS baseline, 1 = naive, ...).
 * Kernel numbers changed: rungs 22-24 of earlier versions are now 23, 27 and 28 (22, 24, 25 and
 * 26 are new rungs). fl_kernel_name gives a number's name ("27_final_hopper").
 * Nothing here allocates or synchronises: fl_run enqueues the kernel on the given stream (NULL =
 * the default stream) and returns; the output is ready once that stream is synchronised. C++
 * exceptions never cross this boundary: every failure is a return code and a message.
 *
 * From PyTorch, use the package flash_ladder (python/): flash_ladder.attention(q, k, v,
 * causal=True) does all of the following for torch tensors, and its _capi.py holds the one ctypes
 * mirror of fl_attention_params that the repository's scripts use. What it does, by hand (ctypes,
 * torch tensors [B, H, N, d] on the GPU):
 *
 *   import ctypes, torch
 *   lib = ctypes.CDLL("build/libflash_ladder.so")
 *   I64 = ctypes.c_int64
 *   class Params(ctypes.Structure):                     # the same fields, in the same order
 *       _fields_ = ([("dtype", ctypes.c_int)]
 *                   + [(n, I64) for n in ("batch", "heads_q", "heads_kv", "seqlen_q",
 *                                         "seqlen_k", "head_dim")]
 *                   + [("causal", ctypes.c_int), ("softmax_scale", ctypes.c_float)]
 *                   + [(n, ctypes.c_void_p) for n in ("q", "k", "v", "o", "lse")]
 *                   + [(f"{t}_stride_{s}", I64) for t in "qkvo"
 *                      for s in ("batch", "head", "row")]
 *                   + [(f"{t}_stride_dim", I64) for t in "qkvo"]
 *                   + [("out_dtype", ctypes.c_int)]
 *                   + [(f"{t}_descale", ctypes.POINTER(ctypes.c_float)) for t in "qkv"]
 *                   + [("descale_per_head", ctypes.c_int)]
 *                   + [("workspace", ctypes.c_void_p), ("workspace_bytes", I64)]
 *                   + [("seqlens_k", ctypes.c_void_p), ("block_table", ctypes.c_void_p),
 *                      ("block_table_stride", I64), ("page_size", I64)])
 *   assert lib.fl_params_size() == ctypes.sizeof(Params)
 *   lib.fl_kernel_name.restype = ctypes.c_char_p
 *   q, k, v = (torch.randn(2, 4, 1024, 128, device="cuda", dtype=torch.half) for _ in range(3))
 *   o = torch.empty_like(q)
 *   p = Params(dtype=0, batch=2, heads_q=4, heads_kv=4, seqlen_q=1024, seqlen_k=1024,
 *              head_dim=128, causal=0, softmax_scale=128 ** -0.5,
 *              q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(), lse=None,
 *              out_dtype=0)                          # O's type: the inputs' for fp16/bf16
 *                                                    # (the K/V cache fields stay NULL and 0)
 *   lib.fl_set_contiguous_strides(ctypes.byref(p))  # or copy tensor.stride() into the fields,
 *                                                   # x_stride_dim included (it must be 1)
 *   err = ctypes.create_string_buffer(512)
 *   stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
 *   if lib.fl_run(3, ctypes.byref(p), stream, err, len(err)) != 0:
 *       raise RuntimeError(err.value.decode())
 *   torch.cuda.synchronize()
 *
 * The backward (dQ, dK, dV from dO, the forward's O and its LSE) has its own rungs, numbered after
 * the forward's (29 on), and its own calls: fl_backward_params, fl_run_backward and the rest at
 * the end of this header. fl_run refuses a backward rung, and fl_run_backward a forward one, with
 * the rule. flash_ladder.attention is differentiable through them (python/README.md).
 *
 * Serving: a K/V cache with a length per sequence, paged or not (seqlens_k, block_table and
 * page_size, the last fields of fl_attention_params), is for rungs 39 on; from PyTorch,
 * flash_ladder.attention_with_kvcache (shaped like FlashAttention's flash_attn_with_kvcache).
 */
#ifndef FLASH_LADDER_FL_API_H_
#define FLASH_LADDER_FL_API_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define FL_API __declspec(dllexport)
#else
#define FL_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of fl_run (fl_supports returns 1 / 0, see below). */
enum {
  FL_OK = 0,
  FL_UNSUPPORTED = 1,    /* the kernel does not support these parameters (message says why) */
  FL_CUDA_ERROR = 2,     /* a CUDA or cuBLAS call failed (message names it) */
  FL_NO_SUCH_KERNEL = 3, /* no kernel with that number was built */
  FL_INTERNAL_ERROR = 4  /* anything else */
};

/* The attention problem, field for field fl::AttnParams (common/attention.h).
 *   O[b, h, i, :] = softmax_j(scale * Q[b, h, i, :] . K[b, h / G, j, :]) . V[b, h / G, j, :]
 * with G = heads_q / heads_kv. Strides are in elements. The head dimension must be contiguous:
 * every x_stride_dim must be 1 (a zero-initialised struct is refused until they are set). They
 * come after the older fields so that those keep their places; the fields of e4m3 inputs come
 * last, for the same reason.
 *
 * e4m3 inputs (dtype 2, OCP FP8 e4m3: the kernels that take them, rung 28, take nothing else):
 * out_dtype is O's type (0 = fp16, 1 = bf16), and the descale factors give back the caller's
 * values, x = e4m3 * descale: HOST pointers (read during the call), one float per tensor, or with
 * descale_per_head = 1 one per (batch, head): q_descale[b * heads_q + h],
 * k_descale[b * heads_kv + h], v_descale[b * heads_kv + h]; every factor finite and > 0. For fp16
 * and bf16 inputs out_dtype must equal dtype (O has the inputs' type) and the descale pointers
 * must be NULL (descale_per_head 0).
 *
 * workspace, workspace_bytes (last, for the same reason): scratch device memory for a forward
 * rung that needs it (the split-key decode keeps its partial outputs there), 256-byte aligned,
 * at least fl_workspace_size's answer for the rung and the sizes; NULL with 0 for every rung that
 * needs none (fl_workspace_size answers 0). Its contents on entry do not matter and the call owns
 * it until the stream has reached the call's end. A backward call (fl_backward_params) leaves
 * them NULL and 0: its scratch has fields of its own.
 *
 * seqlens_k, block_table, block_table_stride, page_size (last, for the same reason): a K/V cache,
 * for decode. All NULL and 0 (a zero-initialised struct): every sequence has seqlen_k keys, and
 * K and V are the tensors the strides describe, [B, heads_kv, Nk, d] by default. Only a rung
 * that takes a K/V cache runs a call that sets them (39 and 40; fl_supports gives every other
 * rung's refusal, and FL_KERNEL_BEST picks among those that take it). Both pointers are DEVICE
 * memory, int32, 4-byte aligned, the caller's: read by the kernel while it runs, so they must
 * hold their values until the stream reaches the call's end (a CUDA graph may change them in
 * place between replays).
 *   seqlens_k: [B], or NULL. Sequence b has seqlens_k[b] keys, its first ones: key j for
 *     0 <= j < seqlens_k[b]; seqlen_k is then the capacity, and 0 <= seqlens_k[b] <= seqlen_k.
 *     The values are not checked (the host cannot read them without a synchronisation): one
 *     outside [0, seqlen_k] is the caller's undefined behaviour, as in FlashAttention; the kernel
 *     clamps it to [0, seqlen_k], so that nothing is read out of bounds. A sequence of 0 keys
 *     sees none: O = 0 and LSE = -inf for its rows. Causal is bottom-right per sequence: query
 *     i of sequence b sees key j iff j <= i + seqlens_k[b] - seqlen_q. NULL: seqlen_k keys each.
 *   block_table: [B][block_table_stride] page numbers, or NULL (then block_table_stride and
 *     page_size must be 0). Set, k and v point at page pools [num_pages, page_size, heads_kv, d]:
 *     key j of sequence b is row j % page_size of page block_table[b * block_table_stride +
 *     j / page_size]. k_stride_batch is then the stride between pages, k_stride_row between the
 *     rows of a page and k_stride_head between heads (likewise v's), in elements; a contiguous
 *     pool has page_size * heads_kv * d, heads_kv * d and d. page_size: keys a page, a multiple
 *     of 16 (>= 16; rungs 39 and 40 take every such size); seqlen_k: the capacity, at most a row's
 *     pages times page_size, and block_table_stride >= ceil(seqlen_k / page_size). The page
 *     numbers are device data too, not checked: each of the pages a sequence's keys reach must
 *     be a page of the pool (0 <= n < num_pages; the pool's size is not a field). Pages may be
 *     in any order and shared between sequences.
 * A backward call leaves all four NULL and 0 (the backward takes no K/V cache). */
typedef struct fl_attention_params {
  int dtype;                /* Q, K, V: 0 = fp16, 1 = bf16, 2 = e4m3 */
  int64_t batch;            /* B */
  int64_t heads_q;          /* H_q */
  int64_t heads_kv;         /* H_kv; H_q must be a multiple of it */
  int64_t seqlen_q;         /* Nq */
  int64_t seqlen_k;         /* Nk */
  int64_t head_dim;         /* d */
  int causal;               /* 0 or 1 (bottom-right aligned when Nq != Nk) */
  float softmax_scale;      /* usually 1 / sqrt(d); must be > 0 */
  const void* q;            /* device pointers, 16-byte aligned */
  const void* k;
  const void* v;
  void* o;
  float* lse;               /* optional [B, H_q, Nq] fp32 log-sum-exp output, or NULL */
  int64_t q_stride_batch, q_stride_head, q_stride_row;
  int64_t k_stride_batch, k_stride_head, k_stride_row;
  int64_t v_stride_batch, v_stride_head, v_stride_row;
  int64_t o_stride_batch, o_stride_head, o_stride_row;
  int64_t q_stride_dim, k_stride_dim, v_stride_dim, o_stride_dim; /* head dimension: must be 1 */
  int out_dtype;            /* O: 0 = fp16, 1 = bf16; equal to dtype for fp16/bf16 inputs */
  const float* q_descale;   /* e4m3 inputs: host descale factors (see above); else NULL */
  const float* k_descale;
  const float* v_descale;
  int descale_per_head;     /* 0: one factor per tensor; 1: one per (batch, head) */
  void* workspace;          /* a forward rung's scratch (see above), or NULL */
  int64_t workspace_bytes;  /* its size in bytes, or 0 */
  const int32_t* seqlens_k;   /* a K/V cache (see above): device [B] key counts, or NULL */
  const int32_t* block_table; /* device [B][block_table_stride] page numbers, or NULL */
  int64_t block_table_stride; /* elements between rows of block_table (0 without one) */
  int64_t page_size;          /* keys a page of the pools k and v (0 without a block table) */
} fl_attention_params;

/* sizeof(fl_attention_params), to check a foreign-language mirror of the struct. */
FL_API size_t fl_params_size(void);

/* Fills the 16 strides for contiguous [B, H, N, d] tensors from the sizes in *p. */
FL_API void fl_set_contiguous_strides(fl_attention_params* p);

/* The kernels the build compiled, both ops, sorted by number; index runs over
 * 0 .. fl_num_kernels() - 1. */
FL_API int fl_num_kernels(void);
FL_API int fl_kernel_number(int index);        /* 3, or -1 when index is out of range */
FL_API const char* fl_kernel_name(int index);  /* "03_mma", or NULL */
FL_API const char* fl_kernel_title(int index); /* the idea the rung adds, or NULL */
/* What a rung computes (fl_kernel_op): O and the LSE, through fl_run, or dQ, dK, dV, through
 * fl_run_backward. */
enum { FL_OP_FORWARD = 0, FL_OP_BACKWARD = 1 };
FL_API int fl_kernel_op(int index); /* FL_OP_FORWARD, FL_OP_BACKWARD, or -1 out of range */

/* The kernel number "best" stands for, in fl_supports and fl_run: the fastest kernel that can run
 * *p on the current device, which is the one with the highest number (the ladder's order is its
 * order of speed). On compute capability 9.0: rung 27 for every fp16/bf16 call (rungs 17-23 take
 * d = 128, lengths that are multiples of 128, non-causal; rungs 24-27 the whole contract), rung
 * 28 for e4m3 inputs; on other GPUs rung 16 for the whole contract. Decode calls the serving
 * rungs take (37 and up, compute capability 8.0 and up: Nq x heads_q / heads_kv <= 64, d = 64,
 * 96, 128 or 192) go to the highest of them, and a call with a K/V cache (seqlens_k or
 * block_table) to the highest rung that takes one (40; 39 takes it too). In the backward's
 * calls (fl_run_backward, ...) it stands for the highest-numbered backward rung that takes the
 * call. */
#define FL_KERNEL_BEST (-1)

/* The number of the forward kernel FL_KERNEL_BEST picks for *p on the current device, or -1 when
 * no kernel can run it (why then gets every forward kernel's reason, truncated to why_len). */
FL_API int fl_best_kernel(const fl_attention_params* p, char* why, size_t why_len);

/* 1 when kernel `number` can run *p on the current device, 0 when not (why gets the reason,
 * naming the kernel and the rule broken; why may be NULL). The pointers must be set: the
 * alignment rules are checked too. */
FL_API int fl_supports(int number, const fl_attention_params* p, char* why, size_t why_len);

/* The bytes of workspace forward kernel `number` needs for a call of these sizes (dtype, batch,
 * heads, lengths, head_dim and causal of *p are read, and the current device's SM count: the
 * split-key decode splits by it; its pointers and strides are not, but for a K/V cache the
 * fields seqlens_k, block_table (whether they are set, never what they point at),
 * block_table_stride and page_size are: a cache is for rungs 39 on), or -1 with the reason in why
 * (no such kernel, a backward rung, sizes the kernel refuses). FL_KERNEL_BEST answers for the
 * kernel fl_best_kernel would pick for contiguous tensors (page pools with a block table) of
 * these sizes; a caller that has its tensors asks fl_best_kernel first and passes that number.
 * 0: the kernel needs no workspace. The answer never depends on the cache's lengths (device
 * data): one workspace serves every call of the same sizes, in a CUDA graph too. */
FL_API int64_t fl_workspace_size(int number, const fl_attention_params* p, char* why,
                                 size_t why_len);

/* Checks *p, then enqueues kernel `number` on `stream` (a cudaStream_t, NULL = default stream).
 * Returns FL_OK, or one of the codes above with the message in err (NUL-terminated, truncated
 * to err_len; err may be NULL). Errors of the running kernel surface at the next synchronisation,
 * as with any CUDA launch. */
FL_API int fl_run(int number, const fl_attention_params* p, void* stream, char* err,
                  size_t err_len);

/* ---------------------------------------------------------------------------------------------
 * The backward. With S = scale Q K^T, P = exp(S - LSE) (recomputed from the forward's LSE) and
 * D = rowsum(dO * O), per head:
 *   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dQ = scale dS K,  dK = scale dS^T Q.
 * Grouped-query attention: dK and dV are per KV head, [B, heads_kv, Nk, d], each the sum over the
 * heads_q / heads_kv query heads that share it (never an expanded tensor). Causal as the forward:
 * a row that sees no key (LSE = -inf, O = 0) contributes nothing.
 *
 * The backward rungs take fp16 and bf16 inputs (not e4m3); each says which sizes it takes
 * (fl_supports_backward gives the rule a call breaks). A backward call is enqueued on the stream
 * like a forward one and never allocates: the scratch it needs (fp32 dQ accumulator, D, ...) is
 * the caller's buffer, `workspace`. What the workspace holds is the kernel's business; its size is
 * fl_backward_workspace_size's answer for the kernel and the sizes, its contents on entry do not
 * matter, and the call owns it until the stream has reached the call's end (a buffer from a
 * caching allocator, freed after the call on the same stream, is fine).
 * --------------------------------------------------------------------------------------------- */

/* The backward problem, field for field fl::BwdParams (common/attention.h). fwd is the forward's
 * call: Q, K, V, sizes, causal, scale, and, both required here as inputs, o (the forward's O) and
 * lse (its fp32 [B, heads_q, Nq] log-sum-exp, contiguous). dO and dQ are shaped like Q
 * ([B, heads_q, Nq, d]), dK and dV like K and V ([B, heads_kv, Nk, d]), in the inputs' dtype, by
 * the rules of Q, K, V (16-byte aligned, head-dimension stride 1, strides multiples of 8
 * elements). Strides in elements, the head-dimension ones after the others as in
 * fl_attention_params. workspace: device memory, 256-byte aligned, of workspace_bytes >= the size
 * fl_backward_workspace_size reports (NULL with 0 when that is 0). */
typedef struct fl_backward_params {
  fl_attention_params fwd;  /* the forward's call, o and lse included */
  const void* dout;         /* dO = dLoss/dO, device pointers as in fwd */
  void* dq;                 /* written: dQ */
  void* dk;                 /* written: dK, summed over each KV head's query heads */
  void* dv;                 /* written: dV, likewise */
  int64_t do_stride_batch, do_stride_head, do_stride_row;
  int64_t dq_stride_batch, dq_stride_head, dq_stride_row;
  int64_t dk_stride_batch, dk_stride_head, dk_stride_row;
  int64_t dv_stride_batch, dv_stride_head, dv_stride_row;
  int64_t do_stride_dim, dq_stride_dim, dk_stride_dim, dv_stride_dim; /* must be 1 */
  void* workspace;          /* the kernel's scratch (see above) */
  int64_t workspace_bytes;  /* its size in bytes */
} fl_backward_params;

/* sizeof(fl_backward_params), to check a foreign-language mirror of the struct. */
FL_API size_t fl_backward_params_size(void);

/* Fills the strides of fwd (fl_set_contiguous_strides) and the 16 of dO, dQ, dK, dV for
 * contiguous [B, H, N, d] tensors, from the sizes in b->fwd. */
FL_API void fl_set_contiguous_backward_strides(fl_backward_params* b);

/* The bytes of workspace backward rung `number` needs for the backward of a call of these sizes
 * (dtype, batch, heads, lengths, head_dim and causal of *p are read; its pointers and strides are
 * not), or -1 with the reason in why (no such kernel, a forward rung, sizes that break a rule).
 * FL_KERNEL_BEST answers for the rung fl_best_backward_kernel would pick for contiguous tensors of
 * these sizes (-1 with every rung's reason when none takes them); a caller that has its tensors
 * asks fl_best_backward_kernel first and passes that number here. 0 is a valid answer: that rung
 * needs no workspace. */
FL_API int64_t fl_backward_workspace_size(int number, const fl_attention_params* p, char* why,
                                          size_t why_len);

/* The number of the backward rung FL_KERNEL_BEST picks for *b on the current device (the highest
 * numbered Hopper rung, 33-36, that takes the call, else the highest numbered mma.sync rung, 29-32,
 * 41-45 and 54-55; the workspace is not judged: size it for the rung this returns), or -1 when
 * none can (why gets every backward rung's reason). */
FL_API int fl_best_backward_kernel(const fl_backward_params* b, char* why, size_t why_len);

/* 1 when backward rung `number` can run *b on the current device, the workspace's size included,
 * 0 when not (why gets the reason, naming the kernel and the rule; why may be NULL). */
FL_API int fl_supports_backward(int number, const fl_backward_params* b, char* why,
                                size_t why_len);

/* Checks *b, then enqueues backward rung `number` (FL_KERNEL_BEST: fl_best_backward_kernel's) on
 * `stream` (a cudaStream_t, NULL = the default stream). Return codes and err as fl_run's: a
 * forward rung, sizes no backward rung takes, or a workspace smaller than
 * fl_backward_workspace_size's answer give FL_UNSUPPORTED with the rule. Allocates nothing. */
FL_API int fl_run_backward(int number, const fl_backward_params* b, void* stream, char* err,
                           size_t err_len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLASH_LADDER_FL_API_H_ */
