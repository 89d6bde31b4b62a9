"""Trace a user's function: its NumPy code runs on tracers and leaves a Graph.

Running the user's code at build time is running foreign code: whatever it raises
becomes a :class:`~difgen.errors.TraceError` naming the function and the line, and
``sys.exit``/``os._exit`` inside it cannot end the build.

>>> g = trace(lambda x: np.sin(x) * 2.0, [((), "float64")])
>>> [e.primitive.name for e in g.eqns]
['sin', 'mul']
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np  # noqa: F401  (the doctest's np)

from difgen.core.ir import Graph
from difgen.core.location import user_location
from difgen.core.tracer import Tracer, finish, tracing
from difgen.errors import DifgenError, TraceError
from difgen.frontend.namespace import tracing_numpy


def trace(
    fn: Callable[..., Any], avals: Sequence[tuple[tuple[int, ...], str]]
) -> Graph:
    """Trace ``fn`` on inputs of the given (shape, dtype) into a Graph.

    The user's modules see ``np`` as the tracing namespace while ``fn`` runs
    (:func:`difgen.frontend.namespace.tracing_numpy`).
    """
    with tracing(avals) as (builder, inputs):
        with tracing_numpy(fn), _no_process_exit():
            result = _call(fn, [Tracer(builder, v) for v in inputs])
        try:
            return finish(builder, inputs, result)
        except TraceError as exc:
            raise TraceError(
                f"{definition(fn)}: the function returned something difgen cannot "
                f"use as an array ({exc})"
            ) from None


def definition(fn: Callable[..., Any]) -> str:
    """``file:line`` of the ``def`` of ``fn`` (or its name when it has no code)."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        code = getattr(getattr(type(fn), "__call__", None), "__code__", None)
    if code is None:
        return getattr(fn, "__qualname__", repr(fn))
    return f"{code.co_filename}:{code.co_firstlineno}"


def _call(fn: Callable[..., Any], args: list[Tracer]) -> Any:
    """``fn(*args)``, with every way the user's code can fail made a TraceError."""
    try:
        return fn(*args)
    except DifgenError:
        raise
    except RecursionError:
        raise TraceError(
            f"{definition(fn)}: the function recursed too deeply while tracing "
            f"(RecursionError{_at(_last_user_frame())})"
        ) from None
    except _ExitCalled as exc:
        raise TraceError(
            f"{exc.where}: the function calls {exc.name} at build time; difgen "
            "cannot trace a function that ends the process"
        ) from None
    except SystemExit as exc:
        raise TraceError(
            f"{definition(fn)}: the function calls sys.exit({exc.code!r}) at build "
            f"time{_at(_last_user_frame())}; difgen cannot trace a function that "
            "ends the process"
        ) from None
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise TraceError(
            f"{definition(fn)}: calling the function at build time raised "
            f"{text}{_at(_last_user_frame())}"
        ) from None


def _last_user_frame() -> str | None:
    """``file:line`` of the innermost frame of the exception being handled that is
    not difgen's or NumPy's own code."""
    tb = sys.exc_info()[2]
    frames = traceback.extract_tb(tb)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    numpy_dir = os.path.dirname(os.path.abspath(np.__file__))
    user = [
        f
        for f in frames
        if not os.path.abspath(f.filename).startswith((here, numpy_dir))
    ]
    return f"{user[-1].filename}:{user[-1].lineno}" if user else None


def _at(where: str | None) -> str:
    return f" at {where}" if where else ""


class _ExitCalled(BaseException):
    """``os._exit`` was called by the user's code while tracing."""

    def __init__(self, name: str, where: str) -> None:
        super().__init__(name)
        self.name = name
        self.where = where


@contextlib.contextmanager
def _no_process_exit() -> Iterator[None]:
    """While tracing, ``os._exit`` raises instead of ending the build process."""
    original = os._exit

    def refuse(status: int) -> None:
        raise _ExitCalled(f"os._exit({status!r})", user_location())

    os._exit = refuse  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = original
