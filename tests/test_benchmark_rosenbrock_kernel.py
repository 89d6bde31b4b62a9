"""The hand-written C kernels of ``benchmarks/kernels`` compute what their NumPy
references do: a limit that computed something else would flatter nobody but
would make every ratio against it meaningless."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package, not installed
    sys.path.insert(0, str(ROOT))
# imported after the path insert (by name, so the imports stay below it)
P = importlib.import_module("benchmarks.problems")
report = importlib.import_module("benchmarks.report")
K = importlib.import_module("benchmarks.kernels.rosenbrock")

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.mark.parametrize("n", [1, 2, 3, 4, 17, 1000, 100_001])
def test_rosenbrock_gradient_kernel_matches_numpy(n: int) -> None:
    x, _ = P.make_rosenbrock(n)
    got = K.gradient(x)
    want = P.rosenbrock_gradient(x)
    assert got.shape == want.shape == (n,)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 17, 1000, 100_001])
def test_rosenbrock_hvp_kernel_matches_numpy(n: int) -> None:
    x, v = P.make_rosenbrock(n)
    got = K.hvp(x, v)
    want = P.rosenbrock_hvp(x, v)
    assert got.shape == want.shape == (n,)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-11)


def test_rosenbrock_kernels_agree_with_finite_differences() -> None:
    """Independent of the NumPy references: central differences of f."""
    x, v = P.make_rosenbrock(6)
    h = 1e-6
    fd = np.array(
        [
            (P.rosenbrock(x + h * e) - P.rosenbrock(x - h * e)) / (2 * h)
            for e in np.eye(6)
        ]
    )
    np.testing.assert_allclose(K.gradient(x), fd, rtol=1e-6, atol=1e-6)
    hv = (K.gradient(x + h * v) - K.gradient(x - h * v)) / (2 * h)
    np.testing.assert_allclose(K.hvp(x, v), hv, rtol=1e-6, atol=1e-5)


def test_rosenbrock_kernel_propagates_nan_and_inf() -> None:
    x, v = P.make_rosenbrock(5)
    x[2] = np.nan
    x[4] = np.inf
    with np.errstate(invalid="ignore", over="ignore"):
        got_g, want_g = K.gradient(x), P.rosenbrock_gradient(x)
        got_h, want_h = K.hvp(x, v), P.rosenbrock_hvp(x, v)
    # the same elements NaN and infinite, the finite ones equal to rounding
    np.testing.assert_allclose(got_g, want_g, rtol=1e-13)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-12)
    assert np.isnan(got_g).any() and np.isnan(got_h).any()


def test_rosenbrock_kernel_refuses_mismatched_v() -> None:
    with pytest.raises(ValueError, match="shape"):
        K.hvp(np.zeros(3), np.zeros(4))


def test_the_report_names_the_kernel_by_its_label() -> None:
    assert report.HAND_C_KERNEL == K.LABEL
