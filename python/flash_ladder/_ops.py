"""The torch side: the custom ops flash_ladder::attention and flash_ladder::attention_backward
(torch.library, each with a fake implementation so that torch.compile traces through them), the
autograd formula that joins them (torch.library.register_autograd), and the public attention().
The package imports this module where torch is installed; the rest of the package works without
torch.
"""
import ctypes
from typing import List, Optional, Tuple

import torch

from . import _capi, _layout

if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
    raise ImportError(f"flash_ladder.attention needs torch >= 2.4 (torch.library.custom_op); "
                      f"this is torch {torch.__version__}")

_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def spec(t):
    """A tensor as _layout's checks see it."""
    dtype = _DTYPE_NAMES.get(t.dtype, str(t.dtype).replace("torch.", ""))
    return _layout.TensorSpec(tuple(t.shape), tuple(t.stride()), dtype, str(t.device))


def make_params(q, k, v, o, *, causal=False, scale=None, lse=None, layout="bhnd"):
    """_capi.Params for torch tensors q, k, v and the output o (and the fp32 LSE [B, H_q, Nq], or
    None) in `layout`, strides as they are. Checks the arguments (_layout.check_call); o must have
    q's shape and dtype and a contiguous last dimension."""
    problem = _layout.check_call(spec(q), spec(k), spec(v), causal=causal, scale=scale,
                                 layout=layout)
    if tuple(o.shape) != tuple(q.shape) or o.dtype != q.dtype:
        raise ValueError(f"flash_ladder: o must have q's shape and dtype, got {tuple(o.shape)} "
                         f"{o.dtype} for q {tuple(q.shape)} {q.dtype}")
    o_strides = _layout.layout_strides(tuple(o.shape), tuple(o.stride()), layout)
    problem = problem._replace(strides=dict(problem.strides, o=o_strides))
    if lse is not None and (tuple(lse.shape) != problem.lse_shape or lse.dtype != torch.float32
                            or not lse.is_contiguous()):
        raise ValueError(f"flash_ladder: lse must be a contiguous float32 tensor of shape "
                         f"{problem.lse_shape}, got {tuple(lse.shape)} {lse.dtype}")
    return _capi.Params(**_layout.params_fields(problem), q=q.data_ptr(), k=k.data_ptr(),
                        v=v.data_ptr(), o=o.data_ptr(),
                        lse=None if lse is None else lse.data_ptr())


def make_backward_params(q, k, v, o, lse, dout, dq, dk, dv, *, causal=False, scale=None,
                         layout="bhnd", workspace=None):
    """_capi.BackwardParams for torch tensors: q, k, v as the forward took them, o and lse as it
    returned them, dout = dLoss/dO, and the gradients dq, dk, dv to write (q's, k's and v's shapes
    in `layout`; any strides the library takes), strides as they are. workspace: a uint8 device
    tensor of at least Library.backward_workspace_size's bytes, or None (then none is passed)."""
    problem = _layout.check_backward_call(spec(q), spec(k), spec(v), spec(o), spec(lse),
                                          spec(dout), causal=causal, scale=scale, layout=layout)
    for name, g, like in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
        if tuple(g.shape) != tuple(like.shape) or g.dtype != like.dtype:
            raise ValueError(f"flash_ladder: {name} must have the shape and dtype of "
                             f"{name[1]}, {tuple(like.shape)} {like.dtype}, got "
                             f"{tuple(g.shape)} {g.dtype}")
    strides = dict(problem.strides)
    for name, g in (("dq", dq), ("dk", dk), ("dv", dv)):
        strides[name] = _layout.layout_strides(tuple(g.shape), tuple(g.stride()), layout)
    problem = problem._replace(strides=strides)
    fwd = _capi.Params(**_layout.params_fields(problem), q=q.data_ptr(), k=k.data_ptr(),
                       v=v.data_ptr(), o=o.data_ptr(), lse=lse.data_ptr())
    return _capi.BackwardParams(
        fwd=fwd, **_layout.backward_fields(problem), dout=dout.data_ptr(), dq=dq.data_ptr(),
        dk=dk.data_ptr(), dv=dv.data_ptr(),
        workspace=None if workspace is None else workspace.data_ptr(),
        workspace_bytes=0 if workspace is None else workspace.numel() * workspace.element_size())


def _empty_lse(q):
    return q.new_empty((0,), dtype=torch.float32)


def _run_forward(lib, number, params, device):
    """fl_run on torch's current stream, with the workspace the kernel asks for (the split-key
    decode's partials) from torch's caching allocator: released after the call is enqueued, it
    is reused only by work enqueued later on the same stream, so the call keeps it to its end.
    Capturable in a CUDA graph (the allocation comes from the graph's pool)."""
    size = lib.workspace_size(number, params)
    workspace = torch.empty(size, dtype=torch.uint8, device=device) if size > 0 else None
    if workspace is not None:
        params.workspace, params.workspace_bytes = workspace.data_ptr(), size
    lib.run(number, params, torch.cuda.current_stream(device).cuda_stream)


@torch.library.custom_op("flash_ladder::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  scale: Optional[float], kernel: int, return_lse: bool,
                  layout: str, backward_kernel: int = -1) -> Tuple[torch.Tensor, torch.Tensor]:
    """O (q's shape and layout, contiguous) and the LSE (float32 [B, H_q, Nq]; an empty tensor
    when return_lse is False). kernel: a rung number, or -1 for "best". backward_kernel: the
    backward rung the gradients use (-1: "best"); the backward needs the LSE, so a call whose
    gradients are wanted must ask for it (attention() does)."""
    problem = _layout.check_call(spec(q), spec(k), spec(v), causal=causal, scale=scale,
                                 layout=layout)
    lib = _capi.load_library()
    with torch.cuda.device(q.device):
        o = torch.empty(problem.out_shape, dtype=q.dtype, device=q.device)
        lse = (torch.empty(problem.lse_shape, dtype=torch.float32, device=q.device)
               if return_lse else None)
        params = _capi.Params(**_layout.params_fields(problem), q=q.data_ptr(), k=k.data_ptr(),
                              v=v.data_ptr(), o=o.data_ptr(),
                              lse=None if lse is None else lse.data_ptr())
        number = _capi.best_kernel(lib, params) if kernel == _layout.BEST else kernel
        _run_forward(lib, number, params, q.device)
    return o, (lse if lse is not None else _empty_lse(q))


@_attention_op.register_fake
def _attention_fake(q, k, v, causal, scale, kernel, return_lse, layout, backward_kernel=-1):
    problem = _layout.check_call(spec(q), spec(k), spec(v), causal=causal, scale=scale,
                                 layout=layout, allow_meta=True)
    o = q.new_empty(problem.out_shape)
    lse = q.new_empty(problem.lse_shape, dtype=torch.float32) if return_lse else _empty_lse(q)
    return o, lse


_OUT_DTYPE_CODES = {torch.float16: 0, torch.bfloat16: 1}


@torch.library.custom_op("flash_ladder::attention_fp8", mutates_args=())
def _attention_fp8_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_descale: List[float],
                      k_descale: List[float], v_descale: List[float], out_dtype: torch.dtype,
                      causal: bool, scale: Optional[float], kernel: int, return_lse: bool,
                      layout: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """The forward on float8_e4m3fn q, k, v (x = e4m3 * descale; descales one a tensor or one a
    (batch, head)): O in out_dtype (float16 or bfloat16) and the LSE, as flash_ladder::attention.
    kernel: a rung number, or -1 for "best" (the FP8 rung where the GPU has it)."""
    problem = _layout.check_call(spec(q), spec(k), spec(v), causal=causal, scale=scale,
                                 layout=layout, allow_e4m3=True)
    if q.dtype != torch.float8_e4m3fn:
        raise TypeError(f"flash_ladder.attention: the FP8 call takes float8_e4m3fn inputs, got "
                        f"{q.dtype}")
    if out_dtype not in _OUT_DTYPE_CODES:
        raise TypeError(f"flash_ladder.attention: out_dtype must be torch.float16 or "
                        f"torch.bfloat16, got {out_dtype}")
    qd, kd, vd, per_head = _layout.check_descales(problem, q_descale, k_descale, v_descale)
    # Host arrays, read by the library during the call (it copies them to the GPU then).
    factors = [(ctypes.c_float * len(x))(*x) for x in (qd, kd, vd)]
    lib = _capi.load_library()
    with torch.cuda.device(q.device):
        o = torch.empty(problem.out_shape, dtype=out_dtype, device=q.device)
        lse = (torch.empty(problem.lse_shape, dtype=torch.float32, device=q.device)
               if return_lse else None)
        params = _capi.Params(**_layout.params_fields(problem, _OUT_DTYPE_CODES[out_dtype]),
                              q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(),
                              lse=None if lse is None else lse.data_ptr(),
                              q_descale=factors[0], k_descale=factors[1], v_descale=factors[2],
                              descale_per_head=int(per_head))
        number = _capi.best_kernel(lib, params) if kernel == _layout.BEST else kernel
        _run_forward(lib, number, params, q.device)
    return o, (lse if lse is not None else _empty_lse(q))


@_attention_fp8_op.register_fake
def _attention_fp8_fake(q, k, v, q_descale, k_descale, v_descale, out_dtype, causal, scale,
                        kernel, return_lse, layout):
    problem = _layout.check_call(spec(q), spec(k), spec(v), causal=causal, scale=scale,
                                 layout=layout, allow_meta=True, allow_e4m3=True)
    o = q.new_empty(problem.out_shape, dtype=out_dtype)
    lse = q.new_empty(problem.lse_shape, dtype=torch.float32) if return_lse else _empty_lse(q)
    return o, lse


def _descale_list(name, d):
    """A descale argument as a list of floats: a number, a sequence, or a tensor (any device:
    its values are read on the host)."""
    if d is None:
        return None
    if isinstance(d, torch.Tensor):
        return [float(x) for x in d.detach().float().reshape(-1).cpu().tolist()]
    if isinstance(d, (int, float)):
        return [float(d)]
    try:
        return [float(x) for x in d]
    except TypeError:
        raise TypeError(f"flash_ladder.attention: {name} must be a number, a sequence of numbers "
                        f"or a tensor, got {type(d).__name__}") from None


@torch.library.custom_op("flash_ladder::attention_backward", mutates_args=())
def _attention_backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                           lse: torch.Tensor, dout: torch.Tensor, causal: bool,
                           scale: Optional[float], kernel: int,
                           layout: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV) for dout = dLoss/dO of the forward call (q, k, v, causal, scale, layout) that
    returned o and lse: new contiguous tensors of q's, k's and v's shapes in `layout` (GQA: dK and
    dV per KV head, the query heads of each group summed by the kernel). kernel: a backward rung
    number, or -1 for "best" (the highest-numbered backward rung that takes the call here)."""
    problem = _layout.check_backward_call(spec(q), spec(k), spec(v), spec(o), spec(lse),
                                          spec(dout), causal=causal, scale=scale, layout=layout)
    # dO is the one input autograd hands over as it likes: o.sum() gives an expanded tensor (every
    # stride 0), a slice of O a gradient with gaps. The kernels read a row of dO as 16-byte
    # vectors (check_tensor's rule: head-dimension stride 1, strides multiples of 8 elements, the
    # pointer 16-byte aligned), so a dO that breaks it is copied once here; any other is passed
    # with its strides.
    if not _layout.readable_by_the_kernels(tuple(dout.shape), tuple(dout.stride()), layout,
                                           dout.data_ptr()):
        dout = dout.contiguous()
        problem = problem._replace(strides=dict(
            problem.strides, do=_layout.layout_strides(tuple(dout.shape), tuple(dout.stride()),
                                                       layout)))
    lib = _capi.load_library()
    with torch.cuda.device(q.device):
        dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
        dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
        params = _capi.BackwardParams(
            fwd=_capi.Params(**_layout.params_fields(problem), q=q.data_ptr(), k=k.data_ptr(),
                             v=v.data_ptr(), o=o.data_ptr(), lse=lse.data_ptr()),
            **_layout.backward_fields(problem), dout=dout.data_ptr(), dq=dq.data_ptr(),
            dk=dk.data_ptr(), dv=dv.data_ptr(), workspace=None, workspace_bytes=0)
        number = lib.best_backward(params) if kernel == _layout.BEST else kernel
        # The kernel's scratch, from torch's caching allocator on this device (the library never
        # allocates): freed when this returns, which is safe, as the allocator hands the block to
        # later work on the same stream only, after this call in stream order.
        size = lib.backward_workspace_size(number, params.fwd)
        if size > 0:
            workspace = torch.empty(size, dtype=torch.uint8, device=q.device)
            params.workspace, params.workspace_bytes = workspace.data_ptr(), size
        lib.run_backward(number, params, torch.cuda.current_stream(q.device).cuda_stream)
    return dq, dk, dv


@_attention_backward_op.register_fake
def _attention_backward_fake(q, k, v, o, lse, dout, causal, scale, kernel, layout):
    _layout.check_backward_call(spec(q), spec(k), spec(v), spec(o), spec(lse), spec(dout),
                                causal=causal, scale=scale, layout=layout, allow_meta=True)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


# ------------------------------------------------------------------------------------------------
# Autograd: flash_ladder::attention's gradients are flash_ladder::attention_backward's
# ------------------------------------------------------------------------------------------------
def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale, _kernel, return_lse, layout, backward_kernel = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.scale, ctx.layout = causal, scale, layout
    ctx.backward_kernel, ctx.has_lse = backward_kernel, return_lse
    # The LSE is an output for the caller to read, not to differentiate: no kernel takes dLSE.
    ctx.mark_non_differentiable(lse)


def _backward(ctx, grad_o, _grad_lse):
    q, k, v, o, lse = ctx.saved_tensors
    if not ctx.has_lse:
        raise RuntimeError("flash_ladder.attention backward: the forward was called with "
                           "return_lse=False, and the backward needs its LSE (the op's callers "
                           "ask for it when a gradient is wanted: flash_ladder.attention does)")
    dq, dk, dv = torch.ops.flash_ladder.attention_backward(q, k, v, o, lse, grad_o, ctx.causal,
                                                           ctx.scale, ctx.backward_kernel,
                                                           ctx.layout)
    need = ctx.needs_input_grad
    return (dq if need[0] else None, dk if need[1] else None, dv if need[2] else None,
            None, None, None, None, None, None)


torch.library.register_autograd("flash_ladder::attention", _backward,
                                setup_context=_setup_context)


def attention(q, k, v, *, causal=False, scale=None, kernel="best", return_lse=False,
              layout="bhnd", backward_kernel="best", q_descale=None, k_descale=None,
              v_descale=None, out_dtype=None):
    """softmax(scale · q·kᵀ) · v with a kernel of the ladder; differentiable in q, k and v.

    q: [B, H_q, Nq, d] and k, v: [B, H_kv, Nk, d] (layout="bhnd", as scaled_dot_product_attention
    takes them) or [B, N, H, d] (layout="bnhd", as flash_attn_func takes them): float16 or
    bfloat16 on one CUDA device, any strides with a contiguous last dimension (strides multiples
    of 8 elements, pointers 16-byte aligned: the library says which rule a call breaks). H_q a
    multiple of H_kv: grouped-query attention, query head h reads key/value head h // (H_q/H_kv).
    causal: key j visible to query i when j <= i + Nk - Nq (bottom-right aligned). scale: None for
    1/sqrt(d). kernel: a rung number, or "best" (_capi.best_kernel: the fastest rung that
    supports the call on this GPU, the highest-numbered one that does). Returns O, a new tensor
    of q's shape in the same layout (contiguous), and with return_lse=True also the log-sum-exp,
    float32 [B, H_q, Nq], as (O, LSE).
    The kernel is enqueued on the current CUDA stream.

    Gradients: where q, k or v requires grad (and grad mode is on), the forward also writes the
    LSE, and backward() runs a backward rung (backward_kernel: a rung number, 29 and up, or
    "best") through flash_ladder::attention_backward: dQ, dK, dV of q's, k's and v's shapes (GQA:
    dK and dV per KV head), for the inputs that need them. The LSE output is not differentiable.
    A call no backward rung takes (e4m3, a shape outside every backward rung's contract) raises
    flash_ladder.UnsupportedError in backward(), with each rung's rule.

    FP8: q, k, v of dtype torch.float8_e4m3fn (OCP e4m3) hold x / descale: q_descale, k_descale
    and v_descale give the values back (x = e4m3 * descale), each a number (one factor a tensor)
    or, all three, one factor a (batch, head), b-major: B x H_q for q, B x H_kv for k and v (a
    sequence or a tensor). O is out_dtype (torch.float16, the default, or torch.bfloat16); for
    float16 and bfloat16 inputs O has their dtype (out_dtype, if given, must be it). The FP8
    rung (28) runs it on compute capability 9.0; the call has no gradient, and it is not for
    CUDA graphs (the factors are host values, copied to the GPU at each call).

    Argument errors raise ValueError / TypeError; the library's refusals and failures raise
    flash_ladder.UnsupportedError / CudaError / NoSuchKernelError (FlashLadderError, a
    RuntimeError) with the library's message.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"flash_ladder.attention: {name} must be a torch.Tensor, got "
                            f"{type(t).__name__}")
    _layout.check_options(causal, scale, return_lse, layout)
    number = _layout.kernel_arg(kernel)
    descales = [_descale_list(n, d) for n, d in (("q_descale", q_descale),
                                                 ("k_descale", k_descale),
                                                 ("v_descale", v_descale))]
    if q.dtype == torch.float8_e4m3fn:
        if any(t.requires_grad for t in (q, k, v)):
            raise ValueError("flash_ladder.attention: the FP8 call has no gradient (no backward "
                             "rung takes e4m3 inputs)")
        o, lse = torch.ops.flash_ladder.attention_fp8(
            q, k, v, *[d if d is not None else [] for d in descales],
            torch.float16 if out_dtype is None else out_dtype, causal,
            None if scale is None else float(scale), number, return_lse, layout)
        return (o, lse) if return_lse else o
    if any(d is not None for d in descales):
        raise ValueError(f"flash_ladder.attention: descale factors are for float8_e4m3fn inputs, "
                         f"not {q.dtype}")
    if out_dtype is not None and out_dtype != q.dtype:
        raise ValueError(f"flash_ladder.attention: O has the inputs' dtype for {q.dtype} inputs "
                         f"(out_dtype {out_dtype} is for float8_e4m3fn inputs)")
    backward_number = _layout.kernel_arg(backward_kernel, "backward_kernel")
    # The backward recomputes P from the LSE: the forward writes it whenever a gradient may be
    # asked for (a few bytes a row), and the caller gets it only if it asked.
    wants_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    o, lse = torch.ops.flash_ladder.attention(q, k, v, causal,
                                              None if scale is None else float(scale), number,
                                              return_lse or wants_grad, layout, backward_number)
    return (o, lse) if return_lse else o


# ------------------------------------------------------------------------------------------------
# Serving: attention over a K/V cache (rungs 39 on), flash_ladder::attention_with_kvcache
# ------------------------------------------------------------------------------------------------
def _optional_spec(t):
    return None if t is None else spec(t)


def _kvcache_problem(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale,
                     allow_meta=False):
    return _layout.check_kvcache_call(spec(q), spec(k_cache), spec(v_cache),
                                      _optional_spec(cache_seqlens), _optional_spec(block_table),
                                      causal=causal, scale=scale, allow_meta=allow_meta)


@torch.library.custom_op("flash_ladder::attention_with_kvcache", mutates_args=())
def _attention_with_kvcache_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                               cache_seqlens: Optional[torch.Tensor],
                               block_table: Optional[torch.Tensor], causal: bool,
                               scale: Optional[float], kernel: int,
                               return_lse: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """O ([B, Nq, H_q, d], contiguous) and the LSE (float32 [B, H_q, Nq]; an empty tensor when
    return_lse is False) of q against the K/V cache: cache_seqlens (int32 [B], or None: the whole
    capacity) and block_table (int32 [B, max_pages] into page pools, or None) as
    attention_with_kvcache takes them. kernel: a rung number, or -1 for "best"."""
    kv = _kvcache_problem(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale)
    lib = _capi.load_library()
    with torch.cuda.device(q.device):
        o = torch.empty(kv.problem.out_shape, dtype=q.dtype, device=q.device)
        lse = (torch.empty(kv.problem.lse_shape, dtype=torch.float32, device=q.device)
               if return_lse else None)
        params = _capi.Params(
            **_layout.kvcache_fields(kv), q=q.data_ptr(), k=k_cache.data_ptr(),
            v=v_cache.data_ptr(), o=o.data_ptr(), lse=None if lse is None else lse.data_ptr(),
            seqlens_k=None if cache_seqlens is None else cache_seqlens.data_ptr(),
            block_table=None if block_table is None else block_table.data_ptr())
        number = _capi.best_kernel(lib, params) if kernel == _layout.BEST else kernel
        # The workspace (the split rungs' partials) by the sizes alone, never by the cache's
        # lengths: a CUDA graph captured here replays for any cache_seqlens.
        _run_forward(lib, number, params, q.device)
    return o, (lse if lse is not None else _empty_lse(q))


@_attention_with_kvcache_op.register_fake
def _attention_with_kvcache_fake(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale,
                                 kernel, return_lse):
    kv = _kvcache_problem(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale,
                          allow_meta=True)
    o = q.new_empty(kv.problem.out_shape)
    lse = (q.new_empty(kv.problem.lse_shape, dtype=torch.float32) if return_lse
           else _empty_lse(q))
    return o, lse


def _kvcache_setup_context(ctx, inputs, output):
    ctx.mark_non_differentiable(output[1])


def _kvcache_backward(ctx, grad_o, _grad_lse):
    raise RuntimeError("flash_ladder.attention_with_kvcache has no backward: it is for decode "
                       "and serving, which do not train (no rung computes gradients through a "
                       "K/V cache). For gradients, call flash_ladder.attention on contiguous "
                       "k and v, or call this under torch.no_grad() / torch.inference_mode()")


# Registered so that backward() raises the error above (a custom op with no formula would raise
# torch's generic one, and a plain function none at all).
torch.library.register_autograd("flash_ladder::attention_with_kvcache", _kvcache_backward,
                                setup_context=_kvcache_setup_context)


def _append_kv(k_cache, v_cache, k, v, cache_seqlens, block_table):
    """Writes k and v [B, N_new, H_kv, d] into the cache after each sequence's first
    cache_seqlens[b] keys, in place: rows cache_seqlens[b] .. + N_new - 1 of sequence b (through
    block_table's pages when given). torch's indexing on the device, no host synchronisation: a
    row past the capacity, or a page number past the pool, is a device-side index error; a
    negative one wraps (undefined behaviour, as in FlashAttention)."""
    n_new = k.shape[1]
    pos = cache_seqlens.to(torch.int64).unsqueeze(1) + torch.arange(n_new, device=k.device)
    if block_table is None:
        seq = torch.arange(k.shape[0], device=k.device).unsqueeze(1).expand_as(pos)
        k_cache[seq, pos] = k
        v_cache[seq, pos] = v
    else:
        page_size = k_cache.shape[1]
        page = torch.gather(block_table, 1, pos // page_size).to(torch.int64)
        row = pos % page_size
        k_cache[page, row] = k
        v_cache[page, row] = v


def attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=None, block_table=None,
                           causal=True, softmax_scale=None, return_lse=False, kernel="best",
                           k=None, v=None):
    """Attention of a few new query rows against a K/V cache, paged or not: the decode step of
    serving. Shaped like FlashAttention's flash_attn_with_kvcache (its cache arguments and the
    new keys to append, k= and v=; no rotary or windows), so that a caller can switch (by
    keyword: FlashAttention's positional order puts k and v after v_cache).

    q: [B, Nq, H_q, d], float16 or bfloat16 on a CUDA device (the [B, N, H, d] layout; any
    strides with a contiguous last dimension that the library takes).
    k_cache, v_cache: q's dtype and device, H_q a multiple of H_kv (grouped-query attention),
    - without block_table: [B, Nk_max, H_kv, d], the cache of each sequence (any strides the
      library takes, the last contiguous);
    - with block_table: page pools [num_pages, page_size, H_kv, d], and block_table an int32
      [B, max_pages] tensor (rows contiguous) on q's device: key j of sequence b is row
      j % page_size of page block_table[b, j // page_size]. Pages in any order, shared or not;
      the pool's capacity for a sequence is max_pages * page_size keys.
    cache_seqlens: int32 [B] on q's device (sequence b has its first cache_seqlens[b] keys), an
    int (every sequence that long), or None (every sequence has the whole capacity). Its values
    and the page numbers are device data and are not checked: a length outside [0, capacity] or
    a page number outside the pool is undefined behaviour, as in FlashAttention (the kernel
    clamps the lengths so that it reads nothing out of bounds). A sequence of 0 keys gives
    O = 0 and LSE = -inf.
    k, v: the new keys and values, [B, N_new, H_kv, d] of the cache's dtype, or None (both or
    neither). Given, they are written into k_cache and v_cache in place after each sequence's
    first cache_seqlens[b] keys (cache_seqlens required), and the attention runs over
    cache_seqlens[b] + N_new keys; cache_seqlens itself is not changed (the caller advances it).
    cache_seqlens[b] + N_new must fit the capacity: the write is torch's indexing on the device,
    and a row past the capacity or a page number past the pool stops it with a device-side index
    error (no host check of device data: a decode loop stays free of synchronisation); a
    negative length or page number is undefined behaviour (torch's indexing wraps it).
    causal: bottom-right per sequence (query i of sequence b sees key j iff
    j <= i + n_b - Nq, n_b = cache_seqlens[b], or cache_seqlens[b] + N_new when k and v are
    given: the new tokens are the last of the sequence). softmax_scale:
    None for 1/sqrt(d). kernel: "best" (the highest-numbered rung that takes the call: rung 76
    for a call with cache_seqlens or block_table on compute capability 9.0, rung 69 before it)
    or a rung number.

    Returns O, a new contiguous [B, Nq, H_q, d] tensor of q's dtype, and with return_lse=True also
    the log-sum-exp, float32 [B, H_q, Nq], as (O, LSE). Enqueued on the current CUDA stream; the
    workspace a rung needs (split keys' partials) comes from torch's caching allocator and is
    sized by the shapes alone, so the call can be captured in a CUDA graph and replayed after the
    cache, cache_seqlens and block_table have changed in place (their shapes fixed). A
    torch.library custom op (flash_ladder::attention_with_kvcache) with a fake implementation:
    torch.compile traces it (fullgraph=True works).

    No autograd: decode does not train. The output takes part in autograd where an input
    requires grad, but backward() through it raises RuntimeError saying so.

    Argument errors raise ValueError / TypeError naming the argument and the rule; the library's
    refusals (a page size that is no multiple of 16, a call too long for decode, 16-byte alignment)
    raise flash_ladder.UnsupportedError with the library's message.
    """
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"flash_ladder.attention_with_kvcache: {name} must be a "
                            f"torch.Tensor, got {type(t).__name__}")
    if block_table is not None and not isinstance(block_table, torch.Tensor):
        raise TypeError(f"flash_ladder.attention_with_kvcache: block_table must be an int32 "
                        f"torch.Tensor [B, max_pages] or None, got {type(block_table).__name__}")
    if not isinstance(return_lse, bool):
        raise TypeError(f"flash_ladder.attention_with_kvcache: return_lse must be a bool, got "
                        f"{return_lse!r}")
    number = _layout.kernel_arg(kernel)
    for name, t in (("k", k), ("v", v)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"flash_ladder.attention_with_kvcache: {name} must be a "
                            f"torch.Tensor [B, N_new, H_kv, d] or None, got {type(t).__name__}")
    n_int = None
    if cache_seqlens is not None and not isinstance(cache_seqlens, torch.Tensor):
        # An int: the same length for every sequence, as a tensor on q's device (checked first
        # against the capacity, which the checks of the tensors give).
        kv = _kvcache_problem(q, k_cache, v_cache, None, block_table, causal, softmax_scale,
                              allow_meta=q.device.type == "meta")
        n_int = _layout.check_cache_seqlens_int(cache_seqlens, kv.problem.seqlen_k)
        cache_seqlens = torch.full((kv.problem.batch,), n_int, dtype=torch.int32, device=q.device)
    if k is not None or v is not None:
        kv = _kvcache_problem(q, k_cache, v_cache, cache_seqlens, block_table, causal,
                              softmax_scale, allow_meta=q.device.type == "meta")
        n_new = _layout.check_kv_append(kv, spec(k_cache), _optional_spec(k), _optional_spec(v),
                                        cache_seqlens is not None, n_int)
        _append_kv(k_cache, v_cache, k, v, cache_seqlens, block_table)
        cache_seqlens = cache_seqlens + n_new  # a new tensor: the caller's lengths stay
    o, lse = torch.ops.flash_ladder.attention_with_kvcache(
        q, k_cache, v_cache, cache_seqlens, block_table, causal,
        None if softmax_scale is None else float(softmax_scale), number, return_lse)
    return (o, lse) if return_lse else o
