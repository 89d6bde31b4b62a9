"""Graph-to-graph clean-ups, run to a fixed point by :func:`optimize`.

One round re-traces the graph: every equation is issued again through ``bind``, which
folds constants (an equation whose inputs are all constants is evaluated: a seed of 1
disappears into the arithmetic), applies the algebraic identities of
:mod:`difgen.core.simplify` (``x*1``, ``x+0``, ``0*x``, double transpose, reshape of
reshape...) and shares equal equations (common-subexpression elimination); then
:func:`difgen.core.ir.dce` drops what no output uses. Rounds repeat until the graph stops changing,
because one simplification can enable another (Tangent's habit).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from difgen.ad.interpret import build_graph, eval_graph
from difgen.core.ir import Graph, Lit, Var

MAX_ROUNDS = 20


def retrace(graph: Graph) -> Graph:
    """One round: fold, simplify and CSE by re-issuing every equation, then DCE."""
    avals = [(v.shape, v.dtype) for v in graph.inputs]
    return build_graph(lambda *args: tuple(eval_graph(graph, args)), avals)


def fingerprint(graph: Graph) -> Hashable:
    """A structural key: equal for graphs that differ only in Var identities."""
    index: dict[Var, int] = {v: i for i, v in enumerate(graph.inputs)}

    def key(atom: Any) -> Hashable:
        return ("lit", atom) if isinstance(atom, Lit) else index[atom]

    eqns = []
    for eqn in graph.eqns:
        eqns.append((eqn.primitive.name, tuple(map(key, eqn.inputs)), eqn.params))
        index[eqn.out] = len(index)
    return tuple(eqns), tuple(map(key, graph.outputs))


def optimize(graph: Graph, max_rounds: int = MAX_ROUNDS) -> Graph:
    """Fold, simplify, CSE and DCE until nothing changes.

    Identities exact in floats apply to the user's computation (``x * 1.0``, a
    double transpose); ``x + 0.0`` is kept there, since it turns -0.0 into 0.0:

    >>> from difgen.frontend import trace
    >>> g = trace(lambda x: (x * 1.0).T.T, [((2, 3), "float64")])
    >>> optimize(g).eqns
    ()
    >>> g = trace(lambda x: x + 0.0, [((2, 3), "float64")])
    >>> [e.primitive.name for e in optimize(g).eqns]
    ['add']
    """
    current = fingerprint(graph)
    for _ in range(max_rounds):
        new = retrace(graph)
        key = fingerprint(new)
        if key == current:
            return new
        graph, current = new, key
    return graph
