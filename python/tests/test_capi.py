"""The ctypes side (flash_ladder/_capi.py): the struct mirror, the library lookup, and, where the
library is found ($FLASH_LADDER_LIB; ctest sets it), the calls that need no GPU. No torch."""
import ctypes
import os
import tempfile
import unittest
from unittest import mock

import _setup  # noqa: F401

import flash_ladder
from flash_ladder import _capi, _layout
from flash_ladder._capi import ENV_VAR, LIB_NAME


def touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb"):
        pass
    return path


class ParamsMirror(unittest.TestCase):
    def test_offsets_follow_fl_api_h(self):
        # The C layout of fl_attention_params on a 64-bit platform: int, 6 x int64, int, float,
        # 5 pointers, 16 x int64, then (e4m3 inputs) int (padded to 8), 3 pointers, int (padded),
        # then (a forward rung's scratch) a pointer and an int64, then (a K/V cache) 2 pointers
        # and 2 x int64.
        if ctypes.sizeof(ctypes.c_void_p) != 8:
            self.skipTest("offsets written for a 64-bit platform")
        P = _capi.Params
        expect = {"dtype": 0, "batch": 8, "head_dim": 48, "causal": 56, "softmax_scale": 60,
                  "q": 64, "o": 88, "lse": 96, "q_stride_batch": 104, "q_stride_row": 120,
                  "k_stride_batch": 128, "o_stride_row": 192, "q_stride_dim": 200,
                  "o_stride_dim": 224, "out_dtype": 232, "q_descale": 240, "k_descale": 248,
                  "v_descale": 256, "descale_per_head": 264, "workspace": 272,
                  "workspace_bytes": 280, "seqlens_k": 288, "block_table": 296,
                  "block_table_stride": 304, "page_size": 312}
        for name, offset in expect.items():
            self.assertEqual(getattr(P, name).offset, offset, name)
        self.assertEqual(ctypes.sizeof(P), 320)
        self.assertEqual([f[0] for f in P._fields_][-4:],
                         ["seqlens_k", "block_table", "block_table_stride", "page_size"])

    def test_one_mirror(self):
        # Every script uses this package's Params: no other ctypes mirror of the struct.
        scripts = os.path.join(_setup.REPO, "scripts")
        for name in sorted(os.listdir(scripts)):
            if name.endswith(".py"):
                with open(os.path.join(scripts, name)) as fh:
                    text = fh.read()
                self.assertFalse("_fields_" in text, f"scripts/{name} has its own ctypes struct")
                self.assertFalse("CDLL" in text, f"scripts/{name} loads the library itself")


class Lookup(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = tmp.name
        # a checkout: <root>/repo/python/flash_ladder and <root>/repo/build
        self.pkg = os.path.join(self.root, "repo", "python", "flash_ladder")
        os.makedirs(self.pkg)
        self.cwd = os.path.join(self.root, "elsewhere")
        os.makedirs(self.cwd)

    def find(self, environ=None):
        return _capi.find_library(environ or {}, self.pkg, self.cwd)

    def test_order_without_the_variable(self):
        places = _capi.candidate_paths({}, self.pkg, self.cwd)
        self.assertEqual([p for p, _ in places], [
            os.path.join(self.pkg, LIB_NAME),
            os.path.join(self.root, "repo", "build", LIB_NAME),
            os.path.join(self.cwd, "build", LIB_NAME)])

    def test_nothing_there(self):
        found, tried = self.find()
        self.assertIsNone(found)
        self.assertEqual(len(tried), 3)
        msg = _capi.not_found_message(tried, loader_error="cannot open shared object file",
                                      environ={"LD_LIBRARY_PATH": "/x"})
        for path, _, _ in tried:
            self.assertIn(f"{path}  (", msg)
        self.assertIn("no such file", msg)
        self.assertIn("LD_LIBRARY_PATH='/x'): cannot open shared object file", msg)
        self.assertIn(ENV_VAR, msg)
        self.assertIn("cmake --build build", msg)

    def test_checkout_build(self):
        lib = touch(os.path.join(self.root, "repo", "build", LIB_NAME))
        self.assertEqual(self.find()[0], lib)

    def test_cwd_build(self):
        lib = touch(os.path.join(self.cwd, "build", LIB_NAME))
        self.assertEqual(self.find()[0], lib)

    def test_next_to_the_package_first(self):
        touch(os.path.join(self.root, "repo", "build", LIB_NAME))
        touch(os.path.join(self.cwd, "build", LIB_NAME))
        lib = touch(os.path.join(self.pkg, LIB_NAME))
        self.assertEqual(self.find()[0], lib)

    def test_variable_wins(self):
        touch(os.path.join(self.pkg, LIB_NAME))
        touch(os.path.join(self.root, "repo", "build", LIB_NAME))
        mine = touch(os.path.join(self.root, "mine", "libx.so"))
        found, tried = self.find({ENV_VAR: mine})
        self.assertEqual(found, mine)
        self.assertEqual(tried, [(mine, f"${ENV_VAR}", True)])

    def test_variable_as_a_folder(self):
        lib = touch(os.path.join(self.root, "mine", LIB_NAME))
        self.assertEqual(self.find({ENV_VAR: os.path.dirname(lib)})[0], lib)

    def test_variable_wrong_is_not_passed_over(self):
        touch(os.path.join(self.pkg, LIB_NAME))  # there, but the variable says otherwise
        missing = os.path.join(self.root, "nope", LIB_NAME)
        found, tried = self.find({ENV_VAR: missing})
        self.assertIsNone(found)
        msg = _capi.not_found_message(tried, environ={ENV_VAR: missing})
        self.assertIn(f"{missing}  (${ENV_VAR}: no such file)", msg)
        self.assertIn("nothing else was tried", msg)

    def test_load_library_says_where_it_looked(self):
        missing = os.path.join(self.root, "nope", LIB_NAME)
        with mock.patch.dict(os.environ, {ENV_VAR: missing}), \
                mock.patch.dict(_capi._loaded, clear=True):
            with self.assertRaises(flash_ladder.LibraryNotFoundError) as cm:
                flash_ladder.load_library()
        self.assertIn(missing, str(cm.exception))
        self.assertIn("Looked at, in order", str(cm.exception))

    def test_load_library_without_the_variable(self):
        # Nothing in any place and nothing on the loader's path: the message lists all of them.
        env = {k: v for k, v in os.environ.items() if k not in (ENV_VAR, "LD_LIBRARY_PATH")}
        with mock.patch.dict(os.environ, env, clear=True), \
                mock.patch.dict(_capi._loaded, clear=True), \
                mock.patch.object(_capi, "PACKAGE_DIR", self.pkg), \
                mock.patch("os.getcwd", return_value=self.cwd):
            try:
                lib = flash_ladder.load_library()
            except flash_ladder.LibraryNotFoundError as e:
                msg = str(e)
                self.assertIn(os.path.join(self.pkg, LIB_NAME), msg)
                self.assertIn(os.path.join(self.root, "repo", "build", LIB_NAME), msg)
                self.assertIn(os.path.join(self.cwd, "build", LIB_NAME), msg)
                self.assertIn("the dynamic loader's search", msg)
            else:  # installed system-wide (ldconfig): found by the loader, which is fine
                self.assertEqual(lib.path, LIB_NAME)

    def test_a_file_that_is_not_a_library(self):
        bad = touch(os.path.join(self.root, "bad", LIB_NAME))
        with self.assertRaisesRegex(flash_ladder.LibraryNotFoundError, "could not load " + bad):
            _capi.Library(bad)


def real_library():
    found, tried = _capi.find_library()
    if found is None:
        raise unittest.SkipTest("libflash_ladder not found (build it, or set "
                                f"{ENV_VAR}):\n" + _capi.not_found_message(tried))
    return _capi.load_library()


class AlignedHostBuffer:
    """Host memory standing in for the device buffers, 16-byte aligned: the library refuses a bad
    call before it touches them (tests/test_bad_input.cu does the same). Never passed to a call
    the library would accept."""

    def __init__(self, nbytes):
        self._raw = ctypes.create_string_buffer(nbytes + 64)
        base = ctypes.addressof(self._raw)
        self.ptr = base + (-base) % 16


class RealLibrary(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = real_library()
        cls.buf = AlignedHostBuffer(1 << 16)

    def params(self, b=1, hq=2, hkv=2, nq=64, nk=64, d=64, causal=False, dtype="float16",
               scale=None):
        # Built by hand, not through check_call: some of these break its rules on purpose, for
        # the library to refuse.
        qs = _layout.contiguous_strides((b, hq, nq, d))
        kvs = _layout.contiguous_strides((b, hkv, nk, d))
        problem = _layout.Problem(
            dtype_code=_capi.DTYPE_CODES[dtype], batch=b, heads_q=hq, heads_kv=hkv, seqlen_q=nq,
            seqlen_k=nk, head_dim=d, causal=causal, softmax_scale=scale,
            strides=dict(q=qs, k=kvs, v=kvs, o=qs), out_shape=(b, hq, nq, d),
            lse_shape=(b, hq, nq))
        p = self.buf.ptr
        return _capi.Params(**_layout.params_fields(problem), q=p, k=p, v=p, o=p, lse=None)

    def test_kernels(self):
        names = [k.name for k in self.lib.kernels]
        numbers = [k.number for k in self.lib.kernels]
        self.assertEqual(numbers, sorted(numbers))
        self.assertIn("00_cublas", names)
        self.assertIn("16_final", names)
        self.assertTrue(all(k.title for k in self.lib.kernels))
        self.assertEqual(flash_ladder.kernels(), self.lib.kernels)

    def test_workspace_size(self):
        # fl_workspace_size: 0 for a forward rung that needs none (the baseline), a size for a
        # call's sizes alone (pointers and strides not read), and an error with the library's
        # rule for no such kernel, a backward rung, or sizes the kernel refuses.
        p = self.params()
        self.assertEqual(self.lib.workspace_size(0, p), 0)
        self.assertGreaterEqual(self.lib.workspace_size(_capi.FL_KERNEL_BEST, p), 0)
        with self.assertRaises(flash_ladder.NoSuchKernelError):
            self.lib.workspace_size(99, p)
        if self.lib.backward_kernels:
            k = self.lib.backward_kernels[0].number
            with self.assertRaisesRegex(flash_ladder.UnsupportedError, "is a backward rung"):
                self.lib.workspace_size(k, p)
        with self.assertRaisesRegex(flash_ladder.UnsupportedError, "multiple"):
            self.lib.workspace_size(0, self.params(hq=3, hkv=2))

    def test_strides_agree_with_the_library(self):
        ours = self.params(b=3, hq=8, hkv=2, nq=40, nk=72, d=128)
        theirs = _capi.Params()
        for f in ("batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim"):
            setattr(theirs, f, getattr(ours, f))
        self.lib.set_contiguous_strides(theirs)
        for f in _capi.STRIDE_FIELDS + _capi.DIM_STRIDE_FIELDS:
            self.assertEqual(getattr(ours, f), getattr(theirs, f), f)

    def test_refusal_is_the_library_message(self):
        if 3 not in [k.number for k in self.lib.kernels]:
            self.skipTest("kernel 03 is not in this build (FL_KERNELS subset)")
        p = self.params(d=96)
        ok, why = self.lib.supports(3, p)
        self.assertFalse(ok)
        self.assertIn("kernel 03_mma: head_dim must be 64 or 128 (got 96)", why)
        with self.assertRaises(flash_ladder.UnsupportedError) as cm:
            self.lib.run(3, p)
        self.assertEqual(str(cm.exception), why)
        self.assertEqual((cm.exception.code, cm.exception.kernel), (_capi.FL_UNSUPPORTED, 3))
        self.assertIsInstance(cm.exception, RuntimeError)

    def test_shared_rules(self):
        p = self.params(hq=6, hkv=4)
        ok, why = self.lib.supports(16, p)
        self.assertFalse(ok)
        self.assertIn("kernel 16_final", why)
        self.assertIn("must be a multiple of H_kv", why)
        p = self.params()
        p.q = self.buf.ptr + 2  # misaligned by 2 bytes
        with self.assertRaisesRegex(flash_ladder.UnsupportedError, "16-byte aligned"):
            self.lib.run(16, p)

    def test_types_and_descales(self):
        # O's type and the descale fields reach the library's rules (kernel 00, in every build):
        # bf16 inputs with an fp16 O, descale factors on fp16 inputs, e4m3 inputs without them,
        # and a factor of 0; a kernel that takes fp16/bf16 refuses e4m3 inputs by that rule.
        p = self.params(dtype="bfloat16")
        self.assertEqual(p.out_dtype, 1)
        p.out_dtype = 0
        ok, why = self.lib.supports(0, p)
        self.assertFalse(ok)
        self.assertIn("kernel 00_cublas: O's dtype (out_dtype) must be the inputs' dtype", why)
        ones = (ctypes.c_float * 64)(*([1.0] * 64))
        p = self.params()
        p.k_descale = ones
        ok, why = self.lib.supports(0, p)
        self.assertIn("descale factors are for e4m3 inputs", why)
        p = self.params()
        p.dtype, p.out_dtype = _capi.FL_E4M3, 1
        ok, why = self.lib.supports(0, p)
        self.assertIn("e4m3 inputs need descale factors", why)
        p.q_descale = p.k_descale = p.v_descale = ones
        zero = (ctypes.c_float * 1)(0.0)
        p.v_descale = zero
        ok, why = self.lib.supports(0, p)
        self.assertIn("V's descale factors must be finite and > 0", why)
        p.v_descale = ones
        p.descale_per_head = 1
        ok, why = self.lib.supports(0, p)
        self.assertFalse(ok)
        self.assertIn("kernel 00_cublas: takes fp16 and bf16 inputs (got e4m3)", why)
        with self.assertRaisesRegex(flash_ladder.UnsupportedError, "got e4m3"):
            self.lib.run(0, p)
        p.out_dtype = 2
        with self.assertRaisesRegex(flash_ladder.UnsupportedError,
                                    r"out_dtype must be 0 \(fp16\) or 1 \(bf16\), got 2"):
            self.lib.run(0, p)

    def test_no_such_kernel(self):
        with self.assertRaisesRegex(flash_ladder.NoSuchKernelError,
                                    r"no kernel numbered 99 in this build \(built: 00_cublas"):
            self.lib.run(99, self.params(d=96))

    def test_best_refuses_with_every_reason(self):
        p = self.params(hq=3, hkv=2)
        with self.assertRaises(flash_ladder.UnsupportedError) as cm:
            _capi.best_kernel(self.lib, p)
        msg = str(cm.exception)
        self.assertTrue(msg.startswith("no kernel of this build supports this call"))
        for k in self.lib.kernels:
            self.assertIn(f"kernel {k.name}", msg)

    def test_best_is_the_highest_that_supports(self):
        # Without a GPU every kernel refuses (the device rule); with one, the highest number that
        # supports the call. fl_supports launches nothing: the host buffer is safe either way.
        p = self.params(b=2, hq=4, hkv=2, nq=128, nk=128, d=128)
        accepted = [k.number for k in self.lib.kernels if self.lib.supports(k.number, p)[0]]
        if not accepted:
            with self.assertRaises(flash_ladder.UnsupportedError):
                _capi.best_kernel(self.lib, p)
        else:
            self.assertEqual(_capi.best_kernel(self.lib, p), max(accepted))


if __name__ == "__main__":
    unittest.main()
