"""The checks a function performs on its run-time index arguments, kept in every
operator.

``x[idx]`` with an int64 context ``idx`` raises ``IndexError`` in the user's
function when an index is out of bounds. An operator whose graph still reads
``idx`` raises as well (NumPy indexes in the generated code), but derivation can
drop the gather: the hessian of ``np.sum(x[idx])`` is zero and never reads ``idx``,
so it returned zeros where the function raises. A run-time index read by the
function is a check the function performs, so it is recorded here from the traced
graph, with its bound, and every operator of the module performs it at entry,
whether or not its graph reads the index (:func:`difgen.targets.signatures.index_checks`).

A check is recorded for each run-time index operand of the traced function's own
equations (not those inside a branch or a loop body, which run only when taken)
that is a context, or a static selection of one (``edges[:, 0]``, ``idx.T``,
``idx.reshape(...)``), or integer arithmetic with a constant on either
(``idx + 1``, ``2 * idx - 1``, ``idx % n``): the elements of the context it reads
are found by applying the selections to the context's flat positions, and the
check applies the arithmetic to them, in the function's order, before comparing
with the bound. An index computed otherwise (from two contexts, from ``x``:
``argmax``) is checked only by the operators whose graph computes and reads it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from difgen.core.ir import Eqn, Graph, Var
from difgen.primitives.runtime import index_reads


@dataclass(frozen=True)
class IndexCheck:
    """Every element of ``context`` at ``positions`` (flat positions, sorted;
    ``None``: all of it) must be a valid index of an axis of length ``size``
    (``-size <= i < size``); the function indexes ``axis`` with them."""

    context: str
    positions: tuple[int, ...] | None
    axis: int
    size: int
    arithmetic: tuple[tuple[str, int, bool], ...] = ()
    """The integer arithmetic from the context's elements to the index, in order:
    ``int_arith``'s (op, constant, swap) (``swap``: the constant on the left)."""


_ENFORCED: contextvars.ContextVar[tuple[IndexCheck, ...]] = contextvars.ContextVar(
    "difgen_index_checks", default=()
)


@contextlib.contextmanager
def enforced(checks: Sequence[IndexCheck]) -> Iterator[None]:
    """While the module's operators are printed: the run-time index checks every
    Python operator starts with (:func:`enforced_checks`)."""
    token = _ENFORCED.set(tuple(checks))
    try:
        yield
    finally:
        _ENFORCED.reset(token)


def enforced_checks() -> tuple[IndexCheck, ...]:
    """The module's run-time index checks (:func:`enforced`), which a compiled
    operator must enforce as the Python operator does, or stay in Python."""
    return _ENFORCED.get()


def _source(
    operand: Var, producer: dict[Var, Eqn], contexts: dict[Var, str]
) -> tuple[Var, list[Eqn]] | None:
    """The context ``operand`` is a static selection of, and the selections from
    it (first applied first); None when it is computed otherwise."""
    chain: list[Eqn] = []
    while operand not in contexts:
        eqn = producer.get(operand)
        if eqn is None or len(eqn.inputs) != 1:
            return None
        if not (eqn.primitive.view or _scalar_arithmetic(eqn)):
            return None
        source = eqn.inputs[0]
        if not isinstance(source, Var):
            return None
        chain.append(eqn)
        operand = source
    return operand, chain[::-1]


def _scalar_arithmetic(eqn: Eqn) -> bool:
    """Integer arithmetic of one operand with one constant number: elementwise, so
    it commutes with the selections (a constant array broadcasts: not this)."""
    if eqn.primitive.name != "int_arith":
        return False
    return np.ndim(eqn.params.as_dict()["const"]) == 0


def _arithmetic(chain: list[Eqn]) -> tuple[tuple[str, int, bool], ...]:
    """The chain's integer arithmetic, in order, as (op, constant, swap)."""
    ops = []
    for eqn in chain:
        if _scalar_arithmetic(eqn):
            params = eqn.params.as_dict()
            ops.append((str(params["op"]), int(params["const"]), bool(params["swap"])))
    return tuple(ops)


def _positions(shape: tuple[int, ...], chain: list[Eqn]) -> tuple[int, ...] | None:
    """The flat positions of a context of ``shape`` that the selections read."""
    size = int(np.prod(shape, dtype=np.int64))
    read = np.arange(size, dtype=np.int64).reshape(shape)
    for eqn in chain:
        if _scalar_arithmetic(eqn):
            continue  # changes the values, not which elements are read
        read = np.asarray(eqn.primitive.impl(read, **eqn.params.as_dict()))
    positions = np.unique(read)
    if positions.size == size:
        return None
    return tuple(int(p) for p in positions)


def index_checks(graph: Graph, names: Sequence[str]) -> tuple[IndexCheck, ...]:
    """The checks of the traced function ``graph`` (inputs ``x, *contexts``, the
    contexts named ``names``), in the order the function performs them, each once."""
    contexts = {
        var: name for var, name in zip(graph.inputs[1:], names) if var.dtype == "int64"
    }
    producer = {eqn.out: eqn for eqn in graph.eqns}
    checks: dict[IndexCheck, None] = {}
    for eqn in graph.eqns:
        for read in index_reads(eqn):
            if not isinstance(read.operand, Var) or read.operand.size == 0:
                continue
            found = _source(read.operand, producer, contexts)
            if found is None:
                continue
            context, chain = found
            positions = _positions(context.shape, chain)
            check = IndexCheck(
                contexts[context], positions, read.axis, read.size, _arithmetic(chain)
            )
            checks.setdefault(check, None)
    return tuple(checks)
