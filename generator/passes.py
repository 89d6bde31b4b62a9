"""Graph-to-graph clean-ups: dead-code elimination (folding and CSE happen in bind)."""

from __future__ import annotations

from difgen.ir import Eqn, Graph, Var


def dce(graph: Graph) -> Graph:
    """Drop equations whose outputs nothing uses (one backward sweep)."""
    live: set[Var] = {v for v in graph.outputs if isinstance(v, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(graph.eqns):
        if eqn.out in live:
            kept.append(eqn)
            live.update(a for a in eqn.inputs if isinstance(a, Var))
    return Graph(graph.inputs, graph.outputs, tuple(reversed(kept)))
