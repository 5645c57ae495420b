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
            for name in ("compare_sdpa.py", "plus1_bench.py", "gqa_bench.py"):
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
