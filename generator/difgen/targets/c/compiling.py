"""Compile the C source of an ``emit = "c"`` module into its extension.

Used by ``difgen build --compile`` (local use) and by tests; the package build
declares the same extension to setuptools (:func:`extension_args`), so wheels carry
it. Generated modules never compile anything themselves: no compiler at run time.

The flags (:data:`CFLAGS`) keep the C code's floating point exactly the Python
code's: optimized, but no contraction into FMA and no fast-math reassociation,
whatever ``$CFLAGS`` the environment hands setuptools (its flags come first).

Only an intact C source is compiled: one difgen wrote, unedited (its BODY_HASH
matches), so an extension never carries a ``C_HASH`` its code does not match. The
compiler writes ``.NAME.PID.tmp`` beside the extension, renamed over it once the
compiler succeeded and produced a file; a failure or an interruption removes it,
and a compiler killed outright leaves one that the next build removes
(:func:`remove_leftovers`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import stat
import struct
import subprocess
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from difgen.errors import DifgenError
from difgen.naming import C_SUFFIX
from difgen.write import State, inspect_file

CFLAGS = (
    "-fno-fast-math",
    "-fno-unsafe-math-optimizations",
    "-fno-finite-math-only",
    "-fsigned-zeros",
    "-O2",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-strict-aliasing",
    "-Werror=implicit-function-declaration",
)
"""Optimize, but never contract ``a * b + c`` into an FMA or reorder floating-point
operations: C then rounds exactly as the Python code does. The first four are
the compiler's defaults, named so that they undo a ``-ffast-math``, ``-Ofast`` or
``-funsafe-math-optimizations`` in ``$CFLAGS`` (which setuptools puts before
these), the startup code that would flush subnormals to zero in the whole process
included. A function the C file calls without defining
is an error here, not an extension that fails to load."""

TEMP_RE = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]+)\.tmp")
"""Names of the compiler's temporary outputs: ``.NAME__c.cpython-...so.PID.tmp``."""


class CompileError(DifgenError):
    """The C compiler failed (its output is in the message)."""


@dataclass(frozen=True)
class Compiled:
    """One extension built: where it is and how long the compiler took."""

    name: str
    path: Path
    seconds: float


EXTENSION_SUFFIX: str = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
"""This interpreter's extension file suffix (``.cpython-311-x86_64-linux-gnu.so``)."""


def extension_path(directory: Path, module: str) -> Path:
    """Where the extension of module ``module`` goes: next to its ``.py``."""
    return Path(directory, module + C_SUFFIX + EXTENSION_SUFFIX)


def include_dirs() -> list[str]:
    """Python's and NumPy's headers."""
    return [sysconfig.get_paths()["include"], np.get_include()]


def compiler() -> list[str]:
    """The C compiler: ``$CC``, else the one Python was built with, else ``cc``."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(str(cc))[:1]


def compile_module(directory: Path, module: str) -> Compiled:
    """Compile ``directory/module__c.c`` into the extension beside it.

    The compiler writes a temporary file that is renamed over the target, so an
    importer never sees half an extension; a source that is not difgen's intact
    output, a target that is not a regular file, and a compiler that "succeeds"
    without writing anything are CompileErrors.
    """
    source = Path(directory, module + C_SUFFIX + ".c")
    target = extension_path(directory, module)
    _check_source(source)
    if os.path.lexists(target) and not target.is_file():
        raise CompileError(
            f"{target}: not a regular file where the extension goes; move it away, "
            "then run difgen build --compile"
        )
    remove_leftovers(Path(directory))
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    command = [
        *compiler(),
        *CFLAGS,
        "-fPIC",
        "-shared",
        *(f"-I{d}" for d in include_dirs()),
        str(source),
        "-o",
        str(temp),
        "-lm",
        "-pthread",  # the points loop's threads
    ]
    start = time.perf_counter()
    try:
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise CompileError(f"{source}: cannot run the C compiler: {exc}") from None
        if done.returncode != 0:
            raise CompileError(
                f"{source}: the C compiler failed ({shlex.join(command)}):\n"
                f"{done.stderr.strip()}"
            )
        if not temp.is_file() or temp.stat().st_size == 0:
            raise CompileError(
                f"{source}: the C compiler exited 0 but wrote no extension "
                f"({shlex.join(command)}); check $CC"
            )
        os.replace(temp, target)
    finally:  # an error, Ctrl-C or SIGTERM: no temporary file left behind
        temp.unlink(missing_ok=True)
    return Compiled(module, target, time.perf_counter() - start)


def _check_source(source: Path) -> None:
    """Refuse to compile a C source that is missing or not difgen's intact output."""
    found = inspect_file(source)
    if found.state is State.MISSING:
        raise CompileError(f"{source}: no C source; run difgen build first")
    if found.state is not State.INTACT:
        raise CompileError(
            f"{source}: not compiled: {found.state.value} ({found.detail}); "
            "run difgen build to regenerate it, then compile"
        )


def remove_leftovers(directory: Path) -> list[Path]:
    """Remove the temporary outputs of compilers that were killed in ``directory``.

    Only regular files named like :data:`TEMP_RE` whose process is gone; a
    compile still running (its process alive) keeps its file.
    """
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            match = TEMP_RE.fullmatch(entry.name)
            if match is None or not match["name"].endswith(EXTENSION_SUFFIX):
                continue
            if not entry.is_file(follow_symlinks=False) or _alive(int(match["pid"])):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (this process counts: its compile runs)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process: leave its file
    return True


def extension_problem(path: Path, c_hash: str | None) -> str | None:
    """What is wrong with the extension at ``path`` (which exists), if anything.

    Read without loading it (a truncated shared object crashes the process that
    maps it): it must be a regular file (a FIFO is never opened), a whole shared
    object (its ELF headers, segments and section table inside the file) and
    hold the ``C_HASH`` of the module's C source among its bytes.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:  # a dangling symbolic link, a loop
        return f"{path} cannot be read ({exc.strerror}); move it away"
    if not stat.S_ISREG(mode):
        return f"{_kind(mode)} where the extension goes; move it away"
    data = path.read_bytes()
    short = _truncated_elf(data)
    if short is not None:
        return f"the extension is truncated ({short})"
    if c_hash is not None and c_hash.encode("ascii") not in data:
        return "the extension was compiled from another C source"
    return None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "not a regular file"


def _truncated_elf(data: bytes) -> str | None:
    """Why ``data`` is not a whole ELF file (None for a whole one, or not ELF).

    Every byte range the headers name (program headers, the segments the loader
    maps, the section table) must lie inside the file.
    """
    size = len(data)
    if not data.startswith(b"\x7fELF"):  # another format: the hash test alone
        return f"{size} bytes" if b"\x7fELF".startswith(data) else None
    if size < 64 or data[4] not in (1, 2) or data[5] not in (1, 2):
        return f"{size} bytes, no whole ELF header"
    wide = data[4] == 2
    order = "<" if data[5] == 1 else ">"
    word = "Q" if wide else "I"
    header = f"{order}16xHHI{word}{word}{word}IHHHHHH"
    fields = struct.unpack_from(header, data)
    phoff, shoff = fields[4], fields[5]
    phentsize, phnum, shentsize, shnum = fields[8], fields[9], fields[10], fields[11]
    ranges = [(phoff, phentsize * phnum, "program headers")]
    ranges.append((shoff, shentsize * shnum, "section headers"))
    if phoff + phentsize * phnum <= size:
        for index in range(phnum):
            at = phoff + index * phentsize
            if wide:
                kind, _, offset, _, _, filesz = struct.unpack_from(
                    f"{order}IIQQQQ", data, at
                )
            else:
                kind, offset, _, _, filesz, _ = struct.unpack_from(
                    f"{order}IIIIII", data, at
                )
            if kind == 1:  # PT_LOAD: the loader maps these bytes
                ranges.append((offset, filesz, "a loaded segment"))
    for offset, length, what in ranges:
        if offset + length > size:
            return f"{size} bytes; its {what} end at byte {offset + length}"
    return None


def compile_modules(directory: Path, modules: list[str]) -> list[Compiled]:
    """Compile several modules' extensions, one compiler process per core."""
    if len(modules) <= 1:
        return [compile_module(directory, m) for m in modules]
    workers = min(len(modules), os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:  # the compiler does the work
        return list(pool.map(lambda m: compile_module(directory, m), modules))
