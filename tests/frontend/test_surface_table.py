"""The documentation's supported-surface table is generated from the registries and current.

``scripts/surface_table.py`` reads the primitive declarations, the frontend's NumPy
tables and the tracer's methods; this test fails when a primitive or NumPy function
is added, removed or changed without re-running it, so the table cannot drift.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from difgen.frontend import numpy_api

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    """``scripts/surface_table.py`` as a module."""
    spec = importlib.util.spec_from_file_location(
        "surface_table", ROOT / "scripts" / "surface_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["surface_table"] = module
    spec.loader.exec_module(module)
    return module


def test_readme_table_is_current(script: ModuleType) -> None:
    readme = script.PAGE.read_text()
    assert script.START in readme and script.END in readme
    expected = script.splice(readme, script.table())
    assert readme == expected, (
        "docs/reference/numpy.md's supported-surface table is stale: run "
        "python scripts/surface_table.py"
    )


def test_every_registered_name_is_a_row(script: ModuleType) -> None:
    """The table lists every ufunc and function of the frontend's tables."""
    names = {row.name for row in script.rows()}
    for ufunc in numpy_api.UFUNCS:
        assert f"np.{ufunc}" in names
    for func in numpy_api.FUNCTIONS:
        assert script.numpy_name(func) in names
    assert {"a + b", "a[index]", "ndarray.sum", "np.zeros"} <= names


def test_a_new_registration_appears(
    script: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function registered later by anyone shows up without editing the script."""
    monkeypatch.setitem(numpy_api.FUNCTIONS, np.fliplr, lambda m: np.flip(m, 1))
    monkeypatch.setitem(numpy_api.UFUNCS, "rint", lambda x: x)
    rows = {row.name: row for row in script.rows()}
    assert "np.fliplr" in rows and "np.rint" in rows
    assert (
        script.splice(script.PAGE.read_text(), script.table())
        != script.PAGE.read_text()
    )


def test_direct_rows_read_the_declaration(script: ModuleType) -> None:
    """Rows backed by one primitive report that primitive's own facts."""
    rows = {row.name: row for row in script.rows()}
    sin = rows["np.sin"]
    assert sin.direct and sin.primitives == ("sin",)
    assert sin.cells()[1:] == [
        "`sin`",
        "yes",
        "yes (JVP transposed)",
        "yes",
        "yes",
        "union",
    ]
    less = rows["np.less"].cells()
    assert less[2] == "zero (selector)"
    add = rows["a + b"].cells()
    assert add[3] == "yes (transpose rule)"


def test_array_rows_are_attributes_numpy_arrays_have(script: ModuleType) -> None:
    """``ndarray.X`` rows are NumPy's own array API: no ``ndarray.cos``."""
    names = [row.name for row in script.rows() if row.name.startswith("ndarray.")]
    assert names
    for name in names:
        assert hasattr(np.ndarray, name.split(".", 1)[1]), name


@pytest.mark.parametrize("name", ["np.sum", "np.mean", "ndarray.sum", "ndarray.mean"])
def test_reductions_are_differentiable(script: ModuleType, name: str) -> None:
    """A wrapper (the integer-data conversion of ``frontend/runtime.py``) is read
    through to the reduction it calls: its derivative is the reduction's."""
    rows = {row.name: row for row in script.rows()}
    assert "reduce_sum" in rows[name].primitives
    assert rows[name].cells()[2:5] == ["yes", "yes", "yes"]
