"""Class 9 of the adversarial suite (issue 20, item 6): trust at the edges.

Every case is one way a build, ``check``, the compiler or the loading of a module
could claim success it did not have, raise a traceback, hang or leave files behind:
each must instead give the right answer, or a ``difgen: error:`` naming the file
and what to do, with nothing half-written.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import difgen
import documentation
from difgen import api, budget
from difgen.errors import DifgenError, UsageError
from difgen.targets.c import compiling

from .adversarial_support import (
    OUTPUT_DIR,
    Project,
    config_text,
    finite_differences,
    import_file,
    line_of,
    module_block,
    rows,
    subprocess_env,
)

F = """
import numpy as np


def f(x):
    return np.sum(np.sin(x) * x)
"""


def _simple(project: Project, **options: object) -> None:
    project.source(F)
    project.config(module_block(**options))  # type: ignore[arg-type]


# ------------------------------------------------- API arguments: timeout and seed

BAD_TIMEOUTS = rows(
    [
        ("minus_one", -1),
        ("minus_half", -0.5),
        ("minus_tiny", -1e-300),
        ("zero", 0),
        ("zero_float", 0.0),
        ("minus_zero", -0.0),
        ("nan", math.nan),
        ("minus_inf", -math.inf),
        ("string", "5"),
        ("true", True),
        ("list", [5]),
        ("complex", 1j),
    ]
)


@pytest.mark.parametrize(("case", "timeout"), BAD_TIMEOUTS)
def test_build_refuses_a_bad_timeout(
    project: Project, case: str, timeout: object
) -> None:
    """Not an ``itimer`` error from deep inside: a UsageError naming the value,
    before anything is generated or written."""
    _simple(project)
    before = project.snapshot()
    with pytest.raises(UsageError, match="timeout must be a positive number"):
        difgen.build(project.root / "difgen.toml", timeout=timeout)  # type: ignore[arg-type]
    assert project.snapshot() == before


@pytest.mark.parametrize("timeout", [1e-3 * 10**4, 60, math.inf, 2.5])
def test_build_accepts_a_good_timeout(project: Project, timeout: float) -> None:
    _simple(project)
    result = difgen.build(project.root / "difgen.toml", timeout=timeout)
    assert [m.action.value for m in result.modules] == ["written"]


BAD_SEEDS = rows(
    [
        ("minus_one", -1),
        ("minus_big", -(2**63)),
        ("minus_huge", -(2**80)),
        ("float", 1.5),
        ("float_whole", 2.0),
        ("string", "3"),
        ("true", True),
        ("none", None),
    ]
)


@pytest.mark.parametrize(("case", "seed"), BAD_SEEDS)
def test_verify_refuses_a_bad_seed(project: Project, case: str, seed: object) -> None:
    _simple(project)
    difgen.build(project.root / "difgen.toml")
    with pytest.raises(UsageError, match="seed must be a non-negative integer"):
        difgen.verify(project.root / "difgen.toml", seed=seed)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["-1", "-0x1", "1.5", "one", "", "-99999999999999"])
def test_cli_verify_refuses_a_bad_seed(project: Project, text: str) -> None:
    """A usage error (exit 2, the option named), not a ValueError traceback."""
    _simple(project)
    project.build()
    result = project.cli("verify", "difgen.toml", f"--seed={text}")
    assert result.status == 2
    assert "--seed" in result.err and "non-negative integer" in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("seed", [0, 1, 2**32, 2**63, 2**100])
def test_verify_accepts_any_non_negative_seed(project: Project, seed: int) -> None:
    _simple(project)
    difgen.build(project.root / "difgen.toml")
    result = difgen.verify(project.root / "difgen.toml", seed=seed)
    assert result.ok and result.seed == seed


# ------------------------------------------- the C extension: compile, check, load

C_OPTIONS = {"emit": "c", "backend": "trace"}


@pytest.fixture(scope="module")
def compiled_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with one ``emit = "c"`` module, built and compiled once."""
    root = tmp_path_factory.mktemp("compiled")
    (root / "fn.py").write_text(textwrap.dedent(F).lstrip("\n"))
    (root / "difgen.toml").write_text(config_text(module_block(**C_OPTIONS)))
    result = difgen.build(root / "difgen.toml", compile=True)
    assert len(result.compiled) == 1
    return root


@pytest.fixture
def compiled(
    compiled_template: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> Project:
    """The compiled project copied (mtimes kept) into this case's directory."""
    shutil.copytree(compiled_template, project.root, dirs_exist_ok=True)
    monkeypatch.setenv("DIFGEN_QUIET_FALLBACK", "1")
    return project


def _extension(project: Project) -> Path:
    return compiling.extension_path(project.root / OUTPUT_DIR, "mod")


def _c_source(project: Project) -> Path:
    return project.root / OUTPUT_DIR / "mod__c.c"


def _leftovers(project: Project) -> list[str]:
    return sorted(
        p.name for p in (project.root / OUTPUT_DIR).iterdir() if ".tmp" in p.name
    )


def _gradient_ok(project: Project) -> None:
    """The module's gradient, compiled, equals the derivative of sin(x) * x."""
    module = import_file(project.output())
    assert module.COMPILED, module.C_FALLBACK_REASON
    x = np.array([0.3, -1.2, 2.5])
    np.testing.assert_allclose(
        module.gradient(x), np.sin(x) + x * np.cos(x), rtol=1e-14
    )


def test_the_template_is_up_to_date(compiled: Project) -> None:
    assert compiled.check().status == 0
    _gradient_ok(compiled)


FAKE_COMPILERS = rows(
    [
        ("exit_0_no_output", "#!/bin/sh\nexit 0\n", "wrote no extension"),
        ("exit_0_says_done", "#!/bin/sh\necho done\nexit 0\n", "wrote no extension"),
        (
            "exit_0_empty_output",
            '#!/bin/sh\nwhile [ "$1" != -o ]; do shift; done\n: > "$2"\n',
            "wrote no extension",
        ),
        ("exit_1", "#!/bin/sh\necho 'cc: broken' >&2\nexit 1\n", "cc: broken"),
        ("killed", "#!/bin/sh\nkill -9 $$\n", "the C compiler failed"),
        (
            "exit_1_after_output",
            '#!/bin/sh\nwhile [ "$1" != -o ]; do shift; done\necho x > "$2"\nexit 1\n',
            "the C compiler failed",
        ),
    ]
)


@pytest.mark.parametrize(("case", "script", "message"), FAKE_COMPILERS)
def test_a_compiler_that_fails_or_writes_nothing(
    compiled: Project,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    script: str,
    message: str,
) -> None:
    """A CompileError naming the C source, no FileNotFoundError; no temporary
    file left, and the extension already there untouched."""
    fake = compiled.write("fakecc", script)
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    before = _extension(compiled).read_bytes()
    _c_source(compiled).touch()  # so that the extension needs compiling
    result = compiled.build("--compile")
    assert result.status == 1, result.err
    assert result.err.startswith("difgen: error: ") and message in result.err
    assert "mod__c.c" in result.err and "Traceback" not in result.err
    assert _leftovers(compiled) == []
    assert _extension(compiled).read_bytes() == before


def test_a_missing_compiler(compiled: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", str(compiled.root / "no-such-cc"))
    _c_source(compiled).touch()
    result = compiled.build("--compile")
    assert result.status == 1 and "cannot run the C compiler" in result.err
    assert _leftovers(compiled) == []


def _truncate_to(size: float) -> Callable[[Path], None]:
    def change(path: Path) -> None:
        data = path.read_bytes()
        keep = int(size * len(data)) if isinstance(size, float) else size
        keep = keep if keep >= 0 else len(data) + keep
        path.write_bytes(data[:keep])

    return change


def _make_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _make_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("x")


def _dangling_link(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.with_name("nowhere.so"))


def _garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 64)


def _other_hash(path: Path) -> None:
    data = path.read_bytes()
    assert _hash_of(path) in data
    path.write_bytes(data.replace(_hash_of(path), b"0" * 16))


def _hash_of(path: Path) -> bytes:
    module_text = path.parent.joinpath("mod.py").read_text()
    match = re.search(r'^C_HASH = "([0-9a-f]{16})"$', module_text, re.MULTILINE)
    assert match is not None
    return match.group(1).encode()


BAD_EXTENSIONS = rows(
    [
        ("empty", _truncate_to(0), "truncated"),
        ("one_byte", _truncate_to(1), "truncated"),
        ("magic_only", _truncate_to(4), "truncated"),
        ("half_header", _truncate_to(32), "truncated"),
        ("header_less_one", _truncate_to(63), "truncated"),
        ("header_only", _truncate_to(64), "truncated"),
        ("program_headers", _truncate_to(200), "truncated"),
        ("one_kib", _truncate_to(1024), "truncated"),
        ("tenth", _truncate_to(0.1), "truncated"),
        ("quarter", _truncate_to(0.25), "truncated"),
        ("half", _truncate_to(0.5), "truncated"),
        ("three_quarters", _truncate_to(0.75), "truncated"),
        ("less_4096", _truncate_to(-4096), "truncated"),
        ("less_100", _truncate_to(-100), "truncated"),
        ("less_one", _truncate_to(-1), "truncated"),
        ("fifo", _make_fifo, "a FIFO"),
        ("directory", _make_directory, "a directory"),
        ("dangling_symlink", _dangling_link, "cannot be read"),
        ("not_elf", _garbage, "another C source"),
        ("other_c_hash", _other_hash, "another C source"),
    ]
)


@pytest.mark.parametrize(("case", "damage", "reason"), BAD_EXTENSIONS)
def test_check_reports_a_bad_extension(
    compiled: Project, case: str, damage: Callable[[Path], None], reason: str
) -> None:
    """Stale, naming the extension and what is wrong, in a second at most: no
    hang on a FIFO, no traceback on a directory, nothing loaded."""
    damage(_extension(compiled))
    start = time.monotonic()
    result = compiled.run("check", "difgen.toml", timeout=20)
    assert time.monotonic() - start < 20
    assert result.status == 1, result.out
    assert "Traceback" not in result.err
    assert _extension(compiled).name in result.out
    assert reason in result.out and "difgen build --compile" in result.out


@pytest.mark.parametrize(
    ("case", "damage", "reason"),
    [
        p
        for p in BAD_EXTENSIONS
        if p.id not in ("fifo", "directory", "dangling_symlink")
    ],
)
def test_build_compile_replaces_a_bad_extension(
    compiled: Project, case: str, damage: Callable[[Path], None], reason: str
) -> None:
    """``--compile`` compiles it again (not "nothing to do" by mtimes), and the
    module then loads its extension and is up to date."""
    damage(_extension(compiled))
    result = compiled.build("--compile")
    assert result.status == 0, result.err
    assert "compiled" in result.out
    assert compiled.check().status == 0
    _gradient_ok(compiled)


NOT_FILES = {
    "fifo": _make_fifo,
    "directory": _make_directory,
    "dangling": _dangling_link,
}


@pytest.mark.parametrize("case", sorted(NOT_FILES))
def test_build_compile_refuses_what_is_not_a_file(compiled: Project, case: str) -> None:
    """A FIFO, directory or dangling link where the extension goes is the user's:
    refused, kept."""
    NOT_FILES[case](_extension(compiled))
    _c_source(compiled).touch()
    result = compiled.run("build", "difgen.toml", "--compile", timeout=30)
    assert result.status == 1
    assert "not a regular file where the extension goes" in result.err
    assert not _extension(compiled).is_file() and os.path.lexists(_extension(compiled))


# ------------------------------------------- signals, dead workers and leftovers

SLOW_COMPILER = """#!/bin/sh
while [ "$1" != -o ]; do shift; done
echo partial > "$2"
exec sleep 60
"""


def _wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def _compile_in_background(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> subprocess.Popen[str]:
    """``difgen build --compile`` with a compiler that writes half its output
    then hangs; returned once the temporary file is there."""
    fake = project.write("slowcc", SLOW_COMPILER)
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    _c_source(project).touch()
    process = project.popen("build", "difgen.toml", "--compile")
    _wait_for(lambda: bool(_leftovers(project)) or process.poll() is not None)
    assert process.poll() is None, process.communicate()
    return process


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)]
)
def test_a_signal_during_compile_leaves_no_temporary_file(
    compiled: Project, monkeypatch: pytest.MonkeyPatch, signum: int, status: int
) -> None:
    before = _extension(compiled).read_bytes()
    process = _compile_in_background(compiled, monkeypatch)
    process.send_signal(signum)
    _, err = process.communicate(timeout=30)
    assert process.returncode == status, err
    assert "Traceback" not in err
    assert _leftovers(compiled) == []
    assert _extension(compiled).read_bytes() == before


@pytest.mark.parametrize("then", ["build", "build_compile"])
def test_the_next_build_removes_what_a_killed_compile_left(
    compiled: Project, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """SIGKILL cannot be caught: its temporary file stays, until the next build
    (with or without --compile) removes it and says so."""
    process = _compile_in_background(compiled, monkeypatch)
    left = _leftovers(compiled)
    compilers = _children(process.pid)
    process.kill()
    process.communicate(timeout=30)
    for pid in compilers:  # the hung compiler, orphaned
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert _leftovers(compiled) == left and len(left) == 1
    monkeypatch.delenv("CC")
    result = compiled.build(*(["--compile"] if then == "build_compile" else []))
    assert result.status == 0, result.err
    assert f"removed leftover {OUTPUT_DIR}/{left[0]}" in result.out
    assert _leftovers(compiled) == []


def _ext_name(pid: object) -> str:
    return f".mod__c{compiling.EXTENSION_SUFFIX}.{pid}.tmp"


LEFTOVER_NAMES = rows(
    [
        ("dead_pid", _ext_name(2**22 + 12345), True),
        ("dead_pid_small", _ext_name(99999999), True),
        ("pid_beyond_any", _ext_name(2**70), False),
        ("another_module", f".other__c{compiling.EXTENSION_SUFFIX}.99999999.tmp", True),
        ("not_an_extension", ".mod.py.99999999.tmp", False),
        ("no_dot", f"mod__c{compiling.EXTENSION_SUFFIX}.99999999.tmp", False),
        ("pid_not_digits", _ext_name("12ab"), False),
        ("no_pid", f".mod__c{compiling.EXTENSION_SUFFIX}..tmp", False),
        ("other_suffix", f".mod__c{compiling.EXTENSION_SUFFIX}.99999999.temp", False),
        ("this_process", _ext_name(os.getpid()), False),
        ("parent_process", _ext_name(os.getppid()), False),
        ("init", _ext_name(1), False),
    ]
)


@pytest.mark.parametrize(("case", "name", "removed"), LEFTOVER_NAMES)
def test_only_a_dead_compilers_leftover_is_removed(
    compiled: Project, case: str, name: str, removed: bool
) -> None:
    """A file of a compiler whose process is gone goes; anything else (a name
    difgen does not use, a live process's file) stays."""
    path = compiled.write(f"{OUTPUT_DIR}/{name}", "partial")
    result = compiled.build()
    assert result.status == 0, result.err
    assert path.exists() is not removed
    assert (f"removed leftover {OUTPUT_DIR}/{name}" in result.out) is removed


def test_a_directory_named_like_a_leftover_stays(compiled: Project) -> None:
    path = compiled.root / OUTPUT_DIR / _ext_name(99999999)
    path.mkdir()
    assert compiled.build().status == 0
    assert path.is_dir()


DYING = rows(
    [
        ("sigkill", "os.kill(os.getpid(), signal.SIGKILL)"),
        ("sigterm", "os.kill(os.getpid(), signal.SIGTERM)"),
        ("abort", "os.abort()"),
        ("segfault", "ctypes.string_at(0)"),
    ]
)


@pytest.mark.parametrize(("case", "death"), DYING)
def test_a_worker_that_dies_under_jobs(project: Project, case: str, death: str) -> None:
    """No BrokenProcessPool traceback: one error naming the modules not built."""
    project.source(f"""
        import ctypes
        import os
        import signal

        import numpy as np


        def good(x):
            return np.sum(x * x)


        def bad(x):
            {death}
            return np.sum(x)
        """)
    project.config(
        module_block("good", function="fn.py:good"),
        module_block("bad", function="fn.py:bad"),
    )
    result = project.run("build", "difgen.toml", "--jobs", "2", timeout=120)
    assert result.status == 1, result.err
    assert result.err.startswith("difgen: error: a worker process ended abruptly")
    assert "'bad'" in result.err and "Traceback" not in result.err
    assert not (project.root / OUTPUT_DIR).exists()


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat_fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat_fields[1]) == pid:
                    found.add(int(entry.name))
    return found


def _running(pid: int) -> bool:
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return False


def test_sigterm_ends_the_workers_of_jobs(project: Project) -> None:
    """SIGTERM to ``build --jobs 2`` ends its workers and the resource tracker
    too, and writes nothing."""
    project.source("""
        import os
        import time

        import numpy as np


        def slow(x):
            open(f"started-{os.getpid()}", "w").close()
            time.sleep(120)
            return np.sum(x)
        """)
    project.config(
        module_block("one", function="fn.py:slow"),
        module_block("two", function="fn.py:slow"),
    )
    process = project.popen("build", "difgen.toml", "--jobs", "2")
    _wait_for(lambda: len(list(project.root.glob("started-*"))) == 2, timeout=120)
    children = _children(process.pid)
    assert len(children) >= 2
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 143, err
    assert "Traceback" not in err
    _wait_for(lambda: not any(_running(pid) for pid in children), timeout=10)
    assert not (project.root / OUTPUT_DIR).exists()


# --------------------------------------------- $CFLAGS reaching setuptools' compile

EXACT = """
import numpy as np


def f(x):
    return np.sum(0.5 * x * x + np.maximum(x, 0.0) * 3.0 - x / 7.0)
"""

SETUP = """
from setuptools import setup

from difgen.integrations.setuptools import extensions

setup(name="fastmath", version="0", packages=[], ext_modules=extensions())
"""

COMPARE = """
import importlib.util, sys
import numpy as np

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

fallback = load("fallback/mod.py", "fallback_mod")
assert not fallback.COMPILED
assert 1e-310 * 1.0 != 0.0
compiled = load("out/mod.py", "compiled_mod")
assert compiled.COMPILED, compiled.C_FALLBACK_REASON
assert 1e-310 * 1.0 != 0.0, "loading the extension set flush-to-zero"
tiny = np.finfo(float).smallest_subnormal
values = [0.0, -0.0, tiny, -tiny, 1e-310, -1e-310, 1.0, -2.5, np.inf, -np.inf, np.nan]
for a in values:
    for b in (0.0, -0.0, 1e-310, np.nan, 3.0):
        x = np.array([a, b, -a])
        for op in ("f", "gradient"):
            want, got = getattr(fallback, op)(x), getattr(compiled, op)(x)
            signs = np.where(np.isnan(want), False, np.signbit(want))
            same = np.array_equal(
                signs, np.where(np.isnan(got), False, np.signbit(got))
            ) and np.array_equal(want, got, equal_nan=True)
            assert same, (op, x, want, got)
print("same")
"""


@pytest.mark.parametrize(
    "cflags",
    [
        "",
        "-ffast-math",
        "-Ofast",
        "-funsafe-math-optimizations",
        "-ffinite-math-only",
        "-fno-signed-zeros",
        "-fassociative-math -fno-signed-zeros -fno-trapping-math",
        "-freciprocal-math",
        "-ffp-contract=fast -O3",
    ],
)
def test_cflags_from_the_environment_do_not_change_the_extension(
    project: Project, cflags: str
) -> None:
    """setuptools puts ``$CFLAGS`` before an extension's own flags: difgen's must
    undo whatever fast-math the environment asks for, or the compiled operators
    differ from the Python ones (and a -ffast-math link sets flush-to-zero for
    the whole process)."""
    project.source(EXACT)
    project.config(module_block(shape=(3,), operators=("f", "gradient"), **C_OPTIONS))
    assert project.build().status == 0
    (project.root / "fallback").mkdir()
    shutil.copy(project.output(), project.root / "fallback" / "mod.py")
    project.write(f"{OUTPUT_DIR}/__init__.py", "")
    project.write("setup.py", SETUP)
    env = {**subprocess_env(), "CFLAGS": cflags, "DIFGEN_QUIET_FALLBACK": "1"}
    built = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert _extension(project).is_file()
    done = subprocess.run(
        [sys.executable, "-c", COMPARE],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and done.stdout == "same\n", done.stderr


# ------------------------------------- an edited C source never becomes "up to date"

C_EDITS = rows(
    [
        ("sin_to_cos", lambda t: t.replace("_sin(x_0)", "_cos(x_0)", 1)),
        ("a_constant", lambda t: t.replace("dg_d[0] = ", "dg_d[0] = 2.0 * ", 1)),
        (
            "a_comment",
            lambda t: t.replace(
                "#define BODY_HASH", "/* mine */\n#define BODY_HASH", 1
            ),
        ),
        ("a_blank_line", lambda t: t.replace("\n\n", "\n\n\n", 1)),
        ("header_text", lambda t: t.replace("DO NOT EDIT", "edited", 1)),
        ("trailing_code", lambda t: t + "static int mine = 1;\n"),
    ]
)


@pytest.mark.parametrize(("case", "edit"), C_EDITS)
def test_an_edited_c_source_is_not_compiled(
    compiled: Project, case: str, edit: Callable[[str], str]
) -> None:
    """The hash line kept, the body changed: compiling it would make an extension
    that claims the module's C_HASH and computes something else. Refused, naming
    the file and the way out; the extension there is untouched."""
    source = _c_source(compiled)
    text = source.read_bytes().decode()
    edited = edit(text)
    assert edited != text
    source.write_bytes(edited.encode())
    before = _extension(compiled).read_bytes()
    with pytest.raises(compiling.CompileError, match="run difgen build"):
        api.compile_extensions(compiled.root / "difgen.toml")
    with pytest.raises(compiling.CompileError, match=re.escape(str(source))):
        compiling.compile_module(compiled.root / OUTPUT_DIR, "mod")
    assert _extension(compiled).read_bytes() == before
    assert compiled.check().status == 1


@pytest.mark.parametrize(("case", "edit"), C_EDITS[:2])
def test_an_extension_compiled_from_an_edited_source_is_stale(
    compiled: Project, case: str, edit: Callable[[str], str]
) -> None:
    """Compiled by hand from the edited source, which ``difgen build`` then
    restores: the extension still names the module's C_HASH, but it is older
    than the C source, so check says stale and --compile replaces it."""
    source = _c_source(compiled)
    original = source.read_text()
    source.write_text(edit(original))
    temp = _extension(compiled).with_name("hand.so")
    command = [*compiling.compiler(), *compiling.CFLAGS, "-fPIC", "-shared"]
    command += [f"-I{d}" for d in compiling.include_dirs()]
    subprocess.run([*command, str(source), "-o", str(temp), "-lm"], check=True)
    os.replace(temp, _extension(compiled))
    os.utime(source, (time.time() - 100, time.time() - 100))
    assert compiled.build().status == 0  # restores the C source
    assert source.read_text() == original
    result = compiled.check()
    assert result.status == 1 and "older than its C source" in result.out
    assert compiled.build("--compile").status == 0
    assert compiled.check().status == 0
    _gradient_ok(compiled)


# ------------------------------------------------- the difgen-build pre-commit hook

HOOK_SITUATIONS = rows(
    [
        ("missing_module", lambda p: None, True),
        ("edited_module", lambda p: _edit_output(p), True),
        ("stale_module", lambda p: _change_function(p), True),
        ("up_to_date", lambda p: _built(p), False),
        ("up_to_date_twice", lambda p: (_built(p), _built(p)), False),
    ]
)


def _built(project: Project) -> None:
    assert project.build().status == 0


def _edit_output(project: Project) -> None:
    _built(project)
    text = project.output().read_text()
    project.output().write_text(text.replace("def gradient", "def gradient_", 1))


def _change_function(project: Project) -> None:
    _built(project)
    project.source(F.replace("np.sin(x) * x", "np.sin(x) * x * 2.0"))


@pytest.mark.parametrize("quiet", [False, True], ids=["loud", "quiet"])
@pytest.mark.parametrize(("case", "prepare", "writes"), HOOK_SITUATIONS)
def test_the_build_hook_fails_when_it_wrote(
    project: Project,
    case: str,
    prepare: Callable[[Project], object],
    writes: bool,
    quiet: bool,
) -> None:
    """pre-commit stops a commit only on a non-zero exit (a new file is no change
    of a tracked one): ``build --exit-code`` exits 1 exactly when it wrote."""
    _simple(project)
    prepare(project)
    argv = ["--exit-code", *(["-q"] if quiet else [])]
    result = project.build(*argv)
    assert result.status == (1 if writes else 0), result.err
    assert ("written; add them" in result.err) is writes
    assert project.check().status == 0
    assert project.build(*argv).status == 0  # the hook's second run passes


def test_the_hook_entry_is_the_one_that_fails() -> None:
    hooks = (Path(__file__).parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "entry: difgen build --exit-code\n" in hooks


# ----------------------------------- loading the user's code: sys.modules, names

HELPER_LAYOUTS = rows(
    [
        (
            "from_import",
            "fn.py:f",
            {"helper.py": "K = {k}\n"},
            "from helper import K\n\n\ndef f(x):\n    return np.sum(K * x * x)\n",
            "fn.py",
        ),
        (
            "module_import",
            "fn.py:f",
            {"helper.py": "K = {k}\n"},
            "import helper\n\n\ndef f(x):\n    return np.sum(helper.K * x * x)\n",
            "fn.py",
        ),
        (
            "helper_of_helper",
            "fn.py:f",
            {"helper.py": "from deep import K\n", "deep.py": "K = {k}\n"},
            "from helper import K\n\n\ndef f(x):\n    return np.sum(K * x * x)\n",
            "fn.py",
        ),
        (
            "helper_function",
            "fn.py:f",
            {"helper.py": "def scale(x):\n    return {k} * x\n"},
            "from helper import scale\n\n\ndef f(x):\n    return np.sum(scale(x) * x)\n",
            "fn.py",
        ),
        (
            "package_relative",
            "pkg.model:f",
            {"pkg/__init__.py": "", "pkg/consts.py": "K = {k}\n"},
            "from .consts import K\n\n\ndef f(x):\n    return np.sum(K * x * x)\n",
            "pkg/model.py",
        ),
        (
            "package_file_form",
            "pkg/model.py:f",
            {"pkg/__init__.py": "", "pkg/consts.py": "K = {k}\n"},
            "from .consts import K\n\n\ndef f(x):\n    return np.sum(K * x * x)\n",
            "pkg/model.py",
        ),
        (
            "src_layout",
            "lib.model:f",
            {"src/lib/__init__.py": "", "src/lib/consts.py": "K = {k}\n"},
            "from lib.consts import K\n\n\ndef f(x):\n    return np.sum(K * x * x)\n",
            "src/lib/model.py",
        ),
        (
            "the_module_itself",
            "pkg.model:f",
            {"pkg/__init__.py": ""},
            "K = {k}\n\n\ndef f(x):\n    return np.sum(K * x * x)\n",
            "pkg/model.py",
        ),
        (
            "package_init",
            "pkg.model:f",
            {"pkg/__init__.py": "K = {k}\n"},
            "from pkg import K\n\n\ndef f(x):\n    return np.sum(K * x * x)\n",
            "pkg/model.py",
        ),
        (
            "subdirectory_file",
            "code/fn.py:f",
            {"code/helper.py": "K = {k}\n"},
            "from helper import K\n\n\ndef f(x):\n    return np.sum(K * x * x)\n",
            "code/fn.py",
        ),
    ]
)


def _write_layout(
    project: Project, files: dict[str, str], main: str, where: str, k: float
) -> None:
    for relative, text in files.items():
        project.write(relative, text.format(k=k))
    project.write(where, "import numpy as np\n" + main.format(k=k))


@pytest.mark.parametrize("entry", ["build", "check", "verify"])
@pytest.mark.parametrize(("case", "function", "files", "main", "where"), HELPER_LAYOUTS)
def test_a_second_call_in_one_process_sees_an_edited_helper(
    project: Project,
    case: str,
    function: str,
    files: dict[str, str],
    main: str,
    where: str,
    entry: str,
) -> None:
    """``difgen.build`` twice in one process (a notebook, a watcher, a test
    suite): the second must see the helper as edited in between, as a new
    process would, not the copy ``sys.modules`` kept."""
    _write_layout(project, files, main, where, 3.0)
    project.config(module_block(function=function))
    config = project.root / "difgen.toml"
    difgen.build(config)
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(import_file(project.output()).gradient(x), 6.0 * x)
    _write_layout(project, files, main, where, 5.0)
    if entry == "check":
        (status,) = [m.status.value for m in difgen.check(config).modules]
        assert status == "stale"
    elif entry == "verify":
        assert not difgen.verify(config).ok  # the module is the old function's
    result = difgen.build(config)
    assert [m.action.value for m in result.modules] == ["written"]
    np.testing.assert_allclose(import_file(project.output()).gradient(x), 10.0 * x)
    assert difgen.check(config).ok


def test_an_unchanged_helper_is_not_imported_again(project: Project) -> None:
    """Nothing changed: the helper module is the same object, not re-executed."""
    project.write(
        "helper.py",
        "import builtins\nbuiltins.difgen_runs = getattr(builtins, 'difgen_runs', 0) + 1\nK = 3.0\n",
    )
    project.source(
        "import numpy as np\nfrom helper import K\n\n\ndef f(x):\n    return np.sum(K * x)\n"
    )
    project.config(module_block())
    import builtins

    before = getattr(builtins, "difgen_runs", 0)
    difgen.build(project.root / "difgen.toml")
    difgen.build(project.root / "difgen.toml")
    assert difgen.check(project.root / "difgen.toml").ok
    assert builtins.difgen_runs == before + 1  # type: ignore[attr-defined]


STDLIB_NAMES = [
    "json",
    "math",
    "random",
    "types",
    "copy",
    "string",
    "typing",
    "inspect",
    "numbers",
    "operator",
    "functools",
    "abc",
    "enum",
    "ast",
    "token",
    "textwrap",
    "re",
    "io",
    "os",
    "time",
    "array",
    "cmath",
    "decimal",
    "fractions",
    "statistics",
    "collections",
    "dataclasses",
    "pickle",
    "queue",
    "signal",
    "code",
    "this",
    "site",
    "platform",
]


@pytest.mark.parametrize("name", STDLIB_NAMES)
def test_a_function_file_named_like_the_standard_library(
    project: Project, name: str
) -> None:
    """While a lone function file runs, its directory is first on sys.path: a
    ``json.py`` there would be what any ``import json`` loads. Refused at the
    ``function`` line, naming the file and the fix; nothing written."""
    project.source(F, name=f"{name}.py")
    text = project.config(module_block(function=f"{name}.py:f"))
    before = project.snapshot()
    result = project.build()
    assert result.status == 1
    assert result.err.startswith(
        f"difgen: error: difgen.toml:{line_of(text, 'function')}:"
    )
    assert f"{name}.py has the name of the standard library's module" in result.err
    assert "rename the file" in result.err
    assert project.snapshot() == before


@pytest.mark.parametrize(
    "name", ["jsonx", "my_json", "json_model", "Math", "randoms", "fn_types"]
)
def test_a_name_near_the_standard_library_builds(project: Project, name: str) -> None:
    project.source(F, name=f"{name}.py")
    project.config(module_block(function=f"{name}.py:f"))
    assert project.build().status == 0
    x = np.array([0.5, -1.0, 2.0])
    gradient = import_file(project.output()).gradient(x)
    np.testing.assert_allclose(gradient, np.sin(x) + x * np.cos(x), rtol=1e-14)


def test_a_package_module_named_like_the_standard_library_builds(
    project: Project,
) -> None:
    """``pkg/json.py`` is imported as ``pkg.json``: it shadows nothing."""
    project.write("pkg/__init__.py", "")
    project.source(F, name="pkg/json.py")
    project.config(module_block(function="pkg/json.py:f"))
    assert project.build().status == 0
    x = np.array([0.5, -1.0, 2.0])
    gradient = import_file(project.output()).gradient(x)
    np.testing.assert_allclose(gradient, np.sin(x) + x * np.cos(x), rtol=1e-14)


# ------------------------------------------ arctan2 in C, at extreme inputs too

ARCTAN2_BODIES = rows(
    [
        ("x_over_constant", "np.sum(np.arctan2(x, 2.0))"),
        ("constant_over_x", "np.sum(np.arctan2(2.0, x))"),
        ("x0_over_x1", "np.arctan2(x[0], x[1]) * x[2]"),
        ("huge_constant", "np.sum(np.arctan2(x, 1e308))"),
        ("subnormal_constant", "np.sum(np.arctan2(5e-324, x))"),
        ("inf_constant", "np.sum(np.arctan2(x, np.inf))"),
        ("scaled", "np.sum(np.arctan2(x * 1e300, x * 1e-300))"),
        ("squared", "np.sum(np.arctan2(x * x, x - 1.0))"),
    ]
)

EXTREME = [
    0.0,
    -0.0,
    5e-324,
    -5e-324,
    1e-300,
    1.0,
    -1.0,
    1e300,
    -1e308,
    math.inf,
    -math.inf,
    math.nan,
]


@pytest.mark.parametrize("backend", ["trace", "sympy"])
@pytest.mark.parametrize(("case", "body"), ARCTAN2_BODIES)
def test_arctan2_compiles_and_matches_python(
    project: Project,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    body: str,
    backend: str,
) -> None:
    """Was ``KeyError: 'atan2'`` from the C printer. C's atan2 is the function
    math.atan2 calls: the compiled operators equal the Python ones bit for bit,
    at infinities, zeros of both signs, subnormals and NaN."""
    monkeypatch.setenv("DIFGEN_QUIET_FALLBACK", "1")
    project.source(f"import numpy as np\n\n\ndef f(x):\n    return {body}\n")
    project.config(module_block(operators=("f", "gradient"), emit="c", backend=backend))
    result = project.build("--compile")
    assert result.status == 0, result.err
    (project.root / "fallback").mkdir()
    shutil.copy(project.output(), project.root / "fallback" / "mod.py")
    compiled_module = import_file(project.output())
    fallback = import_file(project.root / "fallback" / "mod.py")
    assert compiled_module.COMPILED and not fallback.COMPILED
    with np.errstate(all="ignore"):
        for a in EXTREME:
            for b in (0.0, -0.0, 1.0, math.inf, math.nan, -1e308):
                x = np.array([a, b, -a])
                for op in ("f", "gradient"):
                    want = np.asarray(getattr(fallback, op)(x))
                    got = np.asarray(getattr(compiled_module, op)(x))
                    assert np.array_equal(want, got, equal_nan=True), (op, x, want, got)
                    finite = ~np.isnan(want)
                    assert np.array_equal(
                        np.signbit(want[finite]), np.signbit(got[finite])
                    )


# ---------------------------------------- importlib.reload after a rebuild

RELOAD = """
import importlib, os, sys, warnings
import numpy as np
import difgen

sys.path.insert(0, "out")
os.environ["DIFGEN_QUIET_FALLBACK"] = "1"
import mod
assert mod.COMPILED, mod.C_FALLBACK_REASON
x = np.array([0.5, -1.0, 2.0])
before = mod.gradient(x)
with open("fn.py", "w") as file:
    file.write(sys.argv[1])
difgen.build("difgen.toml", compile=True)
importlib.reload(mod)
print(mod.COMPILED)
print(mod.C_FALLBACK_REASON)
print(repr(mod.gradient(x).tolist()))
"""

RELOAD_CHANGES = rows(
    [
        (
            "factor",
            "np.sum(np.sin(x) * x * 2.0)",
            lambda x: 2 * (np.sin(x) + x * np.cos(x)),
        ),
        ("other_function", "np.sum(x * x * x)", lambda x: 3 * x * x),
        (
            "constant_shift",
            "np.sum(np.sin(x) * x + x)",
            lambda x: np.sin(x) + x * np.cos(x) + 1,
        ),
        ("cosine", "np.sum(np.cos(x) * x)", lambda x: np.cos(x) - x * np.sin(x)),
    ]
)


@pytest.mark.parametrize(("case", "body", "gradient"), RELOAD_CHANGES)
def test_reload_after_a_rebuild_says_why_it_falls_back(
    compiled: Project,
    case: str,
    body: str,
    gradient: Callable[[np.ndarray], np.ndarray],
) -> None:
    """A process loads an extension once: after a rebuild, ``importlib.reload``
    gets the new Python code, whose values are right, and must say that the
    process holds the old extension, not that the file is from another source."""
    source = f"import numpy as np\n\n\ndef f(x):\n    return {body}\n"
    done = subprocess.run(
        [sys.executable, "-c", RELOAD, source],
        cwd=compiled.root,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    flag, reason, values = done.stdout.splitlines()
    assert flag == "False"
    assert (
        "rebuilt after this process loaded it" in reason and "restart Python" in reason
    )
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(eval(values), gradient(x), rtol=1e-14)
    assert compiled.check().status == 0
    fresh = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, 'out'); import mod; print(mod.COMPILED)",
        ],
        cwd=compiled.root,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert fresh.stdout == "True\n", fresh.stderr


# ------------------------------------------ a default time limit on the user's code

ENDLESS = rows(
    [
        ("while_true_in_f", "", "    while True:\n        pass\n"),
        ("while_true_at_import", "while True:\n    pass\n", ""),
        ("sleep_in_f", "", "    time.sleep(10**6)\n"),
        ("count_in_f", "", "    for _ in itertools.count():\n        pass\n"),
        ("while_shape", "", "    while x.shape:\n        pass\n"),
        ("busy_numpy", "", "    while True:\n        np.ones(10).sum()\n"),
    ]
)


def _endless(project: Project, at_import: str, in_f: str) -> str:
    project.source(
        "import itertools\nimport time\n\nimport numpy as np\n\n"
        + at_import
        + "\n\ndef f(x):\n"
        + in_f
        + "    return np.sum(x)\n"
    )
    return project.config(module_block())


@pytest.mark.parametrize("entry", ["build", "check", "verify"])
@pytest.mark.parametrize(("case", "at_import", "in_f"), ENDLESS)
def test_user_code_that_never_ends_stops_by_default(
    project: Project,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    at_import: str,
    in_f: str,
    entry: str,
) -> None:
    """No --timeout, no timeout key: the default limit (1800 s; here shortened)
    stops the module with a message naming it and the stage, exit 1, nothing
    written; check and verify run the user's code under it too."""
    if entry != "build":  # a module built from an earlier, finite function
        project.source(F)
        project.config(module_block())
        assert project.build().status == 0
    monkeypatch.setattr(budget, "DEFAULT_TIMEOUT", 0.3)
    _endless(project, at_import, in_f)
    before = project.snapshot()
    start = time.monotonic()
    result = project.cli(entry, "difgen.toml")
    assert time.monotonic() - start < 15
    assert project.snapshot() == before
    if entry == "check":  # a function that no longer builds: stale, saying why
        assert result.status == 1 and "stopped after 0.3 s" in result.out
    else:
        assert result.status == 1, result.out
        assert "module 'mod': stopped after 0.3 s in stage" in result.err
        assert "--timeout" in result.err and "Traceback" not in result.err


def test_the_default_limit_is_generous_and_documented() -> None:
    assert budget.DEFAULT_TIMEOUT >= 600
    text = documentation.page("guide/commands.md")
    assert f"the limit is {budget.DEFAULT_TIMEOUT:g} s" in text


@pytest.mark.parametrize("value", ["inf", "INF", "none"])
def test_timeout_inf_removes_the_default(
    project: Project, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """A function slower than the (shortened) default builds with --timeout inf."""
    monkeypatch.setattr(budget, "DEFAULT_TIMEOUT", 0.2)
    project.source(
        "import time\n\nimport numpy as np\n\n\ndef f(x):\n    time.sleep(0.5)\n    return np.sum(x)\n"
    )
    project.config(module_block())
    assert project.build().status == 1
    result = project.build("--timeout", value)
    assert result.status == 0, result.err


@pytest.mark.parametrize("where", ["option", "key"])
def test_an_explicit_limit_wins_over_the_default(
    project: Project, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.setattr(budget, "DEFAULT_TIMEOUT", 0.2)
    project.source(
        "import time\n\nimport numpy as np\n\n\ndef f(x):\n    time.sleep(0.5)\n    return np.sum(x)\n"
    )
    project.config(module_block(**({"timeout": 30} if where == "key" else {})))
    result = project.build(*(["--timeout", "30"] if where == "option" else []))
    assert result.status == 0, result.err
    if where == "key":  # check traces under the key too (it has no --timeout)
        assert project.check().status == 0


# ----------------------------------- importing a module whose extension is damaged

IMPORT = """
import os, sys, warnings
import numpy as np
sys.path.insert(0, "out")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import mod
print(mod.COMPILED)
print(mod.C_FALLBACK_REASON)
print(len(caught))
x = np.array([0.3, -1.2, 2.5])
print(repr(mod.gradient(x).tolist()))
"""


@pytest.mark.parametrize(
    ("case", "damage", "reason"),
    [p for p in BAD_EXTENSIONS if p.id not in ("directory", "dangling_symlink")],
)
def test_import_never_loads_a_damaged_extension(
    compiled: Project, case: str, damage: Callable[[Path], None], reason: str
) -> None:
    """A truncated shared object, mapped, crashes the interpreter with SIGBUS at
    import; one from another source computes something else. The module reads
    the file first, falls back to its Python operators (right values) and warns
    once, saying why; a FIFO there is skipped, never opened."""
    damage(_extension(compiled))
    env = {k: v for k, v in subprocess_env().items() if k != "DIFGEN_QUIET_FALLBACK"}
    done = subprocess.run(
        [sys.executable, "-c", IMPORT],
        cwd=compiled.root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    flag, why, warned, values = done.stdout.splitlines()
    assert flag == "False" and warned == "1"
    expected = "not built" if case == "fifo" else "truncated or compiled from another"
    assert expected in why
    x = np.array([0.3, -1.2, 2.5])
    np.testing.assert_allclose(eval(values), np.sin(x) + x * np.cos(x), rtol=1e-14)


# --------------------------------------- synthetic shared objects for the ELF test


def _elf(
    wide: bool = True,
    little: bool = True,
    size: int = 4096,
    shoff: int = 3000,
    shnum: int = 10,
    segments: tuple[tuple[int, int, int], ...] = ((1, 0, 1000),),
) -> bytes:
    """An ELF file of ``size`` bytes: its header, program headers right after it
    (``(type, offset, filesz)``) and a section table of ``shnum`` entries at
    ``shoff``; the C_HASH of nothing in particular at the end."""
    order = "<" if little else ">"
    word = "Q" if wide else "I"
    header_size, ph_size, sh_size = (64, 56, 64) if wide else (52, 32, 40)
    ident = b"\x7fELF" + bytes([2 if wide else 1, 1 if little else 2, 1]) + bytes(9)
    header = ident + struct.pack(
        f"{order}HHI{word}{word}{word}IHHHHHH",
        3, 62, 1, 0, header_size, shoff, 0, header_size, ph_size,
        len(segments), sh_size, shnum, 0,
    )  # fmt: skip
    programs = b""
    for kind, offset, filesz in segments:
        if wide:
            programs += struct.pack(
                f"{order}IIQQQQQQ", kind, 5, offset, 0, 0, filesz, filesz, 4096
            )
        else:
            programs += struct.pack(
                f"{order}IIIIIIII", kind, offset, 0, 0, filesz, filesz, 5, 4096
            )
    data = header + programs
    return (data + bytes(max(0, size - len(data))))[:size]


SYNTHETIC = rows(
    [
        ("whole_64_le", _elf(), None),
        ("whole_64_be", _elf(little=False), None),
        ("whole_32_le", _elf(wide=False), None),
        ("whole_32_be", _elf(wide=False, little=False), None),
        ("sections_past_end", _elf(shoff=4000), "section headers"),
        ("sections_past_end_32", _elf(wide=False, shoff=4000), "section headers"),
        ("segment_past_end", _elf(segments=((1, 0, 5000),)), "a loaded segment"),
        (
            "segment_offset_past_end",
            _elf(segments=((1, 4000, 200),)),
            "a loaded segment",
        ),
        ("note_past_end_is_fine", _elf(segments=((4, 4000, 9999), (1, 0, 100))), None),
        (
            "second_segment_short",
            _elf(segments=((1, 0, 100), (1, 3000, 1200))),
            "a loaded segment",
        ),
        (
            "too_many_program_headers",
            _elf(segments=((1, 0, 10),) * 80),
            "program headers",
        ),
        ("bad_class", _elf()[:4] + b"\x03" + _elf()[5:], "no whole ELF header"),
        ("bad_byte_order", _elf()[:5] + b"\x07" + _elf()[6:], "no whole ELF header"),
        ("no_sections", _elf(shoff=0, shnum=0), None),
        ("mach_o", b"\xcf\xfa\xed\xfe" + bytes(4000), None),
        ("magic_and_hash_only", b"\x7fELF", "no whole ELF header"),
    ]
)


@pytest.mark.parametrize(("case", "data", "problem"), SYNTHETIC)
def test_the_extension_wholeness_test_on_synthetic_files(
    tmp_path: Path, case: str, data: bytes, problem: str | None
) -> None:
    """Each range an ELF header names must lie inside the file; other formats
    are left to the hash test. Both word sizes and byte orders."""
    path = tmp_path / "x.so"
    path.write_bytes(data + b"0123456789abcdef")
    found = compiling.extension_problem(path, "0123456789abcdef")
    if problem is None:
        assert found is None
    else:
        assert found is not None and "truncated" in found and problem in found


# ------------------------------------------------ SIGTERM in every stage of a build

SLOW_STAGES = rows(
    [
        ("at_import", "open('started', 'w').close()\ntime.sleep(60)\n", ""),
        ("in_trace", "", "    open('started', 'w').close()\n    time.sleep(60)\n"),
        (
            "busy_in_trace",
            "",
            "    open('started', 'w').close()\n    while True:\n        pass\n",
        ),
    ]
)


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize(("case", "at_import", "in_f"), SLOW_STAGES)
def test_sigterm_in_any_stage_writes_nothing(
    project: Project, case: str, at_import: str, in_f: str, jobs: str
) -> None:
    """Exit 143 with one line on stderr, nothing written, no process left."""
    body = "import time\n\nimport numpy as np\n\n" + at_import
    body += "\n\ndef f(x):\n" + in_f + "    return np.sum(x)\n"
    project.source(body)
    project.source(F, name="other.py")
    project.config(module_block(), module_block("two", function="other.py:f"))
    process = project.popen("build", "difgen.toml", "--jobs", jobs)
    _wait_for(lambda: (project.root / "started").exists(), timeout=120)
    children = _children(process.pid)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 143, err
    assert "difgen: terminated; nothing was written" in err
    assert "Traceback" not in err
    assert not (project.root / OUTPUT_DIR).exists()
    _wait_for(lambda: not any(_running(pid) for pid in children), timeout=10)


@pytest.mark.parametrize("text", ["-1", "0", "nan", "abc", "1e10", "-inf", ""])
def test_cli_refuses_a_bad_timeout(project: Project, text: str) -> None:
    _simple(project)
    result = project.cli("build", "difgen.toml", f"--timeout={text}")
    assert result.status == 2 and "--timeout" in result.err
    assert not (project.root / OUTPUT_DIR).exists()


@pytest.mark.parametrize("entry", ["build", "check"])
def test_a_deleted_helper_is_an_error_not_the_cached_copy(
    project: Project, entry: str
) -> None:
    """The helper imported by the first build is gone: the second call must not
    build from the copy in sys.modules."""
    project.write("helper.py", "K = 3.0\n")
    project.source(
        "import numpy as np\nfrom helper import K\n\n\ndef f(x):\n    return np.sum(K * x)\n"
    )
    project.config(module_block())
    config = project.root / "difgen.toml"
    difgen.build(config)
    (project.root / "helper.py").unlink()
    if entry == "build":
        with pytest.raises(DifgenError, match="No module named 'helper'"):
            difgen.build(config)
    else:
        (found,) = difgen.check(config).modules
        assert (
            found.status.value == "stale" and "No module named 'helper'" in found.reason
        )


# ---------------------------------------------- what --compile decides from mtimes

MTIMES = rows(
    [
        ("so_older_same_hash", -100, False, True),
        ("so_same_mtime", 0, False, False),
        ("so_newer", 100, False, False),
        ("so_newer_other_hash", 100, True, True),
        ("so_much_newer_other_hash", 10**6, True, True),
        ("so_older_other_hash", -100, True, True),
    ]
)


@pytest.mark.parametrize(("case", "shift", "other_hash", "compiles"), MTIMES)
def test_compile_decides_from_contents_not_only_mtimes(
    compiled: Project, case: str, shift: int, other_hash: bool, compiles: bool
) -> None:
    """``--compile`` compiles exactly when check would call the extension stale,
    whatever the mtimes, so that "run difgen build --compile" always helps."""
    extension, source = _extension(compiled), _c_source(compiled)
    if other_hash:
        _other_hash(extension)
    base = source.stat().st_mtime
    os.utime(extension, (base + shift, base + shift))
    assert (compiled.check().status == 1) is compiles
    result = compiled.build("--compile")
    assert result.status == 0, result.err
    assert ("compiled " in result.out) is compiles
    assert compiled.check().status == 0
    _gradient_ok(compiled)


# --------------------------------------- reverse mode through a while loop on x

LOOP_BODIES = rows(
    [
        ("sin_plus_x", "s = np.sin(s) * 0.5 + x"),
        ("half_plus_x", "s = s * 0.5 + x"),
        ("plus_x", "s = s + x"),
        ("x_minus", "s = x - s * 0.25"),
        ("x_times", "s = s * 0.5 + x * x"),
        ("scalar_const", "s = s * 0.9 + x[0]"),
        ("x_first", "s = x + np.tanh(s)"),
        ("two_uses", "s = x + s * 0.5 + x * 0.25"),
    ]
)


@pytest.mark.parametrize("trips", [1, 2, 7])
@pytest.mark.parametrize(("case", "body"), LOOP_BODIES)
def test_reverse_mode_through_a_while_loop(
    project: Project, case: str, body: str, trips: int
) -> None:
    """The backward sweep updates the state's cotangent and sums the constants'
    cotangents from the same iteration's values. Written one after the other, a
    constant whose cotangent is the carried one itself (``s = ... + x``) was
    summed from the next iteration's: every gradient off by exactly one term."""
    project.source(
        "import numpy as np\n\n\ndef f(x):\n    s = x\n    i = x[0] * 0.0\n"
        f"    while i < {trips}.0:\n        {body}\n        i = i + 1.0\n"
        "    return np.sum(s * s)\n"
    )
    project.config(module_block(operators=("gradient",), backend="trace"))
    result = project.build()
    assert result.status == 0, result.err
    module = import_file(project.output())
    x = np.array([0.3, -0.7, 1.1])
    want = finite_differences(import_file(project.root / "fn.py").f, x)
    np.testing.assert_allclose(module.gradient(x), want, rtol=1e-6, atol=1e-8)
