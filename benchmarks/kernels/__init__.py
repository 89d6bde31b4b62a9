"""Hand-written C kernels: the limit a generated derivative is measured against.

Issue 24 measures difgen's C against "a hand-written C kernel of the same
derivative (the limit)". Each kernel is one ``NAME.c`` file in this folder,
written the way a careful person writes it by hand (one pass over memory, no
temporaries that are not needed), and compiled here with difgen's own flags
(:data:`difgen.targets.c.compiling.CFLAGS`: ``-O2``, no FMA contraction, no
fast-math), so a ratio compares the code and not the compiler options. The
shared library is cached under ``$XDG_CACHE_HOME/difgen-benchmarks`` (or
``~/.cache``) by the hash of the source and the flags, and loaded with
:mod:`ctypes`.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import subprocess
import types
from pathlib import Path

import numpy as np

from difgen.targets.c.compiling import CFLAGS, include_dirs

HERE = Path(__file__).resolve().parent

DOUBLE_P = ctypes.POINTER(ctypes.c_double)
"""The argument type of every array a kernel takes (``double *``)."""


def cache_dir() -> Path:
    """Where compiled kernels are kept between runs."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "difgen-benchmarks"


def load(name: str, extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL:
    """Compile ``NAME.c`` of this folder (once per source and flags) and load it."""
    return ctypes.CDLL(str(compiled(name, extra_flags)))


def load_extension(name: str, module: str) -> types.ModuleType:
    """``NAME.c`` compiled with ``-DKERNEL_EXTENSION`` and the Python and NumPy
    headers, imported as the CPython extension ``module`` (its ``PyInit_module``):
    a kernel called the way a difgen extension's operators are, without the
    microseconds a :mod:`ctypes` call spends converting its arguments."""
    flags = ("-DKERNEL_EXTENSION", *(f"-I{d}" for d in include_dirs()))
    path = compiled(name, flags)
    loader = importlib.machinery.ExtensionFileLoader(module, str(path))
    spec = importlib.util.spec_from_file_location(module, path, loader=loader)
    if spec is None:
        raise ImportError(f"cannot load {path}")
    found = importlib.util.module_from_spec(spec)
    loader.exec_module(found)
    return found


def compiled(name: str, extra_flags: tuple[str, ...] = ()) -> Path:
    """The shared library of ``NAME.c`` and these flags, compiled if not cached."""
    source = HERE / f"{name}.c"
    flags = (*CFLAGS, *extra_flags, "-shared", "-fPIC")
    digest = hashlib.sha256(
        source.read_bytes() + "\0".join(flags).encode()
    ).hexdigest()[:16]
    target = cache_dir() / f"{name}-{digest}.so"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_suffix(f".{os.getpid()}.tmp")
        compiler = os.environ.get("CC", "cc")
        subprocess.run(
            [compiler, *flags, str(source), "-o", str(temporary), "-lm"], check=True
        )
        temporary.replace(target)
    return target


def pointer(array: np.ndarray) -> ctypes._Pointer[ctypes.c_double]:
    """A ``double *`` to a C-contiguous float64 NumPy array's data."""
    if array.dtype != np.float64 or not array.flags.c_contiguous:
        raise TypeError("a kernel takes C-contiguous float64 arrays")
    return array.ctypes.data_as(DOUBLE_P)
