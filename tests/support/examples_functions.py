"""The examples' function file, imported for the reference tests."""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "examples" / "functions.py"
_spec = importlib.util.spec_from_file_location("examples_functions_module", _PATH)
assert _spec is not None and _spec.loader is not None
functions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(functions)
