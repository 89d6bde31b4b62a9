"""Where in the user's code a trace is: the ``file:line`` every error message names.

A library written in NumPy that the user's function calls (SciPy's array-API code)
is traced like the user's own code, but a message about it names the user's line
that called the library and the library function, not the library's internals:
``model.py:12 (in scipy.optimize.rosen)``.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import site
import sys
import sysconfig
from types import FrameType

import numpy as np

_DIFGEN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


def _library_dirs() -> tuple[str, ...]:
    """Where installed packages and the standard library live."""
    paths = sysconfig.get_paths()
    dirs = {
        paths.get(key, "") for key in ("stdlib", "platstdlib", "purelib", "platlib")
    }
    with contextlib.suppress(AttributeError):  # an old virtualenv's site module
        dirs.update(site.getsitepackages())
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    dirs.add(user if isinstance(user, str) else "")
    return tuple(sorted(os.path.join(os.path.abspath(d), "") for d in dirs if d))


_LIBRARY_DIRS = _library_dirs()
_LIBRARY: dict[str, bool] = {}


def in_difgen_or_numpy(filename: str) -> bool:
    """Whether code in ``filename`` is difgen's or NumPy's own (not the user's)."""
    return os.path.abspath(filename).startswith((_DIFGEN_DIR, _NUMPY_DIR))


def in_library(filename: str) -> bool:
    """Whether ``filename`` is an installed package's or the standard library's
    (a library the user's code calls), but neither difgen nor NumPy."""
    known = _LIBRARY.get(filename)
    if known is None:
        path = os.path.abspath(filename)
        known = path.startswith(_LIBRARY_DIRS) and not in_difgen_or_numpy(filename)
        _LIBRARY[filename] = known
    return known


def user_location() -> str:
    """``file:line`` of the innermost frame outside difgen and NumPy (and outside
    the libraries the user's code called, which are named after it).

    >>> user_location().endswith(">:1")  # called from a doctest, which is user code
    True
    """
    frame: FrameType | None = sys._getframe(1)
    innermost: FrameType | None = None
    library: FrameType | None = None  # the outermost library frame seen so far
    while frame is not None:
        filename = frame.f_code.co_filename
        if not in_difgen_or_numpy(filename):
            if innermost is None:
                innermost = frame
            if not in_library(filename):
                where = f"{filename}:{frame.f_lineno}"
                return f"{where} (in {library_function(library)})" if library else where
            library = frame
        frame = frame.f_back
    if innermost is not None:  # the user's own code is an installed package's
        return f"{innermost.f_code.co_filename}:{innermost.f_lineno}"
    return "<unknown>"


def library_function(frame: FrameType) -> str:
    """The library function running in ``frame``, by its public name where its
    package exports it (``scipy.optimize.rosen``, not ``scipy.optimize._optimize``)."""
    code = frame.f_code
    module = str(frame.f_globals.get("__name__", "?"))
    name = code.co_name
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        package = ".".join(parts[:i])
        exported = getattr(sys.modules.get(package), name, None)
        if getattr(_unwrap(exported), "__code__", None) is code:
            return f"{package}.{name}"
    public = [p for p in parts if not p.startswith("_")] or parts
    return f"{'.'.join(public)}.{getattr(code, 'co_qualname', name)}"


def _unwrap(obj: object) -> object:
    try:
        return inspect.unwrap(obj) if callable(obj) else obj
    except ValueError:  # a cycle of __wrapped__
        return obj
