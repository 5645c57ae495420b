"""flash_ladder.attention on the GPU, against torch.nn.functional.scaled_dot_product_attention:
random shapes, both layouts, strided views, GQA, causal (bottom-right), the LSE, explicit rungs,
the library's refusals as exceptions, a CUDA graph, torch.compile and torch.library.opcheck; its
gradients (a backward rung through flash_ladder::attention_backward) against SDPA's math backend,
compiled and in a CUDA graph too.

Needs torch (>= 2.4) and a CUDA GPU, and skips with the reason without them. Where both are
there, a missing library is a failure, not a skip. Run from the repository root, e.g.

    FLASH_LADDER_LIB=build/libflash_ladder.so python3 -m unittest discover -s python/tests -v

FLASH_LADDER_TEST_SEED changes the random cases (default 2026), FLASH_LADDER_TEST_CASES their
number (default 40).
"""
import math
import os
import random
import sys
import unittest

import _setup  # noqa: F401

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    torch = None

import flash_ladder
from flash_ladder import _capi

SEED = int(os.environ.get("FLASH_LADDER_TEST_SEED", "2026"))
CASES = int(os.environ.get("FLASH_LADDER_TEST_CASES", "40"))


def why_skip():
    if torch is None:
        return "torch is not installed"
    if not hasattr(torch.library, "custom_op"):
        return f"torch {torch.__version__} has no torch.library.custom_op (needs >= 2.4)"
    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is False)"
    return None


SKIP = why_skip()

# The error a result may have on top of scaled_dot_product_attention's own (FlashAttention-2's
# rule, max|ours - ref32| <= 2 max|sdpa - ref32| + 1e-4), and never held to less than this floor:
# a few units in the last place of O's dtype (SDPA's backend may round P less than the ladder's
# tensor-core kernels do).
FLOOR = {"float16": 4e-3, "bfloat16": 3.2e-2}
LSE_ATOL = 2e-3


def to_bhnd(t, layout):
    return t if layout == "bhnd" else t.transpose(1, 2)


def from_bhnd(t, layout):
    return t if layout == "bhnd" else t.transpose(1, 2)


def reference(q, k, v, causal, scale, layout):
    """(O fp32 in q's layout, LSE fp32 [B, H_q, Nq], rows that see a key [.., Nq] bool,
    O of SDPA in the input dtype) for the ladder's definition: GQA by head groups, the causal
    mask bottom-right aligned, a row that sees no key gets O = 0 and LSE = -inf."""
    with torch.no_grad():
        return _reference(q, k, v, causal, scale, layout)


def _reference(q, k, v, causal, scale, layout):
    qb, kb, vb = (to_bhnd(t, layout) for t in (q, k, v))
    g = qb.shape[1] // kb.shape[1]
    kb, vb = (t.repeat_interleave(g, dim=1) for t in (kb, vb))
    nq, nk, d = qb.shape[2], kb.shape[2], qb.shape[3]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    mask = None
    seen = torch.ones(nq, dtype=torch.bool, device=q.device)
    if causal:
        i = torch.arange(nq, device=q.device)[:, None]
        j = torch.arange(nk, device=q.device)[None, :]
        mask = j <= i + (nk - nq)
        seen = mask.any(dim=-1)
    qf, kf, vf = qb.float(), kb.float(), vb.float()
    with sdpa_kernel(SDPBackend.MATH):
        o32 = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=mask, scale=scale)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o_low = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=scale)
    keep = seen[:, None]
    o32 = torch.where(keep, o32, torch.zeros_like(o32))
    o_low = torch.where(keep, o_low.float(), torch.zeros_like(o32))
    return from_bhnd(o32, layout), lse, seen, from_bhnd(o_low, layout)


def max_abs(a, b):
    if a.numel() == 0:
        return 0.0
    return float((a.float() - b.float()).abs().max())


def make_tensor(b, h, n, d, layout, dtype, style, gen):
    """Random [B, H, N, d] data in `layout`, laid out as `style` says: contiguous; padded (row
    stride d + 8); sliced (a slice of a tensor with one more head: bigger batch stride, an
    offset pointer); transposed (stored in the other layout, viewed in this one)."""
    phys = (b, h, n, d) if layout == "bhnd" else (b, n, h, d)

    def randn(shape):
        return torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)

    if style == "contiguous":
        return randn(phys)
    if style == "padded":
        return randn(phys[:3] + (d + 8,))[..., :d]
    if style == "sliced":
        if layout == "bhnd":
            return randn((b, h + 1, n, d))[:, 1:]
        return randn((b, n, h + 1, d))[:, :, 1:]
    if style == "transposed":
        other = (b, n, h, d) if layout == "bhnd" else (b, h, n, d)
        return randn(other).transpose(1, 2)
    raise ValueError(style)


STYLES = ("contiguous", "padded", "sliced", "transposed")


@unittest.skipIf(SKIP is not None, SKIP)
class GpuTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Here torch and a GPU are present: a library that is not found fails the tests.
        cls.lib = flash_ladder.load_library()
        cls.numbers = [k.number for k in cls.lib.kernels]
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
        torch.backends.cudnn.allow_tf32 = False
        cls.gen = torch.Generator(device="cuda").manual_seed(SEED)
        cls.attention = staticmethod(flash_ladder.attention)  # registers the op (or fails)

    def check(self, q, k, v, *, causal=False, scale=None, layout="bhnd", kernel="best",
              return_lse=True, label=""):
        """Runs attention and holds it to the reference; returns (O, LSE)."""
        out = flash_ladder.attention(q, k, v, causal=causal, scale=scale, kernel=kernel,
                                     return_lse=return_lse, layout=layout)
        o, lse = out if return_lse else (out, None)
        torch.cuda.synchronize()
        self.assertIsInstance(o, torch.Tensor)
        self.assertEqual(tuple(o.shape), tuple(q.shape), label)
        self.assertEqual(o.dtype, q.dtype, label)
        self.assertEqual(o.device, q.device, label)
        self.assertTrue(o.is_contiguous(), label)
        ref, ref_lse, seen, low = reference(q, k, v, causal, scale, layout)
        # rows that see a key: the pass rule; rows that see none: exactly 0 and -inf
        seen_o = seen[None, :, None, None] if layout == "bnhd" else seen[None, None, :, None]
        seen_o = seen_o.expand_as(ref)
        self.assertGreater(int(seen.sum()), 0, "the case must compare something")
        self.assertTrue(bool(torch.isfinite(o[seen_o]).all()), f"{label}: non-finite output")
        err = max_abs(o[seen_o], ref[seen_o])
        tol = max(2 * max_abs(low[seen_o], ref[seen_o]) + 1e-4, FLOOR[str(q.dtype)[6:]])
        self.assertLessEqual(err, tol, f"{label}: max |O - O_fp32| = {err:.3g} > {tol:.3g}")
        if not bool(seen.all()):
            self.assertTrue(bool((o[~seen_o] == 0).all()), f"{label}: a row with no key is not 0")
        if return_lse:
            self.assertEqual(tuple(lse.shape), tuple(ref_lse.shape), label)
            self.assertEqual(lse.dtype, torch.float32, label)
            self.assertTrue(lse.is_contiguous(), label)
            s = seen.expand_as(ref_lse)
            lse_err = max_abs(lse[s], ref_lse[s])
            self.assertLessEqual(lse_err, LSE_ATOL + 1e-4 * float(ref_lse[s].abs().max()),
                                 f"{label}: max |LSE - LSE_fp32| = {lse_err:.3g}")
            if not bool(seen.all()):
                self.assertTrue(bool((lse[~s] == float("-inf")).all()),
                                f"{label}: a row with no key has LSE != -inf")
        return o, lse


class RandomShapes(GpuTestCase):
    def test_random_cases(self):
        rng = random.Random(SEED)
        for case in range(CASES):
            dtype = rng.choice([torch.float16, torch.bfloat16])
            layout = rng.choice(["bhnd", "bnhd"])
            d = rng.choice([64, 128, 256])
            b, hkv, g = rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 4)
            nq = rng.choice([rng.randint(1, 300), 128 * rng.randint(1, 3)])
            nk = rng.choice([nq, rng.randint(1, 300)])
            causal = rng.random() < 0.5
            scale = rng.choice([None, rng.uniform(0.02, 0.2)])
            return_lse = rng.random() < 0.7
            styles = [rng.choice(STYLES) for _ in range(3)]
            label = (f"case {case}: {str(dtype)[6:]} {layout} B={b} H_q={hkv * g} H_kv={hkv} "
                     f"Nq={nq} Nk={nk} d={d} causal={causal} scale={scale} lse={return_lse} "
                     f"q,k,v={','.join(styles)}")
            with self.subTest(label):
                q = make_tensor(b, hkv * g, nq, d, layout, dtype, styles[0], self.gen)
                k = make_tensor(b, hkv, nk, d, layout, dtype, styles[1], self.gen)
                v = make_tensor(b, hkv, nk, d, layout, dtype, styles[2], self.gen)
                self.check(q, k, v, causal=causal, scale=scale, layout=layout,
                           return_lse=return_lse, label=label)

    def test_layouts_give_the_same_bits(self):
        # The same data as [B, H, N, d] and as [B, N, H, d] (copies and views): bitwise equal O
        # from one kernel (rung 16: "best" may pick a rung that takes one layout and not another).
        if 16 not in self.numbers:
            self.skipTest("rung 16 is not in this build")
        q = make_tensor(2, 8, 200, 128, "bhnd", torch.float16, "contiguous", self.gen)
        k = make_tensor(2, 2, 333, 128, "bhnd", torch.float16, "contiguous", self.gen)
        v = make_tensor(2, 2, 333, 128, "bhnd", torch.float16, "contiguous", self.gen)
        o = flash_ladder.attention(q, k, v, causal=True, kernel=16)
        views = [t.transpose(1, 2) for t in (q, k, v)]
        copies = [t.contiguous() for t in views]
        for name, (qq, kk, vv) in (("views", views), ("copies", copies)):
            with self.subTest(name):
                o2 = flash_ladder.attention(qq, kk, vv, causal=True, layout="bnhd", kernel=16)
                self.assertEqual(tuple(o2.shape), (2, 200, 8, 128))
                self.assertTrue(torch.equal(o2.transpose(1, 2), o))

    def test_packed_qkv(self):
        # q, k, v as slices of one [B, N, 3, H, d] projection output, as a model has them.
        b, n, h, d = 2, 257, 4, 64
        qkv = torch.randn(b, n, 3, h, d, device="cuda", dtype=torch.bfloat16,
                          generator=self.gen)
        q, k, v = qkv.unbind(dim=2)
        self.assertFalse(q.is_contiguous())
        self.check(q, k, v, layout="bnhd", causal=True, label="packed bnhd")
        self.check(*(t.transpose(1, 2) for t in (q, k, v)), label="packed, as bhnd views")

    def test_size_one_dims(self):
        # B = 1, H = 1, N = 1: strides torch leaves arbitrary are not passed on as they are.
        q = torch.randn(1, 1, 1, 64, device="cuda", dtype=torch.float16)
        q = q.as_strided(q.shape, (1, 1, 1, 1))
        k = torch.randn(1, 1, 37, 64, device="cuda", dtype=torch.float16)
        self.check(q, k, k, label="size-1 dims")


class Kernels(GpuTestCase):
    def test_explicit_rungs(self):
        # Each rung on a shape it claims (docs/contract.md).
        cases = [(1, dict(nq=100, nk=77, d=64, causal=True)),
                 (3, dict(nq=128, nk=192, d=64)),
                 (8, dict(nq=256, nk=128, d=128)),
                 (11, dict(nq=256, nk=96, d=128)),
                 (16, dict(nq=300, nk=301, d=256, causal=True))]
        for number, shape in cases:
            if number not in self.numbers:
                continue
            with self.subTest(kernel=number, **shape):
                q = make_tensor(2, 4, shape["nq"], shape["d"], "bhnd", torch.float16,
                                "contiguous", self.gen)
                k = make_tensor(2, 2, shape["nk"], shape["d"], "bhnd", torch.float16,
                                "contiguous", self.gen)
                v = make_tensor(2, 2, shape["nk"], shape["d"], "bhnd", torch.float16,
                                "contiguous", self.gen)
                self.check(q, k, v, causal=shape.get("causal", False), kernel=number,
                           label=f"kernel {number}")

    def test_best_is_the_highest_rung_that_supports_the_call(self):
        q = make_tensor(2, 16, 1024, 128, "bhnd", torch.float16, "contiguous", self.gen)
        k = make_tensor(2, 16, 1024, 128, "bhnd", torch.float16, "contiguous", self.gen)
        v = make_tensor(2, 16, 1024, 128, "bhnd", torch.float16, "contiguous", self.gen)
        o = torch.empty_like(q)
        params = flash_ladder.make_params(q, k, v, o, causal=True)
        best = _capi.best_kernel(self.lib, params)
        accepted = [n for n in self.numbers if self.lib.supports(n, params)[0]]
        self.assertEqual(best, max(accepted))
        if 16 in self.numbers:  # rung 16 takes every shape of the contract on sm_80+
            self.assertGreaterEqual(best, 16)
        name = next(k.name for k in self.lib.kernels if k.number == best)
        print(f"\n  [{torch.cuda.get_device_name()}, torch {torch.__version__}, "
              f"{self.lib.path}] \"best\" for fp16 B=2 H=16 N=1024 d=128 causal: {name}",
              file=sys.stderr)
        a = flash_ladder.attention(q, k, v, causal=True)
        b = flash_ladder.attention(q, k, v, causal=True, kernel=best)
        self.assertTrue(torch.equal(a, b))
        self.check(q, k, v, causal=True, label="best, N = 1024")

    def test_current_stream_and_cuda_graph(self):
        # Captured into a CUDA graph (on torch's capture stream) and replayed on new inputs: the
        # kernel must have been enqueued on the current stream to be in the graph at all.
        q, k, v = (make_tensor(1, 4, 256, 64, "bhnd", torch.float16, "contiguous", self.gen)
                   for _ in range(3))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up off the default stream, the call captured below
            flash_ladder.attention(q, k, v, causal=True)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o = flash_ladder.attention(q, k, v, causal=True)
        for t in (q, k, v):
            t.copy_(torch.randn(t.shape, device="cuda", generator=self.gen).to(t.dtype))
        graph.replay()
        torch.cuda.synchronize()
        ref, _, _, _ = reference(q, k, v, True, None, "bhnd")
        self.assertLessEqual(max_abs(o, ref), FLOOR["float16"])


class Decode(GpuTestCase):
    """The serving rungs through the package: a few query rows against a long K/V cache, the
    GQA heads packed, the keys split over blocks whose partials live in a workspace that the
    package takes from torch's allocator (also inside a CUDA graph)."""

    SHAPES = [dict(b=1, h=32, hkv=8, nq=1, nk=8192, layout="bnhd", causal=False),
              dict(b=2, h=16, hkv=2, nq=4, nk=3000, layout="bnhd", causal=True),
              dict(b=1, h=8, hkv=8, nq=1, nk=20000, layout="bhnd", causal=False),
              dict(b=3, h=6, hkv=2, nq=16, nk=700, layout="bhnd", causal=True)]

    def tensors(self, c, d=128):
        return (make_tensor(c["b"], c["h"], c["nq"], d, c["layout"], torch.float16,
                            "contiguous", self.gen),
                make_tensor(c["b"], c["hkv"], c["nk"], d, c["layout"], torch.float16,
                            "contiguous", self.gen),
                make_tensor(c["b"], c["hkv"], c["nk"], d, c["layout"], torch.float16,
                            "contiguous", self.gen))

    def test_decode_calls(self):
        serving = [n for n in self.numbers if n >= 37]
        if not serving:
            self.skipTest("no serving rung (37+) in this build")
        for c in self.SHAPES:
            q, k, v = self.tensors(c)
            o = torch.empty_like(q)
            params = flash_ladder.make_params(q, k, v, o, causal=c["causal"], layout=c["layout"])
            best = _capi.best_kernel(self.lib, params)
            self.assertEqual(best, max(serving), f"best for {c}")
            for kernel in ["best"] + serving:
                self.check(q, k, v, causal=c["causal"], layout=c["layout"], kernel=kernel,
                           label=f"{c} kernel {kernel}")

    def test_split_workspace_in_a_cuda_graph(self):
        if 38 not in self.numbers:
            self.skipTest("rung 38 is not in this build")
        c = self.SHAPES[0]
        q, k, v = self.tensors(c)
        o = torch.empty_like(q)
        params = flash_ladder.make_params(q, k, v, o, layout=c["layout"])
        self.assertGreater(self.lib.workspace_size(38, params), 0,
                           "this shape should be split (B = 1, 8 KV heads, 128 key tiles)")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            flash_ladder.attention(q, k, v, kernel=38, layout=c["layout"])
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = flash_ladder.attention(q, k, v, kernel=38, layout=c["layout"])
        for t in (q, k, v):
            t.copy_(torch.randn(t.shape, device="cuda", generator=self.gen).to(t.dtype))
        graph.replay()
        torch.cuda.synchronize()
        ref, _, _, _ = reference(q, k, v, False, None, c["layout"])
        self.assertLessEqual(max_abs(out, ref), FLOOR["float16"])


class Errors(GpuTestCase):
    def qkv(self, n=128, d=64, h=2):
        return [make_tensor(1, h, n, d, "bhnd", torch.float16, "contiguous", self.gen)
                for _ in range(3)]

    def test_the_library_refuses_with_its_message(self):
        if 3 in self.numbers:
            q, k, v = self.qkv(n=100)
            with self.assertRaisesRegex(flash_ladder.UnsupportedError,
                                        "kernel 03_mma: .*multiple of 64"):
                flash_ladder.attention(q, k, v, kernel=3)
        q, k, v = self.qkv()
        with self.assertRaisesRegex(flash_ladder.NoSuchKernelError, "no kernel numbered 99"):
            flash_ladder.attention(q, k, v, kernel=99)
        with self.assertRaisesRegex(flash_ladder.UnsupportedError, "softmax_scale"):
            flash_ladder.attention(q, k, v, scale=-1.0, kernel=16 if 16 in self.numbers else 1)

    def test_strides_and_alignment_reach_the_library(self):
        q, k, v = self.qkv()
        # a row stride of d + 4 elements: not a multiple of 8, refused by every kernel
        odd = torch.randn(1, 2, 128, 68, device="cuda").half()[..., :64]
        with self.assertRaisesRegex(flash_ladder.UnsupportedError,
                                    "Q strides must be multiples of 8 elements"):
            flash_ladder.attention(odd, k, v)
        # a pointer 2 bytes past a 16-byte boundary
        flat = torch.randn(1 * 2 * 128 * 64 + 8, device="cuda").half()
        shifted = flat[1:1 + q.numel()].view(q.shape)
        with self.assertRaisesRegex(flash_ladder.UnsupportedError, "aligned"):
            flash_ladder.attention(shifted, k, v)

    def test_argument_errors(self):
        q, k, v = self.qkv()
        with self.assertRaisesRegex(TypeError, "float16 or bfloat16, got float32"):
            flash_ladder.attention(q.float(), k.float(), v.float())
        with self.assertRaisesRegex(TypeError, "same dtype"):
            flash_ladder.attention(q, k.bfloat16(), v)
        with self.assertRaisesRegex(ValueError, "must be on a CUDA device, got cpu"):
            flash_ladder.attention(q.cpu(), k.cpu(), v.cpu())
        with self.assertRaisesRegex(ValueError, "4-D"):
            flash_ladder.attention(q[0], k[0], v[0])
        with self.assertRaisesRegex(ValueError, "last dimension .* must be contiguous"):
            flash_ladder.attention(q.transpose(2, 3).contiguous().transpose(2, 3)[..., :64, :],
                                   k, v)
        with self.assertRaisesRegex(ValueError, r"multiple of k's and v's \(2\)"):
            flash_ladder.attention(self.qkv(h=3)[0], k, v)
        with self.assertRaisesRegex(ValueError, "layout must be one of"):
            flash_ladder.attention(q, k, v, layout="bshd")
        with self.assertRaisesRegex(ValueError, 'rung number or "best"'):
            flash_ladder.attention(q, k, v, kernel="fastest")
        with self.assertRaisesRegex(TypeError, "causal must be a bool"):
            flash_ladder.attention(q, k, v, causal=1)
        with self.assertRaisesRegex(TypeError, "q must be a torch.Tensor"):
            flash_ladder.attention([[1.0]], k, v)


class Compile(GpuTestCase):
    def test_torch_compile(self):
        def f(q, k, v):
            o, lse = flash_ladder.attention(q, k, v, causal=True, return_lse=True)
            return o.float() * 2.0, lse + 1.0

        q = make_tensor(2, 8, 300, 128, "bhnd", torch.bfloat16, "contiguous", self.gen)
        k = make_tensor(2, 4, 200, 128, "bhnd", torch.bfloat16, "contiguous", self.gen)
        v = make_tensor(2, 4, 200, 128, "bhnd", torch.bfloat16, "contiguous", self.gen)
        torch._dynamo.reset()
        compiled = torch.compile(f, fullgraph=True)  # fullgraph: no graph break at the op
        got_o, got_lse = compiled(q, k, v)
        want_o, want_lse = f(q, k, v)
        self.assertTrue(torch.equal(got_o, want_o))
        self.assertTrue(torch.equal(got_lse, want_lse))
        o, _ = self.check(q, k, v, causal=True, label="compiled case, eager")
        self.assertTrue(torch.equal(got_o, o.float() * 2.0))

    def test_torch_compile_dynamic_shapes_and_layout(self):
        def f(q, k, v):
            return flash_ladder.attention(q, k, v, layout="bnhd", kernel="best") + 0

        torch._dynamo.reset()
        compiled = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
        for n in (64, 200, 513):
            with self.subTest(n=n):
                q = make_tensor(1, 4, n, 64, "bnhd", torch.float16, "contiguous", self.gen)
                k = make_tensor(1, 1, n + 3, 64, "bnhd", torch.float16, "sliced", self.gen)
                v = make_tensor(1, 1, n + 3, 64, "bnhd", torch.float16, "contiguous", self.gen)
                self.assertTrue(torch.equal(compiled(q, k, v), f(q, k, v)))

    def test_opcheck(self):
        # schema, fake (meta) implementation against the real one, autograd registration,
        # AOT dispatch with dynamic shapes
        q = make_tensor(1, 4, 96, 64, "bhnd", torch.float16, "contiguous", self.gen)
        k = make_tensor(1, 2, 80, 64, "bhnd", torch.float16, "contiguous", self.gen)
        v = make_tensor(1, 2, 80, 64, "bhnd", torch.float16, "contiguous", self.gen)
        op = torch.ops.flash_ladder.attention.default
        for args in ((q, k, v, True, None, -1, True, "bhnd"),
                     (q, k, v, False, 0.1, -1, False, "bhnd")):
            with self.subTest(causal=args[3], return_lse=args[6]):
                torch.library.opcheck(op, args)


# ------------------------------------------------------------------------------------------------
# Gradients: flash_ladder.attention is differentiable through a backward rung
# ------------------------------------------------------------------------------------------------
class _MathReductionsInInputType:
    """SDPA's math backend computing in the inputs' type (fp16/bf16 matmuls and softmax), as the
    plain PyTorch attention FlashAttention-2's tests hold their gradients to. torch >= 2.5 upcasts
    to fp32 unless allow_fp16_bf16_reduction_math_sdp(True); earlier versions always reduce in the
    inputs' type."""

    def __enter__(self):
        cuda = torch.backends.cuda
        self.saved = (cuda.fp16_bf16_reduction_math_sdp_allowed()
                      if hasattr(cuda, "fp16_bf16_reduction_math_sdp_allowed") else None)
        if self.saved is not None:
            cuda.allow_fp16_bf16_reduction_math_sdp(True)

    def __exit__(self, *exc):
        if self.saved is not None:
            torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(self.saved)


def reference_grads(q, k, v, dout, causal, scale, layout, dtype):
    """(dQ, dK, dV) of the ladder's attention by SDPA's math backend computed in `dtype`
    (torch.float32: the reference, inputs upcast; the inputs' type: the same math in the input
    precision), in q's, k's and v's layouts and shapes. GQA by repeating K and V over each group
    (autograd sums the group's gradients back into the KV head); a row that sees no key (causal,
    Nq > Nk) is given every key and its output multiplied by 0, so that it contributes nothing,
    as the ladder defines it (no NaN)."""
    qb, kb, vb, dob = (to_bhnd(t, layout).detach().to(dtype) for t in (q, k, v, dout))
    for t in (qb, kb, vb):
        t.requires_grad_(True)
    g = qb.shape[1] // kb.shape[1]
    nq, nk = qb.shape[2], kb.shape[2]
    mask, seen = None, torch.ones(nq, dtype=torch.bool, device=q.device)
    if causal:
        i = torch.arange(nq, device=q.device)[:, None]
        j = torch.arange(nk, device=q.device)[None, :]
        mask = j <= i + (nk - nq)
        seen = mask.any(dim=-1)
        mask = mask | ~seen[:, None]
    with torch.enable_grad(), sdpa_kernel(SDPBackend.MATH), _MathReductionsInInputType():
        o = F.scaled_dot_product_attention(qb, kb.repeat_interleave(g, dim=1),
                                           vb.repeat_interleave(g, dim=1), attn_mask=mask,
                                           scale=scale)
        o = o * seen[:, None].to(dtype)
        grads = torch.autograd.grad(o, (qb, kb, vb), dob)
    return tuple(from_bhnd(t, layout) for t in grads)


GRAD_NAMES = ("q", "k", "v")


class Gradients(GpuTestCase):
    """Each gradient of flash_ladder.attention held to FlashAttention-2's rule against SDPA's
    math backend: max|grad - grad_fp32| <= 2 max|grad_lowp - grad_fp32| + 1e-4, with grad_fp32
    the fp32 math and grad_lowp the same math in the inputs' type."""

    def backward_refusal(self, q, k, v, causal, layout, backward_kernel="best"):
        """The library's reason no backward rung (or not `backward_kernel`) takes the call, or
        None when one does. Asked with real tensors of the call's shapes and strides."""
        o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        lse = torch.empty(o.shape[0], o.shape[2] if layout == "bnhd" else o.shape[1],
                          o.shape[1] if layout == "bnhd" else o.shape[2], device=q.device)
        grads = [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v)]
        params = flash_ladder.make_backward_params(q, k, v, o, lse, o, *grads, causal=causal,
                                                   layout=layout)
        try:
            number = (self.lib.best_backward(params) if backward_kernel == "best"
                      else backward_kernel)
            params.workspace_bytes = self.lib.backward_workspace_size(number, params.fwd)
            params.workspace = 256 if params.workspace_bytes else None  # a placeholder: not run
        except flash_ladder.FlashLadderError as e:
            return str(e)
        ok, why = self.lib.supports_backward(number, params)
        return None if ok else why

    def check_grads(self, q, k, v, dout, got, *, causal=False, scale=None, layout="bhnd",
                    label=""):
        """Holds got = {name: gradient} to the rule; inputs without an entry are not judged."""
        ref = reference_grads(q, k, v, dout, causal, scale, layout, torch.float32)
        low = reference_grads(q, k, v, dout, causal, scale, layout, q.dtype)
        for i, name in enumerate(GRAD_NAMES):
            if name not in got:
                continue
            g, like = got[name], (q, k, v)[i]
            self.assertEqual(tuple(g.shape), tuple(like.shape), f"{label}: d{name}'s shape")
            self.assertEqual(g.dtype, like.dtype, f"{label}: d{name}'s dtype")
            self.assertTrue(bool(torch.isfinite(g).all()), f"{label}: d{name} is not finite")
            self.assertGreater(float(ref[i].abs().max()), 0.0, f"{label}: nothing to compare")
            err, low_err = max_abs(g, ref[i]), max_abs(low[i], ref[i])
            tol = 2 * low_err + 1e-4
            self.assertLessEqual(err, tol, f"{label}: max |d{name} - d{name}_fp32| = {err:.3g} > "
                                           f"2 x {low_err:.3g} (the same math in "
                                           f"{str(q.dtype)[6:]}) + 1e-4")

    def run_case(self, *, dtype, layout, b, hq, hkv, nq, nk, d, causal, wanted,
                 styles=("contiguous",) * 3, dout_style="contiguous", label=""):
        q, k, v = (make_tensor(b, h, n, d, layout, dtype, s, self.gen)
                   for h, n, s in ((hq, nq, styles[0]), (hkv, nk, styles[1]),
                                   (hkv, nk, styles[2])))
        why = self.backward_refusal(q, k, v, causal, layout)
        if why is not None:
            self.skipTest(f"no backward rung of this build takes it here: {why}")
        leaves = [t.detach().requires_grad_(n in wanted) for n, t in zip(GRAD_NAMES, (q, k, v))]
        o = flash_ladder.attention(*leaves, causal=causal, layout=layout)
        if dout_style == "expanded":  # o.sum()'s gradient: every stride 0
            dout = torch.ones((), dtype=dtype, device="cuda").expand(o.shape)
        else:
            dout = make_tensor(b, hq, nq, d, layout, dtype, dout_style, self.gen)
        o.backward(dout)
        torch.cuda.synchronize()
        got = {}
        for name, t in zip(GRAD_NAMES, leaves):
            if name in wanted:
                self.assertIsNotNone(t.grad, f"{label}: d{name} missing")
                got[name] = t.grad
            else:
                self.assertIsNone(t.grad, f"{label}: d{name} computed though not wanted")
        self.check_grads(q, k, v, dout, got, causal=causal, layout=layout, label=label)

    def test_cases(self):
        # MHA and GQA, both layouts, causal and not, fp16 and bf16, every subset of q, k, v that
        # matters, strided inputs and gradients of O that are not contiguous.
        cases = [
            dict(dtype=torch.float16, layout="bhnd", b=2, hq=4, hkv=4, nq=128, nk=128, d=64,
                 causal=False, wanted="qkv"),
            dict(dtype=torch.bfloat16, layout="bnhd", b=1, hq=4, hkv=4, nq=192, nk=256, d=128,
                 causal=False, wanted="qkv"),
            dict(dtype=torch.float16, layout="bnhd", b=2, hq=2, hkv=2, nq=128, nk=64, d=128,
                 causal=False, wanted="q"),
            dict(dtype=torch.bfloat16, layout="bhnd", b=1, hq=2, hkv=2, nq=64, nk=192, d=64,
                 causal=False, wanted="kv"),
            dict(dtype=torch.float16, layout="bhnd", b=1, hq=2, hkv=2, nq=128, nk=128, d=64,
                 causal=False, wanted="v", styles=("padded", "sliced", "transposed")),
            dict(dtype=torch.float16, layout="bnhd", b=1, hq=2, hkv=2, nq=128, nk=128, d=128,
                 causal=False, wanted="qkv", dout_style="transposed"),
            dict(dtype=torch.float16, layout="bhnd", b=1, hq=2, hkv=2, nq=64, nk=64, d=64,
                 causal=False, wanted="qk", dout_style="expanded"),
            # GQA (dK, dV summed over each group), causal, lengths that are not tile multiples,
            # d = 256: run where a backward rung of this build takes them, skipped with the
            # library's reason where none does
            dict(dtype=torch.float16, layout="bhnd", b=2, hq=8, hkv=2, nq=128, nk=128, d=64,
                 causal=False, wanted="qkv"),
            dict(dtype=torch.bfloat16, layout="bnhd", b=1, hq=6, hkv=2, nq=128, nk=192, d=128,
                 causal=False, wanted="kv"),
            dict(dtype=torch.float16, layout="bhnd", b=1, hq=4, hkv=4, nq=192, nk=192, d=128,
                 causal=True, wanted="qkv"),
            dict(dtype=torch.bfloat16, layout="bnhd", b=2, hq=4, hkv=1, nq=200, nk=77, d=64,
                 causal=True, wanted="qkv"),
            dict(dtype=torch.float16, layout="bhnd", b=1, hq=2, hkv=2, nq=100, nk=300, d=64,
                 causal=True, wanted="q"),
            dict(dtype=torch.float16, layout="bhnd", b=1, hq=2, hkv=2, nq=128, nk=128, d=256,
                 causal=False, wanted="qkv"),
        ]
        for case in cases:
            label = ", ".join(f"{key}={val}" for key, val in case.items())
            with self.subTest(label):
                self.run_case(**case, label=label)

    def test_the_backward_rungs_by_number(self):
        # Each backward rung asked for by number (backward_kernel=N) on a call it takes.
        for kernel in self.lib.backward_kernels:
            with self.subTest(kernel=kernel.name):
                q, k, v = (make_tensor(1, 4, 128, 128, "bhnd", torch.float16, "contiguous",
                                       self.gen) for _ in range(3))
                why = self.backward_refusal(q, k, v, False, "bhnd", kernel.number)
                if why is not None:
                    self.skipTest(why)
                leaves = [t.detach().requires_grad_() for t in (q, k, v)]
                o = flash_ladder.attention(*leaves, backward_kernel=kernel.number)
                dout = torch.randn_like(o)
                o.backward(dout)
                self.check_grads(q, k, v, dout, dict(zip(GRAD_NAMES, (t.grad for t in leaves))),
                                 label=kernel.name)

    def test_no_grad_and_inputs_without_grad(self):
        # Without a gradient wanted the forward is as before (no LSE asked for) and returns a
        # tensor with no graph; the LSE returned with one is not differentiable.
        q, k, v = (make_tensor(1, 2, 64, 64, "bhnd", torch.float16, "contiguous", self.gen)
                   for _ in range(3))
        self.assertIsNone(flash_ladder.attention(q, k, v).grad_fn)
        qg = q.detach().requires_grad_()
        with torch.no_grad():
            self.assertIsNone(flash_ladder.attention(qg, k, v).grad_fn)
        o, lse = flash_ladder.attention(qg, k, v, return_lse=True)
        self.assertIsNotNone(o.grad_fn)
        self.assertFalse(lse.requires_grad)

    def test_refusals_carry_the_librarys_message(self):
        q, k, v = (make_tensor(1, 2, 128, 64, "bhnd", torch.float16, "contiguous", self.gen)
                   .requires_grad_() for _ in range(3))
        # a forward rung asked for as the backward's
        o = flash_ladder.attention(q, k, v, backward_kernel=16 if 16 in self.numbers else 0)
        name = "16_final" if 16 in self.numbers else "00_cublas"
        with self.assertRaisesRegex(flash_ladder.UnsupportedError,
                                    f"kernel {name}: is a forward rung"):
            o.backward(torch.ones_like(o))
        with self.assertRaisesRegex(flash_ladder.NoSuchKernelError, "no kernel numbered 99"):
            flash_ladder.attention(q, k, v, backward_kernel=99).sum().backward()
        with self.assertRaisesRegex(ValueError, 'backward_kernel must be a rung number or "best"'):
            flash_ladder.attention(q, k, v, backward_kernel="fast")
        # A call no backward rung takes (d = 256 with every rung of rung 29's contract; GQA,
        # causal where those are missing too): the library's message, every rung's rule.
        for hq, hkv, d, causal in ((2, 2, 256, False), (4, 2, 64, False), (2, 2, 64, True)):
            q, k, v = (make_tensor(1, h, 128, d, "bhnd", torch.float16, "contiguous", self.gen)
                       for h in (hq, hkv, hkv))
            why = self.backward_refusal(q, k, v, causal, "bhnd")
            if why is None:
                continue  # a backward rung takes it: test_cases holds its gradients
            with self.subTest(hq=hq, hkv=hkv, d=d, causal=causal):
                leaves = [t.requires_grad_() for t in (q, k, v)]
                o = flash_ladder.attention(*leaves, causal=causal)
                with self.assertRaises(flash_ladder.UnsupportedError) as cm:
                    o.backward(torch.ones_like(o))
                self.assertEqual(str(cm.exception), why)
                self.assertTrue(str(cm.exception).startswith(
                    "no backward kernel of this build supports this call:"), str(cm.exception))

    def test_torch_compile_forward_and_backward(self):
        # fullgraph: no graph break at either op; the backward graph calls
        # flash_ladder::attention_backward.
        # d = 64 and 128: on an H100 two different backward rungs (the mma.sync one and the
        # Hopper one, whose TMA maps are built at each call).
        for layout, d in (("bhnd", 64), ("bnhd", 64), ("bhnd", 128), ("bnhd", 128)):
            with self.subTest(layout=layout, d=d):
                q, k, v = (make_tensor(2, 4, 128, d, layout, torch.bfloat16, "contiguous",
                                       self.gen) for _ in range(3))
                why = self.backward_refusal(q, k, v, False, layout)
                if why is not None:
                    self.skipTest(why)
                w = make_tensor(2, 4, 128, d, layout, torch.bfloat16, "contiguous", self.gen)

                def f(q, k, v):
                    return (flash_ladder.attention(q, k, v, layout=layout).float()
                            * w.float()).sum()

                leaves = [t.detach().requires_grad_() for t in (q, k, v)]
                torch._dynamo.reset()
                loss = torch.compile(f, fullgraph=True)(*leaves)
                loss.backward()
                torch.cuda.synchronize()
                # d loss / d O = w (the bf16 O upcast: the gradient is w rounded to bf16)
                self.check_grads(q, k, v, w, dict(zip(GRAD_NAMES, (t.grad for t in leaves))),
                                 layout=layout, label=f"compiled, {layout}, d = {d}")

    def test_cuda_graph_of_forward_and_backward(self):
        # Forward and backward captured into one CUDA graph (the workspace and the gradients
        # from the graph's memory pool), replayed on new inputs and a new dO; d = 64 and 128 (on
        # an H100 the mma.sync backward rung and the Hopper one).
        for d in (64, 128):
            with self.subTest(d=d):
                self.graph_case(d)

    def graph_case(self, d):
        q, k, v = (make_tensor(1, 4, 128, d, "bhnd", torch.float16, "contiguous", self.gen)
                   for _ in range(3))
        why = self.backward_refusal(q, k, v, False, "bhnd")
        if why is not None:
            self.skipTest(why)
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        dout = torch.randn_like(q)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up off the default stream
            for _ in range(2):
                o = flash_ladder.attention(*leaves)
                torch.autograd.grad(o, leaves, dout)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o = flash_ladder.attention(*leaves)
            grads = torch.autograd.grad(o, leaves, dout)
        with torch.no_grad():
            for t in leaves + [dout]:
                t.copy_(torch.randn(t.shape, device="cuda", generator=self.gen).to(t.dtype))
        graph.replay()
        torch.cuda.synchronize()
        self.check_grads(*(t.detach() for t in leaves), dout, dict(zip(GRAD_NAMES, grads)),
                         label=f"graph replay, d = {d}")

    def test_opcheck(self):
        # The backward op's schema, fake implementation against the real one, and AOT dispatch;
        # the forward's autograd registration with inputs that require grad.
        q, k, v = (make_tensor(1, 2, 128, 64, "bhnd", torch.float16, "contiguous", self.gen)
                   for _ in range(3))
        why = self.backward_refusal(q, k, v, False, "bhnd")
        if why is not None:
            self.skipTest(why)
        o, lse = flash_ladder.attention(q, k, v, return_lse=True)
        torch.library.opcheck(torch.ops.flash_ladder.attention_backward.default,
                              (q, k, v, o, lse, torch.randn_like(o), False, None, -1, "bhnd"))
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        torch.library.opcheck(torch.ops.flash_ladder.attention.default,
                              (*leaves, False, None, -1, True, "bhnd", -1))


class Fp8(GpuTestCase):
    """float8_e4m3fn inputs through flash_ladder.attention (the FP8 rung, 28, on compute capability
    9.0), against the fp32 reference on the dequantised inputs, by the rule the ladder holds the
    FP8 rung to: max |O - O_fp32| <= 2 max |O_low - O_fp32| + 1e-4, O_low being the same math with
    P quantised as the rung does (to e4m3, times 448 relative to the row's max) and O rounded to
    out_dtype."""

    def quantize(self, x, per_head, layout):
        """(e4m3 tensor in `layout`, contiguous; descale factors: one, or one a (b, h))."""
        xb = to_bhnd(x, layout)
        amax = xb.abs().amax(dim=(2, 3)) if per_head else xb.abs().amax().reshape(1)
        descale = (amax / 448.0).clamp_min(1e-12)
        scaled = xb / (descale[:, :, None, None] if per_head else descale)
        return from_bhnd(scaled.to(torch.float8_e4m3fn), layout).contiguous(), descale.reshape(-1)

    def low_reference(self, qf, kf, vf, causal, scale, out_dtype):
        """O_low in [B, H_q, Nq, d] from dequantised fp32 inputs in [B, H, N, d]."""
        g = qf.shape[1] // kf.shape[1]
        kf, vf = (t.repeat_interleave(g, dim=1) for t in (kf, vf))
        nq, nk = qf.shape[2], kf.shape[2]
        s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
        if causal:
            i = torch.arange(nq, device=qf.device)[:, None]
            j = torch.arange(nk, device=qf.device)[None, :]
            s = s.masked_fill(~(j <= i + (nk - nq)), float("-inf"))
        m = s.amax(dim=-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        p = torch.exp(s - m)
        l = p.sum(dim=-1, keepdim=True)
        pq = (448.0 * p).to(torch.float8_e4m3fn).float() / 448.0
        o = torch.matmul(pq, vf) / torch.where(l > 0, l, torch.ones_like(l))
        return o.to(out_dtype).float()

    def run_case(self, b, hq, hkv, nq, nk, d, causal, layout, per_head, out_dtype):
        label = (f"B={b} H={hq}/{hkv} Nq={nq} Nk={nk} d={d} causal={causal} {layout} "
                 f"per_head={per_head} out={out_dtype}")
        shape = (lambda h, n: (b, h, n, d)) if layout == "bhnd" else (lambda h, n: (b, n, h, d))
        x = [torch.randn(shape(h, n), device="cuda", generator=self.gen)
             for h, n in ((hq, nq), (hkv, nk), (hkv, nk))]
        (q8, qd), (k8, kd), (v8, vd) = (self.quantize(t, per_head, layout) for t in x)
        o = flash_ladder.attention(q8, k8, v8, causal=causal, layout=layout, q_descale=qd,
                                   k_descale=kd, v_descale=vd, out_dtype=out_dtype)
        torch.cuda.synchronize()
        self.assertEqual(o.dtype, out_dtype, label)
        self.assertEqual(tuple(o.shape), tuple(q8.shape), label)

        def deq(t8, desc):
            tb = to_bhnd(t8, layout).float()
            return tb * (desc.reshape(b, -1)[:, :, None, None] if per_head else desc)

        qf, kf, vf = deq(q8, qd), deq(k8, kd), deq(v8, vd)
        ref, _, seen, _ = reference(*(from_bhnd(t, layout) for t in (qf, kf, vf)), causal, None,
                                    layout)
        low = from_bhnd(self.low_reference(qf, kf, vf, causal, 1.0 / math.sqrt(d), out_dtype),
                        layout)
        seen_o = seen[None, :, None, None] if layout == "bnhd" else seen[None, None, :, None]
        seen_o = seen_o.expand_as(ref)
        self.assertTrue(bool(torch.isfinite(o[seen_o]).all()), f"{label}: non-finite output")
        err = max_abs(o[seen_o], ref[seen_o])
        tol = 2 * max_abs(low[seen_o], ref[seen_o]) + 1e-4
        self.assertLessEqual(err, tol, f"{label}: max |O - O_fp32| = {err:.3g} > {tol:.3g}")

    def test_cases(self):
        probe = torch.zeros(1, 1, 16, 128, device="cuda").to(torch.float8_e4m3fn)
        try:
            flash_ladder.attention(probe, probe, probe, q_descale=1.0, k_descale=1.0,
                                   v_descale=1.0)
        except flash_ladder.UnsupportedError as e:
            self.skipTest(f"no rung of this build takes e4m3 here: {e}")
        cases = [
            dict(b=2, hq=4, hkv=4, nq=256, nk=256, d=128, causal=False, layout="bhnd",
                 per_head=False, out_dtype=torch.float16),
            dict(b=1, hq=8, hkv=2, nq=200, nk=333, d=128, causal=True, layout="bnhd",
                 per_head=True, out_dtype=torch.bfloat16),
            dict(b=2, hq=2, hkv=1, nq=130, nk=130, d=64, causal=False, layout="bhnd",
                 per_head=True, out_dtype=torch.float16),
            dict(b=1, hq=2, hkv=2, nq=100, nk=64, d=256, causal=True, layout="bhnd",
                 per_head=False, out_dtype=torch.bfloat16),
        ]
        for case in cases:
            with self.subTest(**{k: str(v) for k, v in case.items()}):
                self.run_case(**case)

    def test_refusals(self):
        q8 = torch.zeros(1, 2, 64, 128, device="cuda").to(torch.float8_e4m3fn)
        with self.assertRaisesRegex(ValueError, "float8_e4m3fn inputs need k_descale"):
            flash_ladder.attention(q8, q8, q8, q_descale=1.0, v_descale=1.0)
        with self.assertRaisesRegex(ValueError, "one a tensor, or B x H_q = 2"):
            flash_ladder.attention(q8, q8, q8, q_descale=[1.0, 1.0, 1.0], k_descale=1.0,
                                   v_descale=1.0)
        with self.assertRaisesRegex(TypeError, "out_dtype must be torch.float16 or"):
            flash_ladder.attention(q8, q8, q8, q_descale=1.0, k_descale=1.0, v_descale=1.0,
                                   out_dtype=torch.float32)
        q16 = torch.zeros(1, 2, 64, 128, device="cuda", dtype=torch.float16)
        with self.assertRaisesRegex(ValueError, "descale factors are for float8_e4m3fn inputs"):
            flash_ladder.attention(q16, q16, q16, q_descale=1.0)
        with self.assertRaisesRegex(ValueError, "O has the inputs' dtype"):
            flash_ladder.attention(q16, q16, q16, out_dtype=torch.bfloat16)


@unittest.skipIf(torch is None or not hasattr(torch.library, "custom_op"),
                 "torch (>= 2.4) is not installed")
class TorchWithoutGpu(unittest.TestCase):
    """The op's registration, its fake implementation and torch.compile's tracing, on fake and
    meta tensors: these need torch, not a GPU."""

    def test_fake_tensors(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            q = torch.empty(2, 77, 8, 128, device="cuda", dtype=torch.bfloat16)
            k = torch.empty(2, 50, 2, 128, device="cuda", dtype=torch.bfloat16)
            o, lse = flash_ladder.attention(q, k, k, layout="bnhd", return_lse=True)
            self.assertEqual(tuple(o.shape), (2, 77, 8, 128))
            self.assertEqual(tuple(lse.shape), (2, 8, 77))
            self.assertEqual(lse.dtype, torch.float32)
            with self.assertRaisesRegex(ValueError, "multiple of k's and v's"):
                flash_ladder.attention(q, k[:, :, :1].expand(2, 50, 3, 128),
                                       k[:, :, :1].expand(2, 50, 3, 128), layout="bnhd")

    def test_cpu_tensors_are_refused(self):
        q = torch.zeros(1, 2, 8, 64, dtype=torch.float16)
        with self.assertRaisesRegex(ValueError, "q must be on a CUDA device, got cpu"):
            flash_ladder.attention(q, q, q)

    def test_compile_traces_one_node(self):
        # On meta tensors the op runs its fake implementation: enough to see what dynamo makes
        # of the call (fullgraph=True fails on a graph break).
        def f(q, k, v):
            o, lse = flash_ladder.attention(q, k, v, causal=True, return_lse=True)
            return o.float() * 2.0, lse + 1.0

        graphs = []

        def backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        m = dict(device="meta", dtype=torch.float16)
        q, k = torch.empty(2, 8, 300, 128, **m), torch.empty(2, 4, 200, 128, **m)
        torch._dynamo.reset()
        o, lse = torch.compile(f, fullgraph=True, backend=backend)(q, k, k)
        self.assertEqual((tuple(o.shape), tuple(lse.shape)), ((2, 8, 300, 128), (2, 8, 300)))
        self.assertEqual(len(graphs), 1)
        calls = [n for n in graphs[0].graph.nodes
                 if n.op == "call_function" and "flash_ladder" in str(n.target)]
        self.assertEqual(len(calls), 1, graphs[0].code)
        torch._dynamo.reset()

    def test_opcheck_on_meta(self):
        m = dict(device="meta", dtype=torch.bfloat16)
        q, k = torch.empty(1, 4, 96, 64, **m), torch.empty(1, 2, 80, 64, **m)
        torch.library.opcheck(torch.ops.flash_ladder.attention.default,
                              (q, k, k, True, None, -1, True, "bhnd"))

    def test_backward_on_meta(self):
        # Autograd through the two ops' fake implementations, eager and compiled (fullgraph):
        # gradients of the inputs' shapes (GQA: dK and dV per KV head), None for the others.
        m = dict(device="meta", dtype=torch.float16)
        for layout in ("bhnd", "bnhd"):
            def shape(h, n):
                return (2, h, n, 64) if layout == "bhnd" else (2, n, h, 64)

            def f(q, k, v):
                o, lse = flash_ladder.attention(q, k, v, causal=True, layout=layout,
                                                return_lse=True)
                return o.float().sum() + lse.sum()

            for compiled in (False, True):
                with self.subTest(layout=layout, compiled=compiled):
                    q = torch.empty(shape(8, 128), **m, requires_grad=True)
                    k = torch.empty(shape(2, 96), **m, requires_grad=True)
                    v = torch.empty(shape(2, 96), **m)
                    torch._dynamo.reset()
                    g = torch.compile(f, fullgraph=True, backend="aot_eager") if compiled else f
                    g(q, k, v).backward()
                    self.assertEqual(tuple(q.grad.shape), shape(8, 128))
                    self.assertEqual(tuple(k.grad.shape), shape(2, 96))
                    self.assertIsNone(v.grad)
        torch._dynamo.reset()

    def test_backward_opcheck_on_meta(self):
        m = dict(device="meta", dtype=torch.bfloat16)
        q, k = torch.empty(1, 4, 96, 64, **m), torch.empty(1, 2, 80, 64, **m)
        lse = torch.empty(1, 4, 96, device="meta", dtype=torch.float32)
        torch.library.opcheck(torch.ops.flash_ladder.attention_backward.default,
                              (q, k, k, q, lse, q, True, None, -1, "bhnd"))
        leaves = [t.clone().requires_grad_() for t in (q, k, k)]
        torch.library.opcheck(torch.ops.flash_ladder.attention.default,
                              (*leaves, True, None, -1, True, "bhnd", -1))
        with self.assertRaisesRegex(ValueError, "lse must be the forward's LSE"):
            torch.ops.flash_ladder.attention_backward(q, k, k, q, lse[..., :95], q, True, None,
                                                      -1, "bhnd")


if __name__ == "__main__":
    unittest.main()
