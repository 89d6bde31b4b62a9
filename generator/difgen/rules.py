"""The build-time check of user derivative rules (``difgen.custom_jvp`` and
``difgen.custom_vjp``).

A rule is the user's claim about a derivative, and difgen builds on it whatever it
says; so before a module that calls one is derived, each rule is compared with the
function it differentiates, at the operands the call receives when the module's
function runs at a sample point. The sample points are ``difgen verify``'s
(:func:`difgen.verification.sample_point`: ``x`` and the float contexts uniform in
[-1, 1], the same draws on every run and machine, different per module); a point
where the function, the rule or the differences are not finite is skipped for the
next draw, up to :data:`DRAWS`.

At the call's operands, with a random tangent per float operand:

- the rule's tangent at zero tangents must be zero (it is linear, not affine);
- its tangent must agree with central differences of the function itself, called
  on NumPy values (it runs as it would without difgen, so a function difgen cannot
  trace is checked too), to :data:`TOLERANCE` of their scale at one of two steps;
- where the value comes from the rule (difgen could not trace the function), the
  rule's value must be the function's, to :data:`VALUE_TOLERANCE`.

A ``custom_vjp``'s rule is its backward pass: at a zero cotangent it must give
zero cotangents, and for a random cotangent ``ybar`` and direction ``dx``,
``xbar . dx`` must agree with ``ybar`` dotted with the central differences along
``dx`` (the same tolerance, relative to their scale); its forward pass's value must
be the function's where the value comes from it.

A rule that fails stops the build with a :class:`~difgen.errors.TraceError` naming
the rule's file and line and giving both values; one never checked (no finite
point) is a build note.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen.ad import custom as calls
from difgen.budget import note
from difgen.config import ModuleSpec
from difgen.core.ir import Graph, SubGraph, evaluate
from difgen.errors import TraceError
from difgen.frontend import custom as frontend
from difgen.verification import error, sample_point

DRAWS = 8
"""Sample points tried before a rule is reported as unchecked."""

STEPS = (2.0**-17, 2.0**-19)
"""The central differences' steps (relative to the operand's scale)."""

TOLERANCE = 1e-5
"""Largest difference between the rule's tangent and the central differences,
relative to their scale (at least 1), at the better of the two steps."""

VALUE_TOLERANCE = 1e-8
"""Largest difference between the rule's value and the function's, relative."""


def check_rules(spec: ModuleSpec, graph: Graph) -> None:
    """Check every user rule ``graph`` calls (see the module docstring)."""
    if calls.uses_rules(graph) is None:
        return
    checked: set[tuple[str, SubGraph]] = set()
    seen: dict[tuple[str, SubGraph], str] = {}
    for draw in range(DRAWS):
        x, contexts = sample_point(spec, draw)
        recorded: dict[tuple[str, SubGraph], tuple[Any, ...]] = {}
        calls.RECORDING.append(recorded)
        try:
            with np.errstate(all="ignore"):
                graph.evaluate(x, *contexts)
        finally:
            calls.RECORDING.pop()
        rng = np.random.default_rng([draw, len(recorded)])
        for key, operands in recorded.items():
            if key in checked:
                continue
            seen.setdefault(key, "")
            why = _check_one(spec, key, operands, rng)
            if why is None:
                checked.add(key)
            else:
                seen[key] = why
        if set(seen) <= checked:
            return
    for key, why in seen.items():
        if key not in checked:
            note(
                f"the derivative rule of {key[0]} (defined at {key[1].where}) was "
                f"not checked against finite differences: {why or 'never called'}"
            )


def _check_one(
    spec: ModuleSpec,
    key: tuple[str, SubGraph],
    operands: tuple[Any, ...],
    rng: np.random.Generator,
) -> str | None:
    """None when the rule passed here; why it could not be checked otherwise.
    A rule that is wrong raises."""
    name, rule = key
    fn = frontend.FUNCTIONS[key]
    # not linear in the tangents: refused before any difference is taken
    calls.check_linear(rule, name, len(operands))
    name = fn.fun.__qualname__
    floating = [np.asarray(o).dtype == np.float64 for o in operands]
    tangents = [
        rng.uniform(-1.0, 1.0, np.shape(o)) for o, f in zip(operands, floating) if f
    ]
    zeros = [np.zeros(np.shape(t)) for t in tangents]
    with np.errstate(all="ignore"):
        y_rule, dy = evaluate(rule.graph, [*operands, *tangents])
        _, dy0 = evaluate(rule.graph, [*operands, *zeros])
        try:
            value = _call(fn.fun, operands)
        except Exception as exc:  # noqa: BLE001  (the user's function, on NumPy)
            return f"calling {name} on NumPy values raised {type(exc).__name__}: {exc}"
    if not (_finite(y_rule) and _finite(dy) and _finite(value)):
        return "no sample point where the function and the rule are finite"
    where = rule.where
    label = f"{spec.name!r}: {fn.rule_label()} of {name} at {where}"
    vjp = _backward(key, operands, np.shape(y_rule), rng)
    if vjp is not None:
        xbar0 = vjp[1]
        if any(np.any(c != 0.0) for c in xbar0):
            raise TraceError(
                f"module {label} returns nonzero cotangents "
                f"({', '.join(_show(c) for c in xbar0)}) for a zero cotangent: it "
                "must be linear in ybar (no constant term)"
            )
    elif np.any(dy0 != 0.0):
        raise TraceError(
            f"module {label} returns a nonzero tangent ({_show(dy0)}) for zero "
            "tangents: its tangent must be linear in the tangents (no constant term)"
        )
    if np.shape(value) != np.shape(y_rule):
        raise TraceError(
            f"module {label} returns a value of shape {np.shape(y_rule)}, but the "
            f"function returns shape {np.shape(value)}"
        )
    if error(y_rule, value) > VALUE_TOLERANCE:
        raise TraceError(
            f"module {label} returns the value {_show(y_rule)}, but the function "
            f"gives {_show(value)} at a sample point"
        )
    size = max(
        [1.0]
        + [
            float(np.max(np.abs(o), initial=0.0))
            for o, f in zip(operands, floating)
            if f
        ]
    )
    best, differences = np.inf, None
    for step in STEPS:
        h = step * size
        given = iter(tangents)
        plus, minus = [], []
        for o, f in zip(operands, floating):
            t = next(given) if f else 0.0
            plus.append(o + h * t if f else o)
            minus.append(o - h * t if f else o)
        with np.errstate(all="ignore"):
            try:
                estimate = (_call(fn.fun, plus) - _call(fn.fun, minus)) / (2 * h)
            except Exception as exc:  # noqa: BLE001
                return f"calling {name} near the sample point raised {exc!r}"
        if not _finite(estimate):
            return "the function is not finite near the sample point"
        if vjp is not None:  # one number each: ybar . J dx, against xbar . dx
            pair = np.array(
                [
                    np.sum(vjp[2] * estimate),
                    sum(np.sum(c * t) for c, t in zip(vjp[0], tangents)),
                ]
            )
            if not _finite(pair):
                return "the function is not finite near the sample point"
            err = error(pair[1], pair[0])
            estimate = pair[0]
        else:
            err = error(dy, estimate)
        if err < best:
            best, differences = err, estimate
    if best > TOLERANCE and vjp is not None:
        mine = sum(np.sum(c * t) for c, t in zip(vjp[0], tangents))
        raise TraceError(
            f"module {label} disagrees with central differences of {name} at a "
            f"sample point: for a random cotangent ybar and direction dx, the "
            f"backward pass gives xbar . dx = {float(mine):.9g}, the differences give "
            f"ybar . (J dx) = {float(np.asarray(differences)):.9g} (relative "
            f"difference {best:.3g}); check the rule"
        )
    if best > TOLERANCE:
        raise TraceError(
            f"module {label} disagrees with central differences of {name} at a "
            f"sample point: the rule's tangent is {_show(dy)}, the differences give "
            f"{_show(differences)} (relative difference {best:.3g}); check the rule"
        )
    return None


def _backward(
    key: tuple[str, SubGraph],
    operands: tuple[Any, ...],
    shape: tuple[int, ...],
    rng: np.random.Generator,
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray] | None:
    """A ``custom_vjp``'s backward pass at the operands: its cotangents for a
    random ``ybar`` and for zero, and that ``ybar`` (None for a ``custom_jvp``)."""
    passes = frontend.PASSES.get(key)
    if passes is None:
        return None
    fwd, bwd = passes
    ybar = rng.uniform(-1.0, 1.0, shape)
    with np.errstate(all="ignore"):
        residuals = evaluate(fwd, list(operands))[1:]
        xbar = evaluate(bwd, [*residuals, ybar])
        xbar0 = evaluate(bwd, [*residuals, np.zeros(shape)])
    return list(xbar), list(xbar0), ybar


def _call(function: Any, operands: Any) -> np.ndarray:
    return np.asarray(function(*operands), dtype=np.float64)


def _finite(value: Any) -> bool:
    return bool(np.all(np.isfinite(value)))


def _show(value: Any) -> str:
    return np.array2string(np.asarray(value), precision=6, threshold=8, separator=", ")
