"""difgen in a package's build, in pre-commit and from Python, end to end.

The sample package ``tests/integration_package`` gets its ``pyproject.toml`` from
the snippets of the guide page "Using difgen in your project" (docs/guide/project.md), so its
copy-paste text is exactly what is built here. Everything runs offline: the build
backends are the ones installed with difgen's test extras (``--no-build-isolation``).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from difgen.targets.c.compiling import EXTENSION_SUFFIX
from difgen.version import VERSION
from documentation import snippet as documentation_snippet

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
    """The code block after ``<!-- snippet: NAME -->`` in the documentation."""
    return documentation_snippet(name)


def sample_project(directory: Path, backend: str) -> Path:
    """A fresh copy of the sample package, configured with the guide's snippets."""
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

    # The guide's local hook is the same hook, run with the difgen installed.
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
        code = compile(readme_snippet("python-api"), "project.md", "exec")
        exec(code, {})  # noqa: S102 (the guide's own text, run as a user would)
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


C_MODULE_ENTRY = """
[[tool.difgen.module]]
name = "energy_c"                        # emit = "c": a module, its C source, an extension
function = "sampledf.model:energy"
backend = "trace"
emit = "c"
operators = ["gradient"]
input = { shape = [3] }
"""

CHECK_COMPILED = """\
import numpy as np
import sampledf.energy_c as m

assert m.COMPILED, m.C_FALLBACK_REASON
x = np.array([0.3, -0.2, 0.5])
sigmoid, softplus = 1 / (1 + np.exp(-x)), np.log1p(np.exp(x))
expected = softplus + x * sigmoid + np.array([x[1] * x[2], x[0] * x[2], x[0] * x[1]])
assert np.allclose(m.gradient(x), expected, rtol=1e-12, atol=0), m.gradient(x)
print("ok")
"""


def c_sample_project(directory: Path, backend: str) -> Path:
    """The sample package with a second module built with ``emit = "c"``."""
    project = sample_project(directory, backend)
    with (project / "pyproject.toml").open("a") as file:
        file.write(C_MODULE_ENTRY)
    return project


@pytest.mark.parametrize("backend", ["setuptools", "hatchling"])
def test_c_module_sdist_carries_source_and_wheel_compiles(
    tmp_path: Path, backend: str, numpy_only: Path
) -> None:
    """pyproject.toml alone (no setup.py): the wheel carries a freshly compiled
    extension and is tagged for the platform; the sdist carries the C source and
    never a compiled file, even when an old one lies in the tree."""
    project = c_sample_project(tmp_path, backend)
    stale = project / "src/sampledf" / ("energy_c__c" + EXTENSION_SUFFIX)
    stale.write_bytes(b"not an extension: a wheel must compile its own")

    output = run([sys.executable, "-c", SDIST[backend]], cwd=project).stdout
    sdist = output.split()[-1]
    with tarfile.open(project / "dist" / sdist) as archive:
        names = archive.getnames()
    assert "sampledf-0.1.0/src/sampledf/energy_c__c.c" in names
    if backend == "hatchling":  # setuptools' sdist lists sources, not stray files
        assert not [n for n in names if n.endswith(".so")], names

    wheel = build_wheel(project, tmp_path)
    assert not wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        (extension,) = [n for n in archive.namelist() if n.endswith(".so")]
        assert extension.startswith("sampledf/energy_c__c."), extension
        assert b"not an extension" not in archive.read(extension)
    assert run_installed(wheel, tmp_path, numpy_only, CHECK_COMPILED) == "ok\n"


def test_setup_py_without_the_extension_stops_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget_sampledf: None
) -> None:
    """A setup.py project that forgets ``ext_modules=extensions()`` would get a
    pure-Python wheel silently running the Python operators: it stops, saying
    which module and what to add."""
    from setuptools import Distribution
    from setuptools.errors import SetupError

    from difgen.integrations.setuptools import build_py

    project = c_sample_project(tmp_path, "setuptools")
    pyproject = project / "pyproject.toml"
    cmdclass = '[tool.setuptools.cmdclass]\nbuild_py = "difgen.integrations.setuptools.build_py"\n'
    assert cmdclass in pyproject.read_text()  # setup.py names build_py instead
    pyproject.write_text(pyproject.read_text().replace(cmdclass, ""))
    monkeypatch.chdir(project)
    dist = Distribution(
        {
            "name": "sampledf",
            "packages": ["sampledf"],
            "package_dir": {"": "src"},
            "script_name": "setup.py",
        }
    )
    with pytest.raises(SetupError, match=r"energy_c__c .*ext_modules=") as caught:
        build_py(dist).ensure_finalized()
    assert "sampledf.energy_c__c" in str(caught.value)


def test_check_reports_an_uncompiled_extension(tmp_path: Path) -> None:
    """``check`` says an emit = "c" module runs its Python operators when its
    extension is not built; ``--compiled`` makes that a failure."""
    project = c_sample_project(tmp_path, "setuptools")
    scripts = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"}

    def difgen(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["difgen", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    assert difgen("build").returncode == 0
    check = difgen("check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "energy_c: up to date, but its extension is not compiled" in check.stdout
    assert (
        check.stdout.splitlines()[-1]
        == "2 modules up to date (1 without its extension)"
    )
    strict = difgen("check", "--compiled")
    assert strict.returncode == 1
    assert "1 of 2 modules have no compiled extension" in strict.stdout
    assert difgen("build", "--compile").returncode == 0
    assert (
        difgen("check", "--compiled").stdout.splitlines()[-1] == "2 modules up to date"
    )


def test_check_missing_ok_builds_gitignored_modules(tmp_path: Path) -> None:
    """A layout that gitignores its generated modules: ``check --missing-ok``
    generates the absent ones in a temporary folder (writing nothing in the
    tree), passes when they build and fails, naming the error, when not."""
    project = sample_project(tmp_path, "hatchling")
    scripts = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"}

    def difgen(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["difgen", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    assert difgen("check").returncode == 1  # missing
    passed = difgen("check", "--missing-ok")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "energy_derivatives: not in the tree; it builds" in passed.stdout
    assert passed.stdout.splitlines()[-1] == (
        "1 module up to date (1 not in the tree, and it builds)"
    )
    assert not (project / GENERATED).exists()
    model = project / "src/sampledf/model.py"
    model.write_text(model.read_text() + "\n\ndef energy(x):\n    return x.nope\n")
    failed = difgen("check", "--missing-ok")
    assert failed.returncode == 1
    assert "missing, and it does not build" in failed.stdout
    assert not (project / GENERATED).exists()


def test_check_names_a_dependency_missing_where_difgen_runs(tmp_path: Path) -> None:
    """A pre-commit environment without the project's dependencies: ``check``
    says the module was not checked and what to install, not "stale ... run:
    difgen build"; ``build`` names the package and the hook's option."""
    project = sample_project(tmp_path, "hatchling")
    scripts = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"}

    def difgen(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["difgen", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    assert difgen("build").returncode == 0
    helpers = project / "src/sampledf/helpers.py"
    helpers.write_text(
        "import difgen_absent_dependency  # noqa\n" + helpers.read_text()
    )
    check = difgen("check")
    assert check.returncode == 1
    assert (
        "energy_derivatives: not checked: the function's code imports "
        "'difgen_absent_dependency', which is neither in the project nor "
        "installed where difgen runs"
    ) in check.stdout
    assert "stale" not in check.stdout
    assert "list them in its additional_dependencies" in check.stdout
    build = difgen("build")
    assert build.returncode == 1
    assert "install 'difgen_absent_dependency' where difgen runs" in build.stderr


def test_readme_remote_pre_commit_snippet() -> None:
    """The guide's remote hook names a hook of this repository, the release tag
    that this version is, and the option that installs the project's imports."""
    (repo,) = yaml.safe_load(readme_snippet("pre-commit-remote"))["repos"]
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert repo["rev"] == f"v{VERSION}"
    (hook,) = repo["hooks"]
    assert hook["id"] in {h["id"] for h in hooks}
    assert hook["additional_dependencies"]


WATCH_SCRIPT = """\
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import sampledf.energy_derivatives
print([str(w.message) for w in caught if "editable install" in str(w.message)])
"""


def test_editable_install_warns_when_its_module_is_stale(
    tmp_path: Path,
    numpy_only: Path,
    monkeypatch: pytest.MonkeyPatch,
    forget_sampledf: None,
) -> None:
    """An editable wheel (hatchling) carries difgen's watcher: importing a
    generated module after an edit of the function warns, naming the file and
    ``difgen build``; without an edit, or after a change that leaves the
    derivatives as they are (difgen is asked when it is importable), not."""
    project = sample_project(tmp_path, "hatchling")
    with (project / "pyproject.toml").open("a") as file:
        # src/ put on sys.path by a .pth: the mode that needs no `editables`
        # package (which pip would install into an isolated build environment)
        file.write('\n[tool.hatch.build]\ndev-mode-dirs = ["src"]\n')
    output = run(
        [
            sys.executable,
            "-c",
            "import hatchling.build as b; print(b.build_editable('dist'))",
        ],
        cwd=project,
    ).stdout
    wheel = project / "dist" / output.split()[-1]
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "difgen_watch_sampledf.pth" in names, names
        watcher = archive.read("_difgen_watch_sampledf.py").decode()
    assert run_installed(wheel, tmp_path, numpy_only, WATCH_SCRIPT) == "[]\n"

    model = project / "src/sampledf/model.py"
    model.write_text(model.read_text().replace("x[0] * x[1] * x[2]", "x[0] * x[1]"))
    later = (project / GENERATED).stat().st_mtime + 10
    os.utime(model, (later, later))
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(numpy_only)}
    fresh = tmp_path / "fresh" / "bin" / "python"
    printed = run([fresh, "-c", WATCH_SCRIPT], cwd=tmp_path / "elsewhere", env=env)
    (message,) = eval(printed.stdout)
    assert "sampledf.energy_derivatives is stale" in message
    assert "model.py changed after it was generated" in message
    assert "run difgen build" in message

    # Where difgen is importable, the watcher asks it: a comment is no change.
    model.write_text(model.read_text().replace("x[0] * x[1]", "x[0] * x[1] * x[2]"))
    model.write_text(model.read_text() + "\n# a comment\n")
    namespace: dict[str, object] = {"__name__": "_difgen_watch_sampledf"}
    exec(compile(watcher, "_difgen_watch_sampledf.py", "exec"), namespace)  # noqa: S102
    monkeypatch.syspath_prepend(str(project / "src"))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            importlib.import_module("sampledf.energy_derivatives")
        assert not [w for w in caught if "editable install" in str(w.message)]
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_Watch"]


WATCH_TWICE_SCRIPT = """\
import sys
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import sampledf.energy_derivatives
    del sys.modules["sampledf.energy_derivatives"]
    import sampledf.energy_derivatives
print([(w.category.__name__, str(w.message)) for w in caught
       if "editable install" in str(w.message)])
"""


def test_setuptools_editable_install_warns_when_its_module_is_stale(
    tmp_path: Path, numpy_only: Path
) -> None:
    """A setuptools editable wheel (``editable_wheel``, which runs difgen's
    ``build_py`` in editable mode) carries the same watcher as hatchling's:
    importing a generated module after an edit of the function warns once per
    process, naming the module and ``difgen build``; a normal wheel of the same
    project carries no watcher."""
    project = sample_project(tmp_path, "setuptools")

    def backend(call: str) -> zipfile.ZipFile:
        script = f"import setuptools.build_meta as b; print(b.{call}('dist'))"
        output = run([sys.executable, "-c", script], cwd=project).stdout
        return zipfile.ZipFile(project / "dist" / output.split()[-1])

    with backend("build_wheel") as archive:
        assert IN_WHEEL in archive.namelist()
        assert not [n for n in archive.namelist() if "difgen_watch" in n]
    with backend("build_editable") as archive:
        names = archive.namelist()
        assert "difgen_watch_sampledf.pth" in names, names
        assert "_difgen_watch_sampledf.py" in names, names
        assert IN_WHEEL not in names  # served from the source tree
        wheel = Path(str(archive.filename))
    assert run_installed(wheel, tmp_path, numpy_only, WATCH_TWICE_SCRIPT) == "[]\n"

    model = project / "src/sampledf/model.py"
    model.write_text(model.read_text().replace("x[0] * x[1] * x[2]", "x[0] * x[1]"))
    later = (project / GENERATED).stat().st_mtime + 10
    os.utime(model, (later, later))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(numpy_only),
        "PYTHONNOUSERSITE": "1",
    }
    fresh = tmp_path / "fresh" / "bin" / "python"
    printed = run(
        [fresh, "-c", WATCH_TWICE_SCRIPT], cwd=tmp_path / "elsewhere", env=env
    )
    ((category, message),) = eval(printed.stdout)  # once, though imported twice
    assert category == "RuntimeWarning"
    assert "sampledf.energy_derivatives is stale" in message
    assert "model.py changed after it was generated" in message
    assert "run difgen build" in message
