"""The size budget of SymPy expressions, judged from the graph alone.

Whether a graph is small enough to write out as SymPy expressions (the symbolic
derivation, or the trace backend's straight-line scalar code) is decided before
SymPy starts, in nodes (never seconds): :func:`expression_size` estimates the
largest result tree, :data:`EXPRESSION_LIMIT` bounds it, and the lowering
(:mod:`difgen.derive.lowering`) raises :class:`ExpressionTooLarge` when an
element outgrows it. Nothing here imports SymPy, so a build that only asks the
question (the cost model of a trace build) does not import it either.
"""

from __future__ import annotations

from typing import Any

from difgen.core.ir import Eqn, Graph, Var

EXPRESSION_LIMIT = 4000
"""Nodes of the largest result element, written out as a tree, that scalar code is
tried for (both backends). SymPy walks expressions as trees, so its steps (lowering,
``count_ops``, ``expand``, ``diff``) cost at least this much per element."""


def fan_in(eqn: Eqn) -> int:
    """How many elements of its inputs one output element of ``eqn`` combines, at
    most, by its primitive's declared cost class (``Primitive.cost``): 1 for
    elementwise, moving and opaque primitives."""
    prim, out = eqn.primitive, max(eqn.out.size, 1)
    largest = max((a.size for a in eqn.inputs), default=1)
    if prim.cost == "reducing":
        return max(1, -(-largest // out))
    if prim.cost == "accumulating":
        axis = eqn.params.as_dict().get("axis")
        shape = eqn.inputs[0].shape
        return int(shape[axis]) if isinstance(axis, int) and shape else largest
    if prim.cost == "by_work":  # contractions: work is the sum of products
        return max(1, -(-prim.work(eqn) // out))
    return 1


def expression_size(graph: Graph, cap: int = 10**12) -> int:
    """Nodes of the largest result element written out as an expression tree,
    estimated from the graph alone (no SymPy), in time linear in the graph.

    An element of an equation's output is one node over the trees of the input
    elements it reads (``fan_in`` of each input); shared subexpressions count once
    per use, as they do in the trees SymPy walks. A structural move (a primitive
    of the ``moving`` cost class: getitem, pack, reshape, concatenate...) adds no node: its element *is* one input element,
    at most the largest of them (``state = np.array([a, b]); state[0]`` is ``a``,
    not a tree over both). ``cap`` keeps the numbers small: the estimate is only
    compared with limits far below it.
    """
    size: dict[Var, int] = {}

    def of(atom: Any) -> int:
        return size.get(atom, 1) if isinstance(atom, Var) else 1

    for eqn in graph.eqns:
        if eqn.primitive.cost == "moving":  # a structural move: no new node
            total = max((of(a) for a in eqn.inputs), default=1)
        else:
            total = 1 + fan_in(eqn) * sum(of(a) for a in eqn.inputs)
        size[eqn.out] = min(total, cap)
    return max((of(v) for v in graph.outputs), default=1)


class ExpressionTooLarge(Exception):
    """A lowered expression went over its size budget: the caller falls back to
    code from the graph (vector code), which costs time linear in the graph."""
