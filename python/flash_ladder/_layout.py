"""Argument checks, layouts and strides for flash_ladder.attention, on plain tuples: a tensor is
described by TensorSpec(shape, stride, dtype name, device string), so that all of this runs (and is
tested) without torch. _ops.py turns torch tensors into TensorSpecs and calls check_call.
"""
import math
from collections import namedtuple

from ._capi import DIM_STRIDE_FIELDS, DTYPE_CODES, FL_E4M3, STRIDE_FIELDS

TensorSpec = namedtuple("TensorSpec", "shape stride dtype device")
TensorSpec.__doc__ = ("A tensor as the checks see it: shape and stride (tuples of ints, strides in "
                      "elements), dtype name ('float16', 'bfloat16', ...) and device ('cuda:0').")

# For each layout, the tensor dimension that holds (batch, head, row, head_dim).
LAYOUTS = {
    "bhnd": (0, 1, 2, 3),  # [B, H, N, d]: what scaled_dot_product_attention takes
    "bnhd": (0, 2, 1, 3),  # [B, N, H, d]: what flash_attn_func takes, a projection's view
}
LAYOUT_SHAPES = {"bhnd": "[B, H, N, d]", "bnhd": "[B, N, H, d]"}

BEST = -1  # the op's kernel argument for "best"
E4M3 = "float8_e4m3fn"  # torch's name of OCP FP8 e4m3, the FP8 rung's input type

Problem = namedtuple("Problem", "dtype_code batch heads_q heads_kv seqlen_q seqlen_k head_dim "
                                "causal softmax_scale strides out_shape lse_shape")
Problem.__doc__ = ("A checked call: the sizes, the scale (None: 1 / sqrt(d)), strides "
                   "{'q','k','v','o': (batch, head, row, dim)} in elements, the shape of O (q's) "
                   "and of the LSE ([B, H_q, Nq]).")


def _fail(msg, exc=ValueError):
    raise exc(f"flash_ladder.attention: {msg}")


def kernel_arg(kernel, name="kernel"):
    """attention()'s kernel argument (or backward_kernel, by `name`) as the op's int: a rung number
    (>= 0) as it is, "best" -> -1. Whether the build has that rung is the library's to say (with
    the list of those built)."""
    if isinstance(kernel, str):
        if kernel == "best":
            return BEST
        _fail(f'{name} must be a rung number or "best", got {kernel!r}')
    if isinstance(kernel, bool) or not isinstance(kernel, int):
        _fail(f'{name} must be a rung number or "best", got {kernel!r}', TypeError)
    if kernel < 0:
        _fail(f'{name} must be a rung number or "best" (rungs are numbered from 0), got {kernel}')
    return kernel


def check_options(causal, scale, return_lse, layout):
    """The arguments attention() takes besides the tensors and the kernel."""
    if not isinstance(causal, bool):
        _fail(f"causal must be a bool, got {causal!r}", TypeError)
    if not isinstance(return_lse, bool):
        _fail(f"return_lse must be a bool, got {return_lse!r}", TypeError)
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        _fail(f"scale must be a number or None, got {scale!r}", TypeError)
    check_layout(layout)


def check_layout(layout):
    if not isinstance(layout, str) or layout not in LAYOUTS:
        _fail(f"layout must be one of {', '.join(repr(x) for x in LAYOUTS)}, got {layout!r}")
    return LAYOUTS[layout]


def contiguous_strides(shape):
    """Row-major strides of a dense tensor of this shape."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step = step * (size if size > 1 else 1)
    return tuple(reversed(strides))


def normalized_strides(shape, stride):
    """stride, with each dimension of size 1 given its dense value: such a stride never moves the
    address (torch leaves it arbitrary, e.g. 1), but the library checks every stride."""
    dense = contiguous_strides(shape)
    return tuple(d if n == 1 else s for n, s, d in zip(shape, stride, dense))


def layout_strides(shape, stride, layout):
    """(batch, head, row, dim) strides in elements of a tensor in `layout`."""
    dims = check_layout(layout)
    s = normalized_strides(shape, stride)
    return tuple(s[i] for i in dims)


def layout_sizes(shape, layout):
    """(B, H, N, d) of a tensor in `layout`."""
    dims = check_layout(layout)
    return tuple(shape[i] for i in dims)


def check_call(q, k, v, *, causal=False, scale=None, layout="bhnd", allow_meta=False,
               allow_e4m3=False):
    """Checks attention()'s arguments (TensorSpecs for q, k, v) and returns the Problem. Raises
    ValueError / TypeError naming the argument and the rule. What only the library knows (the
    sizes and strides each kernel takes, 16-byte alignment, the GPU) it checks itself, at the
    call, and says why. allow_e4m3: float8_e4m3fn inputs too (the FP8 call; its descale factors
    are checked by check_descales)."""
    dims = check_layout(layout)
    names = ("q", "k", "v")
    specs = (q, k, v)
    for name, t in zip(names, specs):
        if len(t.shape) != 4:
            _fail(f"{name} must be 4-D, {LAYOUT_SHAPES[layout]} (layout={layout!r}), got "
                  f"shape {tuple(t.shape)}")
    for name, t in zip(names, specs):
        if t.dtype not in DTYPE_CODES and not (allow_e4m3 and t.dtype == E4M3):
            _fail(f"{name} must be float16 or bfloat16{' or float8_e4m3fn' if allow_e4m3 else ''}"
                  f", got {t.dtype}", TypeError)
    if not q.dtype == k.dtype == v.dtype:
        _fail(f"q, k and v must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}",
              TypeError)
    for name, t in zip(names, specs):
        kind = str(t.device).split(":")[0]
        if kind != "cuda" and not (allow_meta and kind == "meta"):
            _fail(f"{name} must be on a CUDA device, got {t.device}")
    if not q.device == k.device == v.device:
        _fail(f"q, k and v must be on the same device, got {q.device}, {k.device}, {v.device}")
    check_options(causal, scale, False, layout)

    bq, hq, nq, dq = layout_sizes(q.shape, layout)
    bk, hk, nk, dk = layout_sizes(k.shape, layout)
    if tuple(k.shape) != tuple(v.shape):
        _fail(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if bk != bq:
        _fail(f"q and k must have the same batch size, got {bq} and {bk} "
              f"(layout {layout!r} is {LAYOUT_SHAPES[layout]})")
    if dk != dq:
        _fail(f"q, k and v must have the same head dimension, got {dq} and {dk} "
              f"(layout {layout!r} is {LAYOUT_SHAPES[layout]})")
    if hk < 1 or hq % hk != 0:
        _fail(f"q's heads ({hq}) must be a multiple of k's and v's ({hk}) (grouped-query "
              f"attention; layout {layout!r} is {LAYOUT_SHAPES[layout]})")

    strides = {}
    for name, t in zip(names, specs):
        st = normalized_strides(t.shape, t.stride)
        if st[3] != 1:
            _fail(f"{name}'s last dimension (the head dimension) must be contiguous, got strides "
                  f"{tuple(t.stride)}: pass {name}.contiguous(), or a view whose last stride is 1")
        strides[name] = tuple(st[i] for i in dims)
    out_shape = tuple(q.shape)
    o = contiguous_strides(out_shape)
    strides["o"] = tuple(o[i] for i in dims)
    return Problem(dtype_code=FL_E4M3 if q.dtype == E4M3 else DTYPE_CODES[q.dtype], batch=bq,
                   heads_q=hq, heads_kv=hk,
                   seqlen_q=nq, seqlen_k=nk, head_dim=dq, causal=causal,
                   softmax_scale=None if scale is None else float(scale),
                   strides=strides, out_shape=out_shape, lse_shape=(bq, hq, nq))


def default_scale(head_dim):
    """1 / sqrt(d), the scale when none is given."""
    return 1.0 / math.sqrt(head_dim) if head_dim > 0 else 1.0


def check_descales(problem, q_descale, k_descale, v_descale):
    """The descale factors of an e4m3 call (x = e4m3 value * descale): each a sequence of floats,
    one (per tensor) or, for all three at once, B x H_q for q and B x H_kv for k and v (per batch
    and head, b-major). Returns (q, k, v lists, per_head). The library checks that every factor
    is finite and > 0."""
    lists = []
    for name, d in (("q_descale", q_descale), ("k_descale", k_descale), ("v_descale", v_descale)):
        if d is None or len(d) == 0:
            _fail(f"float8_e4m3fn inputs need {name} (x = e4m3 * descale)")
        lists.append([float(x) for x in d])
    per_head = (len(lists[0]) == problem.batch * problem.heads_q
                and len(lists[1]) == len(lists[2]) == problem.batch * problem.heads_kv)
    per_tensor = all(len(x) == 1 for x in lists)
    if not (per_tensor or per_head):
        _fail(f"descale factors: one a tensor, or B x H_q = {problem.batch * problem.heads_q} for "
              f"q and B x H_kv = {problem.batch * problem.heads_kv} for k and v; got "
              f"{len(lists[0])}, {len(lists[1])}, {len(lists[2])}")
    return lists[0], lists[1], lists[2], per_head and not per_tensor


def params_fields(problem, out_dtype_code=None):
    """The fields of fl_attention_params (_capi.Params) for a Problem, pointers left out. O's type:
    the inputs' (fp16/bf16), or out_dtype_code (0 fp16, 1 bf16) for e4m3 inputs."""
    out = problem.dtype_code if out_dtype_code is None else out_dtype_code
    fields = dict(dtype=problem.dtype_code, out_dtype=out,
                  batch=problem.batch, heads_q=problem.heads_q,
                  heads_kv=problem.heads_kv, seqlen_q=problem.seqlen_q,
                  seqlen_k=problem.seqlen_k, head_dim=problem.head_dim,
                  causal=int(problem.causal),
                  softmax_scale=(default_scale(problem.head_dim) if problem.softmax_scale is None
                                 else problem.softmax_scale))
    it = iter(STRIDE_FIELDS)
    for name in "qkvo":
        b, h, r, d = problem.strides[name]
        for value in (b, h, r):
            fields[next(it)] = value
        fields[f"{name}_stride_dim"] = d
    assert set(DIM_STRIDE_FIELDS) <= set(fields)
    return fields


# ------------------------------------------------------------------------------------------------
# The backward
# ------------------------------------------------------------------------------------------------
def _fail_backward(msg, exc=ValueError):
    raise exc(f"flash_ladder.attention backward: {msg}")


def readable_by_the_kernels(shape, stride, layout, ptr, elem_bytes=2):
    """True when a tensor in `layout` meets the library's rule on every tensor it reads
    (check_tensor, common/attention.cpp): head-dimension stride 1, strides >= 0, rows at least d
    apart, batch, head and row strides multiples of 16 bytes, the pointer 16-byte aligned."""
    b, h, r, dim = layout_strides(shape, stride, layout)
    _, _, n, d = layout_sizes(shape, layout)
    per16 = 16 // elem_bytes
    return (dim == 1 and min(b, h, r) >= 0 and (n <= 1 or r >= d)
            and all(x % per16 == 0 for x in (b, h, r)) and ptr % 16 == 0)


def check_backward_call(q, k, v, o, lse, dout, *, causal=False, scale=None, layout="bhnd",
                        allow_meta=False):
    """Checks the backward's arguments (TensorSpecs: q, k, v as the forward took them, o and lse
    as it returned them, dout = dLoss/dO) and returns the Problem, its strides with those of O
    ('o', as o has them), dO ('do'), and of the gradients the op returns ('dq', 'dk', 'dv':
    contiguous tensors of q's, k's and v's shapes in `layout`). Raises ValueError / TypeError
    naming the argument and the rule."""
    problem = check_call(q, k, v, causal=causal, scale=scale, layout=layout,
                         allow_meta=allow_meta)
    for name, t in (("o", o), ("dout", dout)):
        if tuple(t.shape) != tuple(q.shape) or t.dtype != q.dtype:
            _fail_backward(f"{name} must have q's shape and dtype {tuple(q.shape)} {q.dtype} "
                           f"(the forward's O and dLoss/dO), got {tuple(t.shape)} {t.dtype}")
    if (tuple(lse.shape) != problem.lse_shape or lse.dtype != "float32"
            or normalized_strides(lse.shape, lse.stride) != contiguous_strides(lse.shape)):
        _fail_backward(f"lse must be the forward's LSE, a contiguous float32 tensor of shape "
                       f"{problem.lse_shape}, got {tuple(lse.shape)} {lse.dtype} strides "
                       f"{tuple(lse.stride)}")
    for name, t in (("o", o), ("dout", dout), ("lse", lse)):
        if t.device != q.device:
            _fail_backward(f"{name} must be on q's device ({q.device}), got {t.device}")
    dims = check_layout(layout)
    strides = dict(problem.strides)
    strides["o"] = layout_strides(o.shape, o.stride, layout)
    strides["do"] = layout_strides(dout.shape, dout.stride, layout)
    for name, shape in (("dq", q.shape), ("dk", k.shape), ("dv", v.shape)):
        dense = contiguous_strides(tuple(shape))
        strides[name] = tuple(dense[i] for i in dims)
    return problem._replace(strides=strides)


def backward_fields(problem):
    """The fields of fl_backward_params (_capi.BackwardParams) past `fwd`, for a Problem from
    check_backward_call: the strides of dO, dQ, dK, dV (pointers and the workspace left out)."""
    fields = {}
    for name in ("do", "dq", "dk", "dv"):
        b, h, r, d = problem.strides[name]
        fields.update({f"{name}_stride_batch": b, f"{name}_stride_head": h,
                       f"{name}_stride_row": r, f"{name}_stride_dim": d})
    return fields


# ------------------------------------------------------------------------------------------------
# The K/V cache (attention_with_kvcache)
# ------------------------------------------------------------------------------------------------
KvCacheProblem = namedtuple("KvCacheProblem", "problem paged page_size block_table_stride "
                                              "num_pages")
KvCacheProblem.__doc__ = (
    "A checked attention_with_kvcache call: the Problem (q, k, v in the bnhd layout; seqlen_k the "
    "cache's capacity), whether the cache is paged, and with a block table the page size, the "
    "table's row stride in elements and the pool's pages (0 and 0 and the batch without one).")

KV_CACHE_SHAPES = ("k_cache and v_cache are [B, Nk_max, H_kv, d] without a block table and page "
                   "pools [num_pages, page_size, H_kv, d] with one")


def _fail_kv(msg, exc=ValueError):
    raise exc(f"flash_ladder.attention_with_kvcache: {msg}")


def _on_device(name, t, device, allow_meta):
    kind = str(t.device).split(":")[0]
    if kind != "cuda" and not (allow_meta and kind == "meta"):
        _fail_kv(f"{name} must be on a CUDA device, got {t.device}")
    if str(t.device) != str(device):
        _fail_kv(f"{name} must be on q's device ({device}), got {t.device}")


def check_cache_seqlens_int(n, capacity):
    """An int cache_seqlens (every sequence that long): 0 <= n <= the cache's capacity."""
    if isinstance(n, bool) or not isinstance(n, int):
        _fail_kv(f"cache_seqlens must be an int32 tensor [B], an int or None, got "
                 f"{type(n).__name__}", TypeError)
    if not 0 <= n <= capacity:
        _fail_kv(f"cache_seqlens must be in [0, {capacity}] (the cache holds {capacity} keys a "
                 f"sequence), got {n}")
    return n


def check_kv_append(kv, k_cache, k, v, has_lengths, length_int=None):
    """Checks the new keys and values of a call that appends them (FlashAttention's k=, v=):
    TensorSpecs k and v [B, N_new, H_kv, d] of k_cache's dtype and device, N_new >= 1 and at most
    the cache's capacity, both given or neither, and cache_seqlens given (where each sequence's
    new keys go); with an int cache_seqlens (length_int), that length and N_new within the
    capacity. kv is the checked KvCacheProblem. Returns N_new (0 without them)."""
    if (k is None) != (v is None):
        _fail_kv("k and v (the new keys and values) go together: give both or neither")
    if k is None:
        return 0
    p = kv.problem
    want = f"[B, N_new, H_kv, d] = [{p.batch}, N_new >= 1, {p.heads_kv}, {p.head_dim}]"
    for name, t in (("k", k), ("v", v)):
        shape = tuple(t.shape)
        if len(shape) != 4 or shape[0] != p.batch or shape[2] != p.heads_kv or \
                shape[3] != p.head_dim or shape[1] < 1:
            _fail_kv(f"{name} must be {want}, got {shape}")
        if t.dtype != k_cache.dtype:
            _fail_kv(f"{name} must have k_cache's dtype ({k_cache.dtype}), got {t.dtype}",
                     TypeError)
        if str(t.device) != str(k_cache.device):
            _fail_kv(f"{name} must be on k_cache's device ({k_cache.device}), got {t.device}")
    if tuple(k.shape) != tuple(v.shape):
        _fail_kv(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if not has_lengths:
        _fail_kv("appending k and v needs cache_seqlens: each sequence's new keys go after its "
                 "first cache_seqlens[b]")
    if k.shape[1] > p.seqlen_k:
        _fail_kv(f"k and v hold {k.shape[1]} new keys a sequence, more than the cache's "
                 f"capacity ({p.seqlen_k})")
    if length_int is not None and length_int + k.shape[1] > p.seqlen_k:
        _fail_kv(f"cache_seqlens ({length_int}) and the {k.shape[1]} new keys of k and v must "
                 f"fit the cache's capacity ({p.seqlen_k})")
    return k.shape[1]


def check_kvcache_call(q, k_cache, v_cache, cache_seqlens=None, block_table=None, *,
                       causal=True, scale=None, allow_meta=False):
    """Checks attention_with_kvcache's arguments (TensorSpecs; cache_seqlens and block_table may
    be None) and returns the KvCacheProblem. q is [B, Nq, H_q, d]; without block_table, k_cache
    and v_cache are [B, Nk_max, H_kv, d]; with it, page pools [num_pages, page_size, H_kv, d] and
    block_table an int32 [B, max_pages] table whose rows are contiguous (the capacity is then
    max_pages x page_size); cache_seqlens an int32 [B] contiguous tensor. Every tensor on q's
    device. Raises ValueError / TypeError naming the argument and the rule. The values of
    cache_seqlens and block_table are device data, never read here; what only the library knows
    (the rungs' own page rules, 16-byte alignment, the GPU) it checks at the call."""
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if len(t.shape) != 4:
            what = "[B, Nq, H_q, d]" if name == "q" else KV_CACHE_SHAPES
            _fail_kv(f"{name} must be 4-D ({what}), got shape {tuple(t.shape)}")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dtype not in DTYPE_CODES:
            _fail_kv(f"{name} must be float16 or bfloat16, got {t.dtype}", TypeError)
    if not q.dtype == k_cache.dtype == v_cache.dtype:
        _fail_kv(f"q, k_cache and v_cache must have the same dtype, got {q.dtype}, "
                 f"{k_cache.dtype}, {v_cache.dtype}", TypeError)
    kind = str(q.device).split(":")[0]
    if kind != "cuda" and not (allow_meta and kind == "meta"):
        _fail_kv(f"q must be on a CUDA device, got {q.device}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("block_table", block_table),
                    ("cache_seqlens", cache_seqlens)):
        if t is not None:
            _on_device(name, t, q.device, allow_meta)
    if not isinstance(causal, bool):
        _fail_kv(f"causal must be a bool, got {causal!r}", TypeError)
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        _fail_kv(f"softmax_scale must be a number or None, got {scale!r}", TypeError)
    if tuple(k_cache.shape) != tuple(v_cache.shape):
        _fail_kv(f"k_cache and v_cache must have the same shape, got {tuple(k_cache.shape)} and "
                 f"{tuple(v_cache.shape)}")

    b, nq, hq, d = q.shape
    rows_a, rows_b, hk, dk = k_cache.shape
    if dk != d:
        _fail_kv(f"q, k_cache and v_cache must have the same head dimension (the last), got {d} "
                 f"and {dk}")
    if hk < 1 or hq % hk != 0:
        _fail_kv(f"q's heads ({hq}, dimension 2) must be a multiple of k_cache's and v_cache's "
                 f"({hk}) (grouped-query attention)")
    paged = block_table is not None
    if paged:
        if block_table.dtype != "int32":
            _fail_kv(f"block_table must be an int32 tensor, got {block_table.dtype}", TypeError)
        if len(block_table.shape) != 2 or block_table.shape[0] != b:
            _fail_kv(f"block_table must be [B, max_pages] = [{b}, max_pages] (a row of page "
                     f"numbers for each sequence of q), got shape {tuple(block_table.shape)}")
        num_pages, page_size = rows_a, rows_b
        max_pages = block_table.shape[1]
        row_stride, col_stride = normalized_strides(block_table.shape, block_table.stride)
        if col_stride != 1:
            _fail_kv(f"block_table's rows must be contiguous (last stride 1), got strides "
                     f"{tuple(block_table.stride)}: pass block_table.contiguous()")
        if row_stride < max_pages:
            _fail_kv(f"block_table's rows must not overlap (row stride >= max_pages = "
                     f"{max_pages}), got strides {tuple(block_table.stride)}: pass "
                     f"block_table.contiguous()")
        capacity = max_pages * page_size
    else:
        if rows_a != b:
            _fail_kv(f"q and the cache must have the same batch size without a block table "
                     f"({KV_CACHE_SHAPES}), got {b} and {rows_a}")
        num_pages, page_size, row_stride = b, 0, 0
        capacity = rows_b
    if cache_seqlens is not None:
        if cache_seqlens.dtype != "int32":
            _fail_kv(f"cache_seqlens must be an int32 tensor (or an int), got "
                     f"{cache_seqlens.dtype}", TypeError)
        if tuple(cache_seqlens.shape) != (b,):
            _fail_kv(f"cache_seqlens must be [B] = [{b}] (the keys each sequence of q has in "
                     f"the cache), got shape {tuple(cache_seqlens.shape)}")
        if normalized_strides(cache_seqlens.shape, cache_seqlens.stride) != (1,):
            _fail_kv(f"cache_seqlens must be contiguous, got strides "
                     f"{tuple(cache_seqlens.stride)}: pass cache_seqlens.contiguous()")

    strides = {}
    for name, t in (("q", q), ("k", k_cache), ("v", v_cache)):
        st = normalized_strides(t.shape, t.stride)
        if st[3] != 1:
            arg = "q" if name == "q" else f"{name}_cache"
            _fail_kv(f"{arg}'s last dimension (the head dimension) must be contiguous, got "
                     f"strides {tuple(t.stride)}")
        # bnhd: (batch, head, row, dim) are dimensions (0, 2, 1, 3); for a page pool the first
        # is the page, the second the row of a page: k_stride.batch is the stride between pages.
        strides[name] = (st[0], st[2], st[1], st[3])
    o = contiguous_strides(tuple(q.shape))
    strides["o"] = (o[0], o[2], o[1], o[3])
    problem = Problem(dtype_code=DTYPE_CODES[q.dtype], batch=b, heads_q=hq, heads_kv=hk,
                      seqlen_q=nq, seqlen_k=capacity, head_dim=d, causal=causal,
                      softmax_scale=None if scale is None else float(scale), strides=strides,
                      out_shape=tuple(q.shape), lse_shape=(b, hq, nq))
    return KvCacheProblem(problem=problem, paged=paged, page_size=page_size,
                          block_table_stride=row_stride, num_pages=num_pages)


def kvcache_fields(kv):
    """The fields of fl_attention_params for a KvCacheProblem, its pointers (q, k, v, o, lse,
    seqlens_k, block_table) left out."""
    fields = params_fields(kv.problem)
    fields.update(block_table_stride=kv.block_table_stride if kv.paged else 0,
                  page_size=kv.page_size if kv.paged else 0)
    return fields
