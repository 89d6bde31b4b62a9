"""The SymPy backend: Graph -> SymPy expressions -> diff -> simplify -> cse -> code.

Every array is scalarized: the input, contexts and seeds are unpacked into one
symbol per element, each primitive is evaluated on object arrays of expressions
(``Primitive.lower_sympy``), results are differentiated symbolically, each result
expression takes the cheapest of its plain and expanded forms, and one ``cse`` over all
results of an operator gives straight-line code on Python floats. Best for small
functions, where it reaches the hand-written floor.

Every symbolic step runs under a size budget, measured before the step (SymPy walks
expressions as trees, so a step's cost follows the tree, not the graph): the graph
is not lowered when its results would be large trees (a loop that reuses its
state), its max/min reductions long or its matrix factorizations larger than 3 x 3
(:func:`symbolic_reason`, from the graph alone); lowering stops when an element
grows past the limit; an operator's derivatives are checked as a whole
(:func:`check_results`); and ``simplest`` counts and expands only small
expressions whose expansion is small (:func:`expanded_terms`). Over a budget,
:class:`ExpressionTooLarge` is raised and the pipeline builds the module from the
graph instead (vector code), saying so. Budgets count nodes, never seconds, so the
same config always gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from difgen import naming
from difgen.ad.control import uses_control_flow
from difgen.config import ModuleSpec
from difgen.core.ir import Graph
from difgen.derive.lowering import (
    EXPRESSION_LIMIT,
    ExpressionTooLarge,
    Sizes,
    SparseResult,
    expression_size,
    fan_in,
    lower,
    simplest_all,
    symbols,
)
from difgen.errors import ConfigError
from difgen.operators import (
    OPERATORS,
    Operator,
    is_sparse,
    result_shape,
    seed_shape,
    sparse_shape,
)
from difgen.primitives.linalg import TRACE_ONLY

RESULT_LIMIT = 40_000
"""Nodes, as trees, of all the derivative expressions of one operator: beyond it,
``simplest``, ``cse`` and printing take minutes and the module hundreds of KB
(gradients of a max over many elements, hessians of long expressions)."""

FACTORIZATION_LIMIT = 3
"""Largest n of an n x n matrix factorization (inv, det, solve, cholesky) written out
in closed form: cofactor expansions grow factorially, and a 6 x 6 inverse does not
finish in minutes."""


EXTREMUM_LIMIT = 16
"""Most elements a max/min reduction may take on the sympy backend: the derivative
with respect to each element compares it with the extremum of all the others, so
the derivative expressions grow with the square of the element count."""


class SymbolicFunction:
    """The traced function as expressions, with derivatives computed on demand."""

    def __init__(self, spec: ModuleSpec, graph: Graph) -> None:
        self.spec = spec
        _refuse_control_flow(spec, graph)
        self.xs = tuple(spec.input.shape)
        self.x = symbols(naming.INPUT, self.xs)
        self.contexts = [symbols(c.name, tuple(c.shape)) for c in spec.contexts]
        (y,) = lower(graph, [self.x, *self.contexts])
        self.y = simplest_all(y)  # to differentiate
        (self.value,) = lower(graph, [self.x, *self.contexts], exact=True)
        self.ys = tuple(graph.outputs[0].shape)
        self._jac: np.ndarray | None = None

    @property
    def flat_x(self) -> list[sp.Symbol]:
        return list(self.x.ravel())

    def jacobian(self) -> np.ndarray:
        """J[i, j] = d y_i / d x_j over the flat input and output."""
        if self._jac is None:
            self._jac = _derivatives(self.y.ravel(), self.flat_x)
        return self._jac

    def gradient(self) -> np.ndarray:
        return self.jacobian()[0].reshape(self.xs)

    def hessian(self) -> np.ndarray:
        return _derivatives(self.jacobian()[0], self.flat_x).reshape(self.xs + self.xs)

    def result(self, kind: str, seeds: dict[str, np.ndarray]) -> np.ndarray:
        """Expressions of one result kind, shaped as the operator table says."""
        batch = self.spec.batch
        # the Jacobian is computed once (cached) and only for derivative kinds
        if kind == "value":
            out = self.value
        elif kind == "jvp":
            dx = _rows(seeds["dx"], self.xs)
            out = np.array([self.jacobian() @ d for d in dx], dtype=object)
        elif kind == "vjp":
            dy = _rows(seeds["dy"], self.ys)
            out = np.array([d @ self.jacobian() for d in dy], dtype=object)
        elif kind == "derivative":
            out = self.jacobian()[:, 0]
        elif kind == "second_derivative":
            out = _derivatives(self.jacobian()[:, 0], self.flat_x[:1])[:, 0]
        elif kind == "gradient":
            out = self.gradient()
        elif kind == "jacobian":
            out = self.jacobian()
        elif kind == "hessian":
            out = self.hessian()
        elif kind == "hvp":
            out = self.hessian().reshape(self.x.size, self.x.size) @ seeds["v"].ravel()
        else:
            raise ValueError(f"unknown result kind {kind!r}")
        shape = result_shape(kind, self.xs, self.ys, batch)
        flat = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=object)
        flat[:] = list(np.asarray(out, dtype=object).ravel())
        return flat.reshape(shape)


def _derivatives(
    exprs: Any, xs: list[sp.Symbol], limit: int = RESULT_LIMIT
) -> np.ndarray:
    """``D[i, j] = d exprs_i / d xs_j``, stopped by :class:`ExpressionTooLarge` as
    soon as the entries computed so far exceed ``limit`` nodes.

    Every operator built on these entries (a jacobian, a product with seeds, an hvp
    from the hessian) is at least as large, so :func:`check_results` would refuse it
    anyway; checking entry by entry stops SymPy's ``diff`` after the first entries
    instead of after all of them (a 3 x 3 softmax cross entropy's hessian: 81
    entries of about 6,600 nodes, 37 s of ``diff`` before the budget said no).
    """
    sizes = Sizes()
    total = 0
    rows = []
    for e in exprs:
        row = []
        for x in xs:
            d = _evaluated(sp.diff(e, x))
            total += sizes(d)
            if total > limit:
                raise ExpressionTooLarge(
                    f"its derivative expressions exceed {limit} nodes"
                )
            row.append(d)
        rows.append(row)
    return np.array(rows, dtype=object).reshape(len(rows), len(xs))


def _evaluated(d: Any) -> Any:
    """``d`` without unevaluated ``Derivative`` objects, which no printer writes.

    SymPy keeps ``Derivative(sign(u), x)`` when it cannot prove ``u`` real (``u =
    x0 / x1`` is ``zoo`` at ``x1 = 0``): sign is piecewise constant, its derivative
    0, as the trace backend's rule and the printers' ``DiracDelta`` say. Anything
    else SymPy leaves unevaluated, or writes through ``re``, ``im`` or ``arg`` (the
    derivative of ``Abs`` of an expression it cannot prove real, such as
    ``arccos(x)``), raises :class:`ExpressionTooLarge`: the module is built from
    the graph instead, like any expression over budget.
    """
    if not d.has(sp.Derivative, sp.re, sp.im, sp.arg):
        return d
    d = d.replace(
        lambda n: isinstance(n, sp.Derivative) and isinstance(n.expr, sp.sign),
        lambda n: sp.S.Zero,
    )
    left = next(iter(d.atoms(sp.Derivative, sp.re, sp.im, sp.arg)), None)
    if left is not None:
        raise ExpressionTooLarge(
            f"SymPy cannot differentiate it in real terms ({left.func})"
        )
    return d


def _refuse_control_flow(spec: ModuleSpec, graph: Graph) -> None:
    """A branch on a traced value has no closed SymPy form difgen can emit exactly
    (a Piecewise would evaluate both sides in the value's cse): refused here."""
    where = uses_control_flow(graph)
    if where is not None:
        raise ConfigError(
            spec.config_path,
            spec.line_of("backend"),
            f"the function branches on a traced value at {where}, which the sympy "
            'backend cannot emit; use backend = "trace" (it emits the branch as '
            "a Python if)",
        )


def _rows(seed: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A (batched) seed of ``shape`` as rows of its flat elements (also when the
    shape has no elements, where ``reshape(-1, 0)`` cannot infer the row count)."""
    lead = seed.shape[: seed.ndim - len(shape)]
    return seed.reshape(int(np.prod(lead, dtype=np.int64)), int(np.prod(shape)))


def _seed_symbols(
    seed: str, xs: tuple[int, ...], ys: tuple[int, ...], batch: int
) -> np.ndarray:
    shape = seed_shape(seed, xs, ys, 1)
    if batch == 1 or seed == "v":
        return symbols(seed, shape)
    return np.stack([symbols(seed, shape, b) for b in range(batch)])


def refuse_decompositions(graph: Graph) -> None:
    """Raise the declared refusal of a decomposition (SVD, eigh, pinv) before any
    budget: whatever its size it has no symbolic form, and the user chose sympy."""
    for eqn in graph.eqns:
        if eqn.primitive.name in TRACE_ONLY:
            eqn.primitive.sympy()


def symbolic_reason(graph: Graph) -> str | None:
    """Why the graph is too large to write out as SymPy expressions (None: it is
    not), judged from the graph alone, before SymPy starts."""
    for eqn in graph.eqns:
        if not eqn.primitive.scalarizable and eqn.inputs:
            n = eqn.inputs[0].shape[-1] if eqn.inputs[0].shape else 1
            if n > FACTORIZATION_LIMIT:
                return (
                    f"{eqn.primitive.name} of a {n} x {n} matrix (closed forms "
                    f"only up to {FACTORIZATION_LIMIT} x {FACTORIZATION_LIMIT})"
                )
        if eqn.primitive.name in ("reduce_max", "reduce_min"):
            fan = fan_in(eqn)
            if fan > EXTREMUM_LIMIT:
                return (
                    f"{eqn.primitive.name} over {fan} elements (its derivative "
                    f"grows with their square; limit {EXTREMUM_LIMIT})"
                )
    nodes = expression_size(graph)
    if nodes > EXPRESSION_LIMIT:
        return (
            f"the function's result would be an expression of about {nodes:.3g} "
            f"nodes (limit {EXPRESSION_LIMIT})"
        )
    return None


def check_results(results: list[np.ndarray], limit: int = RESULT_LIMIT) -> None:
    """Raise :class:`ExpressionTooLarge` when an operator's derivative expressions
    together exceed ``limit`` nodes (measured in time linear in their DAG)."""
    sizes = Sizes()
    total = 0
    for result in results:
        for expr in result.flat:
            total += sizes(expr)
            if total > limit:
                raise ExpressionTooLarge(
                    f"its derivative expressions exceed {limit} nodes"
                )


@dataclass(frozen=True)
class SymbolicOperator:
    """One operator derived symbolically: its arguments as object arrays of
    symbols (by name, and in call order) and its results as expressions (object
    arrays, or :class:`SparseResult` for a CSR result)."""

    op: Operator
    arrays: dict[str, np.ndarray]
    order: tuple[str, ...]
    results: tuple[Any, ...]


@dataclass(frozen=True)
class SymbolicDerivation:
    """The sympy backend's derivation of a module: ``f`` and every requested
    operator, in table order, and the traced function's output shape."""

    operators: tuple[SymbolicOperator, ...]
    output_shape: tuple[int, ...]


def derive(spec: ModuleSpec, graph: Graph) -> SymbolicDerivation:
    """Every requested operator (and ``f``) as SymPy expressions.

    Raises :class:`ExpressionTooLarge` when the graph (:func:`symbolic_reason`),
    an expression while it is lowered, or an operator's derivatives
    (:func:`check_results`) go over their size budgets: the caller then derives
    the module from the graph instead (:func:`difgen.pipeline.derive`).
    A decomposition with no symbolic form is a ConfigError at ``backend``.
    """
    _refuse_control_flow(spec, graph)  # before budgets: no size makes it symbolic
    try:
        refuse_decompositions(graph)
        reason = symbolic_reason(graph)
        if reason is not None:
            raise ExpressionTooLarge(reason)
        fn = SymbolicFunction(spec, graph)
    except NotImplementedError as exc:  # a decomposition has no symbolic form
        raise ConfigError(
            spec.config_path,
            spec.line_of("backend"),
            f'backend = "sympy" cannot lower module {spec.name!r}: {exc}; '
            'use backend = "trace"',
        ) from None
    batch = spec.batch
    operators = []
    for name in ("f", *spec.operators):
        op = OPERATORS[name]
        seeds = {s: _seed_symbols(s, fn.xs, fn.ys, batch) for s in op.seeds}
        raw = [fn.result(k, seeds) for k in op.results]
        check_results([r for kind, r in zip(op.results, raw) if kind != "value"])
        dense = [
            r if kind == "value" else simplest_all(r)
            for kind, r in zip(op.results, raw)
        ]
        results = tuple(
            (
                SparseResult.from_dense(r, sparse_shape(kind, fn.xs, fn.ys))
                if is_sparse(kind, spec)
                else r
            )
            for kind, r in zip(op.results, dense)
        )
        arrays = {
            naming.INPUT: fn.x,
            **dict(zip(op.seeds, seeds.values())),
            **{c.name: s for c, s in zip(spec.contexts, fn.contexts)},
        }
        order = (naming.INPUT, *op.seeds, *(c.name for c in spec.contexts))
        operators.append(SymbolicOperator(op, arrays, order, results))
    return SymbolicDerivation(tuple(operators), fn.ys)
