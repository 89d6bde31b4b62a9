"""Sparsity patterns: they cover the true Jacobian everywhere, equal the dense rules'
patterns value by value, stay within their nonzeros' memory, and colorings are valid
(and the same as the set-per-row greedy coloring's)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import control_flow_cases
import oracle
import primitive_cases
import scenarios
import tracer_cases as cases
from dense_patterns import DENSE_RULES, dense_color_columns
from difgen.config import load_config
from difgen.core.ir import Graph, Lit
from difgen.derive.graphs import Derivatives
from difgen.derive.sparsity import (
    Coloring,
    PatternTooLarge,
    Rows,
    color_columns,
    coloring_of,
    jacobian_pattern,
    star_coloring,
    star_positions,
)
from difgen.errors import ConfigError
from difgen.frontend import trace
from difgen.load import load_function
from difgen.operators import OPERATORS
from difgen.pipeline import trace_spec
from difgen.primitives import patterns

ROOT = Path(__file__).resolve().parents[2]


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
    pattern = jacobian_pattern(graph).dense()
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
    pattern = jacobian_pattern(trace(fn, [(shape, "float64")])).dense()
    x = np.random.default_rng(1).uniform(0.1, 0.9, shape)
    J = oracle.central_jacobian(fn, x).reshape(pattern.shape)
    assert np.all(pattern | (np.abs(J) < 1e-7))


def test_stencil_pattern_is_exact() -> None:
    pattern = jacobian_pattern(trace(stencil, [((6,), "float64")])).dense()
    expected = (np.eye(6) + np.roll(np.eye(6), 1, 0) + np.roll(np.eye(6), -1, 0)) > 0
    np.testing.assert_array_equal(pattern, expected)


def test_pattern_holds_for_both_branches_of_where() -> None:
    pattern = jacobian_pattern(trace(branchy, [((4,), "float64")])).dense()
    np.testing.assert_array_equal(pattern, (np.eye(4) + np.eye(4)[::-1]) > 0)


def test_contexts_and_constants_carry_no_dependence() -> None:
    pattern = jacobian_pattern(
        trace(lambda x, c: x * c.sum(), [((3,), "float64"), ((3,), "float64")])
    ).dense()
    np.testing.assert_array_equal(pattern, np.eye(3, dtype=bool))


@pytest.mark.parametrize("seed", range(5))
def test_coloring_separates_columns_that_share_a_row(seed: int) -> None:
    pattern = np.random.default_rng(seed).uniform(size=(30, 40)) < 0.1
    colors = color_columns(Rows.from_dense(pattern))
    for row in pattern:
        assert len(set(colors[row])) == row.sum()
    assert colors.max() + 1 < pattern.shape[1]  # fewer colors than columns


def test_stencil_needs_three_colors() -> None:
    pattern = jacobian_pattern(trace(stencil, [((6,), "float64")]))
    assert color_columns(pattern).max() + 1 == 3


# ------------------------------------------------- the dense rules as the oracle
def assert_rules_agree(graph: Graph) -> None:
    """Each value's compressed rows equal the dense rules' booleans, value by value
    (each rule run on the same patterns as its dense form)."""
    x = graph.inputs[0]
    n = x.size
    dense: dict[Any, Any] = dict.fromkeys(graph.inputs)
    rows: dict[Any, Any] = dict.fromkeys(graph.inputs)
    dense[x] = np.eye(n, dtype=bool).reshape((*x.shape, n))
    rows[x] = Rows.identity(tuple(x.shape))

    def read(env: dict[Any, Any], atom: Any) -> Any:
        return None if isinstance(atom, Lit) else env[atom]

    for eqn in graph.eqns:
        rule = eqn.primitive.sparsity
        expected = DENSE_RULES[rule](eqn, [read(dense, a) for a in eqn.inputs], n)
        got = rule(eqn, [read(rows, a) for a in eqn.inputs], n)
        dense[eqn.out], rows[eqn.out] = expected, got
        want = np.zeros((eqn.out.size, n), dtype=bool)
        if expected is not None:
            want = np.asarray(expected, dtype=bool).reshape(eqn.out.size, n)
        if got is None:
            assert not want.any(), eqn.primitive.name
            continue
        assert got.size == eqn.out.size and got.n == n, eqn.primitive.name
        assert got.indptr[0] == 0 and got.indptr[-1] == got.indices.size
        within = np.diff(got.indices) > 0  # sorted and unique inside each row
        starts = got.indptr[1:-1]
        within[starts[(starts > 0) & (starts < got.indices.size)] - 1] = True
        assert within.all(), f"{eqn.primitive.name}: rows not sorted and unique"
        np.testing.assert_array_equal(
            got.dense().reshape(eqn.out.size, n), want, err_msg=eqn.primitive.name
        )


@pytest.mark.parametrize("name", sorted(primitive_cases.ROWS))
def test_rules_equal_the_dense_rules_on_every_primitive_row(name: str) -> None:
    fn, shape = primitive_cases.ROWS[name]
    assert_rules_agree(trace(fn, [(shape, "float64")]))


@pytest.mark.parametrize("name", sorted(control_flow_cases.CASES))
def test_rules_equal_the_dense_rules_with_control_flow(name: str) -> None:
    fn, shape, _, _ = control_flow_cases.CASES[name]
    assert_rules_agree(trace(fn, [(shape, "float64")]))


@pytest.mark.parametrize("name", list(scenarios.SCENARIOS))
def test_rules_equal_the_dense_rules_on_scenarios(name: str) -> None:
    xs, ctx_shapes = scenarios.SCENARIOS[name]
    avals = [(xs, "float64"), *[(s, "float64") for s in ctx_shapes]]
    assert_rules_agree(trace(getattr(scenarios, name), avals))


ORACLE_UNKNOWNS = 2_000
"""Configs up to this many unknowns are checked against the dense rules, whose
``size x n`` booleans per value take minutes at 10,000 (the rosenbrock_10000
configs; the same function at n = 10 is the rosenbrock config)."""


def _config_graphs() -> list[Any]:
    cases = []
    for config in ("examples/difgen.toml", "benchmarks/difgen.toml"):
        for spec in load_config(ROOT / config).modules:
            if int(np.prod(spec.input.shape)) <= ORACLE_UNKNOWNS:
                name = f"{config}:{spec.name}"
                cases.append(pytest.param(config, spec.name, id=name))
    return cases


@pytest.mark.parametrize("config,name", _config_graphs())
def test_rules_equal_the_dense_rules_on_the_configs(config: str, name: str) -> None:
    """The functions the examples and benchmarks build, and their gradients (whose
    pattern is the hessian's)."""
    (spec,) = [s for s in load_config(ROOT / config).modules if s.name == name]
    graph = trace_spec(spec, load_function(spec))
    assert_rules_agree(graph)
    if graph.outputs[0].size == 1 and graph.inputs[0].size > 1:
        assert_rules_agree(Derivatives(spec, graph).gradient_graph())


def scattered(x):
    """Overlapping scatters (union where they meet) and an overwrite."""
    z = np.zeros(6)
    np.add.at(z, np.array([0, 2, 0, 3]), x)
    z[4:] = x[1:3] * x[0]
    return z + np.pad(x, (0, 2))


@pytest.mark.parametrize(
    "fn,shape",
    [
        (lambda x: np.cumsum(x[::-1] * x, axis=0) + np.cumprod(x, axis=0), (5, 3)),
        (lambda x: np.cumsum(x, axis=1)[:, ::2] * x[:, :1], (4, 6)),
        (lambda x: np.cumsum(np.outer(x, x[:2]), axis=-1), (4,)),
        (lambda x: x.reshape(2, 3)[:, None, :] @ x.reshape(3, 2), (6,)),
        (lambda x: x[:3] @ x.reshape(3, 2), (6,)),
        (lambda x: x.reshape(2, 3) @ x[3:], (6,)),
        (lambda x: np.pad(x, (2, 1)) * np.roll(np.pad(x, (1, 2)), 2), (5,)),
        (scattered, (4,)),
        (lambda x: np.sum(x, axis=(0, 2))[:, None] * np.max(x, axis=-1).T, (2, 3, 3)),
    ],
)
def test_rules_equal_the_dense_rules_on_mixed_structures(fn, shape) -> None:
    assert_rules_agree(trace(fn, [(shape, "float64")]))


# ------------------------------------------------------------ scale and memory
def test_detection_memory_follows_the_nonzeros() -> None:
    """A 200,000-unknown stencil: its dense pattern would be 40 G booleans (the
    dense rules allocated np.eye(n) first); the compressed rows take a few MB."""
    graph = trace(stencil, [((200_000,), "float64")])
    tracemalloc.start()
    try:
        pattern = jacobian_pattern(graph)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert pattern.nnz == 3 * 200_000
    assert peak < 200 * 2**20


def test_too_many_nonzeros_is_refused_before_allocating(monkeypatch) -> None:
    monkeypatch.setattr(patterns, "MAX_PATTERN_NONZEROS", 10_000)
    graph = trace(lambda x: x * np.sum(x), [((1_000,), "float64")])
    with pytest.raises(PatternTooLarge, match="nonzeros"):
        jacobian_pattern(graph)
    jacobian_pattern(trace(stencil, [((1_000,), "float64")]))  # 3,000 fit


def test_a_long_cumulative_sum_is_refused_by_its_output_size(monkeypatch) -> None:
    """cumsum's pattern is triangular: n (n + 1) / 2 nonzeros, checked first."""
    monkeypatch.setattr(patterns, "MAX_PATTERN_NONZEROS", 10_000)
    with pytest.raises(PatternTooLarge):
        jacobian_pattern(trace(np.cumsum, [((200,), "float64")]))
    assert jacobian_pattern(trace(np.cumsum, [((100,), "float64")])).nnz == 5050


# ---------------------------------------------------------------- coloring
@pytest.mark.parametrize("seed", range(8))
def test_coloring_is_the_set_per_row_greedy_coloring(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = rng.integers(1, 60, size=2)
    pattern = rng.uniform(size=(m, n)) < rng.uniform(0.02, 0.5)
    np.testing.assert_array_equal(
        color_columns(Rows.from_dense(pattern)), dense_color_columns(pattern)
    )


def test_coloring_keeps_its_layouts() -> None:
    """Coloring's positions and CSR tables, from compressed rows, are what they
    were from the dense matrix."""
    mask = np.random.default_rng(3).uniform(size=(7, 9)) < 0.3
    for by_rows in (False, True):
        rows = Rows.from_dense(mask)
        colors = color_columns(rows.transposed() if by_rows else rows)
        expected = dense_color_columns(mask.T if by_rows else mask)
        np.testing.assert_array_equal(colors, expected)
        coloring = Coloring(rows, colors, by_rows)
        r, c = np.nonzero(mask)
        assert coloring.nnz == mask.sum()
        np.testing.assert_array_equal(coloring.flat_positions(9), r * 9 + c)
        size = 9 if by_rows else 7
        where = colors[r] * size + c if by_rows else colors[c] * size + r
        np.testing.assert_array_equal(coloring.compressed_positions(size), where)
        indices, indptr = coloring.csr_indices()
        np.testing.assert_array_equal(indices, c)
        np.testing.assert_array_equal(indptr, np.r_[0, np.cumsum(mask.sum(1))])


def test_coloring_of_a_large_stencil_is_fast_and_right() -> None:
    coloring = coloring_of(trace(stencil, [((30_000,), "float64")]))
    assert coloring.ncolors == 3
    assert coloring.nnz == 90_000


# ----------------------------------------------------- hessians: star coloring
def arrowhead(x):
    return np.sum(x[0] * x[1:] ** 2) + np.sum(x**4)


def arrowhead_hessian(x: np.ndarray) -> np.ndarray:
    H = np.diag(2.0 * x[0] + 12.0 * x**2)
    H[0, 0] = 12.0 * x[0] ** 2
    H[0, 1:] = H[1:, 0] = 2.0 * x[1:]
    return H


def hessian_pattern(fn: Any, n: int, tmp_path: Path) -> Rows:
    """The hessian's pattern as a build finds it: the jacobian pattern of the
    traced gradient graph."""
    config = tmp_path / "difgen.toml"
    config.write_text(
        '[difgen]\noutput_dir = "."\n\n[[module]]\nname = "h"\n'
        'function = "f.py:f"\nbackend = "trace"\noperators = ["hessian"]\n'
        f"input = {{ shape = [{n}] }}\nsparse = true\n"
    )
    (spec,) = load_config(config).modules
    graph = trace(fn, [((n,), "float64")])
    return jacobian_pattern(Derivatives(spec, graph).gradient_graph())


def assert_star_coloring(mask: np.ndarray, colors: np.ndarray) -> None:
    """Distance-1, and no path of four vertices in two colors (brute force)."""
    n = mask.shape[0]
    adjacent = mask & ~np.eye(n, dtype=bool)
    for i, j in zip(*np.nonzero(adjacent)):
        assert colors[i] != colors[j]
    nbrs = [np.flatnonzero(row) for row in adjacent]
    for b in range(n):
        for c in nbrs[b]:
            for a in nbrs[b]:
                for d in nbrs[c]:
                    if len({a, b, c, d}) == 4:
                        assert len({colors[a], colors[b], colors[c], colors[d]}) > 2


def assert_recovers(mask: np.ndarray, H: np.ndarray) -> None:
    """The nonzeros of H, in CSR order, from one product H S per star color."""
    pattern = Rows.from_dense(mask)
    colors = star_coloring(pattern)
    assert_star_coloring(mask, colors)
    seeds = np.eye(int(colors.max()) + 1)[colors]  # S: (n, colors)
    compressed = (H @ seeds).T  # B[c] = H s_c
    got = compressed.ravel()[star_positions(pattern, colors)]
    np.testing.assert_array_equal(got, H[mask])


def test_arrowhead_hessian_needs_two_star_colors(tmp_path: Path) -> None:
    """n = 200: distance-1 column coloring needs 200 colors, a star coloring 2."""
    pattern = hessian_pattern(arrowhead, 200, tmp_path)
    mask = pattern.dense()
    expected = np.eye(200, dtype=bool)
    expected[0] = expected[:, 0] = True
    np.testing.assert_array_equal(mask, expected)
    assert color_columns(pattern).max() + 1 == 200
    assert star_coloring(pattern).max() + 1 == 2  # the hub, then every leaf
    x = np.random.default_rng(0).uniform(0.2, 0.8, 200)
    H = arrowhead_hessian(x)
    np.testing.assert_allclose(H, oracle.hessian(arrowhead, x), rtol=1e-12)
    assert_recovers(mask, H)


@pytest.mark.parametrize("bandwidth", [1, 2, 3])
def test_banded_hessian_recovers(bandwidth: int) -> None:
    n = 40
    i, j = np.indices((n, n))
    mask = np.abs(i - j) <= bandwidth
    A = np.random.default_rng(bandwidth).normal(size=(n, n))
    H = np.where(mask, A + A.T, 0.0)
    assert_recovers(mask, H)
    assert star_coloring(Rows.from_dense(mask)).max() + 1 <= 2 * bandwidth + 2


def test_block_diagonal_hessian_recovers() -> None:
    """Dense 4 x 4 blocks: a star coloring needs 4 colors, reused in each block."""
    mask = np.kron(np.eye(6, dtype=bool), np.ones((4, 4), dtype=bool))
    A = np.random.default_rng(7).normal(size=mask.shape)
    assert_recovers(mask, np.where(mask, A + A.T, 0.0))
    assert star_coloring(Rows.from_dense(mask)).max() + 1 == 4


def test_a_large_arrowhead_hessian_is_found_and_star_colored(tmp_path: Path) -> None:
    """n = 100,000 (the issue's size): 299,998 nonzeros, 2 colors, in about a
    second, where the dense pattern would be 10^10 booleans."""
    pattern = hessian_pattern(arrowhead, 100_000, tmp_path)
    assert pattern.nnz == 3 * 100_000 - 2
    assert star_coloring(pattern).max() + 1 == 2


@pytest.mark.parametrize("seed", range(12))
def test_random_symmetric_hessians_recover(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 30))
    upper = np.triu(rng.uniform(size=(n, n)) < rng.uniform(0.05, 0.4), 1)
    mask = upper | upper.T | np.eye(n, dtype=bool)
    A = rng.normal(size=(n, n))
    assert_recovers(mask, np.where(mask, A + A.T, 0.0))


def test_a_refused_sparse_build_says_how_many_nonzeros(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(patterns, "MAX_PATTERN_NONZEROS", 10_000)
    config = tmp_path / "difgen.toml"
    config.write_text(
        '[difgen]\noutput_dir = "."\n\n[[module]]\nname = "j"\n'
        'function = "f.py:f"\nbackend = "trace"\noperators = ["jacobian"]\n'
        "input = { shape = [1000] }\nsparse = true\n"
    )
    (spec,) = load_config(config).modules
    graph = trace(lambda x: x * np.sum(x), [((1_000,), "float64")])
    with pytest.raises(
        ConfigError,
        match=r"1000 x 1000 jacobian is too large to detect \(1001000 nonzeros",
    ):
        Derivatives(spec, graph).operator_graph(OPERATORS["jacobian"])
