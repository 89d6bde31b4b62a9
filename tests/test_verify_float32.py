"""``difgen verify`` on float32 modules: float32 arguments, float64 references at the
same points, the float32 tolerances, and results that must be float32."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

import difgen
from difgen.verification import FLOAT32_TOLERANCES, ORDER, TOLERANCES

SOURCE = """\
import numpy as np


def energy(x):
    return np.sum(np.sin(x) * x**2) + np.log1p(x @ x) * np.float32(0.5)


def curve(t):
    return np.exp(-t) * np.cos(3.0 * t)


def layer(x, W):
    return np.tanh(W @ x + 0.1)
"""

CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "energy"
function = "fn.py:energy"
backend = "trace"
operators = ["gradient", "value_and_gradient", "hessian", "hvp", "jacobian"]
input = { shape = [6], dtype = "float32" }

[[module]]
name = "curve"
function = "fn.py:curve"
backend = "trace"
operators = ["derivative", "second_derivative"]
input = { shape = [], dtype = "float32" }

[[module]]
name = "layer"
function = "fn.py:layer"
backend = "trace"
operators = ["jacobian", "pushforward", "pullback"]
input = { shape = [4], dtype = "float32" }
contexts = [{ name = "W", shape = [3, 4], dtype = "float32" }]
batch = 2
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("verify-float32")
    (project / "fn.py").write_text(SOURCE)
    (project / "difgen.toml").write_text(CONFIG)
    difgen.build(project / "difgen.toml")
    return project


@pytest.fixture
def project(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(built, copy)
    return copy


def test_float32_modules_pass_at_the_float32_tolerances(built: Path) -> None:
    result = difgen.verify(built / "difgen.toml")
    assert result.ok
    errors = []
    for module in result.modules:
        for op in module.operators:
            for r in op.results:
                assert r.tolerance == FLOAT32_TOLERANCES[ORDER[r.kind]]
                assert r.error <= r.tolerance / 10, (module.name, op.operator, r)
                errors.append(r.error)
    # the module's float32 rounding is what is measured: far above float64's
    assert max(errors) > 1e-9
    assert FLOAT32_TOLERANCES["first"] > TOLERANCES["first"]


def _wrap(path: Path, name: str, change: str) -> None:
    path.write_text(path.read_text() + textwrap.dedent(f"""

            _original_{name} = {name}


            def {name}(*args):
                r = _original_{name}(*args)
                return {change}
            """))


def test_an_error_past_float32_rounding_fails(project: Path) -> None:
    """1e-3 relative is far beyond float32's rounding, so it is a wrong result."""
    _wrap(project / "out" / "energy.py", "gradient", "r * np.float32(1.001)")
    (checked,) = difgen.verify(project / "difgen.toml", ["energy"]).modules
    assert [op.operator for op in checked.operators if not op.passed] == ["gradient"]


def test_a_float64_result_of_a_float32_module_fails(project: Path) -> None:
    _wrap(project / "out" / "curve.py", "derivative", "float(r)")
    _wrap(project / "out" / "layer.py", "pullback", "r.astype(np.float64)")
    result = difgen.verify(project / "difgen.toml", ["curve", "layer"])
    failed = {
        (m.name, op.operator, op.worst.error)
        for m in result.modules
        for op in m.operators
        if not op.passed
    }
    assert failed == {
        ("curve", "derivative", float("inf")),
        ("layer", "pullback", float("inf")),
    }


POINTS_CONFIG = """\
[difgen]
output_dir = "out"

[[module]]
name = "layer_points"
function = "fn.py:layer"
backend = "trace"
operators = ["jacobian", "pushforward"]
input = { shape = [4], dtype = "float32" }
contexts = [{ name = "W", shape = [3, 4], dtype = "float32", per_point = true }]
points = true
"""


def test_float32_points_variants_are_verified_in_float32(tmp_path: Path) -> None:
    (tmp_path / "fn.py").write_text(SOURCE)
    (tmp_path / "difgen.toml").write_text(POINTS_CONFIG)
    difgen.build(tmp_path / "difgen.toml")
    (checked,) = difgen.verify(tmp_path / "difgen.toml").modules
    points = [op for op in checked.operators if op.operator.endswith("_points")]
    assert sorted(op.operator for op in points) == [
        "f_points",
        "jacobian_points",
        "pushforward_points",
    ]
    assert all(op.passed for op in checked.operators), checked
    _wrap(
        tmp_path / "out" / "layer_points.py", "jacobian_points", "r.astype(np.float64)"
    )
    (checked,) = difgen.verify(tmp_path / "difgen.toml").modules
    failed = [
        (op.operator, op.worst.error) for op in checked.operators if not op.passed
    ]
    assert failed == [("jacobian_points", float("inf"))]
