"""Conversions between Python values and the trace, both ways.

Into the trace: a non-traced operand as a constant (:func:`as_constant`, a shared
``Lit`` for a float64 scalar: :func:`_constant_lit`). Out of it, a tracer's
conversions to Python values: ``bool()``, ``int()``/``float()``, use as an index
and NumPy making an ndarray of it. Each is the value of a constant; for a traced
value, ``bool()`` raises :class:`TracedBranch` (the frontend rewrites the user's
branch, see :mod:`difgen.frontend.control`) and the others refuse with a
:class:`TraceError` that says what to write instead.
:class:`difgen.core.tracer.Tracer` installs them as its methods.
"""

from __future__ import annotations

import operator
import struct
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from difgen.core.ir import Lit
from difgen.core.location import in_difgen_or_numpy, user_location
from difgen.errors import TraceError

if TYPE_CHECKING:
    from difgen.core.tracer import Tracer


def as_constant(value: Any) -> np.ndarray:
    """A non-traced operand as a float64 (or bool) array."""
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TraceError(f"{user_location()}: cannot use {type(value).__name__} here")
    if arr.dtype.kind == "c":
        raise TraceError(
            f"{user_location()}: complex numbers are not supported: difgen traces "
            "real float64 values, and dropping the imaginary part would change the "
            "result"
        )
    if arr.dtype.kind not in "biuf":
        raise TraceError(f"{user_location()}: cannot use a {arr.dtype} value here")
    return arr if arr.dtype == np.bool_ else arr.astype(np.float64)


_SCALAR_LITS: dict[bytes, Lit] = {}  # Lits are immutable: one per float64 scalar


_MAX_SCALAR_LITS = 100_000


def _constant_lit(value: Any) -> Lit:
    """``Lit(as_constant(value))``, shared for float64 scalars.

    Most constants of a trace are a few scalars (a step size, the coefficients)
    used over and over; making each Lit copies, converts and hashes the array again.
    The key is the scalar's bytes, so -0.0 and 0.0 (or two NaNs) stay apart.
    """
    if type(value) is float or (
        type(value) is np.ndarray and value.ndim == 0 and value.dtype == np.float64
    ):
        key = struct.pack("<d", float(value))
        lit = _SCALAR_LITS.get(key)
        if lit is None:
            if len(_SCALAR_LITS) >= _MAX_SCALAR_LITS:
                _SCALAR_LITS.clear()
            lit = _SCALAR_LITS[key] = Lit(as_constant(value))
        return lit
    return Lit(as_constant(value))


class TracedBranch(TraceError):
    """``bool()`` of a traced value: a branch on a value known at run time only.

    The tracer raises it; the frontend catches it, rewrites the function so that its
    branches become ``cond`` equations, and traces again (:mod:`difgen.frontend.
    control`). ``code`` and ``line`` say where the branch is.
    """

    def __init__(self, message: str, code: Any, line: int, outer: list[Any]) -> None:
        super().__init__(message)
        self.code = code
        self.line = line
        self.outer = outer  # the code of the enclosing user frames, innermost first


def _user_frame() -> Any:
    """The innermost frame of the user's code (outside difgen and NumPy)."""
    frame = sys._getframe(1)
    while frame is not None and in_difgen_or_numpy(frame.f_code.co_filename):
        frame = frame.f_back  # type: ignore[assignment]
    return frame


def _bool(self: Tracer) -> bool:
    """``bool()``: a constant's truth, or :class:`TracedBranch` for a traced value."""
    if isinstance(self.atom, Lit):
        return bool(self.atom.value)
    frame = _user_frame()
    raise TracedBranch(
        f"{user_location()}: bool() of a traced value: the value depends on the "
        "input, which difgen does not know at build time. A branch on it "
        "(`if`, `while`, `and`/`or`) cannot be traced here: use "
        "np.where(cond, a, b).",
        frame.f_code if frame is not None else None,
        frame.f_lineno if frame is not None else 0,
        _outer_codes(frame),
    )


def _outer_codes(frame: Any) -> list[Any]:
    """The code objects of the user's frames from ``frame`` outwards."""
    codes = []
    while frame is not None:
        if not in_difgen_or_numpy(frame.f_code.co_filename):
            codes.append(frame.f_code)
        frame = frame.f_back
    return codes


def _branch_error(kind: str, convert: Callable[..., Any]) -> Callable[..., Any]:
    """A conversion to a Python value: fine for a constant, an error when traced."""

    def method(self: Tracer, *args: Any) -> Any:
        if isinstance(self.atom, Lit):
            return convert(self.atom.value, *args)
        raise TraceError(
            f"{user_location()}: {kind} of a traced value: the value depends on the "
            "input, which difgen does not know at build time, so it cannot become "
            "a Python number. Keep it a NumPy value: use NumPy functions (np.sin, "
            "not math.sin) and compare with NumPy operators (branches on them are "
            "traced)."
        )

    return method


_index_error = _branch_error(
    "use as an index (of an array difgen does not trace? np.take(table, index, "
    "axis=0) indexes a constant table at run time)",
    operator.index,
)


def _as_ndarray(self: Tracer, dtype: Any = None, copy: Any = None) -> np.ndarray:
    """NumPy making an ndarray of a tracer: its value for a constant, else refused.

    NumPy asks for it where a traced value would be lost: stored into an array
    that is not traced (``U = BOUND.copy(); U[1:-1] = u`` with ``BOUND`` an array
    made outside the traced function, which ``ndarray.copy`` copies as a plain
    NumPy array), or passed to a NumPy call that does not dispatch to difgen.
    """
    if isinstance(self.atom, Lit):
        value = self.atom.value
        return value.astype(dtype) if dtype is not None else value.copy()
    raise TraceError(
        f"{user_location()}: a traced value is converted to a plain NumPy array "
        "here, which would lose it: it is stored into an array difgen does not "
        "trace (one copied with .copy() from an array made outside the traced "
        "function: write np.copy(ARRAY) or np.array(ARRAY) instead, which give a "
        "traced array), or passed to a NumPy call that difgen does not see"
    )
