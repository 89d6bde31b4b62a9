"""Sparse jacobians whose seed matrix (the colors' rows of an identity) is larger
than the C target's constant tables (``CONST_LIMIT`` elements): the loops compute
it, and what follows from it, instead of the operator staying in Python.

Checked against the NumPy module (same pattern, same values), against central
differences along random directions (the whole matrix times a vector: a dense
jacobian of these sizes would not fit a test), and refilling a CSR ``out=`` in
place.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse

import compact_table_functions as F
from compiled import BuiltConfig

SUPPORT = Path(__file__).resolve().parents[2] / "support"

MODULES = {
    # name: (function, input size): seeds of at least 4 x 17,000 and 5 x 8,192 elements
    "banded": ("banded", 17_000),
    "stencil": ("stencil", 2 * 64 * 64),
}


def _config() -> str:
    parts = ['[difgen]\noutput_dir = "out"\n']
    for name, (function, n) in MODULES.items():
        for suffix, emit in (("", "vector"), ("_c", "c")):
            parts.append(
                f'[[module]]\nname = "{name}{suffix}"\n'
                f'function = "compact_table_functions.py:{function}"\n'
                f'backend = "trace"\nemit = "{emit}"\noperators = ["jacobian"]\n'
                f"input = {{ shape = [{n}] }}\nsparse = true\n"
            )
    return "\n".join(parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    directory = tmp_path_factory.mktemp("large_seeds")
    shutil.copy(SUPPORT / "compact_table_functions.py", directory)
    return BuiltConfig(directory, _config())


def _point(name: str, seed: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 1.5, MODULES[name][1])


def _along(name: str, x: np.ndarray, v: np.ndarray, h: float = 1e-6) -> Any:
    fn = getattr(F, MODULES[name][0])
    return (fn(x + h * v) - fn(x - h * v)) / (2 * h)


@pytest.mark.parametrize("name", list(MODULES))
def test_the_seed_is_over_the_constant_limit(built: BuiltConfig, name: str) -> None:
    from difgen.derive.sparsity import color_columns
    from difgen.primitives.patterns import Rows
    from difgen.targets.c.program import CONST_LIMIT

    got = built.get(name).jacobian(_point(name))
    n = MODULES[name][1]
    indptr, indices = got.indptr.astype(np.int64), got.indices.astype(np.int64)
    colors = color_columns(Rows((n,), indptr, indices, n))
    assert (int(colors.max()) + 1) * n > CONST_LIMIT


@pytest.mark.parametrize("name", list(MODULES))
def test_c_against_numpy_and_differences(built: BuiltConfig, name: str) -> None:
    module = built.get(f"{name}_c")
    assert "jacobian" not in getattr(module, "PYTHON_OPERATORS", ())
    x = _point(name)
    got = module.jacobian(x)
    python = built.get(name).jacobian(x)
    assert isinstance(got, scipy.sparse.csr_array)
    assert np.array_equal(got.indices, python.indices)
    assert np.array_equal(got.indptr, python.indptr)
    assert np.allclose(got.data, python.data, rtol=1e-13, atol=0.0)
    rng = np.random.default_rng(3)
    for _ in range(3):
        v = rng.standard_normal(x.size)
        assert np.allclose(got @ v, _along(name, x, v), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(MODULES))
def test_c_refills_a_csr_out_in_place(built: BuiltConfig, name: str) -> None:
    op = built.get(f"{name}_c").jacobian
    x, y = _point(name), _point(name, seed=6)
    target = op(x)
    data, indices, indptr = target.data, target.indices, target.indptr
    returned = op(y, out=target)
    assert returned is target and target.data is data
    assert target.indices is indices and target.indptr is indptr
    expected = built.get(name).jacobian(y)
    assert np.allclose(target.data, expected.data, rtol=1e-13, atol=0.0)


def test_stencil_tables_do_not_grow_with_the_grid(built: BuiltConfig) -> None:
    """The 64 x 64 stencil's f and jacobian are computed at their own elements
    (f's rolled neighbours and the jacobian's nonzeros, read from the state),
    and every table of the grid's 4,096 points or more (where the nonzeros are
    read and written, the CSR pattern the out= check compares with) is filled
    at the first call from its block runs: the literals printed are the runs,
    a small part of the tables, and the C file stays under 100 KB (a 537 KB
    file of literals, 790 KB before the nonzeros were computed on demand)."""
    import re

    source = (built.directory / "out" / "stencil_c__c.c").read_text()
    assert source.count("elements only") == 2  # f and the jacobian
    literals = re.findall(r"static const \w+ (dg_\w+)\[(\d+)\] = ", source)
    filled = re.findall(r"static (npy_int\d+) (dg_\w+)\[(\d+)\];", source)
    assert {name for _, name, _ in filled} >= {
        "dg_jacobian_pattern_indices",
        "dg_jacobian_pattern_indptr",
    }
    assert all(int(n) >= 4096 for _, _, n in filled), filled
    assert all(int(n) < 4096 for _, n in literals), literals
    runs = sum(int(n) for name, n in literals if name.endswith("_runs"))
    assert runs < 12 * 64 * 64 // 8, runs  # 8 entries per number printed, at least
    assert len(source) < 100_000
    assert "dg_jacobian_fill_tables();" in source


@pytest.mark.parametrize("name", list(MODULES))
def test_the_seed_is_folded_into_the_nonzeros(built: BuiltConfig, name: str) -> None:
    """The seed and its stencil read no argument: the analysis of the nonzeros
    folds them at build time (each nonzero reads the state where its color's
    tangent does), so no static seed is computed at a first call, and calls at
    other points (before and after) still give their own values."""
    source = (built.directory / "out" / f"{name}_c__c.c").read_text()
    jacobian = source[source.index("dg_op_jacobian(") :]
    assert "elements only" in jacobian
    assert "dg_ready" not in jacobian
    module, python = built.get(f"{name}_c"), built.get(name)
    points = [_point(name, seed) for seed in (7, 8, 7)]
    for x in points:
        assert np.allclose(
            module.jacobian(x).data, python.jacobian(x).data, rtol=1e-13, atol=0.0
        )


@pytest.fixture(scope="module")
def loops_only(tmp_path_factory: pytest.TempPathFactory) -> BuiltConfig:
    """The stencil built with the demand analysis declining every result: the
    jacobian is the colors' compressed product over the grid, then gathered."""
    from difgen.targets.c import plan

    directory = tmp_path_factory.mktemp("large_seeds_loops")
    shutil.copy(SUPPORT / "compact_table_functions.py", directory)
    config = _config().split("\n[[module]]")
    kept = [config[0]] + [c for c in config[1:] if 'name = "stencil' in c]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plan, "demand_of", lambda *args: None)
        return BuiltConfig(directory, "\n[[module]]".join(kept))


def test_without_the_demand_the_seed_is_computed_at_the_first_call_only(
    loops_only: BuiltConfig,
) -> None:
    """Where the analysis declines, the seed and its stencil (they read no
    argument) are static arrays written at the first call, and calls at other
    points (before and after) still give their own values."""
    source = (loops_only.directory / "out" / "stencil_c__c.c").read_text()
    assert "if (!dg_ready) { /* reads no argument: computed once */" in source
    assert "elements only" not in source
    module, python = loops_only.get("stencil_c"), loops_only.get("stencil")
    for seed in (7, 8, 7):
        x = _point("stencil", seed)
        assert np.allclose(
            module.jacobian(x).data, python.jacobian(x).data, rtol=1e-13, atol=0.0
        )
