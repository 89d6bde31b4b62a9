"""Class 7: all-or-nothing writes, really.

A build writes every module or none: when writing module 2 of 3 fails (disk full,
permission, Ctrl-C) module 1 is not already rewritten and no temporary file is left
behind; temporary files of a killed build are removed by the next build. A target
difgen did not write (a user's file, a look-alike header, a directory, a FIFO, a
symlink to a user's file) is never overwritten and never makes the build hang, and
a file saved at the target while the build runs is not lost.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from .adversarial_support import (
    Project,
    assert_refused,
    line_of,
    module_block,
    rows,
    subprocess_env,
)

FUNCTIONS = """\
import numpy as np

SCALE = 1.0


def a(x):
    return np.sum(x * x) * SCALE


def b(x):
    return np.sum(np.sin(x)) * SCALE


def c(x):
    return np.sum(x ** 3) * SCALE
"""
NAMES = ("a", "b", "c")


def _three_modules(project: Project) -> None:
    project.write("fn.py", FUNCTIONS)
    project.config(
        *(
            module_block(name=n, function=f"fn.py:{n}", backend="trace", emit="vector")
            for n in NAMES
        )
    )


def _change_functions(project: Project) -> None:
    """Every module now has new content to write."""
    path = project.root / "fn.py"
    path.write_text(path.read_text().replace("SCALE = 1.0", "SCALE = 2.0"))


def _outputs(project: Project) -> dict[str, bytes]:
    """Every file in out/ (temporary files included) by name."""
    out = project.root / "out"
    if not out.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


@contextmanager
def _fail_on(
    project: Project, functions: tuple[str, ...], nth: int, error: BaseException
) -> Iterator[list[str]]:
    """Make the ``nth`` call of ``os.<function>`` that touches out/ raise ``error``.

    Renames are matched by their destination, creations by their path: whichever
    way difgen stages and renames, the nth file operation in out/ fails.
    """
    out = str(project.root / "out")
    calls: list[str] = []
    originals = {name: getattr(os, name) for name in functions}

    def wrap(name: str) -> Callable[..., Any]:
        original = originals[name]

        def patched(*args: Any, **kwargs: Any) -> Any:
            target = args[1] if name in ("replace", "rename") else args[0]
            inside = isinstance(target, (str, os.PathLike)) and os.path.abspath(
                target
            ).startswith(out)
            creates = name != "open" or (len(args) > 1 and args[1] & os.O_CREAT)
            if inside and creates:
                calls.append(f"{name} {target}")
                if len(calls) == nth:
                    raise error
            return original(*args, **kwargs)

        return patched

    for name in functions:
        setattr(os, name, wrap(name))
    try:
        yield calls
    finally:
        for name, original in originals.items():
            setattr(os, name, original)


RENAMES = ("replace", "rename")
CREATES = ("open",)
DISK_FULL = OSError(errno.ENOSPC, "No space left on device")
DENIED = PermissionError(errno.EACCES, "Permission denied")

# (id, functions to fault, which call, error, whether out/ held an older build)
FAULTS: list[tuple[str, tuple[str, ...], int, BaseException, bool]] = [
    ("rename-2-of-3-disk-full-fresh", RENAMES, 2, DISK_FULL, False),
    ("rename-2-of-3-disk-full-rebuild", RENAMES, 2, DISK_FULL, True),
    ("rename-3-of-3-denied-rebuild", RENAMES, 3, DENIED, True),
    ("rename-3-of-3-denied-fresh", RENAMES, 3, DENIED, False),
    ("create-2-of-3-disk-full-rebuild", CREATES, 2, DISK_FULL, True),
    ("create-3-of-3-denied-fresh", CREATES, 3, DENIED, False),
    ("rename-1-of-3-disk-full-rebuild", RENAMES, 1, DISK_FULL, True),
    ("create-1-of-3-denied-rebuild", CREATES, 1, DENIED, True),
]


@pytest.mark.parametrize(("name", "functions", "nth", "error", "rebuild"), rows(FAULTS))
def test_failed_write_changes_nothing(
    project: Project,
    name: str,
    functions: tuple[str, ...],
    nth: int,
    error: BaseException,
    rebuild: bool,
) -> None:
    """exit 1 with a message; out/ holds exactly what it held before: the older
    build's modules (or nothing), and no temporary file."""
    _three_modules(project)
    if rebuild:
        assert project.build().status == 0
        _change_functions(project)
    before = _outputs(project)
    with _fail_on(project, functions, nth, error) as calls:
        result = project.build()
    assert len(calls) >= nth, f"the fault was never injected: {calls}"
    assert_refused(result, "out", "")
    assert _outputs(project) == before


def test_ctrl_c_during_writes_changes_nothing(project: Project) -> None:
    """KeyboardInterrupt at the second rename: exit 130, the older build intact."""
    _three_modules(project)
    assert project.build().status == 0
    _change_functions(project)
    before = _outputs(project)
    with _fail_on(project, RENAMES, 2, KeyboardInterrupt()):
        result = project.build()
    assert result.status == 130
    assert "nothing was written" in result.err
    assert _outputs(project) == before


def test_generation_failure_of_module_2_writes_nothing(project: Project) -> None:
    """A trace error in module b: module a (generated first) is not written."""
    _three_modules(project)
    path = project.root / "fn.py"
    text = path.read_text().replace("np.sin(x)", "np.unique(x)")
    path.write_text(text)
    result = project.build()
    assert_refused(result, f"{path}:{line_of(text, 'np.unique')}", "np.unique")
    assert _outputs(project) == {}


KILLED_BUILD = """\
import os, signal, sys
import difgen.cli

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

os.replace = die
os.rename = die
difgen.cli.main(["build", "difgen.toml"])
"""


def test_leftovers_of_killed_build_are_removed(project: Project) -> None:
    """A build SIGKILLed just before renaming leaves its staged files; the next
    build removes them, and out/ holds exactly the three modules."""
    import subprocess

    _three_modules(project)
    killed = subprocess.run(  # noqa: PLW1510 - the exit status is the point
        [sys.executable, "-c", KILLED_BUILD],
        cwd=project.root,
        env=subprocess_env(),
        capture_output=True,
        timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL
    result = project.build()
    assert result.status == 0, result.err
    assert sorted(_outputs(project)) == [f"{n}.py" for n in NAMES]


def test_users_own_files_in_output_dir_survive(project: Project) -> None:
    """Cleaning up is limited to difgen's own temporary files."""
    _three_modules(project)
    keep = {
        ".gitignore": b"*.pyc\n",
        "notes.tmp": b"mine\n",
        ".a.py.mine": b"mine too\n",
        "README": b"generated code lives here\n",
    }
    for name, data in keep.items():
        (project.root / "out").mkdir(exist_ok=True)
        (project.root / "out" / name).write_bytes(data)
    assert project.build().status == 0
    outputs = _outputs(project)
    for name, data in keep.items():
        assert outputs.get(name) == data, name


# (id, bytes of a user's file at out/a.py): none of them was written by difgen.
FOREIGN: list[tuple[str, bytes]] = [
    ("plain_code", b"def mine(x):\n    return x\n"),
    ("lookalike_header", b'"""Generated by difgenerous hands. Mine."""\nX = 1\n'),
    ("lookalike_header_short", b'"""Generated by difgen-like tool"""\n'),
    (
        "marker_without_hash",
        b'"""Generated by difgen 0.1.0: mine, no hash."""\n\nX = 1\n',
    ),
    ("bom_then_header", '\ufeff"""Generated by difgen 0.1.0"""\n'.encode()),
    ("binary", bytes(range(256))),
    ("leading_blank_line", b'\n"""Generated by difgen 0.1.0: derivatives."""\n'),
]


@pytest.mark.parametrize(("name", "data"), rows(FOREIGN))
def test_foreign_file_is_never_overwritten(
    project: Project, name: str, data: bytes
) -> None:
    _three_modules(project)
    target = project.root / "out" / "a.py"
    target.parent.mkdir()
    target.write_bytes(data)
    before = project.snapshot()
    result = project.build()
    assert_refused(
        result, "a.py", "not written by difgen", before=before, after=project.snapshot()
    )


def test_symlink_to_users_file_is_not_followed(project: Project) -> None:
    """out/a.py is a symlink to the user's own module: refused, both intact."""
    _three_modules(project)
    mine = project.write("mine.py", "def mine(x):\n    return x\n")
    (project.root / "out").mkdir()
    (project.root / "out" / "a.py").symlink_to(mine)
    before = project.snapshot()
    result = project.build()
    assert_refused(result, "a.py", "", before=before, after=project.snapshot())
    assert (project.root / "out" / "a.py").is_symlink()


def test_directory_at_target_is_an_error(project: Project) -> None:
    _three_modules(project)
    (project.root / "out" / "a.py").mkdir(parents=True)
    result = project.build()
    assert_refused(result, "a.py", "")
    assert (project.root / "out" / "a.py").is_dir()
    assert sorted(_outputs(project)) == []


def test_output_dir_is_a_file(project: Project) -> None:
    _three_modules(project)
    project.write("out", "not a directory\n")
    before = project.snapshot()
    result = project.build()
    assert_refused(result, "out", "", before=before, after=project.snapshot())


@contextmanager
def _unblocking(fifo: Path, after: float) -> Iterator[list[float]]:
    """If the build still runs ``after`` seconds from now, open the FIFO's other
    end until it finishes, so that a build blocked on it ends (and the case fails
    instead of hanging the suite). Yields a list that gets the time it intervened."""
    done = threading.Event()
    intervened: list[float] = []

    def watch() -> None:
        if done.wait(after):
            return
        intervened.append(after)
        while not done.is_set():
            for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                with suppress(OSError):
                    os.close(os.open(fifo, flags))
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield intervened
    finally:
        done.set()
        thread.join()


@pytest.mark.parametrize(
    "command",
    [
        "build",
        "check",
    ],
)
def test_fifo_at_target_is_an_error_not_a_hang(project: Project, command: str) -> None:
    """exit 1 within 2 s (in-process; a watchdog unblocks a hung build)."""
    _three_modules(project)
    (project.root / "out").mkdir()
    fifo = project.root / "out" / "a.py"
    os.mkfifo(fifo)
    start = time.monotonic()
    with _unblocking(fifo, after=2.0) as intervened:
        result = project.cli(command, "difgen.toml")
    assert not intervened, f"difgen {command} blocked on the FIFO"
    assert time.monotonic() - start < 2.0
    assert result.status == 1
    assert "Traceback" not in result.err
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def _save_during(project: Project, hook: str, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """Write a user's file at out/a.py at the first call of ``hook`` in the build."""
    mine = b"# the user saved this file during the build\n"
    target = project.root / "out" / "a.py"
    saved: list[bool] = []

    def save() -> None:
        if not saved:
            saved.append(True)
            target.parent.mkdir(exist_ok=True)
            if target.exists():
                target.unlink()
            target.write_bytes(mine)

    if hook == "generation":
        import difgen.pipeline

        original = difgen.pipeline.generate_module

        def generate(spec: Any, config: Any, fn: Any) -> str:
            text = original(spec, config, fn)
            if spec.name == "c":
                save()
            return text

        monkeypatch.setattr(difgen.pipeline, "generate_module", generate)
    else:
        for name in ("fsync", "fchmod", "chmod"):
            original_os = getattr(os, name)

            def patched(*args: Any, _original: Any = original_os, **kwargs: Any) -> Any:
                save()
                return _original(*args, **kwargs)

            monkeypatch.setattr(os, name, patched)
    return mine


@pytest.mark.parametrize(
    "hook",
    [
        "generation",
        "staging",
    ],
)
@pytest.mark.parametrize("rebuild", [False, True])
def test_file_saved_during_build_is_not_lost(
    project: Project, monkeypatch: pytest.MonkeyPatch, hook: str, rebuild: bool
) -> None:
    """The user's file saved at a target while difgen builds survives, and the
    build reports it (exit 1) instead of claiming to have written the module."""
    _three_modules(project)
    if rebuild:
        assert project.build().status == 0
        _change_functions(project)
    mine = _save_during(project, hook, monkeypatch)
    result = project.build()
    assert (project.root / "out" / "a.py").read_bytes() == mine
    assert_refused(result, "a.py", "")


def test_unchanged_module_is_not_rewritten(project: Project) -> None:
    """A second identical build leaves the files alone, mtime included."""
    _three_modules(project)
    assert project.build().status == 0
    stamps = {n: (project.root / "out" / f"{n}.py").stat().st_mtime_ns for n in NAMES}
    time.sleep(0.01)
    result = project.build()
    assert result.status == 0
    assert result.out.count("(up to date)") == 3  # not even generated
    result = project.build("--force")
    assert result.status == 0
    assert result.out.count("unchanged") == 3
    assert stamps == {
        n: (project.root / "out" / f"{n}.py").stat().st_mtime_ns for n in NAMES
    }


def test_rewrite_keeps_file_mode(project: Project) -> None:
    _three_modules(project)
    assert project.build().status == 0
    target = project.root / "out" / "a.py"
    target.chmod(0o640)
    _change_functions(project)
    assert project.build().status == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_selected_module_only(project: Project) -> None:
    """``--module b`` writes b and nothing else."""
    _three_modules(project)
    result = project.build("--module", "b")
    assert result.status == 0
    assert sorted(_outputs(project)) == ["b.py"]
