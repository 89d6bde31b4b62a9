"""Run user code with ``np`` bound to a tracing namespace.

NumPy's array *creation* functions do not dispatch to tracers: ``np.array`` of traced
scalars builds an object array, and ``np.zeros(3)[0] = t`` calls ``float(t)``. While
tracing, the user's modules see a namespace in which these few functions build traced
values; everything else is NumPy itself, which dispatches through the tracer.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import math
import re
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from difgen import precision
from difgen.core.location import in_difgen_or_numpy, in_library, user_location
from difgen.core.tracer import Tracer, constant, contains_tracer, lift, xp
from difgen.errors import TraceError
from difgen.frontend import optimize_api, reduction_api, special_api
from difgen.frontend.python_scalars import BUILTINS, MATH_REPLACEMENTS, TRACING_MATH

_CONSTANT_DTYPES = (np.float64, np.float32, np.int64, np.bool_)


def _check_dtype(dtype: Any) -> None:
    if dtype is not None and np.dtype(dtype) not in _CONSTANT_DTYPES:
        raise TraceError(
            f"{user_location()}: dtype {np.dtype(dtype)} cannot be traced (float64 "
            "or float32 values, int64 or bool constants only)"
        )


def _check_traced_dtype(dtype: Any, what: str) -> None:
    """A traced value keeps its float type (float64, or float32 in a float32
    module): any other dtype would change its values."""
    if dtype is not None and not precision.is_traced_float(dtype):
        raise TraceError(
            f"{user_location()}: {what} with dtype={np.dtype(dtype)} of a traced "
            "value would change its values (NumPy casts, rounding toward zero for "
            "integers); difgen differentiates float64 values only"
        )


def array(obj: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``np.array``: traced when any element is traced, a mutable constant otherwise.

    Like NumPy's, it copies: the result is a new array object, never ``obj`` itself.
    Integer arrays stay plain NumPy constants (they are indices, and a traced value
    cannot be stored into them without NumPy rounding it).
    """
    _check_dtype(dtype)
    if contains_tracer(obj):
        _check_traced_dtype(dtype, "np.array")
        value = lift(obj, force=True)
        return value.copy() if value is obj else value
    value = xp.array(obj, *args, dtype=dtype, **kwargs)
    if value.dtype.kind not in "fb":
        return value
    return constant(value.astype(np.float64) if value.dtype.kind == "f" else value)


def asarray(obj: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``np.asarray``: the tracer itself (no copy, as in NumPy), else :func:`array`."""
    if isinstance(obj, Tracer):
        _check_traced_dtype(dtype, "np.asarray")
        return obj
    return array(obj, dtype)


def _filler(fill: float) -> Callable[..., Any]:
    def create(shape: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        _check_dtype(dtype)
        if dtype is not None and not precision.is_traced_float(dtype):
            return np.full(shape, fill, dtype=dtype)  # plain: NumPy's own semantics
        return constant(np.full(shape, fill, dtype=np.float64))

    create.__name__ = {0.0: "zeros", 1.0: "ones"}.get(fill, "empty")
    return create


def full(shape: Any, fill_value: Any, dtype: Any = None, **kwargs: Any) -> Any:
    """``np.full`` with a constant or traced fill value."""
    if isinstance(fill_value, Tracer):
        return (
            xp.broadcast_to(fill_value, shape if isinstance(shape, tuple) else (shape,))
            * 1.0
        )
    _check_dtype(dtype)
    value = np.full(shape, fill_value, dtype=dtype)
    return constant(value) if value.dtype.kind in "fb" else value


def copy(a: Any, *args: Any, **kwargs: Any) -> Any:
    """``np.copy``: a new array object, traced (a copy of a float64 constant, such
    as a module's boundary array, becomes traced once a traced value is stored into
    it, as :func:`array` makes it)."""
    if isinstance(a, Tracer):
        return a.copy()
    return array(a)


class TracingUfunc:
    """A NumPy ufunc whose arguments that are lists or tuples holding traced values
    become one traced array first (``np.sin([x[0], x[1]])``): NumPy would build an
    object array of tracers, which difgen cannot trace. Everything else (``.reduce``,
    ``.nin``, ``__name__``...) is the ufunc's own."""

    def __init__(self, ufunc: np.ufunc) -> None:
        self.ufunc = ufunc
        self.__name__ = ufunc.__name__
        self.__doc__ = ufunc.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.ufunc(*_lifted(args), **kwargs)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.ufunc, name)
        if name in ("reduce", "accumulate", "outer", "reduceat", "at"):
            return lambda *args, **kwargs: attribute(*_lifted(args), **kwargs)
        return attribute

    def __repr__(self) -> str:
        return repr(self.ufunc)


def _lifted(args: tuple[Any, ...]) -> list[Any]:
    return [lift(a) if isinstance(a, (list, tuple)) else a for a in args]


# every NumPy ufunc, by name, as the user's code sees it while tracing
UFUNCS: dict[str, TracingUfunc] = {
    name: TracingUfunc(value)
    for name, value in vars(np).items()
    if isinstance(value, np.ufunc) and not name.startswith("_")
}

OVERRIDES: dict[str, Callable[..., Any]] = {
    "array": array,
    "asarray": asarray,
    "asanyarray": asarray,
    "copy": copy,
    "zeros": _filler(0.0),
    "ones": _filler(1.0),
    "empty": _filler(0.0),  # zeros: deterministic, and the user overwrites it anyway
    "full": full,
    # reductions of a Python list of traced arrays (np.mean([x, x + 2])): NumPy's
    # dispatch sees a list, not a tracer, and would build an object array
    **{
        name: reduction_api.reduce_list(getattr(np, name))
        for name in ("sum", "mean", "prod", "max", "min", "amax", "amin", "std", "var")
    },
}


class TracingNumpy(types.ModuleType):
    """``numpy`` with the creation functions replaced; all else is NumPy."""

    def __init__(self) -> None:
        super().__init__("numpy")
        self.__dict__.update(UFUNCS)
        self.__dict__.update(OVERRIDES)

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


TRACING_NUMPY = TracingNumpy()
_REPLACEMENTS = {id(getattr(np, name)): fn for name, fn in OVERRIDES.items()}
_REPLACEMENTS.update({id(fn.ufunc): fn for fn in UFUNCS.values()})
_REPLACEMENTS.update(MATH_REPLACEMENTS)


# NumPy's creation functions as libraries written in NumPy call them on a traced
# value (SciPy's ``_asarray`` calls ``np.asanyarray(x, dtype=...)``, its array-API
# shim ``np.zeros(n, dtype=...)`` for an array it then stores traced values into):
# while tracing, ``numpy`` itself has these replaced for callers outside difgen and
# NumPy. A library's call is changed only where it must be: a conversion of traced
# values, or a float64 array created while no module is being imported (a module's
# own constants stay NumPy arrays); everything else is NumPy's own call.
CONVERSIONS = ("array", "asarray", "asanyarray")
CREATIONS = ("zeros", "ones", "empty", "full")
_OWN_FILES: dict[str, bool] = {}


def _for_libraries(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        filename = frame.f_code.co_filename
        own = _OWN_FILES.get(filename)
        if own is None:
            own = _OWN_FILES[filename] = in_difgen_or_numpy(filename)
        if (
            not own
            and _called_by_name(frame, name)
            and _needs_difgen(name, args, kwargs, frame)
        ):
            return OVERRIDES[name](*args, **kwargs)
        return original(*args, **kwargs)

    dispatch.__name__ = getattr(original, "__name__", name)
    dispatch.__qualname__ = getattr(original, "__qualname__", name)
    dispatch.__doc__ = getattr(original, "__doc__", None)
    dispatch.__wrapped__ = original  # type: ignore[attr-defined]
    return dispatch


_DIRECT: dict[tuple[Any, int, str], bool] = {}


def _called_by_name(frame: Any, name: str) -> bool:
    """Whether ``frame``'s current instruction is a call that names ``name``
    (``np.zeros(n)``, ``xp.asarray(x)``), not a call of compiled code that calls
    NumPy from C (``np.random.rand(3)`` creates its array with ``np.empty``: it
    must get NumPy's, whose memory it writes)."""
    key = (frame.f_code, frame.f_lasti, name)
    known = _DIRECT.get(key)
    if known is None:
        known = _DIRECT[key] = re.search(rf"\b{name}\b", _call_text(frame)) is not None
    return known


def _call_text(frame: Any) -> str:
    """The source text of the expression ``frame`` is evaluating ("" if unknown)."""
    code = frame.f_code
    positions = list(code.co_positions())
    index = frame.f_lasti // 2
    if not 0 <= index < len(positions):
        return ""
    first, last, start, end = positions[index]
    if first is None or last is None:
        return ""
    lines = [linecache.getline(code.co_filename, n) for n in range(first, last + 1)]
    text = "".join(lines).encode()
    if start is not None and end is not None:
        cut = len("".join(lines[:-1]).encode()) + end
        text = text[start:cut]
    return text.decode(errors="replace")


def _needs_difgen(name: str, args: Any, kwargs: dict[str, Any], frame: Any) -> bool:
    """Whether a library's ``np.<name>(*args, **kwargs)`` must build a traced value."""
    if name in CONVERSIONS:
        return bool(args) and contains_tracer(args[0])
    position = 2 if name == "full" else 1  # where dtype is, given positionally
    if name == "full" and len(args) > 1 and isinstance(args[1], Tracer):
        return True
    dtype = kwargs.get("dtype", args[position] if len(args) > position else None)
    if dtype is not None and np.dtype(dtype) != np.float64:
        return False
    return _works_on_traced_values(frame)


def _works_on_traced_values(frame: Any) -> bool:
    """Whether the code calling from ``frame`` works on traced values: the user's
    own code, or a library function (or one it called) holding a traced value in a
    local variable. A library computing constants (quadrature nodes) keeps NumPy's
    arrays, which its compiled code needs, and so does module-level code being
    imported (a module's constants must stay NumPy arrays after the trace)."""
    tracing = sys.modules.get("difgen.frontend.tracing")
    start = tracing._call.__code__ if tracing is not None else None
    caller_is_user = not in_library(frame.f_code.co_filename)
    library_holds = False
    below_the_user = True  # the frames from the caller out to the user's
    while frame is not None and frame.f_code is not start:
        filename = frame.f_code.co_filename
        if filename.startswith("<frozen importlib"):
            return False
        if not in_difgen_or_numpy(filename):
            if not in_library(filename):
                below_the_user = False
            elif below_the_user and not library_holds:
                library_holds = any(_holds_tracer(v) for v in frame.f_locals.values())
        frame = frame.f_back
    return caller_is_user or library_holds


def _holds_tracer(value: Any) -> bool:
    return isinstance(value, Tracer) or (
        isinstance(value, (list, tuple)) and any(isinstance(v, Tracer) for v in value)
    )


@contextlib.contextmanager
def numpy_for_libraries() -> Iterator[None]:
    """Within the block, library code calling ``np.asarray``, ``np.zeros``... on
    traced values (or to build arrays it stores traced values into) gets difgen's
    versions, as the user's own code does."""
    originals = {name: getattr(np, name) for name in CONVERSIONS + CREATIONS}
    for name, original in originals.items():
        setattr(np, name, _for_libraries(name, original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(np, name, original)


def add_override(name: str, fn: Callable[..., Any]) -> None:
    """Replace ``np.<name>`` while tracing, for a NumPy function that does not
    dispatch on the argument that may be traced (``np.take``'s indices)."""
    OVERRIDES[name] = fn
    setattr(TRACING_NUMPY, name, fn)
    _REPLACEMENTS[id(getattr(np, name))] = fn


def _user_globals(fn: Callable[..., Any]) -> list[dict[str, Any]]:
    """Globals of ``fn`` and of the user functions it can reach by name."""
    seen: dict[int, dict[str, Any]] = {}
    stack = [fn]
    while stack:
        f = inspect.unwrap(stack.pop())
        g = getattr(f, "__globals__", None)
        if (
            g is None
            or id(g) in seen
            or g.get("__name__", "").startswith(("numpy", "difgen"))
        ):
            continue
        seen[id(g)] = g
        stack.extend(v for v in list(g.values()) if inspect.isfunction(v))
        closure = getattr(f, "__closure__", None) or ()
        stack.extend(c.cell_contents for c in closure if inspect.isfunction(_safe(c)))
    return list(seen.values())


def _safe(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return None


def _optimize_named_in(fn: Callable[..., Any]) -> Any:
    """``scipy.optimize``, imported when the user's code names it but has not
    imported it yet (``from scipy.optimize import brentq`` inside the function),
    so that its root finders are replaced before the call; else None."""
    codes = [getattr(fn, "__code__", None)]
    for g in _user_globals(fn):
        codes += [
            getattr(v, "__code__", None) for v in g.values() if inspect.isfunction(v)
        ]
    seen: set[int] = set()
    while codes:
        code = codes.pop()
        if not isinstance(code, types.CodeType) or id(code) in seen:
            continue
        seen.add(id(code))
        if any("optimize" in name for name in code.co_names):
            try:
                import scipy.optimize
            except ImportError:
                return None
            return scipy.optimize
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return None


@contextlib.contextmanager
def tracing_numpy(fn: Callable[..., Any]) -> Iterator[None]:
    """Bind ``np`` (and ``from numpy import zeros``-style names), ``math`` (and
    ``from math import exp``) and the builtins ``min``/``max`` while tracing ``fn``.

    Every binding is undone afterwards, exactly: replaced names get their value back,
    and builtins added to a module's globals (where the module does not define its
    own) are removed again."""
    saved: list[tuple[dict[str, Any], str, Any]] = []
    added: list[tuple[dict[str, Any], str]] = []
    special = sys.modules.get("scipy.special")
    scipy_functions: dict[int, Callable[..., Any]] = {}
    if special is not None:  # its functions written in Python, by name or module
        for name in special_api.FUNCTIONS:
            original = special.__dict__.get(name)
            if original is not None:
                traced = special_api.replacement(name, original)
                scipy_functions[id(original)] = traced
                saved.append((special.__dict__, name, original))
                special.__dict__[name] = traced
    optimize = sys.modules.get("scipy.optimize") or _optimize_named_in(fn)
    if optimize is not None:  # its root finders, as loops differentiated implicitly
        for name in optimize_api.FUNCTIONS:
            original = optimize.__dict__.get(name)
            if original is not None:
                traced = optimize_api.replacement(name, original)
                scipy_functions[id(original)] = traced
                saved.append((optimize.__dict__, name, original))
                optimize.__dict__[name] = traced
    for g in _user_globals(fn):
        for name, value in list(g.items()):
            if value is np:
                saved.append((g, name, value))
                g[name] = TRACING_NUMPY
            elif value is math:
                saved.append((g, name, value))
                g[name] = TRACING_MATH
            elif (
                callable(value)
                and id(value) in _REPLACEMENTS
                and not name.startswith("__")
            ):
                saved.append((g, name, value))
                g[name] = _REPLACEMENTS[id(value)]
            elif id(value) in scipy_functions and not name.startswith("__"):
                saved.append((g, name, value))
                g[name] = scipy_functions[id(value)]
        for name, traced in BUILTINS.items():
            if name not in g:
                added.append((g, name))
                g[name] = traced
    try:
        with numpy_for_libraries():
            yield
    finally:
        for g, name in reversed(added):
            g.pop(name, None)
        for g, name, value in reversed(saved):
            g[name] = value
