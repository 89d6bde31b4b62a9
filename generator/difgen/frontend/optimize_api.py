"""``scipy.optimize``'s root finders on tracers: ``brentq``, ``bisect``,
``newton``, ``fixed_point``, ``root`` and ``root_scalar`` become loops in the
generated module (difgen cannot hand the user's function to SciPy at run time),
differentiated implicitly: the derivative of the
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
- ``bisect(f, a, b)``: SciPy's bisection, step for step (``dm`` halved, ``xa``
  moved while ``f(xm) * f(xa) >= 0``, until ``f(xm) == 0`` or ``|dm| < xtol + rtol
  |xm|``); a bracket without a sign change is a NaN root, as for ``brentq``;
- ``fixed_point(f, x0)``: SciPy's ``del2`` (Steffensen) or ``iteration`` method and
  its relative-error test, scalars and arrays;
- ``root(fun, x0)`` (``method="hybr"``, the default): Newton's iteration on the
  vector equation (``x0`` flattened, as SciPy flattens it) with ``jac`` (a function, or ``True`` when ``fun`` returns
  ``(f, J)``) or, without it, MINPACK's forward-difference jacobian (steps
  ``sqrt(eps) |x_j|``), each step a ``solve``, until the step is below ``xtol``
  relative to ``x``; not Powell's hybrid method, so the iterates differ, the root
  they converge to is the same (a jacobian exactly singular at an iterate makes
  ``np.linalg.solve`` raise ``LinAlgError`` at run time, where MINPACK would take
  another step). The result has ``x``, ``success`` and ``fun``;
- ``root_scalar(f, ...)``: its ``method`` (or SciPy's choice from ``bracket``,
  ``x0``, ``x1`` and ``fprime``) among ``brentq``, ``bisect``, ``newton`` and
  ``secant``, each as above; the result has ``root`` and ``converged``.

Where SciPy raises ``RuntimeError`` because the iteration reached ``maxiter``
without converging (``brentq``, ``bisect`` and ``newton`` with ``disp=True``, their
default, and ``fixed_point`` always), the root is NaN (the generated module raises
nothing at run time; the derivative there is NaN too); with ``disp=False`` it is
the last iterate, as SciPy returns it, and its derivative the implicit one there.
``root`` and ``root_scalar`` do not raise in SciPy but report ``success`` or
``converged``: difgen's ``x`` and ``root`` are NaN where those would be false, so
that a result that did not converge is never used silently. Refused, naming the
call and the argument: ``full_output=True``, ``fprime2``, an array ``x0`` for
``newton``, traced tolerances or ``maxiter``, another ``method``, ``root``'s
``callback`` and ``options``.
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
    return _unless(*_brentq(f, a, b, args, xtol, rtol, maxiter), disp, "brentq")


def _brentq(
    f: Fn, a: Any, b: Any, args: Any, xtol: float, rtol: float, maxiter: int
) -> tuple[Any, Any]:
    """``brentq``'s root, and where it stopped at its cap without converging."""
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
    b, fb, gap = final[2], final[3], final[4]
    going = np.logical_and(gap > xtol + rtol * np.abs(b), fb != 0.0)
    return final[2], going


def _unless(root: Any, failed: Any, disp: bool, call: str) -> Any:
    """``root``, NaN where the iteration stopped at its cap without converging
    (where SciPy raises ``RuntimeError``), unless ``disp`` is false."""
    if not isinstance(disp, (bool, np.bool_)):
        raise _refuse(call, "disp=...", "must be True or False, known at build time")
    if not disp:
        return root
    return root * np.where(failed, np.nan, 1.0)


def bisect(
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
    """A root of ``f`` in ``[a, b]`` by SciPy's bisection, see the module doc."""
    if full_output:
        raise _refuse("bisect", "full_output=True", "is not supported")
    return _unless(*_bisect(f, a, b, args, xtol, rtol, maxiter), disp, "bisect")


def _bisect(
    f: Fn, a: Any, b: Any, args: Any, xtol: float, rtol: float, maxiter: int
) -> tuple[Any, Any]:
    """``bisect``'s root, and where it stopped at its cap without converging."""
    args = _args(args)
    xtol = _number("bisect", "xtol", xtol)
    rtol = _number("bisect", "rtol", rtol)
    cap = _number("bisect", "maxiter", maxiter)
    a, b = _float(a), _float(b)
    fa, fb = f(a, *args), f(b, *args)
    bad = _sign(fa) * _sign(fb) > 0.0  # no sign change: NaN, not SciPy's ValueError
    a, b = np.where(bad, np.nan, a), np.where(bad, np.nan, b)

    def done(dm: Any, xm: Any, fm: Any) -> Any:
        return np.logical_or(fm == 0.0, np.abs(dm) < xtol + rtol * np.abs(xm))

    def test(xa: Any, fa: Any, dm: Any, xm: Any, fm: Any, i: Any) -> Any:
        return np.logical_and(np.logical_not(done(dm, xm, fm)), i < cap)

    def body(xa: Any, fa: Any, dm: Any, xm: Any, fm: Any, i: Any) -> Any:
        # SciPy's step, its "xa = xm" test on the previous midpoint first
        moved = fm * fa >= 0.0
        xa = np.where(moved, xm, xa)
        dm = 0.5 * dm
        new = xa + dm
        return (xa, fa, dm, new, f(new, *args), i + 1.0)

    def residual(xa: Any, fa: Any, dm: Any, xm: Any, fm: Any, i: Any) -> Any:
        return f(xm, *args)

    from difgen.frontend.control.helpers import root_loop

    # the first step outside the loop: SciPy tests after each step
    state = body(a, fa, b - a, a, fa, np.asarray(0.0))
    final = root_loop(test, body, state, residual, user_location())
    dm, xm, fm = final[2], final[3], final[4]
    root = np.where(fa == 0.0, a, np.where(fb == 0.0, b, xm))  # SciPy's early returns
    ends = np.logical_or(fa == 0.0, fb == 0.0)
    failed = np.logical_and(np.logical_not(done(dm, xm, fm)), np.logical_not(ends))
    return root, failed


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
    found = _newton(func, x0, fprime, args, tol, maxiter, x1, rtol)
    return _unless(*found, disp, "newton")


def _newton(
    func: Fn,
    x0: Any,
    fprime: Fn | None,
    args: Any,
    tol: float,
    maxiter: int,
    x1: Any,
    rtol: float,
) -> tuple[Any, Any]:
    """``newton``'s root, and where it stopped at its cap without converging."""
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
        p, prev, _ = root_loop(test, body, state, residual, user_location())
        close = np.abs(p - prev) <= tol + rtol * np.abs(prev)
        return p, np.logical_not(close)
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
    p0, q0, p1, q1, gap, _ = root_loop(stest, sbody, state, sresidual, user_location())
    # SciPy stops quietly where q1 == q0 (a warning), and raises at its cap
    going = np.logical_and(gap > tol + rtol * np.abs(p1), q1 != q0)
    return p1, np.logical_and(going, q1 != 0.0)


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
    p, err, _ = root_loop(test, body, state, residual, user_location())
    return _unless(p, np.max(np.abs(err)) >= xtol, True, "fixed_point")


class RootResult:
    """What ``root`` returns while difgen traces: SciPy's ``OptimizeResult`` fields
    the generated code can compute (``x``, ``success``, ``fun``), as attributes and
    by key."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __getitem__(self, key: str) -> Any:
        return self.__dict__[key]

    def __contains__(self, key: str) -> bool:
        return key in self.__dict__

    def keys(self) -> Any:
        return self.__dict__.keys()


_EPS = float(np.finfo(np.float64).eps)


def root(
    fun: Fn,
    x0: Any,
    args: Any = (),
    method: str = "hybr",
    jac: Any = None,
    tol: float | None = None,
    callback: Any = None,
    options: Any = None,
) -> RootResult:
    """A root of ``fun`` near ``x0`` by Newton's iteration, see the module doc."""
    if method != "hybr":
        raise _refuse(
            "root", f"method={method!r}", "is not supported (the default 'hybr' is)"
        )
    if callback is not None:
        raise _refuse("root", "callback=...", "is not supported")
    if options:
        raise _refuse("root", "options=...", "is not supported")
    args = _args(args)
    xtol = 1.49012e-08 if tol is None else _number("root", "tol", tol)
    cap = 200.0 * (np.size(x0) + 1)  # MINPACK's maxfev without a jacobian
    x0 = np.reshape(_float(x0), (-1,))  # SciPy flattens x0: x is a vector
    shape = tuple(np.shape(x0))

    def value(x: Any) -> Any:
        out = fun(x, *args)
        return out[0] if jac is True else out

    def jacobian(x: Any, fx: Any) -> Any:
        if jac is True:
            return np.reshape(fun(x, *args)[1], (np.size(x0), np.size(x0)))
        if callable(jac):
            return np.reshape(jac(x, *args), (np.size(x0), np.size(x0)))
        if jac not in (None, False):
            raise _refuse("root", "jac=...", "must be a function, True or None")
        # MINPACK's forward differences: column j steps x_j by sqrt(eps) |x_j|
        flat = np.reshape(x, (-1,))
        steps = np.sqrt(_EPS) * np.abs(flat)
        steps = np.where(steps == 0.0, np.sqrt(_EPS), steps)
        eye = np.eye(np.size(x0))
        cols = []
        for j in range(np.size(x0)):
            moved = np.reshape(flat + steps[j] * eye[j], shape)
            cols.append(np.reshape(value(moved) - fx, (-1,)) / steps[j])
        return np.stack(cols, axis=1)

    def step(x: Any) -> Any:
        fx = value(x)
        size = np.size(x0)
        if np.size(fx) != size:
            raise _refuse(
                "root",
                "fun=...",
                f"returns {np.size(fx)} values for {size} unknowns; the "
                "system must be square",
            )
        J = jacobian(x, fx)
        dx = np.linalg.solve(J, -np.reshape(fx, (-1,)))
        return np.reshape(dx, shape)

    def test(x: Any, err: Any, i: Any) -> Any:
        return np.logical_and(err > xtol, i < cap)

    def body(x: Any, err: Any, i: Any) -> Any:
        dx = step(x)
        new = x + dx
        size = np.sqrt(np.sum(new * new))
        err = np.sqrt(np.sum(dx * dx)) / np.where(size == 0.0, 1.0, size)
        return (new, err, i + 1.0)

    def residual(x: Any, err: Any, i: Any) -> Any:
        return value(x)

    from difgen.frontend.control.helpers import root_loop

    state = (x0, np.asarray(np.inf), np.asarray(0.0))
    x, err, _ = root_loop(test, body, state, residual, user_location())
    converged = np.logical_not(err > xtol)  # NaN: not converged
    x = _unless(x, np.logical_not(converged), True, "root")
    return RootResult(x=x, success=converged, fun=value(x))


class RootScalarResult:
    """What ``root_scalar`` returns while difgen traces: ``root`` and
    ``converged`` (SciPy's ``RootResults`` fields the generated code computes)."""

    def __init__(self, root: Any, converged: Any) -> None:
        self.root, self.converged = root, converged


def root_scalar(
    f: Fn,
    args: Any = (),
    method: str | None = None,
    bracket: Any = None,
    fprime: Any = None,
    fprime2: Any = None,
    x0: Any = None,
    x1: Any = None,
    xtol: float | None = None,
    rtol: float | None = None,
    maxiter: int | None = None,
    options: Any = None,
) -> RootScalarResult:
    """``brentq``, ``bisect``, ``newton`` or the secant, chosen as SciPy does."""
    if options:
        raise _refuse("root_scalar", "options=...", "is not supported")
    if fprime2 is not None:
        raise _refuse(
            "root_scalar", "fprime2=...", "(Halley's method) is not supported"
        )
    if fprime is True:
        raise _refuse(
            "root_scalar", "fprime=True", "is not supported (pass a function)"
        )
    if method is None:  # SciPy's choice
        if bracket is not None:
            method = "brentq"
        elif x0 is not None:
            method = "newton" if fprime is not None else "secant"
        else:
            raise _refuse("root_scalar", "method=None", "needs a bracket or x0")
    method = method.lower()
    if method in ("brentq", "bisect"):
        if bracket is None or len(bracket) != 2:
            raise _refuse("root_scalar", f"method={method!r}", "needs bracket=[a, b]")
        solver = _brentq if method == "brentq" else _bisect
        xt = 2e-12 if xtol is None else xtol
        rt = 8.881784197001252e-16 if rtol is None else rtol
        cap = 100 if maxiter is None else maxiter
        root, failed = solver(f, bracket[0], bracket[1], args, xt, rt, cap)
    elif method in ("newton", "secant"):
        if x0 is None:
            raise _refuse("root_scalar", f"method={method!r}", "needs x0")
        if method == "newton" and fprime is None:
            raise _refuse("root_scalar", "method='newton'", "needs fprime")
        if np.ndim(x0) != 0:
            raise _refuse("root_scalar", "x0=<array>", "must be a scalar")
        deriv = fprime if method == "newton" else None
        xt = 1.48e-08 if xtol is None else xtol
        rt = 0.0 if rtol is None else rtol
        cap = 50 if maxiter is None else maxiter
        root, failed = _newton(f, x0, deriv, args, xt, cap, x1, rt)
    else:
        raise _refuse(
            "root_scalar",
            f"method={method!r}",
            "is not supported (brentq, bisect, newton and secant are)",
        )
    not_nan = np.abs(root) >= 0.0
    converged = np.logical_and(np.logical_not(failed), not_nan)
    return RootScalarResult(_unless(root, failed, True, "root_scalar"), converged)


FUNCTIONS: dict[str, Fn] = {
    "brentq": brentq,
    "bisect": bisect,
    "newton": newton,
    "fixed_point": fixed_point,
    "root": root,
    "root_scalar": root_scalar,
}
"""The root finders of ``scipy.optimize`` difgen traces, by name."""

_LAYOUT = {"brentq": ("f", "a", 3), "newton": ("func", "x0", 3)}
_LAYOUT["fixed_point"] = ("func", "x0", 2)
_LAYOUT["bisect"] = ("f", "a", 3)
_LAYOUT["root"] = ("fun", "x0", 2)
"""Each finder's function and first point by keyword, and where ``args`` sits."""


def replacement(name: str, original: Fn) -> Fn:
    """SciPy's ``original`` where the function gives no traced value, difgen's
    where it does."""
    traced = FUNCTIONS[name]

    @functools.wraps(original)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if contains_tracer(list(args)) or contains_tracer(list(kwargs.values())):
            return traced(*args, **kwargs)
        if name == "root_scalar":
            fn = args[0] if args else kwargs.get("f")
            extra = args[1] if len(args) > 1 else kwargs.get("args", ())
            bracket = args[3] if len(args) > 3 else kwargs.get("bracket")
            x = args[6] if len(args) > 6 else kwargs.get("x0")
            if x is None and bracket is not None and len(bracket) > 0:
                x = bracket[0]
        else:
            fn_key, x_key, at = _LAYOUT[name]
            fn = args[0] if args else kwargs.get(fn_key)
            x = args[1] if len(args) > 1 else kwargs.get(x_key)
            extra = args[at] if len(args) > at else kwargs.get("args", ())
        if callable(fn) and x is not None and _traced(fn, _float(x), _args(extra)):
            return traced(*args, **kwargs)
        return original(*args, **kwargs)

    return dispatch
