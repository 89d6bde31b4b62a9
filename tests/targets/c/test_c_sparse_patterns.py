"""Sparse derivatives in C computed at their own nonzeros, on every structure of
tests/support/compact_table_functions.py (band, dense row, dense column,
diagonal blocks, arrowhead Hessian, 2-D stencil), at sizes whose index tables
pass the 4,096 entries from which the C fills them from their block runs.

Each C operator is checked against dense derivatives (autograd) and central
differences, against the module's NumPy emission at points holding NaN, inf
and -0.0 (the same nonzeros, NaN where NumPy puts it), and refilling a CSR
``out=`` in place (the same ``data`` object).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import compact_table_functions as F
from compiled import BuiltConfig
from oracle import central_jacobian, hessian, jacobian

SUPPORT = Path(__file__).resolve().parents[2] / "support"

MODULES = {
    # name: (function, input size, operator)
    "banded": ("banded", 1500, "jacobian"),
    "dense_row": ("dense_row", 700, "jacobian"),
    "dense_column": ("dense_column", 1500, "jacobian"),
    "blocks": ("blocks", 1600, "jacobian"),
    "arrowhead": ("arrowhead", 1500, "hessian"),
    "stencil": ("stencil", 2 * 24 * 24, "jacobian"),
}


def _config() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for name, (function, n, op) in MODULES.items():
        for suffix, emit in (("", "vector"), ("_c", "c")):
            parts.append(
                f'[[module]]\nname = "{name}{suffix}"\n'
                f'function = "compact_table_functions.py:{function}"\n'
                f'backend = "trace"\nemit = "{emit}"\noperators = ["{op}"]\n'
                f"input = {{ shape = [{n}] }}\nsparse = true\n"
            )
    return "\n".join(parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    directory = tmp_path_factory.mktemp("c_sparse_patterns")
    shutil.copy(SUPPORT / "compact_table_functions.py", directory)
    return BuiltConfig(directory, _config())


def _point(name: str, seed: int = 11) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 1.5, MODULES[name][1])


def _operator(built: BuiltConfig, name: str, suffix: str = "") -> Any:
    return getattr(built.get(name + suffix), MODULES[name][2])


def _source(built: BuiltConfig, name: str) -> str:
    return (built.directory / "out" / f"{name}_c__c.c").read_text()


ON_DEMAND = ("banded", "dense_column", "arrowhead", "stencil")
"""Computed at their nonzeros only. The diagonal blocks' 4 colors hold exactly
the nonzeros (the compressed product is computed, then gathered); the dense
row's jacobian reads a sum over the 700 columns of an identity basis too large
for a C table, so it stays in Python (vector code, a build note)."""


@pytest.mark.parametrize("name", ON_DEMAND)
def test_c_computes_the_nonzeros_only(built: BuiltConfig, name: str) -> None:
    """The operator runs in C and writes its CSR data at its own nonzeros (no
    compressed product over the colors, no static seed); no table literal in
    its C is longer than the nonzeros."""
    module = built.get(f"{name}_c")
    assert MODULES[name][2] not in getattr(module, "PYTHON_OPERATORS", ())
    source = _source(built, name)
    operator = source[source.index(f"dg_op_{MODULES[name][2]}(") :]
    assert "elements only" in operator
    assert "dg_ready" not in operator
    nnz = _operator(built, name, "_c")(_point(name)).nnz
    literals = re.findall(r"static const \w+ dg_\w+\[(\d+)\] = ", source)
    assert all(int(n) <= nnz for n in literals), literals


def test_c_kept_in_python_and_why(built: BuiltConfig) -> None:
    """The dense row's jacobian runs in C too (its row is one reverse color, the
    rest column colors), the blocks' as the compressed product."""
    assert "jacobian" not in built.get("dense_row_c").PYTHON_OPERATORS
    assert "jacobian" not in getattr(built.get("blocks_c"), "PYTHON_OPERATORS", ())


@pytest.mark.parametrize("name", list(MODULES))
def test_c_against_dense_and_differences(built: BuiltConfig, name: str) -> None:
    function, _, op = MODULES[name]
    fn = getattr(F, function)
    x = _point(name)
    got = _operator(built, name, "_c")(x)
    python = _operator(built, name)(x)
    assert np.array_equal(got.indices, python.indices)
    assert np.array_equal(got.indptr, python.indptr)
    np.testing.assert_allclose(got.data, python.data, rtol=1e-13, atol=1e-13)
    dense = hessian(fn, x) if op == "hessian" else jacobian(fn, x)
    np.testing.assert_allclose(got.toarray(), dense, rtol=1e-12, atol=1e-12)
    if op == "jacobian":
        differences = central_jacobian(fn, x)
        np.testing.assert_allclose(got.toarray(), differences, rtol=1e-6, atol=1e-5)


def _specials(name: str) -> list[np.ndarray]:
    """Points with one NaN, one inf, one -inf, a -0.0 and one huge value,
    at the first element (a dense row's or column's) and in the middle."""
    n = MODULES[name][1]
    points = []
    for k, value in enumerate([np.nan, np.inf, -np.inf, -0.0, 1e200]):
        for where in (0, n // 2 + k):
            x = _point(name, seed=20 + k)
            x[where] = value
            points.append(x)
    return points


@pytest.mark.parametrize("name", list(MODULES))
def test_c_at_nan_and_inf_as_numpy(built: BuiltConfig, name: str) -> None:
    """Non-finite states give the NumPy emission's nonzeros: NaN at the same
    places, the other values equal (the constants written first only when
    every value read is finite)."""
    compiled, python = _operator(built, name, "_c"), _operator(built, name)
    for x in _specials(name):
        with np.errstate(all="ignore"):
            got, expected = compiled(x), python(x)
        np.testing.assert_array_equal(np.isnan(got.data), np.isnan(expected.data))
        np.testing.assert_allclose(
            got.data, expected.data, rtol=1e-13, atol=1e-13, equal_nan=True
        )
    with np.errstate(all="ignore"):
        assert np.isnan(compiled(_specials(name)[0]).data).any()


@pytest.mark.parametrize("name", list(MODULES))
def test_c_refills_a_csr_out_in_place(built: BuiltConfig, name: str) -> None:
    """``out=`` writes into the given CSR array's own ``data``, also after a
    non-finite point, and returns that array."""
    op = _operator(built, name, "_c")
    python = _operator(built, name)
    x, y = _point(name), _point(name, seed=12)
    target = op(x)
    data, indices, indptr = target.data, target.indices, target.indptr
    for point in (y, _specials(name)[0], x):
        with np.errstate(all="ignore"):
            returned = op(point, out=target)
            expected = python(point)
        assert returned is target and target.data is data
        assert target.indices is indices and target.indptr is indptr
        np.testing.assert_allclose(
            target.data, expected.data, rtol=1e-13, atol=1e-13, equal_nan=True
        )
