"""Run-time primitives on boolean masks: a reduction over the elements a run-time
mask selects (``x[mask].sum()``, ``.mean()``...) and ``np.count_nonzero``.

Their rows are declared by :func:`difgen.primitives.runtime.runtime_row` (see that
module for what the run-time families share).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from difgen.core.expr import Aval, Expr, argument, atom, base
from difgen.core.primitive import (
    NOT_DIFFERENTIABLE,
)
from difgen.core.tracer import bind
from difgen.errors import DifgenError
from difgen.primitives import patterns
from difgen.primitives.runtime import _unbatched_indices, bind_row, runtime_row


# ----------------------------------------------------------------- masks
def _masked_impl(x: Any, mask: Any, op: str) -> Any:
    return np.asarray(getattr(np, op)(np.asarray(x)[np.asarray(mask)]))


def _masked_form(
    args: Sequence[Expr], params: Mapping[str, Any], avals: Sequence[Aval]
) -> Expr:
    """The user's own expression, so the summation order is NumPy's."""
    return atom(f"np.{params['op']}({base(args[0])}[{argument(args[1])}])")


def _mask_over(mask: Any, shape: tuple[int, ...]) -> Any:
    """A mask over the leading axes, broadcast over the trailing ones."""
    extra = len(shape) - np.ndim(mask)
    return np.reshape(mask, np.shape(mask) + (1,) * extra)


def _masked_jvp(out: Any, primals: list[Any], tangents: list[Any], op: str) -> Any:
    """Linear in the values."""
    return None if tangents[0] is None else masked_reduce(tangents[0], primals[1], op)


def _masked_transpose(ct: Any, x: Any, mask: Any, op: str) -> list[Any]:
    """The cotangent (over the count, for a mean) at the selected positions."""
    if op == "mean":
        count = bind_row("count_nonzero", mask)
        extra = int(np.prod(x.shape[np.ndim(mask) :], dtype=np.int64))
        ct = ct / (bind_row("to_float64", count) * float(extra))
    picked = np.where(_mask_over(mask, x.shape), ct, 0.0)
    return [np.broadcast_to(picked, x.shape), None]


def _masked_batch(args: Any, batched: Any, k: int, op: str) -> Any:
    """A batch of tangents (the mask is primal, never batched): the masked sum of
    each, as ``sum(where(mask, t, 0))`` over the non-batch axes (a derivative, so
    NumPy's summation order of the selection need not be kept)."""
    _unbatched_indices("masked_reduce", batched[1:])
    t, mask = args
    picked = np.where(_mask_over(mask, tuple(np.shape(t))[1:]), t, 0.0)
    total = np.sum(picked, axis=tuple(range(1, np.ndim(t))))
    if op == "sum":
        return total
    count = bind_row("to_float64", bind_row("count_nonzero", mask))
    extra = int(np.prod(np.shape(t)[1 + np.ndim(mask) :], dtype=np.int64))
    return total / (count * float(extra))


def _masked_shape(x: Aval, mask: Aval, op: str) -> Aval:
    if mask[1] != "bool" or tuple(x[0][: len(mask[0])]) != tuple(mask[0]):
        raise ValueError(f"mask {mask} does not select from {x}")
    return (), "float64"


masked_reduce_p = runtime_row(
    "masked_reduce",
    _masked_impl,
    _masked_form,
    shape_rule=_masked_shape,
    jvp=_masked_jvp,
    transpose=_masked_transpose,
    batch=_masked_batch,
    sparsity=patterns.all_inputs,
)


def masked_reduce(x: Any, mask: Any, op: str) -> Any:
    """``np.sum(x[mask])`` or ``np.mean(x[mask])`` with a run-time mask."""
    return bind(masked_reduce_p, x, mask, op=op)


def _count_batch(args: Any, batched: Any, k: int) -> Any:
    raise DifgenError("counting a run-time mask over a batch of seeds")


count_nonzero_p = runtime_row(
    "count_nonzero",
    lambda mask: np.asarray(np.count_nonzero(mask), dtype=np.int64),
    lambda args, params, avals: atom(
        f"np.int64(np.count_nonzero({argument(args[0])}))"
    ),
    shape_rule=lambda mask: ((), "int64"),
    jvp=NOT_DIFFERENTIABLE,
    batch=_count_batch,
    sparsity=patterns.no_dependence,
)
