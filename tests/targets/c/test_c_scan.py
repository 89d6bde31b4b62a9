"""Cumulative sums in C loops (a scan), and with them the acyclic coloring of
hessians in C: its recovery by substitution is one cumulative sum over the
two-colored trees' nodes in preorder (issue 21, items 2 and 5). The C target
keeps star colorings by default (``graphs.ACYCLIC_IN_C``: faster there); the
hessians here ask for the acyclic ones.

Each module is compiled and compared with its own Python fallback (the vector
NumPy emission of the same graph) bit for bit, on ordinary points and on points
with NaN and infinities, and the hessians with the dense hessian by autograd.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import oracle
from compiled import Built
from difgen import precision
from difgen.derive import graphs
from difgen.frontend import trace
from difgen.targets.c.plan import NoLoopForm, loop_kind

SOURCE = """\
import numpy as np


def tridiagonal(x):
    return np.sum(np.sin(x[1:] * x[:-1])) + np.sum(x**4)


def banded(x):
    return np.sum(x[1:] ** 2 * x[:-1] ** 2) + np.sum(np.cos(x[2:] * x[:-2]))


def grid(x):
    u = np.reshape(x, (4, 8))
    return (
        np.sum(np.cos(u[1:, :] * u[:-1, :]))
        + np.sum((u[:, 1:] - u[:, :-1]) ** 4)
        + np.sum(u**4)
    )


def running(x):
    return np.cumsum(np.sin(x)) * x


def rows_and_columns(x):
    m = np.reshape(x, (4, 8))
    return np.cumsum(m * m, axis=0) + np.cumsum(m * m * m - m, axis=1)


def products(x):
    return np.cumprod(np.reshape(x, (4, 8)), axis=1)
"""
N = 32
HESSIANS = {"tridiagonal": 2, "banded": 3, "grid": 4}  # acyclic colors
SCANS = ("running", "rows_and_columns", "products")


def _table(function: str, operator: str, mode: str) -> str:
    sparse = "sparse = true\n" if operator == "hessian" else ""
    mode_line = f'mode = "{mode}"\n' if mode != "auto" else ""
    return (
        f'[[module]]\nname = "{function}_{mode}"\nfunction = "fn.py:{function}"\n'
        f'backend = "trace"\noperators = ["{operator}"]\n'
        f'input = {{ shape = [{N}] }}\nemit = "c"\n{sparse}{mode_line}'
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    directory: Path = tmp_path_factory.mktemp("c_scan")
    (directory / "fn.py").write_text(SOURCE)
    tables = [_table(f, "hessian", m) for f in HESSIANS for m in ("auto", "reverse")]
    tables += [_table(f, "jacobian", "auto") for f in SCANS]
    (directory / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "out"\n\n' + "\n".join(tables)
    )
    # emit = "c" keeps star colorings (faster there): ask for the acyclic ones
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(graphs, "ACYCLIC_IN_C", True)
        return Built(directory)


def _function(name: str) -> Any:
    namespace: dict[str, object] = {}
    exec(SOURCE, namespace)  # noqa: S102 - the test's own source
    return namespace[name]


def _points() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    plain = rng.uniform(0.2, 0.9, N)
    nan, inf, negative = plain.copy(), plain.copy(), -plain
    nan[7] = np.nan
    inf[12], inf[30] = np.inf, -np.inf
    return [plain, negative, nan, inf]


@pytest.mark.parametrize("mode", ["auto", "reverse"])
@pytest.mark.parametrize("function", sorted(HESSIANS))
def test_acyclic_hessians_in_c_are_the_numpy_modules(
    built: Built, function: str, mode: str
) -> None:
    name = f"{function}_{mode}"
    compiled, python = built.compiled(name), built.python(name)
    assert not compiled.PYTHON_OPERATORS  # the substitution runs in C
    colors = HESSIANS[function]
    header = " ".join(compiled.__doc__.split())
    assert f"hessian: acyclic coloring, {colors} colors." in header
    for x in _points():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got, expected = compiled.hessian(x), python.hessian(x)
        assert np.array_equal(got.indices, expected.indices)
        assert np.array_equal(got.indptr, expected.indptr)
        np.testing.assert_array_equal(got.data, expected.data)
    x = _points()[0]
    dense = oracle.hessian(_function(function), x)
    np.testing.assert_allclose(
        compiled.hessian(x).toarray(), dense, rtol=1e-12, atol=1e-12
    )
    # in place: the CSR result refilled
    out = compiled.hessian(x)
    out.data[:] = 0.0
    assert compiled.hessian(x, out=out) is out
    np.testing.assert_allclose(out.toarray(), dense, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("function", SCANS)
def test_cumulative_operations_in_c_are_numpys(built: Built, function: str) -> None:
    """``cumsum`` along either axis (and ``cumprod``, and their derivatives'
    reversed sums) in C: the same additions in the same order as NumPy's."""
    name = f"{function}_auto"
    compiled, python = built.compiled(name), built.python(name)
    assert not compiled.PYTHON_OPERATORS
    for x in _points():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for op in ("f", "jacobian"):
                got = getattr(compiled, op)(x)
                np.testing.assert_array_equal(got, getattr(python, op)(x))
    x = _points()[0]
    fn = _function(function)
    np.testing.assert_array_equal(compiled.f(x), fn(x))
    # autograd has no cumprod: central differences
    differences = oracle.central_jacobian(fn, x)
    np.testing.assert_allclose(compiled.jacobian(x), differences, rtol=1e-7, atol=1e-7)


def test_a_float32_modules_scan_stays_in_vector_code() -> None:
    """NumPy accumulates a float32 module's cumsum in float64 (``precision.
    widened``), which a scan in floats would not reproduce: refused, with why."""
    graph = trace(lambda x: np.cumsum(x * x), [((6,), "float32")])
    (eqn,) = [e for e in graph.eqns if e.primitive.name == "cumsum"]
    assert loop_kind(eqn) == "scan"
    with (
        precision.computing_in("float32"),
        pytest.raises(NoLoopForm, match="accumulates in float64"),
    ):
        loop_kind(eqn)
