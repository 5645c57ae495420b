"""The backward without a GPU and without torch: the ctypes mirror of fl_backward_params, the
backward's argument checks and strides (flash_ladder/_layout.py), and, where the library is found
($FLASH_LADDER_LIB; ctest sets it), its backward calls on calls it refuses before launching
anything (host memory stands in for the device buffers, as in test_capi.py)."""
import ctypes
import unittest

import _setup  # noqa: F401

import flash_ladder
from flash_ladder import _capi, _layout
from flash_ladder._layout import TensorSpec
from test_capi import AlignedHostBuffer, real_library

CUDA = "cuda:0"


def dense(shape, dtype="float16", device=CUDA):
    return TensorSpec(tuple(shape), _layout.contiguous_strides(shape), dtype, device)


class BackwardParamsMirror(unittest.TestCase):
    def test_offsets_follow_fl_api_h(self):
        # fl_backward_params on a 64-bit platform: the whole fl_attention_params (320 bytes), 4
        # pointers, 16 x int64 strides (12, then the 4 head-dimension ones), the workspace pointer
        # and its size.
        if ctypes.sizeof(ctypes.c_void_p) != 8:
            self.skipTest("offsets written for a 64-bit platform")
        B = _capi.BackwardParams
        expect = {"fwd": 0, "dout": 320, "dq": 328, "dk": 336, "dv": 344, "do_stride_batch": 352,
                  "do_stride_row": 368, "dq_stride_batch": 376, "dk_stride_batch": 400,
                  "dv_stride_row": 440, "do_stride_dim": 448, "dv_stride_dim": 472,
                  "workspace": 480, "workspace_bytes": 488}
        for name, offset in expect.items():
            self.assertEqual(getattr(B, name).offset, offset, name)
        self.assertEqual(ctypes.sizeof(B), 496)
        self.assertEqual(B.fwd.size, ctypes.sizeof(_capi.Params))

    def test_field_names(self):
        names = [f[0] for f in _capi.BackwardParams._fields_]
        self.assertEqual(names[:5], ["fwd", "dout", "dq", "dk", "dv"])
        self.assertEqual(names[5:17], [f"{t}_stride_{s}" for t in ("do", "dq", "dk", "dv")
                                       for s in ("batch", "head", "row")])
        self.assertEqual(names[17:21], ["do_stride_dim", "dq_stride_dim", "dk_stride_dim",
                                        "dv_stride_dim"])
        self.assertEqual(names[21:], ["workspace", "workspace_bytes"])


class BackwardChecks(unittest.TestCase):
    def call(self, layout="bhnd", hq=8, hkv=2, nq=100, nk=300, d=64, **over):
        def shape(h, n):
            return (2, h, n, d) if layout == "bhnd" else (2, n, h, d)
        t = dict(q=dense(shape(hq, nq)), k=dense(shape(hkv, nk)), v=dense(shape(hkv, nk)),
                 o=dense(shape(hq, nq)), lse=dense((2, hq, nq), dtype="float32"),
                 dout=dense(shape(hq, nq)))
        t.update(over)
        return _layout.check_backward_call(t["q"], t["k"], t["v"], t["o"], t["lse"], t["dout"],
                                           causal=True, layout=layout)

    def test_strides_of_every_tensor_in_both_layouts(self):
        p = self.call("bhnd")
        self.assertEqual(p.strides["do"], (8 * 100 * 64, 100 * 64, 64, 1))
        self.assertEqual(p.strides["dq"], p.strides["q"])
        self.assertEqual(p.strides["dk"], (2 * 300 * 64, 300 * 64, 64, 1))
        self.assertEqual(p.strides["dv"], p.strides["dk"])
        p = self.call("bnhd")
        # [B, N, H, d] in memory, (batch, head, row, dim) in the fields
        self.assertEqual(p.strides["do"], (100 * 8 * 64, 64, 8 * 64, 1))
        self.assertEqual(p.strides["dk"], (300 * 2 * 64, 64, 2 * 64, 1))
        self.assertEqual((p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k), (8, 2, 100, 300))
        fields = _layout.backward_fields(p)
        self.assertEqual(set(fields), set(_capi.BWD_STRIDE_FIELDS + _capi.BWD_DIM_STRIDE_FIELDS))
        self.assertEqual((fields["dk_stride_batch"], fields["dk_stride_head"],
                          fields["dk_stride_row"], fields["dk_stride_dim"]), p.strides["dk"])
        # a strided dO is passed with its strides: a padded row
        padded = TensorSpec((2, 100, 8, 64), (100 * 8 * 72, 8 * 72, 72, 1), "float16", CUDA)
        self.assertEqual(self.call("bnhd", dout=padded).strides["do"], (100 * 8 * 72, 72,
                                                                        8 * 72, 1))

    def test_refusals_name_the_argument(self):
        cases = [
            (dict(o=dense((2, 8, 100, 128))), "o must have q's shape and dtype"),
            (dict(dout=dense((2, 8, 100, 64), dtype="bfloat16")),
             "dout must have q's shape and dtype"),
            (dict(lse=dense((2, 8, 101), dtype="float32")), "lse must be the forward's LSE"),
            (dict(lse=dense((2, 8, 100), dtype="float16")), "lse must be the forward's LSE"),
            (dict(lse=TensorSpec((2, 8, 100), (800, 1, 8), "float32", CUDA)),
             "lse must be the forward's LSE, a contiguous float32"),
            (dict(lse=dense((2, 8, 100), dtype="float32", device="cuda:1")),
             r"lse must be on q's device \(cuda:0\)"),
            (dict(k=dense((2, 3, 300, 64)), v=dense((2, 3, 300, 64))),
             r"multiple of k's and v's \(3\)"),
        ]
        for over, msg in cases:
            with self.subTest(msg), self.assertRaisesRegex(ValueError, msg):
                self.call(**over)

    def test_what_the_kernels_can_read(self):
        # check_tensor's rule (common/attention.cpp) in Python: what the backward op copies
        ok = _layout.readable_by_the_kernels
        self.assertTrue(ok((2, 8, 100, 64), (51200, 6400, 64, 1), "bhnd", 4096))
        self.assertTrue(ok((2, 100, 8, 64), (57600, 576, 72, 1), "bnhd", 4096))  # padded
        self.assertFalse(ok((2, 8, 100, 64), (0, 0, 0, 0), "bhnd", 4096))  # o.sum()'s gradient
        self.assertFalse(ok((2, 8, 100, 64), (51200, 6400, 1, 100), "bhnd", 4096))  # transposed
        self.assertFalse(ok((2, 8, 100, 64), (51200, 6400, 68, 1), "bhnd", 4096))  # 136 bytes
        self.assertFalse(ok((2, 8, 100, 64), (51200, 6400, 32, 1), "bhnd", 4096))  # overlap
        self.assertFalse(ok((2, 8, 100, 64), (51200, 6400, 64, 1), "bhnd", 4098))  # misaligned
        # a dimension of size 1 never moves the address: its stride is not judged
        self.assertTrue(ok((1, 1, 1, 64), (1, 1, 1, 1), "bhnd", 4096))

    def test_backward_kernel_argument(self):
        self.assertEqual(_layout.kernel_arg("best", "backward_kernel"), _layout.BEST)
        self.assertEqual(_layout.kernel_arg(29, "backward_kernel"), 29)
        with self.assertRaisesRegex(ValueError, 'backward_kernel must be a rung number or "best"'):
            _layout.kernel_arg("fast", "backward_kernel")


class RealLibraryBackward(unittest.TestCase):
    """The backward calls of the library, on calls refused before anything is launched."""

    @classmethod
    def setUpClass(cls):
        cls.lib = real_library()
        cls.buf = AlignedHostBuffer(1 << 16)
        cls.ws = cls.buf.ptr + (-cls.buf.ptr) % 256  # a workspace is 256-byte aligned
        cls.backward = [k.number for k in cls.lib.backward_kernels]

    def params(self, hq=2, hkv=2, n=128, d=64, causal=False):
        """A backward call with every pointer on the host buffer and contiguous strides (built
        through the library's own fl_set_contiguous_backward_strides)."""
        b = _capi.BackwardParams()
        f = b.fwd
        f.dtype = f.out_dtype = 0
        f.batch, f.heads_q, f.heads_kv, f.seqlen_q, f.seqlen_k, f.head_dim = 1, hq, hkv, n, n, d
        f.causal, f.softmax_scale = int(causal), d ** -0.5
        self.lib.set_contiguous_backward_strides(b)
        p = self.buf.ptr
        f.q = f.k = f.v = f.o = f.lse = p
        b.dout = b.dq = b.dk = b.dv = p
        return b

    def test_rungs_by_op(self):
        fwd = [k.number for k in self.lib.kernels]
        self.assertIn(0, fwd)
        self.assertTrue(all(n >= 29 for n in self.backward), self.backward)
        self.assertFalse(set(fwd) & set(self.backward))
        self.assertEqual(flash_ladder.backward_kernels(), self.lib.backward_kernels)

    def test_strides_agree_with_layout(self):
        b = self.params(hq=8, hkv=2, n=96, d=128)
        q = _layout.contiguous_strides((1, 8, 96, 128))
        kv = _layout.contiguous_strides((1, 2, 96, 128))
        for t, want in (("do", q), ("dq", q), ("dk", kv), ("dv", kv)):
            got = tuple(getattr(b, f"{t}_stride_{s}") for s in ("batch", "head", "row", "dim"))
            self.assertEqual(got, want, t)
        self.assertEqual((b.fwd.k_stride_head, b.fwd.o_stride_row), (kv[1], q[2]))

    def test_forward_rung_refused(self):
        b = self.params()
        ok, why = self.lib.supports_backward(0, b)
        self.assertFalse(ok)
        self.assertTrue(why.startswith("kernel 00_cublas: is a forward rung"), why)
        with self.assertRaises(flash_ladder.UnsupportedError) as cm:
            self.lib.run_backward(0, b)
        self.assertEqual(str(cm.exception), why)
        self.assertEqual((cm.exception.code, cm.exception.kernel), (_capi.FL_UNSUPPORTED, 0))
        with self.assertRaisesRegex(flash_ladder.UnsupportedError, "kernel 00_cublas: is a "
                                                                   "forward rung"):
            self.lib.backward_workspace_size(0, b.fwd)
        with self.assertRaisesRegex(flash_ladder.NoSuchKernelError, "no kernel numbered 99"):
            self.lib.run_backward(99, b)
        with self.assertRaisesRegex(flash_ladder.NoSuchKernelError, "no kernel numbered 99"):
            self.lib.backward_workspace_size(99, b.fwd)

    def test_backward_rung_refused_by_run(self):
        if not self.backward:
            self.skipTest("no backward rung in this build (FL_KERNELS)")
        b = self.params()
        for number in self.backward:
            name = next(k.name for k in self.lib.backward_kernels if k.number == number)
            with self.subTest(number), self.assertRaisesRegex(
                    flash_ladder.UnsupportedError, f"kernel {name}: is a backward rung"):
                self.lib.run(number, b.fwd)

    def test_rules_reach_the_library(self):
        # The fields of the mirror reach check_backward: each broken in turn on a call the rung
        # takes otherwise, refused with the rule named.
        if not self.backward:
            self.skipTest("no backward rung in this build (FL_KERNELS)")
        number = self.backward[0]
        size = self.lib.backward_workspace_size(number, self.params().fwd)
        self.assertGreaterEqual(size, 0)
        cases = [("lse", "LSE is required"), ("dout", "dO is a null pointer"),
                 ("dq_misaligned", "dQ must be 16-byte aligned"),
                 ("dk_dim", "dK's head-dimension stride must be 1"),
                 ("dv_row", "dV strides must be multiples of 8 elements"),
                 ("e4m3", "the backward takes fp16 and bf16 inputs (got e4m3)"),
                 ("ws_null", "workspace is a null pointer but workspace_bytes is 4096"),
                 ("ws_short", f"the workspace holds {max(size - 1, 0)} bytes")]
        one = (ctypes.c_float * 1)(1.0)
        for what, rule in cases:
            if what == "ws_short" and size == 0:
                continue
            b = self.params()
            b.workspace, b.workspace_bytes = self.ws, max(size, 256)
            if what == "lse":
                b.fwd.lse = None
            elif what == "dout":
                b.dout = None
            elif what == "dq_misaligned":
                b.dq = self.buf.ptr + 8
            elif what == "dk_dim":
                b.dk_stride_dim = 0
            elif what == "dv_row":
                b.dv_stride_row = 68
            elif what == "e4m3":
                b.fwd.dtype = _capi.FL_E4M3
                b.fwd.q_descale = b.fwd.k_descale = b.fwd.v_descale = one
            elif what == "ws_null":
                b.workspace, b.workspace_bytes = None, 4096
            elif what == "ws_short":
                b.workspace_bytes = size - 1
            with self.subTest(what):
                ok, why = self.lib.supports_backward(number, b)
                self.assertFalse(ok)
                self.assertIn(rule, why)
                self.assertTrue(why.startswith("kernel "), why)
                with self.assertRaises(flash_ladder.UnsupportedError) as cm:
                    self.lib.run_backward(number, b)
                self.assertEqual(str(cm.exception), why)

    def test_best_backward(self):
        # Without a GPU no rung refuses for the device: the best is the highest-numbered rung
        # whose rules hold; with one, the highest that runs here. Never a forward rung.
        b = self.params()
        accepted = []
        for number in self.backward:
            c = self.params()
            c.workspace, c.workspace_bytes = self.ws, 1 << 62  # the size is not the choice
            if self.lib.supports_backward(number, c)[0]:
                accepted.append(number)
        if accepted:
            self.assertEqual(self.lib.best_backward(b), max(accepted))
            self.assertEqual(self.lib.backward_workspace_size(_capi.FL_KERNEL_BEST, b.fwd),
                             self.lib.backward_workspace_size(max(accepted), b.fwd))
        else:
            with self.assertRaisesRegex(flash_ladder.UnsupportedError,
                                        "no backward kernel of this build supports this call"):
                self.lib.best_backward(b)
        bad = self.params(hq=3, hkv=2)
        with self.assertRaises(flash_ladder.UnsupportedError) as cm:
            self.lib.best_backward(bad)
        msg = str(cm.exception)
        self.assertTrue(msg.startswith("no backward kernel of this build supports this call"),
                        msg)
        for k in self.lib.backward_kernels:
            self.assertIn(f"kernel {k.name}: H_q (3)", msg)
        for k in self.lib.kernels:
            self.assertNotIn(f"kernel {k.name}:", msg)
        with self.assertRaises(flash_ladder.UnsupportedError) as cm:
            self.lib.run_backward(_capi.FL_KERNEL_BEST, bad)
        self.assertEqual(str(cm.exception), msg)


if __name__ == "__main__":
    unittest.main()
