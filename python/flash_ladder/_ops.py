"""The torch side: the custom op flash_ladder::attention (torch.library, with a fake implementation
so that torch.compile traces through it) and the public attention(). The package imports this
module where torch is installed; the rest of the package works without torch.
"""
from typing import Optional, Tuple

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


def _empty_lse(q):
    return q.new_empty((0,), dtype=torch.float32)


@torch.library.custom_op("flash_ladder::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  scale: Optional[float], kernel: int, return_lse: bool,
                  layout: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """O (q's shape and layout, contiguous) and the LSE (float32 [B, H_q, Nq]; an empty tensor
    when return_lse is False). kernel: a rung number, or -1 for "best"."""
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
        lib.run(number, params, torch.cuda.current_stream(q.device).cuda_stream)
    return o, (lse if lse is not None else _empty_lse(q))


@_attention_op.register_fake
def _attention_fake(q, k, v, causal, scale, kernel, return_lse, layout):
    problem = _layout.check_call(spec(q), spec(k), spec(v), causal=causal, scale=scale,
                                 layout=layout, allow_meta=True)
    o = q.new_empty(problem.out_shape)
    lse = q.new_empty(problem.lse_shape, dtype=torch.float32) if return_lse else _empty_lse(q)
    return o, lse


def attention(q, k, v, *, causal=False, scale=None, kernel="best", return_lse=False,
              layout="bhnd"):
    """softmax(scale · q·kᵀ) · v with a kernel of the ladder (forward only).

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
    o, lse = torch.ops.flash_ladder.attention(q, k, v, causal,
                                              None if scale is None else float(scale), number,
                                              return_lse, layout)
    return (o, lse) if return_lse else o
