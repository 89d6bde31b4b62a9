"""The difgen command: errors without tracebacks, all-or-nothing builds, check."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import difgen
import pytest
from difgen.cli import main
from difgen.config import Config, ModuleSpec
from difgen.errors import TraceError
from difgen.hashing import source_hash
from difgen.write import HEADER_MARKER

CONFIG = """\
[[module]]
name = "alpha"
function = "fn.py:f"
operators = ["derivative"]
input = { shape = [] }

[[module]]
name = "beta"
function = "fn.py:g"
operators = ["gradient"]
input = { shape = [3] }
"""

SOURCE = "def f(x):\n    return x * x\n\n\ndef g(x):\n    return x.sum()\n"


def fake_generate(spec: ModuleSpec, config: Config, fn: Any) -> str:
    """Stands in for difgen.pipeline.generate_module: header and hash only."""
    return (
        f'{HEADER_MARKER} from {spec.function}. DO NOT EDIT."""\n\n'
        f'SOURCE_HASH = "{source_hash(spec, fn)}"\n'
    )


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The real difgen.pipeline with fake generate_module and ir_text.

    These tests are about the command (errors, all-or-nothing writes, check), not
    the derivatives, so the two expensive entry points are patched. The import is
    not guarded: a pipeline that fails to import must fail these tests, and
    ``raising=True`` makes a renamed entry point fail them too.
    """
    import difgen.pipeline as module

    monkeypatch.setattr(module, "generate_module", fake_generate)
    monkeypatch.setattr(
        module,
        "ir_text",
        lambda spec, fn, stage: f"{spec.name} at {stage}: {{ lambda x. }}",
    )
    return module


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "difgen.toml").write_text(CONFIG)
    (tmp_path / "fn.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_build_writes_then_leaves_unchanged(
    project: Path, pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "build", "difgen.toml") == (
        0,
        f"wrote {Path('generated/alpha.py')}\nwrote {Path('generated/beta.py')}\n",
        "",
    )
    assert (project / "generated" / "alpha.py").read_text().startswith(HEADER_MARKER)
    status, out, _ = run(capsys, "build", "difgen.toml")
    assert status == 0
    assert out.splitlines() == [
        f"unchanged {Path('generated/alpha.py')}",
        f"unchanged {Path('generated/beta.py')}",
    ]


def test_build_selected_module(
    project: Path, pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "build", "difgen.toml", "--module", "beta")
    assert status == 0
    assert out == f"wrote {Path('generated/beta.py')}\n"
    assert os.listdir(project / "generated") == ["beta.py"]


def test_unknown_module_lists_the_available_ones(
    project: Path, pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "build", "difgen.toml", "--module", "gamma")
    assert status == 1 and out == ""
    assert err == (
        "difgen: error: difgen.toml: no module named 'gamma'; available: alpha, beta\n"
    )
    assert not (project / "generated").exists()


def test_bad_config_is_one_line_on_stderr(
    project: Path, pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "difgen.toml").write_text(CONFIG.replace("gradient", "gradeint"))
    status, out, err = run(capsys, "build", "difgen.toml")
    assert status == 1 and out == ""
    assert err.startswith("difgen: error: difgen.toml:10: unknown operator 'gradeint'")
    assert "Traceback" not in err and err.count("\n") == 1
    assert not (project / "generated").exists()


def test_missing_config(
    project: Path, pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(capsys, "check", "nope.toml")
    assert (status, err) == (1, "difgen: error: nope.toml: config file not found\n")


def test_bad_function_fails_before_anything_is_written(
    project: Path, pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "difgen.toml").write_text(CONFIG.replace("fn.py:g", "fn.py:h"))
    status, out, err = run(capsys, "build", "difgen.toml")
    assert status == 1 and out == ""
    assert err.startswith("difgen: error: difgen.toml:9: cannot load function")
    assert not (project / "generated").exists()


def test_second_module_failing_writes_neither(
    project: Path,
    pipeline: types.ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def generate(spec: ModuleSpec, config: Config, fn: Any) -> str:
        if spec.name == "beta":
            raise TraceError("fn.py:6: cannot trace this")
        return fake_generate(spec, config, fn)

    monkeypatch.setattr(pipeline, "generate_module", generate)
    status, out, err = run(capsys, "build", "difgen.toml")
    assert (status, out) == (1, "")
    assert err == "difgen: error: fn.py:6: cannot trace this\n"
    assert not (project / "generated").exists()


def test_foreign_file_refused_before_anything_is_written(
    project: Path, pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "generated").mkdir()
    (project / "generated" / "beta.py").write_text("# hand-written\n")
    status, out, err = run(capsys, "build", "difgen.toml")
    assert (status, out) == (1, "")
    assert "beta.py was not written by difgen; refusing to overwrite it" in err
    assert os.listdir(project / "generated") == ["beta.py"]
    assert (project / "generated" / "beta.py").read_text() == "# hand-written\n"


def test_check_missing_stale_and_up_to_date(
    project: Path, pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "check", "difgen.toml")
    assert status == 1
    assert out.splitlines() == [
        f"{Path('generated/alpha.py')}: alpha: missing (run: difgen build difgen.toml)",
        f"{Path('generated/beta.py')}: beta: missing (run: difgen build difgen.toml)",
    ]
    run(capsys, "build", "difgen.toml")
    assert run(capsys, "check", "difgen.toml") == (0, "2 modules up to date\n", "")

    (project / "fn.py").write_text(SOURCE + "\nSCALE = 2\n")
    status, out, _ = run(capsys, "check", "difgen.toml")
    assert status == 1
    assert out.count(": stale (run: difgen build difgen.toml)") == 2

    run(capsys, "build", "difgen.toml", "--module", "alpha")
    status, out, _ = run(capsys, "check", "difgen.toml")
    assert status == 1
    assert out.splitlines() == [
        f"{Path('generated/beta.py')}: beta: stale (run: difgen build difgen.toml)"
    ]


def test_config_outside_cwd(
    project: Path,
    pipeline: types.ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")
    status, out, _ = run(capsys, "build", "../difgen.toml", "--module", "alpha")
    assert status == 0
    assert out == f"wrote {project / 'generated' / 'alpha.py'}\n"


def test_ir(
    project: Path, pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "ir", "difgen.toml", "--module", "beta") == (
        0,
        "beta at traced: { lambda x. }\n",
        "",
    )
    status, out, _ = run(
        capsys, "ir", "difgen.toml", "--module", "beta", "--stage", "jvp"
    )
    assert (status, out) == (0, "beta at jvp: { lambda x. }\n")


def test_usage_errors_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version")[:2] == (0, f"difgen {difgen.__version__}\n")
    status, _, err = run(capsys)
    assert status == 2 and "usage: difgen" in err
    status, _, err = run(capsys, "ir", "difgen.toml")
    assert status == 2 and "--module" in err


def test_python_dash_m(project: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "difgen", "check", "nope.toml"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == "difgen: error: nope.toml: config file not found\n"
