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

The prices are measured, not guessed: ``python -m benchmarks.calibration`` times
each figure behind them on the machine at hand (a NumPy call on small arrays, an
element of a ufunc, a Python float operation, an element unpacked or packed) and
the number of element operations per equation below which scalar code wins, and
names the constant each figure sets. Retune the constants from its table.
"""

from __future__ import annotations

import numpy as np

from difgen.core.ir import Graph
from difgen.derive.sizes import EXPRESSION_LIMIT, expression_size

CALL_NS = 700.0
"""The fixed price (ns) of one NumPy call: each equation of vector code, and each
array scalar code unpacks or packs (benchmarks.calibration.ufunc_call_ns)."""
ELEMENT_NS = 1.5
"""The price (ns) of an element of work in vector code
(benchmarks.calibration.ufunc_element_ns)."""
SCALAR_OP_NS = 40.0
"""The price (ns) of one Python float operation in scalar code
(benchmarks.calibration.float_op_ns)."""
ELEMENT_NS_SCALAR = 25.0
"""The price (ns) of an element scalar code unpacks from an argument or packs into
an array result (benchmarks.calibration.unpack_element_ns, pack_element_ns)."""
SCALAR_LIMIT = 1500


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
