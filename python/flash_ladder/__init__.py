"""flash_ladder: the kernels of the Flash Attention ladder, called from PyTorch.

    import flash_ladder
    o = flash_ladder.attention(q, k, v, causal=True)      # q, k, v: [B, H, N, d] on the GPU

    # serving: new rows against a K/V cache, paged or not (rungs 39 on), as flash_attn_with_kvcache
    o = flash_ladder.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths,
                                            block_table=pages)   # q: [B, Nq, H_q, d]

attention() is a torch.library custom op (flash_ladder::attention) with a fake implementation, so
torch.compile traces through it, and differentiable: its backward is the op
flash_ladder::attention_backward, which runs a backward rung (29 and up). It calls
libflash_ladder.so (tools/fl_api.h) through ctypes: no build against torch.
attention_with_kvcache() is the op flash_ladder::attention_with_kvcache (no autograd: decode does
not train). The library is looked for in $FLASH_LADDER_LIB, next to the package, in the build/
folder of the checkout, in ./build, then by the dynamic loader (flash_ladder.find_library).

Without torch the package imports all the same: the library, its kernels and the C struct work,
and flash_ladder.attention raises ImportError saying what it needs.

Kernel numbers changed: rungs 22-24 of earlier versions are now 23, 27 and 28.
"""
from ._capi import (ENV_VAR, LIB_NAME, BackwardParams, CudaError, FlashLadderError, Kernel,
                    Library, LibraryNotFoundError, NoSuchKernelError, Params, UnsupportedError,
                    best_kernel, candidate_paths, find_library, load_library)

__version__ = "0.1.0"

__all__ = ["attention", "attention_with_kvcache", "kernels", "backward_kernels", "load_library",
           "find_library", "candidate_paths", "best_kernel", "Library", "Kernel", "Params",
           "BackwardParams", "FlashLadderError", "UnsupportedError", "CudaError",
           "NoSuchKernelError", "LibraryNotFoundError", "ENV_VAR", "LIB_NAME", "make_params",
           "make_backward_params"]


def kernels():
    """The forward rungs of the library found by load_library(): [Kernel(number, name, title)]."""
    return list(load_library().kernels)


def backward_kernels():
    """The backward rungs of the library found by load_library(), likewise."""
    return list(load_library().backward_kernels)


_TORCH_NAMES = ("attention", "attention_with_kvcache", "make_params", "make_backward_params")


def __getattr__(name):
    # These need torch: import it and register the ops (flash_ladder/_ops.py), then keep them as
    # plain attributes of the package.
    if name in _TORCH_NAMES:
        try:
            from . import _ops
        except (ImportError, OSError) as e:
            raise ImportError(f"flash_ladder.{name} needs torch (>= 2.4): {e}") from e
        globals().update({n: getattr(_ops, n) for n in _TORCH_NAMES})
        return globals()[name]
    raise AttributeError(f"module 'flash_ladder' has no attribute {name!r}")


def _torch_installed():
    import sys
    if "torch" in sys.modules:
        return True
    import importlib.util
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


# Where torch is installed, register the op now: flash_ladder.attention is then a plain attribute
# before any torch.compile traces a call to it. Without torch, the package imports all the same.
if _torch_installed():
    try:
        __getattr__("attention")
    except Exception:  # noqa: BLE001 - a torch that cannot be used: attention says why on use
        pass
