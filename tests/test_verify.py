"""difgen verify: every operator kind passes when right and fails when wrong."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import difgen
from difgen import verification
from difgen.cli import main
from difgen.operators import OPERATORS
from difgen.verification import TOLERANCES, error

SOURCE = """\
import numpy as np


def curve(x):
    return np.array([np.sin(x) * x, x**3 - 2.0 * x])


def energy(x):
    return np.sum(np.exp(0.5 * x) * x) + x[0] * x[1] * x[2]


def field(x):
    return np.array([x[0] * x[1], np.tanh(x[2] + x[3]), x[1] ** 2 * x[3]])
"""

SCALAR_OPS = [
    "pushforward",
    "value_and_pushforward",
    "pullback",
    "value_and_pullback",
    "derivative",
    "value_and_derivative",
    "second_derivative",
    "value_derivative_and_second_derivative",
]
GRADIENT_OPS = [
    "gradient",
    "value_and_gradient",
    "hvp",
    "hessian",
    "value_gradient_and_hessian",
]
JACOBIAN_OPS = ["jacobian", "value_and_jacobian", "pushforward", "pullback"]


def module_table(
    name: str, function: str, ops: list[str], shape: str, **extra: str
) -> str:
    lines = [
        "[[module]]",
        f'name = "{name}"',
        f'function = "fn.py:{function}"',
        'backend = "trace"',
        f"operators = {ops!r}".replace("'", '"'),
        f"input = {{ shape = {shape} }}",
        *(f"{key} = {value}" for key, value in extra.items()),
    ]
    return "\n".join(lines) + "\n"


CONFIG = "\n".join(
    [
        '[difgen]\noutput_dir = "out"\n',
        module_table("scalar", "curve", SCALAR_OPS, "[]"),
        module_table(
            "scalar_batched", "curve", ["pushforward", "pullback"], "[]", batch="3"
        ),
        module_table("dense", "energy", GRADIENT_OPS, "[3]"),
        module_table(
            "sparse_hessian",
            "energy",
            ["hessian", "value_gradient_and_hessian"],
            "[3]",
            sparse="true",
        ),
        module_table("dense_jacobian", "field", JACOBIAN_OPS, "[4]"),
        module_table(
            "sparse_jacobian", "field", JACOBIAN_OPS, "[4]", sparse="true", batch="2"
        ),
    ]
)
"""Every operator, scalar and array inputs, batched seeds, dense and CSR results."""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project above, built once (the real pipeline) for every test here."""
    project = tmp_path_factory.mktemp("verify")
    (project / "fn.py").write_text(SOURCE)
    (project / "difgen.toml").write_text(CONFIG)
    difgen.build(project / "difgen.toml")
    return project


@pytest.fixture
def project(built: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the built project that a test may damage."""
    copy = tmp_path / "project"
    shutil.copytree(built, copy)
    yield copy


def test_every_operator_of_every_module_passes(built: Path) -> None:
    result = difgen.verify(built / "difgen.toml")
    assert result.ok, [
        (m.name, op.operator, op.worst)
        for m in result.modules
        for op in m.operators
        if not op.passed
    ]
    checked = {op.operator for m in result.modules for op in m.operators}
    assert checked == set(OPERATORS), "every operator kind is exercised"
    for module in result.modules:
        assert not module.stale and module.problem is None
        for op in module.operators:
            kinds = [r.kind for r in op.results]
            assert kinds == list(OPERATORS[op.operator].results)
            for r in op.results:
                # Far inside the tolerance: the check has room to catch real errors.
                assert r.error < r.tolerance / 100, (module.name, op.operator, r)


def wrap(path: Path, name: str, change: str) -> None:
    """Redefine operator ``name`` of a generated module so that its last result
    ``r`` becomes ``change`` (an expression of ``r``)."""
    path.write_text(path.read_text() + textwrap.dedent(f"""

            _original_{name} = {name}


            def {name}(*args):
                result = _original_{name}(*args)
                if isinstance(result, tuple):
                    r = result[-1]
                    return (*result[:-1], {change})
                r = result
                return {change}
            """))


CASES = [
    (module, name)
    for module, names in [
        ("scalar", ["f", *SCALAR_OPS]),
        ("scalar_batched", ["pushforward", "pullback"]),
        ("dense", GRADIENT_OPS),
        ("sparse_hessian", ["hessian", "value_gradient_and_hessian"]),
        ("dense_jacobian", JACOBIAN_OPS),
        ("sparse_jacobian", JACOBIAN_OPS),
    ]
    for name in names
]


@pytest.mark.parametrize("module, name", CASES, ids=[f"{m}-{n}" for m, n in CASES])
def test_a_wrong_result_fails_that_operator_only(
    project: Path, module: str, name: str
) -> None:
    sparse = (
        module.startswith("sparse") and name != "pushforward" and name != "pullback"
    )
    wrap(
        project / "out" / f"{module}.py",
        name,
        "r * 1.5" if sparse else "r * 1.5 + 0.25",
    )
    result = difgen.verify(project / "difgen.toml", [module])
    (checked,) = result.modules
    failed = [op.operator for op in checked.operators if not op.passed]
    assert failed == [name]
    assert not result.ok


def test_wrong_value_of_a_value_and_operator_fails(project: Path) -> None:
    path = project / "out" / "dense.py"
    path.write_text(
        path.read_text() + "\n\n_vg = value_and_gradient\n\n\n"
        "def value_and_gradient(*args):\n"
        "    value, gradient = _vg(*args)\n"
        "    return value + 1e-6, gradient\n"
    )
    (checked,) = difgen.verify(project / "difgen.toml", ["dense"]).modules
    (op,) = [op for op in checked.operators if not op.passed]
    assert (op.operator, op.worst.kind) == ("value_and_gradient", "value")
    assert op.worst.error > TOLERANCES["value"]


def test_missing_stale_and_broken_modules(project: Path) -> None:
    (project / "out" / "scalar.py").unlink()
    dense = project / "out" / "dense.py"
    dense.write_text(
        dense.read_text().replace("import numpy as np", "import numpy as np\n1 / 0")
    )
    (project / "fn.py").write_text(SOURCE.replace("x**3 - 2.0 * x", "x**3 - 3.0 * x"))
    result = difgen.verify(
        project / "difgen.toml", ["scalar", "scalar_batched", "dense"]
    )
    scalar, batched, broken = result.modules
    assert (scalar.problem, scalar.passed) == ("missing", False)
    assert batched.stale and not batched.passed  # the function changed since the build
    assert broken.problem is not None and "ZeroDivisionError" in broken.problem


def test_cli_verify(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(project / "difgen.toml")
    assert main(["verify", config, "--module", "dense", "--points", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("out/dense.py: dense")
    assert [line.split()[0] for line in out[1:-1]] == ["f", *GRADIENT_OPS]
    assert all(line.endswith("ok") for line in out[1:-1])
    assert out[-1] == "1 module verified at 2 random points (seed 0)"

    wrap(project / "out" / "dense.py", "hvp", "r + 0.5")
    assert main(["verify", config, "--module", "dense", "-q"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[1].split()[0] == "hvp" and out[1].endswith("FAIL")
    assert out[2] == "1 of 1 modules failed at 3 random points (seed 0)"


def test_error_measure() -> None:
    assert error(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.0
    assert error(np.array([0.5]), np.array([0.5 + 1e-9])) == pytest.approx(1e-9)
    assert error(np.array([100.0]), np.array([101.0])) == pytest.approx(1 / 101)
    assert error(np.array([np.inf]), np.array([np.inf])) == 0.0
    assert error(np.array([np.nan]), np.array([1.0])) == np.inf
    assert error(np.zeros(2), np.zeros(3)) == np.inf


def test_sparse_modules_say_they_import_scipy(built: Path) -> None:
    """A module built with sparse = true imports SciPy, and its docstring says so."""
    for name, sparse in [("sparse_jacobian", True), ("dense_jacobian", False)]:
        text = (built / "out" / f"{name}.py").read_text()
        docstring = text.split('"""')[1]
        assert ("Requires NumPy and SciPy" in docstring) is sparse
        assert ("import scipy.sparse" in text) is sparse


KINKED = """\
import numpy as np


def ranked(x):
    w = np.linspace(0.0, 1.0, x.shape[0])
    s = np.sort(x)
    return np.sum(s * w) + np.sum(s[-5:] ** 2)
"""
"""Piecewise quadratic: at 400 uniform points some sorted neighbours are closer
than the finite-difference steps, so stencils straddle the kinks of ``sort``."""


@pytest.fixture(scope="module")
def kinked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("kinked")
    (project / "fn.py").write_text(KINKED)
    table = module_table("ranked", "ranked", ["gradient", "hvp", "hessian"], "[400]")
    (project / "difgen.toml").write_text('[difgen]\noutput_dir = "out"\n\n' + table)
    difgen.build(project / "difgen.toml")
    return project


def test_kinks_straddled_by_a_stencil_are_not_failures(
    kinked: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The generated derivatives are those of the active piece (JAX's too).
    result = difgen.verify(kinked / "difgen.toml", points=20)
    assert result.ok, [op.worst for m in result.modules for op in m.operators]
    # Without the smaller steps and the gradient's differences, the same points
    # fail: the test exercises the refinement.
    monkeypatch.setattr(verification, "REFINED_STEPS", {"first": 0, "second": 0})
    monkeypatch.setattr(verification, "FIRST_ORDER_OF", {})
    failed = difgen.verify(kinked / "difgen.toml", points=20)
    (module,) = failed.modules
    assert {op.operator for op in module.operators if not op.passed} == {
        "gradient",
        "hvp",
        "hessian",
    }


@pytest.mark.parametrize("name", ["gradient", "hvp", "hessian"])
def test_a_wrong_result_fails_across_kinks(
    kinked: Path, tmp_path: Path, name: str
) -> None:
    copy = tmp_path / "kinked"
    shutil.copytree(kinked, copy)
    wrap(copy / "out" / "ranked.py", name, "r * 1.01")
    (module,) = difgen.verify(copy / "difgen.toml", points=20).modules
    failed = [op.operator for op in module.operators if not op.passed]
    if name == "gradient":
        # Its differences no longer vouch for the second derivatives at the
        # points where the graph's stencils straddle a kink: they fail too.
        assert failed[0] == "gradient"
    else:
        assert failed == [name]
