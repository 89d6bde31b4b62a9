"""User derivative rules: :class:`custom_jvp` and :class:`custom_vjp`, with JAX's
shapes, and :func:`defvjp`, autograd's spelling of a VJP.

>>> import numpy as np
>>> @custom_jvp
... def softplus(x):
...     return np.log1p(np.exp(x))
>>> @softplus.defjvp
... def softplus_jvp(primals, tangents):
...     (x,), (dx,) = primals, tangents
...     return softplus(x), dx / (1.0 + np.exp(-x))
>>> float(softplus(0.0)) == float(np.log1p(np.exp(0.0)))
True

Called on NumPy values, the decorated function is the function: same result, same
exceptions, one attribute lookup and one test more. While difgen traces, a call
with a traced argument is recorded as one ``custom_jvp_call`` equation (the
frontend's :mod:`difgen.frontend.custom` installs the handler in :data:`TRACING`
when it is imported): its value comes from the function traced (or, when difgen
cannot trace the function, from the value the rule returns), its derivative from
the rule. A :class:`custom_vjp` call is the same equation, its JVP rule the
transpose of the user's VJP (which is linear in the cotangent), so that reverse
mode, which transposes it again, runs the user's VJP. This module imports nothing,
so ``import difgen`` stays light.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

Rule = Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, Any]]
Forward = Callable[..., tuple[Any, Any]]
Backward = Callable[[Any, Any], Any]

TRACING: list[Callable[[custom_jvp | custom_vjp, tuple[Any, ...], dict[str, Any]], Any]]
TRACING = []
"""The frontend's handler of a call while difgen traces (empty until the frontend is
imported): it returns ``NotImplemented`` when no argument is traced."""


class custom_jvp:
    """A function with a user derivative rule (``@difgen.custom_jvp``).

    ``@f.defjvp`` declares the rule: ``rule(primals, tangents) -> (y, dy)``, where
    ``primals`` and ``tangents`` are tuples with one entry per positional argument
    of ``f``, ``y`` is ``f(*primals)`` and ``dy`` its tangent, which must be linear in
    the tangents. The rule is written in NumPy, like ``f``, and difgen traces it:
    its own derivatives give second order.
    """

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun
        self.jvp: Rule | None = None
        functools.update_wrapper(self, fun)

    def defjvp(self, jvp: Rule) -> Rule:
        """Declare the derivative rule (a decorator; returns the rule unchanged)."""
        self.jvp = jvp
        return jvp

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if TRACING:
            result = TRACING[-1](self, args, kwargs)
            if result is not NotImplemented:
                return result
        return self.fun(*args, **kwargs)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        # a method: bound like the function it wraps
        if instance is None:
            return self
        return functools.partial(self, instance)

    def __repr__(self) -> str:
        return f"<difgen.custom_jvp {getattr(self.fun, '__qualname__', self.fun)!r}>"

    def rule_label(self) -> str:
        """How messages name the rule: ``the derivative rule <qualname>``."""
        return f"the derivative rule {getattr(self.jvp, '__qualname__', '?')}"


class custom_vjp:
    """A function with a user VJP (``@difgen.custom_vjp``), JAX's shape.

    ``f.defvjp(fwd, bwd)`` declares it: ``fwd(*primals) -> (y, residuals)`` gives
    ``f``'s value and what the backward pass needs (an array, or a tuple, list or
    dict of them), ``bwd(residuals, ybar) -> xbar``, a tuple with one cotangent per
    positional argument (None for one that is not float). Both are written in
    NumPy and traced; ``bwd`` must be linear in ``ybar``. Reverse mode runs ``bwd``;
    forward mode runs its transpose (unlike JAX, which refuses forward mode over a
    ``custom_vjp``: a traced linear map has one); second order differentiates
    ``fwd`` and ``bwd``'s own code.
    """

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun
        self.fwd: Forward | None = None
        self.bwd: Backward | None = None
        functools.update_wrapper(self, fun)

    def defvjp(self, fwd: Forward, bwd: Backward) -> None:
        """Declare the forward and backward passes (JAX's ``defvjp``)."""
        if not (callable(fwd) and callable(bwd)):
            raise TypeError(
                f"{self!r}.defvjp(fwd, bwd) takes two functions, the forward pass "
                "(*primals) -> (y, residuals) and the backward pass "
                "(residuals, ybar) -> xbar"
            )
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if TRACING:
            result = TRACING[-1](self, args, kwargs)
            if result is not NotImplemented:
                return result
        return self.fun(*args, **kwargs)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        return functools.partial(self, instance)

    def __repr__(self) -> str:
        return f"<difgen.custom_vjp {getattr(self.fun, '__qualname__', self.fun)!r}>"

    def rule_label(self) -> str:
        """How messages name the rule: the backward and forward passes."""
        bwd = getattr(self.bwd, "__qualname__", "?")
        fwd = getattr(self.fwd, "__qualname__", "?")
        return f"the VJP rule {bwd} (forward pass {fwd})"


def defvjp(fun: custom_vjp, *makers: Callable[..., Callable[[Any], Any]]) -> None:
    """autograd's spelling: ``defvjp(f, maker_0, maker_1, ...)``, where
    ``maker_i(ans, *args)`` returns ``g -> `` the cotangent of argument ``i``
    (``ans`` is ``f(*args)``; arguments without a maker get none).

    ``f`` must be a :class:`custom_vjp` (where autograd has ``@primitive``); this
    is ``f.defvjp`` with ``fwd = (ans, (ans, *args))`` and one maker per argument.
    """
    if not isinstance(fun, custom_vjp):
        raise TypeError(
            f"difgen.defvjp takes a difgen.custom_vjp function (decorate "
            f"{getattr(fun, '__qualname__', fun)!r} with @difgen.custom_vjp, where "
            "autograd has @primitive)"
        )
    if not makers:
        raise TypeError(f"difgen.defvjp({fun!r}) needs one VJP maker per argument")

    def fwd(*args: Any) -> tuple[Any, Any]:
        ans = fun(*args)
        return ans, (ans, *args)

    def bwd(residuals: Any, g: Any) -> tuple[Any, ...]:
        ans, *args = residuals
        cotangents = [maker(ans, *args)(g) for maker in makers[: len(args)]]
        return (*cotangents, *[None] * (len(args) - len(cotangents)))

    fwd.__qualname__ = f"defvjp({getattr(fun.fun, '__qualname__', '?')})"
    bwd.__qualname__ = ", ".join(getattr(m, "__qualname__", "?") for m in makers)
    fun.defvjp(fwd, bwd)
