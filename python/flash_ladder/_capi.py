"""The C API of the ladder (tools/fl_api.h) through ctypes: the one mirror of fl_attention_params
and of fl_backward_params, the library lookup, and the calls. No torch here: everything in this
module works (and is tested) on a machine without torch or a GPU.
"""
import ctypes
import os
import sys
import threading
from collections import namedtuple

ENV_VAR = "FLASH_LADDER_LIB"
if sys.platform == "win32":
    LIB_NAME = "flash_ladder.dll"
elif sys.platform == "darwin":
    LIB_NAME = "libflash_ladder.dylib"
else:
    LIB_NAME = "libflash_ladder.so"

# Return codes of fl_run (tools/fl_api.h).
FL_OK = 0
FL_UNSUPPORTED = 1
FL_CUDA_ERROR = 2
FL_NO_SUCH_KERNEL = 3
FL_INTERNAL_ERROR = 4

# 0 = fp16, 1 = bf16 (fl_attention_params::dtype and ::out_dtype), by the dtype's name: the 16-bit
# types flash_ladder.attention takes. e4m3 inputs (FL_E4M3, with out_dtype and the descale fields
# of Params) are the FP8 rung's (28): flash_ladder.attention passes them for float8_e4m3fn tensors.
DTYPE_CODES = {"float16": 0, "bfloat16": 1}
FL_E4M3 = 2

# "best" as a kernel number (FL_KERNEL_BEST), and what a rung computes (fl_kernel_op).
FL_KERNEL_BEST = -1
FL_OP_FORWARD = 0
FL_OP_BACKWARD = 1

_MSG_LEN = 1024


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------
class FlashLadderError(RuntimeError):
    """A failure reported by the library; str(e) is the library's message, e.code its return
    code (FL_* above), e.kernel the kernel number asked for (None when there was none)."""

    def __init__(self, message, code=FL_INTERNAL_ERROR, kernel=None):
        super().__init__(message)
        self.code = code
        self.kernel = kernel


class UnsupportedError(FlashLadderError):
    """The kernel does not support the call (FL_UNSUPPORTED): the message names it and the rule."""


class CudaError(FlashLadderError):
    """A CUDA or cuBLAS call of the library failed (FL_CUDA_ERROR)."""


class NoSuchKernelError(FlashLadderError):
    """No kernel with that number in this build (FL_NO_SUCH_KERNEL): the message lists those
    built."""


class LibraryNotFoundError(OSError):
    """libflash_ladder could not be found or loaded; the message lists every place looked at."""


_ERRORS = {FL_UNSUPPORTED: UnsupportedError, FL_CUDA_ERROR: CudaError,
           FL_NO_SUCH_KERNEL: NoSuchKernelError}


def error_for(code, message, kernel=None):
    """The exception for a return code of fl_run and its message."""
    return _ERRORS.get(code, FlashLadderError)(message, code=code, kernel=kernel)


# ------------------------------------------------------------------------------------------------
# fl_attention_params, field for field (the library checks the size: fl_params_size)
# ------------------------------------------------------------------------------------------------
STRIDE_FIELDS = tuple(f"{t}_stride_{s}" for t in "qkvo" for s in ("batch", "head", "row"))
DIM_STRIDE_FIELDS = tuple(f"{t}_stride_dim" for t in "qkvo")


DESCALE_FIELDS = tuple(f"{t}_descale" for t in "qkv")
# The K/V cache's device pointers (const int32_t* in C; set from tensors' data_ptr()).
KV_CACHE_POINTERS = ("seqlens_k", "block_table")


class Params(ctypes.Structure):
    """fl_attention_params (tools/fl_api.h), field for field, in the same order. Strides are in
    elements; the four x_stride_dim fields come after them and must be 1. Then O's type
    (out_dtype: the inputs' for fp16/bf16) and the host descale factors of e4m3 inputs (NULL
    for fp16/bf16). Then the workspace of a forward rung that needs one (device memory of
    workspace_bytes, at least Library.workspace_size's answer; NULL and 0 otherwise). Last, a
    K/V cache (rungs 39 on; NULL and 0 without one): seqlens_k, device int32 [B] key counts;
    block_table, device int32 [B][block_table_stride] page numbers into k and v, then page pools
    [num_pages, page_size, H_kv, d] (k_stride_batch between pages, k_stride_row between the rows
    of a page); tools/fl_api.h has the rules."""
    _fields_ = ([("dtype", ctypes.c_int)]
                + [(n, ctypes.c_int64) for n in ("batch", "heads_q", "heads_kv", "seqlen_q",
                                                 "seqlen_k", "head_dim")]
                + [("causal", ctypes.c_int), ("softmax_scale", ctypes.c_float)]
                + [(n, ctypes.c_void_p) for n in ("q", "k", "v", "o", "lse")]
                + [(n, ctypes.c_int64) for n in STRIDE_FIELDS]
                + [(n, ctypes.c_int64) for n in DIM_STRIDE_FIELDS]
                + [("out_dtype", ctypes.c_int)]
                + [(n, ctypes.POINTER(ctypes.c_float)) for n in DESCALE_FIELDS]
                + [("descale_per_head", ctypes.c_int)]
                + [("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_int64)]
                + [(n, ctypes.c_void_p) for n in KV_CACHE_POINTERS]
                + [("block_table_stride", ctypes.c_int64), ("page_size", ctypes.c_int64)])


# fl_backward_params: the forward's call (a Params, whole), then dO, dQ, dK, dV, their strides
# (elements; the x_stride_dim ones after the others, as in Params) and the workspace.
GRAD_TENSORS = ("do", "dq", "dk", "dv")
BWD_STRIDE_FIELDS = tuple(f"{t}_stride_{s}" for t in GRAD_TENSORS for s in ("batch", "head", "row"))
BWD_DIM_STRIDE_FIELDS = tuple(f"{t}_stride_dim" for t in GRAD_TENSORS)


class BackwardParams(ctypes.Structure):
    """fl_backward_params (tools/fl_api.h), field for field, in the same order: fwd (the
    forward's call; its o and lse, the forward's O and fp32 LSE, are inputs here), the device
    pointers dout, dq, dk, dv, their strides, and the workspace (device memory of workspace_bytes,
    at least Library.backward_workspace_size's answer, 256-byte aligned)."""
    _fields_ = ([("fwd", Params)]
                + [(n, ctypes.c_void_p) for n in ("dout", "dq", "dk", "dv")]
                + [(n, ctypes.c_int64) for n in BWD_STRIDE_FIELDS]
                + [(n, ctypes.c_int64) for n in BWD_DIM_STRIDE_FIELDS]
                + [("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_int64)])


Kernel = namedtuple("Kernel", "number name title")


# ------------------------------------------------------------------------------------------------
# Finding the library
# ------------------------------------------------------------------------------------------------
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def candidate_paths(environ=None, package_dir=None, cwd=None):
    """Where the library is looked for, in order: [(path, why this place)].

    1. $FLASH_LADDER_LIB (the file, or a directory holding it). When it is set it is the only
       place: a wrong value is an error, never silently passed over.
    2. Next to the package: <package>/libflash_ladder.so (a copy put there by hand).
    3. The build folder of the checkout the package is in: <package>/../../build (python/ in the
       repository; an editable install, `pip install -e ./python`, keeps the package there).
    4. build/ under the current directory (scripts run from the repository root).
    (5. The dynamic loader's own search, LD_LIBRARY_PATH included: load_library tries it last.)
    """
    environ = os.environ if environ is None else environ
    package_dir = PACKAGE_DIR if package_dir is None else package_dir
    cwd = os.getcwd() if cwd is None else cwd
    value = environ.get(ENV_VAR, "")
    if value:
        path = os.path.join(value, LIB_NAME) if os.path.isdir(value) else value
        return [(path, f"${ENV_VAR}")]
    places = [
        (os.path.join(package_dir, LIB_NAME), "next to the package"),
        (os.path.join(os.path.dirname(os.path.dirname(package_dir)), "build", LIB_NAME),
         "the build folder of the package's checkout"),
        (os.path.join(cwd, "build", LIB_NAME), "build/ under the current directory"),
    ]
    out, seen = [], set()
    for path, why in places:
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            out.append((os.path.normpath(path), why))
    return out


def find_library(environ=None, package_dir=None, cwd=None):
    """(the first candidate path that is a file, or None; [(path, why, found)] for each place)."""
    tried = []
    for path, why in candidate_paths(environ, package_dir, cwd):
        found = os.path.isfile(path)
        tried.append((path, why, found))
        if found:
            return path, tried
    return None, tried


def not_found_message(tried, loader_error=None, environ=None):
    environ = os.environ if environ is None else environ
    lines = [f"flash_ladder: {LIB_NAME} not found. Looked at, in order:"]
    for path, why, found in tried:
        lines.append(f"  {path}  ({why}: {'found' if found else 'no such file'})")
    if loader_error is not None:
        lines.append(f"  the dynamic loader's search (LD_LIBRARY_PATH="
                     f"{environ.get('LD_LIBRARY_PATH', '')!r}): {loader_error}")
    if environ.get(ENV_VAR):
        lines.append(f"${ENV_VAR} is set, so nothing else was tried: point it at the library "
                     f"(the file, or the folder that holds it), or unset it.")
    else:
        lines.append(f"Build it (cmake -S . -B build -G Ninja && cmake --build build, in the "
                     f"repository) and set ${ENV_VAR} to build/{LIB_NAME}, or copy it next to "
                     f"the package ({PACKAGE_DIR}).")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# The library
# ------------------------------------------------------------------------------------------------
class Library:
    """libflash_ladder loaded through ctypes. `kernels`: the forward rungs the build compiled
    [Kernel(number, name, title)], sorted by number (those run() and flash_ladder.attention take);
    `backward_kernels`: the backward rungs, likewise (run_backward's, 29 and up)."""

    def __init__(self, path):
        self.path = path
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise LibraryNotFoundError(f"flash_ladder: could not load {path}: {e}") from e
        self._lib = lib
        lib.fl_params_size.restype = ctypes.c_size_t
        lib.fl_params_size.argtypes = []
        lib.fl_set_contiguous_strides.restype = None
        lib.fl_set_contiguous_strides.argtypes = [ctypes.POINTER(Params)]
        lib.fl_num_kernels.restype = ctypes.c_int
        lib.fl_num_kernels.argtypes = []
        lib.fl_kernel_number.restype = ctypes.c_int
        lib.fl_kernel_number.argtypes = [ctypes.c_int]
        lib.fl_kernel_name.restype = ctypes.c_char_p
        lib.fl_kernel_name.argtypes = [ctypes.c_int]
        lib.fl_kernel_title.restype = ctypes.c_char_p
        lib.fl_kernel_title.argtypes = [ctypes.c_int]
        lib.fl_supports.restype = ctypes.c_int
        lib.fl_supports.argtypes = [ctypes.c_int, ctypes.POINTER(Params), ctypes.c_char_p,
                                    ctypes.c_size_t]
        lib.fl_best_kernel.restype = ctypes.c_int
        lib.fl_best_kernel.argtypes = [ctypes.POINTER(Params), ctypes.c_char_p, ctypes.c_size_t]
        lib.fl_run.restype = ctypes.c_int
        lib.fl_run.argtypes = [ctypes.c_int, ctypes.POINTER(Params), ctypes.c_void_p,
                               ctypes.c_char_p, ctypes.c_size_t]
        lib.fl_workspace_size.restype = ctypes.c_int64
        lib.fl_workspace_size.argtypes = [ctypes.c_int, ctypes.POINTER(Params), ctypes.c_char_p,
                                          ctypes.c_size_t]
        size = lib.fl_params_size()
        if size != ctypes.sizeof(Params):
            raise FlashLadderError(
                f"{path}: fl_attention_params is {size} bytes, the mirror in "
                f"flash_ladder/_capi.py {ctypes.sizeof(Params)}: rebuild the library, or update "
                f"Params to tools/fl_api.h")
        try:
            self._bind_backward(lib)
        except AttributeError as e:  # a library built before the backward's calls
            raise FlashLadderError(f"{path} has no backward calls ({e}): rebuild the library "
                                   f"from this checkout") from None
        size = lib.fl_backward_params_size()
        if size != ctypes.sizeof(BackwardParams):
            raise FlashLadderError(
                f"{path}: fl_backward_params is {size} bytes, the mirror in "
                f"flash_ladder/_capi.py {ctypes.sizeof(BackwardParams)}: rebuild the library, or "
                f"update BackwardParams to tools/fl_api.h")
        rungs = sorted(
            ((Kernel(lib.fl_kernel_number(i), lib.fl_kernel_name(i).decode(),
                     lib.fl_kernel_title(i).decode()), lib.fl_kernel_op(i))
             for i in range(lib.fl_num_kernels())),
            key=lambda x: x[0].number)
        self.kernels = [k for k, op in rungs if op == FL_OP_FORWARD]
        self.backward_kernels = [k for k, op in rungs if op == FL_OP_BACKWARD]

    @staticmethod
    def _bind_backward(lib):
        lib.fl_kernel_op.restype = ctypes.c_int
        lib.fl_kernel_op.argtypes = [ctypes.c_int]
        lib.fl_backward_params_size.restype = ctypes.c_size_t
        lib.fl_backward_params_size.argtypes = []
        lib.fl_set_contiguous_backward_strides.restype = None
        lib.fl_set_contiguous_backward_strides.argtypes = [ctypes.POINTER(BackwardParams)]
        lib.fl_backward_workspace_size.restype = ctypes.c_int64
        lib.fl_backward_workspace_size.argtypes = [ctypes.c_int, ctypes.POINTER(Params),
                                                   ctypes.c_char_p, ctypes.c_size_t]
        lib.fl_best_backward_kernel.restype = ctypes.c_int
        lib.fl_best_backward_kernel.argtypes = [ctypes.POINTER(BackwardParams), ctypes.c_char_p,
                                                ctypes.c_size_t]
        lib.fl_supports_backward.restype = ctypes.c_int
        lib.fl_supports_backward.argtypes = [ctypes.c_int, ctypes.POINTER(BackwardParams),
                                             ctypes.c_char_p, ctypes.c_size_t]
        lib.fl_run_backward.restype = ctypes.c_int
        lib.fl_run_backward.argtypes = [ctypes.c_int, ctypes.POINTER(BackwardParams),
                                        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]

    def __repr__(self):
        return f"<flash_ladder.Library {self.path}: {len(self.kernels)} kernels>"

    def set_contiguous_strides(self, params):
        """fl_set_contiguous_strides: the 16 strides of contiguous [B, H, N, d] tensors."""
        self._lib.fl_set_contiguous_strides(ctypes.byref(params))

    def supports(self, number, params):
        """(True, "") when kernel `number` can run params on the current device, else
        (False, the library's reason)."""
        why = ctypes.create_string_buffer(_MSG_LEN)
        ok = self._lib.fl_supports(number, ctypes.byref(params), why, len(why))
        return ok == 1, why.value.decode(errors="replace")

    def best(self, params):
        """fl_best_kernel: the number of the kernel "best" stands for; UnsupportedError with the
        library's message (every kernel's reason) when no kernel can run params here."""
        why = ctypes.create_string_buffer(_MSG_LEN * 16)
        number = self._lib.fl_best_kernel(ctypes.byref(params), why, len(why))
        if number < 0:
            raise UnsupportedError(why.value.decode(errors="replace"), code=FL_UNSUPPORTED)
        return number

    def workspace_size(self, number, params):
        """fl_workspace_size: the bytes of workspace forward kernel `number` (or FL_KERNEL_BEST)
        needs for a call of params' sizes on this GPU (0: none; its pointers and strides are not
        read). Raises NoSuchKernelError or UnsupportedError with the library's message when there
        is no answer (no such kernel, a backward rung, sizes the kernel does not take)."""
        why = ctypes.create_string_buffer(_MSG_LEN * 16)
        size = self._lib.fl_workspace_size(number, ctypes.byref(params), why, len(why))
        if size < 0:
            known = number == FL_KERNEL_BEST or any(
                k.number == number for k in self.kernels + self.backward_kernels)
            raise error_for(FL_UNSUPPORTED if known else FL_NO_SUCH_KERNEL,
                            why.value.decode(errors="replace"), kernel=number)
        return size

    def run(self, number, params, stream=None):
        """fl_run: enqueues kernel `number` on `stream` (a cudaStream_t as an int; None = the
        default stream). Raises the FlashLadderError of the return code, with the library's
        message, when it fails."""
        err = ctypes.create_string_buffer(_MSG_LEN)
        rc = self._lib.fl_run(number, ctypes.byref(params), stream, err, len(err))
        if rc != FL_OK:
            raise error_for(rc, err.value.decode(errors="replace"), kernel=number)

    # --------------------------------------------------------------------------------------------
    # The backward
    # --------------------------------------------------------------------------------------------
    def set_contiguous_backward_strides(self, bparams):
        """fl_set_contiguous_backward_strides: fwd's 16 strides and the 16 of dO, dQ, dK, dV, for
        contiguous [B, H, N, d] tensors."""
        self._lib.fl_set_contiguous_backward_strides(ctypes.byref(bparams))

    def backward_workspace_size(self, number, params):
        """fl_backward_workspace_size: the bytes of workspace backward rung `number` (or
        FL_KERNEL_BEST) needs for the backward of a call of params' sizes (a Params: the
        forward's; its pointers and strides are not read). Raises NoSuchKernelError or
        UnsupportedError with the library's message when there is no answer (no such rung, a
        forward rung, sizes the rung does not take)."""
        why = ctypes.create_string_buffer(_MSG_LEN * 16)
        size = self._lib.fl_backward_workspace_size(number, ctypes.byref(params), why, len(why))
        if size < 0:
            known = number == FL_KERNEL_BEST or any(
                k.number == number for k in self.kernels + self.backward_kernels)
            raise error_for(FL_UNSUPPORTED if known else FL_NO_SUCH_KERNEL,
                            why.value.decode(errors="replace"), kernel=number)
        return size

    def best_backward(self, bparams):
        """fl_best_backward_kernel: the number of the backward rung "best" stands for (the
        highest-numbered one that takes the call here; the workspace is not judged, so this can
        be asked before there is one); UnsupportedError with every backward rung's reason when
        none can."""
        why = ctypes.create_string_buffer(_MSG_LEN * 16)
        number = self._lib.fl_best_backward_kernel(ctypes.byref(bparams), why, len(why))
        if number < 0:
            raise UnsupportedError(why.value.decode(errors="replace"), code=FL_UNSUPPORTED)
        return number

    def supports_backward(self, number, bparams):
        """(True, "") when backward rung `number` can run bparams on the current device (the
        workspace's size included), else (False, the library's reason)."""
        why = ctypes.create_string_buffer(_MSG_LEN * 16)
        ok = self._lib.fl_supports_backward(number, ctypes.byref(bparams), why, len(why))
        return ok == 1, why.value.decode(errors="replace")

    def run_backward(self, number, bparams, stream=None):
        """fl_run_backward: enqueues backward rung `number` (or FL_KERNEL_BEST) on `stream`.
        Allocates nothing: bparams.workspace must already hold backward_workspace_size's bytes.
        Raises the FlashLadderError of the return code, with the library's message."""
        err = ctypes.create_string_buffer(_MSG_LEN * 16)
        rc = self._lib.fl_run_backward(number, ctypes.byref(bparams), stream, err, len(err))
        if rc != FL_OK:
            raise error_for(rc, err.value.decode(errors="replace"), kernel=number)


def best_kernel(library, params):
    """The kernel "best" stands for, as the library chooses it (fl_best_kernel, tools/fl_api.h):
    the fastest kernel that can run the call on the current device, which is the highest-numbered
    one that can (the ladder's order is its order of speed; the Hopper rungs, 17 and up, refuse
    every GPU but compute capability 9.0). Raises UnsupportedError, with every kernel's reason,
    when none can."""
    return library.best(params)


_lock = threading.Lock()
_loaded = {}


def load_library(path=None):
    """The library, loaded once per path. path=None: looked for as candidate_paths() says, then by
    the dynamic loader (LD_LIBRARY_PATH); LibraryNotFoundError lists every place looked at."""
    with _lock:
        key = path or ""
        if key in _loaded:
            return _loaded[key]
        if path is not None:
            lib = Library(path)
        else:
            found, tried = find_library()
            if found is not None:
                lib = Library(found)
            elif os.environ.get(ENV_VAR):
                raise LibraryNotFoundError(not_found_message(tried))
            else:
                try:
                    lib = Library(LIB_NAME)
                except LibraryNotFoundError as e:
                    raise LibraryNotFoundError(
                        not_found_message(tried, loader_error=e.__cause__ or e)) from None
        _loaded[key] = lib
        return lib
