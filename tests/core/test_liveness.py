"""The liveness analysis (difgen.ad.liveness) and the selections it guides.

An element no output reads is dead; the JVP selects the tangent of a dead element
before a rule with coefficients sees it, and the transpose selects the cotangent.
Graphs without dead elements get no selection at all.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from difgen.ad import build_graph, jvp, vjp
from difgen.ad.liveness import guards
from difgen.core.builder import relaxed
from difgen.frontend import trace

LOWER = np.tri(3, k=-1, dtype=bool)


def uses(fn: Any, shape: tuple[int, ...], primitive: str) -> list[Any]:
    """The guard masks of the (first) equation of ``primitive`` in ``fn``'s trace."""
    g = trace(fn, [(shape, "float64")])
    for eqn, guard in zip(g.eqns, guards(g)):
        if eqn.primitive.name == primitive:
            return [None] * len(eqn.inputs) if guard is None else list(guard.uses)
    raise AssertionError(f"no {primitive} in {g}")


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: np.sum(np.sqrt(x) * x),
        lambda x: np.sum(np.log(x)[::-1] / 2.0),  # a permutation drops nothing
        lambda x: np.sum(np.sqrt(np.broadcast_to(x, (2, 3)))),
        lambda x: np.sum(np.where(x > 0, np.sqrt(x), 0.0)),  # run-time mask
    ],
)
def test_nothing_dead_no_guard(fn: Any) -> None:
    g = trace(fn, [((3,), "float64")])
    assert guards(g) == (None,) * len(g.eqns)


def test_tril_kills_the_upper_triangle_and_diagonal() -> None:
    (mask,) = uses(lambda m: np.sum(np.tril(np.sqrt(m), -1)), (3, 3), "sqrt")
    np.testing.assert_array_equal(mask, LOWER)


def test_constant_where_kills_the_branch_not_taken() -> None:
    keep = np.array([True, False, True])
    (mask,) = uses(lambda x: np.where(keep, np.log(x), 1.0), (3,), "log")
    np.testing.assert_array_equal(mask, keep)


def test_product_with_constant_zeros_kills() -> None:
    zeros = np.array([1.0, 0.0, 2.0])
    (mask,) = uses(lambda x: np.sqrt(x) * zeros, (3,), "sqrt")
    np.testing.assert_array_equal(mask, [True, False, True])


def test_slice_and_index_selection_kill() -> None:
    (mask,) = uses(lambda x: np.sqrt(x)[1:], (4,), "sqrt")
    np.testing.assert_array_equal(mask, [False, True, True, True])
    (mask,) = uses(lambda x: np.sqrt(x)[np.array([3, 3, 0])], (4,), "sqrt")
    np.testing.assert_array_equal(mask, [True, False, False, True])


def test_reduction_and_reshape_carry_liveness_back() -> None:
    fn = lambda x: np.sum(np.reshape(np.sqrt(x), (2, 3)), axis=1)[0]
    (mask,) = uses(fn, (6,), "sqrt")
    np.testing.assert_array_equal(mask, [True] * 3 + [False] * 3)


def test_an_element_read_by_any_live_output_is_live() -> None:
    # x[1] is discarded after sqrt, but read by the product: sqrt's use is dead
    # there, the product's is not
    keep = np.array([True, False, True])
    fn = lambda x: np.sum(np.where(keep, np.sqrt(x), 0.0) + x * x)
    (mask,) = uses(fn, (3,), "sqrt")
    np.testing.assert_array_equal(mask, keep)
    assert uses(fn, (3,), "mul") == [None, None]


@pytest.mark.parametrize("transform", [jvp, vjp])
def test_discarded_sqrt_zero_gives_finite_derivatives(transform: Any) -> None:
    keep = np.array([True, False, True])
    g = trace(lambda x: np.sum(np.tril(np.sqrt(x)) * keep), [((3, 3), "float64")])
    x = np.array([[1.0, 0.0, 0.0], [4.0, 0.0, 0.0], [9.0, 0.0, 1.0]])  # 0: dropped
    seed = np.ones((3, 3)) if transform is jvp else np.array(1.0)
    _, d = transform(g).evaluate(x, seed)
    assert np.all(np.isfinite(d)), d


def test_division_by_a_selection_is_not_moved_into_it() -> None:
    """``k / where(c, y, 0)`` is not ``where(c, y / k, 0)``; ``where(c, y, 0) / k``
    is ``where(c, y / k, 0)``."""
    c = np.array([True, False])

    def quotient(x: Any) -> tuple[Any, ...]:
        with relaxed():
            sel = np.where(c, x, 0.0)
            return (2.0 / sel, sel / 4.0)

    g = build_graph(quotient, [((2,), "float64")])
    with np.errstate(divide="ignore"):
        over, under = g.evaluate(np.array([8.0, 3.0]))
    np.testing.assert_array_equal(over, [0.25, np.inf])
    np.testing.assert_array_equal(under, [2.0, 0.0])


def test_quotient_by_a_where_differentiates_in_both_modes() -> None:
    """The misplaced rewrite put the tangent in the divisor: vjp raised."""
    g = trace(lambda x: np.sum(x[0] / np.where(x > 0.5, x, 0.0)), [((3,), "float64")])
    x = np.array([0.7, 0.9, 2.0])
    exact = [1.0 / x[1] + 1.0 / x[2], -x[0] / x[1] ** 2, -x[0] / x[2] ** 2]
    np.testing.assert_allclose(vjp(g).evaluate(x, np.array(1.0))[1], exact)
    tangents = [jvp(g).evaluate(x, e)[1] for e in np.eye(3)]
    np.testing.assert_allclose(tangents, exact)
