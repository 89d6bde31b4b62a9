"""Elementwise primitives: one row per function, NumPy broadcasting allowed.

Unary rows carry the derivative as NumPy code on the input ``x`` and the output ``y``;
binary rows carry their JVP. Compound NumPy functions (``log2``, ``square``,
``hypot``...) are written in terms of these in :mod:`difgen.frontend.numpy_api`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp

from difgen.core.primitive import Linear, Primitive, call, register, unbroadcast


def _objectwise(fn: Callable[..., Any], nin: int) -> Callable[..., Any]:
    ufunc = np.frompyfunc(fn, nin, 1)

    def apply(*args: Any) -> Any:
        return np.asarray(ufunc(*args), dtype=object)

    return apply


def _add_tangents(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _broadcast_to(t: Any, shape: tuple[int, ...]) -> Any:
    if t is None or np.shape(t) == shape:
        return t
    return np.broadcast_to(t, shape)


# ----------------------------------------------------------------------- unary
def _sym_sign_abs_root(x: Any) -> Any:
    return sp.sign(x) * sp.Abs(x) ** sp.Rational(1, 3)


# name, NumPy function, SymPy function, derivative dy/dx as a function of (x, y)
UNARY: list[tuple[str, Any, Any, Callable[[Any, Any], Any] | None]] = [
    ("sin", np.sin, sp.sin, lambda x, y: np.cos(x)),
    ("cos", np.cos, sp.cos, lambda x, y: -np.sin(x)),
    ("tan", np.tan, sp.tan, lambda x, y: 1.0 + y * y),
    ("arcsin", np.arcsin, sp.asin, lambda x, y: 1.0 / np.sqrt(1.0 - x * x)),
    ("arccos", np.arccos, sp.acos, lambda x, y: -1.0 / np.sqrt(1.0 - x * x)),
    ("arctan", np.arctan, sp.atan, lambda x, y: 1.0 / (1.0 + x * x)),
    ("sinh", np.sinh, sp.sinh, lambda x, y: np.cosh(x)),
    ("cosh", np.cosh, sp.cosh, lambda x, y: np.sinh(x)),
    ("tanh", np.tanh, sp.tanh, lambda x, y: 1.0 - y * y),
    ("arcsinh", np.arcsinh, sp.asinh, lambda x, y: 1.0 / np.sqrt(x * x + 1.0)),
    ("arccosh", np.arccosh, sp.acosh, lambda x, y: 1.0 / np.sqrt(x * x - 1.0)),
    ("arctanh", np.arctanh, sp.atanh, lambda x, y: 1.0 / (1.0 - x * x)),
    ("exp", np.exp, sp.exp, lambda x, y: y),
    ("expm1", np.expm1, lambda x: sp.exp(x) - 1, lambda x, y: y + 1.0),
    ("log", np.log, sp.log, lambda x, y: 1.0 / x),
    ("log1p", np.log1p, lambda x: sp.log(1 + x), lambda x, y: 1.0 / (1.0 + x)),
    ("sqrt", np.sqrt, sp.sqrt, lambda x, y: 0.5 / y),
    ("cbrt", np.cbrt, _sym_sign_abs_root, lambda x, y: 1.0 / (3.0 * y * y)),
    ("abs", np.abs, sp.Abs, lambda x, y: np.sign(x)),
    ("sign", np.sign, sp.sign, None),  # piecewise constant: zero derivative
]


def _unary_jvp(deriv: Callable[[Any, Any], Any] | None) -> Callable[..., Any]:
    def jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
        """Chain rule: the tabulated derivative times the tangent."""
        (x,), (dx,) = primals, tangents
        if deriv is None or dx is None:
            return None
        return deriv(x, out) * dx

    return jvp


for _name, _np_fn, _sym_fn, _deriv in UNARY:
    register(
        Primitive(
            name=_name,
            impl=_np_fn,
            emit=call(f"np.{_np_fn.__name__}({{0}})"),
            jvp=_unary_jvp(_deriv),
            sympy=_objectwise(_sym_fn, 1),
            elementwise=True,
        )
    )


def _neg_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Linear: the tangent is negated."""
    return None if tangents[0] is None else -tangents[0]


def _neg_transpose(ct: Any, x: Any) -> list[Any]:
    """Self-adjoint up to sign."""
    return [-ct]


neg_p = register(
    Primitive(
        name="neg",
        impl=np.negative,
        emit=call("-{0}"),
        jvp=_neg_jvp,
        transpose=_neg_transpose,
        linear=True,
        elementwise=True,
    )
)


# ---------------------------------------------------------------------- binary
def _add_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Sum of the tangents, broadcast to the output."""
    return _broadcast_to(_add_tangents(*tangents), np.shape(out))


def _sub_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Difference of the tangents, broadcast to the output."""
    da, db = tangents
    return _broadcast_to(_add_tangents(da, None if db is None else -db), np.shape(out))


def _mul_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Product rule."""
    (a, b), (da, db) = primals, tangents
    terms = [None if da is None else da * b, None if db is None else a * db]
    return _broadcast_to(_add_tangents(*terms), np.shape(out))


def _div_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """Quotient rule written as (da - y db) / b."""
    (_, b), (da, db) = primals, tangents
    num = _add_tangents(da, None if db is None else -(out * db))
    return None if num is None else _broadcast_to(num / b, np.shape(out))


def _pow_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d(a^b) = b a^(b-1) da + log(a) a^b db."""
    (a, b), (da, db) = primals, tangents
    terms = [
        None if da is None else (b * a ** (b - 1.0)) * da,
        None if db is None else (np.log(a) * out) * db,
    ]
    return _broadcast_to(_add_tangents(*terms), np.shape(out))


def _arctan2_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """d atan2(a, b) = (b da - a db) / (a^2 + b^2)."""
    (a, b), (da, db) = primals, tangents
    num = _add_tangents(
        None if da is None else b * da, None if db is None else -(a * db)
    )
    if num is None:
        return None
    return _broadcast_to(num / (a * a + b * b), np.shape(out))


def _select_jvp(pick_first: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
        """The tangent of whichever argument was selected (the first on ties)."""
        (a, b), (da, db) = primals, tangents
        if da is None and db is None:
            return None
        return _broadcast_to(
            np.where(
                pick_first(a, b),
                0.0 if da is None else da,
                0.0 if db is None else db,
            ),
            np.shape(out),
        )

    return jvp


def _add_transpose(ct: Any, a: Any, b: Any) -> list[Any]:
    """Broadcasting transposes to a sum over the broadcast axes."""
    return [unbroadcast(ct, x.shape) if isinstance(x, Linear) else None for x in (a, b)]


def _sub_transpose(ct: Any, a: Any, b: Any) -> list[Any]:
    """As add, with the second cotangent negated."""
    ca = unbroadcast(ct, a.shape) if isinstance(a, Linear) else None
    cb = unbroadcast(-ct, b.shape) if isinstance(b, Linear) else None
    return [ca, cb]


def _mul_transpose(ct: Any, a: Any, b: Any) -> list[Any]:
    """Linear in exactly one argument: multiply by the other."""
    if isinstance(a, Linear):
        return [unbroadcast(ct * b, a.shape), None]
    return [None, unbroadcast(a * ct, b.shape)]


def _div_transpose(ct: Any, a: Any, b: Any) -> list[Any]:
    """Linear in the numerator only."""
    assert isinstance(a, Linear) and not isinstance(b, Linear)
    return [unbroadcast(ct / b, a.shape), None]


def _sym_max(a: Any, b: Any) -> Any:
    return sp.Max(a, b)


def _sym_min(a: Any, b: Any) -> Any:
    return sp.Min(a, b)


def _sym_pow(a: Any, b: Any) -> Any:
    return a**b


BINARY: list[tuple[str, Any, str, Any, Any, Any, bool]] = [
    # name, NumPy, source form, JVP, transpose, SymPy (None: impl), linear
    ("add", np.add, "{0} + {1}", _add_jvp, _add_transpose, None, True),
    ("sub", np.subtract, "{0} - {1}", _sub_jvp, _sub_transpose, None, True),
    ("mul", np.multiply, "{0} * {1}", _mul_jvp, _mul_transpose, None, True),
    ("div", np.divide, "{0} / {1}", _div_jvp, _div_transpose, None, True),
    ("pow", np.power, "{0} ** {1}", _pow_jvp, None, _sym_pow, False),
    ("arctan2", np.arctan2, "np.arctan2({0}, {1})", _arctan2_jvp, None, sp.atan2, False),
    ("maximum", np.maximum, "np.maximum({0}, {1})",
     _select_jvp(lambda a, b: a >= b), None, _sym_max, False),
    ("minimum", np.minimum, "np.minimum({0}, {1})",
     _select_jvp(lambda a, b: a <= b), None, _sym_min, False),
]  # fmt: skip

for _name, _np_fn, _src, _jvp, _transpose, _sym, _linear in BINARY:
    register(
        Primitive(
            name=_name,
            impl=_np_fn,
            emit=call(_src),
            jvp=_jvp,
            transpose=_transpose,
            sympy=None if _sym is None else _objectwise(_sym, 2),
            linear=_linear,
            elementwise=True,
        )
    )


# ------------------------------------------------------------------- selectors
COMPARISONS: list[tuple[str, Any, str, Any]] = [
    ("lt", np.less, "{0} < {1}", sp.Lt),
    ("le", np.less_equal, "{0} <= {1}", sp.Le),
    ("gt", np.greater, "{0} > {1}", sp.Gt),
    ("ge", np.greater_equal, "{0} >= {1}", sp.Ge),
    ("eq", np.equal, "{0} == {1}", sp.Eq),
    ("ne", np.not_equal, "{0} != {1}", sp.Ne),
    ("logical_and", np.logical_and, "np.logical_and({0}, {1})", sp.And),
    ("logical_or", np.logical_or, "np.logical_or({0}, {1})", sp.Or),
]


def _unevaluated(relation: Any) -> Any:
    """A relation kept as written: SymPy would rewrite ``x/5 == m`` as ``x == 5 m``,
    which is exact on rationals but not on the floats the emitted code computes."""
    if relation in (sp.And, sp.Or):
        return relation
    return lambda a, b: relation(a, b, evaluate=False)


for _name, _np_fn, _src, _sym in COMPARISONS:
    register(
        Primitive(
            name=_name,
            impl=_np_fn,
            emit=call(_src),
            sympy=_objectwise(_unevaluated(_sym), 2),
            differentiable=False,
            elementwise=True,
        )
    )

register(
    Primitive(
        name="logical_not",
        impl=np.logical_not,
        emit=call("np.logical_not({0})"),
        sympy=_objectwise(sp.Not, 1),
        differentiable=False,
        elementwise=True,
    )
)


def _where_jvp(out: Any, primals: list[Any], tangents: list[Any]) -> Any:
    """The condition is constant; the tangent is selected like the value."""
    (cond, _, _), (_, da, db) = primals, tangents
    if da is None and db is None:
        return None
    tangent = np.where(cond, 0.0 if da is None else da, 0.0 if db is None else db)
    return _broadcast_to(tangent, np.shape(out))


def _where_transpose(ct: Any, cond: Any, a: Any, b: Any) -> list[Any]:
    """Route the cotangent to the branch that was selected."""
    ca = (
        unbroadcast(np.where(cond, ct, 0.0), a.shape) if isinstance(a, Linear) else None
    )
    cb = (
        unbroadcast(np.where(cond, 0.0, ct), b.shape) if isinstance(b, Linear) else None
    )
    return [None, ca, cb]


def _sym_where(cond: Any, a: Any, b: Any) -> Any:
    def pick(c: Any, x: Any, y: Any) -> Any:
        if c in (True, sp.true):
            return x
        if c in (False, sp.false):
            return y
        return sp.Piecewise((x, c), (y, True), evaluate=False)  # keep c as written

    return _objectwise(pick, 3)(cond, a, b)


where_p = register(
    Primitive(
        name="where",
        impl=np.where,
        emit=call("np.where({0}, {1}, {2})"),
        jvp=_where_jvp,
        transpose=_where_transpose,
        sympy=_sym_where,
        linear=True,
        elementwise=True,
    )
)
