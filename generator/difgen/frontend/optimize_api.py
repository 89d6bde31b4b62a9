"""``scipy.optimize``'s root finders on tracers: ``brentq``, ``newton`` and
``fixed_point`` become loops in the generated module (difgen cannot hand the user's
function to SciPy at run time), differentiated implicitly: the derivative of the
solution by the implicit-function theorem on the function's residual, never
through the iterations (:func:`difgen.frontend.control.helpers.root_loop`).

While tracing they take SciPy's place (in ``scipy.optimize`` and wherever the
user's code imported them by name, :mod:`difgen.frontend.namespace`); a call whose
function gives no traced value runs SciPy's own. The loops:

- ``brentq(f, a, b)``: the Illinois variant of false position on the bracket (a
  bracketing method like Brent's, superlinear), until the step is below
  ``xtol + rtol * |x|`` or ``f`` is exactly 0; SciPy's ``ValueError`` for a bracket
  without a sign change is a NaN root here (the module raises nothing at run time);
- ``newton(f, x0, fprime=...)``: Newton's iteration, the same arithmetic as
  SciPy's, until ``isclose(p, p0, rtol, atol=tol)``; without ``fprime``, SciPy's
  secant iteration and its starting point ``x1``;
- ``fixed_point(f, x0)``: SciPy's ``del2`` (Steffensen) or ``iteration`` method and
  its relative-error test, scalars and arrays.

A loop that reaches ``maxiter`` stops there quietly (SciPy raises or warns): the
root is the last iterate and its derivative the implicit one there. Refused, naming
the call and the argument: ``full_output=True``, ``fprime2``, an array ``x0`` for
``newton``, traced tolerances or ``maxiter``, another ``method``, and
``scipy.optimize.root`` (write the iteration as a ``while`` loop with
``implicit = true``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from difgen.core.location import user_location
from difgen.core.tracer import Tracer, contains_tracer
from difgen.errors import TraceError

Fn = Callable[..., Any]


def _refuse(call: str, argument: str, why: str) -> TraceError:
    return TraceError(
        f"{user_location()}: scipy.optimize.{call}(..., {argument}) {why}; difgen "
        f"traces {call} as a loop differentiated implicitly"
    )


def _number(call: str, name: str, value: Any) -> float:
    if contains_tracer(value) or np.ndim(value) != 0:
        raise _refuse(call, f"{name}=...", "must be a number known at build time")
    return float(value)


def _traced(fn: Fn, x: Any, args: tuple[Any, ...]) -> bool:
    """Whether ``fn`` at ``x`` gives a traced value (it reads a traced argument or
    a traced value it captured)."""
    return (
        contains_tracer(x)
        or contains_tracer(list(args))
        or contains_tracer(fn(x, *args))
    )


def _args(args: Any) -> tuple[Any, ...]:
    return tuple(args) if isinstance(args, (tuple, list)) else (args,)


def _float(x: Any) -> Any:
    return x if isinstance(x, Tracer) else np.asarray(x, dtype=np.float64)


def _sign(x: Any) -> Any:
    return np.where(x > 0.0, 1.0, np.where(x < 0.0, -1.0, 0.0))


def brentq(
    f: Fn,
    a: Any,
    b: Any,
    args: Any = (),
    xtol: float = 2e-12,
    rtol: float = 8.881784197001252e-16,
    maxiter: int = 100,
    full_output: bool = False,
    disp: bool = True,
) -> Any:
    """A root of ``f`` in ``[a, b]`` (Illinois false position), see the module doc."""
    if full_output:
        raise _refuse("brentq", "full_output=True", "is not supported")
    args = _args(args)
    xtol = _number("brentq", "xtol", xtol)
    rtol = _number("brentq", "rtol", rtol)
    cap = _number("brentq", "maxiter", maxiter)
    a, b = _float(a), _float(b)
    fa, fb = f(a, *args), f(b, *args)
    bad = _sign(fa) * _sign(fb) > 0.0  # no sign change: NaN, not SciPy's ValueError
    a, b = np.where(bad, np.nan, a), np.where(bad, np.nan, b)
    # b is the newest point; [a, b] keeps the sign change; side: b was kept twice
    state = (a, fa, b, fb, np.asarray(np.inf), np.asarray(0.0), np.asarray(0.0))

    def test(a: Any, fa: Any, b: Any, fb: Any, gap: Any, side: Any, i: Any) -> Any:
        going = np.logical_and(gap > xtol + rtol * np.abs(b), fb != 0.0)
        return np.logical_and(going, i < cap)

    def body(a: Any, fa: Any, b: Any, fb: Any, gap: Any, side: Any, i: Any) -> Any:
        c = b - fb * (b - a) / (fb - fa)
        fc = f(c, *args)
        same = _sign(fc) * _sign(fb) > 0.0  # c replaces b, a stays: halve fa
        new_a = np.where(same, a, b)
        new_fa = np.where(same, np.where(side > 0.0, 0.5 * fa, fa), fb)
        return (new_a, new_fa, c, fc, np.abs(c - b), np.where(same, 1.0, 0.0), i + 1.0)

    def residual(a: Any, fa: Any, b: Any, fb: Any, gap: Any, side: Any, i: Any) -> Any:
        return f(b, *args)

    from difgen.frontend.control.helpers import root_loop

    final = root_loop(test, body, state, residual, user_location())
    return final[2]


def newton(
    func: Fn,
    x0: Any,
    fprime: Fn | None = None,
    args: Any = (),
    tol: float = 1.48e-08,
    maxiter: int = 50,
    fprime2: Fn | None = None,
    x1: Any = None,
    rtol: float = 0.0,
    full_output: bool = False,
    disp: bool = True,
) -> Any:
    """A root of ``func`` near ``x0``: Newton with ``fprime``, else the secant."""
    if full_output:
        raise _refuse("newton", "full_output=True", "is not supported")
    if fprime2 is not None:
        raise _refuse("newton", "fprime2=...", "(Halley's method) is not supported")
    if np.ndim(x0) != 0:
        raise _refuse("newton", "x0=<array>", "must be a scalar")
    args = _args(args)
    tol = _number("newton", "tol", tol)
    rtol = _number("newton", "rtol", rtol)
    cap = _number("newton", "maxiter", maxiter)
    from difgen.frontend.control.helpers import root_loop

    p0 = _float(x0)
    if fprime is not None:
        deriv = fprime

        def test(p: Any, prev: Any, i: Any) -> Any:
            close = np.abs(p - prev) <= tol + rtol * np.abs(prev)  # isclose(p, p0)
            return np.logical_and(np.logical_not(close), i < cap)

        def body(p: Any, prev: Any, i: Any) -> Any:
            fval, fder = func(p, *args), deriv(p, *args)
            stop = np.logical_or(fval == 0.0, fder == 0.0)  # SciPy returns p0 there
            new = np.where(stop, 0.0, fval / np.where(stop, 1.0, fder))
            return (p - new, p, i + 1.0)

        def residual(p: Any, prev: Any, i: Any) -> Any:
            return func(p, *args)

        state: tuple[Any, ...] = (
            p0,
            np.asarray(np.nan),
            np.asarray(0.0),
        )  # NaN: not close yet
        return root_loop(test, body, state, residual, user_location())[0]
    if x1 is None:
        eps = 1e-4
        p1 = p0 * (1.0 + eps)
        p1 = p1 + np.where(p1 >= 0.0, eps, -eps)
    else:
        p1 = _float(x1)
    q0, q1 = func(p0, *args), func(p1, *args)
    swap = np.abs(q1) < np.abs(q0)
    p0, p1 = np.where(swap, p1, p0), np.where(swap, p0, p1)
    q0, q1 = np.where(swap, q1, q0), np.where(swap, q0, q1)

    def stest(p0: Any, q0: Any, p1: Any, q1: Any, gap: Any, i: Any) -> Any:
        going = np.logical_and(gap > tol + rtol * np.abs(p1), q1 != q0)
        going = np.logical_and(going, q1 != 0.0)  # p1 is a root
        return np.logical_and(going, i < cap)

    def sbody(p0: Any, q0: Any, p1: Any, q1: Any, gap: Any, i: Any) -> Any:
        big = np.abs(q1) > np.abs(q0)
        # both quotients are computed: neither may divide by zero (quiet modules)
        r = np.where(
            big, q0 / np.where(q1 == 0.0, 1.0, q1), q1 / np.where(q0 == 0.0, 1.0, q0)
        )
        p = np.where(big, (-r * p1 + p0) / (1.0 - r), (-r * p0 + p1) / (1.0 - r))
        return (p1, q1, p, func(p, *args), np.abs(p - p1), i + 1.0)

    def sresidual(p0: Any, q0: Any, p1: Any, q1: Any, gap: Any, i: Any) -> Any:
        return func(p1, *args)

    state = (p0, q0, p1, q1, np.asarray(np.inf), np.asarray(0.0))
    return root_loop(stest, sbody, state, sresidual, user_location())[2]


def fixed_point(
    func: Fn,
    x0: Any,
    args: Any = (),
    xtol: float = 1e-08,
    maxiter: int = 500,
    method: str = "del2",
) -> Any:
    """A fixed point ``x = func(x)``: SciPy's ``del2`` or ``iteration`` method."""
    if method not in ("del2", "iteration"):
        raise _refuse("fixed_point", f"method={method!r}", "is not one of SciPy's")
    args = _args(args)
    xtol = _number("fixed_point", "xtol", xtol)
    cap = _number("fixed_point", "maxiter", maxiter)
    from difgen.frontend.control.helpers import root_loop

    def step(p0: Any) -> Any:
        p1 = func(p0, *args)
        if method == "iteration":
            return p1
        p2 = func(p1, *args)
        d = p2 - 2.0 * p1 + p0
        nonzero = d != 0.0
        accel = p0 - (p1 - p0) ** 2 / np.where(nonzero, d, 1.0)
        return np.where(nonzero, accel, p2)

    def test(p0: Any, err: Any, i: Any) -> Any:
        return np.logical_and(np.max(np.abs(err)) >= xtol, i < cap)

    def body(p0: Any, err: Any, i: Any) -> Any:
        p = step(p0)
        zero = p0 == 0.0
        relerr = np.where(zero, p, (p - p0) / np.where(zero, 1.0, p0))
        return (p, relerr, i + 1.0)

    def residual(p: Any, err: Any, i: Any) -> Any:
        return func(p, *args) - p

    p0 = _float(x0)
    state = (p0, np.full(np.shape(p0), np.inf), np.asarray(0.0))
    return root_loop(test, body, state, residual, user_location())[0]


def root(*args: Any, **kwargs: Any) -> Any:
    raise TraceError(
        f"{user_location()}: scipy.optimize.root is not supported by difgen's tracer; "
        "write the iteration as a `while` loop on a tolerance (`while "
        "np.linalg.norm(r) > tol:`) and build with implicit = true, or call "
        "scipy.optimize.fixed_point, brentq or newton"
    )


FUNCTIONS: dict[str, Fn] = {
    "brentq": brentq,
    "newton": newton,
    "fixed_point": fixed_point,
    "root": root,
}
"""The root finders of ``scipy.optimize`` difgen traces, by name."""

_LAYOUT = {"brentq": ("f", "a", 3), "newton": ("func", "x0", 3)}
_LAYOUT["fixed_point"] = ("func", "x0", 2)
"""Each finder's function and first point by keyword, and where ``args`` sits."""


def replacement(name: str, original: Fn) -> Fn:
    """SciPy's ``original`` where the function gives no traced value, difgen's
    where it does (``root``: refused when an argument is traced)."""
    traced = FUNCTIONS[name]

    @functools.wraps(original)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if name == "root":
            if contains_tracer(list(args)) or contains_tracer(list(kwargs.values())):
                return traced(*args, **kwargs)
            return original(*args, **kwargs)
        fn_key, x_key, at = _LAYOUT[name]
        fn = args[0] if args else kwargs.get(fn_key)
        x = args[1] if len(args) > 1 else kwargs.get(x_key)
        extra = args[at] if len(args) > at else kwargs.get("args", ())
        if callable(fn) and x is not None and _traced(fn, _float(x), _args(extra)):
            return traced(*args, **kwargs)
        return original(*args, **kwargs)

    return dispatch
