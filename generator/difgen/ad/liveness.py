"""Which elements of each value can reach an output: the structural liveness.

A function may compute elements it then throws away: ``np.tril(m, -1)`` (a product
with a constant 0/1 mask), ``np.where`` with a constant condition, a slice or an
index selection. Such an element is *dead*: no output depends on it. Its value may be
singular (``sqrt(0)`` on the diagonal of a distance matrix) while every kept element
is smooth, and then a derivative rule computes ``inf * 0`` or ``0 / 0`` there; a
product with the mask (forward mode) or with the rule's coefficient (reverse mode)
carries that NaN into the kept elements.

:func:`guards` walks a graph backwards from its outputs and records, per equation,
which elements of each operand this equation reads into a live element of its
output. The JVP (:mod:`difgen.ad.jvp`) then *selects* each operand's tangent,
``where(live, t, 0)``, before a rule that can be unbounded (:data:`UNBOUNDED`) sees
it, so a dead element's tangent never enters arithmetic with a kept one; the
transposed selection does the same for cotangents in reverse mode (and
:func:`difgen.ad.transpose.vjp_eval` selects again on the linear graph's own
liveness). Values are untouched: a NaN the function computes in a kept element
stays.

The analysis is exact for elementwise primitives (with broadcasting, a product with
a constant holding zeros, ``where`` on a constant condition), ``getitem``,
``reshape``, ``transpose``, ``broadcast_to`` and ``reduce_sum``; any other primitive
reads every element of its operands when any of its output is live (a conservative
answer, which only leaves a NaN where it was).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.core.ir import Eqn, Graph, Lit, Var

Mask = np.ndarray
"""A boolean array of a value's shape: True where an element is live."""

SELECTIONS = frozenset({"getitem", "reshape", "transpose", "broadcast_to"})
"""Primitives of one array operand that only move or pick its elements: each output
element is one input element, found by evaluating the primitive on element ids."""

UNBOUNDED = frozenset(
    {
        # a pole, an infinite slope or an overflow at some finite input
        *("div", "pow", "sqrt", "cbrt", "log", "log2", "log10", "log1p"),
        *("exp", "exp2", "expm1", "sinh", "cosh", "tan"),
        *("arcsin", "arccos", "arctanh", "arccosh", "arctan2", "hypot"),
        *("hypot_unit", "hypot_slope", "hypot_gap"),
        *("fmod", "remainder"),
        # a product: with a constant mask, the multiplication that discards; else
        # a coefficient that is the other operand's (maybe infinite) value
        "mul",
    }
)
"""The elementwise primitives whose tangent or cotangent can be non-finite at a
finite input: only they get a selection. A bounded rule (sin, tanh, abs, maximum)
may carry a dead element's NaN on, but only into dead elements, until a selection,
a guarded product or a guarded rule stops it."""


@dataclass(frozen=True)
class Guard:
    """Per operand of one equation, the elements it reads into live output elements
    (None: every element, or not an operand to guard)."""

    uses: tuple[Mask | None, ...]


_CACHE: weakref.WeakKeyDictionary[Graph, tuple[Guard | None, ...]] = (
    weakref.WeakKeyDictionary()
)


def guards(graph: Graph) -> tuple[Guard | None, ...]:
    """One entry per equation of ``graph``: its :class:`Guard`, or None when the JVP
    rule of that equation needs no selection (nothing it reads is dead, or its rule
    has no coefficient)."""
    cached = _CACHE.get(graph)
    if cached is None:
        cached = _CACHE[graph] = _guards(graph)
    return cached


def _guards(graph: Graph) -> tuple[Guard | None, ...]:
    if not any(_may_kill(eqn) for eqn in graph.eqns):
        return (None,) * len(graph.eqns)
    live: dict[Var, Mask] = {}
    for out in graph.outputs:
        if isinstance(out, Var):
            live[out] = np.ones(out.shape, dtype=bool)
    result: list[Guard | None] = []
    for eqn in reversed(graph.eqns):
        out_live = live.get(eqn.out)
        if out_live is None:
            out_live = np.zeros(eqn.out.shape, dtype=bool)
        uses = _uses(eqn, out_live)
        for atom, use in zip(eqn.inputs, uses):
            if isinstance(atom, Var):
                seen = live.get(atom)
                live[atom] = use if seen is None else seen | use
        result.append(_guard(eqn, uses, out_live))
    return tuple(reversed(result))


def _may_kill(eqn: Eqn) -> bool:
    """Whether ``eqn`` can leave an element of an operand unread by its output."""
    name = eqn.primitive.name
    if name == "getitem":
        return True
    if name == "mul":
        return any(isinstance(a, Lit) and not a.value.all() for a in eqn.inputs)
    if name == "where":
        cond = eqn.inputs[0]
        return isinstance(cond, Lit) and not (cond.value.all() or not cond.value.any())
    return False


def _guard(eqn: Eqn, uses: Sequence[Mask], out_live: Mask) -> Guard | None:
    """The selections of one equation. An operand NumPy broadcasts is read by live
    and dead output elements alike: its tangent is broadcast to the output's shape
    and selected there (a mask of the output's shape), so that the transposed
    rule's sum over the broadcast axes never adds a dead element's ``inf * 0``."""
    prim = eqn.primitive
    if prim.name not in UNBOUNDED:
        return None
    if eqn.out.dtype != "float64":
        return None
    partial = not out_live.all()

    def mask(a: Any, u: Mask) -> Mask | None:
        if not isinstance(a, Var) or a.dtype != "float64":
            return None
        if partial and a.shape != eqn.out.shape:
            return out_live
        return None if u.all() else u

    masks = tuple(mask(a, u) for a, u in zip(eqn.inputs, uses))
    if all(m is None for m in masks):
        return None
    return Guard(masks)


def _uses(eqn: Eqn, out_live: Mask) -> list[Mask]:
    """Per operand, the elements read into a live element of the output."""
    prim, inputs = eqn.primitive, eqn.inputs
    if not out_live.any():
        return [np.zeros(a.shape, dtype=bool) for a in inputs]
    if prim.elementwise:
        reads = [out_live] * len(inputs)
        if prim.name == "mul":
            for i, a in enumerate(inputs):
                if isinstance(a, Lit):  # the other operand's element times 0 is 0
                    kept = out_live & (np.asarray(a.value) != 0)
                    reads = [r if j == i else r & kept for j, r in enumerate(reads)]
        elif prim.name == "where" and isinstance(inputs[0], Lit):
            cond = np.broadcast_to(
                np.asarray(inputs[0].value, dtype=bool), out_live.shape
            )
            reads = [out_live, out_live & cond, out_live & ~cond]
        return [_unbroadcast(r, a.shape) for r, a in zip(reads, inputs)]
    if prim.name in SELECTIONS and len(inputs) == 1 and isinstance(inputs[0], Var):
        (a,) = inputs
        ids = np.arange(a.size, dtype=np.float64).reshape(a.shape)
        try:
            picked = np.asarray(prim.impl(ids, **eqn.params.as_dict()))
        except (TypeError, ValueError, IndexError):  # conservative: all read
            return [np.ones(a.shape, dtype=bool)]
        if picked.shape != out_live.shape:
            return [np.ones(a.shape, dtype=bool)]
        use = np.zeros(a.size, dtype=bool)
        use[picked[out_live].astype(np.int64)] = True
        return [use.reshape(a.shape)]
    if prim.name == "reduce_sum" and len(inputs) == 1:
        (a,) = inputs
        axes = tuple(eqn.params.as_dict()["axes"])
        return [np.broadcast_to(np.expand_dims(out_live, axes), a.shape).copy()]
    return [np.ones(a.shape, dtype=bool) for a in inputs]


def _unbroadcast(mask: Mask, shape: tuple[int, ...]) -> Mask:
    """An operand element is read when any output element it broadcasts to is."""
    lead = mask.ndim - len(shape)
    if lead:
        mask = np.asarray(mask.any(axis=tuple(range(lead))))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and mask.shape[i] != 1)
    if axes:
        mask = np.asarray(mask.any(axis=axes, keepdims=True))
    return np.broadcast_to(mask, shape).copy()
