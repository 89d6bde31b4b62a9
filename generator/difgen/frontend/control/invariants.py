"""Loop-invariant code motion for the loops the control helpers bind.

A loop's condition and body are traced on symbolic loop variables, so what they
compute from the loop's constants alone (``-p[0]``, ``p[1]``, ``np.sin(c)``) is
recomputed at every iteration, and the loop's adjoint accumulates the cotangent of
each constant as a whole (a ``(2,)`` array built from zeros at every step for two
scalar reads of ``p``). :func:`hoist` computes those values once, before the loop,
where they become constants of the loop themselves: the body reads them, the
adjoint accumulates their cotangents (scalars for scalar reads) and the transpose
of their computation outside the loop brings them back to the original constants.
The values are the same operations on the same numbers, computed once: the results
are identical, NaN and inf included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from difgen.core.ir import Eqn, Graph, Lit, SubGraph, Var, dce
from difgen.core.tracer import bind


def _invariant(graph: Graph, n_state: int) -> list[Eqn]:
    """The equations of ``graph`` that read constants (and literals, and each
    other) only, in order; none that hold sub-graphs or read no value at all."""
    known = set(graph.inputs[n_state:])
    found = []
    for eqn in graph.eqns:
        reads = [a for a in eqn.inputs if isinstance(a, Var)]
        nested = any(isinstance(v, SubGraph) for _, v in eqn.params)
        if reads and not nested and all(a in known for a in reads):
            known.add(eqn.out)
            found.append(eqn)
    return found


def _needed(graph: Graph, hoisted: Sequence[Eqn]) -> list[Var]:
    """The hoisted values the rest of ``graph`` reads (or gives as outputs)."""
    outs = {e.out for e in hoisted}
    moved = {id(e) for e in hoisted}
    used: dict[Var, None] = {}
    for eqn in graph.eqns:
        if id(eqn) not in moved:
            for a in eqn.inputs:
                if isinstance(a, Var) and a in outs:
                    used[a] = None
    for o in graph.outputs:
        if isinstance(o, Var) and o in outs:
            used[o] = None
    return list(used)


def hoist(
    graphs: Sequence[Graph], n_state: int, consts: Sequence[Any]
) -> tuple[list[Graph], list[Any]]:
    """``graphs`` (a loop's condition and body, on (state, constants)) with the
    values they compute from the constants alone computed once outside, in the
    current trace, and passed as further constants; the new constants' values
    (``consts`` then the hoisted ones). Every graph gets every new constant (an
    input it does not read where another graph computed it)."""
    plans = []
    for graph in graphs:
        hoisted = _invariant(graph, n_state)
        plans.append((hoisted, _needed(graph, hoisted)))
    if not any(needed for _, needed in plans):
        return list(graphs), list(consts)
    values = list(consts)
    for graph, (hoisted, needed) in zip(graphs, plans):
        env: dict[Var, Any] = dict(zip(graph.inputs[n_state:], consts))
        for eqn in hoisted:
            args = [a.value if isinstance(a, Lit) else env[a] for a in eqn.inputs]
            env[eqn.out] = bind(eqn.primitive, *args, **eqn.params.as_dict())
        values += [env[v] for v in needed]
    out = []
    for k, (graph, (hoisted, needed)) in enumerate(zip(graphs, plans)):
        moved = {id(e) for e in hoisted}
        extra: list[Var] = []
        for j, (_, other) in enumerate(plans):
            extra += needed if j == k else [Var(v.shape, v.dtype) for v in other]
        eqns = tuple(e for e in graph.eqns if id(e) not in moved)
        out.append(dce(Graph((*graph.inputs, *extra), graph.outputs, eqns)))
    # a constant no graph reads any more (``p``, read as ``p[0]`` and ``p[1]``
    # only) is no operand of the loop: its adjoint accumulates nothing
    read = [
        any(_reads(g, g.inputs[n_state + j]) for g in out) for j in range(len(values))
    ]
    out = [
        Graph(
            (*g.inputs[:n_state], *(v for v, r in zip(g.inputs[n_state:], read) if r)),
            g.outputs,
            g.eqns,
        )
        for g in out
    ]
    return out, [v for v, r in zip(values, read) if r]


def _reads(graph: Graph, var: Var) -> bool:
    return var in graph.outputs or any(var in e.inputs for e in graph.eqns)
