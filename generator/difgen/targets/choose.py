"""Which emission an operator gets: straight-line scalar code or vectorized NumPy.

docs/design.md, section 9. Both forms compute the same graph; what differs is the price
of each operation on this machine class (CPython 3.11+, NumPy 2):

- **vector**: every equation is one NumPy call, ``CALL_NS`` of fixed overhead
  (dispatch, allocation) plus ``ELEMENT_NS`` per element of work;
- **scalar**: every arithmetic operation that survives SymPy's folding and CSE is one
  Python float operation, ``SCALAR_OP_NS``, plus ``ELEMENT_NS_SCALAR`` for each
  element unpacked from an argument (``.tolist()``) or packed into an array result,
  plus one ``CALL_NS`` per array unpacked or packed.

An operator is emitted as scalar code when its measured scalar cost (after lowering
the graph to SymPy expressions and CSE, without symbolic differentiation) is at
most its vector cost (ties, such as a constant result, go to scalar code).

SymPy is only asked when an estimate made from the graph alone, without SymPy, says
scalar code is plausible and cheap to build (:func:`worth_trying_scalar`): graphs
whose element count exceeds ``SCALAR_LIMIT``, graphs with matrix factorizations, and
graphs whose results, written out as expression trees, would exceed
``EXPRESSION_LIMIT`` nodes (:func:`expression_size`: a loop that reuses its state
doubles or triples the tree at each step) are vector without trying. Scalarizing them
would make the build slow (SymPy's tree walks are exponential in the loop length)
and the file large, and they are never cheaper as scalars. ``emit = "scalar" |
"vector"`` in the config overrides the choice.

Calibration (CPython 3.11, NumPy 2.4, this project's 2-core machine): a NumPy ufunc
call on a small array costs ~0.5-1 us, a Python float operation ~30-50 ns, so
scalar code wins roughly below a dozen or two element operations per equation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen.core.ir import Eqn, Graph, Var
from difgen.primitives.family import size_work

CALL_NS = 700.0
ELEMENT_NS = 1.5
SCALAR_OP_NS = 40.0
ELEMENT_NS_SCALAR = 25.0
SCALAR_LIMIT = 1500
EXPRESSION_LIMIT = 4000
"""Nodes of the largest result element, written out as a tree, that scalar code is
tried for (both backends). SymPy walks expressions as trees, so its steps (lowering,
``count_ops``, ``expand``, ``diff``) cost at least this much per element."""

REDUCING = frozenset(
    {"reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "scatter_sum"}
)
"""Primitives whose output element combines many input elements (the input size
over the output size of them), besides contractions, which say so by their work."""

ACCUMULATING = frozenset({"cumsum", "cumprod"})
"""Primitives whose last output element combines a whole axis of the input."""


def work(graph: Graph) -> int:
    """Elements of work of the graph's equations, as each primitive counts its own
    (products for contractions, n^3 for factorizations)."""
    return sum(eqn.primitive.work(eqn) for eqn in graph.eqns)


def vector_cost(graph: Graph) -> float:
    """Estimated run time (ns) of the graph as vectorized NumPy."""
    calls = sum(1 for e in graph.eqns if e.inputs)
    return calls * CALL_NS + work(graph) * ELEMENT_NS


def scalar_cost(
    operations: int,
    elements_in: int,
    arrays_in: int,
    result_shapes: list[tuple[int, ...]],
) -> float:
    """Estimated run time (ns) of straight-line float code: its operations, the
    ``.tolist()`` unpacking of the arguments it reads and the ``np.array`` packing of
    its array results (float results cost nothing extra)."""
    packed = [int(np.prod(s, dtype=np.int64)) for s in result_shapes if s != ()]
    elements = elements_in + sum(packed)
    calls = arrays_in + len(packed)
    return operations * SCALAR_OP_NS + elements * ELEMENT_NS_SCALAR + calls * CALL_NS


def fan_in(eqn: Eqn) -> int:
    """How many elements of its inputs one output element of ``eqn`` combines, at
    most (1 for elementwise and structural primitives, which move elements)."""
    prim, out = eqn.primitive, max(eqn.out.size, 1)
    largest = max((a.size for a in eqn.inputs), default=1)
    if prim.elementwise:
        return 1
    if prim.name in REDUCING:
        return max(1, -(-largest // out))
    if prim.name in ACCUMULATING:
        axis = eqn.params.as_dict().get("axis")
        shape = eqn.inputs[0].shape
        return int(shape[axis]) if isinstance(axis, int) and shape else largest
    if prim.work is not size_work:  # contractions: work is the sum of products
        return max(1, -(-prim.work(eqn) // out))
    return 1


def expression_size(graph: Graph, cap: int = 10**12) -> int:
    """Nodes of the largest result element written out as an expression tree,
    estimated from the graph alone (no SymPy), in time linear in the graph.

    An element of an equation's output is one node over the trees of the input
    elements it reads (``fan_in`` of each input); shared subexpressions count once
    per use, as they do in the trees SymPy walks. ``cap`` keeps the numbers small:
    the estimate is only compared with limits far below it.
    """
    size: dict[Var, int] = {}

    def of(atom: Any) -> int:
        return size.get(atom, 1) if isinstance(atom, Var) else 1

    for eqn in graph.eqns:
        fan = fan_in(eqn)
        total = 1 + fan * sum(of(a) for a in eqn.inputs)
        size[eqn.out] = min(total, cap)
    return max((of(v) for v in graph.outputs), default=1)


def scalar_reason(graph: Graph) -> str | None:
    """Why scalar code is not even tried for ``graph`` (None: it is worth trying).

    Matrix factorizations are never scalarized: their closed forms (cofactors,
    nested square roots) grow much faster than LAPACK's cost. Large graphs and
    expressions that would be large as trees are never cheaper as scalars and would
    make SymPy slow.
    """
    unscalarizable = sorted(
        {e.primitive.name for e in graph.eqns if not e.primitive.scalarizable}
    )
    if unscalarizable:
        return f"it uses {', '.join(unscalarizable)}"
    elements = work(graph)
    if elements > SCALAR_LIMIT:
        return f"{elements} elements of work (limit {SCALAR_LIMIT})"
    nodes = expression_size(graph)
    if nodes > EXPRESSION_LIMIT:
        return (
            f"a result would be an expression of about {nodes:.3g} nodes "
            f"(limit {EXPRESSION_LIMIT})"
        )
    return None


def worth_trying_scalar(graph: Graph) -> bool:
    """Whether scalarizing is at all plausible (and cheap enough to attempt)."""
    return scalar_reason(graph) is None
