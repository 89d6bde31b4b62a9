"""The color counts benchmark (``python -m benchmarks.coloring_counts``): its
patterns are what they say, and difgen reaches the known optima it claims."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import coloring_counts as C  # noqa: E402


def test_the_patterns_are_what_they_say() -> None:
    arrow = C.arrowhead(5).dense().astype(int)
    expected = np.eye(5, dtype=int)
    expected[0] = expected[:, 0] = 1
    np.testing.assert_array_equal(arrow, expected)
    i = np.arange(7)
    band = np.abs(i[:, None] - i[None, :]) <= 2
    np.testing.assert_array_equal(C.banded(7, 2).dense(), band)
    grid = C.laplacian(3).dense()
    assert grid.sum(axis=1).tolist() == [3, 4, 3, 4, 5, 4, 3, 4, 3]
    np.testing.assert_array_equal(grid, grid.T)


def test_the_arrowhead_and_bands_reach_their_optima() -> None:
    n = 200
    row = C.measure(
        "arrowhead", "", C.arrowhead(n), {"star": (2, True), "acyclic": (2, True)}, True
    )
    assert row.jacobian == "1 row color (reverse), 2 column colors (forward)"
    assert [(what, count) for what, count, _, _ in row.bars] == [
        ("star", 2),
        ("acyclic", 2),
    ]
    for k in (1, 3):
        row = C.measure("band", "", C.banded(n, k), {}, True)
        assert row.columns == 2 * k + 1 and row.acyclic == k + 1
        assert row.hessian == f"acyclic coloring, {k + 1} colors"


def test_the_table_flags_a_count_below_its_bound() -> None:
    row = C.measure("band", "", C.banded(50, 1), {"columns": (4, False)}, True)
    text, ok = C.table([row])
    assert not ok and "below the bound" in text
