"""Sparse jacobians and hessians whose index tables are printed compactly
(difgen.targets.tables: block-run formulas, compressed blocks), against dense
derivatives (autograd) and central differences, in NumPy and in C, with the C
operators refilling a CSR ``out=`` in place.

Each structure (band, dense row, dense column, diagonal blocks, arrowhead, 2-D
stencil) is sized so that its tables pass the 4,096 entries above which they are
printed compactly, and the module is checked to hold such tables.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import scipy.sparse

import compact_table_functions as F
from compiled import BuiltConfig
from oracle import central_jacobian, hessian, jacobian

SUPPORT = Path(__file__).resolve().parents[1] / "support"

MODULES = {
    # name: (function, input size, operator)
    "banded": ("banded", 1500, "jacobian"),
    "dense_row": ("dense_row", 2500, "jacobian"),
    "dense_column": ("dense_column", 3000, "jacobian"),
    "blocks": ("blocks", 1600, "jacobian"),
    "arrowhead": ("arrowhead", 3000, "hessian"),
    "stencil": ("stencil", 2 * 48 * 48, "jacobian"),
}
COMPILED = ("banded", "dense_column", "blocks", "arrowhead")
"""Also built with emit = "c" (as NAME_c). (A dense row's jacobian needs as many
column colors as columns: it is computed uncompressed, from a basis the C target
does not hold, and stays in Python.)"""


def _config() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for name, (function, n, op) in MODULES.items():
        for suffix, emit in (("", "vector"), ("_c", "c")):
            if suffix and name not in COMPILED:
                continue
            parts.append(
                f'[[module]]\nname = "{name}{suffix}"\n'
                f'function = "compact_table_functions.py:{function}"\n'
                f'backend = "trace"\nemit = "{emit}"\noperators = ["{op}"]\n'
                f"input = {{ shape = [{n}] }}\nsparse = true\n"
            )
    return "\n".join(parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    directory = tmp_path_factory.mktemp("sparse_tables")
    shutil.copy(SUPPORT / "compact_table_functions.py", directory)
    return BuiltConfig(directory, _config())


def _point(name: str) -> np.ndarray:
    return np.random.default_rng(11).uniform(0.5, 1.5, MODULES[name][1])


def _dense(name: str, x: np.ndarray) -> np.ndarray:
    function, _, op = MODULES[name]
    fn = getattr(F, function)
    return hessian(fn, x) if op == "hessian" else jacobian(fn, x)


def _differences(name: str, x: np.ndarray) -> np.ndarray:
    function, _, op = MODULES[name]
    fn = getattr(F, function)
    if op == "jacobian":
        return central_jacobian(fn, x)
    import autograd

    from oracle import under_autograd

    gradient = autograd.grad(under_autograd(fn))
    return central_jacobian(lambda z: np.asarray(gradient(z)), x)


def _operator(module: ModuleType, name: str) -> Any:
    return getattr(module, MODULES[name][2])


@pytest.mark.parametrize("name", list(MODULES))
def test_the_module_holds_compact_tables(built: BuiltConfig, name: str) -> None:
    text = (built.directory / "out" / f"{name}.py").read_text()
    assert len(text) < 60_000, len(text)
    module = built.get(name)
    kind = MODULES[name][2].upper()
    assert getattr(module, f"{kind}_INDICES").size > 4096


@pytest.mark.parametrize("name", list(MODULES))
def test_numpy_against_dense_and_differences(built: BuiltConfig, name: str) -> None:
    x = _point(name)
    got = _operator(built.get(name), name)(x)
    assert isinstance(got, scipy.sparse.csr_array)
    dense = _dense(name, x)
    assert np.allclose(got.toarray(), dense, rtol=1e-12, atol=1e-12)
    assert np.allclose(got.toarray(), _differences(name, x), rtol=1e-6, atol=1e-5)
    pattern = np.abs(dense) > 0  # every structural nonzero is in the pattern
    assert not np.any(pattern & (got.toarray() == 0) & ~_stored(got))


def _stored(matrix: Any) -> np.ndarray:
    mask = scipy.sparse.csr_array(
        (np.ones(matrix.nnz, dtype=bool), matrix.indices, matrix.indptr),
        shape=matrix.shape,
    )
    return mask.toarray()


@pytest.mark.parametrize("name", COMPILED)
def test_c_against_numpy_and_dense(built: BuiltConfig, name: str) -> None:
    x = _point(name)
    module = built.get(f"{name}_c")
    assert MODULES[name][2] not in getattr(module, "PYTHON_OPERATORS", ())
    got = _operator(module, name)(x)
    python = _operator(built.get(name), name)(x)
    assert np.array_equal(got.indices, python.indices)
    assert np.array_equal(got.indptr, python.indptr)
    assert np.allclose(got.data, python.data, rtol=1e-12, atol=1e-12)
    assert np.allclose(got.toarray(), _dense(name, x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", COMPILED)
def test_c_refills_a_csr_out_in_place(built: BuiltConfig, name: str) -> None:
    op = _operator(built.get(f"{name}_c"), name)
    x, y = _point(name), _point(name)[::-1].copy()
    target = op(x)
    data, indices, indptr = target.data, target.indices, target.indptr
    returned = op(y, out=target)
    assert returned is target and target.data is data
    assert target.indices is indices and target.indptr is indptr
    assert np.allclose(target.toarray(), _dense(name, y), rtol=1e-12, atol=1e-12)
