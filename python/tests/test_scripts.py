"""The scripts that call the library (scripts/compare_sdpa.py, scripts/plus1_bench.py) go through
this package: they import, and their Ladder works, without torch (a stand-in module takes its
place; nothing here runs a kernel)."""
import importlib.util
import os
import py_compile
import sys
import tempfile
import types
import unittest
from unittest import mock

import _setup

from flash_ladder import _capi

SCRIPTS = os.path.join(_setup.REPO, "scripts")


def stand_in_torch():
    """Just what the scripts touch at import time."""
    torch = types.ModuleType("torch")
    torch.__version__ = "0+stand-in"
    torch.no_grad = lambda: (lambda fn: fn)
    torch.float16, torch.bfloat16 = "float16", "bfloat16"
    nn = types.ModuleType("torch.nn")
    functional = types.ModuleType("torch.nn.functional")
    attention = types.ModuleType("torch.nn.attention")
    attention.SDPBackend = types.SimpleNamespace(FLASH_ATTENTION=1, CUDNN_ATTENTION=2,
                                                 EFFICIENT_ATTENTION=3, MATH=4)
    attention.sdpa_kernel = lambda backend: None
    torch.nn, nn.functional, nn.attention = nn, functional, attention
    return {"torch": torch, "torch.nn": nn, "torch.nn.functional": functional,
            "torch.nn.attention": attention}


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(SCRIPTS, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Scripts(unittest.TestCase):
    def test_byte_compile(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("compare_sdpa.py", "plus1_bench.py", "gqa_bench.py", "decode_bench.py",
                         "paged_bench.py", "sanitize_cache.py", "flush_trace.py"):
                with self.subTest(script=name):
                    py_compile.compile(os.path.join(SCRIPTS, name), doraise=True,
                                       cfile=os.path.join(tmp, name + "c"))

    def test_they_use_the_package(self):
        try:
            import torch  # noqa: F401
            self.skipTest("torch is installed: the stand-in would not be used")
        except ImportError:
            pass
        found, tried = _capi.find_library()
        if found is None:
            self.skipTest("libflash_ladder not found:\n" + _capi.not_found_message(tried))
        saved_path = list(sys.path)
        with mock.patch.dict(sys.modules, stand_in_torch()):
            try:
                sys.modules.pop("compare_sdpa", None)
                cs = load_script("compare_sdpa")
                plus1 = load_script("plus1_bench")
                ladder = cs.Ladder(found)
                self.assertIsInstance(ladder, _capi.Library)
                chosen = cs.select_kernels(ladder, "3,16_final")
                self.assertEqual([k[1] for k in chosen], ["03_mma", "16_final"])
                number, name, _title = chosen[1]
                self.assertEqual((number, name), (16, "16_final"))
                self.assertIs(plus1.cs, sys.modules["compare_sdpa"])
                with self.assertRaises(SystemExit) as cm:  # as before: a bad --lib exits
                    cs.Ladder(os.path.join(SCRIPTS, "no_such_lib.so"))
                self.assertIn("could not load", str(cm.exception.code))
            finally:
                sys.path[:] = saved_path
                for name in ("compare_sdpa", "plus1_bench"):
                    sys.modules.pop(name, None)


class DecodeBench(unittest.TestCase):
    """scripts/decode_bench.py's pure parts: the bytes and GB/s, the FLOPs of the bottom-right
    mask, the options and the sweep they make (with the stand-in torch; no GPU, no library)."""

    def setUp(self):
        saved_path = list(sys.path)
        patch = mock.patch.dict(sys.modules, stand_in_torch())
        patch.start()

        def restore():
            patch.stop()
            sys.path[:] = saved_path
            for name in ("compare_sdpa", "decode_bench"):
                sys.modules.pop(name, None)
        self.addCleanup(restore)
        sys.modules.pop("compare_sdpa", None)
        self.db = load_script("decode_bench")

    def test_bytes_and_rates(self):
        db = self.db
        # K and V of B = 8, H_kv = 8, Nk = 32768, d = 128 in fp16: 2 x 2^28 elements x 2 bytes.
        self.assertEqual(db.kv_bytes(8, 8, 32768, 128), 1 << 30)
        self.assertEqual(db.kv_bytes(1, 32, 1024, 128, elem=2), 2 * 32 * 1024 * 128 * 2)
        self.assertEqual(db.qo_bytes(8, 32, 1, 128), 2 * 8 * 32 * 128 * 2)
        self.assertAlmostEqual(db.gbps(1e9, 1.0), 1000.0)
        self.assertAlmostEqual(db.gbps(db.kv_bytes(8, 8, 32768, 128), 0.5),
                               (1 << 30) / 0.5e-3 / 1e9)

    def test_flops_of_the_bottom_right_mask(self):
        db = self.db
        self.assertEqual(db.visible_pairs(1, 4096, True), 4096)   # Nq = 1: causal sees every key
        self.assertEqual(db.visible_pairs(16, 4096, False), 16 * 4096)
        # Query i sees keys 0 .. i + Nk - Nq: Nk - 15, ..., Nk.
        self.assertEqual(db.visible_pairs(16, 4096, True), 16 * 4096 - 15 * 16 // 2)
        self.assertEqual(db.visible_pairs(4, 2, True), 0 + 0 + 1 + 2)  # Nq > Nk: rows see none
        self.assertEqual(db.decode_flops(2, 32, 1, 1024, 128, False), 4.0 * 2 * 32 * 128 * 1024)

    def test_flush_modes(self):
        db, cs = self.db, sys.modules["compare_sdpa"]
        self.assertEqual(db.parse_args([]).flush, "reads")
        self.assertEqual(db.parse_args(["--flush", "zeros"]).flush, "zeros")
        with mock.patch("sys.stderr"), self.assertRaises(SystemExit):
            db.parse_args(["--flush", "memset"])
        # The Timer's two flushes: zeros writes the buffer, reads sums it (as fp16) and writes
        # nothing; both move twice the L2 through it.
        torch, calls = sys.modules["torch"], []

        class Buffer:
            def __init__(self, n):
                self.n = n

            def zero_(self):
                calls.append(("zero_", self.n))

            def view(self, dtype):
                return ("view", dtype, self.n)
        torch.uint8 = "uint8"
        torch.float32 = "float32"
        torch.cuda = types.SimpleNamespace(
            current_device=lambda: 0,
            get_device_properties=lambda i: types.SimpleNamespace(L2_cache_size=50 << 20))
        torch.zeros = lambda n, dtype, device: Buffer(n)
        torch.ops = types.SimpleNamespace(aten=types.SimpleNamespace(sum=types.SimpleNamespace(
            default=lambda t, dtype: calls.append(("sum", t, dtype)))))
        cs.Timer(3, 10, 1.0, flush="zeros").flush()
        cs.Timer(3, 10, 1.0, flush="reads").flush()
        self.assertEqual(calls, [("zero_", 100 << 20),
                                 ("sum", ("view", "float16", 100 << 20), "float32")])
        with self.assertRaises(ValueError):
            cs.Timer(3, 10, 1.0, flush="memset")

    def test_default_sweep(self):
        db = self.db
        args = db.parse_args([])
        self.assertEqual((args.b, args.nk, args.nq), ([1, 8, 64], [1024, 4096, 8192, 32768,
                                                                  131072], [1, 16]))
        self.assertEqual(args.heads, [(32, 8), (32, 32)])
        self.assertEqual((args.kernels, args.rounds, args.max_gib, args.d), ("best,27", 3, 40.0,
                                                                             128))
        shapes = db.sweep(args)
        self.assertEqual(len(shapes), 2 * 3 * 5 * 2)
        skipped = {(s["H_kv"], s["B"], s["Nk"]) for s in shapes if s["skip"]}
        # Over 40 GiB of K + V: MHA at B = 64, Nk = 131072 (128 GiB); its 32 GiB at Nk = 32768
        # and GQA's at Nk = 131072 are run.
        self.assertEqual(skipped, {(32, 64, 131072)})
        self.assertEqual(max(s["kv_bytes"] for s in shapes if not s["skip"]), 32 << 30)
        self.assertTrue(all(s["causal"] == (s["Nq"] > 1) for s in shapes))
        # Nq innermost, so that one K/V serves both.
        self.assertEqual([s["Nq"] for s in shapes[:4]], [1, 16, 1, 16])

    def test_options(self):
        db = self.db
        args = db.parse_args(["--b", "8", "--nk", "4096,32768", "--nq", "1", "--heads", "32/8",
                              "--no-causal", "--max-gib", "0.5", "--kernels", "best,16"])
        shapes = db.sweep(args)
        self.assertEqual([(s["Nk"], bool(s["skip"])) for s in shapes], [(4096, False),
                                                                        (32768, True)])
        self.assertIn("--max-gib 0.5", shapes[1]["skip"])
        self.assertFalse(db.sweep(db.parse_args(["--nq", "16", "--no-causal"]))[0]["causal"])
        for bad in (["--heads", "32/6"], ["--heads", "32"], ["--nk", "0"], ["--b", "x"],
                    ["--rounds", "0"], ["--max-gib", "0"], ["--kernels", ","]):
            with self.subTest(argv=bad), mock.patch("sys.stderr"):
                with self.assertRaises(SystemExit):
                    db.parse_args(bad)

    def test_peer_ratio(self):
        db = self.db
        cell = [dict(impl="27_final_hopper", gbps=3000.0), dict(impl="16_final", gbps=1000.0),
                dict(impl="sdpa_flash", gbps=2000.0), dict(impl="sdpa_cudnn", gbps=2500.0),
                dict(impl=db.CEILING, gbps=3100.0), dict(impl="sdpa_cudnn", gbps=None)]
        self.assertAlmostEqual(db.peer_ratio(cell), 3000.0 / 2500.0)
        self.assertIsNone(db.peer_ratio(cell[2:]))


class ResultTables(unittest.TestCase):
    def test_hopper_tables_are_current(self):
        """The README's and the Hopper pages' result blocks are what scripts/hopper_tables.py
        writes from the committed JSON: a JSON updated without its tables, or a table edited by
        hand, fails here."""
        import subprocess
        done = subprocess.run([sys.executable, os.path.join(SCRIPTS, "hopper_tables.py"), "--check"],
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)


if __name__ == "__main__":
    unittest.main()
