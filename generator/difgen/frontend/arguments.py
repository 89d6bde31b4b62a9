"""Helpers on the arguments of NumPy's API while tracing: axes, element counts, and
the keywords refused because they would change what a call computes."""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen import precision
from difgen.core.location import user_location as _where
from difgen.errors import TraceError


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted(int(a) % ndim if ndim else 0 for a in axes))


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def _no_out(kwargs: dict[str, Any]) -> None:
    """Refuse the keywords that would change what the call computes: ``out=``,
    ``where=`` and a ``dtype=`` other than float64 (which NumPy would cast to)."""
    if kwargs.get("out") is not None:
        raise TraceError(f"{_where()}: out= is not supported while tracing")
    dtype = kwargs.get("dtype")
    if dtype is not None and not precision.is_traced_float(dtype):
        if precision.is_float32():
            raise TraceError(
                f"{_where()}: dtype={np.dtype(dtype)} would compute in another type "
                "than the module's float32; accumulating float32 data in float64 "
                "is not offered in this version (declare input.dtype float64)"
            )
        raise TraceError(
            f"{_where()}: dtype={np.dtype(dtype)} would compute in another type "
            "than float64 (NumPy casts, rounding toward zero for integers); "
            "difgen differentiates float64 values only"
        )
    if kwargs.get("where", True) is not True:
        raise TraceError(f"{_where()}: where= is not supported while tracing")
    if kwargs.get("initial", np._NoValue) not in (None, np._NoValue):
        raise TraceError(f"{_where()}: initial= is not supported while tracing")
