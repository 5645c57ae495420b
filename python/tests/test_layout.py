"""Argument checks, layouts and strides (flash_ladder/_layout.py): plain tuples, no torch."""
import math
import unittest

import _setup  # noqa: F401

from flash_ladder import _layout
from flash_ladder._layout import TensorSpec, check_call

CUDA = "cuda:0"


def dense(shape, dtype="float16", device=CUDA):
    return TensorSpec(tuple(shape), _layout.contiguous_strides(shape), dtype, device)


def bhnd(b, h, n, d, **kw):
    return dense((b, h, n, d), **kw)


class KernelArg(unittest.TestCase):
    def test_numbers_and_best(self):
        self.assertEqual(_layout.kernel_arg("best"), _layout.BEST)
        self.assertEqual(_layout.kernel_arg(16), 16)
        self.assertEqual(_layout.kernel_arg(0), 0)

    def test_refused(self):
        for bad, exc in (("fast", ValueError), ("16", ValueError), (-2, ValueError),
                         (True, TypeError), (1.0, TypeError), (None, TypeError)):
            with self.subTest(kernel=bad), self.assertRaisesRegex(exc, "rung number or \"best\""):
                _layout.kernel_arg(bad)


class Strides(unittest.TestCase):
    def test_contiguous(self):
        self.assertEqual(_layout.contiguous_strides((2, 3, 5, 8)), (120, 40, 8, 1))
        self.assertEqual(_layout.contiguous_strides((2, 0, 5, 8)), (40, 40, 8, 1))

    def test_size_one_dims_get_their_dense_stride(self):
        # torch leaves the stride of a size-1 dimension arbitrary (1 here); it never moves the
        # address, and the library would refuse it (not a multiple of 8).
        self.assertEqual(_layout.normalized_strides((1, 4, 1, 64), (1, 64, 1, 1)),
                         (256, 64, 64, 1))
        self.assertEqual(_layout.normalized_strides((2, 4, 3, 64), (1000, 64, 256, 1)),
                         (1000, 64, 256, 1))

    def test_layouts(self):
        # bhnd: [B, H, N, d]; bnhd: [B, N, H, d]. Both give (batch, head, row, dim).
        self.assertEqual(_layout.layout_strides((2, 4, 10, 64), (2560, 640, 64, 1), "bhnd"),
                         (2560, 640, 64, 1))
        self.assertEqual(_layout.layout_strides((2, 10, 4, 64), (2560, 256, 64, 1), "bnhd"),
                         (2560, 64, 256, 1))
        self.assertEqual(_layout.layout_sizes((2, 10, 4, 64), "bnhd"), (2, 4, 10, 64))

    def test_bad_layout(self):
        for bad in ("bshd", "BHND", None, 0):
            with self.subTest(layout=bad), self.assertRaisesRegex(ValueError, "'bhnd', 'bnhd'"):
                _layout.check_layout(bad)


class CheckCall(unittest.TestCase):
    def test_plain(self):
        p = check_call(bhnd(2, 8, 100, 128), bhnd(2, 8, 200, 128), bhnd(2, 8, 200, 128))
        self.assertEqual((p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim),
                         (2, 8, 8, 100, 200, 128))
        self.assertEqual(p.dtype_code, 0)
        self.assertIsNone(p.softmax_scale)
        self.assertEqual(p.strides["q"], (8 * 100 * 128, 100 * 128, 128, 1))
        self.assertEqual(p.strides["k"], (8 * 200 * 128, 200 * 128, 128, 1))
        self.assertEqual(p.strides["o"], p.strides["q"])
        self.assertEqual(p.out_shape, (2, 8, 100, 128))
        self.assertEqual(p.lse_shape, (2, 8, 100))

    def test_bf16_and_scale(self):
        args = [bhnd(1, 2, 16, 64, dtype="bfloat16") for _ in range(3)]
        p = check_call(*args, scale=0.5, causal=True)
        self.assertEqual((p.dtype_code, p.softmax_scale, p.causal), (1, 0.5, True))

    def test_gqa_from_the_shapes(self):
        p = check_call(bhnd(2, 12, 64, 64), bhnd(2, 4, 96, 64), bhnd(2, 4, 96, 64))
        self.assertEqual((p.heads_q, p.heads_kv), (12, 4))
        p = check_call(bhnd(2, 12, 64, 64), bhnd(2, 1, 96, 64), bhnd(2, 1, 96, 64))  # MQA
        self.assertEqual(p.heads_kv, 1)

    def test_bnhd(self):
        q = dense((2, 100, 8, 64))
        kv = dense((2, 50, 2, 64))
        p = check_call(q, kv, kv, layout="bnhd")
        self.assertEqual((p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k),
                         (2, 8, 2, 100, 50))
        # (batch, head, row, dim): a row of q is H * d = 512 elements further
        self.assertEqual(p.strides["q"], (100 * 8 * 64, 64, 512, 1))
        self.assertEqual(p.strides["k"], (50 * 2 * 64, 64, 128, 1))
        self.assertEqual(p.out_shape, (2, 100, 8, 64))   # O in q's layout
        self.assertEqual(p.strides["o"], p.strides["q"])
        self.assertEqual(p.lse_shape, (2, 8, 100))      # the LSE is [B, H_q, Nq] in both

    def test_packed_qkv_view(self):
        # q = qkv[:, :, 0] of a packed [B, N, 3, H, d] tensor, in bnhd: row stride 3 * H * d.
        b, n, h, d = 2, 10, 4, 64
        full = _layout.contiguous_strides((b, n, 3, h, d))
        st = (full[0], full[1], full[3], full[4])
        q = TensorSpec((b, n, h, d), st, "float16", CUDA)
        p = check_call(q, q, q, layout="bnhd")
        self.assertEqual(p.strides["q"], (n * 3 * h * d, d, 3 * h * d, 1))
        # the same view transposed to [B, H, N, d] is the same problem in bhnd
        qt = TensorSpec((b, h, n, d), (st[0], st[2], st[1], 1), "float16", CUDA)
        pt = check_call(qt, qt, qt)
        for name in "qkv":
            self.assertEqual(pt.strides[name], p.strides[name])

    def test_size_one_last_dim_stride(self):
        q = TensorSpec((1, 1, 1, 64), (7, 3, 5, 1), "float16", CUDA)
        p = check_call(q, q, q)
        self.assertEqual(p.strides["q"], (64, 64, 64, 1))

    def test_meta_only_when_allowed(self):
        m = bhnd(1, 1, 8, 64, device="meta")
        check_call(m, m, m, allow_meta=True)
        with self.assertRaisesRegex(ValueError, "q must be on a CUDA device, got meta"):
            check_call(m, m, m)


class CheckCallRefuses(unittest.TestCase):
    def refused(self, exc, pattern, q, k=None, v=None, **kw):
        k = q if k is None else k
        v = k if v is None else v
        with self.assertRaisesRegex(exc, pattern) as cm:
            check_call(q, k, v, **kw)
        self.assertTrue(str(cm.exception).startswith("flash_ladder.attention: "))

    def test_rank(self):
        self.refused(ValueError, r"q must be 4-D, \[B, H, N, d\] \(layout='bhnd'\), got shape "
                     r"\(8, 16, 64\)", dense((8, 16, 64)))
        self.refused(ValueError, r"k must be 4-D, \[B, N, H, d\]", bhnd(1, 1, 8, 64),
                     dense((1, 1, 1, 8, 64)), layout="bnhd")

    def test_dtype(self):
        self.refused(TypeError, "q must be float16 or bfloat16, got float32",
                     bhnd(1, 1, 8, 64, dtype="float32"))
        self.refused(TypeError, "same dtype, got float16, bfloat16, float16", bhnd(1, 1, 8, 64),
                     bhnd(1, 1, 8, 64, dtype="bfloat16"), bhnd(1, 1, 8, 64))

    def test_device(self):
        self.refused(ValueError, "v must be on a CUDA device, got cpu", bhnd(1, 1, 8, 64),
                     bhnd(1, 1, 8, 64), bhnd(1, 1, 8, 64, device="cpu"))
        self.refused(ValueError, "same device, got cuda:0, cuda:1, cuda:0", bhnd(1, 1, 8, 64),
                     bhnd(1, 1, 8, 64, device="cuda:1"), bhnd(1, 1, 8, 64))

    def test_shapes(self):
        self.refused(ValueError, "k and v must have the same shape", bhnd(1, 2, 8, 64),
                     bhnd(1, 2, 8, 64), bhnd(1, 2, 9, 64))
        self.refused(ValueError, "same batch size, got 2 and 1", bhnd(2, 2, 8, 64),
                     bhnd(1, 2, 8, 64))
        self.refused(ValueError, "same head dimension, got 64 and 128", bhnd(1, 2, 8, 64),
                     bhnd(1, 2, 8, 128))
        self.refused(ValueError, r"q's heads \(6\) must be a multiple of k's and v's \(4\)",
                     bhnd(1, 6, 8, 64), bhnd(1, 4, 8, 64))
        # in bnhd the heads are dimension 2: [1, 8, 6, 64] has 6 heads, not 8
        self.refused(ValueError, r"q's heads \(6\) must be a multiple of k's and v's \(4\)",
                     dense((1, 8, 6, 64)), dense((1, 8, 4, 64)), layout="bnhd")

    def test_head_dim_contiguous(self):
        q = TensorSpec((1, 2, 8, 64), (1024, 512, 64, 2), "float16", CUDA)
        self.refused(ValueError, r"q's last dimension \(the head dimension\) must be contiguous, "
                     r"got strides \(1024, 512, 64, 2\)", q, bhnd(1, 2, 8, 64))
        # a transposed [B, H, d, N] view passed as [B, H, N, d]
        k = TensorSpec((1, 2, 8, 64), (1024, 512, 1, 8), "float16", CUDA)
        self.refused(ValueError, "k's last dimension", bhnd(1, 2, 8, 64), k)

    def test_options(self):
        q = bhnd(1, 1, 8, 64)
        self.refused(TypeError, "causal must be a bool, got 1", q, causal=1)
        self.refused(TypeError, "scale must be a number or None, got '0.1'", q, scale="0.1")
        self.refused(ValueError, "layout must be one of", q, layout="nhd")
        with self.assertRaisesRegex(TypeError, "return_lse must be a bool"):
            _layout.check_options(False, None, "yes", "bhnd")


class ParamsFields(unittest.TestCase):
    def test_fields(self):
        p = check_call(bhnd(2, 8, 100, 128), bhnd(2, 4, 200, 128), bhnd(2, 4, 200, 128),
                       causal=True)
        f = _layout.params_fields(p)
        self.assertEqual(f["dtype"], 0)
        self.assertEqual(f["out_dtype"], 0)  # O has q's dtype
        f = _layout.params_fields(p._replace(dtype_code=1))
        self.assertEqual((f["dtype"], f["out_dtype"]), (1, 1))
        self.assertEqual((f["batch"], f["heads_q"], f["heads_kv"], f["seqlen_q"], f["seqlen_k"],
                          f["head_dim"], f["causal"]), (2, 8, 4, 100, 200, 128, 1))
        self.assertAlmostEqual(f["softmax_scale"], 1 / math.sqrt(128))
        self.assertEqual((f["k_stride_batch"], f["k_stride_head"], f["k_stride_row"],
                          f["k_stride_dim"]), (4 * 200 * 128, 200 * 128, 128, 1))
        self.assertEqual((f["o_stride_batch"], f["o_stride_head"], f["o_stride_row"],
                          f["o_stride_dim"]), (8 * 100 * 128, 100 * 128, 128, 1))
        p = p._replace(softmax_scale=0.25)
        self.assertEqual(_layout.params_fields(p)["softmax_scale"], 0.25)


if __name__ == "__main__":
    unittest.main()
