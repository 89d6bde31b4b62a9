"""The passes: constant folding, algebraic identities, CSE and DCE, to a fixed point."""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import numpy as np
import pytest

from difgen.ad import build_graph, jvp, jvp_eval, vjp, vjp_eval
from difgen.core import simplify
from difgen.core.builder import relaxed
from difgen.core.ir import Graph, Lit, dce
from difgen.frontend import trace
from difgen.passes import fingerprint, optimize, retrace


def names(graph: Graph) -> list[str]:
    return [e.primitive.name for e in graph.eqns]


def scalar(shape: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], str]]:
    return [(shape, "float64")]


@pytest.mark.parametrize(
    "fn,expected",
    [
        (lambda x: x * 1.0, []),
        (lambda x: 1.0 * x, []),
        # x + 0 is x up to the sign of zero: kept in the user's function
        (lambda x: x + 0.0, ["add"]),
        (lambda x: x - 0.0, []),
        (lambda x: x / 1.0, []),
        (lambda x: x**1.0, []),
        (lambda x: np.negative(-x), []),
        (lambda x: x.T.T, []),
        (lambda x: np.transpose(np.transpose(x, (1, 0, 2)), (1, 0, 2)), []),
        (lambda x: x.reshape(6, 4).reshape(2, 3, 4), []),
        (lambda x: x.reshape(24).reshape(4, 6), ["reshape"]),
        (
            lambda x: np.broadcast_to(
                np.broadcast_to(x, (5, 2, 3, 4)), (6, 5, 2, 3, 4)
            ),
            ["broadcast_to"],
        ),
        (lambda x: np.where(x > 0.5, x, x), []),
        # 2 * (3 * x) is 6 * x up to rounding: kept in the user's function
        (lambda x: 2.0 * (3.0 * x), ["mul", "mul"]),
        (lambda x: -(2.0 * x), ["mul"]),
        # 0 - x is -x up to the sign of zero: kept in the user's function
        (lambda x: 0.0 - x, ["sub"]),
        (lambda x: x + (-np.sin(x)), ["sin", "sub"]),
        (lambda x: x + x, ["mul"]),
        (lambda x: np.sum(x[:, :1, :], axis=1), ["getitem", "reshape"]),
    ],
)
def test_identities(fn, expected: list[str]) -> None:
    """Each identity leaves the listed equations (none: the input itself)."""
    graph = optimize(trace(fn, scalar((2, 3, 4))))
    assert names(graph) == expected
    x = np.random.default_rng(0).uniform(size=(2, 3, 4))
    np.testing.assert_allclose(graph.evaluate(x)[0], fn(x), rtol=1e-15)


def test_zero_times_anything_stays_in_the_users_function() -> None:
    """0 * sin(x) is NaN where sin(x) is (x = inf): the user's function keeps it."""
    graph = optimize(trace(lambda x: 0.0 * np.sin(x) + 1.0, scalar((3,))))
    x = np.array([0.5, np.inf, np.nan])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(graph.evaluate(x)[0], [1.0, np.nan, np.nan])


@pytest.mark.parametrize(
    "fn,expected",
    [
        (lambda x: x + 0.0, []),
        (lambda x: 2.0 * (3.0 * x), ["mul"]),
        (lambda x: 0.0 - x, ["neg"]),
        (lambda x: -(x - np.sin(x)), ["sin", "sub"]),
    ],
)
def test_inexact_identities_apply_in_derivative_code(fn, expected: list[str]) -> None:
    """Identities exact only up to rounding or the sign of zero apply to relaxed
    (derivative) equations, where the user's function is not being reproduced."""

    def relaxed_fn(x: Any) -> tuple[Any]:
        with relaxed():
            return (fn(x),)

    graph = build_graph(relaxed_fn, scalar((2, 3, 4)))
    assert names(graph) == expected


def test_zero_times_anything_folds_in_a_derivative_computation() -> None:
    """Derivative rules run relaxed: there 0 * y is 0 (a symbolic zero tangent)."""

    def fn(x: Any) -> tuple[Any]:
        with relaxed():
            return (0.0 * np.sin(x) + 1.0,)

    graph = build_graph(fn, scalar((3,)))
    assert graph.eqns == () and isinstance(graph.outputs[0], Lit)
    np.testing.assert_array_equal(graph.outputs[0].value, np.ones(3))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x - x,
        lambda x: x / x,
        lambda x: 0.0 / x,
        lambda x: x * (3.0 / x),
        lambda x: np.sum(x[0] * x) + np.sum(x / x[1]),
    ],
)
def test_finite_only_identities_keep_numpys_nan_and_inf(fn: Any) -> None:
    """x - x, x / x, 0 / x, x * (c / x), sum(s * y), sum(y / s): NumPy's answer."""
    graph = optimize(trace(fn, scalar((3,))))
    for x in (np.array([np.inf, 0.0, np.nan]), np.array([1.0, -np.inf, 0.0])):
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(graph.evaluate(x)[0], fn(x))


def test_constants_fold() -> None:
    graph = optimize(trace(lambda x: x * (np.exp(1.0) * 2.0 - np.sqrt(4.0)), scalar()))
    ((lit,),) = [e.inputs[1:] for e in graph.eqns]
    assert names(graph) == ["mul"] and lit.value == pytest.approx(np.e * 2 - 2)


def test_a_seed_of_one_disappears() -> None:
    """derivative = JVP with seed 1: no multiplication by the seed remains."""
    f = trace(lambda x: np.sin(x) * x, scalar())
    graph = optimize(build_graph(lambda x: (jvp_eval(f, [x], [1.0])[1][0],), scalar()))
    assert not any(
        isinstance(a, Lit) and a.value == 1.0 for e in graph.eqns for a in e.inputs
    )
    assert names(graph) == ["sin", "cos", "mul", "add"]  # sin x + x cos x


def test_a_zero_tangent_prunes_its_subgraph() -> None:
    """A context has no tangent: nothing computed only from it reaches the JVP."""
    f = trace(lambda x, c: np.sin(x) * np.exp(np.cos(c)), [((3,), "float64")] * 2)
    graph = optimize(jvp(f))
    tangent = graph.outputs[1]
    used = {e.primitive.name for e in graph.eqns}
    assert "cos" in used  # the primal needs cos(c); the tangent must not re-derive it
    assert sum(e.primitive.name in ("exp", "cos") for e in graph.eqns) == 3  # cos x too
    assert tangent.shape == (3,)


def test_cse_shares_equal_equations_also_across_operand_order() -> None:
    graph = optimize(
        trace(lambda x: np.sin(x) * np.cos(x) + np.cos(x) * np.sin(x), scalar())
    )
    assert names(graph) == ["sin", "cos", "mul", "mul"]  # x*y + y*x = 2 (x*y)


def test_dce_drops_unused_equations() -> None:
    traced = trace(lambda x: (np.sin(x), np.cos(x)), scalar())
    kept = dce(Graph(traced.inputs, traced.outputs[:1], traced.eqns))
    assert names(kept) == ["sin"]


def test_added_scatters_share_one_buffer() -> None:
    graph = optimize(vjp(trace(lambda x: np.sum(x[1:] * x[:-1]), scalar((5,)))))
    assert names(graph).count("scatter_sum") == 1 and "scatter_add" not in names(graph)


def test_the_facts_identities_need_are_declared_by_their_primitives() -> None:
    from difgen.primitives.indexing import scatter_add_p, scatter_sum_p
    from difgen.primitives.structural import basis_p

    assert set(simplify.PLACED) == {scatter_add_p, scatter_sum_p}
    assert set(simplify.EYES) == {basis_p}


def test_identities_match_producers_by_primitive_not_by_name() -> None:
    (eqn,) = trace(lambda x: -x, scalar((3,))).eqns
    impostor = dataclasses.replace(eqn, primitive=dataclasses.replace(eqn.primitive))
    for producer, found in ((eqn, eqn), (impostor, None)):
        builder = types.SimpleNamespace(producer={producer.out: producer})
        context = simplify.Context(builder, lambda *a: None, relaxed=False)
        assert context.made_by(producer.out, "neg") is found


def test_optimize_reaches_a_fixed_point() -> None:
    f = trace(lambda x: np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2), scalar((6,)))
    once = optimize(vjp(f))
    assert fingerprint(retrace(once)) == fingerprint(once)
    x, ct = np.linspace(0.1, 0.9, 6), 1.3
    for a, b in zip(once.evaluate(x, ct), vjp(f).evaluate(x, ct)):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def test_logsumexp_gradient_drops_the_max_branch() -> None:
    """d/dm of m + log(sum(exp(x - m))) is 1 - sum(softmax) = 0: the identities
    sum(s * y) = s * sum(y) and y * (1 / y) = 1 fold it away, leaving the softmax."""

    def logsumexp(x):
        m = np.max(x)
        return m + np.log(np.sum(np.exp(x - m)))

    f = trace(logsumexp, scalar((5,)))
    graph = optimize(
        build_graph(lambda x: (vjp_eval(f, [x], [np.ones(())])[1][0],), scalar((5,)))
    )
    assert "eq" not in names(graph) and "where" not in names(graph)
    x = np.array([0.3, -1.0, 2.0, 0.5, 2.0])  # a tie at the max, too
    (grad,) = graph.evaluate(x)
    np.testing.assert_allclose(grad, np.exp(x) / np.exp(x).sum(), rtol=1e-14)


def test_division_by_itself_is_one_in_a_derivative_computation() -> None:
    """y / y = 1 in a derivative rule; the user's sin(x) / sin(x) stays (0 / 0)."""

    def fn(x: Any) -> tuple[Any]:
        with relaxed():
            return (np.sin(x) / np.sin(x) + x,)

    assert names(optimize(build_graph(fn, scalar((3,))))) == ["add"]
    user = optimize(trace(lambda x: np.sin(x) / np.sin(x) + x, scalar((3,))))
    assert names(user) == ["sin", "div", "add"]
