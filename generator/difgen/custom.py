"""User derivative rules: :class:`custom_jvp`, with JAX's shape.

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
the rule. This module imports nothing, so ``import difgen`` stays light.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

Rule = Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, Any]]

TRACING: list[Callable[[custom_jvp, tuple[Any, ...], dict[str, Any]], Any]] = []
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
