"""The hand-written C kernels of ``benchmarks/kernels`` compute what the
NumPy reference does: a limit that computed something else would make every
ratio against it meaningless."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import problems as P  # noqa: E402
from benchmarks.cases import KERNEL, all_cases  # noqa: E402
from benchmarks.kernels import logistic  # noqa: E402


@pytest.mark.parametrize(
    ("n", "d"), [(1, 1), (2, 3), (7, 1), (7, 50), (1000, 20), (100_000, 50)]
)
def test_logistic_kernel_is_the_reference_gradient(n: int, d: int) -> None:
    w, X, y = P.make_logistic(n, d)
    got = logistic.gradient(w, X, y)
    want = P.logistic_nll_gradient(w, X, y)
    # the kernel sums each dot and the gradient in row order, BLAS in its own
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * n)


def test_logistic_kernel_propagates_nan_and_inf_like_numpy() -> None:
    w, X, y = P.make_logistic(5, 3)
    X[1, 2] = np.nan
    X[3, 0] = np.inf
    got = logistic.gradient(w, X, y)
    with np.errstate(invalid="ignore"):
        want = P.logistic_nll_gradient(w, X, y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12)


def test_logistic_kernel_refuses_arrays_that_do_not_fit() -> None:
    w, X, y = P.make_logistic(4, 3)
    with pytest.raises(ValueError):
        logistic.gradient(w[:2], X, y)
    with pytest.raises(TypeError):
        logistic.gradient(w, np.asfortranarray(X), y)


def test_the_large_logistic_case_times_the_kernel() -> None:
    case = next(c for c in all_cases() if c.name == "logistic_100000x50_gradient")
    assert dict(case.extras)[KERNEL] is logistic.gradient
    assert case.contexts[0].shape == (100_000, 50)
    assert [m for _, m in case.difgen] == [
        "logistic_100000x50",
        "logistic_100000x50_c",
    ]
