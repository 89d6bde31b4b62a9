"""The points variants' graphs (``points = true``): each operator's graph batched
over a leading axis of points, derived before anything is printed.

Shapes in the IR are static and the number of points is not known at build time,
so each operator graph is batched by the vmap transform at two sentinel sizes
(:data:`SENTINELS`, two that appear as no integer in the operator's graph); the
printer (:mod:`difgen.targets.numpy.points`) is told which size is the points axis
and prints it as the run-time number of points, at both sizes, and requires the
two texts to be equal.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from difgen.ad import build_graph, vmap_eval
from difgen.config import ModuleSpec
from difgen.core.ir import FrozenArray, Graph
from difgen.derive.graphs import OperatorGraph
from difgen.operators import Operator
from difgen.passes import optimize

SENTINELS = (97, 89, 83, 79, 73, 71, 67, 61, 59, 53, 47, 43)
"""Candidate sizes of the points axis at build time: two-digit primes, so both
sentinels measure alike (the inlining policy counts the points axis as its size's
digits, :func:`difgen.targets.numpy.printer.Inlining.inlines`), and two that
appear nowhere in the operator's IR are taken."""


def batch_flags(op: Operator, spec: ModuleSpec) -> list[bool]:
    """Which inputs of the operator graph carry the points axis: ``x`` (unless
    ``input.per_point = false`` shares it between points), the seeds and the
    per-point contexts."""
    flags = [spec.input.per_point] + [True] * len(op.seeds)
    return flags + [c.per_point for c in spec.contexts]


def batched_graph(
    graph: Graph, flags: Sequence[bool], k: int
) -> tuple[Graph, list[bool]]:
    """``graph`` on inputs whose ``flags`` ones lead with ``k`` points, optimized.

    Returns the graph and, per output, whether it carries the points axis (an
    output that depends on no per-point input, such as the hessian of a quadratic,
    does not; the emission broadcasts it).
    """
    avals = [
        ((k, *v.shape) if b else v.shape, v.dtype) for v, b in zip(graph.inputs, flags)
    ]
    out_flags: list[bool] = []

    def fn(*args: Any) -> tuple[Any, ...]:
        outs, batched = vmap_eval(graph, args, flags, k)
        out_flags[:] = batched
        return tuple(outs)

    return optimize(build_graph(fn, avals)), out_flags


def _sentinels(graph: Graph) -> tuple[int, int]:
    """Two candidate sizes that appear as no integer in the graph."""
    used = set(_integers(graph))
    free = [k for k in SENTINELS if k not in used]
    if len(free) < 2:  # every candidate appears: the comparison still guards
        return SENTINELS[0], SENTINELS[1]
    return free[0], free[1]


def _integers(value: Any) -> Iterator[int]:
    """Every integer a graph holds (shapes, parameters, integral constants, and those
    of its sub-graphs): where a sentinel could be confused with the graph's own."""
    if isinstance(value, Graph):
        for atom in (*value.inputs, *value.outputs):
            yield from atom.shape
            yield from _integers(getattr(atom, "value", None))
        for eqn in value.eqns:
            yield from eqn.out.shape
            for atom in eqn.inputs:
                yield from atom.shape
                yield from _integers(getattr(atom, "value", None))
            for _, param in eqn.params:
                yield from _integers(param)
    elif isinstance(value, (bool, np.bool_)) or value is None:
        return
    elif isinstance(value, (int, np.integer)):
        yield int(value)
    elif isinstance(value, (float, np.floating)):
        if np.isfinite(value) and float(value).is_integer():
            yield int(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _integers(item)
    elif isinstance(value, slice):
        yield from _integers((value.start, value.stop, value.step))
    elif isinstance(value, FrozenArray):
        yield from _integers(value.value)
    elif isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        finite = value[np.isfinite(value)] if value.dtype.kind == "f" else value
        whole = (
            finite[finite == np.round(finite)] if value.dtype.kind == "f" else finite
        )
        yield from (int(v) for v in np.unique(whole))


@dataclass(frozen=True)
class PointsGraphs:
    """One operator's graph batched at the two sentinel sizes: per size, the
    batched graph and which of its outputs carry the points axis."""

    op: Operator
    sentinels: tuple[int, int]
    batched: tuple[tuple[Graph, list[bool]], tuple[Graph, list[bool]]]


def derive(
    spec: ModuleSpec, operators: Sequence[OperatorGraph]
) -> tuple[PointsGraphs, ...]:
    """The batched graphs of every operator (``f`` included), in table order."""
    derived = []
    for item in operators:
        flags = batch_flags(item.op, spec)
        k1, k2 = _sentinels(item.graph)
        first = batched_graph(item.graph, flags, k1)
        second = batched_graph(item.graph, flags, k2)
        derived.append(PointsGraphs(item.op, (k1, k2), (first, second)))
    return tuple(derived)
