"""Colorings for every structure: row and bidirectional colorings of jacobians
with dense rows and columns, acyclic colorings of banded and grid hessians.

Each coloring is checked structurally (its recovery is exact on every basis
matrix of the pattern, so on every matrix of it: tests/support/coloring_check.py)
and numerically: modules built with ``sparse = true`` in vector NumPy and C, in
each mode, against autograd's dense derivatives and central differences.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

import coloring_check
import oracle
from compiled import BuiltConfig
from difgen.derive.coloring import acyclic_coloring, bidirectional_coloring
from difgen.derive.sparsity import (
    Coloring,
    choose_coloring,
    coloring_of_pattern,
    hessian_coloring,
    star_coloring,
)
from difgen.primitives.patterns import Rows


# ------------------------------------------------------------------ patterns
def _band(n: int, k: int) -> np.ndarray:
    i = np.arange(n)
    return np.abs(i[:, None] - i[None, :]) <= k


def _arrow(n: int) -> np.ndarray:
    mask = np.eye(n, dtype=bool)
    mask[0] = mask[:, 0] = True
    return mask


def _grid(g: int) -> np.ndarray:
    """The 5-point Laplacian on a g x g grid (Dirichlet)."""
    n = g * g
    mask = np.eye(n, dtype=bool)
    for a in range(g):
        for b in range(g):
            v = a * g + b
            if b + 1 < g:
                mask[v, v + 1] = mask[v + 1, v] = True
            if a + 1 < g:
                mask[v, v + g] = mask[v + g, v] = True
    return mask


def _dense_rows(m: int, n: int, rows: tuple[int, ...]) -> np.ndarray:
    mask = np.eye(m, n, dtype=bool) | np.eye(m, n, k=1, dtype=bool)
    mask[list(rows)] = True
    return mask


def _blocks(n: int, size: int) -> np.ndarray:
    mask = np.zeros((n, n), dtype=bool)
    for s in range(0, n, size):
        mask[s : s + size, s : s + size] = True
    return mask


def _random(m: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mask = rng.random((m, n)) < 0.08
    mask[np.arange(min(m, n)), np.arange(min(m, n))] = True
    return mask


JACOBIANS = {
    "dense_row": _dense_rows(40, 40, (0,)),
    "dense_rows": _dense_rows(60, 40, (3, 17, 50)),
    "dense_column": _dense_rows(40, 40, (0,)).T.copy(),
    "arrowhead": _arrow(40),
    "arrow_wide": np.hstack([_arrow(30), _band(30, 1)]),
    "banded": _band(40, 2),
    "blocks": _blocks(40, 4),
    "random": _random(50, 40, 7),
}
HESSIANS = {
    "arrowhead": _arrow(40),
    "tridiagonal": _band(40, 1),
    "band_3": _band(40, 3),
    "grid": _grid(7),
    "blocks": _blocks(40, 4),
    "arrow_band": _arrow(40) | _band(40, 1),
    "random": _random(40, 40, 3) | _random(40, 40, 3).T,
}


def _pattern(mask: np.ndarray) -> Rows:
    return Rows.from_dense(mask)


# --------------------------------------------------------------- structural
@pytest.mark.parametrize("natural", ["forward", "reverse"])
@pytest.mark.parametrize("name", JACOBIANS)
def test_every_jacobian_coloring_recovers_exactly(name: str, natural: str) -> None:
    pattern = _pattern(JACOBIANS[name])
    chosen = choose_coloring(pattern, natural)
    assert coloring_check.exact(chosen)
    for by_rows in (False, True):
        assert coloring_check.exact(coloring_of_pattern(pattern, by_rows))
    both = bidirectional_coloring(pattern, 10**9)
    if both is not None:
        bicolored = Coloring(pattern, both.column_colors, False, bicoloring=both)
        assert coloring_check.exact(bicolored)


def test_the_checker_finds_a_wrong_recovery() -> None:
    """Two columns sharing a row given one color: their entries in that row add
    up in one product, which the checker sees."""
    pattern = _pattern(_band(6, 1))
    wrong = Coloring(pattern, np.array([0, 0, 1, 2, 0, 1]), False)
    assert not coloring_check.exact(wrong)


@pytest.mark.parametrize(
    ("name", "colors", "description"),
    [
        # a dense row over a bidiagonal: N column colors by forward, 3 row
        # colors by reverse (the densest column's rows: optimal)
        ("dense_row", 3, "3 row colors (reverse)"),
        ("dense_rows", 5, "5 row colors (reverse)"),  # 3 dense + 2: optimal
        ("dense_column", 3, "3 column colors (forward)"),  # the transpose
        # a dense row and a dense column: either mode alone needs 40
        ("arrowhead", 3, "1 row color (reverse), 2 column colors (forward)"),
        ("banded", 5, "5 column colors (forward)"),  # 2k + 1, the densest row
        ("blocks", 4, "4 column colors (forward)"),
    ],
)
def test_jacobians_take_the_fewest_products(
    name: str, colors: int, description: str
) -> None:
    chosen = choose_coloring(_pattern(JACOBIANS[name]), "forward")
    assert chosen.ncolors == colors
    assert chosen.describe() == description


def _two_colored_forests(mask: np.ndarray, colors: np.ndarray) -> bool:
    """Whether every two-colored subgraph of the off-diagonal graph is a forest
    (edges = vertices - components in each) and neighbors differ."""
    rows, cols = np.nonzero(np.triu(mask, 1))
    if np.any(colors[rows] == colors[cols]):
        return False
    for a in range(int(colors.max()) + 1):
        for b in range(a + 1, int(colors.max()) + 1):
            keep = np.isin(colors[rows], (a, b)) & np.isin(colors[cols], (a, b))
            vertices = np.flatnonzero(np.isin(colors, (a, b)))
            graph = scipy.sparse.coo_array(
                (np.ones(keep.sum()), (rows[keep], cols[keep])), shape=mask.shape
            )
            _, labels = scipy.sparse.csgraph.connected_components(graph, directed=False)
            components = np.unique(labels[vertices]).size
            if keep.sum() != vertices.size - components:
                return False
    return True


@pytest.mark.parametrize("name", HESSIANS)
def test_acyclic_colorings_are_acyclic_and_recover_exactly(name: str) -> None:
    mask = HESSIANS[name]
    pattern = _pattern(mask)
    colors = acyclic_coloring(pattern)
    assert _two_colored_forests(mask, colors)
    chosen = hessian_coloring(pattern)
    assert coloring_check.exact(chosen, symmetric=True)
    assert chosen.ncolors <= int(star_coloring(pattern).max()) + 1
    kept = hessian_coloring(pattern, acyclic=False)  # the C target's
    assert coloring_check.exact(kept, symmetric=kept.symmetric)


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("arrowhead", "star coloring, 2 colors"),  # a star graph's chromatic number
        ("tridiagonal", "acyclic coloring, 2 colors"),  # a path: star needs 3
        ("band_3", "acyclic coloring, 4 colors"),  # k + 1 (a clique): optimal
        ("grid", "acyclic coloring, 4 colors"),  # star needs 5 on grids
        ("blocks", "4 column colors (forward)"),  # cliques: their size
        ("arrow_band", "acyclic coloring, 3 colors"),  # star: 4
    ],
)
def test_hessians_take_the_fewest_colors(name: str, description: str) -> None:
    assert hessian_coloring(_pattern(HESSIANS[name])).describe() == description


# ----------------------------------------------------------------- numerical
SOURCE = """
import numpy as np


def dense_row(x):
    return np.concatenate([np.reshape(np.sum(np.sin(x)), (1,)), x[1:] * x[:-1]])


def dense_column(x):
    return np.concatenate([x[:1] ** 2, np.cos(x[1:]) * x[0] + x[1:] ** 2])


def arrow_jacobian(x):
    return np.concatenate([np.reshape(np.sum(x**2), (1,)), x[1:] ** 3 + x[0] * x[1:]])


def two_dense_rows(x):
    dense = np.stack([np.sum(x**2), np.prod(np.cos(x[::2]))])
    return np.concatenate([dense, np.tanh(x[1:] - x[:-1])])


def banded(x):
    return np.sum(x[1:] ** 2 * x[:-1] ** 2) + np.sum(np.cos(x[2:] * x[:-2]))


def tridiagonal(x):
    return np.sum(np.sin(x[1:] * x[:-1])) + np.sum(x**4)


def blocks(x):
    b = np.reshape(x, (-1, 4))
    return np.sum(np.exp(np.sum(b, axis=1) * 0.1) * b[:, 0])


def arrow_band(x):
    return np.sum(x[0] * np.sin(x[1:])) + np.sum(np.cos(x[1:] * x[:-1]))
"""
N = 32
JACOBIAN_FUNCTIONS = ("dense_row", "dense_column", "arrow_jacobian", "two_dense_rows")
HESSIAN_FUNCTIONS = ("banded", "tridiagonal", "blocks", "arrow_band")
EMITS = {"vector": 'emit = "vector"', "c": 'emit = "c"'}
MODES = {"auto": "", "forward": 'mode = "forward"', "reverse": 'mode = "reverse"'}
JACOBIAN_ROWS = [(f, e, m) for f in JACOBIAN_FUNCTIONS for e in EMITS for m in MODES]
DENSE_ROWS = [(f, e) for f in JACOBIAN_FUNCTIONS for e in EMITS]
HESSIAN_ROWS = [
    (f, e, m) for f in HESSIAN_FUNCTIONS for e in EMITS for m in ("auto", "reverse")
]


def _name(function: str, emit: str, mode: str) -> str:
    return f"{function}_{mode}_{emit}"


def _table(
    function: str, emit: str, mode: str, operator: str, sparse: bool = True
) -> str:
    name = _name(function, emit, mode) + ("" if sparse else "_dense")
    return (
        f'[[module]]\nname = "{name}"\n'
        f'function = "fn.py:{function}"\nbackend = "trace"\n'
        f'operators = ["{operator}"]\ninput = {{ shape = [{N}] }}\n'
        f"{EMITS[emit]}\n{MODES[mode]}\nsparse = {'true' if sparse else 'false'}\n"
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    directory = tmp_path_factory.mktemp("colorings")
    (directory / "fn.py").write_text(SOURCE)
    tables = [_table(*row, "jacobian") for row in JACOBIAN_ROWS]
    tables += [_table(*row, "hessian") for row in HESSIAN_ROWS]
    tables += [_table(f, e, "auto", "jacobian", False) for f, e in DENSE_ROWS]
    return BuiltConfig(
        directory, '[difgen]\noutput_dir = "out"\n\n' + "\n".join(tables)
    )


def _function(name: str):
    namespace: dict[str, object] = {}
    exec(SOURCE, namespace)  # noqa: S102 - the test's own source
    return namespace[name]


def _point(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 0.9, N)


def _header(built: BuiltConfig, name: str) -> str:
    return (built.directory / "out" / f"{name}.py").read_text().split('"""')[1]


@pytest.mark.parametrize(("function", "emit", "mode"), JACOBIAN_ROWS)
def test_sparse_jacobians_against_dense_and_differences(
    built: BuiltConfig, function: str, emit: str, mode: str
) -> None:
    name = _name(function, emit, mode)
    module = built.get(name)
    if emit == "c":
        assert module.COMPILED, module.C_FALLBACK_REASON
        assert not module.PYTHON_OPERATORS  # every coloring's products in C
    fn = _function(function)
    for seed in range(2):
        x = _point(seed)
        J = module.jacobian(x)
        assert scipy.sparse.issparse(J)
        dense = J.toarray()
        np.testing.assert_allclose(
            dense, oracle.jacobian(fn, x), rtol=1e-12, atol=1e-12
        )
        np.testing.assert_allclose(
            dense, oracle.central_jacobian(fn, x), rtol=1e-6, atol=1e-7
        )
    header = _header(built, name)
    # one mode forced: a dense row (column) makes every column (row) coloring
    # need N colors, and the jacobian is computed from N products
    dense_in = {
        "forward": ("dense_row", "arrow_jacobian", "two_dense_rows"),
        "reverse": ("dense_column", "arrow_jacobian"),
    }
    if function in dense_in.get(mode, ()):
        assert f"Coloring: jacobian: uncompressed, {N} products (" in header
    else:
        assert "Coloring: jacobian: " in header
        assert "uncompressed" not in header


def test_jacobians_with_dense_rows_need_few_products(built: BuiltConfig) -> None:
    """With mode auto, a dense row no longer costs N column colors: the header
    says what each needs."""
    expected = {
        "dense_row": "3 row colors (reverse)",
        "dense_column": "2 column colors (forward)",
        "arrow_jacobian": "1 row color (reverse), 2 column colors (forward)",
        # its densest column (even ones: both dense rows and two of the band)
        "two_dense_rows": "4 row colors (reverse)",
    }
    for function, text in expected.items():
        for emit in EMITS:
            header = _header(built, _name(function, emit, "auto"))
            assert f"Coloring: jacobian: {text}." in header


@pytest.mark.parametrize(("function", "emit", "mode"), HESSIAN_ROWS)
def test_sparse_hessians_against_dense_and_differences(
    built: BuiltConfig, function: str, emit: str, mode: str
) -> None:
    name = _name(function, emit, mode)
    module = built.get(name)
    if emit == "c":
        assert module.COMPILED, module.C_FALLBACK_REASON
        assert not module.PYTHON_OPERATORS  # every coloring's products in C
    fn = _function(function)
    for seed in range(2):
        x = _point(seed)
        H = module.hessian(x).toarray()
        np.testing.assert_allclose(H, oracle.hessian(fn, x), rtol=1e-11, atol=1e-12)
        differences = oracle.central_jacobian(
            lambda v: np.reshape(oracle.jacobian(fn, v), (N,)), x
        )
        np.testing.assert_allclose(H, differences, rtol=1e-6, atol=1e-6)
    assert "Coloring: hessian: " in _header(built, name)


def test_banded_hessians_by_acyclic_colors(built: BuiltConfig, tmp_path: Path) -> None:
    """NumPy takes the acyclic coloring (2 colors for a tridiagonal hessian, 3
    for the band of half-width 2); C keeps the distance-1 or star one, whose
    recovery at the nonzeros is faster there than the substitution's scan."""
    header = _header(built, _name("tridiagonal", "vector", "auto"))
    assert "hessian: acyclic coloring, 2 colors." in header
    header = _header(built, _name("banded", "vector", "auto"))
    assert "hessian: acyclic coloring, 3 colors." in header
    header = _header(built, _name("tridiagonal", "c", "auto"))
    assert (
        "hessian: 3 column colors (forward) (an acyclic coloring needs 2, but "
        "its substitution, a scan over the compressed products, is slower in C)."
    ) in " ".join(header.split())


@pytest.mark.parametrize(("function", "emit"), DENSE_ROWS)
def test_dense_jacobians_compressed_by_the_best_coloring(
    built: BuiltConfig, function: str, emit: str
) -> None:
    """sparse = false: the dense jacobian from the same products, scattered."""
    name = _name(function, emit, "auto") + "_dense"
    module = built.get(name)
    if emit == "c":
        assert module.COMPILED, module.C_FALLBACK_REASON
        assert not module.PYTHON_OPERATORS
    fn = _function(function)
    x = _point(9)
    np.testing.assert_allclose(
        module.jacobian(x), oracle.jacobian(fn, x), rtol=1e-12, atol=1e-12
    )
    assert "uncompressed" not in _header(built, name)
