"""difgen in a package's build, in pre-commit and from Python, end to end.

The sample package ``tests/integration_package`` gets its ``pyproject.toml`` from
the snippets of the README section "Using difgen in your project", so the README's
copy-paste text is exactly what is built here. Everything runs offline: the build
backends are the ones installed with difgen's test extras (``--no-build-isolation``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "integration_package"
GENERATED = Path("src/sampledf/energy_derivatives.py")
IN_WHEEL = "sampledf/energy_derivatives.py"
PROJECT_TABLE = """\
[project]
name = "sampledf"
version = "0.1.0"
dependencies = ["numpy"]
"""
SDIST = {
    "setuptools": "import setuptools.build_meta as b; print(b.build_sdist('dist'))",
    "hatchling": "import hatchling.build as b; print(b.build_sdist('dist'))",
}


def readme_snippet(name: str) -> str:
    """The code block after ``<!-- snippet: NAME -->`` in the README."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    pattern = rf"<!-- snippet: {re.escape(name)} -->\n```\w*\n(.*?)```\n"
    found = re.findall(pattern, text, flags=re.DOTALL)
    assert len(found) == 1, f"README: expected one snippet {name!r}, found {len(found)}"
    return str(found[0])


def sample_project(directory: Path, backend: str) -> Path:
    """A fresh copy of the sample package, configured with the README's snippets."""
    project = directory / f"sampledf-{backend}"
    shutil.copytree(
        SAMPLE,
        project,
        ignore=shutil.ignore_patterns(
            GENERATED.name, "__pycache__", "*.egg-info", "build", "dist"
        ),
    )
    pyproject = "\n".join(
        [
            readme_snippet(f"pyproject-{backend}"),
            PROJECT_TABLE,
            readme_snippet("pyproject-difgen"),
        ]
    )
    tomllib.loads(pyproject)  # the snippets fit together
    (project / "pyproject.toml").write_text(pyproject)
    return project


def run(
    args: list[str | Path], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command that must succeed; its output is shown if it does not."""
    result = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def numpy_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding NumPy and nothing else, for PYTHONPATH.

    The fresh environment that installs the wheel must have NumPy but must not
    see difgen, which this interpreter's site-packages holds; so only NumPy is
    linked in.
    """
    site = Path(np.__file__).resolve().parent.parent
    directory = tmp_path_factory.mktemp("numpy_only")
    for entry in site.iterdir():
        if entry.name in ("numpy", "numpy.libs"):  # numpy.libs: its bundled BLAS
            (directory / entry.name).symlink_to(entry, target_is_directory=True)
    return directory


CHECK_INSTALLED = """\
import importlib.util
import numpy as np
import sampledf.energy_derivatives as m

assert "site-packages" in m.__file__, m.__file__
assert importlib.util.find_spec("difgen") is None, "difgen is visible"
x = np.array([0.3, -0.2, 0.5])
sigmoid, softplus = 1 / (1 + np.exp(-x)), np.log1p(np.exp(x))
expected = softplus + x * sigmoid + np.array([x[1] * x[2], x[0] * x[2], x[0] * x[1]])
assert np.allclose(m.gradient(x), expected, rtol=1e-12, atol=0), m.gradient(x)
print("ok")
"""


@pytest.mark.parametrize("backend", ["setuptools", "hatchling"])
def test_build_backend_ships_the_generated_module(
    tmp_path: Path, backend: str, numpy_only: Path
) -> None:
    project = sample_project(tmp_path, backend)
    assert not (project / GENERATED).exists()

    # The sdist, from a tree without the module: generated, and shipped even
    # though the sample's .gitignore lists it.
    output = run([sys.executable, "-c", SDIST[backend]], cwd=project).stdout
    sdist = output.split()[-1]  # the backend's return value, after its log
    with tarfile.open(project / "dist" / sdist) as archive:
        assert f"sampledf-0.1.0/{GENERATED.as_posix()}" in archive.getnames()

    # The wheel, by pip, offline, from a tree without it again.
    (project / GENERATED).unlink()
    wheel = build_wheel(project, tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        assert IN_WHEEL in archive.namelist()
        assert archive.read(IN_WHEEL) == (project / GENERATED).read_bytes()

    # Installed in a fresh environment without difgen, the module runs on NumPy.
    assert run_installed(wheel, tmp_path, numpy_only, CHECK_INSTALLED) == "ok\n"


def build_wheel(project: Path, tmp_path: Path) -> Path:
    """The sample project's wheel, built by pip offline (no build isolation: the
    build backends and difgen come from this environment)."""
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "--no-cache-dir",
            "-w",
            tmp_path / "wheels",
            project,
        ],
        cwd=tmp_path,
    )
    (wheel,) = (tmp_path / "wheels").glob("sampledf-0.1.0-*.whl")
    return wheel


def run_installed(wheel: Path, tmp_path: Path, numpy_only: Path, script: str) -> str:
    """The output of ``script``, run with ``wheel`` installed in a fresh virtual
    environment where only NumPy (``numpy_only``) is importable besides it: no
    difgen, no user site, another working directory."""
    venv = tmp_path / "fresh"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path)
    python = venv / "bin" / "python"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--no-index",
            "--no-deps",
            "--no-cache-dir",
            wheel,
        ],
        cwd=tmp_path,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(numpy_only),
        "PYTHONNOUSERSITE": "1",
    }
    return run([python, "-c", script], cwd=elsewhere, env=env).stdout


def test_pre_commit_hooks(tmp_path: Path) -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    by_id = {hook["id"]: hook for hook in hooks}
    assert sorted(by_id) == ["difgen-build", "difgen-check"]
    for hook_id, command in [
        ("difgen-check", "check"),
        ("difgen-build", "build --exit-code"),
    ]:
        hook = by_id[hook_id]
        assert hook["entry"] == f"difgen {command}"
        assert hook["language"] == "python"  # pre-commit installs this repository
        assert hook["pass_filenames"] is False  # difgen takes a config, not files
        files = re.compile(hook["files"])
        for path in ("pyproject.toml", "difgen.toml", "src/sampledf/model.py"):
            assert files.search(path), (hook_id, path)
        for path in ("README.md", "setup.cfg", "src/sampledf/model.pyc"):
            assert not files.search(path), (hook_id, path)

    # The README's local hook is the same hook, run with the difgen installed.
    (repo,) = yaml.safe_load(readme_snippet("pre-commit-config"))["repos"]
    assert repo["repo"] == "local"
    for hook in repo["hooks"]:
        expected = {**by_id[hook["id"]], "language": "system"}
        del expected["description"]
        assert hook == expected

    # Run the entries as pre-commit does: in the repository root, no file names.
    project = sample_project(tmp_path, "hatchling")
    scripts = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"}
    assert shutil.which("difgen", path=env["PATH"]) is not None

    def entry(hook_id: str) -> subprocess.CompletedProcess[str]:
        command = by_id[hook_id]["entry"].split()
        return subprocess.run(
            command, cwd=project, env=env, capture_output=True, text=True, check=False
        )

    check = entry("difgen-check")
    assert check.returncode == 1
    assert f"{GENERATED}: energy_derivatives: missing" in check.stdout
    assert check.stderr == "difgen: using pyproject.toml [tool.difgen]\n"
    build = entry("difgen-build")  # wrote a new file: the commit must stop
    assert build.returncode == 1, build.stderr
    assert build.stdout == f"wrote {GENERATED}\n"
    assert "1 module written; add them" in build.stderr
    build = entry("difgen-build")
    assert build.returncode == 0, build.stderr
    assert build.stdout == f"skipped {GENERATED} (up to date)\n"
    check = entry("difgen-check")
    assert (check.returncode, check.stdout.splitlines()[-1]) == (
        0,
        "1 module up to date",
    )


@pytest.fixture
def forget_sampledf() -> Iterator[None]:
    """The snippet imports the sample package in this process; forget it after."""
    yield
    for name in [n for n in sys.modules if n.split(".")[0] == "sampledf"]:
        del sys.modules[name]


def test_readme_python_api_snippet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget_sampledf: None
) -> None:
    project = sample_project(tmp_path, "setuptools")
    monkeypatch.chdir(project)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = compile(readme_snippet("python-api"), "README.md", "exec")
        exec(code, {})  # noqa: S102 (the README's own text, run as a user would)
    name, action, path, _, unit = printed.getvalue().split()
    assert (name, action, unit) == ("energy_derivatives", "written", "s")
    assert Path(path) == GENERATED  # relative, like the config path given
    assert (project / GENERATED).is_file()


def test_setuptools_adds_a_generated_subpackage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget_sampledf: None
) -> None:
    """A module generated into a directory that package discovery could not see
    (it did not exist yet) is still built: its package is added."""
    from setuptools import Distribution

    from difgen.integrations.setuptools import build_py

    project = sample_project(tmp_path, "setuptools")
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    assert 'output_dir = "src/sampledf"' in text
    pyproject.write_text(text.replace('"src/sampledf"', '"src/sampledf/_gen"'))
    monkeypatch.chdir(project)
    dist = Distribution(
        {
            "name": "sampledf",
            "packages": ["sampledf"],
            "package_dir": {"": "src"},
            "script_name": "setup.py",
        }
    )
    command = build_py(dist)
    command.ensure_finalized()
    assert (project / "src/sampledf/_gen/energy_derivatives.py").is_file()
    assert dist.packages == ["sampledf", "sampledf._gen"]
    modules = {(package, module) for package, module, _ in command.find_all_modules()}
    assert ("sampledf._gen", "energy_derivatives") in modules


def test_hatch_hook_with_a_named_config(
    tmp_path: Path, forget_sampledf: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``config = ...`` in the hook's table names the file; the function is a file
    of the package (imported as part of it), and the module becomes an artifact."""
    from difgen.integrations.hatch_hook import DifgenBuildHook

    project = sample_project(tmp_path, "hatchling")
    (project / "tools").mkdir()
    (project / "tools" / "difgen.toml").write_text(
        '[difgen]\noutput_dir = "../src/sampledf"\n\n[[module]]\n'
        'name = "energy_derivatives"\nfunction = "../src/sampledf/model.py:energy"\n'
        'backend = "trace"\noperators = ["gradient"]\ninput = { shape = [3] }\n'
    )

    def hook(config: object) -> DifgenBuildHook:
        return DifgenBuildHook(
            str(project), {"config": config}, None, None, str(tmp_path), "wheel"
        )

    build_data: dict[str, list[str]] = {"artifacts": []}
    hook("tools/difgen.toml").initialize("standard", build_data)
    assert build_data["artifacts"] == ["/" + GENERATED.as_posix()]
    assert (project / GENERATED).is_file()
    assert "energy_derivatives: missing; generating it" in capsys.readouterr().err
    hook("tools/difgen.toml").initialize("standard", build_data)
    assert "1 generated module up to date" in capsys.readouterr().err
    with pytest.raises(TypeError, match="config must be a path"):
        hook(3).initialize("standard", {"artifacts": []})
