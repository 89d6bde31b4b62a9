"""Every registered primitive differentiates correctly, in both modes and batched.

One row per primitive (tests/support/primitive_cases.py, autograd's habit): JVP against
central differences, VJP by the inner-product identity <u, J v> = <J^T u, v>,
second order by recursion (the same checks on the JVP and VJP graphs), batched
seeds against a loop, and the emitted module against the interpreted IR.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import sympy as sp

import primitive_cases as cases
from conftest import SUPPORT, operators_source
from difgen.ad import jvp, vjp, vmap
from difgen.core.expr import call
from difgen.core.ir import Graph
from difgen.core.primitive import NOT_DIFFERENTIABLE, NOT_LINEAR, missing_fields
from difgen.frontend import trace
from difgen.primitives import PRIMITIVES
from difgen.primitives.family import structural, unary
from difgen.primitives.structural import basis_p

NAMES = sorted(cases.ROWS)
H = 1e-5


@functools.cache
def graph(name: str) -> Graph:
    fn, shape = cases.ROWS[name]
    return trace(fn, [(shape, "float64")])


def point(name: str, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 0.8, cases.ROWS[name][1])


def normal(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


def central(fn: Any, x: np.ndarray, dx: np.ndarray) -> np.ndarray:
    return (np.asarray(fn(x + H * dx)) - np.asarray(fn(x - H * dx))) / (2 * H)


def close(actual: Any, expected: Any, rtol: float = 1e-6, atol: float = 1e-8) -> None:
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol, atol)


def inner(a: Any, b: Any) -> float:
    return float(np.sum(np.asarray(a) * np.asarray(b)))


# ------------------------------------------------------------------ coverage
def test_every_registered_primitive_has_a_row() -> None:
    missing = set(PRIMITIVES) - set(cases.ROWS)
    assert not missing, f"primitives without a test row: {sorted(missing)}"
    assert not set(cases.ROWS) - set(PRIMITIVES)


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_every_field_is_declared(name: str) -> None:
    """Each field is given by the row or filled by its family helper: none MISSING."""
    assert not missing_fields(
        PRIMITIVES[name]
    ), f"{name}: {missing_fields(PRIMITIVES[name])}"


def test_the_basis_seed_declares_every_field() -> None:
    assert not missing_fields(basis_p)


def test_a_row_that_forgets_a_rule_is_caught() -> None:
    """A family helper leaves what has no family default MISSING, not None."""
    forgot_deriv = unary("f", np.sin, call("np.sin({0})"), sympy=sp.sin, scalar="fast")
    assert missing_fields(forgot_deriv) == ["jvp"]
    forgot_helper = unary("f", np.sin, call("np.sin({0})"), deriv=len, sympy=sp.sin)
    assert missing_fields(forgot_helper) == ["scalar"]
    forgot_batch = structural(
        "g",
        np.ravel,
        call("np.ravel({0})"),
        jvp=len,
        transpose=len,
        shape_rule=len,
        sparsity=len,
    )
    assert missing_fields(forgot_batch) == ["batch"]


@pytest.mark.parametrize(
    "name", sorted(n for n, p in PRIMITIVES.items() if p.commutative)
)
def test_commutative_rows_commute(name: str) -> None:
    """CSE treats ``f(a, b)`` and ``f(b, a)`` as one value: they must be equal."""
    a, b = normal((5,), 30) > 0, normal((5,), 31) > 0
    if PRIMITIVES[name].differentiable:
        a, b = normal((5,), 30), normal((5,), 31)
    impl = PRIMITIVES[name].impl
    np.testing.assert_array_equal(impl(a, b), impl(b, a))


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_rules_are_declared(name: str) -> None:
    """Every rule is a function or an explicit absence; all rows batch."""
    prim = PRIMITIVES[name]
    assert callable(prim.jvp) or prim.jvp is NOT_DIFFERENTIABLE, name
    assert callable(prim.transpose) or prim.transpose is NOT_LINEAR, name
    assert callable(prim.batch), f"{name} has no batching rule"


@pytest.mark.parametrize("name", NAMES)
def test_row_reaches_its_primitive(name: str) -> None:
    assert name in {e.primitive.name for e in graph(name).eqns}


# The adjoint of a loop on a traced condition (a sweep over a stack of states) is
# not transposed again: reverse over reverse is refused with a clear error
# (tests/frontend/test_control_flow.py), and no operator needs it (second order is forward
# over reverse).
REVERSE_OVER_REVERSE_REFUSED = {"while_loop"}


# --------------------------------------------------------------- first order
@pytest.mark.parametrize("name", NAMES)
def test_jvp_matches_central_differences(name: str) -> None:
    fn, shape = cases.ROWS[name]
    x, dx = point(name, 0), normal(shape, 1)
    y, dy = jvp(graph(name)).evaluate(x, dx)
    close(y, fn(x), rtol=1e-12, atol=1e-12)
    close(dy, central(fn, x, dx))


@pytest.mark.parametrize("name", NAMES)
def test_vjp_is_the_transpose_of_jvp(name: str) -> None:
    """<u, J v> = <J^T u, v>: reverse mode is exactly the transpose of forward mode."""
    g = graph(name)
    x, v = point(name, 2), normal(g.inputs[0].shape, 3)
    u = normal(g.outputs[0].shape, 4)
    _, jv = jvp(g).evaluate(x, v)
    _, jtu = vjp(g).evaluate(x, u)
    assert inner(u, jv) == pytest.approx(inner(jtu, v), rel=1e-10, abs=1e-12)


# -------------------------------------------------------------- second order
@pytest.mark.parametrize("name", NAMES)
def test_second_order_forward_over_forward(name: str) -> None:
    """The JVP graph differentiates like any other: d/dx (J(x) v) by differences."""
    g = jvp(graph(name))
    x, v, w = point(name, 5), normal(g.inputs[0].shape, 6), normal(g.inputs[0].shape, 7)
    _, _, _, d2 = jvp(g, (True, False)).evaluate(x, v, w)
    close(d2, central(lambda z: g.evaluate(z, v)[1], x, w), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_second_order_reverse_over_forward_and_reverse(name: str) -> None:
    """The inner-product identity holds for the JVP and the VJP graphs too."""
    firsts = [jvp(graph(name))]
    if name not in REVERSE_OVER_REVERSE_REFUSED:
        firsts.append(vjp(graph(name)))
    for first in firsts:
        x, seed = point(name, 8), normal(first.inputs[1].shape, 9)
        v = normal(first.inputs[0].shape, 10)
        us = [normal(o.shape, 11 + i) for i, o in enumerate(first.outputs)]
        outs = jvp(first, (True, False)).evaluate(x, seed, v)
        jv = outs[len(us) :]
        jtu = vjp(first, (True, False)).evaluate(x, seed, *us)[-1]
        lhs = sum(inner(u, t) for u, t in zip(us, jv))
        assert lhs == pytest.approx(inner(jtu, v), rel=1e-9, abs=1e-10)


# ------------------------------------------------------------------- batching
@pytest.mark.parametrize("name", NAMES)
def test_batched_seeds_match_a_loop(name: str) -> None:
    """vmap over the tangent (and cotangent) seeds: one leading axis, same numbers."""
    k = 3
    g = graph(name)
    xs, ys = g.inputs[0].shape, g.outputs[0].shape
    x = point(name, 12)
    for linear, seed_shape in ((jvp(g), xs), (vjp(g), ys)):
        seeds = normal((k, *seed_shape), 13)
        _, batched = vmap(linear, (False, True), k).evaluate(x, seeds)
        for b in range(k):
            close(batched[b], linear.evaluate(x, seeds[b])[1], rtol=1e-12, atol=1e-13)


# ------------------------------------------------------------------- emission
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("emit", ["vector", "auto"])
def test_emitted_module_agrees_with_the_graph(
    module_cache: Any, name: str, emit: str
) -> None:
    """The generated pushforward, pullback and jacobian compute what the IR does."""
    fn, shape = cases.ROWS[name]
    ops = ["pushforward", "pullback", "jacobian"]
    mod, _ = module_cache(
        SUPPORT / "primitive_cases.py",
        fn.__name__,
        shape,
        ops,
        backend="trace",
        emit=emit,
    )
    g = graph(name)
    x, dx = point(name, 14), normal(shape, 15)
    dy = normal(g.outputs[0].shape, 16)
    close(mod.f(x), g.evaluate(x)[0], rtol=1e-12, atol=1e-12)
    close(mod.pushforward(x, dx), jvp(g).evaluate(x, dx)[1], rtol=1e-10, atol=1e-12)
    close(mod.pullback(x, dy), vjp(g).evaluate(x, dy)[1], rtol=1e-10, atol=1e-12)
    J = mod.jacobian(x)
    assert J.shape == g.outputs[0].shape + shape
    flat = J.reshape(-1, x.size)
    close(flat @ dx.ravel(), np.ravel(jvp(g).evaluate(x, dx)[1]), rtol=1e-9, atol=1e-11)


# -------------------------------------------------------------- NumPy surface
SURFACE = sorted(cases.SURFACE)


@pytest.mark.parametrize("entry", SURFACE)
def test_numpy_surface_differentiates_in_both_modes(entry: str) -> None:
    """Each supported NumPy function: JVP vs differences, VJP by the inner product,
    and second order forward-over-forward, like the primitive rows."""
    fn, shape = cases.SURFACE[entry]
    g = trace(fn, [(shape, "float64")])
    x, v, w = point_of(shape, 20), normal(shape, 21), normal(shape, 22)
    u = normal(g.outputs[0].shape, 23)
    y, jv = jvp(g).evaluate(x, v)
    close(y, fn(x), rtol=1e-12, atol=1e-12)
    close(jv, central(fn, x, v))
    assert inner(u, jv) == pytest.approx(
        inner(vjp(g).evaluate(x, u)[1], v), rel=1e-10, abs=1e-12
    )
    first = jvp(g)
    d2 = jvp(first, (True, False)).evaluate(x, v, w)[-1]
    close(d2, central(lambda z: first.evaluate(z, v)[1], x, w), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("entry", SURFACE)
def test_numpy_surface_emits_a_batched_jacobian(module_cache: Any, entry: str) -> None:
    fn, shape = cases.SURFACE[entry]
    mod, _text = module_cache(
        SUPPORT / "primitive_cases.py",
        fn.__name__,
        shape,
        ["jacobian", "pullback"],
        backend="trace",
        emit="vector",
    )
    x, v = point_of(shape, 24), normal(shape, 25)
    g = trace(fn, [(shape, "float64")])
    J = mod.jacobian(x).reshape(-1, x.size)
    close(J @ v.ravel(), np.ravel(jvp(g).evaluate(x, v)[1]), rtol=1e-9, atol=1e-11)
    assert "for " not in operators_source(mod)


def point_of(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 0.8, shape)
