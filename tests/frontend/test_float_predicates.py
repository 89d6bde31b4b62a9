"""``np.isnan``, ``np.isfinite``, ``np.isinf``, ``np.isposinf``, ``np.isneginf``:
the masks NumPy code builds to keep NaN and inf out of a result.

They are written on comparisons (``x != x``, ``|x| < inf``, ``|x| == inf``,
``x == ±inf``), which hold for NaN as NumPy's do and which symbolic lowering
leaves as written; the tests hold every backend and emission to NumPy's own
values on NaN, ±inf, ±0 and huge inputs, and the derivative of a masked function
to the derivative of the branch each element takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import difgen

POINT = np.array([1.5, np.nan, np.inf, -np.inf, -0.0, 2.0, 1e300, -3.0])
PREDICATES: dict[str, Callable[[Any], Any]] = {
    "isnan": np.isnan,
    "isfinite": np.isfinite,
    "isinf": np.isinf,
    "isposinf": np.isposinf,
    "isneginf": np.isneginf,
}
BUILDS = [
    ("trace", "vector"),
    ("trace", "scalar"),
    ("trace", "c"),
    ("sympy", "auto"),
]


def masked(predicate: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A scalar function that zeroes the elements the predicate picks."""

    def f(x: Any) -> Any:
        return np.sum(np.where(predicate(x), 0.0, x * x))

    return f


@pytest.mark.parametrize(
    ("backend", "emit"), BUILDS, ids=[f"{b}-{e}" for b, e in BUILDS]
)
@pytest.mark.parametrize("name", sorted(PREDICATES))
def test_a_masked_function_matches_numpy(name: str, backend: str, emit: str) -> None:
    predicate = PREDICATES[name]
    module = difgen.generate(
        masked(predicate),
        np.ones(POINT.shape),
        operators=["f", "gradient"],
        backend=backend,
        emit=emit,
    )
    if emit == "c":
        assert module.COMPILED and module.PYTHON_OPERATORS == ()
    with np.errstate(all="ignore"):
        expected_value = masked(predicate)(POINT)
        expected_gradient = np.where(predicate(POINT), 0.0, 2.0 * POINT)
        value, gradient = module.f(POINT), module.gradient(POINT)
    assert np.array_equal(value, expected_value, equal_nan=True)
    assert np.array_equal(gradient, expected_gradient, equal_nan=True)


@pytest.mark.parametrize("name", sorted(PREDICATES))
def test_the_mask_itself_matches_numpy(name: str) -> None:
    """The boolean array itself, as floats: 1.0 where NumPy says True, else 2.0."""
    predicate = PREDICATES[name]

    def f(x: Any) -> Any:
        return np.where(predicate(x), 1.0, 2.0)

    module = difgen.generate(f, np.ones(POINT.shape), operators=["f"])
    with np.errstate(all="ignore"):
        assert np.array_equal(module.f(POINT), f(POINT), equal_nan=True)


@pytest.mark.parametrize("name", ["isnan", "isfinite", "isinf"])
def test_float32_modules_test_in_float32(name: str) -> None:
    """In a float32 module 3e38 is finite and 1e39 is inf, as in NumPy on float32."""
    predicate = PREDICATES[name]
    point = np.array([3e38, np.inf, np.nan, -1.0], dtype=np.float32)
    module = difgen.generate(
        masked(predicate), np.ones(4, dtype=np.float32), operators=["gradient"]
    )
    expected = np.where(predicate(point), np.float32(0), np.float32(2) * point)
    with np.errstate(all="ignore"):
        assert np.array_equal(module.gradient(point), expected, equal_nan=True)


def test_int_contexts() -> None:
    """On int data the predicates are constant, as in NumPy (isnan False,
    isfinite True), and the float input's derivative is unaffected."""
    module = difgen.generate(
        lambda x, k: np.sum(np.where(np.isfinite(k) & ~np.isnan(k), x, 0.0)),
        np.ones(3),
        np.arange(3),
        operators=["gradient"],
    )
    assert np.array_equal(module.gradient(np.ones(3), np.arange(3)), np.ones(3))
