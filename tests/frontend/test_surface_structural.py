"""Structural NumPy surface: diff, ediff1d, average, column_stack, append, trace
with offsets, gradient, kron, select, flips and rot90, rollaxis, atleast_Nd,
linspace with traced ends, reductions of lists of traced arrays, sums of
booleans, and the ndarray methods.

Each function: traced values equal NumPy's bit for bit and derivatives match
central differences in both modes and to second order; a few generated modules on
both backends against JAX or central differences; the refusals name the line.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import surface_cases as cases
from difgen.errors import TraceError
from difgen.frontend import trace
from surface_harness import check_module, check_trace, check_values

SOURCE = "surface_cases.py"
STRUCTURAL = [
    (cases.s_diff, (5,)),
    (cases.s_diff_matrix, (3, 4)),
    (cases.s_average, (3, 4)),
    (cases.s_stack, (3, 4)),
    (cases.s_trace, (3, 4)),
    (cases.s_trace, (4, 4)),
    (cases.s_gradient, (3, 4)),
    (cases.s_kron, (3, 4)),
    (cases.s_select, ()),
    (cases.s_select, (5,)),
    (cases.s_select, (2, 3)),
    (cases.s_flips, (3, 3)),
    (cases.s_rollaxis, (3, 4)),
    (cases.s_linspace, (2,)),
    (cases.s_list_reductions, (5,)),
    (cases.s_methods, (6,)),
    (cases.s_views, (3,)),
]


def point(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 0.8, shape)


@pytest.mark.parametrize(
    "fn, shape", STRUCTURAL, ids=[f"{f.__name__}{s}" for f, s in STRUCTURAL]
)
def test_traced_values_and_derivatives(fn: Any, shape: tuple[int, ...]) -> None:
    check_trace(fn, point(shape))


MODULES = [
    # (function, shape, backend, mode): the trace backend's vector emission here
    # (elementwise tests build with emit = "auto"); central differences as oracle
    # (JAX refuses Python lists in np.diff/np.mean)
    (cases.s_diff, (5,), "sympy", "auto"),
    (cases.s_diff, (5,), "trace", "reverse"),
    (cases.s_gradient, (3, 4), "sympy", "auto"),
    (cases.s_gradient, (3, 4), "trace", "forward"),
    (cases.s_list_reductions, (5,), "trace", "reverse"),
]


@pytest.mark.parametrize(
    "fn, shape, backend, mode",
    MODULES,
    ids=[f"{m[0].__name__}-{m[2]}-{m[3]}" for m in MODULES],
)
def test_generated_modules(
    module_cache: Any, fn: Any, shape: tuple[int, ...], backend: str, mode: str
) -> None:
    x = point(shape, 9)
    if backend == "trace":
        check_module(module_cache, SOURCE, fn, x, backend, mode, False, emit="vector")
    else:  # scalar code: divisions by a shared constant (np.gradient's spacing)
        check_module(module_cache, SOURCE, fn, x, backend, mode, False, False)


@pytest.mark.parametrize("backend", ["sympy", "trace"])
def test_linspace_values_at_equal_tiny_and_infinite_ends(
    module_cache: Any, backend: str
) -> None:
    """NumPy's formula exactly: a zero step (equal ends, or an underflowing one)
    takes ``(i / div) * delta``, the last point is ``stop``, inf gives NaN."""
    points = [
        np.array(p)
        for p in ([1.0, 1.0], [0.0, 1e-320], [np.inf, 1.0], [0.1, 0.7], [-0.0, 0.0])
    ]
    check_values(module_cache, SOURCE, cases.s_linspace_values, points, backend)


def test_a_sum_of_booleans_counts_as_float64() -> None:
    """np.sum(x < c) is NumPy's int64 count: traced as the float64 of the count,
    so ``+ 0.0`` is float64 as in NumPy, and the count is exact."""
    g = trace(lambda x: np.sum(x < 0.5) + 0.0, [((7,), "float64")])
    x = point((7,), 4)
    (value,) = g.evaluate(x)
    assert value.dtype == np.float64 and value == np.sum(x < 0.5) + 0.0
    assert g.outputs[0].dtype == "float64"


def test_list_reductions_keep_numpys_nesting() -> None:
    g = trace(
        lambda x: np.sum([[x, x], [x, 2.0 * x]], axis=(0, 1)), [((3,), "float64")]
    )
    x = point((3,), 5)
    np.testing.assert_array_equal(
        g.evaluate(x)[0], np.sum([[x, x], [x, 2.0 * x]], axis=(0, 1))
    )


def _refuses(fn: Any, shape: tuple[int, ...], *words: str) -> None:
    with pytest.raises(TraceError) as info:
        trace(fn, [(shape, "float64")])
    message = str(info.value)
    assert "test_surface_structural.py:" in message, message
    for word in words:
        assert word in message, message


def test_refusals_name_the_line_and_the_construct() -> None:
    _refuses(lambda x: np.gradient(x, np.arange(4.0)), (4,), "coordinate arrays")
    _refuses(lambda x: np.gradient(x, edge_order=3), (4,), "edge_order")
    _refuses(lambda x: np.gradient(x[:2], edge_order=2), (4,), "edge_order + 1")
    _refuses(lambda x: np.average(x, weights=[1.0, 2.0]), (2, 2), "axis=")
    _refuses(lambda x: np.select([x], [x]), (3,), "boolean")
    _refuses(lambda x: np.average(x, weights=[1.0, -1.0]), (2,), "sum to zero")
    _refuses(lambda x: np.diff(x[0]), (3,), "0-d")
    _refuses(lambda x: x.ravel(order="F"), (2, 2), "order='F'")
    _refuses(lambda x: np.linspace(x, 1.0, 3), (2,), "np.linspace")
    _refuses(lambda x: x.take([0], mode="clip"), (3,), "mode='clip'")
    _refuses(lambda x: x.nonzero()[0], (3,), "np.nonzero")
    _refuses(lambda x: x.tolist(), (3,), ".tolist()")
    _refuses(lambda x: x.sum(out=x), (3,), "out=")
    _refuses(lambda x: x.mean(where=x > 0), (3,), "where=")
    _refuses(lambda x: x.sum(dtype=int), (3,), "dtype=int64")
    _refuses(lambda x: x.var(mean=x.mean()), (3,), "mean=")
    _refuses(lambda x: x.clip(0.0, 1.0, out=x), (3,), "out=")
    _refuses(lambda x: np.trace(x, dtype=int), (2, 2), "dtype=int64")


def test_numpy_2_keywords() -> None:
    """``correction=`` is ``ddof``: not silently dropped."""
    g = trace(
        lambda x: np.var(x, correction=1) + np.std(x, correction=1.5),
        [((4,), "float64")],
    )
    x = point((4,), 6)
    np.testing.assert_array_equal(
        g.evaluate(x)[0], np.var(x, correction=1) + np.std(x, correction=1.5)
    )
