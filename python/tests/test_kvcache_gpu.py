"""flash_ladder.attention_with_kvcache on the GPU (the rungs with a K/V cache, 39 on: "best" takes
the highest that takes the call on the device, and some tests name rung 39), against a reference built in torch: per sequence, its pages gathered and its first cache_seqlens[b] keys
taken, then softmax(scale q k^T) v in fp32 with the bottom-right causal mask (the lengths ragged,
0 included; block tables shuffled; pages of 64, 256 and 32 keys; GQA and MHA; Nq 1 and 4; fp16 and
bf16). A decode loop captured in a CUDA graph and replayed after the cache, the lengths and the
block table changed in place; torch.compile (fullgraph=True); the missing backward; the
library's refusals.

Needs torch (>= 2.4), a CUDA GPU and a library with rung 39, and skips with the reason without
them. Run from the repository root, e.g.

    FLASH_LADDER_LIB=$PWD/build/libflash_ladder.so python3 -m unittest discover -s python/tests \
        -p "test_kvcache*.py" -v

FLASH_LADDER_TEST_SEED changes the random cases (default 2026).
"""
import math
import os
import random
import unittest

import _setup  # noqa: F401

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

import flash_ladder
from flash_ladder import _capi

SEED = int(os.environ.get("FLASH_LADDER_TEST_SEED", "2026"))

# The error allowed on top of the low-precision SDPA's own (test_gpu.py's rule: at most twice
# SDPA-in-the-inputs'-type's error against fp32, + 1e-4), never less than a few units in the last
# place of O's type.
FLOOR = {torch.float16: 4e-3, torch.bfloat16: 3.2e-2} if torch is not None else {}
LSE_ATOL = 2e-3


def why_skip():
    if torch is None:
        return "torch is not installed"
    if not hasattr(torch.library, "custom_op"):
        return f"torch {torch.__version__} has no torch.library.custom_op (needs >= 2.4)"
    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is False)"
    return None


SKIP = why_skip()


def gather(k_cache, block_table, b, n):
    """The first n keys of sequence b, [n, H_kv, d]: from its pages (block_table) or its row."""
    if block_table is None:
        return k_cache[b, :n]
    page = k_cache.shape[1]
    pages = block_table[b, :(n + page - 1) // page].long()
    return k_cache[pages].reshape(-1, *k_cache.shape[2:])[:n]


def reference(q, k_cache, v_cache, lens, block_table, causal, scale):
    """(O fp32 [B, Nq, H_q, d], LSE fp32 [B, H_q, Nq], rows that see a key [B, Nq] bool,
    O of SDPA in the inputs' type, fp32): sequence by sequence, the ladder's definition (GQA by
    head groups, causal bottom-right per sequence: query i sees key j iff j <= i + n - Nq; a row
    that sees no key gets O = 0, LSE = -inf)."""
    with torch.no_grad():
        bsz, nq, hq, d = q.shape
        g = hq // k_cache.shape[2]
        scale = 1.0 / math.sqrt(d) if scale is None else scale
        o = torch.zeros(bsz, nq, hq, d, device=q.device)
        low = torch.zeros_like(o)
        lse = torch.full((bsz, hq, nq), float("-inf"), device=q.device)
        seen = torch.zeros(bsz, nq, dtype=torch.bool, device=q.device)
        for b in range(bsz):
            n = int(lens[b])
            if n == 0:
                continue
            qb = q[b].transpose(0, 1)                                     # [H_q, Nq, d]
            kb = gather(k_cache, block_table, b, n).transpose(0, 1).repeat_interleave(g, dim=0)
            vb = gather(v_cache, block_table, b, n).transpose(0, 1).repeat_interleave(g, dim=0)
            i = torch.arange(nq, device=q.device)[:, None]
            j = torch.arange(n, device=q.device)[None, :]
            mask = j <= i + n - nq if causal else torch.ones(nq, n, dtype=torch.bool,
                                                            device=q.device)
            s = torch.matmul(qb.float(), kb.float().transpose(-1, -2)) * scale
            s = s.masked_fill(~mask, float("-inf"))
            lse_b = torch.logsumexp(s, dim=-1)                            # [H_q, Nq]
            rows = mask.any(dim=-1)                                       # [Nq]
            p = torch.exp(s - lse_b[..., None]).nan_to_num(0.0)
            o[b] = torch.matmul(p, vb.float()).transpose(0, 1)
            lse[b] = torch.where(rows[None, :], lse_b, lse[b])
            seen[b] = rows
            lo = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=scale)
            low[b] = torch.where(rows[:, None, None], lo.float().transpose(0, 1), 0.0)
        return o, lse, seen, low


def max_abs(a, b):
    return 0.0 if a.numel() == 0 else float((a.float() - b.float()).abs().max())


def paged_cache(bsz, hkv, d, lens, page, dtype, gen, spare=3, max_pages=None):
    """A shuffled page pool holding the keys of sequences of lengths `lens`: (k_pool, v_pool,
    block_table int32 [B, max_pages]). Pages past a sequence's length are pages of the pool too
    (the table's unused entries name real pages), and the pool has `spare` pages nobody uses."""
    need = [max(1, (n + page - 1) // page) for n in lens]
    max_pages = max_pages or max(need)
    total = sum(need) + spare
    k = torch.randn(total, page, hkv, d, generator=gen, device="cuda").to(dtype)
    v = torch.randn(total, page, hkv, d, generator=gen, device="cuda").to(dtype)
    order = torch.randperm(total, generator=gen, device="cuda").to(torch.int32)
    table = torch.empty(bsz, max_pages, dtype=torch.int32, device="cuda")
    at = 0
    for b, n in enumerate(need):
        table[b, :n] = order[at:at + n]
        table[b, n:] = order[(at + torch.arange(max_pages - n, device="cuda")) % total]
        at += n
    return k, v, table


@unittest.skipIf(SKIP is not None, SKIP)
class KvCacheGpuTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = flash_ladder.load_library()
        cls.numbers = [k.number for k in cls.lib.kernels]
        if 39 not in cls.numbers:
            raise unittest.SkipTest("rung 39 (decode_paged) is not in this build")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        cls.gen = torch.Generator(device="cuda").manual_seed(SEED)

    def cache_rung(self, params):
        """The highest rung with a K/V cache (39 on) that takes `params` on this device, judged as
        "best" judges (the workspace the caller's to size): rung 76 on compute capability 9.0,
        rung 69 before it."""
        sized = type(params).from_buffer_copy(params)
        sized.workspace = 256  # never read
        sized.workspace_bytes = 2 ** 63 - 1
        return max(n for n in self.numbers if n >= 39 and self.lib.supports(n, sized)[0])

    def params_of(self, q, k, v, seqlens, table):
        """The C struct of a causal call (for the library's questions: best, workspace)."""
        from flash_ladder import _layout, _ops
        kv = _ops._kvcache_problem(q, k, v, seqlens, table, True, None)
        self._o = torch.empty_like(q)
        return _capi.Params(**_layout.kvcache_fields(kv), q=q.data_ptr(), k=k.data_ptr(),
                            v=v.data_ptr(), o=self._o.data_ptr(), lse=None,
                            seqlens_k=seqlens.data_ptr(), block_table=table.data_ptr())

    def randn(self, *shape, dtype=None):
        dtype = dtype or torch.float16
        return torch.randn(*shape, generator=self.gen, device="cuda").to(dtype)

    def check(self, o, lse, q, k_cache, v_cache, lens, block_table, causal, scale, label):
        torch.cuda.synchronize()
        self.assertEqual((tuple(o.shape), o.dtype), (tuple(q.shape), q.dtype), label)
        self.assertTrue(o.is_contiguous(), label)
        ref, ref_lse, seen, low = reference(q, k_cache, v_cache, lens, block_table, causal, scale)
        rows = seen[:, :, None, None].expand_as(ref)
        self.assertTrue(bool(torch.isfinite(o).all()), f"{label}: non-finite output")
        if bool(rows.any()):
            err = max_abs(o[rows], ref[rows])
            tol = max(2 * max_abs(low[rows], ref[rows]) + 1e-4, FLOOR[q.dtype])
            self.assertLessEqual(err, tol, f"{label}: max |O - O_fp32| = {err:.3g} > {tol:.3g}")
        self.assertTrue(bool((o[~rows] == 0).all()), f"{label}: a row with no key is not 0")
        if lse is not None:
            self.assertEqual((tuple(lse.shape), lse.dtype), (tuple(ref_lse.shape), torch.float32))
            s = seen[:, None, :].expand_as(ref_lse)
            if bool(s.any()):
                lse_err = max_abs(lse[s], ref_lse[s])
                self.assertLessEqual(lse_err, LSE_ATOL + 1e-4 * float(ref_lse[s].abs().max()),
                                     f"{label}: max |LSE - LSE_fp32| = {lse_err:.3g}")
            self.assertTrue(bool((lse[~s] == float("-inf")).all()),
                            f"{label}: a row with no key has LSE != -inf")


class Paged(KvCacheGpuTestCase):
    # (B, H_q, H_kv, d): GQA 32/8, 16/2, 6/2 and 12/4, MHA, MQA; d = 64, 96, 128, 192
    HEADS = [(4, 32, 8, 128), (3, 16, 2, 128), (5, 6, 2, 64), (2, 8, 8, 128), (3, 16, 1, 64),
             (3, 12, 4, 96), (2, 16, 4, 192)]

    def test_cases(self):
        rng = random.Random(SEED)
        case = 0
        for dtype in (torch.float16, torch.bfloat16):
            for page in (64, 256, 32):
                for nq in (1, 4):
                    for bsz, hq, hkv, d in self.HEADS:
                        case += 1
                        causal = rng.random() < 0.6
                        scale = rng.choice([None, 0.07])
                        # ragged: an empty sequence, one of a single key, one that ends on a
                        # page's last row, one that fills its pages, random others
                        pool = [0, 1, page, 3 * page - 1, rng.randint(1, 2000),
                                rng.randint(1, 700)]
                        lens = [pool[(i + case) % len(pool)] for i in range(bsz)]
                        label = (f"case {case}: {str(dtype)[6:]} page={page} Nq={nq} B={bsz} "
                                 f"H={hq}/{hkv} d={d} causal={causal} scale={scale} "
                                 f"lens={lens}")
                        with self.subTest(label):
                            self.run_case(bsz, hq, hkv, d, nq, page, lens, dtype, causal, scale,
                                          label)

    def run_case(self, bsz, hq, hkv, d, nq, page, lens, dtype, causal, scale, label,
                 kernel="best"):
        k, v, table = paged_cache(bsz, hkv, d, lens, page, dtype, self.gen,
                                  max_pages=max(1, (max(lens) + page - 1) // page) + 1)
        q = self.randn(bsz, nq, hq, d, dtype=dtype)
        seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
        o, lse = flash_ladder.attention_with_kvcache(q, k, v, seqlens, table, causal=causal,
                                                     softmax_scale=scale, return_lse=True,
                                                     kernel=kernel)
        self.check(o, lse, q, k, v, seqlens, table, causal, scale, label)
        return o

    def test_explicit_rung_and_best_agree(self):
        lens = [300, 0, 1000]
        k, v, table = paged_cache(3, 2, 128, lens, 64, torch.float16, self.gen)
        q = self.randn(3, 2, 16, 128)
        seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
        params = self.params_of(q, k, v, seqlens, table)
        highest = self.cache_rung(params)
        self.assertEqual(_capi.best_kernel(self.lib, params), highest)
        a = flash_ladder.attention_with_kvcache(q, k, v, seqlens, table)
        b = flash_ladder.attention_with_kvcache(q, k, v, seqlens, table, kernel=highest)
        self.assertTrue(torch.equal(a, b))
        self.check(a, None, q, k, v, seqlens, table, True, None, "best")

    def test_strided_pool_and_padded_table(self):
        # The pools as views of a bigger one (one more KV head: a page's and a row's strides
        # are not the dense ones), and the table as the first columns of a wider one.
        lens = [517, 64, 0]
        page, hkv, d = 64, 2, 128
        total = 40
        big_k = self.randn(total, page, hkv + 1, d)
        big_v = self.randn(total, page, hkv + 1, d)
        k, v = big_k[:, :, 1:], big_v[:, :, :hkv]
        self.assertFalse(k.is_contiguous())
        wide = torch.randperm(total, generator=self.gen, device="cuda").to(torch.int32)
        table = wide[:3 * 12].view(3, 12)[:, :10]
        self.assertEqual(table.stride(), (12, 1))
        q = self.randn(3, 1, 8, d)
        seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
        o, lse = flash_ladder.attention_with_kvcache(q, k, v, seqlens, table, return_lse=True)
        self.check(o, lse, q, k, v, seqlens, table, True, None, "strided pool, padded table")

    def test_shared_pages(self):
        # Two sequences on the same pages (a shared prefix) and different lengths.
        k, v, table = paged_cache(1, 4, 64, [1024], 256, torch.bfloat16, self.gen)
        table = table.expand(2, -1).contiguous()
        q = self.randn(2, 1, 16, 64, dtype=torch.bfloat16)
        seqlens = torch.tensor([1024, 700], dtype=torch.int32, device="cuda")
        o, lse = flash_ladder.attention_with_kvcache(q, k, v, seqlens, table, return_lse=True,
                                                     causal=False)
        self.check(o, lse, q, k, v, seqlens, table, False, None, "shared pages")


class Contiguous(KvCacheGpuTestCase):
    """A cache [B, Nk_max, H_kv, d] without a block table: with lengths (a tensor, an int) the
    call is rung 39's; without them it is a plain bnhd decode call."""

    def test_lengths(self):
        bsz, hq, hkv, d, cap = 4, 32, 8, 128, 1500
        k = self.randn(bsz, cap, hkv, d)
        v = self.randn(bsz, cap, hkv, d)
        for nq in (1, 4):
            q = self.randn(bsz, nq, hq, d)
            for lens in ([0, 1, 777, cap], [cap, 1499, 64, 200]):
                seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
                with self.subTest(nq=nq, lens=lens):
                    o, lse = flash_ladder.attention_with_kvcache(q, k, v, seqlens,
                                                                 return_lse=True)
                    self.check(o, lse, q, k, v, seqlens, None, True, None, f"lens {lens}")
            with self.subTest(nq=nq, lens="int 1000"):
                o = flash_ladder.attention_with_kvcache(q, k, v, 1000, causal=False)
                seqlens = torch.full((bsz,), 1000, dtype=torch.int32, device="cuda")
                self.check(o, None, q, k, v, seqlens, None, False, None, "int 1000")
            with self.subTest(nq=nq, lens=None):
                o, lse = flash_ladder.attention_with_kvcache(q, k, v, return_lse=True)
                seqlens = torch.full((bsz,), cap, dtype=torch.int32, device="cuda")
                self.check(o, lse, q, k, v, seqlens, None, True, None, "no lengths")
                # the plain call: what flash_ladder.attention gives for the bnhd tensors
                want = flash_ladder.attention(q, k, v, causal=True, layout="bnhd")
                self.assertTrue(torch.equal(o, want))


class DecodeLoop(KvCacheGpuTestCase):
    def test_cuda_graph_decode_loop(self):
        # One decode step captured once, then replayed step after step as a serving loop does:
        # the new token's key and value written into its page, its length raised by one, a new
        # page mapped into the table when a sequence crosses into it, a new q. Everything
        # changes in place; the graph is never recaptured. B = 2 with 4 KV heads against a long
        # capacity, so that the keys split and the splits' partials go through a workspace from
        # the graph's pool (8 blocks over 256 key tiles: 15 splits on an H100's 132 SMs, more
        # than the rungs that merge splits in a cluster take there).
        page, hkv, hq, d, max_pages = 64, 4, 32, 128, 256
        bsz, total = 2, 2 * max_pages + 4
        k = self.randn(total, page, hkv, d)
        v = self.randn(total, page, hkv, d)
        order = torch.randperm(total, generator=self.gen, device="cuda").to(torch.int32)
        table = order[:bsz * max_pages].view(bsz, max_pages).clone()
        lens = torch.tensor([page - 2, 5 * page + 7], dtype=torch.int32, device="cuda")
        q = self.randn(bsz, 1, hq, d)
        params = self.params_of(q, k, v, lens, table)
        self.assertGreater(self.lib.workspace_size(self.cache_rung(params), params), 0,
                           "this call should use a workspace (B = 2, 4 KV heads, 256 key tiles)")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up off the default stream
            flash_ladder.attention_with_kvcache(q, k, v, lens, table, return_lse=True)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o, lse = flash_ladder.attention_with_kvcache(q, k, v, lens, table, return_lse=True)
        spare = order[bsz * max_pages:].tolist()
        for step in range(5):
            for b in range(bsz):
                n = int(lens[b])
                if n % page == 0:  # the new key starts a page: map a fresh one
                    table[b, n // page] = spare.pop()
                pg, row = int(table[b, n // page]), n % page
                k[pg, row] = self.randn(hkv, d)
                v[pg, row] = self.randn(hkv, d)
            lens += 1
            q.copy_(self.randn(bsz, 1, hq, d))
            graph.replay()
            with self.subTest(step=step, lens=lens.tolist()):
                self.check(o, lse, q, k, v, lens, table, True, None, f"step {step}")
        # An empty sequence, then the replay again: O = 0 and LSE = -inf for its rows.
        lens[0] = 0
        graph.replay()
        self.check(o, lse, q, k, v, lens, table, True, None, "an emptied sequence")


class Append(KvCacheGpuTestCase):
    # k= and v= (FlashAttention's new keys): written into the cache after each sequence's
    # cache_seqlens[b] keys, in place, and attended with cache_seqlens[b] + N_new keys. The
    # reference writes the same rows by hand and calls without k, v: the cache must then equal
    # the hand-written one everywhere (no other row touched), O and the LSE bit for bit.
    def expect_same(self, q, k_cache, v_cache, lens, table, k, v, label, causal=True):
        kc, vc = k_cache.clone(), v_cache.clone()
        page = k_cache.shape[1] if table is not None else None
        for b in range(q.shape[0]):
            for i in range(k.shape[1]):
                pos = int(lens[b]) + i
                if table is None:
                    kc[b, pos], vc[b, pos] = k[b, i], v[b, i]
                else:
                    pg = int(table[b, pos // page])
                    kc[pg, pos % page], vc[pg, pos % page] = k[b, i], v[b, i]
        lens_before = lens.clone()
        o, lse = flash_ladder.attention_with_kvcache(q, k_cache, v_cache, lens, table,
                                                     causal=causal, return_lse=True, k=k, v=v)
        o_ref, lse_ref = flash_ladder.attention_with_kvcache(q, kc, vc, lens + k.shape[1], table,
                                                             causal=causal, return_lse=True)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(lens, lens_before), f"{label}: cache_seqlens was changed")
        self.assertTrue(torch.equal(k_cache, kc), f"{label}: k_cache is not the hand-written one")
        self.assertTrue(torch.equal(v_cache, vc), f"{label}: v_cache is not the hand-written one")
        self.assertTrue(torch.equal(o, o_ref), f"{label}: O differs from the call without k, v")
        self.assertTrue(torch.equal(lse, lse_ref), f"{label}: LSE differs")
        # and the result is attention itself, by the harness's reference
        self.check(o, lse, q, kc, vc, lens + k.shape[1], table, causal, None, label)

    def test_contiguous(self):
        for n_new, nq in ((1, 1), (5, 5), (7, 2)):
            k_cache, v_cache = self.randn(3, 300, 2, 128), self.randn(3, 300, 2, 128)
            lens = torch.tensor([0, 17, 300 - n_new], dtype=torch.int32, device="cuda")
            q = self.randn(3, nq, 8, 128)
            k, v = self.randn(3, n_new, 2, 128), self.randn(3, n_new, 2, 128)
            with self.subTest(n_new=n_new, nq=nq):
                self.expect_same(q, k_cache, v_cache, lens, None, k, v,
                                 f"contiguous N_new={n_new} Nq={nq}")

    def test_paged_across_a_page_edge(self):
        # lengths that put the new keys across a page's end, at a page's start, and at 0
        k_cache, v_cache, table = paged_cache(3, 2, 96, [70, 200, 1], 64, torch.bfloat16,
                                              self.gen, max_pages=6)
        lens = torch.tensor([62, 128, 0], dtype=torch.int32, device="cuda")
        q = self.randn(3, 4, 6, 96, dtype=torch.bfloat16)
        k = self.randn(3, 4, 2, 96, dtype=torch.bfloat16)
        v = self.randn(3, 4, 2, 96, dtype=torch.bfloat16)
        self.expect_same(q, k_cache, v_cache, lens, table, k, v, "paged, d = 96")

    def test_an_int_length_and_its_capacity(self):
        k_cache, v_cache = self.randn(2, 64, 1, 64), self.randn(2, 64, 1, 64)
        q = self.randn(2, 1, 4, 64)
        k, v = self.randn(2, 3, 1, 64), self.randn(2, 3, 1, 64)
        o = flash_ladder.attention_with_kvcache(q, k_cache, v_cache, 61, None, k=k, v=v)
        lens = torch.full((2,), 61, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(k_cache[:, 61:], k))
        self.assertTrue(torch.equal(o, flash_ladder.attention_with_kvcache(q, k_cache, v_cache,
                                                                           lens + 3, None)))
        with self.assertRaisesRegex(ValueError, r"cache_seqlens \(62\) and the 3 new keys .* "
                                                r"capacity \(64\)"):
            flash_ladder.attention_with_kvcache(q, k_cache, v_cache, 62, None, k=k, v=v)

    def test_cuda_graph(self):
        # A step that appends one token, captured once and replayed with the lengths advanced
        # in place: each replay writes its token at the new length.
        k_cache, v_cache = self.randn(2, 512, 2, 128), self.randn(2, 512, 2, 128)
        lens = torch.tensor([10, 300], dtype=torch.int32, device="cuda")
        q, k, v = self.randn(2, 1, 8, 128), self.randn(2, 1, 2, 128), self.randn(2, 1, 2, 128)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            flash_ladder.attention_with_kvcache(q, k_cache.clone(), v_cache.clone(), lens, None,
                                                k=k, v=v)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o = flash_ladder.attention_with_kvcache(q, k_cache, v_cache, lens, None, k=k, v=v)
        for step in range(3):
            k.copy_(self.randn(2, 1, 2, 128))
            v.copy_(self.randn(2, 1, 2, 128))
            graph.replay()
            torch.cuda.synchronize()
            for b in range(2):
                n = int(lens[b])
                self.assertTrue(torch.equal(k_cache[b, n], k[b, 0]), f"step {step}, seq {b}")
                self.assertTrue(torch.equal(v_cache[b, n], v[b, 0]), f"step {step}, seq {b}")
            ref = flash_ladder.attention_with_kvcache(q, k_cache, v_cache, lens + 1, None)
            self.assertTrue(torch.equal(o, ref), f"step {step}: O")
            lens += 1

    def test_compile(self):
        def f(q, kc, vc, lens, table, k, v):
            return flash_ladder.attention_with_kvcache(q, kc, vc, lens, table, k=k, v=v) * 1
        k_cache, v_cache, table = paged_cache(2, 2, 128, [100, 300], 64, torch.float16,
                                              self.gen, max_pages=6)
        lens = torch.tensor([100, 300], dtype=torch.int32, device="cuda")
        q, k, v = self.randn(2, 2, 8, 128), self.randn(2, 2, 2, 128), self.randn(2, 2, 2, 128)
        kc, vc = k_cache.clone(), v_cache.clone()
        o = torch.compile(f, fullgraph=True)(q, k_cache, v_cache, lens, table, k, v)
        o_eager = f(q, kc, vc, lens, table, k, v)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(k_cache, kc) and torch.equal(v_cache, vc),
                        "the compiled call wrote the cache otherwise than the eager one")
        self.assertTrue(torch.equal(o, o_eager))


class Compile(KvCacheGpuTestCase):
    def test_torch_compile(self):
        def f(q, k, v, lens, table):
            o, lse = flash_ladder.attention_with_kvcache(q, k, v, lens, table,
                                                         return_lse=True)
            return o.float() * 2.0, lse + 1.0

        def g(q, k, v, table):  # an int length: the tensor is made in the graph
            return flash_ladder.attention_with_kvcache(q, k, v, 400, table, causal=False) + 0

        lens_list = [300, 0, 1200]
        k, v, table = paged_cache(3, 2, 128, lens_list, 256, torch.bfloat16, self.gen)
        q = self.randn(3, 4, 8, 128, dtype=torch.bfloat16)
        lens = torch.tensor(lens_list, dtype=torch.int32, device="cuda")
        torch._dynamo.reset()
        got_o, got_lse = torch.compile(f, fullgraph=True)(q, k, v, lens, table)
        want_o, want_lse = f(q, k, v, lens, table)
        self.assertTrue(torch.equal(got_o, want_o))
        self.assertTrue(torch.equal(got_lse, want_lse))
        torch._dynamo.reset()
        self.assertTrue(torch.equal(torch.compile(g, fullgraph=True)(q, k, v, table),
                                    g(q, k, v, table)))
        torch._dynamo.reset()
        o = flash_ladder.attention_with_kvcache(q, k, v, lens, table)
        self.check(o, None, q, k, v, lens, table, True, None, "compiled case, eager")

    def test_opcheck(self):
        lens_list = [100, 0]
        k, v, table = paged_cache(2, 2, 64, lens_list, 64, torch.float16, self.gen)
        q = self.randn(2, 2, 4, 64)
        lens = torch.tensor(lens_list, dtype=torch.int32, device="cuda")
        op = torch.ops.flash_ladder.attention_with_kvcache.default
        for args in ((q, k, v, lens, table, True, None, -1, True),
                     (q, k, v, None, table, False, 0.2, 39, False)):
            with self.subTest(causal=args[5]):
                torch.library.opcheck(op, args)


class Errors(KvCacheGpuTestCase):
    def setUp(self):
        self.k, self.v, self.table = paged_cache(2, 2, 128, [100, 300], 64, torch.float16,
                                                 self.gen)
        self.q = self.randn(2, 1, 4, 128)
        self.lens = torch.tensor([100, 300], dtype=torch.int32, device="cuda")

    def test_no_backward(self):
        q = self.q.clone().requires_grad_()
        o = flash_ladder.attention_with_kvcache(q, self.k, self.v, self.lens, self.table)
        with self.assertRaisesRegex(RuntimeError, "attention_with_kvcache has no backward"):
            o.float().sum().backward()
        self.assertIsNone(q.grad)

    def test_rungs_without_a_cache(self):
        for number in (n for n in self.numbers if n < 39):  # 39 on take a K/V cache
            # (the FP8 rung refuses fp16 inputs first)
            rule = ("takes e4m3 inputs only" if number == 28 else
                    r"a K/V cache with cache lengths or a block table needs a rung with a K/V "
                    r"cache \(39 on\)")
            with self.subTest(kernel=number):
                with self.assertRaisesRegex(flash_ladder.UnsupportedError, rule):
                    flash_ladder.attention_with_kvcache(self.q, self.k, self.v, self.lens,
                                                        self.table, kernel=number)

    def test_the_library_refuses_with_its_message(self):
        f = flash_ladder.attention_with_kvcache
        pool = self.randn(20, 32, 2, 128)  # pages of 32 keys: rung 39's, rung 38 refuses them
        if 38 in self.numbers:
            with self.assertRaisesRegex(flash_ladder.UnsupportedError,
                                        r"kernel 38_decode_split: .*needs a rung with a K/V cache"):
                f(self.q, pool, pool, self.lens, self.table, kernel=38)
        with self.assertRaisesRegex(flash_ladder.UnsupportedError, "page_size must be a multiple "
                                                                   "of 16"):
            f(self.q, pool[:, :24], pool[:, :24], self.lens, self.table)
        # g = 2 query heads a KV head: Nq = 32 packs 64 rows (decode), Nq = 33 66 (prefill)
        f(self.randn(2, 32, 4, 128), self.k, self.v, self.lens, self.table)
        with self.assertRaisesRegex(flash_ladder.UnsupportedError, "Nq x H_q / H_kv must be "
                                                                   "<= 64"):
            f(self.randn(2, 33, 4, 128), self.k, self.v, self.lens, self.table)
        with self.assertRaisesRegex(flash_ladder.NoSuchKernelError, "no kernel numbered 99"):
            f(self.q, self.k, self.v, self.lens, self.table, kernel=99)

    def test_argument_errors(self):
        f = flash_ladder.attention_with_kvcache
        q, k, v, lens, table = self.q, self.k, self.v, self.lens, self.table
        cases = [
            (TypeError, "block_table must be an int32 tensor, got int64",
             lambda: f(q, k, v, lens, table.long())),
            (TypeError, "cache_seqlens must be an int32 tensor", lambda: f(q, k, v, lens.long(),
                                                                            table)),
            (ValueError, "block_table must be on a CUDA device, got cpu",
             lambda: f(q, k, v, lens, table.cpu())),
            (ValueError, "cache_seqlens must be on a CUDA device, got cpu",
             lambda: f(q, k, v, lens.cpu(), table)),
            (ValueError, "block_table's rows must be contiguous",
             lambda: f(q, k, v, lens, table.t().contiguous().t())),
            (ValueError, r"cache_seqlens must be in \[0, 320\]",
             lambda: f(q, k, v, 321, table)),
            (ValueError, r"block_table must be \[B, max_pages\] = \[2, max_pages\]",
             lambda: f(q, k, v, lens, table[:1])),
            (TypeError, "same dtype", lambda: f(q, k.bfloat16(), v, lens, table)),
            (ValueError, "q must be 4-D", lambda: f(q[0], k, v, lens, table)),
            (ValueError, "same batch size without a block table", lambda: f(q, k, v, lens)),
        ]
        for exc, pattern, thunk in cases:
            with self.subTest(pattern):
                with self.assertRaisesRegex(exc, pattern):
                    thunk()


if __name__ == "__main__":
    unittest.main()
