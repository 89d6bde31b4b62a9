"""The float type a module computes in: float64, or float32 (``input.dtype``).

The IR has one float type. A float32 module is traced, derived and optimized like a
float64 one; it is the emitted code that computes in float32: its arguments are
checked as float32 arrays, every float array it creates (constants, seeds, zeros,
bases) is made with ``dtype=np.float32``, a scalar constant is written as
``np.float32(0.5)`` (NumPy 2 treats a Python float as weak, NEP 50, so ``x * 0.5``
would stay float32, but not in a call whose float operands are all literals:
``np.where(m, 1.0, 0.0)`` is float64), and its scalar results are ``np.float32``
values. NumPy then computes every operation of the module in float32, as the
user's function does on float32 data; with ``accumulate = "float64"`` its sums and
products accumulate in float64 (:func:`accumulating`). The C target (``emit = "c"``)
computes a float32 module in ``float`` (:mod:`difgen.targets.c.real`).

What the printers need to know is only which float type that is. They run inside
:func:`computing_in` (the pipeline's trace, print and render stages), and read it
with :func:`module_float`; outside of it a module is float64, and every float64
module prints exactly as before float32 existed. While tracing, the frontend takes
``dtype=np.float32`` and ``.astype(np.float32)`` of a float32 module's values as
the no-ops they are (:func:`is_traced_float`); a float32 constant (``np.ones(3,
dtype=np.float32)``) is a constant of the IR's float type, whose values float32
holds exactly.

>>> module_float()
'float64'
>>> with computing_in("float32"):
...     module_float(), float_dtype_arg(), array_type()
('float32', ', dtype=np.float32', 'NDArray[np.float32]')
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

FLOAT_DTYPES = ("float64", "float32")

_MODULE_FLOAT: ContextVar[str] = ContextVar("module_float", default="float64")
_ACCUMULATE: ContextVar[bool] = ContextVar("accumulate", default=False)


@contextmanager
def computing_in(dtype: str, accumulate: str | None = None) -> Iterator[None]:
    """Print (and render) the module inside this block in float ``dtype``; with
    ``accumulate = "float64"`` (a float32 module's option), its sums and products
    accumulate in float64 (:func:`accumulating`)."""
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"no module computes in {dtype}")
    token = _MODULE_FLOAT.set(dtype)
    wide = _ACCUMULATE.set(accumulate == "float64" and dtype == "float32")
    try:
        yield
    finally:
        _ACCUMULATE.reset(wide)
        _MODULE_FLOAT.reset(token)


def accumulating() -> bool:
    """Whether the module's sums, matrix products and contractions accumulate in
    float64 and round their result to float32 (``accumulate = "float64"``): each
    is then one float32 rounding of the float64 result, where float32
    accumulation (BLAS's sgemm, NumPy's pairwise sums) rounds at every step."""
    return _ACCUMULATE.get()


def widened(call: str) -> str:
    """``call`` (a NumPy call ending in ``)``) with ``dtype=np.float64`` added and
    its result rounded to float32, when the module accumulates in float64."""
    if not accumulating():
        return call
    return f"{call[:-1]}, dtype=np.float64).astype(np.float32)"


def module_float() -> str:
    """``"float64"`` or ``"float32"``: the float type of the module being printed."""
    return _MODULE_FLOAT.get()


def is_float32() -> bool:
    return _MODULE_FLOAT.get() == "float32"


def is_traced_float(dtype: Any) -> bool:
    """Whether ``dtype`` is the float type of the module being traced: float64, or
    float32 in a float32 module (where ``x.astype(np.float32)`` changes nothing)."""
    if dtype is None:
        return False
    return np.dtype(dtype) == np.float64 or (
        is_float32() and np.dtype(dtype) == np.float32
    )


def float_dtype_arg() -> str:
    """``", dtype=np.float32"`` for the calls that make a float array (``np.zeros``,
    ``np.array`` of floats...) in a float32 module; nothing in a float64 one, where
    NumPy's default is the module's type."""
    return ", dtype=np.float32" if is_float32() else ""


def array_type() -> str:
    """The annotation of the module's float arrays."""
    return f"NDArray[np.{module_float()}]"


def scalar_result(expr: str) -> str:
    """A scalar result: a Python float in a float64 module (as always), an
    ``np.float32`` in a float32 one (a float32 function's derivatives are float32,
    as JAX returns them)."""
    return f"np.float32({expr})" if is_float32() else f"float({expr})"
