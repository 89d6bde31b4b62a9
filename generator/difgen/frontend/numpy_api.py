"""NumPy's API on tracers: the tables that dispatch NumPy's calls to the entry points.

Each supported function is written with the core primitives, in the module of its
family (:mod:`~difgen.frontend.selection_api`, :mod:`~difgen.frontend.shape_api`,
:mod:`~difgen.frontend.reduction_api`, :mod:`~difgen.frontend.array_api`) or, for
the ufuncs, here. Two tables: ``UFUNCS`` (NumPy's ufuncs by name, reached through
``__array_ufunc__``; SciPy's are keyed by the ufunc object in
:mod:`difgen.frontend.special_api`) and ``FUNCTIONS`` (by function object, reached
through ``__array_function__``). Anything not in them is an error that names the
function (as the user's module calls it) and the user's line. An entry whose
function is also an ndarray method taking the array first says so (:class:`Method`),
and :mod:`difgen.frontend.array_methods` installs that method.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from difgen.core.dispatch import use_numpy_dispatch
from difgen.core.location import user_location as _where
from difgen.core.tracer import Tracer, lift
from difgen.core.tracer import bind_name as _bind
from difgen.errors import TraceError
from difgen.frontend import special_api
from difgen.frontend.arguments import _no_out
from difgen.frontend.array_api import (
    around,
    diff,
    ediff1d,
    gradient,
    imag,
    inner,
    kron,
    matmul,
    outer,
    real,
    result_type,
    sinc,
    take,
    vdot,
)
from difgen.frontend.reduction_api import (
    _cumulative,
    _reducer,
    all_,
    any_,
    average,
    mean,
    std,
    sum_,
    trace_,
    var,
)
from difgen.frontend.selection_api import clip, nan_to_num, select, where
from difgen.frontend.shape_api import (
    _atleast,
    _like,
    _triangle,
    append,
    broadcast_to,
    column_stack,
    concatenate,
    copy,
    diag,
    diagonal,
    expand_dims,
    flip,
    fliplr,
    flipud,
    full_like,
    hstack,
    linspace,
    moveaxis,
    pad,
    ravel,
    repeat,
    reshape,
    roll,
    rollaxis,
    rot90,
    squeeze,
    stack,
    swapaxes,
    tile,
    transpose,
    vstack,
)


class Method:
    """An entry point whose NumPy function is also the ndarray method of the same
    name on the array (``x.sum(0, keepdims=True)`` is ``np.sum(x, 0,
    keepdims=True)``, every argument in the same place): declared with the entry,
    ``np.sum: Method(sum_)``, so :mod:`difgen.frontend.array_methods` installs the
    method and a function with an ndarray method is one declaration. Not for a
    method that differs from its function: in place (``sort``, ``fill``), other
    parameters (``reshape(*shape)``, ``clip(min=)``), or a property (``T``)."""

    def __init__(self, handler: Callable[..., Any]) -> None:
        self.handler = handler

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.handler(*args, **kwargs)


FUNCTIONS: dict[Any, Callable[..., Any]] = {
    np.isposinf: lambda x: _bind("eq", x, math.inf),
    np.isneginf: lambda x: _bind("eq", x, -math.inf),
    np.sum: Method(sum_),
    np.mean: Method(mean),
    np.var: Method(var),
    np.std: Method(std),
    np.prod: Method(_reducer("reduce_prod")),
    np.max: Method(_reducer("reduce_max")),
    np.min: Method(_reducer("reduce_min")),
    np.amax: _reducer("reduce_max"),
    np.amin: _reducer("reduce_min"),
    np.cumsum: Method(_cumulative("cumsum")),
    np.cumprod: Method(_cumulative("cumprod")),
    np.reshape: reshape,
    np.ravel: ravel,
    np.transpose: transpose,
    np.swapaxes: Method(swapaxes),
    np.moveaxis: moveaxis,
    np.expand_dims: expand_dims,
    np.squeeze: Method(squeeze),
    np.broadcast_to: broadcast_to,
    np.atleast_2d: _atleast(2),
    np.concatenate: concatenate,
    np.stack: stack,
    np.hstack: hstack,
    np.vstack: vstack,
    np.flip: flip,
    np.roll: roll,
    np.repeat: Method(repeat),
    np.tile: tile,
    np.pad: pad,
    np.diagonal: Method(diagonal),
    np.diag: diag,
    np.trace: Method(trace_),
    np.triu: _triangle(np.triu),
    np.tril: _triangle(np.tril),
    np.vdot: vdot,
    np.outer: outer,
    np.inner: inner,
    np.matmul: matmul,
    np.where: where,
    np.clip: clip,
    np.zeros_like: _like(0.0),
    np.ones_like: _like(1.0),
    np.empty_like: _like(0.0),
    np.full_like: full_like,
    np.copy: copy,
    np.diff: diff,
    np.any: Method(any_),
    np.all: Method(all_),
    np.take: Method(take),
    np.ediff1d: ediff1d,
    np.average: average,
    np.column_stack: column_stack,
    np.append: append,
    np.gradient: gradient,
    np.kron: kron,
    np.select: select,
    np.flipud: flipud,
    np.fliplr: fliplr,
    np.rot90: rot90,
    np.rollaxis: rollaxis,
    np.atleast_1d: _atleast(1),
    np.atleast_3d: _atleast(3),
    np.linspace: linspace,
    np.sinc: sinc,
    np.nan_to_num: nan_to_num,
    np.round: Method(around),
    np.around: around,
    np.real: real,
    np.imag: imag,
    np.result_type: result_type,
    np.iscomplexobj: lambda x: False,  # difgen traces real float64 values
    np.isrealobj: lambda x: True,
    np.shape: lambda a: tuple(a.shape),
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: (
        int(np.prod(np.shape(a))) if axis is None else np.shape(a)[axis]
    ),
}


def handle_function(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """``__array_function__``: dispatch to the table, or say what is unsupported."""
    handler = FUNCTIONS.get(func)
    if handler is None:
        module = func.__module__.replace("numpy", "np", 1) if func.__module__ else "np"
        raise TraceError(
            f"{_where()}: {module}.{func.__name__} is not supported by difgen's tracer"
        )
    return handler(*args, **kwargs)


# -------------------------------------------------------------------- ufuncs
def _unary(name: str) -> Callable[[Any], Any]:
    return lambda x: _bind(name, x)


def _binary(name: str) -> Callable[[Any, Any], Any]:
    return lambda a, b: _bind(name, a, b)


def _nan_ignoring(name: str) -> Callable[[Any, Any], Any]:
    """``np.fmax``/``np.fmin``: the other argument where one is NaN (NaN only where
    both are), else ``np.maximum``/``np.minimum`` (whose ties and signed zeros
    ``fmax``/``fmin`` share: checked on every pair of 0, -0, +-1, +-inf, NaN)."""

    def fn(a: Any, b: Any) -> Any:
        a_nan, b_nan = _bind("ne", a, a), _bind("ne", b, b)  # NaN tests
        return np.where(b_nan, a, np.where(a_nan, b, _bind(name, a, b)))

    return fn


def _isnan(x: Any) -> Any:
    """``np.isnan``: NaN is the one value unequal to itself (False on ints)."""
    return _bind("ne", x, x)


def _isfinite(x: Any) -> Any:
    """``np.isfinite``: ``|x| < inf`` (False for inf and NaN, whose comparisons
    are false; True on ints). Not ``x - x == 0``, which symbolic lowering would
    fold to True."""
    return _bind("lt", _bind("abs", x), math.inf)


def _isinf(x: Any) -> Any:
    """``np.isinf``: ``|x| == inf`` (False for NaN)."""
    return _bind("eq", _bind("abs", x), math.inf)


UFUNCS: dict[str, Callable[..., Any]] = {
    "isnan": _isnan,
    "isfinite": _isfinite,
    "isinf": _isinf,
    **{
        name: _unary(name)
        for name in [
            "sin",
            "cos",
            "tan",
            "arcsin",
            "arccos",
            "arctan",
            "sinh",
            "cosh",
            "tanh",
            "arcsinh",
            "arccosh",
            "arctanh",
            "exp",
            "expm1",
            "log",
            "log1p",
            "sqrt",
            "cbrt",
            "sign",
        ]
    },
    **{
        name: _binary(name)
        for name in ["arctan2", "maximum", "minimum", "logical_and", "logical_or"]
    },
    "negative": _unary("neg"),
    "positive": lambda x: x,
    "absolute": _unary("abs"),
    "fabs": _unary("abs"),
    "logical_not": _unary("logical_not"),
    "add": _binary("add"),
    "subtract": _binary("sub"),
    "multiply": _binary("mul"),
    "divide": _binary("div"),
    "true_divide": _binary("div"),
    "power": _binary("pow"),
    "float_power": _binary("pow"),
    "fmax": _nan_ignoring("maximum"),
    "fmin": _nan_ignoring("minimum"),
    "less": _binary("lt"),
    "less_equal": _binary("le"),
    "greater": _binary("gt"),
    "greater_equal": _binary("ge"),
    "equal": _binary("eq"),
    "not_equal": _binary("ne"),
    "matmul": matmul,
    "square": lambda x: x * x,
    "reciprocal": lambda x: 1.0 / x,
    "log2": _unary("log2"),
    "log10": _unary("log10"),
    "exp2": _unary("exp2"),
    "hypot": _binary("hypot"),
    "deg2rad": lambda x: x * (math.pi / 180.0),
    "radians": lambda x: x * (math.pi / 180.0),
    "degrees": lambda x: x * (180.0 / math.pi),
    "conjugate": Method(
        lambda x: x.copy() if isinstance(x, Tracer) else np.conjugate(x)
    ),
    "floor": _unary("floor"),
    "ceil": _unary("ceil"),
    "trunc": _unary("trunc"),
    "rint": _unary("rint"),
    "remainder": _binary("remainder"),
    "fmod": _binary("fmod"),
    "logaddexp": _binary("logaddexp"),
    "logaddexp2": _binary("logaddexp2"),
    "heaviside": _binary("heaviside"),
    "rad2deg": lambda x: x * (180.0 / math.pi),
}


_UFUNC_METHODS = {
    ("add", "reduce"): sum_,
    ("multiply", "reduce"): _reducer("reduce_prod"),
    ("maximum", "reduce"): _reducer("reduce_max"),
    ("minimum", "reduce"): _reducer("reduce_min"),
    ("add", "accumulate"): _cumulative("cumsum"),
    ("multiply", "accumulate"): _cumulative("cumprod"),
}


def handle_ufunc(ufunc: Any, method: str, inputs: Any, kwargs: dict[str, Any]) -> Any:
    """``__array_ufunc__``: dispatch to the table, or say what is unsupported."""
    _no_out(kwargs)
    inputs = [lift(x) for x in inputs]
    special = special_api.ufunc_handler(ufunc) if method == "__call__" else None
    if special is not None:
        return special(*inputs)
    numpys = getattr(np, ufunc.__name__, None) is ufunc  # not SciPy's exp2, cbrt...
    if method == "__call__" and numpys and ufunc.__name__ in UFUNCS:
        return UFUNCS[ufunc.__name__](*inputs)
    handler = _UFUNC_METHODS.get((ufunc.__name__, method)) if numpys else None
    if handler is not None:
        axis = kwargs.get("axis", 0)
        if method == "reduce":
            return handler(inputs[0], axis=axis, keepdims=kwargs.get("keepdims", False))
        return handler(inputs[0], axis=axis)
    suffix = "" if method == "__call__" else f".{method}"
    raise TraceError(
        f"{_where()}: {ufunc_name(ufunc)}{suffix} is not supported by difgen's tracer"
    )


def ufunc_name(ufunc: Any) -> str:
    """A ufunc by the name the user calls it: ``np.sin``, ``scipy.special.gammaln``.

    A ufunc does not know its module: it is looked up in NumPy, then in the loaded
    modules that export it (the shortest public name wins)."""
    name = ufunc.__name__
    if getattr(np, name, None) is ufunc:
        return f"np.{name}"
    owners = [
        module_name
        for module_name, module in list(sys.modules.items())
        if not any(part.startswith("_") for part in module_name.split("."))
        and getattr(module, "__dict__", {}).get(name) is ufunc  # no lazy imports
    ]
    if not owners:
        return f"the ufunc {name}"
    return f"{min(owners, key=lambda m: (m.count('.'), len(m)))}.{name}"


use_numpy_dispatch(handle_ufunc, handle_function)
