"""Hessians computed per star color: one product per color of a star coloring of
the hessian's pattern, recovered symmetrically, where that needs fewer colors than
the distance-1 coloring of its columns (an arrowhead: 2 instead of n), or per
acyclic color, recovered by substitution, where that needs fewer still.

Each function is built in every emission (vector NumPy, scalar Python, compiled
C), both outer modes (forward over reverse, reverse over reverse), sparse and
dense, and checked against autograd's dense hessian.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

import oracle
from compiled import BuiltConfig
from difgen.config import load_config
from difgen.derive.graphs import Derivatives
from difgen.frontend import trace

SOURCE = """
import numpy as np


def arrowhead(x):
    return np.sum(x[0] * x[1:] ** 2) + np.sum(x**4)


def arrow_band(x):
    return np.sum(x[0] * np.sin(x[1:])) + np.sum(np.cos(x[1:] * x[:-1])) + x[-1] ** 3
"""
N = 40
EMITS = {"vector": 'emit = "vector"', "scalar": 'emit = "scalar"', "c": 'emit = "c"'}
MODES = {"forward": "", "reverse": 'mode = "reverse"'}
FUNCTIONS = ("arrowhead", "arrow_band")
SPARSE = [(f, e, m) for f in FUNCTIONS for e in EMITS for m in MODES]
DENSE = [(f, "vector", m) for f in FUNCTIONS for m in MODES]


def _name(function: str, emit: str, mode: str, sparse: bool) -> str:
    return f"{function}_{mode}_{'sparse' if sparse else 'dense'}_{emit}"


def _table(function: str, emit: str, mode: str, sparse: bool) -> str:
    return (
        f'[[module]]\nname = "{_name(function, emit, mode, sparse)}"\n'
        f'function = "fn.py:{function}"\nbackend = "trace"\n'
        f'operators = ["hessian"]\ninput = {{ shape = [{N}] }}\n'
        f"{EMITS[emit]}\n{MODES[mode]}\nsparse = {'true' if sparse else 'false'}\n"
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    directory = tmp_path_factory.mktemp("star_hessians")
    (directory / "fn.py").write_text(SOURCE)
    tables = [_table(*row, True) for row in SPARSE]
    tables += [_table(*row, False) for row in DENSE]
    return BuiltConfig(
        directory, '[difgen]\noutput_dir = "out"\n\n' + "\n".join(tables)
    )


def _function(name: str):
    namespace: dict[str, object] = {}
    exec(SOURCE, namespace)  # noqa: S102 - the test's own source
    return namespace[name]


def _point(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 0.9, N)


@pytest.mark.parametrize(("function", "emit", "mode"), SPARSE)
def test_sparse_hessian_by_star_colors_is_the_hessian(
    built: BuiltConfig, function: str, emit: str, mode: str
) -> None:
    module = built.get(_name(function, emit, mode, True))
    if emit == "c":
        assert module.COMPILED, module.C_FALLBACK_REASON
    for seed in range(3):
        x = _point(seed)
        H = module.hessian(x)
        assert scipy.sparse.issparse(H)
        expected = oracle.hessian(_function(function), x)
        np.testing.assert_allclose(H.toarray(), expected, rtol=1e-12, atol=1e-12)
        mask = np.zeros((N, N), dtype=bool)
        mask[0] = mask[:, 0] = True
        mask |= np.eye(N, dtype=bool)
        if function == "arrow_band":
            mask |= np.eye(N, k=1, dtype=bool) | np.eye(N, k=-1, dtype=bool)
        np.testing.assert_array_equal(H.toarray() != 0, mask)


@pytest.mark.parametrize(("function", "emit", "mode"), DENSE)
def test_dense_hessian_by_star_colors_is_the_hessian(
    built: BuiltConfig, function: str, emit: str, mode: str
) -> None:
    module = built.get(_name(function, emit, mode, False))
    x = _point(5)
    expected = oracle.hessian(_function(function), x)
    np.testing.assert_allclose(module.hessian(x), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("emit", ["vector", "c"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("function", "star", "acyclic"), [("arrowhead", 2, 2), ("arrow_band", 4, 3)]
)
def test_the_hessian_is_star_or_acyclic_colored(
    tmp_path: Path, function: str, star: int, acyclic: int, mode: str, emit: str
) -> None:
    """The arrowheads take 2 and 4 star colors (the hub alone, then 1 or 3 for
    the rest: a path needs 3) where distance-1 coloring takes N; an acyclic
    coloring takes 3 for the banded arrow (a path needs 2) and 2 for a
    tridiagonal hessian, whose star coloring needs 3, as its distance-1 one.
    Acyclic colorings are recovered by a cumulative sum, which C loops compute
    slower than the star recovery: the C target keeps star (distance-1)
    colorings."""
    (tmp_path / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "."\n\n' + _table(function, emit, mode, True)
    )
    (spec,) = load_config(tmp_path / "difgen.toml").modules
    derivatives = Derivatives(spec, trace(_function(function), [((N,), "float64")]))
    layout = derivatives.sparse_layout("hessian")
    assert layout is not None
    coloring, shape = layout
    assert shape == (N, N)
    if emit == "c" or acyclic == star:
        assert coloring.symmetric and coloring.ncolors == star
    else:
        assert coloring.acyclic is not None and coloring.ncolors == acyclic

    def band(x):
        return np.sum(x[1:] ** 2 * x[:-1] ** 2)

    tridiagonal = Derivatives(spec, trace(band, [((N,), "float64")]))
    layout = tridiagonal.sparse_layout("hessian")
    assert layout is not None
    if emit == "c":
        assert not layout[0].symmetric and layout[0].ncolors == 3
    else:
        assert layout[0].acyclic is not None and layout[0].ncolors == 2
