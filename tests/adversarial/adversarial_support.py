"""Helpers of the adversarial suite (issue 8); conftest.py documents the classes."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from difgen.cli import main

_counter = itertools.count()

SOURCE = "fn.py"
"""The file holding the user's functions in every project."""

OUTPUT_DIR = "out"

# ---------------------------------------------------------------------------- marks


def rows(
    table: Sequence[tuple[Any, ...]],
    id_of: Callable[[tuple[Any, ...]], str] = lambda row: str(row[0]),
) -> list[Any]:
    """``pytest.param`` per row, its id from the row (by default the first field),
    so that table-driven cases keep one row per case and ids are unique."""
    params = [pytest.param(*row, id=id_of(row)) for row in table]
    ids = [p.id for p in params]
    assert len(set(ids)) == len(ids), f"duplicate case ids in {ids}"
    return params


# ------------------------------------------------------------------------- configs


def toml_value(value: Any) -> str:
    """A Python value as TOML (strings JSON-quoted, which TOML accepts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
        )
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def module_block(
    name: str = "mod",
    function: str = f"{SOURCE}:f",
    operators: Sequence[str] = ("gradient",),
    shape: Sequence[int] = (3,),
    contexts: Sequence[tuple[str, Sequence[int]]] = (),
    **options: Any,
) -> str:
    """One ``[[module]]`` table, one key per line (so each key has its own line)."""
    lines = [
        "[[module]]",
        f"name = {toml_value(name)}",
        f"function = {toml_value(function)}",
        f"operators = {toml_value(list(operators))}",
        f"input = {{ shape = {toml_value(list(shape))} }}",
    ]
    if contexts:
        tables = [{"name": n, "shape": list(s)} for n, s in contexts]
        lines.append(f"contexts = {toml_value(tables)}")
    lines += [f"{key} = {toml_value(value)}" for key, value in options.items()]
    return "\n".join(lines) + "\n"


def config_text(*blocks: str, output_dir: str = OUTPUT_DIR) -> str:
    """A whole difgen.toml: the ``[difgen]`` table, then the module blocks."""
    head = f"[difgen]\noutput_dir = {toml_value(output_dir)}\n"
    return "\n".join([head, *blocks])


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first line of ``text`` containing ``needle``."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in the config text")


# ------------------------------------------------------------------------ projects


@dataclass(frozen=True)
class Result:
    """What one run of the command printed and returned.

    ``err`` leaves out the per-module progress lines (``difgen: [1/2] name: ...``)
    that a build prints on stderr when it is not a terminal: the cases are about
    the error message.
    """

    status: int
    out: str
    err: str

    def __post_init__(self) -> None:
        lines = self.err.splitlines(keepends=True)
        kept = "".join(line for line in lines if not PROGRESS.match(line))
        object.__setattr__(self, "err", kept)


PROGRESS = re.compile(r"difgen: \[\d+/\d+\] ")


class Project:
    """A user's project in ``root`` (the working directory): fn.py, difgen.toml."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.root = root
        self.capsys = capsys

    def write(self, relative: str, text: str) -> Path:
        """A file of the project (parent directories created)."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def source(self, text: str, name: str = SOURCE) -> Path:
        """The user's function file (``textwrap.dedent`` applied)."""
        return self.write(name, textwrap.dedent(text).lstrip("\n"))

    def config(self, *blocks: str, output_dir: str = OUTPUT_DIR) -> str:
        """Write difgen.toml from module blocks; return its text for line_of."""
        text = config_text(*blocks, output_dir=output_dir)
        self.write("difgen.toml", text)
        return text

    def output(self, name: str = "mod") -> Path:
        """Where module ``name`` is generated."""
        return self.root / OUTPUT_DIR / f"{name}.py"

    def cli(self, *argv: str) -> Result:
        """``difgen ARGV`` in-process; an uncaught exception fails the case."""
        self.capsys.readouterr()
        try:
            status = main(list(argv))
        except BaseException as exc:  # what a user would see as a traceback
            raise AssertionError(
                f"difgen {' '.join(argv)} raised {type(exc).__name__}: {exc} "
                "(a Python traceback for the user)"
            ) from exc
        out, err = self.capsys.readouterr()
        return Result(status, out, err)

    def build(self, *extra: str) -> Result:
        """``difgen build difgen.toml EXTRA`` in-process."""
        return self.cli("build", "difgen.toml", *extra)

    def check(self) -> Result:
        """``difgen check difgen.toml`` in-process."""
        return self.cli("check", "difgen.toml")

    def popen(self, *argv: str, **kwargs: Any) -> subprocess.Popen[str]:
        """``python -m difgen ARGV`` in the project, output piped, text mode, with
        Ctrl-C's signal as a terminal delivers it (see :func:`_as_in_a_terminal`)."""
        return subprocess.Popen(
            [sys.executable, "-m", "difgen", *argv],
            cwd=self.root,
            stdout=kwargs.pop("stdout", subprocess.PIPE),
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
            # one signal call between fork and exec: no lock a thread could hold
            preexec_fn=_as_in_a_terminal,  # noqa: PLW1509
            **kwargs,
        )

    def run(self, *argv: str, timeout: float = 30) -> Result:
        """``python -m difgen ARGV`` as a subprocess, killed after ``timeout``."""
        process = self.popen(*argv)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            raise AssertionError(
                f"difgen {' '.join(argv)} hung for {timeout} s"
            ) from None
        return Result(process.returncode, out, err)

    def interrupt(
        self, *argv: str, after: str, delay: float = 0.0, timeout: float = 30
    ) -> Result:
        """Run ``difgen ARGV``; ``delay`` seconds after the file ``after`` appears
        (the user's function creates it), send SIGINT as Ctrl-C would."""
        process = self.popen(*argv)
        marker = self.root / after
        try:
            waited = 0.0
            while not marker.exists() and process.poll() is None and waited < timeout:
                waited += 0.02
                time.sleep(0.02)
            time.sleep(delay)
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            raise AssertionError(f"difgen {' '.join(argv)} ignored Ctrl-C") from None
        return Result(process.returncode, out, err)

    def snapshot(self) -> dict[str, bytes]:
        """Every file below the root (bytecode caches aside), by relative path."""
        files = {}
        for path in sorted(self.root.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            files[path.relative_to(self.root).as_posix()] = path.read_bytes()
        return files


def _as_in_a_terminal() -> None:
    """SIGINT back to its default in the child: a test suite started in the
    background of a non-interactive shell (``cmd &``, as some CI runners do) has
    SIGINT ignored, the child would inherit that, and the Ctrl-C tests would test
    the runner instead of difgen."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def subprocess_env() -> dict[str, str]:
    """The test's environment, with difgen importable however it was installed."""
    env = dict(os.environ)
    import difgen

    package_root = str(Path(difgen.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [package_root, env.get("PYTHONPATH")])
    )
    return env


def import_file(path: Path) -> ModuleType:
    """Import a Python file under a fresh name (generated modules and references)."""
    name = f"_adversarial_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------- assertions


def assert_refused(
    result: Result,
    where: str,
    *phrases: str,
    before: dict[str, bytes] | None = None,
    after: dict[str, bytes] | None = None,
) -> None:
    """Exit 1, one ``difgen: error:`` message naming ``where`` and each phrase
    (case-insensitive), no traceback, and (given snapshots) no file changed."""
    assert result.status == 1, (result.status, result.err)
    assert "Traceback" not in result.err, result.err
    assert result.err.startswith("difgen: error: "), result.err
    assert re.search(re.escape(where) + r"(?!\d)", result.err), (where, result.err)
    for phrase in phrases:
        assert phrase.lower() in result.err.lower(), (phrase, result.err)
    if before is not None:
        assert after == before, "the refused command changed files"


def finite_differences(
    fn: Callable[[np.ndarray], Any], x: np.ndarray, h: float = 1e-6
) -> np.ndarray:
    """Central differences of ``fn`` at ``x``: shape out.shape + x.shape. ``fn``
    gets a fresh copy each call, so functions that write into their input work."""
    x = np.asarray(x, dtype=np.float64)
    base = np.asarray(fn(x.copy()), dtype=np.float64)
    jac = np.zeros(base.shape + x.shape)
    for index in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[index] += h
        down[index] -= h
        diff = np.asarray(fn(up), dtype=np.float64) - np.asarray(
            fn(down), dtype=np.float64
        )
        jac[(Ellipsis,) + index] = diff / (2 * h)
    return jac


# -------------------------------------------------------------- shared built modules


class BuildFailed(AssertionError):
    """The build of a module the case expected to succeed exited non-zero."""


@dataclass(frozen=True)
class Built:
    """A generated module and the user's function it was generated from."""

    module: ModuleType
    reference: Callable[..., Any]
    path: Path
    text: str

    def call_reference(self, x: Any, *contexts: Any) -> Any:
        """The user's function run by NumPy itself, on copies of the arguments."""
        copies = [np.array(a, dtype=np.float64, copy=True) for a in (x, *contexts)]
        return self.reference(*copies)


Builder = Callable[..., Built]


def make_builder(tmp_path_factory: pytest.TempPathFactory) -> Builder:
    """``build(source, function="f", shape=(3,), operators=(...), contexts=(),
    **options)``: run ``difgen build`` on a one-module project once per distinct
    argument set in the session, import the result; BuildFailed with the message
    if the build exits non-zero."""
    cache: dict[Any, Built | BuildFailed] = {}

    def get(
        source: str,
        function: str = "f",
        shape: Sequence[int] = (3,),
        operators: Sequence[str] = ("gradient",),
        contexts: Sequence[tuple[str, Sequence[int]]] = (),
        **options: Any,
    ) -> Built:
        source = textwrap.dedent(source).lstrip("\n")
        key = (
            source,
            function,
            tuple(shape),
            tuple(operators),
            tuple((n, tuple(s)) for n, s in contexts),
            tuple(sorted(options.items())),
        )
        if key not in cache:
            cache[key] = _build_one(
                tmp_path_factory.mktemp("built"),
                source,
                module_block(
                    "mod", f"{SOURCE}:{function}", operators, shape, contexts, **options
                ),
                function,
            )
        found = cache[key]
        if isinstance(found, BuildFailed):
            raise found
        return found

    return get


def _build_one(
    root: Path, source: str, block: str, function: str
) -> Built | BuildFailed:
    """Build in-process as the CLI would; a failed build is kept as BuildFailed so
    that every case sharing it fails with the same message, without rebuilding."""
    (root / SOURCE).write_text(source)
    config = root / "difgen.toml"
    config.write_text(config_text(block))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["build", str(config)])
    if status != 0:
        return BuildFailed(f"difgen build exited {status}: {err.getvalue()}")
    path = root / OUTPUT_DIR / "mod.py"
    reference = getattr(import_file(root / SOURCE), function)
    return Built(import_file(path), reference, path, path.read_text())


@contextlib.contextmanager
def quiet_numpy() -> Iterator[None]:
    """NumPy's own division/overflow warnings are expected where NumPy gives inf/nan."""
    with np.errstate(all="ignore"):
        yield
