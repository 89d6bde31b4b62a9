"""Running the user's code at build time: nothing it does may end or hang the build.

Importing the user's module and tracing the user's function both run foreign code.
:func:`no_process_exit` makes ``os._exit`` raise while it runs (``sys.exit`` raises
SystemExit anyway), and :func:`describe` names what was raised and where, in the
user's files rather than difgen's, for the message that replaces a traceback.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator

from difgen.core.location import in_difgen_or_numpy, user_location


class ExitCalled(BaseException):
    """``os._exit`` was called by the user's code while difgen ran it."""

    def __init__(self, name: str, where: str) -> None:
        super().__init__(name)
        self.name = name
        self.where = where


@contextlib.contextmanager
def no_process_exit() -> Iterator[None]:
    """Within the block, ``os._exit`` raises :class:`ExitCalled` instead of ending
    the build process (which would leave no message and, with exit 0, look fine)."""
    original = os._exit

    def refuse(status: int) -> None:
        raise ExitCalled(f"os._exit({status!r})", user_location())

    os._exit = refuse  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = original


def user_frame(exc: BaseException) -> str | None:
    """``file:line`` where ``exc`` was raised in the user's code: a SyntaxError's own
    location, else the innermost traceback frame outside difgen, NumPy, importlib
    and Python's frozen modules."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    user = [
        f
        for f in frames
        if not in_difgen_or_numpy(f.filename)
        and not f.filename.startswith("<frozen ")  # exit(), quit(), importlib
        and "importlib" not in f.filename
    ]
    return f"{user[-1].filename}:{user[-1].lineno}" if user else None


def describe(exc: BaseException) -> str:
    """``"ZeroDivisionError: division by zero (at fn.py:3)"``."""
    if isinstance(exc, SyntaxError):
        text = f"SyntaxError: {exc.msg}"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    where = user_frame(exc)
    return text + (f" (at {where})" if where else "")
