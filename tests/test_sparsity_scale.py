"""The sparsity scale benchmark (``python -m benchmarks.sparsity_scale``): its
Brusselator is the benchmark suite's, and its measure counts what it says."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import problems as P  # noqa: E402
from benchmarks import sparsity_scale  # noqa: E402


def test_the_brusselator_is_the_suites() -> None:
    s = np.random.default_rng(0).uniform(0.5, 1.5, 2 * P.GRID**2)
    np.testing.assert_array_equal(
        sparsity_scale.brusselator(P.GRID)(s), P.brusselator(s)
    )


def test_measure_counts_the_brusselators_nonzeros_and_colors() -> None:
    """Each of the 2 N^2 rows: a 5-point stencil of its own field and the other
    field at the same point; the greedy distance-1 coloring takes 11 colors here
    (12 from N = 32 on)."""
    r = sparsity_scale.measure(16)
    assert (r["states"], r["nnz"], r["colors"]) == (512, 12 * 256, 11)
    assert r["peak"] > 0 and r["detect"] >= 0.0


def test_the_table_prints(capsys, monkeypatch) -> None:
    monkeypatch.setattr(sparsity_scale, "SIZES", (8,))
    assert sparsity_scale.main([]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2].startswith("|   8 |     128 |")
