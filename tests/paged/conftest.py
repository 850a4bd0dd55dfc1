"""tests/paged/ mirrors paged/: tests of a top-level module here, of paged/<sub>/ in <sub>/. The helper modules the
paged tests share (decode_cases, boundary_util, hf_tiny) stay in this folder; putting it on sys.path lets a test in
any subfolder import them by name, as tests/helpers.py is imported."""

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
