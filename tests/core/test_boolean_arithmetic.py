"""Booleans in arithmetic count as 1 and 0, as in NumPy: ``(x > c) * x``.

Both backends once failed here: SymPy cannot multiply a relational (a traceback),
and the trace backend folded ``mask * 1.0`` into the boolean mask itself, so the
gradient came back as a bool array.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import build_and_import, write_config

SOURCE = "import numpy as np\n\n\ndef masked(x):\n    return np.sum((x > 0.6) * x)\n"
POINTS = [np.array([0.5, 0.7, np.nan]), np.array([1.0, 0.2, 0.9])]


@pytest.mark.parametrize(
    "options",
    [
        {"backend": "sympy"},
        {"backend": "trace"},
        {"backend": "trace", "emit": "vector"},
    ],
    ids=["sympy", "trace-auto", "trace-vector"],
)
def test_boolean_times_value(tmp_path: Path, options: dict[str, str]) -> None:
    source = tmp_path / "src" / "masked_fn.py"
    source.parent.mkdir()
    source.write_text(SOURCE)
    config = write_config(
        tmp_path / "project", source, "masked", [3], ["value_and_gradient"], **options
    )
    module, _ = build_and_import(config)
    for x in POINTS:
        with np.errstate(invalid="ignore"):
            expected = np.sum((x > 0.6) * x)
        value, gradient = module.value_and_gradient(x.copy())
        np.testing.assert_array_equal(value, expected)
        assert gradient.dtype == np.float64
        np.testing.assert_array_equal(gradient, (x > 0.6).astype(float))
