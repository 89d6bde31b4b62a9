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
import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from difgen import guard
from difgen.core.builder import tracing
from difgen.core.conversions import TracedBranch
from difgen.core.ir import Graph
from difgen.core.location import in_difgen_or_numpy, in_library, library_function
from difgen.core.tracer import Tracer, contains_tracer, finish
from difgen.errors import DifgenError, TraceError
from difgen.frontend import control
from difgen.frontend.namespace import tracing_numpy


def trace(
    fn: Callable[..., Any], avals: Sequence[tuple[tuple[int, ...], str]]
) -> Graph:
    """Trace ``fn`` on inputs of the given (shape, dtype) into a Graph.

    The user's modules see ``np`` as the tracing namespace while ``fn`` runs
    (:func:`difgen.frontend.namespace.tracing_numpy`).
    """
    functions: list[types.FunctionType] = []
    while True:
        try:
            with control.rewritten(functions), control.watching_loops():
                return _trace_once(fn, avals)
        except TracedBranch as exc:
            functions.append(_to_rewrite(exc, functions))


def _trace_once(
    fn: Callable[..., Any], avals: Sequence[tuple[tuple[int, ...], str]]
) -> Graph:
    with tracing(avals) as (builder, inputs):
        with tracing_numpy(fn), guard.no_process_exit():
            result = _call(fn, [Tracer(builder, v) for v in inputs])
        _check_result(fn, result)
        return finish(builder, inputs, result)


def _to_rewrite(
    exc: TracedBranch, done: list[types.FunctionType]
) -> types.FunctionType:
    """The function whose branch on a traced value raised ``exc``, to be rewritten
    so that its branches become conds; the refusal when that cannot help."""
    for code in exc.outer:  # a comprehension's code runs inside its function's
        if control.is_rewritten(code):
            break
        if code.co_name.startswith("<"):  # <genexpr>, <listcomp>, <lambda>
            continue
        function = control.function_of(code)
        if function is not None:
            if function in done or code in {f.__code__ for f in done}:
                break  # a nested function: made anew from its code at each call
            return function
    raise TraceError(control.explain(exc)) from None


def _check_result(fn: Callable[..., Any], result: Any) -> None:
    """The function must return arrays (traced or constant), or a tuple of them."""
    for value in result if isinstance(result, tuple) else (result,):
        if isinstance(value, Tracer) or contains_tracer(value):
            continue
        kind = np.asarray(value).dtype.kind if _array_like(value) else "O"
        if kind not in "biuf":
            raise TraceError(
                f"{definition(fn)}: the function returns a {type(value).__name__}, "
                "which difgen cannot use: it needs a float64 array or number (or "
                "a tuple of them)"
            )


def _array_like(value: Any) -> bool:
    try:
        np.asarray(value)
    except (ValueError, TypeError):  # a ragged sequence, an odd object
        return False
    return True


def definition(fn: Callable[..., Any]) -> str:
    """``file:line`` of the ``def`` of ``fn`` (or its name when it has no code);
    of the function it wraps when it has ``__wrapped__`` (difgen.generate calls
    the user's function through one, with the differentiated argument first)."""
    with contextlib.suppress(ValueError):  # a cycle of __wrapped__
        fn = inspect.unwrap(fn)
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        method = getattr(type(fn), "__call__", None)  # noqa: B004  (for __code__)
        code = getattr(method, "__code__", None)
    if code is None:
        return getattr(fn, "__qualname__", repr(fn))
    return f"{code.co_filename}:{code.co_firstlineno}"


def _call(fn: Callable[..., Any], args: list[Tracer]) -> Any:
    """``fn(*args)``, with every way the user's code can fail made a TraceError.

    KeyboardInterrupt alone goes through: it is the user stopping the build.
    """
    try:
        return fn(*args)
    except (DifgenError, KeyboardInterrupt):
        raise
    except RecursionError as exc:
        raise TraceError(
            f"{definition(fn)}: the function recursed too deeply while tracing "
            f"(RecursionError{_at(guard.user_frame(exc))})"
        ) from None
    except guard.ExitCalled as exc:
        raise TraceError(
            f"{exc.where}: the function calls {exc.name} at build time; difgen "
            "cannot trace a function that ends the process"
        ) from None
    except ValueError as exc:
        if not str(exc).startswith("setting an array element with a sequence"):
            raise _raised(fn, exc) from None
        raise TraceError(
            f"{guard.user_frame(exc) or definition(fn)}: a traced value is stored "
            "into an element of an array difgen does not trace (NumPy: setting an "
            "array element with a sequence). Make that array in the traced function "
            "with np.zeros, np.copy(ARRAY) or np.array(ARRAY): ARRAY.copy() of an "
            "array made outside it is a plain NumPy array"
        ) from None
    except SystemExit as exc:
        raise TraceError(
            f"{_exit_location(exc, fn)}: the function calls sys.exit({exc.code!r}) "
            "at build time; difgen cannot trace a function that ends the process"
        ) from None
    except BaseException as exc:  # noqa: BLE001  (user code may raise anything)
        raise _raised(fn, exc) from None


def _raised(fn: Callable[..., Any], exc: BaseException) -> TraceError:
    """The refusal of a function that raised ``exc`` while it was traced."""
    return TraceError(
        f"{definition(fn)}: calling the function at build time raised "
        f"{guard.describe(exc)}{_library_call(exc)}"
    )


def _library_call(exc: BaseException) -> str:
    """Where the user's code called the library that raised ``exc``, and which
    library function it called ("" when the user's own code raised it)."""
    steps = []
    tb = exc.__traceback__
    while tb is not None:
        if not in_difgen_or_numpy(tb.tb_frame.f_code.co_filename):
            steps.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    if not steps or not in_library(steps[-1][0].f_code.co_filename):
        return ""
    for (frame, line), (inner, _) in zip(steps[::-1][1:], steps[::-1]):
        if not in_library(frame.f_code.co_filename):
            return (
                f", inside {library_function(inner)} called at "
                f"{frame.f_code.co_filename}:{line}"
            )
    return ""


def _exit_location(exc: SystemExit, fn: Callable[..., Any]) -> str:
    """Where ``sys.exit`` (or the ``exit``/``quit`` builtins) was called."""
    return guard.user_frame(exc) or definition(fn)


def _at(where: str | None) -> str:
    return f" at {where}" if where else ""
