"""Incremental builds: a module whose inputs are unchanged is skipped without
tracing, and ``difgen check`` decides by the same record."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import difgen
from difgen import incremental
from difgen.api import Action, Status
from difgen.cli import main
from difgen.config import load_config
from difgen.errors import WriteError

HELPER = """\
SCALE = 2.0


def square(x):
    return x * x
"""

FUNCTIONS = """\
import numpy as np

import helper
from weights import load


def alpha(x):
    return np.sum(helper.SCALE * helper.square(x))


def beta(x):
    return np.sum(load() * x)
"""

WEIGHTS = """\
from pathlib import Path

import numpy as np


def load():
    return np.loadtxt(Path(__file__).with_name("weights.txt"))
"""

CONFIG = """\
[difgen]
output_dir = "generated"

[[module]]
name = "alpha"
function = "functions.py:alpha"
backend = "trace"
operators = ["gradient"]
input = { shape = [3] }

[[module]]
name = "beta"
function = "functions.py:beta"
backend = "trace"
operators = ["gradient"]
input = { shape = [3] }
"""


@pytest.fixture(autouse=True)
def _forget_project_modules() -> Iterator[None]:
    """The projects' modules (helper, pkg...) leave sys.modules with their test:
    another test's project may have modules of the same names."""
    yield
    for name in ("helper", "weights", "pkg", "pkg.model", "pkg.consts"):
        sys.modules.pop(name, None)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "functions.py").write_text(FUNCTIONS)
    (tmp_path / "weights.py").write_text(WEIGHTS)
    (tmp_path / "weights.txt").write_text("1.0 2.0 3.0\n")
    (tmp_path / "difgen.toml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(incremental.CACHE_ENV, str(tmp_path.parent / "difgen-cache"))
    for name in ("helper", "weights"):  # another test's project of the same names
        monkeypatch.delitem(sys.modules, name, raising=False)
    difgen.build("difgen.toml")
    return tmp_path


def actions(**options: bool) -> dict[str, Action]:
    return {m.name: m.action for m in difgen.build("difgen.toml", **options).modules}


def traced_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make loading any function fail: a skipped module must not load it."""

    def refuse(spec: object) -> None:
        raise AssertionError("loaded a function")

    monkeypatch.setattr(difgen.api, "load_function", refuse)


def test_an_unchanged_build_skips_every_module_without_tracing(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    traced_nothing(monkeypatch)
    result = difgen.build("difgen.toml")
    assert [(m.action, m.reason) for m in result.modules] == [
        (Action.SKIPPED, "up to date")
    ] * 2
    assert result.written == ()
    assert difgen.check("difgen.toml").ok  # by the same record: no tracing either
    assert main(["build", "difgen.toml"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"skipped {Path('generated/alpha.py')} (up to date)",
        f"skipped {Path('generated/beta.py')} (up to date)",
    ]


def test_force_generates_every_module(project: Path) -> None:
    assert actions(force=True) == {"alpha": Action.UNCHANGED, "beta": Action.UNCHANGED}
    assert main(["build", "--force", "-q", "difgen.toml"]) == 0


def test_the_record_names_the_sources_and_the_data_file(project: Path) -> None:
    config = load_config("difgen.toml")
    beta = incremental._read(incremental.record_path(config, config.modules[1]))
    assert beta is not None
    assert sorted(Path(p).name for p in beta["files"]) == [
        "functions.py",
        "helper.py",
        "weights.py",
        "weights.txt",
    ]
    # the records stay out of the project (git, sdists and wheels never see them)
    where = incremental.record_path(config, config.modules[1])
    assert where.is_file() and not where.is_relative_to(project)
    assert sorted(p.name for p in project.iterdir() if p.name != "__pycache__") == [
        "difgen.toml",
        "functions.py",
        "generated",
        "helper.py",
        "weights.py",
        "weights.txt",
    ]


def test_an_edited_helper_rebuilds_the_modules_that_use_it(project: Path) -> None:
    (project / "helper.py").write_text(HELPER.replace("2.0", "3.0"))
    assert not difgen.check("difgen.toml").modules[0].ok  # stale, as the build says
    # beta's functions.py imports helper too: conservative, it is generated again
    assert actions() == {"alpha": Action.WRITTEN, "beta": Action.UNCHANGED}
    assert actions() == {"alpha": Action.SKIPPED, "beta": Action.SKIPPED}


def test_an_edited_data_file_rebuilds_its_module(project: Path) -> None:
    (project / "weights.txt").write_text("1.0 2.0 4.0\n")
    assert actions()["beta"] is Action.WRITTEN


def test_an_edited_module_of_a_function_it_calls_rebuilds(project: Path) -> None:
    (project / "weights.py").write_text(
        WEIGHTS.replace("np.loadtxt(", "2 * np.loadtxt(")
    )
    assert actions()["beta"] is Action.WRITTEN


def test_a_touched_but_unchanged_file_changes_nothing(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("helper.py", "functions.py", "weights.txt", "difgen.toml"):
        os.utime(project / name, (1e9, 1e9))
    traced_nothing(monkeypatch)
    assert actions() == {"alpha": Action.SKIPPED, "beta": Action.SKIPPED}


def test_an_edited_config_entry_rebuilds_that_module_only(project: Path) -> None:
    text = (project / "difgen.toml").read_text()
    edited = text.replace(
        'operators = ["gradient"]', 'operators = ["gradient", "hvp"]', 1
    )
    (project / "difgen.toml").write_text(edited)
    assert actions() == {"alpha": Action.WRITTEN, "beta": Action.SKIPPED}
    # a key that changes no generated text (verify's domain, the time limit)
    more = edited.replace(
        '[[module]]\nname = "beta"', '[[module]]\nname = "beta"\ntimeout = 60'
    )
    (project / "difgen.toml").write_text(more)
    assert actions() == {"alpha": Action.SKIPPED, "beta": Action.SKIPPED}


def test_a_changed_generator_rebuilds_every_module(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [name for name, _ in incremental.generator_files()]
    assert "templates/module.py.j2" in names
    assert "templates/c/runtime.c" in names
    assert "difgen/targets/numpy/printer.py" in names
    monkeypatch.setattr(incremental, "generator_digest", lambda: "another difgen")
    # no record holds: check re-traces (same SOURCE_HASH), the build regenerates
    assert difgen.check("difgen.toml").ok
    assert actions() == {"alpha": Action.UNCHANGED, "beta": Action.UNCHANGED}


def test_a_deleted_module_is_generated_again(project: Path) -> None:
    (project / "generated" / "alpha.py").unlink()
    assert difgen.check("difgen.toml").modules[0].status is Status.MISSING
    result = difgen.build("difgen.toml")
    assert [(m.action, m.reason) for m in result.modules] == [
        (Action.WRITTEN, "new file"),
        (Action.SKIPPED, "up to date"),
    ]


def test_a_hand_edited_module_is_regenerated(project: Path) -> None:
    path = project / "generated" / "alpha.py"
    original = path.read_text()
    path.write_text(original.replace("def gradient(", "def gradient_(", 1))
    assert difgen.check("difgen.toml").modules[0].status is Status.EDITED
    assert actions()["alpha"] is Action.WRITTEN  # difgen's file: overwritten
    assert path.read_text() == original


def test_a_foreign_file_in_the_way_is_still_refused(project: Path) -> None:
    path = project / "generated" / "alpha.py"
    path.write_text("# my own module\n")
    with pytest.raises(WriteError, match="not written by difgen"):
        difgen.build("difgen.toml")
    assert path.read_text() == "# my own module\n"


def test_an_unreadable_record_is_no_record(project: Path) -> None:
    config = load_config("difgen.toml")
    incremental.record_path(config, config.modules[0]).write_text("{not json")
    assert actions() == {"alpha": Action.UNCHANGED, "beta": Action.SKIPPED}


def test_project_files_follow_package_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("pkg", "pkg.model", "pkg.consts"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setenv(incremental.CACHE_ENV, str(tmp_path / "cache"))
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "consts.py").write_text("K = 2.0\n")
    (package / "model.py").write_text(textwrap.dedent("""\
            import numpy as np

            from .consts import K


            def f(x):
                return np.sum(K * x)
            """))
    (tmp_path / "difgen.toml").write_text(
        CONFIG.split("[[module]]")[0]
        + '[[module]]\nname = "m"\nfunction = "pkg.model:f"\nbackend = "trace"\n'
        'operators = ["gradient"]\ninput = { shape = [2] }\n'
    )
    difgen.build(tmp_path / "difgen.toml")
    config = load_config(tmp_path / "difgen.toml")
    record = incremental._read(incremental.record_path(config, config.modules[0]))
    assert record is not None
    assert sorted(Path(p).name for p in record["files"]) == ["consts.py", "model.py"]
    (package / "consts.py").write_text("K = 3.0\n")
    (result,) = difgen.build(tmp_path / "difgen.toml").modules
    assert result.action is Action.WRITTEN


def test_an_environment_variable_read_at_import_is_an_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(incremental.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("DIFGEN_TEST_OFFSET", "1.5")
    (tmp_path / "fn.py").write_text(
        "import os\n\nimport numpy as np\n\n"
        'OFFSET = float(os.environ["DIFGEN_TEST_OFFSET"])\n'
        'SCALE = float(os.getenv("DIFGEN_TEST_UNSET", "2"))\n\n\n'
        "def f(x):\n    return np.sum(SCALE * x**2 + OFFSET * x)\n"
    )
    (tmp_path / "difgen.toml").write_text(
        CONFIG.split("[[module]]")[0]
        + '[[module]]\nname = "m"\nfunction = "fn.py:f"\nbackend = "trace"\n'
        'operators = ["gradient"]\ninput = { shape = [2] }\n'
    )
    config = tmp_path / "difgen.toml"
    difgen.build(config)
    spec = load_config(config).modules[0]
    record = incremental._read(incremental.record_path(load_config(config), spec))
    assert record is not None
    assert record["environ"] == {"DIFGEN_TEST_OFFSET": "1.5", "DIFGEN_TEST_UNSET": None}
    assert [m.action for m in difgen.build(config).modules] == [Action.SKIPPED]
    monkeypatch.setenv("DIFGEN_TEST_OFFSET", "2.5")
    assert not difgen.check(config).ok  # stale, as the build finds it
    assert [m.action for m in difgen.build(config).modules] == [Action.WRITTEN]
    monkeypatch.setenv("DIFGEN_TEST_UNSET", "2")  # set now: an input too
    assert [m.action for m in difgen.build(config).modules] == [Action.UNCHANGED]
