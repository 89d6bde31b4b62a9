"""``scipy.special`` on tracers: its ufuncs (keyed by the ufunc object, so none can
be mistaken for a NumPy ufunc of the same name) and the few functions written in
Python (``polygamma``, ``logsumexp``, ``softmax``, ``log_softmax``), written here in
traced NumPy and put in SciPy's place while tracing (:mod:`difgen.frontend.namespace`).

SciPy is imported only when the user's code has imported it: difgen does not need
it otherwise.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from difgen.core.location import user_location
from difgen.core.tracer import bind_name, contains_tracer, lift
from difgen.errors import TraceError

SQRT_HALF = math.sqrt(0.5)


def _unary(name: str) -> Callable[[Any], Any]:
    return lambda x: bind_name(name, x)


def _binary(name: str) -> Callable[[Any, Any], Any]:
    return lambda a, b: bind_name(name, a, b)


def ndtr(x: Any) -> Any:
    """``ndtr(x) = erfc(-x / sqrt 2) / 2``: no cancellation in either tail."""
    return 0.5 * bind_name("erfc", x * -SQRT_HALF)


def logit(p: Any) -> Any:
    """``logit(p) = log(p / (1 - p))``: -inf at 0, inf at 1."""
    return np.log(p / (1.0 - p))


def betaln(a: Any, b: Any) -> Any:
    """``gammaln(a) + gammaln(b) - gammaln(a + b)`` (SciPy's own series for large
    arguments is more accurate where the terms nearly cancel)."""
    return (
        bind_name("gammaln", a) + bind_name("gammaln", b) - bind_name("gammaln", a + b)
    )


UFUNC_NAMES: dict[str, Callable[..., Any]] = {
    "gammaln": _unary("gammaln"),
    "gamma": _unary("gamma"),
    "psi": lambda x: bind_name("polygamma", x, n=0),  # digamma is psi
    "erf": _unary("erf"),
    "erfc": _unary("erfc"),
    "erfcx": _unary("erfcx"),
    "ndtr": ndtr,
    "log_ndtr": _unary("log_ndtr"),
    "expit": _unary("expit"),
    "logit": logit,
    "xlogy": _binary("xlogy"),
    "xlog1py": _binary("xlog1py"),
    "betaln": betaln,
}
"""The supported ufuncs of ``scipy.special``, by their name there."""


@functools.cache
def _ufuncs() -> dict[Any, Callable[..., Any]]:
    import scipy.special

    return {getattr(scipy.special, name): fn for name, fn in UFUNC_NAMES.items()}


def ufunc_handler(ufunc: Any) -> Callable[..., Any] | None:
    """The tracer's version of a SciPy ufunc, or None (not SciPy's, or not
    supported)."""
    if "scipy.special" not in sys.modules:  # no SciPy ufunc can reach the tracer
        return None
    return _ufuncs().get(ufunc)


# ---------------------------------------------------------------- functions
def _order(n: Any) -> int:
    if contains_tracer(n) or np.ndim(n) or float(n) != int(n) or int(n) < 0:
        raise TraceError(
            f"{user_location()}: scipy.special.polygamma's order n must be one "
            "constant non-negative integer"
        )
    return int(n)


def polygamma(n: Any, x: Any) -> Any:
    """``scipy.special.polygamma(n, x)`` for a constant order ``n``."""
    return bind_name("polygamma", lift(x), n=_order(n))


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % ndim for a in axes)) if ndim else ()


def logsumexp(
    a: Any,
    axis: Any = None,
    b: Any = None,
    keepdims: bool = False,
    return_sign: bool = False,
) -> Any:
    """``log(sum(b * exp(a)))`` over ``axis``, shifted by the floor of the maximum
    (0 where it is not finite, so all -inf gives -inf and +inf gives inf): the
    largest term is in [1, e), and the shift is piecewise constant, so the
    derivative is ``b exp(a - result)`` with no term of the maximum's tangent to
    cancel (JAX stops the gradient of its shift for the same reason)."""
    if return_sign:
        raise TraceError(
            f"{user_location()}: scipy.special.logsumexp(..., return_sign=True) is "
            "not supported by difgen's tracer"
        )
    a = lift(a)
    if b is not None:
        b = lift(b)
        shape = np.broadcast_shapes(np.shape(a), np.shape(b))
        a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    axes = _axes(axis, np.ndim(a))
    top = np.max(a, axis=axes, keepdims=True) if axes else a
    shift = np.where(np.abs(top) < np.inf, np.floor(top), 0.0)
    terms = np.exp(a - shift)
    if b is not None:
        terms = b * terms
    total = np.sum(terms, axis=axes, keepdims=True) if axes else terms
    out = np.log(total) + shift
    if not keepdims and axes:
        out = np.squeeze(out, axis=axes)
    return out


def log_softmax(x: Any, axis: Any = None) -> Any:
    """``x - logsumexp(x, axis, keepdims=True)``."""
    x = lift(x)
    return x - logsumexp(x, axis=axis, keepdims=True)


def softmax(x: Any, axis: Any = None) -> Any:
    """``exp(log_softmax(x))``: exact 0 where x is -inf, no overflow."""
    return np.exp(log_softmax(x, axis=axis))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "polygamma": polygamma,
    "logsumexp": logsumexp,
    "softmax": softmax,
    "log_softmax": log_softmax,
}
"""The functions of ``scipy.special`` written in Python, by name: while tracing
they are replaced (in ``scipy.special`` and wherever the user's code imported
them by name) by these, where an argument is traced."""


def replacement(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """SciPy's ``original`` where no argument is traced, difgen's where one is."""
    traced = FUNCTIONS[name]

    @functools.wraps(original)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if contains_tracer(list(args)) or contains_tracer(list(kwargs.values())):
            return traced(*args, **kwargs)
        return original(*args, **kwargs)

    return dispatch
