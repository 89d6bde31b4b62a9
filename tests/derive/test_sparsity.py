"""Sparsity patterns: they cover the true Jacobian everywhere, and colorings are valid."""

from __future__ import annotations

import numpy as np
import pytest

import oracle
import scenarios
import tracer_cases as cases
from difgen.derive.sparsity import color_columns, jacobian_pattern
from difgen.frontend import trace


def stencil(u):
    """A periodic 1-D diffusion with a local reaction: tridiagonal plus corners."""
    return np.roll(u, 1) + np.roll(u, -1) - 2.0 * u + u * u


def branchy(x):
    """The pattern must hold for both branches of the where."""
    return np.where(x > 0.0, x[::-1], 2.0 * x)


@pytest.mark.parametrize("name", list(scenarios.SCENARIOS))
def test_pattern_covers_the_jacobian(name: str) -> None:
    xs, ctx_shapes = scenarios.SCENARIOS[name]
    fn = getattr(scenarios, name)
    graph = trace(fn, [(xs, "float64"), *[(s, "float64") for s in ctx_shapes]])
    pattern = jacobian_pattern(graph)
    rng = np.random.default_rng(0)
    x = rng.uniform(0.2, 1.0, xs)
    ctx = [rng.uniform(-1.0, 1.0, s) for s in ctx_shapes]
    J = oracle.jacobian(fn, x, *ctx).reshape(pattern.shape)
    assert np.all(pattern | (J == 0.0))


@pytest.mark.parametrize(
    "fn,shape",
    [
        (cases.structure, (3,)),
        (cases.slicing_and_fancy, (3, 4)),
        (cases.zeros_then_assign, (3,)),
        (cases.linear_algebra, (9,)),
        (cases.reductions, (3, 4)),
        (cases.padding_and_products, (4,)),
    ],
)
def test_pattern_covers_tracer_patterns(fn, shape) -> None:
    pattern = jacobian_pattern(trace(fn, [(shape, "float64")]))
    x = np.random.default_rng(1).uniform(0.1, 0.9, shape)
    J = oracle.central_jacobian(fn, x).reshape(pattern.shape)
    assert np.all(pattern | (np.abs(J) < 1e-7))


def test_stencil_pattern_is_exact() -> None:
    pattern = jacobian_pattern(trace(stencil, [((6,), "float64")]))
    expected = (np.eye(6) + np.roll(np.eye(6), 1, 0) + np.roll(np.eye(6), -1, 0)) > 0
    np.testing.assert_array_equal(pattern, expected)


def test_pattern_holds_for_both_branches_of_where() -> None:
    pattern = jacobian_pattern(trace(branchy, [((4,), "float64")]))
    np.testing.assert_array_equal(pattern, (np.eye(4) + np.eye(4)[::-1]) > 0)


def test_contexts_and_constants_carry_no_dependence() -> None:
    pattern = jacobian_pattern(
        trace(lambda x, c: x * c.sum(), [((3,), "float64"), ((3,), "float64")])
    )
    np.testing.assert_array_equal(pattern, np.eye(3, dtype=bool))


@pytest.mark.parametrize("seed", range(5))
def test_coloring_separates_columns_that_share_a_row(seed: int) -> None:
    pattern = np.random.default_rng(seed).uniform(size=(30, 40)) < 0.1
    colors = color_columns(pattern)
    for row in pattern:
        assert len(set(colors[row])) == row.sum()
    assert colors.max() + 1 < pattern.shape[1]  # fewer colors than columns


def test_stencil_needs_three_colors() -> None:
    pattern = jacobian_pattern(trace(stencil, [((6,), "float64")]))
    assert color_columns(pattern).max() + 1 == 3
