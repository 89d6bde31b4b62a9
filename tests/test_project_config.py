"""Config where Python projects keep it: [tool.difgen] in pyproject.toml, finding
the config, and functions inside the project's packages (src layout, relative
imports)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from difgen.cli import main
from difgen.config import find_config, load_config
from difgen.errors import ConfigError
from difgen.hashing import spec_fingerprint
from difgen.load import load_function
from test_config import BAD_CONFIGS, FN_SOURCE, MODULE

PROJECT = '[project]\nname = "demo"\nversion = "0.1"\n\n'
SHIFT = PROJECT.count("\n")


def as_pyproject(text: str) -> str:
    """A difgen.toml text as the same config in pyproject.toml, below [project]."""
    text = re.sub(r"^\[difgen\]", "[tool.difgen]", text, flags=re.MULTILINE)
    text = re.sub(r"^\[(\[?)module", r"[\1tool.difgen.module", text, flags=re.MULTILINE)
    return PROJECT + text


def as_pyproject_message(expected: str) -> str:
    expected = expected.replace("[[module]]", "[[tool.difgen.module]]")
    expected = expected.replace("in [difgen]", "in [tool.difgen]")
    return re.sub(
        r"(at line )(\d+)",
        lambda m: m.group(1) + str(int(m.group(2)) + SHIFT),
        expected,
    )


# A top-level key of pyproject.toml is not difgen's business.
PYPROJECT_CASES = [case for case in BAD_CONFIGS if case[0] != "top-level-key"]


@pytest.fixture(autouse=True)
def forget_user_modules() -> Iterator[None]:
    """Each test imports its own ``fnmod`` / ``mypkg`` from its own directory."""
    names = ("fnmod", "mypkg", "otherpkg")
    for name in [n for n in sys.modules if n.split(".")[0] in names]:
        del sys.modules[name]
    yield
    for name in [n for n in sys.modules if n.split(".")[0] in names]:
        del sys.modules[name]


@pytest.mark.parametrize(
    "text, line, expected",
    [case[1:] for case in PYPROJECT_CASES],
    ids=[case[0] for case in PYPROJECT_CASES],
)
def test_bad_pyproject_config_points_into_pyproject(
    tmp_path: Path, text: str, line: int | None, expected: str
) -> None:
    """Every error of difgen.toml, with the line where it is in pyproject.toml."""
    (tmp_path / "fn.py").write_text(FN_SOURCE)
    (tmp_path / "fnmod.py").write_text(FN_SOURCE)
    (tmp_path / "broken.py").write_text("x = 1\ny = 1 / 0\n")
    path = tmp_path / "pyproject.toml"
    path.write_text(as_pyproject(text))
    with pytest.raises(ConfigError) as info:
        for spec in load_config(path).modules:
            load_function(spec)
    message = str(info.value)
    shifted = None if line is None else line + SHIFT
    where = f"{path}:{shifted}: " if shifted is not None else f"{path}: "
    assert message.startswith(where), message
    assert as_pyproject_message(expected) in message, message
    assert info.value.line == shifted


@pytest.mark.parametrize(
    "text, line, expected",
    [
        ("[tool.difgen]\nfoo = 1\n", 2, "unknown key 'foo' in [tool.difgen]; expected"),
        ("[tool]\ndifgen = 3\n", 2, "'tool.difgen' must be a table: [tool.difgen]"),
        ("[tool.black]\nline-length = 88\n", None, "no [tool.difgen] table"),
    ],
)
def test_pyproject_specific_errors(
    tmp_path: Path, text: str, line: int | None, expected: str
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PROJECT + text)
    with pytest.raises(ConfigError, match=re.escape(expected)) as info:
        load_config(path)
    assert info.value.line == (None if line is None else line + SHIFT)


def test_pyproject_and_difgen_toml_read_the_same(tmp_path: Path) -> None:
    (tmp_path / "fn.py").write_text(FN_SOURCE)
    text = '[difgen]\noutput_dir = "gen"\n\n' + MODULE + "batch = 2\n"
    (tmp_path / "difgen.toml").write_text(text)
    (tmp_path / "pyproject.toml").write_text(as_pyproject(text))
    toml = load_config(tmp_path / "difgen.toml")
    pyproject = load_config(tmp_path / "pyproject.toml")
    assert toml.output_dir == pyproject.output_dir == tmp_path / "gen"
    (a,), (b,) = toml.modules, pyproject.modules
    assert spec_fingerprint(a) == spec_fingerprint(b)  # same SOURCE_HASH
    assert (a.line + SHIFT, a.line_of("batch") + SHIFT) == (b.line, b.line_of("batch"))


def test_find_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        find_config(tmp_path)
    assert str(info.value) == (
        f"{tmp_path}: no difgen.toml and no pyproject.toml with a [tool.difgen] "
        "table here; create one, or name the config file"
    )
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(PROJECT)
    with pytest.raises(ConfigError, match=r"no difgen\.toml and no pyproject\.toml"):
        find_config(tmp_path)
    pyproject.write_text(as_pyproject(MODULE))
    assert find_config(tmp_path) == pyproject
    (tmp_path / "difgen.toml").write_text(MODULE)
    with pytest.raises(ConfigError) as info:
        find_config(tmp_path)
    assert str(info.value).startswith(f"{pyproject}:{SHIFT + 1}: both difgen.toml and")
    pyproject.write_text("[project\n")  # broken, but difgen.toml is the config
    assert find_config(tmp_path) == tmp_path / "difgen.toml"
    (tmp_path / "difgen.toml").unlink()
    with pytest.raises(ConfigError, match=r"pyproject.toml:1: "):
        find_config(tmp_path)


def test_cli_without_config_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"difgen: error: {Path.cwd()}: no difgen.toml and no pyproject.toml with a "
        "[tool.difgen] table here; create one, or name the config file\n"
    )
    (tmp_path / "fn.py").write_text(FN_SOURCE)
    (tmp_path / "pyproject.toml").write_text(as_pyproject(MODULE))
    assert main(["check"]) == 1
    out, err = capsys.readouterr()
    assert err == "difgen: using pyproject.toml [tool.difgen]\n"
    assert out.splitlines() == [
        f"{Path('generated/seed.py')}: seed: missing",
        "1 of 1 modules need attention; run: difgen build",
    ]


def write_package(root: Path, name: str = "mypkg", scale: float = 2.0) -> None:
    """A package whose function reaches a helper by a relative import."""
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text(f"def scale(x):\n    return {scale} * x\n")
    (package / "model.py").write_text(
        "from .helpers import scale\n\n\ndef f(x):\n    return scale(x) * x\n"
    )


def module_config(function: str) -> str:
    return MODULE.replace('"fn.py:f"', f'"{function}"')


@pytest.mark.parametrize(
    "layout, function",
    [
        ("src", "mypkg.model:f"),
        ("flat", "mypkg.model:f"),
        ("src", "src/mypkg/model.py:f"),
        ("flat", "mypkg/model.py:f"),
    ],
)
def test_functions_in_the_project_packages(
    tmp_path: Path, layout: str, function: str
) -> None:
    write_package(tmp_path / "src" if layout == "src" else tmp_path)
    path = tmp_path / "pyproject.toml"
    path.write_text(as_pyproject(module_config(function)))
    before = list(sys.path)
    (spec,) = load_config(path).modules
    fn = load_function(spec)
    assert fn(3.0) == 18.0
    assert fn.__module__ == "mypkg.model"  # imported as part of its package
    assert sys.path == before


def test_lone_file_with_relative_import_says_why(tmp_path: Path) -> None:
    (tmp_path / "fn.py").write_text("from .helpers import scale\n")
    (tmp_path / "difgen.toml").write_text(MODULE)
    (spec,) = load_config(tmp_path / "difgen.toml").modules
    with pytest.raises(ConfigError, match="attempted relative import with no known"):
        load_function(spec)


def test_file_of_a_package_shadowed_by_another_copy(tmp_path: Path) -> None:
    write_package(tmp_path / "installed", scale=5.0)
    sys.path.insert(0, str(tmp_path / "installed"))
    try:
        import mypkg.model  # noqa: F401 (another copy, imported first)
    finally:
        sys.path.pop(0)
    write_package(tmp_path / "project")
    (tmp_path / "project" / "difgen.toml").write_text(module_config("mypkg/model.py:f"))
    (spec,) = load_config(tmp_path / "project" / "difgen.toml").modules
    with pytest.raises(ConfigError, match="another copy of the package"):
        load_function(spec)
