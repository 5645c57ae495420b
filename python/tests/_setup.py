"""Puts the checkout's python/ first on sys.path, so that the tests import this package and not
an installed copy. Imported by every test module."""
import os
import sys

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(PYTHON_DIR)
if sys.path[:1] != [PYTHON_DIR]:
    sys.path.insert(0, PYTHON_DIR)
