"""Products that read a matrix twice, fused into one pass over its rows
(targets/c/rows.py): ``u = X @ w``, an elementwise chain, then ``X.T @ r``.

Two builds of the same modules (tests/support/c_row_pass_functions.py), all
as loops (no straight-line C): one where every such matrix takes the row pass
(the size threshold lowered to 1, so that 1, 2 and 7 rows take it too), one
where none does and the products are
the loops' own matmul (BLAS and NumPy's ufunc loops turned off). The fused pass
adds the same products in the same order as those loops, and calls the same C
library functions: the two are bit-identical. Both are checked against the
NumPy emission (BLAS, NumPy's SIMD transcendentals: a relative 1e-12 of the
result's scale) and finite differences; NaN and inf in X and w propagate as
NumPy's do.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import c_row_pass_functions as F
import difgen.targets.c.loops as loops_module
import difgen.targets.c.plan as plan_module
import difgen.targets.c.rows as rows_module
from compiled import Built
from conftest import SUPPORT
from difgen.frontend.tracing import trace
from difgen.targets.c import abi
from difgen.targets.c.plan import Planner
from difgen.targets.c.program import Group, Step

RTOL = 1e-12
"""Relative to the result's largest magnitude (BLAS sums in another order)."""

# name: (function, input shape, X shape, y shape, operators, dtype)
MODULES: dict[str, tuple[str, list[int], list[int], list[int], str, str]] = {
    "logistic_1x3": ("logistic", [3], [1, 3], [1], "gradient", "float64"),
    "logistic_2x3": ("logistic", [3], [2, 3], [2], "gradient", "float64"),
    # one column: X @ w is a broadcast multiply, the gradient of shape (1,) a
    # reduction to a scalar (once computed "in place" as a double: no C built)
    "logistic_1000x1": ("logistic", [1], [1000, 1], [1000], "gradient", "float64"),
    "logistic_7x50": ("logistic", [50], [7, 50], [7], "gradient", "float64"),
    "logistic_3000x50": ("logistic", [50], [3000, 50], [3000], "gradient", "float64"),
    "least_squares_7x3": ("least_squares", [3], [7, 3], [7], "gradient", "float64"),
    "explicit_7x3": ("explicit", [3], [7, 3], [7], "f", "float64"),
    "explicit_3000x50": ("explicit", [50], [3000, 50], [3000], "f", "float64"),
    "batch_7x3x2": ("batch", [3, 2], [7, 3], [7, 2], "gradient", "float64"),
    "batch_2x50x3": ("batch", [50, 3], [2, 50], [2, 3], "gradient", "float64"),
    "batch_7x50x1": ("batch", [50, 1], [7, 50], [7, 1], "gradient", "float64"),
    "logistic32_7x3": ("logistic", [3], [7, 3], [7], "gradient", "float32"),
}


def _config() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for name, (function, shape, xs, ys, op, dtype) in MODULES.items():
        parts.append(
            f'[[module]]\nname = "{name}"\n'
            f'function = "c_row_pass_functions.py:{function}"\n'
            f'backend = "trace"\nemit = "c"\noperators = ["{op}"]\n'
            f'input = {{ shape = {shape}, dtype = "{dtype}" }}\n'
            f'contexts = [{{ name = "X", shape = {xs}, dtype = "{dtype}" }}, '
            f'{{ name = "y", shape = {ys}, dtype = "{dtype}" }}]\n'
        )
    return "\n".join(parts)


def _build(directory: Path, patch: pytest.MonkeyPatch) -> Built:
    """The modules built as loops (the smallest would be straight-line C)."""
    patch.setattr(loops_module, "STRAIGHT_LINE_WORK", 0)
    shutil.copy(SUPPORT / "c_row_pass_functions.py", directory)
    (directory / "difgen.toml").write_text(_config())
    return Built(directory)


@pytest.fixture(scope="module")
def fused(tmp_path_factory: pytest.TempPathFactory) -> Built:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rows_module, "ROW_PASS_SIZE", 1)
        return _build(tmp_path_factory.mktemp("row_pass"), patch)


@pytest.fixture(scope="module")
def unfused(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The loops' own matmul and the C library's transcendentals throughout."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rows_module, "ROW_PASS_SIZE", 1 << 62)
        patch.setattr(plan_module, "BLAS_WORK", 1 << 62)
        patch.setattr(plan_module, "UFUNC_SIZE", 1 << 62)
        return _build(tmp_path_factory.mktemp("no_row_pass"), patch)


def _args(name: str, seed: int = 3) -> tuple[np.ndarray, ...]:
    _, shape, xs, ys, _, dtype = MODULES[name]
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(shape) * 0.3
    X = rng.standard_normal(xs)
    y = (rng.uniform(size=ys) < 0.5).astype(float)
    return tuple(np.asarray(a, dtype=dtype) for a in (w, X, y))


def _call(module: Any, name: str, args: tuple[np.ndarray, ...]) -> np.ndarray:
    return np.asarray(getattr(module, MODULES[name][4])(*args))


def _c_source(built: Built, name: str) -> str:
    return next((built.directory / "out").glob(f"{name}__c.c")).read_text()


FLOAT64 = [n for n in MODULES if MODULES[n][5] == "float64"]


@pytest.mark.parametrize("name", FLOAT64)
def test_the_row_pass_is_the_loops_matmul_bit_for_bit(
    fused: Built, unfused: Built, name: str
) -> None:
    args = _args(name)
    got = _call(fused.compiled(name), name, args)
    want = _call(unfused.compiled(name), name, args)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", FLOAT64)
def test_the_row_pass_agrees_with_numpy_and_finite_differences(
    fused: Built, name: str
) -> None:
    args = _args(name)
    got = _call(fused.compiled(name), name, args)
    want = _call(fused.python(name), name, args)
    scale = max(float(np.max(np.abs(want))), 1e-300)
    np.testing.assert_allclose(got, want, rtol=0, atol=RTOL * scale)
    function, _, _, _, op, _ = MODULES[name]
    fn = getattr(F, function)
    w, X, y = args
    if op == "f":
        np.testing.assert_allclose(got, fn(w, X, y), rtol=1e-12, atol=1e-12)
        return
    h = 1e-6
    numeric = np.zeros_like(w)
    for i in np.ndindex(*w.shape):
        e = np.zeros_like(w)
        e[i] = h
        numeric[i] = (fn(w + e, X, y) - fn(w - e, X, y)) / (2 * h)
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-7 * X.shape[0])


@pytest.mark.parametrize(
    "name", ["logistic_7x50", "explicit_7x3", "batch_7x3x2", "logistic_1x3"]
)
@pytest.mark.parametrize("where", ["X", "w"])
def test_nan_and_inf_propagate_as_numpys(fused: Built, name: str, where: str) -> None:
    w, X, y = (a.copy() for a in _args(name))
    if where == "X":
        X.flat[0] = np.nan
        X.flat[-1] = np.inf
    else:
        w.flat[0] = np.inf
        if w.size > 1:
            w.flat[-1] = np.nan
    with np.errstate(all="ignore"):
        got = _call(fused.compiled(name), name, (w, X, y))
        want = _call(fused.python(name), name, (w, X, y))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, atol=1e-12)


def test_a_float32_module_takes_the_row_pass_in_float(fused: Built) -> None:
    name = "logistic32_7x3"
    args = _args(name)
    got = _call(fused.compiled(name), name, args)
    want = _call(fused.python(name), name, args)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert "row pass" in _c_source(fused, name)


@pytest.mark.parametrize(
    "name", [n for n in FLOAT64 if MODULES[n][2][0] > 1 and MODULES[n][2][1] > 1]
)
def test_the_matrix_is_read_in_one_loop_nest(fused: Built, name: str) -> None:
    """The row pass's head and tail are one loop nest over the rows, and X is
    read nowhere else; no BLAS call and no array for ``u`` or ``r``. (With one
    row, ``r @ X`` contracts an axis of length 1, and with one column ``X @
    w`` does: the graph has no product there, a broadcast multiply. ``f`` of a gradient module reads X
    once anyway, in its one product.)"""
    op = MODULES[name][4]
    whole = _c_source(fused, name)
    start = whole.index(f"/* {op}: C loops")
    source = whole[start : whole.index("\n}\n", start)]  # the operator's function
    assert "NumPy's dot" not in source
    blocks = re.split(r"\n    /\* ", source)  # the function's top-level nests
    reading = [b for b in blocks if "dg_p_X[" in b]
    assert len(reading) == 1, reading
    (block,) = reading
    assert re.match(r"\d+ equations fused over \(\d+,( \d+)?\) \*/", block)
    assert block.count("row pass") == 2  # the dot, then the accumulation
    assert block.count("for (npy_intp dg_i0 = 0;") == 1  # one nest over the rows
    assert "dg_w + " not in source  # nothing left in the workspace


def _planned(fn: Any, w: tuple[int, ...], n: int, k: int) -> list[Group | Step]:
    graph = trace(fn, [(w, "float64"), ((n, k), "float64"), ((n,), "float64")])
    results = abi.result_stores(graph, [tuple(o.shape) for o in graph.outputs])
    return Planner(graph).program(results).items


def test_only_a_matrix_beyond_the_cache_takes_the_row_pass() -> None:
    """At 3000x50 (150,000 doubles) one pass; at 1000x20 X stays in cache
    between NumPy's two dots, which are faster than the loops there."""
    (large,) = _planned(F.explicit, (50,), 3000, 50)
    assert isinstance(large, Group) and large.rows is not None
    names = [e.primitive.name for e in large.eqns]
    assert names[0] == names[-1] == "matmul"
    assert large.eqns[-1].out in large.pending
    small = _planned(F.explicit, (20,), 1000, 20)
    steps = [item for item in small if isinstance(item, Step)]
    assert [s.blas for s in steps if s.eqn.primitive.name == "matmul"] == [True] * 2
    assert all(item.rows is None for item in small if isinstance(item, Group))


def test_a_head_whose_product_is_not_fused_is_planned_as_before() -> None:
    """``X @ w`` read by an elementwise chain but never by ``X.T @ r``: no row
    pass (its dot in the loops would be slower than NumPy's)."""

    def no_tail(w: Any, X: Any, y: Any) -> Any:
        return np.sum(np.tanh(X @ w) * y)

    items = _planned(no_tail, (50,), 3000, 50)
    assert all(item.rows is None for item in items if isinstance(item, Group))
    (product,) = [i for i in items if isinstance(i, Step) and i.blas]
    assert product.eqn.primitive.name == "matmul"
