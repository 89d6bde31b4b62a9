"""Build a corpus case with ``difgen.generate`` and compare it with JAX.

:func:`run` is what both the test and the report call: it builds the case's module
(trace backend; ``gradient``, and ``hessian`` for the small cases), evaluates it at
the example arguments and returns an :class:`Outcome` with the largest relative
error of each operator against JAX (x64, ``jax.grad`` / ``jax.hessian`` on the
function with ``np`` and ``special`` bound to ``jax.numpy`` and
``jax.scipy.special``, or on the case's twin); a ``has_aux`` function's aux is
compared with the function's own value under NumPy (it is not differentiated, and
JAX computes ``np.mean`` of a bool array in float32 even with x64).
"""

from __future__ import annotations

import os
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_catalog
import numpy as np

import difgen
from difgen.errors import DifgenError

RTOL = 1e-10

if "jax" not in sys.modules:
    # XLA's compilation of each case's small jitted hessian is most of the JAX
    # side's time; without its backend optimizations the corpus' references take
    # 22 s instead of 30 (the values are the same computation, unfused). Only
    # when this process has not started JAX yet, and never over the user's flags.
    os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")


@dataclass
class Outcome:
    case: ml_catalog.Case
    module: Any = None
    refusal: str | None = None
    """The DifgenError's message when difgen refused the function."""
    errors: dict[str, float] = field(default_factory=dict)
    """Operator name -> max relative error against JAX."""
    mismatches: dict[str, str] = field(default_factory=dict)
    """Operator name -> why it does not match (shapes, structure, values)."""
    seconds: float = 0.0

    @property
    def status(self) -> str:
        if self.refusal is not None:
            return "refused"
        return "WRONG" if self.mismatches else "matches"


def under_jax(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its globals ``np`` and ``special`` bound to JAX's (x64)."""
    import jax
    import jax.numpy as jnp
    import jax.scipy.special as jsp

    jax.config.update("jax_enable_x64", True)
    names = dict(fn.__globals__)
    names["np"] = jnp
    names["special"] = jsp
    return types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__)


def jax_function(case: ml_catalog.Case) -> Callable[..., Any]:
    import jax

    jax.config.update("jax_enable_x64", True)
    return case.twin if case.twin is not None else under_jax(case.function)


def operators(case: ml_catalog.Case) -> list[str]:
    return ["gradient", "hessian"] if case.hessian else ["gradient"]


def build(case: ml_catalog.Case) -> Outcome:
    """The case's module, or its refusal (a DifgenError's message)."""
    outcome = Outcome(case)
    start = time.perf_counter()
    try:
        outcome.module = difgen.generate(
            case.function,
            *case.args(),
            wrt=case.wrt,
            operators=operators(case),
            backend="trace",
            **case.options,
        )
    except DifgenError as exc:
        outcome.refusal = f"{type(exc).__name__}: {exc}"
    outcome.seconds = time.perf_counter() - start
    return outcome


def _leaves(tree: Any) -> tuple[list[Any], list[str]]:
    """The leaves of ``tree`` as float arrays, and their paths (``['W1']``,
    ``[0].w``): a NamedTuple of difgen's module and the user's have the same."""
    import jax

    pairs = jax.tree_util.tree_flatten_with_path(tree)[0]
    paths = [jax.tree_util.keystr(path) for path, _ in pairs]
    return [np.asarray(leaf, dtype=float) for _, leaf in pairs], paths


def relative_error(ours: Any, theirs: Any) -> tuple[float, str | None]:
    """Max over leaves of max |ours - theirs| / (|theirs| + 1e-6 max |theirs|), and
    what is wrong when the two do not match at :data:`RTOL`."""
    a, da = _leaves(ours)
    b, db = _leaves(theirs)
    if da != db:
        return float("inf"), f"leaves {da} against JAX's {db}"
    worst, problem = 0.0, None
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return float("inf"), f"{da[i]}: shape {x.shape}, JAX's {y.shape}"
        scale = float(np.max(np.abs(y))) if y.size else 0.0
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
            same = np.array_equal(x, y, equal_nan=True)
            if not same:
                return float("inf"), f"{da[i]}: non-finite values differ"
            continue
        err = np.abs(x - y) / (np.abs(y) + 1e-6 * scale + 1e-300)
        worst = max(worst, float(np.max(err)) if err.size else 0.0)
        if not np.allclose(x, y, rtol=RTOL, atol=1e-13 * scale):
            problem = problem or f"{da[i]}: max relative error {float(np.max(err)):.3g}"
    return worst, problem


def references(case: ml_catalog.Case) -> dict[str, Any]:
    """JAX's derivatives of :func:`operators` at the case's example arguments,
    all from one jitted function (JAX's op-by-op hessians take seconds each, and
    one compilation is cheaper than two); a has_aux gradient is the gradient
    alone, aux being compared with the function's own NumPy value."""
    import jax

    g = jax_function(case)
    if case.has_aux:
        g = _value_of(g)
    derivatives = {
        "gradient": jax.grad(g, argnums=case.wrt),
        "hessian": jax.hessian(g, argnums=case.wrt),
    }
    names = operators(case)
    values = jax.jit(lambda *a: tuple(derivatives[n](*a) for n in names))(*case.args())
    return dict(zip(names, values))


def _value_of(g: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args: g(*args)[0]


def compare(outcome: Outcome) -> Outcome:
    """Evaluate the built module's operators at the example arguments against JAX."""
    case, module = outcome.case, outcome.module
    args = case.args()
    expected = references(case)
    for operator in operators(case):
        ours = getattr(module, operator)(*args)
        theirs = expected[operator]
        if case.has_aux:
            ours, aux = ours
            err, problem = relative_error(aux, case.function(*args)[1])
            outcome.errors["aux"] = err
            if problem is not None:
                outcome.mismatches["aux"] = problem
        err, problem = relative_error(ours, theirs)
        outcome.errors[operator] = err
        if problem is not None:
            outcome.mismatches[operator] = problem
    return outcome


def run(case: ml_catalog.Case) -> Outcome:
    outcome = build(case)
    return outcome if outcome.refusal is not None else compare(outcome)
