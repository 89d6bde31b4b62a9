"""A scalar meeting a vector stays a scalar: ``x * ones(n)`` is a broadcast, and the
elementwise operations that read a broadcast read its source; scatters into zeros
added one by one are one scatter (issue 21, the arrowhead Hessian at n = 10^5: no
full-size temporary of a broadcast scalar, no full-size addition of one column)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from difgen.ad import build_graph
from difgen.core.builder import relaxed
from difgen.core.ir import Graph
from difgen.frontend import trace
from difgen.passes import optimize
from difgen.primitives.indexing import scatter_add


def names(graph: Graph) -> list[str]:
    return [e.primitive.name for e in graph.eqns]


def largest_temporary(graph: Graph) -> int:
    """The largest value an equation other than a view (a broadcast) computes."""
    sizes = [
        int(np.prod(e.out.shape, dtype=np.int64))
        for e in graph.eqns
        if e.primitive.name != "broadcast_to"
    ]
    return max(sizes, default=0)


def test_a_scalar_times_ones_is_a_broadcast() -> None:
    graph = optimize(trace(lambda x: x[0] * np.ones(5), [((3,), "float64")]))
    assert names(graph) == ["getitem", "broadcast_to"]
    x = np.array([np.nan, 1.0, 2.0])
    np.testing.assert_array_equal(graph.evaluate(x)[0], np.full(5, np.nan))
    x = np.array([-np.inf, 1.0, 2.0])
    np.testing.assert_array_equal(graph.evaluate(x)[0], np.full(5, -np.inf))


def test_a_boolean_times_ones_stays_a_product() -> None:
    """``mask * ones`` is the float array of the mask: no broadcast of the mask."""
    graph = optimize(trace(lambda x: (x[0] > 0.0) * np.ones(4), [((3,), "float64")]))
    assert "broadcast_to" not in names(graph)
    got = graph.evaluate(np.array([1.0, 0.0, 0.0]))[0]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.ones(4))


def test_operations_on_a_broadcast_scalar_run_on_the_scalar() -> None:
    """``2 * (x0 * ones) * y``: the 2 multiplies the scalar, the product with ``y``
    reads the scalar; nothing of the broadcast's size but the result."""

    def fn(x: Any) -> Any:
        return 2.0 * (x[0] * np.ones(x.shape[0] - 1)) * x[1:] + 1.0

    graph = optimize(trace(fn, [((1000,), "float64")]))
    assert "broadcast_to" not in names(graph)
    assert largest_temporary(graph) == 999
    assert next(e.out.shape for e in graph.eqns if e.primitive.name == "mul") == ()
    rng = np.random.default_rng(0)
    for x in (rng.normal(size=1000), np.r_[np.inf, rng.normal(size=999)]):
        x[5] = np.nan
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(graph.evaluate(x)[0], fn(x))


@pytest.mark.parametrize(
    "ufunc,name", [(np.sin, "sin"), (np.exp, "exp"), (np.negative, "neg")]
)
def test_a_unary_operation_of_a_broadcast_is_the_broadcast_of_it(
    ufunc: Any, name: str
) -> None:
    def fn(x: Any) -> Any:
        return ufunc(x[0] * np.ones(6)) * x[1:]

    graph = optimize(trace(fn, [((7,), "float64")]))
    assert "broadcast_to" not in names(graph)
    assert [e.out.shape for e in graph.eqns if e.primitive.name == name] == [()]
    x = np.linspace(-1.0, 2.0, 7)
    np.testing.assert_array_equal(graph.evaluate(x)[0], fn(x))


def test_the_arrowhead_hessian_vector_product_has_no_broadcast_temporary() -> None:
    """The shape of the arrowhead's Hessian in derivative code: ``x0`` met the
    tangent of ``x[1:]`` through ``ones``; the relaxed product keeps it scalar."""

    def fn(x: Any) -> tuple[Any]:
        with relaxed():
            t = x[0] * np.ones(x.shape[0] - 1)
            return (2.0 * t * x[1:],)

    graph = build_graph(fn, [((100,), "float64")])
    assert "broadcast_to" not in names(graph)
    assert largest_temporary(graph) == 99
    x = np.linspace(0.5, 2.0, 100)
    np.testing.assert_allclose(graph.evaluate(x)[0], 2.0 * x[0] * x[1:], rtol=1e-15)


def _cotangents(relaxed_mode: bool) -> Graph:
    """``(m + s1) + s2``: a full value, then two values placed into zeros (the
    order a transposition adds a Hessian's compressed products in)."""

    def fn(x: Any) -> tuple[Any]:
        with relaxed(relaxed_mode):
            m = x * x
            s1 = scatter_add(np.sin(x[1:]), (slice(1, None),), (6,))
            s2 = scatter_add(np.cos(x[0]), (0,), (6,))
            return ((m + s1) + s2,)

    return build_graph(fn, [((6,), "float64")])


def test_scatters_added_one_by_one_become_one_scatter() -> None:
    """In derivative code the two scatters are one (one buffer of zeros, one
    full-size addition); the user's own additions keep their order."""
    graph = _cotangents(True)
    assert names(graph).count("scatter_sum") == 1
    assert "scatter_add" not in names(graph)
    assert names(graph).count("add") == 1
    x = np.linspace(-1.0, 2.0, 6)
    expected = x * x + np.r_[np.cos(x[0]), np.sin(x[1:])]
    np.testing.assert_array_equal(graph.evaluate(x)[0], expected)
    kept = _cotangents(False)
    assert names(kept).count("add") == 2
