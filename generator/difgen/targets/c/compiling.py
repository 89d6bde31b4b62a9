"""Compile the C source of an ``emit = "c"`` module into its extension.

Used by ``difgen build --compile`` (local use) and by tests; the package build
declares the same extension to setuptools (:func:`extension_args`), so wheels carry
it. Generated modules never compile anything themselves: no compiler at run time.

The flags (:data:`CFLAGS`) keep the C code's floating point exactly the Python
code's: optimized, but no contraction into FMA and no fast-math reassociation.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from difgen.errors import DifgenError
from difgen.naming import C_SUFFIX

CFLAGS = (
    "-O2",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-strict-aliasing",
    "-Werror=implicit-function-declaration",
)
"""Optimize, but never contract ``a * b + c`` into an FMA or reorder floating-point
operations: C then rounds exactly as the Python code does. A function the C file
calls without defining is an error here, not an extension that fails to load."""


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
    importer never sees half an extension.
    """
    source = Path(directory, module + C_SUFFIX + ".c")
    target = extension_path(directory, module)
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
    ]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise CompileError(f"{source}: cannot run the C compiler: {exc}") from None
    if done.returncode != 0:
        temp.unlink(missing_ok=True)
        raise CompileError(
            f"{source}: the C compiler failed ({shlex.join(command)}):\n"
            f"{done.stderr.strip()}"
        )
    os.replace(temp, target)
    return Compiled(module, target, time.perf_counter() - start)


def compile_modules(directory: Path, modules: list[str]) -> list[Compiled]:
    """Compile several modules' extensions, one compiler process per core."""
    if len(modules) <= 1:
        return [compile_module(directory, m) for m in modules]
    workers = min(len(modules), os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:  # the compiler does the work
        return list(pool.map(lambda m: compile_module(directory, m), modules))
