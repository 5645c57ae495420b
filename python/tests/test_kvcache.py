"""flash_ladder.attention_with_kvcache without a GPU: the argument checks (on TensorSpecs, no
torch), the K/V cache fields of the C struct and the library's rules on them (host buffers that
no call reads), and, where torch is installed, the op's fake implementation, torch.compile's
tracing and the missing backward, on meta and fake tensors. The GPU side is
test_kvcache_gpu.py."""
import ctypes
import unittest

import _setup  # noqa: F401
import test_package

try:
    import torch
except ImportError:
    torch = None

import flash_ladder
from flash_ladder import _capi, _layout
from flash_ladder._layout import TensorSpec

CUDA = "cuda:0"


def dense(shape, dtype="float16", device=CUDA):
    return TensorSpec(tuple(shape), _layout.contiguous_strides(shape), dtype, device)


def call(q=None, k=None, v=None, lens=None, table=None, **kw):
    """check_kvcache_call with a paged default: B = 2, Nq = 1, 8/2 heads, d = 128, 10 pages of
    64, a table of 4 pages a sequence."""
    q = q or dense((2, 1, 8, 128))
    k = k or dense((10, 64, 2, 128))
    v = v or k
    return _layout.check_kvcache_call(q, k, v, lens, table, **kw)


TABLE = dense((2, 4), "int32")
LENS = dense((2,), "int32")
# The rule a rung without a K/V cache refuses a cache call by (a regular expression).
NEEDS_A_CACHE_RUNG = r"needs a rung with a K/V cache \(39 on\)"


class Checks(unittest.TestCase):
    def test_paged(self):
        kv = call(lens=LENS, table=TABLE)
        p = kv.problem
        self.assertTrue(kv.paged)
        self.assertEqual((kv.page_size, kv.block_table_stride, kv.num_pages), (64, 4, 10))
        self.assertEqual((p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim),
                         (2, 8, 2, 1, 4 * 64, 128))
        # a page pool [pages, page_size, H_kv, d]: batch = a page, row = H_kv d, head = d
        self.assertEqual(p.strides["k"], (64 * 2 * 128, 128, 2 * 128, 1))
        self.assertEqual(p.strides["q"], (8 * 128, 128, 8 * 128, 1))
        self.assertEqual(p.strides["o"], p.strides["q"])
        self.assertEqual(p.out_shape, (2, 1, 8, 128))
        self.assertEqual(p.lse_shape, (2, 8, 1))
        self.assertTrue(p.causal)
        fields = _layout.kvcache_fields(kv)
        self.assertEqual((fields["page_size"], fields["block_table_stride"]), (64, 4))
        self.assertEqual((fields["k_stride_batch"], fields["k_stride_row"]), (16384, 256))
        self.assertAlmostEqual(fields["softmax_scale"], 128 ** -0.5)
        params = _capi.Params(**fields)
        self.assertEqual((params.seqlen_k, params.page_size), (256, 64))

    def test_a_padded_table(self):
        # rows of a wider table (a slice of its first columns): row stride > max_pages is fine
        table = TensorSpec((2, 4), (16, 1), "int32", CUDA)
        self.assertEqual(call(table=table).block_table_stride, 16)
        # one row: its stride is never used (given its dense value)
        one = TensorSpec((1, 4), (0, 1), "int32", CUDA)
        kv = call(q=dense((1, 1, 8, 128)), table=one)
        self.assertEqual(kv.block_table_stride, 4)

    def test_contiguous_cache(self):
        kv = call(k=dense((2, 1000, 2, 128)), lens=LENS, scale=0.1, causal=False)
        self.assertFalse(kv.paged)
        self.assertEqual((kv.problem.seqlen_k, kv.problem.softmax_scale), (1000, 0.1))
        self.assertEqual(kv.problem.strides["k"], (1000 * 256, 128, 256, 1))
        fields = _layout.kvcache_fields(kv)
        self.assertEqual((fields["page_size"], fields["block_table_stride"]), (0, 0))
        self.assertEqual(fields["causal"], 0)
        # without lengths either: a plain bnhd call
        self.assertEqual(call(k=dense((2, 77, 2, 128))).problem.seqlen_k, 77)

    def test_cache_strides_as_they_are(self):
        # a slice of a bigger pool (one more head): the strides reach the library as they are
        k = TensorSpec((10, 64, 2, 128), (64 * 3 * 128, 3 * 128, 128, 1), "bfloat16", CUDA)
        q = dense((2, 4, 8, 128), "bfloat16")
        kv = call(q=q, k=k, v=k, table=TABLE)
        self.assertEqual(kv.problem.strides["k"], (64 * 3 * 128, 128, 3 * 128, 1))
        self.assertEqual(kv.problem.seqlen_q, 4)

    def assert_refused(self, exc, pattern, **kw):
        with self.assertRaisesRegex(exc, pattern) as cm:
            call(**kw)
        self.assertTrue(str(cm.exception).startswith("flash_ladder.attention_with_kvcache: "))

    def test_errors(self):
        cases = [
            (ValueError, r"q must be 4-D \(\[B, Nq, H_q, d\]\)", dict(q=dense((2, 8, 128)))),
            (ValueError, r"k_cache must be 4-D \(k_cache and v_cache are \[B, Nk_max",
             dict(k=dense((640, 2, 128)))),
            (TypeError, "v_cache must be float16 or bfloat16, got float32",
             dict(v=dense((10, 64, 2, 128), "float32"))),
            (TypeError, "same dtype", dict(k=dense((10, 64, 2, 128), "bfloat16"))),
            (ValueError, "q must be on a CUDA device, got cpu",
             dict(q=dense((2, 1, 8, 128), device="cpu"))),
            (ValueError, r"k_cache must be on q's device \(cuda:0\), got cuda:1",
             dict(k=dense((10, 64, 2, 128), device="cuda:1"))),
            (ValueError, "k_cache and v_cache must have the same shape",
             dict(v=dense((11, 64, 2, 128)))),
            (ValueError, "same head dimension", dict(k=dense((10, 64, 2, 64)))),
            (ValueError, r"q's heads \(8, dimension 2\) must be a multiple of .* \(3\)",
             dict(k=dense((10, 64, 3, 128)))),
            (ValueError, r"same batch size without a block table .* got 2 and 10", dict()),
            (TypeError, "block_table must be an int32 tensor, got int64",
             dict(table=dense((2, 4), "int64"))),
            (ValueError, r"block_table must be \[B, max_pages\] = \[2, max_pages\]",
             dict(table=dense((3, 4), "int32"))),
            (ValueError, r"block_table must be \[B, max_pages\]", dict(table=dense((8,), "int32"))),
            (ValueError, "block_table's rows must be contiguous",
             dict(table=TensorSpec((2, 4), (1, 2), "int32", CUDA))),
            (ValueError, "block_table's rows must not overlap",
             dict(table=TensorSpec((2, 4), (0, 1), "int32", CUDA))),
            (ValueError, "block_table must be on a CUDA device, got cpu",
             dict(table=dense((2, 4), "int32", "cpu"))),
            (TypeError, "cache_seqlens must be an int32 tensor .*got int64",
             dict(table=TABLE, lens=dense((2,), "int64"))),
            (ValueError, r"cache_seqlens must be \[B\] = \[2\]",
             dict(table=TABLE, lens=dense((2, 1), "int32"))),
            (ValueError, "cache_seqlens must be contiguous",
             dict(table=TABLE, lens=TensorSpec((2,), (2,), "int32", CUDA))),
            (ValueError, "cache_seqlens must be on a CUDA device, got cpu",
             dict(table=TABLE, lens=dense((2,), "int32", "cpu"))),
            (ValueError, r"cache_seqlens must be on q's device \(cuda:0\), got cuda:1",
             dict(table=TABLE, lens=dense((2,), "int32", "cuda:1"))),
            (ValueError, "k_cache's last dimension .* must be contiguous",
             dict(table=TABLE, k=TensorSpec((10, 64, 2, 128), (16384, 256, 1, 2), "float16",
                                            CUDA))),
            (TypeError, "causal must be a bool", dict(table=TABLE, causal=1)),
            (TypeError, "softmax_scale must be a number or None",
             dict(table=TABLE, scale="0.1")),
        ]
        for exc, pattern, kw in cases:
            with self.subTest(pattern):
                self.assert_refused(exc, pattern, **kw)

    def test_new_keys_to_append(self):
        # k and v [B, N_new, H_kv, d] (FlashAttention's k=, v=): checked against the cache.
        kv = call(lens=LENS, table=TABLE)
        new = dense((2, 3, 2, 128))
        self.assertEqual(_layout.check_kv_append(kv, dense((10, 64, 2, 128)), new, new, True), 3)
        self.assertEqual(_layout.check_kv_append(kv, dense((10, 64, 2, 128)), None, None, True), 0)
        cases = [
            (ValueError, "k and v .* go together", dict(k=new, v=None)),
            (ValueError, "k and v .* go together", dict(k=None, v=new)),
            (ValueError, r"k must be \[B, N_new, H_kv, d\] = \[2, N_new >= 1, 2, 128\], got "
                         r"\(3, 3, 2, 128\)", dict(k=dense((3, 3, 2, 128)))),
            (ValueError, r"v must be \[B, N_new, H_kv, d\].*got \(2, 0, 2, 128\)",
             dict(v=dense((2, 0, 2, 128)))),
            (ValueError, r"k must be .*got \(2, 3, 4, 128\)", dict(k=dense((2, 3, 4, 128)))),
            (ValueError, r"k must be .*got \(2, 3, 256\)", dict(k=dense((2, 3, 256)))),
            (TypeError, r"v must have k_cache's dtype \(float16\), got bfloat16",
             dict(v=dense((2, 3, 2, 128), "bfloat16"))),
            (ValueError, r"k must be on k_cache's device \(cuda:0\), got cuda:1",
             dict(k=dense((2, 3, 2, 128), device="cuda:1"))),
            (ValueError, "k and v must have the same shape", dict(v=dense((2, 4, 2, 128)))),
            (ValueError, "appending k and v needs cache_seqlens", dict(lens=False)),
            (ValueError, r"k and v hold 300 new keys a sequence, more than the cache's capacity "
                         r"\(256\)", dict(k=dense((2, 300, 2, 128)), v=dense((2, 300, 2, 128)))),
        ]
        self.assertEqual(
            _layout.check_kv_append(kv, dense((10, 64, 2, 128)), new, new, True, 253), 3)
        with self.assertRaisesRegex(ValueError, r"cache_seqlens \(254\) and the 3 new keys of k "
                                                r"and v must fit the cache's capacity \(256\)"):
            _layout.check_kv_append(kv, dense((10, 64, 2, 128)), new, new, True, 254)
        for exc, pattern, kw in cases:
            with self.subTest(pattern):
                args = dict(k=new, v=new, lens=True)
                args.update(kw)
                with self.assertRaisesRegex(exc, "flash_ladder.attention_with_kvcache: " + pattern):
                    _layout.check_kv_append(kv, dense((10, 64, 2, 128)), args["k"], args["v"],
                                            args["lens"])

    def test_meta_only_where_allowed(self):
        m = dict(device="meta")
        q, k = dense((2, 1, 8, 128), **m), dense((10, 64, 2, 128), **m)
        with self.assertRaisesRegex(ValueError, "q must be on a CUDA device, got meta"):
            _layout.check_kvcache_call(q, k, k, None, dense((2, 4), "int32", **m))
        kv = _layout.check_kvcache_call(q, k, k, None, dense((2, 4), "int32", **m),
                                        allow_meta=True)
        self.assertEqual(kv.problem.seqlen_k, 256)

    def test_an_int_length(self):
        self.assertEqual(_layout.check_cache_seqlens_int(0, 256), 0)
        self.assertEqual(_layout.check_cache_seqlens_int(256, 256), 256)
        with self.assertRaisesRegex(ValueError, r"cache_seqlens must be in \[0, 256\] .* got 257"):
            _layout.check_cache_seqlens_int(257, 256)
        with self.assertRaisesRegex(ValueError, r"got -1"):
            _layout.check_cache_seqlens_int(-1, 256)
        with self.assertRaisesRegex(TypeError, "an int32 tensor \\[B\\], an int or None, got "
                                               "float"):
            _layout.check_cache_seqlens_int(3.0, 256)
        with self.assertRaises(TypeError):
            _layout.check_cache_seqlens_int(True, 256)


class WithoutTorch(unittest.TestCase):
    def test_it_says_it_needs_torch(self):
        r = test_package.run_python("""
            import flash_ladder
            try:
                flash_ladder.attention_with_kvcache
            except ImportError as e:
                print(e)
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("flash_ladder.attention_with_kvcache needs torch "
                                            "(>= 2.4): "), r.stdout)


class AlignedHostBuffer:
    """Host memory standing in for device buffers (16-byte aligned): the library refuses these
    calls on host-side rules before anything reads it."""

    def __init__(self, nbytes):
        self._raw = ctypes.create_string_buffer(nbytes + 64)
        base = ctypes.addressof(self._raw)
        self.ptr = base + (-base) % 16


class LibraryRules(unittest.TestCase):
    """The cache fields reach the library's rules (check_kv_cache, KernelInfo::kv_cache) through
    the C struct; fl_workspace_size answers for them. No GPU needed: every refusal here comes
    before the device rule."""

    @classmethod
    def setUpClass(cls):
        found, tried = _capi.find_library()
        if found is None:
            raise unittest.SkipTest("libflash_ladder not found:\n" +
                                    _capi.not_found_message(tried))
        cls.lib = _capi.load_library()
        cls.buf = AlignedHostBuffer(1 << 16)
        cls.numbers = [k.number for k in cls.lib.kernels]

    def params(self, paged=True, lens=True):
        kv = call(lens=LENS if lens else None, table=TABLE if paged else None,
                  k=None if paged else dense((2, 1000, 2, 128)))
        p = self.buf.ptr
        return _capi.Params(**_layout.kvcache_fields(kv), q=p, k=p, v=p, o=p, lse=None,
                            seqlens_k=p if lens else None, block_table=p if paged else None)

    def test_the_fields_reach_the_rules(self):
        p = self.params()
        p.page_size = 40
        ok, why = self.lib.supports(0, p)
        self.assertFalse(ok)
        self.assertIn("kernel 00_cublas: page_size must be a multiple of 16 and >= 16 with a "
                      "block table (got 40)", why)
        p = self.params()
        p.block_table_stride = 3
        ok, why = self.lib.supports(0, p)
        self.assertIn("block_table_stride (3) must be >= ceil(seqlen_k / page_size) = 4", why)
        p = self.params(paged=False)
        p.page_size = 64
        ok, why = self.lib.supports(0, p)
        self.assertIn("page_size and block_table_stride describe a block table", why)
        p = self.params()
        p.seqlens_k = self.buf.ptr + 2
        ok, why = self.lib.supports(0, p)
        self.assertIn("seqlens_k must be 4-byte aligned", why)

    def test_rungs_without_a_cache_refuse(self):
        for paged, lens in ((True, True), (True, False), (False, True)):
            p = self.params(paged, lens)
            for k in self.lib.kernels:
                if k.number >= 39:  # the rungs with a K/V cache
                    continue
                with self.subTest(kernel=k.name, paged=paged, lens=lens):
                    ok, why = self.lib.supports(k.number, p)
                    self.assertFalse(ok)
                    if k.number == 28:  # the input type is judged first: e4m3 inputs only
                        self.assertIn("takes e4m3 inputs only", why)
                        continue
                    self.assertIn(f"kernel {k.name}: takes a contiguous K/V of seqlen_k keys a "
                                  f"sequence: a K/V cache with cache lengths or a block table "
                                  f"needs a rung with a K/V cache (39 on)", why)
            with self.assertRaisesRegex(flash_ladder.UnsupportedError, NEEDS_A_CACHE_RUNG):
                self.lib.run(0, p)

    def test_workspace_size(self):
        # A rung without a cache has no answer for a cache call; a rung with one (the forward
        # rungs from 39 on, those built) has one, from the sizes (its pointers are never read).
        cache_rungs = [n for n in self.numbers if n >= 39]
        for paged in (True, False):
            p = self.params(paged)
            with self.assertRaisesRegex(flash_ladder.UnsupportedError,
                                        "kernel 00_cublas: .*" + NEEDS_A_CACHE_RUNG):
                self.lib.workspace_size(0, p)
            for n in cache_rungs:
                self.assertGreaterEqual(self.lib.workspace_size(n, p), 0)
            if not cache_rungs:
                with self.assertRaisesRegex(flash_ladder.UnsupportedError, NEEDS_A_CACHE_RUNG):
                    self.lib.workspace_size(_capi.FL_KERNEL_BEST, p)
        p = self.params()
        p.page_size = 40
        with self.assertRaisesRegex(flash_ladder.UnsupportedError, "page_size must be"):
            self.lib.workspace_size(cache_rungs[0] if cache_rungs else 0, p)

    def test_the_backward_takes_no_cache(self):
        if not self.lib.backward_kernels:
            self.skipTest("no backward rung in this build")
        with self.assertRaisesRegex(flash_ladder.UnsupportedError,
                                    "the backward takes a contiguous K/V"):
            self.lib.backward_workspace_size(self.lib.backward_kernels[0].number,
                                             self.params())


@unittest.skipIf(torch is None or not hasattr(torch.library, "custom_op"),
                 "torch (>= 2.4) is not installed")
class TorchWithoutGpu(unittest.TestCase):
    """The op's registration and fake implementation, the public function's own checks, and
    torch.compile's tracing, on meta and fake tensors: torch, no GPU."""

    def meta(self, b=2, nq=1, hq=8, hkv=2, d=128, pages=10, page=64, max_pages=4, dtype=None):
        m = dict(device="meta")
        dtype = dtype or torch.float16
        return (torch.empty(b, nq, hq, d, dtype=dtype, **m),
                torch.empty(pages, page, hkv, d, dtype=dtype, **m),
                torch.empty(b, max_pages, dtype=torch.int32, **m),
                torch.empty(b, dtype=torch.int32, **m))

    def test_shapes(self):
        q, pool, table, lens = self.meta(nq=4)
        o = flash_ladder.attention_with_kvcache(q, pool, pool, lens, table)
        self.assertEqual((tuple(o.shape), o.dtype), ((2, 4, 8, 128), torch.float16))
        o, lse = flash_ladder.attention_with_kvcache(q, pool, pool, 100, table, causal=False,
                                                     softmax_scale=0.1, return_lse=True)
        self.assertEqual((tuple(lse.shape), lse.dtype), ((2, 8, 4), torch.float32))
        cache = torch.empty(2, 300, 2, 128, device="meta", dtype=torch.float16)
        o, lse = flash_ladder.attention_with_kvcache(q, cache, cache, return_lse=True,
                                                     kernel=39)
        self.assertEqual(tuple(o.shape), (2, 4, 8, 128))

    def test_fake_tensors(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            q = torch.empty(3, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
            pool = torch.empty(50, 256, 8, 128, device="cuda", dtype=torch.bfloat16)
            table = torch.empty(3, 7, device="cuda", dtype=torch.int32)
            lens = torch.empty(3, device="cuda", dtype=torch.int32)
            o, lse = flash_ladder.attention_with_kvcache(q, pool, pool, lens, table,
                                                         return_lse=True)
            self.assertEqual((tuple(o.shape), tuple(lse.shape)), ((3, 1, 32, 128), (3, 32, 1)))
            self.assertEqual(str(o.device), "cuda:0")
            # (a ValueError: FakeTensorMode logs every TypeError raised under it)
            with self.assertRaisesRegex(ValueError, r"block_table must be \[B, max_pages\]"):
                flash_ladder.attention_with_kvcache(q, pool, pool, lens, table[:2])

    def test_the_functions_own_checks(self):
        q, pool, table, lens = self.meta()
        f = flash_ladder.attention_with_kvcache
        with self.assertRaisesRegex(TypeError, "k_cache must be a torch.Tensor, got list"):
            f(q, [1], pool)
        with self.assertRaisesRegex(TypeError, "block_table must be an int32 torch.Tensor"):
            f(q, pool, pool, lens, [[0, 1]])
        with self.assertRaisesRegex(TypeError, "return_lse must be a bool"):
            f(q, pool, pool, lens, table, return_lse=1)
        with self.assertRaisesRegex(ValueError, 'kernel must be a rung number or "best"'):
            f(q, pool, pool, lens, table, kernel="fastest")
        with self.assertRaisesRegex(ValueError, r"cache_seqlens must be in \[0, 256\]"):
            f(q, pool, pool, 257, table)
        with self.assertRaisesRegex(TypeError, "got list"):
            f(q, pool, pool, [3, 4], table)

    def test_cpu_tensors_are_refused(self):
        q = torch.zeros(1, 1, 2, 64, dtype=torch.float16)
        k = torch.zeros(1, 64, 2, 64, dtype=torch.float16)
        with self.assertRaisesRegex(ValueError, "q must be on a CUDA device, got cpu"):
            flash_ladder.attention_with_kvcache(q, k, k)

    def test_no_backward(self):
        q, pool, table, lens = self.meta()
        q.requires_grad_()
        o = flash_ladder.attention_with_kvcache(q, pool, pool, lens, table)
        self.assertTrue(o.requires_grad)
        with self.assertRaisesRegex(RuntimeError, "attention_with_kvcache has no backward: it "
                                                  "is for decode"):
            o.float().sum().backward()
        with torch.no_grad():
            self.assertFalse(flash_ladder.attention_with_kvcache(q, pool, pool, lens,
                                                                 table).requires_grad)

    def test_compile_traces_one_node(self):
        def f(q, pool, table, lens):
            o, lse = flash_ladder.attention_with_kvcache(q, pool, pool, lens, table,
                                                         return_lse=True)
            return o.float() * 2.0, lse + 1.0

        def g(q, pool, table):  # an int length: a tensor made in the graph
            return flash_ladder.attention_with_kvcache(q, pool, pool, 100, table) + 0

        for fn, n_args in ((f, 4), (g, 3)):
            graphs = []

            def backend(gm, example_inputs):
                graphs.append(gm)
                return gm.forward

            torch._dynamo.reset()
            out = torch.compile(fn, fullgraph=True, backend=backend)(*self.meta()[:n_args])
            self.assertEqual(len(graphs), 1)
            calls = [n for n in graphs[0].graph.nodes
                     if n.op == "call_function" and "attention_with_kvcache" in str(n.target)]
            self.assertEqual(len(calls), 1, graphs[0].code)
            o = out[0] if isinstance(out, tuple) else out
            self.assertEqual(tuple(o.shape), (2, 1, 8, 128))
        torch._dynamo.reset()

    def test_opcheck_on_meta(self):
        q, pool, table, lens = self.meta(nq=2)
        op = torch.ops.flash_ladder.attention_with_kvcache.default
        cache = torch.empty(2, 80, 2, 128, device="meta", dtype=torch.float16)
        for args in ((q, pool, pool, lens, table, True, None, -1, True),
                     (q, pool, pool, None, table, False, 0.1, -1, False),
                     (q, cache, cache, lens, None, True, None, 39, True)):
            with self.subTest(args=[a for a in args if not isinstance(a, torch.Tensor)]):
                torch.library.opcheck(op, args)


if __name__ == "__main__":
    unittest.main()
