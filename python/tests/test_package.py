"""The package without torch: it imports, its library side works, and flash_ladder.attention
says what it needs. torch is hidden from a child interpreter, so this runs on the device too."""
import os
import subprocess
import sys
import textwrap
import unittest

import _setup

HIDE_TORCH = textwrap.dedent("""
    import sys
    class HideTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("No module named 'torch' (hidden by the test)")
            return None
    sys.meta_path.insert(0, HideTorch())
""")


def run_python(code):
    env = dict(os.environ, PYTHONPATH=_setup.PYTHON_DIR)
    return subprocess.run([sys.executable, "-c", HIDE_TORCH + textwrap.dedent(code)],
                          capture_output=True, text=True, env=env, check=False)


class WithoutTorch(unittest.TestCase):
    def test_import_and_the_library_side(self):
        r = run_python("""
            import flash_ladder, flash_ladder._capi as c, flash_ladder._layout as l
            print("torch" in sys.modules, c._loaded == {})
            spec = l.TensorSpec((1, 2, 8, 64), (1024, 512, 64, 1), "float16", "cuda:0")
            print(l.check_call(spec, spec, spec).lse_shape)
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["False True", "(1, 2, 8)"])

    def test_attention_says_it_needs_torch(self):
        r = run_python("""
            import flash_ladder
            try:
                flash_ladder.attention
            except ImportError as e:
                print(e)
            try:
                flash_ladder.no_such_thing
            except AttributeError as e:
                print(e)
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith("flash_ladder.attention needs torch (>= 2.4): "),
                        lines)
        self.assertEqual(lines[1], "module 'flash_ladder' has no attribute 'no_such_thing'")


if __name__ == "__main__":
    unittest.main()
