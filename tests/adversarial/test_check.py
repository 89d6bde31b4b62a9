"""Class 6: ``difgen check`` is a trustworthy gate.

After a successful build, each row changes one thing a user might change (the
function, a helper it imports, a data file read at import, the environment, the
config, the generated file itself) and runs ``difgen check``. It must say "up to
date" (exit 0) exactly when the generated module still computes what the user's
function computes, and otherwise exit 1 naming the module as stale, edited by hand
or foreign. ``check`` itself never writes.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator

import pytest

from .adversarial_support import Project, module_block, rows

FUNCTION = """\
import os

import numpy as np

import helper
from pkg import consts

DATA = np.loadtxt(os.path.join(os.path.dirname(__file__), "data.txt"))
with open(os.path.join(os.path.dirname(__file__), "scale.txt")) as handle:
    SCALE = float(handle.read())
OFFSET = float(os.environ.get("ADV_OFFSET", "0.5"))


def f(x):
    return np.sum(helper.K * DATA * x * x) + consts.C * SCALE * np.sum(x) + OFFSET * x[0]


def g(x):
    return np.sum(x * x * x)
"""
HELPER = "K = 3.0\n\n\ndef unused():\n    return 0\n"
CONSTS = "C = 2.0\n"


_HELPERS = ("helper", "pkg", "pkg.consts")


def _forget_imports() -> None:
    """Every difgen command is a new process for the user: the helper modules a
    previous command imported must not linger in this process's sys.modules."""
    for name in _HELPERS:
        sys.modules.pop(name, None)


@pytest.fixture(autouse=True)
def _fresh_imports() -> Iterator[None]:
    _forget_imports()
    yield
    _forget_imports()


def _project(project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    """The user's project, built: fn.py, helper.py, pkg/consts.py, data files."""
    monkeypatch.delenv("ADV_OFFSET", raising=False)
    project.write("fn.py", FUNCTION)
    project.write("helper.py", HELPER)
    project.write("pkg/__init__.py", "")
    project.write("pkg/consts.py", CONSTS)
    project.write("data.txt", "1.0\n2.0\n3.0\n")
    project.write("scale.txt", "1.5\n")
    project.config(
        module_block(
            operators=["value_and_gradient", "hessian"], backend="trace", emit="vector"
        )
    )
    result = project.build()
    assert result.status == 0, result.err
    _forget_imports()
    return project


def _replace(relative: str, old: str, new: str) -> Callable[[Project], None]:
    def change(project: Project) -> None:
        path = project.root / relative
        text = path.read_text()
        assert old in text, (old, relative)
        path.write_text(text.replace(old, new, 1))

    return change


def _generated_body_edit(project: Project) -> None:
    """Change one number inside a generated function body (by hand)."""
    path = project.output()
    text = path.read_text()
    body = (
        text.index("def gradient") if "def gradient" in text else text.index("def f(")
    )
    match = re.compile(r"\d+\.\d+").search(text, body)
    assert match is not None
    number = float(match.group()) + 1.0
    path.write_text(text[: match.start()] + repr(number) + text[match.end() :])


def _delete_function(project: Project) -> None:
    path = project.output()
    text = path.read_text()
    start = text.index("\ndef hessian")
    end = text.find("\ndef ", start + 1)
    path.write_text(text[:start] + (text[end:] if end != -1 else "\n"))


def _truncate(fraction: float) -> Callable[[Project], None]:
    def change(project: Project) -> None:
        data = project.output().read_bytes()
        project.output().write_bytes(data[: int(len(data) * fraction)])

    return change


def _keep_header(project: Project) -> None:
    """Only the docstring and the constants survive (SOURCE_HASH included)."""
    text = project.output().read_text()
    project.output().write_text(text[: text.index("\ndef ")] + "\n")


def _crlf(project: Project) -> None:
    path = project.root / "fn.py"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))


def _touch(project: Project) -> None:
    path = project.root / "fn.py"
    stat = path.stat()
    os.utime(path, (stat.st_atime + 100, stat.st_mtime + 100))


def _check_twice(project: Project) -> None:
    assert project.check().status == 0
    _forget_imports()


def _foreign(text: str) -> Callable[[Project], None]:
    def change(project: Project) -> None:
        project.output().write_text(text)

    return change


def _copied_header(project: Project) -> None:
    """A user's own code under a copy of the generated header and SOURCE_HASH."""
    text = project.output().read_text()
    head = text[: text.index("__all__")]
    project.output().write_text(head + "def f(x):\n    return 0.0\n")


def _other_module_file(project: Project) -> None:
    """A difgen file built for another function is put at the target."""
    project.config(
        module_block(
            function="fn.py:g",
            operators=["value_and_gradient", "hessian"],
            backend="trace",
            emit="vector",
        )
    )
    assert project.build().status == 0
    _forget_imports()
    generated = project.output().read_text()
    project.config(
        module_block(
            operators=["value_and_gradient", "hessian"], backend="trace", emit="vector"
        )
    )
    project.output().write_text(generated)


def _config_change(old: str, new: str) -> Callable[[Project], None]:
    return _replace("difgen.toml", old, new)


def _remove_output(project: Project) -> None:
    project.output().unlink()


def _remove_output_dir(project: Project) -> None:
    project.output().unlink()
    project.output().parent.rmdir()


# (id, change, expected: "up to date" or the word of the state)
CHANGES: list[tuple[str, Callable[[Project], None], str]] = [
    ("nothing", lambda project: None, "up to date"),
    ("check_twice", _check_twice, "up to date"),
    ("crlf_function_file", _crlf, "up to date"),
    ("touch_function_file", _touch, "up to date"),
    (
        "unrelated_file",
        lambda project: project.write("notes.txt", "hello\n"),
        "up to date",
    ),
    ("rebuild", lambda project: project.build() and None, "up to date"),
    ("function_constant", _replace("fn.py", "x[0]\n", "x[1]\n"), "stale"),
    ("function_of_config", _config_change("fn.py:f", "fn.py:g"), "stale"),
    ("operators", _config_change('"hessian"]', '"hessian", "hvp"]'), "stale"),
    ("backend", _config_change('backend = "trace"', 'backend = "sympy"'), "stale"),
    ("input_shape", _config_change("shape = [3]", "shape = [4]"), "stale"),
    (
        "source_hash_line",
        _replace("out/mod.py", 'SOURCE_HASH = "', 'SOURCE_HASH = "0'),
        "foreign",  # without its hash line, difgen cannot tell it is its own
    ),
    ("helper_constant", _replace("helper.py", "K = 3.0", "K = 4.0"), "stale"),
    ("package_constant", _replace("pkg/consts.py", "C = 2.0", "C = -2.0"), "stale"),
    ("data_file_loadtxt", _replace("data.txt", "2.0", "7.0"), "stale"),
    ("data_file_open", _replace("scale.txt", "1.5", "2.5"), "stale"),
    ("generated_body_number", _generated_body_edit, "edit"),
    ("generated_function_deleted", _delete_function, "edit"),
    (
        "generated_line_appended",
        lambda project: project.output().write_text(
            project.output().read_text() + "X = 1\n"
        ),
        "edit",
    ),
    ("truncated_half", _truncate(0.5), ""),
    ("truncated_to_header", _keep_header, ""),
    ("truncated_to_nothing", _truncate(0.0), ""),
    ("other_module_file", _other_module_file, "stale"),
    ("output_removed", _remove_output, "missing"),
    ("output_dir_removed", _remove_output_dir, "missing"),
    ("user_file_at_target", _foreign("def mine(x):\n    return x\n"), "foreign"),
    (
        "lookalike_header",
        _foreign('"""Generated by difgenerous hands, my own code."""\n\nX = 1\n'),
        "foreign",
    ),
    ("copied_header_and_hash", _copied_header, ""),
]


@pytest.mark.parametrize(("name", "change", "expected"), rows(CHANGES))
def test_check_after_change(
    project: Project,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    change: Callable[[Project], None],
    expected: str,
) -> None:
    _project(project, monkeypatch)
    change(project)
    _forget_imports()
    before = project.snapshot()
    result = project.check()
    assert project.snapshot() == before, "check wrote something"
    assert "Traceback" not in result.err
    if expected == "up to date":
        assert result.status == 0, (result.out, result.err)
        assert "1 module up to date" in result.out
        return
    assert result.status == 1, (result.out, result.err)
    assert "up to date" not in result.out
    line = next((line for line in result.out.splitlines() if "mod" in line), "")
    assert os.path.join("out", "mod.py") in line, result.out
    assert expected in line, result.out


def test_check_after_environment_change(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The function's constant comes from the environment at import time."""
    _project(project, monkeypatch)
    monkeypatch.setenv("ADV_OFFSET", "2.5")
    _forget_imports()
    result = project.check()
    assert result.status == 1 and "stale" in result.out, result.out


def test_check_when_function_now_fails(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error loading the function is a message (exit 1), never "up to date"."""
    _project(project, monkeypatch)
    (project.root / "helper.py").write_text("raise RuntimeError('broken helper')\n")
    _forget_imports()
    result = project.check()
    assert result.status == 1
    assert "Traceback" not in result.err
    said = result.out + result.err  # the module's line says why it no longer builds
    assert "broken helper" in said and "difgen.toml:" in said
