"""NumPy's API on run-time integer and boolean data: indexing with traced indices
and masks, integer arithmetic, dtype conversions, and the sort family.

Registered into the core tracer (:func:`difgen.core.dispatch.use_runtime_dispatch`)
and into the NumPy frontend's tables when imported. Every shape stays static: an
index array known only at run time has a static shape, and so does a gather through
it; a boolean mask's *selection* ``x[mask]`` has a length known only at run time, so
it is a :class:`MaskedSelection`, which can be reduced (``np.sum``, ``np.mean``),
transformed elementwise, or assigned through (``z[mask] = v``), and anything else is
refused with a message suggesting the static-shape form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from difgen import precision
from difgen.core.dispatch import use_numpy_dispatch, use_runtime_dispatch
from difgen.core.indexing import freeze_index
from difgen.core.ir import Lit
from difgen.core.location import user_location as _where
from difgen.core.tracer import Tracer, constant, is_runtime, is_runtime_int, lift, xp
from difgen.core.tracer import bind_name as _bind
from difgen.errors import TraceError
from difgen.frontend import (
    arguments,
    namespace,
    numpy_api,
    reduction_api,
    selection_api,
)
from difgen.primitives import integers, masks, sorting
from difgen.primitives import runtime as rt
from difgen.primitives.indexing import scatter_add

# ------------------------------------------------------------------- indexing


def _is_mask(item: Any) -> bool:
    return is_runtime(item) and item.dtype == np.bool_


def _constant_value(value: Any) -> Any:
    """A constant tracer's array (callers have refused traced values)."""
    if isinstance(value, Tracer):
        atom = value.atom
        assert isinstance(atom, Lit)
        return np.asarray(atom.value)
    return value


def _split_index(x: Tracer, index: Any) -> tuple[tuple[Any, ...], list[Any]]:
    """A frozen index with ``("dyn", k)`` markers for the traced int64 items, and
    those items in order."""
    items = index if isinstance(index, tuple) else (index,)
    template: list[Any] = []
    dyn: list[Any] = []
    for item in items:
        if is_runtime(item):
            if item.dtype != np.int64:
                raise TraceError(
                    f"{_where()}: indexing with a traced {item.dtype} array; NumPy "
                    "indexes with integers (use .astype(int) for positions) or "
                    "booleans"
                )
            template.append(("dyn", len(dyn)))
            dyn.append(item)
            continue
        item = _constant_value(item)
        template.extend(freeze_index((item,), x.shape))
    return tuple(template), dyn


def _selection_error(what: str, made: str | None = None) -> TraceError:
    at = _where()
    if made is not None and made != at:
        what += f" (the selection x[mask] made at {made})"
        at = made
    return TraceError(
        f"{at}: {what}: x[mask] with a mask computed at run time has as many "
        "elements as the mask has True values, known only at run time, and difgen "
        "traces static shapes. Keep the shape static: np.where(mask, x, 0.0) "
        "(then np.sum), or reduce the selection at once (np.sum(x[mask]), "
        "np.mean(x[mask]), np.count_nonzero(mask)), or assign through it "
        "(z[mask] = value)"
    )


def _mask_of(x: Tracer, index: Any) -> Any:
    """The run-time mask of ``x[index]``, checked as NumPy checks it."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) != 1:
        raise TraceError(
            f"{_where()}: a run-time mask combined with other indices is not "
            "supported; index with the mask alone (x[mask]) or use np.where"
        )
    mask = items[0]
    if tuple(x.shape[: mask.ndim]) != tuple(mask.shape):
        raise TraceError(
            f"{_where()}: boolean index of shape {mask.shape} does not match the "
            f"indexed array of shape {x.shape} (NumPy raises IndexError)"
        )
    return mask


def getitem(x: Tracer, index: Any) -> Any:
    """``x[index]`` with a traced index: a run-time gather, or a mask selection."""
    items = index if isinstance(index, tuple) else (index,)
    if any(_is_mask(item) for item in items):
        return MaskedSelection(x, _mask_of(x, index))
    template, dyn = _split_index(x, index)
    return rt.gather(x, dyn, template)


def _as_float(value: Any) -> Any:
    """Integer and boolean values as float64, as NumPy casts them when stored into
    (or combined with) a float64 array."""
    if isinstance(value, Tracer) and value.dtype != np.float64:
        return rt.bind_row("to_float64", value)
    if isinstance(value, np.ndarray) and value.dtype != np.float64:
        return value.astype(np.float64)
    return value


def setitem(x: Tracer, index: Any, value: Any) -> None:
    """``x[index] = value`` with a traced index or mask, in place."""
    if x.dtype != np.float64:
        raise TraceError(
            f"{_where()}: assigning through a run-time index into a {x.dtype} "
            "array is not supported (only into float64 arrays)"
        )
    items = index if isinstance(index, tuple) else (index,)
    if any(_is_mask(item) for item in items):
        mask = _mask_of(x, index)
        if isinstance(value, MaskedSelection):
            if value.mask is not mask and value.mask.atom != mask.atom:
                raise _selection_error("assigning a selection by another mask")
            value = value.values
        elif np.size(value) != 1:
            raise _selection_error("assigning an array through a mask")
        else:
            value = xp.reshape(value, ()) if isinstance(value, Tracer) else value
        over = xp.reshape(mask, tuple(mask.shape) + (1,) * (x.ndim - mask.ndim))
        x.write(xp.where(over, _as_float(value), x))
        return
    template, dyn = _split_index(x, index)
    value = _as_float(lift(value))
    region = np.shape(rt.gather(x, dyn, template))
    try:
        np.broadcast_to(np.empty(np.shape(value)), region)
    except ValueError:
        raise TraceError(
            f"{_where()}: could not broadcast a value of shape {np.shape(value)} "
            f"into the indexed region of shape {region}"
        ) from None
    x.write(rt.set_index_dyn(x, value, dyn, template))


class MaskedSelection(np.lib.mixins.NDArrayOperatorsMixin):
    """``x[mask]`` for a run-time ``mask``: the full-shape values and the mask.

    Its length is known only at run time, so it exists only to be reduced
    (``np.sum``, ``np.mean``: the generated code computes ``np.sum(x[mask])``,
    NumPy's own summation), transformed elementwise first (``np.exp(x[mask])``:
    the function of the values, selected later) or assigned through
    (``z[mask] = x[mask]``). Anything that needs its shape is refused.
    """

    def __init__(self, values: Any, mask: Any) -> None:
        self.values = values
        self.mask = mask
        self.made = _where()

    def _error(self, what: str) -> TraceError:
        return _selection_error(what, self.made)

    def _same_mask(self, other: MaskedSelection) -> bool:
        return other.mask is self.mask or other.mask.atom == self.mask.atom

    def _operand(self, value: Any) -> Any:
        if isinstance(value, MaskedSelection):
            if not self._same_mask(value):
                raise self._error("combining selections by different masks")
            return value.values
        if np.size(value) != 1:
            raise self._error(
                f"combining a selection with an array of shape {np.shape(value)}"
            )
        return xp.reshape(value, ()) if isinstance(value, Tracer) else value

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> Any:
        if method == "reduce" and ufunc is np.add and len(inputs) == 1:
            return self.sum(**kw)
        if method != "__call__" or kw:
            raise self._error(f"np.{ufunc.__name__}.{method} of a selection")
        values = ufunc(*(self._operand(v) for v in inputs))
        result = MaskedSelection(values, self.mask)
        result.made = self.made
        return result

    def __array_function__(self, func: Any, types: Any, args: Any, kw: Any) -> Any:
        if func in (np.sum, np.mean) and len(args) == 1:
            return getattr(self, func.__name__)(**kw)
        name = getattr(func, "__name__", "a function")
        raise self._error(f"np.{name} of a selection")

    def _reduce(self, op: str, axis: Any, kw: dict[str, Any]) -> Any:
        if axis is not None or any(v not in (None, False) for v in kw.values()):
            raise self._error(f"{op} of a selection with options")
        values = self.values
        if not isinstance(values, Tracer) or values.dtype == np.bool_:
            raise self._error(f"{op} of a selection of {values.dtype} values")
        if not values.is_var:
            values = values + rt.bind_row("to_float64", self.mask) * 0.0
        return masks.masked_reduce(_as_float(values), self.mask, op)

    def sum(self, axis: Any = None, **kw: Any) -> Any:
        return self._reduce("sum", axis, kw)

    def mean(self, axis: Any = None, **kw: Any) -> Any:
        return self._reduce("mean", axis, kw)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._error("using a selection as an array")

    def _refuse(self, *args: Any) -> Any:
        raise self._error("using a selection's shape or values")

    __len__ = __iter__ = __bool__ = __float__ = __index__ = _refuse
    __getitem__ = __setitem__ = _refuse

    @property
    def shape(self) -> Any:
        return self._refuse()

    size = ndim = shape


# ----------------------------------------------------------------- integers
_INT_NAMES = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "floordiv": "floordiv",
    "mod": "mod",
    "subtract": "sub",
    "multiply": "mul",
    "floor_divide": "floordiv",
    "remainder": "mod",
    "maximum": "maximum",
    "minimum": "minimum",
}


def _is_integral(value: Any) -> bool:
    """An int64 tracer, a bool tracer, or an integer (or bool) constant."""
    if isinstance(value, Tracer):
        return value.dtype.kind in "iub"
    if isinstance(value, (bool, int, np.integer, np.bool_)):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind in "iub"


def integer(name: str, a: Any, b: Any) -> Any:
    """A Python operator with a traced int64 operand, as NumPy computes it:
    integers stay int64, anything with a float becomes float64."""
    op = _INT_NAMES.get(name)
    if op is not None and _is_integral(a) and _is_integral(b):
        return integers.int_arith(op, a, b)
    if name in _COMPARISONS:  # comparisons take any operands and give bool
        return _bind(name, a, b)
    if name == "pow":
        raise TraceError(
            f"{_where()}: ** with a run-time integer operand is not supported; "
            "convert it first with .astype(float)"
        )
    if name in ("floordiv", "mod"):
        raise TraceError(
            f"{_where()}: {'//' if name == 'floordiv' else '%'} of a run-time "
            "integer and a float is not supported; convert with .astype(float)"
        )
    return _bind(name, _as_float(a), _as_float(b))


def astype(x: Tracer, dtype: Any) -> Any:
    """``x.astype(dtype)`` between float64, int64 and bool, as NumPy casts."""
    target = np.dtype(dtype)
    if target == np.int64:
        return rt.bind_row("to_int64", x)
    if target == np.bool_:
        return x != 0
    if target == np.float64 or precision.is_traced_float(target):
        # float32 in a float32 module: the IR's float type, as float64 is
        if x.atom.dtype == "float64":
            return x
        return rt.bind_row("to_float64", x)
    raise TraceError(
        f"{_where()}: .astype({target}) of a traced {x.dtype} value: difgen traces "
        "float64, int64 and bool values only"
    )


_COMPARISONS = {"lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or"}
_UFUNC_INT = {"add", "subtract", "multiply", "floor_divide", "remainder", "mod"}
_UFUNC_INT |= {"maximum", "minimum"}


def handle_ufunc(ufunc: Any, method: str, inputs: Any, kwargs: dict[str, Any]) -> Any:
    """Run-time integers, ``np.add.at`` and ``np.maximum.accumulate`` here; every
    other ufunc call goes to the NumPy frontend's handler."""
    name = ufunc.__name__
    if method == "at" and name == "add":
        return add_at(*inputs, **kwargs)
    if method == "accumulate" and name in ("maximum", "minimum"):
        return accumulate(name, *inputs, **kwargs)
    if method == "__call__" and any(is_runtime_int(v) for v in inputs):
        arguments._no_out(kwargs)
        if name in _UFUNC_INT and all(_is_integral(v) for v in inputs):
            key = "mod" if name in ("remainder", "mod") else name
            return integers.int_arith(_INT_NAMES[key], *inputs)
        if name == "negative" and len(inputs) == 1:
            return -inputs[0]
        if name == "absolute" and len(inputs) == 1:
            return abs(inputs[0])
        inputs = [_as_float(v) for v in inputs]
    return numpy_api.handle_ufunc(ufunc, method, inputs, kwargs)


def add_at(a: Any, indices: Any, b: Any = None) -> None:
    """``np.add.at(a, indices, b)``: unbuffered, so repeated positions accumulate."""
    if not isinstance(a, Tracer):
        raise TraceError(
            f"{_where()}: np.add.at into an array difgen does not trace; create it "
            "inside the function (np.zeros) so that the additions are traced"
        )
    if a.dtype != np.float64:
        raise TraceError(f"{_where()}: np.add.at into a {a.dtype} array")
    value = _as_float(lift(1.0 if b is None else b))
    index = indices if isinstance(indices, tuple) else (indices,)
    if any(_is_mask(i) for i in index):
        raise TraceError(f"{_where()}: np.add.at with a run-time mask")
    template, dyn = _split_index(a, indices)
    if dyn:
        added = rt.scatter_add_dyn(value, dyn, template, a.shape)
    else:
        added = scatter_add(value, template, a.shape)
    a.write(a + added)


def accumulate(
    name: str, a: Any, axis: Any = 0, dtype: Any = None, out: Any = None
) -> Any:
    """``np.maximum.accumulate`` / ``np.minimum.accumulate``: NumPy's values; the
    derivative follows the element each running extremum comes from."""
    arguments._no_out({"out": out, "dtype": dtype})
    a = lift(a)
    if axis is None:
        a, axis = xp.ravel(a), 0
    return rt.bind_row("cum_extreme", a, axis=int(axis) % max(np.ndim(a), 1), op=name)


# --------------------------------------------------------------- functions
def _flat_axis(a: Any, axis: Any) -> tuple[Any, int]:
    """``axis=None`` flattens first (as NumPy does); a tuple of axes is refused."""
    if axis is None:
        return xp.ravel(a), 0
    if isinstance(axis, (tuple, list)):
        raise TraceError(f"{_where()}: a tuple of axes is not supported here")
    if np.ndim(a) == 0:
        raise TraceError(f"{_where()}: axis {axis} is out of bounds for a 0-d array")
    return a, int(axis) % np.ndim(a)


def _keepdims(result: Any, shape: tuple[int, ...], axis: Any, keep: bool) -> Any:
    if not keep:
        return result
    if axis is None:
        return xp.reshape(result, (1,) * len(shape))
    kept = list(shape)
    kept[int(axis) % len(shape)] = 1
    return xp.reshape(result, tuple(kept))


def sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, **kw: Any) -> Any:
    a, ax = _flat_axis(lift(a), axis)
    return rt.bind_row("sort", a, axis=ax, kind=kind)


def argsort(
    a: Any, axis: Any = -1, kind: Any = None, order: Any = None, **kw: Any
) -> Any:
    a, ax = _flat_axis(lift(a), axis)
    return sorting.argsort(a, ax, kind)


def _arg_extreme(name: str) -> Callable[..., Any]:
    def arg(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        arguments._no_out({"out": out})
        a = lift(a)
        shape = tuple(np.shape(a))
        flat, ax = _flat_axis(a, axis)
        result = rt.bind_row(name, flat, axis=ax)
        return _keepdims(result, shape, axis, keepdims)

    return arg


def median(
    a: Any,
    axis: Any = None,
    out: Any = None,
    overwrite_input: bool = False,
    keepdims: bool = False,
) -> Any:
    arguments._no_out({"out": out})
    a = lift(a)
    shape = tuple(np.shape(a))
    flat, ax = _flat_axis(a, axis)
    return _keepdims(rt.bind_row("median", flat, axis=ax), shape, axis, keepdims)


def _quantile(fn: str, upper: float) -> Callable[..., Any]:
    def quantile(
        a: Any,
        q: Any,
        axis: Any = None,
        out: Any = None,
        overwrite_input: bool = False,
        method: str = "linear",
        keepdims: bool = False,
        **kw: Any,
    ) -> Any:
        arguments._no_out({"out": out})
        if kw.get("weights") is not None or kw.get("interpolation") is not None:
            raise TraceError(f"{_where()}: np.{fn} with weights or interpolation")
        if method != "linear":
            raise TraceError(
                f"{_where()}: np.{fn} with method={method!r}; only the default "
                "method='linear' is supported"
            )
        if is_runtime(q):
            raise TraceError(f"{_where()}: np.{fn} with a traced q")
        qs = np.asarray(_constant_value(q), dtype=float)
        if qs.ndim > 1 or np.any(qs < 0) or np.any(qs > upper) or np.any(np.isnan(qs)):
            raise TraceError(
                f"{_where()}: np.{fn}: q must be a number or a 1-D list in "
                f"[0, {upper:g}]"
            )
        a = lift(a)
        shape = tuple(np.shape(a))
        flat, ax = _flat_axis(a, axis)
        results = [
            _keepdims(
                rt.bind_row("quantile", flat, axis=ax, q=float(v), fn=fn),
                shape,
                axis,
                keepdims,
            )
            for v in qs.ravel()
        ]
        return results[0] if qs.ndim == 0 else xp.stack(results, axis=0)

    return quantile


def _traced(a: Any) -> Any:
    """An array to index at run time: a NumPy table (a constant the function reads)
    becomes a constant tracer, since ``ndarray[tracer]`` cannot dispatch."""
    a = lift(a)
    if isinstance(a, Tracer):
        return a
    value = np.asarray(a)
    if value.dtype.kind not in "biuf":
        raise TraceError(f"{_where()}: cannot index a {value.dtype} array here")
    return constant(value if value.dtype.kind in "bi" else value.astype(np.float64))


def _counted(reduce: Callable[..., Any]) -> Callable[..., Any]:
    """``np.sum``/``np.mean`` of run-time booleans or integers, as NumPy computes
    them: the sum of booleans is an int64 count, and the mean of either sums in
    float64."""

    def apply(a: Any, *args: Any, **kwargs: Any) -> Any:
        a = lift(a)
        if is_runtime(a) and a.dtype != np.float64:
            if reduce is reduction_api.mean:
                a = rt.bind_row("to_float64", a)
            elif a.dtype == np.bool_:
                a = rt.bind_row("to_int64", a)
        return reduce(a, *args, **kwargs)

    return apply


def clip(a: Any, a_min: Any = None, a_max: Any = None, **kwargs: Any) -> Any:
    """``np.clip`` of run-time integers stays integer (``np.maximum``/``np.minimum``
    on int64); everything else is the NumPy frontend's clip."""
    if not is_runtime_int(a):
        return selection_api.clip(a, a_min, a_max, **kwargs)
    arguments._no_out(kwargs)
    lo, hi = kwargs.get("min", a_min), kwargs.get("max", a_max)
    if lo is not None:
        a = np.maximum(a, lo)
    if hi is not None:
        a = np.minimum(a, hi)
    return a


def take(
    a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise"
) -> Any:
    arguments._no_out({"out": out})
    if mode != "raise":
        raise TraceError(f"{_where()}: np.take with mode={mode!r}")
    a = _traced(a)
    if axis is None:
        return xp.ravel(a)[indices]
    ax = int(axis) % np.ndim(a)
    return a[(slice(None),) * ax + (indices,)]


def take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Any:
    arr = _traced(arr)
    if axis is None:
        arr, axis = xp.ravel(arr), 0
    ax = int(axis) % np.ndim(arr)
    if np.ndim(indices) != np.ndim(arr):
        raise TraceError(
            f"{_where()}: np.take_along_axis needs indices with as many dimensions "
            "as the array"
        )
    if is_runtime(indices):
        return sorting.take_along(arr, indices, ax)
    idx = np.asarray(_constant_value(indices))
    shape = tuple(np.shape(arr))
    index: list[Any] = []
    for d in range(len(shape)):
        view = [1] * len(shape)
        view[d] = shape[d]
        index.append(idx if d == ax else np.arange(shape[d]).reshape(view))
    return arr[tuple(index)]


def count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Any:
    if axis is not None or keepdims:
        raise TraceError(f"{_where()}: np.count_nonzero with axis or keepdims")
    a = lift(a)
    mask = a if a.dtype == np.bool_ else a != 0
    return rt.bind_row("count_nonzero", mask)


def _refuse_partition(name: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise TraceError(
            f"{_where()}: np.{name}: the order of the elements other than the kth "
            "is unspecified (it depends on NumPy's algorithm), so neither it nor "
            "its derivative can be reproduced; np.sort(x)[k] is the kth value, "
            "deterministic and supported"
        )

    return refuse


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """``np.where`` with int64 branches would give an int64 array, which the
    float64 ``where`` primitive cannot hold: refused, not computed in floats."""
    if is_runtime_int(x) or is_runtime_int(y):
        raise TraceError(
            f"{_where()}: np.where with a run-time int64 branch is not supported; "
            "convert with .astype(float)"
        )
    if isinstance(condition, MaskedSelection) or isinstance(x, MaskedSelection):
        raise _selection_error("np.where of a selection")
    return selection_api.where(condition, x, y)


numpy_api.FUNCTIONS.update(
    {
        np.sort: sort,
        np.argsort: numpy_api.Method(argsort),
        np.argmax: numpy_api.Method(_arg_extreme("argmax")),
        np.argmin: numpy_api.Method(_arg_extreme("argmin")),
        np.median: median,
        np.percentile: _quantile("percentile", 100.0),
        np.quantile: _quantile("quantile", 1.0),
        np.take: numpy_api.Method(take),
        np.take_along_axis: take_along_axis,
        np.count_nonzero: count_nonzero,
        np.partition: _refuse_partition("partition"),
        np.argpartition: _refuse_partition("argpartition"),
        np.where: where,
        np.clip: clip,
        np.sum: numpy_api.Method(_counted(reduction_api.sum_)),
        np.mean: numpy_api.Method(_counted(reduction_api.mean)),
    }
)


def take_override(a: Any, indices: Any, *args: Any, **kwargs: Any) -> Any:
    """``np.take`` while tracing: NumPy dispatches it on the array alone, so a
    constant table read at run-time indices would reach NumPy with a tracer."""
    if isinstance(a, Tracer) or is_runtime(indices):
        return take(a, indices, *args, **kwargs)
    return np.take(a, indices, *args, **kwargs)


namespace.add_override("take", take_override)
use_numpy_dispatch(handle_ufunc, numpy_api.handle_function)
use_runtime_dispatch(getitem, setitem, integer, astype)
